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
