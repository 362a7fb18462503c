//! Export of approval requests as AAIS 1.0 documents (requested, then once answered decided
//! and resolved), one producer stream per run. AAIS covers approvals of actions; the requests
//! the agent raises (questions, secrets, resources) are form input and credential exchange,
//! which AAIS 1.0 leaves out (spec §16), so they are not exported.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use warrant_core::{RequestId, RiskClass, canonical_json};
use warrant_kernel::{RequestAnswer, RequestKind, RequestState, RunState};
use warrant_store::{RequestRow, StoredEvent};

use crate::request_views::kind_of_row;
use crate::{Class, Host, HostError, Result};

impl Host {
    /// The AAIS documents of one approval request, or of every approval when `id` is `None`.
    /// One request that is not an approval is refused (W-REQUEST-010); in a full export the
    /// others are left out.
    pub fn export_aais(&self, id: Option<&RequestId>) -> Result<Vec<Value>> {
        let rows: Vec<RequestRow> = match id {
            Some(id) => vec![self.records().request_row(id)?],
            None => self.records().requests(true)?,
        };
        let mut seq = 0u64;
        let mut docs = Vec::new();
        let mut loaded: BTreeMap<String, (RunState, Vec<StoredEvent>)> = BTreeMap::new();
        for row in &rows {
            let key = row.run.to_string();
            if !loaded.contains_key(&key) {
                let events = self
                    .inst
                    .store
                    .events(&row.run)
                    .map_err(|e| HostError::failed(&e))?;
                let state = self.load_run(&row.run, Class::Failed)?;
                loaded.insert(key.clone(), (state, events));
            }
            let Some((state, events)) = loaded.get(&key) else {
                continue;
            };
            match state.requests.get(&row.id) {
                Some(req) if req.kind == RequestKind::Approval => {
                    docs.extend(aais_documents(state, req, row, events, &mut seq));
                }
                Some(_) | None if id.is_some() => {
                    return Err(HostError::usage(
                        "W-REQUEST-010",
                        format!(
                            "request {} is a {} request; AAIS 1.0 covers approvals of actions only (form input and credential exchange are outside it)",
                            row.id,
                            kind_of_row(row)
                        ),
                    ));
                }
                Some(_) | None => {}
            }
        }
        Ok(docs)
    }
}

fn aais_risk(risk: RiskClass) -> &'static str {
    match risk {
        RiskClass::Read => "low",
        RiskClass::Change => "medium",
        RiskClass::External => "high",
        RiskClass::Destructive | RiskClass::Secret | RiskClass::Irreversible => "critical",
    }
}

fn aais_digest(action: &Value) -> String {
    let text = canonical_json(action).unwrap_or_default();
    format!(
        "sha256:{}",
        warrant_core::Digest::of_bytes(text.as_bytes())
            .as_str()
            .trim_start_matches("sha256:")
    )
}

/// The AAIS documents of one approval request: requested, then (once answered) decided and
/// resolved. `seq` numbers the producer stream.
fn aais_documents(
    state: &RunState,
    req: &RequestState,
    row: &RequestRow,
    events: &[StoredEvent],
    seq: &mut u64,
) -> Vec<Value> {
    let call = state.call(&req.call_id);
    let tool = call.map(|c| c.record.tool.clone()).unwrap_or_default();
    let mut action = json!({
        "kind": "tool.call",
        "name": if tool.is_empty() { "unknown".to_owned() } else { tool },
        "summary": if req.presentation.title.is_empty() { "an action".to_owned() } else { req.presentation.title.chars().take(1000).collect() },
        "arguments": call.map(|c| c.record.args.clone()).filter(Value::is_object).unwrap_or_else(|| json!({})),
        "working_directory": state.workspace,
    });
    if !req.presentation.body.is_empty() {
        action["presentation"] =
            json!({"details": req.presentation.body.chars().take(10_000).collect::<String>()});
    }
    let digest = aais_digest(&action);
    let stream = format!("warrant.{}", state.run);
    let at = |s: u64| {
        events
            .iter()
            .find(|e| e.seq == s)
            .map_or_else(|| row.created_at.rfc3339(), |e| e.recorded_at.rfc3339())
    };
    let mut next = || {
        let s = *seq;
        *seq += 1;
        s
    };
    let ext = json!({"warrant.invalid/aais": {"run": state.run, "warrant_digest": req.digest, "risk_class": req.risk}});
    let mut docs = vec![json!({
        "aais": "1.0",
        "type": "approval.requested",
        "id": format!("{}.requested", req.id),
        "occurred_at": at(req.park_seq),
        "sequence": next(),
        "stream": stream,
        "request": {
            "id": req.id,
            "created_at": at(req.park_seq),
            "status": "pending",
            "origin": {"harness": "warrant", "session_id": state.run, "run_id": state.run},
            "action": action,
            "action_digest": digest,
            "risk": {"level": aais_risk(req.risk), "reasons": [format!("risk class {}", req.risk.as_str())]},
            "choices": [
                {"decision": "approve", "scope": "once", "label": "Approve once"},
                {"decision": "approve", "scope": "session", "label": "Approve for this run",
                 "scope_constraints": {"session_id": state.run, "match": "same verb on the same target"}},
                {"decision": "deny", "scope": "once", "label": "Deny"}
            ],
            "extensions": ext,
        }
    })];
    let Some(answer) = &req.answer else {
        return docs;
    };
    let answered_seq = events
        .iter()
        .find(|e| {
            (e.kind == "approval_granted" || e.kind == "approval_denied")
                && e.payload.get("request_id") == Some(&json!(req.id))
        })
        .map_or(req.park_seq, |e| e.seq);
    let (decision, scope, approver, outcome, message) = match answer {
        RequestAnswer::Granted {
            approver, scope, ..
        } => (
            "approve",
            scope.as_str(),
            approver,
            "approved",
            format!("approved {} by {}", scope.as_str(), approver.actor),
        ),
        RequestAnswer::Denied { approver, reason } => (
            "deny",
            "once",
            approver,
            "denied",
            format!("denied by {}: {reason}", approver.actor),
        ),
    };
    let decision_id = format!("{}.decided", req.id);
    docs.push(json!({
        "aais": "1.0",
        "type": "approval.decided",
        "id": decision_id,
        "occurred_at": at(answered_seq),
        "sequence": next(),
        "stream": stream,
        "decision": {
            "id": decision_id,
            "request_id": req.id,
            "action_digest": digest,
            "decided_at": at(answered_seq),
            "decision": decision,
            "scope": scope,
            "actor": {"id": approver.actor, "type": "human", "authenticated_by": format!("warrant:{}", approver.via)},
        }
    }));
    let mut resolution = json!({
        "id": format!("{}.resolved", req.id),
        "request_id": req.id,
        "decision_id": decision_id,
        "action_digest": digest,
        "resolved_at": at(answered_seq),
        "outcome": outcome,
        "message": message.chars().take(2000).collect::<String>(),
    });
    if decision == "approve" {
        resolution["effective_scope"] = json!(scope);
    }
    docs.push(json!({
        "aais": "1.0",
        "type": "approval.resolved",
        "id": format!("{}.resolved", req.id),
        "occurred_at": at(answered_seq),
        "sequence": next(),
        "stream": stream,
        "resolution": resolution,
    }));
    docs
}
