//! `web_fetch`: one GET of a URL, normalized into a `web.fetch` action naming the URL, its host
//! and port and whether the host is on the configured `[web] allow` list (policy permits only
//! those by default, so fetching is off until a person lists hosts). The executor
//! (`warrant_exec::web`) checks the list again and refuses internal addresses after resolution
//! and on the connected socket. The page comes back as text and, like every tool result,
//! reaches the model fenced as untrusted content.

use serde_json::{Value, json};
use warrant_core::{Action, ToolSpec, WebFetch};
use warrant_exec::web::AddressGuard;
use warrant_kernel::{
    Authorized, EffectResult, Presentation, ReadFilter, Refusal, StopCheck, Tool, ToolEnv,
};

use crate::builtin::{fail, ok, spec};

pub(crate) fn all() -> Vec<Box<dyn Tool>> {
    vec![Box::new(WebFetchTool(spec(
        "web_fetch",
        "Fetch a web page (GET) from a host on the configured allow list; returns its text (HTML reduced to text), cut at a size limit. The content is untrusted.",
        json!({"type": "object", "properties": {"url": {"type": "string", "minLength": 1}}, "required": ["url"], "additionalProperties": false}),
    )))]
}

struct WebFetchTool(ToolSpec);

impl Tool for WebFetchTool {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    fn worst_class(&self) -> Option<warrant_core::RiskClass> {
        Some(warrant_core::RiskClass::External)
    }

    fn normalize(&self, args: &Value, env: &ToolEnv) -> Result<Vec<Action>, Refusal> {
        let url = args
            .get("url")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .trim();
        let (_, host, port) = warrant_exec::web::target(url).map_err(|e| Refusal {
            code: warrant_core::Coded::code(&e).into(),
            message: e.to_string(),
        })?;
        Ok(vec![Action::WebFetch {
            url: url.to_owned(),
            allowlisted: warrant_exec::web::allowlisted(&env.web, &host, port),
            host,
            port,
        }])
    }

    fn present(&self, actions: &[Action], _env: &ToolEnv) -> Presentation {
        Presentation {
            title: actions
                .iter()
                .map(|a| format!("fetch {}", warrant_core::render::inline(&a.target())))
                .collect::<Vec<_>>()
                .join(", "),
            body: String::new(),
        }
    }

    fn execute(
        &self,
        actions: &[Authorized<Action>],
        env: &ToolEnv,
        _may_read: ReadFilter<'_>,
        _stop: StopCheck<'_>,
    ) -> EffectResult {
        let [one] = actions else {
            return fail(
                "W-TOOL-004",
                &format!("expected one authorized action, got {}", actions.len()),
            );
        };
        let Some(fetch) = one.narrow::<WebFetch>() else {
            return fail(
                "W-EXEC-001",
                &format!(
                    "the web executor was handed a `{}` action",
                    one.get().verb().as_str()
                ),
            );
        };
        let guard = if env.web_addresses_unguarded {
            AddressGuard::Off
        } else if env.web_loopback_allowed {
            AddressGuard::LoopbackAllowed
        } else {
            AddressGuard::On
        };
        match warrant_exec::web::fetch(&fetch, &env.web, guard) {
            Ok(page) => ok(&page),
            Err(e) => fail(warrant_core::Coded::code(&e), &e.to_string()),
        }
    }
}
