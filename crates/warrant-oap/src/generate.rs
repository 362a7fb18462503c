//! Reconcile (OAP §5, lifecycle step 5): the `AgentStateDelta` a finished run emits for the
//! profile it was pinned to. Generating never writes the profile (L2-G3): the delta targets the
//! revision the run was instantiated from (L2-G2), its operations are derived from what the
//! run's journal shows (L2-G5: the session's metrics, never the model's free-form rewriting of
//! state), and everything that would change `metadata` or `spec` is a proposal (L2-G4): the
//! tools the profile denied during the run, proposed for `spec.tools.allow` (high risk, like
//! every widening). The document is checked against the delta schema before anyone sees it
//! (L2-G1).

use std::collections::BTreeMap;

use serde_json::{Value, json};
use warrant_kernel::agent_profile::{Ceiling, ProfilePin};

use crate::{Document, Finding, OapError, Resolved};

/// What the run's journal says about the session.
#[derive(Clone, Debug, Default)]
pub struct Session {
    pub id: String,
    pub harness_version: String,
    pub started_at: Option<String>,
    pub ended_at: String,
    pub model: String,
    pub turns: u32,
    pub tool_calls: u32,
    /// Metered cost, when the model is priced.
    pub cost_usd: Option<f64>,
    /// `completed`, `aborted`, `error` or `timeout`.
    pub outcome: String,
    /// Calls the profile (not policy) denied, by Warrant tool name, with how many times.
    pub denied_by_profile: BTreeMap<String, u32>,
}

fn metric(v: Option<&Value>, key: &str) -> f64 {
    v.and_then(|m| m.get(key))
        .and_then(Value::as_f64)
        .unwrap_or(0.0)
}

/// The delta of `session` for the profile pinned as `pin`. `current` is the profile as found
/// now: its metrics are the base of the new ones and its allow list the base of a proposal,
/// but only when it is still the revision and spec the run was pinned to (otherwise the
/// metrics start from the session alone and nothing is proposed; the applicator refuses a
/// stale delta anyway, L2-A3).
pub fn delta(
    pin: &ProfilePin,
    current: Option<&Resolved>,
    session: &Session,
) -> Result<Document, OapError> {
    let same = current.filter(|r| r.revision == pin.revision && r.spec_digest == pin.spec_digest);
    let before = same
        .and_then(|r| r.document.get("state"))
        .and_then(|s| s.get("metrics"));
    let mut metrics = json!({
        "sessions": metric(before, "sessions") as u64 + 1,
        "last_session_at": session.ended_at,
        "total_tool_calls": metric(before, "total_tool_calls") as u64 + u64::from(session.tool_calls),
    });
    if session.cost_usd.is_some() || before.and_then(|m| m.get("total_cost_usd")).is_some() {
        metrics["total_cost_usd"] =
            json!(metric(before, "total_cost_usd") + session.cost_usd.unwrap_or(0.0));
    }
    let has_state = same.is_some_and(|r| r.document.get("state").is_some());
    let operation = if has_state {
        json!({
            "op": "add",
            "path": "/state/metrics",
            "value": metrics,
            "reason": format!("session evidence: run {} ({} turns, {} tool calls)", session.id, session.turns, session.tool_calls),
        })
    } else {
        json!({
            "op": "add",
            "path": "/state",
            "value": {"metrics": metrics},
            "reason": format!("session evidence: run {} ({} turns, {} tool calls)", session.id, session.turns, session.tool_calls),
        })
    };
    let mut proposals = Vec::new();
    if let Some(r) = same {
        let tools = r
            .effective
            .get("spec")
            .and_then(|s| s.get("tools"))
            .cloned()
            .unwrap_or(Value::Null);
        let policy = tools
            .get("policy")
            .and_then(Value::as_str)
            .unwrap_or("allowlist");
        let allow: Vec<String> = tools
            .get("allow")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect();
        // A tool denied only because the allowlist does not name it: the run's evidence for
        // naming it (a deny list or a family is the author's explicit choice; not proposed).
        let wanted: Vec<(String, u32)> = session
            .denied_by_profile
            .iter()
            .filter(|(tool, _)| pin.tools.get(*tool) == Some(&Ceiling::Deny))
            .filter(|(tool, _)| {
                pin.adjustments.iter().any(|a| {
                    a.field == format!("tools.{tool}")
                        && a.reason.contains("not in spec.tools.allow")
                })
            })
            .map(|(tool, n)| {
                let name = crate::pin::oap_names(tool)
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| tool.clone());
                (name, *n)
            })
            .collect();
        if policy == "allowlist" && !wanted.is_empty() {
            let mut value = allow;
            for (name, _) in &wanted {
                if !value.contains(name) {
                    value.push(name.clone());
                }
            }
            proposals.push(json!({
                "path": "/spec/tools/allow",
                "op": "replace",
                "value": value,
                "rationale": format!(
                    "run {} called {} and the profile's allowlist denied it",
                    session.id,
                    wanted.iter().map(|(n, c)| format!("`{n}` ({c}x)")).collect::<Vec<_>>().join(", ")
                ),
                "risk": "high",
            }));
        }
    }
    let mut sess = json!({
        "id": session.id,
        "harness": "warrant",
        "harness_version": session.harness_version,
        "ended_at": session.ended_at,
        "model_used": session.model,
        "turns": session.turns,
        "tool_calls": session.tool_calls,
        "outcome": session.outcome,
    });
    if let Some(s) = &session.started_at {
        sess["started_at"] = json!(s);
    }
    if let Some(c) = session.cost_usd {
        sess["cost_usd"] = json!(c);
    }
    let mut doc = json!({
        "oap": "1.0",
        "kind": "AgentStateDelta",
        "target": {"name": pin.name, "revision": pin.revision, "digest": pin.profile_digest},
        "session": sess,
        "summary": format!(
            "Warrant run {} under `{}` revision {}: {}, {} turns, {} tool calls.",
            session.id, pin.name, pin.revision, session.outcome, session.turns, session.tool_calls
        ),
        "operations": [operation],
    });
    if !proposals.is_empty() {
        doc["proposals"] = Value::Array(proposals);
    }
    let Value::Object(doc) = doc else {
        unreachable!("a JSON object literal")
    };
    let report = crate::check(&doc, std::path::Path::new("<generated delta>"));
    if !report.ok {
        return Err(OapError::Invalid {
            path: "<generated delta>".into(),
            kind: "AgentStateDelta".into(),
            findings: if report.errors.is_empty() {
                vec![Finding {
                    pointer: String::new(),
                    message: "not a valid delta".into(),
                }]
            } else {
                report.errors
            },
        });
    }
    Ok(doc)
}
