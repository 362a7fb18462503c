//! Publish latency into shared memory on PostgreSQL (issue 16's benchmark), against the
//! least a publish must do on the same server: one transaction inserting the entry row and
//! marking the draft, through a plain `postgres::Client` with prepared statements. Our side,
//! `PgShared::publish`, also scopes the session to the tenant, locks and reads the draft back,
//! checks its digest and reads the entry back. Interleaved in one process, each on a database
//! of its own; reported as p50/p99 and their ratio. Without `WARRANT_TEST_PG_URL` the tests'
//! default server (127.0.0.1:5432) is used.
//!
//! `cargo bench -p warrant-memory --bench publish` (`PUBLISH_ROUNDS` for another count).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::Instant;

use warrant_memory::{PgShared, Provenance, Review, SharedStore};
use warrant_testkit::pg::TestDb;

fn pct(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let rounds: usize = std::env::var("PUBLISH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let ours_db = TestDb::new();
    let raw_db = TestDb::new();
    let pg = PgShared::new(&ours_db.url, None, true).unwrap();
    let provenance = Provenance {
        run: Some("run-bench".into()),
        actor: "agent".into(),
        on_behalf_of: None,
        at: "2026-12-06T00:00:00Z".into(),
        tainted: false,
    };
    let text = |i: usize| {
        format!(
            "Entry {i}: releases are cut on Tuesdays; the freeze starts on Fridays; deploys need the VPN."
        )
    };
    let mut digests = Vec::with_capacity(rounds);
    for i in 0..rounds {
        digests.push(
            pg.propose(
                "bench",
                &format!("draft-{i}"),
                "team",
                &text(i),
                &["ops".into()],
                &provenance,
            )
            .unwrap(),
        );
    }

    // The baseline's tables: the same rows and index, no tenant policy, no digest check.
    PgShared::new(&raw_db.url, None, true)
        .unwrap()
        .check()
        .unwrap();
    let mut raw = raw_db.client();
    raw.batch_execute(
        "INSERT INTO memory_namespaces VALUES ('bench', 'team', '2026-12-06T00:00:00Z');",
    )
    .unwrap();
    for i in 0..rounds {
        raw.execute(
            "INSERT INTO memory_drafts (tenant, id, namespace, text, tags, digest, actor, created_at, tainted, status)
             VALUES ('bench', $1, 'team', $2, '[\"ops\"]', 'sha256:x', 'agent', '2026-12-06T00:00:00Z', false, 'open')",
            &[&format!("draft-{i}"), &text(i)],
        )
        .unwrap();
    }
    let insert = raw
        .prepare(
            "INSERT INTO memory_entries (tenant, id, namespace, text, tags, digest, run, actor, created_at, tainted, published)
             VALUES ('bench', $1, 'team', $2, '[\"ops\"]', 'sha256:x', 'run-bench', 'agent', '2026-12-06T01:00:00Z', false, '{}')",
        )
        .unwrap();
    let mark = raw
        .prepare("UPDATE memory_drafts SET status = 'published', reviewer = 'bob' WHERE tenant = 'bench' AND id = $1")
        .unwrap();

    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for (i, digest) in digests.iter().enumerate() {
        let id = format!("draft-{i}");
        let t = Instant::now();
        let review = Review {
            id: &id,
            seen: digest,
            reviewer: "bob",
            reason: "checked",
            at: "2026-12-06T01:00:00Z",
            run: Some("run-review"),
        };
        pg.publish("bench", &review).unwrap();
        ours.push(t.elapsed().as_secs_f64() * 1e6);

        let t = Instant::now();
        let mut tx = raw.transaction().unwrap();
        tx.execute(&insert, &[&format!("pub-{id}"), &text(i)])
            .unwrap();
        tx.execute(&mark, &[&id]).unwrap();
        tx.commit().unwrap();
        theirs.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let (o50, o99, t50, t99) = (
        pct(ours.clone(), 0.5),
        pct(ours, 0.99),
        pct(theirs.clone(), 0.5),
        pct(theirs, 0.99),
    );
    println!("{rounds} publishes");
    println!("publish (PgShared)           p50 {o50:>9.0} µs  p99 {o99:>9.0} µs");
    println!("insert + update (postgres)   p50 {t50:>9.0} µs  p99 {t99:>9.0} µs");
    println!(
        "ratio                        p50 {:>9.2}×     p99 {:>9.2}×",
        o50 / t50,
        o99 / t99
    );
}
