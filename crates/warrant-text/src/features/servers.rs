//! The servers a person starts from the terminal: what `mcp serve` exports and where, and what
//! `web` prints around its address. These lines go to standard error (standard output is the
//! protocol, or the address alone).

use std::net::SocketAddr;

/// The tools `mcp serve` exports, and those the read-only ceiling holds back.
pub fn mcp_tools(tools: &[String], held: &[String]) -> String {
    let held = if held.is_empty() {
        String::new()
    } else {
        format!(
            "; held back by the read-only ceiling (add to [mcp.serve] lift_ceiling to export): {}",
            held.join(", ")
        )
    };
    format!("tools: {}{held}", tools.join(", "))
}

/// Where `mcp serve` listens and what it exports (a warning first when beyond loopback).
pub fn mcp_serving(
    http: Option<SocketAddr>,
    public: bool,
    tokens: &[String],
    tools: &[String],
    held: &[String],
) -> Vec<String> {
    let what = mcp_tools(tools, held);
    match http {
        None => vec![format!("serving MCP on stdio; {what}")],
        Some(addr) => {
            let mut lines = Vec::new();
            if public {
                lines.push(format!(
                    "warning: serving beyond this machine on {addr}; every request needs a token, and Host/Origin are checked"
                ));
            }
            lines.push(format!(
                "serving MCP on http://{addr}/mcp (tokens: {}); {what}",
                tokens.join(", ")
            ));
            lines
        }
    }
}

/// Said before `web` prints its address.
pub const WEB_OPEN: &str = "open this address in your browser (the token is for this launch only; Ctrl-C stops the server):";

/// Said when the browser could not be started.
pub fn web_no_browser(error: &std::io::Error) -> String {
    format!("could not open a browser ({error}); open the address yourself")
}
