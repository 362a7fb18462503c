//! Behaviour every `EventStore` must have. Generic over the store so the PostgreSQL store
//! (a later issue) runs the same suite.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use warrant_core::{FixedClock, IdSource, RequestId, SequentialIds, Timestamp};
use warrant_store::{
    Append, AuditOutbox, ChainHead, EventDraft, EventStore, NewRun, RequestStatus, RequestUpdate,
    RunStatus, SealedRecord, Sealer, SqliteStore, StoreError, StoredEvent,
};

/// A sealer that chains by concatenation, enough to see order and atomicity.
struct ToySealer;

impl Sealer for ToySealer {
    fn seal(
        &self,
        head: &ChainHead,
        event: &StoredEvent,
        audit: &Value,
    ) -> Result<SealedRecord, String> {
        if audit == &json!("fail") {
            return Err("refused by test".into());
        }
        let seq = head.seq + 1;
        Ok(SealedRecord {
            seq,
            id: format!("rec-{seq}"),
            hash: format!("{}+{}", head.hash.len(), event.seq),
            line: json!({"seq": seq, "run": event.run, "event": event.seq, "kind": event.kind})
                .to_string(),
        })
    }
}

fn draft(kind: &str) -> EventDraft {
    EventDraft {
        kind: kind.into(),
        version: 1,
        payload: json!({"k": kind}),
        audit: json!({}),
    }
}

pub fn clock() -> Arc<FixedClock> {
    Arc::new(FixedClock(
        Timestamp::from_millis(1_700_000_000_000).unwrap(),
    ))
}

fn conformance(store: &dyn EventStore) {
    let ids = SequentialIds::default();
    let run = ids.run_id();
    let created = store
        .create_run(
            &NewRun {
                run: run.clone(),
                actor: "alice".into(),
                task: "t".into(),
                status: RunStatus::Running,
            },
            vec![draft("run_started")],
            &ToySealer,
        )
        .unwrap();
    assert_eq!(created.len(), 1);
    assert_eq!(created[0].seq, 1);

    // A second create of the same run is refused.
    let again = store.create_run(
        &NewRun {
            run: run.clone(),
            actor: "alice".into(),
            task: "t".into(),
            status: RunStatus::Running,
        },
        vec![draft("run_started")],
        &ToySealer,
    );
    assert!(matches!(again, Err(StoreError::RunExists { .. })));

    let req = RequestId::parse("req-00aa").unwrap();
    store
        .append(
            Append {
                run: run.clone(),
                expected_seq: 2,
                events: vec![draft("a"), draft("b")],
                status: Some(RunStatus::Parked),
                requests: vec![RequestUpdate::Open {
                    id: req.clone(),
                    summary: json!({"what": "x"}),
                }],
                fence: None,
            },
            &ToySealer,
        )
        .unwrap();

    // Optimistic concurrency: a writer that read an older log writes nothing.
    let stale = store.append(
        Append {
            run: run.clone(),
            expected_seq: 2,
            events: vec![draft("late")],
            status: None,
            requests: vec![],
            fence: None,
        },
        &ToySealer,
    );
    assert!(
        matches!(
            stale,
            Err(StoreError::Conflict {
                expected: 2,
                found: 4,
                ..
            })
        ),
        "{stale:?}"
    );

    // A sealing failure rolls the whole append back.
    let mut failing = draft("c");
    failing.audit = json!("fail");
    let failed = store.append(
        Append {
            run: run.clone(),
            expected_seq: 4,
            events: vec![draft("ok-before"), failing],
            status: Some(RunStatus::Completed),
            requests: vec![RequestUpdate::Answered { id: req.clone() }],
            fence: None,
        },
        &ToySealer,
    );
    assert!(matches!(failed, Err(StoreError::Seal(_))));

    let kinds: Vec<(u64, String)> = store
        .events(&run)
        .unwrap()
        .into_iter()
        .map(|e| (e.seq, e.kind))
        .collect();
    assert_eq!(
        kinds,
        vec![(1, "run_started".into()), (2, "a".into()), (3, "b".into())]
    );
    let row = store.run(&run).unwrap().unwrap();
    assert_eq!(
        (row.status, row.events, row.actor.as_str()),
        (RunStatus::Parked, 3, "alice")
    );
    let open = store.requests(Some(RequestStatus::Open)).unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].summary, json!({"what": "x"}));

    store
        .append(
            Append {
                run,
                expected_seq: 4,
                events: vec![draft("end")],
                status: Some(RunStatus::Completed),
                requests: vec![RequestUpdate::Answered { id: req.clone() }],
                fence: None,
            },
            &ToySealer,
        )
        .unwrap();
    assert_eq!(
        store.request(&req).unwrap().unwrap().status,
        RequestStatus::Answered
    );
    assert_eq!(store.requests(Some(RequestStatus::Open)).unwrap(), vec![]);

    // The audit outbox holds one record per event, in commit order.
    let records = store.audit_records(0, 100).unwrap();
    let seqs: Vec<u64> = records.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, vec![1, 2, 3, 4]);
    assert_eq!(store.audit_records(2, 1).unwrap()[0].seq, 3);
    assert_eq!(store.audit_head().unwrap().seq, 4);
    assert!(matches!(
        store.append(
            Append {
                run: ids.run_id(),
                expected_seq: 1,
                events: vec![draft("x")],
                status: None,
                requests: vec![],
                fence: None
            },
            &ToySealer
        ),
        Err(StoreError::UnknownRun(_))
    ));
}

#[test]
fn sqlite_store_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::create(&dir.path().join("store.db"), clock()).unwrap();
    conformance(&store);
    // Reopening reads everything back.
    drop(store);
    let store = SqliteStore::open(&dir.path().join("store.db"), clock()).unwrap();
    assert_eq!(store.runs().unwrap().len(), 1);
    assert_eq!(store.audit_head().unwrap().seq, 4);
}
