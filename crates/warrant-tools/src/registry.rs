//! The registry of built-in tools, with each tool's JSON Schema compiled once.

use std::collections::BTreeMap;

use serde_json::Value;
use warrant_core::ToolSpec;
use warrant_kernel::{Refusal, Tool, ToolRegistry};

use crate::builtin;

pub struct BuiltinTools {
    tools: Vec<Box<dyn Tool>>,
    validators: BTreeMap<String, jsonschema::Validator>,
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
        Ok(Self { tools, validators })
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
        self.tools.iter().map(|t| t.spec().clone()).collect()
    }

    fn validate(&self, name: &str, args: &Value) -> Result<(), Refusal> {
        let Some(v) = self.validators.get(name) else {
            return Err(Refusal {
                code: "W-TOOL-001".into(),
                message: format!("unknown tool `{name}`"),
            });
        };
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
