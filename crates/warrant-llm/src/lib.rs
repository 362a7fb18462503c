//! Model providers: the scripted transcript, OpenAI-compatible chat completions and the
//! Anthropic Messages API.
//! Synchronous by design: the agent loop calls [`ModelProvider::respond`] and blocks. This crate
//! knows tool specs (to describe and check calls) but never runs a tool.

pub mod anthropic;
pub mod error;
pub mod openai;
pub mod scripted;
pub mod types;
pub mod untrusted;
mod wire;

pub use anthropic::{AnthropicProvider, AnthropicSettings, anthropic_settings_from};
pub use error::ModelError;
pub use openai::{OpenAiProvider, OpenAiSettings, openai_settings_from};
pub use scripted::{ScriptedCall, ScriptedProvider, Transcript, TranscriptError, Turn};
pub use types::{
    Conversation, Message, ModelProvider, ModelResponse, ModelSpec, SpecError, ToolCall, Usage,
};
pub use untrusted::{
    FenceRecord, Fenced, GuardedRequest, Source, Taint, Untrusted, UntrustedContentError,
};
