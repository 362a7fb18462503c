//! OS confinement of one command: a pure plan built from a profile, and the launcher that applies
//! it in a separate process just before `exec` (new session, rlimits, `no_new_privs`, Landlock,
//! seccomp), so Warrant itself is never sandboxed. The launcher fails loudly: when a mechanism the
//! plan requires cannot be applied it prints `warrant-sandbox: …` and exits 125 without running
//! the target.
//!
//! Limits (Linux only, x86_64/aarch64 for seccomp):
//! - Landlock cannot subtract: a protected name inside a write root (`.git`) is kept read-only,
//!   and a denied name (`.env`) unreadable, by splitting the directories that hold them and
//!   granting per entry (see [`crate::grants`]), so entries created in a split directory *after*
//!   the plan was applied get no rights. A protected name that does not exist yet splits its
//!   parent too, so it cannot be created.
//! - `processes` uses the cgroup `pids` controller (which binds root too; see [`crate::cgroup`]),
//!   else RLIMIT_NPROC, which the kernel does not enforce for uid 0 (refused under `required`).
//! - `network = "none"` is a network namespace holding only `lo` plus a seccomp filter on
//!   `socket`/`socketpair` (AF_UNIX only); `network = { allow = [...] }` is a namespace whose only
//!   way out is Warrant's egress proxy (see [`crate::egress`], [`crate::netns`]), with sockets
//!   limited to AF_UNIX and IP. As root the namespace is not owned by a user namespace, so root
//!   keeps its capabilities inside it; `setns` is refused by seccomp.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use landlock::{
    ABI, Access, AccessFs, BitFlags, LandlockStatus, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope,
};
use rustix::process::{Resource, Rlimit};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};
use serde::{Deserialize, Serialize};
use warrant_core::config::{Enforcement, Isolation, NetworkPolicy, ProfileConfig, ResourceLimits};
use warrant_core::path::canonicalize;
use warrant_core::{CanonicalPath, LinkResolver};

use crate::error::ExecError;

/// Exit status of the launcher when the sandbox could not be applied (the target never ran).
pub const SANDBOX_FAILED_EXIT: i32 = 125;
/// Prefix of the launcher's refusal message on stderr.
pub const FAILURE_PREFIX: &str = "warrant-sandbox:";
/// Prefix of the one report line the launcher writes on stderr before `exec`; spawn strips it.
pub const REPORT_PREFIX: &str = "warrant-sandbox-report:";

/// The Landlock ABI whose filesystem rights are handled (best effort below it).
const LANDLOCK_ABI: ABI = ABI::V6;

/// One confinement mechanism, in the order the launcher applies them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mechanism {
    Session,
    /// `limits.processes`: a cgroup pids limit, or RLIMIT_NPROC when not root.
    ProcessLimit,
    /// The command's own view (see [`crate::view`]): user, mount and PID namespaces, only the
    /// roots bound, a private home and `/tmp`, its own `/proc`, no capability after `exec`.
    View,
    Rlimits,
    /// A network namespace of its own (only `lo`).
    NetworkNamespace,
    /// The in-namespace forwarder to Warrant's egress proxy.
    EgressProxy,
    NoNewPrivs,
    Landlock,
    Seccomp,
}

/// A fully resolved sandbox: what the launcher applies. Built by [`SandboxPlan::from_profile`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxPlan {
    pub enforcement: Enforcement,
    /// Read + execute.
    pub read_roots: Vec<CanonicalPath>,
    /// Read + write (minus `protected`).
    pub write_roots: Vec<CanonicalPath>,
    /// Read-only even inside a write root.
    pub protected: Vec<CanonicalPath>,
    pub network: NetworkPolicy,
    pub limits: ResourceLimits,
    /// File-name patterns (`*` wildcard) no command may read inside any scanned root.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denied_names: Vec<String>,
    /// Paths no command may read or write, wherever they are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denied_paths: Vec<CanonicalPath>,
    /// The Unix socket of Warrant's egress proxy (set by the executor for an allowlist).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress_socket: Option<PathBuf>,
    /// The copy-on-write layer over the workspace, when the command's writes are to be judged
    /// before they land (set by the executor, never by [`SandboxPlan::from_profile`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlay: Option<OverlaySpec>,
    /// The command gets its own view of the machine ([`Mechanism::View`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub view: bool,
    /// Roots as configured that are links, recreated in the view: the path as written and
    /// what it resolved to (`/etc/localtime` → `/usr/share/zoneinfo/…`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<(PathBuf, CanonicalPath)>,
    /// The home directory `~/` roots were resolved against: private (an empty tmpfs) in the
    /// view, and never searched for denied names (toolchains there are too large to walk).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home: Option<PathBuf>,
    /// Read roots that are toolchains (configured as `~/…` or `$VAR`): never searched for
    /// denied names, which would mean walking every file of a Rust or Python installation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub toolchains: Vec<CanonicalPath>,
    /// Build-output directories whose deletions are a `change` (`SandboxConfig::scratch`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scratch: Vec<String>,
    /// Test knob: the launcher behaves as if this mechanism were unavailable on this kernel.
    /// [`SandboxPlan::from_profile`] never sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulate_unavailable: Option<Mechanism>,
}

/// A copy-on-write layer: inside the command's view `lower` (the workspace) is mounted as an
/// overlay whose writes go to `upper`; the real `lower` is unchanged until Warrant has judged the
/// changeset read from `upper` (created, modified, deleted entries) and applied it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OverlaySpec {
    /// The directory the command sees as writable (the workspace root).
    pub lower: CanonicalPath,
    /// Where the command's writes land: created empty by the caller, outside `lower`.
    pub upper: PathBuf,
    /// overlayfs' work directory: empty, on the same filesystem as `upper`.
    pub work: PathBuf,
}

impl SandboxPlan {
    /// The plan for `profile` in `workspace`, or `None` when the profile asks for no sandbox.
    /// Relative roots are relative to the workspace; every path is canonicalized through
    /// `links` (symlinks resolved, so a rule names what Landlock will see).
    pub fn from_profile(
        profile_name: &str,
        profile: &ProfileConfig,
        workspace: &CanonicalPath,
        links: &dyn LinkResolver,
    ) -> Result<Option<Self>, ExecError> {
        let Some(config) = &profile.sandbox else {
            return Ok(None);
        };
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute());
        // `~/x` is under the command's home; with no HOME such a root is left out.
        let expand = |p: &str| -> Option<String> {
            // `$VAR`: the directory a variable names (`$CARGO_HOME`), when it is set to an
            // absolute path that exists here; else the root is left out.
            if let Some(var) = p.strip_prefix('$') {
                return std::env::var_os(var)
                    .map(PathBuf::from)
                    .filter(|d| d.is_absolute() && d.exists())
                    .map(|d| d.to_string_lossy().into_owned());
            }
            match p.strip_prefix("~/") {
                Some(rest) => home
                    .as_ref()
                    .filter(|h| h.is_absolute())
                    .map(|h| h.join(rest).to_string_lossy().into_owned()),
                None => Some(p.to_owned()),
            }
        };
        let resolve = |p: &str| {
            canonicalize(workspace, p, links).map_err(|e| ExecError::SandboxPlan {
                profile: profile_name.to_owned(),
                message: format!("cannot resolve `{p}`: {e}"),
            })
        };
        let mut aliases = Vec::new();
        let mut toolchains = Vec::new();
        let mut resolve_all = |list: &[String]| -> Result<Vec<CanonicalPath>, ExecError> {
            let mut out = Vec::new();
            for (written, p) in list.iter().filter_map(|w| expand(w).map(|p| (w, p))) {
                let resolved = resolve(&p)?;
                if written.starts_with("~/") || written.starts_with('$') {
                    toolchains.push(resolved.clone());
                }
                if Path::new(&p).is_absolute() && Path::new(&p) != resolved.as_path() {
                    aliases.push((PathBuf::from(&p), resolved.clone()));
                }
                out.push(resolved);
            }
            out.sort();
            out.dedup();
            Ok(out)
        };
        let write_roots = resolve_all(&config.write_roots)?;
        let read_roots = resolve_all(&config.read_roots)?;
        let mut protected = Vec::new();
        for name in &config.protected {
            if Path::new(name).is_absolute() {
                protected.push(resolve(name)?);
            } else {
                for root in &write_roots {
                    protected.push(canonicalize(root, name, links).map_err(|e| {
                        ExecError::SandboxPlan {
                            profile: profile_name.to_owned(),
                            message: format!("cannot resolve protected `{name}` in {root}: {e}"),
                        }
                    })?);
                }
            }
        }
        protected.sort();
        protected.dedup();
        let mut denied_names = Vec::new();
        let mut denied_paths = Vec::new();
        for entry in &config.denied {
            if entry.is_empty() {
                return Err(ExecError::SandboxPlan {
                    profile: profile_name.to_owned(),
                    message: "an empty entry in `denied`".to_owned(),
                });
            }
            if entry.contains('/') {
                denied_paths.push(resolve(entry)?);
            } else {
                denied_names.push(entry.clone());
            }
        }
        denied_paths.sort();
        denied_paths.dedup();
        if let NetworkPolicy::Allow(list) = &config.network {
            crate::egress::Allowlist::parse(list).map_err(|message| ExecError::SandboxPlan {
                profile: profile_name.to_owned(),
                message: format!("network allowlist: {message}"),
            })?;
        }
        Ok(Some(Self {
            enforcement: config.enforcement,
            read_roots,
            write_roots,
            protected,
            network: config.network.clone(),
            limits: config.limits.clone(),
            denied_names,
            denied_paths,
            egress_socket: None,
            overlay: None,
            // An allowlist's forwarder still runs in the host's view (see docs/STATUS.md).
            view: config.isolation == Isolation::Namespaces
                && !matches!(config.network, NetworkPolicy::Allow(_)),
            aliases,
            home,
            toolchains,
            scratch: config.scratch.clone(),
            simulate_unavailable: None,
        }))
    }

    /// Every entry under `roots` the plan denies: a name matching `denied_names`, and the
    /// `denied_paths` themselves (see [`crate::grants::find_denied`]).
    pub fn find_denied(&self, roots: &[&Path]) -> Result<Vec<PathBuf>, String> {
        let paths: Vec<PathBuf> = self
            .denied_paths
            .iter()
            .map(|p| p.as_path().to_path_buf())
            .collect();
        crate::grants::find_denied(roots, &self.denied_names, &paths)
    }

    /// The mechanisms this plan asks for.
    pub fn requested(&self) -> Vec<Mechanism> {
        let mut out = vec![Mechanism::Session];
        if self.limits.processes.is_some() {
            out.push(Mechanism::ProcessLimit);
        }
        if self.view {
            out.push(Mechanism::View);
        }
        let rlimits = ResourceLimits {
            processes: None,
            ..self.limits.clone()
        };
        if rlimits != ResourceLimits::default() {
            out.push(Mechanism::Rlimits);
        }
        match self.network {
            NetworkPolicy::Host => {}
            NetworkPolicy::None => out.push(Mechanism::NetworkNamespace),
            NetworkPolicy::Allow(_) => {
                out.push(Mechanism::NetworkNamespace);
                out.push(Mechanism::EgressProxy);
            }
        }
        out.push(Mechanism::NoNewPrivs);
        out.push(Mechanism::Landlock);
        out.push(Mechanism::Seccomp);
        out
    }
}

/// What the launcher actually put in force, as it reported before `exec`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxReport {
    pub enforcement: Enforcement,
    pub applied: Vec<Mechanism>,
    /// Requested but not in force (only under `best_effort`), with the reason.
    pub not_applied: Vec<NotApplied>,
    /// The Landlock ABI the kernel offered (0 when none).
    pub landlock_abi: u32,
    /// Without a process limit, the command still went into a pids cgroup (limit `max`) when
    /// one was writable, so whatever it leaves behind is killed when it ends.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tracked: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotApplied {
    pub mechanism: Mechanism,
    pub reason: String,
}

/// The program that applies a plan: `program prefix_args… <plan-json> -- <argv…>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launcher {
    pub program: PathBuf,
    pub prefix_args: Vec<String>,
}

impl Launcher {
    /// The running `warrant` binary with its hidden `__sandbox` subcommand.
    pub fn current_exe() -> Result<Self, ExecError> {
        let program = std::env::current_exe().map_err(|e| ExecError::SandboxFailed {
            program: "warrant".to_owned(),
            message: format!("cannot locate the warrant binary to launch the sandbox: {e}"),
        })?;
        Ok(Self {
            program,
            prefix_args: vec!["__sandbox".to_owned()],
        })
    }

    /// The argv (after `program`) that runs `argv` under `plan`.
    pub fn args(&self, plan: &SandboxPlan, argv: &[String]) -> Result<Vec<String>, ExecError> {
        let json = serde_json::to_string(plan).map_err(|e| ExecError::SandboxFailed {
            program: argv.first().cloned().unwrap_or_default(),
            message: format!("cannot encode the sandbox plan: {e}"),
        })?;
        let mut out = self.prefix_args.clone();
        out.push(json);
        out.push("--".to_owned());
        out.extend(argv.iter().cloned());
        Ok(out)
    }
}

/// The launcher: `args` is `<plan-json> -- <argv…>`. Applies the plan, reports on stderr, and
/// `exec`s the target; returns (an exit status) only when it did not run the target.
pub fn sandbox_main(args: &[String]) -> i32 {
    match args.first().map(String::as_str) {
        Some(VIEW_INIT) => return view_init_main(args.get(1..).unwrap_or_default()),
        Some(PROBE_SOCKET) => return probe_socket(),
        Some(PROBE_EGRESS) => return probe_egress(args.get(1..).unwrap_or_default()),
        Some(crate::netns::FORWARD) => {
            return crate::netns::forwarder_main(args.get(1..).unwrap_or_default());
        }
        Some(_) | None => {}
    }
    // What came before `args` on the command line (`__sandbox` for `warrant`): the forwarder is
    // started the same way.
    let full: Vec<String> = std::env::args().skip(1).collect();
    let prefix = full
        .get(..full.len().saturating_sub(args.len()))
        .unwrap_or_default()
        .to_vec();
    let (plan_json, plan, argv) = match parse_args(args) {
        Ok(parsed) => parsed,
        Err(message) => return fail(&message),
    };
    let mut report = SandboxReport {
        enforcement: plan.enforcement,
        applied: Vec::new(),
        not_applied: Vec::new(),
        landlock_abi: 0,
        tracked: false,
    };
    // Tracking, not a limit: a command with no process limit still joins a cgroup when it can,
    // so nothing it starts outlives it. Not requested, so its absence refuses nothing.
    if plan.limits.processes.is_none() && crate::cgroup::available() {
        report.tracked = crate::cgroup::enter_unlimited().is_ok();
    }
    let mut env = Vec::new();
    match apply(&plan, &prefix, &mut report, &mut env, Stage::Launcher) {
        Ok(Next::Exec) => exec_target(&report, &argv, env),
        Ok(Next::HandOver) => hand_over(&prefix, &report, plan_json, &argv),
        Err(message) => fail(&message),
    }
}

/// Argument that makes the launcher run as the first process of the command's PID namespace:
/// `__view-init <report-json> <plan-json> -- <argv…>`. It builds the view, applies the
/// mechanisms left, reports and `exec`s the target.
pub const VIEW_INIT: &str = "__view-init";

fn view_init_main(args: &[String]) -> i32 {
    // Dies with the launcher that waits for it (a timeout's signal reaches the launcher first).
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    let Some((report_json, rest)) = args.split_first() else {
        return fail("usage: __view-init <report-json> <plan-json> -- <argv…>");
    };
    let mut report: SandboxReport = match serde_json::from_str(report_json) {
        Ok(r) => r,
        Err(e) => return fail(&format!("unreadable sandbox report: {e}")),
    };
    let (_, plan, argv) = match parse_args(rest) {
        Ok(parsed) => parsed,
        Err(message) => return fail(&message),
    };
    let full: Vec<String> = std::env::args().skip(1).collect();
    let prefix = full
        .get(..full.len().saturating_sub(args.len() + 1))
        .unwrap_or_default()
        .to_vec();
    let cwd = match std::env::current_dir() {
        Ok(c) => c,
        Err(e) => return fail(&format!("cannot read the working directory: {e}")),
    };
    if let Err(message) = crate::view::build(&plan, plan.home.as_deref(), &cwd) {
        return fail(&format!(
            "the command's view could not be built ({message})"
        ));
    }
    let mut env = vec![("TMPDIR".to_owned(), "/tmp".to_owned())];
    match apply(&plan, &prefix, &mut report, &mut env, Stage::Init) {
        Ok(_) => {}
        Err(message) => return fail(&message),
    }
    if let Err(message) = crate::view::drop_capabilities() {
        return fail(&message);
    }
    exec_target(&report, &argv, env)
}

/// Start this program again as the PID namespace's first process, wait for it and leave as
/// it did (the same exit status, or the same signal).
fn hand_over(prefix: &[String], report: &SandboxReport, plan_json: &str, argv: &[String]) -> i32 {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return fail(&format!("cannot locate the launcher: {e}")),
    };
    let report_json = match serde_json::to_string(report) {
        Ok(j) => j,
        Err(e) => return fail(&format!("cannot encode the report: {e}")),
    };
    let status = Command::new(exe)
        .args(prefix)
        .arg(VIEW_INIT)
        .arg(report_json)
        .arg(plan_json)
        .arg("--")
        .args(argv)
        .status();
    match status {
        Err(e) => fail(&format!("cannot start the command's first process: {e}")),
        Ok(status) => {
            use std::os::unix::process::ExitStatusExt;
            if let Some(code) = status.code() {
                return code;
            }
            let signal = status
                .signal()
                .unwrap_or(rustix::process::Signal::KILL.as_raw());
            if let Some(sig) = rustix::process::Signal::from_named_raw(signal) {
                let _ = rustix::process::kill_process(rustix::process::getpid(), sig);
            }
            128 + signal
        }
    }
}

fn exec_target(report: &SandboxReport, argv: &[String], env: Vec<(String, String)>) -> i32 {
    let Some((program, rest)) = argv.split_first() else {
        return fail("no command given after `--`");
    };
    let line = match serde_json::to_string(report) {
        Ok(line) => line,
        Err(e) => return fail(&format!("cannot encode the report: {e}")),
    };
    let mut err = std::io::stderr();
    if writeln!(err, "{REPORT_PREFIX} {line}")
        .and_then(|()| err.flush())
        .is_err()
    {
        return fail("cannot write the report to stderr");
    }
    let e = Command::new(program).args(rest).envs(env).exec();
    // After the report: the target's own "could not start" is not a sandbox failure.
    let _ = writeln!(
        std::io::stderr(),
        "{FAILURE_PREFIX} cannot run `{program}`: {e}"
    );
    127
}

fn fail(message: &str) -> i32 {
    let _ = writeln!(
        std::io::stderr(),
        "{FAILURE_PREFIX} {message}; the command was not run"
    );
    SANDBOX_FAILED_EXIT
}

fn parse_args(args: &[String]) -> Result<(&str, SandboxPlan, Vec<String>), String> {
    let (plan_json, rest) = args
        .split_first()
        .ok_or_else(|| "usage: <plan-json> -- <argv…>".to_owned())?;
    let argv = match rest.split_first() {
        Some((sep, argv)) if sep == "--" && !argv.is_empty() => argv.to_vec(),
        Some(_) | None => return Err("usage: <plan-json> -- <argv…>".to_owned()),
    };
    let plan: SandboxPlan =
        serde_json::from_str(plan_json).map_err(|e| format!("unreadable sandbox plan: {e}"))?;
    Ok((plan_json, plan, argv))
}

/// Which process applies a mechanism: the launcher itself, or (under a view) the first
/// process of the command's PID namespace, which applies everything after the view.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    Launcher,
    Init,
}

/// What the launcher does once its part is applied.
enum Next {
    Exec,
    HandOver,
}

/// Apply the mechanisms of `plan` that belong to `stage` to this process, in order, recording
/// them in `report`; `env` gets the variables to add to the command's environment.
fn apply(
    plan: &SandboxPlan,
    prefix: &[String],
    report: &mut SandboxReport,
    env: &mut Vec<(String, String)>,
    stage: Stage,
) -> Result<Next, String> {
    let mut in_view = stage == Stage::Init;
    for mechanism in plan.requested() {
        let launcher_part = matches!(
            mechanism,
            Mechanism::Session | Mechanism::ProcessLimit | Mechanism::View
        );
        match (stage, launcher_part) {
            (Stage::Launcher, false) if in_view => return Ok(Next::HandOver),
            (Stage::Init, true) => continue,
            _ => {}
        }
        let result = if plan.simulate_unavailable == Some(mechanism) {
            Err("unavailable on this kernel (simulated by the plan)".to_owned())
        } else {
            match mechanism {
                Mechanism::Session => rustix::process::setsid()
                    .map(|_| ())
                    .map_err(|e| format!("setsid failed: {e}")),
                Mechanism::ProcessLimit => apply_process_limit(&plan.limits),
                Mechanism::View => crate::view::enter(),
                Mechanism::Rlimits => apply_rlimits(&plan.limits),
                Mechanism::NetworkNamespace => crate::netns::enter(),
                Mechanism::EgressProxy => start_egress(plan, prefix, &report.applied).map(|port| {
                    let url = format!("http://127.0.0.1:{port}");
                    for name in PROXY_VARS {
                        env.push(((*name).to_owned(), url.clone()));
                    }
                }),
                Mechanism::NoNewPrivs => rustix::thread::set_no_new_privs(true)
                    .map_err(|e| format!("PR_SET_NO_NEW_PRIVS failed: {e}")),
                Mechanism::Landlock => apply_landlock(plan, &mut report.landlock_abi, in_view),
                Mechanism::Seccomp => apply_seccomp(match plan.network {
                    NetworkPolicy::Host => None,
                    NetworkPolicy::Allow(_)
                        if report.applied.contains(&Mechanism::NetworkNamespace) =>
                    {
                        Some(&[AF_UNIX, AF_INET, AF_INET6])
                    }
                    NetworkPolicy::Allow(_) | NetworkPolicy::None => Some(&[AF_UNIX]),
                }),
            }
        };
        match result {
            Ok(()) => {
                report.applied.push(mechanism);
                if mechanism == Mechanism::View {
                    in_view = true;
                }
            }
            Err(reason) => match plan.enforcement {
                Enforcement::Required => {
                    return Err(format!(
                        "{} could not be applied ({reason}) and the profile requires it",
                        mechanism_name(mechanism)
                    ));
                }
                Enforcement::BestEffort => {
                    report.not_applied.push(NotApplied { mechanism, reason })
                }
            },
        }
    }
    // A view with nothing after it (never the case today: Landlock and seccomp follow).
    Ok(if stage == Stage::Launcher && in_view {
        Next::HandOver
    } else {
        Next::Exec
    })
}

/// Variables that point HTTP clients at the forwarder.
pub const PROXY_VARS: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

fn start_egress(
    plan: &SandboxPlan,
    prefix: &[String],
    applied: &[Mechanism],
) -> Result<u16, String> {
    if !applied.contains(&Mechanism::NetworkNamespace) {
        return Err(
            "the egress proxy needs the network namespace, which is not in force".to_owned(),
        );
    }
    let socket = plan
        .egress_socket
        .as_ref()
        .ok_or_else(|| "the plan names no egress proxy socket".to_owned())?;
    crate::netns::start_forwarder(prefix, socket)
}

fn apply_process_limit(limits: &ResourceLimits) -> Result<(), String> {
    let Some(max) = limits.processes else {
        return Ok(());
    };
    let cgroup = if crate::cgroup::available() {
        crate::cgroup::enter(max)
    } else {
        Err("no cgroup pids controller".to_owned())
    };
    match cgroup {
        Ok(()) => Ok(()),
        Err(e) if rustix::process::getuid().is_root() => Err(format!(
            "{e}, and the kernel does not enforce RLIMIT_NPROC for root"
        )),
        Err(_) => rustix::process::setrlimit(
            Resource::Nproc,
            Rlimit {
                current: Some(max),
                maximum: Some(max),
            },
        )
        .map_err(|e| format!("setrlimit processes = {max} failed: {e}")),
    }
}

pub fn mechanism_name(m: Mechanism) -> &'static str {
    match m {
        Mechanism::Session => "a new session",
        Mechanism::ProcessLimit => "the process limit",
        Mechanism::View => "the command's own view (user, mount and PID namespaces)",
        Mechanism::Rlimits => "resource limits",
        Mechanism::NetworkNamespace => "a network namespace",
        Mechanism::EgressProxy => "the egress proxy",
        Mechanism::NoNewPrivs => "no_new_privs",
        Mechanism::Landlock => "Landlock",
        Mechanism::Seccomp => "the seccomp filter",
    }
}

/// The mechanism's name in tables (`warrant doctor`).
pub fn short_name(m: Mechanism) -> &'static str {
    match m {
        Mechanism::Session => "session",
        Mechanism::ProcessLimit => "process_limit",
        Mechanism::View => "view",
        Mechanism::Rlimits => "rlimits",
        Mechanism::NetworkNamespace => "network_namespace",
        Mechanism::EgressProxy => "egress_proxy",
        Mechanism::NoNewPrivs => "no_new_privs",
        Mechanism::Landlock => "landlock",
        Mechanism::Seccomp => "seccomp",
    }
}

fn apply_rlimits(limits: &ResourceLimits) -> Result<(), String> {
    let ResourceLimits {
        processes: _,
        memory_bytes,
        cpu_seconds,
        file_size_bytes,
        open_files,
    } = limits;
    let set = [
        (Resource::As, *memory_bytes, "memory_bytes"),
        (Resource::Cpu, *cpu_seconds, "cpu_seconds"),
        (Resource::Fsize, *file_size_bytes, "file_size_bytes"),
        (Resource::Nofile, *open_files, "open_files"),
    ];
    for (resource, value, name) in set {
        if let Some(v) = value {
            rustix::process::setrlimit(
                resource,
                Rlimit {
                    current: Some(v),
                    maximum: Some(v),
                },
            )
            .map_err(|e| format!("setrlimit {name} = {v} failed: {e}"))?;
        }
    }
    Ok(())
}

/// `in_view`: the mounts already keep `.git` read-only and mask the denied entries, so the
/// rules only bound the command to its view's trees (and need not split directories, which
/// would keep it from creating entries at the workspace root).
fn apply_landlock(plan: &SandboxPlan, abi_seen: &mut u32, in_view: bool) -> Result<(), String> {
    let read = AccessFs::from_read(LANDLOCK_ABI);
    let all = AccessFs::from_all(LANDLOCK_ABI);
    let mut grants: Vec<(PathBuf, BitFlags<AccessFs>)> = Vec::new();
    if in_view {
        // Everything in the view may be read (the mounts decide what is there, and masks are
        // unreadable); writes only where the view is writable.
        grants.push((PathBuf::from("/"), read));
        for root in &plan.write_roots {
            grants.push((root.as_path().to_path_buf(), all));
        }
        grants.push((PathBuf::from("/tmp"), all));
        grants.push((PathBuf::from("/dev"), all));
        if let Some(home) = &plan.home {
            grants.push((home.clone(), all));
        }
    } else {
        // Toolchain trees in the home directory are too large to search per command.
        let home = plan.home.as_ref();
        let roots: Vec<&Path> = plan
            .read_roots
            .iter()
            .chain(&plan.write_roots)
            .map(CanonicalPath::as_path)
            .filter(|r| {
                plan.write_roots.iter().any(|w| r.starts_with(w.as_path()))
                    || !(home.as_ref().is_some_and(|h| r.starts_with(h))
                        || plan.toolchains.iter().any(|t| r.starts_with(t.as_path())))
            })
            .collect();
        let denied = plan.find_denied(&roots)?;
        let mut special: std::collections::BTreeMap<PathBuf, BitFlags<AccessFs>> = plan
            .protected
            .iter()
            .map(|p| (p.as_path().to_path_buf(), read))
            .collect();
        for path in denied {
            special.insert(path, BitFlags::empty());
        }
        for root in &plan.read_roots {
            crate::grants::root_grants(root.as_path(), read, &special, &mut grants)?;
        }
        for root in &plan.write_roots {
            crate::grants::root_grants(root.as_path(), all, &special, &mut grants)?;
        }
        // Shell redirections to /dev/null are everywhere; it is harmless to write.
        grants.push((PathBuf::from("/dev/null"), all));
    }

    let mut ruleset = Ruleset::default()
        .handle_access(all)
        .map_err(|e| format!("Landlock ruleset: {e}"))?
        // No signals to, and no abstract UNIX sockets of, processes outside the sandbox (Warrant).
        .scope(Scope::from_all(LANDLOCK_ABI))
        .map_err(|e| format!("Landlock scope: {e}"))?
        .create()
        .map_err(|e| format!("Landlock ruleset: {e}"))?;
    for (path, access) in grants {
        let fd = match PathFd::new(&path) {
            Ok(fd) => fd,
            // A configured root that does not exist here (/lib64 on aarch64) grants nothing.
            Err(_) if !path.exists() => continue,
            Err(e) => return Err(format!("cannot open {} for Landlock: {e}", path.display())),
        };
        let access = if path.is_dir() {
            access
        } else {
            access & AccessFs::from_file(LANDLOCK_ABI)
        };
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| format!("Landlock rule for {}: {e}", path.display()))?;
    }
    let status = ruleset
        .restrict_self()
        .map_err(|e| format!("Landlock restrict_self: {e}"))?;
    if let LandlockStatus::Available { effective_abi, .. } = status.landlock {
        *abi_seen = effective_abi as u32;
    }
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok(()),
        RulesetStatus::PartiallyEnforced => match plan.enforcement {
            Enforcement::BestEffort => Ok(()),
            Enforcement::Required => Err(format!(
                "the kernel enforces Landlock only partially (ABI {abi_seen}, below {})",
                LANDLOCK_ABI as u32
            )),
        },
        RulesetStatus::NotEnforced => Err("the kernel does not enforce Landlock".to_owned()),
    }
}

#[cfg(target_arch = "x86_64")]
mod nr {
    pub const IOCTL: i64 = 16;
    pub const SOCKET: i64 = 41;
    pub const SOCKETPAIR: i64 = 53;
    pub const PTRACE: i64 = 101;
    pub const SETNS: i64 = 308;
    pub const PROCESS_VM_READV: i64 = 310;
    pub const PROCESS_VM_WRITEV: i64 = 311;
}
#[cfg(target_arch = "aarch64")]
mod nr {
    pub const IOCTL: i64 = 29;
    pub const SOCKET: i64 = 198;
    pub const SOCKETPAIR: i64 = 199;
    pub const PTRACE: i64 = 117;
    pub const SETNS: i64 = 268;
    pub const PROCESS_VM_READV: i64 = 270;
    pub const PROCESS_VM_WRITEV: i64 = 271;
}
const IO_URING_SETUP: i64 = 425;
const IO_URING_ENTER: i64 = 426;
const IO_URING_REGISTER: i64 = 427;
const PIDFD_GETFD: i64 = 438;
/// ioctl requests that push input into a terminal, or act on its console, as if typed there.
const TIOCSTI: u64 = 0x5412;
const TIOCLINUX: u64 = 0x541C;
const AF_UNIX: u64 = 1;
const AF_INET: u64 = 2;
const AF_INET6: u64 = 10;
const EPERM: u32 = 1;

/// `families`: the socket families a command may open; `None` for any (the host network). An
/// allowlist inside a namespace gets AF_UNIX and IP (to reach the forwarder), never netlink or
/// packet sockets (with which root could reconfigure or move interfaces).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn apply_seccomp(families: Option<&[u64]>) -> Result<(), String> {
    let err = |e: seccompiler::BackendError| format!("seccomp filter: {e}");
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    // Reaching into another process (Warrant's memory or descriptors), and io_uring, which
    // bypasses syscall filtering.
    // `setns`: joining another namespace (the host's network, through a pidfd) is never needed.
    for nr in [
        nr::PTRACE,
        nr::SETNS,
        nr::PROCESS_VM_READV,
        nr::PROCESS_VM_WRITEV,
        PIDFD_GETFD,
        IO_URING_SETUP,
        IO_URING_ENTER,
        IO_URING_REGISTER,
    ] {
        rules.insert(nr, Vec::new());
    }
    // Typing into the person's terminal (where an approval prompt may be waiting).
    let ioctl = |request: u64| -> Result<SeccompRule, String> {
        SeccompRule::new(vec![
            SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, request)
                .map_err(err)?,
        ])
        .map_err(err)
    };
    rules.insert(nr::IOCTL, vec![ioctl(TIOCSTI)?, ioctl(TIOCLINUX)?]);
    if let Some(families) = families {
        for nr in [nr::SOCKET, nr::SOCKETPAIR] {
            // One rule whose conditions all hold (a family outside the list) means EPERM.
            let outside = families
                .iter()
                .map(|f| {
                    SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, *f)
                        .map_err(err)
                })
                .collect::<Result<Vec<_>, _>>()?;
            rules.insert(nr, vec![SeccompRule::new(outside).map_err(err)?]);
        }
    }
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e: seccompiler::BackendError| format!("seccomp filter: {e}"))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(EPERM),
        arch,
    )
    .map_err(err)?;
    let program: BpfProgram = filter.try_into().map_err(err)?;
    seccompiler::apply_filter(&program).map_err(|e| format!("seccomp filter: {e}"))
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn apply_seccomp(_families: Option<&[u64]>) -> Result<(), String> {
    Err("no seccomp filter is built for this architecture".to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;
    use warrant_core::config::SandboxConfig;

    struct NoLinks;
    impl LinkResolver for NoLinks {
        fn read_link(&self, path: &Path) -> std::io::Result<Option<PathBuf>> {
            // /bin is a link into /usr on merged-/usr systems; model that.
            Ok((path == Path::new("/bin")).then(|| PathBuf::from("usr/bin")))
        }
    }

    fn cp(s: &str) -> CanonicalPath {
        CanonicalPath::from_normalized(s).unwrap()
    }

    #[test]
    fn no_sandbox_means_no_plan() {
        let plan =
            SandboxPlan::from_profile("p", &ProfileConfig::default(), &cp("/w"), &NoLinks).unwrap();
        assert_eq!(plan, None);
    }

    #[test]
    fn default_sandbox_plan_is_absolute_and_round_trips() {
        let profile = ProfileConfig {
            sandbox: Some(SandboxConfig {
                read_roots: vec![".".into(), "/usr".into(), "/bin".into(), "/etc".into()],
                write_roots: vec![".".into(), "build/../out".into()],
                denied: vec![".env".into(), "*.pem".into(), "secrets/prod.txt".into()],
                ..SandboxConfig::default()
            }),
            ..ProfileConfig::default()
        };
        let plan = SandboxPlan::from_profile("p", &profile, &cp("/w"), &NoLinks)
            .unwrap()
            .unwrap();
        assert_eq!(
            plan,
            SandboxPlan {
                enforcement: Enforcement::Required,
                read_roots: vec![cp("/etc"), cp("/usr"), cp("/usr/bin"), cp("/w")],
                write_roots: vec![cp("/w"), cp("/w/out")],
                protected: vec![
                    cp("/w/.git"),
                    cp("/w/.warrant"),
                    cp("/w/out/.git"),
                    cp("/w/out/.warrant")
                ],
                network: NetworkPolicy::None,
                limits: ResourceLimits::default(),
                denied_names: vec![".env".into(), "*.pem".into()],
                denied_paths: vec![cp("/w/secrets/prod.txt")],
                egress_socket: None,
                overlay: None,
                view: true,
                aliases: vec![(PathBuf::from("/bin"), cp("/usr/bin"))],
                home: plan.home.clone(),
                toolchains: plan.toolchains.clone(),
                scratch: plan.scratch.clone(),
                simulate_unavailable: None,
            }
        );
        let json = serde_json::to_string(&plan).unwrap();
        let back: SandboxPlan = serde_json::from_str(&json).unwrap();
        assert_eq!(back, plan);
        assert_eq!(
            plan.requested(),
            vec![
                Mechanism::Session,
                Mechanism::View,
                Mechanism::NetworkNamespace,
                Mechanism::NoNewPrivs,
                Mechanism::Landlock,
                Mechanism::Seccomp
            ]
        );
    }

    /// Scenario table: which missing probe rows turn which profile shapes into a refusal.
    #[test]
    fn profile_verdicts_count_only_what_the_profile_needs() {
        let all = [
            "session",
            "process_limit",
            "network_namespace",
            "no_new_privs",
            "landlock",
            "seccomp",
            "egress_proxy",
            "landlock observed",
            "denied observed",
            "process limit observed",
            "network observed",
            "netns observed",
            "egress proxy observed",
        ];
        let rows = |missing: &[&str]| -> Vec<ProbeRow> {
            all.iter()
                .map(|m| ProbeRow {
                    mechanism: m,
                    available: !missing.contains(m),
                    detail: String::new(),
                })
                .collect()
        };
        let shape = |network: NetworkPolicy, processes: Option<u64>, enforcement| SandboxConfig {
            enforcement,
            network,
            limits: ResourceLimits {
                processes,
                ..ResourceLimits::default()
            },
            ..SandboxConfig::default()
        };
        let req = Enforcement::Required;
        let none = shape(NetworkPolicy::None, None, req);
        let host = shape(NetworkPolicy::Host, None, req);
        let allow = shape(NetworkPolicy::Allow(vec!["a.b:1".into()]), None, req);
        let forky = shape(NetworkPolicy::Host, Some(8), req);
        let best = shape(NetworkPolicy::None, None, Enforcement::BestEffort);
        let no_ns = rows(&["network_namespace", "netns observed"]);
        let no_cgroup = rows(&["process_limit", "process limit observed"]);
        let no_proxy = rows(&["egress_proxy", "egress proxy observed"]);
        let got: Vec<(bool, String)> = vec![
            profile_verdict(&none, &rows(&[])),
            profile_verdict(&none, &no_ns),
            profile_verdict(&host, &no_ns),
            profile_verdict(&allow, &no_ns),
            profile_verdict(&allow, &no_proxy),
            profile_verdict(&none, &no_proxy),
            profile_verdict(&forky, &no_cgroup),
            profile_verdict(&none, &no_cgroup),
            profile_verdict(&best, &no_ns),
            profile_verdict(&host, &rows(&["landlock observed"])),
        ];
        let refused = |what: &str| {
            (
                false,
                format!("commands will be REFUSED (required), lacking: {what}"),
            )
        };
        let fully = || (true, "fully enforced here".to_owned());
        assert_eq!(
            got,
            vec![
                fully(),
                refused("network_namespace, netns observed"),
                fully(),
                refused("network_namespace, netns observed"),
                refused("egress_proxy, egress proxy observed"),
                fully(),
                refused("process_limit, process limit observed"),
                fully(),
                (
                    true,
                    "runs with less (best_effort), lacking: network_namespace, netns observed"
                        .to_owned()
                ),
                refused("landlock observed"),
            ]
        );
    }

    #[test]
    fn allowlist_config_shape_and_bad_entries() {
        let profile: ProfileConfig = toml::from_str(
            "[sandbox]\nnetwork = { allow = [\"pypi.org:443\", \"*.example.com:80\"] }\nlimits = { processes = 32 }\n",
        )
        .unwrap();
        let plan = SandboxPlan::from_profile("p", &profile, &cp("/w"), &NoLinks)
            .unwrap()
            .unwrap();
        assert_eq!(
            plan.network,
            NetworkPolicy::Allow(vec!["pypi.org:443".into(), "*.example.com:80".into()])
        );
        assert_eq!(
            plan.requested(),
            vec![
                Mechanism::Session,
                Mechanism::ProcessLimit,
                Mechanism::NetworkNamespace,
                Mechanism::EgressProxy,
                Mechanism::NoNewPrivs,
                Mechanism::Landlock,
                Mechanism::Seccomp
            ]
        );
        let bad: ProfileConfig =
            toml::from_str("[sandbox]\nnetwork = { allow = [\"pypi.org\"] }\n").unwrap();
        let err = SandboxPlan::from_profile("p", &bad, &cp("/w"), &NoLinks).unwrap_err();
        insta::assert_snapshot!(err.to_string(), @r#"profile `p` has a sandbox that cannot be planned: network allowlist: `pypi.org` is not host:port (e.g. "pypi.org:443")"#);
    }

    #[test]
    fn sandbox_config_parses_from_toml_with_defaults() {
        let profile: ProfileConfig = toml::from_str(
            "[sandbox]\nenforcement = \"best_effort\"\nnetwork = \"host\"\n[sandbox.limits]\nmemory_bytes = 1000\n",
        )
        .unwrap();
        assert_eq!(
            profile.sandbox,
            Some(SandboxConfig {
                enforcement: Enforcement::BestEffort,
                network: NetworkPolicy::Host,
                limits: ResourceLimits {
                    memory_bytes: Some(1000),
                    ..ResourceLimits::default()
                },
                ..SandboxConfig::default()
            })
        );
    }
}

/// Argument that makes the launcher, run as a probe *target* inside a sandbox, try to open an
/// AF_INET socket: exit 0 when it could, 3 when the kernel refused (EPERM/EACCES), 4 otherwise.
pub const PROBE_SOCKET: &str = "__probe-socket";

fn probe_socket() -> i32 {
    match std::net::TcpListener::bind("127.0.0.1:0") {
        Ok(_) => 0,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => 3,
        Err(_) => 4,
    }
}

/// Argument that makes the launcher, run as a probe target under an allowlist, try a direct TCP
/// connection to the host's `127.0.0.1:<port>` and then a CONNECT through `HTTP_PROXY` to a name
/// not on the list: exit 0 when the first failed and the proxy answered 403; otherwise 10 plus 1
/// (the direct connection worked) plus 2 (no 403 from the proxy).
pub const PROBE_EGRESS: &str = "__probe-egress";

fn probe_egress(args: &[String]) -> i32 {
    use std::io::Read;
    let direct = args
        .first()
        .and_then(|p| p.parse::<u16>().ok())
        .is_some_and(|port| std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
    let refused = std::env::var("HTTP_PROXY")
        .ok()
        .and_then(|url| url.strip_prefix("http://").map(str::to_owned))
        .and_then(|addr| std::net::TcpStream::connect(addr).ok())
        .and_then(|mut s| {
            s.write_all(b"CONNECT probe.invalid:443 HTTP/1.1\r\nHost: probe.invalid:443\r\n\r\n")
                .ok()?;
            let mut buf = [0u8; 12];
            s.read_exact(&mut buf).ok()?;
            Some(buf.starts_with(b"HTTP/1.1 403"))
        })
        .unwrap_or(false);
    match (direct, refused) {
        (false, true) => 0,
        (true, true) => 11,
        (false, false) => 12,
        (true, false) => 13,
    }
}

/// One row of `warrant doctor`: a mechanism, whether this machine really enforces it (observed
/// by trying, in a child, through the launcher), and what was seen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProbeRow {
    pub mechanism: &'static str,
    pub available: bool,
    pub detail: String,
}

/// What a profile's sandbox needs from the probe table: the rows whose absence it cannot do
/// without (`warrant doctor` says what each profile gets from this).
pub fn rows_needed(config: &warrant_core::config::SandboxConfig) -> Vec<&'static str> {
    let mut out = vec![
        "sandbox",
        "sandbox launcher",
        "session",
        "no_new_privs",
        "landlock",
        "seccomp",
        "landlock observed",
    ];
    if config.isolation == Isolation::Namespaces
        && !matches!(config.network, NetworkPolicy::Allow(_))
    {
        out.extend(["view", "view observed", "overlay observed"]);
    }
    if !config.denied.is_empty() {
        out.push("denied observed");
    }
    if config.limits.processes.is_some() {
        out.extend(["process_limit", "process limit observed"]);
    }
    match config.network {
        NetworkPolicy::Host => {}
        NetworkPolicy::None => {
            out.extend(["network_namespace", "network observed", "netns observed"]);
        }
        NetworkPolicy::Allow(_) => out.extend([
            "network_namespace",
            "netns observed",
            "egress_proxy",
            "egress proxy observed",
        ]),
    }
    out
}

/// What a sandboxed profile gets on a machine whose probes gave `rows`: whether it is fine
/// (fully enforced, or `best_effort` running with less) and the sentence doctor shows. Only the
/// rows the profile needs count (a host-network profile does not need the namespace).
pub fn profile_verdict(
    config: &warrant_core::config::SandboxConfig,
    rows: &[ProbeRow],
) -> (bool, String) {
    let needed = rows_needed(config);
    let lacking: Vec<&str> = rows
        .iter()
        .filter(|r| !r.available && needed.contains(&r.mechanism))
        .map(|r| r.mechanism)
        .collect();
    match (config.enforcement, lacking.is_empty()) {
        (_, true) => (true, "fully enforced here".to_owned()),
        (Enforcement::BestEffort, false) => (
            true,
            format!(
                "runs with less (best_effort), lacking: {}",
                lacking.join(", ")
            ),
        ),
        (Enforcement::Required, false) => (
            false,
            format!(
                "commands will be REFUSED (required), lacking: {}",
                lacking.join(", ")
            ),
        ),
    }
}

/// Probe what this machine enforces: run the launcher under `best_effort` plans over a scratch
/// directory in `scratch` (which must exist and be writable): `sh` trying a read and a write
/// outside the roots and a read of a denied `.env`; `sh` starting more processes than its limit;
/// the launcher itself trying an AF_INET socket; and, under an empty allowlist, the launcher
/// trying a direct connection to a host listener and a CONNECT through the egress proxy.
pub fn probe(launcher: &Launcher, scratch: &Path) -> Vec<ProbeRow> {
    let mut rows = Vec::new();
    let mut row = |mechanism: &'static str, available: bool, detail: String| {
        rows.push(ProbeRow {
            mechanism,
            available,
            detail,
        });
    };
    let ws = scratch.join("ws");
    let outside = scratch.join("outside");
    let prepared = std::fs::create_dir_all(&ws)
        .and_then(|()| std::fs::create_dir_all(&outside))
        .and_then(|()| std::fs::write(outside.join("secret"), "probe-secret"))
        .and_then(|()| std::fs::write(ws.join(".env"), "probe-denied"));
    let plan = prepared
        .map_err(|e| format!("cannot prepare {}: {e}", scratch.display()))
        .and_then(|()| probe_plan(launcher, &ws));
    let plan = match plan {
        Ok(plan) => plan,
        Err(e) => {
            row("sandbox", false, e);
            return rows;
        }
    };
    // Under a view, the namespace's first process is this very script.
    let script = format!(
        "cat {o}/secret; echo x > {o}/planted; cat .env; tr '\\0' ' ' < /proc/1/cmdline; echo; ls /proc | grep -c '^[0-9]'",
        o = outside.display()
    );
    let sh = |s: String| vec!["sh".to_owned(), "-c".to_owned(), s];
    let fs_run = run_probe(launcher, &plan, &ws, &sh(script));
    let forky = SandboxPlan {
        limits: ResourceLimits {
            processes: Some(8),
            ..ResourceLimits::default()
        },
        ..plan.clone()
    };
    let fork_run = run_probe(
        launcher,
        &forky,
        &ws,
        &sh("(for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do sleep 0.2 & done; wait) 2>&1; echo end".to_owned()),
    );
    let mut self_argv = vec![launcher.program.display().to_string()];
    self_argv.extend(launcher.prefix_args.iter().cloned());
    let net_run = run_probe(
        launcher,
        &plan,
        &ws,
        &[self_argv.clone(), vec![PROBE_SOCKET.to_owned()]].concat(),
    );
    let egress_run = probe_egress_run(launcher, &plan, &ws, &self_argv);
    let overlay_run = probe_overlay(launcher, &plan, &ws, scratch);

    match &fs_run {
        Err(e) => row("sandbox launcher", false, e.clone()),
        Ok((report, _, _)) => {
            let mut mechanisms = plan.requested();
            mechanisms.insert(1, Mechanism::ProcessLimit);
            mechanisms.sort();
            for mechanism in mechanisms {
                let report = match mechanism {
                    Mechanism::ProcessLimit => fork_run.as_ref().map(|r| &r.0),
                    Mechanism::Session
                    | Mechanism::View
                    | Mechanism::Rlimits
                    | Mechanism::NetworkNamespace
                    | Mechanism::EgressProxy
                    | Mechanism::NoNewPrivs
                    | Mechanism::Landlock
                    | Mechanism::Seccomp => Ok(report),
                };
                let name = short_name(mechanism);
                match report {
                    Err(e) => row(name, false, e.clone()),
                    Ok(report) => {
                        match report.not_applied.iter().find(|n| n.mechanism == mechanism) {
                            Some(n) => row(name, false, n.reason.clone()),
                            None if mechanism == Mechanism::Landlock => {
                                row(name, true, format!("applied (ABI {})", report.landlock_abi))
                            }
                            None => row(name, true, "applied".to_owned()),
                        }
                    }
                }
            }
        }
    }
    match &egress_run {
        Ok((report, _, _)) => match report
            .not_applied
            .iter()
            .find(|n| n.mechanism == Mechanism::EgressProxy)
        {
            Some(n) => row("egress_proxy", false, n.reason.clone()),
            None => row("egress_proxy", true, "applied".to_owned()),
        },
        Err(e) => row("egress_proxy", false, e.clone()),
    }
    if let Ok((report, stdout, _)) = &fs_run {
        let read_blocked = !stdout.contains("probe-secret");
        let write_blocked = !outside.join("planted").exists();
        let blocked = |b: bool| if b { "blocked" } else { "NOT blocked" };
        row(
            "landlock observed",
            read_blocked && write_blocked,
            format!(
                "ABI {}; read outside the roots {}, write outside the roots {}",
                report.landlock_abi,
                blocked(read_blocked),
                blocked(write_blocked),
            ),
        );
        let own_pid_1 = stdout.contains("/proc/1/cmdline");
        let view_on = report.applied.contains(&Mechanism::View);
        row(
            "view observed",
            view_on && read_blocked && write_blocked && own_pid_1,
            if view_on {
                format!(
                    "outside the roots {}; /proc shows {}",
                    if read_blocked && write_blocked {
                        "out of view"
                    } else {
                        "REACHABLE"
                    },
                    if own_pid_1 {
                        "only the command's own processes"
                    } else {
                        "other processes"
                    }
                )
            } else {
                "no view (the namespaces could not be made)".to_owned()
            },
        );
        match &overlay_run {
            Ok(true) => row(
                "overlay observed",
                true,
                "a write landed in the copy-on-write layer, not in the workspace".to_owned(),
            ),
            Ok(false) => row(
                "overlay observed",
                false,
                "a write did not land in the copy-on-write layer; changes could not be judged before they land".to_owned(),
            ),
            Err(e) => row("overlay observed", false, e.clone()),
        }
        let denied_blocked = !stdout.contains("probe-denied");
        row(
            "denied observed",
            denied_blocked,
            format!(
                "read of .env inside a read root {}",
                blocked(denied_blocked)
            ),
        );
    }
    match &fork_run {
        Ok((_, stdout, _)) => {
            let bounded = stdout.contains("fork") && stdout.contains("end");
            row(
                "process limit observed",
                bounded,
                if bounded {
                    "the 9th process could not be started (limit 8)".to_owned()
                } else {
                    "16 processes started under a limit of 8".to_owned()
                },
            );
        }
        Err(e) => row("process limit observed", false, e.clone()),
    }
    match net_run {
        Ok((_, _, code)) => row(
            "network observed",
            code == Some(3),
            match code {
                Some(3) => "AF_INET socket refused (EPERM)".to_owned(),
                Some(0) => "an AF_INET socket could be opened".to_owned(),
                other => format!("probe ended with {other:?}"),
            },
        ),
        Err(e) => row("network observed", false, e),
    }
    match egress_run {
        Ok((_, log, code)) => {
            let isolated = matches!(code, Some(0 | 12));
            row(
                "netns observed",
                isolated,
                if isolated {
                    "a listener on the host's 127.0.0.1 is unreachable".to_owned()
                } else {
                    format!(
                        "a listener on the host's 127.0.0.1 is reachable (probe ended with {code:?})"
                    )
                },
            );
            let recorded = log.refused.iter().any(|a| a.target == "probe.invalid:443");
            let proxied = matches!(code, Some(0 | 11)) && recorded;
            row(
                "egress proxy observed",
                proxied,
                if proxied {
                    "CONNECT to a host off the allowlist refused (403) and recorded".to_owned()
                } else {
                    format!("the proxy did not refuse and record (probe ended with {code:?})")
                },
            );
        }
        Err(e) => {
            row("netns observed", false, e.clone());
            row("egress proxy observed", false, e);
        }
    }
    rows
}

/// A write under a view whose workspace is a copy-on-write layer: `Ok(true)` when it landed in
/// the layer and not in the workspace.
fn probe_overlay(
    launcher: &Launcher,
    plan: &SandboxPlan,
    ws: &Path,
    scratch: &Path,
) -> Result<bool, String> {
    let layer = scratch.join("layer");
    let (upper, work) = (layer.join("upper"), layer.join("work"));
    std::fs::create_dir_all(&upper)
        .and_then(|()| std::fs::create_dir_all(&work))
        .map_err(|e| format!("cannot prepare {}: {e}", layer.display()))?;
    let lower = plan
        .write_roots
        .first()
        .cloned()
        .ok_or_else(|| "the probe plan has no write root".to_owned())?;
    let plan = SandboxPlan {
        overlay: Some(OverlaySpec {
            lower,
            upper: upper.clone(),
            work,
        }),
        ..plan.clone()
    };
    let argv = ["sh", "-c", "echo layered > probe-layer.txt"].map(str::to_owned);
    let (_, _, code) = run_probe(launcher, &plan, ws, &argv)?;
    Ok(code == Some(0)
        && upper.join("probe-layer.txt").exists()
        && !ws.join("probe-layer.txt").exists())
}

fn probe_egress_run(
    launcher: &Launcher,
    plan: &SandboxPlan,
    ws: &Path,
    self_argv: &[String],
) -> Result<(SandboxReport, crate::egress::EgressLog, Option<i32>), String> {
    let host = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| format!("cannot open a host listener: {e}"))?;
    let port = host
        .local_addr()
        .map_err(|e| format!("host listener: {e}"))?
        .port();
    let proxy = crate::egress::EgressProxy::start(crate::egress::Allowlist(Vec::new()))
        .map_err(|e| format!("cannot start the egress proxy: {e}"))?;
    let plan = SandboxPlan {
        network: NetworkPolicy::Allow(Vec::new()),
        egress_socket: Some(proxy.socket().to_path_buf()),
        // As for a configured allowlist: the forwarder runs in the host's view.
        view: false,
        ..plan.clone()
    };
    let argv = [
        self_argv.to_vec(),
        vec![PROBE_EGRESS.to_owned(), port.to_string()],
    ]
    .concat();
    let run = run_probe(launcher, &plan, ws, &argv);
    let log = proxy.finish();
    run.map(|(report, _, code)| (report, log, code))
}

fn probe_plan(launcher: &Launcher, ws: &Path) -> Result<SandboxPlan, String> {
    let cp = |p: &Path| {
        let real = std::fs::canonicalize(p).map_err(|e| format!("{}: {e}", p.display()))?;
        let text = real
            .to_str()
            .ok_or_else(|| format!("{} is not UTF-8", real.display()))?;
        CanonicalPath::from_normalized(text).map_err(|e| e.to_string())
    };
    let ws = cp(ws)?;
    let mut read_roots: Vec<CanonicalPath> = warrant_core::config::DEFAULT_READ_ROOTS
        .iter()
        .filter(|r| **r != "." && Path::new(r).exists())
        .map(|r| cp(Path::new(r)))
        .collect::<Result<_, _>>()?;
    if let Some(dir) = launcher.program.parent() {
        read_roots.push(cp(dir)?);
    }
    read_roots.push(ws.clone());
    Ok(SandboxPlan {
        enforcement: Enforcement::BestEffort,
        read_roots,
        write_roots: vec![ws],
        protected: Vec::new(),
        network: NetworkPolicy::None,
        limits: ResourceLimits::default(),
        denied_names: warrant_core::config::DEFAULT_DENIED
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
        denied_paths: Vec::new(),
        egress_socket: None,
        overlay: None,
        view: true,
        aliases: Vec::new(),
        home: None,
        toolchains: Vec::new(),
        scratch: Vec::new(),
        simulate_unavailable: None,
    })
}

/// Run one probe; the report, stdout, and exit code. Whatever it left in its cgroup is killed.
fn run_probe(
    launcher: &Launcher,
    plan: &SandboxPlan,
    cwd: &Path,
    argv: &[String],
) -> Result<(SandboxReport, String, Option<i32>), String> {
    let child = Command::new(&launcher.program)
        .args(launcher.args(plan, argv).map_err(|e| e.to_string())?)
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| {
            format!(
                "cannot start the launcher {}: {e}",
                launcher.program.display()
            )
        })?;
    let pid = child.id();
    let out = child.wait_with_output();
    crate::cgroup::release(pid);
    let out = out.map_err(|e| format!("probe: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report = stderr
        .lines()
        .next()
        .and_then(|l| l.strip_prefix(REPORT_PREFIX))
        .and_then(|json| serde_json::from_str::<SandboxReport>(json.trim()).ok())
        .ok_or_else(|| format!("the launcher did not report: {}", stderr.trim()))?;
    Ok((
        report,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code(),
    ))
}
