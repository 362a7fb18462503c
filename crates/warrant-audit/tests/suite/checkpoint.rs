//! The sink's signed checkpoint: written as batches become durable, it proves a copy complete
//! up to a signed record, so records cut from the end are found (which the lines alone cannot
//! show: the negative controls), a forged checkpoint is named as such, and delivery refuses to
//! refill a copy that was cut.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::Value;
use warrant_audit::{
    AuditError, AuditKey, Checkpoint, CheckpointError, CheckpointRule, Checkpointer, CopyReport,
    DeliveryReport, FsyncPolicy, InstallationSealer, JsonlSink, PublicKeys, VerifyReport,
    checkpoint_path, read_checkpoint, verify_copy, verify_file,
};
use warrant_core::{Coded as _, FixedClock, SequentialIds, Timestamp};

use super::fake::{FakeStore, INSTALLATION, SEED, audit, chain, event, sealer};

const NOW_MS: i64 = 1_760_000_000_000;

fn key() -> AuditKey {
    AuditKey::from_seed(SEED)
}

fn trusted() -> PublicKeys {
    PublicKeys::from_keys([key().verifying_key()])
}

fn checkpointer_with(key: AuditKey) -> Checkpointer {
    Checkpointer::new(
        key,
        INSTALLATION,
        Arc::new(FixedClock(Timestamp::from_millis(NOW_MS).unwrap())),
        trusted(),
    )
}

fn checkpointer() -> Checkpointer {
    checkpointer_with(key())
}

fn lines_of(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn write_lines(path: &Path, lines: &[String]) {
    fs::write(
        path,
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .unwrap();
}

fn verify(path: &Path, rule: CheckpointRule) -> CopyReport {
    verify_copy(
        &[path.to_path_buf()],
        false,
        &checkpoint_path(path),
        &trusted(),
        rule,
    )
    .unwrap()
}

/// A copy of `chain(n)` delivered with checkpoints, in a fresh directory.
fn delivered(n: u64) -> (tempfile::TempDir, PathBuf, JsonlSink, FakeStore) {
    let store = chain(n);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let sink = JsonlSink::new(&path)
        .with_batch(2)
        .with_checkpoint(checkpointer());
    sink.deliver(&store).unwrap();
    (dir, path, sink, store)
}

#[test]
fn each_durable_batch_is_vouched_for_and_the_copy_verifies_against_it() {
    let (_dir, path, sink, store) = delivered(5);
    let records = store.records();
    assert_eq!(
        sink.checkpoint_path(),
        path.with_file_name("audit.jsonl.checkpoint")
    );
    let text = fs::read_to_string(sink.checkpoint_path()).unwrap();
    // Deterministic: a fixed key and clock, and Ed25519 signatures are.
    insta::assert_snapshot!(text);
    let checkpoint = read_checkpoint(&sink.checkpoint_path(), &trusted())
        .unwrap()
        .unwrap();
    assert_eq!(
        Checkpoint {
            sig: None,
            ..checkpoint.clone()
        },
        Checkpoint {
            kind: "dev.warrant.audit.checkpoint".into(),
            version: 1,
            installation: INSTALLATION.into(),
            seq: 5,
            hash: records[4].hash.clone(),
            count: 5,
            time: "2025-10-09T08:53:20.000Z".into(),
            kid: key().kid(),
            sig: None,
        }
    );
    assert_eq!(
        verify(&path, CheckpointRule::Required),
        CopyReport {
            chain: VerifyReport {
                records: 5,
                first_problem: None,
                head: Some(records[4].hash.clone()),
            },
            checkpoint: Ok(Some(checkpoint.clone())),
        }
    );

    // Records delivered after the checkpoint was written are fine: it vouches for 1..=5 only.
    let later = FakeStore::default();
    let s = sealer(key());
    for n in 1..=7 {
        later.seal(&s, &event(n), &audit(n));
    }
    let mut lines = lines_of(&path);
    lines.extend(later.records()[5..].iter().map(|r| r.line.clone()));
    write_lines(&path, &lines);
    let report = verify(&path, CheckpointRule::Required);
    assert_eq!(
        (report.chain.records, report.checkpoint),
        (7, Ok(Some(checkpoint)))
    );
}

#[test]
fn a_copy_cut_at_its_end_fails_naming_the_checkpoint_and_its_last_record() {
    let (_dir, path, sink, store) = delivered(6);
    let mut lines = lines_of(&path);
    lines.truncate(4);
    write_lines(&path, &lines);

    let report = verify(&path, CheckpointRule::IfPresent);
    let err = report.checkpoint.clone().unwrap_err();
    assert_eq!(
        err,
        CheckpointError::Truncated {
            path: sink.checkpoint_path(),
            checkpoint_seq: 6,
            last_seq: 4,
        }
    );
    assert_eq!(err.code(), "W-AUDIT-032");
    assert!(report.chain.is_ok() && !report.is_ok(), "{report:?}");
    let shown = err
        .to_string()
        .replace(&*path.display().to_string(), "COPY");
    insta::assert_snapshot!(shown);

    // Negative control: the lines alone are an intact chain, the cut is invisible without it.
    let plain = verify_file(&path, &trusted()).unwrap();
    assert!(plain.is_ok(), "{plain:?}");

    // Delivery does not refill the cut copy (that would erase the evidence): it refuses.
    let refused = sink.deliver(&store).unwrap_err();
    assert_eq!(refused.code(), "W-AUDIT-032");
    assert!(matches!(refused, AuditError::Checkpoint(e) if e == err));
    assert_eq!(lines_of(&path), lines);
    // Without a checkpointer (the guard off) the same delivery refills it silently.
    let unguarded = JsonlSink::new(&path).deliver(&store).unwrap();
    assert_eq!(
        unguarded,
        DeliveryReport {
            from_seq: 4,
            delivered: 2,
            to_seq: 6,
            repaired_bytes: 0,
            rotated: vec![],
        }
    );
}

type Tamper = Box<dyn Fn(&mut Value)>;

/// Edits an attacker could make to the checkpoint file, and the code each one is named by.
fn tamper_cases() -> Vec<(&'static str, Tamper, &'static str)> {
    vec![
        (
            "seq lowered to hide the cut",
            Box::new(|v: &mut Value| {
                v["seq"] = 4.into();
                v["count"] = 4.into();
            }),
            "W-AUDIT-033",
        ),
        (
            "signature replaced",
            Box::new(|v: &mut Value| {
                let sig = v["sig"].as_str().unwrap();
                let flipped = if sig.starts_with('A') { "B" } else { "A" };
                v["sig"] = format!("{flipped}{}", &sig[1..]).into();
            }),
            "W-AUDIT-033",
        ),
        (
            "signature removed",
            Box::new(|v: &mut Value| {
                v.as_object_mut().unwrap().remove("sig");
            }),
            "W-AUDIT-033",
        ),
        (
            "kid of an unknown key",
            Box::new(|v: &mut Value| v["kid"] = "0000000000000000".into()),
            "W-AUDIT-033",
        ),
        (
            "count disagrees with seq",
            Box::new(|v: &mut Value| v["count"] = 3.into()),
            "W-AUDIT-034",
        ),
        (
            "an extra field",
            Box::new(|v: &mut Value| v["note"] = "trust me".into()),
            "W-AUDIT-034",
        ),
        (
            "not a checkpoint at all",
            Box::new(|v: &mut Value| *v = Value::from("hello")),
            "W-AUDIT-034",
        ),
    ]
}

#[test]
fn a_forged_checkpoint_is_named_as_such_and_delivery_stops_on_it() {
    let (_dir, path, sink, store) = delivered(6);
    let mut lines = lines_of(&path);
    lines.truncate(4);
    write_lines(&path, &lines);
    let original = fs::read_to_string(sink.checkpoint_path()).unwrap();

    let mut got = Vec::new();
    for (name, tamper, _) in tamper_cases() {
        let mut v: Value = serde_json::from_str(&original).unwrap();
        tamper(&mut v);
        fs::write(sink.checkpoint_path(), v.to_string()).unwrap();
        let verified = verify(&path, CheckpointRule::IfPresent)
            .checkpoint
            .unwrap_err();
        let delivering = sink.deliver(&store).unwrap_err();
        assert_eq!(lines_of(&path), lines, "{name}: nothing appended");
        got.push((name, verified.code(), delivering.code()));
    }
    let expected: Vec<_> = tamper_cases()
        .into_iter()
        .map(|(name, _, code)| (name, code, code))
        .collect();
    assert_eq!(got, expected);

    // Control: the untouched checkpoint over the uncut copy holds.
    fs::write(sink.checkpoint_path(), &original).unwrap();
    let refilled = JsonlSink::new(&path).deliver(&store).unwrap();
    assert_eq!(refilled.to_seq, 6);
    assert_eq!(
        verify(&path, CheckpointRule::Required)
            .checkpoint
            .map(|c| c.map(|c| c.seq)),
        Ok(Some(6))
    );
}

#[test]
fn a_checkpoint_signed_for_another_chain_or_removed_is_refused() {
    let (_dir, path, sink, store) = delivered(4);
    // Genuinely signed, by the trusted key, but for a record this copy does not hold.
    let other = sink.checkpoint_path();
    checkpointer()
        .write(&other, 4, &store.records()[0].hash)
        .unwrap();
    let err = verify(&path, CheckpointRule::IfPresent)
        .checkpoint
        .unwrap_err();
    assert_eq!(
        err,
        CheckpointError::Diverged {
            path: other.clone(),
            seq: 4,
            signed: store.records()[0].hash.clone(),
            found: store.records()[3].hash.clone(),
        }
    );
    assert_eq!(err.code(), "W-AUDIT-035");
    assert_eq!(sink.deliver(&store).unwrap_err().code(), "W-AUDIT-035");

    // Removed: where one is required (the installation's own sink) that is a finding; for a
    // file handed over on its own, there is simply nothing more to check.
    fs::remove_file(&other).unwrap();
    let missing = verify(&path, CheckpointRule::Required)
        .checkpoint
        .unwrap_err();
    assert_eq!(
        missing,
        CheckpointError::Missing {
            path: other,
            records: 4,
        }
    );
    assert_eq!(missing.code(), "W-AUDIT-036");
    assert_eq!(
        verify(&path, CheckpointRule::IfPresent).checkpoint,
        Ok(None)
    );
    // An empty copy needs none.
    let empty = path.with_file_name("empty.jsonl");
    fs::write(&empty, "").unwrap();
    assert_eq!(
        verify(&empty, CheckpointRule::Required).checkpoint,
        Ok(None)
    );
}

#[test]
fn records_written_but_not_vouched_for_are_checked_against_the_store_first() {
    // A crash between the append and the checkpoint, or a copy older than checkpoints: the
    // next delivery, with nothing new to append, vouches for what the file already holds.
    let store = chain(3);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    JsonlSink::new(&path).deliver(&store).unwrap();
    let sink = JsonlSink::new(&path).with_checkpoint(checkpointer());
    assert_eq!(sink.deliver(&store).unwrap().delivered, 0);
    let vouched = read_checkpoint(&sink.checkpoint_path(), &trusted())
        .unwrap()
        .unwrap();
    assert_eq!(
        (vouched.seq, vouched.hash),
        (3, store.records()[2].hash.clone())
    );

    // But not for a file whose last record is not the store's (another chain, same length).
    let other_dir = tempfile::tempdir().unwrap();
    let foreign = other_dir.path().join("audit.jsonl");
    let other = FakeStore::default();
    let s = InstallationSealer::new(
        AuditKey::from_seed([9; 32]),
        "inst-other",
        Arc::new(SequentialIds::default()),
    );
    for n in 1..=3 {
        other.seal(&s, &event(n), &audit(n));
    }
    JsonlSink::new(&foreign).deliver(&other).unwrap();
    let err = JsonlSink::new(&foreign)
        .with_checkpoint(checkpointer())
        .deliver(&store)
        .unwrap_err();
    assert_eq!(err.code(), "W-AUDIT-009");
    assert!(!checkpoint_path(&foreign).exists());
}

#[test]
fn without_fsync_per_batch_the_checkpoint_is_written_once_and_covers_rotated_files() {
    let store = chain(9);
    let longest = store
        .records()
        .iter()
        .map(|r| r.line.len() as u64 + 1)
        .max()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let sink = JsonlSink::new(&path)
        .with_batch(2)
        .with_rotation(Some(2 * longest + 1), None)
        .with_fsync(FsyncPolicy::Never)
        .with_checkpoint(checkpointer());
    let report = sink.deliver(&store).unwrap();
    assert_eq!(report.rotated.len(), 4);
    let files = sink.files().unwrap();
    let copy = verify_copy(
        &files,
        true,
        &sink.checkpoint_path(),
        &trusted(),
        CheckpointRule::Required,
    )
    .unwrap();
    assert!(copy.is_ok(), "{copy:?}");
    assert_eq!(copy.checkpoint.unwrap().unwrap().seq, 9);
    // The checkpoint (and the lock deliveries take turns on) is not mistaken for a rotated
    // file, and leaves no temporary file behind.
    let mut names: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with("audit-"))
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec!["audit.jsonl", "audit.jsonl.checkpoint", "audit.jsonl.lock"]
    );

    // The newest rotated file cut at its end, with the current file removed: still found.
    let last_rotated = &files[files.len() - 2];
    let mut lines = lines_of(last_rotated);
    lines.pop();
    write_lines(last_rotated, &lines);
    fs::remove_file(&path).unwrap();
    let cut = verify_copy(
        &files[..files.len() - 1],
        true,
        &sink.checkpoint_path(),
        &trusted(),
        CheckpointRule::Required,
    )
    .unwrap();
    assert_eq!(cut.checkpoint.unwrap_err().code(), "W-AUDIT-032");
}

#[test]
fn a_checkpoint_signed_before_a_key_rotation_still_verifies() {
    let (_dir, path, _sink, store) = delivered(3);
    let new_key = AuditKey::from_seed([8; 32]);
    // The new key signs from now on; the old one stays trusted, as the retired keys are.
    let sink = JsonlSink::new(&path).with_checkpoint(checkpointer_with(new_key.clone()));
    assert_eq!(sink.deliver(&store).unwrap().delivered, 0);
    let mut both = trusted();
    both.insert(new_key.verifying_key());
    let old = read_checkpoint(&sink.checkpoint_path(), &both)
        .unwrap()
        .unwrap();
    assert_eq!(old.kid, key().kid());
    // Control: without the old key among the trusted ones, the same file is refused.
    let only_new = PublicKeys::from_keys([new_key.verifying_key()]);
    assert_eq!(
        read_checkpoint(&sink.checkpoint_path(), &only_new)
            .unwrap_err()
            .code(),
        "W-AUDIT-033"
    );
}
