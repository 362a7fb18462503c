//! Adversarial tests of the OS sandbox. Each attack first runs with the sandbox switched off by
//! configuration (the negative control: it must succeed), then with it on (it must fail, and the
//! outcome must say what was in force).

use std::net::TcpListener;
use std::path::Path;

use pretty_assertions::assert_eq;
use warrant_core::config::{
    Enforcement, NetworkPolicy, ProfileConfig, ResourceLimits, SandboxConfig,
};
use warrant_core::{Action, CanonicalPath, Coded};
use warrant_exec::fs::OsLinks;
use warrant_exec::{
    Confinement, ExecError, ExecOutcome, Launcher, Mechanism, SandboxPlan, SandboxReport,
    run_command_confined,
};

use super::{authorized, tempdir};

const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

fn profile(sandbox: Option<SandboxConfig>) -> ProfileConfig {
    ProfileConfig {
        sandbox,
        ..ProfileConfig::default()
    }
}

fn launcher() -> Launcher {
    Launcher {
        program: env!("CARGO_BIN_EXE_warrant-sandbox").into(),
        prefix_args: Vec::new(),
    }
}

/// Run `argv` in `ws` under `config` (None: no sandbox), with an optional test knob.
fn run_in(
    ws: &CanonicalPath,
    config: Option<SandboxConfig>,
    simulate: Option<Mechanism>,
    argv: &[&str],
) -> Result<ExecOutcome, ExecError> {
    let profile = profile(config);
    let plan = SandboxPlan::from_profile("test", &profile, ws, &OsLinks).unwrap();
    let confinement = plan.map(|mut plan| {
        plan.simulate_unavailable = simulate;
        Confinement {
            plan,
            launcher: launcher(),
        }
    });
    let action = Action::ShellExec {
        argv: argv.iter().map(|s| (*s).to_owned()).collect(),
        cwd: ws.clone(),
        profile: "test".into(),
        timeout_ms: 20_000,
    };
    run_command_confined(
        &authorized(action),
        &profile,
        &[("PATH".into(), PATH.into())],
        &|| None,
        confinement.as_ref(),
    )
}

fn sh(ws: &CanonicalPath, config: Option<SandboxConfig>, script: &str) -> ExecOutcome {
    run_in(ws, config, None, &["sh", "-c", script]).unwrap()
}

fn full_report() -> SandboxReport {
    SandboxReport {
        enforcement: Enforcement::Required,
        applied: vec![
            Mechanism::Session,
            Mechanism::NoNewPrivs,
            Mechanism::Landlock,
            Mechanism::Seccomp,
        ],
        not_applied: Vec::new(),
        landlock_abi: 0,
    }
}

fn on() -> Option<SandboxConfig> {
    Some(SandboxConfig::default())
}

#[test]
fn confined_command_runs_and_reports_what_was_in_force() {
    let (_d, ws) = tempdir();
    std::fs::create_dir(format!("{ws}/src")).unwrap();
    std::fs::write(format!("{ws}/notes.txt"), "old").unwrap();
    let out = sh(
        &ws,
        on(),
        "echo hi > src/out.txt; cat src/out.txt; echo new > notes.txt; cat notes.txt; ls; echo err >&2",
    );
    assert_eq!(
        (
            out.exit_code,
            out.stdout.text.as_str(),
            out.stderr.text.as_str()
        ),
        (Some(0), "hi\nnew\nnotes.txt\nsrc\n", "err\n")
    );
    let abi = out.sandbox.as_ref().map_or(0, |r| r.landlock_abi);
    assert!(
        abi >= 6,
        "this machine's kernel offers Landlock ABI 6 or later"
    );
    assert_eq!(
        out.sandbox,
        Some(SandboxReport {
            landlock_abi: abi,
            ..full_report()
        })
    );
    // The documented limit: with protected names in the root, a new top-level entry cannot be
    // created (Landlock grants per existing entry).
    let out = sh(&ws, on(), "echo x > top.txt");
    assert!(out.stderr.text.contains("Permission denied"), "{out:?}");
}

#[test]
fn write_outside_the_write_roots() {
    let (_d, ws) = tempdir();
    let (_o, outside) = tempdir();
    let target = format!("{outside}/pwned");
    let script = format!("echo x > {target}");
    assert_eq!(sh(&ws, None, &script).exit_code, Some(0));
    std::fs::remove_file(&target).unwrap();
    let out = sh(&ws, on(), &script);
    assert_ne!(out.exit_code, Some(0));
    assert!(out.stderr.text.contains("Permission denied"), "{out:?}");
    assert!(!Path::new(&target).exists());
}

#[test]
fn write_into_git_hooks() {
    let (_d, ws) = tempdir();
    std::fs::create_dir_all(format!("{ws}/.git/hooks")).unwrap();
    std::fs::create_dir_all(format!("{ws}/src")).unwrap();
    let hook = format!("{ws}/.git/hooks/pre-commit");
    let script = "echo evil > .git/hooks/pre-commit";
    assert_eq!(sh(&ws, None, script).exit_code, Some(0));
    std::fs::remove_file(&hook).unwrap();
    let out = sh(
        &ws,
        on(),
        &format!("{script}; echo ok > src/a.txt; cat .git/hooks/../../src/a.txt"),
    );
    assert!(!Path::new(&hook).exists(), "{out:?}");
    assert!(out.stderr.text.contains("Permission denied"), "{out:?}");
    // Existing subdirectories of the workspace stay writable, .git stays readable.
    assert_eq!(out.stdout.text, "ok\n");
    assert_eq!(sh(&ws, on(), "ls .git").stdout.text, "hooks\n");
}

#[test]
fn read_outside_the_read_roots() {
    let (_d, ws) = tempdir();
    let (_o, outside) = tempdir();
    std::fs::write(format!("{outside}/secret"), "s3cret").unwrap();
    let script = format!("cat {outside}/secret");
    assert_eq!(sh(&ws, None, &script).stdout.text, "s3cret");
    let out = sh(&ws, on(), &script);
    assert_ne!(out.exit_code, Some(0));
    assert_eq!(out.stdout.text, "");
}

#[test]
fn system_secrets_and_warrants_own_environment_stay_out_of_reach() {
    let (_d, ws) = tempdir();
    // /etc/shadow (readable by root), and the environment of the process that started the
    // command (Warrant's own, through /proc): the default read roots leave both out.
    let script = "head -c 5 /etc/shadow; tr '\\0' '\\n' < /proc/$PPID/environ | head -1";
    let control = sh(&ws, None, script);
    assert_eq!(control.exit_code, Some(0), "{control:?}");
    assert!(!control.stdout.text.is_empty(), "{control:?}");
    let out = sh(&ws, on(), script);
    assert_eq!(out.stdout.text, "", "{out:?}");
    assert!(out.stderr.text.contains("Permission denied"), "{out:?}");
}

#[test]
fn no_signals_to_processes_outside_the_sandbox() {
    let (_d, ws) = tempdir();
    // The launcher's parent is this test process; `kill -0` only asks whether it may signal.
    let script = "kill -0 $PPID";
    assert_eq!(sh(&ws, None, script).exit_code, Some(0));
    let out = sh(&ws, on(), script);
    assert_ne!(out.exit_code, Some(0), "{out:?}");
}

#[test]
fn symlink_planted_in_the_workspace() {
    let (_d, ws) = tempdir();
    let (_o, outside) = tempdir();
    std::fs::write(format!("{outside}/secret"), "s3cret").unwrap();
    std::os::unix::fs::symlink(outside.as_path(), format!("{ws}/link")).unwrap();
    let script = "cat link/secret; echo x > link/planted";
    let out = sh(&ws, None, script);
    assert_eq!(
        (out.exit_code, out.stdout.text.as_str()),
        (Some(0), "s3cret")
    );
    std::fs::remove_file(format!("{outside}/planted")).unwrap();
    let out = sh(&ws, on(), script);
    assert_eq!(
        (out.exit_code, out.stdout.text.as_str()),
        (Some(2), ""),
        "{out:?}"
    );
    assert!(!Path::new(&format!("{outside}/planted")).exists());
}

#[test]
fn tcp_connect_to_localhost() {
    let (_d, ws) = tempdir();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = format!(
        "import socket\ns = socket.create_connection(('127.0.0.1', {port}))\nprint('connected')"
    );
    let argv = ["python3", "-c", script.as_str()];
    let host = Some(SandboxConfig {
        network: NetworkPolicy::Host,
        ..SandboxConfig::default()
    });
    let out = run_in(&ws, host, None, &argv).unwrap();
    assert_eq!(out.stdout.text, "connected\n", "{out:?}");
    let out = run_in(&ws, on(), None, &argv).unwrap();
    assert_ne!(out.exit_code, Some(0));
    assert!(out.stderr.text.contains("PermissionError"), "{out:?}");
    // AF_UNIX stays allowed.
    let unix = run_in(
        &ws,
        on(),
        None,
        &[
            "python3",
            "-c",
            "import socket; socket.socketpair(socket.AF_UNIX); print('ok')",
        ],
    )
    .unwrap();
    assert_eq!(unix.stdout.text, "ok\n", "{unix:?}");
}

#[test]
fn allocation_past_the_memory_limit() {
    let (_d, ws) = tempdir();
    let script = "b = bytearray(256 * 1024 * 1024); print('allocated')";
    let argv = ["python3", "-c", script];
    let out = run_in(&ws, on(), None, &argv).unwrap();
    assert_eq!(out.stdout.text, "allocated\n", "{out:?}");
    let limited = Some(SandboxConfig {
        limits: ResourceLimits {
            memory_bytes: Some(128 * 1024 * 1024),
            ..ResourceLimits::default()
        },
        ..SandboxConfig::default()
    });
    let out = run_in(&ws, limited, None, &argv).unwrap();
    assert_ne!(out.exit_code, Some(0));
    assert!(out.stderr.text.contains("MemoryError"), "{out:?}");
    assert_eq!(
        out.sandbox.map(|r| r.applied),
        Some(vec![
            Mechanism::Session,
            Mechanism::Rlimits,
            Mechanism::NoNewPrivs,
            Mechanism::Landlock,
            Mechanism::Seccomp
        ])
    );
}

#[test]
fn fork_bomb_is_bounded_or_refused_for_root() {
    let (_d, ws) = tempdir();
    let limited = Some(SandboxConfig {
        limits: ResourceLimits {
            processes: Some(64),
            ..ResourceLimits::default()
        },
        ..SandboxConfig::default()
    });
    let root = rustix::process::getuid().is_root();
    // Bounded variant of a fork bomb: 200 sleeping children.
    let script = "i=0; while [ $i -lt 200 ]; do sleep 2 & i=$((i+1)); done; echo spawned; wait";
    let result = run_in(&ws, limited, None, &["sh", "-c", script]);
    if root {
        // The kernel exempts uid 0 from RLIMIT_NPROC: `required` refuses instead of pretending.
        let err = result.unwrap_err();
        assert_eq!(err.code(), "W-EXEC-021");
        assert!(err.to_string().contains("RLIMIT_NPROC"), "{err}");
    } else {
        let out = result.unwrap();
        assert!(
            out.stderr.text.contains("fork") || out.stderr.text.contains("Resource"),
            "{out:?}"
        );
    }
}

#[test]
fn required_enforcement_refuses_when_a_mechanism_is_unavailable() {
    let (_d, ws) = tempdir();
    let marker = format!("{ws}/ran");
    let argv = ["sh", "-c", "touch ran"];
    let err = run_in(&ws, on(), Some(Mechanism::Landlock), &argv).unwrap_err();
    assert_eq!(err.code(), "W-EXEC-021");
    insta::assert_snapshot!(err.to_string(), @r#"the sandbox for `sh` could not be applied, so it was not run: Landlock could not be applied (unavailable on this kernel (simulated by the plan)) and the profile requires it; use a machine that provides the mechanism, or set enforcement = "best_effort" in the profile's sandbox to accept less"#);
    assert!(!Path::new(&marker).exists());

    // Negative control: best effort runs it, and says Landlock was not in force.
    let best = Some(SandboxConfig {
        enforcement: Enforcement::BestEffort,
        ..SandboxConfig::default()
    });
    let out = run_in(&ws, best, Some(Mechanism::Landlock), &argv).unwrap();
    assert_eq!(out.exit_code, Some(0));
    assert!(Path::new(&marker).exists());
    assert_eq!(
        out.sandbox,
        Some(SandboxReport {
            enforcement: Enforcement::BestEffort,
            applied: vec![
                Mechanism::Session,
                Mechanism::NoNewPrivs,
                Mechanism::Seccomp
            ],
            not_applied: vec![warrant_exec::sandbox::NotApplied {
                mechanism: Mechanism::Landlock,
                reason: "unavailable on this kernel (simulated by the plan)".into(),
            }],
            landlock_abi: 0,
        })
    );
}

#[test]
fn a_sandboxed_profile_is_never_run_without_a_launcher() {
    let (_d, ws) = tempdir();
    let action = Action::ShellExec {
        argv: vec!["true".into()],
        cwd: ws,
        profile: "test".into(),
        timeout_ms: 1_000,
    };
    let err = warrant_exec::run_command(&authorized(action), &profile(on()), &[]).unwrap_err();
    assert_eq!(err.code(), "W-EXEC-021");
}

#[test]
fn probe_reports_what_this_machine_enforces() {
    let (_d, scratch) = tempdir();
    let rows = warrant_exec::sandbox::probe(&launcher(), scratch.as_path());
    let seen: Vec<(&str, bool)> = rows.iter().map(|r| (r.mechanism, r.available)).collect();
    // This machine (kernel 6.18, Landlock ABI >= 6, x86_64) enforces everything.
    assert_eq!(
        seen,
        vec![
            ("session", true),
            ("no_new_privs", true),
            ("landlock", true),
            ("seccomp", true),
            ("landlock observed", true),
            ("network observed", true),
        ],
        "{rows:#?}"
    );
}
