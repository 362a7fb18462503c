//! Tampering with a delivered file, one way per test, each on a fresh copy: the report must
//! name the first broken record and say what broke. The intact file verifies (the control).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;
use std::path::PathBuf;

use base64::Engine as _;
use pretty_assertions::assert_eq;
use serde_json::{Map, Value, json};
use warrant_audit::{
    AuditKey, JsonlSink, Problem, ProblemKind, PublicKeys, VerifyReport, chain_hash, verify_file,
    verify_lines, verify_sealed,
};
use warrant_store::SealedRecord;

use super::fake::{SEED, chain};

struct Fixture {
    _dir: tempfile::TempDir,
    records: Vec<SealedRecord>,
    lines: Vec<String>,
    dir: PathBuf,
}

/// A 5-record chain delivered to a file; returns its lines.
fn fixture() -> Fixture {
    let store = chain(5);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    JsonlSink::new(&path).deliver(&store).unwrap();
    let lines = fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    Fixture {
        dir: dir.path().to_path_buf(),
        _dir: dir,
        records: store.records(),
        lines,
    }
}

fn trusted() -> PublicKeys {
    PublicKeys::from_keys([AuditKey::from_seed(SEED).verifying_key()])
}

impl Fixture {
    /// Writes `text` as a fresh file and verifies it.
    fn verify(&self, text: &str) -> VerifyReport {
        let path = self.dir.join(format!("copy-{}.jsonl", rand_suffix(text)));
        fs::write(&path, text).unwrap();
        verify_file(&path, &trusted()).unwrap()
    }

    fn verify_lines(&self, lines: &[String]) -> VerifyReport {
        self.verify(&lines.iter().map(|l| format!("{l}\n")).collect::<String>())
    }

    /// The report for a chain intact up to `good` records, then `problem`.
    fn broken_after(&self, good: usize, problem: Problem) -> VerifyReport {
        VerifyReport {
            records: good as u64,
            first_problem: Some(problem),
            head: good.checked_sub(1).map(|i| self.records[i].hash.clone()),
        }
    }

    fn problem(&self, line: u64, record: usize, kind: ProblemKind, detail: &str) -> Problem {
        Problem {
            file: None,
            line,
            record_id: Some(self.records[record - 1].id.clone()),
            seq: Some(record as u64),
            kind,
            detail: detail.to_owned(),
        }
    }
}

fn rand_suffix(text: &str) -> String {
    warrant_core::Digest::of_bytes(text.as_bytes()).as_str()[7..19].to_owned()
}

fn object(line: &str) -> Map<String, Value> {
    serde_json::from_str(line).unwrap()
}

#[test]
fn the_intact_file_verifies() {
    let f = fixture();
    assert_eq!(
        f.verify_lines(&f.lines),
        VerifyReport {
            records: 5,
            first_problem: None,
            head: Some(f.records[4].hash.clone())
        }
    );
    // The same through the line iterator and over the store's own copy.
    let numbered = (1u64..).zip(f.lines.iter().cloned());
    assert_eq!(verify_lines(numbered, &trusted()), f.verify_lines(&f.lines));
    assert_eq!(
        verify_sealed(&f.records, &trusted()),
        f.verify_lines(&f.lines)
    );
}

#[test]
fn an_edited_field_breaks_the_hash_of_that_record() {
    let f = fixture();
    let mut lines = f.lines.clone();
    let mut record = object(&lines[2]);
    record["data"]["actor"] = json!("mallory");
    lines[2] = serde_json::to_string(&record).unwrap();
    let recomputed = chain_hash(record["prevhash"].as_str().unwrap(), &record).unwrap();
    assert_eq!(
        f.verify_lines(&lines),
        f.broken_after(
            2,
            f.problem(
                3,
                3,
                ProblemKind::HashMismatch,
                &format!(
                    "the content hashes to {recomputed} but the record says {}",
                    f.records[2].hash
                ),
            )
        )
    );
}

#[test]
fn an_edit_with_a_recomputed_hash_fails_the_signature() {
    let f = fixture();
    let mut lines = f.lines.clone();
    let mut record = object(&lines[2]);
    record["data"]["decision"] = json!("allow");
    let forged = chain_hash(record["prevhash"].as_str().unwrap(), &record).unwrap();
    record["hash"] = json!(forged.as_str());
    lines[2] = serde_json::to_string(&record).unwrap();
    let kid = AuditKey::from_seed(SEED).kid();
    assert_eq!(
        f.verify_lines(&lines),
        f.broken_after(
            2,
            f.problem(
                3,
                3,
                ProblemKind::BadSignature,
                &format!("the signature does not verify under key {kid}")
            ),
        )
    );
}

#[test]
fn a_removed_line_is_a_gap() {
    let f = fixture();
    let mut lines = f.lines.clone();
    lines.remove(2);
    assert_eq!(
        f.verify_lines(&lines),
        f.broken_after(
            2,
            f.problem(
                3,
                4,
                ProblemKind::Gap,
                "record 3 is missing (expected 3, found 4)"
            )
        )
    );
    // Losing the first record is a gap too: the chain must start at genesis.
    let report = f.verify_lines(&f.lines[2..]);
    assert_eq!(
        report,
        f.broken_after(
            0,
            f.problem(
                1,
                3,
                ProblemKind::Gap,
                "records 1..=2 are missing (expected 1, found 3)"
            )
        )
    );
}

#[test]
fn swapped_lines_are_reported_at_the_first_swapped() {
    let f = fixture();
    let mut lines = f.lines.clone();
    lines.swap(1, 2);
    assert_eq!(
        f.verify_lines(&lines),
        f.broken_after(
            1,
            f.problem(
                2,
                3,
                ProblemKind::Reordered,
                "expected record 2 here but found 3; record 2 appears later, at line 3",
            )
        )
    );
}

#[test]
fn a_duplicated_line_is_reported_where_it_repeats() {
    let f = fixture();
    let mut lines = f.lines.clone();
    lines.insert(3, lines[2].clone());
    assert_eq!(
        f.verify_lines(&lines),
        f.broken_after(
            3,
            f.problem(
                4,
                3,
                ProblemKind::Duplicate,
                "record 3 again: an exact copy of line 3"
            )
        )
    );
    // A replay of an older record further down.
    let mut lines = f.lines.clone();
    lines.insert(4, lines[1].clone());
    assert_eq!(
        f.verify_lines(&lines),
        f.broken_after(
            4,
            f.problem(
                5,
                2,
                ProblemKind::Duplicate,
                "record 2 already appeared at line 2"
            )
        )
    );
}

#[test]
fn a_record_claiming_seq_zero_is_malformed() {
    let f = fixture();
    let mut record = object(&f.lines[0]);
    record["seq"] = json!(0);
    let lines = [serde_json::to_string(&record).unwrap()];
    assert_eq!(
        f.verify_lines(&lines),
        f.broken_after(
            0,
            Problem {
                seq: Some(0),
                ..f.problem(1, 1, ProblemKind::Malformed, "seq 0: chains start at 1")
            }
        )
    );
}

#[test]
fn a_stripped_signature_is_unsigned() {
    let f = fixture();
    let mut lines = f.lines.clone();
    let mut record = object(&lines[3]);
    record.remove("sig");
    lines[3] = serde_json::to_string(&record).unwrap();
    assert_eq!(
        f.verify_lines(&lines),
        f.broken_after(
            3,
            f.problem(4, 4, ProblemKind::Unsigned, "kid or sig is missing")
        )
    );
}

#[test]
fn a_record_re_signed_with_another_key_is_refused() {
    let f = fixture();
    let other = AuditKey::from_seed([9; 32]);
    let resign = |claim_kid: String| {
        let mut lines = f.lines.clone();
        let mut record = object(&lines[1]);
        let hash = warrant_core::Digest::parse(record["hash"].as_str().unwrap()).unwrap();
        let sig =
            base64::engine::general_purpose::STANDARD.encode(other.sign(&hash.bytes()).to_bytes());
        record["kid"] = json!(claim_kid);
        record["sig"] = json!(sig);
        lines[1] = serde_json::to_string(&record).unwrap();
        f.verify_lines(&lines)
    };
    let ours = AuditKey::from_seed(SEED).kid();
    assert_eq!(
        (resign(other.kid()), resign(ours.clone())),
        (
            f.broken_after(
                1,
                f.problem(
                    2,
                    2,
                    ProblemKind::UnknownKey,
                    &format!(
                        "signed by key {}, which is not among the 1 trusted keys",
                        other.kid()
                    ),
                )
            ),
            f.broken_after(
                1,
                f.problem(
                    2,
                    2,
                    ProblemKind::BadSignature,
                    &format!("the signature does not verify under key {ours}")
                )
            ),
        )
    );
    // Negative control: an auditor who trusts the other key accepts its kid, and then only the
    // signature's validity decides.
    let mut both = trusted();
    both.insert(other.verifying_key());
    let numbered = (1u64..).zip(f.lines.iter().cloned());
    assert!(verify_lines(numbered, &both).is_ok());
}

#[test]
fn a_last_line_cut_mid_json_is_malformed() {
    let f = fixture();
    let mut text: String = f.lines.iter().map(|l| format!("{l}\n")).collect();
    text.truncate(text.len() - 40);
    let cut = text.lines().last().unwrap().to_owned();
    let parse_error = serde_json::from_str::<Value>(&cut).unwrap_err();
    assert_eq!(
        f.verify(&text),
        f.broken_after(
            4,
            Problem {
                file: None,
                line: 5,
                record_id: None,
                seq: None,
                kind: ProblemKind::Malformed,
                detail: format!("not JSON: {parse_error}"),
            }
        )
    );
}

#[test]
fn the_store_copy_is_checked_against_its_columns() {
    let f = fixture();
    let mut records = f.records.clone();
    records[2].hash = f.records[1].hash.clone();
    assert_eq!(
        verify_sealed(&records, &trusted()),
        f.broken_after(
            2,
            f.problem(
                3,
                3,
                ProblemKind::HashMismatch,
                &format!(
                    "the store's hash column says {} but the line says {}",
                    f.records[1].hash, f.records[2].hash
                ),
            )
        )
    );
}

#[test]
fn a_report_serializes_for_the_cli() {
    let f = fixture();
    let mut lines = f.lines.clone();
    lines.remove(1);
    // Fixed key, ids and clock: the whole report, hashes included, is stable.
    insta::assert_json_snapshot!(f.verify_lines(&lines));
}
