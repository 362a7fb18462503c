//! Runs an authorized `shell.exec` action: minimized environment, its own process group, stdin
//! closed, bounded output, and a timeout that kills the whole group (TERM, grace, KILL). A profile
//! with a sandbox runs through the launcher of [`crate::sandbox`], which starts its own session
//! (and so its own group), confines itself and execs the command.

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, ChildStderr, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process, kill_process_group};
use serde::{Deserialize, Serialize};
use warrant_core::config::{NetworkPolicy, ProfileConfig};
use warrant_core::{Judging, ShellExec};
use warrant_kernel::Authorized;

use crate::egress::{Allowlist, EgressProxy};
use crate::env::{minimize_env, validate_profile};
use crate::error::ExecError;
use crate::fs::recheck;
use crate::output::{CapturedStream, HeadTail};
use crate::sandbox::{
    FAILURE_PREFIX, Launcher, REPORT_PREFIX, SANDBOX_FAILED_EXIT, SandboxPlan, SandboxReport,
};

/// A sandbox to run a command in: the plan, and the program that applies it.
#[derive(Clone, Debug)]
pub struct Confinement {
    pub plan: SandboxPlan,
    pub launcher: Launcher,
}

/// After SIGTERM on timeout, how long the group gets to exit before SIGKILL.
pub const TERM_GRACE: Duration = Duration::from_millis(500);
/// After the command exits, how long its pipes may stay open (a background grandchild holding
/// them) before the group is killed and what was captured is returned.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(1);
/// After SIGKILL, how long to wait for the kernel to deliver it before giving up on the status.
const KILL_WAIT: Duration = Duration::from_secs(5);
/// Read size of the pipe readers.
const CHUNK: usize = 8 * 1024;

/// What happened when a command ran.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecOutcome {
    /// Exit status when the command exited on its own terms.
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// Why the command was stopped before it ended, when something other than its timeout
    /// stopped it (a cancellation, the run's deadline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// The command exited but something it started kept stdout/stderr open past
    /// [`DRAIN_TIMEOUT`]; the group was killed and the capture cut there.
    pub pipes_held_open: bool,
    pub stdout: CapturedStream,
    pub stderr: CapturedStream,
    pub duration_ms: u64,
    /// What the sandbox launcher put in force; absent when the profile has no sandbox (or the
    /// command was stopped before the launcher reported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxReport>,
    /// Under a network allowlist: every connection the egress proxy let through or refused
    /// (the refusals are what the model sees and what the journal keeps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<crate::egress::EgressLog>,
    /// Processes the command left running in its cgroup, killed when it ended.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub leftover_killed: usize,
    /// A contained command's changes to the workspace and what became of them (see
    /// [`crate::judged`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<crate::judged::Judgement>,
    /// `argv` when a contained command ran without a copy-on-write layer (overlays are
    /// unavailable here): it wrote to the workspace directly, judged by its argv before it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judged: Option<warrant_core::Judging>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

enum Event {
    /// The command's first process ended with this status, as the launcher told through its
    /// end channel before its own exit (see [`read_end`]).
    Ended(ExitStatus),
    Exited(std::io::Result<ExitStatus>),
    StreamDone,
}

/// Work that waits for the launcher's own exit, done by the thread that reaps it.
type AfterExit = Box<dyn FnOnce() + Send>;

/// The threads still reaping a launcher that told the command's end early (its exit tears the
/// view down: the mounts, the overlay, the namespaces, a few milliseconds) and then removing
/// what waited for that: the command's copy-on-write layer. Joined by [`settle`].
static SETTLING: Mutex<Vec<thread::JoinHandle<()>>> = Mutex::new(Vec::new());

/// Wait until every launcher that told its command's end early has exited and what waited for
/// that is done (the copy-on-write layers removed). A process that ran commands calls it before
/// it leaves (the host does, when it is dropped); a layer left by a process that did not is
/// removed by the next sweep of its workspace.
pub fn settle() {
    let pending = std::mem::take(&mut *SETTLING.lock().unwrap_or_else(PoisonError::into_inner));
    for handle in pending {
        let _ = handle.join();
    }
}

/// The thread that reaps a launcher, kept for [`settle`] when dropped (forgetting the threads
/// that already ended). Only then: a call still waiting for its command is no business of
/// another caller's `settle` (a front end that opens a host per request drops one while another
/// request's command runs).
struct Reaper(Option<thread::JoinHandle<()>>);

impl Drop for Reaper {
    fn drop(&mut self) {
        if let Some(handle) = self.0.take() {
            let mut pending = SETTLING.lock().unwrap_or_else(PoisonError::into_inner);
            pending.retain(|h| !h.is_finished());
            pending.push(handle);
        }
    }
}

/// A copy-on-write layer that must outlive the launcher's mount namespace: dropped by the
/// thread that reaps the launcher once it has exited (the overlay over it unmounted), or here
/// when the launcher is known to be gone.
struct Deferred {
    layer: Option<crate::judged::Layer>,
    after_exit: Sender<AfterExit>,
}

impl Deferred {
    fn later(&self, job: AfterExit) {
        // The reaping thread is gone (it only leaves once this side has): do it now.
        if let Err(refused) = self.after_exit.send(job) {
            (refused.0)();
        }
    }
}

impl Drop for Deferred {
    fn drop(&mut self) {
        if let Some(layer) = self.layer.take() {
            self.later(Box::new(move || drop(layer)));
        }
    }
}

/// Run the `shell.exec` action under `profile`. `parent_env` is Warrant's own environment;
/// only what [`minimize_env`] lets through reaches the command.
pub fn run_command(
    action: &Authorized<ShellExec>,
    profile: &ProfileConfig,
    parent_env: &[(String, String)],
) -> Result<ExecOutcome, ExecError> {
    run_command_until(action, profile, parent_env, &|| None)
}

/// How often a running command checks whether it must stop (a cancellation, a deadline).
pub const STOP_POLL: Duration = Duration::from_millis(200);

/// [`run_command`], also stopping the whole process group as soon as `stop` returns a reason
/// (asked every [`STOP_POLL`]); the outcome then carries that reason in `stopped`.
pub fn run_command_until(
    action: &Authorized<ShellExec>,
    profile: &ProfileConfig,
    parent_env: &[(String, String)],
    stop: &dyn Fn() -> Option<String>,
) -> Result<ExecOutcome, ExecError> {
    run_command_confined(action, profile, parent_env, stop, None)
}

/// [`run_command_until`] under `confinement`. A profile with a sandbox must be given one: it is
/// never run unconfined.
pub fn run_command_confined(
    action: &Authorized<ShellExec>,
    profile: &ProfileConfig,
    parent_env: &[(String, String)],
    stop: &dyn Fn() -> Option<String>,
    confinement: Option<&Confinement>,
) -> Result<ExecOutcome, ExecError> {
    run_command_with_secrets(action, profile, parent_env, stop, confinement, &[])
}

/// [`run_command_confined`], with `secrets` (name, value) added to the command's environment
/// after minimization: the secrets the configuration gives this profile (`[secret_env]`),
/// resolved from the vault by the caller. Nothing else may add a secret-looking name.
pub fn run_command_with_secrets(
    action: &Authorized<ShellExec>,
    profile: &ProfileConfig,
    parent_env: &[(String, String)],
    stop: &dyn Fn() -> Option<String>,
    confinement: Option<&Confinement>,
    secrets: &[(String, String)],
) -> Result<ExecOutcome, ExecError> {
    let ShellExec {
        argv,
        cwd,
        profile: profile_name,
        timeout_ms,
        contained,
        judged,
        ..
    } = action.get();
    let (timeout_ms, contained, judged) = (*timeout_ms, *contained, *judged);
    validate_profile(profile_name, profile)?;
    let (program, args) = argv.split_first().ok_or(ExecError::EmptyArgv)?;
    if timeout_ms == 0 {
        return Err(ExecError::ZeroTimeout);
    }
    // The tools layer clamps already; clamping again costs nothing and keeps the profile's
    // ceiling true even for an action built elsewhere.
    let timeout = Duration::from_millis(timeout_ms.min(profile.timeout_ms));
    recheck(cwd)?;
    match std::fs::metadata(cwd.as_path()) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(ExecError::NotADirectory { path: cwd.clone() }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ExecError::NotFound { path: cwd.clone() });
        }
        Err(e) => {
            return Err(ExecError::Io {
                op: "inspect the working directory",
                path: cwd.clone(),
                message: e.to_string(),
            });
        }
    }

    if profile.sandbox.is_some() && confinement.is_none() {
        return Err(ExecError::SandboxFailed {
            program: program.clone(),
            message: format!(
                "profile `{profile_name}` has a sandbox but the executor was given no launcher (a wiring bug)"
            ),
        });
    }

    // Decided as contained (run without a person): it runs contained or not at all.
    if contained && (!profile.is_contained() || !confinement.is_some_and(|c| c.plan.view)) {
        return Err(ExecError::SandboxFailed {
            program: program.clone(),
            message: format!(
                "it was allowed as a contained command, but profile `{profile_name}` no longer confines it by the default view"
            ),
        });
    }
    // A contained command writes through a copy-on-write layer; its changes are judged after.
    // Judged by its argv (no overlays here), it writes to the workspace directly, in its view.
    let layer = match confinement {
        Some(_) if contained && judged == Judging::Changeset => Some(crate::judged::Layer::create(
            cwd_workspace(confinement, cwd),
            action.run().as_str(),
        )?),
        Some(_) | None => None,
    };
    let with_layer;
    let confinement = match confinement {
        Some(c) if layer.is_some() || c.plan.view => {
            let mut plan = c.plan.clone();
            plan.overlay = layer.as_ref().map(|l| l.spec.clone());
            // The launcher tells the command's end before its exit tears the view down.
            plan.end_on_stdin = plan.view;
            if plan.view {
                let workspace = cwd_workspace(Some(c), cwd);
                // Toolchain caches the command may fill, kept per workspace.
                plan.cache_layers = crate::judged::cache_layers(workspace, &plan.caches)?;
                // What the last walk for denied names found, so this one lists only what changed.
                plan.census_memory = crate::judged::census_memory(workspace);
            }
            with_layer = Confinement {
                plan,
                launcher: c.launcher.clone(),
            };
            Some(&with_layer)
        }
        c => c,
    };
    let mut env = minimize_env(profile, parent_env.iter().cloned());
    env.extend(secrets.iter().cloned());
    // An allowlist: Warrant's egress proxy runs for the length of the command, and the plan
    // tells the launcher where it listens.
    let mut proxy = None;
    let with_proxy;
    let confinement = match confinement {
        Some(c) => match &c.plan.network {
            NetworkPolicy::Allow(list) => {
                let fail = |message: String| ExecError::SandboxFailed {
                    program: program.clone(),
                    message,
                };
                let allow =
                    Allowlist::parse(list).map_err(|e| fail(format!("network allowlist: {e}")))?;
                let started = EgressProxy::start(allow)
                    .map_err(|e| fail(format!("cannot start the egress proxy: {e}")))?;
                let mut plan = c.plan.clone();
                plan.egress_socket = Some(started.socket().to_path_buf());
                proxy = Some(started);
                with_proxy = Confinement {
                    plan,
                    launcher: c.launcher.clone(),
                };
                Some(&with_proxy)
            }
            NetworkPolicy::None | NetworkPolicy::Host => Some(c),
        },
        None => None,
    };
    let mut command = match confinement {
        None => {
            let mut c = Command::new(program);
            // A group of its own, so a timeout reaches everything the command started.
            c.args(args).process_group(0);
            c
        }
        Some(Confinement { plan, launcher }) => {
            // The launcher calls setsid (a new session and group); setsid fails for a group
            // leader, so no process_group(0) here.
            let mut c = Command::new(&launcher.program);
            c.args(launcher.args(plan, argv)?);
            c
        }
    };
    // The launcher's end channel is its standard input (see `SandboxPlan::end_on_stdin`); the
    // command's is /dev/null either way.
    let (end, stdin) = match confinement {
        Some(c) if c.plan.end_on_stdin => {
            let (read, write) = std::io::pipe().map_err(|e| ExecError::Spawn {
                program: program.clone(),
                message: format!("cannot make the launcher's end channel: {e}"),
            })?;
            (Some(read), Stdio::from(write))
        }
        Some(_) | None => (None, Stdio::null()),
    };
    let started = Instant::now();
    let spawned = command
        .env_clear()
        .envs(env)
        .current_dir(cwd.as_path())
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    // The `Command` holds this side's copy of the end channel's write end: closed now, so the
    // channel ends when the launcher's copy does.
    drop(command);
    let mut child = spawned.map_err(|e| ExecError::Spawn {
        program: program.clone(),
        message: spawn_message(&e),
    })?;
    let group = Pid::from_child(&child);
    let child_pid = child.id();
    let report_slot: Arc<Mutex<Option<SandboxReport>>> = Arc::new(Mutex::new(None));

    let (tx, rx) = mpsc::channel();
    let stdout = Arc::new(Mutex::new(HeadTail::new(
        profile.output_head_bytes,
        profile.output_tail_bytes,
    )));
    let stderr = Arc::new(Mutex::new(HeadTail::new(
        profile.output_head_bytes,
        profile.output_tail_bytes,
    )));
    let mut readers = 0usize;
    if let Some(pipe) = child.stdout.take() {
        spawn_reader(Pipe::Out(pipe), Arc::clone(&stdout), None, tx.clone());
        readers += 1;
    }
    if let Some(pipe) = child.stderr.take() {
        let report = confinement.map(|_| Arc::clone(&report_slot));
        spawn_reader(Pipe::Err(pipe), Arc::clone(&stderr), report, tx.clone());
        readers += 1;
    }
    let (after_exit, jobs) = mpsc::channel();
    // Declared before the layer, so dropped after it: the thread is handed to `settle` once
    // this call is done with the command, when all that is left to it is the launcher's exit.
    let _reaper = Reaper(Some(spawn_waiter(child, end, tx, jobs)));
    let mut layer = Deferred { layer, after_exit };

    let mut run = Running {
        rx,
        group,
        readers_left: readers,
        status: None,
        ended: false,
        exited: false,
        // Until the launcher's setsid the group does not exist yet; signal the leader too.
        signal_leader: confinement.is_some(),
    };
    let mut timed_out = false;
    let mut stopped = None;
    let mut wait_error = None;

    let deadline = started + timeout;
    let waited = loop {
        let slice = deadline.min(Instant::now() + STOP_POLL);
        match run.wait_exit(slice) {
            Some(result) => break Some(result),
            None if Instant::now() >= deadline => break None,
            None => {
                if let Some(reason) = stop() {
                    stopped = Some(reason);
                    break None;
                }
            }
        }
    };
    match waited {
        Some(Ok(())) => {}
        Some(Err(e)) => wait_error = Some(e),
        None => {
            timed_out = stopped.is_none();
            run.signal(Signal::TERM);
            let after_term = run.wait_exit(Instant::now() + TERM_GRACE);
            // Always, even if the leader left on TERM: a grandchild may have ignored it.
            run.signal(Signal::KILL);
            let after_kill = match after_term {
                Some(result) => Some(result),
                None => run.wait_exit(Instant::now() + KILL_WAIT),
            };
            if let Some(Err(e)) = after_kill {
                wait_error = Some(e);
            }
        }
    }

    let mut pipes_held_open = false;
    if !run.drain(Instant::now() + DRAIN_TIMEOUT) {
        pipes_held_open = true;
        signal_group(group, Signal::KILL);
        // Killing the group usually closes the pipes at once; wait a moment for the readers to
        // hand over their last bytes, but never for something outside the group.
        run.drain(Instant::now() + TERM_GRACE);
    }
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    // Whatever the command left in its pids cgroup dies with the call. Told early, the command
    // was the init of its own PID namespace: when it ended the kernel ended everything it
    // started, so nothing is left but the launcher, and its cgroup goes once it has exited.
    let leftover_killed = match confinement {
        Some(_) if run.ended && !run.exited => {
            layer.later(Box::new(move || {
                crate::cgroup::release(child_pid);
            }));
            0
        }
        Some(_) => crate::cgroup::release(child_pid),
        None => 0,
    };
    let egress = proxy.map(EgressProxy::finish);

    if let Some(message) = wait_error {
        return Err(ExecError::Wait {
            program: program.clone(),
            message,
        });
    }
    let (exit_code, signal) = match run.status {
        Some(status) => (status.code(), status.signal()),
        None => (None, None),
    };
    // Killed by a signal while a stop was asked for: the person's Ctrl-C on the terminal can
    // reach the launcher itself in the moment before its `setsid` (it starts in Warrant's
    // process group), before the poll above sees the stop. That is the stop, not a crash.
    if stopped.is_none()
        && signal.is_some()
        && let Some(reason) = stop()
    {
        stopped = Some(reason);
    }
    let stdout = take_capture(&stdout);
    let stderr = take_capture(&stderr);
    let sandbox = report_slot
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    if confinement.is_some()
        && sandbox.is_none()
        && exit_code == Some(SANDBOX_FAILED_EXIT)
        && let Some(message) = stderr.text.strip_prefix(FAILURE_PREFIX)
    {
        return Err(ExecError::SandboxFailed {
            program: program.clone(),
            message: message
                .trim()
                .trim_end_matches("; the command was not run")
                .to_owned(),
        });
    }
    let changes = match (layer.layer.as_mut(), confinement) {
        (Some(layer), Some(c)) => {
            let protected =
                crate::judged::relative_names(&c.plan.protected, layer.spec.lower.as_path());
            Some(crate::judged::judge(
                layer,
                &protected,
                &c.plan.denied_names,
                &c.plan.scratch,
                action.by_person(),
            )?)
        }
        _ => None,
    };
    Ok(ExecOutcome {
        exit_code,
        signal,
        timed_out,
        stopped,
        pipes_held_open,
        stdout,
        stderr,
        duration_ms,
        sandbox,
        egress,
        leftover_killed,
        changes,
        judged: (contained && judged == Judging::Argv).then_some(Judging::Argv),
    })
}

/// The write root a contained command's layer covers: the first write root holding `cwd` (the
/// workspace).
fn cwd_workspace<'a>(
    confinement: Option<&'a Confinement>,
    cwd: &'a warrant_core::CanonicalPath,
) -> &'a warrant_core::CanonicalPath {
    confinement
        .and_then(|c| c.plan.write_roots.iter().find(|w| cwd.starts_with(w)))
        .unwrap_or(cwd)
}

/// Event loop state: the channel the waiter and readers report on.
struct Running {
    rx: Receiver<Event>,
    group: Pid,
    readers_left: usize,
    status: Option<ExitStatus>,
    /// The status came from the launcher's end channel (it may still be tearing the view down).
    ended: bool,
    /// The launcher was reaped.
    exited: bool,
    signal_leader: bool,
}

impl Running {
    fn signal(&self, signal: Signal) {
        signal_group(self.group, signal);
        // Only while unreaped: after that the pid may belong to someone else.
        if self.signal_leader && !self.exited {
            let _ = kill_process(self.group, signal);
        }
    }

    /// Wait until the command exits or `deadline` passes (`None`).
    fn wait_exit(&mut self, deadline: Instant) -> Option<Result<(), String>> {
        if self.status.is_some() {
            return Some(Ok(()));
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(Event::Ended(status)) => {
                    self.ended(status);
                    return Some(Ok(()));
                }
                Ok(Event::Exited(Ok(status))) => {
                    self.exited(status);
                    return Some(Ok(()));
                }
                Ok(Event::Exited(Err(e))) => {
                    // Without a status we cannot know the group is gone; make sure it is.
                    signal_group(self.group, Signal::KILL);
                    return Some(Err(e.to_string()));
                }
                Ok(Event::StreamDone) => self.readers_left = self.readers_left.saturating_sub(1),
                Err(RecvTimeoutError::Timeout) => return None,
                // Every sender gone means the waiter ended without reporting, which it never
                // does; treat it as an exit with no status rather than spin.
                Err(RecvTimeoutError::Disconnected) => return Some(Ok(())),
            }
        }
    }

    fn ended(&mut self, status: ExitStatus) {
        if self.status.is_none() {
            self.status = Some(status);
            self.ended = true;
        }
    }

    /// The launcher's own status mirrors its command's; told early, the command's is kept.
    fn exited(&mut self, status: ExitStatus) {
        self.exited = true;
        if !self.ended {
            self.status = Some(status);
        }
    }

    /// Wait until both pipes reached end of file; false when `deadline` passed first.
    fn drain(&mut self, deadline: Instant) -> bool {
        while self.readers_left > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(Event::StreamDone) => self.readers_left -= 1,
                Ok(Event::Ended(status)) => self.ended(status),
                Ok(Event::Exited(Ok(status))) => self.exited(status),
                Ok(Event::Exited(Err(_))) => {}
                Err(RecvTimeoutError::Timeout) => return false,
                Err(RecvTimeoutError::Disconnected) => return true,
            }
        }
        true
    }
}

enum Pipe {
    Out(ChildStdout),
    Err(ChildStderr),
}

impl Read for Pipe {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Self::Out(p) => p.read(buf),
            Self::Err(p) => p.read(buf),
        }
    }
}

/// Longest first line searched for the launcher's report before giving up on it.
const REPORT_MAX: usize = 64 * 1024;

/// With `report`, the first line of the stream is the launcher's report when it carries
/// [`REPORT_PREFIX`]: it is parsed into `report` and kept out of the capture.
fn spawn_reader(
    mut pipe: Pipe,
    sink: Arc<Mutex<HeadTail>>,
    report: Option<Arc<Mutex<Option<SandboxReport>>>>,
    tx: Sender<Event>,
) {
    thread::spawn(move || {
        let mut buf = vec![0u8; CHUNK];
        let mut first_line: Option<Vec<u8>> = report.as_ref().map(|_| Vec::new());
        let push = |data: &[u8]| {
            sink.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(data);
        };
        loop {
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => match first_line.as_mut() {
                    None => push(&buf[..n]),
                    Some(pending) => {
                        pending.extend_from_slice(&buf[..n]);
                        if let Some(end) = pending.iter().position(|b| *b == b'\n') {
                            let line = &pending[..end];
                            let parsed =
                                line.strip_prefix(REPORT_PREFIX.as_bytes())
                                    .and_then(|json| {
                                        serde_json::from_slice::<SandboxReport>(json).ok()
                                    });
                            match (parsed, &report) {
                                (Some(parsed), Some(slot)) => {
                                    *slot.lock().unwrap_or_else(PoisonError::into_inner) =
                                        Some(parsed);
                                    push(&pending[end + 1..]);
                                }
                                (Some(_) | None, _) => push(pending),
                            }
                            first_line = None;
                        } else if pending.len() > REPORT_MAX {
                            push(pending);
                            first_line = None;
                        }
                    }
                },
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        if let Some(pending) = first_line {
            push(&pending);
        }
        // The receiver may be gone if the run gave up on this pipe; nothing to do then.
        let _ = tx.send(Event::StreamDone);
    });
}

/// Reaps the child. With an end channel, first passes on the command's end as the launcher told
/// it; after the child's exit, does what waited for it (`jobs`, until their sender is gone).
fn spawn_waiter(
    mut child: Child,
    end: Option<std::io::PipeReader>,
    tx: Sender<Event>,
    jobs: Receiver<AfterExit>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        if let Some(status) = end.and_then(read_end) {
            let _ = tx.send(Event::Ended(status));
        }
        let status = child.wait();
        let _ = tx.send(Event::Exited(status));
        drop(tx);
        for job in jobs {
            job();
        }
    })
}

/// The command's end as the launcher told it on its end channel: the wait status of the
/// command's first process, one decimal line, written once that process was reaped (and with it,
/// as the init of its PID namespace, everything the command started). `None` when the channel
/// closed without one: the launcher ran the command itself, failed or was killed.
fn read_end(mut end: std::io::PipeReader) -> Option<ExitStatus> {
    let mut line = Vec::new();
    let mut buf = [0u8; 32];
    while !line.contains(&b'\n') && line.len() < buf.len() {
        match end.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => line.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    let text = std::str::from_utf8(line.strip_suffix(b"\n")?).ok()?;
    text.parse::<i32>().ok().map(ExitStatus::from_raw)
}

/// Take what a reader captured so far. A reader still blocked on a pipe held by a process
/// outside the group keeps writing into the fresh buffer left behind, which nobody reads.
fn take_capture(sink: &Arc<Mutex<HeadTail>>) -> CapturedStream {
    let mut guard = sink.lock().unwrap_or_else(PoisonError::into_inner);
    std::mem::take(&mut *guard).finish()
}

/// Signal the whole group; "no such process" just means everyone already left.
fn signal_group(group: Pid, signal: Signal) {
    let _ = kill_process_group(group, signal);
}

pub(crate) fn spawn_message(e: &std::io::Error) -> String {
    // `ErrorKind` is open-ended (std adds kinds), so compare rather than match it.
    let kind = e.kind();
    if kind == std::io::ErrorKind::NotFound {
        "no such program; check the name and the PATH the profile passes".to_owned()
    } else if kind == std::io::ErrorKind::PermissionDenied {
        "permission denied; the program is not executable by this user".to_owned()
    } else {
        e.to_string()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn running() -> (Sender<Event>, Running) {
        let (tx, rx) = mpsc::channel();
        let run = Running {
            rx,
            group: Pid::from_raw(i32::MAX).unwrap(),
            readers_left: 0,
            status: None,
            ended: false,
            exited: false,
            signal_leader: false,
        };
        (tx, run)
    }

    /// Told early, the command's status stands when the launcher's own exit follows (it mirrors
    /// the command's, or says 128 + signal where it could not die of the same signal).
    #[test]
    fn the_end_told_early_is_kept_over_the_launchers_exit() {
        let (tx, mut run) = running();
        run.readers_left = 1;
        tx.send(Event::Ended(ExitStatus::from_raw(9))).unwrap();
        tx.send(Event::Exited(Ok(ExitStatus::from_raw(137 << 8))))
            .unwrap();
        tx.send(Event::StreamDone).unwrap();
        assert!(
            run.wait_exit(Instant::now() + Duration::from_secs(5))
                .is_some()
        );
        assert!(run.ended && !run.exited);
        assert!(run.drain(Instant::now() + Duration::from_secs(5)));
        assert!(run.exited);
        assert_eq!(run.status.and_then(|s| s.signal()), Some(9));
        // Not told: the launcher's status is the command's.
        let (tx, mut run) = running();
        tx.send(Event::Exited(Ok(ExitStatus::from_raw(3 << 8))))
            .unwrap();
        run.wait_exit(Instant::now() + Duration::from_secs(5));
        assert_eq!(run.status.and_then(|s| s.code()), Some(3));
    }

    #[test]
    fn the_end_channel_carries_one_wait_status() {
        let told = |bytes: &[u8]| {
            let (read, mut write) = std::io::pipe().unwrap();
            std::io::Write::write_all(&mut write, bytes).unwrap();
            drop(write);
            read_end(read)
        };
        assert_eq!(told(b"768\n").and_then(|s| s.code()), Some(3));
        assert_eq!(told(b"15\n").and_then(|s| s.signal()), Some(15));
        // Cut, empty, or not a status: not told (the launcher's own exit decides).
        assert_eq!(told(b"768"), None);
        assert_eq!(told(b""), None);
        assert_eq!(told(b"zero\n"), None);
    }
}
