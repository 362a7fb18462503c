//! `warrant mcp serve` against real peers: the official MCP Python SDK (`mcp`, installed into a
//! cached virtual environment when missing) as a client over stdio and over streamable HTTP, raw
//! HTTP requests for the guard (token, Host, Origin, size), and the negative controls: the
//! ceiling lifted, the rebinding check switched off.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::harness::peers_dir;
use super::harness::{Sandbox, kinds, python_venv};

/// The pinned Python SDK the interop tests speak through.
const PYTHON_MCP: &str = "mcp==2.3.0";

/// The Python of a virtual environment holding the official MCP SDK, made (and the SDK
/// installed with pip) the first time; never skipped.
fn python_sdk() -> PathBuf {
    static READY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    READY
        .get_or_init(|| {
            python_venv("mcp-py", "import mcp.client.streamable_http", &[PYTHON_MCP])
                .join("bin/python")
        })
        .clone()
}

fn client_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/peers/mcp_client.py")
}

/// The calls the Python client makes, as `[tool, arguments]`.
fn calls(list: &[(&str, Value)]) -> String {
    Value::Array(list.iter().map(|(t, a)| json!([t, a])).collect()).to_string()
}

/// Runs the Python SDK client against `warrant mcp serve` over stdio in `sb`.
fn over_stdio(sb: &Sandbox, list: &[(&str, Value)]) -> Value {
    let serve = sb.std_cmd(&["mcp", "serve"]);
    let mut c = std::process::Command::new(python_sdk());
    c.arg(client_script())
        .arg("stdio")
        .arg(calls(list))
        .arg("--")
        .arg(serve.get_program())
        .args(serve.get_args())
        .current_dir(&sb.ws);
    for (k, v) in serve.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "the Python client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `warrant mcp serve --http 127.0.0.1:0` in the background; killed when dropped.
pub struct HttpServer {
    child: Child,
    pub addr: String,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl HttpServer {
    pub fn start(sb: &Sandbox) -> Self {
        let mut c = sb.std_cmd(&["mcp", "serve", "--http", "127.0.0.1:0"]);
        c.stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        let mut err = child.stderr.take().unwrap();
        // The line on stderr that names the address (port 0 resolved); notices (the baseline's
        // gaps) may come before it.
        let mut seen = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut byte = [0u8; 1];
        let mut line = String::new();
        while Instant::now() < deadline && !line.contains("http://") {
            seen.clear();
            while Instant::now() < deadline && !seen.ends_with(b"\n") {
                if err.read(&mut byte).unwrap_or(0) == 0 {
                    break;
                }
                seen.push(byte[0]);
            }
            if seen.is_empty() {
                break;
            }
            line = String::from_utf8_lossy(&seen).into_owned();
        }
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|r| r.split('/').next())
            .unwrap_or_else(|| panic!("no address in: {line}"))
            .to_owned();
        // Keep draining stderr so the server never blocks on it.
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = err.read_to_end(&mut sink);
        });
        Self { child, addr }
    }

    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }
}

/// One raw HTTP/1.1 POST of an `initialize` request with the given headers: the status code.
fn raw_post(addr: &str, headers: &[(&str, &str)], body: &str) -> u16 {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut req = "POST /mcp HTTP/1.1\r\n".to_owned();
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!(
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    s.write_all(req.as_bytes()).unwrap();
    let mut head = [0u8; 12];
    s.read_exact(&mut head).unwrap();
    String::from_utf8_lossy(&head[9..12]).parse().unwrap()
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

fn configure(sb: &Sandbox, toml: &str) {
    let config = sb.ws.join(".warrant/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push('\n');
    text.push_str(toml);
    std::fs::write(&config, text).unwrap();
}

/// A workspace serving the file tools and, in its configuration, `write_file` (held back by
/// the ceiling unless `lift`), with the HTTP token `ci` for the service `ci-bot`.
fn serving(lift: bool) -> Sandbox {
    let mut sb = Sandbox::init();
    let lifted = if lift {
        r#"lift_ceiling = ["write_file"]"#
    } else {
        ""
    };
    configure(
        &sb,
        &format!(
            "[mcp.serve]\ntools = [\"read_file\", \"list_dir\", \"search_files\", \"write_file\"]\n{lifted}\nmax_body_bytes = 65536\n[mcp.serve.tokens.ci]\ntoken = \"env:WARRANT_MCP_CI_TOKEN\"\nactor = \"ci-bot\"\nkind = \"service\"\n"
        ),
    );
    sb.extra_env.push((
        "WARRANT_MCP_CI_TOKEN".into(),
        "mcp-ci-7f3a9c2e51d04b8a".into(),
    ));
    sb
}

fn summary(call: &Value) -> Value {
    let s = &call["structured"];
    json!({
        "tool": call["tool"],
        "is_error": call["is_error"],
        "status": s["status"],
        "code": s["code"],
    })
}

#[test]
fn the_python_sdk_over_stdio_lists_the_read_tools_calls_one_and_is_refused_the_rest() {
    let sb = serving(false);
    let out = over_stdio(
        &sb,
        &[
            ("read_file", json!({"path": "README.md"})),
            ("write_file", json!({"path": "planted.txt", "content": "x"})),
            ("read_file", json!({"path": ".env"})),
        ],
    );
    assert_eq!(out["server"], "warrant");
    assert_eq!(
        out["tools"],
        json!(["list_dir", "read_file", "search_files"])
    );
    let got: Vec<Value> = out["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(summary)
        .collect();
    assert_eq!(
        got,
        vec![
            json!({"tool": "read_file", "is_error": false, "status": "completed", "code": null}),
            json!({"tool": "write_file", "is_error": true, "status": "refused", "code": "W-TOOL-007"}),
            json!({"tool": "read_file", "is_error": true, "status": "denied", "code": "W-MCPSERVE-004"}),
        ]
    );
    let read = &out["calls"][0]["structured"]["result"]["content"];
    assert!(read.as_str().unwrap().starts_with("# Lighthouse"), "{read}");
    assert!(!sb.exists("planted.txt"));
    // Each call is a run of the local person, journaled from its receipt, and audited.
    let runs = sb.json(&["runs", "list", "--json"]);
    let rows: Vec<Value> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| json!([r["actor"], r["status"]]))
        .collect();
    assert_eq!(rows, vec![json!(["tester", "completed"]); 3]);
    let denied = runs["runs"][2]["run"].as_str().unwrap().to_owned();
    let shown = sb.json(&["runs", "show", &denied, "--json"]);
    let events = shown["events"].as_array().unwrap();
    assert_eq!(
        kinds(events),
        vec![
            "run_started",
            "call_received",
            "action_proposed",
            "policy_decided",
            "effect_denied",
            "run_ended"
        ]
    );
    assert_eq!(events[1]["payload"]["client"], "mcp stdio");
    let verified = sb.run(&["audit", "verify"]);
    assert_eq!(
        verified.status.code(),
        Some(0),
        "{}",
        super::harness::stderr(&verified)
    );
}

#[test]
fn a_write_tool_is_exported_only_when_its_ceiling_is_lifted_by_name() {
    // The control: the same configuration with the ceiling lifted exports write_file, and its
    // call runs (through policy, as any write).
    let lifted = serving(true);
    let out = over_stdio(
        &lifted,
        &[(
            "write_file",
            json!({"path": "notes/hello.txt", "content": "hi"}),
        )],
    );
    assert_eq!(
        out["tools"],
        json!(["list_dir", "read_file", "search_files", "write_file"])
    );
    assert_eq!(summary(&out["calls"][0])["status"], "completed");
    assert_eq!(
        std::fs::read_to_string(lifted.ws.join("notes/hello.txt")).unwrap(),
        "hi"
    );
    // Held: not listed, and a call naming it is refused and recorded.
    let held = serving(false);
    let out = over_stdio(
        &held,
        &[(
            "write_file",
            json!({"path": "notes/hello.txt", "content": "hi"}),
        )],
    );
    assert_eq!(
        out["tools"],
        json!(["list_dir", "read_file", "search_files"])
    );
    assert_eq!(summary(&out["calls"][0])["code"], "W-TOOL-007");
    assert!(!held.exists("notes/hello.txt"));
}

#[test]
fn a_served_result_passes_the_same_redaction_as_a_models() {
    let token = "ghp_8f3KqL0vX2mB9nR4tY7wZ1cD6hJ5sP3aE2gU";
    let sb = serving(false);
    sb.write("notes/deploy.md", &format!("push with {token} then tag\n"));
    let out = over_stdio(&sb, &[("read_file", json!({"path": "notes/deploy.md"}))]);
    let text = out["calls"][0]["text"].as_str().unwrap();
    assert!(!text.contains(token), "{text}");
    assert!(text.contains("[REDACTED:github-pat]"), "{text}");
    let store = store_bytes(&sb);
    assert!(!String::from_utf8_lossy(&store).contains(token));
    // The control: with redaction switched off (debug builds only) the client gets the value.
    let mut open = serving(false);
    open.extra_env
        .push(("WARRANT_TEST_DISABLE".into(), "redact".into()));
    open.write("notes/deploy.md", &format!("push with {token} then tag\n"));
    let out = over_stdio(&open, &[("read_file", json!({"path": "notes/deploy.md"}))]);
    assert!(out["calls"][0]["text"].as_str().unwrap().contains(token));
}

#[test]
fn a_call_that_needs_a_person_parks_and_runs_once_they_approved() {
    let sb = serving(false);
    sb.write(
        ".warrant/policies/ask-notes.cedar",
        "@id(\"ask-notes\")\n@ask(\"change\")\n@reason(\"Meeting notes are read with a person's consent.\")\npermit (principal, action == Warrant::Action::\"fs.read\", resource)\nwhen { resource.name == \"meeting-2026-11-20.md\" };\n",
    );
    let call = [("read_file", json!({"path": "notes/meeting-2026-11-20.md"}))];
    let first = over_stdio(&sb, &call);
    let parked = &first["calls"][0]["structured"];
    assert_eq!(summary(&first["calls"][0])["code"], "W-MCPSERVE-006");
    let request = parked["request"].as_str().unwrap().to_owned();
    assert!(
        first["calls"][0]["text"]
            .as_str()
            .unwrap()
            .contains(&request)
    );
    // Asked again before anyone answered: the same request, no second run.
    let again = over_stdio(&sb, &call);
    assert_eq!(again["calls"][0]["structured"]["request"], request.as_str());
    assert_eq!(
        sb.json(&["runs", "list", "--json"])["runs"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let approved = sb.run(&["approve", &request]);
    assert_eq!(
        approved.status.code(),
        Some(0),
        "{}",
        super::harness::stderr(&approved)
    );
    let done = over_stdio(&sb, &call);
    assert_eq!(summary(&done["calls"][0])["status"], "completed");
    assert_eq!(done["calls"][0]["structured"]["run"], parked["run"]);
    assert!(
        done["calls"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Planning, 20 November")
    );
}

#[test]
fn the_python_sdk_over_http_calls_as_the_tokens_principal() {
    let sb = serving(false);
    let server = HttpServer::start(&sb);
    let out = std::process::Command::new(python_sdk())
        .arg(client_script())
        .arg("http")
        .arg(calls(&[
            ("read_file", json!({"path": "README.md"})),
            ("write_file", json!({"path": "planted.txt", "content": "x"})),
            ("read_file", json!({"path": ".env"})),
        ]))
        .arg(server.url())
        .arg("mcp-ci-7f3a9c2e51d04b8a")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        out["tools"],
        json!(["list_dir", "read_file", "search_files"])
    );
    let got: Vec<Value> = out["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(summary)
        .collect();
    assert_eq!(
        got,
        vec![
            json!({"tool": "read_file", "is_error": false, "status": "completed", "code": null}),
            json!({"tool": "write_file", "is_error": true, "status": "refused", "code": "W-TOOL-007"}),
            json!({"tool": "read_file", "is_error": true, "status": "denied", "code": "W-MCPSERVE-004"}),
        ]
    );
    let runs = sb.json(&["runs", "list", "--json"]);
    let actors: Vec<&str> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["actor"].as_str().unwrap())
        .collect();
    assert_eq!(actors, vec!["ci-bot"; 3]);
    let first = runs["runs"][0]["run"].as_str().unwrap().to_owned();
    let shown = sb.json(&["runs", "show", &first, "--json"]);
    assert_eq!(
        shown["events"][1]["payload"]["client"],
        "mcp http (token ci)"
    );
}

/// The refused runs' reasons, in order.
fn refusals(sb: &Sandbox) -> Vec<(u64, String)> {
    let runs = sb.json(&["runs", "list", "--json"]);
    runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "stopped")
        .map(|r| {
            let run = r["run"].as_str().unwrap();
            let shown = sb.json(&["runs", "show", run, "--json"]);
            let e = &shown["events"][1]["payload"];
            (
                e["status"].as_u64().unwrap(),
                e["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn http_turns_away_a_missing_or_unknown_token_a_foreign_host_or_origin_and_a_large_body_and_records_each()
 {
    let sb = serving(false);
    let server = HttpServer::start(&sb);
    let host = server.addr.clone();
    let token = "Bearer mcp-ci-7f3a9c2e51d04b8a";
    let big = format!("{{\"pad\":\"{}\"}}", "x".repeat(70_000));
    let got = vec![
        raw_post(
            &server.addr,
            &[("Host", &host), ("Authorization", token)],
            INITIALIZE,
        ),
        raw_post(&server.addr, &[("Host", &host)], INITIALIZE),
        raw_post(
            &server.addr,
            &[("Host", &host), ("Authorization", "Bearer guessed")],
            INITIALIZE,
        ),
        raw_post(
            &server.addr,
            &[("Host", "attacker.example"), ("Authorization", token)],
            INITIALIZE,
        ),
        raw_post(
            &server.addr,
            &[
                ("Host", &host),
                ("Origin", "http://attacker.example"),
                ("Authorization", token),
            ],
            INITIALIZE,
        ),
        raw_post(
            &server.addr,
            &[("Host", &host), ("Authorization", token)],
            &big,
        ),
    ];
    assert_eq!(got, vec![200, 401, 401, 403, 403, 413]);
    let recorded = refusals(&sb);
    assert_eq!(
        recorded,
        vec![
            (401, "W-MCPSERVE-013 no bearer token".to_owned()),
            (401, "W-MCPSERVE-014 unknown bearer token".to_owned()),
            (
                403,
                "W-MCPSERVE-010 Host `attacker.example` is not this server's (DNS rebinding)"
                    .to_owned()
            ),
            (
                403,
                "W-MCPSERVE-011 Origin `http://attacker.example` is not allowed".to_owned()
            ),
            (
                413,
                format!(
                    "W-MCPSERVE-012 request body of {} bytes is over the limit",
                    big.len()
                )
            ),
        ]
    );
    // The token never reaches the trail.
    let trail =
        std::fs::read_to_string(sb.ws.join(".warrant/audit/audit.jsonl")).unwrap_or_default();
    let store = store_bytes(&sb);
    assert!(!trail.contains("mcp-ci-7f3a9c2e51d04b8a"));
    assert!(!String::from_utf8_lossy(&store).contains("mcp-ci-7f3a9c2e51d04b8a"));
}

#[test]
fn a_rebinding_request_is_refused_with_the_check_on_and_reaches_the_server_with_it_off() {
    let token = "Bearer mcp-ci-7f3a9c2e51d04b8a";
    let rebound = |sb: &Sandbox| {
        let server = HttpServer::start(sb);
        raw_post(
            &server.addr,
            &[
                ("Host", "attacker.example:80"),
                ("Origin", "http://attacker.example"),
                ("Authorization", token),
            ],
            INITIALIZE,
        )
    };
    // Recorded before it is answered: the record is there once the answer is.
    let guarded = serving(false);
    assert_eq!(rebound(&guarded), 403);
    assert_eq!(
        refusals(&guarded),
        vec![(
            403,
            "W-MCPSERVE-010 Host `attacker.example:80` is not this server's (DNS rebinding)"
                .to_owned()
        )]
    );
    // The control: the same request with the check switched off (debug builds only) is served.
    let mut open = serving(false);
    open.extra_env
        .push(("WARRANT_TEST_DISABLE".into(), "rebinding".into()));
    assert_eq!(rebound(&open), 200);
    assert_eq!(refusals(&open), vec![]);
}

#[test]
fn serving_http_needs_a_token_and_a_loopback_address_unless_told() {
    let sb = Sandbox::init();
    let out = sb.run(&["mcp", "serve", "--http", "127.0.0.1:0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        super::harness::stderr(&out).contains("error[W-MCPSERVE-002]"),
        "{}",
        super::harness::stderr(&out)
    );
    let out = sb.run(&["mcp", "serve", "--http", "0.0.0.0:0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        super::harness::stderr(&out).contains("error[W-MCPSERVE-009]"),
        "{}",
        super::harness::stderr(&out)
    );
    configure(
        &sb,
        "[mcp.serve]\ntools = [\"read_file\", \"no_such_tool\"]\n",
    );
    let out = sb.run_stdin(&["mcp", "serve"], "");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        super::harness::stderr(&out).contains("error[W-MCPSERVE-001]"),
        "{}",
        super::harness::stderr(&out)
    );
}

/// A loopback proxy that adds `Authorization: <auth>` to every request it forwards to
/// `upstream`: for peers (the conformance runner) that cannot send a header of their own.
/// Requests are framed by `Content-Length` (what the runner's HTTP client sends); responses
/// are copied as they come, so streams stay streams.
fn authorizing_proxy(upstream: String, auth: String) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let upstream = upstream.clone();
            let auth = auth.clone();
            std::thread::spawn(move || {
                let Ok(server) = TcpStream::connect(&upstream) else {
                    return;
                };
                let (Ok(mut back_from), Ok(mut back_to)) = (server.try_clone(), client.try_clone())
                else {
                    return;
                };
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut back_from, &mut back_to);
                    let _ = back_to.shutdown(std::net::Shutdown::Both);
                });
                let mut reader = std::io::BufReader::new(client);
                let mut to = server;
                loop {
                    let mut head = Vec::new();
                    loop {
                        let mut line = Vec::new();
                        match std::io::BufRead::read_until(&mut reader, b'\n', &mut line) {
                            Ok(0) | Err(_) => {
                                let _ = to.shutdown(std::net::Shutdown::Write);
                                return;
                            }
                            Ok(_) => {}
                        }
                        let end = line == b"\r\n";
                        if head.is_empty() {
                            head.extend_from_slice(&line);
                            head.extend_from_slice(format!("Authorization: {auth}\r\n").as_bytes());
                        } else if !String::from_utf8_lossy(&line)
                            .to_ascii_lowercase()
                            .starts_with("authorization:")
                        {
                            head.extend_from_slice(&line);
                        }
                        if end {
                            break;
                        }
                    }
                    let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
                    let length: usize = text
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    let mut body = vec![0u8; length];
                    if reader.read_exact(&mut body).is_err()
                        || to.write_all(&head).is_err()
                        || to.write_all(&body).is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    addr
}

pub(super) fn conformance_runner() -> PathBuf {
    static READY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    READY
        .get_or_init(|| {
            let dir = peers_dir().join("conformance");
            let bin = dir.join("node_modules/.bin/conformance");
            let version = || {
                std::process::Command::new(&bin)
                    .arg("--version")
                    .output()
                    .ok()
                    .filter(|o| o.status.success())
                    .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            };
            if version().as_deref() == Some(CONFORMANCE_VERSION) {
                return bin;
            }
            eprintln!("the MCP conformance test needs @modelcontextprotocol/conformance@{CONFORMANCE_VERSION}: installing it with npm into {}", dir.display());
            std::fs::create_dir_all(&dir).unwrap();
            let out = std::process::Command::new("npm")
                .args(["install", "--silent", "--no-audit", "--no-fund"])
                .arg(format!("@modelcontextprotocol/conformance@{CONFORMANCE_VERSION}"))
                .current_dir(&dir)
                .output()
                .unwrap();
            assert!(
                out.status.success() && version().as_deref() == Some(CONFORMANCE_VERSION),
                "could not install the conformance runner: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            bin
        })
        .clone()
}

/// The newest runner that works on Node 20.
const CONFORMANCE_VERSION: &str = "0.1.13";

/// The official conformance runner's server scenarios against `warrant mcp serve` over HTTP
/// (through a proxy that adds the bearer token the runner cannot send). The runner fails on a
/// scenario that fails and is not in the baseline, and on a baseline entry that now passes.
#[test]
fn the_conformance_runners_server_scenarios_pass_but_for_the_baseline() {
    let runner = conformance_runner();
    let sb = serving(false);
    let server = HttpServer::start(&sb);
    let proxy = authorizing_proxy(server.addr.clone(), "Bearer mcp-ci-7f3a9c2e51d04b8a".into());
    let baseline =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/peers/conformance-baseline.yml");
    let results = sb.dir.path().join("conformance");
    let out = std::process::Command::new(runner)
        .args([
            "server",
            "--url",
            &format!("http://127.0.0.1:{}/mcp", proxy.rsplit(':').next().unwrap()),
        ])
        .arg("--expected-failures")
        .arg(&baseline)
        .arg("-o")
        .arg(&results)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        out.status.code(),
        Some(0),
        "the conformance runner's verdict:\n{text}"
    );
}

/// Every byte of the store: `store.db` and its WAL (the last close does not checkpoint it).
fn store_bytes(sb: &Sandbox) -> Vec<u8> {
    let mut bytes = std::fs::read(sb.ws.join(".warrant/store.db")).unwrap();
    if let Ok(wal) = std::fs::read(sb.ws.join(".warrant/store.db-wal")) {
        bytes.extend(wal);
    }
    bytes
}
