//! Streamed answers of both providers against local servers that send the documented event
//! streams, including each OpenAI-compatible server's differences that matter (Ollama, Azure,
//! vLLM / llama.cpp, LM Studio), errors before and during a stream, cut-off streams, and a
//! caller stopping an answer mid-stream.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::thread::JoinHandle;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use warrant_core::Coded;
use warrant_core::config::{AnthropicConfig, OpenAiConfig};
use warrant_llm::{
    AnthropicProvider, AnthropicSettings, Conversation, Flow, KeyError, Message, ModelError,
    ModelProvider, ModelResponse, OpenAiProvider, OpenAiSettings, StreamProgress, ToolCall, Usage,
    anthropic_settings_from, openai_settings_from,
};

use super::tools;

const KEY: &str = "sk-stream-0123456789";

struct Canned {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: String,
}

fn sse(events: &[(&str, Value)]) -> Canned {
    let mut body = String::from(": a comment some servers send first\n\n");
    for (event, data) in events {
        if !event.is_empty() {
            body.push_str(&format!("event: {event}\n"));
        }
        body.push_str(&format!("data: {data}\n\n"));
    }
    Canned {
        status: 200,
        headers: vec![("Content-Type", "text/event-stream".into())],
        body,
    }
}

/// OpenAI-style: `data:` lines only, then `[DONE]` when `done`.
fn chunks(chunks: &[Value], done: bool) -> Canned {
    let mut canned = sse(&chunks.iter().map(|c| ("", c.clone())).collect::<Vec<_>>());
    if done {
        canned.body.push_str("data: [DONE]\n\n");
    }
    canned
}

fn status(status: u16, headers: Vec<(&'static str, String)>, body: Value) -> Canned {
    let mut headers = headers;
    headers.push(("Content-Type", "application/json".into()));
    Canned {
        status,
        headers,
        body: body.to_string(),
    }
}

#[derive(Debug)]
struct Seen {
    url: String,
    headers: BTreeMap<String, String>,
    body: Value,
}

struct Server {
    addr: String,
    handle: JoinHandle<Vec<Seen>>,
}

impl Server {
    fn start(answers: Vec<Canned>) -> Self {
        let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
        let addr = server.server_addr().to_ip().unwrap().to_string();
        let handle = std::thread::spawn(move || {
            let mut seen = Vec::new();
            for answer in answers {
                let Some(mut request) = server.recv_timeout(Duration::from_secs(10)).unwrap()
                else {
                    break;
                };
                let headers = request
                    .headers()
                    .iter()
                    .map(|h| {
                        (
                            h.field.as_str().as_str().to_ascii_lowercase(),
                            h.value.to_string(),
                        )
                    })
                    .collect();
                let mut body = String::new();
                request.as_reader().read_to_string(&mut body).unwrap();
                seen.push(Seen {
                    url: request.url().to_owned(),
                    headers,
                    body: serde_json::from_str(&body).unwrap_or(Value::String(body)),
                });
                let mut response =
                    tiny_http::Response::from_string(answer.body).with_status_code(answer.status);
                for (name, value) in answer.headers {
                    response.add_header(
                        tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()).unwrap(),
                    );
                }
                // A client that stopped reading may have closed the connection already.
                let _ = request.respond(response);
            }
            seen
        });
        Self { addr, handle }
    }

    fn finish(self) -> Vec<Seen> {
        self.handle.join().unwrap()
    }
}

fn openai(base_url: String, api_version: Option<&str>) -> OpenAiProvider {
    OpenAiProvider::new(OpenAiSettings {
        base_url,
        api_key: Some(KEY.into()),
        api_key_env: "OPENAI_API_KEY".into(),
        model: "gpt-test".into(),
        timeout: Duration::from_secs(10),
        stream: true,
        api_version: api_version.map(str::to_owned),
    })
    .with_sleep(|_| {})
}

fn anthropic(base_url: String) -> AnthropicProvider {
    AnthropicProvider::new(AnthropicSettings {
        base_url,
        api_key: Some(KEY.into()),
        api_key_env: "ANTHROPIC_API_KEY".into(),
        model: "claude-test".into(),
        max_tokens: 1024,
        timeout: Duration::from_secs(10),
        stream: true,
    })
    .with_sleep(|_| {})
}

fn conversation() -> Conversation {
    Conversation {
        system: "You are careful.".into(),
        messages: vec![Message::User {
            content: "Look around.".into(),
        }],
    }
}

fn delta(delta: Value) -> Value {
    json!({"id": "c1", "object": "chat.completion.chunk", "model": "gpt-test-2025",
           "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
}

fn finish(reason: &str) -> Value {
    json!({"id": "c1", "object": "chat.completion.chunk", "model": "gpt-test-2025",
           "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

fn usage_chunk(prompt: u64, completion: u64) -> Value {
    json!({"id": "c1", "object": "chat.completion.chunk", "model": "gpt-test-2025", "choices": [],
           "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                     "total_tokens": prompt + completion}})
}

/// OpenAI's documented stream: text, then two tool calls whose arguments are split across
/// chunks (the second call's fragments interleaved with the first's), usage last.
fn openai_tool_stream() -> Vec<Value> {
    vec![
        delta(json!({"role": "assistant", "content": ""})),
        delta(json!({"content": "Let me "})),
        delta(json!({"content": "look."})),
        delta(
            json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                                   "function": {"name": "read_file", "arguments": ""}}]}),
        ),
        delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"pa"}}]})),
        delta(
            json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                                   "function": {"name": "list_dir", "arguments": "{\"path\":"}}]}),
        ),
        delta(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "th\": \"README.md\"}"}}]}),
        ),
        delta(json!({"tool_calls": [{"index": 1, "function": {"arguments": " \".\"}"}}]})),
        finish("tool_calls"),
        usage_chunk(40, 25),
    ]
}

fn two_calls(ids: [&str; 2]) -> Vec<ToolCall> {
    vec![
        ToolCall {
            id: ids[0].into(),
            name: "read_file".into(),
            arguments: json!({"path": "README.md"}),
        },
        ToolCall {
            id: ids[1].into(),
            name: "list_dir".into(),
            arguments: json!({"path": "."}),
        },
    ]
}

#[test]
fn openai_tool_calls_split_across_chunks_are_put_back_together() {
    let server = Server::start(vec![chunks(&openai_tool_stream(), true)]);
    let provider = openai(format!("http://{}/v1", server.addr), None);
    let mut updates = Vec::new();
    let response = provider
        .respond_metered(&conversation(), &tools(), 0, &mut |p, _| {
            updates.push(*p);
            Flow::Continue
        })
        .unwrap();
    assert_eq!(
        response,
        ModelResponse {
            text: Some("Let me look.".into()),
            calls: two_calls(["call_a", "call_b"]),
            usage: Some(Usage {
                input_tokens: 40,
                output_tokens: 25
            }),
            model: "gpt-test-2025".into(),
        }
    );
    // Estimates grow with each delta until the server's count replaces them.
    assert!(updates.len() >= 7, "{updates:?}");
    assert!(
        updates
            .windows(2)
            .all(|w| w[0].output_tokens <= w[1].output_tokens || !w[1].estimated)
    );
    assert_eq!(
        updates.last(),
        Some(&StreamProgress {
            input_tokens: 40,
            output_tokens: 25,
            estimated: false
        })
    );
    let seen = server.finish();
    assert_eq!(seen[0].url, "/v1/chat/completions");
    assert_eq!(seen[0].body["stream"], json!(true));
    assert_eq!(
        seen[0].body["stream_options"],
        json!({"include_usage": true})
    );
    assert_eq!(
        seen[0].headers.get("authorization"),
        Some(&format!("Bearer {KEY}"))
    );
}

#[test]
fn each_compatible_servers_stream_shape_is_understood() {
    struct Case {
        server: &'static str,
        chunks: Vec<Value>,
        want_calls: Vec<ToolCall>,
        want_usage: Option<Usage>,
    }
    let whole_call = |name: &str, args: Value| json!({"function": {"name": name, "arguments": args.to_string()}});
    let cases = vec![
        Case {
            // Ollama's /v1: each call whole in one chunk, without index or id; no usage
            // unless it honours stream_options.
            server: "ollama",
            chunks: vec![
                delta(json!({"role": "assistant", "content": ""})),
                delta(
                    json!({"tool_calls": [whole_call("read_file", json!({"path": "README.md"}))]}),
                ),
                delta(json!({"tool_calls": [whole_call("list_dir", json!({"path": "."}))]})),
                finish("tool_calls"),
            ],
            want_calls: two_calls(["call_0", "call_1"]),
            want_usage: None,
        },
        Case {
            // vLLM and llama.cpp server: usage rides on the chunk with finish_reason (and
            // llama.cpp adds its own `timings`).
            server: "vllm / llama.cpp",
            chunks: {
                let mut c = openai_tool_stream();
                c.pop();
                c.pop();
                c.push(json!({"id": "c1", "object": "chat.completion.chunk", "model": "gpt-test-2025",
                              "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
                              "usage": {"prompt_tokens": 40, "completion_tokens": 25, "total_tokens": 65},
                              "timings": {"predicted_ms": 12.5}}));
                c
            },
            want_calls: two_calls(["call_a", "call_b"]),
            want_usage: Some(Usage {
                input_tokens: 40,
                output_tokens: 25,
            }),
        },
        Case {
            // LM Studio: the whole function (name and complete arguments) in the first
            // fragment, with index and id, usage last.
            server: "lm studio",
            chunks: vec![
                delta(json!({"role": "assistant"})),
                delta(
                    json!({"tool_calls": [{"index": 0, "id": "123", "type": "function",
                    "function": {"name": "read_file", "arguments": "{\"path\":\"README.md\"}"}}]}),
                ),
                delta(
                    json!({"tool_calls": [{"index": 1, "id": "456", "type": "function",
                    "function": {"name": "list_dir", "arguments": "{\"path\":\".\"}"}}]}),
                ),
                finish("tool_calls"),
                usage_chunk(40, 25),
            ],
            want_calls: two_calls(["123", "456"]),
            want_usage: Some(Usage {
                input_tokens: 40,
                output_tokens: 25,
            }),
        },
    ];
    for case in cases {
        let server = Server::start(vec![chunks(&case.chunks, true)]);
        let provider = openai(format!("http://{}/v1", server.addr), None);
        let response = provider.respond(&conversation(), &tools(), 0).unwrap();
        assert_eq!(response.calls, case.want_calls, "{}", case.server);
        assert_eq!(response.usage, case.want_usage, "{}", case.server);
        server.finish();
    }
}

#[test]
fn azure_style_endpoints_get_the_api_version_and_an_api_key_header() {
    // Azure's first chunk carries prompt filter results and no choices; later chunks carry
    // content filter results beside the delta.
    let stream = vec![
        json!({"id": "", "object": "", "model": "", "choices": [],
               "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {}}]}),
        json!({"id": "c1", "object": "chat.completion.chunk", "model": "gpt-4o-2024-08-06",
               "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hello"},
                            "finish_reason": null, "content_filter_results": {}}]}),
        json!({"id": "c1", "object": "chat.completion.chunk", "model": "gpt-4o-2024-08-06",
               "choices": [{"index": 0, "delta": {}, "finish_reason": "stop",
                            "content_filter_results": {}}]}),
        json!({"id": "c1", "object": "chat.completion.chunk", "model": "gpt-4o-2024-08-06",
               "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 1}}),
    ];
    let server = Server::start(vec![chunks(&stream, true)]);
    let base = format!("http://{}/openai/deployments/gpt4o", server.addr);
    let response = openai(base, Some("2024-10-21"))
        .respond(&conversation(), &[], 0)
        .unwrap();
    assert_eq!(
        (response.text.as_deref(), response.model.as_str()),
        (Some("Hello"), "gpt-4o-2024-08-06")
    );
    let seen = server.finish();
    assert_eq!(
        seen[0].url,
        "/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21"
    );
    assert_eq!(seen[0].headers.get("api-key"), Some(&KEY.to_owned()));
    assert_eq!(seen[0].headers.get("authorization"), None);
}

#[test]
fn failures_before_and_during_a_stream_are_specific() {
    let addr_of = |server: &Server| format!("http://{}/v1", server.addr);
    // An error body before the stream: the documented envelope, retried for 429.
    let server = Server::start(vec![
        status(
            429,
            vec![("Retry-After", "0".into())],
            json!({"error": {"message": "slow down", "type": "rate_limit"}}),
        ),
        chunks(&[delta(json!({"content": "ok"})), finish("stop")], true),
        status(
            401,
            vec![],
            json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}}),
        ),
        // An error event in the middle of the answer (vLLM and OpenAI send a chunk with
        // `error`; some proxies name the event too).
        Canned {
            body: "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"par\"}}]}\n\nevent: error\ndata: {\"error\":{\"message\":\"The server had an error while processing your request\",\"type\":\"server_error\"}}\n\n".into(),
            ..chunks(&[], false)
        },
        // A stream that just stops: no finish_reason, no [DONE].
        chunks(&[delta(json!({"content": "half an ans"}))], false),
        // A stream that ends after finish_reason without [DONE] is complete.
        chunks(&[delta(json!({"content": "done"})), finish("stop")], false),
        // A server that ignores `stream` and answers JSON.
        status(
            200,
            vec![],
            json!({"model": "plain", "choices": [{"index": 0, "message": {"role": "assistant", "content": "whole"}}]}),
        ),
    ]);
    let provider = openai(addr_of(&server), None);
    let ask = || provider.respond(&conversation(), &[], 0);
    assert_eq!(ask().unwrap().text.as_deref(), Some("ok"));
    let errors: Vec<(String, String)> = (0..3)
        .map(|_| {
            let e = ask().unwrap_err();
            (
                e.code().to_owned(),
                e.to_string().replace(&addr_of(&server), "[base]"),
            )
        })
        .collect();
    assert_eq!(
        errors,
        vec![
            ("W-MODEL-006".into(), "the model endpoint [base] refused the API key (HTTP 401): Incorrect API key provided (type: invalid_request_error, code: invalid_api_key); check the key in the environment variable OPENAI_API_KEY".into()),
            ("W-MODEL-013".into(), "the model endpoint [base] reported an error in the middle of its answer: The server had an error while processing your request (type: server_error); the partial answer was discarded".into()),
            ("W-MODEL-011".into(), "the model endpoint [base] sent a response that is not a model answer: the stream ended before the answer was complete (no finish_reason and no [DONE])".into()),
        ]
    );
    assert_eq!(ask().unwrap().text.as_deref(), Some("done"));
    assert_eq!(ask().unwrap().text.as_deref(), Some("whole"));
    for seen in server.finish() {
        assert!(!format!("{:?}", seen.body).contains(KEY));
    }
}

#[test]
fn a_caller_stops_an_answer_mid_stream() {
    let many: Vec<Value> = (0..50)
        .map(|i| delta(json!({"content": format!("word{i:02} ")})))
        .chain([finish("stop"), usage_chunk(10, 100)])
        .collect();
    let server = Server::start(vec![chunks(&many, true)]);
    let provider = openai(format!("http://{}/v1", server.addr), None);
    let mut seen = 0;
    let err = provider
        .respond_metered(&conversation(), &[], 0, &mut |p, _| {
            seen += 1;
            if p.output_tokens > 20 {
                Flow::Stop {
                    reason: format!("{} tokens is over 20", p.output_tokens),
                }
            } else {
                Flow::Continue
            }
        })
        .unwrap_err();
    // "wordNN " is 7 bytes; 12 of them are 84 bytes, 21 tokens by the estimate (4 bytes a
    // token): stopped at the 12th delta of 50. The prompt is estimated from the request body
    // the same way, since the server counts it only at the end.
    let request = server.finish().remove(0).body.to_string();
    assert_eq!(
        err,
        ModelError::Stopped {
            reason: "21 tokens is over 20".into(),
            usage: Usage {
                input_tokens: (request.len() as u64).div_ceil(4),
                output_tokens: 21
            },
            estimated: true,
        }
    );
    assert_eq!(seen, 12);
    assert_eq!(err.code(), "W-MODEL-012");
}

fn anthropic_events(tool_json: &[&str]) -> Vec<(&'static str, Value)> {
    let mut events = vec![
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                   "model": "claude-test-2025", "content": [], "stop_reason": null,
                   "usage": {"input_tokens": 30, "output_tokens": 1}}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        ("ping", json!({"type": "ping"})),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Reading "}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "it."}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 1, "content_block":
                   {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}}),
        ),
    ];
    for part in tool_json {
        events.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": part}}),
        ));
    }
    events.extend([
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 1}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
                   "usage": {"output_tokens": 42}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]);
    events
}

#[test]
fn anthropic_text_and_a_tool_use_with_split_input_json() {
    let server = Server::start(vec![sse(&anthropic_events(&[
        "",
        "{\"pa",
        "th\": \"READ",
        "ME.md\"}",
    ]))]);
    let response = anthropic(format!("http://{}", server.addr))
        .respond(&conversation(), &tools(), 0)
        .unwrap();
    assert_eq!(
        response,
        ModelResponse {
            text: Some("Reading it.".into()),
            calls: vec![ToolCall {
                id: "toolu_1".into(),
                name: "read_file".into(),
                arguments: json!({"path": "README.md"}),
            }],
            usage: Some(Usage {
                input_tokens: 30,
                output_tokens: 42
            }),
            model: "claude-test-2025".into(),
        }
    );
    let seen = server.finish();
    assert_eq!(seen[0].url, "/v1/messages");
    assert_eq!(seen[0].body["stream"], json!(true));
    assert_eq!(seen[0].headers.get("x-api-key"), Some(&KEY.to_owned()));
}

#[test]
fn anthropic_stream_failures_and_stops() {
    let mut cut = anthropic_events(&["{\"path\": \"a\"}"]);
    cut.truncate(cut.len() - 3);
    let mut with_error = anthropic_events(&["{\"path\": \"a\"}"]);
    with_error.truncate(5);
    with_error.push((
        "error",
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ));
    let server = Server::start(vec![
        status(
            529,
            vec![("retry-after", "0".into())],
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
        sse(&with_error),
        sse(&cut),
        sse(&anthropic_events(&["{\"path\": \"a\"}"])),
    ]);
    let base = format!("http://{}", server.addr);
    let provider = anthropic(base.clone());
    let failures: Vec<(String, String)> = (0..2)
        .map(|_| {
            let e = provider.respond(&conversation(), &[], 0).unwrap_err();
            (e.code().to_owned(), e.to_string().replace(&base, "[base]"))
        })
        .collect();
    assert_eq!(
        failures,
        vec![
            ("W-MODEL-013".into(), "the model endpoint [base] reported an error in the middle of its answer: Overloaded (type: overloaded_error); the partial answer was discarded".into()),
            ("W-MODEL-011".into(), "the model endpoint [base] sent a response that is not a model answer: the stream ended before `message_stop`".into()),
        ]
    );
    // Stopped when the server's own count (message_delta) crosses the line.
    let err = provider
        .respond_metered(&conversation(), &[], 0, &mut |p, _| {
            if p.input_tokens + p.output_tokens > 60 {
                Flow::Stop {
                    reason: "over 60".into(),
                }
            } else {
                Flow::Continue
            }
        })
        .unwrap_err();
    assert_eq!(
        err,
        ModelError::Stopped {
            reason: "over 60".into(),
            usage: Usage {
                input_tokens: 30,
                output_tokens: 42
            },
            estimated: false,
        }
    );
    server.finish();
}

#[test]
fn keys_come_from_secret_references_only() {
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("openai.key");
    std::fs::write(&key_file, "sk-from-file\n").unwrap();
    let env: BTreeMap<String, String> = [("TEAM_KEY".to_owned(), "sk-from-env".to_owned())].into();

    let with = |api_key: &str| OpenAiConfig {
        api_key: Some(api_key.to_owned()),
        ..OpenAiConfig::default()
    };
    let file_ref = format!("file:{}", key_file.display());
    let from_file = openai_settings_from(&with(&file_ref), &env, "m").unwrap();
    assert_eq!(
        (from_file.api_key.as_deref(), from_file.api_key_env.as_str()),
        (Some("sk-from-file"), file_ref.as_str())
    );
    let from_env = openai_settings_from(&with("env:TEAM_KEY"), &env, "m").unwrap();
    assert_eq!(
        (from_env.api_key.as_deref(), from_env.api_key_env.as_str()),
        (Some("sk-from-env"), "TEAM_KEY")
    );
    let literal = openai_settings_from(&with("sk-pasted-into-config"), &env, "m").unwrap_err();
    assert_eq!(
        (literal.code(), literal.to_string()),
        ("W-MODEL-014", "`providers.openai.api_key` must be a secret reference, `env:NAME`, `file:PATH` or `cred:NAME`, never the key itself".to_owned())
    );
    assert!(!format!("{literal:?}").contains("sk-pasted"));
    let missing = anthropic_settings_from(
        &AnthropicConfig {
            api_key: Some("file:/nonexistent/key".into()),
            ..AnthropicConfig::default()
        },
        &env,
        "m",
    )
    .unwrap_err();
    assert!(matches!(missing, KeyError::Unreadable { .. }));
    assert_eq!(missing.code(), "W-MODEL-015");

    // An auth failure names the file, never the key.
    let server = Server::start(vec![status(
        401,
        vec![],
        json!({"error": {"message": "bad key sk-from-file"}}),
    )]);
    let mut settings = from_file;
    settings.base_url = format!("http://{}/v1", server.addr);
    let err = OpenAiProvider::new(settings)
        .respond(&conversation(), &[], 0)
        .unwrap_err();
    let text = err.to_string();
    assert!(!text.contains("sk-from-file"), "{text}");
    assert!(
        text.ends_with(&format!("check the key in the file {}", key_file.display())),
        "{text}"
    );
    server.finish();
}

/// A server that opens the stream, sends one delta and then stalls: the answer times out with
/// the provider's timeout, it does not hang.
#[test]
fn a_stalled_stream_times_out() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut socket, _) = listener.accept().unwrap();
        let mut buf = [0u8; 65536];
        let _ = socket.read(&mut buf).unwrap();
        let chunk = format!("data: {}\n\n", delta(json!({"content": "Hel"})));
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
        socket
            .write_all(format!("{head}{:x}\r\n{chunk}\r\n", chunk.len()).as_bytes())
            .unwrap();
        socket.flush().unwrap();
        std::thread::sleep(Duration::from_secs(3));
    });
    let mut provider_settings = OpenAiSettings {
        base_url: format!("http://{addr}/v1"),
        api_key: None,
        api_key_env: "OPENAI_API_KEY".into(),
        model: "gpt-test".into(),
        timeout: Duration::from_millis(500),
        stream: true,
        api_version: None,
    };
    provider_settings.timeout = Duration::from_millis(500);
    let mut grew = 0;
    let err = OpenAiProvider::new(provider_settings)
        .respond_metered(&conversation(), &[], 0, &mut |_, _| {
            grew += 1;
            Flow::Continue
        })
        .unwrap_err();
    assert_eq!(grew, 1, "the first delta arrived before the stall");
    assert_eq!(
        (err.code(), err.to_string()),
        (
            "W-MODEL-005",
            format!(
                "the model endpoint http://{addr}/v1 did not answer within 0.5s; raise the provider's timeout_ms setting or try again"
            )
        )
    );
    server.join().unwrap();
}
