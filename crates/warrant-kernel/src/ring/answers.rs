//! A person's answers: approve or deny a parked request (authenticated, bound to the park and
//! the action shown), resolve an effect in doubt, the replay check and why a run must stop.

use warrant_store::{CancelRequest, StopSignals, StoreError};

use super::*;

impl Ring<'_> {
    /// Records a person's answer to a request of a run. The approver is the principal Warrant
    /// established for the answering process; an agent can never approve.
    pub fn answer(
        &self,
        state: &mut RunState,
        request: &RequestId,
        approver: &Principal,
        via: &Via,
        answer: Answer,
    ) -> Result<(), KernelError> {
        self.answer_signed(state, request, approver, via, answer, None)
    }

    /// [`Ring::answer`] with the approver's own key: when a public key is registered for the
    /// approver (identity directory, or this installation's enrollment), an approval from
    /// another process must be signed by it (and is refused, recorded, when it is not). A class
    /// that always needs a person, and four eyes, take an answer only from the run's own
    /// prompt or signed by a registered key; an answer from a process a run started is refused
    /// whatever it says.
    pub fn answer_signed(
        &self,
        state: &mut RunState,
        request: &RequestId,
        approver: &Principal,
        via: &Via,
        answer: Answer,
        key: Option<&dyn ApproverKey>,
    ) -> Result<(), KernelError> {
        let req = state
            .requests
            .get(request)
            .ok_or_else(|| KernelError::UnknownRequest(request.to_string()))?;
        if req.kind == RequestKind::InDoubt {
            return Err(KernelError::WrongRequestKind {
                id: request.to_string(),
                run: state.run.clone(),
                step: req.call_id.clone(),
            });
        }
        if let Some(previous) = &req.answer {
            return Err(KernelError::AlreadyAnswered {
                id: request.to_string(),
                answer: match previous {
                    RequestAnswer::Granted {
                        approver, scope, ..
                    } => {
                        format!("approved {} by {}", scope.as_str(), approver.actor)
                    }
                    RequestAnswer::Denied { approver, .. } => {
                        format!("denied by {}", approver.actor)
                    }
                },
            });
        }
        if let Some(outcome) = &state.ended {
            return Err(KernelError::RunEnded {
                run: state.run.to_string(),
                outcome: outcome_label(outcome),
            });
        }
        let who = Approver {
            tenant: approver.tenant.clone(),
            actor: approver.actor.clone(),
            via: via.as_str().to_owned(),
        };
        // Who may answer. A refusal is itself a record; the request stays open.
        let rules = self.rules();
        let asked = req
            .asked
            .clone()
            .unwrap_or_else(|| rules.asked_of(&state.principal, req.risk));
        let registered = rules.registered_key(&approver.actor).map(str::to_owned);
        let signing_key = key.filter(|k| registered.as_deref() == Some(k.public_hex().as_str()));
        let from_command = match via {
            Via::Command(evidence) => Err((
                RejectReason::FromCommand,
                format!(
                    "this answer came from a process a Warrant run started ({evidence}); a command can never answer a request, whatever it runs or claims to be"
                ),
            )),
            Via::Terminal | Via::Cli | Via::Web => Ok(()),
        };
        let authenticated = |()| match (via, &registered, signing_key) {
            // The run's own prompt: the person at the terminal that drives the run.
            (Via::Terminal, _, _) | (_, Some(_), Some(_)) => Ok(()),
            (Via::Cli | Via::Web | Via::Command(_), Some(_), None) => Err((
                RejectReason::Unsigned,
                format!(
                    "an approver key is registered for {}; approve with it (`warrant approvals keygen` made it, in the user configuration directory)",
                    approver.actor
                ),
            )),
            (Via::Cli | Via::Web | Via::Command(_), None, _)
                if rules.needs_authentication(req.risk, &asked) =>
            {
                Err((
                    RejectReason::Unauthenticated,
                    format!(
                        "a {} request{} takes an answer only at the run's own prompt or signed with an approver key registered for the person, and none is registered for {}; `warrant approvals keygen` makes and enrolls one",
                        req.risk.as_str(),
                        if asked.four_eyes {
                            " with four eyes"
                        } else {
                            ""
                        },
                        approver.actor
                    ),
                ))
            }
            (Via::Cli | Via::Web | Via::Command(_), None, _) => Ok(()),
        };
        let check = from_command.and_then(|()| match answer {
            Answer::Approve(_) => rules.may_answer(approver, &asked).and_then(authenticated),
            // Anyone asked may refuse, but never an agent or someone acting for another.
            Answer::Deny { .. } => match rules.may_answer(approver, &asked) {
                Err((RejectReason::FourEyes, _)) => Ok(()),
                other => other,
            },
        });
        if let Err((reason, detail)) = check {
            self.record_rejection(state, request, reason, detail.clone(), who)?;
            if approver.kind == PrincipalKind::Agent {
                return Err(KernelError::AgentCannotApprove {
                    actor: approver.actor.clone(),
                });
            }
            return Err(KernelError::ApprovalRefused {
                id: request.to_string(),
                reason,
                detail,
            });
        }
        let event = match answer {
            Answer::Approve(scope) => {
                let secs = rules.expiry_secs(req.risk, scope == Scope::Session);
                let now = self.clock.now();
                let expires_at = Timestamp::from_millis(
                    now.millis().saturating_add(
                        i64::try_from(secs)
                            .unwrap_or(i64::MAX / 2)
                            .saturating_mul(1000),
                    ),
                )
                .unwrap_or(now);
                let binding = Binding {
                    run: state.run.clone(),
                    request: request.clone(),
                    park: req.park_seq,
                    expires_at,
                };
                let input = BoundInput {
                    base: ProofInput {
                        run: &binding.run,
                        request: &binding.request,
                        park_seq: binding.park,
                        digest: &req.digest,
                        approver: &who,
                        scope,
                    },
                    expires_at,
                };
                let proof = approval::prove_bound(self.secret, &input);
                let signature =
                    signing_key.map(|k| k.sign_hex(approval::bound_message(&input).as_bytes()));
                RunEvent::ApprovalGranted {
                    request_id: request.clone(),
                    approver: who,
                    scope,
                    digest: req.digest.clone(),
                    proof,
                    binding: Some(binding),
                    signature,
                }
            }
            Answer::Deny { reason } => RunEvent::ApprovalDenied {
                request_id: request.clone(),
                approver: who,
                reason,
            },
        };
        // A run parked on this request is ready to be driven again, here or by any worker.
        let status = state.parked.is_some().then_some(RunStatus::Queued);
        self.append(
            state,
            vec![event],
            status,
            vec![RequestUpdate::Answered {
                id: request.clone(),
            }],
        )
    }

    /// The approval rules in force (defaults when the decision point has none): the identity
    /// directory and the project team route requests too.
    pub(crate) fn rules(&self) -> ApprovalRules {
        self.pdp.approval_rules().cloned().unwrap_or_default()
    }

    /// Records a person's resolution of an effect in doubt (`warrant runs resolve`). `step` is
    /// the call id, or the sequence number of its `effect_in_doubt` event. Approval-grade: the
    /// person is the one Warrant established, an agent never may, and the decision is proven
    /// under the installation secret and audited.
    pub fn resolve(
        &self,
        state: &mut RunState,
        step: &str,
        person: &Principal,
        via: &Via,
        resolution: Resolution,
    ) -> Result<(), KernelError> {
        if person.kind == PrincipalKind::Agent {
            return Err(KernelError::AgentCannotApprove {
                actor: person.actor.clone(),
            });
        }
        let not_in_doubt = || KernelError::NotInDoubt {
            run: state.run.to_string(),
            step: step.to_owned(),
        };
        let request = state.in_doubt(step).cloned().ok_or_else(not_in_doubt)?;
        if let Some((previous, by)) = &request.resolution {
            return Err(KernelError::AlreadyAnswered {
                id: request.id.to_string(),
                answer: format!("resolved as {} by {}", previous.as_str(), by.actor),
            });
        }
        let by = Approver {
            tenant: person.tenant.clone(),
            actor: person.actor.clone(),
            via: via.as_str().into(),
        };
        let proof = approval::prove_resolution(
            self.secret,
            &ProofInput {
                run: &state.run,
                request: &request.id,
                park_seq: request.park_seq,
                digest: &request.digest,
                approver: &by,
                scope: Scope::Once,
            },
            resolution.as_str(),
        );
        self.append(
            state,
            vec![RunEvent::InDoubtResolved {
                call_id: request.call_id.clone(),
                request_id: request.id.clone(),
                resolution,
                by,
                proof,
            }],
            state.parked.is_some().then_some(RunStatus::Queued),
            vec![RequestUpdate::Answered { id: request.id }],
        )
    }

    /// Before a resume drives a run again: a changed policy set re-decides every pending
    /// action (recorded), and a changed tool catalogue is accepted only if every completed
    /// step's tool is still offered. Not for a strict run: there either is a divergence that
    /// stops it at its next step.
    pub fn check_replay(
        &self,
        state: &mut RunState,
        tools: &dyn ToolRegistry,
        tools_digest: &Digest,
    ) -> Result<(), KernelError> {
        // A strict run records no change: its next step stops on the divergence
        // (`Ring::replay_divergence`, W-STRICT-002).
        if state.settings.strict {
            return Ok(());
        }
        if state.tools_digest.as_ref() != Some(tools_digest) {
            for call in &state.calls {
                if call.result.is_some() && tools.get(&call.record.tool).is_none() {
                    return Err(KernelError::ToolMissing {
                        run: state.run.to_string(),
                        call: call.record.id.clone(),
                        tool: call.record.tool.clone(),
                    });
                }
            }
            let from = state.tools_digest.clone();
            self.append(
                state,
                vec![RunEvent::ToolsChanged {
                    from,
                    to: tools_digest.clone(),
                }],
                None,
                vec![],
            )?;
        }
        let current = self.pdp.digest();
        if state.policy_digest != current {
            let reevaluated: Vec<String> = state
                .calls
                .iter()
                .filter(|c| c.result.is_none() && c.started.is_none() && !c.decisions.is_empty())
                .map(|c| c.record.id.clone())
                .collect();
            let from = state.policy_digest.clone();
            self.append(
                state,
                vec![RunEvent::PolicyChanged {
                    from,
                    to: current,
                    reevaluated,
                }],
                None,
                vec![],
            )?;
        }
        Ok(())
    }

    /// Why the run must stop now, if it must: a cancellation request, or its deadline.
    pub fn stop_reason(
        &self,
        state: &RunState,
        now: Timestamp,
    ) -> Result<Option<String>, KernelError> {
        self.stop_reason_at(state, self.stop_signals(state), now)
    }

    /// [`Ring::stop_reason`], judged on signals [`Ring::stop_signals`] read.
    pub fn stop_reason_at(
        &self,
        state: &RunState,
        signals: Result<StopSignals, StoreError>,
        now: Timestamp,
    ) -> Result<Option<String>, KernelError> {
        let mut cancels = signals?.cancels.into_iter();
        if let Some(reason) = stop_reason_in(cancels.next().flatten(), state.settings.deadline, now)
        {
            return Ok(Some(reason));
        }
        // A subagent stops with its parent (and theirs): a cancellation of any run above it
        // reaches it at its next effect boundary.
        let subject = super::envelope::HaltSubject::of(state);
        for (run, cancel) in subject.runs().iter().skip(1).zip(cancels) {
            if let Some(c) = cancel {
                return Ok(Some(format!(
                    "its parent run {run} was cancelled by {} at {}: {}",
                    c.by,
                    c.at.rfc3339(),
                    c.reason
                )));
            }
        }
        Ok(None)
    }
}

/// Why a run must stop, from its own cancellation and its deadline alone.
pub(super) fn stop_reason_in(
    cancel: Option<CancelRequest>,
    deadline: Option<Timestamp>,
    now: Timestamp,
) -> Option<String> {
    if let Some(c) = cancel {
        return Some(format!(
            "cancelled by {} at {}: {}",
            c.by,
            c.at.rfc3339(),
            c.reason
        ));
    }
    if let Some(deadline) = deadline
        && now >= deadline
    {
        return Some(format!("the run's deadline {} passed", deadline.rfc3339()));
    }
    None
}
