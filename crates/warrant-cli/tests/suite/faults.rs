//! Faults under load on the shared store: workers killed (SIGKILL) at random points while
//! several of them append to one PostgreSQL, and the database restarted while they work. The
//! crash matrix (`crash.rs`) kills one process at every chosen point; here the points are
//! wherever the kill lands while others hold the chain's lock or wait for it. Whatever
//! happens: every run ends completed, no effect ran twice, every file holds what its one
//! write put there, and the audit chain verifies.

use std::collections::BTreeMap;
use std::process::{Child, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::Value;
use warrant_testkit::pg::{TestDb, Throwaway};

use super::harness::{Sandbox, stderr, stdout};

const RUNS: usize = 8;
const WRITES: usize = 4;

/// Run `i`: a read, then `WRITES` turns that each create one file, then its answer.
fn transcript(i: usize) -> String {
    let mut t = String::from(
        "version: 1\nturns:\n  - calls:\n      - tool: read_file\n        args: { path: README.md }\n",
    );
    for k in 0..WRITES {
        t.push_str(&format!(
            "  - calls:\n      - tool: write_file\n        args: {{ path: out/r{i}-{k}.txt, content: \"r{i}-{k}\\n\" }}\n"
        ));
    }
    t.push_str("  - say: done\n");
    t
}

fn submit_all(sb: &Sandbox) -> Vec<String> {
    (0..RUNS)
        .map(|i| {
            let model = sb.transcript(&transcript(i));
            let queued = sb.json(&["submit", "--json", "--model", &model, &format!("job {i}")]);
            queued["run"].as_str().unwrap().to_owned()
        })
        .collect()
}

/// A worker whose standard error goes to `worker-ID.log` beside the workspace (a pipe nobody
/// reads could fill and stop it).
fn worker(sb: &Sandbox, id: &str) -> Child {
    let log = std::fs::File::create(sb.dir.path().join(format!("worker-{id}.log"))).unwrap();
    sb.std_cmd(&["worker", "--lease-ms", "600", "--poll-ms", "50", "--id", id])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

fn status(sb: &Sandbox, run: &str) -> (String, Vec<Value>) {
    let shown = sb.json(&["runs", "show", run, "--json"]);
    (
        shown["run"]["status"].as_str().unwrap().to_owned(),
        shown["events"].as_array().unwrap().clone(),
    )
}

/// Settles what the kills left in doubt, as a person who looks at the workspace would: a
/// write whose file holds its content happened, any other did not and is retried. Returns
/// once every run has ended; the limit only guards against a hang.
fn settle(sb: &Sandbox, runs: &[String]) {
    let started = Instant::now();
    loop {
        let mut open = 0;
        for run in runs {
            let (status, _) = status(sb, run);
            match status.as_str() {
                "completed" => {}
                "parked" => {
                    open += 1;
                    resolve_doubts(sb, run);
                }
                _ => open += 1,
            }
        }
        if open == 0 {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "runs still open after 180 s: {:?}",
            runs.iter().map(|r| status(sb, r).0).collect::<Vec<_>>()
        );
        thread::sleep(Duration::from_millis(200));
    }
}

fn resolve_doubts(sb: &Sandbox, run: &str) {
    let open = sb.json(&["approvals", "list", "--json"]);
    for request in open["requests"].as_array().unwrap() {
        if request["run"] != run || request["summary"]["kind"] != "in_doubt" {
            continue;
        }
        let step = request["summary"]["call"].as_str().unwrap();
        let (_, events) = status(sb, run);
        let proposed = events
            .iter()
            .find(|e| e["kind"] == "action_proposed" && e["payload"]["call_id"] == step)
            .map(|e| e["payload"].clone())
            .unwrap_or_else(|| panic!("no proposal for step {step} of {run}"));
        let path = proposed.pointer("/args/path").and_then(Value::as_str);
        let happened = path.is_some_and(|p| {
            let want = format!(
                "{}\n",
                p.trim_start_matches("out/").trim_end_matches(".txt")
            );
            std::fs::read_to_string(sb.ws.join(p)).is_ok_and(|got| got == want)
        });
        let res = sb.run(&[
            "runs",
            "resolve",
            run,
            "--step",
            step,
            "--as",
            if happened { "completed" } else { "retry" },
        ]);
        assert_eq!(res.status.code(), Some(0), "{}", stderr(&res));
    }
    // A resolved run continues in whoever drives it next: the workers if it is queued again,
    // else a resume here.
    if status(sb, run).0 == "parked" {
        let out = sb.run(&["resume", "--prompt", "never", run]);
        assert!(
            matches!(out.status.code(), Some(0 | 10)),
            "resume exited {:?}: {}{}",
            out.status.code(),
            stdout(&out),
            stderr(&out)
        );
    }
}

/// What every run must come to, whatever the faults: completed, each call's effect once, each
/// file written once with its content, and the chain whole.
fn assert_whole(sb: &Sandbox, runs: &[String]) {
    for (i, run) in runs.iter().enumerate() {
        let (status, events) = status(sb, run);
        assert_eq!(status, "completed", "run {run}");
        let mut completed: BTreeMap<String, usize> = BTreeMap::new();
        for e in &events {
            if e["kind"] == "effect_completed" {
                *completed
                    .entry(e["payload"]["call_id"].as_str().unwrap().to_owned())
                    .or_default() += 1;
            }
        }
        assert!(
            completed.values().all(|n| *n == 1),
            "run {run}: an effect completed twice: {completed:?}"
        );
        assert_eq!(completed.len(), WRITES + 1, "run {run}: {completed:?}");
        let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
        assert_eq!(
            seqs,
            (1..=events.len() as u64).collect::<Vec<_>>(),
            "run {run}: the journal has a gap or a repeat"
        );
        for k in 0..WRITES {
            let rel = format!("out/r{i}-{k}.txt");
            assert_eq!(
                std::fs::read_to_string(sb.ws.join(&rel)).unwrap(),
                format!("r{i}-{k}\n"),
                "{rel}"
            );
        }
    }
    let verify = sb.run(&["audit", "verify"]);
    assert_eq!(
        verify.status.code(),
        Some(0),
        "{}{}",
        stdout(&verify),
        stderr(&verify)
    );
}

/// A small deterministic sequence of pauses (no clock or entropy in the test's choices).
fn pauses() -> impl Iterator<Item = Duration> {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    std::iter::from_fn(move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        Some(Duration::from_millis(120 + x % 380))
    })
}

/// Three workers on one PostgreSQL; every few hundred milliseconds one of them is killed
/// outright (wherever it is: waiting for the chain's lock, inside an append, calling the
/// model, writing a file) and a new one started in its place.
#[test]
fn workers_killed_at_random_under_load_lose_and_double_nothing() {
    let db = TestDb::new();
    let sb = Sandbox::init_with(Some(db.url.clone()));
    let runs = submit_all(&sb);
    let mut workers: Vec<Child> = (0..3).map(|n| worker(&sb, &format!("w{n}"))).collect();
    let mut kills = 0;
    for (round, pause) in pauses().take(14).enumerate() {
        thread::sleep(pause);
        let slot = round % workers.len();
        kill(&mut workers[slot]);
        kills += 1;
        workers[slot] = worker(&sb, &format!("w{slot}-{round}"));
    }
    settle(&sb, &runs);
    for mut w in workers {
        kill(&mut w);
    }
    assert!(kills >= 14);
    assert_whole(&sb, &runs);
}

/// The database restarts (a failover, an upgrade), then is down for a while, as two workers
/// drive runs: the workers wait for it and go on rather than exit, runs cut mid-step are read
/// again from the store, and everything ends as if nothing happened.
#[test]
fn a_database_restarted_under_load_loses_and_doubles_nothing() {
    let server = Throwaway::start().unwrap();
    let db = TestDb::on(&server.url);
    let sb = Sandbox::init_with(Some(db.url.clone()));
    let runs = submit_all(&sb);
    let mut workers: Vec<Child> = (0..2).map(|n| worker(&sb, &format!("w{n}"))).collect();
    // Restart once some work has landed and while more is queued.
    let started = Instant::now();
    loop {
        let done = runs
            .iter()
            .filter(|r| status(&sb, r).0 == "completed")
            .count();
        if done >= 1 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no run completed"
        );
        thread::sleep(Duration::from_millis(50));
    }
    // A restart cuts what is in flight; an outage longer than a connection's retries makes
    // the workers wait for the store.
    server.restart().unwrap();
    thread::sleep(Duration::from_millis(300));
    server.stop().unwrap();
    thread::sleep(Duration::from_secs(6));
    server.start_again().unwrap();
    settle(&sb, &runs);
    for w in workers.iter_mut() {
        assert!(
            w.try_wait().unwrap().is_none(),
            "a worker exited when the database went away"
        );
    }
    for mut w in workers {
        kill(&mut w);
    }
    let said: String = (0..2)
        .map(|n| std::fs::read_to_string(sb.dir.path().join(format!("worker-w{n}.log"))).unwrap())
        .collect();
    assert_whole(&sb, &runs);
    assert!(
        said.contains("the store did not answer (error[W-STORE-012]"),
        "the workers never waited for the store: {said}"
    );
}
