//! Shared fixtures: the contract's tool specs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod anthropic;
mod openai;
mod scripted;
mod streaming;
mod types;
mod untrusted;

use serde_json::json;
use warrant_core::ToolSpec;

/// The contract's tools, with the schemas the model is shown.
pub fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "read_file".into(),
            description: "Read a file".into(),
            input_schema: json!({
                "type": "object",
                "properties": { "path": { "type": "string" } },
                "required": ["path"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "list_dir".into(),
            description: "List a directory".into(),
            input_schema: json!({
                "type": "object",
                "properties": { "path": { "type": "string" } },
                "required": ["path"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "run_command".into(),
            description: "Run a command".into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "argv": { "type": "array", "items": { "type": "string" }, "minItems": 1 },
                    "cwd": { "type": "string" },
                    "profile": { "type": "string" },
                    "timeout_ms": { "type": "integer", "minimum": 1 }
                },
                "required": ["argv"],
                "additionalProperties": false
            }),
        },
    ]
}
