//! A tiny in-memory `AuditOutbox` for these tests. The real SQLite store is tested in
//! warrant-store.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use warrant_audit::{AuditKey, GENESIS_HASH, InstallationSealer};
use warrant_core::{RunId, SequentialIds, Timestamp};
use warrant_store::{AuditOutbox, ChainHead, SealedRecord, Sealer, StoreError, StoredEvent};

#[derive(Debug, Default)]
pub struct FakeStore {
    records: Mutex<Vec<SealedRecord>>,
    /// When set, `audit_head` claims this seq: a store that lost records from its outbox.
    claimed_head: Mutex<Option<u64>>,
}

impl FakeStore {
    /// Seals one event the way the store does inside an append: head in, record out.
    pub fn seal(&self, sealer: &dyn Sealer, event: &StoredEvent, audit: &Value) -> SealedRecord {
        let head = self.audit_head().unwrap();
        let record = sealer.seal(&head, event, audit, head.seq + 1).unwrap();
        assert_eq!(record.seq, head.seq + 1);
        self.records.lock().unwrap().push(record.clone());
        record
    }

    /// Seals events as one committed batch: one signature, on the last record.
    pub fn seal_batch(&self, sealer: &dyn Sealer, events: &[(StoredEvent, Value)]) {
        let head = self.audit_head().unwrap();
        let batch_end = head.seq + events.len() as u64;
        let mut at = head;
        for (event, audit) in events {
            let record = sealer.seal(&at, event, audit, batch_end).unwrap();
            at = ChainHead {
                seq: record.seq,
                hash: record.hash.clone(),
            };
            self.records.lock().unwrap().push(record);
        }
    }

    pub fn claim_head(&self, seq: u64) {
        *self.claimed_head.lock().unwrap() = Some(seq);
    }

    pub fn records(&self) -> Vec<SealedRecord> {
        self.records.lock().unwrap().clone()
    }
}

impl AuditOutbox for FakeStore {
    fn audit_records(&self, after: u64, limit: usize) -> Result<Vec<SealedRecord>, StoreError> {
        Ok(self
            .records
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.seq > after)
            .take(limit)
            .cloned()
            .collect())
    }
    fn audit_head(&self) -> Result<ChainHead, StoreError> {
        if let Some(seq) = *self.claimed_head.lock().unwrap() {
            return Ok(ChainHead {
                seq,
                hash: GENESIS_HASH.to_owned(),
            });
        }
        Ok(match self.records.lock().unwrap().last() {
            Some(r) => ChainHead {
                seq: r.seq,
                hash: r.hash.clone(),
            },
            None => ChainHead {
                seq: 0,
                hash: String::new(),
            },
        })
    }
}

pub const SEED: [u8; 32] = [7; 32];
pub const INSTALLATION: &str = "inst-test";

pub fn run_id() -> RunId {
    RunId::parse("run-0000000000aa").unwrap()
}

pub fn sealer(key: AuditKey) -> InstallationSealer {
    InstallationSealer::new(key, INSTALLATION, Arc::new(SequentialIds::default()))
}

/// The `n`-th event (1-based) of the test run, recorded one second apart.
pub fn event(n: u64) -> StoredEvent {
    let kinds = [
        "run_started",
        "action_proposed",
        "policy_decided",
        "approval_granted",
        "effect_completed",
    ];
    let kind = kinds[usize::try_from((n - 1) % 5).unwrap()];
    StoredEvent {
        run: run_id(),
        seq: n,
        kind: kind.to_owned(),
        version: 1,
        recorded_at: Timestamp::from_millis(1_750_000_000_000 + 1000 * i64::try_from(n).unwrap())
            .unwrap(),
        payload: json!({}),
    }
}

/// The audit facts the kernel would hand over for `event(n)`; run, seq and kind are left for
/// the sealer to fill from the stored event.
pub fn audit(n: u64) -> Value {
    let mut facts = json!({
        "actor": "alice",
        "on_behalf_of": null,
        "tenant": "acme",
        "reasons": [],
    });
    match event(n).kind.as_str() {
        "action_proposed" => {
            facts["action"] = json!({"kind": "fs", "verb": "fs.write", "target": "/work/notes.md", "bytes": 120, "ratio": 0.1});
            facts["resource"] = json!("fs:/work/notes.md");
        }
        "policy_decided" => {
            facts["decision"] = json!("ask");
            facts["reasons"] = json!(["policy:writes-need-review"]);
        }
        "approval_granted" => {
            facts["approval"] =
                json!({"request": "req-000000000001", "approver": "bob", "scope": "once"});
        }
        "effect_completed" => facts["outcome"] = json!("ok"),
        _ => {}
    }
    // `null` for an absent optional field is what a kernel serializing Option::None sends.
    facts
}

/// A store holding a chain of `n` records sealed with the test key.
pub fn chain(n: u64) -> FakeStore {
    let store = FakeStore::default();
    let sealer = sealer(AuditKey::from_seed(SEED));
    for i in 1..=n {
        store.seal(&sealer, &event(i), &audit(i));
    }
    store
}
