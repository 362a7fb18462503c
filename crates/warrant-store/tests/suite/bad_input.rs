//! Bad input for both stores: an unreachable server, a schema from a newer Warrant, a database
//! that is not ours, and stores of the previous schema version that must open and keep their
//! events.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::json;
use warrant_core::{Coded, RunId, Timestamp};
use warrant_store::{
    Append, ChainHead, EventStore, PostgresStore, RunRow, RunStatus, SCHEMA_VERSION, SqliteStore,
    StoreError, StoredEvent,
};

use super::conformance::{ToySealer, clock, draft};
use warrant_testkit::pg::TestDb;

#[test]
fn an_unreachable_postgres_is_retried_with_backoff_then_named_without_its_password() {
    // A port that was free a moment ago: nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://warrant:s3cret@127.0.0.1:{port}/warrant");
    let started = Instant::now();
    let err = warrant_store::open(&url, clock()).err().unwrap();
    let waited = started.elapsed();
    assert_eq!(err.code(), "W-STORE-012");
    let StoreError::Unreachable {
        url: shown,
        attempts,
        message,
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(
        (shown.as_str(), *attempts),
        (
            format!("postgres://warrant@127.0.0.1:{port}/warrant").as_str(),
            4
        )
    );
    assert!(message.contains("refused"), "{message}");
    assert!(!format!("{err} {err:?}").contains("s3cret"), "{err:?}");
    // Pauses of 100, 200 and 400 ms between the four attempts.
    assert!(waited >= Duration::from_millis(700), "{waited:?}");
}

#[test]
fn a_postgres_store_never_shows_its_password() {
    let db = TestDb::new();
    let with_password = db.url.replacen("://postgres@", "://postgres:hunter2@", 1);
    let store = PostgresStore::connect(&with_password, clock()).unwrap();
    let shown = format!("{store:?}");
    assert!(!shown.contains("hunter2"), "{shown}");
    assert_eq!(store.url(), db.url);
}

/// The tables, their columns and what they hold: to see that nothing changed.
fn pg_dump(db: &TestDb) -> Vec<String> {
    let mut client = db.client();
    let mut out: Vec<String> = client
        .query(
            "SELECT table_name::text, column_name::text, data_type::text FROM information_schema.columns WHERE table_schema = current_schema() ORDER BY 1, 2",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| format!("{} {} {}", r.get::<_, String>(0), r.get::<_, String>(1), r.get::<_, String>(2)))
        .collect();
    for table in ["warrant_schema", "runs", "events", "audit"] {
        let rows = client
            .query(
                &format!("SELECT row_to_json(t)::text FROM {table} t ORDER BY 1"),
                &[],
            )
            .unwrap();
        out.extend(
            rows.iter()
                .map(|r| format!("{table}: {}", r.get::<_, String>(0))),
        );
    }
    out
}

#[test]
fn a_postgres_schema_from_a_newer_warrant_is_refused_untouched() {
    let db = TestDb::new();
    {
        let store = PostgresStore::connect(&db.url, clock()).unwrap();
        store
            .create_run(&v1_run(), vec![draft("run_started")], &ToySealer)
            .unwrap();
    }
    db.client()
        .execute(
            "UPDATE warrant_schema SET version = $1",
            &[&(SCHEMA_VERSION as i32 + 1)],
        )
        .unwrap();
    let before = pg_dump(&db);
    let err = PostgresStore::connect(&db.url, clock()).unwrap_err();
    assert_eq!(
        format!("{err:?}"),
        format!(
            "{:?}",
            StoreError::NewerSchema {
                path: db.url.clone(),
                found: SCHEMA_VERSION + 1,
                supported: SCHEMA_VERSION,
            }
        )
    );
    assert_eq!(err.code(), "W-STORE-003");
    assert_eq!(pg_dump(&db), before);
}

#[test]
fn a_postgres_database_with_foreign_tables_of_our_names_is_refused_untouched() {
    let db = TestDb::new();
    db.client()
        .batch_execute("CREATE TABLE runs (id INTEGER); INSERT INTO runs VALUES (7);")
        .unwrap();
    let before = pg_dump_runs(&db);
    let err = PostgresStore::connect(&db.url, clock()).unwrap_err();
    assert_eq!(err.code(), "W-STORE-002", "{err}");
    assert_eq!(pg_dump_runs(&db), before);
}

fn pg_dump_runs(db: &TestDb) -> Vec<String> {
    db.client()
        .query(
            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// The run every version-1 fixture holds.
fn v1_run() -> warrant_store::NewRun {
    warrant_store::NewRun {
        run: RunId::parse("run-000000000001").unwrap(),
        tenant: super::conformance::tenant("acme"),
        actor: "alice".into(),
        task: "t".into(),
        status: RunStatus::Running,
    }
}

/// A store migrated from version 1 keeps its run, events and chain, and has leases now.
fn check_migrated(store: &dyn EventStore) {
    // Its budget totals were backfilled from the events that record usage (not from an
    // `effect_completed` that happens to have the field), each cost rounded to billionths.
    let acme = super::conformance::tenant("acme");
    assert_eq!(
        warrant_store::Scoped::new(store, &acme)
            .budget_totals()
            .unwrap()
            .into_iter()
            .map(|t| (t.actor, t.usage, t.updated_at.millis()))
            .collect::<Vec<_>>(),
        vec![(
            "bob".to_owned(),
            warrant_store::Usage {
                input_tokens: 108,
                output_tokens: 25,
                cost_nanos: 2_100_000 + 400,
            },
            1_600_000_000_500
        )]
    );
    let run = v1_run().run;
    let at = Timestamp::from_millis(1_600_000_000_000).unwrap();
    assert_eq!(
        store.events(&run).unwrap(),
        vec![StoredEvent {
            run: run.clone(),
            seq: 1,
            kind: "run_started".into(),
            version: 1,
            recorded_at: at,
            payload: json!({"k": "run_started", "principal": {"tenant": "acme"}}),
        }]
    );
    // The run keeps the tenant its `run_started` recorded, and only that tenant sees it.
    let acme = super::conformance::tenant("acme");
    let globex = super::conformance::tenant("globex");
    assert_eq!(
        store.tenant_run(&acme, &run).unwrap().map(|r| r.run),
        Some(run.clone())
    );
    assert_eq!(store.tenant_run(&globex, &run).unwrap(), None);
    assert_eq!(store.tenant_events(&acme, &run).unwrap().len(), 1);
    assert_eq!(store.tenant_events(&globex, &run).unwrap(), vec![]);
    assert_eq!(
        store.run(&run).unwrap(),
        Some(RunRow {
            run: run.clone(),
            created_at: at,
            updated_at: at,
            actor: "alice".into(),
            task: "t".into(),
            status: RunStatus::Running,
            events: 1,
        })
    );
    assert_eq!(
        store.audit_head().unwrap(),
        ChainHead {
            seq: 1,
            hash: "v1-hash".into()
        }
    );
    let lease = store
        .lease_run(&run, "cli", Duration::from_secs(30))
        .unwrap();
    assert_eq!(lease.token, 1);
    store
        .append(
            Append {
                run,
                expected_seq: 2,
                events: vec![draft("after_upgrade")],
                status: None,
                requests: vec![],
                fence: Some(1),
            },
            &ToySealer,
        )
        .unwrap();
    assert_eq!(store.audit_head().unwrap().seq, 2);
}

/// A frozen copy of schema version 1 (SQLite), as an older Warrant wrote it.
const SQLITE_V1: &str = "
CREATE TABLE runs (run_id TEXT PRIMARY KEY, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
    actor TEXT NOT NULL, task TEXT NOT NULL, status TEXT NOT NULL, events INTEGER NOT NULL);
CREATE TABLE events (run_id TEXT NOT NULL REFERENCES runs(run_id), seq INTEGER NOT NULL,
    kind TEXT NOT NULL, version INTEGER NOT NULL, recorded_at INTEGER NOT NULL,
    payload TEXT NOT NULL, PRIMARY KEY (run_id, seq)) WITHOUT ROWID;
CREATE TABLE requests (request_id TEXT PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs(run_id),
    status TEXT NOT NULL, created_at INTEGER NOT NULL, summary TEXT NOT NULL);
CREATE INDEX requests_by_status ON requests(status, created_at);
CREATE TABLE audit (seq INTEGER PRIMARY KEY, record_id TEXT NOT NULL UNIQUE, hash TEXT NOT NULL,
    line TEXT NOT NULL);
";

/// The same version-1 contents in either store.
const V1_ROWS: &str = "
INSERT INTO runs VALUES ('run-000000000001', 1600000000000, 1600000000000, 'alice', 't', 'running', 1);
INSERT INTO events VALUES ('run-000000000001', 1, 'run_started', 1, 1600000000000, '{\"k\":\"run_started\",\"principal\":{\"tenant\":\"acme\"}}');
INSERT INTO audit VALUES (1, 'rec-1', 'v1-hash', '{\"seq\":1}');
INSERT INTO runs VALUES ('run-000000000002', 1600000000000, 1600000000500, 'bob', 't', 'stopped', 5);
INSERT INTO events VALUES ('run-000000000002', 1, 'run_started', 1, 1600000000000, '{\"principal\":{\"tenant\":\"acme\",\"actor\":\"bob\"}}');
INSERT INTO events VALUES ('run-000000000002', 2, 'model_responded', 1, 1600000000100, '{\"turn\":0,\"calls\":[],\"usage\":{\"input_tokens\":100,\"output_tokens\":20,\"cost_usd\":0.0021}}');
INSERT INTO events VALUES ('run-000000000002', 3, 'awaiting_message', 1, 1600000000200, '{\"turn\":1,\"usage\":{\"input_tokens\":3,\"output_tokens\":4,\"estimated\":true}}');
INSERT INTO events VALUES ('run-000000000002', 4, 'effect_completed', 1, 1600000000300, '{\"usage\":{\"input_tokens\":1000}}');
INSERT INTO events VALUES ('run-000000000002', 5, 'budget_exceeded', 1, 1600000000500, '{\"turn\":1,\"usage\":{\"input_tokens\":5,\"output_tokens\":1,\"cost_usd\":0.0000004}}');
";

#[test]
fn a_sqlite_store_of_version_1_is_migrated_and_keeps_its_events() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(SQLITE_V1).unwrap();
        conn.execute_batch(V1_ROWS).unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
    }
    let store = SqliteStore::open(&path, clock()).unwrap();
    check_migrated(&store);
    drop(store);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: u32 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
}

/// A frozen copy of schema version 1 (PostgreSQL).
const PG_V1: &str = "
CREATE TABLE warrant_schema (one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one), version INTEGER NOT NULL);
INSERT INTO warrant_schema (version) VALUES (1);
CREATE TABLE runs (run_id TEXT PRIMARY KEY, created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL,
    actor TEXT NOT NULL, task TEXT NOT NULL, status TEXT NOT NULL, events BIGINT NOT NULL);
CREATE TABLE events (run_id TEXT NOT NULL REFERENCES runs(run_id), seq BIGINT NOT NULL,
    kind TEXT NOT NULL, version BIGINT NOT NULL, recorded_at BIGINT NOT NULL,
    payload TEXT NOT NULL, PRIMARY KEY (run_id, seq));
CREATE TABLE requests (request_id TEXT PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs(run_id),
    status TEXT NOT NULL, created_at BIGINT NOT NULL, summary TEXT NOT NULL);
CREATE INDEX requests_by_status ON requests(status, created_at);
CREATE TABLE audit (seq BIGINT PRIMARY KEY, record_id TEXT NOT NULL UNIQUE, hash TEXT NOT NULL,
    line TEXT NOT NULL);
";

#[test]
fn a_postgres_store_of_version_1_is_migrated_and_keeps_its_events() {
    let db = TestDb::new();
    db.client()
        .batch_execute(&format!("{PG_V1}{V1_ROWS}"))
        .unwrap();
    let store = PostgresStore::connect(&db.url, clock()).unwrap();
    check_migrated(&store);
    let version: i32 = db
        .client()
        .query_one("SELECT version FROM warrant_schema", &[])
        .unwrap()
        .get(0);
    assert_eq!(version as u32, SCHEMA_VERSION);
}
