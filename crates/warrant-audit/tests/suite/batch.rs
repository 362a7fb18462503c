//! Batch signing: the records one store transaction commits are chained as usual, and only the
//! batch's last record is signed; the others name it (`batchend`, covered by their hash). Each
//! tamper case on a fresh copy, the intact trail verifying as the control: a stripped batch
//! signature, an edited record inside a batch (with and without its hashes recomputed), a
//! forged `batchend`, a copy cut inside a batch. Delivery never ends a file inside a batch.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;

use pretty_assertions::assert_eq;
use serde_json::{Map, Value, json};
use warrant_audit::{
    AuditKey, BindingError, JsonlSink, ProblemKind, PublicKeys, RECORD_SCHEMA_V2, VerifyReport,
    batch_end_of, chain_hash, verify_file, verify_lines, verify_run, verify_sealed,
};
use warrant_store::SealedRecord;

use super::fake::{FakeStore, SEED, audit, event, sealer};

/// Batches of these sizes, in order: 3 + 1 + 2 + 3 = 9 records.
const BATCHES: [u64; 4] = [3, 1, 2, 3];

fn batched() -> FakeStore {
    let store = FakeStore::default();
    let sealer = sealer(AuditKey::from_seed(SEED));
    let mut n = 0;
    for size in BATCHES {
        let events: Vec<_> = (n + 1..=n + size).map(|i| (event(i), audit(i))).collect();
        store.seal_batch(&sealer, &events);
        n += size;
    }
    store
}

fn trusted() -> PublicKeys {
    PublicKeys::from_keys([AuditKey::from_seed(SEED).verifying_key()])
}

fn lines(store: &FakeStore) -> Vec<String> {
    store.records().into_iter().map(|r| r.line).collect()
}

fn verify(lines: &[String]) -> VerifyReport {
    verify_lines((1u64..).zip(lines.iter().cloned()), &trusted())
}

fn object(line: &str) -> Map<String, Value> {
    serde_json::from_str(line).unwrap()
}

/// The problem's (kind, seq) and how many records were intact before it.
fn found(report: &VerifyReport) -> (Option<(ProblemKind, Option<u64>)>, u64) {
    (
        report.first_problem.as_ref().map(|p| (p.kind, p.seq)),
        report.records,
    )
}

/// Rewrites record `index` with `edit`, then recomputes its hash and every later record's link
/// and hash, as someone without the key would to hide an edit; signatures stay as they were.
fn rechain(
    lines: &[String],
    index: usize,
    edit: impl FnOnce(&mut Map<String, Value>),
) -> Vec<String> {
    let mut out = lines.to_vec();
    let mut record = object(&out[index]);
    edit(&mut record);
    let mut prevhash = record["prevhash"].as_str().unwrap().to_owned();
    for (i, line) in out.iter_mut().enumerate().skip(index) {
        let mut r = if i == index {
            record.clone()
        } else {
            object(line)
        };
        r.insert("prevhash".into(), json!(prevhash));
        let hash = chain_hash(&prevhash, &r).unwrap();
        r.insert("hash".into(), json!(hash.as_str()));
        prevhash = hash.as_str().to_owned();
        *line = serde_json::to_string(&r).unwrap();
    }
    out
}

#[test]
fn a_batched_trail_verifies_with_one_signature_per_batch() {
    let store = batched();
    let lines = lines(&store);
    let report = verify(&lines);
    assert_eq!(found(&report), (None, 9));
    // Signed: the last record of each batch, and only those.
    let signed: Vec<u64> = lines
        .iter()
        .map(|l| object(l))
        .filter(|r| r.contains_key("sig"))
        .map(|r| r["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(signed, vec![3, 4, 6, 9]);
    let ends: Vec<Option<u64>> = lines.iter().map(|l| batch_end_of(l)).collect();
    assert_eq!(
        ends,
        vec![
            Some(3),
            Some(3),
            None,
            None,
            Some(6),
            None,
            Some(9),
            Some(9),
            None
        ]
    );
    // The store's own copy verifies the same way.
    assert_eq!(verify_sealed(&store.records(), &trusted()), report);
}

#[test]
fn batched_records_conform_to_the_v2_schema_and_a_signed_batch_member_does_not() {
    let schema: Value = serde_json::from_str(RECORD_SCHEMA_V2).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let lines: Vec<Value> = lines(&batched())
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for line in &lines {
        let errors: Vec<String> = validator.iter_errors(line).map(|e| e.to_string()).collect();
        assert_eq!(errors, Vec::<String>::new(), "{line}");
    }
    // Negative control: a batch member with a signature, and a batch end without one.
    let mut member = lines[0].clone();
    member["kid"] = lines[2]["kid"].clone();
    member["sig"] = lines[2]["sig"].clone();
    let mut end = lines[2].clone();
    end.as_object_mut().unwrap().remove("sig");
    assert_eq!(
        (validator.is_valid(&member), validator.is_valid(&end)),
        (false, false)
    );
}

#[test]
fn a_stripped_batch_signature_is_found() {
    let lines = lines(&batched());
    for (index, seq) in [(2usize, 3u64), (5, 6), (8, 9)] {
        let mut cut = lines.clone();
        let mut r = object(&cut[index]);
        r.remove("sig");
        r.remove("kid");
        cut[index] = serde_json::to_string(&r).unwrap();
        let report = verify(&cut);
        assert_eq!(
            found(&report),
            (Some((ProblemKind::Unsigned, Some(seq))), seq - 1),
            "{report:?}"
        );
    }
}

#[test]
fn an_edit_inside_a_batch_breaks_its_hash_or_else_the_batch_signature() {
    let lines = lines(&batched());
    // Edited in place: the record's own hash no longer recomputes.
    let mut edited = lines.clone();
    let mut r = object(&edited[6]);
    r["data"]["decision"] = json!("allow");
    edited[6] = serde_json::to_string(&r).unwrap();
    assert_eq!(
        found(&verify(&edited)),
        (Some((ProblemKind::HashMismatch, Some(7))), 6)
    );
    // Edited and every hash after it recomputed: the batch's signature no longer holds.
    let hidden = rechain(&lines, 6, |r| r["data"]["actor"] = json!("mallory"));
    assert_eq!(
        found(&verify(&hidden)),
        (Some((ProblemKind::BadSignature, Some(9))), 8)
    );
}

#[test]
fn a_forged_batchend_is_found() {
    let lines = lines(&batched());
    // Dropping a member's batchend (hashes recomputed) makes it a record that must be signed.
    let dropped = rechain(&lines, 0, |r| {
        r.remove("batchend");
    });
    assert_eq!(
        found(&verify(&dropped)),
        (Some((ProblemKind::Unsigned, Some(1))), 0)
    );
    // Moving the end further (so a later signature would seem to cover it) breaks the batch
    // at the record that closes it.
    let moved = rechain(&lines, 0, |r| r["batchend"] = json!(4));
    assert_eq!(
        found(&verify(&moved)),
        (Some((ProblemKind::BrokenBatch, Some(2))), 1)
    );
    // A batchend that is not after the record.
    let backwards = rechain(&lines, 1, |r| r["batchend"] = json!(1));
    assert_eq!(
        found(&verify(&backwards)),
        (Some((ProblemKind::BrokenBatch, Some(2))), 1)
    );
    // A member carrying a signature copied from its batch's end.
    let mut signed = lines.clone();
    let end = object(&lines[2]);
    let mut r = object(&signed[0]);
    r.insert("kid".into(), end["kid"].clone());
    r.insert("sig".into(), end["sig"].clone());
    signed[0] = serde_json::to_string(&r).unwrap();
    assert_eq!(
        found(&verify(&signed)),
        (Some((ProblemKind::BrokenBatch, Some(1))), 0)
    );
}

#[test]
fn a_copy_cut_inside_a_batch_is_unsigned_at_the_batch_start() {
    let lines = lines(&batched());
    let report = verify(&lines[..8]);
    assert_eq!(found(&report), (Some((ProblemKind::Unsigned, Some(7))), 8));
    let detail = &report.first_problem.unwrap().detail;
    assert!(
        detail.contains("records 7..=8 are signed by record 9"),
        "{detail}"
    );
    // The control: cut at a batch boundary, the lines alone look whole (the checkpoint's job).
    assert_eq!(found(&verify(&lines[..6])), (None, 6));
}

#[test]
fn a_trail_signed_per_record_then_in_batches_verifies() {
    // An existing trail (one signature per record) goes on in batches after the upgrade.
    let store = FakeStore::default();
    let sealer = sealer(AuditKey::from_seed(SEED));
    for i in 1..=3 {
        store.seal(&sealer, &event(i), &audit(i));
    }
    let events: Vec<_> = (4..=6).map(|i| (event(i), audit(i))).collect();
    store.seal_batch(&sealer, &events);
    assert_eq!(found(&verify(&lines(&store))), (None, 6));
}

#[test]
fn delivery_and_rotation_never_end_a_file_inside_a_batch() {
    let store = batched();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    // A delivery batch of one record still moves whole store batches.
    let sink = JsonlSink::new(&path).with_batch(1);
    sink.deliver(&store).unwrap();
    assert_eq!(found(&verify_file(&path, &trusted()).unwrap()), (None, 9));

    // Rotation after every line would cut batches; it waits for each batch's end, so every
    // rotated file verifies on its own (each starting mid-chain is fine for a file alone only
    // when checked with the others, so check that the files end at batch ends).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let sink = JsonlSink::new(&path).with_rotation(Some(1), None);
    sink.deliver(&store).unwrap();
    let files = sink.files().unwrap();
    let last_seqs: Vec<u64> = files
        .iter()
        .filter_map(|f| {
            let text = fs::read_to_string(f).unwrap();
            let last = text.lines().last()?.to_owned();
            assert_eq!(
                batch_end_of(&last),
                None,
                "{} ends inside a batch",
                f.display()
            );
            object(&last)["seq"].as_u64()
        })
        .collect();
    assert_eq!(last_seqs, vec![3, 4, 6, 9]);
    assert_eq!(
        found(&warrant_audit::verify_files(&files, &trusted()).unwrap()),
        (None, 9)
    );
}

#[test]
fn a_run_bound_to_batched_records_verifies_and_a_missing_batch_end_is_found() {
    let store = batched();
    let records: Vec<SealedRecord> = store.records();
    let events: Vec<_> = (1..=9).map(event).collect();
    let run = super::fake::run_id();
    let bound = verify_run(&run, &events, &records, &trusted()).unwrap();
    assert_eq!(bound.bound, 9);
    // Cut the last batch's signed record (and its event): the batch's members are unsigned.
    let err = verify_run(&run, &events[..8], &records[..8], &trusted()).unwrap_err();
    assert!(
        matches!(
            err,
            BindingError::Record {
                kind: ProblemKind::Unsigned,
                record: 8,
                ..
            }
        ),
        "{err:?}"
    );
}
