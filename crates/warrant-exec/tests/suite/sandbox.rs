//! Adversarial tests of the OS sandbox. Each attack first runs with the sandbox switched off by
//! configuration (the negative control: it must succeed), then with it on (it must fail, and the
//! outcome must say what was in force).

use std::net::TcpListener;
use std::path::Path;

use pretty_assertions::assert_eq;
use warrant_core::config::{
    Enforcement, Isolation, NetworkPolicy, ProfileConfig, ResourceLimits, SandboxConfig,
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
        program: None,
        contained: false,
        judged: warrant_core::Judging::Changeset,
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
            Mechanism::NetworkNamespace,
            Mechanism::NoNewPrivs,
            Mechanism::Landlock,
            Mechanism::Seccomp,
        ],
        not_applied: Vec::new(),
        landlock_abi: 0,
        tracked: warrant_exec::cgroup::available(),
    }
}

/// The Landlock layer on its own (`isolation = "landlock"`): what these tests check is the
/// second layer under the view, and the fallback where namespaces are unavailable. The view
/// itself is tested in `suite::view`.
fn on() -> Option<SandboxConfig> {
    Some(landlock())
}

fn landlock() -> SandboxConfig {
    SandboxConfig {
        isolation: Isolation::Landlock,
        ..SandboxConfig::default()
    }
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
        ..landlock()
    });
    let out = run_in(&ws, host, None, &argv).unwrap();
    assert_eq!(out.stdout.text, "connected\n", "{out:?}");
    let out = run_in(&ws, on(), None, &argv).unwrap();
    assert_ne!(out.exit_code, Some(0));
    assert!(out.stderr.text.contains("PermissionError"), "{out:?}");
    // The namespace alone (the seccomp filter switched off) keeps the host's loopback out of
    // reach too: nothing listens on the namespace's own 127.0.0.1.
    let best = Some(SandboxConfig {
        enforcement: Enforcement::BestEffort,
        ..landlock()
    });
    if machine_applies(Mechanism::NetworkNamespace, SandboxConfig::default()) {
        let out = run_in(&ws, best, Some(Mechanism::Seccomp), &argv).unwrap();
        assert!(
            out.stderr.text.contains("ConnectionRefusedError"),
            "{out:?}"
        );
    } else {
        assert_refused(run_in(&ws, on(), None, &argv), "a network namespace");
    }
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
        ..landlock()
    });
    let out = run_in(&ws, limited, None, &argv).unwrap();
    assert_ne!(out.exit_code, Some(0));
    assert!(out.stderr.text.contains("MemoryError"), "{out:?}");
    assert_eq!(
        out.sandbox.map(|r| r.applied),
        Some(vec![
            Mechanism::Session,
            Mechanism::Rlimits,
            Mechanism::NetworkNamespace,
            Mechanism::NoNewPrivs,
            Mechanism::Landlock,
            Mechanism::Seccomp
        ])
    );
}

#[test]
fn fork_bomb_is_bounded_even_for_root() {
    let (_d, ws) = tempdir();
    let limited = Some(SandboxConfig {
        limits: ResourceLimits {
            processes: Some(32),
            ..ResourceLimits::default()
        },
        ..landlock()
    });
    // Each process leaves a marker before it sleeps; the count of markers is how many started.
    std::fs::create_dir(format!("{ws}/d")).unwrap();
    let script =
        "i=0; while [ $i -lt 200 ]; do ( : > d/p$i; exec sleep 2 ) & i=$((i+1)); done; sleep 1";
    let started = || {
        let n = std::fs::read_dir(format!("{ws}/d")).unwrap().count();
        std::fs::remove_dir_all(format!("{ws}/d")).unwrap();
        std::fs::create_dir(format!("{ws}/d")).unwrap();
        n
    };
    // Negative control: without the limit all 200 start.
    let out = run_in(&ws, on(), None, &["sh", "-c", script]).unwrap();
    assert_eq!(started(), 200, "{out:?}");
    if !machine_applies(Mechanism::ProcessLimit, limited.clone().unwrap()) {
        assert_refused(
            run_in(&ws, limited, None, &["sh", "-c", script]),
            "the process limit",
        );
        return;
    }
    let out = run_in(&ws, limited, None, &["sh", "-c", script]).unwrap();
    let n = started();
    assert!(n < 32, "{n} processes started under a limit of 32: {out:?}");
    assert!(out.stderr.text.contains("Cannot fork"), "{out:?}");
    let report = out.sandbox.unwrap();
    assert!(
        report.applied.contains(&Mechanism::ProcessLimit),
        "{report:?}"
    );
}

#[test]
fn required_enforcement_refuses_when_a_mechanism_is_unavailable() {
    let (_d, ws) = tempdir();
    let marker = format!("{ws}/ran");
    let argv = ["sh", "-c", "touch ran"];
    let err = run_in(&ws, on(), Some(Mechanism::Landlock), &argv).unwrap_err();
    assert_eq!(err.code(), "W-EXEC-021");
    insta::assert_snapshot!(err.to_string(), @r#"the sandbox for `sh` could not be applied, so it was not run: Landlock could not be applied (unavailable on this kernel (simulated by the plan)) and the profile requires it; to accept less, set enforcement = "best_effort" in the profile's [sandbox], or use a profile with unconfined = true (every command then waits for a person)"#);
    assert!(!Path::new(&marker).exists());

    // Negative control: best effort runs it, and says Landlock was not in force.
    let best = Some(SandboxConfig {
        enforcement: Enforcement::BestEffort,
        ..landlock()
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
                Mechanism::NetworkNamespace,
                Mechanism::NoNewPrivs,
                Mechanism::Seccomp
            ],
            not_applied: vec![warrant_exec::sandbox::NotApplied {
                mechanism: Mechanism::Landlock,
                reason: "unavailable on this kernel (simulated by the plan)".into(),
            }],
            landlock_abi: 0,
            tracked: warrant_exec::cgroup::available(),
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
        program: None,
        contained: false,
        judged: warrant_core::Judging::Changeset,
    };
    let err = warrant_exec::run_command(&authorized(action), &profile(on()), &[]).unwrap_err();
    assert_eq!(err.code(), "W-EXEC-021");
}

#[test]
fn probe_reports_what_this_machine_enforces() {
    let (_d, scratch) = tempdir();
    let rows = warrant_exec::sandbox::probe(&launcher(), scratch.as_path());
    let seen: Vec<(&str, bool)> = rows.iter().map(|r| (r.mechanism, r.available)).collect();
    // This machine (kernel 6.18, Landlock ABI >= 6, x86_64, root with a cgroup v1 pids
    // controller) enforces everything.
    assert_eq!(
        seen,
        vec![
            ("session", true),
            ("process_limit", true),
            ("view", true),
            ("network_namespace", true),
            ("no_new_privs", true),
            ("landlock", true),
            ("seccomp", true),
            ("egress_proxy", true),
            ("landlock observed", true),
            ("view observed", true),
            ("overlay observed", true),
            ("denied observed", true),
            ("process limit observed", true),
            ("network observed", true),
            ("netns observed", true),
            ("egress proxy observed", true),
        ],
        "{rows:#?}"
    );
}

/// Run `argv` under a whole profile, with a timeout and Warrant's environment given.
fn run_profile(
    ws: &CanonicalPath,
    profile: &ProfileConfig,
    argv: &[&str],
    timeout_ms: u64,
    parent_env: &[(String, String)],
) -> Result<ExecOutcome, ExecError> {
    let plan = SandboxPlan::from_profile("test", profile, ws, &OsLinks).unwrap();
    let confinement = plan.map(|plan| Confinement {
        plan,
        launcher: launcher(),
    });
    let action = Action::ShellExec {
        argv: argv.iter().map(|s| (*s).to_owned()).collect(),
        cwd: ws.clone(),
        profile: "test".into(),
        timeout_ms,
        program: None,
        contained: false,
        judged: warrant_core::Judging::Changeset,
    };
    run_command_confined(
        &authorized(action),
        profile,
        parent_env,
        &|| None,
        confinement.as_ref(),
    )
}

#[test]
fn denied_files_inside_a_read_root_cannot_be_read() {
    let (_d, ws) = tempdir();
    std::fs::create_dir_all(format!("{ws}/sub/deeper")).unwrap();
    std::fs::create_dir_all(format!("{ws}/creds")).unwrap();
    std::fs::write(format!("{ws}/.env"), "TOKEN=dotenv-secret\n").unwrap();
    std::fs::write(format!("{ws}/sub/deeper/id_ed25519"), "key-secret\n").unwrap();
    std::fs::write(format!("{ws}/sub/server.pem"), "pem-secret\n").unwrap();
    std::fs::write(format!("{ws}/creds/prod.txt"), "extra-secret\n").unwrap();
    std::fs::write(format!("{ws}/sub/ok.txt"), "fine\n").unwrap();
    let script = "for f in .env sub/deeper/id_ed25519 sub/server.pem creds/prod.txt sub/ok.txt; do cat $f; done; echo tampered > .env";
    // Negative control: with nothing denied, every file is read and .env is overwritten.
    let open = Some(SandboxConfig {
        denied: Vec::new(),
        ..landlock()
    });
    let out = sh(&ws, open, script);
    assert_eq!(
        out.stdout.text, "TOKEN=dotenv-secret\nkey-secret\npem-secret\nextra-secret\nfine\n",
        "{out:?}"
    );
    std::fs::write(format!("{ws}/.env"), "TOKEN=dotenv-secret\n").unwrap();
    let mut denied: Vec<String> = warrant_core::config::DEFAULT_DENIED
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    denied.push("creds/prod.txt".into());
    let guarded = Some(SandboxConfig {
        denied,
        ..landlock()
    });
    let out = sh(&ws, guarded, script);
    assert_eq!(out.stdout.text, "fine\n", "{out:?}");
    assert_eq!(
        out.stderr.text.matches("Permission denied").count(),
        5,
        "{out:?}"
    );
    assert_eq!(
        std::fs::read_to_string(format!("{ws}/.env")).unwrap(),
        "TOKEN=dotenv-secret\n"
    );
}

#[test]
fn git_hooks_cannot_be_created_in_a_write_root_without_git() {
    let (_d, ws) = tempdir();
    std::fs::create_dir(format!("{ws}/src")).unwrap();
    let script = "mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit; echo ok > src/a.txt";
    // Negative control: with no protected names the hook is planted.
    let open = Some(SandboxConfig {
        protected: Vec::new(),
        ..landlock()
    });
    sh(&ws, open, script);
    assert!(Path::new(&format!("{ws}/.git/hooks/pre-commit")).exists());
    std::fs::remove_dir_all(format!("{ws}/.git")).unwrap();
    let out = sh(&ws, on(), script);
    assert!(!Path::new(&format!("{ws}/.git")).exists(), "{out:?}");
    assert!(out.stderr.text.contains("Permission denied"), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(format!("{ws}/src/a.txt")).unwrap(),
        "ok\n"
    );
}

/// A one-shot-per-connection HTTP server on the host's loopback that answers `hello`.
fn http_server() -> u16 {
    use std::io::{Read, Write};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let line = String::from_utf8_lossy(&head)
                    .lines()
                    .next()
                    .unwrap()
                    .to_owned();
                let body = format!("hello via {line}");
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    port
}

fn allow(list: &[String]) -> ProfileConfig {
    profile(Some(SandboxConfig {
        network: NetworkPolicy::Allow(list.to_vec()),
        ..landlock()
    }))
}

const FETCH: &str = r#"
import os, sys, http.client, urllib.request
port = int(sys.argv[1])
def attempt(name, f):
    try:
        print(name, "ok", f())
    except Exception as e:
        print(name, "refused", type(e).__name__, str(e)[:60])
attempt("plain-name", lambda: urllib.request.urlopen(f"http://localhost:{port}/a", timeout=10).read().decode())
attempt("plain-ip", lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/b", timeout=10).read().decode())
def tunnel(host):
    proxy = os.environ["HTTPS_PROXY"].removeprefix("http://").split(":")
    c = http.client.HTTPConnection(proxy[0], int(proxy[1]), timeout=10)
    c.set_tunnel(host, port)
    c.request("GET", "/c")
    return c.getresponse().read().decode()
attempt("connect-name", lambda: tunnel("localhost"))
attempt("connect-other", lambda: tunnel("not-listed.example"))
import socket
attempt("direct", lambda: socket.create_connection(("127.0.0.1", port), timeout=5) and "connected")
"#;

#[test]
fn egress_goes_only_through_the_proxy_to_listed_hosts() {
    let (_d, ws) = tempdir();
    let port = http_server();
    let port_s = port.to_string();
    let env = [("PATH".to_owned(), PATH.to_owned())];
    let argv = ["python3", "-c", FETCH, port_s.as_str()];
    let listed = allow(&[format!("localhost:{port}")]);
    if !machine_applies(Mechanism::EgressProxy, listed.sandbox.clone().unwrap()) {
        assert_refused(
            run_profile(&ws, &listed, &argv, 60_000, &env),
            "could not be applied",
        );
        return;
    }
    let out = run_profile(
        &ws,
        &allow(&[format!("localhost:{port}")]),
        &argv,
        60_000,
        &env,
    )
    .unwrap();
    let lines: Vec<String> = out
        .stdout
        .text
        .lines()
        .map(|l| {
            l.split(" refused ")
                .next()
                .map(str::to_owned)
                .unwrap_or_default()
        })
        .map(|l| {
            l.split(" ok ")
                .next()
                .map(str::to_owned)
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(
        lines,
        vec![
            "plain-name",
            "plain-ip",
            "connect-name",
            "connect-other",
            "direct"
        ],
        "{out:?}"
    );
    let text = &out.stdout.text;
    assert!(
        text.contains("plain-name ok hello via GET /a HTTP/1.1"),
        "{out:?}"
    );
    assert!(
        text.contains("plain-ip refused HTTPError HTTP Error 403"),
        "{out:?}"
    );
    assert!(
        text.contains("connect-name ok hello via GET /c HTTP/1.1"),
        "{out:?}"
    );
    assert!(
        text.contains("connect-other refused OSError Tunnel connection failed: 403"),
        "{out:?}"
    );
    assert!(
        text.contains("direct refused ConnectionRefusedError"),
        "{out:?}"
    );
    let log = out.egress.clone().unwrap();
    let targets = |v: &[warrant_exec::egress::EgressAttempt]| -> Vec<(String, String)> {
        v.iter()
            .map(|a| (a.method.clone(), a.target.clone()))
            .collect()
    };
    assert_eq!(
        (targets(&log.allowed), targets(&log.refused)),
        (
            vec![
                ("GET".to_owned(), format!("localhost:{port}")),
                ("CONNECT".to_owned(), format!("localhost:{port}"))
            ],
            vec![
                ("GET".to_owned(), format!("127.0.0.1:{port}")),
                ("CONNECT".to_owned(), format!("not-listed.example:{port}"))
            ]
        )
    );
    assert_eq!(
        log.refused[0].reason.as_deref(),
        Some("not on the profile's network allowlist")
    );
    // The refusals are part of the result that is journaled and shown to the model.
    let json = serde_json::to_value(&out).unwrap();
    assert_eq!(
        json["egress"]["refused"][1]["target"],
        format!("not-listed.example:{port}")
    );
    let report = out.sandbox.unwrap();
    assert!(
        report.applied.contains(&Mechanism::EgressProxy),
        "{report:?}"
    );

    // Negative control: with the host's network the direct connection and the IP literal work.
    let host = profile(Some(SandboxConfig {
        network: NetworkPolicy::Host,
        ..landlock()
    }));
    let script = format!(
        "import socket, urllib.request\nsocket.create_connection(('127.0.0.1', {port}), timeout=5)\nprint(urllib.request.urlopen('http://127.0.0.1:{port}/d', timeout=10).read().decode())"
    );
    let out = run_profile(&ws, &host, &["python3", "-c", &script], 60_000, &env).unwrap();
    assert_eq!(out.stdout.text, "hello via GET /d HTTP/1.1\n", "{out:?}");
    assert_eq!(out.egress, None);
}

#[test]
fn egress_needs_the_namespace_or_is_refused() {
    let (_d, ws) = tempdir();
    let p = allow(&["localhost:1".to_owned()]);
    let plan = SandboxPlan::from_profile("test", &p, &ws, &OsLinks)
        .unwrap()
        .unwrap();
    let action = Action::ShellExec {
        argv: vec!["true".into()],
        cwd: ws,
        profile: "test".into(),
        timeout_ms: 10_000,
        program: None,
        contained: false,
        judged: warrant_core::Judging::Changeset,
    };
    let run = |simulate| {
        let mut plan = plan.clone();
        plan.simulate_unavailable = simulate;
        run_command_confined(
            &authorized(action.clone()),
            &p,
            &[],
            &|| None,
            Some(&Confinement {
                plan,
                launcher: launcher(),
            }),
        )
    };
    let err = run(Some(Mechanism::NetworkNamespace)).unwrap_err();
    assert_eq!(err.code(), "W-EXEC-021");
    insta::assert_snapshot!(err.to_string(), @r#"the sandbox for `true` could not be applied, so it was not run: a network namespace could not be applied (unavailable on this kernel (simulated by the plan)) and the profile requires it; to accept less, set enforcement = "best_effort" in the profile's [sandbox], or use a profile with unconfined = true (every command then waits for a person)"#);
    // Control: with the namespace available the same profile runs.
    assert_eq!(run(None).unwrap().exit_code, Some(0));
}

#[test]
fn timeout_with_a_grandchild_holding_the_pipe_and_one_escaping_the_group() {
    let (_d, ws) = tempdir();
    let env = [("PATH".to_owned(), PATH.to_owned())];
    // The grandchild in the group holds stdout; the other leaves the group (setsid) and the
    // pipes, which a process-group kill cannot reach.
    let script =
        "sleep 1000 & echo $!; setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!; sleep 1000";
    let alive = |pid: &str| {
        Path::new(&format!("/proc/{pid}")).exists()
            && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .unwrap_or_default()
                .contains(") Z ")
    };
    let limited = profile(Some(SandboxConfig {
        limits: ResourceLimits {
            processes: Some(64),
            ..ResourceLimits::default()
        },
        ..landlock()
    }));
    if !machine_applies(Mechanism::ProcessLimit, limited.sandbox.clone().unwrap()) {
        assert_refused(
            run_profile(&ws, &limited, &["sh", "-c", script], 500, &env),
            "the process limit",
        );
        return;
    }
    // Negative control: unconfined (no cgroup) the escaped process survives the call.
    let out = run_profile(&ws, &profile(None), &["sh", "-c", script], 500, &env).unwrap();
    assert!(out.timed_out, "{out:?}");
    let pids: Vec<String> = out.stdout.text.lines().map(str::to_owned).collect();
    assert_eq!(pids.len(), 2, "{out:?}");
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(!alive(&pids[0]), "the grandchild in the group was killed");
    assert!(
        alive(&pids[1]),
        "control: the escaped process survives without a cgroup"
    );
    let _ = rustix::process::kill_process(
        rustix::process::Pid::from_raw(pids[1].parse().unwrap()).unwrap(),
        rustix::process::Signal::KILL,
    );
    let out = run_profile(&ws, &limited, &["sh", "-c", script], 500, &env).unwrap();
    assert!(out.timed_out, "{out:?}");
    let pids: Vec<String> = out.stdout.text.lines().map(str::to_owned).collect();
    assert_eq!(pids.len(), 2, "{out:?}");
    assert!(out.leftover_killed >= 1, "{out:?}");
    assert!(!alive(&pids[0]) && !alive(&pids[1]), "{out:?}");
    // Without a process limit the sandbox still tracks the command in a cgroup (limit `max`)
    // where one is writable; elsewhere the report says it did not.
    let out = run_profile(&ws, &profile(on()), &["sh", "-c", script], 500, &env).unwrap();
    let pids: Vec<String> = out.stdout.text.lines().map(str::to_owned).collect();
    let tracked = warrant_exec::cgroup::available();
    assert_eq!(
        out.sandbox.as_ref().map(|r| r.tracked),
        Some(tracked),
        "{out:?}"
    );
    if tracked {
        assert!(out.leftover_killed >= 1, "{out:?}");
        assert!(!alive(&pids[0]) && !alive(&pids[1]), "{out:?}");
    } else {
        assert!(alive(&pids[1]), "{out:?}");
    }
}

#[test]
fn environment_dump_shows_only_the_profile() {
    let (_d, ws) = tempdir();
    let parent = [
        ("PATH".to_owned(), PATH.to_owned()),
        ("HOME".to_owned(), "/root".to_owned()),
        (
            "AWS_SECRET_ACCESS_KEY".to_owned(),
            "wJalrXUtnFEMI".to_owned(),
        ),
        ("EDITOR".to_owned(), "vi".to_owned()),
    ];
    let names = |out: &ExecOutcome| -> Vec<String> {
        let mut v: Vec<String> = out
            .stdout
            .text
            .lines()
            .filter_map(|l| l.split_once('=').map(|(k, _)| k.to_owned()))
            .collect();
        v.sort();
        v
    };
    let guarded = allow(&["localhost:1".to_owned()]);
    let out = run_profile(&ws, &guarded, &["env"], 10_000, &parent).unwrap();
    assert_eq!(
        names(&out),
        vec![
            "ALL_PROXY",
            "HOME",
            "HTTPS_PROXY",
            "HTTP_PROXY",
            "PATH",
            "WARRANT_COMMAND",
            "all_proxy",
            "http_proxy",
            "https_proxy"
        ],
        "{out:?}"
    );
    assert!(!out.stdout.text.contains("wJalrXUtnFEMI"));
    // Negative control: a profile that passes the variable through shows it.
    let leaky = ProfileConfig {
        pass_env: vec!["EDITOR".into()],
        ..profile(on())
    };
    let out = run_profile(&ws, &leaky, &["env"], 10_000, &parent).unwrap();
    assert_eq!(
        names(&out),
        vec!["EDITOR", "HOME", "PATH", "WARRANT_COMMAND"],
        "{out:?}"
    );
}

#[test]
fn printing_a_gibibyte_is_bounded() {
    let (_d, ws) = tempdir();
    let env = [("PATH".to_owned(), PATH.to_owned())];
    let argv = ["head", "-c", "1073741824", "/dev/zero"];
    let out = run_profile(&ws, &profile(on()), &argv, 120_000, &env).unwrap();
    assert_eq!(out.stdout.total_bytes, 1 << 30);
    assert_eq!(out.stdout.omitted_bytes, (1 << 30) - 2 * 16 * 1024);
    assert!(out.stdout.text.len() < 40_000, "{}", out.stdout.text.len());
    // Control: the cap is what bounds it; a profile with larger caps keeps more.
    let roomy = ProfileConfig {
        output_head_bytes: 1 << 20,
        ..profile(on())
    };
    let out = run_profile(&ws, &roomy, &argv, 120_000, &env).unwrap();
    assert!(out.stdout.text.len() > 1 << 20, "{}", out.stdout.text.len());
}

/// Whether this machine applies `mechanism` for `config` (asked under `best_effort`, so the
/// launcher reports instead of refusing). Tests use it to assert the refusal where it does not.
fn machine_applies(mechanism: Mechanism, config: SandboxConfig) -> bool {
    let (_d, ws) = tempdir();
    let best = SandboxConfig {
        enforcement: Enforcement::BestEffort,
        ..config
    };
    let out = run_profile(&ws, &profile(Some(best)), &["true"], 10_000, &[]).unwrap();
    out.sandbox.is_some_and(|r| r.applied.contains(&mechanism))
}

/// Where `mechanism` is unavailable, a `required` profile must refuse, naming it.
fn assert_refused(result: Result<ExecOutcome, ExecError>, what: &str) {
    let err = result.unwrap_err();
    assert_eq!(err.code(), "W-EXEC-021", "{err}");
    assert!(err.to_string().contains(what), "{err}");
}

/// A real, unbounded fork bomb (every process starts two more, forever) under a process limit:
/// the call returns at its timeout, nothing is left running, and the cgroup is gone. Its control
/// is the counted variant in `fork_bomb_is_bounded_even_for_root` (a real bomb without the limit
/// would take the machine down); where the limit cannot be applied it must be refused.
#[test]
fn real_fork_bomb_under_the_process_limit_ends_with_the_call() {
    let (_d, ws) = tempdir();
    let limited = SandboxConfig {
        limits: ResourceLimits {
            processes: Some(32),
            ..ResourceLimits::default()
        },
        ..landlock()
    };
    let env = [("PATH".to_owned(), PATH.to_owned())];
    // `$$` is the launcher's pid (it exec'd the shell), which names the command's cgroup.
    let bomb = ["sh", "-c", "echo $$; b() { b | b & }; b; sleep 1000"];
    if !machine_applies(Mechanism::ProcessLimit, limited.clone()) {
        assert_refused(
            run_profile(&ws, &profile(Some(limited)), &bomb, 1_500, &env),
            "the process limit",
        );
        return;
    }
    let out = run_profile(&ws, &profile(Some(limited)), &bomb, 1_500, &env).unwrap();
    assert!(out.timed_out, "{out:?}");
    let report = out.sandbox.unwrap();
    assert!(
        report.applied.contains(&Mechanism::ProcessLimit),
        "{report:?}"
    );
    // The launcher's cgroup (named after its pid) was emptied and removed.
    let pid = out
        .stdout
        .text
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    assert!(pid.parse::<u32>().is_ok(), "{:?}", out.stdout);
    for base in ["/sys/fs/cgroup/pids/warrant", "/sys/fs/cgroup/warrant"] {
        assert!(!Path::new(base).join(&pid).exists(), "{base}/{pid} is left");
    }
}

const REJOIN: &str = r#"
import ctypes, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
# pidfd_open(parent): the process that started the command (Warrant) is in the host's namespace.
fd = libc.syscall(434, os.getppid(), 0)
r = libc.setns(fd, 0x40000000) if fd >= 0 else -1  # CLONE_NEWNET
print("setns", "ok" if r == 0 else "failed")
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3)
    print("connected")
except Exception as e:
    print("refused", type(e).__name__)
"#;

/// Under an allowlist the command may open IP sockets (to reach the forwarder) but not netlink
/// or packet sockets, with which root could reconfigure or move interfaces out of the namespace.
/// Control: with the host's network (no socket filter) both open.
#[test]
fn netlink_and_packet_sockets_are_refused_under_an_allowlist() {
    let (_d, ws) = tempdir();
    let env = [("PATH".to_owned(), PATH.to_owned())];
    let script = "import socket\nfor name, fam, kind in [('netlink', socket.AF_NETLINK, socket.SOCK_RAW), ('packet', socket.AF_PACKET, socket.SOCK_RAW), ('inet', socket.AF_INET, socket.SOCK_STREAM)]:\n    try:\n        socket.socket(fam, kind).close(); print(name, 'opened')\n    except OSError as e:\n        print(name, 'refused', e.errno)";
    let argv = ["python3", "-c", script];
    let host = profile(Some(SandboxConfig {
        network: NetworkPolicy::Host,
        ..landlock()
    }));
    let out = run_profile(&ws, &host, &argv, 30_000, &env).unwrap();
    let root = rustix::process::getuid().is_root();
    assert_eq!(
        out.stdout.text,
        if root {
            "netlink opened\npacket opened\ninet opened\n"
        } else {
            "netlink opened\npacket refused 1\ninet opened\n"
        },
        "{out:?}"
    );
    let listed = allow(&["localhost:1".to_owned()]);
    if !machine_applies(Mechanism::NetworkNamespace, listed.sandbox.clone().unwrap()) {
        assert_refused(
            run_profile(&ws, &listed, &argv, 30_000, &env),
            "could not be applied",
        );
        return;
    }
    let out = run_profile(&ws, &listed, &argv, 30_000, &env).unwrap();
    assert_eq!(
        out.stdout.text, "netlink refused 1\npacket refused 1\ninet opened\n",
        "{out:?}"
    );
}

/// A command running as root inside the namespace tries to join the host's network namespace
/// through a pidfd of its parent (Warrant) and reach a listener on the host's loopback, bypassing the proxy.
/// Control: unconfined, the same code joins and connects.
#[test]
fn root_cannot_rejoin_the_host_network_namespace() {
    let (_d, ws) = tempdir();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let env = [("PATH".to_owned(), PATH.to_owned())];
    let argv = ["python3", "-c", REJOIN, port.as_str()];
    let root = rustix::process::getuid().is_root();
    let out = run_profile(&ws, &profile(None), &argv, 30_000, &env).unwrap();
    assert_eq!(
        out.stdout.text,
        if root {
            "setns ok\nconnected\n"
        } else {
            "setns failed\nconnected\n"
        },
        "{out:?}"
    );
    let listed = allow(&["localhost:1".to_owned()]);
    if !machine_applies(Mechanism::NetworkNamespace, listed.sandbox.clone().unwrap()) {
        assert_refused(
            run_profile(&ws, &listed, &argv, 30_000, &env),
            "could not be applied",
        );
        return;
    }
    let out = run_profile(&ws, &listed, &argv, 30_000, &env).unwrap();
    assert_eq!(
        out.stdout.text, "setns failed\nrefused ConnectionRefusedError\n",
        "{out:?}"
    );
}

/// The egress forwarder ends with the command even when nothing cleans up after it (the
/// launcher run directly, no cgroup release): Landlock's signal scope blocks its parent-death
/// signal, so it must notice on its own.
#[test]
fn the_egress_forwarder_does_not_outlive_the_command() {
    let (_d, ws) = tempdir();
    let p = allow(&["localhost:1".to_owned()]);
    if !machine_applies(Mechanism::EgressProxy, p.sandbox.clone().unwrap()) {
        return assert_refused(
            run_profile(&ws, &p, &["true"], 10_000, &[]),
            "could not be applied",
        );
    }
    let mut plan = SandboxPlan::from_profile("test", &p, &ws, &OsLinks)
        .unwrap()
        .unwrap();
    plan.egress_socket = Some(format!("{ws}/no-proxy.sock").into());
    let l = launcher();
    let out = std::process::Command::new(&l.program)
        .args(
            l.args(
                &plan,
                &["/bin/sh".to_owned(), "-c".to_owned(), "echo $$".to_owned()],
            )
            .unwrap(),
        )
        .current_dir(ws.as_path())
        .output()
        .unwrap();
    let pid = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(pid.parse::<u32>().is_ok(), "{out:?}");
    let needle = format!("__forward\0{pid}\0");
    let forwarders = || -> usize {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| {
                std::fs::read(e.path().join("cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&needle))
            })
            .count()
    };
    let mut left = forwarders();
    for _ in 0..100 {
        if left == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        left = forwarders();
    }
    warrant_exec::cgroup::release(pid.parse().unwrap());
    assert_eq!(left, 0, "the forwarder of launcher {pid} outlived it");
}

/// An allowlist profile under the default isolation runs in the command's own view: the egress
/// proxy's socket is bound into it for the forwarder, so a listed host is reached through the
/// proxy and nothing else is, while the view holds (a file can be created at a workspace root
/// that has `.git`, `/proc` shows only the command's processes, `.env` is masked). Control:
/// the same allowlist under `isolation = "landlock"` (the host's view) cannot create the file.
#[test]
fn an_allowlist_runs_in_the_view_with_the_proxy_socket_bound_in() {
    let (_d, ws) = tempdir();
    std::fs::create_dir(ws.as_path().join(".git")).unwrap();
    std::fs::write(ws.as_path().join(".env"), "marker-in-dotenv").unwrap();
    let port = http_server();
    let env = [("PATH".to_owned(), PATH.to_owned())];
    let script = format!(
        concat!(
            "curl -s --max-time 10 http://localhost:{p}/listed; echo; ",
            "curl -s --max-time 5 --noproxy '*' http://127.0.0.1:{p}/direct || echo direct-refused; ",
            "cat .env 2>/dev/null; ",
            "echo root > new.txt && echo root-written; ",
            "echo procs $(ls /proc | grep -c '^[0-9]')"
        ),
        p = port
    );
    let argv = ["sh", "-c", script.as_str()];
    let viewed = profile(Some(SandboxConfig {
        network: NetworkPolicy::Allow(vec![format!("localhost:{port}")]),
        ..SandboxConfig::default()
    }));
    let out = run_profile(&ws, &viewed, &argv, 60_000, &env).unwrap();
    let report = out.sandbox.clone().unwrap();
    assert!(
        report.applied.contains(&Mechanism::View)
            && report.applied.contains(&Mechanism::EgressProxy),
        "{report:?}"
    );
    let text = &out.stdout.text;
    assert!(text.contains("hello via GET /listed"), "{out:?}");
    assert!(text.contains("direct-refused"), "{out:?}");
    assert!(!text.contains("marker-in-dotenv"), "{out:?}");
    assert!(text.contains("root-written"), "{out:?}");
    let procs: usize = text
        .rsplit("procs ")
        .next()
        .and_then(|n| n.trim().parse().ok())
        .unwrap();
    assert!(procs <= 6, "only the command's own processes: {out:?}");
    assert_eq!(
        out.egress.unwrap().allowed.len(),
        1,
        "the listed request went through the proxy"
    );
    std::fs::remove_file(ws.as_path().join("new.txt")).unwrap();

    let control = run_profile(
        &ws,
        &allow(&[format!("localhost:{port}")]),
        &argv,
        60_000,
        &env,
    )
    .unwrap();
    assert!(
        control.stdout.text.contains("hello via GET /listed"),
        "{control:?}"
    );
    assert!(!control.stdout.text.contains("root-written"), "{control:?}");
}
