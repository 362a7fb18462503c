//! TLS to the shared store, against a PostgreSQL server of our own that accepts TCP only over
//! TLS (`Throwaway::start_tls`): libpq's `sslmode` meanings, roots, host names, client
//! certificates, and what `doctor` is told about the connection. The negative controls are the
//! same server under the weaker modes: what a mode refuses, the mode below lets through.

use std::os::unix::fs::PermissionsExt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use postgres::{Client, NoTls};
use warrant_core::Coded;
use warrant_store::{EventStore, PostgresStore, StoreError};
use warrant_testkit::pg::{Throwaway, TlsFiles};

use super::conformance::clock;

fn server() -> &'static (Throwaway, TlsFiles) {
    static SERVER: OnceLock<(Throwaway, TlsFiles)> = OnceLock::new();
    SERVER.get_or_init(|| Throwaway::start_tls().expect("a TLS PostgreSQL server for the tests"))
}

/// A fresh database on the TLS server, and its URL over TCP to `host` with `query` appended.
fn url(host: &str, user: &str, query: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let (server, _) = server();
    let name = format!(
        "tls_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    );
    let mut admin = Client::connect(&server.url, NoTls).unwrap();
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .unwrap();
    format!("postgres://{user}@{host}:{}/{name}?{query}", server.port())
}

fn files() -> &'static TlsFiles {
    &server().1
}

fn open(url: &str) -> Result<PostgresStore, StoreError> {
    PostgresStore::connect(url, clock())
}

/// The store works over the connection: a run is created and read back.
fn works(store: &PostgresStore) {
    let run = super::conformance::started_run(store, "run-7e5");
    assert_eq!(store.events(&run).unwrap().len(), 1);
}

#[test]
fn verify_full_checks_the_chain_and_the_name_and_doctor_says_so() {
    let ca = files().ca.display().to_string();
    let store = open(&url(
        "127.0.0.1",
        "postgres",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    ))
    .unwrap();
    works(&store);
    let transport = store.transport().unwrap();
    assert!(transport.starts_with("TLS (TLSv1."), "{transport}");
    assert!(
        transport.contains("certificate and host name verified (sslmode=verify-full)"),
        "{transport}"
    );
}

#[test]
fn a_server_whose_certificate_no_trusted_root_signed_is_refused_at_once() {
    let other = files().other_ca.display().to_string();
    for mode in ["verify-full", "verify-ca", "require"] {
        let err = open(&url(
            "127.0.0.1",
            "postgres",
            &format!("sslmode={mode}&sslrootcert={other}"),
        ))
        .unwrap_err();
        // Refused, not retried as if the server were away.
        assert_eq!(err.code(), "W-STORE-001", "{mode}: {err}");
        assert!(err.to_string().contains("UnknownIssuer"), "{mode}: {err}");
    }
    // The negative control: without roots, `require` encrypts without authenticating (libpq's
    // meaning), and the same server is accepted.
    let store = open(&url("127.0.0.1", "postgres", "sslmode=require")).unwrap();
    works(&store);
    assert!(
        store
            .transport()
            .unwrap()
            .contains("server not authenticated"),
        "{}",
        store.transport().unwrap()
    );
}

#[test]
fn a_name_the_certificate_does_not_carry_fails_verify_full_only() {
    let ca = files().ca.display().to_string();
    // The certificate names 127.0.0.1 and db.warrant.test, not localhost.
    let err = open(&url(
        "localhost",
        "postgres",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    ))
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("certificate not valid for name \"localhost\""),
        "{err}"
    );
    let store = open(&url(
        "localhost",
        "postgres",
        &format!("sslmode=verify-ca&sslrootcert={ca}"),
    ))
    .unwrap();
    assert!(
        store
            .transport()
            .unwrap()
            .contains("certificate chain verified, host name not checked"),
        "{}",
        store.transport().unwrap()
    );
}

#[test]
fn plain_tcp_is_what_the_server_refuses_and_prefer_negotiates_tls() {
    let err = open(&url("127.0.0.1", "postgres", "sslmode=disable")).unwrap_err();
    assert!(err.to_string().contains("no encryption"), "{err}");
    let store = open(&url("127.0.0.1", "postgres", "")).unwrap();
    let transport = store.transport().unwrap();
    assert!(
        transport.starts_with("TLS (") && transport.ends_with("(sslmode=prefer)"),
        "{transport}"
    );
}

#[test]
fn a_client_certificate_logs_in_a_role_that_has_no_other_way_in() {
    let f = files();
    let ca = f.ca.display().to_string();
    let with_cert = format!(
        "sslmode=verify-full&sslrootcert={ca}&sslcert={}&sslkey={}",
        f.client_cert.display(),
        f.client_key.display()
    );
    works(&open(&url("127.0.0.1", "certuser", &with_cert)).unwrap());
    // The negative control: the same role without its certificate is refused by the server.
    let err = open(&url(
        "127.0.0.1",
        "certuser",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    ))
    .unwrap_err();
    assert!(err.to_string().contains("certificate"), "{err}");
}

#[test]
fn a_client_key_others_can_read_is_refused_before_connecting() {
    let f = files();
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("client.key");
    std::fs::copy(&f.client_key, &key).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = open(&format!(
        "postgres://certuser@127.0.0.1:1/x?sslmode=verify-full&sslrootcert={}&sslcert={}&sslkey={}",
        f.ca.display(),
        f.client_cert.display(),
        key.display()
    ))
    .unwrap_err();
    assert_eq!(err.code(), "W-STORE-001");
    assert!(err.to_string().contains("make it 0600"), "{err}");
}

#[test]
fn unsupported_modes_are_named() {
    let err = open("postgres://u@127.0.0.1:1/x?sslmode=allow").unwrap_err();
    assert!(
        err.to_string().contains("sslmode `allow` is not supported"),
        "{err}"
    );
}
