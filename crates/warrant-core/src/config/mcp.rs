//! `[mcp]`: the MCP servers a run may call. Each server is started (stdio, under a subprocess
//! profile) or reached (streamable HTTP) by the MCP client in `warrant-mcp`; its tools are
//! offered as `mcp__<server>__<tool>` and every call goes through the ring as `mcp.call`.
//! Headers hold secret references only (`env:NAME`, `file:PATH`), never a value.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::action::RiskClass;

use super::McpServeConfig;

/// `[mcp]`. A server of a name in a higher layer replaces the lower layer's whole.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    /// `[mcp.servers.<name>]`; the name is `[a-z0-9_]`, as it appears in tool names.
    #[serde(default)]
    pub servers: BTreeMap<String, McpServerConfig>,
    /// `[mcp.serve]`: what `warrant mcp serve` exports, and to whom (`mcp_serve.rs`).
    #[serde(default)]
    pub serve: McpServeConfig,
}

/// One server: either `command` (stdio) or `url` (streamable HTTP).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// The server's argv, started over stdio under `profile`.
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// The subprocess profile a stdio server runs under (default `mcp-stdio`: the default
    /// confinement when no such profile is configured).
    #[serde(default)]
    pub profile: Option<String>,
    /// The endpoint of a streamable HTTP server.
    #[serde(default)]
    pub url: Option<String>,
    /// HTTP headers sent with every request, each value a secret reference (`env:NAME`,
    /// `file:PATH`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The operator vouches for the server: its tool descriptions and input schemas reach the
    /// model (still through the prompt guard). Default false: withheld.
    #[serde(default)]
    pub trust_descriptions: bool,
    /// Globs of the server's tool names that are offered; absent: every tool.
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// Risk class per tool (as the server names it), overriding its annotations.
    #[serde(default)]
    pub risk: BTreeMap<String, RiskClass>,
    /// How long `initialize`, a listing or one call may take (default 30 s).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// The largest result passed on, in bytes of its JSON (default 256 KiB); larger ones are
    /// cut and say so.
    #[serde(default)]
    pub max_result_bytes: Option<u64>,
    /// The server may ask for sampling (a model call) while one of its tool calls runs: each
    /// request is answered by a run of its own under the caller's principal, every model call
    /// a `provider.call` decided by policy on the parent run's remaining budget. Default false:
    /// the capability is not declared and a request is refused.
    #[serde(default)]
    pub sampling: bool,
    /// The server may ask the person for input (elicitation, form mode) while one of its tool
    /// calls runs: each request becomes a request to the run's person (`warrant requests`),
    /// answered, declined, or cancelled when nobody answers in time. Default false: the
    /// capability is not declared and a request is refused.
    #[serde(default)]
    pub elicitation: bool,
    /// How long an elicitation waits for the person before the server is told `cancel`
    /// (default 300000, five minutes); the call's own timeout does not count that wait.
    #[serde(default)]
    pub elicitation_timeout_ms: Option<u64>,
}

/// The profile a stdio server runs under when none is named.
pub const DEFAULT_MCP_PROFILE: &str = "mcp-stdio";
