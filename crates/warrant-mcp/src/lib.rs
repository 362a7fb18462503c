//! The MCP client: configured servers (`[mcp.servers.<name>]`, stdio under a subprocess profile
//! or streamable HTTP) as a tool source. Every remote tool is offered as `mcp__<server>__<tool>`
//! and every call is an `mcp.call` action through the ring; descriptions of servers nobody
//! vouched for are withheld, results are bounded (the toolbox redacts them, the agent fences
//! them). The SDK is `rmcp`; its async runtime stays inside [`connection`], one per server.
//! A server configured with `sampling = true` may ask for a completion while one of its calls
//! runs ([`sampling`]): a run of its own answers it through the ring. A server configured with
//! `elicitation = true` may ask the person (form mode, [`elicitation`]): a request to the run's
//! person, which the call waits for. Resources and prompts are not used. HTTP servers are reached over TLS (rustls, the platform's
//! certificate store); plain `http://` only to this machine, never across a network.

pub mod connection;
pub mod elicitation;
pub mod error;
pub mod names;
pub mod sampling;
pub mod source;

pub use connection::{Connection, ConnectionRecord, Endpoint, PROTOCOL};
pub use elicitation::{DEFAULT_ELICITATION_TIMEOUT_MS, elicitation_ask};
pub use error::{McpError, ServerRequest};
pub use names::{MAX_NAME, model_name};
pub use sampling::{MAX_SAMPLING_TOKENS, sampling_ask};
pub use source::{McpSource, McpTool, StartContext, WITHHELD, shape};
