//! Snapshots of what a person reads from the listing, status and health commands, text and
//! `--json`, and of the error messages of bad input: taken before the code that assembles them
//! moved into the application layer, so the move is checked against them, byte for byte.

use std::process::Output;

use super::harness::{Sandbox, regex_escape, stderr, stdout};

/// The parts of the output that change from run to run: ids, times, digests, paths.
fn filtered(sb: &Sandbox, models: &[String]) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.add_filter(r"run-[0-9a-f]{12}-[0-9a-f]{12}", "[run]");
    settings.add_filter(r"req-[0-9a-f]{12}-[0-9a-f]{12}", "[req]");
    settings.add_filter(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "[time]");
    settings.add_filter(r"sha256:[0-9a-f]{64}", "sha256:[digest]");
    settings.add_filter(r"key [0-9a-f]{16}", "key [key]");
    settings.add_filter(
        r#""(oldest_pending_ms|failing_for_ms|rate_per_minute)": [0-9.]+"#,
        r#""$1": [n]"#,
    );
    settings.add_filter(&regex_escape(sb.ws.to_str().unwrap()), "[ws]");
    // Columns padded to the temporary directory's length.
    settings.add_filter(r"(\[ws\]\S*) +", "$1 ");
    for (i, m) in models.iter().enumerate() {
        settings.add_filter(&regex_escape(m), format!("scripted:[transcript {i}]"));
    }
    settings
}

/// Three runs parked on the three kinds of request a person answers: the quickstart's
/// approval, a question with options, a secret.
fn three_parked() -> (Sandbox, Vec<String>) {
    let sb = Sandbox::init();
    let quick = sb.quickstart_model();
    let question = sb.transcript(
        "version: 1\nturns:\n  - calls:\n      - tool: ask_question\n        args: { question: \"Which colour?\", options: [red, blue] }\n  - say: done\n",
    );
    let secret = sb.transcript(
        "version: 1\nturns:\n  - calls:\n      - tool: request_secret\n        args: { name: API_KEY, purpose: tests, used_by: \"run_command pytest\" }\n  - say: ok\n",
    );
    for (model, task) in [
        (&quick, "Summarize the notes"),
        (&question, "Pick a colour"),
        (&secret, "Run the tests"),
    ] {
        let out = sb.run(&["run", "--model", model, task]);
        assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    }
    (sb, vec![quick, question, secret])
}

/// The id of the open request of `kind` (`approval`, `question`, `secret`).
fn request_of_kind(sb: &Sandbox, kind: &str) -> String {
    let requests = sb.json(&["requests", "list", "--json"]);
    requests["requests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == kind)
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn shown(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status.code(),
        stdout(out),
        stderr(out)
    )
}

#[test]
fn listings_and_status_read_the_same_before_and_after_the_move() {
    let (sb, models) = three_parked();
    let runs = sb.json(&["runs", "list", "--json"]);
    let first = runs["runs"][0]["run"].as_str().unwrap().to_owned();
    let question = request_of_kind(&sb, "question");
    let settings = filtered(&sb, &models);
    settings.bind(|| {
        for (name, args) in [
            ("runs_list", vec!["runs", "list"]),
            ("runs_list_json", vec!["runs", "list", "--json"]),
            ("approvals_list", vec!["approvals", "list"]),
            ("approvals_list_json", vec!["approvals", "list", "--json"]),
            ("requests_list", vec!["requests", "list"]),
            ("requests_list_json", vec!["requests", "list", "--json"]),
            (
                "requests_show_question",
                vec!["requests", "show", &question],
            ),
            (
                "requests_show_question_json",
                vec!["requests", "show", &question, "--json"],
            ),
            ("audit_status", vec!["audit", "status"]),
            ("audit_status_json", vec!["audit", "status", "--json"]),
            ("audit_touched", vec!["audit", "touched", &first]),
            (
                "audit_touched_json",
                vec!["audit", "touched", &first, "--json"],
            ),
            ("audit_verify", vec!["audit", "verify"]),
        ] {
            insta::assert_snapshot!(name, shown(&sb.run(&args)));
        }
    });
}

#[test]
fn runs_show_reads_the_same_before_and_after_the_move() {
    let (sb, models) = three_parked();
    let runs = sb.json(&["runs", "list", "--json"]);
    let question = runs["runs"][1]["run"].as_str().unwrap().to_owned();
    let mut settings = filtered(&sb, &models);
    // The `ls -la` listing shows the machine's owners and times.
    settings.add_filter(
        r"(?m)^               \| (total|[dl-][rwx-]{9}).*$",
        "               | [ls -la line]",
    );
    settings.bind(|| {
        insta::assert_snapshot!(
            "runs_show_question",
            shown(&sb.run(&["runs", "show", &question]))
        );
        insta::assert_snapshot!(
            "runs_show_question_json",
            shown(&sb.run(&["runs", "show", &question, "--json"]))
        );
    });
}

/// `doctor` reads this machine's sandbox, so only the rows that do not depend on the kernel
/// are kept; the sandbox rows have their own tests.
#[test]
fn doctor_reads_the_same_before_and_after_the_move() {
    let sb = Sandbox::init();
    let out = sb.run(&["doctor", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    report["checks"].as_array_mut().unwrap().retain(|c| {
        !c["check"].as_str().unwrap().contains("sandbox") && c["check"] != "default profile"
    });
    let text: String = stdout(&sb.run(&["doctor"]))
        .lines()
        .filter(|l| !l.contains(" sandbox ") && !l.contains("default profile"))
        .map(|l| format!("{l}\n"))
        .collect();
    filtered(&sb, &[]).bind(|| {
        insta::assert_json_snapshot!("doctor_json", report);
        insta::assert_snapshot!("doctor_text", text);
    });
}

#[test]
fn error_messages_read_the_same_before_and_after_the_move() {
    let (sb, models) = three_parked();
    let runs = sb.json(&["runs", "list", "--json"]);
    let parked = runs["runs"][0]["run"].as_str().unwrap().to_owned();
    let [approval, question, secret] =
        ["approval", "question", "secret"].map(|kind| request_of_kind(&sb, kind));
    let settings = filtered(&sb, &models);
    settings.bind(|| {
        for (name, args) in [
            (
                "error_show_unknown_run",
                vec!["runs", "show", "run-000000000000-000000000000"],
            ),
            (
                "error_show_unknown_request",
                vec!["requests", "show", "req-000000000000-000000000000"],
            ),
            (
                "error_approve_unknown",
                vec!["approve", "req-000000000000-000000000000"],
            ),
            ("error_approve_a_question", vec!["approve", &question]),
            (
                "error_answer_an_approval",
                vec!["requests", "answer", &approval, "--option", "1"],
            ),
            (
                "error_answer_not_an_option",
                vec!["requests", "answer", &question, "--option", "7"],
            ),
            ("error_resume_while_waiting", vec!["resume", &parked]),
            (
                "error_touched_unknown_run",
                vec!["audit", "touched", "run-000000000000-000000000000"],
            ),
            (
                "error_explain_unknown_action",
                vec!["policy", "explain", "--action", "fs.fly", "--target", "x"],
            ),
            (
                "error_connect_a_secret",
                vec![
                    "requests",
                    "connect",
                    &secret,
                    "--url",
                    "http://127.0.0.1:9/",
                ],
            ),
        ] {
            insta::assert_snapshot!(name, shown(&sb.run(&args)));
        }
    });
}
