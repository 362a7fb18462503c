//! The artifact room's errors, each with a stable `W-ARTIFACT-NNN` code.

use thiserror::Error;
use warrant_core::Coded;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ArtifactError {
    #[error("{0}")]
    Invalid(String),
    #[error(
        "{at}: row {row} has {cells} cells but the header has {header}; every row of a table needs the header's width"
    )]
    Ragged {
        at: String,
        row: usize,
        cells: usize,
        header: usize,
    },
    #[error("{0}")]
    TooLarge(String),
    #[error(
        "the artifact's content holds what looks like a secret ({rules}); it was not generated. Use a secret handle, or leave the value out"
    )]
    Secret { rules: String },
    #[error("the artifact could not be generated: {0}")]
    Generate(String),
    #[error("{tool} writes {expected} files; `{path}` has another extension")]
    Extension {
        tool: &'static str,
        expected: &'static str,
        path: String,
    },
    #[error(
        "the run has seen untrusted content since this artifact was decided as made from trusted input; it was not written"
    )]
    TaintChanged,
    #[error("the artifact could not be signed: {0}")]
    Sign(String),
    #[error("no provenance beside {path}: {reason}")]
    NoProvenance { path: String, reason: String },
}

impl Coded for ArtifactError {
    fn code(&self) -> &'static str {
        match self {
            Self::Invalid(_) => "W-ARTIFACT-001",
            Self::Ragged { .. } => "W-ARTIFACT-002",
            Self::TooLarge(_) => "W-ARTIFACT-003",
            Self::Secret { .. } => "W-ARTIFACT-004",
            Self::Generate(_) => "W-ARTIFACT-005",
            Self::Extension { .. } => "W-ARTIFACT-006",
            Self::TaintChanged => "W-ARTIFACT-007",
            Self::Sign(_) => "W-ARTIFACT-008",
            Self::NoProvenance { .. } => "W-ARTIFACT-009",
        }
    }
}
