//! The full account of a decision: the verdict, the policies behind it, and the exact Cedar
//! requests, entities and context evaluated. Serializes to stable JSON for tools and audit,
//! and displays as text for `warrant explain`.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use warrant_core::{Digest, Verb};

use crate::decision::{Decision, PolicyReason, Verdict};

/// Who one evaluation was for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvaluatedAs {
    /// The run's principal with its own roles and teams.
    Principal,
    /// The person an agent acts for; both must allow.
    OnBehalfOf,
}

impl EvaluatedAs {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Principal => "principal",
            Self::OnBehalfOf => "on behalf of",
        }
    }
}

/// What Cedar itself answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CedarDecision {
    Allow,
    Deny,
    /// The request or entities could not be built; nothing was evaluated (fail closed).
    NotEvaluated,
}

impl CedarDecision {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
            Self::NotEvaluated => "not evaluated",
        }
    }
}

/// The Cedar request, as entity uids in Cedar syntax.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CedarRequest {
    pub principal: String,
    pub action: String,
    pub resource: String,
}

/// One Cedar evaluation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    pub evaluated_as: EvaluatedAs,
    pub request: CedarRequest,
    pub cedar_decision: CedarDecision,
    /// This evaluation's verdict before combining and before built-in rules.
    pub verdict: Verdict,
    pub reasons: Vec<PolicyReason>,
    pub errors: Vec<String>,
    /// Cedar entity JSON, as the `cedar` CLI takes it.
    pub entities: Value,
    pub context: Value,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Explanation {
    pub verb: Verb,
    pub target: String,
    pub workspace: String,
    pub decision: Decision,
    /// Set for a deny that no policy explains: nothing permits the action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub evaluations: Vec<Evaluation>,
    pub policy_digest: Digest,
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = &self.decision;
        writeln!(f, "{}  {} {}", d.verdict, self.verb.as_str(), self.target)?;
        if let Some(note) = &self.note {
            writeln!(f, "  {note}")?;
        }
        for r in &d.reasons {
            write_reason(f, r, "  ")?;
        }
        for e in &d.errors {
            writeln!(f, "  error: {e}")?;
        }
        for ev in &self.evaluations {
            writeln!(f)?;
            writeln!(
                f,
                "{} {}: cedar {}, verdict {}",
                ev.evaluated_as.as_str(),
                ev.request.principal,
                ev.cedar_decision.as_str(),
                ev.verdict
            )?;
            writeln!(
                f,
                "  request   principal={} action={} resource={}",
                ev.request.principal, ev.request.action, ev.request.resource
            )?;
            writeln!(f, "  context   {}", ev.context)?;
            writeln!(f, "  entities")?;
            if let Value::Array(list) = &ev.entities {
                for entity in list {
                    writeln!(f, "    {entity}")?;
                }
            }
        }
        writeln!(f)?;
        write!(f, "policy set {}", self.policy_digest)
    }
}

fn write_reason(f: &mut fmt::Formatter<'_>, r: &PolicyReason, indent: &str) -> fmt::Result {
    let ask = r
        .ask
        .map(|risk| format!(" @ask({})", risk.as_str()))
        .unwrap_or_default();
    let file = if r.file.is_empty() {
        String::new()
    } else {
        format!("  ({})", r.file)
    };
    writeln!(f, "{indent}{} {}{ask}{file}", r.effect.as_str(), r.id)?;
    if let Some(reason) = &r.reason {
        writeln!(f, "{indent}    {reason}")?;
    }
    Ok(())
}
