//! The fallback PostgreSQL server and URL handling of the test kit, checked here.
#![allow(clippy::print_stderr)]

use warrant_testkit::pg::{TestDb, Throwaway, with_dbname};

/// The fallback path, run by hand (`cargo test -p warrant-store -- --ignored`): a throwaway
/// server starts, serves a store, and is gone after.
#[test]
#[ignore = "starts its own PostgreSQL server; run with --ignored to check the fallback"]
fn throwaway_server_starts_serves_and_stops() {
    let server = Throwaway::start().unwrap();
    eprintln!("started {} in {}", server.url, server.dir.display());
    {
        let db = TestDb::on(&server.url);
        super::conformance::basics(&super::conformance::PgBackend::on(db));
    }
    let dir = server.dir.clone();
    drop(server);
    assert!(!dir.exists(), "{} was not removed", dir.display());
}

#[test]
fn database_names_are_replaced_in_urls() {
    assert_eq!(
        [
            with_dbname("postgres://postgres@127.0.0.1:5432/postgres", "t1"),
            with_dbname("postgres://u:p@h/db?sslmode=disable", "t1"),
            with_dbname("postgres://h:5", "t1"),
        ],
        [
            "postgres://postgres@127.0.0.1:5432/t1".to_owned(),
            "postgres://u:p@h/t1?sslmode=disable".to_owned(),
            "postgres://h:5/t1".to_owned(),
        ]
    );
}
