//! The registry of built-in tools. Each tool's JSON Schema is compiled on the tool's first
//! call, not when the catalogue is built: a run that never calls a tool does not pay for its
//! schema, and a schema that does not compile refuses the calls to that tool (W-TOOL-006)
//! without running anything.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::Value;
use warrant_core::ToolSpec;
use warrant_kernel::{Refusal, Tool, ToolRegistry};

use crate::builtin;

/// A tool's input schema, compiled on first use; the error is kept so every later call is
/// refused the same way.
type LazyValidator = OnceLock<Result<jsonschema::Validator, String>>;

pub struct BuiltinTools {
    tools: Vec<Box<dyn Tool>>,
    /// By tool name; filled on the tool's first call.
    validators: BTreeMap<String, LazyValidator>,
    /// The menu in force (name, tools): only these are offered, and a call to another is
    /// refused (W-TOOL-007) without running anything.
    menu: Option<(String, Vec<String>)>,
}

impl std::fmt::Debug for BuiltinTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuiltinTools")
            .field("tools", &self.validators.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl BuiltinTools {
    /// The catalogue. Fails only if two built-in tools share a name (a call could not say which
    /// it means); no schema is compiled here.
    pub fn new() -> Result<Self, String> {
        Self::with_tools(builtin::all())
    }

    fn with_tools(tools: Vec<Box<dyn Tool>>) -> Result<Self, String> {
        let mut validators = BTreeMap::new();
        for tool in &tools {
            let name = &tool.spec().name;
            if validators.insert(name.clone(), OnceLock::new()).is_some() {
                return Err(format!("two built-in tools are named {name}"));
            }
        }
        Ok(Self {
            tools,
            validators,
            menu: None,
        })
    }

    /// The compiled schema of `name` (compiled now if this is its first call).
    fn validator<'a>(
        &self,
        name: &str,
        cell: &'a LazyValidator,
    ) -> Result<&'a jsonschema::Validator, Refusal> {
        cell.get_or_init(|| {
            let spec = self
                .tools
                .iter()
                .map(|t| t.spec())
                .find(|s| s.name == name)
                .ok_or_else(|| format!("no built-in tool is named {name}"))?;
            jsonschema::validator_for(&spec.input_schema).map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| Refusal {
            code: "W-TOOL-006".into(),
            message: format!(
                "the input schema of tool `{name}` cannot be compiled, so its arguments cannot be checked; nothing was run: {e}"
            ),
        })
    }

    /// Offers the model only the tools of `menu` (from [`crate::resolve_menu`]).
    pub fn with_menu(mut self, menu: Option<(String, Vec<String>)>) -> Self {
        self.menu = menu;
        self
    }

    /// Every result is redacted before it is journaled or shown to the model.
    pub fn with_redactor(mut self, redactor: std::sync::Arc<warrant_secrets::Redactor>) -> Self {
        self.tools = self
            .tools
            .into_iter()
            .map(|inner| {
                Box::new(crate::guarded::Redacting {
                    inner,
                    redactor: redactor.clone(),
                }) as Box<dyn Tool>
            })
            .collect();
        self
    }

    /// Every built-in tool, whatever the menu: what a transcript may name.
    pub fn catalogue_specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|t| t.spec().clone()).collect()
    }

    fn on_menu(&self, name: &str) -> bool {
        self.menu
            .as_ref()
            .is_none_or(|(_, tools)| tools.iter().any(|t| t == name))
    }
}

impl ToolRegistry for BuiltinTools {
    fn get(&self, name: &str) -> Option<&dyn Tool> {
        self.tools
            .iter()
            .find(|t| t.spec().name == name)
            .map(|b| b.as_ref())
    }

    fn specs(&self) -> Vec<ToolSpec> {
        self.tools
            .iter()
            .filter(|t| self.on_menu(&t.spec().name))
            .map(|t| t.spec().clone())
            .collect()
    }

    fn validate(&self, name: &str, args: &Value) -> Result<(), Refusal> {
        let Some(cell) = self.validators.get(name) else {
            return Err(Refusal {
                code: "W-TOOL-001".into(),
                message: format!("unknown tool `{name}`"),
            });
        };
        if let Some((menu, tools)) = &self.menu
            && !self.on_menu(name)
        {
            return Err(Refusal {
                code: "W-TOOL-007".into(),
                message: format!(
                    "tool `{name}` is not on this run's menu `{menu}`; nothing was run. The menu offers: {}",
                    tools.join(", ")
                ),
            });
        }
        let v = self.validator(name, cell)?;
        let errors: Vec<String> = v
            .iter_errors(args)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("{at}: {e}")
                }
            })
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(Refusal {
                code: "W-TOOL-002".into(),
                message: format!(
                    "arguments of `{name}` do not match its schema: {}",
                    errors.join("; ")
                ),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use serde_json::json;
    use warrant_core::Action;
    use warrant_kernel::{Authorized, EffectResult, Presentation, ReadFilter, StopCheck, ToolEnv};

    /// A built-in tool shown with another input schema.
    struct Reschema {
        inner: Box<dyn Tool>,
        spec: ToolSpec,
    }

    impl Tool for Reschema {
        fn spec(&self) -> &ToolSpec {
            &self.spec
        }
        fn normalize(&self, args: &Value, env: &ToolEnv) -> Result<Vec<Action>, Refusal> {
            self.inner.normalize(args, env)
        }
        fn present(&self, actions: &[Action], env: &ToolEnv) -> Presentation {
            self.inner.present(actions, env)
        }
        fn execute(
            &self,
            actions: &[Authorized<Action>],
            env: &ToolEnv,
            may_read: ReadFilter<'_>,
            stop: StopCheck<'_>,
        ) -> EffectResult {
            self.inner.execute(actions, env, may_read, stop)
        }
    }

    fn with_schema(name: &str, schema: Value) -> Vec<Box<dyn Tool>> {
        builtin::all()
            .into_iter()
            .map(|t| {
                if t.spec().name != name {
                    return t;
                }
                let mut spec = t.spec().clone();
                spec.input_schema = schema.clone();
                Box::new(Reschema { inner: t, spec }) as Box<dyn Tool>
            })
            .collect()
    }

    fn compiled(tools: &BuiltinTools) -> Vec<&str> {
        tools
            .validators
            .iter()
            .filter(|(_, cell)| cell.get().is_some())
            .map(|(name, _)| name.as_str())
            .collect()
    }

    #[test]
    fn a_schema_is_compiled_on_its_tools_first_call_only() {
        let tools = BuiltinTools::new().unwrap();
        assert!(compiled(&tools).is_empty(), "nothing compiled at build");
        tools.validate("read_file", &json!({"path": "a"})).unwrap();
        assert_eq!(compiled(&tools), vec!["read_file"]);
        let e = tools
            .validate("read_file", &json!({"path": 3}))
            .unwrap_err();
        assert_eq!(e.code, "W-TOOL-002", "{e:?}");
        assert_eq!(compiled(&tools), vec!["read_file"]);
    }

    #[test]
    fn a_schema_that_does_not_compile_refuses_every_call_to_its_tool_and_only_to_it() {
        let tools =
            BuiltinTools::with_tools(with_schema("read_file", json!({"type": "no-such-type"})))
                .unwrap();
        // Arguments the real schema accepts are refused too: the check never fails open.
        for _ in 0..2 {
            let e = tools
                .validate("read_file", &json!({"path": "a"}))
                .unwrap_err();
            assert_eq!(e.code, "W-TOOL-006", "{e:?}");
            assert!(e.message.contains("`read_file`"), "{}", e.message);
            assert!(e.message.contains("nothing was run"), "{}", e.message);
        }
        tools.validate("list_dir", &json!({"path": "."})).unwrap();
        // The menu is checked first: a tool off the menu is refused as such.
        let menu = Some(("small".to_owned(), vec!["list_dir".to_owned()]));
        let tools = BuiltinTools::with_tools(with_schema("read_file", json!({"type": 1})))
            .unwrap()
            .with_menu(menu);
        let e = tools
            .validate("read_file", &json!({"path": "a"}))
            .unwrap_err();
        assert_eq!(e.code, "W-TOOL-007", "{e:?}");
    }

    #[test]
    fn two_tools_with_one_name_are_refused_when_the_catalogue_is_built() {
        let mut tools = builtin::all();
        tools.extend(
            builtin::all()
                .into_iter()
                .filter(|t| t.spec().name == "list_dir"),
        );
        let e = BuiltinTools::with_tools(tools).unwrap_err();
        assert!(e.contains("list_dir"), "{e}");
    }
}
