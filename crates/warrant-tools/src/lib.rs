//! The tools a run offers: the [`Toolbox`] that composes tool sources behind the run's menu and
//! redaction, and the built-in tools of the contract (`read_file`, `write_file`, `list_dir`,
//! `search_files`, `delete_path`, `run_command`). Each validates its input against its JSON Schema, normalizes
//! it into actions with canonical paths, says what a person is shown, and runs executors with
//! the `Authorized` actions the ring hands it. No tool touches the world any other way.

mod builtin;
mod edits;
mod git;
mod guarded;
mod requests;
mod secrets;
mod spawn;
mod test_runner;
mod toolbox;
mod web;

pub use builtin::{confinement_words, normalize_path, preview_write};
pub use guarded::{MenuError, REDACTED_KEY, Redacting, redact_result, resolve_menu};
pub use spawn::child_run_id;
pub use toolbox::{Builtin, Controls, ToolSource, Toolbox, ToolboxError};
