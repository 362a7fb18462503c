//! What the application layer tells the person while an operation goes on, without ending it:
//! typed, so each front end words it (a terminal line, a toast, a chat message).

use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "notice", rename_all = "snake_case")]
pub enum Notice {
    /// A policy file loaded with a warning.
    PolicyWarning { text: String },
    /// Delivery to a sink failed after a command; the records stay in the outbox.
    DeliveryFailed { sink: String, error: String },
    /// New effects wait until a sink catches up with the bounded outbox.
    OutboxWaiting {
        pending: u64,
        sink: String,
        max: u64,
        why: String,
    },
    /// Records a sink will never get (`on_full = drop`); the run records the gap.
    OutboxDropped {
        from: u64,
        to: u64,
        sink: String,
        max: u64,
    },
    /// This process takes over a run whose lease holder on this host is gone.
    TakingOver { run: String, from: String },
    /// A configured MCP server offers no tools to this run: it could not be started, reached
    /// or listed (`code`, `error` say why).
    McpUnavailable { code: String, error: String },
    /// The skill catalog could not be read (its install ledger or trust list): the run is
    /// offered no skills.
    SkillsUnavailable { code: String, error: String },
    /// Baseline controls strict mode would require are missing; told once when a run or a
    /// front end starts (strict mode refuses instead).
    BaselineGaps { gaps: Vec<crate::strict::Gap> },
    /// A run under an agent profile ended and emitted its state delta (OAP reconcile): where
    /// it is, whether it was applied (`writeback: auto`, the new revision) and the proposals
    /// queued for a person; `error` when it could not be produced or applied.
    ProfileDelta {
        run: String,
        profile: String,
        path: Option<std::path::PathBuf>,
        applied: Option<u64>,
        queued: Vec<String>,
        error: Option<String>,
    },
    /// Proposal files queued in `dir` before proposals became requests: not requests, and
    /// nothing applies them; they were not migrated.
    LegacyProposals {
        dir: std::path::PathBuf,
        files: usize,
    },
}

/// Where notices go: the front end's sink for them.
pub trait Notices: Sync {
    fn notice(&self, notice: Notice);
}

/// Drops every notice (for callers with nobody to tell).
#[derive(Debug, Default, Clone, Copy)]
pub struct Quiet;

impl Notices for Quiet {
    fn notice(&self, _notice: Notice) {}
}
