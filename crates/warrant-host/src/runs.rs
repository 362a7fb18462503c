//! Runs: start one here, queue one for a worker, resume a parked one, work the queue, cancel,
//! resolve a step in doubt. Each drives the ring built by [`Host::with_ring`] and returns what
//! happened as a typed value; the front end words it.

use warrant_agent::RunExit;
use warrant_core::{Clock, RequestId, RunId, SystemClock, Timestamp};
use warrant_kernel::{
    NoPrompter, Observer, Prompter, RequestKind, Resolution, Ring, RunState, ToolEnv,
};
use warrant_llm::ModelProvider;

use crate::drive::{self, Drive};
use crate::{Class, Host, HostError, Result, install, tools_digest};

/// The model of a run: `given` (`--model`), else `$WARRANT_MODEL`, else `[providers] model`
/// of the configuration (`warrant configure provider` writes it).
pub fn model_spec(
    settings: &warrant_core::config::Settings,
    given: Option<&str>,
) -> Result<String> {
    given
        .map(str::to_owned)
        .or_else(|| std::env::var("WARRANT_MODEL").ok().filter(|m| !m.trim().is_empty()))
        .or_else(|| settings.default_model.clone())
        .filter(|m| !m.trim().is_empty())
        .ok_or_else(|| {
            HostError::usage(
                "W-MODEL-017",
                "no model for the run: pass --model PROVIDER:MODEL, or configure one with `warrant configure provider` (it writes [providers] model)",
            )
        })
}

/// `[providers] model` of the configuration at `at`, when it can be read and sets one.
pub fn configured_model(at: &crate::Where) -> Option<String> {
    let paths = install::paths(at, false).ok()?;
    let layers = install::read_layers(&paths).ok()?;
    install::settings(&layers).ok()?.default_model
}

/// What to run: the model spec, the task, and an optional deadline.
#[derive(Clone, Debug)]
pub struct RunRequest {
    pub model: String,
    pub task: String,
    pub deadline: Option<Timestamp>,
    /// The agent profile (Open Agent Profile) to work under: a name in the discovery roots or
    /// a profile file. It is pinned in the run's first event and can only narrow policy.
    pub agent_profile: Option<String>,
}

/// A run driven in this process until it ended, parked or was taken over.
#[derive(Clone, Debug)]
pub struct Driven {
    pub run: RunId,
    pub exit: RunExit,
}

/// What `resume` came to.
#[derive(Clone, Debug)]
pub enum Resumed {
    Driven(Driven),
    /// Parked on an effect in doubt: a person resolves the step first.
    InDoubt {
        run: RunId,
        request: RequestId,
        step: String,
    },
    /// Parked on an approval nobody here can answer now.
    AwaitsApproval {
        run: RunId,
        request: RequestId,
    },
    /// Parked on a request of the agent that nobody has answered and that has not expired.
    AwaitsReply {
        run: RunId,
        request: RequestId,
        title: String,
        until: Timestamp,
    },
}

/// What the worker loop reports as it goes.
#[derive(Clone, Debug)]
pub enum WorkerEvent {
    Polling {
        holder: String,
        store: String,
    },
    Leased {
        holder: String,
        run: RunId,
        token: u64,
    },
    CannotLoad {
        holder: String,
        run: RunId,
        error: HostError,
    },
    Driven {
        holder: String,
        run: RunId,
        exit: RunExit,
    },
    Failed {
        holder: String,
        run: RunId,
        error: String,
    },
    /// The store did not answer (restarting, cut off): the worker waits `retry_in` and polls
    /// again rather than exit, as a worker under a supervisor is expected to ride out a
    /// database failover. Runs it held are leased again once their leases lapse.
    StoreUnavailable {
        holder: String,
        error: HostError,
        retry_in: std::time::Duration,
    },
}

/// The longest a worker waits between polls of a store that does not answer.
const MAX_STORE_BACKOFF: std::time::Duration = std::time::Duration::from_secs(5);

/// What cancelling came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cancelled {
    /// Nobody drove the run: it is stopped now.
    Stopped,
    /// Another process drives it and stops it at its next effect boundary.
    Recorded { holder: String },
}

/// Parses a run id, or says what one looks like.
pub fn parse_run(id: &str) -> Result<RunId> {
    RunId::parse(id).ok_or_else(|| {
        HostError::usage(
            "W-KERNEL-004",
            format!("`{id}` is not a run id (they look like run-0195f0c3a1b2-1a2b3c4d5e6f)"),
        )
    })
}

/// A run's deadline from a duration such as `90s`, `10m` or `2h`, counted from now.
pub fn deadline_from(text: Option<&str>) -> Result<Option<warrant_core::Timestamp>> {
    let Some(d) = text else {
        return Ok(None);
    };
    let after = crate::drive::duration_arg("deadline", d, "500ms, 90s, 10m or 2h")?;
    Ok(crate::deadline_after(after))
}

impl Host {
    /// A run request as a front end's flags give it: the model (else `$WARRANT_MODEL`, else
    /// `[providers] model`), the task, a deadline as a duration from now, an agent profile.
    pub fn request(
        &self,
        model: Option<&str>,
        task: String,
        deadline: Option<&str>,
        agent_profile: Option<String>,
    ) -> Result<RunRequest> {
        Ok(RunRequest {
            model: model_spec(&self.settings, model)?,
            task,
            deadline: deadline_from(deadline)?,
            agent_profile,
        })
    }

    /// [`Host::act_under`] the delegation token held in the file `path`.
    pub fn act_under_file(&mut self, path: &std::path::Path) -> Result<()> {
        let token = std::fs::read_to_string(path).map_err(|e| {
            HostError::usage(
                "W-DELEGATE-015",
                format!("cannot read the token {}: {e}", path.display()),
            )
        })?;
        self.act_under(&token)
    }

    /// The first event of a new run: the installation's settings, narrowed by the agent
    /// profile when the request names one (its pin, and its runtime limits, each of which only
    /// lowers a setting).
    fn run_spec_for(
        &self,
        tools: &warrant_tools::Toolbox,
        env: &ToolEnv,
        request: RunRequest,
        queued: bool,
    ) -> Result<warrant_kernel::NewRunSpec> {
        let mut deadline = request.deadline;
        let pinned = match &request.agent_profile {
            Some(name) => {
                let names: Vec<String> = warrant_kernel::ToolRegistry::specs(tools)
                    .iter()
                    .map(|s| s.name.clone())
                    .collect();
                Some(self.pin_agent_profile(name, &names, &request.model)?)
            }
            None => None,
        };
        if let Some((_, limits)) = &pinned
            && let Some(secs) = limits.timeout_seconds
        {
            let by_profile = crate::deadline_after(std::time::Duration::from_secs(secs));
            deadline = match (deadline, by_profile) {
                (Some(a), Some(b)) => Some(if a.millis() <= b.millis() { a } else { b }),
                (a, b) => a.or(b),
            };
        }
        let mut spec =
            self.new_run_spec(tools, env, &request.model, request.task, deadline, queued);
        if let Some((pin, limits)) = pinned {
            let s = &mut spec.settings;
            if let Some(t) = limits.max_turns {
                s.max_turns = s.max_turns.min(t);
            }
            if let Some(c) = limits.max_tool_calls {
                s.max_tool_calls = Some(s.max_tool_calls.map_or(c, |m| m.min(c)));
            }
            if let Some(spawn) = s.spawn.as_deref_mut() {
                if let Some(d) = limits.max_depth {
                    spawn.max_depth = spawn.max_depth.min(d);
                }
                if let Some(c) = limits.max_concurrent {
                    spawn.max_concurrent = Some(spawn.max_concurrent.map_or(c, |m| m.min(c)));
                }
                // The run-scope budget is tightened by a share like a subagent's.
                if let Some(cost) = limits.max_cost_usd {
                    let cap = warrant_core::config::BudgetLimit {
                        tokens: None,
                        cost_usd: Some(cost),
                    };
                    spawn.budget = Some(spawn.budget.map_or(cap, |b| b.tightest(cap)));
                }
            }
            // The profile's declared ceiling (`metadata.annotations."warrant.dev/ceiling"`)
            // only tightens the run's.
            s.ceiling = crate::ceilings::tightest(s.ceiling, limits.ceiling);
            // The run's skill catalog is the profile's attached skills when it names any.
            if let Some(attached) = &pin.skills {
                s.skills.retain(|k| {
                    attached
                        .iter()
                        .any(|a| a.name == k.name && a.digest == k.digest)
                });
            }
            s.agent_profile = Some(Box::new(pin));
        }
        Ok(spec)
    }
}

/// The ring (with its tools, budgets and guard), the tools' environment and the host for one
/// drive.
pub(crate) struct Parts<'a> {
    host: &'a Host,
    ring: &'a Ring<'a>,
    env: &'a ToolEnv,
}

impl<'a> Parts<'a> {
    pub(crate) fn new(host: &'a Host, ring: &'a Ring<'a>, env: &'a ToolEnv) -> Self {
        Self { host, ring, env }
    }

    /// Drives `state` under `lease` with the bounded outbox, then delivers the audit trail.
    pub(crate) fn drive(
        &self,
        state: &mut RunState,
        lease: warrant_store::Lease,
        model: &dyn ModelProvider,
        ttl: std::time::Duration,
        prompter: &mut dyn Prompter,
    ) -> Result<RunExit> {
        let driver = Drive {
            store: self.host.inst.store.as_ref(),
            ring: self.ring,
            env: self.env,
            model,
            ttl,
            backpressure: &install::OutboxBound::new(&self.host.inst, self.ring),
        };
        let exit = driver.run(state, lease, prompter);
        if exit.is_ok() {
            self.host.reconcile_profile(state);
        }
        self.host.deliver();
        exit.map_err(|e| HostError::failed(&e))
    }
}

impl Host {
    /// Starts a run and drives it here until it ends or parks.
    pub fn run(
        &self,
        request: RunRequest,
        observer: &dyn Observer,
        prompter: &mut dyn Prompter,
    ) -> Result<Driven> {
        self.preflight()?;
        let tools = self.tools()?;
        let model = self.provider(&request.model, &tools)?;
        let env = self.tool_env()?;
        // Layers of abandoned judgements (denied, cancelled, ended) go before new ones come.
        crate::layers::sweep(self.inst.store.as_ref(), &env.workspace);
        let spec = self.run_spec_for(&tools, &env, request, false)?;
        self.with_ring(&tools, observer, |ring| {
            // Created leased to this process: one commit, and never running without a lease.
            let (mut state, lease) = ring
                .start_leased(spec, &drive::holder(), drive::LEASE_TTL)
                .map_err(|e| HostError::failed(&e))?;
            let parts = Parts::new(self, ring, &env);
            let exit = parts.drive(
                &mut state,
                lease,
                model.as_ref(),
                drive::LEASE_TTL,
                prompter,
            )?;
            Ok(Driven {
                run: state.run,
                exit,
            })
        })
    }

    /// Queues a run for a worker. The model spec (a transcript whole) is checked first, so a
    /// bad one is refused before anything is queued.
    pub fn submit(&self, request: RunRequest) -> Result<RunId> {
        self.preflight()?;
        let tools = self.tools()?;
        self.provider(&request.model, &tools)?;
        let env = self.tool_env()?;
        let spec = self.run_spec_for(&tools, &env, request, true)?;
        let state = self.with_ring(&tools, &warrant_kernel::Silent, |ring| {
            ring.start(spec).map_err(|e| HostError::failed(&e))
        })?;
        self.deliver();
        Ok(state.run)
    }

    /// Continues a parked or interrupted run. `can_prompt`: a person at this front end can
    /// answer an approval now; otherwise a run parked on one stays parked.
    pub fn resume(
        &self,
        run: &RunId,
        observer: &dyn Observer,
        prompter: &mut dyn Prompter,
        can_prompt: bool,
    ) -> Result<Resumed> {
        // A graph run continues through its graph (which checks the graph it pinned).
        if self.is_graph_run(run)? {
            return self
                .graph_resume(run, observer, prompter)
                .map(Resumed::Driven);
        }
        let tools = self.tools()?;
        let env = self.tool_env()?;
        self.with_ring(&tools, observer, |ring| {
            let mut state = install::load_run(&self.inst, ring, run, Class::Usage)?;
            if let Some(outcome) = &state.ended {
                return Err(HostError::usage(
                    "W-KERNEL-005",
                    format!(
                        "run {run} has already ended ({}); there is nothing to resume",
                        warrant_kernel::ring::outcome_label(outcome)
                    ),
                ));
            }
            if state.model == crate::serve::SERVED_MODEL {
                return Err(HostError::usage(
                    "W-MCPSERVE-015",
                    format!(
                        "run {run} is a call served over MCP; its client continues it by making the same call again"
                    ),
                ));
            }
            // A run under an agent profile continues only under the very profile it pinned.
            if let Some(pin) = state.settings.agent_profile.as_deref() {
                self.check_pinned_profile(run.as_str(), pin)?;
            }
            // The run's principal and model are the ones in its log, whoever resumes it.
            let model = self.provider(&state.model, &tools)?;
            // A run the envelope stops (a kill switch, the person's lost standing, a strict
            // run's replay divergence) is driven to its next step, which stops it and cancels
            // its open requests, instead of waiting.
            let halted = ring.halt(&state).is_some() || ring.replay_divergence(&state).is_some();
            if !halted
                && let Some(request) = &state.parked
                && let Some(r) = state.requests.get(request)
                && r.answer.is_none()
                && r.resolution.is_none()
            {
                if r.kind == RequestKind::InDoubt {
                    return Ok(Resumed::InDoubt {
                        run: run.clone(),
                        request: request.clone(),
                        step: r.call_id.clone(),
                    });
                }
                if !can_prompt {
                    return Ok(Resumed::AwaitsApproval {
                        run: run.clone(),
                        request: request.clone(),
                    });
                }
            }
            // Parked on a request the agent raised that nobody has answered and that has not
            // expired: nothing to do yet, and nothing is appended.
            if !halted
                && let Some(ask) = state.parked.as_ref().and_then(|r| state.asks.get(r))
                && ask.reply.is_none()
                && ask.expired.is_none()
                && SystemClock.now() < ask.expires_at
            {
                return Ok(Resumed::AwaitsReply {
                    run: run.clone(),
                    request: ask.id.clone(),
                    title: ask.ask.title(),
                    until: ask.expires_at,
                });
            }
            // One driver at a time: a second resume is told who drives the run.
            let lease =
                drive::lease_here(self.inst.store.as_ref(), run, self.inst.notices.as_ref())
                    .map_err(|e| HostError::bad_input(&e))?;
            ring.hold_fence(Some(lease.token));
            let digest = tools_digest(&tools)?;
            let prepared = ring
                .check_replay(&mut state, &tools, &digest)
                .and_then(|()| ring.resume(&mut state, &self.identity.principal));
            if let Err(e) = prepared {
                let _ = self.inst.store.release(&lease);
                self.deliver();
                return Err(HostError::bad_input(&e));
            }
            let parts = Parts::new(self, ring, &env);
            let exit = parts.drive(
                &mut state,
                lease,
                model.as_ref(),
                drive::LEASE_TTL,
                prompter,
            )?;
            Ok(Resumed::Driven(Driven {
                run: state.run,
                exit,
            }))
        })
    }

    /// Leases queued or abandoned runs and drives them one at a time, with nobody to prompt.
    /// Returns when `once` and the queue is empty; otherwise polls every `poll`.
    pub fn work(
        &self,
        holder: Option<String>,
        ttl: std::time::Duration,
        poll: std::time::Duration,
        once: bool,
        observer: &dyn Observer,
        report: &dyn Fn(WorkerEvent),
    ) -> Result<()> {
        self.preflight()?;
        let tools = self.tools()?;
        let env = self.tool_env()?;
        let digest = tools_digest(&tools)?;
        let holder = holder.unwrap_or_else(drive::holder);
        self.with_ring(&tools, observer, |ring| {
            report(WorkerEvent::Polling {
                holder: holder.clone(),
                store: self.inst.store_location.clone(),
            });
            let mut backoff = poll.max(std::time::Duration::from_millis(100));
            loop {
                // A worker drives the runs of its own tenant only.
                let lease = match self.inst.scoped().lease_next(&holder, ttl) {
                    Ok(lease) => lease,
                    Err(e) if e.is_transient() && !once => {
                        report(WorkerEvent::StoreUnavailable {
                            holder: holder.clone(),
                            error: HostError::failed(&e),
                            retry_in: backoff,
                        });
                        std::thread::sleep(backoff);
                        backoff = (backoff * 2).min(MAX_STORE_BACKOFF);
                        continue;
                    }
                    Err(e) => return Err(HostError::failed(&e)),
                };
                backoff = poll.max(std::time::Duration::from_millis(100));
                let Some(lease) = lease else {
                    if once {
                        return Ok(());
                    }
                    std::thread::sleep(poll);
                    continue;
                };
                report(WorkerEvent::Leased {
                    holder: holder.clone(),
                    run: lease.run.clone(),
                    token: lease.token,
                });
                let mut state = match install::load_run(&self.inst, ring, &lease.run, Class::Failed)
                {
                    Ok(s) => s,
                    Err(error) => {
                        // A refused journal stopped the run in the index: it is not leased again.
                        report(WorkerEvent::CannotLoad {
                            holder: holder.clone(),
                            run: lease.run.clone(),
                            error,
                        });
                        let _ = self.inst.store.release(&lease);
                        continue;
                    }
                };
                // A graph run continues through its graph, which checks the file it pinned
                // and leases the run itself; driven as a plain session it would lose its nodes.
                if state.settings.graph.is_some() {
                    let _ = self.inst.store.release(&lease);
                    let run = state.run.clone();
                    match self.graph_resume(&run, observer, &mut NoPrompter) {
                        Ok(driven) => report(WorkerEvent::Driven {
                            holder: holder.clone(),
                            run,
                            exit: driven.exit,
                        }),
                        Err(e) => report(WorkerEvent::Failed {
                            holder: holder.clone(),
                            run,
                            error: e.message,
                        }),
                    }
                    self.deliver();
                    continue;
                }
                ring.hold_fence(Some(lease.token));
                // A run pinned to an agent profile is driven only under that very profile.
                let pinned = match state.settings.agent_profile.as_deref() {
                    Some(pin) => self.check_pinned_profile(lease.run.as_str(), pin),
                    None => Ok(()),
                };
                let prepared = pinned
                    .and_then(|()| self.provider(&state.model, &tools))
                    .and_then(|p| {
                        ring.check_replay(&mut state, &tools, &digest)
                            .and_then(|()| ring.resume(&mut state, &self.identity.principal))
                            .map_err(|e| HostError::failed(&e))
                            .map(|()| p)
                    });
                let model = match prepared {
                    Ok(p) => p,
                    Err(f) => {
                        // The run cannot be driven here; end it with the reason, not retry forever.
                        let _ = ring.end(
                            &mut state,
                            warrant_kernel::Outcome::Failed {
                                code: f.code.clone(),
                                message: f.message.clone(),
                            },
                        );
                        let _ = self.inst.store.release(&lease);
                        self.deliver();
                        continue;
                    }
                };
                let parts = Parts::new(self, ring, &env);
                let run = state.run.clone();
                match parts.drive(&mut state, lease, model.as_ref(), ttl, &mut NoPrompter) {
                    Ok(exit) => report(WorkerEvent::Driven {
                        holder: holder.clone(),
                        run,
                        exit,
                    }),
                    Err(e) => report(WorkerEvent::Failed {
                        holder: holder.clone(),
                        run,
                        error: e.message,
                    }),
                }
            }
        })
    }

    /// Cancels a run: recorded for whoever drives it, and stopped here and now when nobody does
    /// (queued, parked, abandoned).
    pub fn cancel(&self, run: &RunId, reason: &str) -> Result<Cancelled> {
        self.records().own_run(run, "cancel a run")?;
        // Its subagents go with it (a parked one would otherwise wait for nobody); one that is
        // being driven stops at its next boundary, where it also sees its parent's cancellation.
        let subagents = self
            .records()
            .run(run)
            .map(|v| v.subagents)
            .unwrap_or_default();
        for child in subagents {
            let stopped = self.records().run(&child).map(|v| v.run.status);
            if stopped.is_ok_and(|s| s.is_final()) {
                continue;
            }
            self.cancel(
                &child,
                &format!("its parent run {run} was cancelled: {reason}"),
            )?;
        }
        let who = self.identity.principal.actor.clone();
        self.inst
            .store
            .request_cancel(run, &who, reason)
            .map_err(|e| HostError::bad_input(&e))?;
        let tools = self.own_tools()?;
        self.with_ring(
            &tools,
            &warrant_kernel::Silent,
            |ring| match drive::lease_here(
                self.inst.store.as_ref(),
                run,
                self.inst.notices.as_ref(),
            ) {
                Ok(lease) => {
                    ring.hold_fence(Some(lease.token));
                    let result = install::load_run(&self.inst, ring, run, Class::Failed).and_then(
                        |mut state| {
                            let reason = ring
                                .stop_reason(&state, SystemClock.now())
                                .map_err(|e| HostError::failed(&e))?
                                .unwrap_or_else(|| reason.to_owned());
                            ring.end(&mut state, warrant_kernel::Outcome::Stopped { reason })
                                .map_err(|e| HostError::failed(&e))
                        },
                    );
                    let _ = self.inst.store.release(&lease);
                    self.deliver();
                    // What the run kept for a judgement nobody will settle now.
                    if let Ok(ws) = self.paths.workspace_canonical() {
                        crate::layers::sweep(self.inst.store.as_ref(), &ws);
                    }
                    result.map(|()| Cancelled::Stopped)
                }
                Err(warrant_store::StoreError::Leased { holder, .. }) => {
                    Ok(Cancelled::Recorded { holder })
                }
                Err(e) => Err(HostError::bad_input(&e)),
            },
        )
    }

    /// A person says what became of an effect in doubt. Never from a process a run started.
    pub fn resolve(&self, run: &RunId, step: &str, resolution: Resolution) -> Result<()> {
        let tools = self.own_tools()?;
        self.with_ring(&tools, &warrant_kernel::Silent, |ring| {
            let mut state = install::load_run(&self.inst, ring, run, Class::Usage)?;
            // A command's attempt is refused and, when the step names an open in-doubt
            // request, recorded in the run beside it (the request stays open).
            match state.in_doubt(step).map(|r| r.id.clone()) {
                Some(request) => {
                    let refused = crate::origin::refuse_recorded(
                        ring,
                        &mut state,
                        &request,
                        &self.identity.principal,
                        "resolve an effect in doubt",
                    );
                    if refused.is_err() {
                        self.deliver();
                    }
                    refused?;
                }
                None => crate::origin::refuse_from_command("resolve an effect in doubt")?,
            }
            let via = crate::origin::via_from(self.front);
            let result = ring.resolve(&mut state, step, &self.identity.principal, &via, resolution);
            self.deliver();
            result.map_err(|e| HostError::bad_input(&e))
        })
    }
}
