//! What the request index shows of each request, typed: the ring writes a [`RequestSummary`]
//! beside the events that open a request (in the same transaction), and every listing reads it
//! back as the same struct, never by key name. The stored JSON is the struct's serialization;
//! which kind a stored summary is follows from its `kind` (`in_doubt`, a request the agent
//! raised, or none for an approval).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use warrant_core::{Digest, RiskClass, RunId};

use crate::Ask;

/// One request as the index lists it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum RequestSummary {
    Approval(ApprovalSummary),
    Asked(AskedSummary),
    InDoubt(InDoubtSummary),
}

/// An approval of an action.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalSummary {
    pub run: RunId,
    pub call: String,
    pub tool: String,
    pub risk: RiskClass,
    pub title: String,
    pub digest: Digest,
    pub requested_by: String,
    /// Fields from here on were added with the identity directory; rows written before it
    /// read with their defaults.
    #[serde(default)]
    pub requester: String,
    /// Who is asked, in words (absent in rows written before it was recorded).
    #[serde(default)]
    pub asked_of: Option<String>,
    /// The people who may answer (empty with no directory: any person who is not an agent).
    #[serde(default)]
    pub approvers: Vec<String>,
    #[serde(default)]
    pub team: Option<String>,
    #[serde(default)]
    pub admins: bool,
    #[serde(default)]
    pub fell_through: Option<String>,
}

/// A question, secret or resource the agent asked for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AskedSummary {
    /// `question`, `secret` or `resource`.
    pub kind: String,
    pub run: RunId,
    pub call: String,
    pub tool: String,
    pub title: String,
    pub ask: Ask,
    pub requested_by: String,
    /// Who is asked: `user:NAME`, `team:NAME`, `admins`.
    pub asked_of: Vec<String>,
    pub expires_at: String,
}

/// An effect that started before an interruption: did it happen?
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InDoubtSummary {
    /// Always `in_doubt`.
    pub kind: String,
    pub run: RunId,
    pub call: String,
    pub tool: Option<String>,
    pub title: String,
    pub requested_by: String,
}

impl RequestSummary {
    /// The JSON the index stores.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Reads a stored summary back; `None` for one no version of the ring wrote.
    pub fn from_value(v: &Value) -> Option<Self> {
        let parsed = match v.get("kind").and_then(Value::as_str) {
            None => serde_json::from_value(v.clone()).map(Self::Approval),
            Some("in_doubt") => serde_json::from_value(v.clone()).map(Self::InDoubt),
            Some(_) => serde_json::from_value(v.clone()).map(Self::Asked),
        };
        parsed.ok()
    }

    /// `approval`, `question`, `secret`, `resource` or `in_doubt`.
    pub fn kind(&self) -> &str {
        match self {
            Self::Approval(_) => "approval",
            Self::Asked(a) => &a.kind,
            Self::InDoubt(d) => &d.kind,
        }
    }

    pub fn title(&self) -> &str {
        match self {
            Self::Approval(a) => &a.title,
            Self::Asked(a) => &a.title,
            Self::InDoubt(d) => &d.title,
        }
    }

    pub fn requested_by(&self) -> &str {
        match self {
            Self::Approval(a) => &a.requested_by,
            Self::Asked(a) => &a.requested_by,
            Self::InDoubt(d) => &d.requested_by,
        }
    }

    /// When it expires, for a request the agent raised.
    pub fn expires_at(&self) -> Option<&str> {
        match self {
            Self::Asked(a) => Some(&a.expires_at),
            Self::Approval(_) | Self::InDoubt(_) => None,
        }
    }

    /// Who may answer, for listing: what the ring recorded for an agent's request; for an
    /// approval, the people it was put to, its team or the administrators (anyone who is not an
    /// agent when there was no identity directory); for an in-doubt step, the run's person.
    pub fn asked_of(&self) -> Vec<String> {
        match self {
            Self::Asked(a) => a.asked_of.clone(),
            Self::Approval(a) => {
                let mut out: Vec<String> =
                    a.approvers.iter().map(|p| format!("user:{p}")).collect();
                if let Some(team) = &a.team {
                    out.push(format!("team:{team}"));
                }
                if a.admins {
                    out.push("admins".to_owned());
                }
                if out.is_empty() {
                    // Recorded under a directory-less installation: any person may answer;
                    // a row from before who-is-asked was recorded: the run's person.
                    out.push(match &a.asked_of {
                        Some(_) => "anyone".to_owned(),
                        None => format!("user:{}", a.requested_by),
                    });
                }
                out
            }
            Self::InDoubt(d) => vec![format!("user:{}", d.requested_by)],
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use serde_json::json;

    use super::*;

    const RUN: &str = "run-0195f0c3a1b2-1a2b3c4d5e6f";

    /// The three shapes as the ring wrote them with `json!` before they were typed: each reads
    /// back as its kind and writes out unchanged, so stored rows and `--json` stay the same.
    #[test]
    fn stored_summaries_read_back_as_their_kind_and_write_out_unchanged() {
        let approval = json!({
            "run": RUN, "call": "c1", "tool": "delete_path", "risk": "destructive",
            "title": "delete old.txt", "digest": format!("sha256:{}", "0".repeat(64)),
            "requested_by": "alice", "requester": "alice", "asked_of": "anyone who is not an agent",
            "approvers": [], "team": null, "admins": false, "fell_through": null,
        });
        let asked = json!({
            "kind": "question", "run": RUN, "call": "c2", "tool": "ask_question",
            "title": "Ship it?", "ask": {"type": "question", "question": "Ship it?"},
            "requested_by": "alice", "asked_of": ["user:alice"], "expires_at": "2026-12-04T20:00:00.000Z",
        });
        let in_doubt = json!({
            "kind": "in_doubt", "run": RUN, "call": "c3", "tool": null,
            "title": "did it happen?", "requested_by": "alice",
        });
        for (v, kind) in [
            (&approval, "approval"),
            (&asked, "question"),
            (&in_doubt, "in_doubt"),
        ] {
            let s = RequestSummary::from_value(v).unwrap_or_else(|| panic!("{v}"));
            assert_eq!(s.kind(), kind);
            assert_eq!(&s.to_value(), v, "{kind} writes out as it was stored");
        }
        let s = RequestSummary::from_value(&approval).unwrap();
        assert_eq!(s.asked_of(), ["anyone"]);
        assert_eq!(
            RequestSummary::from_value(&in_doubt).unwrap().asked_of(),
            ["user:alice"]
        );
    }

    #[test]
    fn an_approval_from_before_the_directory_reads_with_defaults() {
        let old = json!({
            "run": RUN, "call": "c1", "tool": "write_file", "risk": "change", "title": "write a",
            "digest": format!("sha256:{}", "1".repeat(64)), "requested_by": "bob",
        });
        let s = RequestSummary::from_value(&old).unwrap();
        assert_eq!(
            s.asked_of(),
            ["user:bob"],
            "the run's person, as listed before"
        );
        assert!(RequestSummary::from_value(&json!({"kind": "question"})).is_none());
    }
}
