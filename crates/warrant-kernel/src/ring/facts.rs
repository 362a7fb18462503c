//! The audit facts each event contributes to its signed record.

use super::*;

/// The audit facts of one event: who, for whom, on what, decided how, allowed by whom, with
/// what outcome. Contents and results appear only as digests.
pub(crate) fn audit_facts(
    principal: &Principal,
    run: &RunId,
    seq: u64,
    event: &RunEvent,
    state: Option<&RunState>,
) -> Value {
    let mut facts = json!({
        "actor": principal.actor,
        "tenant": principal.tenant,
        "run": run,
        "event_seq": seq,
        "event": event.kind(),
    });
    if let Some(o) = &principal.on_behalf_of {
        facts["on_behalf_of"] = json!(o);
    }
    let call_actions = |call_id: &str| -> Vec<Action> {
        state
            .and_then(|s| s.call(call_id))
            .and_then(|c| c.actions.clone())
            .unwrap_or_default()
    };
    let put_actions = |facts: &mut Value, actions: &[Action]| {
        if let Some(first) = actions.first() {
            facts["resource"] = json!(first.target());
            facts["action"] = if actions.len() == 1 {
                first.audit_view()
            } else {
                Value::Array(actions.iter().map(Action::audit_view).collect())
            };
        }
    };
    match event {
        RunEvent::RunStarted {
            task,
            model,
            policy_digest,
            workspace,
            ..
        } => {
            facts["outcome"] = json!("started");
            facts["resource"] = json!(workspace);
            facts["reasons"] = json!([format!("policy {policy_digest}"), format!("model {model}")]);
            facts["input_digest"] = json!(Digest::of_bytes(task.as_bytes()));
        }
        RunEvent::ModelResponded {
            turn,
            calls,
            request,
            ..
        } => {
            facts["outcome"] = json!(format!("turn {turn}: {} call(s)", calls.len()));
            if let Some(r) = request {
                facts["input_digest"] = json!(r.digest);
                if !r.fences.is_empty() {
                    facts["reasons"] = json!(
                        r.fences
                            .iter()
                            .map(|f| format!("fenced {}", f.source))
                            .collect::<Vec<_>>()
                    );
                }
            }
        }
        RunEvent::CallRefused {
            call_id,
            tool,
            code,
            message,
        } => {
            facts["decision"] = json!("deny");
            facts["resource"] = json!(format!("tool:{tool}"));
            facts["reasons"] = json!([code, message]);
            facts["outcome"] = json!(format!("refused call {call_id}"));
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
            facts["decision"] = json!(verdict.as_str());
            let mut r: Vec<String> = reasons.iter().map(|r| r.policy.clone()).collect();
            r.extend(errors.iter().cloned());
            facts["reasons"] = json!(r);
            facts["risk"] = json!(risk);
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
            facts["decision"] = json!("ask");
            facts["approval"] = json!({"request": request_id, "digest": digest, "risk": risk});
            if let Some(a) = asked {
                facts["approval"]["asked_of"] = json!(a.people);
                if let Some(why) = &a.fell_through {
                    facts["reasons"] = json!([why]);
                }
            }
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
            facts["decision"] = json!("allow");
            facts["approval"] = json!({"request": request_id, "approver": approver.actor, "via": approver.via, "scope": scope, "digest": digest});
            if let Some(b) = binding {
                facts["approval"]["park"] = json!(b.park);
                facts["approval"]["expires_at"] = json!(b.expires_at);
            }
            facts["approval"]["signed"] = json!(signature.is_some());
        }
        RunEvent::ApprovalRejected {
            request_id,
            reason,
            detail,
            approver,
        } => {
            facts["decision"] = json!("deny");
            facts["approval"] = match approver {
                Some(a) => json!({"request": request_id, "approver": a.actor, "via": a.via}),
                None => json!({"request": request_id}),
            };
            facts["reasons"] = json!([reason.as_str(), detail]);
            facts["outcome"] = json!(format!("approval rejected: {}", reason.as_str()));
        }
        RunEvent::ApprovalDenied {
            request_id,
            approver,
            reason,
        } => {
            facts["decision"] = json!("deny");
            facts["approval"] =
                json!({"request": request_id, "approver": approver.actor, "via": approver.via});
            facts["reasons"] = json!([reason]);
        }
        RunEvent::RunParked { request_id } => {
            facts["outcome"] = json!(format!("parked on {request_id}"));
        }
        RunEvent::RunResumed { by } => facts["outcome"] = json!(format!("resumed by {by}")),
        RunEvent::EffectStarted {
            call_id,
            approval,
            session_grant,
        } => {
            put_actions(&mut facts, &call_actions(call_id));
            facts["decision"] = json!("allow");
            let request = approval.as_ref().or(session_grant.as_ref());
            if let Some(id) = request {
                let approver =
                    state
                        .and_then(|s| s.requests.get(id))
                        .and_then(|r| match &r.answer {
                            Some(RequestAnswer::Granted {
                                approver, scope, ..
                            }) => Some(
                                json!({"request": id, "approver": approver.actor, "scope": scope}),
                            ),
                            Some(RequestAnswer::Denied { .. }) | None => None,
                        });
                facts["approval"] = approver.unwrap_or_else(|| json!({"request": id}));
            }
            facts["outcome"] = json!("started");
        }
        RunEvent::EffectCompleted {
            call_id,
            ok,
            result,
        } => {
            put_actions(&mut facts, &call_actions(call_id));
            facts["outcome"] = json!(if *ok { "ok" } else { "error" });
            if let Ok(d) = digest_of(result) {
                facts["output_digest"] = json!(d);
            }
            // What redaction removed from the result before it was journaled: rule ids and
            // counts (never values), so the trail shows that a secret was kept from the model.
            if let Some(counts) = result.get("redacted").and_then(Value::as_object) {
                facts["reasons"] = json!(
                    counts
                        .iter()
                        .map(|(rule, n)| format!("redacted {rule} x{n}"))
                        .collect::<Vec<_>>()
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
            facts["outcome"] = json!(if *ok { "judging" } else { "error" });
            if let Ok(d) = digest_of(result) {
                facts["output_digest"] = json!(d);
            }
        }
        RunEvent::EffectDenied {
            call_id, denied, ..
        } => {
            put_actions(&mut facts, &call_actions(call_id));
            facts["decision"] = json!("deny");
            match denied {
                DeniedBy::Policy { reasons } => {
                    facts["reasons"] =
                        json!(reasons.iter().map(|r| r.policy.clone()).collect::<Vec<_>>());
                }
                DeniedBy::Person { approver, reason } => {
                    facts["approval"] = json!({"approver": approver.actor, "via": approver.via});
                    facts["reasons"] = json!([reason]);
                }
            }
            facts["outcome"] = json!("refused");
        }
        RunEvent::EffectInDoubt {
            call_id,
            request_id,
        } => {
            put_actions(&mut facts, &call_actions(call_id));
            facts["outcome"] = json!("in_doubt");
            if let Some(id) = request_id {
                facts["approval"] = json!({"request": id});
            }
        }
        RunEvent::InDoubtResolved {
            call_id,
            request_id,
            resolution,
            by,
            ..
        } => {
            put_actions(&mut facts, &call_actions(call_id));
            facts["approval"] = json!({"request": request_id, "approver": by.actor, "via": by.via});
            facts["outcome"] = json!(format!("resolved as {}", resolution.as_str()));
        }
        RunEvent::PolicyChanged {
            from,
            to,
            reevaluated,
        } => {
            facts["reasons"] = json!([format!("policy {from} -> {to}")]);
            facts["outcome"] = json!(format!(
                "{} pending call(s) decided again",
                reevaluated.len()
            ));
        }
        RunEvent::ToolsChanged { from, to } => {
            facts["reasons"] = json!([format!(
                "tools {} -> {to}",
                from.as_ref().map_or("unrecorded", Digest::as_str)
            )]);
            facts["outcome"] = json!("tool catalogue changed");
        }
        RunEvent::AuditGap { sink, from, to } => {
            facts["resource"] = json!(format!("audit sink {sink}"));
            facts["reasons"] = json!(["the audit outbox was over its bound with on_full = drop"]);
            facts["outcome"] = json!(format!("records {from}..={to} dropped for sink {sink}"));
        }
        RunEvent::JournalRejected {
            code,
            seq,
            problem,
            detail,
        } => {
            facts["decision"] = json!("deny");
            facts["resource"] = json!(format!("journal:{run}"));
            facts["reasons"] = json!([code, detail]);
            facts["outcome"] = json!(format!(
                "refused to act on the journal: {problem} at event {seq}"
            ));
        }
        RunEvent::LimitReached { limit, max } => {
            facts["decision"] = json!("deny");
            facts["reasons"] = json!([format!("limit {}: {max}", limit.as_str())]);
            facts["outcome"] = json!(format!("the run reached its {} cap", limit.as_str()));
        }
        RunEvent::RunEnded { outcome } => facts["outcome"] = json!(outcome_label(outcome)),
        RunEvent::RequestRaised {
            request_id,
            ask,
            expires_at,
            asked_of,
            ..
        } => {
            // The ask holds names, purposes and locations, never a secret's value.
            facts["decision"] = json!("ask");
            facts["resource"] = json!(format!("request:{}", ask.kind().as_str()));
            facts["approval"] = json!({"request": request_id, "kind": ask.kind().as_str(),
                "asked_of": asked_of, "expires_at": expires_at.rfc3339()});
            facts["reasons"] = json!([ask.title()]);
        }
        RunEvent::RequestReplied {
            request_id,
            by,
            reply,
            ..
        } => {
            facts["approval"] = json!({"request": request_id, "approver": by.actor, "via": by.via});
            facts["outcome"] = json!(reply.label());
            match reply {
                crate::asks::Reply::Declined { reason } => {
                    facts["decision"] = json!("deny");
                    facts["reasons"] = json!([reason]);
                }
                crate::asks::Reply::SecretProvided { handle } => {
                    facts["resource"] = json!(handle);
                }
                crate::asks::Reply::Answered { .. } | crate::asks::Reply::Connected { .. } => {}
            }
        }
        RunEvent::RequestExpired {
            request_id,
            expires_at,
            ..
        } => {
            facts["approval"] = json!({"request": request_id});
            facts["outcome"] = json!(format!("expired at {}", expires_at.rfc3339()));
        }
        RunEvent::ModelCallDenied {
            action,
            verdict,
            reasons,
            errors,
            ..
        } => {
            put_actions(&mut facts, std::slice::from_ref(action));
            facts["decision"] = json!(verdict.as_str());
            let mut r: Vec<String> = reasons.iter().map(|r| r.policy.clone()).collect();
            r.extend(errors.iter().cloned());
            facts["reasons"] = json!(r);
            facts["outcome"] = json!("refused");
        }
        RunEvent::BudgetExceeded {
            scope,
            metric,
            limit,
            used,
            message,
            ..
        } => {
            facts["resource"] = json!(format!("budget:{}", scope.as_str()));
            facts["decision"] = json!("deny");
            facts["reasons"] = json!([
                format!(
                    "{} budget: {} {used} of {limit}",
                    scope.as_str(),
                    metric.as_str()
                ),
                message
            ]);
            facts["outcome"] = json!("stopped");
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
                   "outcome": {"status": "failed", "code": "W-X-001", "message": "boom"}}),
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
            record_form(&audit_facts(&principal, &run, 1, &event(every_kind()[0].clone()), None))
        )];
        for (i, v) in every_kind().into_iter().enumerate() {
            let e = event(v);
            let facts = audit_facts(&principal, &run, 10 + i as u64, &e, Some(&state));
            lines.push(format!("{}: {}", e.kind(), record_form(&facts)));
        }
        insta::assert_snapshot!(lines.join("\n"));
    }
}
