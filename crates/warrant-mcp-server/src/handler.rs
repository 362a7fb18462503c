//! The MCP side of a served call: the tool list is the export (nothing the ceiling holds back),
//! and `tools/call` becomes one host operation as the caller, its outcome worded as an MCP
//! result. A refusal, a denial and a call waiting for a person are tool errors (`isError`)
//! whose text names the code or the request; only a broken server is a protocol error.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};
use warrant_host::serve::{CallOutcome, ServedCall};

use crate::worker::{Caller, Worker};

/// Which transport a handler serves, and so where its caller comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// The installation's person: whoever started `warrant mcp serve`.
    Stdio,
    /// The principal of the request's bearer token, set by the HTTP guard.
    Http,
}

#[derive(Clone, Debug)]
pub struct WarrantServer {
    pub(crate) worker: Worker,
    pub(crate) tools: Arc<Vec<Tool>>,
    pub(crate) transport: Transport,
}

impl WarrantServer {
    pub(crate) fn new(
        worker: Worker,
        specs: &[warrant_core::ToolSpec],
        transport: Transport,
    ) -> Self {
        let tools = specs
            .iter()
            .map(|s| {
                // Every built-in tool's schema is an object; anything else is served as `{}`.
                let schema = s.input_schema.as_object().cloned().unwrap_or_default();
                Tool::new(s.name.clone(), s.description.clone(), Arc::new(schema))
            })
            .collect();
        Self {
            worker,
            tools: Arc::new(tools),
            transport,
        }
    }

    fn caller(&self, context: &RequestContext<RoleServer>) -> Option<(Caller, String)> {
        match self.transport {
            Transport::Stdio => Some((Caller::Local, "mcp stdio".to_owned())),
            Transport::Http => context
                .extensions
                .get::<http::request::Parts>()
                .and_then(|parts| parts.extensions.get::<Caller>())
                .map(|c| {
                    let client = match c {
                        Caller::Token(name) => format!("mcp http (token {name})"),
                        Caller::Local => "mcp http".to_owned(),
                    };
                    (c.clone(), client)
                }),
        }
    }
}

impl ServerHandler for WarrantServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("warrant", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Warrant's tools, each call governed: decided by policy as the caller, \
                 journaled and audited; a call that needs a person says which request to approve.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let Some((caller, client)) = self.caller(&context) else {
            return Err(McpError::invalid_request(
                "no authenticated caller for this request",
                None,
            ));
        };
        let args = Value::Object(request.arguments.unwrap_or_default());
        let call = ServedCall {
            tool: request.name.to_string(),
            args,
            client,
        };
        let outcome = self.worker.call(caller, call).await;
        Ok(CallToolResponse::from(worded(outcome)))
    }
}

/// An outcome as an MCP tool result: text for any client, the same facts structured.
fn worded(outcome: Result<CallOutcome, warrant_host::HostError>) -> CallToolResult {
    let (error, text, structured) = match outcome {
        Ok(CallOutcome::Completed { run, ok, result }) => {
            let text = result
                .as_str()
                .map_or_else(|| result.to_string(), str::to_owned);
            (
                !ok,
                text,
                json!({ "status": "completed", "ok": ok, "run": run, "result": result }),
            )
        }
        Ok(CallOutcome::Refused { run, code, message }) => (
            true,
            format!("refused [{code}]: {message}"),
            json!({ "status": "refused", "code": code, "message": message, "run": run }),
        ),
        Ok(CallOutcome::Denied { run, code, message }) => (
            true,
            format!("denied [{code}]: {message}"),
            json!({ "status": "denied", "code": code, "message": message, "run": run }),
        ),
        Ok(CallOutcome::Parked { run, request }) => (
            true,
            format!(
                "waiting for a person [W-MCPSERVE-006]: request {request} (run {run}) must be \
                 approved first (`warrant approve {request}`); then call again with the same \
                 arguments to get the result"
            ),
            json!({ "status": "parked", "code": "W-MCPSERVE-006", "request": request, "run": run }),
        ),
        Ok(CallOutcome::InDoubt { run }) => (
            true,
            format!(
                "in doubt [W-MCPSERVE-008]: the effect of run {run} started and its end is unknown; \
                 a person resolves it (`warrant runs resolve`)"
            ),
            json!({ "status": "in_doubt", "code": "W-MCPSERVE-008", "run": run }),
        ),
        Err(e) => (
            true,
            format!("error [{}]: {}", e.code, e.message),
            json!({ "status": "error", "code": e.code, "message": e.message }),
        ),
    };
    let mut result = if error {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    };
    result.structured_content = Some(structured);
    result
}
