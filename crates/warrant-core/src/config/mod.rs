//! Layered configuration, resolved purely: the CLI reads the files and the environment and
//! hands their text here. Layers, highest first: managed (`/etc/warrant/`), environment
//! (`WARRANT_*`, identity only), user (`~/.config/warrant/`), project (`.warrant/`).
//! The managed layer wins, and may mark identity fields `required` (a run without them never
//! starts) and `locked` (no lower layer may set them: only managed or the OS default counts).
//!
//! Rooms: one per part of the schema (`identity.rs`, `profiles.rs` for profiles and their
//! sandbox, `audit.rs` for audit and store, `providers.rs`, `run.rs` for a run's limits, menus,
//! budgets, requests and secrets), and `merge.rs`, the one rule by which layers combine.

mod audit;
mod catalog;
mod identity;
mod mcp;
mod mcp_serve;
mod merge;
mod profiles;
mod providers;
mod run;
mod security;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::error::Coded;

pub use audit::{AuditConfig, JsonlFsync, OnFull, SinkConfig, StoreConfig};
pub use catalog::{CatalogConfig, MemoryConfig, SharedMemoryConfig};
pub use identity::{
    FieldOrigin, IdentityConfig, IdentityField, ResolvedIdentity, Source, resolve_identity,
};
pub use mcp::{DEFAULT_MCP_PROFILE, McpConfig, McpServerConfig};
pub use mcp_serve::{
    DEFAULT_ALLOWED_ORIGINS, DEFAULT_MAX_BODY_BYTES, DEFAULT_SERVE_TOOLS, McpServeConfig,
    READ_ONLY_TOOLS, ServeToken,
};
pub use merge::{Settings, merge_settings};
pub use profiles::{
    DEFAULT_DENIED, DEFAULT_READ_ROOTS, DEFAULT_SCRATCH, Enforcement, EnvInherit, Isolation,
    NetworkPolicy, OutsideLinks, ProfileConfig, ResourceLimits, SandboxConfig,
};
pub use providers::{AnthropicConfig, OllamaConfig, OpenAiConfig, ProvidersConfig};
pub use run::{
    BudgetLimit, BudgetsConfig, MenuConfig, PriceConfig, RequestsConfig, RunConfig, SecretRulesRef,
    SecretsConfig, TestsConfig, WebConfig,
};
pub use security::{RateConfig, RateLimit, SecurityConfig};

/// Where a layer came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LayerKind {
    Managed,
    User,
    Project,
}

impl LayerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Managed => "managed",
            Self::User => "user",
            Self::Project => "project",
        }
    }
}

/// One parsed `config.toml`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigDoc {
    #[serde(default)]
    pub identity: IdentityConfig,
    #[serde(default)]
    pub run: RunConfig,
    #[serde(default)]
    pub profiles: BTreeMap<String, ProfileConfig>,
    #[serde(default)]
    pub providers: ProvidersConfig,
    #[serde(default)]
    pub audit: AuditConfig,
    #[serde(default)]
    pub store: StoreConfig,
    /// Token and cost limits on model calls, per run, per actor and per tenant.
    #[serde(default)]
    pub budgets: BudgetsConfig,
    /// Prices of models by `provider:model`, for metering cost.
    #[serde(default)]
    pub prices: BTreeMap<String, PriceConfig>,
    /// `[risk.<class>]`: what each risk class needs (see `crate::risk`).
    #[serde(default)]
    pub risk: BTreeMap<String, crate::risk::RiskRuleConfig>,
    /// `[approvals]`: who is asked (see `crate::directory`).
    #[serde(default)]
    pub approvals: crate::risk::ApprovalsConfig,
    #[serde(default)]
    pub requests: RequestsConfig,
    /// Tool menus: `[menus.NAME] tools = [...]`; `[run] menu = "NAME"` picks the one a run's
    /// model is offered.
    #[serde(default)]
    pub menus: BTreeMap<String, MenuConfig>,
    /// `[secret_env.<profile>]`: `VAR = "secret:NAME"`, the vault secrets a profile's
    /// commands receive as environment variables.
    #[serde(default)]
    pub secret_env: BTreeMap<String, BTreeMap<String, String>>,
    /// `[secrets]`: the secret scanner's rules (a gitleaks configuration file).
    #[serde(default)]
    pub secrets: SecretsConfig,
    /// `[mcp]`: the MCP servers a run may call (`[mcp.servers.<name>]`) and what `warrant mcp
    /// serve` exports, and to whom (`[mcp.serve]`).
    #[serde(default)]
    pub mcp: McpConfig,
    /// `[tests.<name>]`: the commands `run_tests` runs (else it detects the project's runner).
    #[serde(default)]
    pub tests: BTreeMap<String, run::TestsConfig>,
    /// `[web]`: the hosts `web_fetch` may reach, and its caps.
    #[serde(default)]
    pub web: run::WebConfig,
    /// `[catalog.<name>]`: the Iceberg REST catalogs the catalog tools read.
    #[serde(default)]
    pub catalog: BTreeMap<String, CatalogConfig>,
    /// `[memory.shared]`: the backend published shared memory is appended to.
    #[serde(default)]
    pub memory: MemoryConfig,
    /// `[security]`: strict mode (see `security.rs`).
    #[serde(default)]
    pub security: SecurityConfig,
    /// `[rate]`: token buckets on actions, per principal and per resource kind.
    #[serde(default)]
    pub rate: RateConfig,
}

/// A config file as read by the CLI.
#[derive(Clone, Debug)]
pub struct Layer {
    pub kind: LayerKind,
    /// Where it was read from, for messages and provenance.
    pub path: String,
    pub doc: ConfigDoc,
}

impl Layer {
    pub fn parse(kind: LayerKind, path: &str, text: &str) -> Result<Self, ConfigError> {
        let doc: ConfigDoc = toml::from_str(text).map_err(|e| ConfigError::Malformed {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        if kind != LayerKind::Managed
            && (!doc.identity.required.is_empty()
                || !doc.identity.locked.is_empty()
                || doc.security.locked)
        {
            return Err(ConfigError::ManagedOnly {
                path: path.to_owned(),
            });
        }
        Ok(Self {
            kind,
            path: path.to_owned(),
            doc,
        })
    }
}

/// Ordered highest precedence first, whatever order they were given in.
fn ordered(layers: &[Layer]) -> Vec<&Layer> {
    let mut v: Vec<&Layer> = layers.iter().collect();
    v.sort_by_key(|l| l.kind);
    v
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ConfigError {
    #[error("configuration file {path} is malformed: {message}")]
    Malformed { path: String, message: String },
    #[error(
        "{path} sets identity `required` or `locked`, or `[security] locked`; only the managed layer (/etc/warrant/config.toml) may"
    )]
    ManagedOnly { path: String },
    #[error(
        "identity field `{field}` is required by the managed configuration but is not set; set it in {hint}"
    )]
    MissingRequired { field: IdentityField, hint: String },
    #[error(
        "identity field `{field}` is locked by the managed configuration, but {origin} tries to set it; remove it there"
    )]
    Locked {
        field: IdentityField,
        origin: Source,
    },
    #[error("identity field `{field}` has an invalid value {value:?}: {reason}")]
    Invalid {
        field: IdentityField,
        value: String,
        reason: String,
    },
}

impl Coded for ConfigError {
    fn code(&self) -> &'static str {
        match self {
            Self::Malformed { .. } => "W-CONFIG-001",
            Self::ManagedOnly { .. } => "W-CONFIG-002",
            Self::MissingRequired { .. } => "W-CONFIG-003",
            Self::Locked { .. } => "W-CONFIG-004",
            Self::Invalid { .. } => "W-CONFIG-005",
        }
    }
}
