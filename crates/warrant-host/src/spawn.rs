//! Subagents: the ring's [`Spawner`]. A spawn the ring authorized starts a child run in this
//! process, under the parent's principal (read from the parent's log), offered the tools the
//! action names, held to its profile, with the share of the parent's run budget and turns that
//! is left, and drives it here, synchronously, inside the parent's call. The child's id comes
//! from its parent and call, so a call repeated after a crash or a park continues the same
//! child (or reads back its end) instead of starting a second one. A child that waits for a
//! person parks its parent on the same request; approving it and resuming the parent
//! continues both. The child's final answer is the call's result, which reaches the parent's
//! model fenced as untrusted like every result.

use serde_json::json;
use warrant_agent::RunExit;
use warrant_core::{AgentSpawn, RunId};
use warrant_kernel::{
    Authorized, EffectResult, NoPrompter, Observer, ParentLink, Ring, RunState, SpawnOutcome,
    SpawnSettings, Spawner, StopCheck,
};

use crate::{Class, Host, HostError, install};

/// The name of the menu a subagent's tools are offered under.
pub const SUBAGENT_MENU: &str = "subagent";

/// The host's spawner: every ring [`Host::with_ring`] builds has one.
pub(crate) struct HostSpawner<'h> {
    pub host: &'h Host,
    pub observer: &'h dyn Observer,
}

impl Spawner for HostSpawner<'_> {
    fn spawn(
        &self,
        spawn: &Authorized<AgentSpawn>,
        parent: &RunState,
        stop: StopCheck<'_>,
    ) -> SpawnOutcome {
        let child = spawn.get().child.clone();
        if let Some(reason) = stop() {
            return SpawnOutcome::Ended(EffectResult {
                ok: false,
                result: json!({"child_run": child, "outcome": "stopped", "reason": reason}),
            });
        }
        match self.drive(spawn, parent) {
            Ok(outcome) => outcome,
            Err(e) => SpawnOutcome::Ended(EffectResult {
                ok: false,
                result: json!({
                    "child_run": child,
                    "outcome": "failed",
                    "code": e.code,
                    "error": e.message,
                }),
            }),
        }
    }
}

/// The model spec of the `index`-th subagent of a run on `parent`: the same model, and for a
/// scripted one the transcript's child (`scripted:PATH#0.1`: the second child of the first).
pub fn child_model(parent: &str, index: usize) -> String {
    match parent.strip_prefix("scripted:") {
        Some(path) => match split_child(path) {
            (file, Some(above)) => format!("scripted:{file}#{above}.{index}"),
            (file, None) => format!("scripted:{file}#{index}"),
        },
        None => parent.to_owned(),
    }
}

/// A scripted model's path and, for a subagent's, the `#0.1` selector of its transcript.
pub fn split_child(path: &str) -> (&str, Option<&str>) {
    match path.rsplit_once('#') {
        Some((file, sel))
            if !sel.is_empty()
                && sel
                    .split('.')
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())) =>
        {
            (file, Some(sel))
        }
        Some(_) | None => (path, None),
    }
}

impl HostSpawner<'_> {
    fn drive(
        &self,
        spawn: &Authorized<AgentSpawn>,
        parent: &RunState,
    ) -> Result<SpawnOutcome, HostError> {
        let host = self.host;
        let order = spawn.get();
        let (call, index) = spawn_call(parent, &order.child).ok_or_else(|| {
            HostError::usage(
                "W-SPAWN-004",
                format!("run {} has no call that spawns {}", parent.run, order.child),
            )
        })?;
        let tools = host.tools_offering(&order.tools)?;
        let env = host.tool_env()?;
        host.with_ring(&tools, self.observer, |ring| {
            let exists = !host
                .inst
                .store
                .events(&order.child)
                .map_err(|e| HostError::failed(&e))?
                .is_empty();
            let (mut state, lease) = if exists {
                let mut state = install::load_run(&host.inst, ring, &order.child, Class::Failed)?;
                if state.ended.is_some() {
                    return Ok(SpawnOutcome::Ended(ended(&state, None)));
                }
                let lease = crate::drive::lease_here(
                    host.inst.store.as_ref(),
                    &order.child,
                    host.inst.notices.as_ref(),
                )
                .map_err(|e| HostError::bad_input(&e))?;
                ring.hold_fence(Some(lease.token));
                let digest = crate::tools_digest(&tools)?;
                let prepared = ring
                    .check_replay(&mut state, &tools, &digest)
                    .and_then(|()| ring.resume(&mut state, spawn.principal()));
                if let Err(e) = prepared {
                    let _ = host.inst.store.release(&lease);
                    return Err(HostError::failed(&e));
                }
                (state, lease)
            } else {
                let state = self.start(ring, &tools, &env, spawn, parent, &call, index)?;
                let lease = host
                    .inst
                    .store
                    .lease_run(&state.run, &crate::drive::holder(), crate::drive::LEASE_TTL)
                    .map_err(|e| HostError::failed(&e))?;
                (state, lease)
            };
            let model = host.provider(&state.model, &tools)?;
            let parts = crate::runs::Parts::new(host, ring, &env);
            let exit = parts.drive(
                &mut state,
                lease,
                model.as_ref(),
                crate::drive::LEASE_TTL,
                &mut NoPrompter,
            )?;
            Ok(if let RunExit::Parked { request } = exit {
                SpawnOutcome::Parked { request }
            } else {
                SpawnOutcome::Ended(ended(&state, Some(&exit)))
            })
        })
    }

    /// Starts the child run: the parent's principal, the child's tools and profile, the turns
    /// and run budget its parent has left, the parent's deadline and spawn envelope.
    #[allow(clippy::too_many_arguments)]
    fn start(
        &self,
        ring: &Ring<'_>,
        tools: &warrant_tools::Toolbox,
        env: &warrant_kernel::ToolEnv,
        spawn: &Authorized<AgentSpawn>,
        parent: &RunState,
        call: &str,
        index: usize,
    ) -> Result<RunState, HostError> {
        let host = self.host;
        let order = spawn.get();
        let envelope = parent.settings.spawn.as_deref().ok_or_else(|| {
            HostError::usage(
                "W-SPAWN-004",
                format!("run {} has no spawn envelope", parent.run),
            )
        })?;
        let budget = ring
            .run_budget_left(parent)
            .map_err(|e| HostError::failed(&e))?;
        let model = child_model(&parent.model, index);
        let mut spec = host.new_run_spec(tools, env, &model, order.task.clone(), None, false);
        spec.principal = spawn.principal().clone();
        spec.settings.deadline = parent.settings.deadline;
        // Never a wider ceiling than the parent's.
        spec.settings.ceiling = match (parent.settings.ceiling, spec.settings.ceiling) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // Under a delegation, a token narrowed from the parent's, minted for this child; the
        // host's own (a process's `--delegation`) never reaches a subagent directly.
        spec.settings.delegation = match parent.settings.delegation.as_deref() {
            Some(d) => Some(Box::new(crate::delegation::for_subagent(
                host,
                d,
                spec.settings.ceiling,
                spec.settings.deadline,
            )?)),
            None => None,
        };
        // A subagent works under its parent's effective agent profile (OAP L3-B1): the same
        // ceiling, never the harness default.
        spec.settings.agent_profile = parent.settings.agent_profile.clone();
        let turns_used = ring.turns_used(parent).map_err(|e| HostError::failed(&e))?;
        spec.settings.max_turns = spec
            .settings
            .max_turns
            .min(parent.settings.max_turns.saturating_sub(turns_used));
        spec.settings.spawn = Some(Box::new(SpawnSettings {
            parent: Some(ParentLink {
                run: parent.run.clone(),
                call: call.to_owned(),
            }),
            depth: order.depth,
            max_depth: envelope.max_depth,
            max_children: envelope.max_children,
            profile: order.profile.clone(),
            budget: (budget.tokens.is_some() || budget.cost_usd.is_some()).then_some(budget),
        }));
        ring.start_as(spec, order.child.clone())
            .map_err(|e| HostError::failed(&e))
    }
}

/// The call of `parent` that spawns `child`, and how many spawns the parent proposed before it
/// (which of a scripted transcript's children it gets).
fn spawn_call(parent: &RunState, child: &RunId) -> Option<(String, usize)> {
    let mut index = 0;
    for call in &parent.calls {
        let spawned = call.actions.iter().flatten().find_map(|a| {
            if let warrant_core::Action::AgentSpawn { child, .. } = a {
                Some(child)
            } else {
                None
            }
        });
        match spawned {
            Some(c) if c == child => return Some((call.record.id.clone(), index)),
            Some(_) => index += 1,
            None => {}
        }
    }
    None
}

/// What the parent's model is told of a child that ended: its run, how it ended and, when it
/// completed, its final answer.
fn ended(state: &RunState, exit: Option<&RunExit>) -> EffectResult {
    let answer = state.turn_texts.iter().rev().flatten().next().cloned();
    let outcome = state.ended.as_ref().map(|o| match o {
        warrant_kernel::Outcome::Completed => json!({"outcome": "completed"}),
        warrant_kernel::Outcome::Failed { code, message } => {
            json!({"outcome": "failed", "code": code, "error": message})
        }
        warrant_kernel::Outcome::Stopped { reason } => {
            json!({"outcome": "stopped", "reason": reason})
        }
    });
    let mut result = outcome.unwrap_or_else(|| match exit {
        Some(RunExit::Superseded { message }) => {
            json!({"outcome": "superseded", "error": message})
        }
        Some(_) | None => json!({"outcome": "unfinished"}),
    });
    let ok = state.ended == Some(warrant_kernel::Outcome::Completed);
    result["child_run"] = json!(state.run);
    if let Some(answer) = answer {
        result["answer"] = json!(answer);
    }
    EffectResult { ok, result }
}
