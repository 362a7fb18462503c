//! A long-lived child: a program that stays up and is talked to over its standard input and
//! output (an MCP stdio server), started under a subprocess profile and supervised. It runs
//! confined like the agent's commands (the profile's sandbox through the launcher, the
//! profile's minimized environment, a process group of its own, the egress proxy for an
//! allowlist while it lives); its standard error is captured head-and-tail for messages; it is
//! stopped with its whole group (TERM, a grace, then KILL) when asked or when dropped, so it can
//! never outlive the run or the operation that started it.
//!
//! What starts one is the operator's configuration (a configured server command) or a person's
//! own command (`requests connect`), never an argv the agent chose; what is sent to it from a
//! run goes through the ring as its own action.

use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process, kill_process_group};
use warrant_core::CanonicalPath;
use warrant_core::config::ProfileConfig;

use crate::egress::{Allowlist, EgressProxy};
use crate::error::ExecError;
use crate::output::{CapturedStream, HeadTail};
use crate::sandbox::{Launcher, SandboxPlan};

/// What to start, and under which profile.
#[derive(Clone, Debug)]
pub struct ChildSpec<'a> {
    pub argv: &'a [String],
    pub cwd: &'a CanonicalPath,
    pub profile_name: &'a str,
    pub profile: &'a ProfileConfig,
    /// The environment of Warrant's own process; only what the profile lets through reaches
    /// the child.
    pub parent_env: Vec<(String, String)>,
}

/// How a supervised child ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ended {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// Whether it was stopped by its supervisor (rather than exiting on its own).
    pub stopped: bool,
    /// Its standard error, head and tail.
    pub stderr: CapturedStream,
}

/// A running child. Its standard input and output are taken once by the client that talks to
/// it; everything else stays with the supervisor.
#[derive(Debug)]
pub struct Supervised {
    program: String,
    child: Child,
    group: Pid,
    /// Under the launcher the group exists only after its `setsid`: signal the leader too.
    signal_leader: bool,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    stderr: Arc<Mutex<HeadTail>>,
    stderr_done: mpsc::Receiver<()>,
    _proxy: Option<EgressProxy>,
    ended: Option<Ended>,
}

/// After TERM, how long the group gets before KILL.
pub const STOP_GRACE: Duration = Duration::from_millis(500);

impl Supervised {
    /// Starts `spec` under its profile: confined by the profile's sandbox when it has one (the
    /// plan applied by `launcher`, which must then be given), else in a process group of its own.
    pub fn start(spec: &ChildSpec<'_>, launcher: Option<&Launcher>) -> Result<Self, ExecError> {
        let (program, args) = spec.argv.split_first().ok_or(ExecError::EmptyArgv)?;
        crate::env::validate_profile(spec.profile_name, spec.profile)?;
        let failed = |message: String| ExecError::SandboxFailed {
            program: program.clone(),
            message,
        };
        let plan = SandboxPlan::from_profile(
            spec.profile_name,
            spec.profile,
            spec.cwd,
            &crate::fs::OsLinks,
        )?;
        let mut proxy = None;
        // Under the launcher the group exists only after its `setsid`.
        let signal_leader = plan.is_some();
        let mut command = match plan {
            Some(mut plan) => {
                let launcher = launcher.ok_or_else(|| {
                    failed(format!(
                        "profile `{}` has a sandbox but no launcher was given (a wiring bug)",
                        spec.profile_name
                    ))
                })?;
                if let warrant_core::config::NetworkPolicy::Allow(list) = &plan.network {
                    let allow = Allowlist::parse(list)
                        .map_err(|e| failed(format!("network allowlist: {e}")))?;
                    let started = EgressProxy::start(allow)
                        .map_err(|e| failed(format!("cannot start the egress proxy: {e}")))?;
                    plan.egress_socket = Some(started.socket().to_path_buf());
                    proxy = Some(started);
                }
                let mut c = Command::new(&launcher.program);
                c.args(launcher.args(&plan, spec.argv)?);
                c
            }
            None => {
                let mut c = Command::new(program);
                c.args(args).process_group(0);
                c
            }
        };
        let env = crate::env::minimize_env(spec.profile, spec.parent_env.iter().cloned());
        let mut child = command
            .current_dir(spec.cwd.as_path())
            .env_clear()
            .envs(env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| ExecError::Spawn {
                program: program.clone(),
                message: crate::spawn::spawn_message(&e),
            })?;
        let stderr = Arc::new(Mutex::new(HeadTail::new(
            spec.profile.output_head_bytes,
            spec.profile.output_tail_bytes,
        )));
        let (done_tx, stderr_done) = mpsc::channel();
        if let Some(mut pipe) = child.stderr.take() {
            let sink = Arc::clone(&stderr);
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = std::io::Read::read(&mut pipe, &mut buf) {
                    sink.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(&buf[..n]);
                }
                let _ = done_tx.send(());
            });
        }
        Ok(Self {
            program: program.clone(),
            group: Pid::from_child(&child),
            signal_leader,
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            child,
            stderr,
            stderr_done,
            _proxy: proxy,
            ended: None,
        })
    }

    pub fn program(&self) -> &str {
        &self.program
    }

    /// The child's standard input and output, for the client that talks to it (once).
    pub fn take_io(&mut self) -> Option<(ChildStdin, ChildStdout)> {
        Some((self.stdin.take()?, self.stdout.take()?))
    }

    /// `None` while it runs; how it ended once it has.
    pub fn poll(&mut self) -> Option<&Ended> {
        if self.ended.is_none()
            && let Ok(Some(status)) = self.child.try_wait()
        {
            self.finish(status, false);
        }
        self.ended.as_ref()
    }

    /// Stops the child and everything it started: TERM to its group, `grace` to leave, then
    /// KILL. Returns how it ended (at once if it had already).
    pub fn stop(&mut self, grace: Duration) -> Ended {
        let running = self.poll().is_none();
        let mut status = None;
        if running {
            self.signal(Signal::TERM);
            let deadline = Instant::now() + grace;
            status = loop {
                match self.child.try_wait() {
                    Ok(Some(status)) => break Some(status),
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    Ok(None) | Err(_) => break None,
                }
            };
        }
        // Always, even if the leader left (on TERM or long before): what it started may still
        // be running in its group.
        self.signal(Signal::KILL);
        if running {
            // SIGKILL (9) as the status if even waiting failed: it was sent.
            let status = status
                .or_else(|| self.child.wait().ok())
                .unwrap_or_else(|| ExitStatus::from_raw(9));
            self.finish(status, true);
        }
        match &self.ended {
            Some(ended) => ended.clone(),
            None => unreachable_ended(),
        }
    }

    fn signal(&self, signal: Signal) {
        let _ = kill_process_group(self.group, signal);
        if self.signal_leader {
            let _ = kill_process(self.group, signal);
        }
    }

    fn finish(&mut self, status: ExitStatus, stopped: bool) {
        // Its stderr closes with it (or with the last of its group): give the reader a moment.
        let _ = self.stderr_done.recv_timeout(STOP_GRACE);
        let stderr =
            std::mem::take(&mut *self.stderr.lock().unwrap_or_else(PoisonError::into_inner))
                .finish();
        self.ended = Some(Ended {
            exit_code: status.code(),
            signal: status.signal(),
            stopped,
            stderr,
        });
    }
}

/// `finish` always records how it ended; this is only the type's answer if it did not.
fn unreachable_ended() -> Ended {
    Ended {
        exit_code: None,
        signal: Some(9),
        stopped: true,
        stderr: HeadTail::new(0, 0).finish(),
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        self.stop(STOP_GRACE);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::io::{BufRead as _, BufReader, Write as _};

    use super::*;

    /// Processes of group `pgid` that are not zombies, read from `/proc/<pid>/stat`.
    fn live_in_group(pgid: i32) -> usize {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("stat")).ok())
            .filter(|stat| {
                // pid (comm) state ppid pgrp …; comm may hold spaces, so split after ')'.
                let Some((_, rest)) = stat.rsplit_once(") ") else {
                    return false;
                };
                let fields: Vec<&str> = rest.split(' ').collect();
                fields.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(pgid)
                    && fields.first() != Some(&"Z")
            })
            .count()
    }

    fn workspace() -> (tempfile::TempDir, CanonicalPath) {
        let dir = tempfile::tempdir().unwrap();
        let path =
            CanonicalPath::from_normalized(dir.path().canonicalize().unwrap().to_str().unwrap())
                .unwrap();
        (dir, path)
    }

    fn unconfined() -> ProfileConfig {
        ProfileConfig {
            sandbox: None,
            unconfined: true,
            ..ProfileConfig::default()
        }
    }

    fn spec<'a>(
        argv: &'a [String],
        cwd: &'a CanonicalPath,
        profile_name: &'a str,
        profile: &'a ProfileConfig,
        parent_env: Vec<(String, String)>,
    ) -> ChildSpec<'a> {
        ChildSpec {
            argv,
            cwd,
            profile_name,
            profile,
            parent_env,
        }
    }

    fn argv(script: &str) -> Vec<String> {
        vec!["/bin/sh".into(), "-c".into(), script.into()]
    }

    #[test]
    fn a_child_is_talked_to_over_stdio_and_stopped_with_its_group() {
        let (_dir, ws) = workspace();
        let profile = unconfined();
        // An echo server that also leaves a grandchild running: stopping must reach it.
        let argv = argv("sleep 600 & while read l; do echo \"got $l\"; done");
        let spec = spec(
            &argv,
            &ws,
            "test",
            &profile,
            vec![("PATH".into(), "/usr/bin:/bin".into())],
        );
        let mut child = Supervised::start(&spec, None).unwrap();
        let (mut stdin, stdout) = child.take_io().unwrap();
        writeln!(stdin, "ping").unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        assert_eq!(line, "got ping\n");
        assert!(child.poll().is_none(), "it stays up between requests");
        let group = child.group;
        let ended = child.stop(Duration::from_millis(200));
        assert!(ended.stopped);
        // Nothing of its group is left alive (a zombie waiting for its reaper is dead).
        let gone = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            live_in_group(group.as_raw_nonzero().get()) == 0
        });
        assert!(gone, "the sleeping grandchild was stopped with the group");
    }

    #[test]
    fn what_a_child_started_is_stopped_even_after_the_child_itself_exited() {
        let (_dir, ws) = workspace();
        let profile = unconfined();
        let argv = argv("sleep 600 & exit 0");
        let spec = spec(
            &argv,
            &ws,
            "test",
            &profile,
            vec![("PATH".into(), "/usr/bin:/bin".into())],
        );
        let mut child = Supervised::start(&spec, None).unwrap();
        let pgid = child.group.as_raw_nonzero().get();
        while child.poll().is_none() {
            std::thread::sleep(Duration::from_millis(10));
        }
        // The attack without the guard: the child has exited, its grandchild lives on.
        assert_eq!(live_in_group(pgid), 1, "the grandchild outlives its parent");
        let ended = child.stop(STOP_GRACE);
        assert!(!ended.stopped, "it had exited on its own");
        let gone = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            live_in_group(pgid) == 0
        });
        assert!(gone, "stop reaches the group after the leader is gone");
    }

    #[test]
    fn a_child_that_exits_says_how_and_what_it_wrote_to_stderr() {
        let (_dir, ws) = workspace();
        let profile = unconfined();
        let argv = argv("echo 'cannot start: no config' >&2; exit 3");
        let spec = spec(&argv, &ws, "test", &profile, Vec::new());
        let mut child = Supervised::start(&spec, None).unwrap();
        let ended = loop {
            if let Some(e) = child.poll() {
                break e.clone();
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!((ended.exit_code, ended.stopped), (Some(3), false));
        assert!(
            ended.stderr.text.contains("no config"),
            "{:?}",
            ended.stderr
        );
    }

    #[test]
    fn the_environment_is_the_profiles_not_warrants() {
        let (_dir, ws) = workspace();
        let profile = unconfined();
        let argv = argv("echo \"key=${OPENAI_API_KEY:-none}\"");
        let spec = spec(
            &argv,
            &ws,
            "test",
            &profile,
            vec![("OPENAI_API_KEY".into(), "sk-test-secret".into())],
        );
        let mut child = Supervised::start(&spec, None).unwrap();
        let (_stdin, stdout) = child.take_io().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        assert_eq!(line, "key=none\n");
    }

    #[test]
    fn a_sandboxed_profile_without_a_launcher_is_refused_not_run_bare() {
        let (_dir, ws) = workspace();
        let profile = ProfileConfig {
            sandbox: Some(warrant_core::config::SandboxConfig::default()),
            ..ProfileConfig::default()
        };
        let argv = argv("true");
        let spec = spec(&argv, &ws, "default", &profile, Vec::new());
        let err = Supervised::start(&spec, None).unwrap_err();
        assert!(matches!(err, ExecError::SandboxFailed { .. }), "{err}");
    }
}
