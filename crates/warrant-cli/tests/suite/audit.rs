//! A tampered trail fails `audit verify`, naming the first broken record; an outside auditor
//! verifies a copy with nothing but the public key.

use std::fs;

use pretty_assertions::assert_eq;
use serde_json::Value;

use super::harness::{Sandbox, stderr, stdout};

fn sandbox_with_trail() -> (Sandbox, Vec<String>) {
    let sb = Sandbox::init();
    let model = sb.transcript("version: 1\nturns:\n  - calls:\n      - tool: list_dir\n        args: { path: \".\" }\n      - tool: read_file\n        args: { path: \".env\" }\n  - say: done\n");
    let out = sb.run(&["run", "--model", &model, "t"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines: Vec<String> = fs::read_to_string(sb.ws.join(".warrant/audit/audit.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert!(lines.len() >= 8, "{}", lines.len());
    (sb, lines)
}

fn verify_copy(sb: &Sandbox, lines: &[String]) -> (i32, Value) {
    let copy = sb.dir.path().join("copy.jsonl");
    fs::write(&copy, lines.join("\n") + "\n").unwrap();
    let out = sb.run(&[
        "audit",
        "verify",
        "--json",
        "--file",
        copy.to_str().unwrap(),
        "--pubkeys",
        sb.ws.join(".warrant/keys/audit.pub").to_str().unwrap(),
    ]);
    (
        out.status.code().unwrap(),
        serde_json::from_slice(&out.stdout).unwrap(),
    )
}

fn problem(v: &Value) -> (Value, Value) {
    let p = &v["checked"][0]["report"]["first_problem"];
    (p["line"].clone(), p["kind"].clone())
}

#[test]
fn edits_removals_and_reorders_are_each_caught_at_the_first_broken_record() {
    let (sb, lines) = sandbox_with_trail();
    let (code, v) = verify_copy(&sb, &lines);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["ok"], true);

    // An edited decision.
    let mut edited = lines.clone();
    let i = edited
        .iter()
        .position(|l| l.contains("\"decision\":\"deny\""))
        .unwrap();
    edited[i] = edited[i].replace("\"decision\":\"deny\"", "\"decision\":\"allow\"");
    let (code, v) = verify_copy(&sb, &edited);
    assert_eq!(code, 1);
    assert_eq!(
        problem(&v),
        (Value::from(i as u64 + 1), Value::from("hash_mismatch"))
    );

    // A removed record.
    let mut removed = lines.clone();
    removed.remove(3);
    let (code, v) = verify_copy(&sb, &removed);
    assert_eq!(code, 1);
    assert_eq!(problem(&v).0, Value::from(4));

    // Two records swapped.
    let mut swapped = lines;
    swapped.swap(2, 3);
    let (code, v) = verify_copy(&sb, &swapped);
    assert_eq!(code, 1);
    assert_eq!(problem(&v).0, Value::from(3));

    // The installation's own verify checks store and sink; a sink edit breaks it too.
    let sink = sb.ws.join(".warrant/audit/audit.jsonl");
    fs::write(&sink, edited.join("\n") + "\n").unwrap();
    let out = sb.run(&["audit", "verify"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("ok       store"), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("BROKEN   .warrant/audit/audit.jsonl"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn tail_reads_the_trail_and_records_hold_who_what_and_why() {
    let (sb, lines) = sandbox_with_trail();
    let out = sb.run(&["audit", "tail", "-n", "3", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let tail: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(tail.len(), 3);
    assert_eq!(
        tail[2].to_string(),
        serde_json::from_str::<Value>(lines.last().unwrap())
            .unwrap()
            .to_string()
    );
    let denied: Value =
        serde_json::from_str(lines.iter().find(|l| l.contains("effect.denied")).unwrap()).unwrap();
    assert_eq!(denied["specversion"], "1.0");
    assert_eq!(denied["data"]["actor"], "tester");
    assert_eq!(denied["data"]["tenant"], "harbour");
    assert_eq!(denied["data"]["decision"], "deny");
    assert!(
        denied["data"]["resource"]
            .as_str()
            .unwrap()
            .ends_with("/.env")
    );
    assert_eq!(denied["data"]["reasons"][0], "project:no-secret-files");
    let human = sb.run(&["audit", "tail"]);
    assert!(
        stdout(&human).contains("effect.denied"),
        "{}",
        stdout(&human)
    );
}

/// Batch signing end to end: a governed call's records are committed as batches whose last
/// record alone is signed; a copy with one batch signature stripped fails at that record, one
/// cut inside a batch fails at the batch's first record, and the intact copy verifies.
#[test]
fn one_signature_per_committed_batch_and_a_stripped_one_is_caught() {
    let (sb, lines) = sandbox_with_trail();
    let records: Vec<serde_json::Map<String, Value>> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let signed = records.iter().filter(|r| r.contains_key("sig")).count();
    let members: Vec<usize> = (0..records.len())
        .filter(|&i| records[i].contains_key("batchend"))
        .collect();
    assert!(!members.is_empty() && signed < records.len(), "{lines:?}");
    assert_eq!(signed + members.len(), records.len());
    // The first batch with more than one record: its end is the record after its members.
    let first = members[0];
    let end = usize::try_from(records[first]["batchend"].as_u64().unwrap()).unwrap() - 1;
    assert!(records[end].contains_key("sig") && !records[end].contains_key("batchend"));

    // The control: the intact copy verifies.
    let (code, v) = verify_copy(&sb, &lines);
    assert_eq!((code, &v["ok"]), (0, &Value::from(true)), "{v}");

    // The batch's signature stripped: its members have nothing that signs them.
    let mut stripped = lines.clone();
    let mut record = records[end].clone();
    record.remove("sig");
    record.remove("kid");
    stripped[end] = serde_json::to_string(&record).unwrap();
    let (code, v) = verify_copy(&sb, &stripped);
    assert_eq!(code, 1, "{v}");
    assert_eq!(
        problem(&v),
        (Value::from(end as u64 + 1), Value::from("unsigned"))
    );

    // A copy cut inside the batch: the records it holds of the batch are not signed.
    let (code, v) = verify_copy(&sb, &lines[..end]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(
        problem(&v),
        (Value::from(first as u64 + 1), Value::from("unsigned"))
    );
}
