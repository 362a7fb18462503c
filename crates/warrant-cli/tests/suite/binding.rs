//! The journal bound to the signed chain, through the binary. An attacker with write access
//! to the store edits a parked recursive delete's `policy_decided` row from ask to allow:
//! `warrant resume` refuses (exit 3, the W- code naming that seq), nothing is deleted, and the
//! refusal is an audited `journal_rejected` event. With the check switched off
//! (`WARRANT_TEST_DISABLE=binding`, the negative control) the same edit deletes the tree.
//! A deleted, an inserted and two swapped rows are refused the same way, `audit verify` fails
//! on each, an answer and a worker's lease are refused too, and the attack is repeated once
//! on PostgreSQL.

use pretty_assertions::assert_eq;
use serde_json::Value;
use warrant_testkit::pg::TestDb;

use super::harness::{Sandbox, parked_request, stderr, stdout};

const DELETE: &str = "version: 1\nturns:\n  - calls:\n      - tool: delete_path\n        args: { path: build, recursive: true }\n  - say: done\n";

/// A run parked on `delete_path build recursive`; returns the run, the request and the seq of
/// the `policy_decided` event.
fn parked(sb: &Sandbox) -> (String, String, i64) {
    let model = sb.transcript(DELETE);
    let out = sb.run(&["run", "--prompt", "never", "--model", &model, "clean up"]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let request = parked_request(&out);
    let (run, events) = sb.last_run();
    let decided = events
        .iter()
        .find(|e| e["kind"] == "policy_decided")
        .unwrap();
    assert_eq!(decided["payload"]["verdict"], "ask");
    (run, request, decided["seq"].as_i64().unwrap())
}

fn sqlite(sb: &Sandbox) -> rusqlite::Connection {
    rusqlite::Connection::open(sb.ws.join(".warrant/store.db")).unwrap()
}

const ASK_TO_ALLOW: &str = "UPDATE events SET payload = replace(payload, '\"verdict\":\"ask\"', '\"verdict\":\"allow\"') WHERE run_id = ?1 AND seq = ?2";

fn edit_verdict(sb: &Sandbox, run: &str, seq: i64) {
    let n = sqlite(sb)
        .execute(ASK_TO_ALLOW, rusqlite::params![run, seq])
        .unwrap();
    assert_eq!(n, 1);
}

/// The journal's kinds from `runs show` (which folds nothing, so it shows a tampered log).
fn kinds(sb: &Sandbox, run: &str) -> Vec<String> {
    let shown = sb.json(&["runs", "show", run, "--json"]);
    shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_owned())
        .collect()
}

/// The `journal_rejected` records `audit query` finds for the run: event, reasons' code,
/// decision.
fn audited_rejections(sb: &Sandbox, run: &str) -> Vec<(String, String, String)> {
    let out = sb.run(&["audit", "query", "--run", run, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    stdout(&out)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["data"]["event"] == "journal_rejected")
        .map(|r| {
            let d = &r["data"];
            (
                d["event"].as_str().unwrap().to_owned(),
                d["reasons"][0].as_str().unwrap().to_owned(),
                d["decision"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn an_edited_verdict_is_refused_on_resume_and_nothing_is_deleted() {
    let sb = Sandbox::init();
    let (run, _, seq) = parked(&sb);
    edit_verdict(&sb, &run, seq);

    let out = sb.run(&["resume", "--prompt", "always", &run]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "error[W-AUDIT-027]: event {seq} of run {run} was edited after it was signed"
        )),
        "{err}"
    );
    assert!(sb.exists("build"), "nothing may be deleted");
    assert_eq!(kinds(&sb, &run).last().unwrap(), "journal_rejected");
    assert_eq!(
        audited_rejections(&sb, &run),
        vec![(
            "journal_rejected".to_owned(),
            "W-AUDIT-027".to_owned(),
            "deny".to_owned()
        )]
    );
    // The refusal reached the sink too, and the run is stopped in the index.
    let sink = std::fs::read_to_string(sb.ws.join(".warrant/audit/audit.jsonl")).unwrap();
    assert!(sink.contains("dev.warrant.journal.rejected"), "{sink}");
    let runs = sb.json(&["runs", "list", "--json"]);
    assert_eq!(runs["runs"][0]["status"], "stopped");
    // What the run touched is not credited from an edited journal either.
    let touched = sb.run(&["audit", "touched", &run]);
    assert_eq!(touched.status.code(), Some(1));
    assert!(
        stderr(&touched).contains("W-AUDIT-027"),
        "{}",
        stderr(&touched)
    );

    // What `resume` printed, and what `audit verify` reports, for a person.
    let verify = sb.run(&["audit", "verify"]);
    assert_eq!(verify.status.code(), Some(1));
    let shown = format!(
        "{}\n---\n{}",
        err.replace(&run, "RUN"),
        stdout(&verify).replace(&run, "RUN")
    );
    insta::assert_snapshot!(shown);
}

#[test]
fn negative_control_without_the_binding_check_the_edited_verdict_deletes_the_tree() {
    let mut sb = Sandbox::init();
    sb.extra_env
        .push(("WARRANT_TEST_DISABLE".into(), "binding".into()));
    let (run, _, seq) = parked(&sb);
    edit_verdict(&sb, &run, seq);
    let out = sb.run(&["resume", "--prompt", "always", &run]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!sb.exists("build"), "the attack succeeds without the check");
    // And `audit verify` sees nothing wrong without it: the chain itself is intact.
    assert_eq!(sb.run(&["audit", "verify"]).status.code(), Some(0));
}

/// Each change to the events table, the code `resume` refuses with, and that `audit verify`
/// fails on it; the untouched run (control) verifies and is still parked.
#[test]
fn deleted_inserted_and_swapped_rows_are_each_refused_and_fail_audit_verify() {
    type Tamper = fn(&rusqlite::Connection, &str, i64);
    let cases: Vec<(&str, Tamper, &str)> = vec![
        (
            "a row deleted",
            |db, run, seq| {
                db.execute(
                    "DELETE FROM events WHERE run_id = ?1 AND seq = ?2",
                    rusqlite::params![run, seq],
                )
                .unwrap();
            },
            "W-AUDIT-029",
        ),
        (
            "a row inserted",
            |db, run, _| {
                db.execute(
                    "INSERT INTO events (run_id, seq, kind, version, recorded_at, payload) SELECT run_id, seq + 1, 'run_resumed', 1, recorded_at, '{\"by\":\"mallory\"}' FROM events WHERE run_id = ?1 ORDER BY seq DESC LIMIT 1",
                    [run],
                )
                .unwrap();
                db.execute(
                    "UPDATE runs SET events = events + 1 WHERE run_id = ?1",
                    [run],
                )
                .unwrap();
            },
            "W-AUDIT-028",
        ),
        (
            "two rows swapped",
            |db, run, seq| {
                // The verdict's row and the one after it (the request) change places: every
                // column but the seq moves.
                db.execute_batch("CREATE TEMP TABLE t AS SELECT * FROM events")
                    .unwrap();
                let other =
                    "FROM t WHERE t.run_id = events.run_id AND t.seq = ?2 + ?3 - events.seq";
                db.execute(
                    &format!("UPDATE events SET kind = (SELECT kind {other}), payload = (SELECT payload {other}), recorded_at = (SELECT recorded_at {other}) WHERE run_id = ?1 AND seq IN (?2, ?3)"),
                    rusqlite::params![run, seq, seq + 1],
                )
                .unwrap();
            },
            "W-AUDIT-030",
        ),
    ];
    let mut got = Vec::new();
    for (name, tamper, _) in &cases {
        let sb = Sandbox::init();
        let (run, _, seq) = parked(&sb);
        assert_eq!(
            sb.run(&["audit", "verify"]).status.code(),
            Some(0),
            "control"
        );
        tamper(&sqlite(&sb), &run, seq);
        let out = sb.run(&["resume", "--prompt", "always", &run]);
        let code = stderr(&out)
            .split_once("error[")
            .and_then(|(_, rest)| rest.split_once(']'))
            .map(|(c, _)| c.to_owned())
            .unwrap_or_default();
        let verify = sb.run(&["audit", "verify", "--json"]);
        let report: Value = serde_json::from_slice(&verify.stdout).unwrap();
        got.push((
            (*name).to_owned(),
            out.status.code(),
            code,
            sb.exists("build"),
            verify.status.code(),
            report["journal"]["report"]["problems"][0]["code"].clone(),
        ));
    }
    let want: Vec<_> = cases
        .iter()
        .map(|(name, _, code)| {
            (
                (*name).to_owned(),
                Some(3),
                (*code).to_owned(),
                true,
                Some(1),
                Value::from(*code),
            )
        })
        .collect();
    assert_eq!(got, want);
}

/// Answering a request of a tampered run is refused too (the answer folds the run first), and
/// so is a worker's lease of a queued run whose journal was edited; the worker moves on.
#[test]
fn an_answer_and_a_workers_lease_fold_only_a_verified_journal() {
    let sb = Sandbox::init();
    let (run, request, seq) = parked(&sb);
    edit_verdict(&sb, &run, seq);
    let out = sb.run(&["approve", &request]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("W-AUDIT-027"), "{}", stderr(&out));
    assert!(!kinds(&sb, &run).contains(&"approval_granted".to_owned()));

    let submitted = sb.json(&[
        "submit",
        "--json",
        "--model",
        &sb.transcript(DELETE),
        "queued",
    ]);
    let queued = submitted["run"].as_str().unwrap().to_owned();
    let n = sqlite(&sb)
        .execute(
            "UPDATE events SET payload = replace(payload, '\"queued\"', '\"something else\"') WHERE run_id = ?1 AND seq = 1",
            [&queued],
        )
        .unwrap();
    assert_eq!(n, 1);
    let worker = sb.run(&["worker", "--once"]);
    assert_eq!(worker.status.code(), Some(0), "{}", stderr(&worker));
    assert!(
        stderr(&worker).contains("W-AUDIT-027"),
        "{}",
        stderr(&worker)
    );
    assert_eq!(
        kinds(&sb, &queued),
        vec!["run_started".to_owned(), "journal_rejected".to_owned()]
    );
    // Stopped in the index: the next worker finds nothing to lease.
    let again = sb.run(&["worker", "--once"]);
    assert!(!stderr(&again).contains("leased"), "{}", stderr(&again));
}

#[test]
fn the_same_attack_on_postgresql_is_refused() {
    let db = TestDb::new();
    let sb = Sandbox::init_with(Some(db.url.clone()));
    let (run, _, seq) = parked(&sb);
    let n = db
        .client()
        .execute(
            "UPDATE events SET payload = replace(payload, '\"verdict\":\"ask\"', '\"verdict\":\"allow\"') WHERE run_id = $1 AND seq = $2",
            &[&run, &seq],
        )
        .unwrap();
    assert_eq!(n, 1);
    let out = sb.run(&["resume", "--prompt", "always", &run]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("error[W-AUDIT-027]: event {seq} of run {run}")),
        "{}",
        stderr(&out)
    );
    assert!(sb.exists("build"));
    assert_eq!(
        audited_rejections(&sb, &run),
        vec![(
            "journal_rejected".to_owned(),
            "W-AUDIT-027".to_owned(),
            "deny".to_owned()
        )]
    );
    assert_eq!(sb.run(&["audit", "verify"]).status.code(), Some(1));
}
