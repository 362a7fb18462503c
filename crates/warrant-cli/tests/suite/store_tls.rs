//! The shared store over verified TLS from the binary: `[store] url` with libpq's TLS
//! parameters, `[store] password` as a reference, and what `doctor` says about the connection.
//! The server is a PostgreSQL of the test's own that takes TCP only over TLS.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use postgres::{Client, NoTls};
use warrant_testkit::pg::{PASSWORD, PASSWORD_ROLE, Throwaway, TlsFiles};

use super::harness::{Sandbox, stderr, stdout};

fn server() -> &'static (Throwaway, TlsFiles) {
    static SERVER: OnceLock<(Throwaway, TlsFiles)> = OnceLock::new();
    SERVER.get_or_init(|| Throwaway::start_tls().expect("a TLS PostgreSQL server for the tests"))
}

/// A workspace whose managed layer points the store at a fresh database on the TLS server,
/// as the password role, the password behind `env:STORE_PASSWORD` (set to `password`).
fn workspace(query: &str, password: Option<&str>) -> Sandbox {
    static N: AtomicU32 = AtomicU32::new(0);
    let (server, files) = server();
    let name = format!(
        "cli_tls_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    );
    Client::connect(&server.url, NoTls)
        .unwrap()
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .unwrap();
    let query = query.replace("CA", &files.ca.display().to_string());
    let url = format!(
        "postgres://{PASSWORD_ROLE}@127.0.0.1:{}/{name}?{query}",
        server.port()
    );
    let mut sb = Sandbox::new();
    std::fs::write(
        sb.managed.join("config.toml"),
        format!("[store]\nurl = \"{url}\"\npassword = \"env:STORE_PASSWORD\"\n"),
    )
    .unwrap();
    if let Some(p) = password {
        sb.extra_env.push(("STORE_PASSWORD".into(), p.into()));
    }
    sb
}

#[test]
fn a_workspace_on_a_verified_tls_store_runs_and_doctor_names_the_connection() {
    let sb = workspace("sslmode=verify-full&sslrootcert=CA", Some(PASSWORD));
    let init = sb.run(&["init", "--yes"]);
    assert_eq!(init.status.code(), Some(0), "{}", stderr(&init));
    let model = sb.transcript(
        "version: 1\nturns:\n  - calls:\n      - tool: write_file\n        args: { path: notes.md, content: hello }\n  - say: done\n",
    );
    let run = sb.run(&["run", "--model", &model, "write the notes"]);
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let doctor = sb.run(&["doctor"]);
    let text = stdout(&doctor);
    let line = text
        .lines()
        .find(|l| l.contains("store connection"))
        .unwrap_or_else(|| panic!("no store connection row:\n{text}"));
    assert!(line.contains("TLS (TLSv1."), "{line}");
    let (_, events) = sb.last_run();
    assert!(
        events.iter().any(|e| e["kind"] == "effect_completed"),
        "{events:?}"
    );
    assert!(
        line.contains("certificate and host name verified (sslmode=verify-full)"),
        "{line}"
    );
    // The password is in no output and in no file of the workspace.
    for out in [&init, &run, &doctor] {
        assert!(!stdout(out).contains(PASSWORD) && !stderr(out).contains(PASSWORD));
    }
}

#[test]
fn an_unset_password_reference_and_a_wrong_password_are_named_and_nothing_starts() {
    let sb = workspace("sslmode=verify-full&sslrootcert=CA", None);
    let out = sb.run(&["init", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = sb.run(&["runs", "list"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("W-STORE-013"), "{}", stderr(&out));
    assert!(stderr(&out).contains("env:STORE_PASSWORD") || stderr(&out).contains("STORE_PASSWORD"));

    let sb = workspace(
        "sslmode=verify-full&sslrootcert=CA",
        Some("not-the-password"),
    );
    assert_eq!(sb.run(&["init", "--yes"]).status.code(), Some(0));
    let out = sb.run(&["runs", "list"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("W-STORE-001") && err.contains("password authentication failed"),
        "{err}"
    );
    assert!(!err.contains("not-the-password"), "{err}");
}

#[test]
fn a_store_whose_certificate_is_not_trusted_is_refused_before_anything_is_written() {
    // No sslrootcert and an empty HOME: the platform's store, which never signed the test CA.
    let sb = workspace("sslmode=verify-full", Some(PASSWORD));
    assert_eq!(sb.run(&["init", "--yes"]).status.code(), Some(0));
    let out = sb.run(&["runs", "list"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("W-STORE-001") && err.contains("UnknownIssuer"),
        "{err}"
    );
    // The negative control: encryption without authentication (`require`) lets it through.
    let sb = workspace("sslmode=require", Some(PASSWORD));
    assert_eq!(sb.run(&["init", "--yes"]).status.code(), Some(0));
    let out = sb.run(&["runs", "list"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doctor = stdout(&sb.run(&["doctor"]));
    assert!(
        doctor.contains("server not authenticated (sslmode=require)"),
        "{doctor}"
    );
}
