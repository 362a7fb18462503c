//! Runs an authorized `shell.exec` action: minimized environment, its own process group, stdin
//! closed, bounded output, and a timeout that kills the whole group (TERM, grace, KILL). It does
//! not sandbox (no Landlock/seccomp/namespaces yet) and does not apply rlimits.

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, ChildStderr, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process_group};
use serde::{Deserialize, Serialize};
use warrant_core::Action;
use warrant_core::config::ProfileConfig;
use warrant_kernel::Authorized;

use crate::env::{minimize_env, validate_profile};
use crate::error::ExecError;
use crate::fs::recheck;
use crate::output::{CapturedStream, HeadTail};

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
}

enum Event {
    Exited(std::io::Result<ExitStatus>),
    StreamDone,
}

/// Run the `shell.exec` action under `profile`. `parent_env` is Warrant's own environment;
/// only what [`minimize_env`] lets through reaches the command.
pub fn run_command(
    action: &Authorized<Action>,
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
    action: &Authorized<Action>,
    profile: &ProfileConfig,
    parent_env: &[(String, String)],
    stop: &dyn Fn() -> Option<String>,
) -> Result<ExecOutcome, ExecError> {
    let (argv, cwd, profile_name, timeout_ms) = match action.get() {
        Action::ShellExec {
            argv,
            cwd,
            profile,
            timeout_ms,
        } => (argv, cwd, profile, *timeout_ms),
        other @ (Action::FsRead { .. }
        | Action::FsList { .. }
        | Action::FsSearch { .. }
        | Action::FsWrite { .. }
        | Action::FsCreate { .. }
        | Action::FsDelete { .. }) => {
            return Err(ExecError::WrongAction {
                executor: "run_command",
                verb: other.verb(),
            });
        }
    };
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

    let env = minimize_env(profile, parent_env.iter().cloned());
    let started = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .env_clear()
        .envs(env)
        .current_dir(cwd.as_path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // A group of its own, so a timeout reaches everything the command started.
        .process_group(0)
        .spawn()
        .map_err(|e| ExecError::Spawn {
            program: program.clone(),
            message: spawn_message(&e),
        })?;
    let group = Pid::from_child(&child);

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
        spawn_reader(Pipe::Out(pipe), Arc::clone(&stdout), tx.clone());
        readers += 1;
    }
    if let Some(pipe) = child.stderr.take() {
        spawn_reader(Pipe::Err(pipe), Arc::clone(&stderr), tx.clone());
        readers += 1;
    }
    spawn_waiter(child, tx);

    let mut run = Running {
        rx,
        group,
        readers_left: readers,
        status: None,
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
            signal_group(group, Signal::TERM);
            let after_term = run.wait_exit(Instant::now() + TERM_GRACE);
            // Always, even if the leader left on TERM: a grandchild may have ignored it.
            signal_group(group, Signal::KILL);
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
    Ok(ExecOutcome {
        exit_code,
        signal,
        timed_out,
        stopped,
        pipes_held_open,
        stdout: take_capture(&stdout),
        stderr: take_capture(&stderr),
        duration_ms,
    })
}

/// Event loop state: the channel the waiter and readers report on.
struct Running {
    rx: Receiver<Event>,
    group: Pid,
    readers_left: usize,
    status: Option<ExitStatus>,
}

impl Running {
    /// Wait until the command exits or `deadline` passes (`None`).
    fn wait_exit(&mut self, deadline: Instant) -> Option<Result<(), String>> {
        if self.status.is_some() {
            return Some(Ok(()));
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(Event::Exited(Ok(status))) => {
                    self.status = Some(status);
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

    /// Wait until both pipes reached end of file; false when `deadline` passed first.
    fn drain(&mut self, deadline: Instant) -> bool {
        while self.readers_left > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(Event::StreamDone) => self.readers_left -= 1,
                Ok(Event::Exited(Ok(status))) => self.status = Some(status),
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

fn spawn_reader(mut pipe: Pipe, sink: Arc<Mutex<HeadTail>>, tx: Sender<Event>) {
    thread::spawn(move || {
        let mut buf = vec![0u8; CHUNK];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => sink
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        // The receiver may be gone if the run gave up on this pipe; nothing to do then.
        let _ = tx.send(Event::StreamDone);
    });
}

fn spawn_waiter(mut child: Child, tx: Sender<Event>) {
    thread::spawn(move || {
        let status = child.wait();
        let _ = tx.send(Event::Exited(status));
    });
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

fn spawn_message(e: &std::io::Error) -> String {
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
