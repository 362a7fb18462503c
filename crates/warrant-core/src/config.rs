//! Layered configuration, resolved purely: the CLI reads the files and the environment and
//! hands their text here. Layers, highest first: managed (`/etc/warrant/`), environment
//! (`WARRANT_*`, identity only), user (`~/.config/warrant/`), project (`.warrant/`).
//! The managed layer wins, and may mark identity fields `required` (a run without them never
//! starts) and `locked` (no lower layer may set them: only managed or the OS default counts).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::error::Coded;
use crate::principal::{Principal, PrincipalKind};

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

/// The tools a model may see and call (by model-facing name).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MenuConfig {
    pub tools: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// `postgres://…` for a shared store; default: `.warrant/store.db` (SQLite).
    pub url: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentityConfig {
    pub tenant: Option<String>,
    pub actor: Option<String>,
    pub kind: Option<String>,
    pub on_behalf_of: Option<String>,
    pub roles: Option<Vec<String>>,
    pub teams: Option<Vec<String>>,
    /// Managed layer only: fields a run cannot start without.
    #[serde(default)]
    pub required: Vec<IdentityField>,
    /// Managed layer only: fields no lower layer or the environment may set.
    #[serde(default)]
    pub locked: Vec<IdentityField>,
}

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
}

/// A named subprocess profile, as configured. `warrant-exec` turns it into a plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileConfig {
    /// `none` or `core` (PATH, HOME, LANG, … only).
    #[serde(default = "default_inherit")]
    pub inherit_env: EnvInherit,
    /// Extra variable names passed through from Warrant's environment.
    #[serde(default)]
    pub pass_env: Vec<String>,
    /// Variables set explicitly.
    #[serde(default)]
    pub set_env: BTreeMap<String, String>,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Bytes of output kept from the start of each stream.
    #[serde(default = "default_head")]
    pub output_head_bytes: usize,
    /// Bytes of output kept from the end of each stream.
    #[serde(default = "default_tail")]
    pub output_tail_bytes: usize,
    /// OS confinement of the command. In a configuration file an absent `[sandbox]` table is
    /// the default confinement (see [`merge_settings`]); `None` here means unconfined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxConfig>,
    /// `unconfined = true`: no OS sandbox at all, so every command of the profile is asked of a
    /// person whatever the policy permits. Cannot be combined with a `[sandbox]` table.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unconfined: bool,
}

impl ProfileConfig {
    /// Confined by the default view: its own namespaces, no network, nothing relaxed.
    pub fn is_contained(&self) -> bool {
        !self.unconfined
            && self.sandbox.as_ref().is_some_and(|s| {
                s.isolation == Isolation::Namespaces
                    && s.network == NetworkPolicy::None
                    && s.enforcement == Enforcement::Required
                    // Every write goes through the judged layer over the workspace.
                    && s.write_roots == default_write_roots()
            })
    }
}

impl Default for ProfileConfig {
    fn default() -> Self {
        Self {
            inherit_env: default_inherit(),
            pass_env: Vec::new(),
            set_env: BTreeMap::new(),
            timeout_ms: default_timeout_ms(),
            output_head_bytes: default_head(),
            output_tail_bytes: default_tail(),
            sandbox: None,
            unconfined: false,
        }
    }
}

/// How a profile confines its commands. Paths are relative to the workspace unless absolute.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxConfig {
    #[serde(default = "default_enforcement")]
    pub enforcement: Enforcement,
    /// Writable (and readable) trees. Default: the workspace.
    #[serde(default = "default_write_roots")]
    pub write_roots: Vec<String>,
    /// Readable (and executable) trees besides the write roots. Default: the workspace and the
    /// system directories a shell and coreutils need (see `DEFAULT_READ_ROOTS`).
    #[serde(default = "default_read_roots")]
    pub read_roots: Vec<String>,
    /// Names that stay read-only even inside a write root.
    #[serde(default = "default_protected")]
    pub protected: Vec<String>,
    #[serde(default = "default_network")]
    pub network: NetworkPolicy,
    #[serde(default)]
    pub limits: ResourceLimits,
    /// Entries a command cannot read (nor write) even inside a read or write root: a bare name
    /// with `*` wildcards matches an entry's file name anywhere in a scanned root (see
    /// `DEFAULT_DENIED`); an entry with a `/` is a path (relative to the workspace).
    #[serde(default = "default_denied")]
    pub denied: Vec<String>,
    /// How the command's view of the machine is made: its own namespaces (the default), or
    /// Landlock rules over the host's view.
    #[serde(default)]
    pub isolation: Isolation,
    /// Build output a tool regenerates: deleting or rewriting files under a directory of one of
    /// these names (anywhere in the workspace; an entry with a `/` is a workspace path) is a
    /// `change`, not `destructive`, so an incremental build does not wait for a person.
    #[serde(default = "default_scratch")]
    pub scratch: Vec<String>,
}

/// Directories of regenerable build output and caches (see [`SandboxConfig::scratch`]).
pub const DEFAULT_SCRATCH: &[&str] = &[
    "target",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    "node_modules/.cache",
    ".gradle",
];

fn default_scratch() -> Vec<String> {
    DEFAULT_SCRATCH.iter().map(|s| (*s).to_owned()).collect()
}

/// How a sandboxed command is kept to its roots.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    /// A user, mount and PID namespace of its own: only the roots exist in its view (bound
    /// read-only, the write roots read-write, `.git` read-only, denied names masked), with a
    /// private home and `/tmp` and its own `/proc`; Landlock and seccomp under it.
    #[default]
    Namespaces,
    /// The host's view, narrowed by Landlock alone (no private home, no own `/proc`).
    Landlock,
}

/// Names no sandboxed command may read, wherever they appear in a root it can read: dotenv
/// files, private keys, Warrant's own state.
pub const DEFAULT_DENIED: &[&str] = &[
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "id_rsa*",
    "id_ecdsa*",
    "id_ed25519*",
    ".warrant",
];

fn default_denied() -> Vec<String> {
    DEFAULT_DENIED.iter().map(|s| (*s).to_owned()).collect()
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            enforcement: default_enforcement(),
            write_roots: default_write_roots(),
            read_roots: default_read_roots(),
            protected: default_protected(),
            network: default_network(),
            limits: ResourceLimits::default(),
            denied: default_denied(),
            isolation: Isolation::default(),
            scratch: default_scratch(),
        }
    }
}

/// The minimal read set that lets `sh`, `ls`, `cat`, `echo` (and `python3`) run on Debian-like
/// systems: the workspace, the program trees (merged /usr: /bin, /sbin, /lib are links into it),
/// the few files of /etc the loader and name lookups read, and the harmless devices. Not /etc as a
/// whole (root could read /etc/shadow), not /dev (raw disks), not /proc (another process's
/// environment, e.g. Warrant's own, is readable through /proc/<pid>/environ).
pub const DEFAULT_READ_ROOTS: &[&str] = &[
    ".",
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib64",
    "/etc/ld.so.cache",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/localtime",
    "/etc/alternatives",
    // Name resolution (host network), harmless to read.
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/dev/null",
    "/dev/zero",
    "/dev/random",
    "/dev/urandom",
    // Toolchains people keep in their home directory, read-only (`~` is the command's HOME; a
    // tree that does not exist here is skipped). Everything else in the home stays out of view.
    "~/.cargo",
    "~/.rustup",
    "~/.pyenv",
    "~/.nvm",
    "~/go",
    // The same toolchains where their variables put them (each passed to the command too).
    "$RUSTUP_HOME",
    "$CARGO_HOME",
    "$PYENV_ROOT",
    "$NVM_DIR",
    "$GOPATH",
    "$GOROOT",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Enforcement {
    /// Refuse to run when the kernel cannot apply every requested mechanism.
    Required,
    /// Run with what applies, and report what was in force.
    BestEffort,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkPolicy {
    /// No sockets except AF_UNIX, in a network namespace of its own.
    None,
    /// The host's network, unfiltered.
    Host,
    /// `network = { allow = ["host:port", ...] }`: a network namespace whose only way out is
    /// Warrant's egress proxy, which lets through connections to the listed `host:port` pairs
    /// (a `*.` prefix matches any subdomain) and refuses, and records, every other one.
    Allow(Vec<String>),
}

/// Resource limits (rlimits) applied to the command; absent means inherited.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceLimits {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_size_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_files: Option<u64>,
}

fn default_enforcement() -> Enforcement {
    Enforcement::Required
}
fn default_write_roots() -> Vec<String> {
    vec![".".to_owned()]
}
fn default_read_roots() -> Vec<String> {
    DEFAULT_READ_ROOTS.iter().map(|s| (*s).to_owned()).collect()
}
fn default_protected() -> Vec<String> {
    vec![".git".to_owned(), ".warrant".to_owned()]
}
fn default_network() -> NetworkPolicy {
    NetworkPolicy::None
}

fn default_inherit() -> EnvInherit {
    EnvInherit::Core
}
fn default_timeout_ms() -> u64 {
    30_000
}
fn default_head() -> usize {
    16 * 1024
}
fn default_tail() -> usize {
    16 * 1024
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EnvInherit {
    None,
    Core,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProvidersConfig {
    #[serde(default)]
    pub openai: OpenAiConfig,
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

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditConfig {
    /// Path of the JSONL sink, relative to `.warrant/` (default `audit/audit.jsonl`).
    pub jsonl_path: Option<String>,
    /// Start a new JSONL file when the current one would pass this size.
    pub jsonl_max_bytes: Option<u64>,
    /// Start a new JSONL file when a record is this much younger than the file's first.
    pub jsonl_max_age_ms: Option<u64>,
    /// `batch` (fsync after every batch, the default) or `never` (leave it to the OS).
    pub jsonl_fsync: Option<JsonlFsync>,
    /// `warrant doctor` fails when a sink has been failing for longer than this many ms
    /// (default one hour).
    pub fail_after_ms: Option<u64>,
    /// Undelivered records (for any sink) at which the `on_full` policy applies. Default 10,000.
    pub max_pending: Option<u64>,
    /// `wait` (default: new effects wait until delivery catches up, and the run says why) or
    /// `drop` (an HTTP sink that lags skips the pending records; an audited gap marker says so,
    /// and verification of that sink's copy reports the gap).
    pub on_full: Option<OnFull>,
    /// Further sinks by name.
    #[serde(default)]
    pub sinks: BTreeMap<String, SinkConfig>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnFull {
    Wait,
    Drop,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JsonlFsync {
    Batch,
    Never,
}

/// One configured audit sink.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum SinkConfig {
    /// Batched POSTs of CloudEvents to an HTTP receiver.
    Http {
        url: String,
        /// Header values may be secret references: `env:NAME` reads the variable `NAME` when
        /// delivering; the value is never written anywhere.
        #[serde(default)]
        headers: BTreeMap<String, String>,
        #[serde(default)]
        batch: Option<usize>,
        #[serde(default)]
        timeout_ms: Option<u64>,
    },
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
            && (!doc.identity.required.is_empty() || !doc.identity.locked.is_empty())
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdentityField {
    Tenant,
    Actor,
    Kind,
    OnBehalfOf,
    Roles,
    Teams,
}

impl IdentityField {
    pub const ALL: [IdentityField; 6] = [
        Self::Tenant,
        Self::Actor,
        Self::Kind,
        Self::OnBehalfOf,
        Self::Roles,
        Self::Teams,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tenant => "tenant",
            Self::Actor => "actor",
            Self::Kind => "kind",
            Self::OnBehalfOf => "on_behalf_of",
            Self::Roles => "roles",
            Self::Teams => "teams",
        }
    }

    pub fn env_var(self) -> &'static str {
        match self {
            Self::Tenant => "WARRANT_TENANT",
            Self::Actor => "WARRANT_ACTOR",
            Self::Kind => "WARRANT_KIND",
            Self::OnBehalfOf => "WARRANT_ON_BEHALF_OF",
            Self::Roles => "WARRANT_ROLES",
            Self::Teams => "WARRANT_TEAMS",
        }
    }
}

impl fmt::Display for IdentityField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where one identity field's value came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "from", rename_all = "snake_case")]
pub enum Source {
    Layer { layer: LayerKind, path: String },
    Env { var: String },
    OsUser,
    Default,
    Unset,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Layer { layer, path } => write!(f, "{} ({path})", layer.as_str()),
            Self::Env { var } => write!(f, "environment ({var})"),
            Self::OsUser => f.write_str("operating system user"),
            Self::Default => f.write_str("default"),
            Self::Unset => f.write_str("unset"),
        }
    }
}

/// The principal plus, for each field, where it came from and whether it is locked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResolvedIdentity {
    pub principal: Principal,
    pub sources: BTreeMap<IdentityField, FieldOrigin>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FieldOrigin {
    pub source: Source,
    pub required: bool,
    pub locked: bool,
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ConfigError {
    #[error("configuration file {path} is malformed: {message}")]
    Malformed { path: String, message: String },
    #[error(
        "{path} sets identity `required` or `locked`; only the managed layer (/etc/warrant/config.toml) may"
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

/// Settings other than identity, merged field by field (managed > user > project).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Settings {
    pub max_denials: u32,
    pub max_turns: u32,
    pub max_tool_calls: Option<u32>,
    /// The menu in force (name and tools), if `[run] menu` names one; checked by the CLI.
    pub menu: Option<String>,
    pub menus: BTreeMap<String, MenuConfig>,
    pub profiles: BTreeMap<String, ProfileConfig>,
    pub openai: OpenAiConfig,
    pub anthropic: AnthropicConfig,
    pub audit_jsonl_path: String,
    pub audit_jsonl_max_bytes: Option<u64>,
    pub audit_jsonl_max_age_ms: Option<u64>,
    pub audit_jsonl_fsync: JsonlFsync,
    pub audit_fail_after_ms: u64,
    pub audit_max_pending: u64,
    pub audit_on_full: OnFull,
    pub audit_sinks: BTreeMap<String, SinkConfig>,
    pub store_url: Option<String>,
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
}

/// Ordered highest precedence first, whatever order they were given in.
fn ordered(layers: &[Layer]) -> Vec<&Layer> {
    let mut v: Vec<&Layer> = layers.iter().collect();
    v.sort_by_key(|l| l.kind);
    v
}

pub fn merge_settings(layers: &[Layer]) -> Settings {
    let layers = ordered(layers);
    let first = |f: &dyn Fn(&ConfigDoc) -> Option<u32>| layers.iter().find_map(|l| f(&l.doc));
    let mut profiles = BTreeMap::new();
    // Lowest first so a higher layer's profile of the same name replaces it whole.
    for layer in layers.iter().rev() {
        for (name, p) in &layer.doc.profiles {
            profiles.insert(name.clone(), p.clone());
        }
    }
    profiles
        .entry("default".to_owned())
        .or_insert_with(ProfileConfig::default);
    // Confined unless a profile says `unconfined = true`: a profile without a `[sandbox]` table
    // gets the default confinement.
    for profile in profiles.values_mut() {
        if !profile.unconfined && profile.sandbox.is_none() {
            profile.sandbox = Some(SandboxConfig::default());
        }
    }
    let openai = OpenAiConfig {
        base_url: layers
            .iter()
            .find_map(|l| l.doc.providers.openai.base_url.clone()),
        api_key_env: layers
            .iter()
            .find_map(|l| l.doc.providers.openai.api_key_env.clone()),
        timeout_ms: layers
            .iter()
            .find_map(|l| l.doc.providers.openai.timeout_ms),
        api_key: layers
            .iter()
            .find_map(|l| l.doc.providers.openai.api_key.clone()),
        stream: layers.iter().find_map(|l| l.doc.providers.openai.stream),
        api_version: layers
            .iter()
            .find_map(|l| l.doc.providers.openai.api_version.clone()),
    };
    let anthropic = AnthropicConfig {
        base_url: layers
            .iter()
            .find_map(|l| l.doc.providers.anthropic.base_url.clone()),
        api_key_env: layers
            .iter()
            .find_map(|l| l.doc.providers.anthropic.api_key_env.clone()),
        timeout_ms: layers
            .iter()
            .find_map(|l| l.doc.providers.anthropic.timeout_ms),
        max_tokens: layers
            .iter()
            .find_map(|l| l.doc.providers.anthropic.max_tokens),
        api_key: layers
            .iter()
            .find_map(|l| l.doc.providers.anthropic.api_key.clone()),
        stream: layers.iter().find_map(|l| l.doc.providers.anthropic.stream),
    };
    let requests = RequestsConfig {
        question_ttl: layers
            .iter()
            .find_map(|l| l.doc.requests.question_ttl.clone()),
        secret_ttl: layers
            .iter()
            .find_map(|l| l.doc.requests.secret_ttl.clone()),
        resource_ttl: layers
            .iter()
            .find_map(|l| l.doc.requests.resource_ttl.clone()),
    };
    let mut secret_env = BTreeMap::new();
    for layer in layers.iter().rev() {
        for (profile, vars) in &layer.doc.secret_env {
            secret_env.insert(profile.clone(), vars.clone());
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
        requests,
        secret_env,
        secrets_rules,
        max_denials: first(&|d| d.run.max_denials).unwrap_or(3),
        max_turns: first(&|d| d.run.max_turns).unwrap_or(50),
        max_tool_calls: Some(first(&|d| d.run.max_tool_calls).unwrap_or(200)),
        menu: layers.iter().find_map(|l| l.doc.run.menu.clone()),
        menus: {
            // Lowest first so a higher layer's menu of the same name replaces it whole.
            let mut menus = BTreeMap::new();
            for layer in layers.iter().rev() {
                for (name, m) in &layer.doc.menus {
                    menus.insert(name.clone(), m.clone());
                }
            }
            menus
        },
        profiles,
        openai,
        anthropic,
        audit_jsonl_path: layers
            .iter()
            .find_map(|l| l.doc.audit.jsonl_path.clone())
            .unwrap_or_else(|| "audit/audit.jsonl".to_owned()),
        audit_jsonl_max_bytes: layers.iter().find_map(|l| l.doc.audit.jsonl_max_bytes),
        audit_jsonl_max_age_ms: layers.iter().find_map(|l| l.doc.audit.jsonl_max_age_ms),
        audit_jsonl_fsync: layers
            .iter()
            .find_map(|l| l.doc.audit.jsonl_fsync)
            .unwrap_or(JsonlFsync::Batch),
        audit_fail_after_ms: layers
            .iter()
            .find_map(|l| l.doc.audit.fail_after_ms)
            .unwrap_or(3_600_000),
        audit_max_pending: layers
            .iter()
            .find_map(|l| l.doc.audit.max_pending)
            .unwrap_or(10_000),
        audit_on_full: layers
            .iter()
            .find_map(|l| l.doc.audit.on_full)
            .unwrap_or(OnFull::Wait),
        audit_sinks: {
            // Lowest first so a higher layer's sink of the same name replaces it whole.
            let mut sinks = BTreeMap::new();
            for layer in layers.iter().rev() {
                for (name, sink) in &layer.doc.audit.sinks {
                    sinks.insert(name.clone(), sink.clone());
                }
            }
            sinks
        },
        store_url: layers.iter().find_map(|l| l.doc.store.url.clone()),
        budgets: layers
            .iter()
            .fold(BudgetsConfig::default(), |acc, l| BudgetsConfig {
                run: acc.run.tightest(l.doc.budgets.run),
                actor: acc.actor.tightest(l.doc.budgets.actor),
                tenant: acc.tenant.tightest(l.doc.budgets.tenant),
            }),
        prices: {
            // Lowest first so a higher layer's price of the same model replaces it.
            let mut prices = BTreeMap::new();
            for layer in layers.iter().rev() {
                for (model, price) in &layer.doc.prices {
                    prices.insert(model.clone(), *price);
                }
            }
            prices
        },
    }
}

/// A raw value for one field, before typing.
enum Raw {
    One(String),
    Many(Vec<String>),
}

fn layer_value(doc: &IdentityConfig, field: IdentityField) -> Option<Raw> {
    match field {
        IdentityField::Tenant => doc.tenant.clone().map(Raw::One),
        IdentityField::Actor => doc.actor.clone().map(Raw::One),
        IdentityField::Kind => doc.kind.clone().map(Raw::One),
        IdentityField::OnBehalfOf => doc.on_behalf_of.clone().map(Raw::One),
        IdentityField::Roles => doc.roles.clone().map(Raw::Many),
        IdentityField::Teams => doc.teams.clone().map(Raw::Many),
    }
}

fn env_value(env: &BTreeMap<String, String>, field: IdentityField) -> Option<Raw> {
    let v = env.get(field.env_var())?;
    match field {
        IdentityField::Roles | IdentityField::Teams => Some(Raw::Many(
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
        )),
        IdentityField::Tenant
        | IdentityField::Actor
        | IdentityField::Kind
        | IdentityField::OnBehalfOf => Some(Raw::One(v.clone())),
    }
}

/// Resolve the principal of this process from the layers, the environment and the OS user.
pub fn resolve_identity(
    layers: &[Layer],
    env: &BTreeMap<String, String>,
    os_user: Option<&str>,
) -> Result<ResolvedIdentity, ConfigError> {
    let layers = ordered(layers);
    let managed = layers.iter().find(|l| l.kind == LayerKind::Managed);
    let required: Vec<IdentityField> = managed
        .map(|l| l.doc.identity.required.clone())
        .unwrap_or_default();
    let locked: Vec<IdentityField> = managed
        .map(|l| l.doc.identity.locked.clone())
        .unwrap_or_default();

    let mut values: BTreeMap<IdentityField, (Raw, Source)> = BTreeMap::new();
    for field in IdentityField::ALL {
        let is_locked = locked.contains(&field);
        let mut candidates: Vec<(Raw, Source)> = Vec::new();
        if let Some(m) = managed
            && let Some(v) = layer_value(&m.doc.identity, field)
        {
            candidates.push((
                v,
                Source::Layer {
                    layer: LayerKind::Managed,
                    path: m.path.clone(),
                },
            ));
        }
        if let Some(v) = env_value(env, field) {
            candidates.push((
                v,
                Source::Env {
                    var: field.env_var().to_owned(),
                },
            ));
        }
        for layer in layers.iter().filter(|l| l.kind != LayerKind::Managed) {
            if let Some(v) = layer_value(&layer.doc.identity, field) {
                candidates.push((
                    v,
                    Source::Layer {
                        layer: layer.kind,
                        path: layer.path.clone(),
                    },
                ));
            }
        }
        if is_locked
            && let Some((_, source)) = candidates.iter().find(|(_, s)| {
                !matches!(
                    s,
                    Source::Layer {
                        layer: LayerKind::Managed,
                        ..
                    }
                )
            })
        {
            return Err(ConfigError::Locked {
                field,
                origin: source.clone(),
            });
        }
        if let Some(first) = candidates.into_iter().next() {
            values.insert(field, first);
        }
    }

    // Defaults for what nobody set.
    if !values.contains_key(&IdentityField::Actor)
        && let Some(user) = os_user
    {
        values.insert(
            IdentityField::Actor,
            (Raw::One(user.to_owned()), Source::OsUser),
        );
    }

    for field in &required {
        if !values.contains_key(field) {
            return Err(ConfigError::MissingRequired {
                field: *field,
                hint: if locked.contains(field) {
                    "the managed configuration (/etc/warrant/config.toml)".to_owned()
                } else {
                    format!("{} or a config.toml [identity] table", field.env_var())
                },
            });
        }
    }

    let one = |field: IdentityField, values: &BTreeMap<IdentityField, (Raw, Source)>| match values
        .get(&field)
    {
        Some((Raw::One(s), _)) => Some(s.clone()),
        Some((Raw::Many(v), _)) => Some(v.join(",")),
        None => None,
    };
    let many = |field: IdentityField| match values.get(&field) {
        Some((Raw::Many(v), _)) => v.clone(),
        Some((Raw::One(s), _)) => vec![s.clone()],
        None => Vec::new(),
    };

    let actor = one(IdentityField::Actor, &values).ok_or(ConfigError::MissingRequired {
        field: IdentityField::Actor,
        hint:
            "WARRANT_ACTOR or a config.toml [identity] table (no operating system user was found)"
                .to_owned(),
    })?;
    validate_name(IdentityField::Actor, &actor)?;
    let tenant = one(IdentityField::Tenant, &values).unwrap_or_else(|| "default".to_owned());
    validate_name(IdentityField::Tenant, &tenant)?;
    let kind = match one(IdentityField::Kind, &values) {
        Some(k) => PrincipalKind::parse(&k).ok_or(ConfigError::Invalid {
            field: IdentityField::Kind,
            value: k.clone(),
            reason: "expected user, service or agent".to_owned(),
        })?,
        None => PrincipalKind::User,
    };
    let on_behalf_of = one(IdentityField::OnBehalfOf, &values);
    if let Some(o) = &on_behalf_of {
        validate_name(IdentityField::OnBehalfOf, o)?;
    }
    let principal = Principal {
        tenant,
        actor,
        kind,
        on_behalf_of,
        roles: many(IdentityField::Roles),
        teams: many(IdentityField::Teams),
        attrs: BTreeMap::new(),
    };
    let sources = IdentityField::ALL
        .into_iter()
        .map(|field| {
            let source = match values.get(&field) {
                Some((_, s)) => s.clone(),
                None => match field {
                    IdentityField::Tenant | IdentityField::Kind => Source::Default,
                    IdentityField::Actor
                    | IdentityField::OnBehalfOf
                    | IdentityField::Roles
                    | IdentityField::Teams => Source::Unset,
                },
            };
            (
                field,
                FieldOrigin {
                    source,
                    required: required.contains(&field),
                    locked: locked.contains(&field),
                },
            )
        })
        .collect();
    Ok(ResolvedIdentity { principal, sources })
}

fn validate_name(field: IdentityField, value: &str) -> Result<(), ConfigError> {
    let ok = !value.is_empty()
        && value.len() <= 128
        && value
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '@' | '+'));
    if ok {
        Ok(())
    } else {
        Err(ConfigError::Invalid {
            field,
            value: value.to_owned(),
            reason: "use 1-128 letters, digits, '.', '_', '-', '@' or '+'".to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;

    fn layer(kind: LayerKind, text: &str) -> Layer {
        Layer::parse(kind, &format!("/{}/config.toml", kind.as_str()), text).unwrap()
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn managed_wins_env_beats_files_os_user_is_the_default() {
        let layers = [
            layer(
                LayerKind::Project,
                "[identity]\ntenant = \"proj\"\nroles = [\"dev\"]",
            ),
            layer(LayerKind::Managed, "[identity]\ntenant = \"acme\"\n"),
            layer(LayerKind::User, "[identity]\nteams = [\"payments\"]"),
        ];
        let got = resolve_identity(
            &layers,
            &env(&[("WARRANT_TEAMS", "core, infra")]),
            Some("alice"),
        )
        .unwrap();
        assert_eq!(
            got.principal,
            Principal {
                tenant: "acme".into(),
                actor: "alice".into(),
                kind: PrincipalKind::User,
                on_behalf_of: None,
                roles: vec!["dev".into()],
                teams: vec!["core".into(), "infra".into()],
                attrs: BTreeMap::new(),
            }
        );
        assert_eq!(got.sources[&IdentityField::Actor].source, Source::OsUser);
        assert_eq!(
            got.sources[&IdentityField::Teams].source,
            Source::Env {
                var: "WARRANT_TEAMS".into()
            }
        );
        assert_eq!(
            got.sources[&IdentityField::Tenant].source,
            Source::Layer {
                layer: LayerKind::Managed,
                path: "/managed/config.toml".into()
            }
        );
    }

    #[test]
    fn locked_and_required_fields_are_enforced() {
        let managed = layer(
            LayerKind::Managed,
            "[identity]\nrequired = [\"tenant\", \"actor\"]\nlocked = [\"actor\"]\n",
        );
        let err = resolve_identity(
            std::slice::from_ref(&managed),
            &env(&[("WARRANT_ACTOR", "mallory")]),
            Some("alice"),
        )
        .unwrap_err();
        assert_eq!(
            err,
            ConfigError::Locked {
                field: IdentityField::Actor,
                origin: Source::Env {
                    var: "WARRANT_ACTOR".into()
                }
            }
        );
        assert_eq!(err.code(), "W-CONFIG-004");
        let err =
            resolve_identity(std::slice::from_ref(&managed), &env(&[]), Some("alice")).unwrap_err();
        assert_eq!(err.code(), "W-CONFIG-003");
        assert!(err.to_string().contains("`tenant`"), "{err}");
        let ok = resolve_identity(
            &[managed],
            &env(&[("WARRANT_TENANT", "acme")]),
            Some("alice"),
        )
        .unwrap();
        assert_eq!(ok.principal.actor, "alice");
        assert!(ok.sources[&IdentityField::Actor].locked);
    }

    #[test]
    fn bad_files_are_specific_errors() {
        let err = Layer::parse(LayerKind::Project, "p", "[identity]\nactr = \"x\"").unwrap_err();
        assert_eq!(err.code(), "W-CONFIG-001");
        assert!(err.to_string().contains("unknown field `actr`"), "{err}");
        let err =
            Layer::parse(LayerKind::User, "u", "[identity]\nlocked = [\"actor\"]").unwrap_err();
        assert_eq!(err.code(), "W-CONFIG-002");
        let err = resolve_identity(&[], &env(&[("WARRANT_KIND", "robot")]), Some("a")).unwrap_err();
        assert_eq!(err.code(), "W-CONFIG-005");
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
[secrets]
rules = ".gitleaks.toml"
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
        let menu = |tools: &[&str]| MenuConfig {
            tools: tools.iter().map(|t| (*t).to_owned()).collect(),
        };
        assert_eq!(
            merge_settings(&[project, managed, user]),
            Settings {
                max_denials: 7,
                max_turns: 10,
                max_tool_calls: Some(9),
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
                audit_jsonl_path: "mine.jsonl".to_owned(),
                audit_jsonl_max_bytes: Some(5000),
                audit_jsonl_max_age_ms: None,
                audit_jsonl_fsync: JsonlFsync::Batch,
                audit_fail_after_ms: 3_600_000,
                audit_max_pending: 10_000,
                audit_on_full: OnFull::Drop,
                audit_sinks: BTreeMap::from([
                    ("local".to_owned(), sink("http://127.0.0.1:9/in", None)),
                    ("siem".to_owned(), sink("https://siem.example/in", None)),
                ]),
                store_url: Some("postgres://user@db/warrant".to_owned()),
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
            }
        );
    }
}
