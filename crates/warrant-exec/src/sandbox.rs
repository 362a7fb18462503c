//! OS confinement of one command: a pure plan built from a profile, and the launcher that applies
//! it in a separate process just before `exec` (new session, rlimits, `no_new_privs`, Landlock,
//! seccomp), so Warrant itself is never sandboxed. The launcher fails loudly: when a mechanism the
//! plan requires cannot be applied it prints `warrant-sandbox: …` and exits 125 without running
//! the target.
//!
//! Limits (Linux only, x86_64/aarch64 for seccomp):
//! - Landlock cannot subtract: a protected name inside a write root (`.git`) is kept read-only by
//!   granting write per entry of the root except the protected ones, so entries created in that
//!   root *after* the plan was applied are not writable (files inside existing subdirectories are).
//! - `processes` (RLIMIT_NPROC) is per user and the kernel does not enforce it for uid 0; as root
//!   it is reported as not applied (refused under `required`).
//! - `network = "none"` is a seccomp filter on `socket`/`socketpair` (AF_UNIX only), not a
//!   network namespace.

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
use warrant_core::config::{Enforcement, NetworkPolicy, ProfileConfig, ResourceLimits};
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
    Rlimits,
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
    /// Test knob: the launcher behaves as if this mechanism were unavailable on this kernel.
    /// [`SandboxPlan::from_profile`] never sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulate_unavailable: Option<Mechanism>,
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
        let resolve = |p: &str| {
            canonicalize(workspace, p, links).map_err(|e| ExecError::SandboxPlan {
                profile: profile_name.to_owned(),
                message: format!("cannot resolve `{p}`: {e}"),
            })
        };
        let resolve_all = |list: &[String]| -> Result<Vec<CanonicalPath>, ExecError> {
            let mut out: Vec<CanonicalPath> =
                list.iter().map(|p| resolve(p)).collect::<Result<_, _>>()?;
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
        Ok(Some(Self {
            enforcement: config.enforcement,
            read_roots,
            write_roots,
            protected,
            network: config.network,
            limits: config.limits.clone(),
            simulate_unavailable: None,
        }))
    }

    /// The mechanisms this plan asks for.
    pub fn requested(&self) -> Vec<Mechanism> {
        let mut out = vec![Mechanism::Session];
        if self.limits != ResourceLimits::default() {
            out.push(Mechanism::Rlimits);
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
    if args.first().map(String::as_str) == Some(PROBE_SOCKET) {
        return probe_socket();
    }
    match prepare(args) {
        Ok((report, argv)) => {
            let Some((program, rest)) = argv.split_first() else {
                return fail("no command given after `--`");
            };
            let line = match serde_json::to_string(&report) {
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
            let e = Command::new(program).args(rest).exec();
            // After the report: the target's own "could not start" is not a sandbox failure.
            let _ = writeln!(
                std::io::stderr(),
                "{FAILURE_PREFIX} cannot run `{program}`: {e}"
            );
            127
        }
        Err(message) => fail(&message),
    }
}

fn fail(message: &str) -> i32 {
    let _ = writeln!(
        std::io::stderr(),
        "{FAILURE_PREFIX} {message}; the command was not run"
    );
    SANDBOX_FAILED_EXIT
}

fn prepare(args: &[String]) -> Result<(SandboxReport, Vec<String>), String> {
    let (plan_json, rest) = args
        .split_first()
        .ok_or_else(|| "usage: <plan-json> -- <argv…>".to_owned())?;
    let argv = match rest.split_first() {
        Some((sep, argv)) if sep == "--" && !argv.is_empty() => argv.to_vec(),
        Some(_) | None => return Err("usage: <plan-json> -- <argv…>".to_owned()),
    };
    let plan: SandboxPlan =
        serde_json::from_str(plan_json).map_err(|e| format!("unreadable sandbox plan: {e}"))?;
    let report = apply(&plan)?;
    Ok((report, argv))
}

/// Apply every mechanism of `plan` to this process, in order.
fn apply(plan: &SandboxPlan) -> Result<SandboxReport, String> {
    let mut report = SandboxReport {
        enforcement: plan.enforcement,
        applied: Vec::new(),
        not_applied: Vec::new(),
        landlock_abi: 0,
    };
    for mechanism in plan.requested() {
        let result = if plan.simulate_unavailable == Some(mechanism) {
            Err("unavailable on this kernel (simulated by the plan)".to_owned())
        } else {
            match mechanism {
                Mechanism::Session => rustix::process::setsid()
                    .map(|_| ())
                    .map_err(|e| format!("setsid failed: {e}")),
                Mechanism::Rlimits => apply_rlimits(&plan.limits),
                Mechanism::NoNewPrivs => rustix::thread::set_no_new_privs(true)
                    .map_err(|e| format!("PR_SET_NO_NEW_PRIVS failed: {e}")),
                Mechanism::Landlock => apply_landlock(plan, &mut report.landlock_abi),
                Mechanism::Seccomp => apply_seccomp(plan.network),
            }
        };
        match result {
            Ok(()) => report.applied.push(mechanism),
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
    Ok(report)
}

pub fn mechanism_name(m: Mechanism) -> &'static str {
    match m {
        Mechanism::Session => "a new session",
        Mechanism::Rlimits => "resource limits",
        Mechanism::NoNewPrivs => "no_new_privs",
        Mechanism::Landlock => "Landlock",
        Mechanism::Seccomp => "the seccomp filter",
    }
}

/// The mechanism's name in tables (`warrant doctor`).
pub fn short_name(m: Mechanism) -> &'static str {
    match m {
        Mechanism::Session => "session",
        Mechanism::Rlimits => "rlimits",
        Mechanism::NoNewPrivs => "no_new_privs",
        Mechanism::Landlock => "landlock",
        Mechanism::Seccomp => "seccomp",
    }
}

fn apply_rlimits(limits: &ResourceLimits) -> Result<(), String> {
    let ResourceLimits {
        processes,
        memory_bytes,
        cpu_seconds,
        file_size_bytes,
        open_files,
    } = limits;
    if processes.is_some() && rustix::process::getuid().is_root() {
        return Err(
            "the process limit (RLIMIT_NPROC) is not enforced by the kernel for root".to_owned(),
        );
    }
    let set = [
        (Resource::Nproc, *processes, "processes"),
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

fn apply_landlock(plan: &SandboxPlan, abi_seen: &mut u32) -> Result<(), String> {
    let read = AccessFs::from_read(LANDLOCK_ABI);
    let all = AccessFs::from_all(LANDLOCK_ABI);
    let mut grants: Vec<(PathBuf, BitFlags<AccessFs>)> = Vec::new();
    for root in &plan.read_roots {
        grants.push((root.as_path().to_path_buf(), read));
    }
    for root in &plan.write_roots {
        write_grants(root.as_path(), &plan.protected, read, all, &mut grants)?;
    }
    // Shell redirections to /dev/null are everywhere; it is harmless to write.
    grants.push((PathBuf::from("/dev/null"), all));

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

/// Write grants for `dir`: the whole tree when no protected path lies inside it; otherwise
/// read on `dir` and write on each entry except the protected ones (recursing towards them).
fn write_grants(
    dir: &Path,
    protected: &[CanonicalPath],
    read: BitFlags<AccessFs>,
    all: BitFlags<AccessFs>,
    out: &mut Vec<(PathBuf, BitFlags<AccessFs>)>,
) -> Result<(), String> {
    if protected.iter().any(|p| p.as_path() == dir) {
        out.push((dir.to_path_buf(), read));
        return Ok(());
    }
    if !protected.iter().any(|p| p.as_path().starts_with(dir)) {
        out.push((dir.to_path_buf(), all));
        return Ok(());
    }
    out.push((dir.to_path_buf(), read));
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("cannot list write root {}: {e}", dir.display())),
    };
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot list write root {}: {e}", dir.display()))?;
        let path = entry.path();
        let is_real_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
        if is_real_dir {
            write_grants(&path, protected, read, all, out)?;
        } else if protected.iter().any(|p| p.as_path() == path) {
            out.push((path, read));
        } else if entry.file_type().map(|t| t.is_symlink()).unwrap_or(false) {
            // A link is not followed: its target is granted only if a root covers it.
        } else {
            out.push((path, all));
        }
    }
    Ok(())
}

#[cfg(target_arch = "x86_64")]
mod nr {
    pub const SOCKET: i64 = 41;
    pub const SOCKETPAIR: i64 = 53;
    pub const PTRACE: i64 = 101;
    pub const PROCESS_VM_READV: i64 = 310;
    pub const PROCESS_VM_WRITEV: i64 = 311;
}
#[cfg(target_arch = "aarch64")]
mod nr {
    pub const SOCKET: i64 = 198;
    pub const SOCKETPAIR: i64 = 199;
    pub const PTRACE: i64 = 117;
    pub const PROCESS_VM_READV: i64 = 270;
    pub const PROCESS_VM_WRITEV: i64 = 271;
}
const IO_URING_SETUP: i64 = 425;
const IO_URING_ENTER: i64 = 426;
const IO_URING_REGISTER: i64 = 427;
const PIDFD_GETFD: i64 = 438;
const AF_UNIX: u64 = 1;
const EPERM: u32 = 1;

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn apply_seccomp(network: NetworkPolicy) -> Result<(), String> {
    let err = |e: seccompiler::BackendError| format!("seccomp filter: {e}");
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    // Reaching into another process (Warrant's memory or descriptors), and io_uring, which
    // bypasses syscall filtering.
    for nr in [
        nr::PTRACE,
        nr::PROCESS_VM_READV,
        nr::PROCESS_VM_WRITEV,
        PIDFD_GETFD,
        IO_URING_SETUP,
        IO_URING_ENTER,
        IO_URING_REGISTER,
    ] {
        rules.insert(nr, Vec::new());
    }
    match network {
        NetworkPolicy::Host => {}
        NetworkPolicy::None => {
            for nr in [nr::SOCKET, nr::SOCKETPAIR] {
                let not_unix =
                    SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, AF_UNIX)
                        .map_err(err)?;
                rules.insert(nr, vec![SeccompRule::new(vec![not_unix]).map_err(err)?]);
            }
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
fn apply_seccomp(_network: NetworkPolicy) -> Result<(), String> {
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
                Mechanism::NoNewPrivs,
                Mechanism::Landlock,
                Mechanism::Seccomp
            ]
        );
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

/// One row of `warrant doctor`: a mechanism, whether this machine really enforces it (observed
/// by trying, in a child, through the launcher), and what was seen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProbeRow {
    pub mechanism: &'static str,
    pub available: bool,
    pub detail: String,
}

/// Probe what this machine enforces: run the launcher under a `best_effort` plan over a
/// scratch directory in `scratch` (which must exist and be writable), once with `sh` trying a
/// read and a write outside the roots, once with the launcher itself trying an AF_INET socket.
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
        .and_then(|()| std::fs::write(outside.join("secret"), "probe-secret"));
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
    let script = format!(
        "cat {o}/secret; echo x > {o}/planted",
        o = outside.display()
    );
    let fs_run = run_probe(
        launcher,
        &plan,
        &ws,
        &["sh".to_owned(), "-c".to_owned(), script],
    );
    let mut args = launcher.prefix_args.clone();
    args.push(PROBE_SOCKET.to_owned());
    let mut argv = vec![launcher.program.display().to_string()];
    argv.extend(args);
    let net_run = run_probe(launcher, &plan, &ws, &argv);
    match &fs_run {
        Err(e) => row("sandbox launcher", false, e.clone()),
        Ok((report, _, _)) => {
            for mechanism in plan.requested() {
                let name = short_name(mechanism);
                match report.not_applied.iter().find(|n| n.mechanism == mechanism) {
                    Some(n) => row(name, false, n.reason.clone()),
                    None => row(name, true, "applied".to_owned()),
                }
            }
        }
    }
    if let Ok((report, stdout, _)) = &fs_run {
        let read_blocked = !stdout.contains("probe-secret");
        let write_blocked = !outside.join("planted").exists();
        row(
            "landlock observed",
            read_blocked && write_blocked,
            format!(
                "ABI {}; read outside the roots {}, write outside the roots {}",
                report.landlock_abi,
                if read_blocked {
                    "blocked"
                } else {
                    "NOT blocked"
                },
                if write_blocked {
                    "blocked"
                } else {
                    "NOT blocked"
                },
            ),
        );
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
    rows
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
        simulate_unavailable: None,
    })
}

/// Run one probe; the report, stdout, and exit code.
fn run_probe(
    launcher: &Launcher,
    plan: &SandboxPlan,
    cwd: &Path,
    argv: &[String],
) -> Result<(SandboxReport, String, Option<i32>), String> {
    let out = Command::new(&launcher.program)
        .args(launcher.args(plan, argv).map_err(|e| e.to_string())?)
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| {
            format!(
                "cannot start the launcher {}: {e}",
                launcher.program.display()
            )
        })?;
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
