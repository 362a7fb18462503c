//! Requests the agent raises of a person: a question, a secret, a resource. Each parks the
//! run (exit 10), is answered, declined or expires from the CLI, and the agent sees the
//! outcome when the run continues. A provided secret never appears anywhere but the
//! encrypted vault: every byte written during the test is searched for it.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::harness::{Sandbox, kinds, parked_request, stderr, stdout};

fn completion(message: Value) -> String {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1_700_000_000, "model": "gpt-test",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    })
    .to_string()
}

fn call(id: &str, name: &str, args: Value) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}})
}

/// A local chat-completions server: answers with `bodies` in order and keeps every request's
/// raw bytes.
type Captured = Arc<Mutex<Vec<Vec<u8>>>>;

fn serve(bodies: Vec<String>) -> (String, Captured, thread::JoinHandle<()>) {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", server.server_addr().to_ip().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let handle = thread::spawn(move || {
        for body in bodies {
            let mut req = server.recv().unwrap();
            let mut raw = Vec::new();
            req.as_reader().read_to_end(&mut raw).unwrap();
            log.lock().unwrap().push(raw);
            let header = tiny_http::Header::from_bytes("Content-Type", "application/json").unwrap();
            req.respond(tiny_http::Response::from_string(body).with_header(header))
                .unwrap();
        }
    });
    (url, seen, handle)
}

fn openai(sb: &mut Sandbox, url: String) {
    sb.extra_env.push(("OPENAI_BASE_URL".into(), url));
    sb.extra_env
        .push(("OPENAI_API_KEY".into(), "sk-test-key".into()));
}

/// The tool message the model was sent for `call_id` in the last captured request.
fn tool_message(raw: &[u8], call_id: &str) -> Value {
    let body: Value = serde_json::from_slice(raw).unwrap();
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .map(|m| {
            // Every result reaches the model fenced as untrusted content: the JSON sits
            // between the opening tag's line and the closing tag's line.
            let content = m["content"].as_str().unwrap();
            assert!(content.starts_with("<untrusted source="), "{content}");
            let inner = content
                .split_once('\n')
                .and_then(|(_, rest)| rest.rsplit_once('\n'))
                .map(|(json, _)| json)
                .unwrap();
            serde_json::from_str(inner).unwrap()
        })
        .unwrap_or_else(|| panic!("no tool message for {call_id}"))
}

fn payload_of<'a>(events: &'a [Value], kind: &str) -> &'a Value {
    &events
        .iter()
        .find(|e| e["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} event"))["payload"]
}

#[test]
fn a_question_parks_the_run_and_the_model_sees_the_chosen_option() {
    let mut sb = Sandbox::init();
    let (url, seen, handle) = serve(vec![
        completion(
            json!({"role": "assistant", "content": null, "tool_calls": [call("call_q", "ask_question", json!({"question": "Which colour?", "options": ["red", "blue"]}))]}),
        ),
        completion(json!({"role": "assistant", "content": "Blue it is."})),
    ]);
    openai(&mut sb, url);
    let out = sb.run(&["run", "--model", "openai:gpt-test", "paint it"]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let req = parked_request(&out);
    assert!(
        stdout(&out).contains(&format!("warrant requests answer {req}")),
        "{}",
        stdout(&out)
    );

    // It is asked of me: listed with --mine.
    let mine = sb.json(&["requests", "list", "--mine", "--json"]);
    let listed = &mine["requests"][0];
    assert_eq!(
        (
            listed["id"].as_str(),
            listed["kind"].as_str(),
            listed["status"].as_str()
        ),
        (Some(req.as_str()), Some("question"), Some("open"))
    );
    assert_eq!(listed["asked_of"], json!(["user:tester", "admins"]));
    // Someone else (not asked, no admin role) does not see it with --mine.
    let other = sb
        .cmd(&["requests", "list", "--mine", "--json"])
        .env("WARRANT_ACTOR", "zoe")
        .output()
        .unwrap();
    let other: Value = serde_json::from_slice(&other.stdout).unwrap();
    assert_eq!(other["requests"], json!([]));

    // Resuming before anyone answered changes nothing: still parked, nothing appended.
    let (run, before) = sb.last_run();
    let early = sb.run(&["resume", &run]);
    assert_eq!(early.status.code(), Some(10), "{}", stderr(&early));
    assert!(stdout(&early).contains("still waiting for request"));
    assert_eq!(sb.last_run().1.len(), before.len());

    // Bad answers are refused with a specific reason; approving it is the wrong command.
    let bad = sb.run(&["requests", "answer", &req, "--option", "3"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("W-REQUEST-002"), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("1. red, 2. blue"), "{}", stderr(&bad));
    let wrong = sb.run(&["approve", &req]);
    assert!(
        stderr(&wrong).contains("W-REQUEST-001"),
        "{}",
        stderr(&wrong)
    );
    let provide = sb.run_stdin(&["requests", "provide", &req], "x\n");
    assert!(
        stderr(&provide).contains("W-REQUEST-001"),
        "{}",
        stderr(&provide)
    );

    let ok = sb.run(&["requests", "answer", &req, "--option", "2"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let again = sb.run(&["requests", "answer", &req, "--text", "red"]);
    assert!(
        stderr(&again).contains("W-REQUEST-004"),
        "{}",
        stderr(&again)
    );

    let (run, _) = sb.last_run();
    let resumed = sb.run(&["resume", &run]);
    handle.join().unwrap();
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    let raw = seen.lock().unwrap().clone();
    assert_eq!(raw.len(), 2);
    let seen_by_model = tool_message(&raw[1], "call_q");
    assert_eq!(
        seen_by_model,
        json!({"request": req, "answer": "blue", "option": 2, "answered_by": "tester"})
    );
    let (_, events) = sb.last_run();
    let k = kinds(&events);
    assert!(
        k.starts_with(&[
            "run_started".into(),
            "model_responded".into(),
            "request_raised".into(),
            "run_parked".into(),
            "request_replied".into(),
            "run_resumed".into(),
        ]),
        "{k:?}"
    );
    assert_eq!(
        payload_of(&events, "request_replied")["by"],
        json!({"tenant": "harbour", "actor": "tester", "via": "cli"})
    );
    // The audit trail records the reply, and the chain verifies.
    let tail = stdout(&sb.run(&["audit", "tail", "-n", "50", "--json"]));
    assert!(tail.contains("request_replied"), "{tail}");
    assert_eq!(sb.run(&["audit", "verify"]).status.code(), Some(0));
}

#[test]
fn a_declined_request_tells_the_agent_why_and_the_run_goes_on() {
    let sb = Sandbox::init();
    let model = sb.transcript(
        "version: 1\nturns:\n  - calls:\n      - tool: request_resource\n        args: { kind: endpoint, name: billing, url: \"http://127.0.0.1:9/api\" }\n  - say: ok\n",
    );
    let out = sb.run(&["run", "--model", &model, "bill"]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let req = parked_request(&out);
    // An agent can never answer, whatever it claims.
    let agent = sb
        .cmd(&[
            "requests",
            "decline",
            &req,
            "--reason",
            "I decline for them",
        ])
        .env("WARRANT_KIND", "agent")
        .output()
        .unwrap();
    assert_eq!(agent.status.code(), Some(2));
    assert!(
        stderr(&agent).contains("W-REQUEST-005"),
        "{}",
        stderr(&agent)
    );
    let empty = sb.run(&["requests", "decline", &req, "--reason", "  "]);
    assert_eq!(empty.status.code(), Some(2));
    let declined = sb.run(&[
        "requests",
        "decline",
        &req,
        "--reason",
        "use the sandbox API",
    ]);
    assert_eq!(declined.status.code(), Some(0), "{}", stderr(&declined));
    let (run, _) = sb.last_run();
    let resumed = sb.run(&["resume", &run]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    let shown = sb.json(&["requests", "show", &req, "--json"]);
    assert_eq!(shown["status"], "declined");
    assert_eq!(
        shown["reply"]["reply"],
        json!({"reply": "declined", "reason": "use the sandbox API"})
    );
    let (_, events) = sb.last_run();
    let audit = stdout(&sb.run(&[
        "audit",
        "query",
        "--run",
        &run,
        "--decision",
        "deny",
        "--json",
    ]));
    assert!(audit.contains("use the sandbox API"), "{audit}");
    assert!(kinds(&events).contains(&"run_ended".to_owned()));
}

#[test]
fn an_expired_request_is_answered_as_expired_and_a_late_answer_is_refused() {
    let sb = Sandbox::init();
    sb.write(
        ".warrant/config.toml",
        &(std::fs::read_to_string(sb.ws.join(".warrant/config.toml")).unwrap()
            + "\n[requests]\nquestion_ttl = \"1ms\"\n"),
    );
    let model = sb.transcript(
        "version: 1\nturns:\n  - calls:\n      - tool: ask_question\n        args: { question: \"Ship it?\" }\n  - say: ok\n",
    );
    // Path 1: a person answers too late. The refusal is recorded as the expiry.
    let out = sb.run(&["run", "--model", &model, "ship"]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let req = parked_request(&out);
    thread::sleep(std::time::Duration::from_millis(20));
    let late = sb.run(&["requests", "answer", &req, "--text", "yes"]);
    assert_eq!(late.status.code(), Some(2));
    assert!(stderr(&late).contains("W-REQUEST-003"), "{}", stderr(&late));
    let (run, events) = sb.last_run();
    assert_eq!(kinds(&events).last().unwrap(), "request_expired");
    let resumed = sb.run(&["resume", &run]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));

    // Path 2: nobody answers; the run continues and the agent is told it expired.
    let out = sb.run(&["run", "--model", &model, "ship again"]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    thread::sleep(std::time::Duration::from_millis(20));
    let (run, _) = sb.last_run();
    let resumed = sb.run(&["resume", &run]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    let (_, events) = sb.last_run();
    let k = kinds(&events);
    let expired_at = k.iter().position(|x| x == "request_expired").unwrap();
    assert_eq!(k[expired_at - 1], "run_resumed", "{k:?}");
    // A bad expiry in the configuration is refused before anything starts.
    sb.write(
        ".warrant/config.toml",
        &(std::fs::read_to_string(sb.ws.join(".warrant/config.toml"))
            .unwrap()
            .replace("question_ttl = \"1ms\"", "question_ttl = \"soon\"")),
    );
    let bad = sb.run(&["run", "--model", &model, "ship"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("W-REQUEST-009"), "{}", stderr(&bad));
}

#[test]
fn a_resource_is_connected_only_after_warrant_checked_it() {
    let sb = Sandbox::init();
    // A credentialed endpoint that answers 401 without credentials: it exists.
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let url = format!("http://{}/api", server.server_addr().to_ip().unwrap());
    let h = thread::spawn(move || {
        let req = server.recv().unwrap();
        req.respond(tiny_http::Response::from_string("no").with_status_code(401))
            .unwrap();
    });
    // A closed port: nothing answers.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let model = sb.transcript(&format!(
        "version: 1\nturns:\n  - calls:\n      - tool: request_resource\n        args: {{ kind: endpoint, name: billing, url: \"http://{closed}/api\" }}\n  - calls:\n      - tool: request_resource\n        args: {{ kind: mcp, name: files, command: [\"sh\", \"fake-mcp.sh\"] }}\n  - say: ok\n"
    ));
    sb.write(
        "fake-mcp.sh",
        "read line\necho '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"serverInfo\":{\"name\":\"fake-files\",\"version\":\"0.1\"}}}'\n",
    );
    let out = sb.run(&["run", "--model", &model, "connect"]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let req = parked_request(&out);
    // The agent's proposal is never checked implicitly: that would send its request (or start
    // its command) from this machine outside the ring.
    let implied = sb.run(&["requests", "connect", &req]);
    assert_eq!(implied.status.code(), Some(2));
    assert!(
        stderr(&implied).contains("W-REQUEST-013")
            && stderr(&implied).contains(&closed.to_string()),
        "{}",
        stderr(&implied)
    );
    let refused = sb.run(&[
        "requests",
        "connect",
        &req,
        "--use-proposed",
        "--timeout",
        "5s",
    ]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("W-REQUEST-007"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(
        sb.json(&["requests", "show", &req, "--json"])["status"],
        "open"
    );
    let ok = sb.run(&["requests", "connect", &req, "--url", &url]);
    h.join().unwrap();
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let shown = sb.json(&["requests", "show", &req, "--json"]);
    let check = shown["reply"]["reply"]["check"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(check.contains("answered HTTP 401"), "{check}");

    let (run, _) = sb.last_run();
    let next = sb.run(&["resume", &run]);
    assert_eq!(next.status.code(), Some(10), "{}", stderr(&next));
    let mcp = parked_request(&next);
    // A command that exits without answering is not an MCP server.
    let not = sb.run(&["requests", "connect", &mcp, "--command", "true"]);
    assert!(stderr(&not).contains("W-REQUEST-007"), "{}", stderr(&not));
    // The proposed command does not run unless the person says so: it would leave a mark.
    sb.write(
        "fake-mcp.sh",
        "touch started-by-check\nread line\necho '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"serverInfo\":{\"name\":\"fake-files\",\"version\":\"0.1\"}}}'\n",
    );
    let implied = sb.run(&["requests", "connect", &mcp]);
    assert_eq!(implied.status.code(), Some(2));
    assert!(
        stderr(&implied).contains("W-REQUEST-013") && stderr(&implied).contains("`sh fake-mcp.sh`"),
        "{}",
        stderr(&implied)
    );
    assert!(!sb.exists("started-by-check"), "the proposed command ran");
    // Control: with --use-proposed it is started (and checked).
    let ok = sb.run(&["requests", "connect", &mcp, "--use-proposed"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert!(sb.exists("started-by-check"));
    let check = sb.json(&["requests", "show", &mcp, "--json"])["reply"]["reply"]["check"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(check.contains("server fake-files 0.1"), "{check}");
    let done = sb.run(&["resume", &run]);
    assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
}

/// Every file under `root` holding `needle`, as paths.
fn files_holding(root: &Path, needle: &[u8]) -> Vec<String> {
    let mut hits = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            } else if e.file_type().unwrap().is_file() {
                let bytes = std::fs::read(&p).unwrap();
                if contains(&bytes, needle) {
                    hits.push(p.display().to_string());
                }
            }
        }
    }
    hits
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn a_provided_secret_never_reaches_the_store_the_audit_the_model_or_any_output() {
    let mut sb = Sandbox::init();
    let value = format!(
        "tok-{:x}-never-leaks",
        std::process::id() as u64 * 7919 + 17
    );
    let (url, seen, handle) = serve(vec![
        completion(
            json!({"role": "assistant", "content": null, "tool_calls": [call("call_s", "request_secret", json!({"name": "DEPLOY_TOKEN", "purpose": "deploy the site", "used_by": "run_command deploy.sh"}))]}),
        ),
        completion(json!({"role": "assistant", "content": "Thanks, I have the handle."})),
    ]);
    openai(&mut sb, url);
    let mut outputs: Vec<Vec<u8>> = Vec::new();
    let mut keep = |o: &std::process::Output| {
        outputs.push(o.stdout.clone());
        outputs.push(o.stderr.clone());
    };

    let out = sb.run(&["run", "--model", "openai:gpt-test", "deploy"]);
    keep(&out);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let req = parked_request(&out);
    let (run, _) = sb.last_run();
    // An empty value is refused.
    let empty = sb.run_stdin(&["requests", "provide", &req], "\n");
    keep(&empty);
    assert!(
        stderr(&empty).contains("W-REQUEST-006"),
        "{}",
        stderr(&empty)
    );
    let provided = sb.run_stdin(
        &["requests", "provide", &req, "--json"],
        &format!("{value}\n"),
    );
    keep(&provided);
    assert_eq!(provided.status.code(), Some(0), "{}", stderr(&provided));
    let resumed = sb.run(&["resume", &run, "--json"]);
    keep(&resumed);
    handle.join().unwrap();
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    for args in [
        vec!["runs", "show", run.as_str(), "--json"],
        vec!["runs", "show", run.as_str()],
        vec!["requests", "list", "--all", "--json"],
        vec!["requests", "show", req.as_str(), "--json"],
        vec!["requests", "export"],
        vec!["audit", "tail", "-n", "100", "--json"],
        vec!["audit", "verify"],
        vec!["approvals", "list", "--all", "--json"],
    ] {
        let o = sb.run(&args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        keep(&o);
    }

    // The model saw the handle, never the value.
    let raw = seen.lock().unwrap().clone();
    assert_eq!(raw.len(), 2);
    let told = tool_message(&raw[1], "call_s");
    assert_eq!(told["secret"], "secret:DEPLOY_TOKEN");
    assert_eq!(told["provided_by"], "tester");

    // The value is in the vault, encrypted, and decrypts under the installation secret.
    let secret_hex =
        std::fs::read_to_string(sb.ws.join(".warrant/keys/installation.secret")).unwrap();
    let vault = warrant_exec::vault::Vault::open(
        &sb.ws.join(".warrant"),
        &hex::decode(secret_hex.trim()).unwrap(),
    );
    assert_eq!(
        vault.get("DEPLOY_TOKEN").unwrap().expose(),
        value.as_bytes()
    );

    // Grep every byte written: the whole sandbox (workspace, .warrant with the store, its WAL,
    // the audit sink, keys, vault; the managed and home layers), every output, every request.
    let needle = value.as_bytes();
    let hits = files_holding(sb.dir.path(), needle);
    assert_eq!(hits, Vec::<String>::new());
    let leaked_out = outputs.iter().filter(|o| contains(o, needle)).count();
    assert_eq!(leaked_out, 0);
    assert!(!raw.iter().any(|r| contains(r, needle)));

    // Negative controls: the same search finds a planted copy, and it does read the store
    // (the task text, which is stored in clear, is found in store.db).
    let planted = sb.write(
        ".warrant/audit/planted.jsonl",
        &format!("{{\"x\":\"{value}\"}}"),
    );
    assert_eq!(
        files_holding(sb.dir.path(), needle),
        vec![planted.display().to_string()]
    );
    std::fs::remove_file(&planted).unwrap();
    let stored_in_clear = files_holding(&sb.ws.join(".warrant"), b"deploy the site");
    assert!(
        stored_in_clear.iter().any(|p| p.contains("store.db")),
        "{stored_in_clear:?}"
    );
    let mut with_copy = outputs.clone();
    with_copy.push(format!("leak: {value}").into_bytes());
    assert_eq!(with_copy.iter().filter(|o| contains(o, needle)).count(), 1);
}

#[test]
fn approvals_export_as_aais_documents() {
    let sb = Sandbox::init();
    sb.review_commands();
    let model = sb.transcript(
        "version: 1\nturns:\n  - calls:\n      - tool: run_command\n        args: { argv: [\"touch\", \"made-by-agent\"] }\n  - say: ok\n",
    );
    let out = sb.run(&["run", "--prompt", "never", "--model", &model, "touch"]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let req = parked_request(&out);
    let (run, _) = sb.last_run();

    let docs = |args: &[&str]| -> Vec<Value> {
        let o = sb.run(args);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        stdout(&o)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let pending = docs(&["requests", "export", &req, "--format", "aais"]);
    assert_eq!(pending.len(), 1);
    let r = &pending[0];
    check_envelope(r);
    assert_eq!(r["type"], "approval.requested");
    let request = &r["request"];
    assert_eq!(request["status"], "pending");
    assert_eq!(
        request["origin"],
        json!({"harness": "warrant", "session_id": run, "run_id": run})
    );
    assert_eq!(request["action"]["name"], "run_command");
    assert_eq!(
        request["action"]["arguments"],
        json!({"argv": ["touch", "made-by-agent"]})
    );
    // §5: the digest is SHA-256 over the RFC 8785 form of the action, as sent.
    let jcs = warrant_core::canonical_json(&request["action"]).unwrap();
    assert_eq!(
        request["action_digest"],
        format!("sha256:{}", sha256_hex(jcs.as_bytes()))
    );
    let choices: Vec<(String, String)> = request["choices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["decision"].as_str().unwrap().to_owned(),
                c["scope"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        choices,
        vec![
            ("approve".into(), "once".into()),
            ("approve".into(), "session".into()),
            ("deny".into(), "once".into())
        ]
    );
    for c in request["choices"].as_array().unwrap() {
        if c["scope"] != "once" {
            assert!(
                c["scope_constraints"]
                    .as_object()
                    .is_some_and(|o| !o.is_empty())
            );
        }
    }

    assert_eq!(sb.run(&["approve", &req]).status.code(), Some(0));
    let all = docs(&["requests", "export"]);
    let types: Vec<&str> = all.iter().map(|d| d["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        vec![
            "approval.requested",
            "approval.decided",
            "approval.resolved"
        ]
    );
    let seqs: Vec<u64> = all
        .iter()
        .map(|d| d["sequence"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, vec![0, 1, 2]);
    for d in &all {
        check_envelope(d);
    }
    let decision = &all[1]["decision"];
    assert_eq!(decision["request_id"], json!(req));
    assert_eq!(decision["action_digest"], request["action_digest"]);
    assert_eq!(
        (decision["decision"].as_str(), decision["scope"].as_str()),
        (Some("approve"), Some("once"))
    );
    assert_eq!(decision["actor"]["id"], "tester");
    assert_eq!(decision["actor"]["type"], "human");
    let resolution = &all[2]["resolution"];
    assert_eq!(resolution["outcome"], "approved");
    assert_eq!(resolution["decision_id"], decision["id"]);

    // Requests the agent raised are not AAIS approvals: a clear refusal.
    let model = sb.transcript(
        "version: 1\nturns:\n  - calls:\n      - tool: ask_question\n        args: { question: \"Why?\" }\n",
    );
    let q = sb.run(&["run", "--model", &model, "ask"]);
    let qreq = parked_request(&q);
    let refused = sb.run(&["requests", "export", &qreq]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("W-REQUEST-010"),
        "{}",
        stderr(&refused)
    );
}

fn sha256_hex(bytes: &[u8]) -> String {
    warrant_core::Digest::of_bytes(bytes)
        .as_str()
        .trim_start_matches("sha256:")
        .to_owned()
}

/// The documented requirements of an AAIS 1.0 envelope and its payload (SPEC §3, §4, §6-§8):
/// checked field by field, since the schema file is not vendored (no licence stated).
fn check_envelope(d: &Value) {
    let id_ok = |v: &Value| {
        v.as_str().is_some_and(|s| {
            !s.is_empty()
                && s.len() <= 200
                && s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._:-".contains(c))
        })
    };
    let time_ok = |v: &Value| {
        v.as_str()
            .is_some_and(|s| s.contains('T') && (s.ends_with('Z') || s.contains('+')))
    };
    let digest_ok = |v: &Value| {
        v.as_str().is_some_and(|s| {
            s.strip_prefix("sha256:").is_some_and(|h| {
                h.len() == 64
                    && h.chars()
                        .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
            })
        })
    };
    let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
    assert_eq!(d["aais"], "1.0");
    assert!(
        id_ok(&d["id"]) && time_ok(&d["occurred_at"]) && d["sequence"].is_u64(),
        "{d}"
    );
    assert!(id_ok(&d["stream"]), "{d}");
    let payload = match d["type"].as_str().unwrap() {
        "approval.requested" => "request",
        "approval.decided" => "decision",
        "approval.resolved" => "resolution",
        other => panic!("unexpected type {other}"),
    };
    for k in keys(d) {
        assert!(
            [
                "aais",
                "type",
                "id",
                "occurred_at",
                "sequence",
                "stream",
                "extensions",
                payload
            ]
            .contains(&k.as_str()),
            "unknown top-level field {k}"
        );
    }
    let p = &d[payload];
    match payload {
        "request" => {
            for k in [
                "id",
                "created_at",
                "status",
                "origin",
                "action",
                "action_digest",
                "risk",
                "choices",
            ] {
                assert!(!p[k].is_null(), "request lacks {k}");
            }
            assert!(id_ok(&p["origin"]["harness"]) && id_ok(&p["origin"]["session_id"]));
            for k in ["kind", "name", "summary", "arguments"] {
                assert!(!p["action"][k].is_null(), "action lacks {k}");
            }
            assert!(p["action"]["arguments"].is_object());
            assert!(digest_ok(&p["action_digest"]));
            assert!(
                ["low", "medium", "high", "critical"]
                    .contains(&p["risk"]["level"].as_str().unwrap())
            );
            assert!(!p["risk"]["reasons"].as_array().unwrap().is_empty());
            assert!(
                p["choices"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|c| c["decision"] == "deny" || c["decision"] == "cancel")
            );
            for ext in keys(&p["extensions"]) {
                assert!(
                    ext.starts_with("https://") || (ext.contains('.') && ext.contains('/')),
                    "{ext}"
                );
            }
        }
        "decision" => {
            for k in [
                "id",
                "request_id",
                "action_digest",
                "decided_at",
                "decision",
                "scope",
                "actor",
            ] {
                assert!(!p[k].is_null(), "decision lacks {k}");
            }
            assert!(digest_ok(&p["action_digest"]) && time_ok(&p["decided_at"]));
            assert!(id_ok(&p["actor"]["id"]));
        }
        _ => {
            for k in [
                "id",
                "request_id",
                "action_digest",
                "resolved_at",
                "outcome",
                "message",
            ] {
                assert!(!p[k].is_null(), "resolution lacks {k}");
            }
            assert!(digest_ok(&p["action_digest"]) && time_ok(&p["resolved_at"]));
        }
    }
}

/// Runs `line` (a shell command line) on a real pseudo-terminal (util-linux `script`) and types
/// `typed` only once `prompt` is shown: typed earlier, the terminal would still echo it before
/// the program could switch echo off. Returns whether it succeeded and everything shown.
fn type_at_prompt(sb: &Sandbox, line: &str, prompt: &str, typed: &str) -> (bool, String) {
    use std::io::{Read as _, Write as _};
    let env = sb.std_cmd(&[]);
    let mut cmd = std::process::Command::new("/usr/bin/script");
    cmd.args(["-q", "-e", "-c", line, "/dev/null"])
        .current_dir(&sb.ws)
        .env_clear()
        .envs(
            env.get_envs()
                .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))),
        )
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    let reader = thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = out.read(&mut buf) {
            let _ = tx.send(buf[..n].to_vec());
        }
    });
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains(prompt) {
        let chunk = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no prompt: {}", String::from_utf8_lossy(&seen)));
        seen.extend(chunk);
    }
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(format!("{typed}\n").as_bytes()).unwrap();
    stdin.flush().unwrap();
    let status = child.wait().unwrap();
    drop(stdin);
    reader.join().unwrap();
    seen.extend(rx.try_iter().flatten());
    (
        status.success(),
        String::from_utf8_lossy(&seen).into_owned(),
    )
}

#[test]
fn a_secret_typed_at_a_terminal_is_not_echoed() {
    let sb = Sandbox::init();
    let model = sb.transcript(
        "version: 1\nturns:\n  - calls:\n      - tool: request_secret\n        args: { name: API_KEY, purpose: tests, used_by: \"run_command pytest\" }\n  - say: ok\n",
    );
    let out = sb.run(&["run", "--model", &model, "test"]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let req = parked_request(&out);
    if !Path::new("/usr/bin/script").exists() {
        eprintln!("util-linux `script` is not installed: the terminal case is not exercised here");
        return;
    }
    let typed = "typed-at-the-terminal-42";
    // Negative control: a program that leaves echo on shows what is typed, on the same terminal.
    let (ok, shown) = type_at_prompt(
        &sb,
        "sh -c 'printf \"value (not shown): \"; read x; echo done'",
        "(not shown): ",
        typed,
    );
    assert!(ok && shown.contains(typed), "{shown}");

    let bin = assert_cmd::cargo::cargo_bin("warrant");
    let line = format!("'{}' requests provide {req}", bin.display());
    let (ok, shown) = type_at_prompt(&sb, &line, "(not shown): ", typed);
    assert!(ok, "{shown}");
    assert!(shown.contains("secret provided"), "{shown}");
    assert!(!shown.contains(typed), "{shown}");
    let secret_hex =
        std::fs::read_to_string(sb.ws.join(".warrant/keys/installation.secret")).unwrap();
    let vault = warrant_exec::vault::Vault::open(
        &sb.ws.join(".warrant"),
        &hex::decode(secret_hex.trim()).unwrap(),
    );
    assert_eq!(vault.get("API_KEY").unwrap().expose(), typed.as_bytes());
}

#[test]
fn a_provided_secret_reaches_only_the_command_that_is_configured_to_receive_it() {
    let sb = Sandbox::init();
    sb.review_commands();
    let config = std::fs::read_to_string(sb.ws.join(".warrant/config.toml")).unwrap();
    sb.write(
        ".warrant/config.toml",
        &format!(
            "{config}\n[profiles.deploy]\n\n[secret_env.deploy]\nDEPLOY_TOKEN = \"secret:DEPLOY_TOKEN\"\n"
        ),
    );
    sb.write(
        "check.sh",
        "printf '%s' \"$DEPLOY_TOKEN\" | sha256sum\necho \"token=$DEPLOY_TOKEN\"\n",
    );
    let model = sb.transcript(
        "version: 1\nturns:\n  - calls:\n      - tool: request_secret\n        args: { name: DEPLOY_TOKEN, purpose: deploy, used_by: \"run_command sh check.sh (profile deploy)\" }\n  - calls:\n      - tool: run_command\n        args: { argv: [sh, check.sh], profile: deploy }\n  - calls:\n      - tool: run_command\n        args: { argv: [sh, check.sh] }\n  - say: done\n",
    );
    let value = format!("dt-{}-only-for-deploy", std::process::id());
    let out = sb.run(&["run", "--prompt", "never", "--model", &model, "deploy"]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let req = parked_request(&out);
    let provided = sb.run_stdin(&["requests", "provide", &req], &value);
    assert_eq!(provided.status.code(), Some(0), "{}", stderr(&provided));
    let (run, _) = sb.last_run();
    // Both commands ask a person (this project reviews commands); approve each as it comes.
    let mut shown = Vec::new();
    let mut last = sb.run(&["resume", &run, "--prompt", "never"]);
    while last.status.code() == Some(10) {
        let approval = parked_request(&last);
        shown.push(stdout(&sb.run(&["requests", "show", &approval])));
        assert_eq!(sb.run(&["approve", &approval]).status.code(), Some(0));
        last = sb.run(&["resume", &run, "--prompt", "never"]);
    }
    assert_eq!(last.status.code(), Some(0), "{}", stderr(&last));
    // The person approving saw which secret the command gets (by name).
    assert!(
        shown[0].contains("secrets DEPLOY_TOKEN=secret:DEPLOY_TOKEN"),
        "{}",
        shown[0]
    );
    let (_, events) = sb.last_run();
    let results: Vec<String> = events
        .iter()
        .filter(|e| e["kind"] == "effect_completed")
        .map(|e| e["payload"]["result"].to_string())
        .collect();
    assert_eq!(results.len(), 2, "{results:?}");
    let hash = |b: &[u8]| {
        warrant_core::Digest::of_bytes(b)
            .as_str()
            .trim_start_matches("sha256:")
            .to_owned()
    };
    // Under `deploy` the command had the value (its hash matches) and what it printed of it
    // is redacted; under `default` (the negative control) it had nothing.
    assert!(
        results[0].contains(&hash(value.as_bytes())),
        "{}",
        results[0]
    );
    assert!(
        results[0].contains("token=[secret:DEPLOY_TOKEN]"),
        "{}",
        results[0]
    );
    assert!(results[1].contains(&hash(b"")), "{}", results[1]);
    assert!(!results[1].contains(&hash(value.as_bytes())));
    assert_eq!(
        files_holding(sb.dir.path(), value.as_bytes()),
        Vec::<String>::new()
    );
    for args in [
        vec!["runs", "show", run.as_str(), "--json"],
        vec!["audit", "tail", "-n", "200", "--json"],
    ] {
        assert!(!stdout(&sb.run(&args)).contains(&value));
    }
    // A [secret_env] entry that is not a handle, or names no profile, stops everything.
    for bad in [
        "[secret_env.nope]\nX = \"secret:A\"\n",
        "[secret_env.deploy]\nX = \"plain-value\"\n",
    ] {
        sb.write(
            ".warrant/config.toml",
            &format!("{config}\n[profiles.deploy]\n\n{bad}"),
        );
        let o = sb.run(&["run", "--model", &model, "deploy"]);
        assert_eq!(o.status.code(), Some(2), "{bad}");
        assert!(stderr(&o).contains("W-SECRET-005"), "{}", stderr(&o));
    }
}

#[test]
fn with_an_identity_directory_a_question_goes_to_the_project_team_and_only_they_may_answer() {
    let sb = Sandbox::init();
    std::fs::write(
        sb.managed.join("directory.toml"),
        "admins = [\"root\"]\n[teams.web]\nmembers = [\"carol\"]\n",
    )
    .unwrap();
    let cfg = sb.ws.join(".warrant/config.toml");
    let mut text = std::fs::read_to_string(&cfg).unwrap_or_default();
    text.push_str("\n[approvals]\nteam = \"web\"\n");
    std::fs::write(cfg, text).unwrap();
    let model = sb.transcript(
        "version: 1\nturns:\n  - calls:\n      - tool: ask_question\n        args: { question: \"Which colour?\", options: [red, blue] }\n  - say: done\n",
    );
    let out = sb.run(&["run", "--model", &model, "paint it"]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let req = parked_request(&out);
    let as_actor =
        |actor: &str, args: &[&str]| sb.cmd(args).env("WARRANT_ACTOR", actor).output().unwrap();
    let mine = |actor: &str| -> Value {
        serde_json::from_slice(&as_actor(actor, &["requests", "list", "--mine", "--json"]).stdout)
            .unwrap()
    };

    // Carol is in the project's team only through the directory; she sees it, zoe does not.
    let carol = mine("carol");
    assert_eq!(carol["requests"][0]["id"], json!(req));
    assert_eq!(
        carol["requests"][0]["asked_of"],
        json!(["user:tester", "team:web"])
    );
    assert_eq!(mine("zoe")["requests"], json!([]));

    // Zoe may not answer it: refused with a named code, nothing recorded, still open.
    let before = sb.last_run().1.len();
    let zoe = as_actor("zoe", &["requests", "answer", &req, "--option", "1"]);
    assert_eq!(zoe.status.code(), Some(2), "{}", stderr(&zoe));
    assert!(stderr(&zoe).contains("W-REQUEST-012"), "{}", stderr(&zoe));
    assert_eq!(sb.last_run().1.len(), before);

    // Carol, asked as a member of the team, may; the run then completes.
    let ok = as_actor("carol", &["requests", "answer", &req, "--option", "2"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let (run, events) = sb.last_run();
    let replied = events
        .iter()
        .find(|e| e["kind"] == "request_replied")
        .unwrap();
    assert_eq!(replied["payload"]["by"]["actor"], json!("carol"));
    let done = sb.run(&["resume", &run]);
    assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));

    // Control: without the directory the same zoe is only refused by --mine's view, not as
    // an answerer (anyone who is not an agent may answer).
    let control = Sandbox::init();
    let model = control.transcript(
        "version: 1\nturns:\n  - calls:\n      - tool: ask_question\n        args: { question: \"Which colour?\", options: [red, blue] }\n  - say: done\n",
    );
    let out = control.run(&["run", "--model", &model, "paint it"]);
    let req = parked_request(&out);
    let zoe = control
        .cmd(&["requests", "answer", &req, "--option", "1"])
        .env("WARRANT_ACTOR", "zoe")
        .output()
        .unwrap();
    assert_eq!(zoe.status.code(), Some(0), "{}", stderr(&zoe));
}

/// On the shared PostgreSQL store, with workers: a worker drives the run until it parks on a
/// question; the answer re-queues it, and the next worker finishes it.
#[test]
fn a_reply_requeues_the_run_for_a_worker_on_postgres() {
    let db = warrant_testkit::pg::TestDb::new();
    let sb = Sandbox::init_with(Some(db.url.clone()));
    let model = sb.transcript(
        "version: 1\nturns:\n  - calls:\n      - tool: ask_question\n        args: { question: \"Which branch?\", options: [main, dev] }\n  - say: ok\n",
    );
    let submitted = sb.json(&["submit", "--json", "--model", &model, "pick a branch"]);
    let run = submitted["run"].as_str().unwrap().to_owned();
    assert_eq!(sb.run(&["worker", "--once"]).status.code(), Some(0));
    let listed = sb.json(&["requests", "list", "--mine", "--json"]);
    let req = listed["requests"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(listed["requests"][0]["run"], json!(run));
    let runs = sb.json(&["runs", "list", "--json"]);
    assert_eq!(runs["runs"][0]["status"], "parked");
    assert_eq!(
        sb.run(&["requests", "answer", &req, "--option", "1"])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(
        sb.json(&["runs", "list", "--json"])["runs"][0]["status"],
        "queued"
    );
    assert_eq!(sb.run(&["worker", "--once"]).status.code(), Some(0));
    assert_eq!(
        sb.json(&["runs", "list", "--json"])["runs"][0]["status"],
        "completed"
    );
    let (_, events) = sb.last_run();
    assert_eq!(
        payload_of(&events, "request_replied")["reply"],
        json!({"reply": "answered", "option": 1, "text": "main"})
    );
}

/// Issue 12 part 4: what a person types into a reply (an answer, a resource's URL with its
/// credentials) is redacted before the journal, the audit trail, the model or any output
/// holds it; the negative control turns the redactor off and finds the answer in the store.
#[test]
fn secrets_typed_into_replies_are_redacted_everywhere_they_are_written_control_unredacted() {
    const TOKEN: &str = "ghp_8f3KqL0vX2mB9nR4tY7wZ1cD6hJ5sP3aE2gU";
    const PASSWORD: &str = "pw-Hq7Zx2Lm9Vr4";
    let attempt = |redact: bool| -> (Vec<String>, Vec<String>, usize) {
        let mut sb = Sandbox::init();
        if !redact {
            sb.extra_env
                .push(("WARRANT_TEST_DISABLE".into(), "redact,seal".into()));
        }
        let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
        let port = server.server_addr().to_ip().unwrap().port();
        let serving = thread::spawn(move || {
            if let Ok(Some(req)) = server.recv_timeout(std::time::Duration::from_secs(30)) {
                let _ = req.respond(tiny_http::Response::from_string("ok"));
            }
        });
        let model = sb.transcript(
            "version: 1\nturns:\n  - calls:\n      - tool: ask_question\n        args: { question: \"Which token?\" }\n  - calls:\n      - tool: request_resource\n        args: { kind: endpoint, name: api, url: \"http://127.0.0.1:9/\" }\n  - say: done\n",
        );
        let mut outputs: Vec<Vec<u8>> = Vec::new();
        let mut keep = |o: &std::process::Output| {
            outputs.push(o.stdout.clone());
            outputs.push(o.stderr.clone());
        };
        let out = sb.run(&["run", "--model", &model, "go"]);
        keep(&out);
        let (run, _) = sb.last_run();
        let question = parked_request(&out);
        let answered = sb.run(&[
            "requests",
            "answer",
            &question,
            "--text",
            &format!("use {TOKEN}"),
        ]);
        keep(&answered);
        assert_eq!(answered.status.code(), Some(0), "{}", stderr(&answered));
        let resumed = sb.run(&["resume", &run]);
        keep(&resumed);
        let resource = parked_request(&resumed);
        let url = format!("http://ops:{PASSWORD}@127.0.0.1:{port}/");
        let connected = sb.run(&["requests", "connect", &resource, "--url", &url]);
        keep(&connected);
        assert_eq!(connected.status.code(), Some(0), "{}", stderr(&connected));
        serving.join().unwrap();
        let done = sb.run(&["resume", &run]);
        keep(&done);
        assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
        for args in [
            vec!["runs", "show", run.as_str(), "--json"],
            vec!["requests", "list", "--all", "--json"],
            vec!["requests", "show", question.as_str(), "--json"],
            vec!["requests", "show", resource.as_str(), "--json"],
            vec!["audit", "tail", "-n", "200", "--json"],
        ] {
            keep(&sb.run(&args));
        }
        let token = files_holding(sb.dir.path(), TOKEN.as_bytes());
        let password = files_holding(sb.dir.path(), PASSWORD.as_bytes());
        let leaked = outputs
            .iter()
            .filter(|o| contains(o, TOKEN.as_bytes()) || contains(o, PASSWORD.as_bytes()))
            .count();
        (token, password, leaked)
    };
    let (token, password, leaked) = attempt(true);
    assert_eq!(
        token,
        Vec::<String>::new(),
        "the answer's token is written nowhere"
    );
    assert_eq!(
        password,
        Vec::<String>::new(),
        "the URL's password is written nowhere"
    );
    assert_eq!(leaked, 0, "and printed nowhere");
    let (token, _, _) = attempt(false);
    assert!(
        token.iter().any(|p| p.contains("store.db")),
        "without the redactor the answer is stored as typed: {token:?}"
    );
}
