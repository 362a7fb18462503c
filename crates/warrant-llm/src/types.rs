//! The provider-neutral conversation a model sees, what it answers, and how a model is named.
//! Tool output can only travel as a `Message::Tool`: results are data the model reads, never
//! instructions from the system or the user. No I/O here.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;
use warrant_core::{Coded, ToolSpec};

use crate::error::ModelError;
use crate::stream::{Flow, OnProgress, StreamProgress};

/// Reports a whole answer's usage once; a stop then discards the answer like a stopped stream.
pub(crate) fn report_final(
    response: ModelResponse,
    on_progress: OnProgress<'_>,
) -> Result<ModelResponse, ModelError> {
    let usage = response.usage.unwrap_or_default();
    let progress = StreamProgress {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        estimated: response.usage.is_none(),
    };
    match on_progress(&progress, "") {
        Flow::Continue => Ok(response),
        Flow::Stop { reason } => Err(ModelError::Stopped {
            reason,
            usage,
            estimated: progress.estimated,
        }),
    }
}

/// One tool call the model asked for. `arguments` is what the model sent; it is checked against
/// the tool's schema by the caller, never trusted here.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

/// One message of the conversation after the system prompt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case", deny_unknown_fields)]
pub enum Message {
    /// What the person asked.
    User { content: String },
    /// What the model answered: some text, tool calls, or both.
    Assistant {
        text: Option<String>,
        calls: Vec<ToolCall>,
    },
    /// The result (or refusal) of one tool call, answering the call with id `call_id`.
    Tool {
        call_id: String,
        name: String,
        content: String,
    },
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Conversation {
    pub system: String,
    pub messages: Vec<Message>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// One model turn. No text and no calls means the model is done.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelResponse {
    pub text: Option<String>,
    pub calls: Vec<ToolCall>,
    pub usage: Option<Usage>,
    /// The model that answered, as the provider reported it.
    pub model: String,
}

/// A model the agent loop can ask. Synchronous: the loop blocks on `respond`.
pub trait ModelProvider {
    /// Like `respond`, reporting what the answer has cost as it arrives so the caller can
    /// stop it (budgets). Streaming providers call `on_progress` after every delta; the
    /// default calls it once with the final usage.
    fn respond_metered(
        &self,
        conversation: &Conversation,
        tools: &[ToolSpec],
        turn: u32,
        on_progress: OnProgress<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let response = self.respond(conversation, tools, turn)?;
        report_final(response, on_progress)
    }

    /// A one-line description for logs and `warrant run` output; never contains a secret.
    fn describe(&self) -> String;

    /// Answer the conversation. `turn` is the 0-based index of this model turn in the run, so a
    /// scripted provider answers the same on replay.
    fn respond(
        &self,
        conversation: &Conversation,
        tools: &[ToolSpec],
        turn: u32,
    ) -> Result<ModelResponse, ModelError>;
}

/// A parsed `--model PROVIDER:MODEL`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelSpec {
    /// `scripted:PATH`: a YAML transcript.
    Scripted { path: PathBuf },
    /// `openai:MODEL`: any OpenAI-compatible chat-completions endpoint.
    OpenAi { model: String },
    /// `anthropic:MODEL`: the Anthropic Messages API.
    Anthropic { model: String },
    /// `ollama:MODEL`: a local Ollama server through its OpenAI-compatible `/v1` endpoint.
    Ollama { model: String },
}

/// Providers named in the contract that this build does not implement yet.
const NOT_YET: [&str; 0] = [];
const SUPPORTED: &str = "`scripted:PATH`, `openai:MODEL`, `anthropic:MODEL` or `ollama:MODEL`";

impl ModelSpec {
    pub fn parse(spec: &str) -> Result<Self, SpecError> {
        let Some((provider, rest)) = spec.split_once(':') else {
            return Err(SpecError::Malformed {
                spec: spec.to_owned(),
            });
        };
        if rest.is_empty() {
            return Err(SpecError::Malformed {
                spec: spec.to_owned(),
            });
        }
        match provider {
            "scripted" => Ok(Self::Scripted {
                path: PathBuf::from(rest),
            }),
            "openai" => Ok(Self::OpenAi {
                model: rest.to_owned(),
            }),
            "anthropic" => Ok(Self::Anthropic {
                model: rest.to_owned(),
            }),
            "ollama" => Ok(Self::Ollama {
                model: rest.to_owned(),
            }),
            other if NOT_YET.contains(&other) => Err(SpecError::NotSupportedYet {
                provider: other.to_owned(),
            }),
            other => Err(SpecError::UnknownProvider {
                provider: other.to_owned(),
            }),
        }
    }
}

impl fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Scripted { path } => write!(f, "scripted:{}", path.display()),
            Self::OpenAi { model } => write!(f, "openai:{model}"),
            Self::Anthropic { model } => write!(f, "anthropic:{model}"),
            Self::Ollama { model } => write!(f, "ollama:{model}"),
        }
    }
}

impl std::str::FromStr for ModelSpec {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Why a `--model` value was refused. These are usage errors: nothing was started.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum SpecError {
    #[error("model `{spec}` is not of the form PROVIDER:MODEL; use {SUPPORTED}")]
    Malformed { spec: String },
    #[error("unknown model provider `{provider}`; use {SUPPORTED}")]
    UnknownProvider { provider: String },
    #[error("model provider `{provider}` is not supported yet; use {SUPPORTED}")]
    NotSupportedYet { provider: String },
}

impl Coded for SpecError {
    fn code(&self) -> &'static str {
        match self {
            Self::Malformed { .. } => "W-MODEL-001",
            Self::UnknownProvider { .. } => "W-MODEL-002",
            Self::NotSupportedYet { .. } => "W-MODEL-003",
        }
    }
}
