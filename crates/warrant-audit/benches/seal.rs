//! What batch signing saves: `audit_seal_call` seals the four records of one governed call
//! (proposal, decision and start in one transaction, the completion in a second) with one
//! signature per transaction, against signing each record (what the store did before batch
//! signing), both in the same run. Only the sealer runs; the store's part is the same in both.
//! See docs/BENCHMARKS.md.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use warrant_audit::{AuditKey, InstallationSealer};
use warrant_core::{RandomIds, RunId, Timestamp};
use warrant_store::{ChainHead, SealedRecord, StoredEvent};

const T0_MS: i64 = 1_790_000_000_000;

fn seal_call(c: &mut Criterion) {
    let sealer = InstallationSealer::new(AuditKey::generate(), "inst-bench", Arc::new(RandomIds));
    let run = RunId::parse("run-0000000000aa").unwrap();
    let kinds = [
        "action_proposed",
        "policy_decided",
        "effect_started",
        "effect_completed",
    ];
    let events: Vec<(StoredEvent, serde_json::Value)> = (1u64..=4)
        .map(|seq| {
            let kind = kinds[usize::try_from(seq - 1).unwrap()];
            let event = StoredEvent {
                run: run.clone(),
                seq,
                kind: kind.to_owned(),
                version: 1,
                recorded_at: Timestamp::from_millis(T0_MS).unwrap(),
                payload: json!({"call": "c-1", "action": {"verb": "shell.exec", "argv": ["/bin/true"]}}),
            };
            let facts = json!({"actor": "alice", "tenant": "acme", "reasons": ["policy:allow-true"]});
            (event, facts)
        })
        .collect();
    // The transactions of one call: the first three records, then the completion.
    let per_call = |batch_end: &dyn Fn(u64) -> u64| {
        let mut head = ChainHead {
            seq: 0,
            hash: String::new(),
        };
        let mut records = Vec::with_capacity(events.len());
        for (event, facts) in &events {
            let record = sealer
                .seal_record(&head, event, facts, batch_end(head.seq + 1))
                .unwrap();
            head = ChainHead {
                seq: record.seq,
                hash: record.hash.clone(),
            };
            records.push(record);
        }
        records
    };
    let each = |seq: u64| seq;
    let batch = |seq: u64| if seq <= 3 { 3 } else { 4 };
    // Checked once: per record, four signatures; batched, two.
    let signatures = |records: Vec<SealedRecord>| {
        records
            .iter()
            .filter(|r| r.line.contains("\"sig\""))
            .count()
    };
    assert_eq!(
        (signatures(per_call(&each)), signatures(per_call(&batch))),
        (4, 2)
    );

    let mut group = c.benchmark_group("audit_seal_call");
    group
        .sample_size(50)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    group.bench_function("each_record_signed", |b| {
        b.iter(|| black_box(per_call(&each)))
    });
    group.bench_function("one_signature_per_batch", |b| {
        b.iter(|| black_box(per_call(&batch)))
    });
    group.finish();
}

criterion_group!(benches, seal_call);
criterion_main!(benches);
