//! The sealer: the record it builds, how it fills and guards the kernel's facts, and the
//! snapshot of one exact line.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use pretty_assertions::assert_eq;
use serde_json::json;
use warrant_audit::{AuditData, AuditKey, AuditRecord, GENESIS_HASH, chain_hash, event_digest};
use warrant_store::{ChainHead, Sealer as _};

use super::fake::{FakeStore, SEED, audit, event, sealer};

fn empty_head() -> ChainHead {
    ChainHead {
        seq: 0,
        hash: String::new(),
    }
}

#[test]
fn sealed_record_is_the_cloudevent_the_format_describes() {
    let key = AuditKey::from_seed(SEED);
    let kid = key.kid();
    let store = FakeStore::default();
    let sealer = sealer(key);
    let first = store.seal(&sealer, &event(1), &audit(1));
    let second = store.seal(&sealer, &event(3), &audit(3));

    let record: AuditRecord = serde_json::from_str(&second.line).unwrap();
    assert_eq!(
        record,
        AuditRecord {
            specversion: "1.0".into(),
            id: "000000000002".into(),
            source: "warrant://inst-test".into(),
            event_type: "dev.warrant.policy.decided".into(),
            time: "2025-06-15T15:06:43.000Z".into(),
            subject: "run-0000000000aa".into(),
            datacontenttype: "application/json".into(),
            dataschema: "https://warrant.dev/schemas/audit/v2.json".into(),
            seq: 2,
            part: None,
            prevhash: first.hash.clone(),
            batchend: None,
            hash: Some(second.hash.clone()),
            kid: Some(kid),
            sig: record.sig.clone(),
            data: AuditData {
                actor: "alice".into(),
                on_behalf_of: None,
                tenant: "acme".into(),
                run: "run-0000000000aa".into(),
                event_seq: 3,
                event: "policy_decided".into(),
                action: None,
                resource: None,
                decision: Some(warrant_audit::Decision::Ask),
                reasons: vec!["policy:writes-need-review".into()],
                approval: None,
                outcome: None,
                risk: None,
                input_digest: None,
                output_digest: None,
                event_digest: Some(event_digest(&event(3)).unwrap().as_str().to_owned()),
            },
        }
    );
    assert_eq!((second.seq, second.id.as_str()), (2, "000000000002"));
    let first_record: AuditRecord = serde_json::from_str(&first.line).unwrap();
    assert_eq!(first_record.prevhash, GENESIS_HASH);
    // The hash is over prevhash ‖ JCS(record without hash, kid, sig).
    let map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&second.line).unwrap();
    assert_eq!(chain_hash(&first.hash, &map).unwrap().as_str(), second.hash);
    // None fields are left out of the line, not written as null.
    assert!(!second.line.contains("null"), "{}", second.line);
}

#[test]
fn one_record_line_snapshot() {
    let store = FakeStore::default();
    let sealer = sealer(AuditKey::from_seed(SEED));
    store.seal(&sealer, &event(1), &audit(1));
    let record = store.seal(&sealer, &event(2), &audit(2));
    insta::assert_snapshot!(record.line);
}

#[test]
fn sealer_refuses_facts_that_contradict_the_store_or_the_format() {
    let sealer = sealer(AuditKey::from_seed(SEED));
    let ev = event(3);
    let refuse = |audit: serde_json::Value, head: &ChainHead| {
        sealer.seal(head, &ev, &audit, head.seq + 1).unwrap_err()
    };

    let mut wrong_seq = audit(3);
    wrong_seq["event_seq"] = json!(9);
    let mut bad_decision = audit(3);
    bad_decision["decision"] = json!("maybe");
    let mut extra = audit(3);
    extra["password"] = json!("hunter2");
    let mut no_actor = audit(3);
    no_actor.as_object_mut().unwrap().remove("actor");
    let mut bad_approval = audit(3);
    bad_approval["approval"] = json!("bob");
    let mut other_digest = audit(3);
    other_digest["event_digest"] = json!(event_digest(&event(2)).unwrap());
    let garbage_head = ChainHead {
        seq: 4,
        hash: "sha256:nope".into(),
    };
    let got = vec![
        refuse(wrong_seq, &empty_head()),
        refuse(bad_decision, &empty_head()),
        refuse(extra, &empty_head()),
        refuse(no_actor, &empty_head()),
        refuse(bad_approval, &empty_head()),
        refuse(other_digest, &empty_head()),
        refuse(audit(3), &garbage_head),
        refuse(json!(["not", "an", "object"]), &empty_head()),
    ];
    insta::assert_yaml_snapshot!(got);

    // Negative control: the same event with consistent facts seals.
    let mut consistent = audit(3);
    consistent["event_seq"] = json!(3);
    consistent["run"] = json!("run-0000000000aa");
    consistent["event"] = json!("policy_decided");
    assert_eq!(
        sealer.seal(&empty_head(), &ev, &consistent, 1).unwrap().seq,
        1
    );
}

/// The sealer hashes a record from its values when no float is among its facts, and from its
/// line parsed back otherwise; either way the hash must be the one a verifier computes from
/// the line, the event digest the one a reader computes from the stored text, and the index
/// columns what the store would read from the line.
#[test]
fn a_record_hashes_digests_and_indexes_as_its_line_reads_back() {
    use warrant_audit::{AuditKey, event_digest};
    use warrant_store::AuditIndex;
    let sealer = sealer(AuditKey::from_seed(SEED));
    let views = [
        json!({"verb": "fs.write", "path": "/w/é \"q\" \\ \u{1F600} \u{7}", "content_bytes": 18_446_744_073_709_551_615_u64}),
        json!([{"verb": "shell.exec", "argv": ["sh", "-c", "echo \u{2028}"]}, {"verb": "fs.read", "n": -42}]),
        json!({"verb": "mcp.call", "args": {"z": 1, "a": {"nested": [true, null, "x"]}, "ratio": 0.1}}),
        json!({"verb": "mcp.call", "args": {"big": 1e300, "small": 5e-324, "third": 1.0 / 3.0}}),
        json!("not an object"),
    ];
    let mut head = empty_head();
    for (i, view) in views.iter().enumerate() {
        let n = i as u64 + 2;
        let mut ev = event(n);
        ev.payload = json!({"call": format!("c-{n}"), "args": view.clone(), "score": if i == 3 { json!(0.3) } else { json!(3) }});
        let mut facts = audit(n);
        facts["action"] = view.clone();
        facts["resource"] = json!(format!("/w/{i}"));
        let (record, index) = sealer
            .seal_indexed_in(0, &head, &ev, &facts, n - 1)
            .unwrap();
        let parsed: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&record.line).unwrap();
        assert_eq!(
            chain_hash(parsed["prevhash"].as_str().unwrap(), &parsed)
                .unwrap()
                .as_str(),
            record.hash,
            "view {i}"
        );
        let read_back = warrant_store::StoredEvent {
            payload: serde_json::from_str(&ev.payload.to_string()).unwrap(),
            ..ev.clone()
        };
        assert_eq!(
            parsed["data"]["event_digest"].as_str().unwrap(),
            event_digest(&read_back).unwrap().as_str(),
            "view {i}"
        );
        assert_eq!(index, AuditIndex::of(&record.line), "view {i}");
        head = ChainHead {
            seq: record.seq,
            hash: record.hash,
        };
    }
}
