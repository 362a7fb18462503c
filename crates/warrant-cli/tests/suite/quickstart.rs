//! The quickstart, end to end: reads and a write allowed, `.env` denied and explained, `ls`
//! allowed, `rm -rf build` asked; the run parks (exit 10), a reviewer denies from another
//! process, `resume` finishes the run, nothing is deleted, and the trail verifies.

use pretty_assertions::assert_eq;
use serde_json::Value;

use super::harness::{Sandbox, kinds, parked_request, regex_escape, stderr, stdout};

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

const BEFORE_PARK: &[&str] = &[
    "run_started",
    "model_responded",
    "action_proposed",
    "policy_decided",
    "effect_started",
    "effect_completed",
    "action_proposed",
    "policy_decided",
    "effect_started",
    "effect_completed",
    "action_proposed",
    "policy_decided",
    "effect_started",
    "effect_completed",
    "model_responded",
    "action_proposed",
    "policy_decided",
    "effect_started",
    "effect_completed",
    "model_responded",
    "action_proposed",
    "policy_decided",
    "effect_denied",
    "model_responded",
    "action_proposed",
    "policy_decided",
    "effect_started",
    "effect_completed",
    "model_responded",
    "action_proposed",
    "policy_decided",
    "approval_requested",
    "run_parked",
];

#[test]
fn quickstart_parks_is_denied_elsewhere_and_resumes_to_completion() {
    let sb = Sandbox::init();
    let model = sb.quickstart_model();
    let out = sb.run(&[
        "run",
        "--prompt",
        "never",
        "--model",
        &model,
        "Summarize the notes",
    ]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let text = stdout(&out);
    // The person reading the output sees each decision and its reason.
    assert!(text.contains("deny"), "{text}");
    assert!(text.contains("no-secret-files"), "{text}");
    assert!(text.contains("delete build (recursively, with everything inside) (risk destructive) needs a person's approval"), "{text}");
    let request = parked_request(&out);
    let mut settings = insta::Settings::clone_current();
    settings.add_filter(r"run-[0-9a-f]{12}-[0-9a-f]{12}", "[run]");
    settings.add_filter(r"req-[0-9a-f]{12}-[0-9a-f]{12}", "[req]");
    settings.add_filter(&regex_escape(sb.ws.to_str().unwrap()), "[ws]");
    settings.add_filter(&regex_escape(&model), "scripted:[transcript]");
    settings.add_filter(
        r"(?m)^         \| (total|[dl-][rwx-]{9}).*$",
        "         | [ls -la line]",
    );
    settings.bind(|| insta::assert_snapshot!("quickstart_run_output", text));

    let (run, events) = sb.last_run();
    assert_eq!(kinds(&events), strs(BEFORE_PARK));
    assert!(sb.exists("SUMMARY.md"));
    assert!(sb.exists("build/build.log"));

    // The open request, as a reviewer sees it.
    let open = sb.json(&["approvals", "list", "--json"]);
    let rows = open["requests"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["id"], Value::String(request.clone()));
    assert_eq!(rows[0]["summary"]["risk"], "destructive");
    assert_eq!(rows[0]["summary"]["tool"], "delete_path");

    let denied = sb.run(&["deny", &request, "--reason", "keep build/ for now"]);
    assert_eq!(denied.status.code(), Some(0), "{}", stderr(&denied));
    let resumed = sb.run(&["resume", &run]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));

    let (_, events) = sb.last_run();
    let mut expected = strs(BEFORE_PARK);
    expected.extend(strs(&[
        "approval_denied",
        "run_resumed",
        "effect_denied",
        "model_responded",
        "run_ended",
    ]));
    assert_eq!(kinds(&events), expected);
    let denial = events
        .iter()
        .rev()
        .find(|e| e["kind"] == "effect_denied")
        .unwrap();
    assert_eq!(denial["payload"]["denied"]["by"], "person");
    assert_eq!(denial["payload"]["denied"]["reason"], "keep build/ for now");
    assert_eq!(
        events.last().unwrap()["payload"]["outcome"]["status"],
        "completed"
    );
    // Resume never asked the model for turns it had, nor re-ran finished effects.
    let started = events
        .iter()
        .filter(|e| e["kind"] == "effect_started")
        .count();
    assert_eq!(started, 5);
    assert!(
        sb.exists("build/lighthouse.bin.txt"),
        "nothing may be deleted after a denial"
    );

    let summary = std::fs::read_to_string(sb.ws.join("SUMMARY.md")).unwrap();
    assert!(summary.starts_with("# Summary of planning notes"));

    // The trail verifies, and never holds the secret from .env.
    let verify = sb.run(&["audit", "verify"]);
    assert_eq!(
        verify.status.code(),
        Some(0),
        "{}{}",
        stdout(&verify),
        stderr(&verify)
    );
    let trail = std::fs::read_to_string(sb.ws.join(".warrant/audit/audit.jsonl")).unwrap();
    assert!(!trail.contains("hb_live_"));
    assert_eq!(trail.lines().count(), events.len());
    // Each request is answered once.
    let again = sb.run(&["approve", &request]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        stderr(&again).contains("W-APPROVAL-002"),
        "{}",
        stderr(&again)
    );
}

#[test]
fn run_json_prints_one_event_per_line() {
    let sb = Sandbox::init();
    let model = sb.transcript("version: 1\nturns:\n  - calls:\n      - tool: list_dir\n        args: { path: \".\" }\n  - say: done\n");
    let out = sb.run(&["run", "--json", "--model", &model, "look around"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        kinds(&lines),
        strs(&[
            "run_started",
            "model_responded",
            "action_proposed",
            "policy_decided",
            "effect_started",
            "effect_completed",
            "model_responded",
            "run_ended"
        ])
    );
    assert_eq!(lines[0]["payload"]["principal"]["actor"], "tester");
    assert_eq!(lines[0]["payload"]["principal"]["tenant"], "harbour");
    assert_eq!(lines[3]["payload"]["verdict"], "allow");
}

#[test]
fn too_many_denials_stop_the_run_with_exit_3() {
    let sb = Sandbox::init();
    let read_env = "      - tool: read_file\n        args: { path: \".env\" }\n";
    let model = sb.transcript(&format!("version: 1\nturns:\n  - calls:\n{read_env}{read_env}{read_env}{read_env}  - say: never reached\n"));
    let out = sb.run(&["run", "--model", &model, "get the token"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let (_, events) = sb.last_run();
    let denied = events
        .iter()
        .filter(|e| e["kind"] == "effect_denied")
        .count();
    assert_eq!(
        denied, 3,
        "the run stops at the limit, before the fourth call"
    );
    let end = events.last().unwrap();
    assert_eq!(end["kind"], "run_ended");
    assert_eq!(end["payload"]["outcome"]["status"], "stopped");
    assert!(stdout(&out).contains("stopped by governance"));
}
