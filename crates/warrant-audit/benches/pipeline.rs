//! The audit pipeline's cost, each figure against a baseline in the same run:
//! `audit_pipeline` appends B events through `SqliteStore::append` (each one transaction with
//! its chained, Ed25519-signed outbox record) and delivers them to a `JsonlSink`, against
//! writing the same B sealed lines to a plain file with one `sync_data`; `audit_http` delivers
//! N records through `HttpSink` to a local receiver, against POSTing the same batch bodies with
//! a bare `ureq` agent; `audit_query_*` runs `query_audit` over 1,000,000 records, against the
//! same SELECT (and an index-friendly one) through rusqlite. See docs/BENCHMARKS.md.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

use std::fs::OpenOptions;
use std::hint::black_box;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use rusqlite::{Connection, params};
use serde_json::json;
use tempfile::TempDir;
use warrant_audit::{
    AuditKey, CLOUDEVENTS_BATCH, HttpSink, HttpSinkConfig, InstallationSealer, JsonlSink,
};
use warrant_core::{IdSource, RandomIds, RunId, SystemClock, Timestamp};
use warrant_store::{
    Append, AuditOutbox, AuditQuery, EventDraft, EventStore, NewRun, RunStatus, SealedRecord,
    SqliteStore,
};

/// Events appended (each its own transaction) per delivery to the file sink.
const FILE_BATCH: usize = 100;
/// Records delivered per HTTP measurement, and records per POST.
const HTTP_RECORDS: usize = 2_000;
const HTTP_BATCH: usize = 100;
/// The query bench's store.
const QUERY_RECORDS: u64 = 1_000_000;
const ACTORS: u64 = 100;
const RUNS: u64 = 10_000;
const QUERY_LIMIT: usize = 1_000;
/// Record times in the query store: one record every 100 ms from this instant on.
const T0_MS: i64 = 1_790_000_000_000;
const STEP_MS: i64 = 100;

/// A store with one run, sealed by a real installation key, in a temporary directory.
struct Fixture {
    dir: TempDir,
    store: SqliteStore,
    sealer: InstallationSealer,
    run: RunId,
    /// The seq the next event of `run` gets.
    next: u64,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ids: Arc<dyn IdSource> = Arc::new(RandomIds);
        let store =
            SqliteStore::create(&dir.path().join("store.db"), Arc::new(SystemClock)).unwrap();
        let sealer = InstallationSealer::new(AuditKey::generate(), "bench", ids.clone());
        let run = ids.run_id();
        store
            .create_run(
                &NewRun {
                    run: run.clone(),
                    tenant: bench_tenant(),
                    actor: "alice".into(),
                    task: "bench".into(),
                    status: RunStatus::Running,
                },
                vec![draft(0)],
                &sealer,
            )
            .unwrap();
        Self {
            dir,
            store,
            sealer,
            run,
            next: 2,
        }
    }

    /// One append of one event: one `BEGIN IMMEDIATE` transaction, fsync'd at commit.
    fn append_one(&mut self) {
        let stored = self
            .store
            .append(
                Append {
                    run: self.run.clone(),
                    expected_seq: self.next,
                    events: vec![draft(self.next)],
                    status: None,
                    requests: vec![],
                    fence: None,
                },
                &self.sealer,
            )
            .unwrap();
        assert_eq!(stored.len(), 1);
        self.next += 1;
    }
}

/// A `policy_decided` event with the facts the kernel would derive for an allowed `fs.read`
/// (the sealer adds run, event seq and kind).
fn draft(n: u64) -> EventDraft {
    let path = format!("/home/alice/project/src/module_{}.rs", n % 50);
    EventDraft {
        kind: "policy_decided".into(),
        version: 1,
        payload: json!({
            "call_id": format!("call-{n}"),
            "index": 0,
            "verdict": "allow",
            "risk": "low",
            "reasons": [{"policy": "workspace-read", "text": "reads inside the workspace"}],
        }),
        audit: json!({
            "actor": "alice",
            "tenant": "acme",
            "action": {"verb": "fs.read", "path": path},
            "resource": path,
            "decision": "allow",
            "reasons": ["workspace-read"],
            "risk": "low",
        }),
        usage: None,
    }
}

fn pipeline(c: &mut Criterion) {
    let mut fx = Fixture::new();
    let sink = JsonlSink::new(fx.dir.path().join("sink/audit.jsonl")).with_batch(FILE_BATCH);

    // One untimed round, checked, and its sealed lines become the baseline's bytes.
    for _ in 0..FILE_BATCH {
        fx.append_one();
    }
    let report = sink.deliver(&fx.store).unwrap();
    assert_eq!(report.delivered, FILE_BATCH as u64 + 1); // + the run's first event
    let head = fx.store.audit_head().unwrap();
    let sealed = fx
        .store
        .audit_records(head.seq - FILE_BATCH as u64, FILE_BATCH)
        .unwrap();
    assert_eq!(sealed.len(), FILE_BATCH);
    let lines: Vec<Vec<u8>> = sealed
        .iter()
        .map(|r| format!("{}\n", r.line).into_bytes())
        .collect();
    let bytes: usize = lines.iter().map(Vec::len).sum();
    eprintln!(
        "audit_pipeline: {FILE_BATCH} records per batch, {bytes} bytes of sealed lines ({} per record)",
        bytes / FILE_BATCH
    );
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(fx.dir.path().join("baseline.jsonl"))
        .unwrap();

    let mut group = c.benchmark_group("audit_pipeline");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .throughput(Throughput::Elements(FILE_BATCH as u64));
    group.bench_function("jsonl_write_batch_sync_data", |b| {
        b.iter(|| {
            // One write per line, as a naive appender would; the sink writes a batch at once.
            for line in &lines {
                file.write_all(line).unwrap();
            }
            file.sync_data().unwrap();
        })
    });
    group.bench_function("store_append_then_jsonl_deliver", |b| {
        b.iter(|| {
            for _ in 0..FILE_BATCH {
                fx.append_one();
            }
            let report = sink.deliver(&fx.store).unwrap();
            assert_eq!(report.delivered, FILE_BATCH as u64);
        })
    });
    // The split: the appends alone, and delivery alone (of records appended untimed).
    group.bench_function("store_append_only", |b| {
        b.iter(|| {
            for _ in 0..FILE_BATCH {
                fx.append_one();
            }
        })
    });
    group.bench_function("jsonl_deliver_only", |b| {
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            for _ in 0..iters {
                for _ in 0..FILE_BATCH {
                    fx.append_one();
                }
                let start = Instant::now();
                let report = sink.deliver(&fx.store).unwrap();
                timed += start.elapsed();
                assert!(report.delivered >= FILE_BATCH as u64);
            }
            timed
        })
    });
    group.finish();
}

/// A receiver that reads every body and answers 202, counting requests and body bytes.
struct Receiver {
    server: Arc<tiny_http::Server>,
    thread: Option<JoinHandle<()>>,
    requests: Arc<AtomicU64>,
    bytes: Arc<AtomicU64>,
    url: String,
}

impl Receiver {
    fn start() -> Self {
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").unwrap());
        let addr: SocketAddr = server.server_addr().to_ip().unwrap();
        let requests = Arc::new(AtomicU64::new(0));
        let bytes = Arc::new(AtomicU64::new(0));
        let thread = {
            let (server, requests, bytes) = (server.clone(), requests.clone(), bytes.clone());
            std::thread::spawn(move || {
                let mut body = Vec::with_capacity(256 * 1024);
                for mut request in server.incoming_requests() {
                    body.clear();
                    request.as_reader().read_to_end(&mut body).unwrap();
                    bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
                    requests.fetch_add(1, Ordering::Relaxed);
                    request.respond(tiny_http::Response::empty(202)).unwrap();
                }
            })
        };
        Self {
            server,
            thread: Some(thread),
            requests,
            bytes,
            url: format!("http://{addr}/audit"),
        }
    }

    fn counts(&self) -> (u64, u64) {
        (
            self.requests.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        )
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

/// What `HttpSink` POSTs for a batch: a JSON array of the sealed lines, byte for byte.
fn batch_body(records: &[SealedRecord]) -> String {
    let lines: Vec<&str> = records.iter().map(|r| r.line.as_str()).collect();
    format!("[{}]", lines.join(","))
}

fn http(c: &mut Criterion) {
    let fx = Fixture::new();
    // Setup only: the records in one transaction (the run's first event is record 1).
    fx.store
        .append(
            Append {
                run: fx.run.clone(),
                expected_seq: 2,
                events: (2..=HTTP_RECORDS as u64).map(draft).collect(),
                status: None,
                requests: vec![],
                fence: None,
            },
            &fx.sealer,
        )
        .unwrap();
    let records = fx.store.audit_records(0, HTTP_RECORDS + 1).unwrap();
    assert_eq!(records.len(), HTTP_RECORDS);
    let bodies: Vec<String> = records.chunks(HTTP_BATCH).map(batch_body).collect();
    let body_bytes: usize = bodies.iter().map(String::len).sum();

    let receiver = Receiver::start();
    let mut config = HttpSinkConfig::new(receiver.url.clone());
    config.batch = HTTP_BATCH;
    let sink = HttpSink::new("bench", config);
    let bare = ureq::Agent::new_with_defaults();

    // Check both sides send what is meant: every record, in the same bodies.
    let report = sink.deliver(&fx.store, 0).unwrap();
    assert_eq!(
        (report.delivered, report.batches, report.retries),
        (HTTP_RECORDS as u64, bodies.len() as u64, 0)
    );
    let after_sink = receiver.counts();
    assert_eq!(after_sink, (bodies.len() as u64, body_bytes as u64));
    for body in &bodies {
        let response = bare
            .post(&receiver.url)
            .content_type(CLOUDEVENTS_BATCH)
            .send(body.as_str())
            .unwrap();
        assert_eq!(response.status().as_u16(), 202);
    }
    assert_eq!(
        receiver.counts(),
        (2 * after_sink.0, 2 * after_sink.1),
        "the bare POSTs carry the sink's bytes"
    );
    eprintln!(
        "audit_http: {HTTP_RECORDS} records in {} POSTs of {HTTP_BATCH}, {body_bytes} body bytes",
        bodies.len()
    );

    let mut group = c.benchmark_group("audit_http");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .throughput(Throughput::Elements(HTTP_RECORDS as u64));
    group.bench_function("bare_ureq_post", |b| {
        b.iter(|| {
            for body in &bodies {
                let response = bare
                    .post(&receiver.url)
                    .content_type(CLOUDEVENTS_BATCH)
                    .send(body.as_str())
                    .unwrap();
                black_box(response.status());
            }
        })
    });
    // Where the difference goes: an agent configured as the sink configures its own (global
    // timeout, statuses not errors) sending the sink's headers, and the outbox reads alone.
    let configured = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(10)))
            .http_status_as_error(false)
            .build(),
    );
    group.bench_function("configured_ureq_post", |b| {
        b.iter(|| {
            for body in &bodies {
                let response = configured
                    .post(&receiver.url)
                    .content_type(CLOUDEVENTS_BATCH)
                    .header("Idempotency-Key", "0123456789abcdef")
                    .send(body.as_str())
                    .unwrap();
                assert_eq!(response.status().as_u16(), 202);
            }
        })
    });
    group.bench_function("outbox_read_only", |b| {
        b.iter(|| {
            let mut after = 0;
            loop {
                let batch = fx.store.audit_records(after, HTTP_BATCH).unwrap();
                let Some(last) = batch.last() else { break };
                after = last.seq;
                black_box(batch_body(&batch));
            }
        })
    });
    group.bench_function("http_sink_deliver", |b| {
        b.iter(|| {
            // The sink keeps no cursor: from 0, every iteration delivers all N again.
            let report = sink.deliver(&fx.store, 0).unwrap();
            assert_eq!(report.delivered, HTTP_RECORDS as u64);
        })
    });
    group.finish();
    drop(receiver);
}

/// splitmix64: a fixed, well-spread sequence, so every run seeds the same store.
fn mix(n: u64) -> u64 {
    let mut z = n.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn run_name(i: u64) -> String {
    format!("run-{i:012x}")
}

fn actor_name(i: u64) -> String {
    format!("user-{i:02}")
}

/// Inserts `QUERY_RECORDS` audit rows straight into the store's `audit` table (schema v3),
/// in one transaction. Rows are small JSON lines, not sealed records: only the query reads them.
fn seed(path: &Path) {
    let mut conn = Connection::open(path).unwrap();
    let tx = conn.transaction().unwrap();
    {
        let mut insert = tx
            .prepare(
                "INSERT INTO audit (seq, record_id, hash, line, at, run_id, actor, on_behalf_of, event, verb, resource, decision) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            )
            .unwrap();
        const EVENTS: [&str; 5] = [
            "action_proposed",
            "policy_decided",
            "effect_started",
            "effect_completed",
            "model_responded",
        ];
        const VERBS: [&str; 4] = ["fs.read", "fs.write", "shell.exec", "fs.list"];
        for seq in 1..=QUERY_RECORDS {
            let r = mix(seq);
            // Runs interleave, as concurrent runs do; about 100 records each.
            let run = run_name(r % RUNS);
            let actor = actor_name((r >> 16) % ACTORS);
            let event = EVENTS[((r >> 24) % 5) as usize];
            let verb = VERBS[((r >> 28) % 4) as usize];
            let resource = format!("/home/{actor}/project/src/file_{}.rs", (r >> 32) % 1000);
            // Decisions only on policy_decided: about 90 % allow, 7 % deny, 3 % ask.
            let decision = (event == "policy_decided").then_some(match (r >> 40) % 100 {
                0..90 => "allow",
                90..97 => "deny",
                _ => "ask",
            });
            let at = T0_MS + seq as i64 * STEP_MS;
            let time = Timestamp::from_millis(at).unwrap().rfc3339();
            let id = format!("{:012x}-{:012x}", at, r & 0xffff_ffff_ffff);
            let hash = format!("sha256:{r:064x}");
            let line = json!({
                "id": id,
                "seq": seq,
                "time": time,
                "subject": run,
                "data": {
                    "actor": actor,
                    "run": run,
                    "event": event,
                    "action": {"verb": verb, "path": resource},
                    "resource": resource,
                    "decision": decision,
                },
            })
            .to_string();
            insert
                .execute(params![
                    seq as i64,
                    id,
                    hash,
                    line,
                    at,
                    run,
                    actor,
                    Option::<&str>::None,
                    event,
                    verb,
                    resource,
                    decision
                ])
                .unwrap();
        }
    }
    tx.commit().unwrap();
}

/// `query_audit`'s statement, verbatim (crates/warrant-store/src/sqlite.rs).
const STORE_SQL: &str = "SELECT seq, record_id, hash, line FROM audit
                 WHERE (?1 IS NULL OR run_id = ?1) AND (?2 IS NULL OR actor = ?2)
                   AND (?3 IS NULL OR on_behalf_of = ?3) AND (?4 IS NULL OR verb LIKE ?4 || '.%')
                   AND (?5 IS NULL OR verb = ?5) AND (?6 IS NULL OR decision = ?6)
                   AND (?7 IS NULL OR at >= ?7) AND (?8 IS NULL OR at < ?8)
                 ORDER BY seq LIMIT ?9";

fn select(conn: &Connection, sql: &str, params: &[&dyn rusqlite::ToSql]) -> Vec<SealedRecord> {
    let mut stmt = conn.prepare_cached(sql).unwrap();
    let rows = stmt
        .query_map(params, |r| {
            Ok(SealedRecord {
                seq: r.get::<_, i64>(0)? as u64,
                id: r.get(1)?,
                hash: r.get(2)?,
                line: r.get(3)?,
            })
        })
        .unwrap();
    rows.collect::<rusqlite::Result<Vec<_>>>().unwrap()
}

/// One query three ways: through the store, the store's SELECT through rusqlite, and a SELECT
/// naming only the filters given (what the indexes are for).
struct QueryCase {
    name: &'static str,
    query: AuditQuery,
    indexed_sql: &'static str,
    indexed_params: Vec<Box<dyn rusqlite::ToSql>>,
}

fn store_params(q: &AuditQuery) -> Vec<Box<dyn rusqlite::ToSql>> {
    vec![
        Box::new(q.run.clone()),
        Box::new(q.actor.clone()),
        Box::new(q.on_behalf_of.clone()),
        Box::new(q.kind.clone()),
        Box::new(q.verb.clone()),
        Box::new(q.decision.clone()),
        Box::new(q.since.map(|t| t.millis())),
        Box::new(q.until.map(|t| t.millis())),
        Box::new(q.limit as i64),
    ]
}

fn query(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    drop(SqliteStore::create(&path, Arc::new(SystemClock)).unwrap());
    let start = Instant::now();
    seed(&path);
    let seeded = start.elapsed();
    let size = std::fs::metadata(&path).unwrap().len();
    eprintln!(
        "audit_query: seeded {QUERY_RECORDS} rows in {:.1} s ({} MB file)",
        seeded.as_secs_f64(),
        size / 1_000_000
    );
    let store = SqliteStore::open(&path, Arc::new(SystemClock)).unwrap();
    let conn = Connection::open(&path).unwrap();

    let (run, actor) = (run_name(4242), actor_name(42));
    // A 10-minute window in the middle of the ~28 hours the records span (6,000 records).
    let since = T0_MS + (QUERY_RECORDS as i64 / 2) * STEP_MS;
    let until = since + 10 * 60 * 1000;
    let limit = QUERY_LIMIT as i64;
    let cases = [
        QueryCase {
            name: "audit_query_run",
            query: AuditQuery {
                run: Some(run.clone()),
                limit: QUERY_LIMIT,
                ..AuditQuery::default()
            },
            indexed_sql: "SELECT seq, record_id, hash, line FROM audit WHERE run_id = ?1 ORDER BY seq LIMIT ?2",
            indexed_params: vec![Box::new(run), Box::new(limit)],
        },
        QueryCase {
            name: "audit_query_actor_decision",
            query: AuditQuery {
                actor: Some(actor.clone()),
                decision: Some("deny".into()),
                limit: QUERY_LIMIT,
                ..AuditQuery::default()
            },
            indexed_sql: "SELECT seq, record_id, hash, line FROM audit WHERE actor = ?1 AND decision = ?2 ORDER BY seq LIMIT ?3",
            indexed_params: vec![Box::new(actor), Box::new("deny"), Box::new(limit)],
        },
        QueryCase {
            name: "audit_query_time_range",
            query: AuditQuery {
                since: Timestamp::from_millis(since),
                until: Timestamp::from_millis(until),
                limit: QUERY_LIMIT,
                ..AuditQuery::default()
            },
            indexed_sql: "SELECT seq, record_id, hash, line FROM audit WHERE at >= ?1 AND at < ?2 ORDER BY seq LIMIT ?3",
            indexed_params: vec![Box::new(since), Box::new(until), Box::new(limit)],
        },
    ];

    for case in &cases {
        let same = store_params(&case.query);
        let same: Vec<&dyn rusqlite::ToSql> = same.iter().map(AsRef::as_ref).collect();
        let indexed: Vec<&dyn rusqlite::ToSql> =
            case.indexed_params.iter().map(AsRef::as_ref).collect();

        // All three must return the same records, or the comparison means nothing.
        let through_store = store.query_audit(&case.query).unwrap();
        assert_eq!(select(&conn, STORE_SQL, &same), through_store);
        assert_eq!(select(&conn, case.indexed_sql, &indexed), through_store);
        let plan = |sql: &str, params: &[&dyn rusqlite::ToSql]| -> String {
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let rows = stmt
                .query_map(params, |r| r.get::<_, String>(3))
                .unwrap()
                .collect::<rusqlite::Result<Vec<_>>>()
                .unwrap();
            rows.join("; ")
        };
        eprintln!(
            "{}: {} records; store plan: {}; indexed plan: {}",
            case.name,
            through_store.len(),
            plan(STORE_SQL, &same),
            plan(case.indexed_sql, &indexed)
        );

        let mut group = c.benchmark_group(case.name);
        group
            .sample_size(10)
            .sampling_mode(SamplingMode::Flat)
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(3));
        group.bench_function("store_query_audit", |b| {
            b.iter(|| black_box(store.query_audit(&case.query).unwrap()))
        });
        group.bench_function("rusqlite_same_select", |b| {
            b.iter(|| black_box(select(&conn, STORE_SQL, &same)))
        });
        group.bench_function("rusqlite_indexed_select", |b| {
            b.iter(|| black_box(select(&conn, case.indexed_sql, &indexed)))
        });
        group.finish();
    }
}

criterion_group!(benches, pipeline, http, query);
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
