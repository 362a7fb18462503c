//! The Anthropic Messages provider against a local server that speaks the documented wire
//! format (`POST /v1/messages`, `x-api-key`, `anthropic-version`, content blocks).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use warrant_core::Coded;
use warrant_core::config::AnthropicConfig;
use warrant_llm::{
    AnthropicProvider, AnthropicSettings, Conversation, Message, ModelError, ModelProvider,
    ModelResponse, ToolCall, Usage, anthropic_settings_from,
};

use super::tools;

const KEY: &str = "sk-ant-test-0123456789abcdef";

struct Canned {
    status: u16,
    headers: Vec<(&'static str, &'static str)>,
    body: String,
}

fn ok(body: Value) -> Canned {
    Canned {
        status: 200,
        headers: vec![("Content-Type", "application/json")],
        body: body.to_string(),
    }
}

fn status(status: u16, body: &str) -> Canned {
    Canned {
        status,
        headers: vec![("Content-Type", "application/json")],
        body: body.to_owned(),
    }
}

/// What the server saw of one request.
#[derive(Debug, PartialEq)]
struct Seen {
    method: String,
    url: String,
    api_key: Option<String>,
    version: Option<String>,
    content_type: Option<String>,
    authorization: Option<String>,
    body: Value,
}

struct FakeServer {
    base_url: String,
    handle: JoinHandle<Vec<Seen>>,
}

impl FakeServer {
    /// Answers requests with `answers` in order, then stops. `base_url` has no `/v1`.
    fn start(answers: Vec<Canned>) -> Self {
        let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
        let addr = server.server_addr().to_ip().unwrap();
        let handle = std::thread::spawn(move || {
            let mut seen = Vec::new();
            for answer in answers {
                let Some(mut request) = server.recv_timeout(Duration::from_secs(10)).unwrap()
                else {
                    break;
                };
                let header = |name: &'static str| {
                    request
                        .headers()
                        .iter()
                        .find(|h| h.field.equiv(name))
                        .map(|h| h.value.to_string())
                };
                let (api_key, version, content_type, authorization) = (
                    header("x-api-key"),
                    header("anthropic-version"),
                    header("Content-Type"),
                    header("Authorization"),
                );
                let mut body = String::new();
                request.as_reader().read_to_string(&mut body).unwrap();
                seen.push(Seen {
                    method: request.method().to_string(),
                    url: request.url().to_owned(),
                    api_key,
                    version,
                    content_type,
                    authorization,
                    body: serde_json::from_str(&body).unwrap_or(Value::String(body)),
                });
                let mut response =
                    tiny_http::Response::from_string(answer.body).with_status_code(answer.status);
                for (name, value) in answer.headers {
                    response.add_header(
                        tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()).unwrap(),
                    );
                }
                request.respond(response).unwrap();
            }
            seen
        });
        Self {
            base_url: format!("http://{addr}"),
            handle,
        }
    }

    fn finish(self) -> Vec<Seen> {
        self.handle.join().unwrap()
    }
}

fn settings(base_url: &str, api_key: Option<&str>) -> AnthropicSettings {
    AnthropicSettings {
        base_url: base_url.to_owned(),
        api_key: api_key.map(str::to_owned),
        api_key_env: "ANTHROPIC_API_KEY".into(),
        model: "claude-test".into(),
        max_tokens: 4096,
        timeout: Duration::from_secs(10),
        // The non-streaming wire format; streaming has its own suite.
        stream: false,
    }
}

/// A provider whose waits are recorded instead of slept.
fn provider(
    base_url: &str,
    api_key: Option<&str>,
) -> (AnthropicProvider, Arc<Mutex<Vec<Duration>>>) {
    let waits = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&waits);
    let provider = AnthropicProvider::new(settings(base_url, api_key))
        .with_sleep(move |d| record.lock().unwrap().push(d));
    (provider, waits)
}

/// A user question, an assistant turn with text and two calls, and both results.
fn conversation() -> Conversation {
    Conversation {
        system: "You are careful.".into(),
        messages: vec![
            Message::User {
                content: "What is in the repository?".into(),
            },
            Message::Assistant {
                text: Some("Let me look.".into()),
                calls: vec![
                    ToolCall {
                        id: "toolu_1".into(),
                        name: "list_dir".into(),
                        arguments: json!({ "path": "." }),
                    },
                    ToolCall {
                        id: "toolu_2".into(),
                        name: "read_file".into(),
                        // Not an object: sent as given; the schema check refused it already.
                        arguments: Value::String("{\"path\": ".into()),
                    },
                ],
            },
            Message::Tool {
                call_id: "toolu_1".into(),
                name: "list_dir".into(),
                content: "README.md\nsrc/".into(),
            },
            Message::Tool {
                call_id: "toolu_2".into(),
                name: "read_file".into(),
                content: "refused: input does not match the schema".into(),
            },
        ],
    }
}

fn text_message(text: &str) -> Value {
    json!({
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test-20250101",
        "content": [{ "type": "text", "text": text }],
        "stop_reason": "end_turn",
        "stop_sequence": null,
        "usage": { "input_tokens": 11, "output_tokens": 3 }
    })
}

fn text_response(text: &str) -> ModelResponse {
    ModelResponse {
        text: Some(text.into()),
        calls: vec![],
        usage: Some(Usage {
            input_tokens: 11,
            output_tokens: 3,
        }),
        model: "claude-test-20250101".into(),
    }
}

fn error_body(kind: &str, message: &str) -> String {
    json!({ "type": "error", "error": { "type": kind, "message": message } }).to_string()
}

/// Error messages name the server's random port; snapshots see `[base]`.
fn message_of(err: &ModelError, base_url: &str) -> String {
    format!("{}: {err}", err.code()).replace(base_url, "[base]")
}

#[test]
fn sends_the_documented_request_and_reads_the_answer() {
    let server = FakeServer::start(vec![ok(text_message("A README and src/."))]);
    let (provider, waits) = provider(&server.base_url, Some(KEY));
    let answer = provider.respond(&conversation(), &tools()[..2], 4).unwrap();
    assert_eq!(answer, text_response("A README and src/."));
    assert_eq!(
        provider.describe(),
        format!("anthropic:claude-test at {}", server.base_url)
    );
    let seen = server.finish();
    assert_eq!(
        seen,
        vec![Seen {
            method: "POST".into(),
            url: "/v1/messages".into(),
            api_key: Some(KEY.into()),
            version: Some("2023-06-01".into()),
            content_type: Some("application/json".into()),
            authorization: None,
            body: json!({
                "model": "claude-test",
                "max_tokens": 4096,
                "system": "You are careful.",
                "messages": [
                    { "role": "user", "content": "What is in the repository?" },
                    {
                        "role": "assistant",
                        "content": [
                            { "type": "text", "text": "Let me look." },
                            { "type": "tool_use", "id": "toolu_1", "name": "list_dir",
                              "input": { "path": "." } },
                            { "type": "tool_use", "id": "toolu_2", "name": "read_file",
                              "input": "{\"path\": " }
                        ]
                    },
                    {
                        "role": "user",
                        "content": [
                            { "type": "tool_result", "tool_use_id": "toolu_1",
                              "content": "README.md\nsrc/" },
                            { "type": "tool_result", "tool_use_id": "toolu_2",
                              "content": "refused: input does not match the schema" }
                        ]
                    }
                ],
                "tools": [
                    {
                        "name": "read_file",
                        "description": "Read a file",
                        "input_schema": {
                            "type": "object",
                            "properties": { "path": { "type": "string" } },
                            "required": ["path"],
                            "additionalProperties": false
                        }
                    },
                    {
                        "name": "list_dir",
                        "description": "List a directory",
                        "input_schema": {
                            "type": "object",
                            "properties": { "path": { "type": "string" } },
                            "required": ["path"],
                            "additionalProperties": false
                        }
                    }
                ]
            }),
        }]
    );
    assert!(waits.lock().unwrap().is_empty());
}

#[test]
fn without_tools_system_or_key_the_request_omits_them_and_turns_alternate() {
    let server = FakeServer::start(vec![ok(text_message("hi"))]);
    let (provider, _) = provider(&server.base_url, None);
    let conversation = Conversation {
        system: String::new(),
        messages: vec![
            Message::User {
                content: "hello".into(),
            },
            // An empty assistant turn is dropped: the API refuses empty content.
            Message::Assistant {
                text: Some(String::new()),
                calls: vec![],
            },
            Message::User {
                content: "still there?".into(),
            },
        ],
    };
    provider.respond(&conversation, &[], 0).unwrap();
    let seen = server.finish();
    assert_eq!(seen[0].api_key, None);
    assert_eq!(
        seen[0].body,
        json!({
            "model": "claude-test",
            "max_tokens": 4096,
            "messages": [{
                "role": "user",
                "content": [
                    { "type": "text", "text": "hello" },
                    { "type": "text", "text": "still there?" }
                ]
            }]
        })
    );
}

#[test]
fn text_and_two_tool_uses_come_back_in_order() {
    let server = FakeServer::start(vec![ok(json!({
        "id": "msg_2",
        "type": "message",
        "role": "assistant",
        "model": "claude-test-20250101",
        "content": [
            { "type": "text", "text": "I'll list the directory " },
            { "type": "text", "text": "and read the README." },
            { "type": "tool_use", "id": "toolu_a", "name": "list_dir", "input": { "path": "." } },
            { "type": "tool_use", "id": "toolu_b", "name": "read_file",
              "input": { "path": "README.md" } }
        ],
        "stop_reason": "tool_use",
        "stop_sequence": null,
        "usage": { "input_tokens": 20, "output_tokens": 9 }
    }))]);
    let (provider, _) = provider(&server.base_url, Some(KEY));
    let answer = provider.respond(&conversation(), &tools(), 0).unwrap();
    assert_eq!(
        answer,
        ModelResponse {
            text: Some("I'll list the directory and read the README.".into()),
            calls: vec![
                ToolCall {
                    id: "toolu_a".into(),
                    name: "list_dir".into(),
                    arguments: json!({ "path": "." }),
                },
                ToolCall {
                    id: "toolu_b".into(),
                    name: "read_file".into(),
                    arguments: json!({ "path": "README.md" }),
                },
            ],
            usage: Some(Usage {
                input_tokens: 20,
                output_tokens: 9,
            }),
            model: "claude-test-20250101".into(),
        }
    );
    assert_eq!(server.finish().len(), 1);
}

#[test]
fn a_refused_key_names_the_variable_and_never_the_key() {
    let body = error_body("authentication_error", &format!("invalid x-api-key: {KEY}"));
    let server = FakeServer::start(vec![status(401, &body)]);
    let (provider, waits) = provider(&server.base_url, Some(KEY));
    let err = provider.respond(&conversation(), &tools(), 0).unwrap_err();
    assert_eq!(
        err,
        ModelError::Authentication {
            base_url: server.base_url.clone(),
            status: 401,
            key_env: "ANTHROPIC_API_KEY".into(),
            message: "invalid x-api-key: [redacted] (type: authentication_error)".into(),
        }
    );
    let shown = format!("{err} {err:?} {provider:?}");
    assert!(!shown.contains(KEY), "{shown}");
    insta::assert_snapshot!(message_of(&err, &server.base_url));
    assert_eq!(
        server.finish().len(),
        1,
        "authentication errors are not retried"
    );
    assert!(waits.lock().unwrap().is_empty());
}

#[test]
fn overloaded_is_retried_after_the_servers_wait() {
    let overloaded = Canned {
        status: 529,
        headers: vec![("retry-after", "0")],
        body: error_body("overloaded_error", "Overloaded"),
    };
    let server = FakeServer::start(vec![overloaded, ok(text_message("ok"))]);
    let (provider, waits) = provider(&server.base_url, Some(KEY));
    let answer = provider.respond(&conversation(), &tools(), 0).unwrap();
    assert_eq!(answer, text_response("ok"));
    let seen = server.finish();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0], seen[1], "the retry sends the same request");
    assert_eq!(*waits.lock().unwrap(), vec![Duration::ZERO]);
}

#[test]
fn rate_limits_and_server_errors_give_up_after_three_attempts() {
    let limited = || Canned {
        status: 429,
        headers: vec![("retry-after", "3600")],
        body: error_body(
            "rate_limit_error",
            "Number of request tokens has exceeded your rate limit",
        ),
    };
    let server = FakeServer::start(vec![
        limited(),
        status(500, &error_body("api_error", "Internal server error")),
        status(529, &error_body("overloaded_error", "Overloaded")),
    ]);
    let (provider, waits) = provider(&server.base_url, Some(KEY));
    let err = provider.respond(&conversation(), &tools(), 0).unwrap_err();
    assert_eq!(
        err,
        ModelError::Server {
            base_url: server.base_url.clone(),
            status: 529,
            attempts: 3,
            message: "Overloaded (type: overloaded_error)".into(),
        }
    );
    assert_eq!(server.finish().len(), 3);
    // The server's hour is capped; the 500 without retry-after backs off 1 s.
    assert_eq!(
        *waits.lock().unwrap(),
        vec![Duration::from_secs(10), Duration::from_secs(1)]
    );
}

#[test]
fn other_failures_are_specific_and_coded() {
    let server = FakeServer::start(vec![
        status(404, &error_body("not_found_error", "model: claude-test")),
        status(
            400,
            &error_body(
                "invalid_request_error",
                "messages.1.content.1.tool_use.input: Input should be a valid dictionary",
            ),
        ),
        status(200, "{\"content\": [ {\"type\": "),
        ok(json!({ "model": "m", "role": "assistant" })),
        ok(json!({
            "model": "m", "content": [], "stop_reason": "max_tokens",
            "usage": { "input_tokens": 1, "output_tokens": 4096 }
        })),
    ]);
    let (failing, _) = provider(&server.base_url, Some(KEY));
    let mut report = Vec::new();
    for _ in 0..5 {
        let err = failing.respond(&conversation(), &tools(), 0).unwrap_err();
        report.push(message_of(&err, &server.base_url));
    }
    assert_eq!(server.finish().len(), 5);
    insta::assert_snapshot!(report.join("\n"));
}

#[test]
fn settings_come_from_config_then_env_then_defaults() {
    let env: BTreeMap<String, String> = [
        ("ANTHROPIC_BASE_URL", "http://env.example/v1/"),
        ("ANTHROPIC_API_KEY", "sk-ant-default"),
        ("TEAM_KEY", "sk-ant-team"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();

    let from_env = anthropic_settings_from(&AnthropicConfig::default(), &env, "m").unwrap();
    assert_eq!(
        from_env,
        AnthropicSettings {
            // A `/v1` given out of habit is dropped: the path adds it.
            base_url: "http://env.example".into(),
            api_key: Some("sk-ant-default".into()),
            api_key_env: "ANTHROPIC_API_KEY".into(),
            model: "m".into(),
            max_tokens: 4096,
            timeout: Duration::from_secs(120),
            stream: true,
        }
    );

    let config = AnthropicConfig {
        base_url: Some("http://config.example".into()),
        api_key_env: Some("TEAM_KEY".into()),
        timeout_ms: Some(5_000),
        max_tokens: Some(1024),
        api_key: None,
        stream: Some(false),
    };
    assert_eq!(
        anthropic_settings_from(&config, &env, "m").unwrap(),
        AnthropicSettings {
            base_url: "http://config.example".into(),
            api_key: Some("sk-ant-team".into()),
            api_key_env: "TEAM_KEY".into(),
            model: "m".into(),
            max_tokens: 1024,
            timeout: Duration::from_secs(5),
            stream: false,
        }
    );

    let bare = anthropic_settings_from(&AnthropicConfig::default(), &BTreeMap::new(), "m").unwrap();
    assert_eq!(
        (bare.base_url.as_str(), bare.api_key),
        ("https://api.anthropic.com", None)
    );

    let debug = format!("{from_env:?}");
    assert!(!debug.contains("sk-ant-default"), "{debug}");
    assert!(debug.contains("[redacted]"), "{debug}");
}

#[test]
fn the_provider_can_be_shared_across_threads() {
    fn shareable<T: Send + Sync + 'static>() {}
    shareable::<AnthropicProvider>();
}
