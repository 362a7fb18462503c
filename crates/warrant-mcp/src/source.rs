//! The configured MCP servers as a [`ToolSource`]: each remote tool becomes a [`Tool`] named
//! `mcp__<server>__<tool>` whose calls normalize to `Action::McpCall` on `mcp/<server>/<tool>`,
//! so the ring decides, asks, journals and audits them like every effect. Servers are started
//! (or reached) when the catalogue is first built and stopped when the source is dropped (with
//! the host that drives the run). A server that cannot be reached offers no tools, and the
//! source keeps why ([`McpSource::failures`]).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use globset::{Glob, GlobSet, GlobSetBuilder};
#[allow(deprecated)] // sampling is deprecated upstream (SEP-2577); still what servers send
use rmcp::model::{
    CallToolResult, CreateMessageRequestParams, ElicitRequestParams, Tool as RemoteTool,
};
use serde_json::{Value, json};
use warrant_core::config::{DEFAULT_MCP_PROFILE, McpServerConfig, ProfileConfig, SandboxConfig};
use warrant_core::{Action, CanonicalPath, Coded, McpCall, RiskClass, ToolSpec, digest_of};
use warrant_exec::Launcher;
use warrant_exec::child::{ChildSpec, Supervised};
use warrant_kernel::{
    Authorized, EffectResult, NoPeerAsks, PeerAsks, Presentation, ReadFilter, Refusal, StopCheck,
    Tool, ToolEnv,
};
use warrant_tools::ToolSource;

use crate::connection::{Connection, ConnectionRecord, Endpoint};
use crate::elicitation::{DEFAULT_ELICITATION_TIMEOUT_MS, elicit};
use crate::error::McpError;
use crate::names::{is_plain, model_name};
use crate::sampling::sample;

/// What the model is told of a tool of a server the operator did not vouch for.
pub const WITHHELD: &str = "Third-party tool; description withheld.";

const DEFAULT_TIMEOUT_MS: u64 = 30_000;
const DEFAULT_MAX_RESULT: u64 = 256 * 1024;

/// Where stdio servers start: the workspace, the configured profiles, Warrant's environment
/// (minimized per profile) and the sandbox launcher for confined profiles.
#[derive(Clone, Debug)]
pub struct StartContext {
    pub workspace: CanonicalPath,
    pub profiles: BTreeMap<String, ProfileConfig>,
    pub parent_env: Vec<(String, String)>,
    /// The stored credentials (`warrant credentials set`), by name, for `cred:NAME` headers.
    pub credentials: BTreeMap<String, String>,
    /// Needed for a confined profile (the default); `None` refuses to start one.
    pub launcher: Option<Launcher>,
    /// Screen a vouched-for description with the prompt guard's screen
    /// (`warrant_llm::untrusted::screen_instructions`); off only for a negative control.
    pub screen_descriptions: bool,
}

/// One configured server, checked.
#[derive(Debug)]
struct Server {
    name: String,
    config: McpServerConfig,
    allow: Option<GlobSet>,
    timeout: Duration,
    max_result: usize,
}

/// The catalogue of one connected server: its tools' current definitions by remote name.
#[derive(Debug)]
struct Live {
    conn: Arc<Connection>,
    /// Remote name → definition digest, as last listed.
    definitions: Mutex<BTreeMap<String, String>>,
    /// Whether the connection's record has been handed to a result yet.
    recorded: AtomicBool,
    server: Arc<Server>,
}

/// The configured MCP servers. Cheap until [`ToolSource::tools`] is first called.
pub struct McpSource {
    servers: Vec<Arc<Server>>,
    ctx: StartContext,
    /// Built once per source: the tools every later catalogue gets again.
    built: Mutex<Option<Vec<Arc<McpTool>>>>,
    failures: Mutex<Vec<McpError>>,
    told: Mutex<usize>,
    records: Mutex<Vec<ConnectionRecord>>,
}

impl std::fmt::Debug for McpSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpSource")
            .field(
                "servers",
                &self.servers.iter().map(|s| &s.name).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl McpSource {
    /// Checks every server's configuration; nothing is started.
    pub fn new(
        servers: &BTreeMap<String, McpServerConfig>,
        ctx: StartContext,
    ) -> Result<Self, McpError> {
        let mut out = Vec::new();
        for (name, config) in servers {
            out.push(Arc::new(check(name, config, &ctx)?));
        }
        Ok(Self {
            servers: out,
            ctx,
            built: Mutex::new(None),
            failures: Mutex::new(Vec::new()),
            told: Mutex::new(0),
            records: Mutex::new(Vec::new()),
        })
    }

    /// Why a server offers no tools (it could not be started, reached or listed).
    pub fn failures(&self) -> Vec<McpError> {
        self.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The failures not taken yet (each is told once).
    pub fn take_failures(&self) -> Vec<McpError> {
        let mut told = self.told.lock().unwrap_or_else(PoisonError::into_inner);
        let all = self.failures();
        let fresh = all.get(*told..).unwrap_or_default().to_vec();
        *told = all.len();
        fresh
    }

    /// The record of each connection made (protocol, server, dropped capabilities).
    pub fn records(&self) -> Vec<ConnectionRecord> {
        self.records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn build(&self) -> Vec<Arc<McpTool>> {
        let mut tools = Vec::new();
        for server in &self.servers {
            match connect(server, &self.ctx).and_then(|conn| list(server, conn)) {
                Ok((live, remote)) => {
                    self.records
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(live.conn.record().clone());
                    for (tool, definition, risk) in remote {
                        tools.push(Arc::new(McpTool::new(
                            Arc::clone(&live),
                            &tool,
                            definition,
                            risk,
                            self.ctx.screen_descriptions,
                        )));
                    }
                }
                Err(e) => self
                    .failures
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(e),
            }
        }
        tools
    }
}

impl ToolSource for McpSource {
    fn name(&self) -> &str {
        "mcp"
    }

    fn tools(&self) -> Vec<Box<dyn Tool>> {
        let mut built = self.built.lock().unwrap_or_else(PoisonError::into_inner);
        let tools = built.get_or_insert_with(|| self.build());
        tools
            .iter()
            .map(|t| Box::new(Shared(Arc::clone(t))) as Box<dyn Tool>)
            .collect()
    }
}

fn check(name: &str, config: &McpServerConfig, ctx: &StartContext) -> Result<Server, McpError> {
    let bad = |message: String| McpError::Config {
        server: name.to_owned(),
        message,
    };
    if !is_plain(name) {
        return Err(bad(
            "a server's name is `[a-z0-9_]` (it is part of its tools' names)".into(),
        ));
    }
    match (&config.command, &config.url) {
        (Some(argv), None) if argv.is_empty() => return Err(bad("`command` is empty".into())),
        (Some(_), None) => {
            if !config.headers.is_empty() {
                return Err(bad("`headers` are for `url` servers only".into()));
            }
            let profile = config.profile.as_deref().unwrap_or(DEFAULT_MCP_PROFILE);
            if config.profile.is_some() && !ctx.profiles.contains_key(profile) {
                return Err(bad(format!("profile `{profile}` is not configured")));
            }
        }
        (None, Some(url)) => {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(bad(format!(
                    "`url` must be http:// or https://, not `{url}`"
                )));
            }
            if url.starts_with("http://") && !loopback(url) {
                return Err(bad(format!(
                    "`{url}` is plain HTTP to another machine: the calls, their results and any header would cross the network in the clear; use https://"
                )));
            }
            for (header, value) in &config.headers {
                if !(value.starts_with("env:")
                    || value.starts_with("file:")
                    || value.starts_with(warrant_llm::secret::CRED_PREFIX))
                {
                    return Err(bad(format!(
                        "header `{header}` must be a secret reference (`env:NAME`, `file:PATH` or `cred:NAME`), never the value itself"
                    )));
                }
            }
        }
        (Some(_), Some(_)) => return Err(bad("set either `command` or `url`, not both".into())),
        (None, None) => return Err(bad("set `command` (stdio) or `url` (HTTP)".into())),
    }
    let allow = match &config.tools {
        None => None,
        Some(globs) => {
            let mut set = GlobSetBuilder::new();
            for g in globs {
                set.add(Glob::new(g).map_err(|e| bad(format!("tool glob `{g}`: {e}")))?);
            }
            Some(set.build().map_err(|e| bad(format!("tool globs: {e}")))?)
        }
    };
    Ok(Server {
        name: name.to_owned(),
        config: config.clone(),
        allow,
        timeout: Duration::from_millis(config.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS)),
        max_result: config.max_result_bytes.unwrap_or(DEFAULT_MAX_RESULT) as usize,
    })
}

fn connect(server: &Arc<Server>, ctx: &StartContext) -> Result<Arc<Connection>, McpError> {
    let endpoint = match (&server.config.command, &server.config.url) {
        (Some(argv), _) => {
            let name = server
                .config
                .profile
                .as_deref()
                .unwrap_or(DEFAULT_MCP_PROFILE);
            // Without a profile of that name: the default confinement.
            let profile = ctx.profiles.get(name).cloned().unwrap_or(ProfileConfig {
                sandbox: Some(SandboxConfig::default()),
                ..ProfileConfig::default()
            });
            let spec = ChildSpec {
                argv,
                cwd: &ctx.workspace,
                profile_name: name,
                profile: &profile,
                parent_env: ctx.parent_env.clone(),
            };
            let launcher = if profile.is_contained() || profile.sandbox.is_some() {
                ctx.launcher.as_ref()
            } else {
                None
            };
            let mut child = Supervised::start(&spec, launcher).map_err(|e| McpError::Connect {
                server: server.name.clone(),
                message: format!("{} ({})", e, e.code()),
            })?;
            let (stdin, stdout) = child.take_io().ok_or_else(|| McpError::Connect {
                server: server.name.clone(),
                message: "the server has no standard input and output".into(),
            })?;
            Endpoint::Stdio {
                child: Box::new(child),
                stdin: OwnedFd::from(stdin),
                stdout: OwnedFd::from(stdout),
            }
        }
        (None, Some(url)) => {
            let env = warrant_llm::secret::reference_env(
                ctx.parent_env.iter().cloned(),
                ctx.credentials.clone(),
            );
            let mut headers = Vec::new();
            for (header, reference) in &server.config.headers {
                let setting = format!("mcp.servers.{}.headers.{header}", server.name);
                let key = warrant_llm::secret::resolve_key(&setting, Some(reference), "", &env)
                    .map_err(|e| McpError::Header {
                        server: server.name.clone(),
                        header: header.clone(),
                        message: e.to_string(),
                    })?;
                let value = key.value.ok_or_else(|| McpError::Header {
                    server: server.name.clone(),
                    header: header.clone(),
                    message: format!("{} is not set", key.source),
                })?;
                headers.push((header.clone(), value));
            }
            Endpoint::Http {
                url: url.clone(),
                headers,
            }
        }
        (None, None) => {
            return Err(McpError::Config {
                server: server.name.clone(),
                message: "set `command` or `url`".into(),
            });
        }
    };
    Connection::open(
        &server.name,
        endpoint,
        server.timeout,
        server.config.sampling,
        server.config.elicitation,
    )
    .map(Arc::new)
}

type Listed = (Arc<Live>, Vec<(RemoteTool, String, RiskClass)>);

fn list(server: &Arc<Server>, conn: Arc<Connection>) -> Result<Listed, McpError> {
    let tools = conn.list_tools()?;
    let mut offered = Vec::new();
    let mut definitions = BTreeMap::new();
    for tool in tools {
        let (definition, risk) = definition(server, &tool);
        definitions.insert(tool.name.to_string(), definition.clone());
        if server
            .allow
            .as_ref()
            .is_none_or(|set| set.is_match(tool.name.as_ref()))
        {
            offered.push((tool, definition, risk));
        }
    }
    let live = Arc::new(Live {
        conn,
        definitions: Mutex::new(definitions),
        recorded: AtomicBool::new(false),
        server: Arc::clone(server),
    });
    Ok((live, offered))
}

/// A tool's risk (the operator's override, else its annotations) and the digest of its whole
/// definition as the server gives it (name, description, schemas, annotations) with that risk.
fn definition(server: &Server, tool: &RemoteTool) -> (String, RiskClass) {
    let annotations = tool.annotations.as_ref();
    let risk = server
        .config
        .risk
        .get(tool.name.as_ref())
        .copied()
        .unwrap_or_else(|| {
            if annotations.and_then(|a| a.destructive_hint) == Some(true) {
                RiskClass::Destructive
            } else if annotations.and_then(|a| a.read_only_hint) == Some(true) {
                RiskClass::Read
            } else {
                RiskClass::Change
            }
        });
    let whole = json!({
        "server": server.name,
        "tool": serde_json::to_value(tool).unwrap_or(Value::Null),
        "risk": risk,
    });
    let digest = digest_of(&whole)
        .map(|d| d.to_string())
        .unwrap_or_else(|_| "unknown".into());
    (digest, risk)
}

/// One remote tool.
#[derive(Debug)]
pub struct McpTool {
    spec: ToolSpec,
    remote: String,
    risk: RiskClass,
    definition: String,
    live: Arc<Live>,
}

/// A tool shared between the catalogues one source hands out.
struct Shared(Arc<McpTool>);

impl McpTool {
    fn new(
        live: Arc<Live>,
        tool: &RemoteTool,
        definition: String,
        risk: RiskClass,
        screen: bool,
    ) -> Self {
        let server = &live.server;
        let short = definition.rsplit(':').next().unwrap_or(&definition);
        let short = short.get(..12).unwrap_or(short);
        let withheld = || ToolSpec {
            name: model_name(&server.name, &tool.name),
            description: format!(
                "{WITHHELD} (MCP server `{}`, risk {}, definition {short})",
                server.name,
                risk.as_str()
            ),
            input_schema: json!({"type": "object", "additionalProperties": true}),
        };
        let spec = if server.config.trust_descriptions {
            let description = tool.description.as_deref().unwrap_or_default().to_owned();
            // Vouched for, and still screened by the prompt guard's screen: a fence tag, a
            // hidden character, a role marker or an instruction to the model. Such a
            // description is withheld here (the guard would refuse every request offering it),
            // and only the kind of finding is said, never the text.
            let found = if screen {
                warrant_llm::untrusted::screen_instructions(&description)
            } else {
                None
            };
            if let Some(found) = found {
                ToolSpec {
                    description: format!(
                        "{WITHHELD} (it carried {}; MCP server `{}`, definition {short})",
                        found.kind(),
                        server.name
                    ),
                    ..withheld()
                }
            } else {
                ToolSpec {
                    name: model_name(&server.name, &tool.name),
                    description,
                    input_schema: Value::Object((*tool.input_schema).clone()),
                }
            }
        } else {
            withheld()
        };
        Self {
            spec,
            remote: tool.name.to_string(),
            risk,
            definition,
            live,
        }
    }

    /// The remote name the model-facing name stands for.
    pub fn remote(&self) -> &str {
        &self.remote
    }

    /// Refuses a call whose tool changed (or left) since the call was decided; re-lists first
    /// when the server said its list changed.
    fn still_the_same(&self, decided: &str) -> Result<(), McpError> {
        let server = &self.live.server.name;
        if self.live.conn.take_tools_changed() {
            let tools = self.live.conn.list_tools()?;
            let fresh: BTreeMap<String, String> = tools
                .iter()
                .map(|t| (t.name.to_string(), definition(&self.live.server, t).0))
                .collect();
            *self
                .live
                .definitions
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = fresh;
        }
        let now = self
            .live
            .definitions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&self.remote)
            .cloned();
        match now {
            None => Err(McpError::ToolGone {
                server: server.clone(),
                tool: self.remote.clone(),
            }),
            Some(now) if now != decided => Err(McpError::DefinitionChanged {
                server: server.clone(),
                tool: self.remote.clone(),
                decided: decided.to_owned(),
                now,
            }),
            Some(_) => Ok(()),
        }
    }

    fn run(&self, call: &McpCall, stop: StopCheck<'_>, peers: &dyn PeerAsks) -> EffectResult {
        let failed = |e: McpError| EffectResult {
            ok: false,
            result: json!({"error": e.to_string(), "code": e.code()}),
        };
        if let Err(e) = self.still_the_same(&call.definition) {
            return failed(e);
        }
        let arguments = match &call.arguments {
            Value::Object(map) => map.clone(),
            Value::Null => serde_json::Map::new(),
            other @ (Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Array(_)) => {
                return failed(McpError::Call {
                    server: call.server.clone(),
                    tool: call.tool.clone(),
                    message: format!("arguments must be an object, not {other}"),
                });
            }
        };
        // Each sampling request of the server during the call, answered through the ring (a
        // run of its own) or refused, is part of the call's journaled, audited result.
        let sampled: RefCell<Vec<Value>> = RefCell::new(Vec::new());
        #[allow(deprecated)]
        let answer = |params: &CreateMessageRequestParams| {
            let (answer, record) = sample(&call.server, params, peers);
            sampled.borrow_mut().push(record);
            answer
        };
        // Each elicitation likewise: a request to the run's person the call waits for.
        let elicited: RefCell<Vec<Value>> = RefCell::new(Vec::new());
        let timeout_ms = self
            .live
            .server
            .config
            .elicitation_timeout_ms
            .unwrap_or(DEFAULT_ELICITATION_TIMEOUT_MS);
        let ask_person = |params: &ElicitRequestParams| {
            let (answer, record) = elicit(&call.server, timeout_ms, params, peers);
            elicited.borrow_mut().push(record);
            answer
        };
        let result = self
            .live
            .conn
            .call(&call.tool, arguments, stop, &answer, &ask_person);
        let sampled = sampled.into_inner();
        let elicited = elicited.into_inner();
        let result = match result {
            Ok(r) => r,
            Err(e) => {
                let mut out = failed(e);
                if let Value::Object(map) = &mut out.result {
                    if !sampled.is_empty() {
                        map.insert("sampled".into(), Value::Array(sampled));
                    }
                    if !elicited.is_empty() {
                        map.insert("elicited".into(), Value::Array(elicited));
                    }
                }
                return out;
            }
        };
        let mut out = shape(&result, self.live.server.max_result);
        if !sampled.is_empty()
            && let Value::Object(map) = &mut out
        {
            map.insert("sampled".into(), Value::Array(sampled));
        }
        if !elicited.is_empty()
            && let Value::Object(map) = &mut out
        {
            map.insert("elicited".into(), Value::Array(elicited));
        }
        // What the server asked of Warrant during the call and was refused: part of the
        // journaled (and audited) result, each with its code.
        let refused: Vec<Value> = self
            .live
            .conn
            .take_refused()
            .into_iter()
            .map(|kind| {
                let e = McpError::RequestRefused {
                    server: call.server.clone(),
                    kind,
                };
                json!({"request": kind, "code": e.code(), "error": e.to_string()})
            })
            .collect();
        if !refused.is_empty()
            && let Value::Object(map) = &mut out
        {
            map.insert("refused_requests".into(), Value::Array(refused));
        }
        if !self.live.recorded.swap(true, Ordering::SeqCst)
            && let Value::Object(map) = &mut out
        {
            map.insert(
                "connection".into(),
                serde_json::to_value(self.live.conn.record()).unwrap_or(Value::Null),
            );
        }
        EffectResult {
            ok: result.is_error != Some(true),
            result: out,
        }
    }
}

/// The result as the model sees it (before the toolbox redacts and the agent fences it): the
/// server's content, cut to `max` bytes of JSON.
pub fn shape(result: &CallToolResult, max: usize) -> Value {
    let whole = serde_json::to_value(result).unwrap_or(Value::Null);
    let text = whole.to_string();
    if text.len() <= max {
        return whole;
    }
    // Too big: the text of its content, cut on a character boundary, and what was left out.
    let joined: String = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n");
    let mut cut = max.min(joined.len());
    while !joined.is_char_boundary(cut) {
        cut -= 1;
    }
    json!({
        "truncated": true,
        "bytes": text.len(),
        "limit": max,
        "isError": result.is_error.unwrap_or(false),
        "text": &joined[..cut],
    })
}

impl Tool for Shared {
    fn spec(&self) -> &ToolSpec {
        &self.0.spec
    }

    /// The operator's class for the tool, else its server's annotations'.
    fn worst_class(&self) -> Option<warrant_core::RiskClass> {
        Some(self.0.risk)
    }

    fn normalize(&self, args: &Value, _env: &ToolEnv) -> Result<Vec<Action>, Refusal> {
        let t = &self.0;
        if !matches!(args, Value::Object(_) | Value::Null) {
            return Err(Refusal {
                code: "W-TOOL-002".into(),
                message: format!("arguments of `{}` must be an object", t.spec.name),
            });
        }
        Ok(vec![Action::McpCall {
            server: t.live.server.name.clone(),
            tool: t.remote.clone(),
            arguments: if args.is_null() {
                json!({})
            } else {
                args.clone()
            },
            risk: t.risk,
            definition: t.definition.clone(),
        }])
    }

    fn present(&self, actions: &[Action], _env: &ToolEnv) -> Presentation {
        let mut title = Vec::new();
        let mut body = Vec::new();
        for a in actions {
            if let Action::McpCall {
                server,
                tool,
                arguments,
                risk,
                ..
            } = a
            {
                title.push(format!("MCP {server}/{tool}"));
                body.push(format!(
                    "server: {server}\ntool: {tool}\nrisk: {}\narguments:\n{}",
                    risk.as_str(),
                    serde_json::to_string_pretty(arguments).unwrap_or_default()
                ));
            }
        }
        Presentation {
            title: title.join(", "),
            body: body.join("\n\n"),
        }
    }

    fn execute(
        &self,
        actions: &[Authorized<Action>],
        env: &ToolEnv,
        may_read: ReadFilter<'_>,
        stop: StopCheck<'_>,
    ) -> EffectResult {
        self.execute_with(actions, env, may_read, stop, &NoPeerAsks)
    }

    fn execute_with(
        &self,
        actions: &[Authorized<Action>],
        _env: &ToolEnv,
        _may_read: ReadFilter<'_>,
        stop: StopCheck<'_>,
        peers: &dyn PeerAsks,
    ) -> EffectResult {
        match actions.first().and_then(|a| a.narrow::<McpCall>()) {
            Some(call) => self.0.run(call.get(), stop, peers),
            None => EffectResult {
                ok: false,
                result: json!({"error": "not an mcp.call action (a wiring bug)"}),
            },
        }
    }
}

/// Whether an `http://` URL names this machine (`localhost`, 127.0.0.0/8, `::1`), where plain
/// HTTP never crosses a network.
fn loopback(url: &str) -> bool {
    let rest = url.strip_prefix("http://").unwrap_or(url);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit('@').next().unwrap_or(authority);
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        host_port.split(':').next().unwrap_or("")
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}
