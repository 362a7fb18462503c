//! Errors of a model call at run time, each with a stable `W-MODEL-…` code.
//! Messages name the endpoint, the model and the environment variable that holds a key, and
//! never a key itself: providers scrub it from anything a server echoes back.

use std::time::Duration;

use thiserror::Error;
use warrant_core::Coded;

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ModelError {
    #[error(
        "could not connect to the model endpoint {base_url}: {message}; check the URL (the provider's base_url setting or its *_BASE_URL variable) and that the server is running"
    )]
    Connection { base_url: String, message: String },
    #[error(
        "the model endpoint {base_url} did not answer within {}s; raise the provider's timeout_ms setting or try again",
        .after.as_secs_f64()
    )]
    Timeout { base_url: String, after: Duration },
    #[error(
        "the model endpoint {base_url} refused the API key (HTTP {status}): {message}; check the key in {}",
        key_source(.key_env)
    )]
    Authentication {
        base_url: String,
        status: u16,
        key_env: String,
        message: String,
    },
    #[error(
        "model `{model}` was not found at {base_url} (HTTP 404): {message}; check the model name"
    )]
    ModelNotFound {
        base_url: String,
        model: String,
        message: String,
    },
    #[error(
        "the model endpoint {base_url} is rate limiting (HTTP 429) after {attempts} attempts: {message}; wait and resume the run"
    )]
    RateLimited {
        base_url: String,
        attempts: u32,
        message: String,
    },
    #[error(
        "the model endpoint {base_url} failed (HTTP {status}) after {attempts} attempts: {message}"
    )]
    Server {
        base_url: String,
        status: u16,
        attempts: u32,
        message: String,
    },
    #[error("the model endpoint {base_url} rejected the request (HTTP {status}): {message}")]
    Rejected {
        base_url: String,
        status: u16,
        message: String,
    },
    #[error("the model endpoint {base_url} sent a response that is not a model answer: {message}")]
    MalformedResponse { base_url: String, message: String },
    /// The caller stopped a streamed answer (a budget crossed); `usage` is what it had cost
    /// when stopped, counted by the server or estimated.
    #[error("the answer was stopped mid-stream: {reason}")]
    Stopped {
        reason: String,
        usage: crate::types::Usage,
        estimated: bool,
    },
    #[error(
        "the model endpoint {base_url} reported an error in the middle of its answer: {message}; the partial answer was discarded"
    )]
    StreamFailed { base_url: String, message: String },
}

/// Where a key came from, for messages: `file:PATH` references name the file, anything else
/// is the name of an environment variable.
fn key_source(reference: &str) -> String {
    match reference.strip_prefix("file:") {
        Some(path) => format!("the file {path}"),
        None => format!("the environment variable {reference}"),
    }
}

impl Coded for ModelError {
    fn code(&self) -> &'static str {
        // 001-003 belong to `SpecError`.
        match self {
            Self::Connection { .. } => "W-MODEL-004",
            Self::Timeout { .. } => "W-MODEL-005",
            Self::Authentication { .. } => "W-MODEL-006",
            Self::ModelNotFound { .. } => "W-MODEL-007",
            Self::RateLimited { .. } => "W-MODEL-008",
            Self::Server { .. } => "W-MODEL-009",
            Self::Rejected { .. } => "W-MODEL-010",
            Self::MalformedResponse { .. } => "W-MODEL-011",
            Self::Stopped { .. } => "W-MODEL-012",
            Self::StreamFailed { .. } => "W-MODEL-013",
        }
    }
}
