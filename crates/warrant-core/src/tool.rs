//! What a model is told about a tool: its name, a description, and the JSON Schema of its input.

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// `[a-z0-9_]` only, so every provider accepts it.
    pub name: String,
    pub description: String,
    /// JSON Schema (draft 2020-12) of the arguments object.
    pub input_schema: Value,
}
