//! A run's journal against its signed records: every way of changing the events table (edit,
//! insert, remove, reorder, with and without renumbering) is named with the first bad seq, and
//! so is a forged or hidden record. The untouched journal verifies (the control for each).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use base64::Engine as _;
use pretty_assertions::assert_eq;
use serde_json::{Map, Value, json};
use warrant_audit::{
    AuditKey, BindingError, ProblemKind, PublicKeys, RunBinding, chain_hash, verify_run,
};
use warrant_core::{Coded as _, RunId, Timestamp};
use warrant_store::{SealedRecord, StoredEvent};

use super::fake::{FakeStore, SEED, audit, sealer};

fn trusted() -> PublicKeys {
    PublicKeys::from_keys([AuditKey::from_seed(SEED).verifying_key()])
}

fn run(n: u8) -> RunId {
    RunId::parse(&format!("run-0000000000{n:02x}")).unwrap()
}

/// Event `seq` of `run`, each with its own payload.
fn event(run: &RunId, seq: u64) -> StoredEvent {
    let kinds = ["run_started", "action_proposed", "policy_decided"];
    StoredEvent {
        run: run.clone(),
        seq,
        kind: kinds[usize::try_from(seq % 3).unwrap()].to_owned(),
        version: 1,
        recorded_at: Timestamp::from_millis(1_750_000_000_000 + i64::try_from(seq).unwrap())
            .unwrap(),
        payload: json!({"n": seq, "verdict": "ask", "cost": 0.1 * seq as f64}),
    }
}

fn facts(run: &RunId, e: &StoredEvent) -> Value {
    let mut f = audit(1);
    f["run"] = json!(run);
    f["event_seq"] = json!(e.seq);
    f["event"] = json!(e.kind);
    f
}

/// Two runs whose events alternate in the chain: a's 1..=n and b's 1..=n.
struct World {
    store: FakeStore,
    a: RunId,
    events: Vec<StoredEvent>,
}

impl World {
    fn new(n: u64) -> Self {
        let store = FakeStore::default();
        let sealer = sealer(AuditKey::from_seed(SEED));
        let (a, b) = (run(0xaa), run(0xbb));
        let mut events = Vec::new();
        for seq in 1..=n {
            let e = event(&a, seq);
            store.seal(&sealer, &e, &facts(&a, &e));
            events.push(e);
            // b's events follow a's in runs of two, so a has stretches and gaps in the chain.
            if seq % 2 == 0 {
                let e = event(&b, seq);
                store.seal(&sealer, &e, &facts(&b, &e));
            }
        }
        Self { store, a, events }
    }

    fn records(&self) -> Vec<SealedRecord> {
        self.store
            .records()
            .into_iter()
            .filter(|r| r.line.contains(&format!("\"subject\":\"{}\"", self.a)))
            .collect()
    }

    fn check(
        &self,
        events: &[StoredEvent],
        records: &[SealedRecord],
    ) -> Result<RunBinding, BindingError> {
        verify_run(&self.a, events, records, &trusted())
    }
}

/// The same event with its content from `from`, as an `UPDATE … SET payload, kind` would leave it.
fn with_content_of(at: &StoredEvent, from: &StoredEvent) -> StoredEvent {
    StoredEvent {
        kind: from.kind.clone(),
        payload: from.payload.clone(),
        recorded_at: from.recorded_at,
        ..at.clone()
    }
}

fn renumbered(events: Vec<StoredEvent>) -> Vec<StoredEvent> {
    (1u64..)
        .zip(events)
        .map(|(seq, e)| StoredEvent { seq, ..e })
        .collect()
}

/// A record line changed by `edit`, its hash recomputed and, when `key` is given, signed again.
fn rewrite(
    record: &SealedRecord,
    edit: impl Fn(&mut Map<String, Value>),
    key: Option<&AuditKey>,
) -> SealedRecord {
    let mut line: Map<String, Value> = serde_json::from_str(&record.line).unwrap();
    edit(&mut line);
    let prevhash = line["prevhash"].as_str().unwrap().to_owned();
    let hash = chain_hash(&prevhash, &line).unwrap();
    line.insert("hash".into(), json!(hash));
    if let Some(key) = key {
        let sig = key.sign(&hash.bytes());
        line.insert(
            "sig".into(),
            json!(base64::engine::general_purpose::STANDARD.encode(sig.to_bytes())),
        );
    }
    SealedRecord {
        line: serde_json::to_string(&line).unwrap(),
        hash: hash.as_str().to_owned(),
        ..record.clone()
    }
}

#[test]
fn every_change_to_the_events_names_the_first_bad_seq_and_what_happened() {
    let w = World::new(8);
    let records = w.records();
    let ev = |seq: u64| w.events[usize::try_from(seq - 1).unwrap()].clone();
    let all = w.events.clone();

    // The control: the journal as written verifies, every event bound.
    assert_eq!(
        w.check(&all, &records),
        Ok(RunBinding {
            events: 8,
            bound: 8,
            unbound: 0
        })
    );

    let mut edited = all.clone();
    edited[2].payload["verdict"] = json!("allow");
    let mut retimed = all.clone();
    retimed[4].recorded_at = Timestamp::from_millis(1).unwrap();
    let mut gap = all.clone();
    gap.remove(3);
    let shifted_down = renumbered({
        let mut v = all.clone();
        v.remove(3);
        v
    });
    let mut appended = all.clone();
    appended.push(StoredEvent {
        payload: json!({"forged": true}),
        ..event(&w.a, 9)
    });
    let shifted_up = renumbered({
        let mut v = all.clone();
        v.insert(
            4,
            StoredEvent {
                payload: json!({"forged": true}),
                ..ev(5)
            },
        );
        v
    });
    let swapped = {
        let mut v = all.clone();
        v[1] = with_content_of(&ev(2), &ev(6));
        v[5] = with_content_of(&ev(6), &ev(2));
        v
    };
    let truncated = all[..6].to_vec();
    let cases: Vec<(&str, Vec<StoredEvent>)> = vec![
        ("payload edited", edited),
        ("time edited", retimed),
        ("row deleted", gap),
        ("row deleted, rest renumbered", shifted_down),
        ("row appended", appended),
        ("row inserted, rest renumbered", shifted_up),
        ("two rows swapped", swapped),
        ("last rows deleted, records kept", truncated),
    ];
    let got: Vec<(String, String, u64, String)> = cases
        .iter()
        .map(|(name, events)| {
            let e = w.check(events, &records).unwrap_err();
            (
                (*name).to_owned(),
                e.code().to_owned(),
                e.seq(),
                e.what().to_owned(),
            )
        })
        .collect();
    let want: Vec<(String, String, u64, String)> = [
        ("payload edited", "W-AUDIT-027", 3, "edited"),
        ("time edited", "W-AUDIT-027", 5, "edited"),
        ("row deleted", "W-AUDIT-029", 4, "removed"),
        ("row deleted, rest renumbered", "W-AUDIT-029", 4, "removed"),
        ("row appended", "W-AUDIT-028", 9, "inserted"),
        (
            "row inserted, rest renumbered",
            "W-AUDIT-028",
            5,
            "inserted",
        ),
        ("two rows swapped", "W-AUDIT-030", 2, "reordered"),
        (
            "last rows deleted, records kept",
            "W-AUDIT-029",
            7,
            "removed",
        ),
    ]
    .into_iter()
    .map(|(a, b, c, d)| (a.to_owned(), b.to_owned(), c, d.to_owned()))
    .collect();
    assert_eq!(got, want);

    // What a person reads, for each.
    let messages: Vec<String> = cases
        .iter()
        .map(|(name, events)| {
            let e = w.check(events, &records).unwrap_err();
            format!("{name}: {}: {e}", e.code())
        })
        .collect();
    insta::assert_yaml_snapshot!(messages);
}

#[test]
fn a_forged_or_hidden_record_is_refused_and_the_stretch_signature_covers_its_neighbours() {
    let w = World::new(8);
    let records = w.records();
    let key = AuditKey::from_seed(SEED);
    let other = AuditKey::from_seed([9; 32]);
    let events = w.events.clone();
    // Records 1 and 2 of run a are adjacent in the chain (a1, a2, b2, a3, a4, b4, ...): a1 is
    // covered by a2's signature, not its own.
    let first_two: Vec<u64> = records.iter().take(2).map(|r| r.seq).collect();
    assert_eq!(first_two, vec![1, 2]);

    let flip = |line: &mut Map<String, Value>| {
        line["data"]["event_digest"] = json!(
            warrant_audit::event_digest(&StoredEvent {
                payload: json!({"forged": true}),
                ..event(&w.a, 1)
            })
            .unwrap()
        );
    };
    let with = |i: usize, r: SealedRecord| {
        let mut v = records.clone();
        v[i] = r;
        v
    };
    let cases: Vec<(&str, Vec<SealedRecord>)> = vec![
        // Inside a stretch, hash recomputed: the next record no longer links, so its own
        // signature is checked, and fails.
        (
            "re-hashed inside a stretch",
            with(0, rewrite(&records[0], flip, None)),
        ),
        (
            "line edited, hash kept",
            with(
                0,
                SealedRecord {
                    line: records[0]
                        .line
                        .replace("\"actor\":\"alice\"", "\"actor\":\"mallory\""),
                    ..records[0].clone()
                },
            ),
        ),
        (
            "signed with another key",
            with(0, rewrite(&records[0], flip, Some(&other))),
        ),
        ("another run's record", {
            let mut v = records.clone();
            let b = w
                .store
                .records()
                .into_iter()
                .find(|r| r.line.contains("run-0000000000bb"))
                .unwrap();
            v.insert(2, b);
            v
        }),
        ("a record hidden", {
            let mut v = records.clone();
            v.remove(2);
            v
        }),
    ];
    let got: Vec<String> = cases
        .iter()
        .map(|(name, recs)| {
            let e = w.check(&events, recs).unwrap_err();
            format!("{name}: {} at event {}: {e}", e.code(), e.seq())
        })
        .collect();
    insta::assert_yaml_snapshot!(got);

    // Negative control: re-signing an edited record with the installation key itself is what
    // only the key holder can do, and it does pass the signature; the digest then names the
    // event as edited.
    let resigned = with(0, rewrite(&records[0], flip, Some(&key)));
    let e = w.check(&events, &resigned).unwrap_err();
    assert_eq!((e.code(), e.seq()), ("W-AUDIT-027", 1));
    match w.check(&events, &with(0, rewrite(&records[0], flip, None))) {
        Err(BindingError::Record { kind, record, .. }) => {
            assert_eq!((kind, record), (ProblemKind::BadSignature, 1));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn records_from_before_the_binding_verify_as_unbound_never_as_bound() {
    let w = World::new(4);
    let key = AuditKey::from_seed(SEED);
    // What a v1 sealer wrote: no event digest, dataschema v1, signed. Chained again from the
    // start so the links hold.
    let mut prev = warrant_audit::GENESIS_HASH.to_owned();
    let v1: Vec<SealedRecord> = w
        .records()
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let seq = i as u64 + 1;
            let prevhash = prev.clone();
            let r = rewrite(
                r,
                |line| {
                    line["data"].as_object_mut().unwrap().remove("event_digest");
                    line["dataschema"] = json!("https://warrant.dev/schemas/audit/v1.json");
                    line["seq"] = json!(seq);
                    line["prevhash"] = json!(prevhash);
                },
                Some(&key),
            );
            prev = r.hash.clone();
            SealedRecord { seq, ..r }
        })
        .collect();
    assert_eq!(
        w.check(&w.events, &v1),
        Ok(RunBinding {
            events: 4,
            bound: 0,
            unbound: 4
        })
    );
    // An unbound record still names its event's kind: a kind changed under it is an edit.
    let mut kind_changed = w.events.clone();
    kind_changed[1].kind = "approval_granted".into();
    let e = w.check(&kind_changed, &v1).unwrap_err();
    assert_eq!((e.code(), e.seq(), e.what()), ("W-AUDIT-027", 2, "edited"));
}
