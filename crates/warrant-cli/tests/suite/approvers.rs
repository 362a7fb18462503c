//! Approvers no command can impersonate (issue 12, part 2). A process a run started can never
//! answer a request; an answer that needs a person counts only from the run's own prompt or
//! signed with the person's enrolled key; a variable naming someone else proves nothing. Each
//! attack with its negative control (`WARRANT_TEST_DISABLE=origin` / `authenticate`).

use serde_json::Value;

use super::harness::{Sandbox, parked_request, stderr, stdout};

/// A run that parks on deleting `notes` (destructive: always a person).
fn parked_delete(sb: &Sandbox) -> (String, String) {
    let model = sb.transcript(
        "version: 1\nturns:\n  - calls:\n      - tool: delete_path\n        args: { path: notes, recursive: true }\n  - say: done\n",
    );
    let out = sb.run(&["run", "--model", &model, "tidy"]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let request = parked_request(&out);
    let (run, _) = sb.last_run();
    (run, request)
}

fn rejections(sb: &Sandbox, run: &str) -> Vec<Value> {
    let out = sb.run(&["runs", "show", run, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    doc["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "approval_rejected")
        .map(|e| e["payload"]["reason"].clone())
        .collect()
}

/// A second run's command runs `warrant approve` for the first run's parked delete. The person
/// approved the command itself (it looks like a harmless call), not the delete. It runs under an
/// unconfined profile (`open`), where only the recognition of Warrant's own descendants stands
/// in its way; under the default profile Warrant's binary is not even in the command's view.
fn a_command_approves(sb: &Sandbox, request: &str, extra: &[&str]) -> std::process::Output {
    a_command_approves_in(sb, request, extra, "open")
}

fn a_command_approves_in(
    sb: &Sandbox,
    request: &str,
    extra: &[&str],
    profile: &str,
) -> std::process::Output {
    if profile == "open" {
        sb.add_unconfined_profile();
    }
    let bin = assert_cmd::cargo::cargo_bin("warrant");
    // The command's environment is minimized: it names the tenant the person works in (as
    // their configuration would), so what stops it is that it is a command, not the tenant.
    let mut argv: Vec<String> = vec!["env".into(), "WARRANT_TENANT=harbour".into()];
    argv.extend(extra.iter().map(|s| (*s).to_owned()));
    argv.push(bin.display().to_string());
    argv.extend(["approve".to_owned(), request.to_owned()]);
    let words: Vec<String> = argv.iter().map(|a| format!("\"{a}\"")).collect();
    let model = sb.transcript(&format!(
        "version: 1\nturns:\n  - calls:\n      - tool: run_command\n        args: {{ argv: [{}], profile: {profile} }}\n  - say: done\n",
        words.join(", ")
    ));
    sb.run_stdin(
        &[
            "run",
            "--prompt",
            "always",
            "--model",
            &model,
            "look around",
        ],
        "o\n",
    )
}

/// A second run whose one command (approved at its prompt, under the unconfined `open`
/// profile) runs `warrant` with `args`; the command's result as the journal holds it.
fn a_command_runs_warrant(sb: &Sandbox, args: &[&str]) -> String {
    let bin = assert_cmd::cargo::cargo_bin("warrant");
    // In the person's tenant (the command's environment is minimized), as above.
    let mut argv = vec![
        "env".to_owned(),
        "WARRANT_TENANT=harbour".to_owned(),
        bin.display().to_string(),
    ];
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    let argv = serde_json::to_string(&argv).unwrap();
    let model = sb.transcript(&format!(
        "version: 1\nturns:\n  - calls:\n      - tool: run_command\n        args: {{ argv: {argv}, profile: open }}\n  - say: done\n"
    ));
    let attack = sb.run_stdin(
        &["run", "--prompt", "always", "--model", &model, "look"],
        "o\n",
    );
    assert_eq!(attack.status.code(), Some(0), "{}", stderr(&attack));
    let (_, events) = sb.last_run();
    events
        .iter()
        .find(|e| e["kind"] == "effect_completed")
        .map(|e| e["payload"]["result"].to_string())
        .unwrap()
}

#[test]
fn a_command_cannot_answer_a_request() {
    let sb = Sandbox::init();
    let (run, request) = parked_delete(&sb);
    let out = a_command_approves(&sb, &request, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (_, events) = sb.last_run();
    let result = events
        .iter()
        .find(|e| e["kind"] == "effect_completed")
        .map(|e| e["payload"]["result"].to_string())
        .unwrap();
    assert!(result.contains("W-APPROVAL-026"), "{result}");
    assert_eq!(rejections(&sb, &run), vec![Value::from("from_command")]);
    let resumed = sb.run(&["resume", &run]);
    assert_eq!(resumed.status.code(), Some(10), "{}", stderr(&resumed));
    assert!(sb.exists("notes"), "nothing was deleted");
}

/// Under the default profile the command cannot reach Warrant at all: the binary, the store
/// and the person's key are out of its view, whatever it names.
#[test]
fn a_contained_command_cannot_even_reach_warrant() {
    let sb = Sandbox::init();
    let (run, request) = parked_delete(&sb);
    let out = a_command_approves_in(
        &sb,
        &request,
        &["WARRANT_TEST_DISABLE=origin", "WARRANT_ACTOR=tester"],
        "default",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (_, events) = sb.last_run();
    let result = events
        .iter()
        .find(|e| e["kind"] == "effect_completed")
        .map(|e| e["payload"]["result"].clone())
        .unwrap();
    assert_eq!(result["exit_code"], 127, "{result}");
    assert!(
        result["stderr"]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("No such file or directory"),
        "{result}"
    );
    assert_eq!(rejections(&sb, &run), Vec::<Value>::new());
    let resumed = sb.run(&["resume", &run]);
    assert_eq!(resumed.status.code(), Some(10), "{}", stderr(&resumed));
    assert!(sb.exists("notes"), "nothing was deleted");
}

#[test]
fn negative_control_without_recognition_the_command_approves() {
    let sb = Sandbox::init();
    let (run, request) = parked_delete(&sb);
    // Unconfined, the command reaches the person's key in their home: only recognition stops it
    // (and, once commands are confined, the key being out of view).
    // It also names itself the person (a command does not inherit WARRANT_ACTOR).
    let out = a_command_approves(
        &sb,
        &request,
        &["WARRANT_TEST_DISABLE=origin", "WARRANT_ACTOR=tester"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(rejections(&sb, &run), Vec::<Value>::new());
    let resumed = sb.run(&["resume", &run]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    assert!(!sb.exists("notes"), "the attack worked with the guard off");
}

#[test]
fn an_unproven_answer_to_a_destructive_request_is_refused_and_recorded() {
    let mut sb = Sandbox::init();
    let (run, request) = parked_delete(&sb);
    // Someone else's process, with no approver key: it names itself bob.
    sb.extra_env.push(("WARRANT_ACTOR".into(), "bob".into()));
    let refused = sb.run(&["approve", &request]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("W-APPROVAL-025"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(rejections(&sb, &run), vec![Value::from("unauthenticated")]);
    assert!(sb.exists("notes"));

    // Negative control: with authentication off the same answer is taken.
    sb.extra_env
        .push(("WARRANT_TEST_DISABLE".into(), "authenticate".into()));
    let taken = sb.run(&["approve", &request]);
    assert_eq!(taken.status.code(), Some(0), "{}", stderr(&taken));
}

#[test]
fn the_person_who_ran_init_approves_from_another_terminal_with_their_enrolled_key() {
    let sb = Sandbox::init();
    let (run, request) = parked_delete(&sb);
    let ok = sb.run(&["approve", &request]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let done = sb.run(&["resume", &run]);
    assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
    assert!(!sb.exists("notes"));
    let (_, events) = sb.last_run();
    let granted = events
        .iter()
        .find(|e| e["kind"] == "approval_granted")
        .unwrap();
    assert!(granted["payload"]["signature"].is_string(), "{granted}");
}

/// A command answering the agent's question of another run (`warrant requests answer`) is
/// refused, and the refusal is recorded in that run (`approval_rejected`, `from_command`); the
/// question stays open. Control: the same answer from the person's own shell is taken.
#[test]
fn a_command_cannot_reply_to_a_request_and_the_attempt_is_recorded() {
    let sb = Sandbox::init();
    sb.add_unconfined_profile();
    let ask = sb.transcript(
        "version: 1\nturns:\n  - calls:\n      - tool: ask_question\n        args: { question: \"Ship it?\" }\n  - say: ok\n",
    );
    let out = sb.run(&["run", "--model", &ask, "ask"]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let request = parked_request(&out);
    let (run, _) = sb.last_run();
    let result = a_command_runs_warrant(
        &sb,
        &["requests", "answer", &request, "--text", "yes, ship"],
    );
    assert!(result.contains("W-APPROVAL-026"), "{result}");
    assert_eq!(rejections(&sb, &run), vec![Value::from("from_command")]);
    let still = sb.json(&["requests", "show", &request, "--json"]);
    assert!(
        still.to_string().contains("open") || still["reply"].is_null(),
        "{still}"
    );
    let ok = sb.run(&["requests", "answer", &request, "--text", "yes, ship"]);
    assert_eq!(ok.status.code(), Some(0), "control: {}", stderr(&ok));
}

/// A command resolving another run's effect in doubt (`warrant runs resolve`) is refused, and
/// the attempt is recorded in that run (`approval_rejected`, `from_command`); the step stays in
/// doubt. Control: the same resolution from the person's own shell is taken.
#[test]
fn a_command_cannot_resolve_an_effect_in_doubt_and_the_attempt_is_recorded() {
    let sb = Sandbox::init();
    sb.add_unconfined_profile();
    let work = sb.transcript(
        "version: 1\nturns:\n  - calls:\n      - tool: write_file\n        args: { path: NOTE.md, content: \"n\\n\" }\n  - say: done\n",
    );
    // Killed after the write ran and before its result was journaled: the write is in doubt.
    let died = sb
        .cmd(&["run", "--model", &work, "note"])
        .env("WARRANT_FAULT", "before:effect_completed:1")
        .output()
        .unwrap();
    assert_ne!(died.status.code(), Some(0), "{}", stderr(&died));
    let (run, _) = sb.last_run();
    let parked = sb.run(&["resume", &run]);
    assert_eq!(parked.status.code(), Some(10), "{}", stderr(&parked));
    let open = sb.json(&["approvals", "list", "--json"]);
    let step = open["requests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["summary"]["kind"] == "in_doubt")
        .and_then(|r| r["summary"]["call"].as_str())
        .unwrap_or_else(|| panic!("no in-doubt request: {open}"))
        .to_owned();

    let result = a_command_runs_warrant(
        &sb,
        &[
            "runs",
            "resolve",
            &run,
            "--step",
            &step,
            "--as",
            "completed",
        ],
    );
    assert!(result.contains("W-APPROVAL-026"), "{result}");
    assert_eq!(rejections(&sb, &run), vec![Value::from("from_command")]);
    let still = sb.json(&["approvals", "list", "--json"]);
    assert!(
        still["requests"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["summary"]["kind"] == "in_doubt"),
        "the step is no longer in doubt: {still}"
    );

    let ok = sb.run(&[
        "runs",
        "resolve",
        &run,
        "--step",
        &step,
        "--as",
        "completed",
    ]);
    assert_eq!(ok.status.code(), Some(0), "control: {}", stderr(&ok));
}
