//! The partitioned audit chain (issue 22): records of P partitions, each its own hash chain,
//! positioned and named by signed anchors. An intact copy verifies; each way of dropping,
//! duplicating, reordering, moving across an anchor, cutting or forging is found, also after
//! the attacker renumbers the positions (they are not hashed: the anchors vouch for them). The
//! unpartitioned chain (one partition) is the control. On PostgreSQL, writers on separate
//! connections append concurrently while anchoring runs, and the whole trail verifies.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::sync::Arc;

use base64::Engine as _;
use serde_json::{Map, Value, json};
use warrant_audit::{
    ANCHOR_TYPE, AuditKey, CheckpointRule, Checkpointer, InstallationSealer, JsonlSink,
    ProblemKind, PublicKeys, VerifyReport, chain_hash, checkpoint_path, verify_copy, verify_lines,
    verify_sealed,
};
use warrant_core::{
    FixedClock, IdSource, Principal, PrincipalKind, RunId, SequentialIds, Timestamp,
};
use warrant_store::{
    ANCHOR_PART, Append, AuditOutbox, EventDraft, EventStore, NewRun, PostgresStore, RunStatus,
    SealedRecord, SqliteStore, Tenant, partition_of,
};
use warrant_testkit::pg::TestDb;

use super::fake::{INSTALLATION, SEED};

/// Record ids from `start` on, so sealers of one store never hand out the same id.
#[derive(Debug)]
struct IdsFrom(std::sync::atomic::AtomicU64);

impl IdsFrom {
    fn at(start: u64) -> Self {
        Self(std::sync::atomic::AtomicU64::new(start))
    }
}

impl IdSource for IdsFrom {
    fn next_suffix(&self) -> String {
        let n = self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        format!("{n:012x}")
    }
}

fn clock() -> Arc<FixedClock> {
    Arc::new(FixedClock(
        Timestamp::from_millis(1_750_000_000_000).unwrap(),
    ))
}

fn sealer() -> InstallationSealer {
    InstallationSealer::new(
        AuditKey::from_seed(SEED),
        INSTALLATION,
        Arc::new(SequentialIds::default()),
    )
}

fn trusted() -> PublicKeys {
    PublicKeys::from_keys([AuditKey::from_seed(SEED).verifying_key()])
}

fn tenant() -> Tenant {
    Tenant::of(&Principal {
        tenant: "acme".into(),
        actor: "alice".into(),
        kind: PrincipalKind::User,
        on_behalf_of: None,
        roles: vec![],
        teams: vec![],
        attrs: Default::default(),
    })
}

fn draft(kind: &str, n: u64) -> EventDraft {
    EventDraft {
        kind: kind.into(),
        version: 1,
        payload: json!({"n": n}),
        audit: json!({"actor": "alice", "tenant": "acme", "reasons": []}),
        usage: None,
    }
}

fn run(n: u64) -> RunId {
    RunId::parse(&format!("run-{n:012x}")).unwrap()
}

/// Runs `1..=count` whose records fall in at least two partitions of `parts` (any runs do
/// for one partition).
fn runs(parts: u64, count: u64) -> Vec<RunId> {
    let runs: Vec<RunId> = (1..=count).map(run).collect();
    if parts > 1 {
        let used: BTreeSet<u64> = runs
            .iter()
            .map(|r| partition_of(r.as_str(), parts))
            .collect();
        assert!(used.len() >= 2, "the test runs all fell in one partition");
    }
    runs
}

fn start(store: &dyn EventStore, sealer: &InstallationSealer, run: &RunId) {
    store
        .create_run(
            &NewRun {
                run: run.clone(),
                tenant: tenant(),
                actor: "alice".into(),
                task: "t".into(),
                status: RunStatus::Running,
            },
            vec![draft("run_started", 1)],
            sealer,
        )
        .unwrap();
}

fn step(store: &dyn EventStore, sealer: &InstallationSealer, run: &RunId, next: u64, n: u64) {
    let events = (0..n).map(|i| draft("action_proposed", next + i)).collect();
    store
        .append(
            Append {
                run: run.clone(),
                expected_seq: next,
                events,
                status: None,
                requests: vec![],
                fence: None,
            },
            sealer,
        )
        .unwrap();
}

/// Three runs over three rounds (a start, a batch of two, one more), anchored after each
/// round; the store is kept alive by the returned temp dir.
fn trail(parts: u64) -> (tempfile::TempDir, SqliteStore, InstallationSealer) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::create(&dir.path().join("store.db"), clock()).unwrap();
    store.set_audit_partitions(parts).unwrap();
    let sealer = sealer();
    rounds(&store, &sealer, &runs(parts, 4));
    (dir, store, sealer)
}

/// A start, a batch of two, one more for each of `runs`, anchored after each round.
fn rounds<S: EventStore + AuditOutbox>(store: &S, sealer: &InstallationSealer, runs: &[RunId]) {
    for r in runs {
        start(store, sealer, r);
    }
    store.anchor(sealer, true).unwrap();
    for r in runs {
        step(store, sealer, r, 2, 2);
    }
    store.anchor(sealer, true).unwrap();
    for r in runs {
        step(store, sealer, r, 4, 1);
    }
    store.anchor(sealer, true).unwrap();
}

fn lines(store: &dyn AuditOutbox) -> Vec<String> {
    store
        .audit_records(0, 10_000)
        .unwrap()
        .into_iter()
        .map(|r| r.line)
        .collect()
}

fn verify(lines: &[String]) -> VerifyReport {
    verify_lines(
        lines
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, l)| (i as u64 + 1, l)),
        &trusted(),
    )
}

fn object(line: &str) -> Map<String, Value> {
    serde_json::from_str(line).unwrap()
}

fn is_anchor(line: &str) -> bool {
    object(line)["type"] == ANCHOR_TYPE
}

fn part_of(line: &str) -> u64 {
    object(line)
        .get("part")
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// What an attacker can do to hide a change: rewrite every record's `pos` to its place in the
/// copy (positions are not hashed). An anchor's position is hashed in its data, so it stays.
fn renumber(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            if is_anchor(line) {
                return line.clone();
            }
            let mut o = object(line);
            if o.contains_key("pos") {
                o.insert("pos".into(), json!(i as u64 + 1));
            }
            serde_json::to_string(&o).unwrap()
        })
        .collect()
}

fn kind(report: &VerifyReport) -> Option<ProblemKind> {
    report.first_problem.as_ref().map(|p| p.kind)
}

/// The index of the first line (not an anchor) of a partition other than 0 that has another
/// record of its partition right after it in the copy, within the same anchoring.
fn a_pair_in_one_partition(lines: &[String]) -> usize {
    (0..lines.len() - 1)
        .find(|&i| {
            !is_anchor(&lines[i])
                && !is_anchor(&lines[i + 1])
                && part_of(&lines[i]) == part_of(&lines[i + 1])
                && part_of(&lines[i]) > 0
        })
        .expect("no two records of one partition side by side")
}

/// The index of the second anchor.
fn second_anchor(lines: &[String]) -> usize {
    lines
        .iter()
        .enumerate()
        .filter(|(_, l)| is_anchor(l))
        .nth(1)
        .unwrap()
        .0
}

#[test]
fn an_intact_partitioned_copy_verifies_and_names_its_partitions() {
    let (_dir, store, _) = trail(3);
    let lines = lines(&store);
    // 4 runs × 4 events, and 3 anchors.
    assert_eq!(lines.len(), 19);
    let report = verify(&lines);
    assert!(report.is_ok(), "{report:?}");
    assert_eq!(report.records, 19);
    assert_eq!(lines.iter().filter(|l| is_anchor(l)).count(), 3);
    assert!(lines.iter().any(|l| part_of(l) > 0));
    assert!(is_anchor(lines.last().unwrap()));
    // Each anchor names every partition, and its stated position is its line's.
    for (i, line) in lines.iter().enumerate().filter(|(_, l)| is_anchor(l)) {
        let o = object(line);
        assert_eq!(o["pos"], json!(i as u64 + 1));
        assert_eq!(o["data"]["pos"], json!(i as u64 + 1));
        assert_eq!(o["data"]["heads"].as_array().unwrap().len(), 3);
    }
    // The store's own copy verifies too, its position column against each line.
    let records = store.audit_records(0, 1000).unwrap();
    assert!(verify_sealed(&records, &trusted()).is_ok());
    // The records of the v2 schema carry their partition and position, and still conform.
    let schema: Value = serde_json::from_str(warrant_audit::RECORD_SCHEMA_V2).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    for line in lines.iter().filter(|l| !is_anchor(l)) {
        let v: Value = serde_json::from_str(line).unwrap();
        assert!(validator.is_valid(&v), "{line}");
    }
}

#[test]
fn a_dropped_record_is_found_also_when_positions_are_renumbered() {
    let (_dir, store, _) = trail(3);
    let lines = lines(&store);
    let i = a_pair_in_one_partition(&lines);
    let mut cut = lines;
    cut.remove(i);
    assert_eq!(kind(&verify(&cut)), Some(ProblemKind::Gap));
    let hidden = verify(&renumber(&cut));
    assert_eq!(kind(&hidden), Some(ProblemKind::Gap), "{hidden:?}");
}

#[test]
fn a_duplicated_record_is_found() {
    let (_dir, store, _) = trail(3);
    let lines = lines(&store);
    let i = a_pair_in_one_partition(&lines);
    let mut twice = lines.clone();
    twice.insert(i + 1, lines[i].clone());
    assert_eq!(kind(&verify(&twice)), Some(ProblemKind::Duplicate));
    assert_eq!(
        kind(&verify(&renumber(&twice))),
        Some(ProblemKind::Duplicate)
    );
}

#[test]
fn records_reordered_within_a_partition_are_found() {
    let (_dir, store, _) = trail(3);
    let lines = lines(&store);
    let i = a_pair_in_one_partition(&lines);
    let mut swapped = lines;
    swapped.swap(i, i + 1);
    let report = verify(&renumber(&swapped));
    assert_eq!(kind(&report), Some(ProblemKind::Reordered), "{report:?}");
    assert_eq!(kind(&verify(&swapped)), Some(ProblemKind::Reordered));
}

#[test]
fn a_record_moved_across_an_anchor_is_found_either_way() {
    let (_dir, store, _) = trail(3);
    let lines = lines(&store);
    let a = second_anchor(&lines);
    // The record just before the anchor, moved after it.
    let mut later = lines.clone();
    let moved = later.remove(a - 1);
    later.insert(a, moved);
    let report = verify(&renumber(&later));
    assert_eq!(kind(&report), Some(ProblemKind::Reordered), "{report:?}");
    assert!(
        report
            .first_problem
            .as_ref()
            .unwrap()
            .detail
            .contains("moved across the anchor"),
        "{report:?}"
    );
    assert!(!verify(&later).is_ok());
    // The record just after the anchor, moved before it.
    let mut earlier = lines;
    let moved = earlier.remove(a + 1);
    earlier.insert(a, moved);
    let report = verify(&renumber(&earlier));
    assert_eq!(kind(&report), Some(ProblemKind::Reordered), "{report:?}");
    assert!(!verify(&earlier).is_ok());
}

#[test]
fn a_partition_s_tail_cut_before_an_anchor_is_found_by_the_anchor() {
    let (_dir, store, _) = trail(3);
    let lines = lines(&store);
    let a = second_anchor(&lines);
    // The last record of some partition before the second anchor, with the records of its
    // batch (cutting whole batches keeps every signature in the copy).
    let part = part_of(&lines[a - 1]);
    let mut cut: Vec<String> = lines;
    let mut i = a - 1;
    let batch_start = loop {
        if i == 0 || is_anchor(&cut[i - 1]) || part_of(&cut[i - 1]) != part {
            break i;
        }
        if object(&cut[i - 1]).get("batchend").is_none() {
            break i;
        }
        i -= 1;
    };
    cut.drain(batch_start..a);
    let report = verify(&renumber(&cut));
    assert_eq!(kind(&report), Some(ProblemKind::Gap), "{report:?}");
    assert!(
        report
            .first_problem
            .as_ref()
            .unwrap()
            .detail
            .contains("the anchor names partition"),
        "{report:?}"
    );
}

#[test]
fn a_copy_cut_after_its_last_anchor_or_stripped_of_anchors_is_not_whole() {
    let (_dir, store, _) = trail(3);
    let lines = lines(&store);
    // Cut inside the last anchoring (its anchor gone): records no anchor names.
    let mut cut = lines.clone();
    cut.pop();
    let report = verify(&cut);
    assert_eq!(kind(&report), Some(ProblemKind::Unanchored), "{report:?}");
    // Every anchor removed and the positions renumbered: still not whole.
    let stripped: Vec<String> = lines.iter().filter(|l| !is_anchor(l)).cloned().collect();
    let report = verify(&renumber(&stripped));
    assert_eq!(kind(&report), Some(ProblemKind::Unanchored), "{report:?}");
}

/// An anchor re-hashed to fit an edit: only the installation's key can sign it.
fn reseal(line: &str, edit: impl FnOnce(&mut Map<String, Value>), key: &AuditKey) -> String {
    let mut o = object(line);
    edit(&mut o);
    let prev = o["prevhash"].as_str().unwrap().to_owned();
    let hash = chain_hash(&prev, &o).unwrap();
    o.insert("hash".into(), json!(hash.as_str()));
    o.insert("kid".into(), json!(key.kid()));
    let sig = key.sign(&hash.bytes());
    o.insert(
        "sig".into(),
        json!(base64::engine::general_purpose::STANDARD.encode(sig.to_bytes())),
    );
    serde_json::to_string(&o).unwrap()
}

#[test]
fn a_forged_anchor_is_found() {
    let (_dir, store, _) = trail(3);
    let lines = lines(&store);
    let a = second_anchor(&lines);
    let lower = |o: &mut Map<String, Value>| {
        let heads = o["data"]["heads"].as_array_mut().unwrap();
        let h = heads
            .iter_mut()
            .find(|h| h["seq"].as_u64() > Some(1))
            .unwrap();
        h["seq"] = json!(h["seq"].as_u64().unwrap() - 1);
    };
    // Edited in place.
    let mut edited = lines.clone();
    let mut o = object(&lines[a]);
    lower(&mut o);
    edited[a] = serde_json::to_string(&o).unwrap();
    assert_eq!(kind(&verify(&edited)), Some(ProblemKind::HashMismatch));
    // Re-hashed and signed with another key.
    let mut forged = lines.clone();
    forged[a] = reseal(&lines[a], lower, &AuditKey::from_seed([9; 32]));
    assert_eq!(kind(&verify(&forged)), Some(ProblemKind::UnknownKey));
    // The control: the same edit signed with the installation's key is a valid signature on
    // an anchor that no longer fits the copy, and is found by its heads.
    let mut inside = lines.clone();
    inside[a] = reseal(&lines[a], lower, &AuditKey::from_seed(SEED));
    let report = verify(&inside);
    assert_eq!(kind(&report), Some(ProblemKind::Reordered), "{report:?}");
}

/// The control: a store of one partition writes the chain as it always has (no `part`, no
/// `pos`, no anchors), and the same drop, duplicate and reorder are found by the one chain.
#[test]
fn the_unpartitioned_chain_is_unchanged_and_finds_the_same_tampering() {
    let (_dir, store, sealer) = trail(1);
    assert!(store.anchor(&sealer, true).unwrap().is_none());
    let lines = lines(&store);
    assert_eq!(lines.len(), 16);
    assert!(lines.iter().all(|l| {
        let o = object(l);
        !o.contains_key("part") && !o.contains_key("pos") && o["type"] != ANCHOR_TYPE
    }));
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(object(line)["seq"], json!(i as u64 + 1));
    }
    assert!(verify(&lines).is_ok());
    let mut cut = lines.clone();
    cut.remove(5);
    assert_eq!(kind(&verify(&cut)), Some(ProblemKind::Gap));
    let mut twice = lines.clone();
    twice.insert(6, lines[5].clone());
    assert_eq!(kind(&verify(&twice)), Some(ProblemKind::Duplicate));
    let mut swapped = lines;
    swapped.swap(5, 7);
    assert_eq!(kind(&verify(&swapped)), Some(ProblemKind::Reordered));
}

#[test]
fn a_jsonl_copy_resumes_at_anchors_and_verifies_against_its_checkpoint() {
    let (dir, store, sealer) = trail(3);
    let path = dir.path().join("audit.jsonl");
    let checkpointer =
        || Checkpointer::new(AuditKey::from_seed(SEED), INSTALLATION, clock(), trusted());
    let sink = JsonlSink::new(&path).with_checkpoint(checkpointer());
    let first = sink.deliver(&store).unwrap();
    assert_eq!(first.to_seq, 19);
    // More records, not anchored yet: nothing new to deliver; anchored: delivered after.
    for r in runs(3, 4) {
        step(&store, &sealer, &r, 5, 2);
    }
    assert_eq!(sink.deliver(&store).unwrap().delivered, 0);
    store.anchor(&sealer, true).unwrap();
    let second = JsonlSink::new(&path)
        .with_checkpoint(checkpointer())
        .deliver(&store)
        .unwrap();
    assert_eq!((second.from_seq, second.to_seq), (19, 28));
    let report = verify_copy(
        std::slice::from_ref(&path),
        false,
        &checkpoint_path(&path),
        &trusted(),
        CheckpointRule::Required,
    )
    .unwrap();
    assert!(report.is_ok(), "{report:?}");
    // The copy cut back to its first anchoring: the checkpoint (naming the last anchor) sees it.
    let text = std::fs::read_to_string(&path).unwrap();
    let kept: Vec<&str> = text.lines().take(19).collect();
    std::fs::write(&path, format!("{}\n", kept.join("\n"))).unwrap();
    let report = verify_copy(
        std::slice::from_ref(&path),
        false,
        &checkpoint_path(&path),
        &trusted(),
        CheckpointRule::Required,
    )
    .unwrap();
    assert!(report.chain.is_ok());
    assert!(!report.is_ok(), "{report:?}");
}

/// A store written before partitions (schema version 1, real sealed records) is migrated: its
/// records become partition 0's history at their positions, verify as they did, and the chain
/// goes on from them.
#[test]
fn an_existing_store_migrates_and_keeps_verifying() {
    let dir = tempfile::tempdir().unwrap();
    // Real records, sealed as before partitions existed (one chain, no `part`, no `pos`).
    let (_old, old_store, sealer) = trail(1);
    let records: Vec<SealedRecord> = old_store.audit_records(0, 100).unwrap();
    let path = dir.path().join("v1.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE runs (run_id TEXT PRIMARY KEY, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
                actor TEXT NOT NULL, task TEXT NOT NULL, status TEXT NOT NULL, events INTEGER NOT NULL);
            CREATE TABLE events (run_id TEXT NOT NULL REFERENCES runs(run_id), seq INTEGER NOT NULL,
                kind TEXT NOT NULL, version INTEGER NOT NULL, recorded_at INTEGER NOT NULL,
                payload TEXT NOT NULL, PRIMARY KEY (run_id, seq)) WITHOUT ROWID;
            CREATE TABLE requests (request_id TEXT PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs(run_id),
                status TEXT NOT NULL, created_at INTEGER NOT NULL, summary TEXT NOT NULL);
            CREATE INDEX requests_by_status ON requests(status, created_at);
            CREATE TABLE audit (seq INTEGER PRIMARY KEY, record_id TEXT NOT NULL UNIQUE, hash TEXT NOT NULL,
                line TEXT NOT NULL);
            INSERT INTO runs VALUES ('run-00000000ffff', 1, 1, 'alice', 't', 'running', 0);",
        )
        .unwrap();
        for r in &records {
            conn.execute(
                "INSERT INTO audit VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![r.seq as i64, r.id, r.hash, r.line],
            )
            .unwrap();
        }
        conn.pragma_update(None, "user_version", 1).unwrap();
    }
    let store = SqliteStore::open(&path, clock()).unwrap();
    assert_eq!(store.audit_partitions().unwrap(), 1);
    let migrated = store.audit_records(0, 100).unwrap();
    assert_eq!(migrated, records);
    assert!(verify_sealed(&migrated, &trusted()).is_ok());
    // The chain goes on from the migrated head.
    let sealer2 = InstallationSealer::new(
        AuditKey::from_seed(SEED),
        INSTALLATION,
        Arc::new(IdsFrom::at(1000)),
    );
    let _ = sealer;
    start(&store, &sealer2, &run(0x77));
    let after = store.audit_records(0, 100).unwrap();
    assert_eq!(after.len(), records.len() + 1);
    let report = verify_sealed(&after, &trusted());
    assert!(report.is_ok(), "{report:?}");
}

/// Rows of `audit`, as stored: (part, seq, line).
fn stored_rows(path: &std::path::Path) -> Vec<(i64, i64, String)> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut q = conn
        .prepare("SELECT part, seq, line FROM audit ORDER BY part, seq")
        .unwrap();
    q.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// An anchoring never rewrites a record's row: the stored line is the line as sealed (no
/// `pos`), the positions are rows of `audit_order`, and the outbox gives each line its position
/// as it reads it. A store of schema 7 (positions and the lines stating them written back into
/// the rows) migrates: the outbox reads the same lines, which verify, and the chain goes on.
#[test]
fn anchoring_writes_no_record_twice_and_a_schema_7_store_migrates() {
    let (dir, store, sealer) = trail(3);
    let path = dir.path().join("store.db");
    let delivered = store.audit_records(0, 1000).unwrap();
    assert!(verify_sealed(&delivered, &trusted()).is_ok());
    let rows = stored_rows(&path);
    assert_eq!(rows.len(), delivered.len());
    for (part, _, line) in &rows {
        let o = object(line);
        // Only an anchor is sealed with its position.
        assert_eq!(o.contains_key("pos"), *part == ANCHOR_PART, "{line}");
    }
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        let positions: i64 = conn
            .query_row("SELECT count(*) FROM audit_order", [], |r| r.get(0))
            .unwrap();
        assert_eq!(positions as usize, delivered.len());
        // Back to schema 7's shape: each row holds its position and the line stating it.
        conn.execute_batch(
            "ALTER TABLE audit ADD COLUMN pos INTEGER;
             UPDATE audit SET pos = (SELECT o.pos FROM audit_order o WHERE o.part = audit.part AND o.seq = audit.seq);
             CREATE UNIQUE INDEX audit_by_pos ON audit(pos);
             CREATE INDEX audit_unpositioned ON audit(part, seq) WHERE pos IS NULL;
             DROP TABLE audit_order;",
        )
        .unwrap();
        for r in &delivered {
            conn.execute(
                "UPDATE audit SET line = ?1 WHERE record_id = ?2",
                rusqlite::params![r.line, r.id],
            )
            .unwrap();
        }
        conn.pragma_update(None, "user_version", 7).unwrap();
    }
    drop(store);
    let store = SqliteStore::open(&path, clock()).unwrap();
    assert_eq!(store.audit_records(0, 1000).unwrap(), delivered);
    // The chain and the anchoring go on from the migrated positions, and the whole verifies.
    let more = run(0x4242);
    start(&store, &sealer, &more);
    step(&store, &sealer, &more, 2, 2);
    store.anchor(&sealer, true).unwrap();
    let after = store.audit_records(0, 1000).unwrap();
    assert_eq!(after.len(), delivered.len() + 4);
    assert_eq!(after[..delivered.len()], delivered[..]);
    let report = verify_sealed(&after, &trusted());
    assert!(report.is_ok(), "{report:?}");
    let report = verify(&lines(&store));
    assert!(report.is_ok(), "{report:?}");
}

/// Records of a partition whose stored line states a position: rows an anchoring rewrote.
const REWRITTEN_ROWS: &str =
    "SELECT count(*) FROM audit WHERE part >= 0 AND line LIKE '{\"pos\":%'";

fn count(db: &TestDb, sql: &str) -> i64 {
    db.client().query_one(sql, &[]).unwrap().get(0)
}

/// The same on PostgreSQL: no record's row rewritten, and a store of schema 7 (each row with
/// its position and the line stating it, the indexes that served them) migrates to the same
/// outbox, which verifies and goes on.
#[test]
fn a_schema_7_postgres_store_migrates_its_positions() {
    let db = TestDb::new();
    let store = PostgresStore::connect(&db.url, clock()).unwrap();
    let parts = store.audit_partitions().unwrap();
    let sealer = sealer();
    rounds(&store, &sealer, &runs(parts, 4));
    let delivered = store.audit_records(0, 1000).unwrap();
    assert!(verify_sealed(&delivered, &trusted()).is_ok());
    let mut client = db.client();
    assert_eq!(count(&db, REWRITTEN_ROWS), 0);
    drop(store);
    client
        .batch_execute(
            "ALTER TABLE audit ADD COLUMN pos BIGINT;
             UPDATE audit SET pos = o.pos FROM audit_order o WHERE o.part = audit.part AND o.seq = audit.seq;
             CREATE UNIQUE INDEX audit_by_pos ON audit(pos);
             CREATE INDEX audit_unpositioned ON audit(part, seq) WHERE pos IS NULL;
             DROP TABLE audit_order;
             UPDATE warrant_schema SET version = 7;",
        )
        .unwrap();
    for r in &delivered {
        client
            .execute(
                "UPDATE audit SET line = $1 WHERE record_id = $2",
                &[&r.line, &r.id],
            )
            .unwrap();
    }
    let store = PostgresStore::connect(&db.url, clock()).unwrap();
    assert_eq!(store.audit_records(0, 1000).unwrap(), delivered);
    let more = run(0x4343);
    start(&store, &sealer, &more);
    store.anchor(&sealer, true).unwrap();
    let after = store.audit_records(0, 1000).unwrap();
    assert_eq!(after.len(), delivered.len() + 2);
    assert_eq!(after[..delivered.len()], delivered[..]);
    let report = verify_sealed(&after, &trusted());
    assert!(report.is_ok(), "{report:?}");
}

/// PostgreSQL: one anchoring positions a backlog of records whose positions alone are more
/// parameters than one statement may carry (65,535; three per record), in writes that each
/// stay under it, and the trail verifies.
#[test]
fn a_long_backlog_is_anchored_at_once_on_postgres() {
    let db = TestDb::new();
    let store = PostgresStore::connect(&db.url, clock()).unwrap();
    let sealer = sealer();
    let runs = runs(store.audit_partitions().unwrap(), 4);
    for r in &runs {
        start(&store, &sealer, r);
        for i in 0..56 {
            step(&store, &sealer, r, 2 + 100 * i, 100);
        }
    }
    // 4 runs × 5,601 events: 22,404 records (67,212 parameters), no anchoring yet.
    assert!(store.audit_records(0, 10).unwrap().is_empty());
    let anchor = store.anchor(&sealer, true).unwrap().expect("an anchor");
    assert_eq!(anchor.seq, 22_405);
    let records = store.audit_records(0, 30_000).unwrap();
    assert_eq!(records.len(), 22_405);
    let report = verify_sealed(&records, &trusted());
    assert!(report.is_ok(), "{report:?}");
}

/// PostgreSQL: writers on their own connections (as separate worker processes have) append to
/// runs of every partition at once while another connection anchors without waiting; after a
/// last anchoring the whole trail verifies, every event has its record, and no two records
/// share a position.
#[test]
fn concurrent_writers_on_postgres_leave_a_trail_that_verifies_whole() {
    const WRITERS: u64 = 4;
    const RUNS: u64 = 3;
    const STEPS: u64 = 10;
    let db = TestDb::new();
    let store = PostgresStore::connect(&db.url, clock()).unwrap();
    assert_eq!(store.audit_partitions().unwrap(), 8);
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let mut writers = Vec::new();
        for w in 0..WRITERS {
            let url = db.url.clone();
            writers.push(s.spawn(move || {
                let store = PostgresStore::connect(&url, clock()).unwrap();
                let sealer = InstallationSealer::new(
                    AuditKey::from_seed(SEED),
                    INSTALLATION,
                    Arc::new(IdsFrom::at(1_000_000 * (w + 1))),
                );
                let runs: Vec<RunId> = (0..RUNS).map(|r| run(0x1000 * (w + 1) + r)).collect();
                for r in &runs {
                    start(&store, &sealer, r);
                }
                for i in 0..STEPS {
                    for r in &runs {
                        step(&store, &sealer, r, 2 + 2 * i, 2);
                    }
                }
            }));
        }
        let anchorer = {
            let url = db.url.clone();
            let done = &done;
            s.spawn(move || {
                let store = PostgresStore::connect(&url, clock()).unwrap();
                let sealer = InstallationSealer::new(
                    AuditKey::from_seed(SEED),
                    INSTALLATION,
                    Arc::new(IdsFrom::at(9_000_000)),
                );
                let mut anchors = 0;
                while !done.load(std::sync::atomic::Ordering::SeqCst) {
                    if store.anchor(&sealer, false).unwrap().is_some() {
                        anchors += 1;
                    }
                }
                anchors
            })
        };
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        anchorer.join().unwrap();
    });
    let last = InstallationSealer::new(
        AuditKey::from_seed(SEED),
        INSTALLATION,
        Arc::new(IdsFrom::at(9_500_000)),
    );
    store.anchor(&last, true).unwrap();
    let records = store.audit_records(0, 100_000).unwrap();
    let report = verify_sealed(&records, &trusted());
    assert!(report.is_ok(), "{report:?}");
    let events = WRITERS * RUNS * (1 + 2 * STEPS);
    let lines: Vec<String> = records.iter().map(|r| r.line.clone()).collect();
    let anchors = lines.iter().filter(|l| is_anchor(l)).count() as u64;
    assert!(anchors >= 1);
    assert_eq!(records.len() as u64, events + anchors);
    let parts: BTreeSet<u64> = lines
        .iter()
        .filter(|l| !is_anchor(l))
        .map(|l| part_of(l))
        .collect();
    assert!(parts.len() >= 2, "{parts:?}");
    assert!(is_anchor(lines.last().unwrap()));
    // Every run's events are bound to its records, in one partition.
    for w in 0..WRITERS {
        for r in 0..RUNS {
            let run = run(0x1000 * (w + 1) + r);
            let events = store.events(&run).unwrap();
            let by_run = warrant_audit::records_by_run(&records);
            let mine = &by_run[run.as_str()];
            let bound = warrant_audit::verify_run(&run, &events, mine, &trusted());
            assert!(bound.is_ok(), "{run}: {bound:?}");
        }
    }
    // The anchorings wrote positions beside the records, none into a record's row.
    assert_eq!(count(&db, REWRITTEN_ROWS), 0);
    assert_eq!(
        count(&db, "SELECT count(*) FROM audit_order") as usize,
        records.len()
    );
}
