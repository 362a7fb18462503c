//! Chat-completions streaming (`"stream": true`): `data: {chunk}` events until `data: [DONE]`.
//! Text arrives in `choices[0].delta.content`; tool calls in `delta.tool_calls[]` keyed by
//! `index`, the id and name in the first fragment and `function.arguments` split across the
//! rest; usage in a last chunk with empty `choices` (asked for with `stream_options`).
//! Differences between servers that this absorbs: Ollama sends each call whole, sometimes
//! without `index` or `id`, and may send no usage; Azure sends a first chunk with no choices
//! (prompt filter results) and chunks with an empty delta; llama.cpp and vLLM put usage on the
//! chunk that carries `finish_reason`; errors come as a chunk `{"error": {...}}`, with or
//! without `event: error`.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::stream::{StreamProgress, estimate_tokens};
use crate::types::{ModelResponse, ToolCall, Usage};

/// What one event did to the answer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Something arrived (text, arguments, usage): the caller reports progress.
    Grew,
    /// Nothing the caller needs to look at (role-only delta, filter results).
    Quiet,
    /// `[DONE]`: the answer is complete.
    Done,
}

#[derive(Debug, Default)]
struct PartialCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// Accumulates one streamed answer.
#[derive(Debug, Default)]
pub(crate) struct OpenAiStream {
    text: String,
    /// Text not yet handed to the caller as it streams ([`OpenAiStream::take_text`]).
    unseen: String,
    refusal: String,
    /// By the server's `index`; calls without one get the next free key.
    calls: BTreeMap<u64, PartialCall>,
    usage: Option<Usage>,
    model: Option<String>,
    finish_reason: Option<String>,
    done: bool,
    /// Bytes of text and arguments received, for the token estimate until usage arrives.
    bytes: usize,
    /// The prompt's size in tokens as estimated from the request body: these servers count
    /// prompt tokens only in the last chunk, and a budget must not wait for it.
    prompt_estimate: u64,
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    #[serde(default)]
    usage: Option<ChunkUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    index: u64,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<CallDelta>>,
}

#[derive(Deserialize)]
struct CallDelta {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    /// A string on the wire; a few servers send the object itself.
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Deserialize)]
struct ChunkUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

/// A failure the stream itself reported or made evident.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum StreamFault {
    /// The server sent an error event; the text is its message.
    ServerError(String),
    /// The data was not a chunk.
    Malformed(String),
}

impl OpenAiStream {
    /// A reader for the answer to a request body of `request_bytes`.
    pub fn for_request(request_bytes: usize) -> Self {
        Self {
            prompt_estimate: estimate_tokens(request_bytes),
            ..Self::default()
        }
    }

    /// Takes one SSE event (`event` name, `data`).
    pub fn feed(&mut self, event: &str, data: &str) -> Result<Step, StreamFault> {
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(Step::Done);
        }
        if data.is_empty() {
            return Ok(Step::Quiet);
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|e| {
            if event == "error" {
                StreamFault::ServerError(crate::openai::excerpt(data))
            } else {
                StreamFault::Malformed(format!(
                    "{e}; chunk starts: {}",
                    crate::openai::excerpt(data)
                ))
            }
        })?;
        if let Some(error) = chunk.error {
            return Err(StreamFault::ServerError(error_text(&error)));
        }
        if event == "error" {
            return Err(StreamFault::ServerError(crate::openai::excerpt(data)));
        }
        if let Some(model) = chunk.model.filter(|m| !m.is_empty()) {
            self.model = Some(model);
        }
        let mut step = Step::Quiet;
        if let Some(usage) = chunk.usage {
            self.usage = Some(Usage {
                input_tokens: usage.prompt_tokens,
                output_tokens: usage.completion_tokens,
            });
            step = Step::Grew;
        }
        // One answer is asked for (`n` is never set): other choices are ignored.
        for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
            }
            let Some(delta) = choice.delta else { continue };
            if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                self.bytes += text.len();
                self.text.push_str(&text);
                self.unseen.push_str(&text);
                step = Step::Grew;
            }
            if let Some(refusal) = delta.refusal.filter(|t| !t.is_empty()) {
                self.bytes += refusal.len();
                self.refusal.push_str(&refusal);
                step = Step::Grew;
            }
            for call in delta.tool_calls.unwrap_or_default() {
                self.add_call_fragment(call);
                step = Step::Grew;
            }
        }
        Ok(step)
    }

    fn add_call_fragment(&mut self, call: CallDelta) {
        let key = match call.index {
            Some(index) => index,
            None => {
                // Ollama: whole calls, no index. A repeated id continues its call.
                let known = call.id.as_ref().and_then(|id| {
                    self.calls
                        .iter()
                        .find(|(_, c)| c.id.as_ref() == Some(id))
                        .map(|(k, _)| *k)
                });
                known.unwrap_or_else(|| self.calls.keys().next_back().map_or(0, |k| k + 1))
            }
        };
        let slot = self.calls.entry(key).or_default();
        if let Some(id) = call.id.filter(|id| !id.is_empty()) {
            slot.id = Some(id);
        }
        if let Some(function) = call.function {
            if let Some(name) = function.name.filter(|n| !n.is_empty()) {
                self.bytes += name.len();
                // Names come whole in the first fragment; a server repeating it must not
                // double it.
                if slot.name != name {
                    slot.name.push_str(&name);
                }
            }
            match function.arguments {
                Some(Value::String(part)) => {
                    self.bytes += part.len();
                    slot.arguments.push_str(&part);
                }
                Some(Value::Null) | None => {}
                Some(other) => {
                    let text = other.to_string();
                    self.bytes += text.len();
                    slot.arguments.push_str(&text);
                }
            }
        }
    }

    /// The answer's text that arrived since the last call.
    pub fn take_text(&mut self) -> String {
        std::mem::take(&mut self.unseen)
    }

    pub fn progress(&self) -> StreamProgress {
        match self.usage {
            Some(usage) => StreamProgress {
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                estimated: false,
            },
            None => StreamProgress {
                input_tokens: self.prompt_estimate,
                output_tokens: estimate_tokens(self.bytes),
                estimated: true,
            },
        }
    }

    /// The answer once the body has ended. Without `[DONE]` the answer counts as complete
    /// only if a `finish_reason` arrived (some servers close right after it); otherwise the
    /// stream was cut off and nothing of it is trusted.
    pub fn finish(self, requested_model: &str) -> Result<ModelResponse, String> {
        if !self.done && self.finish_reason.is_none() {
            return Err(
                "the stream ended before the answer was complete (no finish_reason and no [DONE])"
                    .to_owned(),
            );
        }
        if self.finish_reason.as_deref() == Some("length")
            && self.text.is_empty()
            && self.calls.is_empty()
        {
            return Err("the answer was cut off at the token limit before any content".to_owned());
        }
        let calls = self
            .calls
            .into_values()
            .enumerate()
            .map(|(i, c)| ToolCall {
                id: c.id.unwrap_or_else(|| format!("call_{i}")),
                name: c.name,
                // As in the non-streaming reader: arguments that do not parse stay a string,
                // which no object schema accepts. Empty arguments mean "no arguments".
                arguments: if c.arguments.trim().is_empty() {
                    Value::Object(serde_json::Map::new())
                } else {
                    serde_json::from_str(&c.arguments).unwrap_or(Value::String(c.arguments))
                },
            })
            .collect();
        let text = Some(self.text)
            .filter(|t| !t.is_empty())
            .or(Some(self.refusal).filter(|t| !t.is_empty()));
        Ok(ModelResponse {
            text,
            calls,
            usage: self.usage,
            model: self.model.unwrap_or_else(|| requested_model.to_owned()),
        })
    }
}

fn error_text(error: &Value) -> String {
    match error {
        Value::String(s) => s.clone(),
        Value::Object(map) => {
            let message = map
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("no message");
            match map.get("type").and_then(Value::as_str) {
                Some(kind) => format!("{message} (type: {kind})"),
                None => message.to_owned(),
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::Array(_) => error.to_string(),
    }
}
