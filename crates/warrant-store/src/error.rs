use thiserror::Error;
use warrant_core::Coded;

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("cannot open the store at {path}: {message}")]
    Open { path: String, message: String },
    #[error(
        "the store at {path} is not a Warrant store or is corrupt ({message}); nothing was changed. Move it aside and run `warrant init` to start a new one"
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
}

impl Coded for StoreError {
    fn code(&self) -> &'static str {
        match self {
            Self::Open { .. } => "W-STORE-001",
            Self::Corrupt { .. } => "W-STORE-002",
            Self::NewerSchema { .. } => "W-STORE-003",
            Self::UnknownRun(_) => "W-STORE-004",
            Self::RunExists { .. } => "W-STORE-005",
            Self::Conflict { .. } => "W-STORE-006",
            Self::Seal(_) => "W-STORE-007",
            Self::Query(_) => "W-STORE-008",
        }
    }
}
