//! The open tool catalogue: a [`Toolbox`] composes tool sources (the built-in set today; MCP
//! servers, memory, catalog and artifacts plug in as more [`ToolSource`]s) and applies the
//! run's menu and result redaction once, to every tool of every source, so a new source cannot
//! bring a tool that skips them. Each tool's JSON Schema is compiled on the tool's first call,
//! not when the catalogue is built: a run that never calls a tool does not pay for its schema,
//! and a schema that does not compile refuses the calls to that tool (W-TOOL-006) without
//! running anything.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use serde_json::Value;
use thiserror::Error;
use warrant_core::config::MenuConfig;
use warrant_core::{Coded, ToolSpec};
use warrant_kernel::{Refusal, Tool, ToolRegistry};
use warrant_secrets::Redactor;

use crate::builtin;
use crate::guarded::{MenuError, Redacting, resolve_menu};

/// Where tools come from. A source only describes and runs its tools; governance (the menu,
/// redaction, and the ring's decisions around every call) is applied by the [`Toolbox`] and the
/// ring, never by the source.
pub trait ToolSource {
    /// The source's name in messages (`builtin`, `mcp:github`, …).
    fn name(&self) -> &str;

    /// Its tools, taken once when a toolbox is built.
    fn tools(&self) -> Vec<Box<dyn Tool>>;
}

/// The built-in tools of the contract.
#[derive(Clone, Copy, Debug, Default)]
pub struct Builtin;

impl ToolSource for Builtin {
    fn name(&self) -> &str {
        "builtin"
    }

    fn tools(&self) -> Vec<Box<dyn Tool>> {
        builtin::all()
    }
}

/// What a toolbox applies to every tool. No `Default`: whoever builds a toolbox names each.
#[derive(Clone, Debug)]
pub struct Controls<'a> {
    /// The menu chosen for the run (`[run] menu`), `None` for every tool.
    pub menu: Option<&'a str>,
    /// The menus configured (`[menus.*]`).
    pub menus: &'a BTreeMap<String, MenuConfig>,
    /// Every result of every tool passes through it before it is journaled or shown to the
    /// model. `None` only where nothing secret can appear (tests, benches) or for a debug
    /// build's negative control.
    pub redactor: Option<Arc<Redactor>>,
}

/// Why a toolbox could not be built. Reported before anything starts.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ToolboxError {
    #[error(
        "two tools are named `{name}` (from {first} and {second}); a call could not say which it means"
    )]
    Duplicate {
        name: String,
        first: String,
        second: String,
    },
    #[error(transparent)]
    Menu(#[from] MenuError),
}

impl Coded for ToolboxError {
    fn code(&self) -> &'static str {
        match self {
            Self::Duplicate { .. } => "W-TOOL-006",
            Self::Menu(e) => e.code(),
        }
    }
}

/// A tool's input schema, compiled on first use; the error is kept so every later call is
/// refused the same way.
type LazyValidator = OnceLock<Result<jsonschema::Validator, String>>;

/// The tools of a run, from every source, behind the run's menu and redaction.
pub struct Toolbox {
    tools: Vec<Box<dyn Tool>>,
    /// By tool name; filled on the tool's first call.
    validators: BTreeMap<String, LazyValidator>,
    /// The menu in force (name, tools): only these are offered, and a call to another is
    /// refused (W-TOOL-007) without running anything.
    menu: Option<(String, Vec<String>)>,
    /// The offered specs, made once: the tools and the menu are fixed for the toolbox's life,
    /// and every model request asks for them.
    specs: std::sync::OnceLock<std::sync::Arc<[ToolSpec]>>,
}

impl std::fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Toolbox")
            .field("tools", &self.validators.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Toolbox {
    /// Composes `sources` in order. Fails if two tools share a name (even across sources), or
    /// the menu names a tool that none of them has; no schema is compiled here.
    pub fn new(sources: &[&dyn ToolSource], controls: Controls<'_>) -> Result<Self, ToolboxError> {
        let mut tools: Vec<Box<dyn Tool>> = Vec::new();
        let mut origin: BTreeMap<String, String> = BTreeMap::new();
        for source in sources {
            for tool in source.tools() {
                let name = tool.spec().name.clone();
                if let Some(first) = origin.insert(name.clone(), source.name().to_owned()) {
                    return Err(ToolboxError::Duplicate {
                        name,
                        first,
                        second: source.name().to_owned(),
                    });
                }
                tools.push(tool);
            }
        }
        let specs: Vec<ToolSpec> = tools.iter().map(|t| t.spec().clone()).collect();
        let menu = resolve_menu(controls.menu, controls.menus, &specs)?;
        Ok(Self::assemble(tools, menu, controls.redactor))
    }

    fn assemble(
        tools: Vec<Box<dyn Tool>>,
        menu: Option<(String, Vec<String>)>,
        redactor: Option<Arc<Redactor>>,
    ) -> Self {
        let validators = tools
            .iter()
            .map(|t| (t.spec().name.clone(), OnceLock::new()))
            .collect();
        let tools = match redactor {
            Some(redactor) => tools
                .into_iter()
                .map(|inner| {
                    Box::new(Redacting {
                        inner,
                        redactor: redactor.clone(),
                    }) as Box<dyn Tool>
                })
                .collect(),
            None => tools,
        };
        Self {
            tools,
            validators,
            menu,
            specs: std::sync::OnceLock::new(),
        }
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
                .ok_or_else(|| format!("no tool is named {name}"))?;
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

    /// Every tool of every source, whatever the menu: what a transcript may name.
    pub fn catalogue_specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|t| t.spec().clone()).collect()
    }

    fn on_menu(&self, name: &str) -> bool {
        self.menu
            .as_ref()
            .is_none_or(|(_, tools)| tools.iter().any(|t| t == name))
    }
}

impl ToolRegistry for Toolbox {
    fn get(&self, name: &str) -> Option<&dyn Tool> {
        self.tools
            .iter()
            .find(|t| t.spec().name == name)
            .map(|b| b.as_ref())
    }

    fn specs(&self) -> Vec<ToolSpec> {
        self.shared_specs().to_vec()
    }

    fn shared_specs(&self) -> std::sync::Arc<[ToolSpec]> {
        std::sync::Arc::clone(self.specs.get_or_init(|| {
            self.tools
                .iter()
                .filter(|t| self.on_menu(&t.spec().name))
                .map(|t| t.spec().clone())
                .collect()
        }))
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

    fn compiled(tools: &Toolbox) -> Vec<&str> {
        tools
            .validators
            .iter()
            .filter(|(_, cell)| cell.get().is_some())
            .map(|(name, _)| name.as_str())
            .collect()
    }

    /// Every built-in tool declares the worst class it can reach; a tool that declares
    /// nothing (here `read_file` wrapped so that its declaration is lost) counts as the worst
    /// there is, and the redaction wrapper passes the declaration through.
    #[test]
    fn each_tool_declares_its_worst_class_and_one_that_does_not_counts_as_irreversible() {
        use warrant_core::RiskClass;
        let menus = BTreeMap::new();
        let tools = Toolbox::new(&[&Builtin], unguarded(&menus)).unwrap();
        let reach: BTreeMap<String, RiskClass> = tools.reach().into_iter().collect();
        for (tool, class) in [
            ("read_file", RiskClass::Read),
            ("write_file", RiskClass::Change),
            ("delete_path", RiskClass::Destructive),
            ("run_command", RiskClass::Irreversible),
            ("git_push", RiskClass::External),
            ("git_status", RiskClass::Read),
            ("web_fetch", RiskClass::External),
            ("apply_patch", RiskClass::Destructive),
            ("request_secret", RiskClass::Secret),
        ] {
            assert_eq!(reach.get(tool), Some(&class), "{tool}");
        }
        assert!(
            Builtin.tools().iter().all(|t| t.worst_class().is_some()),
            "a built-in tool declares nothing"
        );
        let redacted = Toolbox::assemble(
            builtin::all(),
            None,
            Some(Arc::new(Redactor::new(
                warrant_secrets::Scanner::default_rules(),
                Vec::new(),
            ))),
        );
        assert_eq!(
            redacted.reach().into_iter().collect::<BTreeMap<_, _>>(),
            reach
        );
        let undeclared = Toolbox::assemble(with_schema("read_file", json!({})), None, None);
        let reach: BTreeMap<String, RiskClass> = undeclared.reach().into_iter().collect();
        assert_eq!(reach.get("read_file"), Some(&RiskClass::Irreversible));
    }

    /// The offer is made once and shared: the same list every time, the menu's tools only.
    #[test]
    fn the_offered_specs_are_made_once_and_are_the_menus() {
        let mut menus = BTreeMap::new();
        menus.insert(
            "readers".to_owned(),
            MenuConfig {
                tools: vec!["read_file".to_owned(), "list_dir".to_owned()],
                ceiling: None,
            },
        );
        let mut controls = unguarded(&menus);
        controls.menu = Some("readers");
        let tools = Toolbox::new(&[&Builtin], controls).unwrap();
        let first = tools.shared_specs();
        assert!(Arc::ptr_eq(&first, &tools.shared_specs()));
        let names: Vec<&str> = first.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["read_file", "list_dir"]);
        assert_eq!(tools.specs(), first.to_vec());
    }

    #[test]
    fn a_schema_is_compiled_on_its_tools_first_call_only() {
        let tools = Toolbox::new(&[&Builtin], unguarded(&BTreeMap::new())).unwrap();
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
        let tools = Toolbox::assemble(
            with_schema("read_file", json!({"type": "no-such-type"})),
            None,
            None,
        );
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
        let tools = Toolbox::assemble(with_schema("read_file", json!({"type": 1})), menu, None);
        let e = tools
            .validate("read_file", &json!({"path": "a"}))
            .unwrap_err();
        assert_eq!(e.code, "W-TOOL-007", "{e:?}");
    }

    /// A source that brings a second `list_dir`.
    struct Twin;

    impl ToolSource for Twin {
        fn name(&self) -> &str {
            "twin"
        }
        fn tools(&self) -> Vec<Box<dyn Tool>> {
            builtin::all()
                .into_iter()
                .filter(|t| t.spec().name == "list_dir")
                .collect()
        }
    }

    fn unguarded(menus: &BTreeMap<String, MenuConfig>) -> Controls<'_> {
        Controls {
            menu: None,
            menus,
            redactor: None,
        }
    }

    #[test]
    fn two_tools_with_one_name_are_refused_when_the_catalogue_is_built() {
        let menus = BTreeMap::new();
        let e = Toolbox::new(&[&Builtin, &Twin], unguarded(&menus)).unwrap_err();
        assert_eq!(
            e,
            ToolboxError::Duplicate {
                name: "list_dir".into(),
                first: "builtin".into(),
                second: "twin".into(),
            }
        );
        assert_eq!(e.code(), "W-TOOL-006");
    }
}
