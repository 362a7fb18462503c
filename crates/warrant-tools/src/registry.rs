//! The registry of built-in tools, with each tool's JSON Schema compiled once.

use std::collections::BTreeMap;

use serde_json::Value;
use warrant_core::ToolSpec;
use warrant_kernel::{Refusal, Tool, ToolRegistry};

use crate::builtin;

pub struct BuiltinTools {
    tools: Vec<Box<dyn Tool>>,
    validators: BTreeMap<String, jsonschema::Validator>,
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
    pub fn new() -> Result<Self, String> {
        let tools = builtin::all();
        let mut validators = BTreeMap::new();
        for tool in &tools {
            let spec = tool.spec();
            let v = jsonschema::validator_for(&spec.input_schema)
                .map_err(|e| format!("schema of tool {}: {e}", spec.name))?;
            validators.insert(spec.name.clone(), v);
        }
        Ok(Self {
            tools,
            validators,
            menu: None,
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
        let Some(v) = self.validators.get(name) else {
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
