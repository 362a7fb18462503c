//! The effect ring: the one path from a model's tool call to the world. In order: the
//! principal comes from the log, the call is normalized into actions, the decision point
//! rules on each, a person is asked where policy says so (parking the run durably when nobody
//! can answer now), and only then is an executor reached, with `Authorized` values that only
//! this module makes. Every step is journaled before the next one depends on it, and every
//! refusal is a typed event.

use std::cell::Cell;

use serde_json::{Value, json};
use warrant_core::{
    Action, CanonicalPath, Clock, Digest, IdSource, Principal, PrincipalKind, RequestId, RiskClass,
    RunId, Timestamp, digest_of,
};
use warrant_store::{
    Append, EventDraft, EventStore, NewRun, RequestUpdate, RunStatus, Sealer, StoredEvent,
};

use warrant_audit::PublicKeys;

use crate::approval::{self, ApproverKey, BoundInput, ProofInput};
use crate::authority::{ApprovalRules, RejectReason, bound_digest, session_pattern};
use crate::authorized::Authorized;
use crate::error::KernelError;
use crate::events::{
    Approver, Binding, CallRecord, DeniedBy, EVENT_VERSION, ModelRequest, Outcome, ReasonRecord,
    Resolution, RunEvent, RunLimit, RunSettings, Scope, Verdict, Via,
};
use crate::state::{CallState, RequestAnswer, RequestKind, RequestState, RunState};
use crate::tool::{EffectResult, PENDING_JUDGEMENT, ToolEnv, ToolRegistry};

/// What the policy decision point says about one action.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyVerdict {
    pub verdict: Verdict,
    pub risk: RiskClass,
    pub reasons: Vec<ReasonRecord>,
    pub errors: Vec<String>,
}

/// The policy decision point as the ring sees it (warrant-policy implements it).
pub trait DecisionPoint {
    fn decide(
        &self,
        principal: &Principal,
        action: &Action,
        workspace: &CanonicalPath,
    ) -> PolicyVerdict;
    fn digest(&self) -> Digest;

    /// Risk rules and the identity directory, when the caller has them
    /// ([`crate::authority::Governed`]); `None` means the defaults and no directory.
    fn approval_rules(&self) -> Option<&ApprovalRules> {
        None
    }
}

/// A person's answer to a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Approve(Scope),
    Deny { reason: String },
}

/// What the person at the run's terminal is shown.
#[derive(Clone, Debug)]
pub struct PromptView<'a> {
    pub run: &'a RunId,
    pub request: &'a RequestId,
    pub risk: RiskClass,
    pub title: &'a str,
    pub body: &'a str,
    pub digest: &'a Digest,
    pub reasons: &'a [ReasonRecord],
    /// What a `session` answer would cover, worded for the person: class, pattern, this run.
    pub session: &'a str,
    /// Who the request is put to (and why, when it fell through).
    pub asked: &'a str,
}

/// Asks a person at the run's own terminal. Returns `None` when nobody can be asked now (no
/// terminal): the run then parks and waits for `warrant approve` / `deny`.
pub trait Prompter {
    fn ask(&mut self, view: &PromptView<'_>) -> Option<(Answer, Principal)>;
}

/// Never asks: every approval parks the run.
#[derive(Debug, Default)]
pub struct NoPrompter;

impl Prompter for NoPrompter {
    fn ask(&mut self, _view: &PromptView<'_>) -> Option<(Answer, Principal)> {
        None
    }
}

/// Sees every event as it is committed (the CLI prints them).
pub trait Observer {
    fn committed(&self, stored: &StoredEvent, event: &RunEvent);

    /// Called just before events are appended (fault injection uses it to die at that point).
    fn before_append(&self, _events: &[RunEvent]) {}
}

#[derive(Debug, Default)]
pub struct Silent;

impl Observer for Silent {
    fn committed(&self, _stored: &StoredEvent, _event: &RunEvent) {}
}

/// How processing one call ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallStep {
    /// The call has a result (completed, refused or denied).
    Done,
    /// Waiting for a person; the run is parked durably.
    Parked(RequestId),
}

pub struct Ring<'a> {
    pub store: &'a dyn EventStore,
    pub sealer: &'a dyn Sealer,
    pub pdp: &'a dyn DecisionPoint,
    pub ids: &'a dyn IdSource,
    pub clock: &'a dyn Clock,
    /// The installation secret approvals are proven under.
    pub secret: &'a [u8],
    pub observer: &'a dyn Observer,
    /// The fencing token of the lease this process holds on the run it drives; every append
    /// presents it. `None` for writers that do not drive the run (approve, deny, cancel).
    pub fence: Cell<Option<u64>>,
    /// The installation's public keys (current and retired): a run is folded to be acted on
    /// only after its events were checked against the records they signed.
    pub keys: &'a PublicKeys,
}

impl std::fmt::Debug for Ring<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring").finish_non_exhaustive()
    }
}

#[derive(Debug, Clone)]
pub struct NewRunSpec {
    /// Queued for a worker (`submit`) rather than driven by this process.
    pub queued: bool,
    pub principal: Principal,
    pub task: String,
    pub model: String,
    pub workspace: CanonicalPath,
    pub settings: RunSettings,
    pub tools: Vec<String>,
    pub tools_digest: Option<Digest>,
    pub profiles_digest: Option<Digest>,
}

impl Ring<'_> {
    /// Starts a run: its first event fixes the principal for good.
    pub fn start(&self, spec: NewRunSpec) -> Result<RunState, KernelError> {
        let run = self.ids.run_id();
        let event = RunEvent::RunStarted {
            principal: spec.principal.clone(),
            task: spec.task.clone(),
            model: spec.model,
            workspace: spec.workspace,
            policy_digest: self.pdp.digest(),
            settings: spec.settings,
            tools: spec.tools,
            tools_digest: spec.tools_digest,
            profiles_digest: spec.profiles_digest,
        };
        let facts = audit_facts(&spec.principal, &run, 1, &event, None);
        let draft = EventDraft {
            kind: event.kind().to_owned(),
            version: EVENT_VERSION,
            payload: event.payload()?,
            audit: facts,
        };
        let stored = self.store.create_run(
            &NewRun {
                run,
                actor: spec.principal.actor.clone(),
                task: spec.task,
                status: if spec.queued {
                    RunStatus::Queued
                } else {
                    RunStatus::Running
                },
            },
            vec![draft],
            self.sealer,
        )?;
        for s in &stored {
            self.observer.committed(s, &event);
        }
        RunState::fold(&stored)
    }

    /// Folds a run to act on it: its events are checked against their signed audit records
    /// first, and a mismatch is refused and recorded ([`crate::journal`]).
    pub fn load(&self, run: &RunId) -> Result<RunState, KernelError> {
        let events = self.verified_events(run)?;
        if events.is_empty() {
            return Err(KernelError::UnknownRun(run.to_string()));
        }
        RunState::fold(&events)
    }

    /// Folds a run without checking its journal: only for reading (listings, other runs'
    /// budget totals), never for deciding what this run does next.
    pub fn load_unverified(&self, run: &RunId) -> Result<RunState, KernelError> {
        let events = self.store.events(run)?;
        if events.is_empty() {
            return Err(KernelError::UnknownRun(run.to_string()));
        }
        RunState::fold(&events)
    }

    /// Records that audit records `from..=to` will never reach `sink` (the bounded outbox's
    /// `on_full = drop`): the gap is part of the run's record, and verification reports it.
    pub fn record_audit_gap(
        &self,
        state: &mut RunState,
        sink: &str,
        from: u64,
        to: u64,
    ) -> Result<(), KernelError> {
        self.append(
            state,
            vec![RunEvent::AuditGap {
                sink: sink.to_owned(),
                from,
                to,
            }],
            None,
            vec![],
        )
    }

    /// Records that a process a run started tried to answer `request` (which stays open): the
    /// trail shows the attempt, and nothing changes in the fold.
    pub fn record_answer_from_command(
        &self,
        state: &mut RunState,
        request: &RequestId,
        who: &Principal,
        detail: String,
    ) -> Result<(), KernelError> {
        let approver = Approver {
            tenant: who.tenant.clone(),
            actor: who.actor.clone(),
            via: "command".to_owned(),
        };
        self.record_rejection(state, request, RejectReason::FromCommand, detail, approver)
    }

    /// Records a refused answer; the request stays as it was.
    fn record_rejection(
        &self,
        state: &mut RunState,
        request: &RequestId,
        reason: RejectReason,
        detail: String,
        approver: Approver,
    ) -> Result<(), KernelError> {
        self.append(
            state,
            vec![RunEvent::ApprovalRejected {
                request_id: request.clone(),
                reason,
                detail,
                approver: Some(approver),
            }],
            None,
            vec![],
        )
    }

    /// Appends arbitrary events: only for the kernel's own tests and benches, which build
    /// journals by hand (behind the `testing` feature no production crate enables).
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn append_for_tests(
        &self,
        state: &mut RunState,
        events: Vec<RunEvent>,
        status: Option<RunStatus>,
        requests: Vec<RequestUpdate>,
    ) -> Result<(), KernelError> {
        self.append(state, events, status, requests)
    }

    /// Appends events atomically (with their audit records) and advances `state`. Not public:
    /// every event a front end causes has its own typed method. Steps of a call staged before
    /// (see [`Ring::stage`]) are committed first, in the same transaction: one durable point.
    pub(crate) fn append(
        &self,
        state: &mut RunState,
        events: Vec<RunEvent>,
        status: Option<RunStatus>,
        requests: Vec<RequestUpdate>,
    ) -> Result<(), KernelError> {
        let staged = std::mem::take(&mut state.staged);
        let held = staged.events.len();
        let (mut batch, mut drafts): (Vec<RunEvent>, Vec<EventDraft>) =
            staged.events.into_iter().unzip();
        let expected_seq = staged
            .undo
            .as_ref()
            .map_or(state.next_seq, |(_, _, first)| *first);
        let committed = self.draft_all(state, &events).and_then(|fresh| {
            drafts.extend(fresh);
            batch.extend(events);
            self.observer.before_append(&batch);
            Ok(self.store.append(
                Append {
                    run: state.run.clone(),
                    expected_seq,
                    events: drafts,
                    status,
                    requests,
                    fence: self.fence.get(),
                },
                self.sealer,
            )?)
        });
        let stored = match committed {
            Ok(stored) => stored,
            Err(e) => {
                // Nothing was written: the state goes back to what the journal holds.
                put_back(state, staged.undo);
                return Err(e);
            }
        };
        for (i, (s, event)) in stored.iter().zip(batch).enumerate() {
            self.observer.committed(s, &event);
            if i >= held {
                state.apply(s.seq, event)?;
            }
            state.next_seq = s.seq + 1;
        }
        Ok(())
    }

    /// The drafts of `events`, numbered from `state.next_seq`.
    fn draft_all(
        &self,
        state: &RunState,
        events: &[RunEvent],
    ) -> Result<Vec<EventDraft>, KernelError> {
        events
            .iter()
            .enumerate()
            .map(|(i, event)| {
                let seq = state.next_seq + i as u64;
                Ok(EventDraft {
                    kind: event.kind().to_owned(),
                    version: EVENT_VERSION,
                    payload: event.payload()?,
                    audit: audit_facts(&state.principal, &state.run, seq, event, Some(state)),
                })
            })
            .collect()
    }

    /// Applies a step of call `call_id` (its proposal or its policy decisions) to `state`
    /// without committing it: the next append commits it in the same transaction, together
    /// with the event that acts on it. Durability needs a point before an effect starts, not
    /// one per step; a crash before that point loses the staged steps, and a resume decides
    /// them again, since nothing was acted on.
    fn stage(
        &self,
        state: &mut RunState,
        call_id: &str,
        events: Vec<RunEvent>,
    ) -> Result<(), KernelError> {
        if state.staged.undo.is_none() {
            let index = state
                .calls
                .iter()
                .position(|c| c.record.id == call_id)
                .ok_or_else(|| KernelError::Inconsistent {
                    run: state.run.to_string(),
                    message: format!("no call {call_id} to stage"),
                })?;
            state.staged.undo = Some((index, state.calls[index].clone(), state.next_seq));
        }
        for event in events {
            let staged_kind = matches!(
                &event,
                RunEvent::ActionProposed { call_id: c, .. } | RunEvent::PolicyDecided { call_id: c, .. }
                    if c == call_id
            );
            if !staged_kind {
                return Err(KernelError::Inconsistent {
                    run: state.run.to_string(),
                    message: format!("{} of another call cannot be staged", event.kind()),
                });
            }
            let seq = state.next_seq;
            for draft in self.draft_all(state, std::slice::from_ref(&event))? {
                state.staged.events.push((event.clone(), draft));
            }
            state.apply(seq, event)?;
            state.next_seq = seq + 1;
        }
        Ok(())
    }

    /// Drops what is staged and puts the state back to what the journal holds.
    fn unstage(&self, state: &mut RunState) {
        let staged = std::mem::take(&mut state.staged);
        put_back(state, staged.undo);
    }

    /// Journals a model's answer, with the guarded request it answers (`None` only where no
    /// request was assembled: the kernel's tests and benches).
    pub fn record_model_response(
        &self,
        state: &mut RunState,
        request: Option<ModelRequest>,
        text: Option<String>,
        calls: Vec<CallRecord>,
        usage: Option<Value>,
        model: String,
    ) -> Result<(), KernelError> {
        let turn = state.turns;
        self.append(
            state,
            vec![RunEvent::ModelResponded {
                turn,
                text,
                calls,
                usage,
                model,
                request,
            }],
            None,
            vec![],
        )
    }

    /// Stops the run at one of its caps: the typed reason and the end in one append.
    pub fn stop_at_limit(
        &self,
        state: &mut RunState,
        limit: RunLimit,
        max: u32,
        reason: String,
    ) -> Result<(), KernelError> {
        self.append(
            state,
            vec![
                RunEvent::LimitReached { limit, max },
                RunEvent::RunEnded {
                    outcome: Outcome::Stopped { reason },
                },
            ],
            Some(RunStatus::Stopped),
            vec![],
        )
    }

    pub fn end(&self, state: &mut RunState, outcome: Outcome) -> Result<(), KernelError> {
        let status = match &outcome {
            Outcome::Completed => RunStatus::Completed,
            Outcome::Failed { .. } => RunStatus::Failed,
            Outcome::Stopped { .. } => RunStatus::Stopped,
        };
        self.append(
            state,
            vec![RunEvent::RunEnded { outcome }],
            Some(status),
            vec![],
        )
    }

    /// Marks a parked run as continuing (after its request was answered elsewhere).
    pub fn resume(&self, state: &mut RunState, by: &Principal) -> Result<(), KernelError> {
        if let Some(outcome) = &state.ended {
            return Err(KernelError::RunEnded {
                run: state.run.to_string(),
                outcome: outcome_label(outcome),
            });
        }
        if state.parked.is_some() {
            self.append(
                state,
                vec![RunEvent::RunResumed {
                    by: by.actor.clone(),
                }],
                Some(RunStatus::Running),
                vec![],
            )?;
        }
        Ok(())
    }

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
            Via::Terminal | Via::Cli => Ok(()),
        };
        let authenticated = |()| match (via, &registered, signing_key) {
            // The run's own prompt: the person at the terminal that drives the run.
            (Via::Terminal, _, _) | (_, Some(_), Some(_)) => Ok(()),
            (Via::Cli | Via::Command(_), Some(_), None) => Err((
                RejectReason::Unsigned,
                format!(
                    "an approver key is registered for {}; approve with it (`warrant approvals keygen` made it, in the user configuration directory)",
                    approver.actor
                ),
            )),
            (Via::Cli | Via::Command(_), None, _)
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
            (Via::Cli | Via::Command(_), None, _) => Ok(()),
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
        let request = state
            .requests
            .values()
            .find(|r| {
                r.kind == RequestKind::InDoubt
                    && (r.call_id == step || r.park_seq.to_string() == step)
            })
            .cloned()
            .ok_or_else(not_in_doubt)?;
        if let Some((previous, by)) = &request.resolution {
            return Err(KernelError::AlreadyAnswered {
                id: request.id.to_string(),
                answer: format!("resolved as {} by {}", previous.as_str(), by.actor),
            });
        }
        let by = Approver {
            tenant: person.tenant.clone(),
            actor: person.actor.clone(),
            via: "cli".into(),
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
    /// step's tool is still offered.
    pub fn check_replay(
        &self,
        state: &mut RunState,
        tools: &dyn ToolRegistry,
        tools_digest: &Digest,
    ) -> Result<(), KernelError> {
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
        self.stop_reason_of(&state.run, state.settings.deadline, now)
    }

    /// [`Ring::stop_reason`] from just what it reads: the run and its deadline.
    fn stop_reason_of(
        &self,
        run: &RunId,
        deadline: Option<Timestamp>,
        now: Timestamp,
    ) -> Result<Option<String>, KernelError> {
        if let Some(c) = self.store.cancel_request(run)? {
            return Ok(Some(format!(
                "cancelled by {} at {}: {}",
                c.by,
                c.at.rfc3339(),
                c.reason
            )));
        }
        if let Some(deadline) = deadline
            && now >= deadline
        {
            return Ok(Some(format!(
                "the run's deadline {} passed",
                deadline.rfc3339()
            )));
        }
        Ok(None)
    }

    /// Drives one call through the ring until it has a result or must wait for a person.
    pub fn process_call(
        &self,
        state: &mut RunState,
        call_id: &str,
        tools: &dyn ToolRegistry,
        env: &ToolEnv,
        prompter: &mut dyn Prompter,
    ) -> Result<CallStep, KernelError> {
        match self.call_steps(state, call_id, tools, env, prompter) {
            Ok(step) => {
                if !state.staged.is_empty() {
                    // Every path ends in an append today; this keeps a new one from losing
                    // what it decided.
                    self.append(state, vec![], None, vec![])?;
                }
                Ok(step)
            }
            Err(e) => {
                self.unstage(state);
                Err(e)
            }
        }
    }

    /// The steps of one call, up to its result or a park. A call's proposal and decisions
    /// are staged and committed with what acts on them, so an effect costs two transactions:
    /// one before it starts, one after it ends.
    fn call_steps(
        &self,
        state: &mut RunState,
        call_id: &str,
        tools: &dyn ToolRegistry,
        env: &ToolEnv,
        prompter: &mut dyn Prompter,
    ) -> Result<CallStep, KernelError> {
        // An effect that ran may leave part of what it did to a person (a changeset): then the
        // call goes on to that judgement instead of being done.
        macro_rules! ran {
            ($e:expr) => {{
                let step = $e?;
                if state.call(call_id).is_some_and(|c| c.judging.is_some()) {
                    continue;
                }
                return Ok(step);
            }};
        }
        loop {
            let call = state
                .call(call_id)
                .cloned()
                .ok_or_else(|| KernelError::Inconsistent {
                    run: state.run.to_string(),
                    message: format!("no call {call_id}"),
                })?;
            if call.result.is_some() {
                return Ok(CallStep::Done);
            }
            if call.judging.is_some() {
                match self.judge_step(state, call_id, tools, env, prompter)? {
                    Some(step) => return Ok(step),
                    None => continue,
                }
            }
            let name = call.record.tool.clone();

            // A request the agent raises of a person (question, secret, resource): no action,
            // no policy; it parks the run until a reply or its expiry (crate::asks).
            if let Some(step) = self.ask_step(state, call_id, tools)? {
                return Ok(step);
            }

            // 0. An effect in doubt waits for a person; their resolution decides what is recorded.
            if let Some(request) = call.in_doubt.clone() {
                let resolved_by = state
                    .requests
                    .get(&request)
                    .and_then(|r| r.resolution.clone())
                    .map(|(_, by)| by.actor);
                let (ok, note) = match call.resolution {
                    None => {
                        if state.parked.as_ref() != Some(&request) {
                            self.append(
                                state,
                                vec![RunEvent::RunParked {
                                    request_id: request.clone(),
                                }],
                                Some(RunStatus::Parked),
                                vec![],
                            )?;
                        }
                        return Ok(CallStep::Parked(request));
                    }
                    Some(Resolution::Completed) => (
                        true,
                        "a person confirmed this effect happened; its output was not recorded",
                    ),
                    Some(Resolution::Failed) => (false, "a person recorded this effect as failed"),
                    // A retry clears the doubt when folded, so it never reaches here.
                    Some(Resolution::Retry) => (false, "retry was not applied"),
                };
                self.append(
                    state,
                    vec![RunEvent::EffectCompleted {
                        call_id: call_id.to_owned(),
                        ok,
                        result: json!({"resolved": call.resolution.map(Resolution::as_str), "by": resolved_by, "note": note}),
                    }],
                    Some(RunStatus::Running),
                    vec![],
                )?;
                continue;
            }

            // 1. Normalization: schema, then the tool's own mapping to actions.
            let Some(actions) = call.actions.clone() else {
                let refusal = match tools.get(&name) {
                    None => Some((
                        "W-TOOL-001".to_owned(),
                        format!(
                            "unknown tool `{name}`; available tools: {}",
                            tools
                                .specs()
                                .iter()
                                .map(|s| s.name.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    )),
                    Some(tool) => match tools
                        .validate(&name, &call.record.args)
                        .and_then(|()| tool.normalize(&call.record.args, env))
                    {
                        Ok(actions) => {
                            let digest = digest_of(&actions)
                                .map_err(|e| KernelError::Encode(e.to_string()))?;
                            self.stage(
                                state,
                                call_id,
                                vec![RunEvent::ActionProposed {
                                    call_id: call_id.to_owned(),
                                    tool: name.clone(),
                                    actions,
                                    digest,
                                }],
                            )?;
                            None
                        }
                        Err(r) => Some((r.code, r.message)),
                    },
                };
                if let Some((code, message)) = refusal {
                    self.append(
                        state,
                        vec![RunEvent::CallRefused {
                            call_id: call_id.to_owned(),
                            tool: name,
                            code,
                            message,
                        }],
                        None,
                        vec![],
                    )?;
                }
                continue;
            };
            let digest = call.digest.clone().unwrap_or_else(|| Digest::of_bytes(b""));

            // 2. Policy, once per action; the decisions are journaled before anyone acts on them.
            if call.decisions.len() < actions.len() {
                let events = actions
                    .iter()
                    .enumerate()
                    .skip(call.decisions.len())
                    .map(|(i, action)| {
                        let v = self.pdp.decide(&state.principal, action, &state.workspace);
                        RunEvent::PolicyDecided {
                            call_id: call_id.to_owned(),
                            index: i as u32,
                            action_digest: action.digest(),
                            verdict: v.verdict,
                            risk: v.risk,
                            reasons: v.reasons,
                            errors: v.errors,
                        }
                    })
                    .collect();
                self.stage(state, call_id, events)?;
                continue;
            }
            // An effect that already started went through the gate then; what remains is to
            // re-run it (idempotent) or record it in doubt, never to ask or refuse again. A
            // person's "retry" of an in-doubt effect is itself the authorization to run again.
            if call.started.is_some() || call.resolution == Some(Resolution::Retry) {
                ran!(self.execute(state, call_id, &actions, None, None, tools, env));
            }
            let verdict = call
                .decisions
                .iter()
                .map(|d| d.verdict)
                .max_by_key(|v| severity(*v))
                .unwrap_or(Verdict::Deny);
            let deciding: Vec<ReasonRecord> = call
                .decisions
                .iter()
                .filter(|d| d.verdict == verdict)
                .flat_map(|d| d.reasons.clone())
                .collect();

            // 3. The verdict.
            match verdict {
                Verdict::Deny => {
                    let message = denial_message(&actions, &deciding, &state.workspace);
                    self.append(
                        state,
                        vec![RunEvent::EffectDenied {
                            call_id: call_id.to_owned(),
                            denied: DeniedBy::Policy { reasons: deciding },
                            message,
                        }],
                        None,
                        vec![],
                    )?;
                    return Ok(CallStep::Done);
                }
                Verdict::Allow => {
                    ran!(self.execute(state, call_id, &actions, None, None, tools, env));
                }
                Verdict::Ask => {}
            }

            // 4. The approval gate.
            let ask_risk = call
                .decisions
                .iter()
                .filter(|d| d.verdict == Verdict::Ask)
                .map(|d| d.risk)
                .max()
                .unwrap_or(RiskClass::Change);
            if let Some(grant) = state
                .session_grant_at(&actions, ask_risk, self.clock.now())
                .cloned()
            {
                ran!(self.execute(state, call_id, &actions, None, Some(grant), tools, env));
            }
            let open = call
                .request
                .as_ref()
                .and_then(|id| state.requests.get(id))
                .cloned();
            let tool = tools.get(&name).ok_or_else(|| KernelError::Inconsistent {
                run: state.run.to_string(),
                message: format!("tool {name} vanished"),
            })?;
            match open {
                None => {
                    let request = self.ids.request_id();
                    let presentation = tool.present(&actions, env);
                    // The approval binds to what the person is shown and what it is shown
                    // against (the base content of a diff), not only to the actions.
                    let bound = bound_digest(&digest, &presentation, &tool.base(&actions, env));
                    let asked = self.rules().asked_of(&state.principal, ask_risk);
                    let summary = request_summary(
                        state,
                        call_id,
                        &name,
                        ask_risk,
                        &presentation.title,
                        &bound,
                        &asked,
                    );
                    self.append(
                        state,
                        vec![RunEvent::ApprovalRequested {
                            call_id: call_id.to_owned(),
                            request_id: request.clone(),
                            digest: bound,
                            risk: ask_risk,
                            presentation: presentation.clone(),
                            action_digest: Some(digest.clone()),
                            asked: Some(asked),
                        }],
                        None,
                        vec![RequestUpdate::Open {
                            id: request.clone(),
                            summary,
                        }],
                    )?;
                    continue;
                }
                Some(req) => match req.answer.clone() {
                    None => {
                        let session = session_wording(req.risk, &actions, &self.rules());
                        match self.ask_or_park(state, &req, &deciding, &session, prompter)? {
                            Some(parked) => return Ok(parked),
                            None => continue,
                        }
                    }
                    Some(RequestAnswer::Denied { approver, reason }) => {
                        let message = format!(
                            "{} denied this ({}): {reason}",
                            approver.actor,
                            actions.iter().map(describe).collect::<Vec<_>>().join("; ")
                        );
                        self.append(
                            state,
                            vec![RunEvent::EffectDenied {
                                call_id: call_id.to_owned(),
                                denied: DeniedBy::Person { approver, reason },
                                message,
                            }],
                            None,
                            vec![],
                        )?;
                        return Ok(CallStep::Done);
                    }
                    Some(granted @ RequestAnswer::Granted { .. }) => {
                        // Time of use: the approval must match what runs now, bit for bit,
                        // and what it claims to be bound to must be this run and this park.
                        let now_digest = match &req.action_digest {
                            Some(_) => bound_digest(
                                &digest,
                                &tool.present(&actions, env),
                                &tool.base(&actions, env),
                            ),
                            None => digest.clone(),
                        };
                        // Recorded, then the person is asked again with what runs now.
                        if self.refuse_grant(state, &req, &granted, &now_digest)? {
                            continue;
                        }
                        ran!(self.execute(
                            state,
                            call_id,
                            &actions,
                            Some(req.id),
                            None,
                            tools,
                            env,
                        ));
                    }
                },
            }
        }
    }

    /// Ask at the run's own terminal; `None` when it was answered there (go round again), else
    /// the run parks for the request (once) and waits.
    fn ask_or_park(
        &self,
        state: &mut RunState,
        req: &RequestState,
        reasons: &[ReasonRecord],
        session: &str,
        prompter: &mut dyn Prompter,
    ) -> Result<Option<CallStep>, KernelError> {
        let asked = req
            .asked
            .as_ref()
            .map(|a| a.describe())
            .unwrap_or_else(|| "any person".into());
        let view = PromptView {
            run: &state.run,
            request: &req.id,
            risk: req.risk,
            title: &req.presentation.title,
            body: &req.presentation.body,
            digest: &req.digest,
            reasons,
            session,
            asked: &asked,
        };
        if let Some((answer, who)) = prompter.ask(&view) {
            match self.answer(state, &req.id, &who, &Via::Terminal, answer) {
                Ok(()) => return Ok(None),
                // Refused and recorded (four eyes, not eligible): someone else must answer, so
                // the run parks for them.
                Err(
                    KernelError::ApprovalRefused { .. } | KernelError::AgentCannotApprove { .. },
                ) => {}
                Err(e) => return Err(e),
            }
        }
        if state.parked.as_ref() != Some(&req.id) {
            self.append(
                state,
                vec![RunEvent::RunParked {
                    request_id: req.id.clone(),
                }],
                Some(RunStatus::Parked),
                vec![],
            )?;
        }
        Ok(Some(CallStep::Parked(req.id.clone())))
    }

    /// Check a granted answer at time of use against `now_digest`; when it may not be used, the
    /// refusal is recorded (`approval_rejected`) and `true` returned.
    fn refuse_grant(
        &self,
        state: &mut RunState,
        req: &RequestState,
        answer: &RequestAnswer,
        now_digest: &Digest,
    ) -> Result<bool, KernelError> {
        let RequestAnswer::Granted {
            approver,
            scope,
            digest: granted,
            proof,
            binding,
            signature,
        } = answer
        else {
            return Ok(false);
        };
        if !approval::checks_enabled() {
            return Ok(false);
        }
        let Some((reason, detail)) = self.check_grant(
            state,
            req,
            approver,
            *scope,
            granted,
            proof,
            binding.as_ref(),
            signature.as_deref(),
            now_digest,
        ) else {
            return Ok(false);
        };
        self.record_rejection(state, &req.id, reason, detail, approver.clone())?;
        Ok(true)
    }

    /// Why a granted approval may not be used now, if it may not. Order matters only for the
    /// name of the refusal: a record whose proof fails is `forged` whatever else is wrong.
    #[allow(clippy::too_many_arguments)]
    fn check_grant(
        &self,
        state: &RunState,
        req: &RequestState,
        approver: &Approver,
        scope: Scope,
        granted: &Digest,
        proof: &str,
        binding: Option<&Binding>,
        signature: Option<&str>,
        now_digest: &Digest,
    ) -> Option<(RejectReason, String)> {
        let rules = self.rules();
        let registered = rules.registered_key(&approver.actor);
        let forged = || {
            Some((
                RejectReason::Forged,
                "its proof does not verify under this installation's secret".to_owned(),
            ))
        };
        match binding {
            // Records written before bindings existed are bound to this request by the proof.
            None => {
                let input = ProofInput {
                    run: &state.run,
                    request: &req.id,
                    park_seq: req.park_seq,
                    digest: granted,
                    approver,
                    scope,
                };
                if !approval::verify(self.secret, &input, proof) || registered.is_some() {
                    return forged();
                }
            }
            Some(b) => {
                let input = BoundInput {
                    base: ProofInput {
                        run: &b.run,
                        request: &b.request,
                        park_seq: b.park,
                        digest: granted,
                        approver,
                        scope,
                    },
                    expires_at: b.expires_at,
                };
                if !approval::verify_bound(self.secret, &input, proof) {
                    return forged();
                }
                // An answer at the run's own prompt is proven by that terminal, not by a key.
                if let Some(public) = registered
                    && approver.via != Via::Terminal.as_str()
                    && !signature.is_some_and(|sig| approval::verify_signature(public, &input, sig))
                {
                    return Some((
                        RejectReason::Forged,
                        format!(
                            "it is not signed by the approver key the identity directory registers for {}",
                            approver.actor
                        ),
                    ));
                }
                if b.run != state.run {
                    return Some((
                        RejectReason::OtherRun,
                        format!("it was given in run {}, not in run {}", b.run, state.run),
                    ));
                }
                if b.request != req.id || b.park != req.park_seq {
                    if state.requests.get(&b.request).is_some_and(|r| r.used) {
                        return Some((
                            RejectReason::AlreadyUsed,
                            format!(
                                "it replays the approval of request {}, which was already used",
                                b.request
                            ),
                        ));
                    }
                    return Some((
                        RejectReason::OtherPark,
                        format!(
                            "it was given for request {} (park {}), not for {} (park {})",
                            b.request, b.park, req.id, req.park_seq
                        ),
                    ));
                }
            }
        }
        if granted != now_digest {
            return Some((
                RejectReason::ActionChanged,
                format!(
                    "what would run now is not what was shown (approved {granted}, now {now_digest})"
                ),
            ));
        }
        if let Some(b) = binding
            && self.clock.now() >= b.expires_at
        {
            return Some((
                RejectReason::Expired,
                format!("it expired at {}", b.expires_at.rfc3339()),
            ));
        }
        if req.used {
            return Some((RejectReason::AlreadyUsed, "it was already used".to_owned()));
        }
        None
    }

    #[allow(clippy::too_many_arguments)]
    fn execute(
        &self,
        state: &mut RunState,
        call_id: &str,
        actions: &[Action],
        approval: Option<RequestId>,
        session_grant: Option<RequestId>,
        tools: &dyn ToolRegistry,
        env: &ToolEnv,
    ) -> Result<CallStep, KernelError> {
        let already = state.call(call_id).and_then(|c| c.started);
        if already.is_some() && !actions.iter().all(|a| a.verb().idempotent()) {
            // Started before a crash, result unknown, and not safe to repeat: a person decides.
            let request = self.ids.request_id();
            let summary = crate::RequestSummary::InDoubt(crate::InDoubtSummary {
                kind: "in_doubt".to_owned(),
                run: state.run.clone(),
                call: call_id.to_owned(),
                tool: state.call(call_id).map(|c| c.record.tool.clone()),
                title: format!(
                    "did {} happen? it started before an interruption",
                    actions.iter().map(describe).collect::<Vec<_>>().join("; ")
                ),
                requested_by: state.principal.actor.clone(),
            })
            .to_value();
            self.append(
                state,
                vec![
                    RunEvent::EffectInDoubt {
                        call_id: call_id.to_owned(),
                        request_id: Some(request.clone()),
                    },
                    RunEvent::RunParked {
                        request_id: request.clone(),
                    },
                ],
                Some(RunStatus::Parked),
                vec![RequestUpdate::Open {
                    id: request.clone(),
                    summary,
                }],
            )?;
            return Ok(CallStep::Parked(request));
        }
        let started_seq = match already {
            Some(seq) => seq,
            None => {
                self.append(
                    state,
                    vec![RunEvent::EffectStarted {
                        call_id: call_id.to_owned(),
                        approval,
                        session_grant,
                    }],
                    Some(RunStatus::Running),
                    vec![],
                )?;
                state.next_seq - 1
            }
        };
        // A person's go-ahead, as recorded in EffectStarted (also after a resume).
        let by_person = state.call(call_id).is_some_and(|c| c.started_by_person);
        let authorized: Vec<Authorized<Action>> = actions
            .iter()
            .map(|a| Authorized::new(a.clone(), state.run.clone(), started_seq, by_person))
            .collect();
        let tool_name = state
            .call(call_id)
            .map(|c| c.record.tool.clone())
            .unwrap_or_default();
        let tool = tools
            .get(&tool_name)
            .ok_or_else(|| KernelError::Inconsistent {
                run: state.run.to_string(),
                message: format!("tool {tool_name} vanished"),
            })?;
        let principal = state.principal.clone();
        let workspace = state.workspace.clone();
        let (run, deadline) = (state.run.clone(), state.settings.deadline);
        let may_read = |p: &CanonicalPath| {
            self.pdp
                .decide(&principal, &Action::FsRead { path: p.clone() }, &workspace)
                .verdict
                == Verdict::Allow
        };
        let stop = || {
            self.stop_reason_of(&run, deadline, self.clock.now())
                .ok()
                .flatten()
        };
        let mut outcome = tool.execute(&authorized, env, &may_read, &stop);
        let pending = outcome
            .result
            .as_object_mut()
            .and_then(|m| m.remove(PENDING_JUDGEMENT));
        if let Some(pending) = pending {
            return self.open_judgement(state, call_id, actions, outcome, &pending);
        }
        self.append(
            state,
            vec![RunEvent::EffectCompleted {
                call_id: call_id.to_owned(),
                ok: outcome.ok,
                result: outcome.result,
            }],
            None,
            vec![],
        )?;
        Ok(CallStep::Done)
    }

    /// Journal an effect whose result waits for a person, with the approval request that shows
    /// what waits (bound to the actions, what is shown and the tool's digest of it).
    fn open_judgement(
        &self,
        state: &mut RunState,
        call_id: &str,
        actions: &[Action],
        outcome: EffectResult,
        pending: &Value,
    ) -> Result<CallStep, KernelError> {
        let text = |k: &str| pending.get(k).and_then(Value::as_str).unwrap_or_default();
        let risk: RiskClass =
            serde_json::from_value(pending["risk"].clone()).unwrap_or(RiskClass::Destructive);
        let presentation = crate::Presentation {
            title: text("title").to_owned(),
            body: text("body").to_owned(),
        };
        let actions_digest =
            digest_of(&actions.to_vec()).map_err(|e| KernelError::Encode(e.to_string()))?;
        let bound = bound_digest(
            &actions_digest,
            &presentation,
            &json!({"judged": text("digest")}),
        );
        let request = self.ids.request_id();
        let asked = self.rules().asked_of(&state.principal, risk);
        let tool = state
            .call(call_id)
            .map(|c| c.record.tool.clone())
            .unwrap_or_default();
        let summary = request_summary(
            state,
            call_id,
            &tool,
            risk,
            &presentation.title,
            &bound,
            &asked,
        );
        self.append(
            state,
            vec![
                RunEvent::EffectJudging {
                    call_id: call_id.to_owned(),
                    ok: outcome.ok,
                    result: outcome.result,
                },
                RunEvent::ApprovalRequested {
                    call_id: call_id.to_owned(),
                    request_id: request.clone(),
                    digest: bound,
                    risk,
                    presentation,
                    action_digest: None,
                    asked: Some(asked),
                },
            ],
            None,
            vec![RequestUpdate::Open {
                id: request,
                summary,
            }],
        )?;
        Ok(CallStep::Done)
    }

    /// A call whose effect waits for a person's judgement: ask at the terminal or park; on a
    /// denial discard what waits, on a grant (checked like any approval at time of use) let it
    /// land; either way the effect completes. `None`: go round again.
    fn judge_step(
        &self,
        state: &mut RunState,
        call_id: &str,
        tools: &dyn ToolRegistry,
        env: &ToolEnv,
        prompter: &mut dyn Prompter,
    ) -> Result<Option<CallStep>, KernelError> {
        let call = state
            .call(call_id)
            .cloned()
            .ok_or_else(|| KernelError::Inconsistent {
                run: state.run.to_string(),
                message: format!("no call {call_id}"),
            })?;
        let Some((_, result)) = call.judging.clone() else {
            return Ok(None);
        };
        let req = call
            .request
            .as_ref()
            .and_then(|id| state.requests.get(id))
            .cloned()
            .ok_or_else(|| KernelError::Inconsistent {
                run: state.run.to_string(),
                message: format!("call {call_id} waits for a judgement with no request"),
            })?;
        let tool = tools
            .get(&call.record.tool)
            .ok_or_else(|| KernelError::Inconsistent {
                run: state.run.to_string(),
                message: format!("tool {} vanished", call.record.tool),
            })?;
        let approved = match req.answer.clone() {
            None => return self.ask_or_park(state, &req, &[], "", prompter),
            Some(RequestAnswer::Denied { .. }) => false,
            Some(granted @ RequestAnswer::Granted { .. }) => {
                // What was shown is fixed in the journal: the request's own digest.
                if self.refuse_grant(state, &req, &granted, &req.digest)? {
                    return Ok(None);
                }
                true
            }
        };
        // Settling acts on the workspace: only with the authorization the effect started under.
        let started_seq = call.started.ok_or_else(|| KernelError::Inconsistent {
            run: state.run.to_string(),
            message: format!("call {call_id} waits for a judgement but never started"),
        })?;
        let authorized: Vec<Authorized<Action>> = call
            .actions
            .iter()
            .flatten()
            .map(|a| {
                Authorized::new(
                    a.clone(),
                    state.run.clone(),
                    started_seq,
                    call.started_by_person,
                )
            })
            .collect();
        let settled = tool.settle(&authorized, &result, approved, env);
        self.append(
            state,
            vec![RunEvent::EffectCompleted {
                call_id: call_id.to_owned(),
                ok: settled.ok,
                result: settled.result,
            }],
            None,
            vec![],
        )?;
        Ok(Some(CallStep::Done))
    }
}

/// What a request listing shows of an approval request.
/// Undoes staged steps: their call as it was before them, and the sequence number they took.
fn put_back(state: &mut RunState, undo: Option<(usize, CallState, u64)>) {
    if let Some((index, call, first)) = undo {
        state.calls[index] = call;
        state.next_seq = first;
    }
}

fn request_summary(
    state: &RunState,
    call_id: &str,
    tool: &str,
    risk: RiskClass,
    title: &str,
    digest: &Digest,
    asked: &crate::AskedOf,
) -> Value {
    crate::RequestSummary::Approval(crate::ApprovalSummary {
        run: state.run.clone(),
        call: call_id.to_owned(),
        tool: tool.to_owned(),
        risk,
        title: title.to_owned(),
        digest: digest.clone(),
        requested_by: state.principal.actor.clone(),
        requester: asked.requester.clone(),
        asked_of: Some(asked.describe()),
        approvers: asked.people.clone(),
        team: asked.team.clone(),
        admins: asked.admins,
        fell_through: asked.fell_through.clone(),
    })
    .to_value()
}

/// How the prompt words a `session` answer: the class, exactly what it covers (verb, recursive
/// or not, resource pattern), this run only.
fn session_wording(risk: RiskClass, actions: &[Action], rules: &ApprovalRules) -> String {
    let mut patterns: Vec<String> = actions.iter().map(session_pattern).collect();
    patterns.sort();
    patterns.dedup();
    let secs = rules.expiry_secs(risk, true);
    let expiry = if secs.is_multiple_of(3600) {
        format!("{}h", secs / 3600)
    } else if secs.is_multiple_of(60) {
        format!("{}m", secs / 60)
    } else {
        format!("{secs}s")
    };
    format!(
        "{} actions matching exactly {}; this run only, for at most {expiry}; never saved as policy (to allow it for good, add a permit under .warrant/policies/)",
        risk.as_str(),
        patterns
            .iter()
            .map(|p| format!("`{p}`"))
            .collect::<Vec<_>>()
            .join(" or ")
    )
}

fn severity(v: Verdict) -> u8 {
    match v {
        Verdict::Allow => 0,
        Verdict::Ask => 1,
        Verdict::Deny => 2,
    }
}

pub fn outcome_label(o: &Outcome) -> String {
    match o {
        Outcome::Completed => "completed".into(),
        Outcome::Failed { code, message } => format!("failed: {code} {message}"),
        Outcome::Stopped { reason } => format!("stopped: {reason}"),
    }
}

/// `fs.read /w/.env` — how an action reads in messages.
pub fn describe(a: &Action) -> String {
    format!("{} {}", a.verb().as_str(), a.target())
}

fn denial_message(
    actions: &[Action],
    reasons: &[ReasonRecord],
    workspace: &CanonicalPath,
) -> String {
    let what = actions.iter().map(describe).collect::<Vec<_>>().join("; ");
    if reasons.is_empty() {
        let outside = actions.iter().any(|a| match a {
            Action::FsRead { path }
            | Action::FsList { path }
            | Action::FsSearch { path, .. }
            | Action::FsWrite { path, .. }
            | Action::FsCreate { path, .. }
            | Action::FsDelete { path, .. } => !path.starts_with(workspace),
            Action::ShellExec { cwd, .. } => !cwd.starts_with(workspace),
            Action::ProviderCall { .. } => false,
        });
        if outside {
            format!(
                "denied: {what}: no policy permits it, and it is outside the workspace {workspace}"
            )
        } else {
            format!("denied: {what}: no policy permits it")
        }
    } else {
        let why = reasons
            .iter()
            .map(|r| match &r.reason {
                Some(text) => format!("{} ({text})", r.policy),
                None => r.policy.clone(),
            })
            .collect::<Vec<_>>()
            .join("; ");
        format!("denied: {what}: {why}")
    }
}

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
