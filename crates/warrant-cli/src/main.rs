//! The `warrant` binary: parses the command line, loads configuration, wires the rooms
//! together and prints. Decisions live in the library crates; nothing here is logic a test
//! would want to call directly.
#![allow(clippy::print_stdout, clippy::print_stderr)]

/// Writes a line to standard output, ignoring a closed pipe: what a run does must not depend on
/// whether someone still reads its output (the journal is the record). Every line passes
/// [`shown`], so nothing in it can steer the terminal that shows it.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let line = format!($($arg)*);
        let _ = writeln!(std::io::stdout().lock(), "{}", $crate::shown(&line));
    }};
}

/// Text on its way to a person: control characters, bidirectional overrides and zero-width
/// characters escaped (`warrant_core::render::lines`). A debug build's negative control can turn
/// it off with `WARRANT_TEST_DISABLE=render`.
pub(crate) fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    if warrant_host::controls::disabled("render") {
        return std::borrow::Cow::Borrowed(text);
    }
    warrant_core::render::lines(text)
}

/// A view as `--json` prints it: pretty, in the order the view declares its fields.
pub(crate) fn pretty(v: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// One value shown inside a line: as [`shown`], and line feeds escaped too, so a value cannot
/// begin a line that looks like Warrant's own.
pub(crate) fn shown_inline(text: &str) -> std::borrow::Cow<'_, str> {
    warrant_host::narrate::inline(text)
}

mod artifacts_cmd;
mod audit_cmd;
mod catalog_cmd;
mod chat;
mod commands;
mod delegate_cmd;
mod envelope_cmd;
mod graph_cmd;
mod mcp_cmd;
mod memory_cmd;
mod output;
mod profiles_cmd;
mod prompt;
mod requests;
mod secrets_cmd;
mod setup_cmd;
mod skills_cmd;
mod surface;
mod web_cmd;

use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};
use warrant_core::Coded;
use warrant_text::ops;

/// Exit code for usage, configuration and input errors: nothing was started.
pub const EXIT_USAGE: u8 = 2;

#[derive(Parser, Debug)]
#[command(
    name = "warrant",
    version,
    about = "A governed agent harness: every action under a named person's authority, one policy decision point, approvals bound to who gave them, and an audit trail you can verify."
)]
pub struct Cli {
    /// The workspace (default: the nearest directory upward holding `.warrant/`, else the
    /// current directory).
    #[arg(long, global = true, value_name = "DIR")]
    pub workspace: Option<std::path::PathBuf>,
    /// The store: a PostgreSQL URL (`postgres://…`, shared by workers) or a SQLite file.
    /// Default: `[store] url` of the configuration, else `.warrant/store.db`.
    #[arg(long, global = true, value_name = "URL")]
    pub store: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// What is ready and what is not (identity, model provider, credentials, policy,
    /// approvals, confinement, audit, store, keys), each with its evidence and the next command.
    GetStarted {
        #[arg(long)]
        json: bool,
    },
    /// Set up the model provider: a wizard on a terminal, or `configure provider` with flags.
    Configure {
        #[command(subcommand)]
        command: Option<setup_cmd::ConfigureCommand>,
    },
    /// Credentials referenced as `cred:NAME` (provider keys, header tokens): set, list,
    /// delete, check. Values are never shown.
    Credentials {
        #[command(subcommand)]
        command: setup_cmd::CredentialsCommand,
    },
    /// Check the configuration layers: findings with a code, layer, line and a fix.
    Config {
        #[command(subcommand)]
        command: setup_cmd::ConfigCommand,
    },
    /// Model providers: list, check (probe), request (show what would be sent, send nothing).
    Providers {
        #[command(subcommand)]
        command: setup_cmd::ProvidersCommand,
    },
    /// Create `.warrant/` (config, policies, keys, store) in the workspace.
    Init {
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
    },
    /// Show the principal of this process and where each field came from.
    Whoami {
        #[arg(long)]
        json: bool,
    },
    /// Start a governed agent run.
    Run(crate::commands::RunArgs),
    /// Queue a run for a worker (`warrant worker`) instead of driving it here.
    Submit(crate::commands::SubmitArgs),
    /// Lease queued or abandoned runs from the store and drive them, one at a time.
    Worker(crate::commands::WorkerArgs),
    /// Continue a parked run once its request is answered.
    Resume(crate::commands::ResumeArgs),
    /// List runs, or show every event of one.
    Runs {
        #[command(subcommand)]
        command: commands::RunsCommand,
    },
    /// Ask the policy decision point, and see why.
    Policy {
        #[command(subcommand)]
        command: commands::PolicyCommand,
    },
    /// Requests waiting for a person.
    Approvals {
        #[command(subcommand)]
        command: commands::ApprovalsCommand,
    },
    /// Approve a request (`once`, or for the rest of the run's `session`).
    Approve {
        id: String,
        #[arg(long, default_value = "once", value_parser = ["once", "session"])]
        scope: String,
        #[arg(long)]
        json: bool,
    },
    /// Deny a request; the agent is told the reason.
    Deny {
        id: String,
        #[arg(long)]
        reason: String,
        #[arg(long)]
        json: bool,
    },
    /// The kill switch: stop every run it covers at its next effect, in every process and
    /// worker of the store (exit code 3); `--lift` takes it off, `--list` shows what is set.
    #[command(group(clap::ArgGroup::new("scope").args(["all", "tenant", "actor", "run"])))]
    Kill {
        /// Every run of the store.
        #[arg(long)]
        all: bool,
        /// Every run of this tenant.
        #[arg(long, value_name = "T")]
        tenant: Option<String>,
        /// Every run this actor drives or that acts on their behalf.
        #[arg(long, value_name = "A")]
        actor: Option<String>,
        /// One run and its subagents.
        #[arg(long, value_name = "R")]
        run: Option<String>,
        /// Why: recorded with the switch and in every run it stops.
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
        /// Lift the switch of exactly this scope instead of setting it.
        #[arg(long, conflicts_with = "list")]
        lift: bool,
        /// Show the switches that are set.
        #[arg(long)]
        list: bool,
        #[arg(long)]
        json: bool,
    },
    /// Check, before any run, that the tools a run would be offered cannot reach a worse risk
    /// class than its ceiling, the tightest declared (`[run] ceiling`, `[menus.NAME] ceiling`,
    /// the agent profile's `warrant.dev/ceiling` annotation, the graph's `x-warrant-ceiling`):
    /// each tool that can, and its class (exit 1). Every run makes the same check before its
    /// first step.
    Verify {
        /// The menu to check (default: `[run] menu`, else every tool).
        #[arg(long, value_name = "MENU")]
        menu: Option<String>,
        /// Narrowed by this agent profile, as `run --profile` would be.
        #[arg(long = "profile", value_name = "AGENT_PROFILE")]
        profile: Option<String>,
        /// As a run of this agentic graph would be (its declared ceiling counts).
        #[arg(long = "graph", value_name = "FILE")]
        graph: Option<std::path::PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Check what this installation really has working: store, policy, keys, audit sinks.
    Doctor {
        #[arg(long)]
        json: bool,
    },
    /// Check and read the audit trail.
    Audit {
        #[command(subcommand)]
        command: audit_cmd::AuditCommand,
    },
    /// What the agent asked of people (questions, secrets, resources) and approvals waiting:
    /// list, show, answer, provide, connect, decline, export (AAIS).
    Requests {
        #[command(subcommand)]
        command: requests::RequestsCommand,
    },
    /// Find secrets in files with the configured rules (gitleaks' format and default set).
    Secrets {
        #[command(subcommand)]
        command: secrets_cmd::SecretsCommand,
    },
    /// The workspace's memory: list, search, show and forget entries; review drafts proposed
    /// for shared memory.
    Memory {
        #[command(subcommand)]
        command: memory_cmd::MemoryCommand,
    },
    /// The configured data catalogs (Iceberg REST, Apache Polaris), read-only: list
    /// namespaces and tables, describe a table; every read decided by policy and recorded.
    Catalog {
        #[command(subcommand)]
        command: catalog_cmd::CatalogCommand,
    },
    /// Agent profiles (Open Agent Profile 1.0): who an agent is and what it learned, as a
    /// portable file that can only narrow policy. Not subprocess profiles (`[profiles.*]`).
    Profiles {
        #[command(subcommand)]
        command: profiles_cmd::ProfilesCommand,
    },
    /// Agentic graphs (AGS 1.0): validate, plan (read-only: order, permissions against
    /// policy, gates), run as one governed run, resume.
    Graph {
        #[command(subcommand)]
        command: graph_cmd::GraphCommand,
    },
    /// Agent Skills (SKILL.md): list, show, install on your review and approval, verify
    /// (a changed skill is not loaded), trust this workspace's project skills.
    Skills {
        #[command(subcommand)]
        command: skills_cmd::SkillsCommand,
    },
    /// Delegation tokens: hand part of your authority to another principal (signed, expiring,
    /// holder-bound, only narrowing), show, verify (offline with `--pubkeys`), revoke.
    Delegate {
        #[command(subcommand)]
        command: delegate_cmd::DelegateCommand,
    },
    /// Generated documents and their signed provenance: verify one, list them.
    Artifacts {
        #[command(subcommand)]
        command: artifacts_cmd::ArtifactsCommand,
    },
    /// Model Context Protocol: `serve` Warrant's tools to MCP clients, every call governed.
    Mcp {
        #[command(subcommand)]
        command: mcp_cmd::McpCommand,
    },
    /// The local web interface: prints an address carrying a fresh token; the page holds
    /// conversations, requests and approvals, runs, the audit trail and policy explanations,
    /// every answer recorded as yours "via web".
    Web {
        /// Listen here (port 0 picks one). Loopback unless `--public` says otherwise.
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
        bind: std::net::SocketAddr,
        /// Allow a `--bind` address that is not loopback; the token is then needed on every request.
        #[arg(long)]
        public: bool,
        /// Open the address in the desktop's browser (`xdg-open`).
        #[arg(long)]
        open: bool,
    },
    /// A session with the agent: each message continues the same run. Without a terminal, one
    /// message per line of standard input, ending at its end.
    Chat {
        /// PROVIDER:MODEL, as for `run` (default: the WARRANT_MODEL environment variable, else
        /// `[providers] model` of the configuration).
        #[arg(long)]
        model: Option<String>,
        /// Print events as JSON lines.
        #[arg(long)]
        json: bool,
        /// When to ask for approvals here: `auto` (on a terminal), `always` (read answers from
        /// standard input, between the messages), `never` (park and exit 10).
        #[arg(long, default_value = "auto", value_parser = ["auto", "always", "never"])]
        prompt: String,
        /// Stop the session at its next effect boundary after this long (e.g. `2h`).
        #[arg(long, value_name = "DURATION")]
        deadline: Option<String>,
        /// Estimated tokens of history kept whole; beyond it the oldest turns are summarized.
        #[arg(long, default_value_t = warrant_host::chat::DEFAULT_HISTORY_TOKENS, value_name = "TOKENS")]
        history_tokens: u64,
        /// Continue this session (it waits for your next message).
        #[arg(long, value_name = "RUN")]
        resume: Option<String>,
    },
    /// Print a completion script for a shell.
    Completions {
        #[arg(value_enum)]
        shell: CompletionShell,
    },
    /// What this build and this machine support: tools, model providers, stores, sandbox
    /// mechanisms (probed).
    Capabilities {
        #[arg(long)]
        json: bool,
    },
}

/// The shells `warrant completions` writes a script for.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

/// An error that ends the command, with its stable code and the exit code it maps to.
#[derive(Debug)]
pub struct Failure {
    pub code: String,
    pub message: String,
    pub exit: u8,
}

impl Failure {
    pub fn usage(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
            exit: EXIT_USAGE,
        }
    }

    pub fn coded(e: &(impl Coded + std::fmt::Display), exit: u8) -> Self {
        Self {
            code: e.code().to_owned(),
            message: e.to_string(),
            exit,
        }
    }
}

impl From<warrant_host::HostError> for Failure {
    fn from(e: warrant_host::HostError) -> Self {
        let words = e.hint.as_ref().map(ops::hint).unwrap_or_default();
        let exit = match e.class {
            warrant_host::Class::Failed => 1,
            warrant_host::Class::Usage => EXIT_USAGE,
            warrant_host::Class::Refused => 3,
        };
        Self {
            code: e.code,
            message: format!("{}{words}", e.message),
            exit,
        }
    }
}

/// `--store`, set once by `main` before any command runs.
static STORE: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

/// Where the installation is, from `--workspace` and `--store`.
pub fn at(ws: Option<&std::path::Path>) -> warrant_host::Where {
    warrant_host::Where {
        workspace: ws.map(std::path::Path::to_owned),
        store: STORE.get().cloned().flatten(),
        ..Default::default()
    }
}

/// Notices of the application layer, worded by `warrant-text`, on standard error.
#[derive(Debug)]
struct Stderr;

impl warrant_host::Notices for Stderr {
    fn notice(&self, notice: warrant_host::Notice) {
        if let Some(line) = ops::notice(notice) {
            eprintln!("{}", shown(&line));
        }
    }
}

/// Where this binary's notices go.
pub fn notices() -> std::sync::Arc<dyn warrant_host::Notices + Send> {
    std::sync::Arc::new(Stderr)
}

/// Prints a view: its JSON with `--json`, else its lines as `warrant-text` words them.
pub(crate) fn emit<V: serde::Serialize>(
    json: bool,
    view: &V,
    words: impl FnOnce(&V) -> Vec<String>,
) {
    if json {
        outln!("{}", pretty(view));
    } else {
        lines(words(view));
    }
}

/// Prints lines, each through [`shown`].
pub(crate) fn lines(lines: impl IntoIterator<Item = String>) {
    for line in lines {
        outln!("{line}");
    }
}

/// The hidden entry point of the sandbox launcher: `warrant __sandbox <plan-json> -- <argv…>`.
/// Handled before clap so the plan and the command's own arguments are never parsed as ours.
const SANDBOX_SUBCOMMAND: &str = "__sandbox";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(SANDBOX_SUBCOMMAND) {
        let code = warrant_exec::sandbox::sandbox_main(args.get(2..).unwrap_or_default());
        // Only reached when the command was not run (exec replaced this process otherwise).
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    // `warrant` alone on a terminal is a chat session (`warrant chat`); elsewhere, the usage.
    let args = if args.len() == 1
        && std::io::IsTerminal::is_terminal(&std::io::stdin())
        && std::io::IsTerminal::is_terminal(&std::io::stdout())
    {
        vec![args[0].clone(), "chat".to_owned()]
    } else {
        args
    };
    let cli = Cli::parse_from(args);
    let _ = STORE.set(cli.store.clone());
    match commands::dispatch(cli) {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            eprintln!("error[{}]: {}", f.code, shown(&f.message));
            ExitCode::from(f.exit)
        }
    }
}
