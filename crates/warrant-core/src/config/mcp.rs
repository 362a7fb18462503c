//! `[mcp]`: Model Context Protocol. `[mcp.serve]` is what `warrant mcp serve` exports
//! (`mcp_serve.rs`); the client's `[mcp.servers.<name>]` joins it here.

use serde::{Deserialize, Serialize};

use super::McpServeConfig;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    #[serde(default)]
    pub serve: McpServeConfig,
}
