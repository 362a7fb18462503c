//! How the layers combine into [`Settings`]. One rule serves every part that is set per layer: a
//! higher layer's value replaces a lower one's, a field at a time, and a named entry of a table
//! (a profile, a menu, a sink, a price, a profile's secrets) whole, never field by field
//! ([`Merge`], folded over the layers by `merged`). Two parts keep rules of their own: budgets
//! (every layer's limit counts, the tightest wins) and secret-scanner rules (every layer's file
//! counts). Identity is not merged here (see `identity.rs`: locks and the environment).

use std::collections::BTreeMap;

use serde::Serialize;

use super::{
    AnthropicConfig, AuditConfig, BudgetsConfig, ConfigDoc, JsonlFsync, Layer, McpConfig,
    McpServeConfig, MenuConfig, OnFull, OpenAiConfig, PriceConfig, ProfileConfig, ProvidersConfig,
    RequestsConfig, RunConfig, SandboxConfig, SecretRulesRef, SinkConfig, StoreConfig, ordered,
};

/// Settings other than identity, merged field by field (managed > user > project).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Settings {
    pub max_denials: u32,
    pub max_turns: u32,
    pub max_tool_calls: Option<u32>,
    /// The spawn envelope: subagents nest at most `max_depth` deep, a run starts at most
    /// `max_children` of them.
    pub max_depth: u32,
    pub max_children: u32,
    /// `[run] ceiling`: the worst risk class a run may reach.
    pub ceiling: Option<crate::RiskClass>,
    /// The menu in force (name and tools), if `[run] menu` names one; checked by the CLI.
    pub menu: Option<String>,
    pub menus: BTreeMap<String, MenuConfig>,
    pub profiles: BTreeMap<String, ProfileConfig>,
    pub openai: OpenAiConfig,
    pub anthropic: AnthropicConfig,
    pub ollama: super::OllamaConfig,
    /// `[providers] model`: the model of a run without `--model`.
    pub default_model: Option<String>,
    pub audit_jsonl_path: String,
    pub audit_jsonl_max_bytes: Option<u64>,
    pub audit_jsonl_max_age_ms: Option<u64>,
    pub audit_jsonl_fsync: JsonlFsync,
    pub audit_fail_after_ms: u64,
    pub audit_max_pending: u64,
    /// `[audit] key_max_age_days`: the audit key's age limit, when one is set.
    pub audit_key_max_age_days: Option<u64>,
    pub audit_on_full: OnFull,
    pub audit_sinks: BTreeMap<String, SinkConfig>,
    pub store_url: Option<String>,
    /// `[store] password`: a reference, resolved when the store is opened.
    pub store_password: Option<String>,
    /// `[store] audit_partitions`: the partitions a new PostgreSQL store's chain is given.
    pub store_audit_partitions: Option<u64>,
    /// Every layer's limits, the tightest of each kept: a project cannot loosen a managed budget.
    pub budgets: BudgetsConfig,
    pub prices: BTreeMap<String, PriceConfig>,
    /// Request expiry per kind, highest layer first per field (parsed by the CLI).
    pub requests: RequestsConfig,
    /// Secrets per profile; a higher layer's table for a profile replaces a lower one's.
    pub secret_env: BTreeMap<String, BTreeMap<String, String>>,
    /// Every layer's `[secrets] rules`, highest first (the scanner merges them: lower layers
    /// only add).
    pub secrets_rules: Vec<SecretRulesRef>,
    /// `[tests.<name>]`; a higher layer's entry replaces a lower one's whole.
    pub tests: BTreeMap<String, super::run::TestsConfig>,
    /// `[web]`, field by field.
    pub web: super::run::WebConfig,
    /// `[mcp]`: a higher layer's server of a name replaces a lower one's whole; `[mcp.serve]`
    /// merges field by field (a token entry whole).
    pub mcp: McpConfig,
    /// `[catalog.<name>]`: a higher layer's catalog of a name replaces a lower one's whole.
    pub catalog: BTreeMap<String, super::CatalogConfig>,
    /// `[memory.shared]`: the highest layer that sets it, whole.
    pub shared_memory: Option<super::SharedMemoryConfig>,
    /// `[security] strict`: the managed layer's value when it locks it, else the highest
    /// layer's that sets it; off by default.
    pub strict: bool,
    /// `[rate]`: every layer's limits count, the tightest of each kept.
    pub rate: super::RateConfig,
}

/// One part of the configuration as a layer sets it, laid over the same part of a lower layer.
trait Merge {
    /// `self` is from the higher layer.
    fn over(self, lower: Self) -> Self;
}

impl<T> Merge for Option<T> {
    fn over(self, lower: Self) -> Self {
        self.or(lower)
    }
}

/// An entry of a higher layer replaces the lower layer's entry of the same name whole.
impl<V> Merge for BTreeMap<String, V> {
    fn over(mut self, lower: Self) -> Self {
        for (name, value) in lower {
            self.entry(name).or_insert(value);
        }
        self
    }
}

/// `Merge` for a table, field by field. The struct literal names every field, so a field added
/// to the table and not listed here does not compile.
macro_rules! merge_fields {
    ($($table:ty { $($field:ident),+ $(,)? })+) => {$(
        impl Merge for $table {
            fn over(self, lower: Self) -> Self {
                Self { $($field: self.$field.over(lower.$field)),+ }
            }
        }
    )+};
}

merge_fields! {
    RunConfig { max_denials, max_turns, max_tool_calls, menu, max_depth, max_children, ceiling }
    ProvidersConfig { model, openai, ollama, anthropic }
    super::OllamaConfig { base_url }
    OpenAiConfig { base_url, api_key_env, timeout_ms, api_key, stream, api_version }
    AnthropicConfig { base_url, api_key_env, timeout_ms, max_tokens, api_key, stream }
    AuditConfig {
        jsonl_path, jsonl_max_bytes, jsonl_max_age_ms, jsonl_fsync, fail_after_ms, max_pending,
        on_full, key_max_age_days, sinks,
    }
    StoreConfig { url, password, audit_partitions }
    RequestsConfig { question_ttl, secret_ttl, resource_ttl }
    McpConfig { servers, serve }
    McpServeConfig { tools, lift_ceiling, tokens, max_body_bytes, allowed_origins, allowed_hosts }
    super::run::WebConfig { allow, max_bytes, timeout_ms, ca_certificates }
}

/// One part of every layer, merged; `layers` highest first (see `ordered`).
fn merged<T: Merge + Default + Clone>(layers: &[&Layer], part: impl Fn(&ConfigDoc) -> &T) -> T {
    layers.iter().fold(T::default(), |higher, layer| {
        higher.over(part(&layer.doc).clone())
    })
}

/// The settings of `layers`, given in any order, merged by the rules above.
pub fn merge_settings(layers: &[Layer]) -> Settings {
    let layers = ordered(layers);
    let run = merged(&layers, |d| &d.run);
    let providers = merged(&layers, |d| &d.providers);
    let audit = merged(&layers, |d| &d.audit);
    let mut profiles = merged(&layers, |d| &d.profiles);
    profiles.entry("default".to_owned()).or_default();
    // Confined unless a profile says `unconfined = true`: a profile without a `[sandbox]` table
    // gets the default confinement.
    for profile in profiles.values_mut() {
        if !profile.unconfined && profile.sandbox.is_none() {
            profile.sandbox = Some(SandboxConfig::default());
        }
    }
    let secrets_rules = layers
        .iter()
        .filter_map(|l| {
            l.doc.secrets.rules.clone().map(|rules| SecretRulesRef {
                kind: l.kind,
                rules,
                layer_path: l.path.clone(),
            })
        })
        .collect();
    Settings {
        requests: merged(&layers, |d| &d.requests),
        secret_env: merged(&layers, |d| &d.secret_env),
        secrets_rules,
        tests: merged(&layers, |d| &d.tests),
        web: merged(&layers, |d| &d.web),
        max_denials: run.max_denials.unwrap_or(3),
        max_turns: run.max_turns.unwrap_or(50),
        max_tool_calls: Some(run.max_tool_calls.unwrap_or(200)),
        max_depth: run.max_depth.unwrap_or(2),
        max_children: run.max_children.unwrap_or(4),
        ceiling: run.ceiling,
        menu: run.menu,
        menus: merged(&layers, |d| &d.menus),
        profiles,
        openai: providers.openai,
        anthropic: providers.anthropic,
        ollama: providers.ollama,
        default_model: providers.model,
        audit_jsonl_path: audit
            .jsonl_path
            .unwrap_or_else(|| "audit/audit.jsonl".to_owned()),
        audit_jsonl_max_bytes: audit.jsonl_max_bytes,
        audit_jsonl_max_age_ms: audit.jsonl_max_age_ms,
        audit_jsonl_fsync: audit.jsonl_fsync.unwrap_or(JsonlFsync::Batch),
        audit_fail_after_ms: audit.fail_after_ms.unwrap_or(3_600_000),
        audit_max_pending: audit.max_pending.unwrap_or(10_000),
        audit_key_max_age_days: audit.key_max_age_days,
        audit_on_full: audit.on_full.unwrap_or(OnFull::Wait),
        audit_sinks: audit.sinks,
        store_url: merged(&layers, |d| &d.store).url,
        store_password: merged(&layers, |d| &d.store).password,
        store_audit_partitions: merged(&layers, |d| &d.store).audit_partitions,
        // Not `Merge`: a lower layer's limit still counts when it is the tighter one.
        budgets: layers
            .iter()
            .fold(BudgetsConfig::default(), |acc, l| BudgetsConfig {
                run: acc.run.tightest(l.doc.budgets.run),
                actor: acc.actor.tightest(l.doc.budgets.actor),
                tenant: acc.tenant.tightest(l.doc.budgets.tenant),
            }),
        prices: merged(&layers, |d| &d.prices),
        mcp: merged(&layers, |d| &d.mcp),
        catalog: merged(&layers, |d| &d.catalog),
        shared_memory: layers.iter().find_map(|l| l.doc.memory.shared.clone()),
        strict: layers
            .iter()
            .find(|l| l.kind == super::LayerKind::Managed && l.doc.security.locked)
            .and_then(|l| l.doc.security.strict)
            .or_else(|| layers.iter().find_map(|l| l.doc.security.strict))
            .unwrap_or(false),
        rate: layers.iter().fold(super::RateConfig::default(), |acc, l| {
            acc.tightest(&l.doc.rate)
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::config::{BudgetLimit, LayerKind, McpServerConfig};
    use pretty_assertions::assert_eq;

    fn layer(kind: LayerKind, text: &str) -> Layer {
        Layer::parse(kind, &format!("/{}/config.toml", kind.as_str()), text).unwrap()
    }

    #[test]
    fn settings_merge_by_precedence() {
        let layers = [
            layer(
                LayerKind::Project,
                "[run]\nmax_denials = 5\n[profiles.build]\ntimeout_ms = 1000",
            ),
            layer(LayerKind::Managed, "[run]\nmax_denials = 2\n"),
        ];
        let s = merge_settings(&layers);
        assert_eq!(s.max_denials, 2);
        assert_eq!(s.max_turns, 50);
        assert_eq!(s.profiles["build"].timeout_ms, 1000);
        // Confined unless a profile says otherwise, the built-in default included.
        let confined = ProfileConfig {
            sandbox: Some(SandboxConfig::default()),
            ..ProfileConfig::default()
        };
        assert_eq!(s.profiles["default"], confined);
        assert!(s.profiles["build"].is_contained());
        let opted_out = merge_settings(&[layer(
            LayerKind::Project,
            "[profiles.wide]\nunconfined = true\n",
        )]);
        assert_eq!(opted_out.profiles["wide"].sandbox, None);
        assert!(!opted_out.profiles["wide"].is_contained());
    }

    /// Every part of `Settings` from three layers given out of order, asserted whole: a field
    /// comes from the highest layer that sets it, a named entry (profile, menu, sink, price, a
    /// profile's secrets) whole from the highest layer that has it, budgets are the tightest of
    /// every layer, and every layer's scanner rules count, highest first.
    #[test]
    fn settings_merge_each_part_by_its_rule() {
        let managed = layer(
            LayerKind::Managed,
            r#"
[run]
max_turns = 10
[providers.openai]
base_url = "https://managed.example/v1"
[audit]
on_full = "drop"
[audit.sinks.siem]
type = "http"
url = "https://siem.example/in"
[budgets.run]
tokens = 1000
[prices."openai:m"]
input_per_million = 1.0
output_per_million = 2.0
[requests]
question_ttl = "1h"
[secret_env.build]
TOKEN = "secret:managed"
[secrets]
rules = "/etc/warrant/gitleaks.toml"
[mcp.serve]
lift_ceiling = []
"#,
        );
        let user = layer(
            LayerKind::User,
            r#"
[run]
max_turns = 20
menu = "small"
[menus.small]
tools = ["read_file"]
[providers.openai]
base_url = "https://user.example/v1"
api_key_env = "USER_KEY"
[providers.anthropic]
max_tokens = 100
[audit]
jsonl_max_bytes = 5000
[budgets.run]
tokens = 5000
cost_usd = 1.5
[store]
url = "postgres://user@db/warrant"
[mcp.serve.tokens.ci]
token = "env:USER_CI"
actor = "ci-user"
[mcp.servers.tickets]
url = "http://127.0.0.1:8931/mcp"
headers = { Authorization = "env:TICKETS_TOKEN" }
"#,
        );
        let project = layer(
            LayerKind::Project,
            r#"
[run]
max_denials = 7
max_tool_calls = 9
[menus.small]
tools = ["read_file", "write_file"]
[menus.wide]
tools = ["run_command"]
[profiles.build]
timeout_ms = 5
unconfined = true
[audit]
jsonl_path = "mine.jsonl"
on_full = "wait"
[audit.sinks.siem]
type = "http"
url = "https://project.example/in"
batch = 3
[audit.sinks.local]
type = "http"
url = "http://127.0.0.1:9/in"
[budgets.actor]
cost_usd = 0.5
[prices."openai:m"]
input_per_million = 9.0
output_per_million = 9.0
[prices."openai:n"]
input_per_million = 3.0
output_per_million = 4.0
[requests]
question_ttl = "5m"
secret_ttl = "10m"
[secret_env.build]
OTHER = "secret:project"
[secret_env.test]
TOKEN = "secret:test"
[mcp.servers.tickets]
command = ["tickets-mcp"]
trust_descriptions = true
[mcp.servers.git]
command = ["python3", "-m", "mcp_server_git"]
tools = ["git_*"]
risk = { git_reset = "destructive" }
[secrets]
rules = ".gitleaks.toml"
[mcp.serve]
tools = ["read_file", "write_file"]
lift_ceiling = ["write_file"]
max_body_bytes = 4096
[mcp.serve.tokens.ci]
token = "env:PROJECT_CI"
actor = "ci-project"
[mcp.serve.tokens.bot]
token = "file:/run/bot"
actor = "bot"
"#,
        );
        let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let sink = |url: &str, batch: Option<usize>| SinkConfig::Http {
            url: url.to_owned(),
            headers: BTreeMap::new(),
            batch,
            timeout_ms: None,
        };
        let price = |input_per_million, output_per_million| PriceConfig {
            input_per_million,
            output_per_million,
        };
        let token = |token: &str, actor: &str| crate::config::ServeToken {
            token: token.to_owned(),
            actor: actor.to_owned(),
            ..Default::default()
        };
        let menu = |tools: &[&str]| MenuConfig {
            tools: tools.iter().map(|t| (*t).to_owned()).collect(),
            ceiling: None,
        };
        assert_eq!(
            merge_settings(&[project, managed, user]),
            Settings {
                max_denials: 7,
                max_turns: 10,
                max_tool_calls: Some(9),
                max_depth: 2,
                max_children: 4,
                ceiling: None,
                menu: Some("small".to_owned()),
                menus: BTreeMap::from([
                    ("small".to_owned(), menu(&["read_file"])),
                    ("wide".to_owned(), menu(&["run_command"])),
                ]),
                profiles: BTreeMap::from([
                    (
                        "build".to_owned(),
                        ProfileConfig {
                            timeout_ms: 5,
                            unconfined: true,
                            ..ProfileConfig::default()
                        }
                    ),
                    (
                        "default".to_owned(),
                        ProfileConfig {
                            sandbox: Some(SandboxConfig::default()),
                            ..ProfileConfig::default()
                        }
                    ),
                ]),
                openai: OpenAiConfig {
                    base_url: Some("https://managed.example/v1".to_owned()),
                    api_key_env: Some("USER_KEY".to_owned()),
                    ..OpenAiConfig::default()
                },
                anthropic: AnthropicConfig {
                    max_tokens: Some(100),
                    ..AnthropicConfig::default()
                },
                ollama: Default::default(),
                default_model: None,
                audit_jsonl_path: "mine.jsonl".to_owned(),
                audit_jsonl_max_bytes: Some(5000),
                audit_jsonl_max_age_ms: None,
                audit_jsonl_fsync: JsonlFsync::Batch,
                audit_fail_after_ms: 3_600_000,
                audit_max_pending: 10_000,
                audit_key_max_age_days: None,
                audit_on_full: OnFull::Drop,
                audit_sinks: BTreeMap::from([
                    ("local".to_owned(), sink("http://127.0.0.1:9/in", None)),
                    ("siem".to_owned(), sink("https://siem.example/in", None)),
                ]),
                store_url: Some("postgres://user@db/warrant".to_owned()),
                store_password: None,
                store_audit_partitions: None,
                budgets: BudgetsConfig {
                    run: BudgetLimit {
                        tokens: Some(1000),
                        cost_usd: Some(1.5),
                    },
                    actor: BudgetLimit {
                        tokens: None,
                        cost_usd: Some(0.5),
                    },
                    tenant: BudgetLimit::default(),
                },
                prices: BTreeMap::from([
                    ("openai:m".to_owned(), price(1.0, 2.0)),
                    ("openai:n".to_owned(), price(3.0, 4.0)),
                ]),
                requests: RequestsConfig {
                    question_ttl: Some("1h".to_owned()),
                    secret_ttl: Some("10m".to_owned()),
                    resource_ttl: None,
                },
                secret_env: BTreeMap::from([
                    ("build".to_owned(), map(&[("TOKEN", "secret:managed")])),
                    ("test".to_owned(), map(&[("TOKEN", "secret:test")])),
                ]),
                secrets_rules: vec![
                    SecretRulesRef {
                        kind: LayerKind::Managed,
                        rules: "/etc/warrant/gitleaks.toml".to_owned(),
                        layer_path: "/managed/config.toml".to_owned(),
                    },
                    SecretRulesRef {
                        kind: LayerKind::Project,
                        rules: ".gitleaks.toml".to_owned(),
                        layer_path: "/project/config.toml".to_owned(),
                    },
                ],
                tests: BTreeMap::new(),
                web: Default::default(),
                // A server of a name is the higher layer's whole: the project's `command` and
                // trust do not leak into the user's `tickets`.
                mcp: McpConfig {
                    servers: BTreeMap::from([
                        (
                            "git".to_owned(),
                            McpServerConfig {
                                command: Some(vec![
                                    "python3".to_owned(),
                                    "-m".to_owned(),
                                    "mcp_server_git".to_owned(),
                                ]),
                                tools: Some(vec!["git_*".to_owned()]),
                                risk: BTreeMap::from([(
                                    "git_reset".to_owned(),
                                    crate::RiskClass::Destructive,
                                )]),
                                ..McpServerConfig::default()
                            },
                        ),
                        (
                            "tickets".to_owned(),
                            McpServerConfig {
                                url: Some("http://127.0.0.1:8931/mcp".to_owned()),
                                headers: map(&[("Authorization", "env:TICKETS_TOKEN")]),
                                ..McpServerConfig::default()
                            },
                        ),
                    ]),
                    // The managed layer pins the ceiling: the project cannot lift it. A token
                    // entry of a higher layer replaces the same entry whole.
                    serve: McpServeConfig {
                        tools: Some(vec!["read_file".to_owned(), "write_file".to_owned()]),
                        lift_ceiling: Some(vec![]),
                        tokens: BTreeMap::from([
                            ("bot".to_owned(), token("file:/run/bot", "bot")),
                            ("ci".to_owned(), token("env:USER_CI", "ci-user")),
                        ]),
                        max_body_bytes: Some(4096),
                        allowed_origins: None,
                        allowed_hosts: None,
                    },
                },
                catalog: BTreeMap::new(),
                shared_memory: None,
                strict: false,
                rate: Default::default(),
            }
        );
    }
}
