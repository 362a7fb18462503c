//! The JSONL sink: idempotent delivery, batching, crash repair, rotation, fsync policy, and
//! its refusals.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::json;
use warrant_audit::{
    AuditKey, DeliveryReport, FsyncPolicy, JsonlSink, Problem, ProblemKind, PublicKeys,
    VerifyReport, verify_file, verify_files,
};
use warrant_core::Coded as _;

use super::fake::{FakeStore, SEED, audit, chain, event, sealer};

fn store_lines(store: &FakeStore) -> String {
    store
        .records()
        .iter()
        .map(|r| format!("{}\n", r.line))
        .collect()
}

fn trusted() -> PublicKeys {
    PublicKeys::from_keys([AuditKey::from_seed(SEED).verifying_key()])
}

#[test]
fn delivering_twice_appends_nothing_the_second_time() {
    let store = chain(5);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/dirs/audit.jsonl");
    let sink = JsonlSink::new(&path);

    let first = sink.deliver(&store).unwrap();
    let second = sink.deliver(&store).unwrap();
    assert_eq!(
        (first, second),
        (
            DeliveryReport {
                from_seq: 0,
                delivered: 5,
                to_seq: 5,
                repaired_bytes: 0,
                rotated: vec![],
            },
            DeliveryReport {
                from_seq: 5,
                delivered: 0,
                to_seq: 5,
                repaired_bytes: 0,
                rotated: vec![],
            },
        )
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), store_lines(&store));
    let report = verify_file(&path, &trusted()).unwrap();
    assert!(report.is_ok(), "{report:?}");
    assert_eq!(report.records, 5);
    assert_eq!(report.head, Some(store.records()[4].hash.clone()));
}

#[test]
fn batches_pick_up_where_the_file_ends_and_repair_a_torn_write() {
    let store = FakeStore::default();
    let sealer = sealer(AuditKey::from_seed(SEED));
    for n in 1..=3 {
        store.seal(&sealer, &event(n), &audit(n));
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let sink = JsonlSink::new(&path).with_batch(2);
    assert_eq!(
        sink.deliver(&store).unwrap(),
        DeliveryReport {
            from_seq: 0,
            delivered: 3,
            to_seq: 3,
            repaired_bytes: 0,
            rotated: vec![],
        }
    );

    for n in 4..=7 {
        store.seal(&sealer, &event(n), &audit(n));
    }
    // A crash in the middle of a write: half of record 4, no newline.
    let torn = &store.records()[3].line;
    let half = &torn[..torn.len() / 2];
    fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(half.as_bytes())
        .unwrap();

    assert_eq!(
        sink.deliver(&store).unwrap(),
        DeliveryReport {
            from_seq: 3,
            delivered: 4,
            to_seq: 7,
            repaired_bytes: half.len() as u64,
            rotated: vec![],
        }
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), store_lines(&store));
    assert!(verify_file(&path, &trusted()).unwrap().is_ok());
}

#[test]
fn long_lines_are_found_from_the_tail() {
    // Records far larger than the tail chunk: the cursor must still be the last line's seq.
    let store = FakeStore::default();
    let sealer = sealer(AuditKey::from_seed(SEED));
    for n in 1..=3 {
        let mut facts = audit(n);
        facts["action"] = json!({"kind": "fs", "note": "x".repeat(30_000)});
        store.seal(&sealer, &event(n), &facts);
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let sink = JsonlSink::new(&path);
    sink.deliver(&store).unwrap();
    assert_eq!(
        sink.deliver(&store).unwrap(),
        DeliveryReport {
            from_seq: 3,
            delivered: 0,
            to_seq: 3,
            repaired_bytes: 0,
            rotated: vec![],
        }
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), store_lines(&store));
}

#[test]
fn a_sink_that_does_not_match_the_store_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    JsonlSink::new(&path).deliver(&chain(5)).unwrap();
    let before = fs::read_to_string(&path).unwrap();

    // A store whose chain is shorter than the file: the file is from elsewhere.
    let err = JsonlSink::new(&path).deliver(&chain(2)).unwrap_err();
    assert_eq!(err.code(), "W-AUDIT-010");
    assert_eq!(fs::read_to_string(&path).unwrap(), before);

    // A store whose head counts records it cannot serve.
    let lossy = chain(5);
    lossy.claim_head(7);
    let err = JsonlSink::new(&path).deliver(&lossy).unwrap_err();
    assert_eq!(err.code(), "W-AUDIT-013");
    assert_eq!(fs::read_to_string(&path).unwrap(), before);

    // A complete last line that is not a record: corruption, not a torn write.
    fs::write(&path, format!("{before}garbage\n")).unwrap();
    let err = JsonlSink::new(&path).deliver(&chain(5)).unwrap_err();
    assert_eq!(err.code(), "W-AUDIT-009");
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        format!("{before}garbage\n")
    );
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap()
}

/// `audit-<first>-<last>.jsonl` in `dir`.
fn rotated(dir: &Path, first: u64, last: u64) -> PathBuf {
    dir.join(format!("audit-{first:012}-{last:012}.jsonl"))
}

fn seqs_in(path: &Path) -> Vec<u64> {
    read(path)
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect()
}

#[test]
fn rotation_by_size_splits_the_chain_into_files_named_for_what_they_hold() {
    let store = chain(10);
    let lines = store.records();
    let longest = lines.iter().map(|r| r.line.len() as u64 + 1).max().unwrap();
    // Room for two records of any size, never three.
    let max_bytes = 2 * longest + 1;
    assert!(lines.iter().map(|r| r.line.len() as u64 + 1).min().unwrap() * 3 > max_bytes);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let sink = JsonlSink::new(&path)
        .with_batch(3)
        .with_rotation(Some(max_bytes), None);
    let first = sink.deliver(&store).unwrap();
    let files = sink.files().unwrap();
    let expected: Vec<PathBuf> = [(1, 2), (3, 4), (5, 6), (7, 8)]
        .iter()
        .map(|&(a, b)| rotated(dir.path(), a, b))
        .chain([path])
        .collect();
    assert_eq!(files, expected);
    assert_eq!(
        first,
        DeliveryReport {
            from_seq: 0,
            delivered: 10,
            to_seq: 10,
            repaired_bytes: 0,
            rotated: expected[..4].to_vec(),
        }
    );
    // Each file holds exactly what its name says, and together they are the store's chain.
    assert_eq!(
        files.iter().map(|f| seqs_in(f)).collect::<Vec<_>>(),
        vec![vec![1, 2], vec![3, 4], vec![5, 6], vec![7, 8], vec![9, 10]]
    );
    assert_eq!(
        files.iter().map(|f| read(f)).collect::<String>(),
        store_lines(&store)
    );

    // Delivering again adds nothing, anywhere.
    let again = sink.deliver(&store).unwrap();
    assert_eq!(
        again,
        DeliveryReport {
            from_seq: 10,
            delivered: 0,
            to_seq: 10,
            repaired_bytes: 0,
            rotated: vec![],
        }
    );
    assert_eq!(sink.files().unwrap(), expected);
    let report = verify_files(&files, &trusted()).unwrap();
    assert_eq!(
        report,
        VerifyReport {
            records: 10,
            first_problem: None,
            head: Some(lines[9].hash.clone()),
        }
    );

    // The same file handed over twice: its records repeat, and the report says where first.
    let twice = [files[0].clone(), files[0].clone()];
    let report = verify_files(&twice, &trusted()).unwrap();
    assert_eq!(
        report.first_problem,
        Some(Problem {
            file: Some(files[0].display().to_string()),
            line: 1,
            record_id: Some(lines[0].id.clone()),
            seq: Some(1),
            kind: ProblemKind::Duplicate,
            detail: format!(
                "record 1 already appeared at line 1 of {}",
                files[0].display()
            ),
        })
    );

    // A rotated file lost from the middle: the chain breaks at the first record after it,
    // and the report names the file it is in.
    fs::remove_file(&files[2]).unwrap();
    let remaining = sink.files().unwrap();
    assert_eq!(
        verify_files(&remaining, &trusted()).unwrap(),
        VerifyReport {
            records: 4,
            first_problem: Some(Problem {
                file: Some(files[3].display().to_string()),
                line: 1,
                record_id: Some(lines[6].id.clone()),
                seq: Some(7),
                kind: ProblemKind::Gap,
                detail: format!(
                    "records 5..=6 are missing (expected 5, found 7); {} ends at record 4 and {} starts at 7: a file between them may be missing",
                    files[1].display(),
                    files[3].display()
                ),
            }),
            head: Some(lines[3].hash.clone()),
        }
    );
}

#[test]
fn rotation_by_age_follows_record_times_and_survives_a_crash_mid_rotation() {
    // The test records are one second apart: a file spans at most two seconds, three records.
    let store = FakeStore::default();
    let sealer = sealer(AuditKey::from_seed(SEED));
    for n in 1..=7 {
        store.seal(&sealer, &event(n), &audit(n));
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let sink = JsonlSink::new(&path).with_rotation(None, Some(Duration::from_secs(2)));
    let first = sink.deliver(&store).unwrap();
    assert_eq!(
        first.rotated,
        vec![rotated(dir.path(), 1, 3), rotated(dir.path(), 4, 6)]
    );
    assert_eq!(seqs_in(&path), vec![7]);

    // A crash after the current file was renamed and before a new one was made: the cursor
    // is the newest rotated file's name, so nothing is written twice.
    fs::rename(&path, rotated(dir.path(), 7, 7)).unwrap();
    let resumed = sink.deliver(&store).unwrap();
    assert_eq!(
        resumed,
        DeliveryReport {
            from_seq: 7,
            delivered: 0,
            to_seq: 7,
            repaired_bytes: 0,
            rotated: vec![],
        }
    );
    for n in 8..=10 {
        store.seal(&sealer, &event(n), &audit(n));
    }
    sink.deliver(&store).unwrap();
    let files = sink.files().unwrap();
    assert_eq!(
        files.iter().map(|f| seqs_in(f)).collect::<Vec<_>>(),
        vec![vec![1, 2, 3], vec![4, 5, 6], vec![7], vec![8, 9, 10]]
    );
    assert!(verify_files(&files, &trusted()).unwrap().is_ok());
}

#[test]
fn rotation_refuses_to_overwrite_and_needs_record_times() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let sink = JsonlSink::new(&path).with_rotation(Some(1), None);
    let store = chain(3);
    sink.deliver(&store).unwrap();
    assert_eq!(
        sink.files().unwrap(),
        vec![
            rotated(dir.path(), 1, 1),
            rotated(dir.path(), 2, 2),
            path.clone()
        ]
    );
    // The current file holds record 2 again, which a rotated file already holds.
    let record_2 = format!("{}\n", store.records()[1].line);
    fs::write(&path, &record_2).unwrap();
    let err = sink.deliver(&store).unwrap_err();
    assert_eq!(err.code(), "W-AUDIT-025");
    assert_eq!(read(&path), record_2);

    // Rotation by age reads the current file's first record time; a line without one is
    // refused rather than guessed at.
    let other = dir.path().join("other.jsonl");
    fs::write(&other, "{\"seq\":1}\n").unwrap();
    let err = JsonlSink::new(&other)
        .with_rotation(None, Some(Duration::from_secs(60)))
        .deliver(&chain(2))
        .unwrap_err();
    assert_eq!(err.code(), "W-AUDIT-026");
    assert_eq!(read(&other), "{\"seq\":1}\n");
}

#[test]
fn without_fsync_everything_is_still_written() {
    let store = chain(7);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let sink = JsonlSink::new(&path)
        .with_batch(2)
        .with_fsync(FsyncPolicy::Never);
    assert_eq!(sink.deliver(&store).unwrap().delivered, 7);
    assert_eq!(read(&path), store_lines(&store));
    assert!(verify_file(&path, &trusted()).unwrap().is_ok());
    assert_eq!(FsyncPolicy::default(), FsyncPolicy::EveryBatch);
}

/// An outbox that holds each delivery's first fetch until another delivery reaches its own
/// first fetch too (or a moment passes): two deliveries that both read the copy's end before
/// either appends then meet here, deterministically.
struct Meeting<'a> {
    store: &'a FakeStore,
    arrived: std::sync::Mutex<usize>,
    met: std::sync::Condvar,
}

impl warrant_store::AuditOutbox for Meeting<'_> {
    fn audit_records(
        &self,
        after: u64,
        limit: usize,
    ) -> Result<Vec<warrant_store::SealedRecord>, warrant_store::StoreError> {
        if after == 0 {
            let mut arrived = self.arrived.lock().unwrap();
            *arrived += 1;
            self.met.notify_all();
            let _ = self
                .met
                .wait_timeout_while(arrived, Duration::from_millis(400), |n| *n < 2)
                .unwrap();
        }
        self.store.audit_records(after, limit)
    }

    fn audit_head(&self) -> Result<warrant_store::ChainHead, warrant_store::StoreError> {
        self.store.audit_head()
    }
}

/// Two deliveries to one copy at once (two workers of one installation, each delivering after
/// what it appended): without turns both read the same last line and both append what
/// follows it, so the copy holds records twice; with them the second waits for the first and
/// finds nothing left to append.
#[test]
fn two_deliveries_at_once_take_turns_and_the_copy_holds_each_record_once() {
    for turns in [false, true] {
        let store = chain(6);
        let meeting = Meeting {
            store: &store,
            arrived: std::sync::Mutex::new(0),
            met: std::sync::Condvar::new(),
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let delivered: Vec<u64> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        JsonlSink::new(&path)
                            .with_turns(turns)
                            .deliver(&meeting)
                            .unwrap()
                            .delivered
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        let copy = fs::read_to_string(&path).unwrap();
        if turns {
            let mut sorted = delivered.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, [0, 6]);
            assert_eq!(copy, store_lines(&store));
            let report = verify_file(&path, &trusted()).unwrap();
            assert!(report.is_ok(), "{:?}", report.first_problem);
        } else {
            // The negative control: what the turns prevent.
            assert_eq!(delivered, [6, 6]);
            assert_eq!(copy.lines().count(), 12);
            let report = verify_file(&path, &trusted()).unwrap();
            assert_eq!(
                report.first_problem.map(|p| p.kind),
                Some(ProblemKind::Duplicate)
            );
        }
    }
}
