//! What a run may do and consume: `[run]` limits and tool menu, `[menus]`, `[budgets]` and
//! `[prices]` for model calls, `[requests]` expiry, and `[secrets]` scanner rules.

use serde::{Deserialize, Serialize};

use super::LayerKind;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// Denials in one run after which the run stops (default 3).
    pub max_denials: Option<u32>,
    /// Model turns after which the run stops (default 50).
    pub max_turns: Option<u32>,
    /// Tool calls after which the run stops (default 200).
    pub max_tool_calls: Option<u32>,
    /// The tool menu (a `[menus.NAME]`) the model is offered; default: every tool.
    pub menu: Option<String>,
    /// How deep subagents may nest (`spawn_agent`; default 2: a child and a grandchild).
    pub max_depth: Option<u32>,
    /// How many subagents one run may start (default 4).
    pub max_children: Option<u32>,
    /// The worst risk class a run may reach (`read`, `change`, `external`, `destructive`,
    /// `secret`, `irreversible`); an action above it is refused at run time.
    pub ceiling: Option<crate::RiskClass>,
}

/// A named test command for `run_tests`: `[tests.unit] argv = ["cargo", "test"]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestsConfig {
    pub argv: Vec<String>,
    /// The subprocess profile it runs under (default: `default`, the contained one).
    #[serde(default)]
    pub profile: Option<String>,
    /// At most the profile's own timeout.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// `[web]`: what `web_fetch` may reach. Off by default: with no `allow` entries every fetch is
/// denied.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebConfig {
    /// `host:port` entries, `*.domain:port` for subdomains (the egress allowlist's syntax).
    pub allow: Option<Vec<String>>,
    /// Most bytes of a response body read (default 2 MiB); the rest is cut.
    pub max_bytes: Option<u64>,
    /// The whole fetch, redirects included (default 20 s).
    pub timeout_ms: Option<u64>,
    /// An absolute path to a PEM file of root certificates to trust besides the system's store
    /// (a private CA, a TLS-inspecting gateway). Unset: Mozilla's roots only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_certificates: Option<String>,
}

/// The tools a model may see and call (by model-facing name).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MenuConfig {
    pub tools: Vec<String>,
    /// The worst risk class a run offered this menu may reach (with `[run] ceiling`, the
    /// tighter counts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling: Option<crate::RiskClass>,
}

/// Limits on what model calls may consume. Each scope is checked before every model call and
/// during a streamed answer; the most restrictive wins. Actor and tenant totals are summed
/// over all their runs in the store.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetsConfig {
    #[serde(default)]
    pub run: BudgetLimit,
    #[serde(default)]
    pub actor: BudgetLimit,
    #[serde(default)]
    pub tenant: BudgetLimit,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetLimit {
    /// Input plus output tokens.
    pub tokens: Option<u64>,
    /// US dollars, priced with `[prices]`.
    pub cost_usd: Option<f64>,
}

impl BudgetLimit {
    /// The stricter of two limits, field by field.
    pub fn tightest(self, other: Self) -> Self {
        fn min<T: PartialOrd>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(if b < a { b } else { a }),
                (a, None) => a,
                (None, b) => b,
            }
        }
        Self {
            tokens: min(self.tokens, other.tokens),
            cost_usd: min(self.cost_usd, other.cost_usd),
        }
    }
}

/// US dollars per million tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceConfig {
    pub input_per_million: f64,
    pub output_per_million: f64,
}

/// `[requests]`: how long a request raised by the agent waits for a person before it is
/// answered as expired (durations such as `90s`, `30m`, `24h`; default 24 h for each kind).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestsConfig {
    pub question_ttl: Option<String>,
    pub secret_ttl: Option<String>,
    pub resource_ttl: Option<String>,
}

/// `[secrets] rules = ".gitleaks.toml"`: a rules file in gitleaks' format. Relative paths are
/// resolved by the CLI (the project layer: against the workspace root; the others: against
/// the directory of their `config.toml`). Every layer's file counts; lower layers only add.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretsConfig {
    pub rules: Option<String>,
}

/// One layer's `[secrets] rules`, with where it was set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SecretRulesRef {
    pub kind: LayerKind,
    /// The path as written.
    pub rules: String,
    /// The `config.toml` that set it.
    pub layer_path: String,
}
