//! `warrant mcp serve`: Warrant's own tools served over MCP, on the official Rust SDK (`rmcp`).
//! What is exported is `[mcp.serve]` under a read-only ceiling (a tool that can write is held
//! back unless lifted by name); every `tools/call` is one host operation as the caller (stdio:
//! the installation's person; HTTP: the principal of a bearer token), so nothing here decides
//! authority. Async lives only in this crate: a tokio runtime of its own, and one thread that
//! owns the installation and runs the synchronous host operations in order.

pub mod handler;
pub mod http;
pub mod worker;

use std::net::SocketAddr;
use std::sync::Arc;

use rmcp::ServiceExt as _;
use serde::Serialize;
use warrant_host::{HostError, Notices, Where};

use crate::handler::{Transport, WarrantServer};
use crate::worker::Worker;

/// How to serve.
#[derive(Clone, Debug)]
pub enum Serve {
    /// MCP over standard input and output (a desktop client starts `warrant mcp serve`).
    Stdio,
    /// Streamable HTTP on `addr`. Anything but a loopback address needs `public`.
    Http { addr: SocketAddr, public: bool },
}

/// What is being served, for the front end to tell the operator (standard error: in stdio
/// mode standard output is the protocol).
#[derive(Clone, Debug, Serialize)]
pub struct Serving {
    pub tools: Vec<String>,
    /// Configured tools the read-only ceiling holds back (`lift_ceiling` exports them).
    pub held: Vec<String>,
    /// The HTTP address bound (port 0 resolved), when serving HTTP.
    pub http: Option<SocketAddr>,
    /// Bound to an address other than loopback (`--public`).
    pub public: bool,
    /// HTTP tokens configured (their names).
    pub tokens: Vec<String>,
}

/// Serves until the client closes standard input (stdio) or the process is stopped (HTTP).
/// `ready` is called once the export is known and, for HTTP, the socket is bound.
pub fn serve(
    at: &Where,
    how: Serve,
    notices: Arc<dyn Notices + Send>,
    ready: impl FnOnce(&Serving),
) -> Result<(), HostError> {
    if let Serve::Http { addr, public } = &how
        && !public
        && !http::is_loopback(addr)
    {
        return Err(HostError::usage(
            "W-MCPSERVE-009",
            format!(
                "--http {addr} is not a loopback address; serving beyond this machine needs --public (and tokens, and allowed_hosts for the names clients use)"
            ),
        ));
    }
    let (worker, startup) = Worker::start(at.clone(), notices, matches!(how, Serve::Http { .. }))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| HostError::usage("W-MCPSERVE-007", e.to_string()))?;
    let config = startup.config.clone();
    let mut serving = Serving {
        tools: startup
            .export
            .tools
            .iter()
            .map(|t| t.name.clone())
            .collect(),
        held: startup.export.held.clone(),
        http: None,
        public: false,
        tokens: startup.tokens.iter().map(|t| t.name.clone()).collect(),
    };
    runtime.block_on(async move {
        match how {
            Serve::Stdio => {
                let server = WarrantServer::new(worker, &startup.export.tools, Transport::Stdio);
                ready(&serving);
                let running = server
                    .serve(rmcp::transport::stdio())
                    .await
                    .map_err(|e| HostError::usage("W-MCPSERVE-007", e.to_string()))?;
                running
                    .waiting()
                    .await
                    .map_err(|e| HostError::usage("W-MCPSERVE-007", e.to_string()))?;
                Ok(())
            }
            Serve::Http { addr, public } => {
                if startup.tokens.is_empty() {
                    return Err(HostError::usage(
                        "W-MCPSERVE-002",
                        "serving over HTTP needs at least one [mcp.serve.tokens.<name>] entry: every request carries a bearer token",
                    ));
                }
                let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
                    HostError::usage("W-MCPSERVE-009", format!("cannot listen on {addr}: {e}"))
                })?;
                serving.http = listener.local_addr().ok();
                serving.public = public && !http::is_loopback(&addr);
                let guard = http::Guard {
                    tokens: startup.tokens.clone(),
                    allowed_hosts: config.allowed_hosts.clone().unwrap_or_default(),
                    allowed_origins: config.origins(),
                    max_body_bytes: config.max_body_bytes(),
                    rebinding_check: !warrant_host::controls::disabled("rebinding"),
                };
                let server =
                    WarrantServer::new(worker.clone(), &startup.export.tools, Transport::Http);
                ready(&serving);
                http::serve(listener, server, guard, worker)
                    .await
                    .map_err(|e| HostError::usage("W-MCPSERVE-007", e.to_string()))
            }
        }
    })
}
