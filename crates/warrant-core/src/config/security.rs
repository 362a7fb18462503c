//! `[security]`: strict mode. Settable in every layer; the managed layer may lock its value
//! (`locked = true`), and then no other layer changes it.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecurityConfig {
    /// Refuse to start a run, a worker, a chat or `mcp serve` while a baseline control is
    /// missing, and turn on workload-independent limits (see `warrant_host::strict`).
    pub strict: Option<bool>,
    /// Managed layer only: its `strict` holds whatever the other layers say.
    #[serde(default)]
    pub locked: bool,
}
