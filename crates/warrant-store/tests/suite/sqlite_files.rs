//! Bad store files: each is refused with its own code, and nothing is written to them.

use std::fs;

use warrant_core::{Coded, Hint};
use warrant_store::{SCHEMA_VERSION, SqliteStore};

use super::conformance::clock;

#[test]
fn foreign_corrupt_truncated_and_newer_files_are_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();

    let text = dir.path().join("text.db");
    fs::write(&text, "this is not a database, it is a note\n".repeat(200)).unwrap();
    let before = fs::read(&text).unwrap();
    let err = SqliteStore::open(&text, clock()).unwrap_err();
    assert_eq!(err.code(), "W-STORE-002", "{err}");
    // What to do next is a hint each front end words, not a command in the message.
    assert_eq!(err.hint(), Some(Hint::InitAnew));
    assert!(!err.to_string().contains("warrant "), "{err}");
    assert_eq!(fs::read(&text).unwrap(), before);

    // A real store, truncated in the middle.
    let good = dir.path().join("good.db");
    drop(SqliteStore::create(&good, clock()).unwrap());
    // The store's last close leaves its commits in the WAL (no checkpoint on close): move
    // them into the file first, so the file alone is the whole store.
    rusqlite::Connection::open(&good)
        .unwrap()
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    let bytes = fs::read(&good).unwrap();
    let cut = dir.path().join("cut.db");
    fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let err = SqliteStore::open(&cut, clock()).unwrap_err();
    assert!(matches!(err.code(), "W-STORE-002"), "{err}");

    // SQLite with our version number but tables of our names that are not ours.
    let foreign = dir.path().join("foreign.db");
    {
        let conn = rusqlite::Connection::open(&foreign).unwrap();
        conn.execute_batch("CREATE TABLE runs (id INTEGER); INSERT INTO runs VALUES (7);")
            .unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION)
            .unwrap();
    }
    let err = SqliteStore::open(&foreign, clock()).unwrap_err();
    assert_eq!(err.code(), "W-STORE-002", "{err}");
    let kept: i64 = rusqlite::Connection::open(&foreign)
        .unwrap()
        .query_row("SELECT id FROM runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(kept, 7, "its rows are left as they were");

    // A store from a newer Warrant.
    let newer = dir.path().join("newer.db");
    drop(SqliteStore::create(&newer, clock()).unwrap());
    {
        let conn = rusqlite::Connection::open(&newer).unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
    }
    let err = SqliteStore::open(&newer, clock()).unwrap_err();
    assert_eq!(err.code(), "W-STORE-003");
    assert!(
        err.to_string()
            .contains(&format!("schema version {}", SCHEMA_VERSION + 1)),
        "{err}"
    );

    let missing = SqliteStore::open(&dir.path().join("none.db"), clock()).unwrap_err();
    assert_eq!(missing.code(), "W-STORE-001");
    assert_eq!(missing.hint(), Some(Hint::Init));
    assert!(
        missing.to_string().contains("no store there") && !missing.to_string().contains("warrant "),
        "{missing}"
    );
}
