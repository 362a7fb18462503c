//! The autonomy envelope at an effect boundary: the store-shared kill switch, and the standing
//! of the person the run acts for in the identity directory. Checked before a
//! step of the loop (a model call, the next tool call) and again right before an effect is
//! recorded as started, so a switch set while a run waited (at a prompt, in a queue) still
//! stops it. A switch that cannot be read stops the run too: the envelope fails closed.

use warrant_store::{KillSubject, StopSignals, StoreError, Taken};

use super::*;
use crate::events::{Halt, ToolReach};

/// How long a step's read that found no kill switch stands for the read right before its
/// effect (when nobody was asked in between).
pub(crate) const CLEAR_READ_STANDS: std::time::Duration = std::time::Duration::from_millis(250);

/// What the kill switch is checked against for one run, owned so a running effect can keep
/// checking it while the run's state is borrowed elsewhere.
pub(crate) struct HaltSubject {
    tenant: String,
    actors: Vec<String>,
    runs: Vec<RunId>,
}

impl HaltSubject {
    pub(crate) fn of(state: &RunState) -> Self {
        // A subagent's id extends its parent's, so the run's ancestors are its id's prefixes.
        let depth = state.settings.spawn.as_ref().map_or(0, |s| s.depth);
        let mut runs = vec![state.run.clone()];
        let mut above = state.run.as_str();
        for _ in 0..depth {
            let Some((parent, _)) = above.rsplit_once('-') else {
                break;
            };
            above = parent;
            if let Some(run) = RunId::parse(above) {
                runs.push(run);
            }
        }
        let principal = &state.principal;
        let mut actors = vec![principal.actor.clone()];
        actors.extend(principal.on_behalf_of.clone());
        Self {
            tenant: principal.tenant.clone(),
            actors,
            runs,
        }
    }
}

impl HaltSubject {
    /// The run and its ancestors, the run first: whose cancellation stops it.
    pub(crate) fn runs(&self) -> &[RunId] {
        &self.runs
    }

    /// `f` of this subject as the store reads it.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&KillSubject<'_>) -> R) -> R {
        let actors: Vec<&str> = self.actors.iter().map(String::as_str).collect();
        f(&KillSubject {
            tenant: &self.tenant,
            actors: &actors,
            runs: &self.runs,
        })
    }
}

/// Whether `call` is yet to start its effect and has nothing of an earlier effect to finish
/// (a judgement, a doubt): every path of it to an effect then passes a commit first.
fn unstarted(call: &crate::state::CallState) -> bool {
    call.started.is_none() && call.judging.is_none() && call.in_doubt.is_none()
}

/// The kill switch's verdict in signals read at a boundary; signals that could not be read
/// stop the run (fail closed).
pub(crate) fn halt_in(signals: &Result<StopSignals, StoreError>) -> Option<Halt> {
    match signals {
        Ok(s) => s.kill.clone().map(|switch| Halt::KillSwitch { switch }),
        Err(e) => Some(Halt::KillSwitchUnreadable {
            error: e.to_string(),
        }),
    }
}

impl Ring<'_> {
    /// The envelope's verdict on the run's next effect: `Some` when it must not happen.
    pub fn halt(&self, state: &RunState) -> Option<Halt> {
        self.halt_of(&HaltSubject::of(state))
            .or_else(|| self.authority_lost(state))
    }

    /// What the store says of the run at an effect boundary, read at once: the kill switch
    /// that stops it, and the cancellations of the run and its ancestors. [`Ring::halt_at`]
    /// and [`Ring::stop_reason_at`] judge it, so a step's two checks cost one read.
    pub fn stop_signals(&self, state: &RunState) -> Result<StopSignals, StoreError> {
        let signals = self.signals_of(&HaltSubject::of(state));
        *self.clear_read.borrow_mut() = match &signals {
            Ok(s) if s.kill.is_none() => Some((state.run.clone(), std::time::Instant::now())),
            _ => None,
        };
        signals
    }

    /// What a step of the loop judges its stop on: the store's signals read now, or, when the
    /// step processes a call that has not started, none read: that call's commits check them
    /// in their own transaction instead ([`Ring::process_call`]), which is later and so no
    /// weaker than a read here, and costs no round trip of its own.
    ///
    /// A model step right after an effect's completion reads nothing either when that
    /// completion's commit found nothing stopping the run at most [`CLEAR_READ_STANDS`] before
    /// and nobody was asked since: between the two lies only this process's fold of what it
    /// committed, and the model's answer is committed behind a check of its own (with its
    /// first call's start, or the run's end).
    pub fn step_signals(&self, state: &RunState) -> Result<StopSignals, StoreError> {
        let committed = self
            .commit_read
            .borrow_mut()
            .take()
            .is_some_and(|(run, at)| run == state.run && at.elapsed() <= CLEAR_READ_STANDS);
        let unstarted_call = state.next_open_call().is_some_and(unstarted);
        if unstarted_call || (committed && state.next_open_call().is_none()) {
            let runs = HaltSubject::of(state).runs().len();
            return Ok(StopSignals {
                kill: None,
                cancels: vec![None; runs],
            });
        }
        self.stop_signals(state)
    }

    /// Leaves the stop check of `state`'s next call to its commits, when it has not started
    /// (see [`Ring::stops_in_commit`]).
    pub(crate) fn stops_to_commit(&self, state: &RunState, call_id: &str) {
        *self.stops_in_commit.borrow_mut() = state
            .call(call_id)
            .is_some_and(unstarted)
            .then(|| state.run.clone());
    }

    /// The effect is recorded as started (or was before): what follows is its outcome, which
    /// is recorded whatever was set meanwhile.
    pub(crate) fn stops_checked(&self) {
        self.stops_in_commit.borrow_mut().take();
    }

    /// The stop check a call left to its commits, made now, before a person is asked or when
    /// a commit found the run stopped: `true` when the run was stopped (the halt or the end
    /// is recorded).
    pub(crate) fn stop_if_signalled(&self, state: &mut RunState) -> Result<bool, KernelError> {
        self.stops_checked();
        let signals = self.stop_signals(state);
        if let Some(halt) = self.halt_at(state, &signals) {
            self.stop_halted(state, halt)?;
            return Ok(true);
        }
        if let Some(reason) = self.stop_reason_at(state, signals, self.clock.now())? {
            self.end(state, crate::events::Outcome::Stopped { reason })?;
            return Ok(true);
        }
        Ok(false)
    }

    /// The negative control of [`Ring::stops_in_commit`] (tests only): a call's commits do not
    /// check the stop signals (and its step still reads none).
    #[cfg(feature = "testing")]
    pub fn leave_stops_out_of_commits(&self) {
        self.unguarded_commits.set(true);
    }

    /// A person is being asked: what the store said before is not what it says after.
    pub(crate) fn forget_clear_read(&self) {
        if !self.keep_clear_read.get() {
            self.clear_read.borrow_mut().take();
            self.commit_read.borrow_mut().take();
        }
    }

    /// The negative control of [`Ring::forget_clear_read`] (tests only): a step's clear read
    /// is kept across a person's answer, so a switch set meanwhile is not read before the
    /// effect.
    #[cfg(feature = "testing")]
    pub fn keep_clear_read_across_asks(&self) {
        self.keep_clear_read.set(true);
    }

    /// [`Ring::halt`] right before an effect is recorded as started. The kill switch is read
    /// again unless this step read it for this run, found none, at most [`CLEAR_READ_STANDS`]
    /// ago, and nobody was asked since: then nothing but this process's own work (the policy
    /// decision, the events drafted) lies between the two reads, and the step's read stands for
    /// the second (once: the next effect reads again). The person's standing is checked anew
    /// either way.
    pub(crate) fn halt_before_effect(&self, state: &RunState) -> Option<Halt> {
        // The effect starts behind a commit that checks the switch itself.
        if self.stops_in_commit.borrow().as_ref() == Some(&state.run) {
            return self.authority_lost(state);
        }
        let stands = self
            .clear_read
            .borrow_mut()
            .take()
            .is_some_and(|(run, at)| run == state.run && at.elapsed() <= CLEAR_READ_STANDS);
        if stands {
            self.authority_lost(state)
        } else {
            self.halt(state)
        }
    }

    pub(crate) fn signals_of(&self, subject: &HaltSubject) -> Result<StopSignals, StoreError> {
        subject.with(|s| self.store.stop_signals(s))
    }

    /// [`Ring::halt`], judged on signals [`Ring::stop_signals`] read.
    pub fn halt_at(
        &self,
        state: &RunState,
        signals: &Result<StopSignals, StoreError>,
    ) -> Option<Halt> {
        halt_in(signals).or_else(|| self.authority_lost(state))
    }

    /// The static ceiling check: `Some` when a tool the run is offered can reach a worse
    /// class than the run's ceiling (fixed in `run_started`). Checked before every step, so a
    /// composition that could exceed it never takes its first.
    pub fn composition_halt(&self, state: &RunState) -> Option<Halt> {
        let ceiling = state.settings.ceiling?;
        let tools = above_ceiling(self.tools, state.settings.agent_profile.as_deref(), ceiling);
        (!tools.is_empty()).then_some(Halt::CeilingExceeded { ceiling, tools })
    }

    /// For a strict run: `Some` when the tool catalogue or policy set this ring has differs
    /// from the one the run logged (a resume under changed configuration). Replaying there
    /// could decide differently, so the run stops instead (W-STRICT-002).
    pub fn replay_divergence(&self, state: &RunState) -> Option<Halt> {
        if !state.settings.strict {
            return None;
        }
        let tools = digest_of(&self.tools.specs()).ok()?;
        if state.tools_digest.as_ref() != Some(&tools) {
            return Some(Halt::ReplayDiverged {
                what: "tools".to_owned(),
                from: state.tools_digest.clone(),
                to: tools,
            });
        }
        let policy = self.pdp.digest();
        (state.policy_digest != policy).then(|| Halt::ReplayDiverged {
            what: "policy".to_owned(),
            from: Some(state.policy_digest.clone()),
            to: policy,
        })
    }

    /// The person the run acts for, measured against the directory as this process read it:
    /// `Some` when they lost anything of the standing the run started with. A directory that
    /// is gone counts as losing it all (fail closed).
    fn authority_lost(&self, state: &RunState) -> Option<Halt> {
        let before = state.settings.standing.as_deref()?;
        let now = self.pdp.approval_rules().and_then(|rules| {
            rules
                .directory
                .as_ref()
                .and_then(|d| d.standing(&before.person, rules.team.as_deref()))
        });
        let lost = before.lost_in(now.as_ref())?;
        Some(Halt::AuthorityLost {
            person: before.person.clone(),
            lost,
        })
    }

    pub(crate) fn halt_of(&self, subject: &HaltSubject) -> Option<Halt> {
        match subject.with(|s| self.store.kill_for(s)) {
            Ok(Some(switch)) => Some(Halt::KillSwitch { switch }),
            Ok(None) => None,
            Err(e) => Some(Halt::KillSwitchUnreadable {
                error: e.to_string(),
            }),
        }
    }

    /// Ends the run stopped by the envelope: the typed refusal and the end in one append.
    pub fn stop_halted(&self, state: &mut RunState, halt: Halt) -> Result<(), KernelError> {
        let reason = halt.reason();
        // Nothing is left waiting on a person for a run that will never act again.
        let mut cancelled: Vec<RequestId> = state
            .requests
            .values()
            .filter(|r| r.answer.is_none() && r.resolution.is_none())
            .map(|r| r.id.clone())
            .chain(
                state
                    .asks
                    .values()
                    .filter(|a| a.reply.is_none() && a.expired.is_none())
                    .map(|a| a.id.clone()),
            )
            .collect();
        cancelled.sort();
        cancelled.dedup();
        let closed = cancelled
            .iter()
            .map(|id| RequestUpdate::Answered { id: id.clone() })
            .collect();
        self.append(
            state,
            vec![
                RunEvent::Halted {
                    code: halt.code().to_owned(),
                    halt,
                    cancelled,
                },
                RunEvent::RunEnded {
                    outcome: Outcome::Stopped { reason },
                },
            ],
            Some(RunStatus::Stopped),
            closed,
        )
    }

    /// The rate limits of the run (`[rate]` as it started): one token per action from the
    /// principal's bucket and from its resource kind's, shared through the store. `Some`
    /// with the refusal's message when a bucket is empty or cannot be read (fail closed).
    pub(crate) fn rate_refusal(&self, state: &RunState, actions: &[Action]) -> Option<String> {
        let rate = state.settings.rate.as_deref()?;
        let who = format!("{}/{}", state.principal.tenant, state.principal.actor);
        for action in actions {
            let kind = action.verb().kind().as_str();
            let buckets = rate
                .principal
                .map(|l| {
                    (
                        format!("principal:{who}"),
                        format!("every action of {who}"),
                        l,
                    )
                })
                .into_iter()
                .chain(rate.kinds.get(kind).map(|l| {
                    (
                        format!("kind:{who}:{kind}"),
                        format!("`{kind}` actions of {who}"),
                        *l,
                    )
                }));
            for (key, what, limit) in buckets {
                match self
                    .store
                    .take_token(&key, limit.capacity(), limit.per_minute)
                {
                    Ok(Taken::Granted) => {}
                    Ok(Taken::Empty { retry_after_ms }) => {
                        return Some(format!(
                            "rate limit: {what} may be {} a minute (at most {} at once); the next is possible in {} s. Nothing ran, and it is not retried",
                            limit.per_minute,
                            limit.capacity(),
                            retry_after_ms.div_ceil(1000)
                        ));
                    }
                    Err(e) => {
                        return Some(format!(
                            "the rate limit of {what} could not be read ({e}); nothing ran"
                        ));
                    }
                }
            }
        }
        None
    }
}

/// The tools offered (the menu's) that can act, each with the worst class it can reach, in
/// name order. A tool the agent profile denies outright never acts, so it reaches nothing.
pub fn reachable(
    tools: &dyn ToolRegistry,
    profile: Option<&crate::agent_profile::ProfilePin>,
) -> Vec<ToolReach> {
    let mut out: Vec<ToolReach> = tools
        .reach()
        .into_iter()
        .filter(|(tool, _)| {
            profile.is_none_or(|p| {
                p.tools
                    .get(tool)
                    .is_some_and(|c| *c != crate::agent_profile::Ceiling::Deny)
            })
        })
        .map(|(tool, class)| ToolReach { tool, class })
        .collect();
    out.sort_by(|a, b| a.tool.cmp(&b.tool));
    out
}

/// Of [`reachable`], the tools that can reach worse than `ceiling`.
pub fn above_ceiling(
    tools: &dyn ToolRegistry,
    profile: Option<&crate::agent_profile::ProfilePin>,
    ceiling: RiskClass,
) -> Vec<ToolReach> {
    reachable(tools, profile)
        .into_iter()
        .filter(|t| t.class > ceiling)
        .collect()
}
