//! A run's life in the journal: start, load (checked against the signed chain), the one
//! append every event goes through (held events of a batch, the fence, the audit facts),
//! model responses, limits, end and resume.

use super::*;

impl Ring<'_> {
    /// Starts a run: its first event fixes the principal for good.
    pub fn start(&self, spec: NewRunSpec) -> Result<RunState, KernelError> {
        self.start_as(spec, self.ids.run_id())
    }

    /// Starts a run under the id `run` (a subagent's, derived from its parent and call, so a
    /// second start of the same child is refused by the store instead of making another).
    pub fn start_as(&self, spec: NewRunSpec, run: RunId) -> Result<RunState, KernelError> {
        let sealer = self.sealer;
        let started = self.start_with(spec, run, |new, events| {
            Ok((self.store.create_run(new, events, sealer)?, ()))
        })?;
        Ok(started.0)
    }

    /// Starts a run that this process drives: it is created leased to `holder` for `ttl`, in
    /// the transaction that writes its first event.
    pub fn start_leased(
        &self,
        spec: NewRunSpec,
        holder: &str,
        ttl: std::time::Duration,
    ) -> Result<(RunState, warrant_store::Lease), KernelError> {
        let sealer = self.sealer;
        self.start_with(spec, self.ids.run_id(), |new, events| {
            self.store
                .create_run_leased(new, events, sealer, holder, ttl)
        })
    }

    /// The run's first event drafted, then written by `create` (with whatever else it does in
    /// the same transaction, such as the lease), told to the observer and folded.
    fn start_with<T>(
        &self,
        spec: NewRunSpec,
        run: RunId,
        create: impl FnOnce(
            &NewRun,
            Vec<warrant_store::EventDraft>,
        ) -> Result<(Vec<StoredEvent>, T), warrant_store::StoreError>,
    ) -> Result<(RunState, T), KernelError> {
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
        let draft = self.draft(&spec.principal, &run, 1, &event, None)?;
        let new = NewRun {
            run,
            tenant: warrant_store::Tenant::of(&spec.principal),
            actor: spec.principal.actor.clone(),
            task: spec.task,
            status: if spec.queued {
                RunStatus::Queued
            } else {
                RunStatus::Running
            },
        };
        let (stored, then) = create(&new, vec![draft])?;
        for s in &stored {
            self.observer.committed(s, &event);
        }
        Ok((self.fold_opened(stored)?, then))
    }

    /// Folds a run to act on it: its events are checked against their signed audit records
    /// first, and a mismatch is refused and recorded ([`crate::journal`]).
    pub fn load(&self, run: &RunId) -> Result<RunState, KernelError> {
        let events = self.verified_events(run)?;
        if events.is_empty() {
            return Err(KernelError::UnknownRun(run.to_string()));
        }
        self.fold_opened(events)
    }

    /// Folds a run without checking its journal: only for reading (listings, other runs'
    /// budget totals), never for deciding what this run does next.
    pub fn load_unverified(&self, run: &RunId) -> Result<RunState, KernelError> {
        let events = self.store.events(run)?;
        if events.is_empty() {
            return Err(KernelError::UnknownRun(run.to_string()));
        }
        self.fold_opened(events)
    }

    /// Folds stored events after opening what the journal holds sealed: the ring acts on what
    /// was decided, secrets included; the store keeps only their sealed form.
    fn fold_opened(&self, mut events: Vec<StoredEvent>) -> Result<RunState, KernelError> {
        for e in &mut events {
            self.confidential.open(&e.run, &mut e.payload);
        }
        RunState::fold(&events)
    }

    /// The stored form of `event` at `seq`: its payload with every secret sealed, and its
    /// audit facts with every secret named, never shown.
    pub(crate) fn draft(
        &self,
        principal: &Principal,
        run: &RunId,
        seq: u64,
        event: &RunEvent,
        state: Option<&RunState>,
    ) -> Result<EventDraft, KernelError> {
        let mut payload = event.payload()?;
        self.confidential.seal(run, &mut payload);
        let mut audit = audit_facts(principal, run, seq, event, state)?;
        self.confidential.redact(&mut audit);
        Ok(EventDraft {
            kind: event.kind().to_owned(),
            version: EVENT_VERSION,
            payload,
            audit,
            usage: crate::model_gate::recorded_usage(event),
        })
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
        self.record_rejection(
            state,
            request,
            RejectReason::FromCommand,
            detail,
            approver_of(who, "command"),
        )
    }

    /// Records that `who`'s answer to an MCP server's elicitation was refused because it held
    /// a secret (`detail` names the kinds found, never the value); the request stays open.
    pub fn record_refused_answer(
        &self,
        state: &mut RunState,
        request: &RequestId,
        who: &Principal,
        via: &str,
        detail: String,
    ) -> Result<(), KernelError> {
        self.record_rejection(
            state,
            request,
            RejectReason::SecretInAnswer,
            detail,
            approver_of(who, via),
        )
    }

    /// Records that `who` approved a proposal to change an agent profile that could not be
    /// applied (`detail`: the applicator's refusal, with its code); nothing was written and
    /// the request stays open, to be declined.
    pub fn record_refused_proposal(
        &self,
        state: &mut RunState,
        request: &RequestId,
        who: &Principal,
        via: &str,
        detail: String,
    ) -> Result<(), KernelError> {
        self.record_rejection(
            state,
            request,
            RejectReason::StaleProposal,
            detail,
            approver_of(who, via),
        )
    }

    /// Records a refused answer; the request stays as it was.
    pub(super) fn record_rejection(
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
        self.append_in(state, events, status, requests, false)
    }

    /// Appends an effect's completion, recorded whatever is set now; its commit reads the stop
    /// signals, and a clear answer stands for the next model step's read ([`Ring::commit_read`]).
    pub(crate) fn append_completion(
        &self,
        state: &mut RunState,
        events: Vec<RunEvent>,
    ) -> Result<(), KernelError> {
        self.append_in(state, events, None, vec![], true)
    }

    /// [`Ring::append`]; with `read_stops`, as [`Ring::append_completion`].
    fn append_in(
        &self,
        state: &mut RunState,
        events: Vec<RunEvent>,
        status: Option<RunStatus>,
        requests: Vec<RequestUpdate>,
        read_stops: bool,
    ) -> Result<(), KernelError> {
        let staged = std::mem::take(&mut state.staged);
        let held = staged.events.len();
        // A request's summary is what listings show: its secrets are named, never kept.
        let requests = requests
            .into_iter()
            .map(|update| match update {
                RequestUpdate::Open { id, mut summary } => {
                    self.confidential.redact(&mut summary);
                    RequestUpdate::Open { id, summary }
                }
                answered @ RequestUpdate::Answered { .. } => answered,
            })
            .collect();
        // Every staged event took the next number.
        let expected_seq = state.next_seq - held as u64;
        let crate::state::Staged {
            events: staged_events,
            undo,
            before_answer,
        } = staged;
        let (mut batch, mut drafts): (Vec<RunEvent>, Vec<EventDraft>) =
            staged_events.into_iter().unzip();
        let committed = self.draft_all(state, &events).and_then(|fresh| {
            drafts.extend(fresh);
            batch.extend(events);
            self.observer.before_append(&batch);
            let append = Append {
                run: state.run.clone(),
                expected_seq,
                events: drafts,
                status,
                requests,
                fence: self.fence.get(),
            };
            let guarded = self.stops_in_commit.borrow().as_ref() == Some(&state.run)
                && !self.unguarded_commits.get();
            Ok(if guarded {
                super::envelope::HaltSubject::of(state).with(|subject| {
                    self.store
                        .append_unless_stopped(append, subject, self.sealer)
                })?
            } else if read_stops {
                let (stored, stopped) =
                    super::envelope::HaltSubject::of(state).with(|subject| {
                        self.store
                            .append_reading_stops(append, subject, self.sealer)
                    })?;
                *self.commit_read.borrow_mut() =
                    (!stopped).then(|| (state.run.clone(), std::time::Instant::now()));
                stored
            } else {
                self.store.append(append, self.sealer)?
            })
        });
        let stored = match committed {
            Ok(stored) => stored,
            Err(e) => {
                // Nothing was written: the state goes back to what the journal holds.
                put_back(
                    state,
                    crate::state::Staged {
                        events: Vec::new(),
                        undo,
                        before_answer,
                    },
                );
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
    pub(super) fn draft_all(
        &self,
        state: &RunState,
        events: &[RunEvent],
    ) -> Result<Vec<EventDraft>, KernelError> {
        events
            .iter()
            .enumerate()
            .map(|(i, event)| {
                let seq = state.next_seq + i as u64;
                self.draft(&state.principal, &state.run, seq, event, Some(state))
            })
            .collect()
    }

    /// Applies a step of call `call_id` (its proposal or its policy decisions) to `state`
    /// without committing it: the next append commits it in the same transaction, together
    /// with the event that acts on it. Durability needs a point before an effect starts, not
    /// one per step; a crash before that point loses the staged steps, and a resume decides
    /// them again, since nothing was acted on.
    pub(super) fn stage(
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
    pub(super) fn unstage(&self, state: &mut RunState) {
        let staged = std::mem::take(&mut state.staged);
        put_back(state, staged);
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
        let event = model_responded(state, request, text, calls, usage, model);
        self.append(state, vec![event], None, vec![])
    }

    /// Applies a model's answer that asks for calls without committing it: the append of the
    /// step after it (its first call's start, denial or approval request, or whatever stops
    /// the run first) commits it in the same transaction. The answer acts on nothing by
    /// itself, so durability needs no point of its own: a crash before that append loses it,
    /// and a resume asks the model again, as it would had the answer never arrived (as for a
    /// final answer, [`Ring::record_final_response`]). If that append fails, or the call's
    /// steps end in an error, the state goes back to before the answer.
    pub fn hold_model_response(
        &self,
        state: &mut RunState,
        request: Option<ModelRequest>,
        text: Option<String>,
        calls: Vec<CallRecord>,
        usage: Option<Value>,
        model: String,
    ) -> Result<(), KernelError> {
        if !state.staged.is_empty() {
            return Err(KernelError::Inconsistent {
                run: state.run.to_string(),
                message: "a model answer cannot be held over uncommitted steps".to_owned(),
            });
        }
        let event = model_responded(state, request, text, calls, usage, model);
        let seq = state.next_seq;
        let draft = self.draft(&state.principal, &state.run, seq, &event, Some(state))?;
        let before = Box::new(state.clone());
        if let Err(e) = state.apply(seq, event.clone()) {
            *state = *before;
            return Err(e);
        }
        state.next_seq = seq + 1;
        state.staged.events.push((event, draft));
        state.staged.before_answer = Some(before);
        Ok(())
    }

    /// Journals a tool call a client made directly (a caller of `warrant mcp serve`), before
    /// anything decides on it; [`Ring::process_call`] then takes it through the ring.
    pub fn record_received_call(
        &self,
        state: &mut RunState,
        client: String,
        call: CallRecord,
    ) -> Result<(), KernelError> {
        self.append(
            state,
            vec![RunEvent::CallReceived { client, call }],
            None,
            vec![],
        )
    }

    /// Records a request refused before it reached the ring and ends the run that records it
    /// (one append: the refusal and the end).
    pub fn record_refused_access(
        &self,
        state: &mut RunState,
        transport: String,
        status: u16,
        reason: String,
        suppressed: u64,
    ) -> Result<(), KernelError> {
        self.append(
            state,
            vec![
                RunEvent::AccessRefused {
                    transport,
                    status,
                    reason: reason.clone(),
                    suppressed,
                },
                RunEvent::RunEnded {
                    outcome: Outcome::Stopped { reason },
                },
            ],
            Some(RunStatus::Stopped),
            vec![],
        )
    }

    /// Whether a final answer arriving now would end the run completed: no cancellation, no
    /// passed deadline, the denials under their cap (what the next step checks first).
    pub fn may_complete(&self, state: &RunState) -> Result<bool, KernelError> {
        Ok(self.stop_reason(state, self.clock.now())?.is_none()
            && state.denials < state.settings.max_denials)
    }

    /// Journals a model's final answer (one that asks for no call) and the run's completed end
    /// in one transaction: nothing acts between them, so durability needs one point, not two.
    /// A crash before it loses the answer, and a resume asks the model again, as it would if
    /// the answer had never arrived. Call it only where [`Ring::may_complete`] holds.
    pub fn record_final_response(
        &self,
        state: &mut RunState,
        request: Option<ModelRequest>,
        text: Option<String>,
        usage: Option<Value>,
        model: String,
    ) -> Result<(), KernelError> {
        let turn = state.turns;
        self.append(
            state,
            vec![
                RunEvent::ModelResponded {
                    turn,
                    text,
                    calls: vec![],
                    usage,
                    model,
                    request,
                },
                RunEvent::RunEnded {
                    outcome: Outcome::Completed,
                },
            ],
            Some(RunStatus::Completed),
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
}

/// The approver a refused answer names: who answered, through which front end.
/// The event of a model's answer to the run's current turn.
fn model_responded(
    state: &RunState,
    request: Option<ModelRequest>,
    text: Option<String>,
    calls: Vec<CallRecord>,
    usage: Option<Value>,
    model: String,
) -> RunEvent {
    RunEvent::ModelResponded {
        turn: state.turns,
        text,
        calls,
        usage,
        model,
        request,
    }
}

fn approver_of(who: &Principal, via: &str) -> Approver {
    Approver {
        tenant: who.tenant.clone(),
        actor: who.actor.clone(),
        via: via.to_owned(),
    }
}
