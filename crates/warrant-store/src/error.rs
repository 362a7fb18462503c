use thiserror::Error;
use warrant_core::Coded;

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("cannot open the store at {path}: {message}")]
    Open { path: String, message: String },
    /// There is no store at `path` (the installation was never created there).
    #[error("cannot open the store at {path}: no store there")]
    Missing { path: String },
    #[error(
        "the store at {path} is not a Warrant store or is corrupt ({message}); nothing was changed. Move it aside"
    )]
    Corrupt { path: String, message: String },
    #[error(
        "the store at {path} has schema version {found}, newer than this warrant supports ({supported}); upgrade warrant. Nothing was changed"
    )]
    NewerSchema {
        path: String,
        found: u32,
        supported: u32,
    },
    #[error("run {0} does not exist")]
    UnknownRun(String),
    #[error("run {run} already exists")]
    RunExists { run: String },
    #[error(
        "run {run} moved on concurrently (expected next event {expected}, found {found}); nothing was written, reload and retry"
    )]
    Conflict {
        run: String,
        expected: u64,
        found: u64,
    },
    #[error("sealing the audit record failed: {0}")]
    Seal(String),
    #[error("store query failed: {0}")]
    Query(String),
    #[error(
        "run {run} is being driven by {holder} (lease valid until {until}); wait for it, or for the lease to expire"
    )]
    Leased {
        run: String,
        holder: String,
        until: String,
    },
    #[error(
        "the lease on run {run} was superseded (token {presented}, current {current}): another worker took the run over; nothing was written and the refusal was recorded"
    )]
    Fenced {
        run: String,
        presented: u64,
        current: u64,
    },
    #[error("run {run} has ended ({status}); it cannot be leased")]
    Final { run: String, status: String },
    #[error("the store at {url} is unreachable after {attempts} attempts: {message}")]
    Unreachable {
        url: String,
        attempts: u32,
        message: String,
    },
    /// The connection went away during a statement (a server restart, a cut): what the
    /// statement did is unknown (at `COMMIT`, whether the transaction committed), so nothing
    /// held in memory is trusted; the store itself is the record to read again.
    #[error(
        "the connection to the store at {url} was lost during a statement ({message}); whether it took effect is unknown: the store is read again before anything continues"
    )]
    Interrupted { url: String, message: String },
    /// An append that must not commit once the run's next effect is stopped found a kill
    /// switch covering the run, or a cancellation of it or an ancestor, in its own transaction
    /// ([`crate::EventStore::append_unless_stopped`]). The ring reads what stopped it and
    /// stops the run.
    #[error(
        "run {run} was stopped (a kill switch or a cancellation) before its append committed; nothing was written"
    )]
    Stopped { run: String },
}

impl StoreError {
    /// Whether the store may answer if asked again later (it was unreachable, or the
    /// connection dropped), as opposed to a refusal that asking again repeats.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Unreachable { .. } | Self::Interrupted { .. })
    }
}

impl Coded for StoreError {
    fn code(&self) -> &'static str {
        match self {
            Self::Open { .. } | Self::Missing { .. } => "W-STORE-001",
            Self::Corrupt { .. } => "W-STORE-002",
            Self::NewerSchema { .. } => "W-STORE-003",
            Self::UnknownRun(_) => "W-STORE-004",
            Self::RunExists { .. } => "W-STORE-005",
            Self::Conflict { .. } => "W-STORE-006",
            Self::Seal(_) => "W-STORE-007",
            Self::Query(_) => "W-STORE-008",
            Self::Leased { .. } => "W-STORE-009",
            Self::Fenced { .. } => "W-STORE-010",
            Self::Final { .. } => "W-STORE-011",
            Self::Unreachable { .. } => "W-STORE-012",
            Self::Interrupted { .. } => "W-STORE-020",
            Self::Stopped { .. } => "W-STORE-022",
        }
    }

    fn hint(&self) -> Option<warrant_core::Hint> {
        use warrant_core::Hint;
        match self {
            Self::Missing { .. } => Some(Hint::Init),
            Self::Corrupt { .. } => Some(Hint::InitAnew),
            Self::Open { .. }
            | Self::NewerSchema { .. }
            | Self::UnknownRun(_)
            | Self::RunExists { .. }
            | Self::Conflict { .. }
            | Self::Seal(_)
            | Self::Query(_)
            | Self::Leased { .. }
            | Self::Fenced { .. }
            | Self::Final { .. }
            | Self::Unreachable { .. }
            | Self::Interrupted { .. }
            | Self::Stopped { .. } => None,
        }
    }
}
