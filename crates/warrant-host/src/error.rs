//! The one error type of the application layer: a stable code, a message in words, what class
//! of failure it is (each front end maps the class to its own signal: an exit code, an HTTP
//! status, a chat reply), and an optional typed hint of what to do next, which each front end
//! renders in its own words.

use serde::Serialize;
use warrant_core::Coded;

/// What kind of failure ended an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// The operation ran and failed (a store error, a run that could not continue).
    Failed,
    /// Bad usage, configuration or input: nothing was started.
    Usage,
    /// Governance refused it (a journal that differs from what was signed, a stop).
    Refused,
}

pub use warrant_core::Hint;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HostError {
    pub code: String,
    pub message: String,
    pub class: Class,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<Hint>,
}

impl HostError {
    pub fn usage(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
            class: Class::Usage,
            hint: None,
        }
    }

    /// An error of a library room, with its code and its hint.
    pub fn coded(e: &(impl Coded + std::fmt::Display), class: Class) -> Self {
        Self {
            code: e.code().to_owned(),
            message: e.to_string(),
            class,
            hint: e.hint(),
        }
    }

    pub fn failed(e: &(impl Coded + std::fmt::Display)) -> Self {
        Self::coded(e, Class::Failed)
    }

    pub fn bad_input(e: &(impl Coded + std::fmt::Display)) -> Self {
        Self::coded(e, Class::Usage)
    }

    pub fn with_hint(mut self, hint: Hint) -> Self {
        self.hint = Some(hint);
        self
    }
}

impl std::fmt::Display for HostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}] {}", self.code, self.message)
    }
}

impl std::error::Error for HostError {}

pub type Result<T, E = HostError> = std::result::Result<T, E>;
