//! An MCP server's elicitation through the ring (issue 14): the reference server's
//! `trigger-elicitation-request` asks the client's person for a form while its call runs. With
//! `elicitation = true` the request becomes a request to the run's person, listed and answered
//! like a question from another process (`warrant requests answer|decline`), while the call
//! waits in the running process; nobody answering in time cancels it. The answer is checked
//! against the requested schema (defaults filled in) and scanned for secrets (a finding is
//! refused and never sent; `WARRANT_TEST_DISABLE=elicit-scan` is the control). Without the
//! setting the capability is not declared, so the server does not offer the tool.

use std::process::{Child, Stdio};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::Value;
use warrant_core::config::DEFAULT_READ_ROOTS;

use super::harness::{Sandbox, stderr, stdout, wait_until};
use super::mcp::everything;

fn tool() -> String {
    warrant_mcp::model_name("every", "trigger-elicitation-request")
}

fn setup(sb: &Sandbox, elicitation: bool, timeout_ms: u64) {
    let index = everything();
    let npm = index
        .ancestors()
        .nth(4)
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let mut roots: Vec<String> = DEFAULT_READ_ROOTS
        .iter()
        .map(|s| format!("{s:?}"))
        .collect();
    roots.push(format!("{npm:?}"));
    let config = sb.ws.join(".warrant/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        r#"
[profiles.mcp-stdio.sandbox]
read_roots = [{roots}]

[mcp.servers.every]
command = ["node", {index:?}, "stdio"]
tools = ["trigger-elicitation-request"]
elicitation = {elicitation}
elicitation_timeout_ms = {timeout_ms}
"#,
        roots = roots.join(", "),
        index = index.to_str().unwrap(),
    ));
    std::fs::write(&config, text).unwrap();
    sb.write(
        ".warrant/policies/mcp.cedar",
        "@id(\"mcp-elicitation-tool\")\n@reason(\"The test server's elicitation tool may be called.\")\npermit (principal, action == Warrant::Action::\"mcp.call\", resource is Warrant::McpTool)\nwhen { resource.server == \"every\" };\n",
    );
}

fn transcript(sb: &Sandbox) -> String {
    let tool = tool();
    sb.transcript(&format!(
        "version: 1\nturns:\n  - calls:\n      - tool: {tool}\n        args: {{}}\n  - say: done\n"
    ))
}

/// Starts the run in the background; its output goes to files of the sandbox.
fn start(sb: &Sandbox) -> Child {
    let model = transcript(sb);
    let out = std::fs::File::create(sb.dir.path().join("run.out")).unwrap();
    let err = std::fs::File::create(sb.dir.path().join("run.err")).unwrap();
    sb.std_cmd(&["run", "--model", &model, "ask the server"])
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap()
}

fn finish(sb: &Sandbox, mut child: Child) {
    let mut status = None;
    wait_until("the run to end", Duration::from_secs(120), || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    let err = std::fs::read_to_string(sb.dir.path().join("run.err")).unwrap_or_default();
    let out = std::fs::read_to_string(sb.dir.path().join("run.out")).unwrap_or_default();
    assert_eq!(status.unwrap().code(), Some(0), "{out}\n{err}");
}

/// The open elicitation, once the run has raised it.
fn open_request(sb: &Sandbox) -> String {
    let mut found = None;
    wait_until("the elicitation request", Duration::from_secs(90), || {
        let listed = sb.json(&["requests", "list", "--json"]);
        found = listed["requests"].as_array().and_then(|l| {
            l.iter()
                .find(|r| r["kind"] == "elicitation" && r["status"] == "open")
                .and_then(|r| r["id"].as_str().map(str::to_owned))
        });
        found.is_some()
    });
    found.unwrap()
}

fn the_call(sb: &Sandbox) -> (String, Value, Vec<Value>) {
    let (run, events) = sb.last_run();
    let done: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "effect_completed")
        .collect();
    assert_eq!(done.len(), 1, "{events:#?}");
    let result = done[0]["payload"]["result"].clone();
    (run, result, events)
}

#[test]
fn an_elicitation_is_a_request_answered_from_another_process_and_checked_against_its_schema() {
    let sb = Sandbox::init();
    setup(&sb, true, 120_000);
    let child = start(&sb);
    let req = open_request(&sb);

    // Shown as a request: the server's words fenced as untrusted, the fields in words.
    let shown = sb.run(&["requests", "show", &req]);
    assert_eq!(shown.status.code(), Some(0), "{}", stderr(&shown));
    let text = stdout(&shown);
    assert!(text.contains("(elicitation, open)"), "{text}");
    assert!(
        text.contains("<untrusted source=\"mcp-elicitation:every\">"),
        "{text}"
    );
    assert!(
        text.contains("Please provide inputs for the following fields:"),
        "{text}"
    );
    assert!(text.contains("field name (text, required)"), "{text}");
    assert!(
        text.contains("field integer (integer, optional): \u{201c}Integer\u{201d}"),
        "{text}"
    );

    // An answer the schema refuses is not recorded: the person answers again.
    let wrong = sb.run(&[
        "requests",
        "answer",
        &req,
        "--text",
        r#"{"name": "Ada Lovelace", "integer": 500}"#,
    ]);
    assert_eq!(wrong.status.code(), Some(2), "{}", stdout(&wrong));
    assert!(
        stderr(&wrong).contains("W-REQUEST-002"),
        "{}",
        stderr(&wrong)
    );
    let missing = sb.run(&["requests", "answer", &req, "--text", "{}"]);
    assert!(
        stderr(&missing).contains("`name` is required"),
        "{}",
        stderr(&missing)
    );

    let answered = sb.run(&[
        "requests",
        "answer",
        &req,
        "--text",
        r#"{"name": "Ada Lovelace", "email": "ada@example.org", "check": true}"#,
    ]);
    assert_eq!(answered.status.code(), Some(0), "{}", stderr(&answered));
    finish(&sb, child);

    let (run, result, events) = the_call(&sb);
    let text = result.to_string();
    // The server received the answer, with the schema's defaults filled in.
    assert!(text.contains("Name: Ada Lovelace"), "{text}");
    assert!(text.contains("Favorite Integer: 42"), "{text}");
    let elicited = result["elicited"].as_array().unwrap();
    assert_eq!(elicited.len(), 1, "{result}");
    assert_eq!(elicited[0]["outcome"], "accepted", "{result}");
    assert_eq!(elicited[0]["request_id"], Value::String(req.clone()));
    assert!(
        elicited[0]["fields"]
            .as_array()
            .unwrap()
            .contains(&Value::String("name".into())),
        "{result}"
    );
    // The journal holds the request and its reply, in the run that made the call.
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["kind"].as_str()).collect();
    let raised = kinds.iter().position(|k| *k == "request_raised").unwrap();
    let replied = kinds.iter().position(|k| *k == "request_replied").unwrap();
    let completed = kinds.iter().position(|k| *k == "effect_completed").unwrap();
    assert!(raised < replied && replied < completed, "{kinds:?}");
    // The audit record of the reply names the fields and the content's digest, never a value.
    let audit = sb.run(&["audit", "query", "--run", &run, "--json"]);
    let reply_record = stdout(&audit)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|r| r["data"]["event"] == "request_replied")
        .unwrap();
    let record = reply_record.to_string();
    assert!(record.contains("field name"), "{record}");
    assert!(!record.contains("Ada Lovelace"), "{record}");
    assert!(!record.contains("ada@example.org"), "{record}");
    // The request is answered; the chain verifies.
    let shown = sb.json(&["requests", "show", &req, "--json"]);
    assert_eq!(shown["status"], "accepted", "{shown}");
    let verified = sb.run(&["audit", "verify"]);
    assert_eq!(verified.status.code(), Some(0), "{}", stderr(&verified));
}

#[test]
fn a_declined_elicitation_tells_the_server_decline() {
    let sb = Sandbox::init();
    setup(&sb, true, 120_000);
    let child = start(&sb);
    let req = open_request(&sb);
    let declined = sb.run(&[
        "requests",
        "decline",
        &req,
        "--reason",
        "not for this server",
    ]);
    assert_eq!(declined.status.code(), Some(0), "{}", stderr(&declined));
    finish(&sb, child);
    let (_, result, _) = the_call(&sb);
    let text = result.to_string();
    assert!(text.contains("User declined"), "{text}");
    assert!(text.contains(r#"\"action\": \"decline\""#), "{text}");
    assert_eq!(result["elicited"][0]["outcome"], "declined", "{result}");
}

#[test]
fn an_elicitation_nobody_answers_in_time_is_cancelled_and_the_run_goes_on() {
    let sb = Sandbox::init();
    setup(&sb, true, 1_500);
    let model = transcript(&sb);
    let out = sb.run(&["run", "--model", &model, "ask the server"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (_, result, events) = the_call(&sb);
    let text = result.to_string();
    assert!(text.contains("User cancelled"), "{text}");
    assert_eq!(result["elicited"][0]["outcome"], "cancelled", "{result}");
    assert!(
        result["elicited"][0]["why"]
            .as_str()
            .unwrap()
            .contains("nobody answered within 1500 ms"),
        "{result}"
    );
    assert!(
        events.iter().any(|e| e["kind"] == "request_expired"),
        "{events:#?}"
    );
    let req = result["elicited"][0]["request_id"].as_str().unwrap();
    let shown = sb.json(&["requests", "show", req, "--json"]);
    assert_eq!(shown["status"], "expired", "{shown}");
    // Too late: an answer now is refused.
    let late = sb.run(&["requests", "answer", req, "--text", r#"{"name": "x"}"#]);
    assert_ne!(late.status.code(), Some(0), "{}", stdout(&late));
}

/// A server may not ask for a secret in a form: an answer in which the secret scanner finds one
/// is refused (W-MCP-015), recorded in the run, and never sent; the request stays open. The
/// control: with the scan switched off the same answer goes through to the server.
#[test]
fn an_answer_holding_a_secret_is_refused_and_never_sent_unless_the_scan_is_switched_off() {
    let sb = Sandbox::init();
    setup(&sb, true, 120_000);
    let child = start(&sb);
    let req = open_request(&sb);
    let token = "ghp_R8xTq2LmZ4vN7wK1pY9sD3fH6jC0bA5eG2uQ";
    let answer = format!(r#"{{"name": "{token}"}}"#);
    let refused = sb.run(&["requests", "answer", &req, "--text", &answer]);
    assert_eq!(refused.status.code(), Some(2), "{}", stdout(&refused));
    assert!(
        stderr(&refused).contains("W-MCP-015"),
        "{}",
        stderr(&refused)
    );
    assert!(!stderr(&refused).contains(token), "{}", stderr(&refused));
    let shown = sb.json(&["requests", "show", &req, "--json"]);
    assert_eq!(shown["status"], "open", "{shown}");

    // The control: the guard off, the secret reaches the server.
    let through = sb
        .cmd(&["requests", "answer", &req, "--text", &answer])
        .env("WARRANT_TEST_DISABLE", "elicit-scan")
        .output()
        .unwrap();
    assert_eq!(through.status.code(), Some(0), "{}", stderr(&through));
    finish(&sb, child);
    let (run, result, events) = the_call(&sb);
    assert_eq!(result["elicited"][0]["outcome"], "accepted", "{result}");
    // The refusal is in the run's log and its audit trail, with its code; the value is not.
    let rejected: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "approval_rejected")
        .collect();
    assert_eq!(rejected.len(), 1, "{events:#?}");
    assert_eq!(rejected[0]["payload"]["reason"], "secret_in_answer");
    assert!(!rejected[0].to_string().contains(token));
    let audit = stdout(&sb.run(&["audit", "query", "--run", &run, "--json"]));
    assert!(
        audit.contains("secret_in_answer") || audit.contains("W-MCP-015"),
        "{audit}"
    );
}

#[test]
fn without_elicitation_configured_the_capability_is_not_declared_and_the_tool_not_offered() {
    let sb = Sandbox::init();
    setup(&sb, false, 120_000);
    let model = transcript(&sb);
    let out = sb.run(&["run", "--model", &model, "ask the server"]);
    assert_ne!(out.status.code(), Some(0));
    let text = format!("{}{}", stderr(&out), stdout(&out));
    assert!(text.contains(&tool()), "{text}");
    assert!(text.contains("W-TRANSCRIPT-005"), "{text}");
    let listed = sb.json(&["requests", "list", "--json"]);
    assert_eq!(listed["requests"], serde_json::json!([]), "{listed}");
}
