//! One live connection to an MCP server, behind a synchronous face. The async SDK (`rmcp`) runs
//! on a current-thread tokio runtime owned by the connection, on a thread of its own; callers
//! block on a channel with a deadline, so a server that hangs is a timeout, never a hung run. A
//! stdio server is a [`Supervised`] child (its profile's sandbox, minimized environment, own
//! process group), stopped with its group when the connection drops.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::{Duration, Instant};

#[allow(deprecated)] // sampling is deprecated upstream (SEP-2577); still what servers send
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, CreateMessageRequestParams,
    CreateMessageResult, ElicitRequestParams, ElicitResult, ElicitationCapability, ErrorCode,
    ErrorData, FormElicitationCapability, Implementation, InitializeRequestParams, ProtocolVersion,
    SamplingCapability, ServerCapabilities, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use rmcp::{ClientHandler, Peer, ServiceExt as _};
use serde::Serialize;
use warrant_exec::child::{STOP_GRACE, Supervised};

use crate::error::{McpError, ServerRequest};

/// The protocol version Warrant asks for in `initialize`.
pub const PROTOCOL: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// The JSON-RPC error a server gets when it asks Warrant to sample the model or to ask the
/// person: neither is configured, so neither is offered, and a request is refused by name.
pub const REFUSED_REQUEST: i32 = -32601;

/// What the client does when the server asks it something. Sampling is offered only where the
/// operator configured it (`sampling = true`), and then only while one of the server's tool
/// calls runs: the request is handed to the thread waiting for that call, which answers it
/// through the ring (a run of its own). Elicitation likewise, where configured
/// (`elicitation = true`, form mode only): the request goes to the waiting call, which asks the
/// run's person. Roots are never offered; a server that asks for what is not configured gets a
/// clear JSON-RPC error, and the refusal is kept for the result of the call it came in
/// (journaled and audited with it).
#[derive(Clone, Debug, Default)]
pub(crate) struct Handler {
    /// Set when the server says its tool list changed; the next call re-checks its tool.
    pub(crate) tools_changed: Arc<AtomicBool>,
    /// What the server asked for and was refused, not yet handed to a result.
    pub(crate) refused: Arc<Mutex<Vec<ServerRequest>>>,
    /// Whether the operator lets this server ask for sampling.
    pub(crate) sampling: bool,
    /// Whether the operator lets this server ask the person (form mode elicitation).
    pub(crate) elicitation: bool,
    /// Where a request goes while a call runs; `None` between calls.
    pub(crate) asks: Arc<Mutex<Option<mpsc::Sender<CallMsg>>>>,
}

/// The answer a sampling request gets.
#[allow(deprecated)]
pub type SamplingAnswer = Result<CreateMessageResult, ErrorData>;

/// The answer an elicitation gets.
pub type ElicitAnswer = Result<ElicitResult, ErrorData>;

/// What the thread waiting for a call receives: the call's end, or a request of the server's
/// made during the call, with where its answer goes.
#[allow(clippy::large_enum_variant, deprecated)]
pub(crate) enum CallMsg {
    Done(Result<CallToolResult, rmcp::ServiceError>),
    Sampling(
        CreateMessageRequestParams,
        tokio::sync::oneshot::Sender<SamplingAnswer>,
    ),
    Elicitation(
        ElicitRequestParams,
        tokio::sync::oneshot::Sender<ElicitAnswer>,
    ),
}

impl Handler {
    fn refuse(&self, kind: ServerRequest) -> ErrorData {
        self.refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(kind);
        let what = match kind {
            ServerRequest::Sampling => {
                "sampling is refused: Warrant does not let an MCP server call the model (not configured)"
            }
            ServerRequest::Elicitation => {
                "elicitation is refused: Warrant does not let an MCP server ask the person (not configured)"
            }
        };
        ErrorData::new(
            ErrorCode(REFUSED_REQUEST),
            format!("{what} (W-MCP-011)"),
            None,
        )
    }

    /// Hands a server's request (`what`) to the tool call it arrived during, and waits for the
    /// call's answer; outside a call, or once the call has ended, it is refused (W-MCP-012,
    /// W-MCP-013).
    async fn hand_to_call<T>(
        &self,
        what: &str,
        msg: impl FnOnce(tokio::sync::oneshot::Sender<Result<T, ErrorData>>) -> CallMsg,
    ) -> Result<T, ErrorData> {
        let refused = |m: String| ErrorData::new(ErrorCode(REFUSED_REQUEST), m, None);
        let to = self
            .asks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        // Outside a call there is no run to answer under.
        let Some(to) = to else {
            return Err(refused(format!(
                "{what} is answered only while one of this server's tool calls runs (W-MCP-012)"
            )));
        };
        let (reply, answer) = tokio::sync::oneshot::channel();
        if to.send(msg(reply)).is_err() {
            return Err(refused(format!(
                "the tool call ended before {what} could be answered (W-MCP-013)"
            )));
        }
        answer.await.unwrap_or_else(|_| {
            Err(refused(format!(
                "the tool call ended before {what} was answered (W-MCP-013)"
            )))
        })
    }
}

impl ClientHandler for Handler {
    fn get_info(&self) -> InitializeRequestParams {
        let mut caps = ClientCapabilities::default();
        if self.sampling {
            caps.sampling = Some(SamplingCapability::default());
        }
        // Form mode only: URL mode would send the person to an address the server chose, which
        // Warrant does not vouch for, so it is not declared.
        if self.elicitation {
            caps.elicitation = Some(
                ElicitationCapability::new()
                    .with_form(FormElicitationCapability::new().with_schema_validation(true)),
            );
        }
        InitializeRequestParams::new(
            caps,
            Implementation::new("warrant", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(PROTOCOL)
    }

    #[allow(deprecated)]
    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        if !self.sampling {
            return Err(self.refuse(ServerRequest::Sampling));
        }
        self.hand_to_call("the sampling request", |reply| {
            CallMsg::Sampling(params, reply)
        })
        .await
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if !self.elicitation {
            return Err(self.refuse(ServerRequest::Elicitation));
        }
        self.hand_to_call("the elicitation", |reply| {
            CallMsg::Elicitation(request, reply)
        })
        .await
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.store(true, Ordering::SeqCst);
    }
}

/// What the connection's record says: who answered, in which protocol, and which of the
/// capabilities it declared Warrant does not use (and so never calls).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConnectionRecord {
    pub server: String,
    /// `stdio` or `http`.
    pub transport: &'static str,
    pub protocol: String,
    /// The server's own name and version, as it says.
    pub server_info: String,
    /// Declared but unused: `resources`, `prompts`, `logging`, `completions`, `experimental`,
    /// and each extension by its identifier.
    pub dropped_capabilities: Vec<String>,
}

/// Every capability the server declares except `tools`, which is all Warrant uses.
pub fn dropped(caps: &ServerCapabilities) -> Vec<String> {
    let mut out = Vec::new();
    if caps.resources.is_some() {
        out.push("resources".to_owned());
    }
    if caps.prompts.is_some() {
        out.push("prompts".to_owned());
    }
    if caps.logging.is_some() {
        out.push("logging".to_owned());
    }
    if caps.completions.is_some() {
        out.push("completions".to_owned());
    }
    if let Some(exp) = &caps.experimental {
        out.extend(exp.keys().map(|k| format!("experimental:{k}")));
    }
    if let Some(ext) = &caps.extensions {
        out.extend(ext.keys().map(|k| format!("extension:{k}")));
    }
    out
}

/// How to reach a server.
pub enum Endpoint {
    /// A started child: its standard input and output.
    Stdio {
        child: Box<Supervised>,
        stdin: OwnedFd,
        stdout: OwnedFd,
    },
    /// Streamable HTTP at `url`, with resolved `headers`.
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Stdio { child, .. } => write!(f, "Stdio({})", child.program()),
            // Header values are secrets: never shown.
            Self::Http { url, headers } => write!(
                f,
                "Http({url}, headers: {:?})",
                headers.iter().map(|(k, _)| k).collect::<Vec<_>>()
            ),
        }
    }
}

type Ready = Result<(tokio::runtime::Handle, Peer<RoleClient>, ConnectionRecord), McpError>;

/// A live connection. Dropping it ends the session and stops a stdio server with its group.
pub struct Connection {
    server: String,
    handle: tokio::runtime::Handle,
    peer: Peer<RoleClient>,
    record: ConnectionRecord,
    timeout: Duration,
    tools_changed: Arc<AtomicBool>,
    refused: Arc<Mutex<Vec<ServerRequest>>>,
    asks: Arc<Mutex<Option<mpsc::Sender<CallMsg>>>>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    child: Mutex<Option<Supervised>>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("record", &self.record)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Connects to `server` at `endpoint`: `initialize` must be answered within `timeout`.
    /// With `sampling`, the client declares the capability and hands the server's sampling
    /// requests to [`Self::call`]'s `answer`.
    pub fn open(
        server: &str,
        endpoint: Endpoint,
        timeout: Duration,
        sampling: bool,
        elicitation: bool,
    ) -> Result<Self, McpError> {
        let handler = Handler {
            sampling,
            elicitation,
            ..Handler::default()
        };
        let tools_changed = Arc::clone(&handler.tools_changed);
        let refused_requests = Arc::clone(&handler.refused);
        let asks = Arc::clone(&handler.asks);
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Ready>(1);
        let (shutdown_tx, shutdown_rx) = tokio::sync::oneshot::channel::<()>();
        let name = server.to_owned();
        let refused: Arc<Mutex<Option<String>>> = Arc::default();
        let (child, transport_kind) = match endpoint {
            Endpoint::Stdio {
                child,
                stdin,
                stdout,
            } => (Some(*child), Transport::Stdio { stdin, stdout }),
            Endpoint::Http { url, headers } => (
                None,
                Transport::Http {
                    url,
                    headers,
                    refused: Arc::clone(&refused),
                },
            ),
        };
        let kind = transport_kind.name();
        let connect_err = |message: String| McpError::Connect {
            server: server.to_owned(),
            message,
        };
        std::thread::Builder::new()
            .name(format!("mcp-{server}"))
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(McpError::Connect {
                            server: name,
                            message: format!("cannot start the client's runtime: {e}"),
                        }));
                        return;
                    }
                };
                let handle = rt.handle().clone();
                rt.block_on(async move {
                    let served = match transport_kind.build(&name) {
                        Ok(Built::Stdio(io)) => handler.serve(io).await.map_err(|e| chain(&e)),
                        Ok(Built::Http(t)) => handler.serve(t).await.map_err(|e| chain(&e)),
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    let service = match served {
                        Ok(s) => s,
                        Err(message) => {
                            let _ = ready_tx.send(Err(McpError::Connect {
                                server: name,
                                message,
                            }));
                            return;
                        }
                    };
                    let record = match service.peer_info() {
                        Some(info) => ConnectionRecord {
                            server: name.clone(),
                            transport: kind,
                            protocol: info.protocol_version.to_string(),
                            server_info: info
                                .server_info
                                .as_ref()
                                .map(|i| format!("{} {}", i.name, i.version))
                                .unwrap_or_default(),
                            dropped_capabilities: dropped(&info.capabilities),
                        },
                        None => ConnectionRecord {
                            server: name.clone(),
                            transport: kind,
                            protocol: String::new(),
                            server_info: String::new(),
                            dropped_capabilities: Vec::new(),
                        },
                    };
                    let _ = ready_tx.send(Ok((handle, service.peer().clone(), record)));
                    let _ = shutdown_rx.await;
                    let _ = tokio::time::timeout(STOP_GRACE, service.cancel()).await;
                });
            })
            .map_err(|e| connect_err(format!("cannot start the client's thread: {e}")))?;
        let mut child = child;
        let stop_child = |child: &mut Option<Supervised>| {
            if let Some(mut c) = child.take() {
                c.stop(STOP_GRACE);
            }
        };
        let ready = match ready_rx.recv_timeout(timeout) {
            Ok(got) => got,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                // Killing the child closes its pipes, which ends the pending handshake.
                stop_child(&mut child);
                return Err(McpError::InitializeTimeout {
                    server: server.to_owned(),
                    ms: timeout.as_millis() as u64,
                });
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                stop_child(&mut child);
                return Err(connect_err("the client's thread ended".into()));
            }
        };
        let (handle, peer, record) = match ready {
            Ok(ok) => ok,
            Err(e) => {
                if let Some(to) = refused
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take()
                {
                    return Err(McpError::Redirect {
                        server: server.to_owned(),
                        to,
                    });
                }
                let stderr = child
                    .as_mut()
                    .map(|c| c.stop(STOP_GRACE).stderr.text)
                    .unwrap_or_default();
                return Err(match e {
                    McpError::Connect { server, message } if !stderr.trim().is_empty() => {
                        McpError::Connect {
                            server,
                            message: format!("{message}; its standard error: {}", stderr.trim()),
                        }
                    }
                    other @ (McpError::Connect { .. }
                    | McpError::Config { .. }
                    | McpError::InitializeTimeout { .. }
                    | McpError::List { .. }
                    | McpError::Call { .. }
                    | McpError::CallTimeout { .. }
                    | McpError::DefinitionChanged { .. }
                    | McpError::ToolGone { .. }
                    | McpError::Redirect { .. }
                    | McpError::Header { .. }
                    | McpError::RequestRefused { .. }) => other,
                });
            }
        };
        Ok(Self {
            server: server.to_owned(),
            handle,
            peer,
            record,
            timeout,
            tools_changed,
            refused: refused_requests,
            asks,
            shutdown: Some(shutdown_tx),
            child: Mutex::new(child),
        })
    }

    pub fn record(&self) -> &ConnectionRecord {
        &self.record
    }

    /// Whether the server said its tool list changed since the last listing.
    pub fn take_tools_changed(&self) -> bool {
        self.tools_changed.swap(false, Ordering::SeqCst)
    }

    /// What the server asked for and was refused since the last take (sampling, elicitation).
    pub fn take_refused(&self) -> Vec<ServerRequest> {
        std::mem::take(&mut *self.refused.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Every tool the server offers (all pages).
    pub fn list_tools(&self) -> Result<Vec<Tool>, McpError> {
        let peer = self.peer.clone();
        self.wait(
            async move { peer.list_all_tools().await },
            self.timeout,
            &|| None,
        )
        .map_err(|e| McpError::List {
            server: self.server.clone(),
            message: e.message(self.timeout),
        })?
        .map_err(|e| McpError::List {
            server: self.server.clone(),
            message: e.to_string(),
        })
    }

    /// Calls `tool` with `arguments`; `stop` is polled while it runs (a cancelled run stops
    /// waiting at once). A sampling request the server makes meanwhile is handed to `answer`
    /// on this thread; the time it takes is not counted against the call's timeout (it is the
    /// run's own work, bounded by its own limits). An elicitation is handed to `elicit` the
    /// same way (the person's time is not the server's either).
    #[allow(deprecated)]
    pub fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
        stop: &dyn Fn() -> Option<String>,
        answer: &dyn Fn(&CreateMessageRequestParams) -> SamplingAnswer,
        elicit: &dyn Fn(&ElicitRequestParams) -> ElicitAnswer,
    ) -> Result<CallToolResult, McpError> {
        let peer = self.peer.clone();
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let failed = |message: String| McpError::Call {
            server: self.server.clone(),
            tool: tool.to_owned(),
            message,
        };
        let (tx, rx) = mpsc::channel::<CallMsg>();
        let asks = AsksDuring::open(&self.asks, tx.clone());
        let task = self.handle.spawn(async move {
            let _ = tx.send(CallMsg::Done(peer.call_tool(params).await));
        });
        let mut deadline = Instant::now() + self.timeout;
        let waited = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                task.abort();
                break Err(Waited::Timeout);
            }
            match rx.recv_timeout(left.min(Duration::from_millis(200))) {
                Ok(CallMsg::Done(v)) => break Ok(v),
                Ok(CallMsg::Sampling(params, reply)) => {
                    let began = Instant::now();
                    let _ = reply.send(answer(&params));
                    deadline += began.elapsed();
                }
                Ok(CallMsg::Elicitation(params, reply)) => {
                    let began = Instant::now();
                    let _ = reply.send(elicit(&params));
                    deadline += began.elapsed();
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Some(why) = stop() {
                        task.abort();
                        break Err(Waited::Stopped(why));
                    }
                    if task.is_finished() {
                        // Ended without a word (its runtime went away): one last look.
                        match rx.try_recv() {
                            Ok(CallMsg::Done(v)) => break Ok(v),
                            Ok(CallMsg::Sampling(..) | CallMsg::Elicitation(..)) | Err(_) => {
                                break Err(Waited::Closed);
                            }
                        }
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break Err(Waited::Closed),
            }
        };
        drop(asks);
        match waited {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(e)) => Err(failed(self.explain(e.to_string()))),
            Err(Waited::Timeout) => Err(McpError::CallTimeout {
                server: self.server.clone(),
                tool: tool.to_owned(),
                ms: self.timeout.as_millis() as u64,
            }),
            Err(Waited::Stopped(why)) => Err(failed(format!("stopped: {why}"))),
            Err(Waited::Closed) => Err(failed(self.explain("the connection closed".into()))),
        }
    }

    /// A transport error, with how the child ended when it did.
    fn explain(&self, message: String) -> String {
        let mut child = self.child.lock().unwrap_or_else(PoisonError::into_inner);
        match child.as_mut().and_then(|c| c.poll().cloned()) {
            Some(ended) => format!(
                "{message}; the server exited ({}){}",
                match (ended.exit_code, ended.signal) {
                    (Some(code), _) => format!("code {code}"),
                    (None, Some(sig)) => format!("signal {sig}"),
                    (None, None) => "unknown status".to_owned(),
                },
                match ended.stderr.text {
                    t if t.trim().is_empty() => String::new(),
                    t => format!("; its standard error: {}", t.trim()),
                }
            ),
            None => message,
        }
    }

    fn wait<T: Send + 'static>(
        &self,
        fut: impl std::future::Future<Output = T> + Send + 'static,
        timeout: Duration,
        stop: &dyn Fn() -> Option<String>,
    ) -> Result<T, Waited> {
        let (tx, rx) = mpsc::sync_channel(1);
        let task = self.handle.spawn(async move {
            let _ = tx.send(fut.await);
        });
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                task.abort();
                return Err(Waited::Timeout);
            }
            match rx.recv_timeout(left.min(Duration::from_millis(200))) {
                Ok(v) => return Ok(v),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Some(why) = stop() {
                        task.abort();
                        return Err(Waited::Stopped(why));
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(Waited::Closed),
            }
        }
    }
}

/// The handler's way to the waiting call, open while the call runs and closed however it ends.
struct AsksDuring<'a>(&'a Mutex<Option<mpsc::Sender<CallMsg>>>);

impl<'a> AsksDuring<'a> {
    fn open(slot: &'a Mutex<Option<mpsc::Sender<CallMsg>>>, to: mpsc::Sender<CallMsg>) -> Self {
        *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(to);
        Self(slot)
    }
}

impl Drop for AsksDuring<'_> {
    fn drop(&mut self) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

enum Waited {
    Timeout,
    Stopped(String),
    Closed,
}

impl Waited {
    fn message(&self, timeout: Duration) -> String {
        match self {
            Self::Timeout => format!("no answer within {} ms", timeout.as_millis()),
            Self::Stopped(why) => format!("stopped: {why}"),
            Self::Closed => "the connection closed".to_owned(),
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let mut child = self.child.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(mut c) = child.take() {
            c.stop(STOP_GRACE);
        }
    }
}

/// The transport before it is built inside the runtime (pipes register with its reactor).
enum Transport {
    Stdio {
        stdin: OwnedFd,
        stdout: OwnedFd,
    },
    Http {
        url: String,
        headers: Vec<(String, String)>,
        /// Where a refused redirect pointed, for the error.
        refused: Arc<Mutex<Option<String>>>,
    },
}

enum Built {
    Stdio(
        (
            tokio::net::unix::pipe::Receiver,
            tokio::net::unix::pipe::Sender,
        ),
    ),
    Http(
        rmcp::transport::worker::WorkerTransport<
            rmcp::transport::streamable_http_client::StreamableHttpClientWorker<reqwest::Client>,
        >,
    ),
}

impl Transport {
    fn name(&self) -> &'static str {
        match self {
            Self::Stdio { .. } => "stdio",
            Self::Http { .. } => "http",
        }
    }

    fn build(self, server: &str) -> Result<Built, McpError> {
        let failed = |message: String| McpError::Connect {
            server: server.to_owned(),
            message,
        };
        match self {
            Self::Stdio { stdin, stdout } => {
                let rx = tokio::net::unix::pipe::Receiver::from_owned_fd(stdout)
                    .map_err(|e| failed(format!("its standard output: {e}")))?;
                let tx = tokio::net::unix::pipe::Sender::from_owned_fd(stdin)
                    .map_err(|e| failed(format!("its standard input: {e}")))?;
                Ok(Built::Stdio((rx, tx)))
            }
            Self::Http {
                url,
                headers,
                refused,
            } => {
                let origin = reqwest::Url::parse(&url)
                    .map_err(|e| failed(format!("`{url}` is not a URL: {e}")))?;
                // TLS through rustls on ring, the provider the rest of the tree uses; installed
                // once per process (a later call finds it there).
                let _ = rustls::crypto::ring::default_provider().install_default();
                let client = reqwest::Client::builder()
                    .redirect(redirect_policy(origin, refused))
                    .build()
                    .map_err(|e| failed(format!("cannot build the HTTP client: {e}")))?;
                let mut map = HashMap::new();
                for (name, value) in headers {
                    let n = reqwest::header::HeaderName::try_from(name.as_str())
                        .map_err(|e| failed(format!("header name `{name}`: {e}")))?;
                    let mut v = reqwest::header::HeaderValue::try_from(value.as_str())
                        .map_err(|_| failed(format!("header `{name}` has an invalid value")))?;
                    v.set_sensitive(true);
                    map.insert(n, v);
                }
                let config = rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url)
                    .custom_headers(map);
                Ok(Built::Http(
                    rmcp::transport::StreamableHttpClientTransport::with_client(client, config),
                ))
            }
        }
    }
}

/// An error with its sources: the HTTP client's refusal of a redirect is a source, not the
/// message.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// Redirects are followed only to the same scheme, host and port (at most 5); a redirect to
/// another host is refused, so a server cannot send Warrant's headers (its credentials)
/// elsewhere.
pub fn redirect_policy(
    origin: reqwest::Url,
    refused: Arc<Mutex<Option<String>>>,
) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        let to = attempt.url();
        let same = to.scheme() == origin.scheme()
            && to.host_str() == origin.host_str()
            && to.port_or_known_default() == origin.port_or_known_default();
        if !same {
            *refused.lock().unwrap_or_else(PoisonError::into_inner) = Some(to.to_string());
            let msg = format!(
                "redirect to another host refused (W-MCP-010): {origin} redirected to {to}"
            );
            attempt.error(msg)
        } else if attempt.previous().len() >= 5 {
            attempt.error("too many redirects (W-MCP-010)")
        } else {
            attempt.follow()
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Everything a server declares besides `tools` is named as dropped: each capability, each
    /// experimental key and each extension by its identifier.
    #[test]
    fn every_declared_capability_and_extension_but_tools_is_dropped_by_name() {
        let caps: ServerCapabilities = serde_json::from_value(serde_json::json!({
            "tools": {"listChanged": true},
            "resources": {"subscribe": true},
            "prompts": {},
            "logging": {},
            "completions": {},
            "experimental": {"x-cache": {}},
            "extensions": {
                "io.modelcontextprotocol/tasks": {},
                "io.modelcontextprotocol/apps": {"mime": ["text/html"]}
            }
        }))
        .unwrap();
        assert_eq!(
            dropped(&caps),
            [
                "resources",
                "prompts",
                "logging",
                "completions",
                "experimental:x-cache",
                "extension:io.modelcontextprotocol/apps",
                "extension:io.modelcontextprotocol/tasks",
            ]
        );
        assert_eq!(
            dropped(&serde_json::from_value(serde_json::json!({"tools": {}})).unwrap()),
            Vec::<String>::new()
        );
    }
}
