//! One tool call through the ring: normalization, the decision point, the approval gate and
//! parking when nobody can answer now.

use super::*;

impl Ring<'_> {
    /// Drives one call through the ring until it has a result or must wait for a person.
    pub fn process_call(
        &self,
        state: &mut RunState,
        call_id: &str,
        env: &ToolEnv,
        prompter: &mut dyn Prompter,
    ) -> Result<CallStep, KernelError> {
        // A call that has not started checks the kill switch and cancellations in its commits.
        self.stops_to_commit(state, call_id);
        let step = match self.call_steps(state, call_id, self.tools, env, prompter) {
            Ok(step) => {
                if !state.staged.is_empty() {
                    // Every path ends in an append today; this keeps a new one from losing
                    // what it decided.
                    self.append(state, vec![], None, vec![]).map(|()| step)
                } else {
                    Ok(step)
                }
            }
            Err(e) => {
                self.unstage(state);
                Err(e)
            }
        };
        self.stops_checked();
        match step {
            // A commit found the run stopped, and wrote nothing: what stopped it is read and
            // recorded (or, lifted meanwhile, the call is processed again at the next step).
            Err(KernelError::Store(warrant_store::StoreError::Stopped { .. })) => {
                self.stop_if_signalled(state)?;
                Ok(CallStep::Done)
            }
            other => other,
        }
    }

    /// The steps of one call, up to its result or a park. A call's proposal and decisions
    /// are staged and committed with what acts on them, so an effect costs two transactions:
    /// one before it starts, one after it ends.
    pub(super) fn call_steps(
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
            let call = state.known_call(call_id)?.clone();
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
                let resolution = match call.resolution {
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
                    Some(resolution) => resolution,
                };
                let (ok, note) = match resolution {
                    Resolution::Completed => (
                        true,
                        "a person confirmed this effect happened; its output was not recorded",
                    ),
                    Resolution::Failed => (false, "a person recorded this effect as failed"),
                    // A retry clears the doubt when folded, so it never reaches here.
                    Resolution::Retry => (false, "retry was not applied"),
                };
                self.append(
                    state,
                    vec![RunEvent::EffectCompleted {
                        call_id: call_id.to_owned(),
                        ok,
                        result: InDoubtOutcome {
                            resolved: resolution,
                            by: resolved_by,
                            note: note.to_owned(),
                        }
                        .to_value(),
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
                    Some(tool) => match tools.validate(&name, &call.record.args).and_then(|()| {
                        // The run's identity, read from its log, for tools that record it.
                        let mut scoped = env.clone();
                        scoped.run = Some(crate::tool::RunContext {
                            run: state.run.clone(),
                            principal: state.principal.clone(),
                            model: state.model.clone(),
                            call: call_id.to_owned(),
                            tools: state.tools.clone(),
                            spawn: state.settings.spawn.as_deref().cloned(),
                            policy_digest: state.policy_digest.clone(),
                            profiles_digest: state.profiles_digest.clone(),
                            seen_untrusted: state.calls.iter().any(|c| {
                                matches!(c.result, Some(crate::CallResult::Completed { .. }))
                            }),
                            skills: state.settings.skills.clone(),
                        });
                        tool.normalize(&call.record.args, &scoped)
                            .and_then(|actions| held_to_profile(state, actions))
                    }) {
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

            // 1b. The delegation token before policy: an action outside it, or a token that
            // expired or was revoked, is refused before policy decides, so no person is ever
            // asked for what the token could not allow. Checked again right before the effect.
            if call.decisions.is_empty()
                && call.started.is_none()
                && !env.delegation_late
                && let Some((code, message)) = self.delegation_refusal(state, &actions)?
            {
                self.append(
                    state,
                    vec![RunEvent::CallRefused {
                        call_id: call_id.to_owned(),
                        tool: call.record.tool,
                        code: code.to_owned(),
                        message,
                    }],
                    None,
                    vec![],
                )?;
                return Ok(CallStep::Done);
            }

            // 2. Policy, once per action; the decisions are journaled before anyone acts on them.
            if call.decisions.len() < actions.len() {
                let events = actions
                    .iter()
                    .enumerate()
                    .skip(call.decisions.len())
                    .map(|(i, action)| {
                        let mut v = self.pdp.decide(&state.principal, action, &state.workspace);
                        // The run's agent profile narrows policy, never widens it.
                        if let Some(pin) = state.settings.agent_profile.as_deref() {
                            v = pin.narrow(v, &call.record.tool, action);
                        }
                        // So does the permission ceiling of the graph node that runs now.
                        if let Some(ceiling) = state.ceiling.as_ref() {
                            v = ceiling.narrow(v, action, &state.workspace);
                        }
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
            // The effect-class ceiling: an action whose class is worse than the run may reach
            // is refused before any person is asked or anything starts.
            if call.started.is_none()
                && let Some((ceiling, skill)) = state.ceiling_now()
                && let Some(worst) = call.decisions.iter().map(|d| d.risk).max()
                && worst > ceiling
            {
                let tool = call.record.tool.clone();
                let by = skill.map_or_else(String::new, |s| {
                    format!(" (narrowed by the skill `{s}`, activated in this run)")
                });
                self.append(
                    state,
                    vec![RunEvent::CallRefused {
                        call_id: call_id.to_owned(),
                        tool,
                        code: "W-ENVELOPE-006".to_owned(),
                        message: format!(
                            "this call reaches the risk class `{}`, above the run's ceiling `{}`{by}; nothing ran",
                            worst.as_str(),
                            ceiling.as_str()
                        ),
                    }],
                    None,
                    vec![],
                )?;
                return Ok(CallStep::Done);
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
    pub(super) fn ask_or_park(
        &self,
        state: &mut RunState,
        req: &RequestState,
        reasons: &[ReasonRecord],
        session: &str,
        prompter: &mut dyn Prompter,
    ) -> Result<Option<CallStep>, KernelError> {
        // Nobody is asked for a run that is stopped: a check left to the call's commits is made
        // now (its read is forgotten below, like any read before a person's answer).
        if self.stops_in_commit.borrow().is_some() && self.stop_if_signalled(state)? {
            return Ok(Some(CallStep::Done));
        }
        let asked = req
            .asked
            .as_ref()
            .map(|a| a.describe())
            .unwrap_or_else(|| "any person".into());
        // The person is shown what the journal keeps: secrets named, never printed.
        let mut shown = serde_json::json!([req.presentation.title, req.presentation.body]);
        self.confidential.redact(&mut shown);
        let (title, body) = (
            shown[0].as_str().unwrap_or_default(),
            shown[1].as_str().unwrap_or_default(),
        );
        let view = PromptView {
            run: &state.run,
            request: &req.id,
            risk: req.risk,
            title,
            body,
            digest: &req.digest,
            reasons,
            session,
            asked: &asked,
        };
        self.forget_clear_read();
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
}

/// A subagent held to a profile runs no command under another one, whichever tool made it.
fn held_to_profile(
    state: &RunState,
    actions: Vec<Action>,
) -> Result<Vec<Action>, crate::tool::Refusal> {
    let Some(held) = state
        .settings
        .spawn
        .as_ref()
        .and_then(|s| s.profile.as_deref())
    else {
        return Ok(actions);
    };
    for action in &actions {
        if let Action::ShellExec { profile, .. } = action
            && profile != held
        {
            return Err(crate::tool::Refusal {
                code: "W-SPAWN-005".into(),
                message: format!(
                    "this subagent's commands are held to the subprocess profile `{held}` its parent gave it; `{profile}` was asked for and nothing was run"
                ),
            });
        }
    }
    Ok(actions)
}
