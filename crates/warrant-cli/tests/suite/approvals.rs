//! Approvals: interactive at the run's terminal (showing the diff or the argv), parked and
//! answered from another process, bound to the exact action, answered once, never by an agent.

use pretty_assertions::assert_eq;

use super::harness::{Sandbox, kinds, parked_request, stderr, stdout};

const ASK_WRITES: &str = r#"
@id("ask-writes")
@ask("change")
@reason("Writes in this project are reviewed")
permit(principal, action in [Warrant::Action::"fs.write", Warrant::Action::"fs.create"], resource is Warrant::Path)
when { resource.in_workspace };
"#;

#[test]
fn a_write_is_shown_as_a_diff_and_approved_at_the_terminal() {
    let sb = Sandbox::init();
    sb.write(".warrant/policies/ask-writes.cedar", ASK_WRITES);
    sb.write("notes/todo.md", "one\ntwo\n");
    let model = sb.transcript("version: 1\nturns:\n  - calls:\n      - tool: write_file\n        args: { path: notes/todo.md, content: \"one\\nthree\\n\" }\n  - say: ok\n");
    let out = sb.run_stdin(
        &["run", "--prompt", "always", "--model", &model, "edit"],
        "o\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("approval needed"), "{err}");
    assert!(err.contains("-two"), "{err}");
    assert!(err.contains("+three"), "{err}");
    assert_eq!(
        std::fs::read_to_string(sb.ws.join("notes/todo.md")).unwrap(),
        "one\nthree\n"
    );
    let (_, events) = sb.last_run();
    let granted = events
        .iter()
        .find(|e| e["kind"] == "approval_granted")
        .unwrap();
    assert_eq!(granted["payload"]["approver"]["actor"], "tester");
    assert_eq!(granted["payload"]["approver"]["via"], "terminal");
    assert_eq!(granted["payload"]["scope"], "once");
}

#[test]
fn a_command_is_shown_with_argv_cwd_and_profile_and_denied_at_the_terminal() {
    let sb = Sandbox::init();
    sb.review_commands();
    let model = sb.transcript("version: 1\nturns:\n  - calls:\n      - tool: run_command\n        args: { argv: [\"touch\", \"made-by-agent\"] }\n  - say: ok\n");
    let out = sb.run_stdin(
        &["run", "--prompt", "always", "--model", &model, "touch"],
        "d\nnot today\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(r#"argv:    ["touch","made-by-agent"]"#),
        "{err}"
    );
    assert!(
        err.contains(&format!("cwd:     {}", sb.ws.display())),
        "{err}"
    );
    assert!(err.contains("profile: default"), "{err}");
    assert!(!sb.exists("made-by-agent"));
    assert!(stdout(&out).contains("not today"));
}

#[test]
fn approve_from_another_process_then_resume_runs_it_exactly_once() {
    let sb = Sandbox::init();
    sb.review_commands();
    // The command appends a line each time it runs: a re-run would show.
    let model = sb.transcript(concat!(
        "version: 1\nturns:\n",
        "  - calls:\n      - tool: run_command\n        args: { argv: [\"sh\", \"-c\", \"echo ran >> counter.txt\"] }\n",
        "  - calls:\n      - tool: delete_path\n        args: { path: notes, recursive: true }\n",
        "  - say: done\n"
    ));
    let out = sb.run(&["run", "--model", &model, "count"]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let first = parked_request(&out);
    let (run, _) = sb.last_run();

    // Still parked: resume without an answer exits 10 again and writes nothing.
    let waiting = sb.run(&["resume", &run]);
    assert_eq!(waiting.status.code(), Some(10));

    let ok = sb.run(&["approve", &first, "--scope", "once"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let second = sb.run(&["resume", &run]);
    assert_eq!(second.status.code(), Some(10), "{}", stderr(&second));
    assert_eq!(
        std::fs::read_to_string(sb.ws.join("counter.txt")).unwrap(),
        "ran\n"
    );
    let next = parked_request(&second);
    assert_ne!(next, first);

    // The old approval is not reusable for the new action.
    let reuse = sb.run(&["approve", &first]);
    assert_eq!(reuse.status.code(), Some(2));
    assert!(stderr(&reuse).contains("W-APPROVAL-002"));

    let ok = sb.run(&["approve", &next]);
    assert_eq!(ok.status.code(), Some(0));
    let done = sb.run(&["resume", &run]);
    assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
    assert!(!sb.exists("notes"));
    assert_eq!(
        std::fs::read_to_string(sb.ws.join("counter.txt")).unwrap(),
        "ran\n",
        "ran exactly once"
    );
    let (_, events) = sb.last_run();
    assert_eq!(
        events
            .iter()
            .filter(|e| e["kind"] == "effect_started")
            .count(),
        2
    );
    assert_eq!(kinds(&events).last().unwrap(), "run_ended");

    // A finished run cannot be resumed, nor its requests answered.
    let again = sb.run(&["resume", &run]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        stderr(&again).contains("W-KERNEL-005"),
        "{}",
        stderr(&again)
    );
}

#[test]
fn session_scope_covers_the_same_action_again_in_this_run_only() {
    let sb = Sandbox::init();
    sb.review_commands();
    let touch = "      - tool: run_command\n        args: { argv: [\"touch\", \"x\"] }\n";
    let model = sb.transcript(&format!(
        "version: 1\nturns:\n  - calls:\n{touch}  - calls:\n{touch}  - say: done\n"
    ));
    let out = sb.run_stdin(
        &["run", "--prompt", "always", "--model", &model, "t"],
        "s\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stderr(&out).matches("approval needed").count(),
        1,
        "asked once for both"
    );
    let (_, events) = sb.last_run();
    let starts: Vec<_> = events
        .iter()
        .filter(|e| e["kind"] == "effect_started")
        .collect();
    assert_eq!(starts.len(), 2);
    assert!(starts[0]["payload"]["approval"].is_string());
    assert!(starts[1]["payload"]["session_grant"].is_string());

    // A new run asks again: session approvals never outlive their run.
    let out = sb.run(&["run", "--prompt", "never", "--model", &model, "t"]);
    assert_eq!(out.status.code(), Some(10));
}

#[test]
fn unknown_and_malformed_request_ids_are_specific_errors() {
    let sb = Sandbox::init();
    let out = sb.run(&["approve", "req-00000000aaaa-bbbbbbbb"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("W-APPROVAL-001"), "{}", stderr(&out));
    let out = sb.run(&["approve", "nonsense"]);
    assert_eq!(out.status.code(), Some(2));
    let out = sb.run(&["deny", "req-00000000aaaa-bbbbbbbb", "--reason", " "]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("W-APPROVAL-004"));
}

#[test]
fn an_agent_principal_cannot_approve() {
    let mut sb = Sandbox::init();
    let model = sb.quickstart_model();
    let out = sb.run(&["run", "--prompt", "never", "--model", &model, "q"]);
    let request = parked_request(&out);
    sb.extra_env.push(("WARRANT_KIND".into(), "agent".into()));
    let out = sb.run(&["approve", &request]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("W-APPROVAL-003"), "{}", stderr(&out));
}

#[test]
fn on_a_real_terminal_the_run_asks_in_place() {
    let sb = Sandbox::init();
    let model = sb.quickstart_model();
    // `--prompt auto` (the default) asks because stdin is a terminal.
    let Some(out) = sb.run_in_pty(&["run", "--model", &model, "tidy up"], "d\nkeep it\n") else {
        eprintln!("util-linux script is not installed; skipping the pty test");
        return;
    };
    let screen = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{screen}");
    assert!(screen.contains("approval needed"), "{screen}");
    assert!(
        screen.contains("approve [o]nce, for this [s]ession, or [d]eny?"),
        "{screen}"
    );
    assert!(sb.exists("build/build.log"));
    let (_, events) = sb.last_run();
    let denied = events
        .iter()
        .find(|e| e["kind"] == "approval_denied")
        .unwrap();
    assert_eq!(denied["payload"]["reason"], "keep it");
    assert_eq!(denied["payload"]["approver"]["via"], "terminal");
    assert!(!kinds(&events).contains(&"run_parked".to_owned()));
}
