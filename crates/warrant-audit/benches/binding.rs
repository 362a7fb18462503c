//! What checking a run's journal against its signed records costs on resume, for a run of
//! 10,000 events in a SQLite store, each figure against a baseline in the same run:
//! `binding_10k` reads the events (what a resume without the check does), reads them with the
//! run's records, and reads and verifies them (`verify_run`, what `Ring::load` does), and times
//! `verify_run` alone against SHA-256 of the same bytes, parsing the record lines without
//! verifying them, and verifying every record's signature (`verify_sealed`). `checkpoint_10k`
//! verifies the sink's 10,000-line copy with and without its signed checkpoint, and
//! `checkpoint_deliver_10k` delivers it with and without writing checkpoints. See
//! docs/BENCHMARKS.md, "Journal binding on resume".
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};
use warrant_audit::{
    AuditKey, CheckpointRule, Checkpointer, InstallationSealer, JsonlSink, PublicKeys, chain_hash,
    event_digest, verify_copy, verify_file, verify_run, verify_sealed,
};
use warrant_core::{IdSource, RandomIds, SystemClock};
use warrant_store::{Append, AuditQuery, EventDraft, EventStore, NewRun, RunStatus, SqliteStore};

const EVENTS: u64 = 10_000;

/// The events of a run that reads, decides on and writes files, four kinds in turn, with the
/// payloads and audit facts of their size in a real run (a few hundred bytes each).
fn draft(n: u64) -> EventDraft {
    let path = format!("/home/alice/project/src/module_{}.rs", n % 50);
    let call = format!("call-{n:06}");
    let (kind, payload, mut audit) = match n % 4 {
        0 => (
            "action_proposed",
            json!({"call_id": call, "index": 0, "tool": "write_file",
                   "args": {"path": path, "content_digest": format!("sha256:{:064x}", n), "bytes": 1200 + n % 300}}),
            json!({"action": {"verb": "fs.write", "path": path, "bytes": 1200 + n % 300}}),
        ),
        1 => (
            "policy_decided",
            json!({"call_id": call, "index": 0, "verdict": "allow", "risk": "low",
                   "reasons": [{"policy": "workspace-write", "text": "writes inside the workspace"}]}),
            json!({"action": {"verb": "fs.write", "path": path}, "decision": "allow",
                   "reasons": ["workspace-write"], "risk": "low"}),
        ),
        2 => (
            "effect_started",
            json!({"call_id": call, "index": 0, "idempotent": true}),
            json!({"action": {"verb": "fs.write", "path": path}}),
        ),
        _ => (
            "effect_completed",
            json!({"call_id": call, "index": 0, "ok": true, "bytes": 1200 + n % 300,
                   "output_digest": format!("sha256:{:064x}", n * 7)}),
            json!({"action": {"verb": "fs.write", "path": path}, "outcome": "ok",
                   "output_digest": format!("sha256:{:064x}", n * 7)}),
        ),
    };
    audit["actor"] = "alice".into();
    audit["tenant"] = "acme".into();
    audit["resource"] = path.into();
    if audit.get("reasons").is_none() {
        audit["reasons"] = json!([]);
    }
    EventDraft {
        kind: kind.into(),
        version: 1,
        payload,
        audit,
        usage: None,
    }
}

fn binding(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let ids: Arc<dyn IdSource> = Arc::new(RandomIds);
    let store = SqliteStore::create(&dir.path().join("store.db"), Arc::new(SystemClock)).unwrap();
    let key = AuditKey::generate();
    let sealer = InstallationSealer::new(key.clone(), "bench", ids.clone());
    let keys = PublicKeys::from_keys([key.verifying_key()]);
    let run = ids.run_id();
    // Setup only: the run's first event, then the other 9,999 in one transaction.
    store
        .create_run(
            &NewRun {
                run: run.clone(),
                tenant: bench_tenant(),
                actor: "alice".into(),
                task: "bench".into(),
                status: RunStatus::Running,
            },
            vec![draft(1)],
            &sealer,
        )
        .unwrap();
    store
        .append(
            Append {
                run: run.clone(),
                expected_seq: 2,
                events: (2..=EVENTS).map(draft).collect(),
                status: None,
                requests: vec![],
                fence: None,
            },
            &sealer,
        )
        .unwrap();
    // The query `warrant_kernel::journal::run_records` makes: the run's records, chain order.
    let run_query = AuditQuery {
        run: Some(run.to_string()),
        ..AuditQuery::default()
    };
    let events = store.events(&run).unwrap();
    let records = store.query_audit(&run_query).unwrap();
    assert_eq!(
        (events.len(), records.len()),
        (EVENTS as usize, EVENTS as usize)
    );
    let bound = verify_run(&run, &events, &records, &keys).unwrap();
    assert_eq!(bound.bound, EVENTS, "every event bound, none unbound");
    assert!(verify_sealed(&records, &keys).is_ok());
    // The bytes the check reads: every record line and every event's payload as stored.
    let payloads: Vec<String> = events.iter().map(|e| e.payload.to_string()).collect();
    eprintln!(
        "binding_10k: {EVENTS} events, {} record bytes + {} payload bytes",
        records.iter().map(|r| r.line.len()).sum::<usize>(),
        payloads.iter().map(String::len).sum::<usize>()
    );

    let mut group = c.benchmark_group("binding_10k");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .throughput(Throughput::Elements(EVENTS));
    group.bench_function("read_events", |b| {
        b.iter(|| black_box(store.events(&run).unwrap()))
    });
    group.bench_function("read_events_and_records", |b| {
        b.iter(|| {
            black_box(store.events(&run).unwrap());
            black_box(store.query_audit(&run_query).unwrap())
        })
    });
    group.bench_function("read_and_verify_run", |b| {
        b.iter(|| {
            let events = store.events(&run).unwrap();
            let records = store.query_audit(&run_query).unwrap();
            black_box(verify_run(&run, &events, &records, &keys).unwrap())
        })
    });
    group.bench_function("verify_run", |b| {
        b.iter(|| black_box(verify_run(&run, &events, &records, &keys).unwrap()))
    });
    group.bench_function("sha256_same_bytes", |b| {
        b.iter(|| {
            let mut out = 0u8;
            for line in records.iter().map(|r| &r.line).chain(&payloads) {
                out ^= Sha256::digest(line.as_bytes())[0];
            }
            black_box(out)
        })
    });
    group.bench_function("parse_records_only", |b| {
        b.iter(|| {
            for r in &records {
                black_box(serde_json::from_str::<Value>(&r.line).unwrap());
            }
        })
    });
    group.bench_function("verify_sealed_every_signature", |b| {
        b.iter(|| black_box(verify_sealed(&records, &keys)))
    });
    // Where `verify_run`'s time goes: recomputing each record's chain hash (canonical JSON of
    // the parsed line) and each event's digest (canonical JSON of the stored event).
    let parsed: Vec<(String, Map<String, Value>)> = records
        .iter()
        .map(|r| {
            let line: Map<String, Value> = serde_json::from_str(&r.line).unwrap();
            (line["prevhash"].as_str().unwrap().to_owned(), line)
        })
        .collect();
    group.bench_function("chain_hash_of_parsed_records", |b| {
        b.iter(|| {
            for (prevhash, line) in &parsed {
                black_box(chain_hash(prevhash, line).unwrap());
            }
        })
    });
    group.bench_function("event_digest_of_events", |b| {
        b.iter(|| {
            for event in &events {
                black_box(event_digest(event).unwrap());
            }
        })
    });
    group.finish();

    // The sink's copy of the same 10,000 records, with its checkpoint.
    let copy = dir.path().join("sink/audit.jsonl");
    let signer = key.clone();
    let sink = JsonlSink::new(&copy).with_checkpoint(Checkpointer::new(
        key,
        "bench",
        Arc::new(SystemClock),
        keys.clone(),
    ));
    let delivered = sink.deliver(&store).unwrap();
    assert_eq!(delivered.to_seq, EVENTS);
    let files = sink.files().unwrap();
    let checked = verify_copy(
        &files,
        true,
        &sink.checkpoint_path(),
        &keys,
        CheckpointRule::Required,
    )
    .unwrap();
    assert!(checked.is_ok(), "{checked:?}");
    let mut group = c.benchmark_group("checkpoint_10k");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .throughput(Throughput::Elements(EVENTS));
    group.bench_function("verify_file", |b| {
        b.iter(|| black_box(verify_file(&copy, &keys).unwrap()))
    });
    group.bench_function("verify_copy_with_checkpoint", |b| {
        b.iter(|| {
            let report = verify_copy(
                &files,
                true,
                &sink.checkpoint_path(),
                &keys,
                CheckpointRule::Required,
            )
            .unwrap();
            assert!(report.is_ok());
            black_box(report)
        })
    });
    group.finish();

    // What the checkpoint adds to a delivery: the same 10,000 records into a fresh copy, in
    // batches of 500 (20 batches, each fsynced), with and without a checkpoint after each.
    let mut group = c.benchmark_group("checkpoint_deliver_10k");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(6))
        .throughput(Throughput::Elements(EVENTS));
    let fresh = || {
        let d = tempfile::tempdir_in(dir.path()).unwrap();
        let path = d.path().join("audit.jsonl");
        (d, path)
    };
    group.bench_function("deliver_without_checkpoint", |b| {
        b.iter_batched(
            fresh,
            |(d, path)| {
                let report = JsonlSink::new(&path).deliver(&store).unwrap();
                assert_eq!(report.delivered, EVENTS);
                d
            },
            BatchSize::PerIteration,
        )
    });
    group.bench_function("deliver_with_checkpoint", |b| {
        b.iter_batched(
            fresh,
            |(d, path)| {
                let report = JsonlSink::new(&path)
                    .with_checkpoint(Checkpointer::new(
                        signer.clone(),
                        "bench",
                        Arc::new(SystemClock),
                        keys.clone(),
                    ))
                    .deliver(&store)
                    .unwrap();
                assert_eq!(report.delivered, EVENTS);
                d
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, binding);
criterion_main!(benches);

/// A tenant for the runs of this file.
fn bench_tenant() -> warrant_store::Tenant {
    warrant_store::Tenant::of(&warrant_core::Principal {
        tenant: "acme".into(),
        actor: "alice".into(),
        kind: warrant_core::PrincipalKind::User,
        on_behalf_of: None,
        roles: vec![],
        teams: vec![],
        attrs: Default::default(),
    })
}
