//! Agent Skills (SKILL.md, the open spec at agentskills.io) for Warrant: strict validation of
//! a skill directory ([`skill`]), discovery in the project and user roots with trust and
//! install state ([`catalog`]), reviewed installs ([`install`]) and the `activate_skill` tool
//! ([`tool`]). A skill is instructions the agent will follow, closer to code than to
//! documentation: nothing in it grants anything, and what is loaded is what a person approved
//! (user skills, by digest) or a workspace the person trusts holds (project skills).

pub mod catalog;
mod error;
pub mod install;
pub mod skill;
pub mod tool;

pub use catalog::{Catalog, Entry, Status};
pub use error::{Problem, SkillError};
pub use skill::{SKILL_FILE, Skill};
