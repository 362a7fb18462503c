//! A run's state is the fold of its log. Nothing else holds progress: the agent loop reloads
//! this after every step, so a crash loses nothing that was journaled and a resume continues
//! exactly where the log ends.

use std::collections::BTreeMap;

use serde_json::Value;
use warrant_core::{
    Action, CanonicalPath, Digest, Principal, RequestId, RiskClass, RunId, Timestamp, Verb,
};
use warrant_store::{EventDraft, StoredEvent};

use crate::asks::AskState;
use crate::authority::{AskedOf, RejectReason, session_pattern};
use crate::error::KernelError;
use crate::events::{
    Approver, Binding, CallRecord, DeniedBy, Outcome, Presentation, ReasonRecord, Resolution,
    RunEvent, RunSettings, Scope, Verdict,
};

#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub verdict: Verdict,
    pub risk: RiskClass,
    pub reasons: Vec<ReasonRecord>,
}

/// How a call ended, as the model will be told.
#[derive(Clone, Debug, PartialEq)]
pub enum CallResult {
    Completed { ok: bool, result: Value },
    Refused { code: String, message: String },
    Denied { denied: DeniedBy, message: String },
    InDoubt,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CallState {
    pub record: CallRecord,
    pub turn: u32,
    pub actions: Option<Vec<Action>>,
    pub digest: Option<Digest>,
    pub decisions: Vec<Decision>,
    pub request: Option<RequestId>,
    pub started: Option<u64>,
    /// Its `EffectStarted` named a person's approval (of this call, or a session grant).
    pub started_by_person: bool,
    /// The effect ran and part of it waits for a person (`effect_judging`): its outcome so far.
    pub judging: Option<(bool, Value)>,
    pub result: Option<CallResult>,
    /// The request a person must answer because this call's effect is in doubt.
    pub in_doubt: Option<RequestId>,
    /// How that person resolved it.
    pub resolution: Option<Resolution>,
    /// A call a client made directly (`call_received`), not the model: it is no part of the
    /// model's conversation.
    pub received: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub enum RequestAnswer {
    Granted {
        approver: Approver,
        scope: Scope,
        digest: Digest,
        proof: String,
        binding: Option<Binding>,
        signature: Option<String>,
    },
    Denied {
        approver: Approver,
        reason: String,
    },
}

/// What a request asks of a person.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestKind {
    /// May this action run? (`warrant approve` / `deny`)
    Approval,
    /// Did this interrupted effect happen? (`warrant runs resolve`)
    InDoubt,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RequestState {
    pub id: RequestId,
    pub kind: RequestKind,
    pub call_id: String,
    pub digest: Digest,
    pub risk: RiskClass,
    pub presentation: Presentation,
    /// Sequence number of the `ApprovalRequested` event: the park the answer binds to.
    pub park_seq: u64,
    pub answer: Option<RequestAnswer>,
    /// Set once an effect started under this approval; a `once` approval is then spent.
    pub used: bool,
    /// For an in-doubt request: who resolved it, and how.
    pub resolution: Option<(Resolution, Approver)>,
    /// The digest of the actions alone when `digest` is the bound digest (see
    /// `ApprovalRequested::action_digest`).
    pub action_digest: Option<Digest>,
    /// Who the request is put to.
    pub asked: Option<AskedOf>,
    /// Set when its approval was refused at time of use; the call asks again.
    pub rejected: Option<RejectReason>,
}

/// A session-scoped approval: same verb on the same target, for this run only.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionGrant {
    pub request: RequestId,
    pub covers: Vec<(Verb, String)>,
    /// The risk class the approval was given for (absent for grants from older logs, which
    /// cover exactly `covers`).
    pub class: Option<RiskClass>,
    /// Resource patterns covered (`session_pattern`).
    pub patterns: Vec<String>,
    pub expires_at: Option<Timestamp>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RunState {
    pub run: RunId,
    pub principal: Principal,
    pub task: String,
    pub model: String,
    pub workspace: CanonicalPath,
    /// The policy set the run decides under now (changes when a resume finds a new one).
    pub policy_digest: Digest,
    pub tools_digest: Option<Digest>,
    pub profiles_digest: Option<Digest>,
    pub settings: RunSettings,
    pub tools: Vec<String>,
    /// The sequence number the next appended event gets.
    pub next_seq: u64,
    pub turns: u32,
    /// Text of each model turn, in order (None when the turn said nothing).
    pub turn_texts: Vec<Option<String>>,
    pub calls: Vec<CallState>,
    pub requests: BTreeMap<RequestId, RequestState>,
    pub session_grants: Vec<SessionGrant>,
    pub denials: u32,
    pub parked: Option<RequestId>,
    pub ended: Option<Outcome>,
    /// Requests the agent raised of a person (questions, secrets, resources).
    pub asks: BTreeMap<RequestId, AskState>,
    /// What this run's model calls have consumed, from `model_responded` and
    /// `budget_exceeded` usage.
    pub usage: crate::model_gate::ModelUsage,
    /// A session's messages from its person after the task, each with the turn it follows.
    pub messages: Vec<PersonMessage>,
    /// A session waits for its person's next message (`awaiting_message`).
    pub awaiting: bool,
    /// The latest compaction of a session's history.
    pub compaction: Option<Compaction>,
    /// Every step of the run's Agentic Graph nodes, in order (`graph_node` events).
    pub graph: Vec<crate::graph::NodeStep>,
    /// The permission ceiling of the graph node running now, if any.
    pub ceiling: Option<crate::graph::NodeCeiling>,
    /// Steps of a call the ring decided and applied here but has not committed yet: they go
    /// to the store with its next append, in the same transaction. Empty whenever the ring
    /// hands the state back, but for a model's answer held by
    /// [`crate::Ring::hold_model_response`] until the step after it appends.
    pub(crate) staged: Staged,
}

/// A person's message in a session: what the model reads after turn `after_turn - 1`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PersonMessage {
    /// The number of model turns before it.
    pub after_turn: u32,
    pub by: String,
    pub text: String,
}

/// The part of a session's history replaced by a summary: turns before `through_turn`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compaction {
    pub through_turn: u32,
    pub summary: String,
}

/// A call's proposal and policy decisions, applied to the state and waiting to be committed
/// with the event that acts on them (its effect's start, its denial, its approval request).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Staged {
    /// Each event with the draft (payload and audit facts) it is appended as.
    pub events: Vec<(RunEvent, EventDraft)>,
    /// What the staged events changed, to put back if their commit fails: the index of their
    /// call with its state before them, and the sequence number the first one took.
    pub undo: Option<(usize, CallState, u64)>,
    /// The whole state before a held model answer (which adds a turn and its calls): put back
    /// instead of `undo` when there is one.
    pub before_answer: Option<Box<RunState>>,
}

impl Staged {
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

impl RunState {
    /// The worst risk class the run may reach now: its ceiling from `run_started`, narrowed by
    /// the ceiling of every skill it has activated since (a completed `activate_skill` names
    /// the skill; its pin says the ceiling). With the skill that narrowed it, if one did.
    pub fn ceiling_now(&self) -> Option<(warrant_core::RiskClass, Option<String>)> {
        let mut now = self.settings.ceiling.map(|c| (c, None));
        for call in self
            .calls
            .iter()
            .filter(|c| c.record.tool == "activate_skill")
        {
            let Some(CallResult::Completed { ok: true, result }) = &call.result else {
                continue;
            };
            let Some(name) = result.get("skill").and_then(Value::as_str) else {
                continue;
            };
            let Some(class) = self
                .settings
                .skills
                .iter()
                .find(|s| s.name == name)
                .and_then(|s| s.ceiling)
            else {
                continue;
            };
            if now.as_ref().is_none_or(|(c, _)| class < *c) {
                now = Some((class, Some(name.to_owned())));
            }
        }
        now
    }

    pub fn call(&self, id: &str) -> Option<&CallState> {
        self.calls.iter().find(|c| c.record.id == id)
    }

    /// The call `id`, which the caller knows the run holds: its absence is an inconsistency.
    pub(crate) fn known_call(&self, id: &str) -> Result<&CallState, KernelError> {
        self.call(id).ok_or_else(|| KernelError::Inconsistent {
            run: self.run.to_string(),
            message: format!("no call {id}"),
        })
    }

    /// The in-doubt request of `step`, named by its call id or by the seq of its park.
    pub fn in_doubt(&self, step: &str) -> Option<&RequestState> {
        self.requests.values().find(|r| {
            r.kind == RequestKind::InDoubt && (r.call_id == step || r.park_seq.to_string() == step)
        })
    }

    fn call_mut(&mut self, id: &str) -> Result<&mut CallState, KernelError> {
        let run = self.run.to_string();
        self.calls
            .iter_mut()
            .find(|c| c.record.id == id)
            .ok_or_else(|| KernelError::Inconsistent {
                run,
                message: format!("event for unknown call {id}"),
            })
    }

    /// The first call of the run that has not reached a result.
    pub fn next_open_call(&self) -> Option<&CallState> {
        self.calls.iter().find(|c| c.result.is_none())
    }

    /// Whether the last model turn asked for nothing (the model is done) and no message of
    /// its person came after it.
    pub fn last_turn_was_final(&self) -> bool {
        self.turns > 0
            && !self.calls.iter().any(|c| c.turn + 1 == self.turns)
            && !self.message_pending()
    }

    /// Whether a session's person wrote after the latest model turn (the model answers next).
    pub fn message_pending(&self) -> bool {
        self.messages
            .last()
            .is_some_and(|m| m.after_turn == self.turns)
    }

    /// Whether this run is a chat session.
    pub fn is_session(&self) -> bool {
        self.settings.session.is_some()
    }

    pub fn session_grant_for(&self, actions: &[Action]) -> Option<&RequestId> {
        self.session_grants.iter().find_map(|g| {
            actions
                .iter()
                .all(|a| g.covers.contains(&(a.verb(), a.target())))
                .then_some(&g.request)
        })
    }

    /// A session grant of this run covering `actions` of class `risk` at `now`: the same class,
    /// every action on a covered resource pattern, not expired. Grants from older logs cover
    /// exactly the verb and target they were given for.
    pub fn session_grant_at(
        &self,
        actions: &[Action],
        risk: RiskClass,
        now: Timestamp,
    ) -> Option<&RequestId> {
        self.session_grants.iter().find_map(|g| {
            let covered = match g.class {
                None => actions
                    .iter()
                    .all(|a| g.covers.contains(&(a.verb(), a.target()))),
                Some(class) => {
                    class == risk
                        && g.expires_at.is_none_or(|e| now < e)
                        && actions
                            .iter()
                            .all(|a| g.patterns.contains(&session_pattern(a)))
                }
            };
            covered.then_some(&g.request)
        })
    }

    fn inconsistent(&self, message: impl Into<String>) -> KernelError {
        KernelError::Inconsistent {
            run: self.run.to_string(),
            message: message.into(),
        }
    }

    /// Folds the whole log. The first event must be `RunStarted`.
    pub fn fold(events: &[StoredEvent]) -> Result<Self, KernelError> {
        let first = events.first().ok_or_else(|| KernelError::Inconsistent {
            run: "?".into(),
            message: "empty log".into(),
        })?;
        let mut state = match RunEvent::from_stored(first)? {
            RunEvent::RunStarted {
                principal,
                task,
                model,
                workspace,
                policy_digest,
                settings,
                tools,
                tools_digest,
                profiles_digest,
            } => RunState {
                run: first.run.clone(),
                principal,
                task,
                model,
                workspace,
                policy_digest,
                tools_digest,
                profiles_digest,
                settings,
                tools,
                next_seq: first.seq + 1,
                turns: 0,
                turn_texts: Vec::new(),
                calls: Vec::new(),
                requests: BTreeMap::new(),
                session_grants: Vec::new(),
                denials: 0,
                parked: None,
                ended: None,
                asks: BTreeMap::new(),
                usage: Default::default(),
                messages: Vec::new(),
                awaiting: false,
                compaction: None,
                graph: Vec::new(),
                ceiling: None,
                staged: Staged::default(),
            },
            other @ (RunEvent::ModelResponded { .. }
            | RunEvent::CallReceived { .. }
            | RunEvent::AccessRefused { .. }
            | RunEvent::PolicyChanged { .. }
            | RunEvent::ToolsChanged { .. }
            | RunEvent::InDoubtResolved { .. }
            | RunEvent::AuditGap { .. }
            | RunEvent::JournalRejected { .. }
            | RunEvent::LimitReached { .. }
            | RunEvent::Halted { .. }
            | RunEvent::CallRefused { .. }
            | RunEvent::ActionProposed { .. }
            | RunEvent::PolicyDecided { .. }
            | RunEvent::ApprovalRequested { .. }
            | RunEvent::ApprovalGranted { .. }
            | RunEvent::ApprovalDenied { .. }
            | RunEvent::ApprovalRejected { .. }
            | RunEvent::RunParked { .. }
            | RunEvent::RunResumed { .. }
            | RunEvent::EffectStarted { .. }
            | RunEvent::EffectCompleted { .. }
            | RunEvent::EffectDenied { .. }
            | RunEvent::EffectJudging { .. }
            | RunEvent::EffectInDoubt { .. }
            | RunEvent::RunEnded { .. }
            | RunEvent::RequestRaised { .. }
            | RunEvent::RequestReplied { .. }
            | RunEvent::RequestExpired { .. }
            | RunEvent::ModelCallDenied { .. }
            | RunEvent::BudgetExceeded { .. }
            | RunEvent::AwaitingMessage { .. }
            | RunEvent::MessageReceived { .. }
            | RunEvent::HistoryCompacted { .. }
            | RunEvent::MessageRefused { .. }
            | RunEvent::GraphNode(_)) => {
                return Err(KernelError::Inconsistent {
                    run: first.run.to_string(),
                    message: format!("log starts with {} instead of run_started", other.kind()),
                });
            }
        };
        for stored in &events[1..] {
            if stored.seq != state.next_seq {
                return Err(state.inconsistent(format!(
                    "expected event {}, found {}",
                    state.next_seq, stored.seq
                )));
            }
            let event = RunEvent::from_stored(stored)?;
            state.apply(stored.seq, event)?;
            state.next_seq = stored.seq + 1;
        }
        Ok(state)
    }

    /// Applies one event. Public so the ring can advance its in-memory copy after an append
    /// without re-reading the log.
    pub fn apply(&mut self, seq: u64, event: RunEvent) -> Result<(), KernelError> {
        match event {
            RunEvent::RunStarted { .. } => return Err(self.inconsistent("second run_started")),
            RunEvent::ModelResponded {
                turn,
                text,
                calls,
                usage,
                ..
            } => {
                self.usage.add_recorded(usage.as_ref());
                if turn != self.turns {
                    return Err(self.inconsistent(format!(
                        "model turn {turn} recorded where turn {} was due",
                        self.turns
                    )));
                }
                for record in calls {
                    self.calls.push(CallState {
                        record,
                        turn,
                        actions: None,
                        digest: None,
                        decisions: Vec::new(),
                        request: None,
                        started: None,
                        started_by_person: false,
                        judging: None,
                        result: None,
                        in_doubt: None,
                        resolution: None,
                        received: false,
                    });
                }
                self.turn_texts.push(text);
                self.turns += 1;
            }
            // A refused request changes nothing in the run that records it.
            RunEvent::AccessRefused { .. } => {}
            // A client's own call: no model turn passes, nothing is said.
            RunEvent::CallReceived { call, .. } => {
                if self.calls.iter().any(|c| c.record.id == call.id) {
                    return Err(self.inconsistent(format!("call {} received twice", call.id)));
                }
                self.calls.push(CallState {
                    record: call,
                    turn: self.turns,
                    actions: None,
                    digest: None,
                    decisions: Vec::new(),
                    request: None,
                    started: None,
                    started_by_person: false,
                    judging: None,
                    result: None,
                    in_doubt: None,
                    resolution: None,
                    received: true,
                });
            }
            RunEvent::CallRefused {
                call_id,
                code,
                message,
                ..
            } => {
                self.call_mut(&call_id)?.result = Some(CallResult::Refused { code, message });
            }
            RunEvent::ActionProposed {
                call_id,
                actions,
                digest,
                ..
            } => {
                let call = self.call_mut(&call_id)?;
                call.actions = Some(actions);
                call.digest = Some(digest);
            }
            RunEvent::PolicyDecided {
                call_id,
                verdict,
                risk,
                reasons,
                ..
            } => {
                self.call_mut(&call_id)?.decisions.push(Decision {
                    verdict,
                    risk,
                    reasons,
                });
            }
            RunEvent::ApprovalRequested {
                call_id,
                request_id,
                digest,
                risk,
                presentation,
                action_digest,
                asked,
            } => {
                self.call_mut(&call_id)?.request = Some(request_id.clone());
                self.requests.insert(
                    request_id.clone(),
                    RequestState {
                        id: request_id,
                        kind: RequestKind::Approval,
                        call_id,
                        digest,
                        risk,
                        presentation,
                        park_seq: seq,
                        answer: None,
                        used: false,
                        resolution: None,
                        action_digest,
                        asked,
                        rejected: None,
                    },
                );
            }
            RunEvent::ApprovalGranted {
                request_id,
                approver,
                scope,
                digest,
                proof,
                binding,
                signature,
            } => {
                let request = self.request_mut(&request_id)?;
                request.answer = Some(RequestAnswer::Granted {
                    approver,
                    scope,
                    digest,
                    proof,
                    binding,
                    signature,
                });
            }
            RunEvent::ApprovalRejected {
                request_id, reason, ..
            } => {
                if reason.at_time_of_use() {
                    let request = self.request_mut(&request_id)?;
                    request.rejected = Some(reason);
                    let call_id = request.call_id.clone();
                    // The call asks again: a fresh request shows what would run now.
                    self.call_mut(&call_id)?.request = None;
                }
            }
            RunEvent::ApprovalDenied {
                request_id,
                approver,
                reason,
            } => {
                let request = self.request_mut(&request_id)?;
                request.answer = Some(RequestAnswer::Denied { approver, reason });
            }
            RunEvent::RunParked { request_id } => self.parked = Some(request_id),
            RunEvent::RunResumed { .. } => self.parked = None,
            RunEvent::EffectStarted {
                call_id,
                approval,
                session_grant,
            } => {
                if let Some(call) = self.calls.iter_mut().find(|c| c.record.id == call_id) {
                    call.started_by_person = approval.is_some() || session_grant.is_some();
                }
                if let Some(id) = &approval {
                    let request = self.request_mut(id)?;
                    request.used = true;
                    if let Some(RequestAnswer::Granted {
                        scope: Scope::Session,
                        ..
                    }) = &request.answer
                    {
                        let request_id = id.clone();
                        let (class, expires_at) = match &request.answer {
                            Some(RequestAnswer::Granted {
                                binding: Some(b), ..
                            }) => (Some(request.risk), Some(b.expires_at)),
                            Some(RequestAnswer::Granted { binding: None, .. })
                            | Some(RequestAnswer::Denied { .. })
                            | None => (None, None),
                        };
                        let actions = self
                            .call(&call_id)
                            .and_then(|c| c.actions.clone())
                            .unwrap_or_default();
                        self.session_grants.push(SessionGrant {
                            request: request_id,
                            covers: actions.iter().map(|a| (a.verb(), a.target())).collect(),
                            class,
                            patterns: actions.iter().map(session_pattern).collect(),
                            expires_at,
                        });
                    }
                }
                self.parked = None;
                self.call_mut(&call_id)?.started = Some(seq);
            }
            RunEvent::EffectCompleted {
                call_id,
                ok,
                result,
            } => {
                let call = self.call_mut(&call_id)?;
                call.judging = None;
                call.result = Some(CallResult::Completed { ok, result });
            }
            RunEvent::EffectJudging {
                call_id,
                ok,
                result,
            } => self.call_mut(&call_id)?.judging = Some((ok, result)),
            RunEvent::EffectDenied {
                call_id,
                denied,
                message,
            } => {
                self.denials += 1;
                self.parked = None;
                self.call_mut(&call_id)?.result = Some(CallResult::Denied { denied, message });
            }
            RunEvent::EffectInDoubt {
                call_id,
                request_id: None,
            } => {
                // Logs from before in-doubt effects parked: the call simply ended in doubt.
                self.call_mut(&call_id)?.result = Some(CallResult::InDoubt);
            }
            RunEvent::EffectInDoubt {
                call_id,
                request_id: Some(request_id),
            } => {
                let run = self.run.clone();
                let call = self.call_mut(&call_id)?;
                call.in_doubt = Some(request_id.clone());
                let digest = call.digest.clone().unwrap_or_else(|| Digest::of_bytes(b""));
                let presentation = Presentation {
                    title: format!("did `{}` ({call_id}) happen?", call.record.tool),
                    body: format!(
                        "{} {}\nIt started before an interruption and its result was not recorded.\nResolve with: warrant runs resolve {} --step {call_id} --as completed|retry|failed\n",
                        call.record.tool, call.record.args, run
                    ),
                };
                let risk = call
                    .decisions
                    .iter()
                    .map(|d| d.risk)
                    .max()
                    .unwrap_or(RiskClass::Change);
                self.requests.insert(
                    request_id.clone(),
                    RequestState {
                        id: request_id,
                        kind: RequestKind::InDoubt,
                        call_id,
                        digest,
                        risk,
                        presentation,
                        park_seq: seq,
                        answer: None,
                        used: false,
                        resolution: None,
                        action_digest: None,
                        asked: None,
                        rejected: None,
                    },
                );
            }
            RunEvent::InDoubtResolved {
                call_id,
                request_id,
                resolution,
                by,
                ..
            } => {
                self.request_mut(&request_id)?.resolution = Some((resolution, by));
                let call = self.call_mut(&call_id)?;
                call.resolution = Some(resolution);
                if resolution == Resolution::Retry {
                    // A fresh attempt: it starts (and is journaled) anew.
                    call.started = None;
                    call.in_doubt = None;
                }
            }
            RunEvent::PolicyChanged {
                to, reevaluated, ..
            } => {
                for id in &reevaluated {
                    self.call_mut(id)?.decisions.clear();
                }
                self.policy_digest = to;
            }
            RunEvent::ToolsChanged { to, .. } => self.tools_digest = Some(to),
            RunEvent::AuditGap { .. } => {}
            // A refusal to act on the log as it then was; the fold itself changes nothing.
            RunEvent::JournalRejected { .. } => {}
            RunEvent::LimitReached { .. } => {}
            RunEvent::Halted { .. } => {}
            RunEvent::RunEnded { outcome } => self.ended = Some(outcome),
            RunEvent::AwaitingMessage { usage, .. } => {
                self.usage.add_recorded(usage.as_ref());
                self.awaiting = true;
            }
            RunEvent::MessageReceived { by, text, .. } => {
                if !self.awaiting {
                    return Err(self.inconsistent("a message arrived while none was awaited"));
                }
                self.awaiting = false;
                self.messages.push(PersonMessage {
                    after_turn: self.turns,
                    by,
                    text,
                });
            }
            // A refusal to take a message; the fold changes nothing.
            RunEvent::MessageRefused { .. } => {}
            RunEvent::GraphNode(step) => {
                if step.status == crate::graph::NodeStatus::Running {
                    self.ceiling = step.ceiling.clone();
                } else if self.ceiling.as_ref().is_some_and(|c| c.node == step.node) {
                    self.ceiling = None;
                }
                self.graph.push(step);
            }
            RunEvent::HistoryCompacted {
                through_turn,
                summary,
                ..
            } => {
                self.compaction = Some(Compaction {
                    through_turn,
                    summary,
                });
            }
            RunEvent::RequestRaised {
                call_id,
                request_id,
                ask,
                expires_at,
                asked_of,
            } => {
                self.call_mut(&call_id)?;
                self.asks.insert(
                    request_id.clone(),
                    AskState {
                        id: request_id,
                        call_id,
                        ask,
                        raised_at_seq: seq,
                        expires_at,
                        asked_of,
                        reply: None,
                        expired: None,
                    },
                );
            }
            RunEvent::RequestReplied {
                call_id,
                request_id,
                by,
                reply,
            } => {
                let ask = self.ask_mut(&request_id)?;
                ask.reply = Some((reply, by));
                let outcome = crate::asks::result_for_model(ask);
                if let Some((ok, result)) = outcome {
                    self.call_mut(&call_id)?.result = Some(CallResult::Completed { ok, result });
                }
            }
            RunEvent::RequestExpired {
                call_id,
                request_id,
                expires_at,
            } => {
                let ask = self.ask_mut(&request_id)?;
                ask.expired = Some(expires_at);
                let outcome = crate::asks::result_for_model(ask);
                if let Some((ok, result)) = outcome {
                    self.call_mut(&call_id)?.result = Some(CallResult::Completed { ok, result });
                }
            }
            // The run ends in the same append; nothing else changes.
            RunEvent::ModelCallDenied { .. } => {}
            RunEvent::BudgetExceeded { usage, .. } => self.usage.add_recorded(usage.as_ref()),
        }
        Ok(())
    }

    fn ask_mut(&mut self, id: &RequestId) -> Result<&mut AskState, KernelError> {
        let run = self.run.to_string();
        self.asks
            .get_mut(id)
            .ok_or_else(|| KernelError::Inconsistent {
                run,
                message: format!("reply to unknown request {id}"),
            })
    }

    fn request_mut(&mut self, id: &RequestId) -> Result<&mut RequestState, KernelError> {
        let run = self.run.to_string();
        self.requests
            .get_mut(id)
            .ok_or_else(|| KernelError::Inconsistent {
                run,
                message: format!("answer to unknown request {id}"),
            })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;
    use warrant_core::Timestamp;

    /// A log written before deadlines, catalogue digests and in-doubt requests existed still
    /// folds: the fields it lacks read as absent, and its in-doubt effect as a plain result.
    #[test]
    fn an_older_log_is_read() {
        let run = RunId::parse("run-00aa").unwrap();
        let at = Timestamp::from_millis(1_700_000_000_000).unwrap();
        let stored = |seq: u64, kind: &str, payload: serde_json::Value| StoredEvent {
            run: run.clone(),
            seq,
            kind: kind.into(),
            version: 1,
            recorded_at: at,
            payload,
        };
        let events = vec![
            stored(
                1,
                "run_started",
                json!({
                    "principal": {"tenant": "t", "actor": "alice", "kind": "user"},
                    "task": "old", "model": "scripted:x", "workspace": "/w",
                    "policy_digest": warrant_core::Digest::of_bytes(b"p"),
                    "settings": {"max_denials": 3, "max_turns": 5},
                    "tools": ["run_command"]
                }),
            ),
            stored(
                2,
                "model_responded",
                json!({"turn": 0, "calls": [{"id": "c1", "tool": "run_command", "args": {"argv": ["true"]}}], "model": "m"}),
            ),
            stored(3, "effect_in_doubt", json!({"call_id": "c1"})),
        ];
        let state = RunState::fold(&events).unwrap();
        assert_eq!(state.settings.deadline, None);
        assert_eq!(
            (state.tools_digest.clone(), state.profiles_digest.clone()),
            (None, None)
        );
        assert_eq!(state.call("c1").unwrap().result, Some(CallResult::InDoubt));
        assert_eq!(state.next_seq, 4);
    }
}
