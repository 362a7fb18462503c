//! The effect itself: grants checked at time of use, the executor reached with `Authorized`
//! values, and changes that wait for a person's judgement.

use super::*;

impl Ring<'_> {
    /// Check a granted answer at time of use against `now_digest`; when it may not be used, the
    /// refusal is recorded (`approval_rejected`) and `true` returned.
    pub(super) fn refuse_grant(
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
    pub(super) fn check_grant(
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
    pub(super) fn execute(
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
        // The spawn envelope, before a subagent's start is recorded: a refusal is a durable,
        // typed event and nothing starts.
        if already.is_none()
            && let Some((code, message)) = self.spawn_refusal(state, call_id, actions)
        {
            let tool = state
                .call(call_id)
                .map(|c| c.record.tool.clone())
                .unwrap_or_default();
            self.append(
                state,
                vec![RunEvent::CallRefused {
                    call_id: call_id.to_owned(),
                    tool,
                    code: code.to_owned(),
                    message,
                }],
                None,
                vec![],
            )?;
            return Ok(CallStep::Done);
        }
        // The kill switch, read again right before the effect: a switch set while this call
        // waited for a person (or a queue) stops it here. A step's read moments ago, with
        // nobody asked since, stands for it.
        if let Some(halt) = self.halt_before_effect(state) {
            self.stop_halted(state, halt)?;
            return Ok(CallStep::Done);
        }
        // A run under a delegation token: within the token, and the token still good. Then
        // rate limits. Either refusal is a typed, audited refusal the model is told of.
        let refusal = match already {
            Some(_) => None,
            None => match self.delegation_refusal(state, actions)? {
                Some((code, message)) => Some((code.to_owned(), message)),
                None => self
                    .rate_refusal(state, actions)
                    .map(|message| ("W-ENVELOPE-005".to_owned(), message)),
            },
        };
        if let Some((code, message)) = refusal {
            let tool = state
                .call(call_id)
                .map(|c| c.record.tool.clone())
                .unwrap_or_default();
            self.append(
                state,
                vec![RunEvent::CallRefused {
                    call_id: call_id.to_owned(),
                    tool,
                    code,
                    message,
                }],
                None,
                vec![],
            )?;
            return Ok(CallStep::Done);
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
        // Past the effect's start: its outcome is recorded whatever is set from here on.
        self.stops_checked();
        // A person's go-ahead, as recorded in EffectStarted (also after a resume).
        let by_person = state.call(call_id).is_some_and(|c| c.started_by_person);
        let authorized: Vec<Authorized<Action>> = actions
            .iter()
            .map(|a| Authorized::new(a.clone(), grant_of(state, started_seq, by_person)))
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
        let deadline = state.settings.deadline;
        let subject = super::envelope::HaltSubject::of(state);
        let may_read = |p: &CanonicalPath| {
            self.pdp
                .decide(&principal, &Action::FsRead { path: p.clone() }, &workspace)
                .verdict
                == Verdict::Allow
        };
        let stop = || {
            if self.interrupt_requested() {
                return Some("stopped by the person (Ctrl-C)".to_owned());
            }
            // A kill switch set while the effect runs stops it too (and fails closed); so does
            // the run's cancellation. Both are one read.
            let signals = self.signals_of(&subject);
            if let Some(halt) = super::envelope::halt_in(&signals) {
                return Some(halt.reason());
            }
            let cancel = signals
                .ok()
                .and_then(|s| s.cancels.into_iter().next().flatten());
            super::answers::stop_reason_in(cancel, deadline, self.clock.now())
        };
        // A subagent is started (or continued) by the spawner, not by a tool: driving a run is
        // the agent loop's job. It parks its parent when it waits for a person.
        if let Some(spawn) = authorized
            .iter()
            .find_map(|a| a.narrow::<warrant_core::AgentSpawn>())
            && let Some(spawner) = self.spawner
        {
            match spawner.spawn(&spawn, state, &stop) {
                crate::tool::SpawnOutcome::Ended(outcome) => {
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
                    return Ok(CallStep::Done);
                }
                crate::tool::SpawnOutcome::Parked { request } => {
                    self.append(
                        state,
                        vec![RunEvent::RunParked {
                            request_id: request.clone(),
                        }],
                        Some(RunStatus::Parked),
                        vec![],
                    )?;
                    return Ok(CallStep::Parked(request));
                }
            }
        }
        // What the tool's peer asks during the effect (an MCP server's sampling) is answered
        // by runs of its own, linked to this call, through the spawner.
        let peers = Peers {
            ring: self,
            state: std::cell::RefCell::new(&mut *state),
            call: call_id,
            asked: std::cell::Cell::new(0),
            stop: &stop,
        };
        let mut outcome = tool.execute_with(&authorized, env, &may_read, &stop, &peers);
        let pending = outcome
            .result
            .as_object_mut()
            .and_then(|m| m.remove(PENDING_JUDGEMENT));
        if let Some(pending) = pending {
            return self.open_judgement(state, call_id, actions, outcome, &pending);
        }
        self.append_completion(
            state,
            vec![RunEvent::EffectCompleted {
                call_id: call_id.to_owned(),
                ok: outcome.ok,
                result: outcome.result,
            }],
        )?;
        Ok(CallStep::Done)
    }

    /// Journal an effect whose result waits for a person, with the approval request that shows
    /// what waits (bound to the actions, what is shown and the tool's digest of it).
    pub(super) fn open_judgement(
        &self,
        state: &mut RunState,
        call_id: &str,
        actions: &[Action],
        outcome: EffectResult,
        pending: &Value,
    ) -> Result<CallStep, KernelError> {
        // A judgement that does not parse is still asked, as destructive, showing nothing.
        let pending: PendingJudgement =
            serde_json::from_value(pending.clone()).unwrap_or(PendingJudgement {
                risk: RiskClass::Destructive,
                title: String::new(),
                body: String::new(),
                digest: String::new(),
            });
        let risk = pending.risk;
        let presentation = crate::Presentation {
            title: pending.title.clone(),
            body: pending.body.clone(),
        };
        let actions_digest =
            digest_of(&actions.to_vec()).map_err(|e| KernelError::Encode(e.to_string()))?;
        let bound = bound_digest(
            &actions_digest,
            &presentation,
            &json!({"judged": pending.digest}),
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
    pub(super) fn judge_step(
        &self,
        state: &mut RunState,
        call_id: &str,
        tools: &dyn ToolRegistry,
        env: &ToolEnv,
        prompter: &mut dyn Prompter,
    ) -> Result<Option<CallStep>, KernelError> {
        let call = state.known_call(call_id)?.clone();
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
                    grant_of(state, started_seq, call.started_by_person),
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

impl Ring<'_> {
    /// Why a spawn among `actions` may not start, by the spawn envelope the run was started
    /// under: `(code, message)`, or `None` when it may (or there is no spawn).
    fn spawn_refusal(
        &self,
        state: &RunState,
        call_id: &str,
        actions: &[Action],
    ) -> Option<(&'static str, String)> {
        let depth = actions.iter().find_map(|a| {
            if let Action::AgentSpawn { depth, .. } = a {
                Some(*depth)
            } else {
                None
            }
        })?;
        if self.spawner.is_none() {
            return Some((
                "W-SPAWN-004",
                "this front end cannot start subagents; nothing was started".to_owned(),
            ));
        }
        let Some(envelope) = state.settings.spawn.as_deref() else {
            return Some((
                "W-SPAWN-004",
                "this run was started without a spawn envelope, so it cannot start subagents"
                    .to_owned(),
            ));
        };
        if depth > envelope.max_depth {
            return Some((
                "W-SPAWN-001",
                format!(
                    "a subagent here would be {depth} levels deep, past the spawn envelope's max_depth of {} ([run] max_depth); nothing was started",
                    envelope.max_depth
                ),
            ));
        }
        // Calls run one at a time and a subagent runs inside its parent's call, so when this
        // one starts the subagents running are it and the `depth - 1` it would run inside.
        if let Some(limit) = envelope.max_concurrent
            && depth > limit
        {
            return Some((
                "W-SPAWN-007",
                format!(
                    "a subagent here would make {depth} subagents running at once (it and the {} it would run inside), past the agent profile's spec.runtime.subagents.max_concurrent of {limit}; nothing was started",
                    depth - 1
                ),
            ));
        }
        let started = state
            .calls
            .iter()
            .filter(|c| c.record.id != call_id && c.started.is_some())
            .filter(|c| {
                c.actions
                    .iter()
                    .flatten()
                    .any(|a| matches!(a, Action::AgentSpawn { .. }))
            })
            .count();
        if started >= envelope.max_children as usize {
            return Some((
                "W-SPAWN-002",
                format!(
                    "this run has started {started} subagents, the spawn envelope's max_children ([run] max_children = {}); nothing was started",
                    envelope.max_children
                ),
            ));
        }
        None
    }
}

/// What an authorization made now carries about its run.
fn grant_of(state: &RunState, started_seq: u64, by_person: bool) -> crate::authorized::Grant {
    // The approval recorded for the call whose effect started at `started_seq`.
    let approver = state
        .calls
        .iter()
        .find(|c| c.started == Some(started_seq))
        .and_then(|c| c.request.as_ref())
        .and_then(|r| state.requests.get(r))
        .and_then(|r| match &r.answer {
            Some(crate::state::RequestAnswer::Granted { approver, .. }) => Some(approver.clone()),
            Some(crate::state::RequestAnswer::Denied { .. }) | None => None,
        });
    crate::authorized::Grant {
        approver: approver.filter(|_| by_person),
        run: state.run.clone(),
        started_seq,
        by_person,
        principal: state.principal.clone(),
        seen_untrusted: state
            .calls
            .iter()
            .any(|c| matches!(c.result, Some(crate::CallResult::Completed { .. }))),
    }
}

/// The ring's answer to what a tool's peer asks while its effect runs: each sampling request a
/// child run started by the spawner (the host), numbered within the call so the same call
/// names the same children.
/// An elicitation is a request raised in the run itself, so the run's state is lent to the
/// peers while the effect runs (and advanced by what the request's reply appends).
struct Peers<'a, 'r> {
    ring: &'a Ring<'r>,
    state: std::cell::RefCell<&'a mut RunState>,
    call: &'a str,
    asked: std::cell::Cell<usize>,
    stop: crate::tool::StopCheck<'a>,
}

impl crate::tool::PeerAsks for Peers<'_, '_> {
    fn sample(&self, ask: &crate::events::SamplingAsk) -> crate::tool::Sampled {
        let ordinal = self.asked.get();
        self.asked.set(ordinal + 1);
        match self.ring.spawner {
            Some(spawner) => {
                let parent = self.state.borrow();
                spawner.sample(&parent, self.call, ordinal, ask, self.stop)
            }
            None => crate::tool::PeerAsks::sample(&crate::tool::NoPeerAsks, ask),
        }
    }

    fn elicit(&self, ask: &crate::elicit::ElicitAsk) -> crate::elicit::Elicited {
        let mut state = self.state.borrow_mut();
        self.ring
            .elicit_in(&mut state, self.call, ask, self.stop)
            .unwrap_or_else(|e| {
                crate::elicit::Elicited::refused(
                    "W-MCP-017",
                    format!("the request to the person could not be recorded: {e}"),
                )
            })
    }
}
