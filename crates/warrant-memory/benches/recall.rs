//! `recall` over 100,000 local entries against a raw FTS5 query through rusqlite on the same
//! database (issue 16's benchmark; the goal is within 1.5×). Both sides run the same bounded
//! queries, interleaved, in one process; reported as p50/p99 and their ratio. The store's side
//! includes bounding the query, the namespace filter, BM25 ordering and building typed entries;
//! the ring's own cost per call (policy, journal, audit) is measured in warrant-agent's benches.
//!
//! `cargo bench -p warrant-memory --bench recall` (set `RECALL_ENTRIES` for another corpus size).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::Instant;

use warrant_core::MemoryScope;
use warrant_memory::{MemoryStore, NewEntry, Provenance, bound_query};

const WORDS: &[&str] = &[
    "deploy",
    "vpn",
    "release",
    "tuesday",
    "freeze",
    "cargo",
    "build",
    "script",
    "review",
    "policy",
    "ledger",
    "invoice",
    "payments",
    "schema",
    "migration",
    "index",
    "backup",
    "restore",
    "rotate",
    "token",
    "cluster",
    "node",
    "queue",
    "worker",
    "latency",
    "budget",
    "alert",
    "pager",
    "oncall",
    "runbook",
    "canary",
    "rollback",
    "feature",
    "flag",
    "audit",
    "report",
    "quarter",
    "customer",
    "ticket",
    "incident",
    "postmortem",
    "dashboard",
    "metric",
    "service",
    "gateway",
    "cache",
    "redis",
    "postgres",
    "iceberg",
    "catalog",
];

fn text(i: usize) -> String {
    // A deterministic spread of 12 words per entry.
    let mut x = i.wrapping_mul(2_654_435_761) ^ 0x9e37_79b9;
    (0..12)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            WORDS[x % WORDS.len()]
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn pct(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let n: usize = std::env::var("RECALL_ENTRIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let store = MemoryStore::open(&path).unwrap();
    let entries: Vec<NewEntry> = (0..n)
        .map(|i| NewEntry {
            id: format!("mem-{i:08}"),
            scope: MemoryScope::Local,
            namespace: if i % 10 == 0 {
                "ops".into()
            } else {
                "notes".into()
            },
            text: text(i),
            tags: vec![],
            provenance: Provenance {
                run: Some("run-bench".into()),
                actor: "bench".into(),
                on_behalf_of: None,
                at: "2026-12-05T00:00:00Z".into(),
                tainted: false,
            },
        })
        .collect();
    let t = Instant::now();
    for chunk in entries.chunks(10_000) {
        store.remember_all(chunk).unwrap();
    }
    println!(
        "corpus: {n} entries written in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    let raw = rusqlite::Connection::open(&path).unwrap();
    let queries = [
        "deploy vpn rollback",
        "postgres migration backup restore",
        "incident postmortem runbook pager",
        "iceberg catalog schema",
        "token rotate",
    ];
    let rounds = 400;
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        let q = queries[r % queries.len()];
        let t = Instant::now();
        let terms = bound_query(q).unwrap();
        let found = store
            .recall(MemoryScope::Local, "notes", &terms, 10)
            .unwrap();
        ours.push(t.elapsed().as_secs_f64() * 1e6);
        assert_eq!(found.len(), 10);

        let t = Instant::now();
        let expr = q
            .split(' ')
            .map(|w| format!("\"{w}\""))
            .collect::<Vec<_>>()
            .join(" OR ");
        let mut stmt = raw
            .prepare_cached(
                "SELECT e.id, e.text, bm25(entries_fts) AS rank FROM entries_fts JOIN entries e ON e.seq = entries_fts.rowid
                 WHERE entries_fts MATCH ?1 AND e.scope = 'local' AND e.namespace = 'notes' ORDER BY rank LIMIT 10",
            )
            .unwrap();
        let rows: Vec<(String, String, f64)> = stmt
            .query_map([expr], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        theirs.push(t.elapsed().as_secs_f64() * 1e6);
        assert_eq!(rows.len(), 10);
    }
    let (o50, o99, t50, t99) = (
        pct(ours.clone(), 0.5),
        pct(ours, 0.99),
        pct(theirs.clone(), 0.5),
        pct(theirs, 0.99),
    );
    println!("recall (MemoryStore)  p50 {o50:>9.0} µs  p99 {o99:>9.0} µs");
    println!("raw FTS5 (rusqlite)   p50 {t50:>9.0} µs  p99 {t99:>9.0} µs");
    println!(
        "ratio                 p50 {:>9.2}×     p99 {:>9.2}×",
        o50 / t50,
        o99 / t99
    );
}
