//! Model calls as governed effects, from the CLI: streamed runs against local servers speaking
//! each API's event stream, `provider.call` decided by policy (a forbidden model is refused,
//! typed and audited), and budgets that cut a streamed answer off and stop the run (exit 3).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::harness::{Sandbox, kinds, stderr, stdout};

/// A local server answering each request with the next body (as an event stream), recording
/// request bodies, until stopped.
struct Server {
    base: String,
    seen: Arc<Mutex<Vec<Value>>>,
    stop: Arc<AtomicBool>,
    handle: thread::JoinHandle<()>,
}

impl Server {
    fn start(bodies: Vec<String>) -> Self {
        let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
        let base = format!("http://{}", server.server_addr().to_ip().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (log, halt) = (seen.clone(), stop.clone());
        let handle = thread::spawn(move || {
            let mut bodies = bodies.into_iter();
            while !halt.load(Ordering::SeqCst) {
                let Ok(Some(mut req)) = server.recv_timeout(Duration::from_millis(50)) else {
                    continue;
                };
                let mut text = String::new();
                req.as_reader().read_to_string(&mut text).unwrap();
                log.lock()
                    .unwrap()
                    .push(serde_json::from_str::<Value>(&text).unwrap());
                let body = bodies.next().unwrap_or_default();
                let header =
                    tiny_http::Header::from_bytes("Content-Type", "text/event-stream").unwrap();
                let _ = req.respond(tiny_http::Response::from_string(body).with_header(header));
            }
        });
        Self {
            base,
            seen,
            stop,
            handle,
        }
    }

    fn finish(self) -> Vec<Value> {
        self.stop.store(true, Ordering::SeqCst);
        self.handle.join().unwrap();
        self.seen.lock().unwrap().clone()
    }
}

fn data(chunks: &[Value]) -> String {
    let mut body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    body
}

fn delta(delta: Value) -> Value {
    json!({"object": "chat.completion.chunk", "model": "gpt-test",
           "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
}

fn end(reason: &str, prompt: u64, completion: u64) -> [Value; 2] {
    [
        json!({"object": "chat.completion.chunk", "model": "gpt-test",
               "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}),
        json!({"object": "chat.completion.chunk", "model": "gpt-test", "choices": [],
               "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}),
    ]
}

/// Turn 1 reads README.md with arguments split across chunks; turn 2 answers.
fn openai_turns() -> Vec<String> {
    openai_turns_counting(1000, 1100)
}

/// The two turns of `openai_turns`, with the prompt sizes the server reports.
fn openai_turns_counting(first_prompt: u64, second_prompt: u64) -> Vec<String> {
    let mut first = vec![
        delta(json!({"role": "assistant", "content": "Reading."})),
        delta(
            json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                     "function": {"name": "read_file", "arguments": ""}}]}),
        ),
        delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"path\":"}}]})),
        delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": " \"README.md\"}"}}]})),
    ];
    first.extend(end("tool_calls", first_prompt, 20));
    let mut second = vec![delta(json!({"content": "It is about harbour lights."}))];
    second.extend(end("stop", second_prompt, 10));
    vec![data(&first), data(&second)]
}

fn add_config(sb: &Sandbox, text: &str) {
    let path = sb.ws.join(".warrant/config.toml");
    let mut config = std::fs::read_to_string(&path).unwrap();
    config.push('\n');
    config.push_str(text);
    std::fs::write(path, config).unwrap();
}

const PRICES: &str =
    "[prices.\"openai:gpt-test\"]\ninput_per_million = 2.0\noutput_per_million = 10.0\n";

fn payloads(events: &[Value], kind: &str) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["kind"] == kind)
        .map(|e| e["payload"].clone())
        .collect()
}

#[test]
fn a_streamed_openai_run_is_metered_and_priced() {
    let mut sb = Sandbox::init();
    add_config(&sb, PRICES);
    let server = Server::start(openai_turns());
    sb.extra_env
        .push(("OPENAI_BASE_URL".into(), format!("{}/v1", server.base)));
    sb.extra_env
        .push(("OPENAI_API_KEY".into(), "sk-never-logged".into()));
    let out = sb.run(&[
        "run",
        "--model",
        "openai:gpt-test",
        "what is the readme about?",
    ]);
    let requests = server.finish();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(requests.len(), 2);
    assert_eq!(
        (&requests[0]["stream"], &requests[0]["stream_options"]),
        (&json!(true), &json!({"include_usage": true}))
    );
    // The tool result went back in a tool message.
    assert_eq!(requests[1]["messages"][3]["role"], "tool");
    assert_eq!(
        requests[1]["messages"][2]["tool_calls"][0]["function"]["arguments"],
        "{\"path\":\"README.md\"}"
    );

    let (_, events) = sb.last_run();
    let usage: Vec<Value> = payloads(&events, "model_responded")
        .iter()
        .map(|p| p["usage"].clone())
        .collect();
    // 1000 × $2 + 20 × $10 per million, then 1100 × $2 + 10 × $10 per million.
    assert_eq!(
        usage,
        vec![
            json!({"input_tokens": 1000, "output_tokens": 20, "cost_usd": 0.0022}),
            json!({"input_tokens": 1100, "output_tokens": 10, "cost_usd": 0.0023}),
        ]
    );
    let all = serde_json::to_string(&events).unwrap();
    assert!(!all.contains("sk-never-logged"));
}

#[test]
fn a_streamed_anthropic_run_works_from_the_cli() {
    let mut sb = Sandbox::init();
    let event = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let start = event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant",
               "model": "claude-test", "content": [], "usage": {"input_tokens": 50, "output_tokens": 1}}}),
    );
    let first = [
        start.clone(),
        event("content_block_start", json!({"type": "content_block_start", "index": 0,
              "content_block": {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}})),
        event("ping", json!({"type": "ping"})),
        event("content_block_delta", json!({"type": "content_block_delta", "index": 0,
              "delta": {"type": "input_json_delta", "partial_json": "{\"path\": \"READ"}})),
        event("content_block_delta", json!({"type": "content_block_delta", "index": 0,
              "delta": {"type": "input_json_delta", "partial_json": "ME.md\"}"}})),
        event("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
        event("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
              "usage": {"output_tokens": 30}})),
        event("message_stop", json!({"type": "message_stop"})),
    ]
    .concat();
    let second = [
        start,
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
              "content_block": {"type": "text", "text": ""}}),
        ),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
              "delta": {"type": "text_delta", "text": "Harbour lights."}}),
        ),
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        event(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
              "usage": {"output_tokens": 5}}),
        ),
        event("message_stop", json!({"type": "message_stop"})),
    ]
    .concat();
    let server = Server::start(vec![first, second]);
    sb.extra_env
        .push(("ANTHROPIC_BASE_URL".into(), server.base.clone()));
    sb.extra_env
        .push(("ANTHROPIC_API_KEY".into(), "sk-ant-never-logged".into()));
    let out = sb.run(&["run", "--model", "anthropic:claude-test", "readme?"]);
    let requests = server.finish();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(requests[0]["stream"], json!(true));
    assert_eq!(
        requests[1]["messages"][1]["content"][0]["input"],
        json!({"path": "README.md"})
    );
    let (_, events) = sb.last_run();
    let responded = payloads(&events, "model_responded");
    assert_eq!(
        responded[0]["calls"],
        json!([{"id": "toolu_1", "tool": "read_file", "args": {"path": "README.md"}}])
    );
    assert_eq!(
        responded[1]["usage"],
        json!({"input_tokens": 50, "output_tokens": 5})
    );
}

/// Policy restricts models per principal. Negative control: without the forbid, the same
/// run calls the model.
#[test]
fn a_forbidden_model_is_refused_before_the_call_typed_and_audited() {
    let attempt = |forbid: bool| {
        let mut sb = Sandbox::init();
        if forbid {
            sb.write(
                ".warrant/policies/models.cedar",
                "@id(\"no-big-models-for-tester\")\n@reason(\"tester may only use small models\")\nforbid (principal, action == Warrant::Action::\"provider.call\", resource is Warrant::Provider)\nwhen { principal.actor == \"tester\" && resource.model like \"*-big\" };\n",
            );
        }
        let server = Server::start(openai_turns());
        sb.extra_env
            .push(("OPENAI_BASE_URL".into(), format!("{}/v1", server.base)));
        let out = sb.run(&["run", "--model", "openai:gpt-big", "t"]);
        let requests = server.finish();
        (sb, out, requests)
    };
    let (_, out, requests) = attempt(false);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(requests.len(), 2, "without the guard the model is called");

    let (sb, out, requests) = attempt(true);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(requests.len(), 0, "the model was never called");
    let message = "model call to openai:gpt-big refused: policy does not allow it: project:no-big-models-for-tester (tester may only use small models)";
    assert!(stdout(&out).contains(message), "{}", stdout(&out));
    let (_, events) = sb.last_run();
    assert_eq!(
        kinds(&events),
        vec!["run_started", "model_call_denied", "run_ended"]
    );
    assert_eq!(
        payloads(&events, "model_call_denied")[0],
        json!({
            "turn": 0,
            "action": {"verb": "provider.call", "provider": "openai", "model": "gpt-big"},
            "verdict": "deny",
            "reasons": [{"policy": "project:no-big-models-for-tester", "reason": "tester may only use small models"}],
            "message": message,
        })
    );
    let trail = std::fs::read_to_string(sb.ws.join(".warrant/audit/audit.jsonl")).unwrap();
    let record: Value = trail
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|r| r.to_string().contains("model_call_denied"))
        .expect("an audit record of the refusal");
    let text = record.to_string();
    assert!(text.contains("\"decision\":\"deny\""), "{text}");
    assert!(text.contains("no-big-models-for-tester"), "{text}");
    assert!(text.contains("provider.call"), "{text}");
    // And it is found by the indexed audit query on the verb.
    let found = sb.run(&[
        "audit",
        "query",
        "--verb",
        "provider.call",
        "--decision",
        "deny",
        "--json",
    ]);
    assert_eq!(found.status.code(), Some(0), "{}", stderr(&found));
    let listed = stdout(&found);
    let lines: Vec<&str> = listed.lines().filter(|l| !l.is_empty()).collect();
    assert!(
        lines.len() == 1 && lines[0].contains("model_call_denied"),
        "{listed}"
    );
}

/// A run token budget cuts a streamed answer off mid-stream. Negative control: without the
/// budget the same answer streams to the end.
#[test]
fn a_budget_stops_a_streamed_answer_mid_stream_with_exit_3() {
    let long_answer = || {
        let mut chunks: Vec<Value> = (0..200)
            .map(|i| delta(json!({"content": format!("lighthouse {i:03}. ")})))
            .collect();
        chunks.extend(end("stop", 40, 1200));
        vec![data(&chunks)]
    };
    let attempt = |budget: Option<u64>| {
        let mut sb = Sandbox::init();
        add_config(&sb, PRICES);
        if let Some(tokens) = budget {
            add_config(&sb, &format!("[budgets.run]\ntokens = {tokens}\n"));
        }
        let server = Server::start(long_answer());
        sb.extra_env
            .push(("OPENAI_BASE_URL".into(), format!("{}/v1", server.base)));
        let out = sb.run(&["run", "--model", "openai:gpt-test", "tell me everything"]);
        let requests = server.finish();
        (sb, out, requests)
    };
    let (sb, out, requests) = attempt(None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Until the last chunk counts it, the prompt is estimated from the request body (4 bytes
    // a token); the budget leaves room for it and 100 tokens of answer.
    let prompt = (requests[0].to_string().len() as u64).div_ceil(4);
    let (_, events) = sb.last_run();
    assert_eq!(
        payloads(&events, "model_responded")[0]["usage"]["output_tokens"],
        json!(1200)
    );

    let (sb, out, _) = attempt(Some(prompt + 100));
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let (run, events) = sb.last_run();
    assert_eq!(
        kinds(&events),
        vec!["run_started", "budget_exceeded", "run_ended"]
    );
    // "lighthouse NNN. " is 16 bytes, 4 tokens by the estimate: the 26th delta of 200 makes
    // 104 tokens of answer.
    let limit = prompt + 100;
    let used = prompt + 104;
    let cost = (prompt as f64 * 2.0 + 104.0 * 10.0) / 1_000_000.0;
    let message = format!("the run budget of {limit} tokens is exceeded ({used} used)");
    assert_eq!(
        payloads(&events, "budget_exceeded")[0],
        json!({
            "turn": 0, "scope": "run", "metric": "tokens", "limit": limit as f64, "used": used as f64,
            "usage": {"input_tokens": prompt, "output_tokens": 104, "cost_usd": cost, "estimated": true},
            "message": message,
        })
    );
    assert!(
        stdout(&out).contains(&format!("stopped by governance: {message}")),
        "{}",
        stdout(&out)
    );
    // Resuming a stopped run calls nothing.
    let again = sb.run(&["resume", &run]);
    assert_ne!(again.status.code(), Some(0));
}

/// Actor totals are summed over runs: once an actor's token budget is spent, the next run is
/// refused before its first model call. The tenant's looser cost budget does not matter: the
/// most restrictive wins.
#[test]
fn an_actor_budget_spent_in_one_run_refuses_the_next_before_calling() {
    let mut sb = Sandbox::init();
    add_config(
        &sb,
        &format!("{PRICES}[budgets.tenant]\ncost_usd = 5.0\n[budgets.actor]\ntokens = 8130\n"),
    );
    let server = Server::start(openai_turns_counting(4000, 4100));
    sb.extra_env
        .push(("OPENAI_BASE_URL".into(), format!("{}/v1", server.base)));
    let out = sb.run(&["run", "--model", "openai:gpt-test", "first"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The first run used 4020 + 4110 = 8130 tokens: the whole budget, not more (while its
    // answers streamed, the estimates from the request's size stayed below the server's
    // counts, which are large on purpose so the estimate does not depend on the tool list).
    // The next run may not start a call.
    let out = sb.run(&["run", "--model", "openai:gpt-test", "second"]);
    let requests = server.finish();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(requests.len(), 2, "the second run never called the model");
    let (_, events) = sb.last_run();
    assert_eq!(
        payloads(&events, "budget_exceeded"),
        vec![json!({
            "turn": 0, "scope": "actor", "metric": "tokens", "limit": 8130.0, "used": 8130.0,
            "message": "the actor budget of 8130 tokens is used up (8130 used)",
        })]
    );
}

/// A journaled answer is never asked again: a run parks on an approval after its first
/// streamed turn, and resuming it calls the model only for the next turn.
#[test]
fn resume_never_asks_the_model_again_for_a_journaled_turn() {
    let mut sb = Sandbox::init();
    sb.write("old.txt", "stale\n");
    let mut first = vec![delta(
        json!({"tool_calls": [{"index": 0, "id": "call_del", "type": "function",
        "function": {"name": "delete_path", "arguments": "{\"path\": \"old.txt\"}"}}]}),
    )];
    first.extend(end("tool_calls", 30, 10));
    let mut second = vec![delta(json!({"content": "Deleted."}))];
    second.extend(end("stop", 60, 3));
    let server = Server::start(vec![data(&first), data(&second)]);
    sb.extra_env
        .push(("OPENAI_BASE_URL".into(), format!("{}/v1", server.base)));
    let out = sb.run(&["run", "--model", "openai:gpt-test", "clean up"]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let request = super::harness::parked_request(&out);
    let (run, _) = sb.last_run();
    let approved = sb.run(&["approve", &request]);
    assert_eq!(approved.status.code(), Some(0), "{}", stderr(&approved));
    let resumed = sb.run(&["resume", &run]);
    let requests = server.finish();
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    assert!(!sb.exists("old.txt"));
    // Two turns, two requests: the first answer was replayed from the log, not asked again.
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[1]["messages"][2]["tool_calls"][0]["id"],
        "call_del"
    );
    let (_, events) = sb.last_run();
    let turns: Vec<Value> = payloads(&events, "model_responded")
        .iter()
        .map(|p| p["turn"].clone())
        .collect();
    assert_eq!(turns, vec![json!(0), json!(1)]);
}

/// `ollama:MODEL` talks to Ollama's OpenAI-compatible endpoint at `OLLAMA_HOST`, in Ollama's
/// stream shape (each tool call whole, no index, no id, no usage), and policy sees provider
/// `ollama`.
#[test]
fn an_ollama_model_drives_a_run_through_its_compatible_endpoint() {
    let mut sb = Sandbox::init();
    let first = data(&[
        delta(json!({"role": "assistant", "content": ""})),
        delta(
            json!({"tool_calls": [{"function": {"name": "read_file", "arguments": "{\"path\":\"README.md\"}"}}]}),
        ),
        json!({"object": "chat.completion.chunk", "model": "llama3.2",
               "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ]);
    let second = data(&[
        delta(json!({"content": "Lights."})),
        json!({"object": "chat.completion.chunk", "model": "llama3.2",
               "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    ]);
    let server = Server::start(vec![first, second]);
    sb.extra_env.push((
        "OLLAMA_HOST".into(),
        server.base.trim_start_matches("http://").to_owned(),
    ));
    let out = sb.run(&["run", "--model", "ollama:llama3.2", "readme?"]);
    let requests = server.finish();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(requests[0]["model"], "llama3.2");
    let (_, events) = sb.last_run();
    let responded = payloads(&events, "model_responded");
    assert_eq!(
        responded[0]["calls"],
        json!([{"id": "call_0", "tool": "read_file", "args": {"path": "README.md"}}])
    );
    // No usage from the server: the streamed bytes are metered as an estimate.
    assert_eq!(responded[0]["usage"]["estimated"], json!(true));
}

/// `stream = false` turns streaming off: the request asks for one JSON answer, and a key from
/// a `file:` secret reference is sent without ever being stored.
#[test]
fn streaming_can_be_turned_off_and_keys_come_from_a_file_reference() {
    let mut sb = Sandbox::init();
    let key_file = sb.dir.path().join("openai.key");
    std::fs::write(&key_file, "sk-from-a-file\n").unwrap();
    add_config(
        &sb,
        &format!(
            "[providers.openai]\nstream = false\napi_key = \"file:{}\"\n",
            key_file.display()
        ),
    );
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", server.server_addr().to_ip().unwrap());
    let handle = thread::spawn(move || {
        let mut req = server.recv().unwrap();
        let auth = req
            .headers()
            .iter()
            .find(|h| h.field.equiv("Authorization"))
            .map(|h| h.value.to_string());
        let mut text = String::new();
        req.as_reader().read_to_string(&mut text).unwrap();
        let body = json!({"model": "gpt-test", "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "Done."}}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 2}});
        let header = tiny_http::Header::from_bytes("Content-Type", "application/json").unwrap();
        req.respond(tiny_http::Response::from_string(body.to_string()).with_header(header))
            .unwrap();
        (auth, serde_json::from_str::<Value>(&text).unwrap())
    });
    sb.extra_env.push(("OPENAI_BASE_URL".into(), base));
    let out = sb.run(&["run", "--model", "openai:gpt-test", "t"]);
    let (auth, request) = handle.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(auth.as_deref(), Some("Bearer sk-from-a-file"));
    assert_eq!(request.get("stream"), None);
    let (_, events) = sb.last_run();
    assert_eq!(
        payloads(&events, "model_responded")[0]["usage"],
        json!({"input_tokens": 7, "output_tokens": 2})
    );
    let all = serde_json::to_string(&events).unwrap();
    assert!(!all.contains("sk-from-a-file"));

    // A key pasted into configuration is refused before anything starts.
    add_config(&sb, "");
    let config = sb.ws.join(".warrant/config.toml");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace(&format!("file:{}", key_file.display()), "sk-pasted");
    std::fs::write(&config, text).unwrap();
    let out = sb.run(&["run", "--model", "openai:gpt-test", "t"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("W-MODEL-014"), "{}", stderr(&out));
    assert!(!stderr(&out).contains("sk-pasted"), "{}", stderr(&out));
}

/// A policy set from before model calls were governed has no permit for them: the call is
/// refused by default (fail closed), and the refusal says what to add.
#[test]
fn a_policy_set_without_a_model_permit_refuses_and_says_what_to_add() {
    let mut sb = Sandbox::init();
    let pack = sb.ws.join(".warrant/policies/default.cedar");
    let text = std::fs::read_to_string(&pack).unwrap();
    let start = text.find("@id(\"model-calls\")").unwrap();
    let end = start + text[start..].find(");").unwrap() + 2;
    std::fs::write(&pack, format!("{}{}", &text[..start], &text[end..])).unwrap();
    let server = Server::start(openai_turns());
    sb.extra_env
        .push(("OPENAI_BASE_URL".into(), format!("{}/v1", server.base)));
    let out = sb.run(&["run", "--model", "openai:gpt-test", "t"]);
    assert_eq!(server.finish().len(), 0);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let (_, events) = sb.last_run();
    let denied = &payloads(&events, "model_call_denied")[0];
    assert_eq!(
        (&denied["verdict"], &denied["reasons"]),
        (&json!("deny"), &json!([]))
    );
    assert_eq!(
        denied["message"],
        "model call to openai:gpt-test refused: no policy permits provider.call; add a permit like the default pack's `model-calls` (policy sets written by `warrant init` before model calls were governed lack it)"
    );
}
