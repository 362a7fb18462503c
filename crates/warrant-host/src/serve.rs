//! Serving Warrant's own tools to a client that calls them directly (`warrant mcp serve`): the
//! export (which tools, under the read-only ceiling), who a caller is (the local person, or
//! the principal a bearer token stands for), and one call through the ring as that caller.
//! Each call is a run of its own: started with the caller as principal, the call journaled as
//! received, then normalization, the decision, a person where one is needed (the run parks and
//! the caller is told the request), the effect and its redacted result, all audited. Nothing
//! here speaks MCP; the server crate does.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use warrant_core::config::MenuConfig;
use warrant_core::{Digest, Principal, PrincipalKind, RequestId, RunId, ToolSpec, digest_of};
use warrant_kernel::{
    CallRecord, CallResult, CallStep, DeniedBy, NoPrompter, Ring, RunState, ToolRegistry as _,
};
use warrant_store::RunStatus;
use warrant_tools::{Builtin, Controls, ToolSource, Toolbox};

use crate::{Class, Host, HostError, Result, install};

/// The model a served run names: none (a client calls the tools itself). `resume` and the
/// worker refuse such a run: its client continues it by calling again.
pub const SERVED_MODEL: &str = "mcp-client";

/// The menu name the served toolbox is built with (never configured by a person).
const SERVE_MENU: &str = "mcp-serve";

/// What is exported: the tools offered to clients, and the configured ones held back by the
/// read-only ceiling (each needs `lift_ceiling` to be exported).
#[derive(Clone, Debug, Serialize)]
pub struct Export {
    pub tools: Vec<ToolSpec>,
    pub held: Vec<String>,
}

/// A bearer token a caller presents over HTTP, and who it stands for. The value never leaves
/// the server: not in `Debug`, not in a record.
#[derive(Clone)]
pub struct TokenCaller {
    pub name: String,
    pub token: String,
    pub principal: Principal,
}

impl std::fmt::Debug for TokenCaller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCaller")
            .field("name", &self.name)
            .field("token", &"[redacted]")
            .field("actor", &self.principal.actor)
            .finish()
    }
}

/// One call as a client made it.
#[derive(Clone, Debug)]
pub struct ServedCall {
    pub tool: String,
    pub args: Value,
    /// The transport and client, as the record names it (`mcp stdio`, `mcp http (token ci)`).
    pub client: String,
}

/// How a served call ended. `code` names the refusal (the tool's code, or
/// `W-MCPSERVE-004`/`005` for a denial by policy or by a person).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum CallOutcome {
    Completed {
        run: RunId,
        ok: bool,
        result: Value,
    },
    Refused {
        run: RunId,
        code: String,
        message: String,
    },
    Denied {
        run: RunId,
        code: String,
        message: String,
    },
    /// A person must answer first; call again with the same arguments once they did.
    Parked {
        run: RunId,
        request: RequestId,
    },
    /// The effect started and its end is unknown; a person resolves it (`runs resolve`).
    InDoubt {
        run: RunId,
    },
}

impl Host {
    /// The export of `[mcp.serve]`: the configured tools (default: the read-only file tools)
    /// that exist, minus those the ceiling holds back. A name that is no tool is an error.
    pub fn serve_export(&self) -> Result<(Export, Toolbox)> {
        self.preflight()?;
        let config = &self.settings.mcp.serve;
        // Warrant's own tools only: serving never starts (nor re-exports) a configured server.
        let all = self.own_tools()?;
        let known: Vec<String> = all.catalogue_specs().into_iter().map(|s| s.name).collect();
        let mut exported = Vec::new();
        let mut held = Vec::new();
        for name in config.exported() {
            if !known.contains(&name) {
                return Err(HostError::usage(
                    "W-MCPSERVE-001",
                    format!(
                        "[mcp.serve] tools names `{name}`, which is no tool of this installation; tools: {}",
                        known.join(", ")
                    ),
                ));
            }
            if config.within_ceiling(&name) {
                exported.push(name);
            } else {
                held.push(name);
            }
        }
        for lifted in config.lift_ceiling.iter().flatten() {
            if !known.contains(lifted) {
                return Err(HostError::usage(
                    "W-MCPSERVE-001",
                    format!(
                        "[mcp.serve] lift_ceiling names `{lifted}`, which is no tool of this installation"
                    ),
                ));
            }
        }
        let toolbox = self.serve_toolbox(exported)?;
        Ok((
            Export {
                tools: toolbox.specs(),
                held,
            },
            toolbox,
        ))
    }

    /// The served toolbox: the installation's sources behind a menu of exactly the exported
    /// tools, every result through the redactor. A call to anything else is refused by the ring.
    fn serve_toolbox(&self, exported: Vec<String>) -> Result<Toolbox> {
        let mut sources: Vec<&dyn ToolSource> = vec![&Builtin];
        sources.extend(self.sources.iter().map(|s| s.as_ref() as &dyn ToolSource));
        let menus = BTreeMap::from([(
            SERVE_MENU.to_owned(),
            MenuConfig {
                tools: exported,
                ceiling: None,
            },
        )]);
        Toolbox::new(
            &sources,
            Controls {
                menu: Some(SERVE_MENU),
                menus: &menus,
                redactor: crate::controls::redacting(&self.redactor),
            },
        )
        .map_err(|e| HostError::usage("W-TOOL-006", e.to_string()))
    }

    /// The callers HTTP tokens stand for, each token read from its secret reference now.
    /// A token that is not a reference, unreadable or empty is an error naming the entry.
    pub fn serve_tokens(&self) -> Result<Vec<TokenCaller>> {
        let env: BTreeMap<String, String> = crate::credentials::reference_env(&self.paths)?;
        let mut out = Vec::new();
        for (name, entry) in &self.settings.mcp.serve.tokens {
            let setting = format!("mcp.serve.tokens.{name}.token");
            let key = warrant_llm::secret::resolve_key(&setting, Some(&entry.token), "", &env)
                .map_err(|e| HostError::usage("W-MCPSERVE-002", e.to_string()))?;
            let Some(token) = key.value else {
                return Err(HostError::usage(
                    "W-MCPSERVE-002",
                    format!("`{setting}` names {}, which is unset or empty", key.source),
                ));
            };
            if entry.actor.trim().is_empty() {
                return Err(HostError::usage(
                    "W-MCPSERVE-002",
                    format!("[mcp.serve.tokens.{name}] has no actor"),
                ));
            }
            let principal = Principal {
                tenant: entry
                    .tenant
                    .clone()
                    .unwrap_or_else(|| self.identity.principal.tenant.clone()),
                actor: entry.actor.clone(),
                kind: entry.kind.unwrap_or(PrincipalKind::User),
                on_behalf_of: None,
                roles: entry.roles.clone(),
                teams: entry.teams.clone(),
                attrs: BTreeMap::from([("via".to_owned(), format!("mcp-token:{name}"))]),
            };
            out.push(TokenCaller {
                name: name.clone(),
                token,
                principal,
            });
        }
        Ok(out)
    }

    /// Runs one served call through the ring as `caller`. A call made again with the same
    /// tool and arguments by the same caller while an earlier one waits for a person continues
    /// that run instead of starting another: once the person answered, it runs (or is denied).
    pub fn serve_call(
        &self,
        tools: &Toolbox,
        caller: &Principal,
        call: ServedCall,
    ) -> Result<CallOutcome> {
        let env = self.tool_env()?;
        let args_digest =
            digest_of(&call.args).map_err(|e| HostError::usage("W-MCPSERVE-003", e.to_string()))?;
        let task = task_of(&call.tool, &args_digest);
        let waiting = self.waiting_call(caller, &task)?;
        let outcome = self.with_ring(tools, &warrant_kernel::Silent, |ring| {
            let (state, lease) = match waiting {
                Some(run) => {
                    let lease = crate::drive::lease_here(
                        self.inst.store.as_ref(),
                        &run,
                        self.inst.notices.as_ref(),
                    )
                    .map_err(|e| HostError::bad_input(&e))?;
                    ring.hold_fence(Some(lease.token));
                    let state = install::load_run_of(
                        &self.inst,
                        ring,
                        &run,
                        Class::Failed,
                        &warrant_store::Tenant::of(caller),
                    );
                    (state, lease)
                }
                None => {
                    let spec =
                        self.new_run_spec(tools, &env, SERVED_MODEL, task.clone(), None, false);
                    let spec = warrant_kernel::NewRunSpec {
                        principal: caller.clone(),
                        ..spec
                    };
                    let (mut state, lease) = ring
                        .start_leased(spec, &crate::drive::holder(), crate::drive::LEASE_TTL)
                        .map_err(|e| HostError::failed(&e))?;
                    ring.hold_fence(Some(lease.token));
                    let received = ring
                        .record_received_call(
                            &mut state,
                            call.client.clone(),
                            CallRecord {
                                id: CALL_ID.to_owned(),
                                tool: call.tool.clone(),
                                args: call.args.clone(),
                            },
                        )
                        .map(|()| state)
                        .map_err(|e| HostError::failed(&e));
                    (received, lease)
                }
            };
            let result = state.and_then(|mut state| drive_call(ring, &mut state, &env, caller));
            let _ = self.inst.store.release(&lease);
            ring.hold_fence(None);
            result
        });
        self.deliver();
        outcome
    }

    /// Records a request refused before it reached the ring (no or an unknown token, a
    /// foreign `Host` or `Origin`, a body over the limit) as a run of its own, stopped at once:
    /// the trail shows who was turned away and why. The principal is this installation's
    /// person, whose server turned the request away.
    pub fn record_refused_access(
        &self,
        transport: &str,
        status: u16,
        reason: &str,
        suppressed: u64,
    ) -> Result<RunId> {
        let tools = self.serve_toolbox(Vec::new())?;
        let env = self.tool_env()?;
        let spec = self.new_run_spec(
            &tools,
            &env,
            SERVED_MODEL,
            format!("MCP {transport} request refused ({status})"),
            None,
            false,
        );
        let run = self.with_ring(&tools, &warrant_kernel::Silent, |ring| {
            let mut state = ring.start(spec).map_err(|e| HostError::failed(&e))?;
            ring.record_refused_access(
                &mut state,
                transport.to_owned(),
                status,
                reason.to_owned(),
                suppressed,
            )
            .map_err(|e| HostError::failed(&e))?;
            Ok(state.run)
        });
        self.deliver();
        run
    }

    /// A run of `caller` waiting on the same call (same task: tool and argument digest): one
    /// whose request a person answered first (queued again), else the latest still parked.
    fn waiting_call(&self, caller: &Principal, task: &str) -> Result<Option<RunId>> {
        // The caller's tenant: a served client may be configured into another one than this
        // process's identity ([mcp.serve] tenant).
        let tenant = warrant_store::Tenant::of(caller);
        let runs = warrant_store::Scoped::new(self.inst.store.as_ref(), &tenant)
            .runs()
            .map_err(|e| HostError::failed(&e))?;
        let mine = |status: RunStatus| {
            runs.iter()
                .filter(|r| r.actor == caller.actor && r.task == task && r.status == status)
                .map(|r| r.run.clone())
                .next_back()
        };
        Ok(mine(RunStatus::Queued).or_else(|| mine(RunStatus::Parked)))
    }
}

/// The one call of a served run.
const CALL_ID: &str = "call-1";

/// A served run's task: the tool and the digest of its arguments (the arguments themselves
/// are in the journal, sealed where secret; the task is listed in the clear).
fn task_of(tool: &str, args: &Digest) -> String {
    format!("MCP call {tool} {args}")
}

/// Takes the run's one call as far as the ring can now, and ends the run when it has a result.
fn drive_call(
    ring: &Ring<'_>,
    state: &mut RunState,
    env: &warrant_kernel::ToolEnv,
    caller: &Principal,
) -> Result<CallOutcome> {
    let run = state.run.clone();
    if state.principal.actor != caller.actor || state.principal.tenant != caller.tenant {
        return Err(HostError::usage(
            "W-MCPSERVE-003",
            format!("run {run} is not a call of {}", caller.actor),
        ));
    }
    // Parked on a request nobody answered yet: nothing changes, the caller hears it again.
    if let Some(request) = state.parked.clone() {
        let answered = state
            .requests
            .get(&request)
            .is_some_and(|r| r.answer.is_some() || r.resolution.is_some());
        if !answered {
            return Ok(CallOutcome::Parked { run, request });
        }
        ring.resume(state, caller)
            .map_err(|e| HostError::failed(&e))?;
    }
    let step = ring
        .process_call(state, CALL_ID, env, &mut NoPrompter)
        .map_err(|e| HostError::failed(&e))?;
    if let CallStep::Parked(request) = step {
        return Ok(CallOutcome::Parked { run, request });
    }
    let result = state.call(CALL_ID).and_then(|c| c.result.clone());
    let outcome = match result {
        Some(CallResult::Completed { ok, result }) => CallOutcome::Completed { run, ok, result },
        Some(CallResult::Refused { code, message }) => CallOutcome::Refused { run, code, message },
        Some(CallResult::Denied { denied, message }) => CallOutcome::Denied {
            run,
            code: match denied {
                DeniedBy::Policy { .. } => "W-MCPSERVE-004",
                DeniedBy::Person { .. } => "W-MCPSERVE-005",
            }
            .to_owned(),
            message,
        },
        Some(CallResult::InDoubt) => return Ok(CallOutcome::InDoubt { run }),
        None => {
            return Err(HostError::usage(
                "W-MCPSERVE-003",
                format!("the call of run {run} has no result and waits for nothing"),
            ));
        }
    };
    if state.ended.is_none() {
        ring.end(state, warrant_kernel::Outcome::Completed)
            .map_err(|e| HostError::failed(&e))?;
    }
    Ok(outcome)
}
