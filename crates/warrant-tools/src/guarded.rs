//! What a run's tools are wrapped in before the model meets them: a menu (the tools the
//! model is offered and may call) and redaction of every result before it is journaled, so a
//! secret value reaches neither the model nor the log. The redaction report (rule ids and
//! counts, never values) is part of the journaled result.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};
use thiserror::Error;
use warrant_core::config::MenuConfig;
use warrant_core::{Action, Coded, ToolSpec};
use warrant_kernel::events::Presentation;
use warrant_kernel::{
    Ask, Authorized, EffectResult, PeerAsks, ReadFilter, Refusal, StopCheck, Tool, ToolEnv,
};
use warrant_secrets::Redactor;

/// The key under which a result records what was redacted from it.
pub const REDACTED_KEY: &str = "redacted";

/// A tool whose results pass through the redactor before anyone sees them.
pub struct Redacting {
    pub inner: Box<dyn Tool>,
    pub redactor: Arc<Redactor>,
}

impl std::fmt::Debug for Redacting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redacting")
            .field("tool", &self.inner.spec().name)
            .finish_non_exhaustive()
    }
}

impl Tool for Redacting {
    fn spec(&self) -> &ToolSpec {
        self.inner.spec()
    }

    fn worst_class(&self) -> Option<warrant_core::RiskClass> {
        self.inner.worst_class()
    }

    fn normalize(&self, args: &Value, env: &ToolEnv) -> Result<Vec<Action>, Refusal> {
        self.inner.normalize(args, env)
    }

    fn present(&self, actions: &[Action], env: &ToolEnv) -> Presentation {
        self.inner.present(actions, env)
    }

    fn base(&self, actions: &[Action], env: &ToolEnv) -> Value {
        self.inner.base(actions, env)
    }

    fn ask(&self, args: &Value) -> Option<Result<Ask, Refusal>> {
        self.inner.ask(args)
    }

    fn execute(
        &self,
        actions: &[Authorized<Action>],
        env: &ToolEnv,
        may_read: ReadFilter<'_>,
        stop: StopCheck<'_>,
    ) -> EffectResult {
        let raw = self.inner.execute(actions, env, may_read, stop);
        redact_result(&self.redactor, raw)
    }

    fn execute_with(
        &self,
        actions: &[Authorized<Action>],
        env: &ToolEnv,
        may_read: ReadFilter<'_>,
        stop: StopCheck<'_>,
        peers: &dyn PeerAsks,
    ) -> EffectResult {
        let raw = self.inner.execute_with(actions, env, may_read, stop, peers);
        redact_result(&self.redactor, raw)
    }

    fn settle(
        &self,
        actions: &[Authorized<Action>],
        result: &Value,
        approved: bool,
        env: &ToolEnv,
    ) -> EffectResult {
        redact_result(
            &self.redactor,
            self.inner.settle(actions, result, approved, env),
        )
    }
}

/// The result with every string redacted, and `"redacted": {rule: count}` added when anything
/// was.
pub fn redact_result(redactor: &Redactor, raw: EffectResult) -> EffectResult {
    let (value, report) = redactor.redact_json(&raw.result);
    if report.is_empty() {
        return EffectResult {
            ok: raw.ok,
            result: value,
        };
    }
    let counts: serde_json::Map<String, Value> = report
        .counts
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    let result = match value {
        Value::Object(mut map) => {
            map.insert(REDACTED_KEY.into(), Value::Object(counts));
            Value::Object(map)
        }
        other @ (Value::Null
        | Value::Bool(_)
        | Value::Number(_)
        | Value::String(_)
        | Value::Array(_)) => json!({"result": other, REDACTED_KEY: counts}),
    };
    EffectResult { ok: raw.ok, result }
}

/// A tool menu that cannot be used. Reported before anything starts.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum MenuError {
    #[error("tool menu `{menu}` names `{tool}`, which is not a tool; the tools are: {known}")]
    UnknownTool {
        menu: String,
        tool: String,
        known: String,
    },
    #[error("`[run] menu = \"{menu}\"` names no `[menus.{menu}]` table; the menus are: {known}")]
    UnknownMenu { menu: String, known: String },
}

impl Coded for MenuError {
    fn code(&self) -> &'static str {
        match self {
            Self::UnknownTool { .. } => "W-TOOL-008",
            Self::UnknownMenu { .. } => "W-TOOL-009",
        }
    }
}

/// The menu in force: `None` offers every tool.
pub fn resolve_menu(
    menu: Option<&str>,
    menus: &BTreeMap<String, MenuConfig>,
    catalogue: &[ToolSpec],
) -> Result<Option<(String, Vec<String>)>, MenuError> {
    let Some(name) = menu else {
        return Ok(None);
    };
    let Some(m) = menus.get(name) else {
        return Err(MenuError::UnknownMenu {
            menu: name.to_owned(),
            known: if menus.is_empty() {
                "(none)".to_owned()
            } else {
                menus.keys().cloned().collect::<Vec<_>>().join(", ")
            },
        });
    };
    for tool in &m.tools {
        if !catalogue.iter().any(|s| &s.name == tool) {
            return Err(MenuError::UnknownTool {
                menu: name.to_owned(),
                tool: tool.clone(),
                known: catalogue
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
    }
    Ok(Some((name.to_owned(), m.tools.clone())))
}
