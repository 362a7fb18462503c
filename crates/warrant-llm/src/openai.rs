//! OpenAI-compatible chat completions (`POST {base_url}/chat/completions`), synchronous over ureq.
//! Retries 429 and 5xx with capped backoff; everything else fails at once with a coded error.
//! Streams by default (`openai_stream` reads the events), or reads one JSON answer when
//! `stream = false`. Azure-style endpoints (`api_version` set) get `?api-version=` and an
//! `api-key` header. No parallel-tool-call switches, no other vendor extensions. The API key
//! never reaches an error message or Debug output.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use warrant_core::ToolSpec;
use warrant_core::config::OpenAiConfig;

use crate::error::ModelError;
use crate::openai_stream::{OpenAiStream, Step, StreamFault};
use crate::secret::{KeyError, resolve_key};
use crate::stream::{OnProgress, StreamProgress};
use crate::types::{Conversation, Message, ModelProvider, ModelResponse, ToolCall, Usage};
use crate::wire::{Accumulate, Endpoint, Opened, Reply};

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
pub const DEFAULT_KEY_ENV: &str = "OPENAI_API_KEY";
pub const BASE_URL_ENV: &str = "OPENAI_BASE_URL";
/// Long completions can take minutes; a shorter default would cut off honest answers.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// Attempts per call, including the first.
pub(crate) const MAX_ATTEMPTS: u32 = 3;
const BACKOFF_BASE: Duration = Duration::from_millis(500);
/// A server asking for a longer wait than this still gets only this: the run should fail
/// visibly rather than hang.
const MAX_WAIT: Duration = Duration::from_secs(10);
/// Enough of an unexpected body to diagnose it, not enough to flood a terminal.
const BODY_EXCERPT: usize = 300;
pub(crate) const REDACTED: &str = "[redacted]";

/// Everything needed to call one model at one endpoint.
#[derive(Clone, PartialEq, Eq)]
pub struct OpenAiSettings {
    /// Including `/v1`, as the official SDKs expect.
    pub base_url: String,
    pub api_key: Option<String>,
    /// The environment variable the key came from, named in authentication errors.
    pub api_key_env: String,
    pub model: String,
    pub timeout: Duration,
    /// Ask for a streamed answer (`"stream": true`).
    pub stream: bool,
    /// Azure-style endpoint: `?api-version=` on the URL and the key in an `api-key` header.
    pub api_version: Option<String>,
}

impl fmt::Debug for OpenAiSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiSettings")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| REDACTED))
            .field("api_key_env", &self.api_key_env)
            .field("model", &self.model)
            .field("timeout", &self.timeout)
            .field("stream", &self.stream)
            .field("api_version", &self.api_version)
            .finish()
    }
}

/// Settings from configuration and the environment: `base_url` from config, else
/// `OPENAI_BASE_URL`, else the public endpoint; the key from the secret reference `api_key`
/// (`env:NAME` or `file:PATH`), else the variable named by `api_key_env`, else
/// `OPENAI_API_KEY`. Empty values count as unset. Streaming unless `stream = false`.
pub fn openai_settings_from(
    config: &OpenAiConfig,
    env: &BTreeMap<String, String>,
    model: &str,
) -> Result<OpenAiSettings, KeyError> {
    let non_empty = |v: &String| !v.trim().is_empty();
    let base_url = config
        .base_url
        .clone()
        .filter(non_empty)
        .or_else(|| env.get(BASE_URL_ENV).cloned().filter(non_empty))
        .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
    let api_key_env = config
        .api_key_env
        .clone()
        .filter(non_empty)
        .unwrap_or_else(|| DEFAULT_KEY_ENV.to_owned());
    let key = resolve_key(
        "providers.openai.api_key",
        config.api_key.as_deref(),
        &api_key_env,
        env,
    )?;
    Ok(OpenAiSettings {
        base_url: base_url.trim().trim_end_matches('/').to_owned(),
        api_key: key.value,
        api_key_env: key.source,
        model: model.to_owned(),
        timeout: config
            .timeout_ms
            .map_or(DEFAULT_TIMEOUT, Duration::from_millis),
        stream: config.stream.unwrap_or(true),
        api_version: config.api_version.clone().filter(non_empty),
    })
}

/// Where Ollama listens unless `OLLAMA_HOST` says otherwise.
pub const OLLAMA_DEFAULT_HOST: &str = "http://localhost:11434";
pub const OLLAMA_HOST_ENV: &str = "OLLAMA_HOST";

/// Settings for `ollama:MODEL`: Ollama's OpenAI-compatible endpoint at `OLLAMA_HOST` (as the
/// Ollama CLI reads it: `host`, `host:port` or a URL; the port defaults to 11434) plus `/v1`.
/// Ollama needs no key; streaming as for any compatible server.
pub fn ollama_settings_from(
    config: &warrant_core::config::OllamaConfig,
    env: &BTreeMap<String, String>,
    model: &str,
) -> OpenAiSettings {
    let host = config
        .base_url
        .as_ref()
        .or_else(|| env.get(OLLAMA_HOST_ENV))
        .map(|h| h.trim().trim_end_matches('/'))
        .filter(|h| !h.is_empty())
        .map_or_else(
            || OLLAMA_DEFAULT_HOST.to_owned(),
            |h| {
                let url = if h.contains("://") {
                    h.to_owned()
                } else {
                    format!("http://{h}")
                };
                // A port is present when the part after the scheme ends in `:digits`.
                let after_scheme = url.split_once("://").map_or(url.as_str(), |(_, rest)| rest);
                let has_port = after_scheme.rsplit_once(':').is_some_and(|(_, port)| {
                    !port.is_empty() && port.chars().all(|c| c.is_ascii_digit())
                });
                if has_port {
                    url
                } else {
                    format!("{url}:11434")
                }
            },
        );
    OpenAiSettings {
        base_url: format!("{host}/v1"),
        api_key: None,
        api_key_env: OLLAMA_HOST_ENV.to_owned(),
        model: model.to_owned(),
        timeout: DEFAULT_TIMEOUT,
        stream: true,
        api_version: None,
    }
}

type Sleep = Arc<dyn Fn(Duration) + Send + Sync>;

pub struct OpenAiProvider {
    settings: OpenAiSettings,
    agent: ureq::Agent,
    sleep: Sleep,
}

impl fmt::Debug for OpenAiProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiProvider")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl OpenAiProvider {
    pub fn new(settings: OpenAiSettings) -> Self {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(settings.timeout))
            // Statuses are answers we classify ourselves (auth, not found, retry).
            .http_status_as_error(false)
            .build();
        Self {
            agent: ureq::Agent::new_with_config(config),
            settings,
            sleep: Arc::new(std::thread::sleep),
        }
    }

    /// Replace how the provider waits between attempts (tests record instead of sleeping).
    #[must_use]
    pub fn with_sleep(mut self, sleep: impl Fn(Duration) + Send + Sync + 'static) -> Self {
        self.sleep = Arc::new(sleep);
        self
    }

    pub fn settings(&self) -> &OpenAiSettings {
        &self.settings
    }

    fn url(&self) -> String {
        match &self.settings.api_version {
            Some(version) => format!(
                "{}/chat/completions?api-version={version}",
                self.settings.base_url
            ),
            None => format!("{}/chat/completions", self.settings.base_url),
        }
    }

    fn endpoint(&self) -> Endpoint<'_> {
        Endpoint {
            base_url: &self.settings.base_url,
            model: &self.settings.model,
            api_key: self.settings.api_key.as_deref(),
            api_key_env: &self.settings.api_key_env,
            timeout: self.settings.timeout,
            error_message,
        }
    }

    fn request(&self) -> ureq::RequestBuilder<ureq::typestate::WithBody> {
        let mut request = self.agent.post(self.url()).content_type("application/json");
        if let Some(key) = &self.settings.api_key {
            request = match self.settings.api_version {
                Some(_) => request.header("api-key", key.as_str()),
                None => request.header("Authorization", format!("Bearer {key}")),
            };
        }
        request
    }

    fn send_once(&self, body: &str) -> Result<Reply, ModelError> {
        self.endpoint().send(self.request(), body)
    }

    fn respond_streaming(
        &self,
        conversation: &Conversation,
        tools: &[ToolSpec],
        on_progress: OnProgress<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let mut body = request_body(&self.settings.model, conversation, tools);
        if let Some(map) = body.as_object_mut() {
            map.insert("stream".to_owned(), json!(true));
            // Usage then arrives in a last chunk; servers that ignore it send none.
            map.insert("stream_options".to_owned(), json!({"include_usage": true}));
        }
        let body = body.to_string();
        let endpoint = self.endpoint();
        let opened =
            endpoint.retrying(&*self.sleep, || endpoint.open_stream(self.request(), &body))?;
        match opened {
            Opened::Json(text) => {
                let response = parse_response(&text, &self.settings.model)
                    .map_err(|message| endpoint.malformed(&message))?;
                crate::types::report_final(response, on_progress)
            }
            Opened::Events(events) => {
                let mut acc = OpenAiStream::for_request(body.len());
                endpoint.read_stream(events, &mut acc, on_progress)?;
                acc.finish(&self.settings.model)
                    .map_err(|message| endpoint.malformed(&message))
            }
        }
    }
}

impl Accumulate for OpenAiStream {
    fn feed(&mut self, event: &str, data: &str) -> Result<Step, StreamFault> {
        OpenAiStream::feed(self, event, data)
    }
    fn progress(&self) -> StreamProgress {
        OpenAiStream::progress(self)
    }
    fn take_text(&mut self) -> String {
        OpenAiStream::take_text(self)
    }
}

impl ModelProvider for OpenAiProvider {
    fn describe(&self) -> String {
        format!(
            "openai:{} at {}",
            self.settings.model, self.settings.base_url
        )
    }

    fn respond(
        &self,
        conversation: &Conversation,
        tools: &[ToolSpec],
        turn: u32,
    ) -> Result<ModelResponse, ModelError> {
        self.respond_metered(conversation, tools, turn, &mut |_, _| {
            crate::stream::Flow::Continue
        })
    }

    fn respond_metered(
        &self,
        conversation: &Conversation,
        tools: &[ToolSpec],
        _turn: u32,
        on_progress: OnProgress<'_>,
    ) -> Result<ModelResponse, ModelError> {
        if self.settings.stream {
            return self.respond_streaming(conversation, tools, on_progress);
        }
        let body = request_body(&self.settings.model, conversation, tools).to_string();
        let endpoint = self.endpoint();
        let text = endpoint.with_retries(&*self.sleep, || self.send_once(&body))?;
        let response = parse_response(&text, &self.settings.model)
            .map_err(|message| endpoint.malformed(&message))?;
        crate::types::report_final(response, on_progress)
    }
}

/// `Retry-After` in seconds when the server gave one, else 0.5 s, 1 s, 2 s…; capped either way.
/// (The HTTP-date form of `Retry-After` is rare on these APIs and falls back to backoff.)
pub(crate) fn wait_before_retry(attempt: u32, retry_after: Option<&str>) -> Duration {
    let backoff = BACKOFF_BASE.saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)));
    retry_after
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(backoff, Duration::from_secs)
        .min(MAX_WAIT)
}

/// The documented error body `{"error": {"message", "type", "code"}}`, else an excerpt of the
/// body as it came.
fn error_message(body: &str) -> String {
    #[derive(Deserialize)]
    struct Envelope {
        error: ErrorBody,
    }
    #[derive(Deserialize)]
    struct ErrorBody {
        message: Option<String>,
        #[serde(rename = "type")]
        kind: Option<String>,
        code: Option<Value>,
    }
    let Ok(Envelope { error }) = serde_json::from_str::<Envelope>(body) else {
        return excerpt(body);
    };
    let mut message = error.message.unwrap_or_else(|| "no message".to_owned());
    let mut details = Vec::new();
    if let Some(kind) = error.kind {
        details.push(format!("type: {kind}"));
    }
    match error.code {
        Some(Value::String(code)) => details.push(format!("code: {code}")),
        Some(Value::Number(code)) => details.push(format!("code: {code}")),
        Some(Value::Null | Value::Bool(_) | Value::Array(_) | Value::Object(_)) | None => {}
    }
    if !details.is_empty() {
        message = format!("{message} ({})", details.join(", "));
    }
    message
}

pub(crate) fn excerpt(body: &str) -> String {
    let body = body.trim();
    if body.is_empty() {
        return "empty body".to_owned();
    }
    match body.char_indices().nth(BODY_EXCERPT) {
        Some((cut, _)) => format!("{}…", &body[..cut]),
        None => body.to_owned(),
    }
}

/// The request body, exactly as sent.
pub fn request_body(model: &str, conversation: &Conversation, tools: &[ToolSpec]) -> Value {
    let mut messages = Vec::with_capacity(conversation.messages.len() + 1);
    // An empty system message carries nothing and some servers reject it.
    if !conversation.system.is_empty() {
        messages.push(json!({ "role": "system", "content": conversation.system }));
    }
    for message in &conversation.messages {
        messages.push(wire_message(message));
    }
    let mut body = Map::new();
    body.insert("model".to_owned(), json!(model));
    body.insert("messages".to_owned(), Value::Array(messages));
    // The API refuses an empty `tools` array, and `tool_choice` without tools.
    if !tools.is_empty() {
        let tools: Vec<Value> = tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.input_schema,
                    }
                })
            })
            .collect();
        body.insert("tools".to_owned(), Value::Array(tools));
        body.insert("tool_choice".to_owned(), json!("auto"));
    }
    Value::Object(body)
}

fn wire_message(message: &Message) -> Value {
    match message {
        Message::User { content } => json!({ "role": "user", "content": content }),
        Message::Assistant { text, calls } => {
            let mut m = Map::new();
            m.insert("role".to_owned(), json!("assistant"));
            m.insert("content".to_owned(), json!(text));
            // The API refuses an empty `tool_calls` array.
            if !calls.is_empty() {
                let calls: Vec<Value> = calls
                    .iter()
                    .map(|c| {
                        json!({
                            "id": c.id,
                            "type": "function",
                            "function": { "name": c.name, "arguments": wire_arguments(&c.arguments) },
                        })
                    })
                    .collect();
                m.insert("tool_calls".to_owned(), Value::Array(calls));
            }
            Value::Object(m)
        }
        Message::Tool {
            call_id,
            name: _,
            content,
        } => json!({ "role": "tool", "tool_call_id": call_id, "content": content }),
    }
}

/// Arguments travel as a JSON string. A string value is what we kept when the model's own
/// arguments did not parse, so it goes back verbatim: the model sees what it wrote.
fn wire_arguments(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::Array(_) | Value::Object(_) => {
            arguments.to_string()
        }
    }
}

#[derive(Deserialize)]
struct Completion {
    model: Option<String>,
    choices: Vec<Choice>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct Choice {
    message: WireMessage,
}

#[derive(Deserialize)]
struct WireMessage {
    content: Option<String>,
    /// Newer models say why they decline here instead of in `content`.
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireCall>>,
}

#[derive(Deserialize)]
struct WireCall {
    id: String,
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    name: String,
    arguments: String,
}

#[derive(Deserialize)]
struct WireUsage {
    prompt_tokens: u64,
    completion_tokens: u64,
}

/// Parse a 2xx body. The error is a message for [`ModelError::MalformedResponse`].
fn parse_response(body: &str, requested_model: &str) -> Result<ModelResponse, String> {
    let completion: Completion =
        serde_json::from_str(body).map_err(|e| format!("{e}; body starts: {}", excerpt(body)))?;
    let Some(choice) = completion.choices.into_iter().next() else {
        return Err("`choices` is empty".to_owned());
    };
    let WireMessage {
        content,
        refusal,
        tool_calls,
    } = choice.message;
    let calls = tool_calls
        .unwrap_or_default()
        .into_iter()
        .map(|c| ToolCall {
            id: c.id,
            name: c.function.name,
            // Unparseable arguments stay a string, which no object schema accepts, so the
            // caller refuses the call instead of guessing what was meant.
            arguments: serde_json::from_str(&c.function.arguments)
                .unwrap_or(Value::String(c.function.arguments)),
        })
        .collect();
    Ok(ModelResponse {
        text: content.filter(|t| !t.is_empty()).or(refusal),
        calls,
        usage: completion.usage.map(|u| Usage {
            input_tokens: u.prompt_tokens,
            output_tokens: u.completion_tokens,
        }),
        model: completion
            .model
            .unwrap_or_else(|| requested_model.to_owned()),
    })
}
