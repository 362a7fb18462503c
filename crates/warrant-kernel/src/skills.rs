//! The Agent Skills a run was offered, pinned in `run_started` when it starts: each skill's
//! name, description, where it lives and the digest of its files then. The catalog the model is
//! shown and the skills `activate_skill` can load come from this pin alone, so a resumed run is
//! offered what it started with, and a skill whose files changed since cannot be activated.
//! Discovering and validating skills is `warrant-skills`' job; nothing here grants anything.

use serde::{Deserialize, Serialize};

/// Where a skill was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SkillScope {
    /// The workspace's `.agents/skills/` or `.claude/skills/` (only in a trusted workspace).
    Project,
    /// Installed by a person into the user configuration directory's `skills/`.
    User,
}

impl SkillScope {
    pub fn label(self) -> &'static str {
        match self {
            Self::Project => "project",
            Self::User => "user",
        }
    }
}

/// One skill of a run's catalog.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillPin {
    pub name: String,
    /// Written by whoever wrote the skill: shown to the model fenced, as untrusted text.
    pub description: String,
    pub scope: SkillScope,
    /// The skill's directory, canonical.
    pub dir: String,
    /// `sha256:<hex>` over the canonical JSON of every file's path and content digest.
    pub digest: String,
    /// `allowed-tools` as the skill wrote it: a request, never a grant (policy decides every
    /// call whatever it says).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_tools: Vec<String>,
    /// `metadata.warrant-ceiling`: the worst risk class the run may reach once the skill is
    /// activated (from then on; a tighter one narrows the run's ceiling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling: Option<warrant_core::RiskClass>,
}

/// The key of a skill's `metadata` that declares its ceiling.
pub const CEILING_KEY: &str = "warrant-ceiling";
