//! Subprocess profiles: environment, timeout and output caps of a command, and the sandbox that
//! confines it (roots, protected and denied names, network, limits, isolation). `warrant-exec`
//! turns a profile into a plan; the defaults here are the confinement every profile gets.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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
    /// the default confinement (see [`merge_settings`](super::merge_settings)); `None` here means unconfined.
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
    /// A file in the workspace that also has a name outside it (a hard link from the home
    /// directory, a local `git clone`'s objects, a pnpm store): `mask` (the default) hides it
    /// from commands, as it may be a secret under a harmless name; `allow` leaves it readable.
    #[serde(default, skip_serializing_if = "OutsideLinks::is_mask")]
    pub outside_links: OutsideLinks,
}

/// What a command sees of a workspace file that has a name outside the workspace too.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutsideLinks {
    /// Masked, like a denied name.
    #[default]
    Mask,
    /// Left as it is.
    Allow,
}

impl OutsideLinks {
    pub fn is_mask(&self) -> bool {
        *self == Self::Mask
    }
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
            outside_links: OutsideLinks::default(),
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
