//! The JSONL sink: idempotent delivery, batching, crash repair, and its refusals.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;
use std::io::Write as _;

use pretty_assertions::assert_eq;
use serde_json::json;
use warrant_audit::{AuditKey, DeliveryReport, JsonlSink, PublicKeys, verify_file};
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
                repaired_bytes: 0
            },
            DeliveryReport {
                from_seq: 5,
                delivered: 0,
                to_seq: 5,
                repaired_bytes: 0
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
            repaired_bytes: 0
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
            repaired_bytes: half.len() as u64
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
            repaired_bytes: 0
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
