//! Behaviour every `EventStore` must have, one suite run against SQLite and PostgreSQL: each
//! case takes a [`Backend`] that opens handles (own connections) on one fresh store.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use warrant_core::{Clock, FixedClock, IdSource, RequestId, RunId, SequentialIds, Timestamp};
use warrant_store::{
    Append, AuditQuery, CancelRequest, ChainHead, EventDraft, EventStore, FenceRejection,
    KillScope, KillSubject, Lease, NewRun, PostgresStore, RequestStatus, RequestUpdate, RunStatus,
    SealedRecord, Sealer, SinkState, SqliteStore, StopSignals, StoreError, StoredEvent,
};

use warrant_testkit::pg::TestDb;

/// The tenant `name`, as a principal of it would be scoped.
pub fn tenant(name: &str) -> warrant_store::Tenant {
    warrant_store::Tenant::of(&warrant_core::Principal {
        tenant: name.into(),
        actor: "alice".into(),
        kind: warrant_core::PrincipalKind::User,
        on_behalf_of: None,
        roles: vec![],
        teams: vec![],
        attrs: Default::default(),
    })
}

/// Opens handles on one store; each handle has its own connection, like separate processes.
pub trait Backend: Sync {
    fn open(&self, clock: Arc<dyn Clock>) -> Box<dyn EventStore + Send + Sync>;
}

/// A fresh SQLite store file in a temp dir, opened through `warrant_store::open`.
pub struct SqliteBackend {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl SqliteBackend {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        drop(SqliteStore::create(&path, clock()).unwrap());
        Self { _dir: dir, path }
    }
}

impl Backend for SqliteBackend {
    fn open(&self, clock: Arc<dyn Clock>) -> Box<dyn EventStore + Send + Sync> {
        warrant_store::open(self.path.to_str().unwrap(), clock).unwrap()
    }
}

/// A fresh PostgreSQL database, opened through `warrant_store::open`, dropped at the end.
pub struct PgBackend {
    db: TestDb,
}

impl PgBackend {
    pub fn new() -> Self {
        Self::on(TestDb::new())
    }

    /// The conformance cases check the one algorithm with toy sealers that keep one chain:
    /// the database is made a store of one partition before any case opens it (the
    /// partitioned chain, with the real sealer, is checked in warrant-audit's suite).
    pub fn on(db: TestDb) -> Self {
        PostgresStore::connect(&db.url, clock())
            .unwrap()
            .set_audit_partitions(1)
            .unwrap();
        Self { db }
    }
}

impl Backend for PgBackend {
    fn open(&self, clock: Arc<dyn Clock>) -> Box<dyn EventStore + Send + Sync> {
        warrant_store::open(&self.db.url, clock).unwrap()
    }
}

const T0: i64 = 1_700_000_000_000;

/// A clock the test moves by hand, shared by every handle of a case.
#[derive(Debug)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    pub fn at_t0() -> Arc<Self> {
        Arc::new(Self(AtomicI64::new(T0)))
    }

    pub fn advance(&self, by: Duration) {
        self.0.fetch_add(by.as_millis() as i64, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_millis(self.0.load(Ordering::SeqCst)).unwrap()
    }
}

/// `ms` milliseconds after T0.
fn t(ms: i64) -> Timestamp {
    Timestamp::from_millis(T0 + ms).unwrap()
}

/// Errors have no `PartialEq`; their `Debug` shows every field.
#[track_caller]
fn assert_err<T: std::fmt::Debug>(got: Result<T, StoreError>, want: StoreError) {
    assert_eq!(format!("{got:?}"), format!("{:?}", Err::<T, _>(want)));
}

/// A sealer that chains by concatenation, enough to see order and atomicity.
pub struct ToySealer;

impl Sealer for ToySealer {
    fn seal(
        &self,
        head: &ChainHead,
        event: &StoredEvent,
        audit: &Value,
        _batch_end: u64,
    ) -> Result<SealedRecord, String> {
        if audit == &json!("fail") {
            return Err("refused by test".into());
        }
        let seq = head.seq + 1;
        Ok(SealedRecord {
            seq,
            id: format!("rec-{seq}"),
            hash: format!("{}+{}", head.hash.len(), event.seq),
            line: json!({"seq": seq, "run": event.run, "event": event.seq, "kind": event.kind})
                .to_string(),
        })
    }
    /// A store of several partitions (PostgreSQL's default) hands each its own head; the toy
    /// line names the partition as the real one does.
    fn seal_in(
        &self,
        part: u64,
        head: &ChainHead,
        event: &StoredEvent,
        audit: &Value,
        batch_end: u64,
    ) -> Result<SealedRecord, String> {
        let mut record = self.seal(head, event, audit, batch_end)?;
        if part > 0 {
            record.id = format!("rec-{part}-{}", record.seq);
            let mut line: Value = serde_json::from_str(&record.line).unwrap();
            line["part"] = json!(part);
            record.line = line.to_string();
        }
        Ok(record)
    }
}

pub fn draft(kind: &str) -> EventDraft {
    EventDraft {
        kind: kind.into(),
        version: 1,
        payload: json!({"k": kind}),
        audit: json!({}),
        usage: None,
    }
}

/// A running run `id` (a `RunId` in text) with its first event, created in `store`.
pub fn started_run(store: &dyn EventStore, id: &str) -> RunId {
    started_run_sealed(store, id, &ToySealer)
}

/// [`started_run`], its first record sealed by `sealer`.
pub fn started_run_sealed(store: &dyn EventStore, id: &str, sealer: &dyn Sealer) -> RunId {
    let run = RunId::parse(id).unwrap();
    store
        .create_run(
            &NewRun {
                run: run.clone(),
                tenant: tenant("acme"),
                actor: "alice".into(),
                task: "t".into(),
                status: RunStatus::Running,
            },
            vec![draft("run_started")],
            sealer,
        )
        .unwrap();
    run
}

pub fn clock() -> Arc<FixedClock> {
    Arc::new(FixedClock(Timestamp::from_millis(T0).unwrap()))
}

/// What the original single-store test checked: create, append, conflicts, rollback on a
/// sealing failure, the request index and the outbox; then a second handle reads it all back.
pub fn basics(backend: &dyn Backend) {
    let handle = backend.open(clock());
    let store = handle.as_ref();
    let ids = SequentialIds::default();
    let run = ids.run_id();
    let created = store
        .create_run(
            &NewRun {
                run: run.clone(),
                tenant: tenant("acme"),
                actor: "alice".into(),
                task: "t".into(),
                status: RunStatus::Running,
            },
            vec![draft("run_started")],
            &ToySealer,
        )
        .unwrap();
    assert_eq!(created.len(), 1);
    assert_eq!(created[0].seq, 1);

    // A second create of the same run is refused.
    let again = store.create_run(
        &NewRun {
            run: run.clone(),
            tenant: tenant("acme"),
            actor: "alice".into(),
            task: "t".into(),
            status: RunStatus::Running,
        },
        vec![draft("run_started")],
        &ToySealer,
    );
    assert!(matches!(again, Err(StoreError::RunExists { .. })));

    let req = RequestId::parse("req-00aa").unwrap();
    store
        .append(
            Append {
                run: run.clone(),
                expected_seq: 2,
                events: vec![draft("a"), draft("b")],
                status: Some(RunStatus::Parked),
                requests: vec![RequestUpdate::Open {
                    id: req.clone(),
                    summary: json!({"what": "x"}),
                }],
                fence: None,
            },
            &ToySealer,
        )
        .unwrap();

    // Optimistic concurrency: a writer that read an older log writes nothing.
    let stale = store.append(
        Append {
            run: run.clone(),
            expected_seq: 2,
            events: vec![draft("late")],
            status: None,
            requests: vec![],
            fence: None,
        },
        &ToySealer,
    );
    assert!(
        matches!(
            stale,
            Err(StoreError::Conflict {
                expected: 2,
                found: 4,
                ..
            })
        ),
        "{stale:?}"
    );

    // A sealing failure rolls the whole append back.
    let mut failing = draft("c");
    failing.audit = json!("fail");
    let failed = store.append(
        Append {
            run: run.clone(),
            expected_seq: 4,
            events: vec![draft("ok-before"), failing],
            status: Some(RunStatus::Completed),
            requests: vec![RequestUpdate::Answered { id: req.clone() }],
            fence: None,
        },
        &ToySealer,
    );
    assert!(matches!(failed, Err(StoreError::Seal(_))));

    let kinds: Vec<(u64, String)> = store
        .events(&run)
        .unwrap()
        .into_iter()
        .map(|e| (e.seq, e.kind))
        .collect();
    assert_eq!(
        kinds,
        vec![(1, "run_started".into()), (2, "a".into()), (3, "b".into())]
    );
    let row = store.run(&run).unwrap().unwrap();
    assert_eq!(
        (row.status, row.events, row.actor.as_str()),
        (RunStatus::Parked, 3, "alice")
    );
    let open = store.requests(Some(RequestStatus::Open)).unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].summary, json!({"what": "x"}));

    store
        .append(
            Append {
                run,
                expected_seq: 4,
                events: vec![draft("end")],
                status: Some(RunStatus::Completed),
                requests: vec![RequestUpdate::Answered { id: req.clone() }],
                fence: None,
            },
            &ToySealer,
        )
        .unwrap();
    assert_eq!(
        store.request(&req).unwrap().unwrap().status,
        RequestStatus::Answered
    );
    assert_eq!(store.requests(Some(RequestStatus::Open)).unwrap(), vec![]);

    // The audit outbox holds one record per event, in commit order.
    let records = store.audit_records(0, 100).unwrap();
    let seqs: Vec<u64> = records.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, vec![1, 2, 3, 4]);
    assert_eq!(store.audit_records(2, 1).unwrap()[0].seq, 3);
    assert_eq!(store.audit_head().unwrap().seq, 4);
    assert!(matches!(
        store.append(
            Append {
                run: ids.run_id(),
                expected_seq: 1,
                events: vec![draft("x")],
                status: None,
                requests: vec![],
                fence: None
            },
            &ToySealer
        ),
        Err(StoreError::UnknownRun(_))
    ));

    drop(handle);
    let store = backend.open(clock());
    assert_eq!(store.runs().unwrap().len(), 1);
    assert_eq!(store.audit_head().unwrap().seq, 4);
}

fn start(store: &dyn EventStore, run: &RunId, status: RunStatus) {
    store
        .create_run(
            &NewRun {
                run: run.clone(),
                tenant: tenant("acme"),
                actor: "alice".into(),
                task: "t".into(),
                status,
            },
            vec![draft("run_started")],
            &ToySealer,
        )
        .unwrap();
}

fn append_to(run: &RunId, expected_seq: u64, kinds: &[&str], fence: Option<u64>) -> Append {
    Append {
        run: run.clone(),
        expected_seq,
        events: kinds.iter().map(|k| draft(k)).collect(),
        status: None,
        requests: vec![],
        fence,
    }
}

/// Leases: who may take a run, when, and what a holder that lost its lease can still do.
pub fn leases(backend: &dyn Backend) {
    let clock = ManualClock::at_t0();
    let store = backend.open(clock.clone());
    let store = store.as_ref();
    let ids = SequentialIds::default();
    let ttl = Duration::from_secs(30);
    let lease = |run: &RunId, holder: &str, token: u64, expires_at: Timestamp| Lease {
        run: run.clone(),
        holder: holder.into(),
        token,
        expires_at,
    };

    // Oldest first: a run its creator drives (never leased yet), then two queued runs.
    let driven = ids.run_id();
    start(store, &driven, RunStatus::Running);
    clock.advance(Duration::from_secs(1));
    let q1 = ids.run_id();
    start(store, &q1, RunStatus::Queued);
    clock.advance(Duration::from_secs(1));
    let q2 = ids.run_id();
    start(store, &q2, RunStatus::Queued);
    clock.advance(Duration::from_secs(1)); // T0 + 3s

    // Workers take the queued runs in order, never the run that was never leased.
    let w1 = store.lease_next("w1", ttl).unwrap();
    assert_eq!(w1, Some(lease(&q1, "w1", 1, t(33_000))));
    assert_eq!(store.run(&q1).unwrap().unwrap().status, RunStatus::Running);
    let w2 = store.lease_next("w2", ttl).unwrap().unwrap();
    assert_eq!(w2, lease(&q2, "w2", 2, t(33_000)));
    assert_eq!(store.lease_next("w3", ttl).unwrap(), None);

    // Its creator leases the driven run; nobody takes a run under a live lease.
    let cli = store.lease_run(&driven, "cli", ttl).unwrap();
    assert_eq!(cli, lease(&driven, "cli", 3, t(33_000)));
    assert_err(
        store.lease_run(&q1, "cli", ttl),
        StoreError::Leased {
            run: q1.to_string(),
            holder: "w1".into(),
            until: t(33_000).rfc3339(),
        },
    );

    // A heartbeat extends the lease from now.
    clock.advance(Duration::from_secs(10)); // T0 + 13s
    let w1 = store
        .heartbeat(&w1.unwrap(), Duration::from_secs(60))
        .unwrap();
    assert_eq!(w1, lease(&q1, "w1", 1, t(73_000)));

    // Expired leases are taken over, oldest run first, each with a new token (tokens come
    // from one counter for the whole store).
    clock.advance(Duration::from_secs(25)); // T0 + 38s
    let w3 = store.lease_next("w3", ttl).unwrap();
    assert_eq!(w3, Some(lease(&driven, "w3", 4, t(68_000))));
    let w3 = store.lease_next("w3", ttl).unwrap().unwrap();
    assert_eq!(w3, lease(&q2, "w3", 5, t(68_000)));
    assert_eq!(store.lease_next("w4", ttl).unwrap(), None);

    // The worker that lost q2 can neither extend its lease nor write.
    let fenced = StoreError::Fenced {
        run: q2.to_string(),
        presented: 2,
        current: 5,
    };
    assert_err(store.heartbeat(&w2, ttl), fenced);
    let fenced = StoreError::Fenced {
        run: q2.to_string(),
        presented: 2,
        current: 5,
    };
    assert_err(
        store.append(
            append_to(&q2, 2, &["late_a", "late_b"], Some(2)),
            &ToySealer,
        ),
        fenced,
    );
    assert_eq!(store.events(&q2).unwrap().len(), 1);
    assert_eq!(
        store.fence_rejections(&q2).unwrap(),
        vec![FenceRejection {
            run: q2.clone(),
            presented: 2,
            current: 5,
            at: t(38_000),
            kinds: vec!["late_a".into(), "late_b".into()],
        }]
    );
    assert_eq!(store.fence_rejections(&q1).unwrap(), vec![]);
    let written = store
        .append(append_to(&q2, 2, &["step"], Some(5)), &ToySealer)
        .unwrap();
    assert_eq!(written.len(), 1);

    // Releasing frees the run at once; releasing a superseded lease changes nothing.
    store.release(&w2).unwrap();
    assert_eq!(store.lease_next("w4", ttl).unwrap(), None);
    store.release(&w3).unwrap();
    let w4 = store.lease_next("w4", ttl).unwrap().unwrap();
    assert_eq!(w4, lease(&q2, "w4", 6, t(68_000)));
    store.release(&w4).unwrap();
    let cli2 = store.lease_run(&q2, "cli", ttl).unwrap();
    assert_eq!(cli2, lease(&q2, "cli", 7, t(68_000)));
    // Tokens are unique across the store: one run's token never passes for another's.
    assert_err(
        store.append(append_to(&q1, 2, &["borrowed"], Some(7)), &ToySealer),
        StoreError::Fenced {
            run: q1.to_string(),
            presented: 7,
            current: 1,
        },
    );

    // An ended run is never leased again.
    let mut end = append_to(&q2, 3, &["run_ended"], Some(7));
    end.status = Some(RunStatus::Completed);
    store.append(end, &ToySealer).unwrap();
    assert_err(
        store.lease_run(&q2, "w5", ttl),
        StoreError::Final {
            run: q2.to_string(),
            status: "completed".into(),
        },
    );
    clock.advance(Duration::from_secs(600));
    let taken: Vec<(RunId, u64)> = std::iter::from_fn(|| store.lease_next("w5", ttl).unwrap())
        .map(|l| (l.run, l.token))
        .collect();
    assert_eq!(taken, vec![(driven, 8), (q1, 9)]);

    let unknown = ids.run_id();
    assert_err(
        store.lease_run(&unknown, "w5", ttl),
        StoreError::UnknownRun(unknown.to_string()),
    );
    assert_err(
        store.heartbeat(&lease(&unknown, "w5", 1, t(0)), ttl),
        StoreError::UnknownRun(unknown.to_string()),
    );
}

/// Workers polling at once each get different runs, and every queued run is taken once.
pub fn lease_next_under_concurrency(backend: &dyn Backend) {
    const RUNS: usize = 12;
    let clock = ManualClock::at_t0();
    let ids = SequentialIds::default();
    let mut queued: Vec<RunId> = (0..RUNS).map(|_| ids.run_id()).collect();
    {
        let store = backend.open(clock.clone());
        for run in &queued {
            start(store.as_ref(), run, RunStatus::Queued);
        }
    }
    let taken: Vec<Vec<Lease>> = std::thread::scope(|s| {
        // All spawned before any is joined, so they poll at once.
        let mut workers = Vec::new();
        for holder in ["w1", "w2", "w3"] {
            let clock = clock.clone();
            workers.push(s.spawn(move || {
                let store = backend.open(clock);
                std::iter::from_fn(|| store.lease_next(holder, Duration::from_secs(30)).unwrap())
                    .collect::<Vec<_>>()
            }));
        }
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let mut got: Vec<RunId> = taken.iter().flatten().map(|l| l.run.clone()).collect();
    got.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    queued.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    assert_eq!(got, queued);
    // Every lease got its own token.
    let mut tokens: Vec<u64> = taken.iter().flatten().map(|l| l.token).collect();
    tokens.sort_unstable();
    assert_eq!(tokens, (1..=RUNS as u64).collect::<Vec<_>>(), "{taken:?}");
}

/// Cancellation: the first request stays, every handle sees it, unknown runs are named.
pub fn cancellation(backend: &dyn Backend) {
    let clock = ManualClock::at_t0();
    let store = backend.open(clock.clone());
    let ids = SequentialIds::default();
    let run = ids.run_id();
    start(store.as_ref(), &run, RunStatus::Running);
    assert_eq!(store.cancel_request(&run).unwrap(), None);

    store
        .request_cancel(&run, "bob", "taking too long")
        .unwrap();
    clock.advance(Duration::from_secs(5));
    store
        .request_cancel(&run, "carol", "changed my mind")
        .unwrap();
    let first = Some(CancelRequest {
        by: "bob".into(),
        reason: "taking too long".into(),
        at: t(0),
    });
    assert_eq!(store.cancel_request(&run).unwrap(), first);
    assert_eq!(
        backend.open(clock.clone()).cancel_request(&run).unwrap(),
        first
    );

    let unknown = ids.run_id();
    assert_err(
        store.request_cancel(&unknown, "bob", "x"),
        StoreError::UnknownRun(unknown.to_string()),
    );
    assert_err(
        store.cancel_request(&unknown),
        StoreError::UnknownRun(unknown.to_string()),
    );

    // What an effect boundary reads at once: the switch that stops the run (the oldest of
    // those that do) and the cancellation of the run and of each ancestor, in their order.
    let parent = ids.run_id();
    start(store.as_ref(), &parent, RunStatus::Running);
    let runs = [run.clone(), parent.clone()];
    let subject = KillSubject {
        tenant: "acme",
        actors: &["alice"],
        runs: &runs,
    };
    assert_eq!(
        store.stop_signals(&subject).unwrap(),
        StopSignals {
            kill: None,
            cancels: vec![first.clone(), None],
        }
    );
    store
        .set_kill(&KillScope::Tenant("globex".into()), "ops", "another tenant")
        .unwrap();
    clock.advance(Duration::from_secs(1));
    let by_actor = store
        .set_kill(&KillScope::Actor("alice".into()), "ops", "stop alice")
        .unwrap();
    clock.advance(Duration::from_secs(1));
    store
        .set_kill(&KillScope::Run(parent.clone()), "ops", "stop the parent")
        .unwrap();
    store.request_cancel(&parent, "dave", "done").unwrap();
    let read = store.stop_signals(&subject).unwrap();
    assert_eq!(
        read,
        StopSignals {
            kill: Some(by_actor),
            cancels: vec![
                first,
                Some(CancelRequest {
                    by: "dave".into(),
                    reason: "done".into(),
                    at: t(7_000),
                }),
            ],
        }
    );
    // The same as the reads it stands for.
    assert_eq!(
        read,
        StopSignals {
            kill: store.kill_for(&subject).unwrap(),
            cancels: runs
                .iter()
                .map(|r| store.cancel_request(r).unwrap())
                .collect(),
        }
    );
    let with_unknown = [run, unknown.clone()];
    assert_err(
        store.stop_signals(&KillSubject {
            tenant: "acme",
            actors: &["alice"],
            runs: &with_unknown,
        }),
        StoreError::UnknownRun(unknown.to_string()),
    );
}

/// Writes each record's predecessor and batch on its line, so the test can check afterwards
/// that what committed is one line (each record names the hash of the one before it) made of
/// whole batches. It does not refuse a seal out of order: a store may seal a record that never
/// commits (PostgreSQL's guarded append, when another writer moved the head first), and only
/// what committed is the chain.
struct ChainChecker;

/// The batch end a record was sealed with, as `ChainChecker` writes it on the line.
fn batch_end_on(line: &Value) -> u64 {
    line["batch_end"].as_u64().unwrap()
}

impl Sealer for ChainChecker {
    fn seal(
        &self,
        head: &ChainHead,
        event: &StoredEvent,
        _audit: &Value,
        batch_end: u64,
    ) -> Result<SealedRecord, String> {
        let seq = head.seq + 1;
        let hash = format!("h{seq}:{}:{}", event.run, event.seq);
        Ok(SealedRecord {
            seq,
            id: format!("rec-{seq}"),
            hash,
            line: json!({"seq": seq, "prev": head.hash, "run": event.run, "event": event.seq, "batch_end": batch_end})
                .to_string(),
        })
    }
}

/// Two writers on two connections append to two runs at once: the installation-wide chain
/// stays one line, sealed in commit order.
pub fn audit_order_under_concurrency(backend: &dyn Backend) {
    const APPENDS: u64 = 40;
    let checker = ChainChecker;
    let ids = SequentialIds::default();
    let runs = [ids.run_id(), ids.run_id()];
    std::thread::scope(|s| {
        for run in &runs {
            let checker = &checker;
            s.spawn(move || {
                let store = backend.open(clock());
                store
                    .create_run(
                        &NewRun {
                            run: run.clone(),
                            tenant: tenant("acme"),
                            actor: "alice".into(),
                            task: "t".into(),
                            status: RunStatus::Running,
                        },
                        vec![draft("run_started")],
                        checker,
                    )
                    .unwrap();
                for i in 0..APPENDS {
                    store
                        .append(append_to(run, 2 + 2 * i, &["a", "b"], None), checker)
                        .unwrap();
                }
            });
        }
    });
    let store = backend.open(clock());
    let records = store.audit_records(0, 1_000).unwrap();
    let total = 2 * (1 + 2 * APPENDS);
    assert_eq!(
        records.iter().map(|r| r.seq).collect::<Vec<_>>(),
        (1..=total).collect::<Vec<_>>()
    );
    let prevs: Vec<String> = records
        .iter()
        .skip(1)
        .map(|r| {
            let line: Value = serde_json::from_str(&r.line).unwrap();
            line["prev"].as_str().unwrap().to_owned()
        })
        .collect();
    let hashes: Vec<String> = records
        .iter()
        .take(records.len() - 1)
        .map(|r| r.hash.clone())
        .collect();
    assert_eq!(prevs, hashes);
    // Each transaction's records are one batch, told its end before any is sealed: a record
    // inside a batch is followed by the next of the same run and batch, and the batch closes
    // at its last record (batches never interleave, never span appends).
    let lines: Vec<Value> = records
        .iter()
        .map(|r| serde_json::from_str(&r.line).unwrap())
        .collect();
    let mut sizes = Vec::new();
    let mut start = 0usize;
    for (i, line) in lines.iter().enumerate() {
        let seq = line["seq"].as_u64().unwrap();
        let end = batch_end_on(line);
        assert!(end >= seq, "{line}");
        if end > seq {
            let next = &lines[i + 1];
            assert_eq!(
                (batch_end_on(next), &next["run"]),
                (end, &line["run"]),
                "{line} then {next}"
            );
        } else {
            sizes.push(i + 1 - start);
            start = i + 1;
        }
    }
    // One create (one event) and APPENDS appends (two events) per run.
    assert_eq!(sizes.iter().filter(|&&n| n == 1).count(), 2);
    assert_eq!(
        sizes.iter().filter(|&&n| n == 2).count(),
        2 * APPENDS as usize
    );
    assert_eq!(
        store.audit_head().unwrap(),
        ChainHead {
            seq: total,
            hash: records[records.len() - 1].hash.clone(),
        }
    );
    for run in &runs {
        let seqs: Vec<u64> = store.events(run).unwrap().iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=1 + 2 * APPENDS).collect::<Vec<_>>());
    }
}

/// A sealer whose lines carry the audit facts it is given, as the real one does.
struct FactSealer;

impl Sealer for FactSealer {
    fn seal(
        &self,
        head: &ChainHead,
        event: &StoredEvent,
        audit: &Value,
        _batch_end: u64,
    ) -> Result<SealedRecord, String> {
        let seq = head.seq + 1;
        Ok(SealedRecord {
            seq,
            id: format!("rec-{seq}"),
            hash: format!("h{seq}"),
            line: json!({"seq": seq, "time": event.recorded_at, "data": audit}).to_string(),
        })
    }
}

/// Sink delivery state and audit queries over the indexed records.
pub fn sinks_and_queries(backend: &dyn Backend) {
    let clock = ManualClock::at_t0();
    let store = backend.open(clock.clone());
    let store = store.as_ref();
    let ids = SequentialIds::default();
    let fact = |run: &RunId, actor: &str, verb: &str, decision: &str| EventDraft {
        kind: "policy_decided".into(),
        version: 1,
        payload: json!({}),
        audit: json!({"run": run, "actor": actor, "event": "policy_decided", "action": {"verb": verb, "path": "/w/x"}, "resource": "/w/x", "decision": decision}),
        usage: None,
    };
    let a = ids.run_id();
    let b = ids.run_id();
    for (run, actor) in [(&a, "alice"), (&b, "bob")] {
        store
            .create_run(
                &NewRun {
                    run: run.clone(),
                    tenant: tenant("acme"),
                    actor: actor.into(),
                    task: "t".into(),
                    status: RunStatus::Running,
                },
                vec![
                    fact(run, actor, "fs.read", "allow"),
                    fact(run, actor, "fs.delete", "ask"),
                    fact(run, actor, "shell.exec", "deny"),
                ],
                &FactSealer,
            )
            .unwrap();
        clock.advance(Duration::from_secs(60));
    }
    let seqs = |q: AuditQuery| -> Vec<u64> {
        store
            .query_audit(&q)
            .unwrap()
            .iter()
            .map(|r| r.seq)
            .collect()
    };
    assert_eq!(seqs(AuditQuery::default()), vec![1, 2, 3, 4, 5, 6]);
    assert_eq!(
        seqs(AuditQuery {
            run: Some(b.to_string()),
            ..Default::default()
        }),
        vec![4, 5, 6]
    );
    assert_eq!(
        seqs(AuditQuery {
            actor: Some("alice".into()),
            kind: Some("fs".into()),
            ..Default::default()
        }),
        vec![1, 2]
    );
    assert_eq!(
        seqs(AuditQuery {
            verb: Some("shell.exec".into()),
            ..Default::default()
        }),
        vec![3, 6]
    );
    assert_eq!(
        seqs(AuditQuery {
            decision: Some("ask".into()),
            limit: 1,
            ..Default::default()
        }),
        vec![2]
    );
    assert_eq!(
        seqs(AuditQuery {
            since: Some(t(60_000)),
            ..Default::default()
        }),
        vec![4, 5, 6]
    );
    assert_eq!(
        seqs(AuditQuery {
            until: Some(t(60_000)),
            ..Default::default()
        }),
        vec![1, 2, 3]
    );

    // Sink state: failures accumulate from the first one; a success clears them.
    assert_eq!(
        store.sink_state("http").unwrap(),
        SinkState {
            sink: "http".into(),
            ..Default::default()
        }
    );
    store
        .record_delivery_failure("http", 2, "503 from receiver")
        .unwrap();
    clock.advance(Duration::from_secs(30));
    store
        .record_delivery_failure("http", 3, "connection refused")
        .unwrap();
    let failing = store.sink_state("http").unwrap();
    assert_eq!(
        (
            failing.acknowledged,
            failing.last_error.as_deref(),
            failing.failing_since,
            failing.last_error_at
        ),
        (
            3,
            Some("connection refused"),
            Some(t(120_000)),
            Some(t(150_000))
        )
    );
    clock.advance(Duration::from_secs(30));
    store.record_delivery("http", 6, 3).unwrap();
    let ok = store.sink_state("http").unwrap();
    assert_eq!(
        (
            ok.acknowledged,
            ok.delivered_total,
            ok.last_success,
            ok.failing_since
        ),
        (6, 3, Some(t(180_000)), None)
    );
    // A late report from behind never moves the cursor back.
    clock.advance(Duration::from_secs(60));
    store.record_delivery("http", 4, 0).unwrap();
    let later = store.sink_state("http").unwrap();
    assert_eq!(
        (later.acknowledged, later.first_success, later.last_success),
        (6, Some(t(180_000)), Some(t(240_000)))
    );
}

/// An event recording model usage, as the kernel drafts one.
fn usage_draft(input: u64, output: u64, cost_nanos: u64) -> EventDraft {
    EventDraft {
        usage: Some(warrant_store::Usage {
            input_tokens: input,
            output_tokens: output,
            cost_nanos,
        }),
        ..draft("model_responded")
    }
}

fn usage(input: u64, output: u64, cost_nanos: u64) -> warrant_store::Usage {
    warrant_store::Usage {
        input_tokens: input,
        output_tokens: output,
        cost_nanos,
    }
}

/// The budget totals: kept per tenant and actor by the appends that record usage, in their
/// transaction (a refused, conflicting or rolled-back append counts nothing), read only
/// through a tenant's scope.
pub fn budget_totals(backend: &dyn Backend) {
    let handle = backend.open(clock());
    let store = handle.as_ref();
    let ids = SequentialIds::default();
    let new = |tenant_name: &str, actor: &str, first: Vec<EventDraft>| {
        let run = ids.run_id();
        store
            .create_run(
                &NewRun {
                    run: run.clone(),
                    tenant: tenant(tenant_name),
                    actor: actor.into(),
                    task: "t".into(),
                    status: RunStatus::Running,
                },
                first,
                &ToySealer,
            )
            .unwrap();
        run
    };
    let acme = tenant("acme");
    let globex = tenant("globex");
    let as_acme = warrant_store::Scoped::new(store, &acme);
    let as_globex = warrant_store::Scoped::new(store, &globex);
    assert_eq!(as_acme.budget(Some("alice")).unwrap(), usage(0, 0, 0));
    assert_eq!(as_acme.budget(None).unwrap(), usage(0, 0, 0));

    // A run's first events may carry usage too (a subagent's or a resumed log never does
    // today, but the store does not care which events do).
    let a1 = new(
        "acme",
        "alice",
        vec![draft("run_started"), usage_draft(10, 1, 5)],
    );
    let a2 = new("acme", "alice", vec![draft("run_started")]);
    let b1 = new("acme", "bob", vec![draft("run_started")]);
    let g1 = new("globex", "alice", vec![draft("run_started")]);
    let append = |run: &RunId, seq: u64, events: Vec<EventDraft>| Append {
        run: run.clone(),
        expected_seq: seq,
        events,
        status: None,
        requests: vec![],
        fence: None,
    };
    store
        .append(
            append(&a1, 3, vec![usage_draft(100, 20, 1_000), draft("x")]),
            &ToySealer,
        )
        .unwrap();
    store
        .append(append(&a2, 2, vec![usage_draft(7, 3, 0)]), &ToySealer)
        .unwrap();
    store
        .append(append(&b1, 2, vec![usage_draft(1, 1, 1)]), &ToySealer)
        .unwrap();
    store
        .append(append(&g1, 2, vec![usage_draft(1_000, 0, 0)]), &ToySealer)
        .unwrap();
    // Nothing written, nothing counted: a conflict, a sealing failure, a stale fence.
    assert!(
        store
            .append(append(&a2, 9, vec![usage_draft(50, 0, 0)]), &ToySealer)
            .is_err()
    );
    let mut failing = usage_draft(50, 0, 0);
    failing.audit = json!("fail");
    assert!(
        store
            .append(
                append(&a2, 3, vec![usage_draft(50, 0, 0), failing]),
                &ToySealer
            )
            .is_err()
    );
    let lease = store.lease_run(&a2, "w", Duration::from_secs(30)).unwrap();
    let mut fenced = append(&a2, 3, vec![usage_draft(50, 0, 0)]);
    fenced.fence = Some(lease.token + 1);
    assert!(store.append(fenced, &ToySealer).is_err());

    assert_eq!(
        as_acme.budget(Some("alice")).unwrap(),
        usage(117, 24, 1_005)
    );
    assert_eq!(as_acme.budget(Some("bob")).unwrap(), usage(1, 1, 1));
    assert_eq!(as_acme.budget(None).unwrap(), usage(118, 25, 1_006));
    // Another tenant's totals are not there for it, even under the same actor's name.
    assert_eq!(as_globex.budget(Some("alice")).unwrap(), usage(1_000, 0, 0));
    assert_eq!(as_globex.budget(None).unwrap(), usage(1_000, 0, 0));
    assert_eq!(as_acme.budget(Some("carol")).unwrap(), usage(0, 0, 0));
    let rows = as_acme.budget_totals().unwrap();
    assert_eq!(
        rows.iter()
            .map(|r| (r.tenant.as_str(), r.actor.as_str(), r.usage))
            .collect::<Vec<_>>(),
        vec![
            ("acme", "alice", usage(117, 24, 1_005)),
            ("acme", "bob", usage(1, 1, 1)),
        ]
    );
    // A second handle (another process) reads the same.
    let other = backend.open(clock());
    assert_eq!(
        warrant_store::Scoped::new(other.as_ref(), &acme)
            .budget(Some("alice"))
            .unwrap(),
        usage(117, 24, 1_005)
    );
}

/// A run created leased: one transaction makes the run, its first event and its lease, so no
/// worker ever sees it running without one; the lease fences like any other, and a run that
/// already exists is refused with nothing leased.
pub fn created_leased(backend: &dyn Backend) {
    let clock = ManualClock::at_t0();
    let store = backend.open(clock.clone());
    let store = store.as_ref();
    let ids = SequentialIds::default();
    let ttl = Duration::from_secs(30);
    let run = ids.run_id();
    let new = NewRun {
        run: run.clone(),
        tenant: tenant("acme"),
        actor: "alice".into(),
        task: "t".into(),
        status: RunStatus::Running,
    };
    let (stored, lease) = store
        .create_run_leased(&new, vec![draft("run_started")], &ToySealer, "cli", ttl)
        .unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(
        lease,
        Lease {
            run: run.clone(),
            holder: "cli".into(),
            token: lease.token,
            expires_at: t(30_000),
        }
    );
    assert_eq!(store.run(&run).unwrap().unwrap().status, RunStatus::Running);
    // Held: no worker takes it, nobody else leases it.
    assert_eq!(store.lease_next("w1", ttl).unwrap(), None);
    assert_err(
        store.lease_run(&run, "w2", ttl),
        StoreError::Leased {
            run: run.to_string(),
            holder: "cli".into(),
            until: t(30_000).rfc3339(),
        },
    );
    // Its token fences appends: the holder's lands, a stale token is refused.
    store
        .append(append_to(&run, 2, &["step"], Some(lease.token)), &ToySealer)
        .unwrap();
    assert!(matches!(
        store.append(
            append_to(&run, 3, &["step"], Some(lease.token + 1)),
            &ToySealer
        ),
        Err(StoreError::Fenced { .. })
    ));
    // Once it expires a worker may take the run over.
    clock.advance(Duration::from_secs(31));
    let taken = store.lease_next("w1", ttl).unwrap().unwrap();
    assert_eq!(taken.run, run);
    assert!(taken.token > lease.token);
    // The same run again: refused, and the run keeps its one event and the worker's lease.
    assert_err(
        store
            .create_run_leased(&new, vec![draft("run_started")], &ToySealer, "cli", ttl)
            .map(|_| ()),
        StoreError::RunExists {
            run: run.to_string(),
        },
    );
    assert_eq!(store.events(&run).unwrap().len(), 2);
    assert_err(
        store.lease_run(&run, "cli", ttl),
        StoreError::Leased {
            run: run.to_string(),
            holder: "w1".into(),
            until: t(61_000).rfc3339(),
        },
    );
}

/// An append that must not commit once its run is stopped
/// (`EventStore::append_unless_stopped`): refused with nothing written for a switch of each
/// scope that covers the run (every run, its tenant, its actor or the person it acts for, the
/// run, an ancestor) and for a cancellation of the run or an ancestor, both as a plain append
/// and as one that opens a request (the locked transaction on every store); let through for
/// switches that cover others and for a lifted one. After each refusal the next append lands.
/// `append_reading_stops` commits in every case and says whether something stops the run.
pub fn appends_unless_stopped(backend: &dyn Backend) {
    let clock = ManualClock::at_t0();
    let store = backend.open(clock);
    let store = store.as_ref();
    let ids = SequentialIds::default();
    let parent = ids.run_id();
    start(store, &parent, RunStatus::Running);
    let run = ids.run_id();
    start(store, &run, RunStatus::Running);
    let runs = [run.clone(), parent.clone()];
    let subject = KillSubject {
        tenant: "acme",
        actors: &["alice", "bob"],
        runs: &runs,
    };
    // A first append: the process knows the run and its partition from here (PostgreSQL's
    // guarded statement needs both).
    store
        .append(append_to(&run, 2, &["step"], None), &ToySealer)
        .unwrap();
    let count = || store.events(&run).unwrap().len() as u64;
    let plain = |seq: u64| append_to(&run, seq, &["step"], None);
    let opening = |seq: u64| Append {
        requests: vec![RequestUpdate::Open {
            id: ids.request_id(),
            summary: json!({"kind": "approval"}),
        }],
        ..append_to(&run, seq, &["approval_requested"], None)
    };
    let lands = |why: &str| {
        for append in [plain(count() + 1), opening(count() + 2)] {
            let before = count();
            store
                .append_unless_stopped(append, &subject, &ToySealer)
                .unwrap_or_else(|e| panic!("{why}: {e}"));
            assert_eq!(count(), before + 1, "{why}");
        }
    };
    let refused = |why: &str| {
        let before = count();
        for append in [plain(before + 1), opening(before + 1)] {
            assert_err(
                store.append_unless_stopped(append, &subject, &ToySealer),
                StoreError::Stopped {
                    run: run.to_string(),
                },
            );
        }
        assert_eq!(count(), before, "{why}: something was written");
    };
    lands("nothing set");
    for other in [
        KillScope::Tenant("globex".into()),
        KillScope::Actor("carol".into()),
        KillScope::Run(ids.run_id()),
    ] {
        store.set_kill(&other, "ops", "someone else").unwrap();
    }
    lands("switches of others");
    for scope in [
        KillScope::All,
        KillScope::Tenant("acme".into()),
        KillScope::Actor("alice".into()),
        KillScope::Actor("bob".into()),
        KillScope::Run(run.clone()),
        KillScope::Run(parent.clone()),
    ] {
        store.set_kill(&scope, "ops", "stop").unwrap();
        refused(&scope.describe());
        store.lift_kill(&scope, "ops", "go on").unwrap();
        lands(&format!("{} lifted", scope.describe()));
    }
    // Reading instead of refusing: the append commits either way and says what it saw.
    let read = |why: &str, want: bool| {
        for append in [plain(count() + 1), opening(count() + 2)] {
            let before = count();
            let (stored, stopped) = store
                .append_reading_stops(append, &subject, &ToySealer)
                .unwrap_or_else(|e| panic!("{why}: {e}"));
            assert_eq!((stored.len(), stopped), (1, want), "{why}");
            assert_eq!(count(), before + 1, "{why}");
        }
    };
    read("nothing set", false);
    store
        .set_kill(&KillScope::Actor("bob".into()), "ops", "stop")
        .unwrap();
    read("a switch set", true);
    store
        .lift_kill(&KillScope::Actor("bob".into()), "ops", "go on")
        .unwrap();
    read("lifted", false);
    store.request_cancel(&parent, "dave", "done").unwrap();
    read("the parent cancelled", true);
    refused("the parent cancelled");
    // The plain append is unchanged by any of it.
    let before = count();
    store.append(plain(before + 1), &ToySealer).unwrap();
    assert_eq!(count(), before + 1);
    // A run's own cancellation.
    let alone = [run.clone()];
    let own = KillSubject {
        tenant: "acme",
        actors: &["alice"],
        runs: &alone,
    };
    store
        .append_unless_stopped(plain(count() + 1), &own, &ToySealer)
        .unwrap();
    store.request_cancel(&run, "erin", "enough").unwrap();
    assert_err(
        store.append_unless_stopped(plain(count() + 1), &own, &ToySealer),
        StoreError::Stopped {
            run: run.to_string(),
        },
    );
}

/// One test per case and store.
macro_rules! conformance_tests {
    ($store:ident, $backend:expr) => {
        mod $store {
            use super::*;

            #[test]
            fn basics() {
                super::basics(&$backend);
            }

            #[test]
            fn leases() {
                super::leases(&$backend);
            }

            #[test]
            fn created_leased() {
                super::created_leased(&$backend);
            }

            #[test]
            fn lease_next_under_concurrency() {
                super::lease_next_under_concurrency(&$backend);
            }

            #[test]
            fn cancellation() {
                super::cancellation(&$backend);
            }

            #[test]
            fn appends_unless_stopped() {
                super::appends_unless_stopped(&$backend);
            }

            #[test]
            fn sinks_and_queries() {
                super::sinks_and_queries(&$backend);
            }

            #[test]
            fn budget_totals() {
                super::budget_totals(&$backend);
            }

            #[test]
            fn audit_order_under_concurrency() {
                super::audit_order_under_concurrency(&$backend);
            }
        }
    };
}

conformance_tests!(sqlite, SqliteBackend::new());
conformance_tests!(postgres, PgBackend::new());
