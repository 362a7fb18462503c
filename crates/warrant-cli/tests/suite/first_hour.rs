//! The first hour (issue 21): from a workspace with no `.warrant/` to a governed run against a
//! local OpenAI-compatible endpoint with only `get-started`, `configure` and `run`; the key
//! stored as a credential and never written in clear; every bad input refused with nothing
//! half-written; `credentials`, `config check`, `providers`.

use std::sync::{Arc, Mutex};
use std::thread;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::harness::{Sandbox, kinds, stderr, stdout};

pub(super) const KEY: &str = "sk-first-hour-key-0123456789abcdef";

/// One request the fake endpoint saw.
#[derive(Clone, Debug)]
pub(super) struct Seen {
    pub(super) method: String,
    pub(super) path: String,
    pub(super) authorization: Option<String>,
    pub(super) body: Value,
}

pub(super) fn completion(message: Value) -> String {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-test",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    })
    .to_string()
}

/// A local endpoint speaking the OpenAI wire format: `GET /v1/models` lists `gpt-test` and
/// `gpt-other`; `POST /v1/chat/completions` answers with `answers` in order. A request without
/// `Bearer KEY` gets 401, as the real API does. Runs until the test process ends.
pub(super) fn endpoint(answers: Vec<String>) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", server.server_addr().to_ip().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    thread::spawn(move || {
        let mut answers = answers.into_iter();
        for mut req in server.incoming_requests() {
            let mut text = String::new();
            req.as_reader().read_to_string(&mut text).unwrap();
            let authorization = req
                .headers()
                .iter()
                .find(|h| h.field.equiv("Authorization"))
                .map(|h| h.value.as_str().to_owned());
            let path = req.url().to_owned();
            log.lock().unwrap().push(Seen {
                method: req.method().as_str().to_owned(),
                path: path.clone(),
                authorization: authorization.clone(),
                body: serde_json::from_str(&text).unwrap_or(Value::Null),
            });
            let json = tiny_http::Header::from_bytes("Content-Type", "application/json").unwrap();
            let (status, body) = if authorization.as_deref() != Some(&format!("Bearer {KEY}")) {
                (
                    401,
                    json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}}).to_string(),
                )
            } else if path == "/v1/models" {
                (
                    200,
                    json!({"object": "list", "data": [
                        {"id": "gpt-test", "object": "model", "owned_by": "test"},
                        {"id": "gpt-other", "object": "model", "owned_by": "test"}
                    ]})
                    .to_string(),
                )
            } else if path == "/v1/chat/completions" {
                (
                    200,
                    answers.next().unwrap_or_else(|| {
                        completion(json!({"role": "assistant", "content": "OK"}))
                    }),
                )
            } else {
                (404, json!({"error": {"message": "not found"}}).to_string())
            };
            let _ = req.respond(
                tiny_http::Response::from_string(body)
                    .with_status_code(status)
                    .with_header(json),
            );
        }
    });
    (url, seen)
}

/// A server that answers every request with an HTML page (not an OpenAI endpoint).
fn not_openai() -> String {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", server.server_addr().to_ip().unwrap());
    thread::spawn(move || {
        for req in server.incoming_requests() {
            let html = tiny_http::Header::from_bytes("Content-Type", "text/html").unwrap();
            let _ = req.respond(
                tiny_http::Response::from_string("<html><body>Welcome to nginx!</body></html>")
                    .with_header(html),
            );
        }
    });
    url
}

/// Every file under `dir`, with its bytes.
fn files(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else if let Ok(b) = std::fs::read(&p) {
            out.push((p, b));
        }
    }
    out
}

fn holds_key(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    files(dir)
        .into_iter()
        .filter(|(_, b)| b.windows(KEY.len()).any(|w| w == KEY.as_bytes()))
        .map(|(p, _)| p)
        .collect()
}

pub(super) fn configure(sb: &Sandbox, url: &str, model: &str, key: &str) -> std::process::Output {
    sb.run_stdin(
        &[
            "configure",
            "provider",
            "--kind",
            "openai",
            "--base-url",
            url,
            "--key-from-stdin",
            "--model",
            model,
        ],
        &format!("{key}\n"),
    )
}

#[test]
fn configure_by_flags_then_run_uses_the_stored_credential_and_writes_no_key() {
    let sb = Sandbox::new();
    assert!(!sb.exists(".warrant"));
    let (url, seen) = endpoint(vec![
        completion(json!({"role": "assistant", "content": "OK"})),
        completion(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"README.md\"}"}}
        ]})),
        completion(json!({"role": "assistant", "content": "README read."})),
    ]);
    let out = configure(&sb, &url, "gpt-test", KEY);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("initialized .warrant/"),
        "{}",
        stdout(&out)
    );
    let config = std::fs::read_to_string(sb.ws.join(".warrant/config.toml")).unwrap();
    assert!(config.contains("model = \"openai:gpt-test\""), "{config}");
    assert!(
        config.contains("api_key = \"cred:openai-api-key\""),
        "{config}"
    );
    assert_eq!(holds_key(&sb.ws), Vec::<std::path::PathBuf>::new());
    // Discovery, then one call, before anything was written.
    let probes: Vec<(String, String)> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|s| (s.method.clone(), s.path.clone()))
        .collect();
    assert_eq!(
        probes,
        vec![
            ("GET".to_owned(), "/v1/models".to_owned()),
            ("POST".to_owned(), "/v1/chat/completions".to_owned())
        ]
    );

    let out = sb.run(&["run", "read the readme"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 4);
    assert!(
        seen[2..]
            .iter()
            .all(|s| s.authorization.as_deref() == Some(&format!("Bearer {KEY}") as &str))
    );
    assert_eq!(seen[2].body["model"], "gpt-test");
    let (_, events) = sb.last_run();
    let k = kinds(&events);
    assert!(k.contains(&"effect_completed".to_owned()), "{k:?}");
    assert_eq!(k.last().unwrap(), "run_ended");
    assert_eq!(holds_key(&sb.ws), Vec::<std::path::PathBuf>::new());

    // get-started now shows the provider answering, from a probe made now.
    let ready = sb.json(&["get-started", "--json"]);
    let provider = ready["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["area"] == "provider")
        .unwrap()
        .clone();
    assert_eq!(provider["state"], "ready", "{provider}");
    assert!(
        provider["evidence"]
            .as_str()
            .unwrap()
            .contains("answers and offers gpt-test"),
        "{provider}"
    );
}

#[test]
fn bad_endpoints_keys_and_models_are_refused_with_nothing_written() {
    let sb = Sandbox::new();
    let (url, _) = endpoint(Vec::new());
    let html = not_openai();
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        drop(l);
        format!("http://{a}/v1")
    };
    let cases: Vec<(&str, String, &str, &str)> = vec![
        ("wrong key", url.clone(), "gpt-test", "W-SETUP-003"),
        ("unknown model", url.clone(), "gpt-nope", "W-SETUP-005"),
        ("not OpenAI", html, "gpt-test", "W-SETUP-004"),
        ("unreachable", dead, "gpt-test", "W-SETUP-002"),
    ];
    for (what, base, model, code) in cases {
        let key = if what == "wrong key" {
            "sk-wrong-key-000"
        } else {
            KEY
        };
        let out = configure(&sb, &base, model, key);
        assert_eq!(out.status.code(), Some(2), "{what}: {}", stderr(&out));
        assert!(
            stderr(&out).starts_with(&format!("error[{code}]")),
            "{what}: {}",
            stderr(&out)
        );
        assert!(!stderr(&out).contains("sk-wrong-key-000"), "{what}");
        assert!(!sb.exists(".warrant"), "{what}: nothing is written");
    }
    let out = configure(&sb, &url, "gpt-nope", KEY);
    assert!(
        stderr(&out).contains("it offers: gpt-other, gpt-test"),
        "{}",
        stderr(&out)
    );

    // In an installed workspace a refused change leaves the file as it was.
    let sb = Sandbox::init();
    let before = std::fs::read(sb.ws.join(".warrant/config.toml")).unwrap();
    let out = configure(&sb, &url, "gpt-test", "sk-wrong-key-000");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        std::fs::read(sb.ws.join(".warrant/config.toml")).unwrap(),
        before
    );
    assert!(!sb.exists(".warrant/credentials.json"));
}

#[test]
fn credentials_are_listed_checked_and_deleted_without_their_values() {
    let sb = Sandbox::init();
    let out = sb.run_stdin(&["credentials", "set", "sink-token"], "tok-very-secret-1\n");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = sb.run_stdin(&["credentials", "set", "bad name"], "x\n");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with("error[W-CRED-001]"),
        "{}",
        stderr(&out)
    );
    let out = sb.run_stdin(&["credentials", "set", "empty"], "\n");
    assert!(
        stderr(&out).starts_with("error[W-CRED-003]"),
        "{}",
        stderr(&out)
    );

    // A reference to a stored credential and one to a missing one.
    let config = sb.ws.join(".warrant/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[providers.anthropic]\napi_key = \"cred:missing-one\"\n");
    std::fs::write(&config, text).unwrap();

    let list = sb.json(&["credentials", "list", "--json"]);
    let rows = list["credentials"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["name"], "sink-token");
    assert_eq!(rows[0]["stored_in"], "encrypted vault");
    assert!(rows[0]["set_at"].is_string());
    assert!(!list.to_string().contains("tok-very-secret-1"));
    assert!(holds_key_text(&sb, "tok-very-secret-1").is_empty());

    let out = sb.run(&["credentials", "check", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let check: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(check["stored"][0]["ok"], true);
    assert_eq!(
        check["references"][0]["setting"],
        "providers.anthropic.api_key"
    );
    assert!(
        check["references"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("W-CRED-004"),
        "{check}"
    );

    let out = sb.run(&["credentials", "delete", "sink-token"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = sb.run(&["credentials", "delete", "sink-token"]);
    assert!(
        stderr(&out).starts_with("error[W-CRED-002]"),
        "{}",
        stderr(&out)
    );
}

fn holds_key_text(sb: &Sandbox, value: &str) -> Vec<std::path::PathBuf> {
    files(&sb.ws)
        .into_iter()
        .filter(|(_, b)| b.windows(value.len()).any(|w| w == value.as_bytes()))
        .map(|(p, _)| p)
        .collect()
}

#[test]
fn config_check_reports_coded_findings_with_layer_and_line() {
    let sb = Sandbox::init();
    std::fs::write(sb.managed.join("config.toml"), "[run]\nmax_turns = 10\n").unwrap();
    let config = sb.ws.join(".warrant/config.toml");
    let mut text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("max_denials = 3\n", "max_denials = 3\nmax_turns = 99\n");
    text.push_str("\n[budgets.run]\ncost_usd = 1.0\n");
    std::fs::write(&config, &text).unwrap();
    let line_of = |needle: &str| text.lines().position(|l| l.trim() == needle).unwrap() + 1;
    let out = sb.run(&["config", "check", "--json"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{report}");
    let found: Vec<(String, String, Option<u64>)> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["code"].as_str().unwrap().to_owned(),
                f["layer"].as_str().unwrap().to_owned(),
                f["line"].as_u64(),
            )
        })
        .collect();
    assert!(
        found.contains(&(
            "W-CONFIG-031".into(),
            "project".into(),
            Some(line_of("max_turns = 99") as u64)
        )),
        "{found:?}"
    );
    assert!(
        found.contains(&(
            "W-CONFIG-032".into(),
            "project".into(),
            Some(line_of("cost_usd = 1.0") as u64)
        )),
        "{found:?}"
    );

    // An unknown key: the file does not load, and the finding names its line.
    std::fs::write(&config, "[run]\nmax_turns = 5\nmax_turnz = 6\n").unwrap();
    let report = sb.run(&["config", "check", "--json"]);
    let report: Value = serde_json::from_slice(&report.stdout).unwrap();
    let unknown = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "W-CONFIG-030")
        .unwrap_or_else(|| panic!("{report}"))
        .clone();
    assert_eq!(unknown["line"], 3, "{unknown}");
    assert_eq!(unknown["layer"], "project");
}

#[test]
fn a_managed_file_changed_after_pinning_refuses_to_start() {
    let mut sb = Sandbox::init();
    std::fs::write(sb.managed.join("config.toml"), "[run]\nmax_turns = 10\n").unwrap();
    let digest = {
        let out = std::process::Command::new("sha256sum")
            .arg(sb.managed.join("config.toml"))
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()[..64].to_owned()
    };
    sb.extra_env.push(("WARRANT_MANAGED_SHA256".into(), digest));
    // Pinned and unchanged: it starts (the control).
    let out = sb.run(&["whoami"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    std::fs::write(sb.managed.join("config.toml"), "[run]\nmax_turns = 500\n").unwrap();
    for args in [&["whoami"][..], &["runs", "list"][..], &["doctor"][..]] {
        let out = sb.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&out).starts_with("error[W-CONFIG-037]"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn providers_request_shows_the_redacted_body_and_sends_nothing() {
    let sb = Sandbox::new();
    let (url, seen) = endpoint(Vec::new());
    let out = configure(&sb, &url, "gpt-test", KEY);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let before = seen.lock().unwrap().len();
    let aws = "ghp_8f3KqL0vX2mB9nR4tY7wZ1cD6hJ5sP3aE2gU";
    let out = sb.run(&[
        "providers",
        "request",
        &format!("summarise the readme; my token is {aws}"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let preview: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(seen.lock().unwrap().len(), before, "nothing was sent");
    assert_eq!(preview["url"], format!("{url}/chat/completions"));
    assert_eq!(preview["body"]["model"], "gpt-test");
    assert_eq!(preview["body"]["messages"][0]["role"], "system");
    let user = preview["body"]["messages"][1]["content"].as_str().unwrap();
    assert!(user.starts_with("summarise the readme"), "{user}");
    assert!(!out.stdout.windows(aws.len()).any(|w| w == aws.as_bytes()));
    assert!(!String::from_utf8_lossy(&out.stdout).contains(KEY));
    assert_eq!(preview["sent"], false);

    let list = sb.json(&["providers", "list", "--json"]);
    assert_eq!(list["model"], "openai:gpt-test");
    assert_eq!(list["providers"][0]["key_source"], "cred:openai-api-key");
    assert_eq!(list["providers"][0]["key_present"], true);
    let check = sb.json(&["providers", "check", "--json"]);
    assert_eq!(check["ok"], true, "{check}");
}

/// The "done when": a person at a terminal, a workspace with no `.warrant/`, and only
/// `get-started`, `configure` (the wizard) and `run`.
#[test]
fn from_nothing_to_a_governed_run_on_a_terminal() {
    let sb = Sandbox::new();
    let (url, seen) = endpoint(vec![
        completion(json!({"role": "assistant", "content": "OK"})),
        completion(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"README.md\"}"}}
        ]})),
        completion(json!({"role": "assistant", "content": "The README describes Lighthouse."})),
    ]);

    let screen = sb.converse_on_screen(&["get-started"], &[], 100);
    assert_eq!(screen.exit, 1);
    let text = screen.lines.join("\n");
    assert!(text.contains("missing  workspace"), "{text}");
    assert!(text.contains("next: warrant configure"), "{text}");

    let screen = sb.converse_on_screen(
        &["configure"],
        &[
            ("Provider (openai, anthropic, ollama) [openai]: ", "\n"),
            ("Base URL [", &format!("{url}\n")),
            ("API key (not shown): ", &format!("{KEY}\n")),
            ("Model (number or name) [gpt-other]: ", "2\n"),
            (
                "Write it to the project or your user configuration [project]: ",
                "\n",
            ),
        ],
        120,
    );
    let text = screen.lines.join("\n");
    assert_eq!(screen.exit, 0, "{text}");
    assert!(text.contains("  2. gpt-test"), "{text}");
    assert!(!text.contains(KEY), "the key is not echoed: {text}");
    assert!(
        text.contains("wrote [providers] model = \"openai:gpt-test\""),
        "{text}"
    );
    assert_eq!(holds_key(&sb.ws), Vec::<std::path::PathBuf>::new());

    let screen = sb.converse_on_screen(&["run", "what does the readme say?"], &[], 120);
    let text = screen.lines.join("\n");
    assert_eq!(screen.exit, 0, "{text}");
    assert!(text.contains("read_file"), "{text}");
    let (_, events) = sb.last_run();
    assert_eq!(kinds(&events).last().unwrap(), "run_ended");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen.iter()
            .filter(|s| s.path == "/v1/chat/completions")
            .count(),
        3
    );
    assert_eq!(holds_key(&sb.ws), Vec::<std::path::PathBuf>::new());
}

/// What a receiver saw: (authorization, body) of each POST.
type Posts = Arc<Mutex<Vec<(Option<String>, String)>>>;

/// A receiver that answers `status` to every POST and records what it got.
fn receiver(status: u16) -> (String, Posts) {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let url = format!("http://{}/ingest", server.server_addr().to_ip().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    thread::spawn(move || {
        for mut req in server.incoming_requests() {
            let mut text = String::new();
            req.as_reader().read_to_string(&mut text).unwrap();
            let auth = req
                .headers()
                .iter()
                .find(|h| h.field.equiv("Authorization"))
                .map(|h| h.value.as_str().to_owned());
            log.lock().unwrap().push((auth, text));
            let _ = req.respond(tiny_http::Response::empty(status));
        }
    });
    (url, seen)
}

#[test]
fn an_audit_sink_is_saved_only_after_the_receiver_acknowledged_a_delivery() {
    let sb = Sandbox::init();
    let out = sb.run(&[
        "run",
        "--model",
        &sb.quickstart_model(),
        "--prompt",
        "never",
        "tour",
    ]);
    assert!(out.status.code().is_some());
    let out = sb.run_stdin(
        &["credentials", "set", "siem-token"],
        "Bearer siem-secret-77\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let config = sb.ws.join(".warrant/config.toml");
    let before = std::fs::read(&config).unwrap();

    // A receiver that refuses: nothing is written.
    let (bad, _) = receiver(500);
    let out = sb.run(&[
        "configure",
        "sink",
        "--name",
        "siem",
        "--url",
        &bad,
        "--header",
        "Authorization=cred:siem-token",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("error[W-SETUP-016]"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read(&config).unwrap(), before);
    // A literal token is refused before anything is sent.
    let out = sb.run(&[
        "configure",
        "sink",
        "--name",
        "siem",
        "--url",
        &bad,
        "--header",
        "Authorization=Bearer literal",
    ]);
    assert!(
        stderr(&out).starts_with("error[W-SETUP-015]"),
        "{}",
        stderr(&out)
    );

    let (good, seen) = receiver(200);
    let out = sb.run(&[
        "configure",
        "sink",
        "--name",
        "siem",
        "--url",
        &good,
        "--header",
        "Authorization=cred:siem-token",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let done: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        done["checked"].as_str().unwrap().contains("acknowledged"),
        "{done}"
    );
    let posts = seen.lock().unwrap().clone();
    assert!(!posts.is_empty());
    assert_eq!(posts[0].0.as_deref(), Some("Bearer siem-secret-77"));
    assert!(posts[0].1.starts_with('['), "a CloudEvents batch");
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(
        text.contains("Authorization = \"cred:siem-token\""),
        "{text}"
    );
    assert!(!text.contains("siem-secret-77"));
    // Delivered records are acknowledged, so the sink is healthy and nothing is resent.
    let n = posts.len();
    let out = sb.run(&["audit", "flush"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(seen.lock().unwrap().len(), n);
}

#[test]
fn identity_and_approvals_are_written_only_when_they_load() {
    let sb = Sandbox::init();
    let done = sb.json(&[
        "configure",
        "identity",
        "--tenant",
        "harbour",
        "--team",
        "platform",
        "--json",
    ]);
    assert!(
        done["checked"].as_str().unwrap().contains("tenant harbour"),
        "{done}"
    );
    let text = std::fs::read_to_string(sb.ws.join(".warrant/config.toml")).unwrap();
    assert!(text.contains("teams = [\"platform\"]"), "{text}");

    // A field the managed layer locks is refused, and the file is left alone.
    std::fs::write(
        sb.managed.join("config.toml"),
        "[identity]\ntenant = \"harbour\"\nlocked = [\"tenant\"]\n",
    )
    .unwrap();
    let before = std::fs::read(sb.ws.join(".warrant/config.toml")).unwrap();
    let out = sb.run(&["configure", "identity", "--tenant", "elsewhere"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with("error[W-CONFIG-004]"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read(sb.ws.join(".warrant/config.toml")).unwrap(),
        before
    );

    let done = sb.json(&[
        "configure",
        "approvals",
        "--four-eyes",
        "destructive",
        "--expiry",
        "15m",
        "--json",
    ]);
    let wrote: Vec<&str> = done["wrote"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(
        wrote,
        vec![
            "risk.destructive.four_eyes = true",
            "risk.destructive.expiry = \"15m\"",
            "risk.secret.expiry = \"15m\"",
            "risk.irreversible.expiry = \"15m\"",
        ]
    );
    let out = sb.run(&["configure", "approvals", "--expiry", "soon"]);
    assert!(
        stderr(&out).starts_with("error[W-SETUP-014]"),
        "{}",
        stderr(&out)
    );
}

/// A stored credential is a known secret: a tool result holding its value reaches neither the
/// model nor the journal in clear. The control: the same file with a value that is not stored
/// (and matches no scanner rule) comes through as it is.
#[test]
fn a_stored_credentials_value_is_redacted_from_what_a_tool_returns() {
    let sb = Sandbox::init();
    let value = "plainvalue-7f3k2m9q4w8e";
    let other = "plainvalue-1a2b3c4d5e6f";
    let out = sb.run_stdin(&["credentials", "set", "team-token"], &format!("{value}\n"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    sb.write(
        "notes/leak.txt",
        &format!("token: {value}\nother: {other}\n"),
    );
    let model = sb.transcript(
        "version: 1\nturns:\n  - calls:\n      - tool: read_file\n        args: { path: notes/leak.txt }\n  - say: done\n",
    );
    let out = sb.run(&["run", "--model", &model, "read it"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (_, events) = sb.last_run();
    let all = serde_json::to_string(&events).unwrap();
    assert!(
        !all.contains(value),
        "the credential's value is not in the run"
    );
    assert!(
        all.contains(other),
        "the control value comes through: {all}"
    );
    let trail = std::fs::read_to_string(sb.ws.join(".warrant/audit/audit.jsonl")).unwrap();
    assert!(!trail.contains(value));
}
