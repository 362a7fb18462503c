//! Errors of the MCP client, each with a stable code (docs/ERRORS.md).

use thiserror::Error;
use warrant_core::Coded;

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum McpError {
    #[error("MCP server `{server}` is misconfigured: {message}")]
    Config { server: String, message: String },
    #[error("MCP server `{server}` could not be started or reached: {message}")]
    Connect { server: String, message: String },
    #[error("MCP server `{server}` did not answer `initialize` within {ms} ms")]
    InitializeTimeout { server: String, ms: u64 },
    #[error("MCP server `{server}` could not list its tools: {message}")]
    List { server: String, message: String },
    #[error("the call of `{tool}` on MCP server `{server}` failed: {message}")]
    Call {
        server: String,
        tool: String,
        message: String,
    },
    #[error("the call of `{tool}` on MCP server `{server}` did not finish within {ms} ms")]
    CallTimeout {
        server: String,
        tool: String,
        ms: u64,
    },
    #[error(
        "tool `{tool}` of MCP server `{server}` changed its definition since this call was decided ({decided} then, {now} now); nothing was sent. Start a new run to use the new definition"
    )]
    DefinitionChanged {
        server: String,
        tool: String,
        decided: String,
        now: String,
    },
    #[error("MCP server `{server}` no longer offers tool `{tool}`; nothing was sent")]
    ToolGone { server: String, tool: String },
    #[error(
        "MCP server `{server}` redirected to another host ({to}); refused, so its headers never left for it"
    )]
    Redirect { server: String, to: String },
    #[error("header `{header}` of MCP server `{server}` could not be resolved: {message}")]
    Header {
        server: String,
        header: String,
        message: String,
    },
    #[error(
        "MCP server `{server}` asked Warrant for {kind} during a call; refused: a server may not call the model or ask the person through Warrant"
    )]
    RequestRefused { server: String, kind: ServerRequest },
}

/// What a server asked of the client during a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerRequest {
    /// `sampling/createMessage`: the server wants the model.
    Sampling,
    /// `elicitation/create`: the server wants the person.
    Elicitation,
}

impl std::fmt::Display for ServerRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Sampling => "sampling (a call of the model)",
            Self::Elicitation => "elicitation (a question to the person)",
        })
    }
}

impl Coded for McpError {
    fn code(&self) -> &'static str {
        match self {
            Self::Config { .. } => "W-MCP-001",
            Self::Connect { .. } => "W-MCP-002",
            Self::InitializeTimeout { .. } => "W-MCP-003",
            Self::List { .. } => "W-MCP-004",
            Self::Call { .. } => "W-MCP-005",
            Self::CallTimeout { .. } => "W-MCP-006",
            Self::DefinitionChanged { .. } => "W-MCP-007",
            Self::ToolGone { .. } => "W-MCP-008",
            Self::Header { .. } => "W-MCP-009",
            Self::RequestRefused { .. } => "W-MCP-011",
            Self::Redirect { .. } => "W-MCP-010",
        }
    }
}
