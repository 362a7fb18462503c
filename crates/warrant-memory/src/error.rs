use thiserror::Error;
use warrant_core::Coded;

/// What went wrong with memory. Never holds an entry's text or a secret.
#[derive(Debug, Error)]
pub enum MemoryError {
    #[error("the memory database {path} cannot be opened: {message}")]
    Open { path: String, message: String },
    #[error("the memory database failed: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("no memory entry `{0}`")]
    UnknownEntry(String),
    #[error("no draft `{0}`")]
    UnknownDraft(String),
    #[error("draft `{id}` is {status}, not open: it was decided already")]
    DraftDecided { id: String, status: String },
    #[error(
        "draft `{id}` is not what was reviewed: its digest is now {now}, the review saw {seen}; show it again and review what it says now"
    )]
    DraftChanged {
        id: String,
        now: String,
        seen: String,
    },
    #[error("{0}")]
    Invalid(String),
    #[error("shared memory failed: {0}")]
    Shared(String),
}

impl Coded for MemoryError {
    fn code(&self) -> &'static str {
        match self {
            Self::Open { .. } => "W-MEMORY-001",
            Self::Sql(_) => "W-MEMORY-002",
            Self::UnknownEntry(_) => "W-MEMORY-003",
            Self::UnknownDraft(_) => "W-MEMORY-004",
            Self::DraftDecided { .. } => "W-MEMORY-005",
            Self::DraftChanged { .. } => "W-MEMORY-006",
            Self::Invalid(_) => "W-MEMORY-007",
            Self::Shared(_) => "W-MEMORY-018",
        }
    }
}
