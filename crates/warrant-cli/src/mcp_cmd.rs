//! `warrant mcp serve [--http 127.0.0.1:PORT] [--public]`: one call into `warrant-mcp-server`.
//! Standard output is the protocol in stdio mode, so everything said here goes to stderr.

use std::path::Path;

use clap::Subcommand;

use warrant_text::features::servers::mcp_serving;

use crate::Failure;

#[derive(Subcommand, Debug)]
pub enum McpCommand {
    /// Serve Warrant's tools over MCP: stdio by default (for a desktop client), or streamable
    /// HTTP on a loopback address with `--http`. Exported: `[mcp.serve] tools` (default
    /// read_file, list_dir, search_files); a tool that can write only with `lift_ceiling`.
    /// Every call runs through policy, approvals and the audit trail as its caller.
    Serve {
        /// Serve streamable HTTP on this address (e.g. 127.0.0.1:8931; port 0 picks one).
        #[arg(long, value_name = "ADDR")]
        http: Option<std::net::SocketAddr>,
        /// Allow an `--http` address that is not loopback (reachable from other machines).
        #[arg(long, requires = "http")]
        public: bool,
    },
}

pub fn dispatch(ws: Option<&Path>, command: McpCommand) -> Result<u8, Failure> {
    let McpCommand::Serve { http, public } = command;
    let how = match http {
        Some(addr) => warrant_mcp_server::Serve::Http { addr, public },
        None => warrant_mcp_server::Serve::Stdio,
    };
    warrant_mcp_server::serve(&crate::at(ws), how, crate::notices(), |s| {
        let lines = mcp_serving(s.http, s.public, &s.tokens, &s.tools, &s.held);
        lines.iter().for_each(|l| eprintln!("{}", crate::shown(l)));
    })?;
    Ok(0)
}
