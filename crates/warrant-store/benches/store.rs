//! What the store costs over its driver, each figure against a raw baseline through the same
//! driver in the same run, on SQLite (a file under `TMPDIR`) and PostgreSQL (a fresh
//! `TestDb`): `store_append` appends one event per `EventStore::append` (one transaction with
//! its audit record) against one raw `INSERT` per transaction; `store_replay` reads a
//! 10,000-event run back (and folds it into a `RunState`) against a raw `SELECT payload`;
//! `store_lease` drains 400 queued runs with `lease_next` from 1 and 4 workers, each worker
//! with its own connection. See docs/BENCHMARKS.md for the figures and their caveats.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};
use tempfile::TempDir;
use warrant_core::{
    CanonicalPath, Clock, Digest, IdSource, Principal, PrincipalKind, RunId, SequentialIds,
    SystemClock,
};
use warrant_kernel::{CallRecord, RunEvent, RunSettings, RunState};
use warrant_store::{
    Append, ChainHead, EventDraft, EventStore, NewRun, PostgresStore, RunStatus, SealedRecord,
    Sealer, SqliteStore, StoredEvent,
};
use warrant_testkit::pg::TestDb;

/// Bytes of the audit line the trivial sealer returns for every event.
const LINE_BYTES: usize = 256;
/// Events in the run the replay group reads back.
const REPLAY_EVENTS: u64 = 10_000;
/// Runs queued before each timed drain of the lease group.
const QUEUED_RUNS: usize = 400;
const LEASE_TTL: Duration = Duration::from_secs(600);

/// Seals every event into the same fixed-size line: the chain bookkeeping the store does
/// stays, the hashing and signing of warrant-audit's `InstallationSealer` is left out.
struct FixedSealer {
    line: String,
}

impl FixedSealer {
    fn new() -> Self {
        Self {
            line: "a".repeat(LINE_BYTES),
        }
    }
}

impl Sealer for FixedSealer {
    fn seal(
        &self,
        head: &ChainHead,
        _event: &StoredEvent,
        _audit: &Value,
        _batch_end: u64,
    ) -> Result<SealedRecord, String> {
        let seq = head.seq + 1;
        Ok(SealedRecord {
            seq,
            id: format!("rec-{seq}"),
            hash: head.hash.clone(),
            line: self.line.clone(),
        })
    }
}

/// The event appended in the append group: a small, fixed payload.
fn small_draft() -> EventDraft {
    EventDraft {
        kind: "run_resumed".into(),
        version: 1,
        payload: json!({"by": "alice"}),
        audit: json!({}),
        usage: None,
    }
}

fn new_run(ids: &SequentialIds, status: RunStatus) -> NewRun {
    NewRun {
        run: ids.run_id(),
        tenant: bench_tenant(),
        actor: "alice".into(),
        task: "bench".into(),
        status,
    }
}

/// The store's `events` table and the `runs` row its foreign key points at, for the raw
/// baselines (the same columns, key and reference; none of the store's other tables).
/// `options` ends the `CREATE TABLE` (the SQLite store's table is `WITHOUT ROWID`).
fn raw_schema(options: &str) -> String {
    format!(
        "CREATE TABLE runs (run_id TEXT PRIMARY KEY);
         CREATE TABLE events (
             run_id      TEXT NOT NULL REFERENCES runs(run_id),
             seq         BIGINT NOT NULL,
             kind        TEXT NOT NULL,
             version     BIGINT NOT NULL,
             recorded_at BIGINT NOT NULL,
             payload     TEXT NOT NULL,
             PRIMARY KEY (run_id, seq)
         ){options};
         INSERT INTO runs (run_id) VALUES ('run-1');"
    )
}

/// A raw SQLite database configured as the store configures its own.
fn raw_sqlite(dir: &Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(dir.join("raw.db")).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "synchronous", "FULL").unwrap();
    conn.pragma_update(None, "foreign_keys", "ON").unwrap();
    conn.execute_batch(&raw_schema(" WITHOUT ROWID")).unwrap();
    conn
}

fn raw_postgres(db: &TestDb) -> postgres::Client {
    let mut client = db.client();
    client.batch_execute(&raw_schema("")).unwrap();
    client
}

fn sqlite_store(dir: &TempDir) -> SqliteStore {
    SqliteStore::create(&dir.path().join("store.db"), Arc::new(SystemClock)).unwrap()
}

fn postgres_store(db: &TestDb) -> PostgresStore {
    PostgresStore::connect(&db.url, Arc::new(SystemClock)).unwrap()
}

/// Appends `draft` one event per call, tracking the sequence number.
struct Appender<'a> {
    store: &'a dyn EventStore,
    sealer: &'a FixedSealer,
    run: RunId,
    next_seq: u64,
}

impl<'a> Appender<'a> {
    fn start(store: &'a dyn EventStore, sealer: &'a FixedSealer, ids: &SequentialIds) -> Self {
        let run = new_run(ids, RunStatus::Running);
        store.create_run(&run, vec![small_draft()], sealer).unwrap();
        Self {
            store,
            sealer,
            run: run.run,
            next_seq: 2,
        }
    }

    fn append(&mut self, events: Vec<EventDraft>) {
        let n = events.len() as u64;
        let stored = self
            .store
            .append(
                Append {
                    run: self.run.clone(),
                    expected_seq: self.next_seq,
                    events,
                    status: None,
                    requests: vec![],
                    fence: None,
                },
                self.sealer,
            )
            .unwrap();
        assert_eq!(stored.len() as u64, n);
        self.next_seq += n;
    }
}

fn store_append(c: &mut Criterion) {
    let sealer = FixedSealer::new();
    let ids = SequentialIds::default();
    let payload = small_draft().payload.to_string();
    eprintln!(
        "store_append: payload {} bytes, audit line {LINE_BYTES} bytes",
        payload.len()
    );

    let dir = tempfile::tempdir().unwrap();
    let sqlite = sqlite_store(&dir);
    let raw_lite = raw_sqlite(dir.path());
    let db = TestDb::new();
    let pg = postgres_store(&db);
    let raw_db = TestDb::new();
    let mut raw_pg = raw_postgres(&raw_db);

    let mut group = c.benchmark_group("store_append");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Elements(1));

    let mut seq = 0i64;
    group.bench_function("sqlite_raw_insert", |b| {
        let mut insert = raw_lite
            .prepare_cached("INSERT INTO events (run_id, seq, kind, version, recorded_at, payload) VALUES ('run-1', ?1, 'run_resumed', 1, ?2, ?3)")
            .unwrap();
        b.iter(|| {
            seq += 1;
            raw_lite.execute_batch("BEGIN IMMEDIATE").unwrap();
            insert
                .execute(rusqlite::params![seq, SystemClock.now().millis(), payload])
                .unwrap();
            raw_lite.execute_batch("COMMIT").unwrap();
        })
    });
    let mut appender = Appender::start(&sqlite, &sealer, &ids);
    group.bench_function("sqlite_store_append", |b| {
        b.iter(|| appender.append(vec![small_draft()]))
    });

    let mut seq = 0i64;
    group.bench_function("postgres_raw_insert", |b| {
        let insert = raw_pg
            .prepare("INSERT INTO events (run_id, seq, kind, version, recorded_at, payload) VALUES ('run-1', $1, 'run_resumed', 1, $2, $3)")
            .unwrap();
        b.iter(|| {
            seq += 1;
            let mut tx = raw_pg.transaction().unwrap();
            tx.execute(&insert, &[&seq, &SystemClock.now().millis(), &payload])
                .unwrap();
            tx.commit().unwrap();
        })
    });
    let mut appender = Appender::start(&pg, &sealer, &ids);
    group.bench_function("postgres_store_append", |b| {
        b.iter(|| appender.append(vec![small_draft()]))
    });
    group.finish();
}

/// A run's log as the kernel writes it: `run_started`, then tool calls of four events each
/// (`model_responded` with one call, `action_proposed`, `effect_started`, `effect_completed`
/// with a few hundred bytes of output), cut at `total` events. Every event folds.
fn replay_log(total: u64) -> Vec<EventDraft> {
    let workspace = CanonicalPath::from_normalized("/work/ws").unwrap();
    let started = RunEvent::RunStarted {
        principal: Principal {
            tenant: "acme".into(),
            actor: "alice".into(),
            kind: PrincipalKind::User,
            on_behalf_of: None,
            roles: vec!["dev".into()],
            teams: vec![],
            attrs: BTreeMap::new(),
        },
        task: "bench".into(),
        model: "bench".into(),
        workspace,
        policy_digest: Digest::of_bytes(b"policy"),
        settings: RunSettings {
            agent_profile: None,
            delegation: None,
            graph: None,
            skills: Vec::new(),
            max_denials: 1_000_000,
            max_turns: 1_000_000,
            deadline: None,
            requests: Default::default(),
            max_tool_calls: None,
            session: None,
            spawn: None,
            standing: None,
            rate: None,
            ceiling: None,
            strict: false,
        },
        tools: vec!["run_command".into(), "read_file".into()],
        tools_digest: None,
        profiles_digest: None,
    };
    let mut events = vec![started];
    let mut turn = 0u32;
    while (events.len() as u64) < total {
        let call_id = format!("call-{turn}");
        let args = json!({"argv": ["cargo", "test", "-p", "warrant-store"]});
        events.push(RunEvent::ModelResponded {
            turn,
            text: Some("Running the store tests.".into()),
            calls: vec![CallRecord {
                id: call_id.clone(),
                tool: "run_command".into(),
                args: args.clone(),
            }],
            usage: None,
            model: "bench".into(),
            request: None,
        });
        events.push(RunEvent::ActionProposed {
            call_id: call_id.clone(),
            tool: "run_command".into(),
            actions: vec![],
            digest: Digest::of_bytes(args.to_string().as_bytes()),
        });
        events.push(RunEvent::EffectStarted {
            call_id: call_id.clone(),
            approval: None,
            session_grant: None,
        });
        events.push(RunEvent::EffectCompleted {
            call_id,
            ok: true,
            result: json!({"exit_code": 0, "stdout": "test result: ok. 42 passed; 0 failed\n".repeat(8), "stderr": ""}),
        });
        turn += 1;
    }
    events.truncate(total as usize);
    events
        .into_iter()
        .map(|e| EventDraft {
            kind: e.kind().to_owned(),
            version: 1,
            payload: e.payload().unwrap(),
            audit: json!({}),
            usage: None,
        })
        .collect()
}

/// Writes the log into `store` (untimed), in batches of 100 events per append.
fn build_run(store: &dyn EventStore, sealer: &FixedSealer, log: &[EventDraft]) -> RunId {
    let ids = SequentialIds::default();
    let run = new_run(&ids, RunStatus::Running);
    store
        .create_run(&run, vec![log[0].clone()], sealer)
        .unwrap();
    let mut appender = Appender {
        store,
        sealer,
        run: run.run,
        next_seq: 2,
    };
    for chunk in log[1..].chunks(100) {
        appender.append(chunk.to_vec());
    }
    appender.run
}

fn store_replay(c: &mut Criterion) {
    let sealer = FixedSealer::new();
    let log = replay_log(REPLAY_EVENTS);
    let bytes: usize = log.iter().map(|e| e.payload.to_string().len()).sum();
    eprintln!(
        "store_replay: {} events, {bytes} bytes of payload JSON",
        log.len()
    );

    let dir = tempfile::tempdir().unwrap();
    let sqlite = sqlite_store(&dir);
    let db = TestDb::new();
    let pg = postgres_store(&db);
    let lite_run = build_run(&sqlite, &sealer, &log);
    let pg_run = build_run(&pg, &sealer, &log);
    // The raw readers get their own connections to the same stores and tables.
    let raw_lite = rusqlite::Connection::open(dir.path().join("store.db")).unwrap();
    let mut raw_pg = db.client();

    // Check the log is whole and folds before timing anything.
    for (store, run) in [
        (&sqlite as &dyn EventStore, &lite_run),
        (&pg as &dyn EventStore, &pg_run),
    ] {
        let events = store.events(run).unwrap();
        assert_eq!(events.len() as u64, REPLAY_EVENTS);
        let state = RunState::fold(&events).unwrap();
        assert_eq!(state.next_seq, REPLAY_EVENTS + 1);
    }

    let mut group = c.benchmark_group("store_replay");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Elements(REPLAY_EVENTS));

    group.bench_function("sqlite_raw_select", |b| {
        let mut stmt = raw_lite
            .prepare_cached("SELECT payload FROM events WHERE run_id = ?1 ORDER BY seq")
            .unwrap();
        b.iter(|| {
            let rows: Vec<String> = stmt
                .query_map([lite_run.as_str()], |r| r.get(0))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap();
            assert_eq!(rows.len() as u64, REPLAY_EVENTS);
            black_box(rows)
        })
    });
    group.bench_function("sqlite_store_events", |b| {
        b.iter(|| black_box(sqlite.events(&lite_run).unwrap()))
    });
    group.bench_function("sqlite_store_events_fold", |b| {
        b.iter(|| black_box(RunState::fold(&sqlite.events(&lite_run).unwrap()).unwrap()))
    });

    group.bench_function("postgres_raw_select", |b| {
        let stmt = raw_pg
            .prepare("SELECT payload FROM events WHERE run_id = $1 ORDER BY seq")
            .unwrap();
        b.iter(|| {
            let rows: Vec<String> = raw_pg
                .query(&stmt, &[&pg_run.as_str()])
                .unwrap()
                .iter()
                .map(|r| r.get(0))
                .collect();
            assert_eq!(rows.len() as u64, REPLAY_EVENTS);
            black_box(rows)
        })
    });
    group.bench_function("postgres_store_events", |b| {
        b.iter(|| black_box(pg.events(&pg_run).unwrap()))
    });
    group.bench_function("postgres_store_events_fold", |b| {
        b.iter(|| black_box(RunState::fold(&pg.events(&pg_run).unwrap()).unwrap()))
    });
    group.finish();
}

/// Puts every run back in the queue, lease and all, in one statement (untimed).
const REQUEUE: &str =
    "UPDATE runs SET status = 'queued', lease_holder = NULL, lease_expires = NULL";

/// Drains the queue with `workers.len()` threads, each calling `lease_next` on its own
/// handle until there is nothing left; returns the time from the start signal to the last
/// worker's `None`, and checks every queued run was leased exactly once.
fn drain(workers: &[Box<dyn EventStore + Send + Sync>]) -> Duration {
    let start = Barrier::new(workers.len() + 1);
    let (elapsed, leased) = std::thread::scope(|s| {
        let handles: Vec<_> = workers
            .iter()
            .enumerate()
            .map(|(i, store)| {
                let start = &start;
                s.spawn(move || {
                    let holder = format!("worker-{i}");
                    let mut runs = Vec::new();
                    start.wait();
                    while let Some(lease) = store.lease_next(&holder, LEASE_TTL).unwrap() {
                        runs.push(lease.run);
                    }
                    runs
                })
            })
            .collect();
        start.wait();
        let t0 = Instant::now();
        let mut leased: Vec<_> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        let elapsed = t0.elapsed();
        leased.sort();
        (elapsed, leased)
    });
    let before = leased.len();
    let mut unique = leased;
    unique.dedup();
    assert_eq!((before, unique.len()), (QUEUED_RUNS, QUEUED_RUNS));
    elapsed
}

fn store_lease(c: &mut Criterion) {
    let sealer = FixedSealer::new();
    let ids = SequentialIds::default();

    let dir = tempfile::tempdir().unwrap();
    let lite_path = dir.path().join("store.db");
    let sqlite = sqlite_store(&dir);
    let db = TestDb::new();
    let pg = postgres_store(&db);
    for store in [&sqlite as &dyn EventStore, &pg] {
        for _ in 0..QUEUED_RUNS {
            store
                .create_run(
                    &new_run(&ids, RunStatus::Queued),
                    vec![small_draft()],
                    &sealer,
                )
                .unwrap();
        }
    }
    let raw_lite = rusqlite::Connection::open(&lite_path).unwrap();
    let mut raw_pg = db.client();
    let open_lite = |n: usize| -> Vec<Box<dyn EventStore + Send + Sync>> {
        (0..n)
            .map(|_| {
                Box::new(SqliteStore::open(&lite_path, Arc::new(SystemClock)).unwrap())
                    as Box<dyn EventStore + Send + Sync>
            })
            .collect()
    };
    let open_pg = |n: usize| -> Vec<Box<dyn EventStore + Send + Sync>> {
        (0..n)
            .map(|_| Box::new(postgres_store(&db)) as Box<dyn EventStore + Send + Sync>)
            .collect()
    };

    let mut group = c.benchmark_group("store_lease");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Elements(QUEUED_RUNS as u64));

    for workers in [1usize, 4] {
        let handles = open_lite(workers);
        group.bench_function(format!("sqlite_{workers}_workers"), |b| {
            b.iter_custom(|iters| {
                let mut timed = Duration::ZERO;
                for _ in 0..iters {
                    raw_lite.execute_batch(REQUEUE).unwrap();
                    timed += drain(&handles);
                }
                timed
            })
        });
    }
    for workers in [1usize, 4] {
        let handles = open_pg(workers);
        group.bench_function(format!("postgres_{workers}_workers"), |b| {
            b.iter_custom(|iters| {
                let mut timed = Duration::ZERO;
                for _ in 0..iters {
                    raw_pg.batch_execute(REQUEUE).unwrap();
                    timed += drain(&handles);
                }
                timed
            })
        });
    }
    group.finish();
}

criterion_group!(benches, store_append, store_replay, store_lease);
criterion_main!(benches);

/// A tenant for the runs of this file.
fn bench_tenant() -> warrant_store::Tenant {
    warrant_store::Tenant::of(&warrant_core::Principal {
        tenant: "acme".into(),
        actor: "alice".into(),
        kind: warrant_core::PrincipalKind::User,
        on_behalf_of: None,
        roles: vec![],
        teams: vec![],
        attrs: Default::default(),
    })
}
