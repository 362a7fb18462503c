//! Why a policy set could not be loaded, or a request could not be evaluated. Loading fails
//! closed: one bad policy stops the whole set, and the error names the file, the policy and
//! Cedar's own message so the author can fix it without guessing.

use thiserror::Error;
use warrant_core::Coded;
use warrant_core::config::LayerKind;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PolicyError {
    #[error("{layer} policy file {file}: Cedar could not parse it: {message}", layer = layer.as_str())]
    Parse {
        layer: LayerKind,
        file: String,
        message: String,
    },

    #[error(
        "{layer} policy file {file}: policy #{index} at line {line} (`{start}`) has no @id(\"...\") annotation; \
         every policy needs a stable id so decisions and audit records can name it",
        layer = layer.as_str()
    )]
    MissingId {
        layer: LayerKind,
        file: String,
        /// 1-based position of the policy in its file.
        index: usize,
        /// 1-based line where the policy starts.
        line: usize,
        /// The policy's first line, to find it.
        start: String,
    },

    #[error(
        "policy id `{id}` is defined twice: in {first_file} and in {second_file}; ids must be unique within a layer"
    )]
    DuplicateId {
        id: String,
        first_file: String,
        second_file: String,
    },

    #[error(
        "policy file {file}: policy `{id}` does not validate against the Warrant schema: {message}"
    )]
    Validation {
        file: String,
        id: String,
        message: String,
    },

    #[error(
        "policy file {file}: policy `{id}` names an action Warrant does not know: {message}; \
         actions are the verbs fs.read, fs.write, shell.exec, … written Warrant::Action::\"fs.read\""
    )]
    UnknownAction {
        file: String,
        id: String,
        message: String,
    },

    #[error("policy file {file}: policy `{id}` has @ask(\"{value}\"): {problem}")]
    BadAsk {
        file: String,
        id: String,
        value: String,
        problem: String,
    },

    #[error("evaluating the request failed: {message}")]
    Evaluation { message: String },

    #[error("Warrant's built-in Cedar schema is invalid (a bug in warrant-policy): {message}")]
    Schema { message: String },
}

impl Coded for PolicyError {
    fn code(&self) -> &'static str {
        match self {
            Self::Parse { .. } => "W-POLICY-001",
            Self::MissingId { .. } => "W-POLICY-002",
            Self::DuplicateId { .. } => "W-POLICY-003",
            Self::Validation { .. } => "W-POLICY-004",
            Self::UnknownAction { .. } => "W-POLICY-005",
            Self::BadAsk { .. } => "W-POLICY-006",
            Self::Evaluation { .. } => "W-POLICY-007",
            Self::Schema { .. } => "W-POLICY-008",
        }
    }
}
