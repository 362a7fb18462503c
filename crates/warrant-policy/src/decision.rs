//! The three-valued outcome of a policy decision and the reasons that determined it. Cedar
//! answers allow or deny; `@ask` annotations on permits and the risk class of the verb add
//! the third value, "a person decides".

use std::fmt;

use serde::{Deserialize, Serialize};
use warrant_core::config::LayerKind;
use warrant_core::{Action, CanonicalPath, Principal, RiskClass};

/// What a decision is about.
#[derive(Clone, Copy, Debug)]
pub struct DecisionRequest<'a> {
    pub principal: &'a Principal,
    pub action: &'a Action,
    /// The canonical workspace root; paths beneath it are `in_workspace`.
    pub workspace: &'a CanonicalPath,
    /// The directories of the installed (user) Agent Skills whose files matched, when the
    /// caller looked, the digest a person approved at install; paths beneath one are
    /// `in_installed_skill`. Empty when the caller knows of none.
    pub installed_skills: &'a [CanonicalPath],
}

/// Allow, ask a person, or deny.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Verdict {
    Allow,
    Ask { risk: RiskClass },
    Deny,
}

impl Verdict {
    /// Rank for "strictest wins": deny over ask over allow, and among asks the worse risk.
    pub(crate) fn severity(self) -> (u8, Option<RiskClass>) {
        match self {
            Self::Allow => (0, None),
            Self::Ask { risk } => (1, Some(risk)),
            Self::Deny => (2, None),
        }
    }

    /// The stricter of two verdicts.
    pub fn strictest(self, other: Verdict) -> Verdict {
        if other.severity() > self.severity() {
            other
        } else {
            self
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Allow => f.write_str("allow"),
            Self::Ask { risk } => write!(f, "ask ({})", risk.as_str()),
            Self::Deny => f.write_str("deny"),
        }
    }
}

/// Where a reason comes from: a policy layer, or a rule built into Warrant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicyLayer {
    Managed,
    User,
    Project,
    Builtin,
}

impl PolicyLayer {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Managed => "managed",
            Self::User => "user",
            Self::Project => "project",
            Self::Builtin => "builtin",
        }
    }
}

impl From<LayerKind> for PolicyLayer {
    fn from(kind: LayerKind) -> Self {
        match kind {
            LayerKind::Managed => Self::Managed,
            LayerKind::User => Self::User,
            LayerKind::Project => Self::Project,
        }
    }
}

/// A policy's effect. `Ask` appears only on built-in rules that escalate an allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicyEffect {
    Permit,
    Forbid,
    Ask,
}

impl PolicyEffect {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Permit => "permit",
            Self::Forbid => "forbid",
            Self::Ask => "ask",
        }
    }
}

/// One policy that determined a decision, with the data it carries about itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyReason {
    /// `layer:id`, e.g. `project:workspace-read`, or `builtin:always-ask`.
    pub id: String,
    pub layer: PolicyLayer,
    /// The file the policy came from ("" for built-in rules).
    pub file: String,
    pub effect: PolicyEffect,
    /// The policy's `@reason`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The policy's `@ask` risk class, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask: Option<RiskClass>,
}

/// The outcome of `PolicyEngine::decide`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub verdict: Verdict,
    /// The action's risk class: the verb's default, raised by any `@ask` that applied.
    pub risk: RiskClass,
    /// Forbids that denied, permits that allowed or asked, built-in rules that escalated.
    /// Empty for a default deny (nothing permitted the action).
    pub reasons: Vec<PolicyReason>,
    /// Evaluation errors. Any error makes the verdict Deny (fail closed).
    pub errors: Vec<String>,
}
