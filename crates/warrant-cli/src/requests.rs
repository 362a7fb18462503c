//! `warrant requests …`: what the agent asked of people (questions, secrets, resources) and
//! the approvals waiting, listed for me, my teams or the administrators; answering, providing
//! a secret (read from standard input, hidden on a terminal, stored encrypted), connecting a
//! resource (checked before it is believed), declining; and export as AAIS 1.0 documents.

use std::io::{IsTerminal, Read as _, Write as _};
use std::path::Path;
use std::time::{Duration, Instant};

use clap::Subcommand;
use serde_json::{Value, json};
use warrant_core::config::ProfileConfig;
use warrant_core::{Clock, RequestId, RiskClass, SystemClock, canonical_json};
use warrant_exec::vault::Vault;
use warrant_kernel::asks::{is_asked_of, secret_handle};
use warrant_kernel::{
    Ask, AskState, Reply, RequestAnswer, RequestKind, RequestState, ResourceKind, RunState,
};
use warrant_store::{RequestRow, RequestStatus};

use crate::Failure;
use warrant_host::drive;
use warrant_host::install::{self, Installation};

#[derive(Subcommand, Debug)]
pub enum RequestsCommand {
    /// What is asked of people: questions, secrets, resources, approvals.
    List {
        /// Only what is asked of me, of my teams, or (with the `admin` role) of the administrators.
        #[arg(long)]
        mine: bool,
        /// Include answered and expired requests.
        #[arg(long)]
        all: bool,
        #[arg(long)]
        json: bool,
    },
    /// One request in full.
    Show {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Answer a question: choose one of its options, or give free text.
    Answer {
        id: String,
        /// The number of the option (1 = the first).
        #[arg(long, conflicts_with = "text")]
        option: Option<u32>,
        #[arg(long)]
        text: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Provide a requested secret. The value is read from standard input (hidden on a
    /// terminal), never from an argument, and stored encrypted; the agent sees only its handle.
    Provide {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Connect a requested resource. Warrant checks it first: an endpoint must answer HTTP, an
    /// MCP server must answer `initialize`. Name it with `--url` / `--command`, or take what the
    /// agent proposed with `--use-proposed` (never implied: checking it starts the command or
    /// sends the request from this machine).
    Connect {
        id: String,
        #[arg(long, conflicts_with = "use_proposed")]
        url: Option<String>,
        /// The command that starts the MCP server, as separate arguments after `--command`.
        #[arg(long, num_args = 1.., allow_hyphen_values = true, conflicts_with = "use_proposed")]
        command: Option<Vec<String>>,
        /// Check (and connect) the url or command the agent proposed, as `requests show` prints it.
        #[arg(long)]
        use_proposed: bool,
        /// How long the check may take.
        #[arg(long, default_value = "10s")]
        timeout: String,
        #[arg(long)]
        json: bool,
    },
    /// Decline a request; the agent is told the reason.
    Decline {
        id: String,
        #[arg(long)]
        reason: String,
        #[arg(long)]
        json: bool,
    },
    /// Export approval requests and their decisions as JSON documents of an interchange format.
    Export {
        /// One request (default: every approval request).
        id: Option<String>,
        #[arg(long, value_parser = ["aais"], default_value = "aais")]
        format: String,
    },
}

type Here = warrant_host::Host;

fn load(ws: Option<&Path>) -> Result<Here, Failure> {
    Ok(warrant_host::Host::open(&crate::at(ws), crate::notices())?)
}

fn parse_request(id: &str) -> Result<RequestId, Failure> {
    RequestId::parse(id).ok_or_else(|| {
        Failure::usage(
            "W-APPROVAL-001",
            format!("`{id}` is not a request id (they look like req-0195f0c3a1b2-1a2b3c4d)"),
        )
    })
}

fn row_of(inst: &Installation, request: &RequestId) -> Result<RequestRow, Failure> {
    inst.store
        .request(request)
        .map_err(|e| Failure::coded(&e, 1))?
        .ok_or_else(|| {
            Failure::usage(
                "W-APPROVAL-001",
                format!(
                    "request {request} does not exist; `warrant requests list` shows open requests"
                ),
            )
        })
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

pub fn dispatch(ws: Option<&Path>, command: RequestsCommand) -> Result<u8, Failure> {
    match command {
        RequestsCommand::List { mine, all, json } => list(ws, mine, all, json),
        RequestsCommand::Show { id, json } => show(ws, &id, json),
        RequestsCommand::Answer {
            id,
            option,
            text,
            json,
        } => answer(ws, &id, option, text, json),
        RequestsCommand::Provide { id, json } => provide(ws, &id, json),
        RequestsCommand::Connect {
            id,
            url,
            command,
            use_proposed,
            timeout,
            json,
        } => connect(ws, &id, url, command, use_proposed, &timeout, json),
        RequestsCommand::Decline { id, reason, json } => decline(ws, &id, reason, json),
        RequestsCommand::Export { id, format: _ } => export(ws, id.as_deref()),
    }
}

/// Who a request is asked of, for listing: what the ring recorded for an agent's request;
/// for an approval, the people it was put to, its team or the administrators (anyone who is
/// not an agent when there was no identity directory).
fn asked_of_row(row: &RequestRow) -> Vec<String> {
    if let Some(list) = row.summary.get("asked_of").and_then(Value::as_array) {
        return list
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect();
    }
    let s = &row.summary;
    let mut out: Vec<String> = s
        .get("approvers")
        .and_then(Value::as_array)
        .map(|people| {
            people
                .iter()
                .filter_map(Value::as_str)
                .map(|p| format!("user:{p}"))
                .collect()
        })
        .unwrap_or_default();
    if let Some(team) = s.get("team").and_then(Value::as_str) {
        out.push(format!("team:{team}"));
    }
    if s.get("admins").and_then(Value::as_bool) == Some(true) {
        out.push("admins".to_owned());
    }
    if out.is_empty() {
        match s.get("asked_of") {
            // Recorded under a directory-less installation: any person may answer.
            Some(Value::String(_)) => out.push("anyone".to_owned()),
            _ => {
                if let Some(p) = s.get("requested_by").and_then(Value::as_str) {
                    out.push(format!("user:{p}"));
                }
            }
        }
    }
    out
}

fn kind_of_row(row: &RequestRow) -> String {
    row.summary
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("approval")
        .to_owned()
}

fn status_of_row(row: &RequestRow, now: i64) -> &'static str {
    match row.status {
        RequestStatus::Answered => "answered",
        RequestStatus::Open => {
            let expired = row
                .summary
                .get("expires_at")
                .and_then(Value::as_str)
                .and_then(warrant_core::Timestamp::parse)
                .is_some_and(|t| t.millis() <= now);
            if expired { "expired" } else { "open" }
        }
    }
}

fn list(ws: Option<&Path>, mine: bool, all: bool, json: bool) -> Result<u8, Failure> {
    let paths = install::paths(&crate::at(ws), false)?;
    let layers = install::read_layers(&paths)?;
    let identity = install::identity(&layers)?;
    let settings = install::settings(&layers)?;
    let inst = install::installation(&paths, &settings, crate::notices())?;
    let me = &identity.principal;
    let rules = install::approval_rules(&paths, &layers)?;
    let now = SystemClock.now().millis();
    let rows = inst
        .store
        .requests(if all { None } else { Some(RequestStatus::Open) })
        .map_err(|e| Failure::coded(&e, 1))?;
    let rows: Vec<RequestRow> = rows
        .into_iter()
        .filter(|r| !mine || is_asked_of(&asked_of_row(r), me, rules.directory.as_ref()))
        .collect();
    if json {
        let items: Vec<Value> = rows
            .iter()
            .map(|r| {
                json!({
                    "id": r.id,
                    "run": r.run,
                    "kind": kind_of_row(r),
                    "status": status_of_row(r, now),
                    "created_at": r.created_at.rfc3339(),
                    "expires_at": r.summary.get("expires_at"),
                    "title": r.summary.get("title"),
                    "requested_by": r.summary.get("requested_by"),
                    "asked_of": asked_of_row(r),
                })
            })
            .collect();
        outln!("{}", pretty(&json!({"requests": items})));
        return Ok(0);
    }
    if rows.is_empty() {
        outln!(
            "no {}requests{}",
            if all { "" } else { "open " },
            if mine {
                format!(" for {} (or your teams)", me.actor)
            } else {
                String::new()
            }
        );
    }
    for r in &rows {
        let s = &r.summary;
        let get = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or("?").to_owned();
        outln!(
            "{}  {:<9} {:<8} run {}  {}  (asked by {}; of {})",
            r.id,
            kind_of_row(r),
            status_of_row(r, now),
            r.run,
            crate::shown_inline(&get("title")),
            get("requested_by"),
            asked_of_row(r).join(", "),
        );
    }
    Ok(0)
}

fn ask_json(a: &AskState) -> Value {
    json!({
        "id": a.id,
        "kind": a.ask.kind().as_str(),
        "status": a.status(),
        "call": a.call_id,
        "ask": a.ask,
        "title": a.ask.title(),
        "asked_of": a.asked_of,
        "expires_at": a.expires_at.rfc3339(),
        "reply": a.reply.as_ref().map(|(r, by)| json!({"reply": r, "by": by})),
        "expired": a.expired.map(|t| t.rfc3339()),
    })
}

fn show(ws: Option<&Path>, id: &str, json: bool) -> Result<u8, Failure> {
    let request = parse_request(id)?;
    let here = load(ws)?;
    let row = row_of(&here.inst, &request)?;
    let state = here.load_run(&row.run, warrant_host::Class::Failed)?;
    let doc = match (state.asks.get(&request), state.requests.get(&request)) {
        (Some(a), _) => {
            let mut v = ask_json(a);
            v["run"] = json!(state.run);
            v["requested_by"] = json!(state.principal.actor);
            v
        }
        (None, Some(r)) => json!({
            "id": r.id,
            "run": state.run,
            "kind": match r.kind { RequestKind::Approval => "approval", RequestKind::InDoubt => "in_doubt" },
            "status": match (&r.answer, &r.resolution) {
                (Some(RequestAnswer::Granted { .. }), _) => "approved",
                (Some(RequestAnswer::Denied { .. }), _) => "denied",
                (None, Some(_)) => "resolved",
                (None, None) => "open",
            },
            "call": r.call_id,
            "risk": r.risk,
            "title": r.presentation.title,
            "body": r.presentation.body,
            "digest": r.digest,
            "requested_by": state.principal.actor,
        }),
        (None, None) => row.summary,
    };
    if json {
        outln!("{}", pretty(&doc));
        return Ok(0);
    }
    let get = |k: &str| doc.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    outln!("request {}  ({}, {})", request, get("kind"), get("status"));
    outln!("  run        {}", state.run);
    outln!("  asked by   {}", get("requested_by"));
    outln!("  what       {}", crate::shown_inline(&get("title")));
    if let Some(of) = doc.get("asked_of").and_then(Value::as_array) {
        let of: Vec<&str> = of.iter().filter_map(Value::as_str).collect();
        outln!("  asked of   {}", of.join(", "));
    }
    if !get("expires_at").is_empty() {
        outln!("  expires    {}", get("expires_at"));
    }
    if let Some(Ask::Question { options, .. }) = state.asks.get(&request).map(|a| &a.ask) {
        for (i, o) in options.iter().enumerate() {
            outln!("  option {}   {o}", i + 1);
        }
    }
    if let Some((reply, by)) = state.asks.get(&request).and_then(|a| a.reply.as_ref()) {
        outln!("  reply      {} by {}", reply.label(), by.actor);
    }
    if !get("body").is_empty() {
        outln!("{}", get("body"));
    }
    Ok(0)
}

/// Loads the run of a request the agent raised, with the request as folded.
fn ask_of(here: &Here, request: &RequestId) -> Result<(RunState, AskState), Failure> {
    let row = row_of(&here.inst, request)?;
    let state = here.load_run(&row.run, warrant_host::Class::Failed)?;
    let Some(ask) = state.asks.get(request).cloned() else {
        return Err(Failure::usage(
            "W-REQUEST-008",
            format!(
                "request {request} is not a request raised by the agent; approvals are answered with `warrant approve` / `warrant deny`"
            ),
        ));
    };
    Ok((state, ask))
}

/// Appends the reply through the ring and prints what happened.
fn reply(
    here: &Here,
    request: &RequestId,
    state: &mut RunState,
    answer: Reply,
    json: bool,
) -> Result<u8, Failure> {
    let label = answer.label();
    here.refuse_from_command(state, request, "answer a request")?;
    here.reply(state, request, answer)?;
    if json {
        outln!(
            "{}",
            pretty(
                &json!({"request": request, "run": state.run, "reply": label, "by": here.identity.principal.actor})
            )
        );
    } else {
        outln!(
            "{label}: {request} by {}; continue the run with: warrant resume {}",
            here.identity.principal.actor,
            state.run
        );
    }
    Ok(0)
}

fn answer(
    ws: Option<&Path>,
    id: &str,
    option: Option<u32>,
    text: Option<String>,
    json: bool,
) -> Result<u8, Failure> {
    let request = parse_request(id)?;
    let here = load(ws)?;
    let (mut state, ask) = ask_of(&here, &request)?;
    let answer = match (option, text) {
        (Some(n), _) => {
            let chosen = match &ask.ask {
                Ask::Question { options, .. } => usize::try_from(n)
                    .ok()
                    .and_then(|i| i.checked_sub(1))
                    .and_then(|i| options.get(i))
                    .cloned(),
                Ask::Secret { .. } | Ask::Resource { .. } => None,
            };
            Reply::Answered {
                option: Some(n),
                text: chosen.unwrap_or_default(),
            }
        }
        (None, Some(text)) => Reply::Answered { option: None, text },
        (None, None) => {
            return Err(Failure::usage(
                "W-REQUEST-002",
                format!("answer {request} with --option N or --text TEXT"),
            ));
        }
    };
    reply(&here, &request, &mut state, answer, json)
}

fn decline(ws: Option<&Path>, id: &str, reason: String, json: bool) -> Result<u8, Failure> {
    let request = parse_request(id)?;
    let here = load(ws)?;
    let (mut state, _) = ask_of(&here, &request)?;
    reply(
        &here,
        &request,
        &mut state,
        Reply::Declined { reason },
        json,
    )
}

/// Reads the secret: hidden from a terminal, else all of standard input (one trailing newline
/// dropped). Never from an argument or the environment.
fn read_secret(name: &str) -> Result<Vec<u8>, Failure> {
    let unreadable = |e: std::io::Error| {
        Failure::usage(
            "W-REQUEST-006",
            format!("cannot read the value of secret {name} from standard input: {e}"),
        )
    };
    let mut value = if std::io::stdin().is_terminal() {
        read_hidden(&format!("value of secret {name} (not shown): ")).map_err(unreadable)?
    } else {
        let mut buf = Vec::new();
        std::io::stdin()
            .lock()
            .read_to_end(&mut buf)
            .map_err(unreadable)?;
        if buf.ends_with(b"\n") {
            buf.pop();
            if buf.ends_with(b"\r") {
                buf.pop();
            }
        }
        buf
    };
    if value.is_empty() {
        value.clear();
        return Err(Failure::usage(
            "W-REQUEST-006",
            format!(
                "the value of secret {name} is empty; pipe it on standard input or type it at the prompt"
            ),
        ));
    }
    Ok(value)
}

/// Reads one line from the controlling terminal with echo off. Echo is switched off before
/// the prompt is written, so nothing typed after the prompt appears, and restored afterwards
/// (also when reading fails).
fn read_hidden(prompt: &str) -> std::io::Result<Vec<u8>> {
    use rustix::termios::{LocalModes, OptionalActions, tcgetattr, tcsetattr};
    let mut tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")?;
    let saved = tcgetattr(&tty)?;
    let mut quiet = saved.clone();
    quiet.local_modes.remove(LocalModes::ECHO);
    quiet.local_modes.insert(LocalModes::ECHONL);
    tcsetattr(&tty, OptionalActions::Flush, &quiet)?;
    let read = (|| -> std::io::Result<Vec<u8>> {
        tty.write_all(prompt.as_bytes())?;
        tty.flush()?;
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        loop {
            match std::io::Read::read(&mut tty, &mut byte)? {
                0 => break,
                _ if byte[0] == b'\n' => break,
                _ => line.push(byte[0]),
            }
        }
        if line.ends_with(b"\r") {
            line.pop();
        }
        Ok(line)
    })();
    let restored = tcsetattr(&tty, OptionalActions::Now, &saved);
    let line = read?;
    restored?;
    Ok(line)
}

fn provide(ws: Option<&Path>, id: &str, json: bool) -> Result<u8, Failure> {
    let request = parse_request(id)?;
    let here = load(ws)?;
    let (mut state, ask) = ask_of(&here, &request)?;
    let Ask::Secret { name, .. } = &ask.ask else {
        return Err(Failure::usage(
            "W-REQUEST-001",
            format!(
                "request {request} asks for {}, not a secret; `warrant requests show {request}` says how to answer it",
                ask.ask.kind().as_str()
            ),
        ));
    };
    here.refuse_from_command(&mut state, &request, "provide a secret")?;
    // Refuse before reading the value when the reply could not be recorded anyway.
    if ask.reply.is_some() || ask.expired.is_some() || state.ended.is_some() {
        here.reply(
            &mut state,
            &request,
            Reply::SecretProvided {
                handle: secret_handle(name),
            },
        )?;
    }
    let mut value = read_secret(name)?;
    let vault = Vault::open(&here.paths.dot, &here.inst.secret);
    let stored = vault.put(name, &value);
    value.iter_mut().for_each(|b| *b = 0);
    stored.map_err(|e| Failure::coded(&e, 1))?;
    reply(
        &here,
        &request,
        &mut state,
        Reply::SecretProvided {
            handle: secret_handle(name),
        },
        json,
    )
}

/// Checks an endpoint answers HTTP (any status: a credentialed endpoint may say 401).
fn check_endpoint(url: &str, timeout: Duration) -> Result<String, String> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!("{url:?} is not an http:// or https:// URL"));
    }
    let config = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .max_redirects(0)
        .build();
    let agent = ureq::Agent::new_with_config(config);
    let started = Instant::now();
    match agent.get(url).call() {
        Ok(resp) => Ok(format!(
            "GET {url} answered HTTP {} in {} ms",
            resp.status().as_u16(),
            started.elapsed().as_millis()
        )),
        Err(e) => Err(format!("GET {url} failed: {e}")),
    }
}

/// Starts the MCP server command (minimal environment), sends `initialize` over stdio and
/// waits for a JSON-RPC result naming the server; the process is stopped either way.
fn check_mcp(
    argv: &[String],
    profiles: &std::collections::BTreeMap<String, ProfileConfig>,
    workspace: &warrant_core::CanonicalPath,
    timeout: Duration,
) -> Result<String, String> {
    let Some((program, args)) = argv.split_first() else {
        return Err("the MCP server command is empty".into());
    };
    let profile = profiles.get("default").cloned().unwrap_or_default();
    let env = warrant_exec::env::minimize_env(&profile, install::parent_env());
    // The server runs under the default profile's confinement, as the agent's commands do.
    let plan = warrant_exec::SandboxPlan::from_profile(
        "default",
        &profile,
        workspace,
        &warrant_exec::fs::OsLinks,
    )
    .map_err(|e| e.to_string())?;
    let mut command = match plan {
        Some(plan) => {
            let launcher = warrant_exec::Launcher::current_exe().map_err(|e| e.to_string())?;
            let mut c = std::process::Command::new(&launcher.program);
            c.args(launcher.args(&plan, argv).map_err(|e| e.to_string())?);
            c
        }
        None => {
            let mut c = std::process::Command::new(program);
            c.args(args);
            c
        }
    };
    let mut child = command
        .current_dir(workspace.as_path())
        .env_clear()
        .envs(env)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {program}: {e}"))?;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "warrant", "version": env!("CARGO_PKG_VERSION")}}});
    let sent = child
        .stdin
        .as_mut()
        .map(|stdin| writeln!(stdin, "{init}").and_then(|()| stdin.flush()));
    let stdout = child.stdout.take();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        if let Some(out) = stdout {
            let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line);
        }
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(timeout);
    let _ = child.kill();
    let _ = child.wait();
    if let Some(Err(e)) = sent {
        return Err(format!("cannot write initialize to {program}: {e}"));
    }
    let line = line.map_err(|_| {
        format!(
            "{program} did not answer initialize within {} ms",
            timeout.as_millis()
        )
    })?;
    let v: Value = serde_json::from_str(line.trim())
        .map_err(|e| format!("{program} answered something that is not JSON-RPC: {e}"))?;
    let result = v
        .get("result")
        .filter(|_| v.get("id") == Some(&json!(1)))
        .ok_or_else(|| format!("{program} did not return a result for initialize: {v}"))?;
    let server = result
        .pointer("/serverInfo/name")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{program}'s initialize result names no serverInfo"))?;
    let version = result
        .pointer("/serverInfo/version")
        .and_then(Value::as_str)
        .unwrap_or("?");
    let protocol = result
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or("?");
    Ok(format!(
        "`{}` answered initialize: server {server} {version}, protocol {protocol}",
        argv.join(" ")
    ))
}

fn connect(
    ws: Option<&Path>,
    id: &str,
    url: Option<String>,
    command: Option<Vec<String>>,
    use_proposed: bool,
    timeout: &str,
    json: bool,
) -> Result<u8, Failure> {
    let request = parse_request(id)?;
    let timeout = drive::parse_duration(timeout).ok_or_else(|| {
        Failure::usage(
            "W-CLI-003",
            format!("--timeout {timeout:?} is not a duration; use e.g. 500ms, 10s"),
        )
    })?;
    let here = load(ws)?;
    let (mut state, ask) = ask_of(&here, &request)?;
    let Ask::Resource {
        resource,
        url: proposed_url,
        command: proposed_command,
        ..
    } = &ask.ask
    else {
        return Err(Failure::usage(
            "W-REQUEST-001",
            format!(
                "request {request} asks for {}, not a resource; `warrant requests show {request}` says how to answer it",
                ask.ask.kind().as_str()
            ),
        ));
    };
    // What the agent proposed is the model's choice: checking it starts a command or sends a
    // request from this machine, outside the ring. So it is used only when the person says so.
    let refuse_implied = |proposal: String, flag: &str| {
        Failure::usage(
            "W-REQUEST-013",
            format!(
                "request {request}: name the {} to check with {flag}, or take the agent's proposal ({proposal}) with --use-proposed; Warrant does not check what the agent chose unless you say so",
                resource.as_str()
            ),
        )
    };
    let checked = match resource {
        ResourceKind::Endpoint => {
            let url = match (url, use_proposed) {
                (Some(u), _) => u,
                (None, true) => proposed_url.clone().unwrap_or_default(),
                (None, false) => {
                    return Err(refuse_implied(
                        proposed_url.clone().unwrap_or_else(|| "none".into()),
                        "--url URL",
                    ));
                }
            };
            check_endpoint(&url, timeout)
        }
        ResourceKind::Mcp => {
            let argv = match (command, use_proposed) {
                (Some(c), _) => c,
                (None, true) => proposed_command.clone().unwrap_or_default(),
                (None, false) => {
                    return Err(refuse_implied(
                        proposed_command
                            .as_ref()
                            .map(|c| format!("`{}`", c.join(" ")))
                            .unwrap_or_else(|| "none".into()),
                        "--command PROGRAM ARGS...",
                    ));
                }
            };
            let workspace = here.paths.workspace_canonical()?;
            check_mcp(&argv, &here.settings.profiles, &workspace, timeout)
        }
    };
    let check = checked.map_err(|why| {
        Failure::usage(
            "W-REQUEST-007",
            format!(
                "the {} of request {request} could not be confirmed, so it is not connected: {why}",
                resource.as_str()
            ),
        )
    })?;
    reply(
        &here,
        &request,
        &mut state,
        Reply::Connected { check },
        json,
    )
}

// ---- AAIS 1.0 export ----

fn aais_risk(risk: RiskClass) -> &'static str {
    match risk {
        RiskClass::Read => "low",
        RiskClass::Change => "medium",
        RiskClass::External => "high",
        RiskClass::Destructive | RiskClass::Secret | RiskClass::Irreversible => "critical",
    }
}

fn aais_digest(action: &Value) -> String {
    let text = canonical_json(action).unwrap_or_default();
    format!(
        "sha256:{}",
        warrant_core::Digest::of_bytes(text.as_bytes())
            .as_str()
            .trim_start_matches("sha256:")
    )
}

/// The AAIS documents of one approval request: requested, then (once answered) decided and
/// resolved. `seq` numbers the producer stream.
fn aais_documents(
    state: &RunState,
    req: &RequestState,
    row: &RequestRow,
    events: &[warrant_store::StoredEvent],
    seq: &mut u64,
) -> Vec<Value> {
    let call = state.call(&req.call_id);
    let tool = call.map(|c| c.record.tool.clone()).unwrap_or_default();
    let mut action = json!({
        "kind": "tool.call",
        "name": if tool.is_empty() { "unknown".to_owned() } else { tool },
        "summary": if req.presentation.title.is_empty() { "an action".to_owned() } else { req.presentation.title.chars().take(1000).collect() },
        "arguments": call.map(|c| c.record.args.clone()).filter(Value::is_object).unwrap_or_else(|| json!({})),
        "working_directory": state.workspace,
    });
    if !req.presentation.body.is_empty() {
        action["presentation"] =
            json!({"details": req.presentation.body.chars().take(10_000).collect::<String>()});
    }
    let digest = aais_digest(&action);
    let stream = format!("warrant.{}", state.run);
    let at = |s: u64| {
        events
            .iter()
            .find(|e| e.seq == s)
            .map_or_else(|| row.created_at.rfc3339(), |e| e.recorded_at.rfc3339())
    };
    let mut next = || {
        let s = *seq;
        *seq += 1;
        s
    };
    let ext = json!({"warrant.invalid/aais": {"run": state.run, "warrant_digest": req.digest, "risk_class": req.risk}});
    let mut docs = vec![json!({
        "aais": "1.0",
        "type": "approval.requested",
        "id": format!("{}.requested", req.id),
        "occurred_at": at(req.park_seq),
        "sequence": next(),
        "stream": stream,
        "request": {
            "id": req.id,
            "created_at": at(req.park_seq),
            "status": "pending",
            "origin": {"harness": "warrant", "session_id": state.run, "run_id": state.run},
            "action": action,
            "action_digest": digest,
            "risk": {"level": aais_risk(req.risk), "reasons": [format!("risk class {}", req.risk.as_str())]},
            "choices": [
                {"decision": "approve", "scope": "once", "label": "Approve once"},
                {"decision": "approve", "scope": "session", "label": "Approve for this run",
                 "scope_constraints": {"session_id": state.run, "match": "same verb on the same target"}},
                {"decision": "deny", "scope": "once", "label": "Deny"}
            ],
            "extensions": ext,
        }
    })];
    let Some(answer) = &req.answer else {
        return docs;
    };
    let answered_seq = events
        .iter()
        .find(|e| {
            (e.kind == "approval_granted" || e.kind == "approval_denied")
                && e.payload.get("request_id") == Some(&json!(req.id))
        })
        .map_or(req.park_seq, |e| e.seq);
    let (decision, scope, approver, outcome, message) = match answer {
        RequestAnswer::Granted {
            approver, scope, ..
        } => (
            "approve",
            scope.as_str(),
            approver,
            "approved",
            format!("approved {} by {}", scope.as_str(), approver.actor),
        ),
        RequestAnswer::Denied { approver, reason } => (
            "deny",
            "once",
            approver,
            "denied",
            format!("denied by {}: {reason}", approver.actor),
        ),
    };
    let decision_id = format!("{}.decided", req.id);
    docs.push(json!({
        "aais": "1.0",
        "type": "approval.decided",
        "id": decision_id,
        "occurred_at": at(answered_seq),
        "sequence": next(),
        "stream": stream,
        "decision": {
            "id": decision_id,
            "request_id": req.id,
            "action_digest": digest,
            "decided_at": at(answered_seq),
            "decision": decision,
            "scope": scope,
            "actor": {"id": approver.actor, "type": "human", "authenticated_by": format!("warrant:{}", approver.via)},
        }
    }));
    let mut resolution = json!({
        "id": format!("{}.resolved", req.id),
        "request_id": req.id,
        "decision_id": decision_id,
        "action_digest": digest,
        "resolved_at": at(answered_seq),
        "outcome": outcome,
        "message": message.chars().take(2000).collect::<String>(),
    });
    if decision == "approve" {
        resolution["effective_scope"] = json!(scope);
    }
    docs.push(json!({
        "aais": "1.0",
        "type": "approval.resolved",
        "id": format!("{}.resolved", req.id),
        "occurred_at": at(answered_seq),
        "sequence": next(),
        "stream": stream,
        "resolution": resolution,
    }));
    docs
}

/// Prints AAIS documents as JSON lines. AAIS covers approvals of actions; the requests the
/// agent raises (questions, secrets, resources) are form input and credential exchange, which
/// AAIS 1.0 leaves out (spec §16), so they are not exported.
fn export(ws: Option<&Path>, id: Option<&str>) -> Result<u8, Failure> {
    let here = load(ws)?;
    let rows: Vec<RequestRow> = match id {
        Some(id) => vec![row_of(&here.inst, &parse_request(id)?)?],
        None => here
            .inst
            .store
            .requests(None)
            .map_err(|e| Failure::coded(&e, 1))?,
    };
    let mut seq = 0u64;
    let mut loaded: std::collections::BTreeMap<
        String,
        (RunState, Vec<warrant_store::StoredEvent>),
    > = std::collections::BTreeMap::new();
    for row in &rows {
        let key = row.run.to_string();
        if !loaded.contains_key(&key) {
            let events = here
                .inst
                .store
                .events(&row.run)
                .map_err(|e| Failure::coded(&e, 1))?;
            let state = here.load_run(&row.run, warrant_host::Class::Failed)?;
            loaded.insert(key.clone(), (state, events));
        }
        let Some((state, events)) = loaded.get(&key) else {
            continue;
        };
        match state.requests.get(&row.id) {
            Some(req) if req.kind == RequestKind::Approval => {
                for doc in aais_documents(state, req, row, events, &mut seq) {
                    outln!("{doc}");
                }
            }
            Some(_) | None => {
                if id.is_some() {
                    return Err(Failure::usage(
                        "W-REQUEST-010",
                        format!(
                            "request {} is a {} request; AAIS 1.0 covers approvals of actions only (form input and credential exchange are outside it)",
                            row.id,
                            kind_of_row(row)
                        ),
                    ));
                }
            }
        }
    }
    Ok(0)
}
