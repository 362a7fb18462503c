//! Normalized actions: what a tool wants to do to the world, in the closed vocabulary that
//! policy, approvals and audit all speak. Paths inside an action are always canonical.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::digest::{Digest, digest_of};
use crate::path::CanonicalPath;

/// The kinds of resource an agent can touch. Closed: a new kind breaks every exhaustive match.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResourceKind {
    Fs,
    Shell,
    Git,
    Memory,
    Catalog,
    Provider,
    Mcp,
    Message,
    Web,
    Agent,
    Artifact,
}

impl ResourceKind {
    pub const ALL: [ResourceKind; 11] = [
        Self::Fs,
        Self::Shell,
        Self::Git,
        Self::Memory,
        Self::Catalog,
        Self::Provider,
        Self::Mcp,
        Self::Message,
        Self::Web,
        Self::Agent,
        Self::Artifact,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fs => "fs",
            Self::Shell => "shell",
            Self::Git => "git",
            Self::Memory => "memory",
            Self::Catalog => "catalog",
            Self::Provider => "provider",
            Self::Mcp => "mcp",
            Self::Message => "message",
            Self::Web => "web",
            Self::Agent => "agent",
            Self::Artifact => "artifact",
        }
    }
}

/// How bad the worst outcome of an action can be. Ordered from least to most severe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RiskClass {
    Read,
    Change,
    External,
    Destructive,
    Secret,
    Irreversible,
}

impl RiskClass {
    pub const ALL: [RiskClass; 6] = [
        Self::Read,
        Self::Change,
        Self::External,
        Self::Destructive,
        Self::Secret,
        Self::Irreversible,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Change => "change",
            Self::External => "external",
            Self::Destructive => "destructive",
            Self::Secret => "secret",
            Self::Irreversible => "irreversible",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Destructive, secret and irreversible actions always go to a person.
    pub fn always_needs_person(self) -> bool {
        match self {
            Self::Read | Self::Change | Self::External => false,
            Self::Destructive | Self::Secret | Self::Irreversible => true,
        }
    }
}

/// Every verb Warrant knows, named `kind.verb`. Tools for some kinds arrive in later issues,
/// but the verbs exist now so policy can already speak of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Verb {
    #[serde(rename = "fs.read")]
    FsRead,
    #[serde(rename = "fs.list")]
    FsList,
    #[serde(rename = "fs.search")]
    FsSearch,
    #[serde(rename = "fs.write")]
    FsWrite,
    #[serde(rename = "fs.create")]
    FsCreate,
    #[serde(rename = "fs.delete")]
    FsDelete,
    #[serde(rename = "shell.exec")]
    ShellExec,
    #[serde(rename = "git.commit")]
    GitCommit,
    #[serde(rename = "git.push")]
    GitPush,
    #[serde(rename = "memory.read")]
    MemoryRead,
    #[serde(rename = "memory.write")]
    MemoryWrite,
    #[serde(rename = "memory.delete")]
    MemoryDelete,
    #[serde(rename = "memory.propose")]
    MemoryPropose,
    #[serde(rename = "memory.publish")]
    MemoryPublish,
    #[serde(rename = "catalog.list")]
    CatalogList,
    #[serde(rename = "catalog.read")]
    CatalogRead,
    #[serde(rename = "provider.call")]
    ProviderCall,
    #[serde(rename = "mcp.call")]
    McpCall,
    #[serde(rename = "artifact.create")]
    ArtifactCreate,
    #[serde(rename = "message.send")]
    MessageSend,
    #[serde(rename = "git.read")]
    GitRead,
    #[serde(rename = "git.branch")]
    GitBranch,
    #[serde(rename = "git.checkout")]
    GitCheckout,
    #[serde(rename = "web.fetch")]
    WebFetch,
    #[serde(rename = "agent.spawn")]
    AgentSpawn,
}

impl Verb {
    pub const ALL: [Verb; 25] = [
        Self::FsRead,
        Self::FsList,
        Self::FsSearch,
        Self::FsWrite,
        Self::FsCreate,
        Self::FsDelete,
        Self::ShellExec,
        Self::GitCommit,
        Self::GitPush,
        Self::MemoryRead,
        Self::MemoryWrite,
        Self::MemoryDelete,
        Self::MemoryPropose,
        Self::MemoryPublish,
        Self::CatalogList,
        Self::CatalogRead,
        Self::ProviderCall,
        Self::McpCall,
        Self::MessageSend,
        Self::GitRead,
        Self::GitBranch,
        Self::GitCheckout,
        Self::WebFetch,
        Self::AgentSpawn,
        Self::ArtifactCreate,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::FsRead => "fs.read",
            Self::FsList => "fs.list",
            Self::FsSearch => "fs.search",
            Self::FsWrite => "fs.write",
            Self::FsCreate => "fs.create",
            Self::FsDelete => "fs.delete",
            Self::ShellExec => "shell.exec",
            Self::GitCommit => "git.commit",
            Self::GitPush => "git.push",
            Self::MemoryRead => "memory.read",
            Self::MemoryWrite => "memory.write",
            Self::MemoryDelete => "memory.delete",
            Self::MemoryPropose => "memory.propose",
            Self::MemoryPublish => "memory.publish",
            Self::CatalogList => "catalog.list",
            Self::CatalogRead => "catalog.read",
            Self::ProviderCall => "provider.call",
            Self::McpCall => "mcp.call",
            Self::ArtifactCreate => "artifact.create",
            Self::MessageSend => "message.send",
            Self::GitRead => "git.read",
            Self::GitBranch => "git.branch",
            Self::GitCheckout => "git.checkout",
            Self::WebFetch => "web.fetch",
            Self::AgentSpawn => "agent.spawn",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    pub fn kind(self) -> ResourceKind {
        match self {
            Self::FsRead
            | Self::FsList
            | Self::FsSearch
            | Self::FsWrite
            | Self::FsCreate
            | Self::FsDelete => ResourceKind::Fs,
            Self::ShellExec => ResourceKind::Shell,
            Self::GitCommit
            | Self::GitPush
            | Self::GitRead
            | Self::GitBranch
            | Self::GitCheckout => ResourceKind::Git,
            Self::MemoryRead
            | Self::MemoryWrite
            | Self::MemoryDelete
            | Self::MemoryPropose
            | Self::MemoryPublish => ResourceKind::Memory,
            Self::CatalogList | Self::CatalogRead => ResourceKind::Catalog,
            Self::ProviderCall => ResourceKind::Provider,
            Self::McpCall => ResourceKind::Mcp,
            Self::ArtifactCreate => ResourceKind::Artifact,
            Self::MessageSend => ResourceKind::Message,
            Self::WebFetch => ResourceKind::Web,
            Self::AgentSpawn => ResourceKind::Agent,
        }
    }

    /// The risk class an action of this verb has unless policy names a worse one.
    pub fn default_risk(self) -> RiskClass {
        match self {
            Self::FsRead
            | Self::FsList
            | Self::FsSearch
            | Self::MemoryRead
            | Self::CatalogList
            | Self::CatalogRead
            | Self::GitRead => RiskClass::Read,
            Self::FsWrite
            | Self::FsCreate
            | Self::ShellExec
            | Self::GitCommit
            | Self::MemoryWrite
            | Self::MemoryDelete
            | Self::GitBranch
            | Self::GitCheckout
            | Self::MemoryPropose
            | Self::MemoryPublish
            | Self::AgentSpawn
            | Self::ArtifactCreate => RiskClass::Change,
            Self::GitPush
            | Self::ProviderCall
            | Self::McpCall
            | Self::MessageSend
            | Self::WebFetch => RiskClass::External,
            Self::FsDelete => RiskClass::Destructive,
        }
    }

    /// Whether running the effect twice is harmless (replay may re-run it after a crash).
    pub fn idempotent(self) -> bool {
        match self {
            Self::FsRead
            | Self::FsList
            | Self::FsSearch
            | Self::MemoryRead
            | Self::CatalogList
            | Self::CatalogRead
            | Self::GitRead
            | Self::WebFetch
            | Self::FsWrite
            // Memory entries and drafts are keyed by the effect that made them, and a publish
            // by its draft: doing one twice leaves what doing it once did.
            | Self::MemoryWrite
            | Self::MemoryDelete
            | Self::MemoryPropose
            | Self::MemoryPublish
            // A child run's id is derived from its parent and the call: doing it again
            // continues (or reads back) the same child, never a second one.
            | Self::AgentSpawn => true,
            // The same bytes (bound by digest) and a fresh signature over the same statement.
            | Self::ArtifactCreate => true,
            Self::FsCreate
            | Self::FsDelete
            | Self::ShellExec
            | Self::GitCommit
            | Self::GitPush
            | Self::ProviderCall
            | Self::McpCall
            | Self::MessageSend
            | Self::GitBranch
            | Self::GitCheckout => false,
        }
    }
}

/// One normalized action. Illegal combinations (a write without content, an exec without a
/// working directory) cannot be built.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verb")]
pub enum Action {
    #[serde(rename = "fs.read")]
    FsRead { path: CanonicalPath },
    #[serde(rename = "fs.list")]
    FsList { path: CanonicalPath },
    #[serde(rename = "fs.search")]
    FsSearch {
        path: CanonicalPath,
        pattern: String,
    },
    #[serde(rename = "fs.write")]
    FsWrite {
        path: CanonicalPath,
        content: String,
    },
    #[serde(rename = "fs.create")]
    FsCreate {
        path: CanonicalPath,
        content: String,
    },
    #[serde(rename = "fs.delete")]
    FsDelete {
        path: CanonicalPath,
        recursive: bool,
    },
    #[serde(rename = "shell.exec")]
    ShellExec {
        argv: Vec<String>,
        cwd: CanonicalPath,
        profile: String,
        timeout_ms: u64,
        /// The executable argv[0] named when the action was proposed: looked up with the
        /// command's PATH and cwd, symlinks followed. Policy and the recognizers know the
        /// program by it. `None` when nothing was found (or nobody looked, in older logs):
        /// then argv[0] is all that is known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        program: Option<CanonicalPath>,
        /// The profile confines the command by the default view (its own namespaces, no
        /// network, writes only in the workspace): policy may let it run without a person. The
        /// executor refuses to run it under a profile that no longer does.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        contained: bool,
        /// How a contained command's effects on the workspace are judged: from the changeset
        /// it leaves in a copy-on-write layer (the default), or, on a machine without
        /// overlays, from its argv before it runs (its writes then land directly).
        #[serde(default, skip_serializing_if = "Judging::is_changeset")]
        judged: Judging,
    },
    /// One model call: `provider` as in `--model` (`openai`, `anthropic`, `scripted`) and the
    /// model asked for.
    #[serde(rename = "provider.call")]
    ProviderCall { provider: String, model: String },
    /// Keep `text` in memory: a local namespace of this workspace.
    #[serde(rename = "memory.write")]
    MemoryWrite {
        scope: MemoryScope,
        namespace: String,
        text: String,
        tags: Vec<String>,
    },
    /// Search a namespace for `query` (already bounded: distinct words, at most
    /// [`MAX_QUERY_TERMS`]), at most `limit` entries.
    #[serde(rename = "memory.read")]
    MemoryRead {
        scope: MemoryScope,
        namespace: String,
        query: String,
        limit: u32,
    },
    /// Forget one entry (`id`) of a namespace; for a published entry of shared memory, a
    /// person's withdrawal, with their `reason`.
    #[serde(rename = "memory.delete")]
    MemoryDelete {
        scope: MemoryScope,
        namespace: String,
        id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Propose `text` for a shared namespace: a draft that only a person may publish.
    #[serde(rename = "memory.propose")]
    MemoryPropose {
        namespace: String,
        text: String,
        tags: Vec<String>,
    },
    /// A person's review of a draft for a shared namespace, bound to the draft's digest as the
    /// reviewer saw it: publish it (`publish`), or reject it; `reason` is theirs.
    #[serde(rename = "memory.publish")]
    MemoryPublish {
        namespace: String,
        draft: String,
        digest: Digest,
        publish: bool,
        reason: String,
    },
    /// A read of a repository (`status`, `diff`, `log`, `show`): `what` names the read and its
    /// arguments as the tool ran it, e.g. `log -n 20 -- src/`.
    #[serde(rename = "git.read")]
    GitRead { repo: CanonicalPath, what: GitRead },
    /// A commit of the index (after staging `paths`, or everything tracked and changed when
    /// empty) on the current branch, authored by the run's principal.
    #[serde(rename = "git.commit")]
    GitCommit {
        repo: CanonicalPath,
        message: String,
        paths: Vec<String>,
        author: GitAuthor,
        /// Who wrote it with the author: the `Co-authored-by` trailer.
        coauthor: GitAuthor,
        /// The `Warrant-Run` trailer.
        run: String,
    },
    /// A new branch at `HEAD` (never moving an existing one).
    #[serde(rename = "git.branch")]
    GitBranch { repo: CanonicalPath, name: String },
    /// Switching the worktree to `rev`, refused when it holds uncommitted work.
    #[serde(rename = "git.checkout")]
    GitCheckout { repo: CanonicalPath, rev: String },
    /// Pushing `branch` to `remote` (fast-forward only: never forced).
    #[serde(rename = "git.push")]
    GitPush {
        repo: CanonicalPath,
        remote: String,
        branch: String,
    },
    /// An HTTP(S) GET of `url` (`host` and `port` as parsed from it); `allowlisted` when the
    /// host is on the configured `[web] allow` list at the time it was proposed.
    #[serde(rename = "web.fetch")]
    WebFetch {
        url: String,
        host: String,
        port: u16,
        allowlisted: bool,
    },
    /// One call of a tool of a configured MCP server, as the server names it (`tool`), with
    /// the arguments the model gave. `risk` is the class the operator's configuration or the
    /// server's annotations give it; `definition` the digest of the tool's definition when the
    /// call was proposed, so an approval binds to it and a call to a tool whose definition
    /// changed since is refused.
    #[serde(rename = "mcp.call")]
    McpCall {
        server: String,
        tool: String,
        arguments: Value,
        risk: RiskClass,
        definition: String,
    },
    /// Start a child run for `task` under this run's principal, offered `tools` (the parent's
    /// own, or the narrower `[menus.NAME]` named by `menu`), its commands held to `profile` when
    /// one is named. `child` is the id the child run gets, derived from the parent run and the
    /// call, so a call repeated after a crash finds its child instead of starting a second;
    /// `depth` is the child's (1 under a top-level run).
    #[serde(rename = "agent.spawn")]
    AgentSpawn {
        task: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        menu: Option<String>,
        tools: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        profile: Option<String>,
        child: crate::RunId,
        depth: u32,
    },
    /// List what a configured catalog holds under a namespace (`namespace` empty: its top
    /// level): child namespaces and tables. Read-only: Warrant has no catalog write at all.
    #[serde(rename = "catalog.list")]
    CatalogList {
        catalog: String,
        namespace: Vec<String>,
    },
    /// Load one table's metadata (schema, partition spec, properties, current snapshot).
    #[serde(rename = "catalog.read")]
    CatalogRead {
        catalog: String,
        namespace: Vec<String>,
        table: String,
    },
    /// A generated artifact (a document, spreadsheet, presentation or report) at `path`, with
    /// its signed provenance beside it (`NAME.intoto.jsonl`). `spec` is the tool's input the
    /// file is generated from (deterministically), `digest` the SHA-256 of the bytes it makes:
    /// the executor writes those bytes only. Comes with the `fs.write`/`fs.create` of `path`.
    #[serde(rename = "artifact.create")]
    ArtifactCreate {
        path: CanonicalPath,
        kind: ArtifactKind,
        digest: Digest,
        spec: Value,
    },
}

/// The kinds of artifact the artifact tools make.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArtifactKind {
    Document,
    Spreadsheet,
    Presentation,
    Report,
}

impl ArtifactKind {
    pub const ALL: [ArtifactKind; 4] = [
        Self::Document,
        Self::Spreadsheet,
        Self::Presentation,
        Self::Report,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Document => "document",
            Self::Spreadsheet => "spreadsheet",
            Self::Presentation => "presentation",
            Self::Report => "report",
        }
    }

    /// The kind a file name says: `.docx`, `.xlsx`, `.pptx`, anything else a report.
    pub fn for_name(name: &str) -> Self {
        let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
        match ext.as_deref() {
            Some("docx") => Self::Document,
            Some("xlsx") => Self::Spreadsheet,
            Some("pptx") => Self::Presentation,
            Some(_) | None => Self::Report,
        }
    }
}

/// The most words a memory query keeps (distinct, in order of first appearance).
pub const MAX_QUERY_TERMS: usize = 32;

/// Whose memory a namespace is: this workspace's agents' (`local`), or what other agents and
/// people treat as true (`shared`, written only through a reviewed draft).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryScope {
    Local,
    Shared,
}

impl MemoryScope {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Shared => "shared",
        }
    }
}

/// The read a `git.read` action performs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum GitRead {
    Status,
    Diff {
        staged: bool,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        paths: Vec<String>,
    },
    Log {
        max: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
    },
    Show {
        rev: String,
    },
}

impl GitRead {
    /// The read as a person names it: `status`, `diff --staged -- a b`, `log -n 20`, `show HEAD`.
    pub fn describe(&self) -> String {
        match self {
            Self::Status => "status".into(),
            Self::Diff { staged, paths } => {
                let mut s = if *staged { "diff --staged" } else { "diff" }.to_owned();
                if !paths.is_empty() {
                    s.push_str(" -- ");
                    s.push_str(&paths.join(" "));
                }
                s
            }
            Self::Log { max, path } => match path {
                Some(p) => format!("log -n {max} -- {p}"),
                None => format!("log -n {max}"),
            },
            Self::Show { rev } => format!("show {rev}"),
        }
    }
}

/// A namespace as a person writes it (`memory/local/notes`, `local/notes`, `shared/team`):
/// its scope and name; `None` when it names no scope.
pub fn parse_memory_target(target: &str) -> Option<(MemoryScope, String)> {
    let rest = target.strip_prefix("memory/").unwrap_or(target);
    let (scope, namespace) = rest.split_once('/')?;
    let scope = match scope {
        "local" => MemoryScope::Local,
        "shared" => MemoryScope::Shared,
        _ => return None,
    };
    (!namespace.is_empty()).then(|| (scope, namespace.to_owned()))
}

/// The resource a memory action is on: `memory/<scope>/<namespace>`.
pub fn memory_resource(scope: MemoryScope, namespace: &str) -> String {
    format!("memory/{}/{namespace}", scope.as_str())
}

/// The resource a catalog action is on: `catalog/<catalog>/<ns1>/<ns2>/<table>`, so a policy
/// restricts a namespace (and everything under it) with `like "catalog/prod/sales/*"`. Each
/// segment is escaped (`%` as `%25`, `/` as `%2F`, control characters as `%XX`), so a namespace
/// named `a/b` can never pass for the namespace `a` holding `b`.
pub fn catalog_resource(catalog: &str, namespace: &[String], table: Option<&str>) -> String {
    let mut out = format!("catalog/{}", escape_segment(catalog));
    for part in namespace.iter().map(String::as_str).chain(table) {
        out.push('/');
        out.push_str(&escape_segment(part));
    }
    out
}

fn escape_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c == '%' || c == '/' || c.is_control() {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A commit's author or co-author, as git writes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GitAuthor {
    pub name: String,
    pub email: String,
}

impl std::fmt::Display for GitAuthor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} <{}>", self.name, self.email)
    }
}

/// What a contained command is judged by (see `Action::ShellExec::judged`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Judging {
    /// What it actually changed: its writes land in a copy-on-write layer, read and classified
    /// after it ran.
    #[default]
    Changeset,
    /// Its argv, by the recognizers, before it runs: overlays are unavailable here, so it writes
    /// to the workspace directly (still in its own view) and a destructive argv asks first.
    Argv,
}

impl Judging {
    pub fn is_changeset(&self) -> bool {
        *self == Self::Changeset
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Changeset => "changeset",
            Self::Argv => "argv",
        }
    }
}

impl Action {
    pub fn verb(&self) -> Verb {
        match self {
            Self::FsRead { .. } => Verb::FsRead,
            Self::FsList { .. } => Verb::FsList,
            Self::FsSearch { .. } => Verb::FsSearch,
            Self::FsWrite { .. } => Verb::FsWrite,
            Self::FsCreate { .. } => Verb::FsCreate,
            Self::FsDelete { .. } => Verb::FsDelete,
            Self::ShellExec { .. } => Verb::ShellExec,
            Self::ProviderCall { .. } => Verb::ProviderCall,
            Self::MemoryWrite { .. } => Verb::MemoryWrite,
            Self::MemoryRead { .. } => Verb::MemoryRead,
            Self::MemoryDelete { .. } => Verb::MemoryDelete,
            Self::MemoryPropose { .. } => Verb::MemoryPropose,
            Self::MemoryPublish { .. } => Verb::MemoryPublish,
            Self::GitRead { .. } => Verb::GitRead,
            Self::GitCommit { .. } => Verb::GitCommit,
            Self::GitBranch { .. } => Verb::GitBranch,
            Self::GitCheckout { .. } => Verb::GitCheckout,
            Self::GitPush { .. } => Verb::GitPush,
            Self::WebFetch { .. } => Verb::WebFetch,
            Self::McpCall { .. } => Verb::McpCall,
            Self::AgentSpawn { .. } => Verb::AgentSpawn,
            Self::CatalogList { .. } => Verb::CatalogList,
            Self::CatalogRead { .. } => Verb::CatalogRead,
            Self::ArtifactCreate { .. } => Verb::ArtifactCreate,
        }
    }

    /// The resource the action is on, as a person reads it: a canonical path or a command line.
    pub fn target(&self) -> String {
        match self {
            Self::FsRead { path }
            | Self::FsList { path }
            | Self::FsSearch { path, .. }
            | Self::FsWrite { path, .. }
            | Self::FsCreate { path, .. }
            | Self::FsDelete { path, .. }
            | Self::ArtifactCreate { path, .. } => path.as_str().to_owned(),
            Self::ShellExec { argv, .. } => argv.join(" "),
            Self::ProviderCall { provider, model } => format!("{provider}:{model}"),
            Self::MemoryWrite {
                scope, namespace, ..
            }
            | Self::MemoryRead {
                scope, namespace, ..
            } => memory_resource(*scope, namespace),
            Self::MemoryDelete {
                scope,
                namespace,
                id,
                ..
            } => format!("{}#{id}", memory_resource(*scope, namespace)),
            Self::MemoryPropose { namespace, .. } => {
                memory_resource(MemoryScope::Shared, namespace)
            }
            Self::MemoryPublish {
                namespace, draft, ..
            } => format!(
                "{}#{draft}",
                memory_resource(MemoryScope::Shared, namespace)
            ),
            Self::GitRead { repo, .. }
            | Self::GitCommit { repo, .. }
            | Self::GitBranch { repo, .. }
            | Self::GitCheckout { repo, .. }
            | Self::GitPush { repo, .. } => self.git_resource(repo),
            Self::WebFetch { url, .. } => url.clone(),
            Self::McpCall { server, tool, .. } => format!("mcp/{server}/{tool}"),
            Self::AgentSpawn { child, .. } => format!("agent/{child}"),
            Self::CatalogList { catalog, namespace } => catalog_resource(catalog, namespace, None),
            Self::CatalogRead {
                catalog,
                namespace,
                table,
            } => catalog_resource(catalog, namespace, Some(table)),
        }
    }

    /// A git action's resource, `git<repo>/<what>`: e.g. `git/w/app/commit`,
    /// `git/w/app/branch/topic`, `git/w/app/push/origin/main`.
    fn git_resource(&self, repo: &CanonicalPath) -> String {
        let what = match self {
            Self::GitRead { what, .. } => what.describe(),
            Self::GitCommit { .. } => "commit".into(),
            Self::GitBranch { name, .. } => format!("branch/{name}"),
            Self::GitCheckout { rev, .. } => format!("checkout/{rev}"),
            Self::GitPush { remote, branch, .. } => format!("push/{remote}/{branch}"),
            Self::FsRead { .. }
            | Self::FsList { .. }
            | Self::FsSearch { .. }
            | Self::FsWrite { .. }
            | Self::FsCreate { .. }
            | Self::FsDelete { .. }
            | Self::ShellExec { .. }
            | Self::ProviderCall { .. }
            | Self::MemoryWrite { .. }
            | Self::MemoryRead { .. }
            | Self::MemoryDelete { .. }
            | Self::MemoryPropose { .. }
            | Self::MemoryPublish { .. }
            | Self::McpCall { .. }
            | Self::AgentSpawn { .. }
            | Self::CatalogList { .. }
            | Self::CatalogRead { .. }
            | Self::WebFetch { .. }
            | Self::ArtifactCreate { .. } => String::new(),
        };
        format!("git{}/{what}", repo.as_str().trim_end_matches('/'))
    }

    /// The risk class of this very action: the verb's default, raised by what the action
    /// does (see [`crate::risk::classify`]).
    pub fn risk(&self) -> RiskClass {
        crate::risk::classify(self).0
    }

    /// The digest an approval binds to: SHA-256 over the canonical JSON of the whole action,
    /// content included, so a changed write needs a new approval.
    pub fn digest(&self) -> Digest {
        // Serializing a plain data enum cannot fail; fall back to the debug form regardless so
        // the digest is never empty.
        digest_of(self).unwrap_or_else(|_| Digest::of_bytes(format!("{self:?}").as_bytes()))
    }

    /// What audit records may hold: everything but content, which is replaced by its digest and
    /// size. File contents can hold secrets; the trail never does.
    pub fn audit_view(&self) -> Value {
        match self {
            Self::FsWrite { path, content } | Self::FsCreate { path, content } => json!({
                "verb": self.verb(),
                "path": path,
                "content_digest": Digest::of_bytes(content.as_bytes()),
                "content_bytes": content.len(),
            }),
            Self::MemoryWrite {
                scope,
                namespace,
                text,
                tags,
            } => json!({
                "verb": self.verb(),
                "scope": scope,
                "namespace": namespace,
                "tags": tags,
                "content_digest": Digest::of_bytes(text.as_bytes()),
                "content_bytes": text.len(),
            }),
            Self::MemoryPropose {
                namespace,
                text,
                tags,
            } => json!({
                "verb": self.verb(),
                "namespace": namespace,
                "tags": tags,
                "content_digest": Digest::of_bytes(text.as_bytes()),
                "content_bytes": text.len(),
            }),
            // The spec is the artifact's content: the trail holds its digest only.
            Self::ArtifactCreate {
                path,
                kind,
                digest,
                spec,
            } => json!({
                "verb": self.verb(),
                "path": path,
                "kind": kind,
                "digest": digest,
                "spec_digest": digest_of(spec).ok(),
            }),
            Self::MemoryRead { .. }
            | Self::MemoryDelete { .. }
            | Self::MemoryPublish { .. }
            | Self::FsRead { .. }
            | Self::FsList { .. }
            | Self::FsSearch { .. }
            | Self::FsDelete { .. }
            | Self::ShellExec { .. }
            | Self::ProviderCall { .. }
            | Self::GitRead { .. }
            | Self::GitCommit { .. }
            | Self::GitBranch { .. }
            | Self::GitCheckout { .. }
            | Self::GitPush { .. }
            | Self::WebFetch { .. }
            | Self::AgentSpawn { .. }
            | Self::McpCall { .. }
            | Self::CatalogList { .. }
            | Self::CatalogRead { .. } => {
                serde_json::to_value(self).unwrap_or_else(|_| json!({"verb": self.verb()}))
            }
        }
    }
}

/// What an executor receives instead of the whole [`Action`]: the one kind it acts on, made
/// from an action by [`Payload::of`], so it never says more than the action that was decided.
/// The kernel narrows an authorized action to one (`Authorized<Action>::narrow`), so an
/// executor's signature names the only kind that can reach it.
pub trait Payload: Sized {
    /// The payload this action is, when it is of this kind; `None` for every other kind.
    fn of(action: &Action) -> Option<Self>;
}

/// The payload of `fs.read`: the file to read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsRead {
    pub path: CanonicalPath,
}

/// The payload of `fs.list`: the directory to list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsList {
    pub path: CanonicalPath,
}

/// The payload of `fs.search`: the tree (or file) to search and the text to look for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsSearch {
    pub path: CanonicalPath,
    pub pattern: String,
}

/// What the file-write executor receives: a whole-file write (`fs.write`), or a create that
/// refuses an existing file (`fs.create`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsWrite {
    pub path: CanonicalPath,
    pub content: String,
    /// `fs.create`: fail rather than replace a file that exists.
    pub create_only: bool,
}

/// The payload of `fs.delete`: the path to remove, and whether a directory goes with
/// everything inside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsDelete {
    pub path: CanonicalPath,
    pub recursive: bool,
}

/// The payload of `shell.exec`: every field of the decided command (see
/// [`Action::ShellExec`] for what each means).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShellExec {
    pub argv: Vec<String>,
    pub cwd: CanonicalPath,
    pub profile: String,
    pub timeout_ms: u64,
    pub program: Option<CanonicalPath>,
    pub contained: bool,
    pub judged: Judging,
}

impl Payload for FsRead {
    fn of(action: &Action) -> Option<Self> {
        let Action::FsRead { path } = action else {
            return None;
        };
        Some(Self { path: path.clone() })
    }
}

impl Payload for FsList {
    fn of(action: &Action) -> Option<Self> {
        let Action::FsList { path } = action else {
            return None;
        };
        Some(Self { path: path.clone() })
    }
}

impl Payload for FsSearch {
    fn of(action: &Action) -> Option<Self> {
        let Action::FsSearch { path, pattern } = action else {
            return None;
        };
        Some(Self {
            path: path.clone(),
            pattern: pattern.clone(),
        })
    }
}

impl Payload for FsWrite {
    fn of(action: &Action) -> Option<Self> {
        match action {
            Action::FsWrite { path, content } => Some(Self {
                path: path.clone(),
                content: content.clone(),
                create_only: false,
            }),
            Action::FsCreate { path, content } => Some(Self {
                path: path.clone(),
                content: content.clone(),
                create_only: true,
            }),
            Action::FsRead { .. }
            | Action::FsList { .. }
            | Action::FsSearch { .. }
            | Action::FsDelete { .. }
            | Action::ShellExec { .. }
            | Action::ProviderCall { .. }
            | Action::MemoryWrite { .. }
            | Action::MemoryRead { .. }
            | Action::MemoryDelete { .. }
            | Action::MemoryPropose { .. }
            | Action::MemoryPublish { .. } => None,
            Action::GitRead { .. }
            | Action::GitCommit { .. }
            | Action::GitBranch { .. }
            | Action::GitCheckout { .. }
            | Action::GitPush { .. }
            | Action::WebFetch { .. }
            | Action::AgentSpawn { .. }
            | Action::McpCall { .. }
            | Action::CatalogList { .. }
            | Action::CatalogRead { .. }
            | Action::ArtifactCreate { .. } => None,
        }
    }
}

impl Payload for FsDelete {
    fn of(action: &Action) -> Option<Self> {
        let Action::FsDelete { path, recursive } = action else {
            return None;
        };
        Some(Self {
            path: path.clone(),
            recursive: *recursive,
        })
    }
}

impl Payload for ShellExec {
    fn of(action: &Action) -> Option<Self> {
        let Action::ShellExec {
            argv,
            cwd,
            profile,
            timeout_ms,
            program,
            contained,
            judged,
        } = action
        else {
            return None;
        };
        Some(Self {
            argv: argv.clone(),
            cwd: cwd.clone(),
            profile: profile.clone(),
            timeout_ms: *timeout_ms,
            program: program.clone(),
            contained: *contained,
            judged: *judged,
        })
    }
}

/// The payload of `memory.write`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryWrite {
    pub scope: MemoryScope,
    pub namespace: String,
    pub text: String,
    pub tags: Vec<String>,
}

/// The payload of `memory.read`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryRead {
    pub scope: MemoryScope,
    pub namespace: String,
    pub query: String,
    pub limit: u32,
}

/// The payload of `memory.delete`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryDelete {
    pub scope: MemoryScope,
    pub namespace: String,
    pub id: String,
    pub reason: Option<String>,
}

/// The payload of `memory.propose`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryPropose {
    pub namespace: String,
    pub text: String,
    pub tags: Vec<String>,
}

impl Payload for MemoryWrite {
    fn of(action: &Action) -> Option<Self> {
        let Action::MemoryWrite {
            scope,
            namespace,
            text,
            tags,
        } = action
        else {
            return None;
        };
        Some(Self {
            scope: *scope,
            namespace: namespace.clone(),
            text: text.clone(),
            tags: tags.clone(),
        })
    }
}

impl Payload for MemoryRead {
    fn of(action: &Action) -> Option<Self> {
        let Action::MemoryRead {
            scope,
            namespace,
            query,
            limit,
        } = action
        else {
            return None;
        };
        Some(Self {
            scope: *scope,
            namespace: namespace.clone(),
            query: query.clone(),
            limit: *limit,
        })
    }
}

impl Payload for MemoryDelete {
    fn of(action: &Action) -> Option<Self> {
        let Action::MemoryDelete {
            scope,
            namespace,
            id,
            reason,
        } = action
        else {
            return None;
        };
        Some(Self {
            scope: *scope,
            namespace: namespace.clone(),
            id: id.clone(),
            reason: reason.clone(),
        })
    }
}

impl Payload for MemoryPropose {
    fn of(action: &Action) -> Option<Self> {
        let Action::MemoryPropose {
            namespace,
            text,
            tags,
        } = action
        else {
            return None;
        };
        Some(Self {
            namespace: namespace.clone(),
            text: text.clone(),
            tags: tags.clone(),
        })
    }
}

/// The payload of every `git.*` action: the executor of git speaks all of them, each on the
/// one repository it names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GitOp {
    pub repo: CanonicalPath,
    pub action: Action,
}

impl Payload for GitOp {
    fn of(action: &Action) -> Option<Self> {
        match action {
            Action::GitRead { repo, .. }
            | Action::GitCommit { repo, .. }
            | Action::GitBranch { repo, .. }
            | Action::GitCheckout { repo, .. }
            | Action::GitPush { repo, .. } => Some(Self {
                repo: repo.clone(),
                action: action.clone(),
            }),
            Action::FsRead { .. }
            | Action::FsList { .. }
            | Action::FsSearch { .. }
            | Action::FsWrite { .. }
            | Action::FsCreate { .. }
            | Action::FsDelete { .. }
            | Action::ShellExec { .. }
            | Action::ProviderCall { .. }
            | Action::MemoryWrite { .. }
            | Action::MemoryRead { .. }
            | Action::MemoryDelete { .. }
            | Action::MemoryPropose { .. }
            | Action::MemoryPublish { .. }
            | Action::McpCall { .. }
            | Action::AgentSpawn { .. }
            | Action::CatalogList { .. }
            | Action::CatalogRead { .. }
            | Action::ArtifactCreate { .. }
            | Action::WebFetch { .. } => None,
        }
    }
}

/// The payload of `web.fetch`: the URL to GET.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebFetch {
    pub url: String,
}

impl Payload for WebFetch {
    fn of(action: &Action) -> Option<Self> {
        let Action::WebFetch { url, .. } = action else {
            return None;
        };
        Some(Self { url: url.clone() })
    }
}

/// The payload of `mcp.call`: the server, the tool as the server names it, the arguments,
/// and the digest of the tool's definition the call was decided against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpCall {
    pub server: String,
    pub tool: String,
    pub arguments: Value,
    pub definition: String,
}

impl Payload for McpCall {
    fn of(action: &Action) -> Option<Self> {
        let Action::McpCall {
            server,
            tool,
            arguments,
            definition,
            ..
        } = action
        else {
            return None;
        };
        Some(Self {
            server: server.clone(),
            tool: tool.clone(),
            arguments: arguments.clone(),
            definition: definition.clone(),
        })
    }
}

/// The payload of `agent.spawn`: everything the decided spawn says, for the one executor that
/// starts child runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentSpawn {
    pub task: String,
    pub menu: Option<String>,
    pub tools: Vec<String>,
    pub profile: Option<String>,
    pub child: crate::RunId,
    pub depth: u32,
}

impl Payload for AgentSpawn {
    fn of(action: &Action) -> Option<Self> {
        let Action::AgentSpawn {
            task,
            menu,
            tools,
            profile,
            child,
            depth,
        } = action
        else {
            return None;
        };
        Some(Self {
            task: task.clone(),
            menu: menu.clone(),
            tools: tools.clone(),
            profile: profile.clone(),
            child: child.clone(),
            depth: *depth,
        })
    }
}

/// The payload of `catalog.list`: the catalog and the namespace whose children are listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogList {
    pub catalog: String,
    pub namespace: Vec<String>,
}

impl Payload for CatalogList {
    fn of(action: &Action) -> Option<Self> {
        let Action::CatalogList { catalog, namespace } = action else {
            return None;
        };
        Some(Self {
            catalog: catalog.clone(),
            namespace: namespace.clone(),
        })
    }
}

/// The payload of `catalog.read`: one table of a catalog.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogRead {
    pub catalog: String,
    pub namespace: Vec<String>,
    pub table: String,
}

impl Payload for CatalogRead {
    fn of(action: &Action) -> Option<Self> {
        let Action::CatalogRead {
            catalog,
            namespace,
            table,
        } = action
        else {
            return None;
        };
        Some(Self {
            catalog: catalog.clone(),
            namespace: namespace.clone(),
            table: table.clone(),
        })
    }
}

/// The payload of `artifact.create`: where, what kind, the digest of the bytes to write and the
/// spec they are generated from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArtifactCreate {
    pub path: CanonicalPath,
    pub kind: ArtifactKind,
    pub digest: Digest,
    pub spec: Value,
}

impl Payload for ArtifactCreate {
    fn of(action: &Action) -> Option<Self> {
        let Action::ArtifactCreate {
            path,
            kind,
            digest,
            spec,
        } = action
        else {
            return None;
        };
        Some(Self {
            path: path.clone(),
            kind: *kind,
            digest: digest.clone(),
            spec: spec.clone(),
        })
    }
}

/// The verb and target of an action read back from its [`Action::audit_view`], as a reader of
/// the audit trail names it. A write's view holds no content, so it is read by its path; every
/// other view is the action itself. `None` for a view that is neither.
pub fn audit_view_target(view: &Value) -> Option<(Verb, String)> {
    let verb = Verb::parse(view.get("verb")?.as_str()?)?;
    if matches!(verb, Verb::FsWrite | Verb::FsCreate | Verb::ArtifactCreate) {
        return Some((verb, view.get("path")?.as_str()?.to_owned()));
    }
    if matches!(verb, Verb::MemoryWrite | Verb::MemoryPropose) {
        let scope = if verb == Verb::MemoryPropose {
            MemoryScope::Shared
        } else {
            serde_json::from_value(view.get("scope")?.clone()).ok()?
        };
        let namespace = view.get("namespace")?.as_str()?;
        return Some((verb, memory_resource(scope, namespace)));
    }
    let action: Action = serde_json::from_value(view.clone()).ok()?;
    Some((action.verb(), action.target()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn verbs_round_trip_and_know_their_kind() {
        for verb in Verb::ALL {
            assert_eq!(Verb::parse(verb.as_str()), Some(verb));
            assert!(verb.as_str().starts_with(verb.kind().as_str()));
            assert_eq!(
                serde_json::to_value(verb).unwrap(),
                serde_json::json!(verb.as_str())
            );
        }
        assert_eq!(Verb::parse("fs.chmod"), None);
    }

    #[test]
    fn audit_view_never_holds_content() {
        let path = CanonicalPath::from_normalized("/w/notes.txt").unwrap();
        let action = Action::FsWrite {
            path,
            content: "password=hunter2".into(),
        };
        let view = action.audit_view();
        assert_eq!(
            view,
            json!({
                "verb": "fs.write",
                "path": "/w/notes.txt",
                "content_digest": Digest::of_bytes(b"password=hunter2"),
                "content_bytes": 16,
            })
        );
        assert!(!view.to_string().contains("hunter2"));
    }

    #[test]
    fn an_audit_view_names_the_verb_and_target_of_its_action() {
        let path = CanonicalPath::from_normalized("/w/a").unwrap();
        let actions = [
            Action::FsWrite {
                path: path.clone(),
                content: "secret".into(),
            },
            Action::FsDelete {
                path,
                recursive: true,
            },
            Action::ProviderCall {
                provider: "openai".into(),
                model: "gpt".into(),
            },
        ];
        let read: Vec<Option<(Verb, String)>> = actions
            .iter()
            .map(|a| audit_view_target(&a.audit_view()))
            .collect();
        let expected: Vec<Option<(Verb, String)>> = actions
            .iter()
            .map(|a| Some((a.verb(), a.target())))
            .collect();
        assert_eq!(read, expected);
        assert_eq!(audit_view_target(&json!({"verb": "fs.nope"})), None);
    }

    #[test]
    fn a_catalog_resource_escapes_what_would_pass_for_another_level() {
        let ns = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            catalog_resource("prod", &ns(&["sales", "eu"]), Some("orders")),
            "catalog/prod/sales/eu/orders"
        );
        assert_ne!(
            catalog_resource("prod", &ns(&["sales/eu"]), Some("orders")),
            catalog_resource("prod", &ns(&["sales", "eu"]), Some("orders"))
        );
        assert_eq!(
            catalog_resource("prod", &ns(&["a/b%", "x\u{1f}y", "ventes-été"]), None),
            "catalog/prod/a%2Fb%25/x%1Fy/ventes-été"
        );
    }

    #[test]
    fn digest_covers_content() {
        let path = CanonicalPath::from_normalized("/w/a").unwrap();
        let a = Action::FsWrite {
            path: path.clone(),
            content: "one".into(),
        };
        let b = Action::FsWrite {
            path,
            content: "two".into(),
        };
        assert_ne!(a.digest(), b.digest());
        let same = Action::FsWrite {
            path: CanonicalPath::from_normalized("/w/a").unwrap(),
            content: "one".into(),
        };
        assert_eq!(a.digest(), same.digest());
    }
}
