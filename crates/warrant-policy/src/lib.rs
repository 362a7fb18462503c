//! Warrant's policy decision point: a Cedar schema for our resource kinds, layered policy
//! loading with strict validation (any error fails closed), and `decide`/`explain` with three
//! outcomes (allow, ask a person, deny). No I/O: callers read the policy files and pass text.

mod decision;
mod engine;
mod error;
mod explain;
mod reach;
mod request;
mod schema;
mod warnings;

pub use decision::{Decision, DecisionRequest, PolicyEffect, PolicyLayer, PolicyReason, Verdict};
pub use engine::{
    ALWAYS_ASK_ID, JUDGED_AFTER_ID, NoMemo, PolicyEngine, PolicySource, ValidationMemo,
    judged_after, validation_key,
};
pub use error::PolicyError;
pub use explain::{CedarDecision, CedarRequest, EvaluatedAs, Evaluation, Explanation};
pub use reach::{Unreachable, unreachable_permits};
pub use schema::{NAMESPACE, SCHEMA_JSON, SCHEMA_TEXT};

/// The policy pack `warrant init` writes to `.warrant/policy/default.cedar`.
pub fn default_pack() -> &'static str {
    include_str!("default.cedar")
}
