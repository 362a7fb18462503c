//! The request tools: the agent asks a person to answer a question, provide a secret, or
//! connect a resource. They describe a request and nothing else; the ring raises it, parks
//! the run, and gives the call the person's reply (a secret as its handle) or its expiry.

use serde_json::{Value, json};
use warrant_core::{Action, ToolSpec};
use warrant_kernel::{
    Ask, Authorized, EffectResult, Presentation, ReadFilter, Refusal, ResourceKind, StopCheck,
    Tool, ToolEnv,
};

pub(crate) fn all() -> Vec<Box<dyn Tool>> {
    vec![
        Box::new(AskQuestion(spec(
            "ask_question",
            "Ask the person you work for a question and wait for the answer. Give options when the answer is one of a few choices.",
            json!({"type": "object", "properties": {
                "question": {"type": "string", "minLength": 1, "maxLength": 4000},
                "options": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 500}, "minItems": 1, "maxItems": 20}
            }, "required": ["question"], "additionalProperties": false}),
        ))),
        Box::new(RequestSecret(spec(
            "request_secret",
            "Ask a person to provide a secret (API key, token, password). You receive a handle (secret:NAME), never the value; Warrant gives the value only to the command that uses it.",
            json!({"type": "object", "properties": {
                "name": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_.-]{0,63}$"},
                "purpose": {"type": "string", "minLength": 1, "maxLength": 500},
                "used_by": {"type": "string", "minLength": 1, "maxLength": 500}
            }, "required": ["name", "purpose", "used_by"], "additionalProperties": false}),
        ))),
        Box::new(RequestResource(spec(
            "request_resource",
            "Ask a person to connect a resource: an MCP server (give its command) or an HTTP endpoint (give its url). Warrant checks it exists before telling you it is connected.",
            json!({"type": "object", "properties": {
                "kind": {"type": "string", "enum": ["mcp", "endpoint"]},
                "name": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"},
                "url": {"type": "string", "minLength": 1, "maxLength": 2000},
                "command": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1}
            }, "required": ["kind", "name"], "additionalProperties": false}),
        ))),
    ]
}

fn spec(name: &str, description: &str, schema: Value) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: description.into(),
        input_schema: schema,
    }
}

fn text(args: &Value, key: &str) -> String {
    args.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn refusal(message: impl Into<String>) -> Refusal {
    Refusal {
        code: "W-REQUEST-011".into(),
        message: message.into(),
    }
}

struct AskQuestion(ToolSpec);
struct RequestSecret(ToolSpec);
struct RequestResource(ToolSpec);

/// The parts of `Tool` a request tool never uses: the ring handles its calls through `ask`.
macro_rules! not_an_effect {
    () => {
        fn spec(&self) -> &ToolSpec {
            &self.0
        }
        fn normalize(&self, _args: &Value, _env: &ToolEnv) -> Result<Vec<Action>, Refusal> {
            Err(refusal(format!(
                "`{}` raises a request of a person; it has no action to run",
                self.0.name
            )))
        }
        fn present(&self, _actions: &[Action], _env: &ToolEnv) -> Presentation {
            Presentation {
                title: format!("{} (a request, no action)", self.0.name),
                body: String::new(),
            }
        }
        fn execute(
            &self,
            _actions: &[Authorized<Action>],
            _env: &ToolEnv,
            _may_read: ReadFilter<'_>,
            _stop: StopCheck<'_>,
        ) -> EffectResult {
            EffectResult {
                ok: false,
                result: json!({"error": format!("`{}` raises a request; it never runs an effect", self.0.name), "code": "W-REQUEST-011"}),
            }
        }
    };
}

impl Tool for AskQuestion {
    not_an_effect!();
    fn worst_class(&self) -> Option<warrant_core::RiskClass> {
        Some(warrant_core::RiskClass::Read)
    }
    fn ask(&self, args: &Value) -> Option<Result<Ask, Refusal>> {
        let options: Vec<String> = args
            .get("options")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let mut seen = std::collections::BTreeSet::new();
        if let Some(dup) = options.iter().find(|o| !seen.insert(o.as_str())) {
            return Some(Err(refusal(format!(
                "option {dup:?} is given twice; each option must be distinct"
            ))));
        }
        Some(Ok(Ask::Question {
            question: text(args, "question"),
            options,
        }))
    }
}

impl Tool for RequestSecret {
    not_an_effect!();
    /// A secret handed to the run by a person is the `secret` class.
    fn worst_class(&self) -> Option<warrant_core::RiskClass> {
        Some(warrant_core::RiskClass::Secret)
    }
    fn ask(&self, args: &Value) -> Option<Result<Ask, Refusal>> {
        Some(Ok(Ask::Secret {
            name: text(args, "name"),
            purpose: text(args, "purpose"),
            used_by: text(args, "used_by"),
        }))
    }
}

impl Tool for RequestResource {
    not_an_effect!();
    fn worst_class(&self) -> Option<warrant_core::RiskClass> {
        Some(warrant_core::RiskClass::Read)
    }
    fn ask(&self, args: &Value) -> Option<Result<Ask, Refusal>> {
        let name = text(args, "name");
        let url = args.get("url").and_then(Value::as_str).map(str::to_owned);
        let command: Option<Vec<String>> = args.get("command").and_then(Value::as_array).map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        });
        let kind = text(args, "kind");
        let resource = match kind.as_str() {
            "mcp" => ResourceKind::Mcp,
            "endpoint" => ResourceKind::Endpoint,
            other => {
                return Some(Err(refusal(format!(
                    "kind {other:?} is not one of mcp, endpoint"
                ))));
            }
        };
        match resource {
            ResourceKind::Endpoint => match &url {
                None => {
                    return Some(Err(refusal(
                        "an endpoint needs a `url` (http:// or https://)",
                    )));
                }
                Some(u) if !(u.starts_with("http://") || u.starts_with("https://")) => {
                    return Some(Err(refusal(format!(
                        "url {u:?} is not an http:// or https:// URL"
                    ))));
                }
                Some(_) => {}
            },
            ResourceKind::Mcp => {
                if command.is_none() {
                    return Some(Err(refusal(
                        "an MCP server needs the `command` that starts it (stdio)",
                    )));
                }
            }
        }
        Some(Ok(Ask::Resource {
            resource,
            name,
            url,
            command,
        }))
    }
}
