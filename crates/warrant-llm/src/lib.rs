//! Model providers: the scripted transcript, OpenAI-compatible chat completions and the
//! Anthropic Messages API.
//! Synchronous by design: the agent loop calls [`ModelProvider::respond_metered`] and blocks;
//! streamed answers report their cost as they grow so the caller can stop them. This crate
//! knows tool specs (to describe and check calls) but never runs a tool.

pub mod anthropic;
mod anthropic_stream;
pub mod error;
pub mod openai;
mod openai_stream;
pub mod scripted;
pub mod secret;
pub mod stream;
pub mod types;
pub mod untrusted;
mod wire;

pub use anthropic::{AnthropicProvider, AnthropicSettings, anthropic_settings_from};
pub use error::ModelError;
pub use openai::{OpenAiProvider, OpenAiSettings, ollama_settings_from, openai_settings_from};
pub use scripted::{ScriptedCall, ScriptedProvider, Transcript, TranscriptError, Turn};
pub use secret::{KeyError, ResolvedKey, resolve_key};
pub use stream::{Flow, OnProgress, StreamProgress};
pub use types::{
    Conversation, Message, ModelProvider, ModelResponse, ModelSpec, SpecError, ToolCall, Usage,
};
pub use untrusted::{
    FenceRecord, Fenced, GuardedRequest, Source, Taint, Untrusted, UntrustedContentError,
};
