//! `spawn_agent`: a subagent for a part of the task, normalized into one `agent.spawn` action
//! that says everything policy and a person need: the task, the tools the child is offered
//! (the parent's own, or a `[menus.NAME]` that is a subset of them), the profile its commands
//! are held to (the parent's, or one named where the parent is held to none), its depth and the
//! id it will run under. Narrowing only: a menu or profile wider than the parent's is refused
//! here, before anything is decided. The child is started and driven by the ring's spawner
//! (the host), never by this tool; its final answer comes back as the call's result, fenced as
//! untrusted like every result.

use serde_json::{Value, json};
use warrant_core::{Action, Digest, RunId, ToolSpec};
use warrant_kernel::{
    Authorized, EffectResult, Presentation, ReadFilter, Refusal, StopCheck, Tool, ToolEnv,
};

use crate::builtin::{fail, spec};

pub(crate) fn all() -> Vec<Box<dyn Tool>> {
    vec![Box::new(SpawnAgent(spec(
        "spawn_agent",
        "Start a subagent for a part of the task. It works under the same authority with your tools or fewer (a configured menu) and returns its final answer, which is untrusted content.",
        json!({"type": "object", "properties": {
            "task": {"type": "string", "minLength": 1},
            "menu": {"type": "string", "minLength": 1},
            "profile": {"type": "string", "minLength": 1}
        }, "required": ["task"], "additionalProperties": false}),
    )))]
}

struct SpawnAgent(ToolSpec);

fn refused(message: String) -> Refusal {
    Refusal {
        code: "W-SPAWN-003".into(),
        message,
    }
}

/// The id a subagent of `parent` started by `call` runs under: the parent's id and 12 hex
/// digits of the call's digest, so the same call always names the same child (and a child's
/// ancestors can be read from its id).
pub fn child_run_id(parent: &RunId, call: &str) -> Option<RunId> {
    let digest = Digest::of_bytes(format!("{parent}\n{call}").as_bytes());
    let hex = digest
        .as_str()
        .strip_prefix("sha256:")?
        .get(..12)?
        .to_owned();
    RunId::parse(&format!("{parent}-{hex}"))
}

impl Tool for SpawnAgent {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    fn worst_class(&self) -> Option<warrant_core::RiskClass> {
        Some(warrant_core::RiskClass::Change)
    }

    fn normalize(&self, args: &Value, env: &ToolEnv) -> Result<Vec<Action>, Refusal> {
        let text = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_owned);
        let task = text("task").unwrap_or_default();
        if task.trim().is_empty() {
            return Err(refused("a subagent needs a task".into()));
        }
        let Some(run) = &env.run else {
            return Err(Refusal {
                code: "W-SPAWN-004".into(),
                message: "a subagent can only be started from a run".into(),
            });
        };
        let menu = text("menu");
        let tools = match &menu {
            None => run.tools.clone(),
            Some(name) => {
                let Some(config) = env.menus.get(name) else {
                    return Err(refused(format!(
                        "no menu is named `{name}`; configured: {}",
                        env.menus.keys().cloned().collect::<Vec<_>>().join(", ")
                    )));
                };
                let wider: Vec<&str> = config
                    .tools
                    .iter()
                    .filter(|t| !run.tools.contains(t))
                    .map(String::as_str)
                    .collect();
                if !wider.is_empty() && !env.spawn_unnarrowed {
                    return Err(refused(format!(
                        "menu `{name}` offers tools this run was not offered ({}); a subagent gets its parent's tools or fewer, nothing was started",
                        wider.join(", ")
                    )));
                }
                config.tools.clone()
            }
        };
        let held = run.held_profile().map(str::to_owned);
        let profile = match (text("profile"), held) {
            (None, held) => held,
            (Some(asked), Some(held)) if asked != held => {
                return Err(refused(format!(
                    "profile `{asked}` is not the profile `{held}` this run's commands are held to; a subagent's commands are held to its parent's, nothing was started"
                )));
            }
            (Some(asked), _) => {
                if !env.profiles.contains_key(&asked) {
                    return Err(refused(format!(
                        "no subprocess profile is named `{asked}`; configured: {}",
                        env.profiles.keys().cloned().collect::<Vec<_>>().join(", ")
                    )));
                }
                Some(asked)
            }
        };
        let depth = run.spawn.as_ref().map_or(0, |s| s.depth) + 1;
        let child = child_run_id(&run.run, &run.call).ok_or_else(|| Refusal {
            code: "W-SPAWN-004".into(),
            message: format!("no subagent id can be made from run {}", run.run),
        })?;
        Ok(vec![Action::AgentSpawn {
            task,
            menu,
            tools,
            profile,
            child,
            depth,
        }])
    }

    fn present(&self, actions: &[Action], _env: &ToolEnv) -> Presentation {
        let inline = warrant_core::render::inline;
        let mut title = Vec::new();
        let mut body = String::new();
        for a in actions {
            if let Action::AgentSpawn {
                task,
                tools,
                profile,
                child,
                depth,
                ..
            } = a
            {
                title.push(format!("start subagent {child}"));
                body.push_str(&format!(
                    "task:    {}\ntools:   {}\nprofile: {}\ndepth:   {depth}\n",
                    inline(task),
                    tools.join(", "),
                    profile
                        .as_deref()
                        .unwrap_or("(as policy decides, like its parent)")
                ));
            }
        }
        Presentation {
            title: title.join(", "),
            body,
        }
    }

    fn execute(
        &self,
        _actions: &[Authorized<Action>],
        _env: &ToolEnv,
        _may_read: ReadFilter<'_>,
        _stop: StopCheck<'_>,
    ) -> EffectResult {
        // The ring hands a spawn to its spawner; a ring without one refuses it before it starts.
        fail(
            "W-SPAWN-004",
            "subagents are started by the ring's spawner; this ring has none, nothing was started",
        )
    }
}
