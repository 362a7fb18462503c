//! A governed run against an OpenAI-compatible endpoint: a local server that speaks the
//! documented chat-completions wire format answers with a tool call, then a final message.
//! The tool result goes back in a `tool` message, never anywhere instructions go.

use std::sync::{Arc, Mutex};
use std::thread;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::harness::{Sandbox, kinds, stderr};

fn completion(message: Value) -> String {
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

/// Serves the given bodies in order and records every request body.
fn serve(bodies: Vec<String>) -> (String, Arc<Mutex<Vec<Value>>>, thread::JoinHandle<()>) {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", server.server_addr().to_ip().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let handle = thread::spawn(move || {
        for body in bodies {
            let mut req = server.recv().unwrap();
            let mut text = String::new();
            req.as_reader().read_to_string(&mut text).unwrap();
            log.lock()
                .unwrap()
                .push(serde_json::from_str::<Value>(&text).unwrap());
            let header = tiny_http::Header::from_bytes("Content-Type", "application/json").unwrap();
            req.respond(tiny_http::Response::from_string(body).with_header(header))
                .unwrap();
        }
    });
    (url, seen, handle)
}

#[test]
fn an_openai_model_drives_a_governed_run() {
    let mut sb = Sandbox::init();
    let (url, seen, handle) = serve(vec![
        completion(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"README.md\"}"}},
            {"id": "call_b", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\".env\"}"}},
            {"id": "call_c", "type": "function", "function": {"name": "format_disk", "arguments": "{}"}},
            {"id": "call_d", "type": "function", "function": {"name": "read_file", "arguments": "{\"file\":1}"}}
        ]})),
        completion(json!({"role": "assistant", "content": "README read."})),
    ]);
    sb.extra_env.push(("OPENAI_BASE_URL".into(), url));
    sb.extra_env
        .push(("OPENAI_API_KEY".into(), "sk-test-never-logged".into()));
    let out = sb.run(&["run", "--model", "openai:gpt-test", "read the readme"]);
    handle.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    let requests = seen.lock().unwrap().clone();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0]["model"], "gpt-test");
    let names: Vec<&str> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        vec![
            "read_file",
            "write_file",
            "list_dir",
            "search_files",
            "delete_path",
            "run_command",
            "edit_file",
            "apply_patch",
            "git_status",
            "git_diff",
            "git_log",
            "git_show",
            "git_commit",
            "git_branch",
            "git_checkout",
            "git_push",
            "run_tests",
            "web_fetch",
            "spawn_agent",
            "ask_question",
            "request_secret",
            "request_resource",
            "remember",
            "recall",
            "forget",
            "propose_memory",
            "create_document",
            "create_spreadsheet",
            "create_presentation",
            "create_report"
        ]
    );
    let second = requests[1]["messages"].as_array().unwrap();
    let roles: Vec<&str> = second.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        vec![
            "system",
            "user",
            "assistant",
            "tool",
            "tool",
            "tool",
            "tool"
        ]
    );
    // File content arrives only as a tool result; the system message is ours alone.
    assert!(
        second[3]["content"]
            .as_str()
            .unwrap()
            .contains("Lighthouse")
    );
    assert_eq!(second[3]["tool_call_id"], "call_a");
    assert!(
        !second[0]["content"]
            .as_str()
            .unwrap()
            .contains("Lighthouse")
    );
    assert!(second[4]["content"].as_str().unwrap().contains("denied"));
    assert!(
        second[5]["content"]
            .as_str()
            .unwrap()
            .contains("W-TOOL-001")
    );
    assert!(
        second[6]["content"]
            .as_str()
            .unwrap()
            .contains("W-TOOL-002")
    );

    let (_, events) = sb.last_run();
    let k = kinds(&events);
    assert_eq!(k.iter().filter(|k| *k == "call_refused").count(), 2);
    assert_eq!(k.iter().filter(|k| *k == "effect_denied").count(), 1);
    assert_eq!(k.last().unwrap(), "run_ended");
    let all = serde_json::to_string(&events).unwrap();
    assert!(
        !all.contains("sk-test-never-logged"),
        "the key never reaches the store"
    );
    let trail = std::fs::read_to_string(sb.ws.join(".warrant/audit/audit.jsonl")).unwrap();
    assert!(!trail.contains("sk-test-never-logged"));
}

#[test]
fn an_unreachable_provider_fails_the_run_with_exit_1() {
    let mut sb = Sandbox::init();
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    sb.extra_env.push((
        "OPENAI_BASE_URL".into(),
        format!("http://127.0.0.1:{port}/v1"),
    ));
    let out = sb.run(&["run", "--model", "openai:gpt-test", "t"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let (_, events) = sb.last_run();
    let end = events.last().unwrap();
    assert_eq!(end["payload"]["outcome"]["status"], "failed");
    assert!(
        end["payload"]["outcome"]["code"]
            .as_str()
            .unwrap()
            .starts_with("W-MODEL-")
    );
}

fn anthropic_message(content: Value, stop: &str) -> String {
    json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": content, "stop_reason": stop, "stop_sequence": null,
        "usage": {"input_tokens": 12, "output_tokens": 6}
    })
    .to_string()
}

/// The same governed run through the Anthropic Messages API: the tool result goes back as a
/// `tool_result` block in a user turn, never into the system prompt.
#[test]
fn an_anthropic_model_drives_a_governed_run() {
    let mut sb = Sandbox::init();
    let (url, seen, handle) = serve(vec![
        anthropic_message(
            json!([
                {"type": "text", "text": "Reading the readme."},
                {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "README.md"}}
            ]),
            "tool_use",
        ),
        anthropic_message(
            json!([{"type": "text", "text": "It is about harbour lights."}]),
            "end_turn",
        ),
    ]);
    let base = url.trim_end_matches("/v1").to_owned();
    sb.extra_env.push(("ANTHROPIC_BASE_URL".into(), base));
    sb.extra_env.push((
        "ANTHROPIC_API_KEY".into(),
        "sk-ant-test-never-logged".into(),
    ));
    let out = sb.run(&["run", "--model", "anthropic:claude-test", "read the readme"]);
    handle.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let requests = seen.lock().unwrap().clone();
    assert_eq!(requests[0]["model"], "claude-test");
    assert!(requests[0]["system"].as_str().unwrap().contains("Warrant"));
    let second = requests[1]["messages"].as_array().unwrap();
    let roles: Vec<&str> = second.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, vec!["user", "assistant", "user"]);
    let result = &second[2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "toolu_1");
    assert!(result["content"].as_str().unwrap().contains("Lighthouse"));
    assert!(
        !requests[1]["system"]
            .as_str()
            .unwrap()
            .contains("Lighthouse")
    );
    let (_, events) = sb.last_run();
    assert_eq!(
        events.last().unwrap()["payload"]["outcome"]["status"],
        "completed"
    );
    assert!(
        !serde_json::to_string(&events)
            .unwrap()
            .contains("sk-ant-test")
    );
}
