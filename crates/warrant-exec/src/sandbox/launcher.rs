//! The launcher: the separate process that applies a plan to itself, in the order of
//! [`SandboxPlan::requested`], and then `exec`s the target. Under a view it hands over to the
//! first process of the command's PID namespace, which applies the mechanisms after the view.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use rustix::process::{Resource, Rlimit};
use warrant_core::config::{Enforcement, NetworkPolicy, ResourceLimits};

use super::landlock::apply_landlock;
use super::probe::{probe_egress, probe_socket};
use super::seccomp::{AF_INET, AF_INET6, AF_UNIX, apply_seccomp};
use super::{
    BUILD_ID, FAILURE_PREFIX, Mechanism, NotApplied, PRINT_BUILD_ID, PROBE_EGRESS, PROBE_SOCKET,
    PROXY_VARS, REPORT_PREFIX, SANDBOX_FAILED_EXIT, SandboxPlan, SandboxReport, mechanism_name,
};
use crate::error::ExecError;

/// The program that applies a plan: `program prefix_args… <plan-json> -- <argv…>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launcher {
    pub program: PathBuf,
    pub prefix_args: Vec<String>,
}

/// The small launcher's file name: the `warrant-sandbox` binary, installed beside `warrant`.
pub const SMALL_LAUNCHER: &str = "warrant-sandbox";

/// Which launcher [`Launcher::current_exe`] chose, and why (`warrant doctor` says it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LauncherChoice {
    /// The small `warrant-sandbox` beside the running binary, which answered this build's id.
    Small(PathBuf),
    /// The running binary's own `__sandbox` entry point; why the small one is not used.
    Builtin(String),
}

impl Launcher {
    /// The launcher of the running `warrant`: the small `warrant-sandbox` beside it when that
    /// binary is of the same build ([`super::BUILD_ID`], asked once per process), else this
    /// binary's hidden `__sandbox` subcommand. Either applies the same plan; the small one
    /// starts faster (a 2.7 MB binary instead of 33 MB, started twice per command under a view).
    pub fn current_exe() -> Result<Self, ExecError> {
        Self::current_choice().map(|(launcher, _)| launcher)
    }

    /// [`Self::current_exe`] and the reason for the choice.
    pub fn current_choice() -> Result<(Self, LauncherChoice), ExecError> {
        static CHOICE: std::sync::OnceLock<(Launcher, LauncherChoice)> = std::sync::OnceLock::new();
        if let Some(chosen) = CHOICE.get() {
            return Ok(chosen.clone());
        }
        let program = std::env::current_exe().map_err(|e| ExecError::SandboxFailed {
            program: "warrant".to_owned(),
            message: format!("cannot locate the warrant binary to launch the sandbox: {e}"),
        })?;
        Ok(CHOICE.get_or_init(|| Self::beside(&program)).clone())
    }

    /// The running binary's own entry point: `program __sandbox`.
    pub fn builtin(program: PathBuf) -> Self {
        Self {
            program,
            prefix_args: vec!["__sandbox".to_owned()],
        }
    }

    /// The launcher for the `warrant` binary at `program` (uncached): [`SMALL_LAUNCHER`] in
    /// the same directory when `warrant-sandbox __build-id` prints [`super::BUILD_ID`], else
    /// [`Self::builtin`]. A launcher of an older build does not know `__build-id` (it reads it
    /// as a plan and refuses it), so it is never chosen.
    pub fn beside(program: &Path) -> (Self, LauncherChoice) {
        let builtin = |why: String| {
            (
                Self::builtin(program.to_path_buf()),
                LauncherChoice::Builtin(why),
            )
        };
        let small = program.with_file_name(SMALL_LAUNCHER);
        if !small.is_file() {
            return builtin(format!("no {SMALL_LAUNCHER} beside {}", program.display()));
        }
        let small_choice = || {
            (
                Self {
                    program: small.clone(),
                    prefix_args: Vec::new(),
                },
                LauncherChoice::Small(small.clone()),
            )
        };
        let remembered = remembered_build(&small);
        if remembered.as_ref().is_some_and(|r| r.is_file()) {
            return small_choice();
        }
        let answer = Command::new(&small)
            .arg(PRINT_BUILD_ID)
            .env_clear()
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output();
        match answer {
            Err(e) => builtin(format!("{} could not be started: {e}", small.display())),
            Ok(out) if !out.status.success() => builtin(format!(
                "{} is of an older build (it does not report its build)",
                small.display()
            )),
            Ok(out) if String::from_utf8_lossy(&out.stdout).trim() != BUILD_ID => builtin(format!(
                "{} is of another build ({}, this one is {BUILD_ID})",
                small.display(),
                String::from_utf8_lossy(&out.stdout).trim()
            )),
            Ok(_) => {
                if let Some(r) = remembered {
                    let _ = r.parent().map(std::fs::create_dir_all);
                    let _ = std::fs::write(r, b"");
                }
                small_choice()
            }
        }
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

/// Where [`Launcher::beside`] remembers that the small launcher at `small` answered this
/// build's id: a file in the layers' state directory named for this build, this boot of the
/// machine (`/proc/sys/kernel/random/boot_id`) and that very file (inode, size, modification
/// and change times; replacing or rewriting the binary changes them), so the next process
/// skips asking (a program start and wait on every `warrant` process that runs a command).
/// Wrongly remembered it fails closed: a launcher of another build refuses the plan (exit
/// 125, before anything runs). `None` where any part cannot be read.
fn remembered_build(small: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let boot = boot.trim();
    if boot.is_empty() || !boot.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        return None;
    }
    let meta = std::fs::metadata(small).ok()?;
    let dir = crate::judged::layers_dir()?;
    Some(dir.join(format!(
        "launcher-{BUILD_ID}-{boot}-{}-{}-{}.{}-{}.{}",
        meta.ino(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec()
    )))
}

/// The launcher: `args` is `<plan-json> -- <argv…>`. Applies the plan, reports on stderr, and
/// `exec`s the target; returns (an exit status) only when it did not run the target.
pub fn sandbox_main(args: &[String]) -> i32 {
    match args.first().map(String::as_str) {
        Some(PRINT_BUILD_ID) => {
            return match writeln!(std::io::stdout(), "{BUILD_ID}") {
                Ok(()) => 0,
                Err(_) => SANDBOX_FAILED_EXIT,
            };
        }
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
    let (plan, argv) = match parse_args(args) {
        Ok(parsed) => parsed,
        Err(message) => return fail(&message),
    };
    let end = match plan
        .end_on_stdin
        .then(|| take_end_channel(plan.test_end_on_command_stdin))
        .transpose()
    {
        Ok(end) => end.flatten(),
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
    // so nothing it starts outlives it. Not requested, so its absence refuses nothing. A view
    // needs none: the command's first process is the init of its own PID namespace, so the
    // kernel kills everything the command started when that process ends, and it dies with
    // this launcher (which the executor kills on a timeout). Joining costs a cgroup migration
    // (~10 ms here, an RCU grace period), so it is made only where the view is not in force.
    let track = |report: &mut SandboxReport| {
        if plan.limits.processes.is_none() && crate::cgroup::available() {
            report.tracked = crate::cgroup::enter_unlimited().is_ok();
        }
    };
    if !plan.view {
        track(&mut report);
    }
    let mut env = Vec::new();
    match apply(&plan, &prefix, &mut report, &mut env, Stage::Launcher) {
        Ok(Next::Exec) => {
            // A view that was requested but not applied (best effort): track as without one.
            if plan.view {
                track(&mut report);
            }
            exec_target(&report, &argv, env)
        }
        Ok(Next::HandOver) => hand_over(&prefix, report, &plan, &argv, end),
        Err(message) => fail(&message),
    }
}

/// The first process of the command's PID namespace (forked by [`hand_over`]): builds the
/// view, applies the mechanisms left, drops its capabilities, reports and `exec`s the target.
fn view_init(
    prefix: &[String],
    mut report: SandboxReport,
    plan: &SandboxPlan,
    argv: &[String],
) -> i32 {
    // Dies with the launcher that waits for it (a timeout's signal reaches the launcher first).
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    let cwd = match std::env::current_dir() {
        Ok(c) => c,
        Err(e) => return fail(&format!("cannot read the working directory: {e}")),
    };
    // The launcher is not in the view: an allowlist's forwarder is started from this
    // descriptor (close-on-exec, so the command never holds it).
    if plan.egress_socket.is_some() {
        match std::fs::File::open("/proc/self/exe") {
            Ok(exe) => crate::netns::keep_launcher(exe),
            Err(e) => return fail(&format!("cannot open the launcher for the forwarder: {e}")),
        }
    }
    if let Err(message) = crate::view::build(plan, plan.home.as_deref(), &cwd) {
        return fail(&format!(
            "the command's view could not be built ({message})"
        ));
    }
    let mut env = vec![("TMPDIR".to_owned(), "/tmp".to_owned())];
    match apply(plan, prefix, &mut report, &mut env, Stage::Init) {
        Ok(_) => {}
        Err(message) => return fail(&message),
    }
    if let Err(message) = crate::view::drop_capabilities() {
        return fail(&message);
    }
    exec_target(&report, argv, env)
}

/// Fork the PID namespace's first process ([`view_init`]), wait for it and leave as it did
/// (the same exit status, or the same signal). A fork, not a new `exec` of the launcher: the
/// child already holds the plan, and skips a second program start (loading, linking, reading
/// the plan again) on every command.
fn hand_over(
    prefix: &[String],
    report: SandboxReport,
    plan: &SandboxPlan,
    argv: &[String],
    end: Option<std::fs::File>,
) -> i32 {
    let child = match fork() {
        Err(e) => return fail(&format!("cannot start the command's first process: {e}")),
        Ok(None) => {
            // Only the launcher tells the end.
            drop(end);
            let code = view_init(prefix, report, plan, argv);
            // Only when the target was not run: leave without running the parent's exit path
            // twice (its buffers were flushed before the fork; stderr is unbuffered).
            exit_now(code)
        }
        Ok(Some(child)) => child,
    };
    let status = loop {
        match rustix::process::waitpid(Some(child), rustix::process::WaitOptions::empty()) {
            Ok(Some((_, status))) => break status,
            Ok(None) => continue,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return fail(&format!("cannot wait for the command's first process: {e}")),
        }
    };
    // The command has ended, and everything it started with it (the init of its PID
    // namespace): tell the executor now, before this process's exit unmounts the view.
    if let Some(mut end) = end {
        // Nothing more goes to the command's output; closed now, so the executor reads its
        // end at once (this process's exit closes its files only after the view is gone).
        release_output();
        let _ = writeln!(end, "{}", status.as_raw());
    }
    if let Some(code) = status.exit_status() {
        return code;
    }
    let signal = status
        .terminating_signal()
        .unwrap_or(rustix::process::Signal::KILL.as_raw());
    if let Some(sig) = rustix::process::Signal::from_named_raw(signal) {
        let _ = rustix::process::kill_process(rustix::process::getpid(), sig);
    }
    128 + signal
}

/// The executor's end channel, the launcher's standard input when the plan says so
/// (`SandboxPlan::end_on_stdin`): moved to a close-on-exec descriptor, so neither the command
/// nor anything it starts holds it, and `/dev/null` put in its place. `None` when standard input
/// is not a pipe (nobody reads it then). `exposed`: the test knob that leaves it there too.
fn take_end_channel(exposed: bool) -> Result<Option<std::fs::File>, String> {
    use std::os::fd::{AsRawFd, FromRawFd};
    use std::os::unix::fs::FileTypeExt;
    let null = std::fs::File::open("/dev/null")
        .map_err(|e| format!("cannot open /dev/null for the command's standard input: {e}"))?;
    // SAFETY: descriptor calls on standard input and on `null`, which this function owns; the
    // launcher is single-threaded here. `moved` is a fresh descriptor that nothing else owns,
    // so the `File` made from it is its only owner.
    #[allow(unsafe_code)]
    let end = unsafe {
        let moved = libc::fcntl(0, libc::F_DUPFD_CLOEXEC, 3);
        if moved < 0 {
            return Err(format!(
                "cannot move the end channel off standard input: {}",
                std::io::Error::last_os_error()
            ));
        }
        if !exposed && libc::dup2(null.as_raw_fd(), 0) < 0 {
            return Err(format!(
                "cannot put /dev/null on standard input: {}",
                std::io::Error::last_os_error()
            ));
        }
        std::fs::File::from_raw_fd(moved)
    };
    let is_pipe = end.metadata().is_ok_and(|m| m.file_type().is_fifo());
    Ok(is_pipe.then_some(end))
}

/// Put `/dev/null` on standard output and error: the launcher's copies of the command's pipes
/// are closed, and a late message of its own goes nowhere rather than to a reused descriptor.
fn release_output() {
    use std::os::fd::AsRawFd;
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        // SAFETY: `dup2` onto the standard descriptors from one this function owns; the
        // launcher is single-threaded.
        #[allow(unsafe_code)]
        unsafe {
            libc::dup2(null.as_raw_fd(), 1);
            libc::dup2(null.as_raw_fd(), 2);
        }
    }
}

/// `fork(2)`: `None` in the child, the child's pid in the parent.
fn fork() -> std::io::Result<Option<rustix::process::Pid>> {
    // SAFETY: called by the launcher while it is single-threaded (nothing before the hand-over
    // starts a thread: the egress forwarder is a process, started later by the child), so the
    // child inherits no lock another thread held; glibc's fork keeps its own state consistent.
    #[allow(unsafe_code)]
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(std::io::Error::last_os_error()),
        0 => Ok(None),
        pid => Ok(rustix::process::Pid::from_raw(pid)),
    }
}

/// `_exit(2)` for a forked child that could not run its target: no exit handlers, no second
/// flush of what the parent had buffered.
fn exit_now(code: i32) -> ! {
    // SAFETY: `_exit` takes no pointers and never returns.
    #[allow(unsafe_code)]
    unsafe {
        libc::_exit(code)
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

fn parse_args(args: &[String]) -> Result<(SandboxPlan, Vec<String>), String> {
    let (plan_json, rest) = args
        .split_first()
        .ok_or_else(|| "usage: <plan-json> -- <argv…>".to_owned())?;
    let argv = match rest.split_first() {
        Some((sep, argv)) if sep == "--" && !argv.is_empty() => argv.to_vec(),
        Some(_) | None => return Err("usage: <plan-json> -- <argv…>".to_owned()),
    };
    let plan: SandboxPlan =
        serde_json::from_str(plan_json).map_err(|e| format!("unreadable sandbox plan: {e}"))?;
    // A plan made by another build may mean more than this launcher would apply.
    if plan.build != BUILD_ID {
        return Err(format!(
            "the plan was made by another build of Warrant (plan {:?}, launcher {BUILD_ID}); reinstall warrant and warrant-sandbox together",
            plan.build
        ));
    }
    Ok((plan, argv))
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
