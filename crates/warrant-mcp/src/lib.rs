//! The MCP client: configured servers (`[mcp.servers.<name>]`, stdio under a subprocess profile
//! or streamable HTTP) as a tool source. Every remote tool is offered as `mcp__<server>__<tool>`
//! and every call is an `mcp.call` action through the ring; descriptions of servers nobody
//! vouched for are withheld, results are bounded (the toolbox redacts them, the agent fences
//! them). The SDK is `rmcp`; its async runtime stays inside [`connection`], one per server.
//! Limits: tools only (resources, prompts, sampling and elicitation are not used: requests for
//! the last two are refused). HTTP servers are reached over TLS (rustls, the platform's
//! certificate store); plain `http://` only to this machine, never across a network.

pub mod connection;
pub mod error;
pub mod names;
pub mod source;

pub use connection::{Connection, ConnectionRecord, Endpoint, PROTOCOL};
pub use error::{McpError, ServerRequest};
pub use names::{MAX_NAME, model_name};
pub use source::{McpSource, McpTool, StartContext, WITHHELD, shape};
