use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use warrant_core::config::ProfileConfig;
use warrant_core::{Action, CanonicalPath, Coded};
use warrant_exec::{CapturedStream, ExecError, ExecOutcome, run_command, run_command_until};

use super::{authorized, tempdir};

fn shell(cwd: &CanonicalPath, argv: &[&str], timeout_ms: u64) -> Action {
    Action::ShellExec {
        argv: argv.iter().map(|s| (*s).to_owned()).collect(),
        cwd: cwd.clone(),
        profile: "test".into(),
        timeout_ms,
        program: None,
        contained: false,
        judged: warrant_core::Judging::Changeset,
    }
}

fn parent_env() -> Vec<(String, String)> {
    vec![
        ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
        ("HOME".into(), "/nonexistent-home".into()),
        ("AWS_SECRET_ACCESS_KEY".into(), "wJalrXUtnFEMI".into()),
        ("GITHUB_TOKEN".into(), "ghp_abc".into()),
        ("EDITOR".into(), "vi".into()),
    ]
}

fn run(action: Action) -> Result<ExecOutcome, ExecError> {
    run_command(
        &authorized(action),
        &ProfileConfig::default(),
        &parent_env(),
    )
}

fn text(s: &str) -> CapturedStream {
    CapturedStream {
        text: s.into(),
        total_bytes: s.len() as u64,
        omitted_bytes: 0,
    }
}

/// True once `pid` is gone or a zombie (killed, waiting to be reaped by init).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
    }
}

fn wait_gone(pid: u32) -> bool {
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        if gone(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn echo_and_exit_codes() {
    let (_d, cwd) = tempdir();
    let mut out = run(shell(
        &cwd,
        &["sh", "-c", "echo hi; echo err >&2; pwd"],
        10_000,
    ))
    .unwrap();
    assert!(out.duration_ms < 10_000);
    out.duration_ms = 0;
    assert_eq!(
        out,
        ExecOutcome {
            exit_code: Some(0),
            signal: None,
            timed_out: false,
            stopped: None,
            pipes_held_open: false,
            stdout: text(&format!("hi\n{cwd}\n")),
            stderr: text("err\n"),
            duration_ms: 0,
            sandbox: None,
            egress: None,
            leftover_killed: 0,
            changes: None,
            judged: None,
        }
    );
    let out = run(shell(&cwd, &["sh", "-c", "exit 3"], 10_000)).unwrap();
    assert_eq!((out.exit_code, out.signal), (Some(3), None));
    let out = run(shell(&cwd, &["sh", "-c", "kill -9 $$"], 10_000)).unwrap();
    assert_eq!((out.exit_code, out.signal), (None, Some(9)));
}

#[test]
fn environment_is_minimized() {
    let (_d, cwd) = tempdir();
    let out = run(shell(&cwd, &["env"], 10_000)).unwrap();
    let mut names: Vec<&str> = out
        .stdout
        .text
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    names.sort_unstable();
    // `env` may not add anything of its own; the shell is not involved here.
    // The one variable of Warrant's own: the mark of a command (no command may answer a request).
    assert_eq!(names, vec!["HOME", "PATH", "WARRANT_COMMAND"]);
    assert!(!out.stdout.text.contains("wJalrXUtnFEMI"));
    assert!(!out.stdout.text.contains("ghp_abc"));
}

#[test]
fn missing_program_is_a_spawn_error() {
    let (_d, cwd) = tempdir();
    let err = run(shell(&cwd, &["warrant-no-such-program-xyz"], 10_000)).unwrap_err();
    assert_eq!(
        err,
        ExecError::Spawn {
            program: "warrant-no-such-program-xyz".into(),
            message: "no such program; check the name and the PATH the profile passes".into(),
        }
    );
    assert_eq!(err.code(), "W-EXEC-008");
    assert_eq!(
        run(shell(&cwd, &[], 10_000)).unwrap_err(),
        ExecError::EmptyArgv
    );
}

#[test]
fn a_bad_profile_is_an_error() {
    let (_d, cwd) = tempdir();
    let leaky = ProfileConfig {
        pass_env: vec!["GITHUB_TOKEN".into()],
        ..ProfileConfig::default()
    };
    let err = run_command(
        &authorized(shell(&cwd, &["env"], 10_000)),
        &leaky,
        &parent_env(),
    )
    .unwrap_err();
    assert_eq!(err.code(), "W-EXEC-002");
}

#[test]
fn timeout_kills_the_whole_group_including_grandchildren() {
    let (_d, cwd) = tempdir();
    let started = Instant::now();
    let out = run(shell(&cwd, &["sh", "-c", "sleep 1000"], 300)).unwrap();
    assert!(out.timed_out);
    assert_eq!(out.exit_code, None);
    assert!(matches!(out.signal, Some(15 | 9)), "{out:?}");
    assert!(started.elapsed() < Duration::from_secs(10));

    // The grandchild prints its pid, then the shell waits on its own sleep.
    let started = Instant::now();
    let out = run(shell(
        &cwd,
        &["sh", "-c", "sleep 1000 & echo $!; sleep 1000"],
        2_000,
    ))
    .unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(out.timed_out, "{out:?}");
    let pid: u32 = out.stdout.text.trim().parse().unwrap();
    assert!(wait_gone(pid), "grandchild {pid} survived the timeout");

    // A group that ignores TERM (the ignored disposition is inherited by `sleep`) gets KILL.
    let started = Instant::now();
    let out = run(shell(&cwd, &["sh", "-c", "trap '' TERM; sleep 1000"], 300)).unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(
        (out.timed_out, out.exit_code, out.signal),
        (true, None, Some(9))
    );
}

#[test]
fn a_stop_request_kills_the_group_and_says_why() {
    let (_d, cwd) = tempdir();
    let asked = Instant::now();
    let stop =
        || (asked.elapsed() > Duration::from_millis(300)).then(|| "cancelled by ana".to_owned());
    let out = run_command_until(
        &authorized(shell(
            &cwd,
            &["sh", "-c", "sleep 1000 & echo $!; sleep 1000"],
            60_000,
        )),
        &ProfileConfig::default(),
        &parent_env(),
        &stop,
    )
    .unwrap();
    assert!(asked.elapsed() < Duration::from_secs(10));
    assert_eq!(
        (out.timed_out, out.stopped.as_deref()),
        (false, Some("cancelled by ana"))
    );
    let pid: u32 = out.stdout.text.trim().parse().unwrap();
    assert!(wait_gone(pid), "grandchild {pid} survived the stop");
    // Control: without a stop request the same command runs until its timeout.
    let out = run(shell(&cwd, &["sh", "-c", "sleep 1000"], 700)).unwrap();
    assert_eq!((out.timed_out, out.stopped), (true, None));
}

/// A command killed by a signal the person's Ctrl-C sent it directly (the terminal signals its
/// foreground group, which the launcher is in until its `setsid`) before the poll saw the stop:
/// the outcome says it was stopped, for the reason the stop gives. Control: the same death
/// with no stop asked for is the command's own (no `stopped`).
#[test]
fn a_signal_death_while_a_stop_is_asked_is_the_stop() {
    let (_d, cwd) = tempdir();
    let argv = ["sh", "-c", "kill -INT $$; sleep 5"];
    // The shell signals itself at once, well before the first poll (STOP_POLL) asks.
    let stop = || Some("stopped by the person (Ctrl-C)".to_owned());
    let out = run_command_until(
        &authorized(shell(&cwd, &argv, 60_000)),
        &ProfileConfig::default(),
        &parent_env(),
        &stop,
    )
    .unwrap();
    assert!(out.signal.is_some(), "{out:?}");
    assert_eq!(
        out.stopped.as_deref(),
        Some("stopped by the person (Ctrl-C)")
    );
    let out = run(shell(&cwd, &argv, 60_000)).unwrap();
    assert_eq!((out.signal, out.stopped), (Some(2), None));
}

#[test]
fn grandchild_holding_the_pipes_does_not_hang_the_run() {
    let (_d, cwd) = tempdir();
    let started = Instant::now();
    let out = run(shell(
        &cwd,
        &["sh", "-c", "(sleep 30 & echo $! >&2) ; echo done"],
        20_000,
    ))
    .unwrap();
    assert!(started.elapsed() < Duration::from_secs(10), "hung");
    assert_eq!(out.stdout, text("done\n"));
    assert_eq!(
        (out.exit_code, out.timed_out, out.pipes_held_open),
        (Some(0), false, true)
    );
    let pid: u32 = out.stderr.text.trim().parse().unwrap();
    assert!(wait_gone(pid), "pipe holder {pid} was left running");
}

#[test]
fn output_is_capped_while_streaming() {
    let (_d, cwd) = tempdir();
    let profile = ProfileConfig {
        output_head_bytes: 1000,
        output_tail_bytes: 500,
        ..ProfileConfig::default()
    };
    let out = run_command(
        &authorized(shell(
            &cwd,
            &[
                "sh",
                "-c",
                "head -c 10000000 /dev/zero | tr '\\0' a; echo end",
            ],
            60_000,
        )),
        &profile,
        &parent_env(),
    )
    .unwrap();
    assert_eq!(out.exit_code, Some(0));
    let want = format!(
        "{}\n[… 9998504 bytes omitted …]\n{}end\n",
        "a".repeat(1000),
        "a".repeat(496)
    );
    assert_eq!(
        out.stdout,
        CapturedStream {
            text: want,
            total_bytes: 10_000_004,
            omitted_bytes: 9_998_504,
        }
    );
}

#[test]
fn outcome_round_trips_through_json() {
    let (_d, cwd) = tempdir();
    let out = run(shell(&cwd, &["echo", "x"], 10_000)).unwrap();
    let json = serde_json::to_string(&out).unwrap();
    let back: ExecOutcome = serde_json::from_str(&json).unwrap();
    assert_eq!(back, out);
}
