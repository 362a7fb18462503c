//! The crash matrix: the process is killed (SIGKILL) after every event it commits, just
//! before each effect's result is journaled (the effect ran; nobody wrote it down), and just
//! before the transaction that starts each effect. `resume` then finishes the run, a person
//! resolving each effect that is in doubt. Whatever the crash point: no completed effect ran
//! twice, the model was never asked again for a turn it answered, nothing was lost, and the
//! audit chain verifies. On SQLite and on PostgreSQL.
//!
//! Events are committed in batches (group commit): a call's `action_proposed`,
//! `policy_decided` and `effect_started` (or its denial, or its approval request) are one
//! transaction, its `effect_completed` another. So a crash point inside a batch means the
//! whole batch: killed after any of its events, the batch is durable as a whole; killed before
//! it, all of it is lost, its proposal and decisions too. After every kill the journal holds
//! only whole batches.

use std::process::Output;

use pretty_assertions::assert_eq;
use serde_json::Value;
use warrant_testkit::pg::TestDb;

use super::harness::{Sandbox, stderr, stdout};

/// Reads (idempotent), a file creation and a shell command (neither idempotent), four turns,
/// each with what the model said it cost (so the budget totals have something to keep).
const WORK: &str = concat!(
    "version: 1\nturns:\n",
    "  - usage: { input_tokens: 1001, output_tokens: 11 }\n    calls:\n",
    "      - tool: list_dir\n        args: { path: . }\n",
    "      - tool: read_file\n        args: { path: README.md }\n",
    "  - usage: { input_tokens: 1002, output_tokens: 12 }\n    calls:\n      - tool: write_file\n        args: { path: SUMMARY.md, content: \"summary\\n\" }\n",
    "  - usage: { input_tokens: 1003, output_tokens: 13 }\n    calls:\n      - tool: run_command\n        args: { argv: [sh, -c, \"echo ran >> counter.txt\"] }\n",
    "  - usage: { input_tokens: 1004, output_tokens: 14 }\n    say: done\n",
);

/// The budget totals the store keeps agree with the fold of the logs (`audit verify`'s budget
/// check), whatever else the trail shows at this point; the totals, by actor.
fn budget_agrees(sb: &Sandbox, label: &str) -> Value {
    let out = sb.run(&["audit", "verify", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{label}: audit verify --json: {e}: {}", stderr(&out)));
    assert_eq!(v["budget"]["ok"], true, "{label}: {}", v["budget"]);
    v["budget"]["totals"].clone()
}

/// Answers for every approval a process may be asked (the shell command asks).
const YES: &str = "o\no\no\no\n";

#[derive(Clone, Copy, Debug)]
enum Fault {
    /// Killed right after the n-th committed event.
    After(u64),
    /// Killed just before the n-th `effect_completed` is appended: that effect ran.
    BeforeCompleted(u64),
    /// Killed just before the batch holding the n-th event of this kind is committed: the
    /// whole batch is lost (with `policy_decided`, the call's proposal too), nothing ran.
    BeforeBatch(&'static str, u64),
}

impl Fault {
    fn spec(self) -> String {
        match self {
            Self::After(n) => format!("after:{n}"),
            Self::BeforeCompleted(n) => format!("before:effect_completed:{n}"),
            Self::BeforeBatch(kind, n) => format!("before:{kind}:{n}"),
        }
    }

    /// What a person who knows where the process died says about the effect in doubt.
    fn resolution(self) -> &'static str {
        match self {
            // Died right after `effect_started` was committed: the executor never ran. (Before
            // its batch, nothing started: no effect is in doubt.)
            Self::After(_) | Self::BeforeBatch(..) => "retry",
            // Died after the executor, before its result was journaled: it happened.
            Self::BeforeCompleted(_) => "completed",
        }
    }
}

fn sandbox(pg: Option<&TestDb>) -> Sandbox {
    Sandbox::init_with(pg.map(|db| db.url.clone()))
}

fn run(sb: &Sandbox, fault: Option<Fault>) -> Output {
    let model = sb.transcript(WORK);
    let mut cmd = sb.cmd(&["run", "--prompt", "always", "--model", &model, "work"]);
    if let Some(f) = fault {
        cmd.env("WARRANT_FAULT", f.spec());
    }
    cmd.write_stdin(YES).output().unwrap()
}

/// Resumes until the run ends, resolving what is in doubt as the person would.
fn finish(sb: &Sandbox, fault: Fault, run_id: &str) {
    for _ in 0..12 {
        let out = sb.run_stdin(&["resume", "--prompt", "always", run_id], YES);
        match out.status.code() {
            Some(0) => return,
            Some(10) => {
                let open = sb.json(&["approvals", "list", "--json"]);
                let doubt = open["requests"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|r| r["summary"]["kind"] == "in_doubt")
                    .unwrap_or_else(|| panic!("parked without an in-doubt request: {open}"));
                let step = doubt["summary"]["call"].as_str().unwrap().to_owned();
                let res = sb.run(&[
                    "runs",
                    "resolve",
                    run_id,
                    "--step",
                    &step,
                    "--as",
                    fault.resolution(),
                ]);
                assert_eq!(res.status.code(), Some(0), "{}", stderr(&res));
            }
            other => panic!("resume exited {other:?}: {}{}", stdout(&out), stderr(&out)),
        }
    }
    panic!("the run did not finish after 12 resumes");
}

/// Whether the journal ends with the run's end.
fn ended(events: &[Value]) -> bool {
    events.last().is_some_and(|e| e["kind"] == "run_ended")
}

fn count(events: &[Value], kind: &str) -> usize {
    events.iter().filter(|e| e["kind"] == kind).count()
}

/// The journal holds only whole batches: every call that has a proposal has its decisions,
/// and every call with decisions has what acted on them (its start, denial or request).
fn assert_whole_batches(events: &[Value], label: &str) {
    let of_call = |kind: &str, call: &Value| {
        events
            .iter()
            .any(|e| e["kind"] == kind && &e["payload"]["call_id"] == call)
    };
    for proposed in events.iter().filter(|e| e["kind"] == "action_proposed") {
        let call = &proposed["payload"]["call_id"];
        assert!(
            of_call("policy_decided", call),
            "{label}: call {call} was proposed without its decisions"
        );
        assert!(
            ["effect_started", "effect_denied", "approval_requested"]
                .iter()
                .any(|k| of_call(k, call)),
            "{label}: call {call} was decided with nothing acting on it"
        );
    }
}

/// Everything that must hold after a run, however often it was interrupted.
fn check(sb: &Sandbox, label: &str) {
    let (_, events) = sb.last_run();
    assert_eq!(
        events.last().unwrap()["payload"]["outcome"]["status"],
        "completed",
        "{label}"
    );
    assert_eq!(
        std::fs::read_to_string(sb.ws.join("counter.txt")).unwrap(),
        "ran\n",
        "{label}: the command ran exactly once"
    );
    assert_eq!(
        std::fs::read_to_string(sb.ws.join("SUMMARY.md")).unwrap(),
        "summary\n",
        "{label}"
    );
    assert_eq!(
        count(&events, "model_responded"),
        4,
        "{label}: each turn asked once"
    );
    let mut completed: Vec<String> = events
        .iter()
        .filter(|e| e["kind"] == "effect_completed")
        .map(|e| e["payload"]["call_id"].as_str().unwrap().to_owned())
        .collect();
    completed.sort();
    let mut unique = completed.clone();
    unique.dedup();
    assert_eq!(completed, unique, "{label}: a call completed twice");
    assert_eq!(completed.len(), 4, "{label}: every call completed");
    // Each turn was asked once, so its usage was counted once: the totals are the four turns'.
    let actor = events[0]["payload"]["principal"]["actor"].as_str().unwrap();
    let totals = budget_agrees(sb, label);
    assert_eq!(
        (
            &totals[actor]["input_tokens"],
            &totals[actor]["output_tokens"]
        ),
        (&serde_json::json!(4010), &serde_json::json!(50)),
        "{label}: {totals}"
    );
    let verify = sb.run(&["audit", "verify"]);
    assert_eq!(
        verify.status.code(),
        Some(0),
        "{label}: {}",
        stdout(&verify)
    );
}

fn matrix(pg: bool) {
    // A clean run tells how many events there are to die after.
    let db = pg.then(TestDb::new);
    let clean = sandbox(db.as_ref());
    let out = run(&clean, None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    check(&clean, "clean run");
    let total = clean.last_run().1.len() as u64;
    assert!(total > 20, "{total}");
    drop(db);

    let faults = (1..total)
        .map(Fault::After)
        .chain((1..=4).map(Fault::BeforeCompleted))
        .chain((1..=4).map(|n| Fault::BeforeBatch("policy_decided", n)))
        .chain((1..=4).map(|n| Fault::BeforeBatch("effect_started", n)));
    for fault in faults {
        let db = pg.then(TestDb::new);
        let sb = sandbox(db.as_ref());
        let out = run(&sb, Some(fault));
        let label = format!("{fault:?}{}", if pg { " on PostgreSQL" } else { "" });
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&out.status),
            Some(9),
            "{label}: the fault did not fire: {}",
            stderr(&out)
        );
        let (run_id, died_with) = sb.last_run();
        assert_whole_batches(&died_with, &label);
        // Right after the kill, before anything resumes: the totals hold what the journal
        // holds, no more and no less.
        budget_agrees(&sb, &format!("{label}, killed"));
        if let Fault::BeforeBatch(kind, n) = fault {
            assert_eq!(
                count(&died_with, kind) as u64,
                n - 1,
                "{label}: the batch holding it was lost with it"
            );
        }
        // Dying after the last batch (the final answer and the run's end commit together)
        // leaves a completed run: nothing to resume.
        if !ended(&died_with) {
            finish(&sb, fault, &run_id);
        }
        check(&sb, &label);
    }
}

#[test]
fn every_crash_point_resumes_to_the_same_end_on_sqlite() {
    matrix(false);
}

#[test]
fn every_crash_point_resumes_to_the_same_end_on_postgres() {
    matrix(true);
}

/// The quickstart (a denial, an approval asked and denied at the terminal) with a crash after
/// every event: it always ends the same, with nothing deleted.
fn quickstart_matrix(pg: bool) {
    let db = pg.then(TestDb::new);
    let clean = sandbox(db.as_ref());
    let model = clean.quickstart_model();
    let deny = "d\nkeep it\nd\nkeep it\n";
    let out = clean.run_stdin(&["run", "--prompt", "always", "--model", &model, "q"], deny);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let total = clean.last_run().1.len() as u64;
    drop(db);
    for n in 1..total {
        let db = pg.then(TestDb::new);
        let sb = sandbox(db.as_ref());
        let out = sb
            .cmd(&["run", "--prompt", "always", "--model", &model, "q"])
            .env("WARRANT_FAULT", format!("after:{n}"))
            .write_stdin(deny)
            .output()
            .unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&out.status),
            Some(9),
            "after:{n}"
        );
        let (run_id, died_with) = sb.last_run();
        assert_whole_batches(&died_with, &format!("after:{n}"));
        let mut done = ended(&died_with);
        for _ in 0..6 {
            if done {
                break;
            }
            let out = sb.run_stdin(&["resume", "--prompt", "always", &run_id], deny);
            match out.status.code() {
                Some(0) => {
                    done = true;
                    break;
                }
                Some(10) => {
                    // `ls` (shell.exec) started and was not journaled: it did not run (retry).
                    let open = sb.json(&["approvals", "list", "--json"]);
                    let step = open["requests"][0]["summary"]["call"]
                        .as_str()
                        .unwrap()
                        .to_owned();
                    assert_eq!(
                        sb.run(&["runs", "resolve", &run_id, "--step", &step, "--as", "retry"])
                            .status
                            .code(),
                        Some(0)
                    );
                }
                other => panic!("after:{n}: resume exited {other:?}: {}", stderr(&out)),
            }
        }
        assert!(done, "after:{n}: the run did not finish");
        let (_, events) = sb.last_run();
        assert_eq!(
            events.last().unwrap()["payload"]["outcome"]["status"],
            "completed",
            "after:{n}"
        );
        assert!(
            sb.exists("build/build.log"),
            "after:{n}: nothing may be deleted"
        );
        assert!(sb.exists("SUMMARY.md"), "after:{n}");
        assert_eq!(count(&events, "model_responded"), 6, "after:{n}");
        assert_eq!(
            sb.run(&["audit", "verify"]).status.code(),
            Some(0),
            "after:{n}"
        );
    }
}

#[test]
fn the_quickstart_survives_a_crash_at_every_event_on_sqlite() {
    quickstart_matrix(false);
}

#[test]
fn the_quickstart_survives_a_crash_at_every_event_on_postgres() {
    quickstart_matrix(true);
}
