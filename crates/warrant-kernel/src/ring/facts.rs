//! The audit facts each event contributes to its signed record: a typed
//! [`warrant_audit::AuditData`] per event, built from the event and the run's state, so what a
//! record holds is checked by the compiler rather than assembled by key name.

use warrant_audit::{AuditAction, AuditApproval, AuditData, Decision};

use super::*;

/// The audit facts of one event as the draft carries them to the sealer.
pub(crate) fn audit_facts(
    principal: &Principal,
    run: &RunId,
    seq: u64,
    event: &RunEvent,
    state: Option<&RunState>,
) -> Result<Value, KernelError> {
    serde_json::to_value(facts_of(principal, run, seq, event, state))
        .map_err(|e| KernelError::Encode(format!("audit facts: {e}")))
}

fn decision(v: Verdict) -> Decision {
    match v {
        Verdict::Allow => Decision::Allow,
        Verdict::Ask => Decision::Ask,
        Verdict::Deny => Decision::Deny,
    }
}

/// The action(s) of a record: their audit views (never content) and the first one's target.
fn put_actions(facts: &mut AuditData, actions: &[Action]) {
    if let Some(first) = actions.first() {
        facts.resource = Some(first.target());
        facts.action = Some(if actions.len() == 1 {
            AuditAction::One(first.audit_view())
        } else {
            AuditAction::Many(actions.iter().map(Action::audit_view).collect())
        });
    }
}

/// A value's JSON text when it serializes as a string.
fn serialized_text(v: &impl serde::Serialize) -> Option<String> {
    match serde_json::to_value(v) {
        Ok(Value::String(s)) => Some(s),
        Ok(_) | Err(_) => None,
    }
}

/// What an answer by `approver` to `request` (when named) records.
fn answered(request: Option<&RequestId>, approver: &Approver) -> AuditApproval {
    AuditApproval::answer(
        request.map(RequestId::as_str),
        &approver.actor,
        &approver.via,
    )
}

/// The audit facts of one event: who, for whom, on what, decided how, allowed by whom, with
/// what outcome. Contents and results appear only as digests.
pub(crate) fn facts_of(
    principal: &Principal,
    run: &RunId,
    seq: u64,
    event: &RunEvent,
    state: Option<&RunState>,
) -> AuditData {
    let mut facts = AuditData::new(
        &principal.actor,
        principal.on_behalf_of.as_deref(),
        &principal.tenant,
        run.as_str(),
        seq,
        event.kind(),
    );
    let call_actions = |call_id: &str| -> Vec<Action> {
        state
            .and_then(|s| s.call(call_id))
            .and_then(|c| c.actions.clone())
            .unwrap_or_default()
    };
    match event {
        RunEvent::RunStarted {
            task,
            model,
            policy_digest,
            workspace,
            settings,
            ..
        } => {
            facts.outcome = Some("started".into());
            facts.resource = Some(workspace.as_str().to_owned());
            facts.reasons = vec![format!("policy {policy_digest}"), format!("model {model}")];
            // A subagent's record names the run and call that started it.
            if let Some(spawn) = &settings.spawn
                && let Some(parent) = &spawn.parent
            {
                facts.reasons.push(format!(
                    "subagent of {} call {} (depth {})",
                    parent.run, parent.call, spawn.depth
                ));
            }
            facts.input_digest = Some(Digest::of_bytes(task.as_bytes()).as_str().to_owned());
        }
        RunEvent::ModelResponded {
            turn,
            calls,
            request,
            ..
        } => {
            facts.outcome = Some(format!("turn {turn}: {} call(s)", calls.len()));
            if let Some(r) = request {
                facts.input_digest = Some(r.digest.as_str().to_owned());
                facts.reasons = r
                    .fences
                    .iter()
                    .map(|f| format!("fenced {}", f.source))
                    .collect();
            }
        }
        RunEvent::AccessRefused {
            transport,
            status,
            reason,
            suppressed,
        } => {
            facts.decision = Some(Decision::Deny);
            facts.resource = Some(format!("mcp-serve:{transport}"));
            facts.reasons = vec![reason.clone()];
            if *suppressed > 0 {
                facts.reasons.push(format!("and {suppressed} more refused"));
            }
            facts.outcome = Some(format!("refused {status}"));
        }
        RunEvent::CallReceived { client, call } => {
            facts.resource = Some(format!("tool:{}", call.tool));
            facts.reasons = vec![format!("from {client}")];
            facts.outcome = Some(format!("received call {}", call.id));
            facts.input_digest = digest_of(&call.args).ok().map(|d| d.as_str().to_owned());
        }
        RunEvent::CallRefused {
            call_id,
            tool,
            code,
            message,
        } => {
            facts.decision = Some(Decision::Deny);
            facts.resource = Some(format!("tool:{tool}"));
            facts.reasons = vec![code.clone(), message.clone()];
            facts.outcome = Some(format!("refused call {call_id}"));
        }
        RunEvent::ActionProposed { actions, .. } => put_actions(&mut facts, actions),
        RunEvent::PolicyDecided {
            call_id,
            index,
            verdict,
            risk,
            reasons,
            errors,
            ..
        } => {
            let actions = call_actions(call_id);
            if let Some(a) = actions.get(*index as usize) {
                put_actions(&mut facts, std::slice::from_ref(a));
            }
            facts.decision = Some(decision(*verdict));
            facts.reasons = reasons.iter().map(|r| r.policy.clone()).collect();
            facts.reasons.extend(errors.iter().cloned());
            facts.risk = Some(risk.as_str().to_owned());
        }
        RunEvent::ApprovalRequested {
            call_id,
            request_id,
            digest,
            risk,
            asked,
            ..
        } => {
            put_actions(&mut facts, &call_actions(call_id));
            facts.decision = Some(Decision::Ask);
            let mut approval = AuditApproval {
                digest: Some(digest.as_str().to_owned()),
                risk: Some(risk.as_str().to_owned()),
                ..AuditApproval::request(request_id.as_str())
            };
            if let Some(a) = asked {
                approval.asked_of = Some(a.people.clone());
                if let Some(why) = &a.fell_through {
                    facts.reasons = vec![why.clone()];
                }
            }
            facts.approval = Some(approval);
        }
        RunEvent::ApprovalGranted {
            request_id,
            approver,
            scope,
            digest,
            binding,
            signature,
            ..
        } => {
            facts.decision = Some(Decision::Allow);
            facts.approval = Some(AuditApproval {
                scope: Some(scope.as_str().to_owned()),
                digest: Some(digest.as_str().to_owned()),
                park: binding.as_ref().map(|b| b.park),
                // As the binding serializes it in the event (not `rfc3339()`: whole seconds
                // drop their fraction), so both read the same.
                expires_at: binding
                    .as_ref()
                    .and_then(|b| serialized_text(&b.expires_at)),
                signed: Some(signature.is_some()),
                ..answered(Some(request_id), approver)
            });
        }
        RunEvent::ApprovalRejected {
            request_id,
            reason,
            detail,
            approver,
        } => {
            facts.decision = Some(Decision::Deny);
            facts.approval = Some(match approver {
                Some(a) => answered(Some(request_id), a),
                None => AuditApproval::request(request_id.as_str()),
            });
            facts.reasons = vec![reason.as_str().to_owned(), detail.clone()];
            facts.outcome = Some(format!("approval rejected: {}", reason.as_str()));
        }
        RunEvent::ApprovalDenied {
            request_id,
            approver,
            reason,
        } => {
            facts.decision = Some(Decision::Deny);
            facts.approval = Some(answered(Some(request_id), approver));
            facts.reasons = vec![reason.clone()];
        }
        RunEvent::RunParked { request_id } => {
            facts.outcome = Some(format!("parked on {request_id}"));
        }
        RunEvent::RunResumed { by } => facts.outcome = Some(format!("resumed by {by}")),
        RunEvent::EffectStarted {
            call_id,
            approval,
            session_grant,
        } => {
            put_actions(&mut facts, &call_actions(call_id));
            facts.decision = Some(Decision::Allow);
            if let Some(id) = approval.as_ref().or(session_grant.as_ref()) {
                let granted =
                    state
                        .and_then(|s| s.requests.get(id))
                        .and_then(|r| match &r.answer {
                            Some(RequestAnswer::Granted {
                                approver, scope, ..
                            }) => Some(AuditApproval {
                                approver: Some(approver.actor.clone()),
                                scope: Some(scope.as_str().to_owned()),
                                ..AuditApproval::request(id.as_str())
                            }),
                            Some(RequestAnswer::Denied { .. }) | None => None,
                        });
                facts.approval =
                    Some(granted.unwrap_or_else(|| AuditApproval::request(id.as_str())));
            }
            facts.outcome = Some("started".into());
        }
        RunEvent::EffectCompleted {
            call_id,
            ok,
            result,
        } => {
            let actions = call_actions(call_id);
            put_actions(&mut facts, &actions);
            facts.outcome = Some(if *ok { "ok" } else { "error" }.into());
            facts.output_digest = digest_of(result).ok().map(|d| d.as_str().to_owned());
            // Where a publish into shared memory landed outside Warrant (an Iceberg table and
            // its snapshot id), so the trail names it; only a `memory.publish` effect says so.
            if actions
                .iter()
                .any(|a| a.verb() == warrant_core::Verb::MemoryPublish)
            {
                facts.reasons.extend(
                    result
                        .get("audit_notes")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .map(str::to_owned),
                );
            }
            // What redaction removed from the result before it was journaled: rule ids and
            // counts (never values), so the trail shows that a secret was kept from the model.
            if let Some(counts) = result.get("redacted").and_then(Value::as_object) {
                facts.reasons.extend(
                    counts
                        .iter()
                        .map(|(rule, n)| format!("redacted {rule} x{n}")),
                );
            }
        }
        RunEvent::EffectJudging {
            call_id,
            ok,
            result,
            ..
        } => {
            put_actions(&mut facts, &call_actions(call_id));
            facts.outcome = Some(if *ok { "judging" } else { "error" }.into());
            facts.output_digest = digest_of(result).ok().map(|d| d.as_str().to_owned());
        }
        RunEvent::EffectDenied {
            call_id, denied, ..
        } => {
            put_actions(&mut facts, &call_actions(call_id));
            facts.decision = Some(Decision::Deny);
            match denied {
                DeniedBy::Policy { reasons } => {
                    facts.reasons = reasons.iter().map(|r| r.policy.clone()).collect();
                }
                DeniedBy::Person { approver, reason } => {
                    facts.approval = Some(answered(None, approver));
                    facts.reasons = vec![reason.clone()];
                }
            }
            facts.outcome = Some("refused".into());
        }
        RunEvent::EffectInDoubt {
            call_id,
            request_id,
        } => {
            put_actions(&mut facts, &call_actions(call_id));
            facts.outcome = Some("in_doubt".into());
            facts.approval = request_id
                .as_ref()
                .map(|id| AuditApproval::request(id.as_str()));
        }
        RunEvent::InDoubtResolved {
            call_id,
            request_id,
            resolution,
            by,
            ..
        } => {
            put_actions(&mut facts, &call_actions(call_id));
            facts.approval = Some(answered(Some(request_id), by));
            facts.outcome = Some(format!("resolved as {}", resolution.as_str()));
        }
        RunEvent::PolicyChanged {
            from,
            to,
            reevaluated,
        } => {
            facts.reasons = vec![format!("policy {from} -> {to}")];
            facts.outcome = Some(format!(
                "{} pending call(s) decided again",
                reevaluated.len()
            ));
        }
        RunEvent::ToolsChanged { from, to } => {
            facts.reasons = vec![format!(
                "tools {} -> {to}",
                from.as_ref().map_or("unrecorded", Digest::as_str)
            )];
            facts.outcome = Some("tool catalogue changed".into());
        }
        RunEvent::AuditGap { sink, from, to } => {
            facts.resource = Some(format!("audit sink {sink}"));
            facts.reasons = vec!["the audit outbox was over its bound with on_full = drop".into()];
            facts.outcome = Some(format!("records {from}..={to} dropped for sink {sink}"));
        }
        RunEvent::JournalRejected {
            code,
            seq,
            problem,
            detail,
        } => {
            facts.decision = Some(Decision::Deny);
            facts.resource = Some(format!("journal:{run}"));
            facts.reasons = vec![code.clone(), detail.clone()];
            facts.outcome = Some(format!(
                "refused to act on the journal: {problem} at event {seq}"
            ));
        }
        RunEvent::LimitReached { limit, max } => {
            facts.decision = Some(Decision::Deny);
            facts.reasons = vec![format!("limit {}: {max}", limit.as_str())];
            facts.outcome = Some(format!("the run reached its {} cap", limit.as_str()));
        }
        RunEvent::Halted { code, halt, .. } => {
            facts.decision = Some(Decision::Deny);
            facts.reasons = vec![code.clone(), halt.reason()];
            facts.outcome = Some("the autonomy envelope stopped the run".to_owned());
        }
        RunEvent::RunEnded { outcome } => facts.outcome = Some(outcome_label(outcome)),
        RunEvent::AwaitingMessage {
            turn, interrupted, ..
        } => {
            facts.outcome = Some(match interrupted {
                Some(i) => format!(
                    "after turn {turn}: stopped by the person ({}); waiting for the next message",
                    i.as_str()
                ),
                None => format!("after turn {turn}: waiting for the next message"),
            });
        }
        RunEvent::MessageReceived {
            by,
            text,
            neutralized,
        } => {
            // The message itself stays in the journal; the record holds its digest.
            facts.input_digest = Some(Digest::of_bytes(text.as_bytes()).to_string());
            if !neutralized.is_empty() {
                facts.reasons = vec![format!(
                    "{} control character(s) neutralized: {}",
                    neutralized.len(),
                    neutralized.join(" ")
                )];
            }
            facts.outcome = Some(format!("message from {by}"));
        }
        RunEvent::GraphNode(step) => {
            use crate::graph::NodeStatus;
            facts.resource = Some(format!("graph-node:{}", step.node));
            let mut reasons: Vec<String> = step.code.iter().cloned().collect();
            reasons.extend(step.reason.iter().cloned());
            if let Some(c) = &step.ceiling {
                reasons.push(format!(
                    "ceiling: workspace {}; {}",
                    c.workspace,
                    c.permissions
                        .iter()
                        .map(crate::graph::Permission::text)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            if let Some(h) = &step.human {
                reasons.push(format!(
                    "a person is asked: {} `{}` ({})",
                    h.at, h.checkpoint, h.mode
                ));
            }
            if let Some(c) = &step.check {
                reasons.push(match c.outcome {
                    None => format!(
                        "criterion `{}` ({}): its command runs",
                        c.criterion, c.severity
                    ),
                    Some(o) => format!(
                        "criterion `{}` ({}): {}",
                        c.criterion,
                        c.severity,
                        o.as_str()
                    ),
                });
            }
            facts.reasons = reasons;
            // Outputs stay in the journal; the record holds their digest.
            facts.output_digest = step
                .outputs
                .as_ref()
                .map(|o| Digest::of_bytes(o.to_string().as_bytes()).to_string());
            facts.decision = match step.status {
                NodeStatus::Blocked => Some(Decision::Deny),
                NodeStatus::AwaitingHuman => Some(Decision::Ask),
                NodeStatus::Running
                | NodeStatus::AttemptFailed
                | NodeStatus::Succeeded
                | NodeStatus::Failed
                | NodeStatus::Skipped => None,
            };
            facts.outcome = Some(format!(
                "node {} {} (attempt {})",
                step.node,
                step.status.as_str(),
                step.attempt
            ));
        }
        RunEvent::MessageRefused { by, code, reason } => {
            facts.decision = Some(Decision::Deny);
            facts.reasons = vec![format!("{reason} [{code}]")];
            facts.outcome = Some(format!("message from {by} refused"));
        }
        RunEvent::HistoryCompacted {
            through_turn,
            replaced,
            estimated_tokens,
            budget,
            ..
        } => {
            facts.input_digest = Some(replaced.to_string());
            facts.reasons = vec![format!(
                "history of about {estimated_tokens} tokens over the budget of {budget}"
            )];
            facts.outcome = Some(format!("turns before {through_turn} replaced by a summary"));
        }
        RunEvent::RequestRaised {
            request_id,
            ask,
            expires_at,
            asked_of,
            ..
        } => {
            // The ask holds names, purposes and locations, never a secret's value.
            facts.decision = Some(Decision::Ask);
            facts.resource = Some(format!("request:{}", ask.kind().as_str()));
            facts.approval = Some(AuditApproval {
                kind: Some(ask.kind().as_str().to_owned()),
                asked_of: Some(asked_of.clone()),
                expires_at: Some(expires_at.rfc3339()),
                ..AuditApproval::request(request_id.as_str())
            });
            facts.reasons = vec![ask.title()];
        }
        RunEvent::RequestReplied {
            request_id,
            by,
            reply,
            ..
        } => {
            facts.approval = Some(answered(Some(request_id), by));
            facts.outcome = Some(reply.label().to_owned());
            match reply {
                crate::asks::Reply::Declined { reason } => {
                    facts.decision = Some(Decision::Deny);
                    facts.reasons = vec![reason.clone()];
                }
                crate::asks::Reply::SecretProvided { handle } => {
                    facts.resource = Some(handle.clone());
                }
                // The answered values stay in the journal (sealed where the redactor finds a
                // secret); the audit record names the fields and the content's digest only.
                crate::asks::Reply::Accepted { content } => {
                    let mut named: Vec<String> = content
                        .as_object()
                        .map(|m| m.keys().map(|k| format!("field {k}")).collect())
                        .unwrap_or_default();
                    if let Ok(d) = warrant_core::digest_of(content) {
                        named.push(format!("content {d}"));
                    }
                    facts.reasons = named;
                }
                crate::asks::Reply::Applied {
                    revision,
                    profile_digest,
                } => {
                    facts.decision = Some(Decision::Allow);
                    facts.reasons = vec![format!(
                        "profile applied: revision {revision}, {profile_digest}"
                    )];
                }
                crate::asks::Reply::Answered { .. } | crate::asks::Reply::Connected { .. } => {}
            }
        }
        RunEvent::RequestExpired {
            request_id,
            expires_at,
            ..
        } => {
            facts.approval = Some(AuditApproval::request(request_id.as_str()));
            facts.outcome = Some(format!("expired at {}", expires_at.rfc3339()));
        }
        RunEvent::ModelCallDenied {
            action,
            verdict,
            reasons,
            errors,
            ..
        } => {
            put_actions(&mut facts, std::slice::from_ref(action));
            facts.decision = Some(decision(*verdict));
            facts.reasons = reasons.iter().map(|r| r.policy.clone()).collect();
            facts.reasons.extend(errors.iter().cloned());
            facts.outcome = Some("refused".into());
        }
        RunEvent::BudgetExceeded {
            scope,
            metric,
            limit,
            used,
            message,
            ..
        } => {
            facts.resource = Some(format!("budget:{}", scope.as_str()));
            facts.decision = Some(Decision::Deny);
            facts.reasons = vec![
                format!(
                    "{} budget: {} {used} of {limit}",
                    scope.as_str(),
                    metric.as_str()
                ),
                message.clone(),
            ];
            facts.outcome = Some("stopped".into());
        }
    }
    facts
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use serde_json::json;
    use warrant_audit::AuditData;
    use warrant_core::Timestamp;
    use warrant_store::StoredEvent;

    use super::*;

    const W: &str = "/w";

    fn d(c: char) -> String {
        format!("sha256:{}", c.to_string().repeat(64))
    }

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millis(ms).unwrap()
    }

    fn event(v: Value) -> RunEvent {
        serde_json::from_value(v).unwrap()
    }

    fn principal() -> Value {
        json!({"tenant": "acme", "actor": "agent:helper", "kind": "agent",
               "on_behalf_of": "alice", "roles": ["dev"]})
    }

    fn write_action(path: &str, content: &str) -> Value {
        json!({"verb": "fs.write", "path": path, "content": content})
    }

    fn exec_action() -> Value {
        json!({"verb": "shell.exec", "argv": ["rm", "-rf", "build"], "cwd": W,
               "profile": "default", "timeout_ms": 30000})
    }

    /// A run whose calls and requests the facts read back: `c1` writes one file and was
    /// approved (`r1`), `c2` proposes two actions.
    fn state() -> RunState {
        let run = RunId::parse("run-01").unwrap();
        let prefix = [
            json!({"type": "run_started", "principal": principal(), "task": "tidy up",
                   "model": "scripted", "workspace": W, "policy_digest": d('a'),
                   "settings": {"max_denials": 3, "max_turns": 10}, "tools": ["write_file"]}),
            json!({"type": "model_responded", "turn": 0, "model": "scripted", "calls": [
                {"id": "c1", "tool": "write_file", "args": {}},
                {"id": "c2", "tool": "run_command", "args": {}}]}),
            json!({"type": "action_proposed", "call_id": "c1", "tool": "write_file",
                   "actions": [write_action("/w/a.txt", "hello")], "digest": d('b')}),
            json!({"type": "action_proposed", "call_id": "c2", "tool": "run_command",
                   "actions": [exec_action(), write_action("/w/b.txt", "x")], "digest": d('c')}),
            json!({"type": "policy_decided", "call_id": "c1", "index": 0, "action_digest": d('b'),
                   "verdict": "ask", "risk": "change", "reasons": []}),
            json!({"type": "approval_requested", "call_id": "c1", "request_id": "req-1",
                   "digest": d('b'), "risk": "change",
                   "presentation": {"title": "write a.txt", "body": "+hello"}}),
            json!({"type": "approval_granted", "request_id": "req-1",
                   "approver": {"tenant": "acme", "actor": "bob", "via": "cli"},
                   "scope": "once", "digest": d('b'), "proof": "00"}),
        ];
        let stored: Vec<StoredEvent> = prefix
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                let e = event(v);
                StoredEvent {
                    run: run.clone(),
                    seq: i as u64 + 1,
                    kind: e.kind().to_owned(),
                    version: EVENT_VERSION,
                    recorded_at: at(1_000),
                    payload: e.payload().unwrap(),
                }
            })
            .collect();
        RunState::fold(&stored).unwrap()
    }

    /// One event of every kind (two where a kind's facts branch), in the order of the enum.
    fn every_kind() -> Vec<Value> {
        let bob = json!({"tenant": "acme", "actor": "bob", "via": "cli"});
        vec![
            json!({"type": "run_started", "principal": principal(), "task": "tidy up",
                   "model": "scripted", "workspace": W, "policy_digest": d('a'),
                   "settings": {"max_denials": 3, "max_turns": 10}, "tools": ["write_file"]}),
            json!({"type": "policy_changed", "from": d('a'), "to": d('d'), "reevaluated": ["c2"]}),
            json!({"type": "tools_changed", "to": d('e')}),
            json!({"type": "tools_changed", "from": d('e'), "to": d('f')}),
            json!({"type": "model_responded", "turn": 2, "model": "scripted",
                   "calls": [{"id": "c3", "tool": "nope", "args": {}}],
                   "request": {"digest": d('1'), "fences": [
                       {"source": "tool:read_file c1", "digest": d('2')}]}}),
            json!({"type": "model_responded", "turn": 3, "model": "scripted", "calls": []}),
            json!({"type": "call_refused", "call_id": "c3", "tool": "nope",
                   "code": "W-TOOL-001", "message": "no tool named nope"}),
            json!({"type": "action_proposed", "call_id": "c2", "tool": "run_command",
                   "actions": [exec_action(), write_action("/w/b.txt", "x")], "digest": d('c')}),
            json!({"type": "action_proposed", "call_id": "c1", "tool": "write_file",
                   "actions": [write_action("/w/a.txt", "hello")], "digest": d('b')}),
            json!({"type": "policy_decided", "call_id": "c2", "index": 1, "action_digest": d('c'),
                   "verdict": "deny", "risk": "destructive",
                   "reasons": [{"policy": "no-rm", "reason": "never"}], "errors": ["late"]}),
            json!({"type": "approval_requested", "call_id": "c1", "request_id": "req-1",
                   "digest": d('b'), "risk": "change",
                   "presentation": {"title": "write a.txt", "body": "+hello"},
                   "asked": {"people": ["bob", "carol"], "requester": "alice",
                             "fell_through": "no team reviews fs"}}),
            json!({"type": "approval_requested", "call_id": "c2", "request_id": "req-2",
                   "digest": d('c'), "risk": "destructive",
                   "presentation": {"title": "rm", "body": "rm -rf build"}}),
            json!({"type": "approval_granted", "request_id": "req-1", "approver": bob,
                   "scope": "session", "digest": d('b'), "proof": "00",
                   "binding": {"run": "run-01", "request": "req-1", "park": 6,
                               "expires_at": "2026-12-04T20:00:00Z"},
                   "signature": "ab"}),
            json!({"type": "approval_granted", "request_id": "req-1", "approver": bob,
                   "scope": "once", "digest": d('b'), "proof": "00"}),
            json!({"type": "approval_rejected", "request_id": "req-1", "reason": "expired",
                   "detail": "the approval expired", "approver": bob}),
            json!({"type": "approval_rejected", "request_id": "req-1", "reason": "forged",
                   "detail": "bad proof"}),
            json!({"type": "approval_denied", "request_id": "req-2", "approver": bob,
                   "reason": "not today"}),
            json!({"type": "run_parked", "request_id": "req-1"}),
            json!({"type": "run_resumed", "by": "alice"}),
            json!({"type": "effect_started", "call_id": "c1", "approval": "req-1"}),
            json!({"type": "effect_started", "call_id": "c2", "session_grant": "req-9"}),
            json!({"type": "effect_started", "call_id": "c2"}),
            json!({"type": "effect_completed", "call_id": "c1", "ok": true,
                   "result": {"written": 5, "redacted": {"aws-key": 2, "token": 1}}}),
            json!({"type": "effect_completed", "call_id": "c2", "ok": false,
                   "result": {"error": "exit 1"}}),
            json!({"type": "effect_denied", "call_id": "c2", "message": "denied",
                   "denied": {"by": "policy", "reasons": [{"policy": "no-rm"}]}}),
            json!({"type": "effect_denied", "call_id": "c1", "message": "denied",
                   "denied": {"by": "person", "approver": bob, "reason": "no"}}),
            json!({"type": "effect_judging", "call_id": "c2", "ok": true,
                   "result": {"changes": 3}}),
            json!({"type": "effect_in_doubt", "call_id": "c2", "request_id": "req-3"}),
            json!({"type": "effect_in_doubt", "call_id": "c2"}),
            json!({"type": "in_doubt_resolved", "call_id": "c2", "request_id": "req-3",
                   "resolution": "retry", "by": bob, "proof": "00"}),
            json!({"type": "audit_gap", "sink": "http", "from": 4, "to": 9}),
            json!({"type": "limit_reached", "limit": "tool_calls", "max": 20}),
            json!({"type": "run_ended", "outcome": {"status": "completed"}}),
            json!({"type": "run_ended",
                   "outcome": {"status": "failed", "code": "W-TOOL-004", "message": "boom"}}),
            json!({"type": "request_raised", "call_id": "c4", "request_id": "req-4",
                   "ask": {"type": "secret", "name": "GH_TOKEN", "purpose": "push",
                           "used_by": "git"},
                   "expires_at": "2026-12-05T20:00:00Z", "asked_of": ["user:alice", "admins"]}),
            json!({"type": "request_replied", "call_id": "c4", "request_id": "req-4", "by": bob,
                   "reply": {"reply": "declined", "reason": "use the bot"}}),
            json!({"type": "request_replied", "call_id": "c4", "request_id": "req-4", "by": bob,
                   "reply": {"reply": "secret_provided", "handle": "secret:GH_TOKEN"}}),
            json!({"type": "request_replied", "call_id": "c4", "request_id": "req-4", "by": bob,
                   "reply": {"reply": "answered", "option": 2, "text": "yes"}}),
            json!({"type": "request_expired", "call_id": "c4", "request_id": "req-4",
                   "expires_at": "2026-12-05T20:00:00Z"}),
            json!({"type": "model_call_denied", "turn": 4,
                   "action": {"verb": "provider.call", "provider": "openai", "model": "gpt"},
                   "verdict": "deny", "reasons": [{"policy": "no-openai"}], "errors": ["e"],
                   "message": "denied"}),
            json!({"type": "budget_exceeded", "turn": 4, "scope": "actor", "metric": "cost_usd",
                   "limit": 1.5, "used": 1.75, "message": "over budget"}),
            json!({"type": "journal_rejected", "code": "W-AUDIT-027", "seq": 5,
                   "problem": "edited", "detail": "payload differs"}),
            // Served over MCP (appended last, so the rows above keep their numbers).
            json!({"type": "call_received", "client": "mcp http (token ci)",
                   "call": {"id": "call-1", "tool": "read_file", "args": {"path": "README.md"}}}),
            json!({"type": "access_refused", "transport": "http", "status": 401,
                   "reason": "W-MCPSERVE-013 no bearer token"}),
            json!({"type": "access_refused", "transport": "http", "status": 403,
                   "reason": "W-MCPSERVE-010 Host `evil.example` is not this server's",
                   "suppressed": 7}),
            json!({"type": "awaiting_message", "turn": 4}),
            json!({"type": "awaiting_message", "turn": 5, "interrupted": "model_call"}),
            json!({"type": "message_received", "by": "alice", "text": "and now the tests"}),
            json!({"type": "message_received", "by": "alice", "text": "hi\\u001b[2J",
                   "neutralized": ["U+001B"]}),
            json!({"type": "message_refused", "by": "mallory", "code": "W-SESSION-003",
                   "reason": "run-01 is alice's session"}),
            json!({"type": "history_compacted", "through_turn": 3, "summary": "earlier",
                   "replaced": d('7'), "estimated_tokens": 9000, "budget": 8000}),
            // A graph run's node steps (appended last, so the rows above keep their numbers).
            json!({"type": "graph_node", "node": "fix", "status": "running", "attempt": 1,
                   "ceiling": {"node": "fix", "workspace": "read_only", "permissions": [
                       {"scope": "fs", "action": "write", "target": "notes/*"}]}}),
            json!({"type": "graph_node", "node": "approve", "status": "awaiting_human",
                   "attempt": 1}),
            json!({"type": "graph_node", "node": "build", "status": "failed", "attempt": 2,
                   "code": "criteria_failed", "reason": "criterion `green` failed",
                   "outputs": {"status": "red"}}),
        ]
    }

    /// The record form of facts: what the sealer makes of them (it parses them as
    /// [`AuditData`]) and what a record line holds.
    fn record_form(facts: &impl serde::Serialize) -> String {
        let value = serde_json::to_value(facts).unwrap();
        let data: AuditData = serde_json::from_value(value).unwrap();
        serde_json::to_string(&data).unwrap()
    }

    /// The facts of one event of every kind, byte for byte as they land in a record: audit
    /// snapshots, `audit query` and `touched` read exactly these.
    #[test]
    fn the_facts_of_every_event_kind_are_pinned() {
        let state = state();
        let principal: Principal = serde_json::from_value(principal()).unwrap();
        let run = state.run.clone();
        let mut lines = vec![format!(
            "run_started (no state): {}",
            record_form(
                &audit_facts(&principal, &run, 1, &event(every_kind()[0].clone()), None).unwrap()
            )
        )];
        for (i, v) in every_kind().into_iter().enumerate() {
            let e = event(v);
            let facts = audit_facts(&principal, &run, 10 + i as u64, &e, Some(&state)).unwrap();
            lines.push(format!("{}: {}", e.kind(), record_form(&facts)));
        }
        insta::assert_snapshot!(lines.join("\n"));
    }
}
