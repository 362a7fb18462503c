//! The Anthropic Messages API (`POST {base_url}/v1/messages`), synchronous over ureq.
//! Same shape as the OpenAI provider: retries 429, 529 (overloaded) and other 5xx with capped
//! backoff honouring `retry-after`; everything else fails at once with a coded error. Streams
//! by default (`anthropic_stream` reads the events); `stream = false` reads one JSON answer.
//! The API key never reaches an error message or Debug output.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use warrant_core::ToolSpec;
use warrant_core::config::AnthropicConfig;

use crate::anthropic_stream::AnthropicStream;
use crate::error::ModelError;
use crate::openai::{REDACTED, excerpt};
use crate::openai_stream::{Step, StreamFault};
use crate::secret::{KeyError, resolve_key};
use crate::stream::{OnProgress, StreamProgress};
use crate::types::{Conversation, Message, ModelProvider, ModelResponse, ToolCall, Usage};
use crate::wire::{Accumulate, Endpoint, Opened, Reply};

/// Without `/v1`, as the official SDKs expect; the path adds it.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
pub const DEFAULT_KEY_ENV: &str = "ANTHROPIC_API_KEY";
pub const BASE_URL_ENV: &str = "ANTHROPIC_BASE_URL";
pub const API_VERSION: &str = "2023-06-01";
/// The API requires `max_tokens`; this is enough for a tool-using turn with some prose.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// Everything needed to call one model at one endpoint.
#[derive(Clone, PartialEq, Eq)]
pub struct AnthropicSettings {
    /// Without `/v1`.
    pub base_url: String,
    pub api_key: Option<String>,
    /// The environment variable the key came from, named in authentication errors.
    pub api_key_env: String,
    pub model: String,
    pub max_tokens: u32,
    pub timeout: Duration,
    /// Ask for a streamed answer (`"stream": true`).
    pub stream: bool,
}

impl fmt::Debug for AnthropicSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicSettings")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| REDACTED))
            .field("api_key_env", &self.api_key_env)
            .field("model", &self.model)
            .field("max_tokens", &self.max_tokens)
            .field("timeout", &self.timeout)
            .field("stream", &self.stream)
            .finish()
    }
}

/// Settings from configuration and the environment: `base_url` from config, else
/// `ANTHROPIC_BASE_URL`, else the public endpoint; the key from the variable named by
/// `api_key_env`, else `ANTHROPIC_API_KEY` (or the secret reference `api_key`: `env:NAME`,
/// `file:PATH`). Empty values count as unset. A trailing `/v1` on the base URL is dropped,
/// since the path adds it. Streaming unless `stream = false`.
pub fn anthropic_settings_from(
    config: &AnthropicConfig,
    env: &BTreeMap<String, String>,
    model: &str,
) -> Result<AnthropicSettings, KeyError> {
    let non_empty = |v: &String| !v.trim().is_empty();
    let base_url = config
        .base_url
        .clone()
        .filter(non_empty)
        .or_else(|| env.get(BASE_URL_ENV).cloned().filter(non_empty))
        .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
    let base_url = base_url.trim().trim_end_matches('/');
    let base_url = base_url.strip_suffix("/v1").unwrap_or(base_url);
    let api_key_env = config
        .api_key_env
        .clone()
        .filter(non_empty)
        .unwrap_or_else(|| DEFAULT_KEY_ENV.to_owned());
    let key = resolve_key(
        "providers.anthropic.api_key",
        config.api_key.as_deref(),
        &api_key_env,
        env,
    )?;
    Ok(AnthropicSettings {
        base_url: base_url.to_owned(),
        api_key: key.value,
        api_key_env: key.source,
        model: model.to_owned(),
        max_tokens: config
            .max_tokens
            .filter(|n| *n > 0)
            .unwrap_or(DEFAULT_MAX_TOKENS),
        timeout: config
            .timeout_ms
            .map_or(DEFAULT_TIMEOUT, Duration::from_millis),
        stream: config.stream.unwrap_or(true),
    })
}

type Sleep = Arc<dyn Fn(Duration) + Send + Sync>;

pub struct AnthropicProvider {
    settings: AnthropicSettings,
    agent: ureq::Agent,
    sleep: Sleep,
}

impl fmt::Debug for AnthropicProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicProvider")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl AnthropicProvider {
    pub fn new(settings: AnthropicSettings) -> Self {
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

    pub fn settings(&self) -> &AnthropicSettings {
        &self.settings
    }

    fn url(&self) -> String {
        format!("{}/v1/messages", self.settings.base_url)
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
        let mut request = self
            .agent
            .post(self.url())
            .content_type("application/json")
            .header("anthropic-version", API_VERSION);
        if let Some(key) = &self.settings.api_key {
            request = request.header("x-api-key", key.as_str());
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
        let mut body = request_body(
            &self.settings.model,
            self.settings.max_tokens,
            conversation,
            tools,
        );
        if let Some(map) = body.as_object_mut() {
            map.insert("stream".to_owned(), json!(true));
        }
        let body = body.to_string();
        let endpoint = self.endpoint();
        let opened =
            endpoint.retrying(&*self.sleep, || endpoint.open_stream(self.request(), &body))?;
        match opened {
            Opened::Json(text) => {
                let response =
                    parse_response(&text, &self.settings.model, self.settings.max_tokens)
                        .map_err(|message| endpoint.malformed(&message))?;
                crate::types::report_final(response, on_progress)
            }
            Opened::Events(events) => {
                let mut acc = AnthropicStream::default();
                endpoint.read_stream(events, &mut acc, on_progress)?;
                acc.finish(&self.settings.model, self.settings.max_tokens)
                    .map_err(|message| endpoint.malformed(&message))
            }
        }
    }
}

impl Accumulate for AnthropicStream {
    fn feed(&mut self, event: &str, data: &str) -> Result<Step, StreamFault> {
        AnthropicStream::feed(self, event, data)
    }
    fn progress(&self) -> StreamProgress {
        AnthropicStream::progress(self)
    }
    fn take_text(&mut self) -> String {
        AnthropicStream::take_text(self)
    }
}

impl ModelProvider for AnthropicProvider {
    fn describe(&self) -> String {
        format!(
            "anthropic:{} at {}",
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
        let body = request_body(
            &self.settings.model,
            self.settings.max_tokens,
            conversation,
            tools,
        )
        .to_string();
        let endpoint = self.endpoint();
        let text = endpoint.with_retries(&*self.sleep, || self.send_once(&body))?;
        let response = parse_response(&text, &self.settings.model, self.settings.max_tokens)
            .map_err(|message| endpoint.malformed(&message))?;
        crate::types::report_final(response, on_progress)
    }
}

/// The documented error body `{"type": "error", "error": {"type", "message"}}`, else an
/// excerpt of the body as it came.
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
    }
    let Ok(Envelope { error }) = serde_json::from_str::<Envelope>(body) else {
        return excerpt(body);
    };
    let message = error.message.unwrap_or_else(|| "no message".to_owned());
    match error.kind {
        Some(kind) => format!("{message} (type: {kind})"),
        None => message,
    }
}

/// The request body, exactly as sent.
///
/// Our messages map onto strictly alternating `user` / `assistant` turns: tool results (and
/// any user text right after them) join one `user` turn of `tool_result` blocks, an assistant
/// turn is its text then its `tool_use` blocks, and an assistant turn with neither is dropped
/// (the API refuses empty content).
pub fn request_body(
    model: &str,
    max_tokens: u32,
    conversation: &Conversation,
    tools: &[ToolSpec],
) -> Value {
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in &conversation.messages {
        let (role, blocks) = wire_blocks(message);
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(blocks),
            Some(_) | None => turns.push((role, blocks)),
        }
    }
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|(role, blocks)| json!({ "role": role, "content": wire_content(blocks) }))
        .collect();
    let mut body = Map::new();
    body.insert("model".to_owned(), json!(model));
    body.insert("max_tokens".to_owned(), json!(max_tokens));
    // An empty system prompt carries nothing.
    if !conversation.system.is_empty() {
        body.insert("system".to_owned(), json!(conversation.system));
    }
    body.insert("messages".to_owned(), Value::Array(messages));
    if !tools.is_empty() {
        let tools: Vec<Value> = tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "description": t.description,
                    "input_schema": t.input_schema,
                })
            })
            .collect();
        body.insert("tools".to_owned(), Value::Array(tools));
    }
    Value::Object(body)
}

fn wire_blocks(message: &Message) -> (&'static str, Vec<Value>) {
    match message {
        Message::User { content } => ("user", vec![json!({ "type": "text", "text": content })]),
        Message::Assistant { text, calls } => {
            let mut blocks = Vec::with_capacity(calls.len() + 1);
            // The API refuses empty text blocks.
            if let Some(text) = text.as_ref().filter(|t| !t.is_empty()) {
                blocks.push(json!({ "type": "text", "text": text }));
            }
            for call in calls {
                // The arguments as the model sent them: a non-object goes back as it is, and
                // the caller's schema check has already refused that call.
                blocks.push(json!({
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.name,
                    "input": call.arguments,
                }));
            }
            ("assistant", blocks)
        }
        Message::Tool {
            call_id,
            name: _,
            content,
        } => (
            "user",
            vec![json!({ "type": "tool_result", "tool_use_id": call_id, "content": content })],
        ),
    }
}

/// A turn of one text block is sent as a plain string, the API's short form.
fn wire_content(blocks: Vec<Value>) -> Value {
    if let [only] = blocks.as_slice()
        && let (Some("text"), Some(text)) = (
            only.get("type").and_then(Value::as_str),
            only.get("text").and_then(Value::as_str),
        )
    {
        return Value::String(text.to_owned());
    }
    Value::Array(blocks)
}

#[derive(Deserialize)]
struct WireMessage {
    model: Option<String>,
    content: Vec<WireBlock>,
    stop_reason: Option<String>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    /// Thinking and server-tool blocks carry nothing the loop acts on.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct WireUsage {
    input_tokens: u64,
    output_tokens: u64,
}

/// Parse a 2xx body. The error is a message for [`ModelError::MalformedResponse`].
fn parse_response(
    body: &str,
    requested_model: &str,
    max_tokens: u32,
) -> Result<ModelResponse, String> {
    let message: WireMessage =
        serde_json::from_str(body).map_err(|e| format!("{e}; body starts: {}", excerpt(body)))?;
    let mut text = String::new();
    let mut calls = Vec::new();
    for block in message.content {
        match block {
            WireBlock::Text { text: t } => text.push_str(&t),
            WireBlock::ToolUse { id, name, input } => calls.push(ToolCall {
                id,
                name,
                arguments: input,
            }),
            WireBlock::Other => {}
        }
    }
    // No text and no calls means "done" to the loop; a cut-off answer must not pass for that.
    if text.is_empty() && calls.is_empty() && message.stop_reason.as_deref() == Some("max_tokens") {
        return Err(format!(
            "the answer was cut off at max_tokens ({max_tokens}) before any content; raise providers.anthropic.max_tokens"
        ));
    }
    Ok(ModelResponse {
        text: Some(text).filter(|t| !t.is_empty()),
        calls,
        usage: message.usage.map(|u| Usage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
        }),
        model: message.model.unwrap_or_else(|| requested_model.to_owned()),
    })
}
