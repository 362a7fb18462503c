//! Messages API streaming (`"stream": true`): `message_start` (model, input usage), then per
//! content block `content_block_start` (text, or tool_use with id, name and an empty input),
//! `content_block_delta` (`text_delta`, or `input_json_delta` carrying `partial_json` to
//! concatenate), `content_block_stop`; then `message_delta` (stop_reason, cumulative
//! `usage.output_tokens`) and `message_stop`. `ping` is noise, `error` ends the answer.
//! Blocks of other types (thinking, server tools) are skipped, as in the non-streaming reader.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::openai_stream::{Step, StreamFault};
use crate::stream::{StreamProgress, estimate_tokens};
use crate::types::{ModelResponse, ToolCall, Usage};

#[derive(Debug)]
enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        /// The input of `content_block_start` (normally `{}`), replaced by the concatenated
        /// `partial_json` when any arrived.
        start_input: Value,
        json: String,
    },
    Other,
}

#[derive(Debug, Default)]
pub(crate) struct AnthropicStream {
    blocks: BTreeMap<u64, Block>,
    model: Option<String>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    stop_reason: Option<String>,
    stopped: bool,
    bytes: usize,
    /// Text not yet handed to the caller as it streams ([`AnthropicStream::take_text`]).
    unseen: String,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: u64,
        content_block: StartBlock,
    },
    ContentBlockDelta {
        index: u64,
        delta: BlockDelta,
    },
    ContentBlockStop {},
    MessageDelta {
        #[serde(default)]
        delta: Option<MessageDeltaBody>,
        #[serde(default)]
        usage: Option<DeltaUsage>,
    },
    MessageStop {},
    Ping {},
    Error {
        error: Value,
    },
}

#[derive(Deserialize)]
struct StartMessage {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<StartUsage>,
}

#[derive(Deserialize)]
struct StartUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: Option<u64>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StartBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct MessageDeltaBody {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct DeltaUsage {
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    input_tokens: Option<u64>,
}

impl AnthropicStream {
    pub fn feed(&mut self, event: &str, data: &str) -> Result<Step, StreamFault> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(Step::Quiet);
        }
        let parsed: Event = match serde_json::from_str(data) {
            Ok(parsed) => parsed,
            Err(e) => {
                if event == "error" {
                    return Err(StreamFault::ServerError(crate::openai::excerpt(data)));
                }
                // Event types added later (the API's versioning policy allows that) are
                // skipped; anything else that does not parse is a broken stream.
                let known = [
                    "message_start",
                    "content_block_start",
                    "content_block_delta",
                    "content_block_stop",
                    "message_delta",
                    "message_stop",
                    "ping",
                ];
                let kind = serde_json::from_str::<Value>(data)
                    .ok()
                    .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_owned));
                return match kind {
                    Some(kind) if !known.contains(&kind.as_str()) => Ok(Step::Quiet),
                    Some(_) | None => Err(StreamFault::Malformed(format!(
                        "{e}; event starts: {}",
                        crate::openai::excerpt(data)
                    ))),
                };
            }
        };
        match parsed {
            Event::MessageStart { message } => {
                self.model = message.model.filter(|m| !m.is_empty());
                if let Some(usage) = message.usage {
                    self.input_tokens = Some(usage.input_tokens);
                    self.output_tokens = usage.output_tokens;
                }
                Ok(Step::Grew)
            }
            Event::ContentBlockStart {
                index,
                content_block,
            } => {
                let block = match content_block {
                    StartBlock::Text { text } => {
                        self.bytes += text.len();
                        Block::Text(text)
                    }
                    StartBlock::ToolUse { id, name, input } => {
                        self.bytes += name.len();
                        Block::ToolUse {
                            id,
                            name,
                            start_input: input,
                            json: String::new(),
                        }
                    }
                    StartBlock::Other => Block::Other,
                };
                self.blocks.insert(index, block);
                Ok(Step::Grew)
            }
            Event::ContentBlockDelta { index, delta } => {
                let Some(block) = self.blocks.get_mut(&index) else {
                    return Err(StreamFault::Malformed(format!(
                        "a delta for content block {index}, which was never started"
                    )));
                };
                match (block, delta) {
                    (Block::Text(text), BlockDelta::TextDelta { text: part }) => {
                        self.bytes += part.len();
                        text.push_str(&part);
                        self.unseen.push_str(&part);
                    }
                    (Block::ToolUse { json, .. }, BlockDelta::InputJsonDelta { partial_json }) => {
                        self.bytes += partial_json.len();
                        json.push_str(&partial_json);
                    }
                    (Block::Other, _)
                    | (_, BlockDelta::Other)
                    | (Block::Text(_), BlockDelta::InputJsonDelta { .. })
                    | (Block::ToolUse { .. }, BlockDelta::TextDelta { .. }) => {
                        return Ok(Step::Quiet);
                    }
                }
                Ok(Step::Grew)
            }
            Event::ContentBlockStop {} | Event::Ping {} => Ok(Step::Quiet),
            Event::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.and_then(|d| d.stop_reason) {
                    self.stop_reason = Some(reason);
                }
                if let Some(usage) = usage {
                    // Cumulative counts, as documented.
                    if let Some(n) = usage.output_tokens {
                        self.output_tokens = Some(n);
                    }
                    if let Some(n) = usage.input_tokens {
                        self.input_tokens = Some(n);
                    }
                }
                Ok(Step::Grew)
            }
            Event::MessageStop {} => {
                self.stopped = true;
                Ok(Step::Done)
            }
            Event::Error { error } => Err(StreamFault::ServerError(error_text(&error))),
        }
    }

    /// The answer's text that arrived since the last call.
    pub fn take_text(&mut self) -> String {
        std::mem::take(&mut self.unseen)
    }

    pub fn progress(&self) -> StreamProgress {
        // `message_start` reports 1 or so output tokens; until `message_delta` counts, the
        // bytes received are the better guess, and the larger of the two is kept.
        let estimate = estimate_tokens(self.bytes);
        let reported = self.output_tokens.unwrap_or(0);
        StreamProgress {
            input_tokens: self.input_tokens.unwrap_or(0),
            output_tokens: reported.max(estimate),
            estimated: estimate > reported,
        }
    }

    pub fn finish(self, requested_model: &str, max_tokens: u32) -> Result<ModelResponse, String> {
        if !self.stopped {
            return Err("the stream ended before `message_stop`".to_owned());
        }
        let mut text = String::new();
        let mut calls = Vec::new();
        for block in self.blocks.into_values() {
            match block {
                Block::Text(t) => text.push_str(&t),
                Block::ToolUse {
                    id,
                    name,
                    start_input,
                    json,
                } => {
                    let arguments = if json.trim().is_empty() {
                        start_input
                    } else {
                        serde_json::from_str(&json).unwrap_or(Value::String(json))
                    };
                    calls.push(ToolCall {
                        id,
                        name,
                        arguments,
                    });
                }
                Block::Other => {}
            }
        }
        if text.is_empty() && calls.is_empty() && self.stop_reason.as_deref() == Some("max_tokens")
        {
            return Err(format!(
                "the answer was cut off at max_tokens ({max_tokens}) before any content; raise providers.anthropic.max_tokens"
            ));
        }
        let usage = match (self.input_tokens, self.output_tokens) {
            (None, None) => None,
            (input, output) => Some(Usage {
                input_tokens: input.unwrap_or(0),
                output_tokens: output.unwrap_or(0),
            }),
        };
        Ok(ModelResponse {
            text: Some(text).filter(|t| !t.is_empty()),
            calls,
            usage,
            model: self.model.unwrap_or_else(|| requested_model.to_owned()),
        })
    }
}

fn error_text(error: &Value) -> String {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("no message");
    match error.get("type").and_then(Value::as_str) {
        Some(kind) => format!("{message} (type: {kind})"),
        None => message.to_owned(),
    }
}
