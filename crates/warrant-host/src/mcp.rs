//! The configured MCP servers (`[mcp.servers.*]`) as a tool source of every run this host
//! drives: checked when the host opens, started when the catalogue is first built, stopped with
//! the host. A server that cannot be started or listed offers no tools, and the front end is
//! told why.

use std::sync::Arc;

use warrant_core::Coded;
use warrant_core::config::Settings;
use warrant_mcp::{McpSource, StartContext};

use crate::install::{self, Paths};
use crate::notice::{Notice, Notices};
use crate::{HostError, Result};

/// The source of the configured servers; `None` when there are none.
pub fn source(paths: &Paths, settings: &Settings) -> Result<Option<Arc<McpSource>>> {
    if settings.mcp.servers.is_empty() {
        return Ok(None);
    }
    let ctx = StartContext {
        workspace: paths.workspace_canonical()?,
        profiles: settings.profiles.clone(),
        parent_env: install::parent_env(),
        credentials: crate::credentials::values(paths)?,
        // A confined server runs through this binary's sandbox launcher; without one (a
        // library caller) only unconfined profiles can start.
        launcher: warrant_exec::Launcher::current_exe().ok(),
        // Off only for a debug build's negative control (`WARRANT_TEST_DISABLE=mcp-screen`).
        screen_descriptions: !crate::controls::disabled("mcp-screen"),
    };
    McpSource::new(&settings.mcp.servers, ctx)
        .map(|s| Some(Arc::new(s)))
        .map_err(|e| HostError::bad_input(&e))
}

/// Tells the front end about each server that offers no tools (once each).
pub fn tell_failures(source: &McpSource, notices: &dyn Notices) {
    for e in source.take_failures() {
        notices.notice(Notice::McpUnavailable {
            code: e.code().to_owned(),
            error: e.to_string(),
        });
    }
}
