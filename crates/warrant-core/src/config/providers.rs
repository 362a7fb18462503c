//! `[providers]`: where the model providers are reached and how their keys are found (never
//! the key itself, only a reference to it).

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProvidersConfig {
    /// The model a run uses when `--model` is not given: `PROVIDER:MODEL` (`openai:gpt-4.1`),
    /// as `warrant configure provider` writes it.
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub openai: OpenAiConfig,
    #[serde(default)]
    pub ollama: OllamaConfig,
    #[serde(default)]
    pub anthropic: AnthropicConfig,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenAiConfig {
    /// Base URL including `/v1`, as the official SDKs expect.
    pub base_url: Option<String>,
    /// Name of the environment variable that holds the key (default `OPENAI_API_KEY`).
    pub api_key_env: Option<String>,
    pub timeout_ms: Option<u64>,
    /// A secret reference to the key, `env:NAME` or `file:PATH`; wins over `api_key_env`.
    /// Never the key itself.
    #[serde(default)]
    pub api_key: Option<String>,
    /// Stream answers (default true); false for servers without streaming.
    #[serde(default)]
    pub stream: Option<bool>,
    /// Azure-style endpoint: sent as `?api-version=`, and the key goes in an `api-key` header.
    #[serde(default)]
    pub api_version: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnthropicConfig {
    /// Base URL without `/v1`, as the official SDKs expect.
    #[serde(default)]
    pub base_url: Option<String>,
    /// Name of the environment variable that holds the key (default `ANTHROPIC_API_KEY`).
    #[serde(default)]
    pub api_key_env: Option<String>,
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// The `max_tokens` of every request (default 4096).
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// A secret reference to the key, `env:NAME` or `file:PATH`; wins over `api_key_env`.
    #[serde(default)]
    pub api_key: Option<String>,
    /// Stream answers (default true).
    #[serde(default)]
    pub stream: Option<bool>,
}

/// `[providers.ollama]`: where Ollama listens (`ollama:MODEL`); no key.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OllamaConfig {
    /// `http://host:11434` (without `/v1`); default: `OLLAMA_HOST`, else `http://localhost:11434`.
    #[serde(default)]
    pub base_url: Option<String>,
}
