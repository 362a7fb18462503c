//! Who may approve, through the binary: the managed identity directory, the project's team,
//! four eyes per risk class, on-behalf refusals; an approved diff whose file changed is asked
//! again; `[risk.*]` configuration; silent permits reported; the prompt's session wording.

use pretty_assertions::assert_eq;
use serde_json::Value;

use super::harness::{Sandbox, parked_request, stderr, stdout};

const DIRECTORY: &str = r#"
admins = ["root"]
[teams.payments]
members = ["tester", "bob"]
[teams.web]
members = ["carol"]
"#;

/// The directory, with an approver key made by each of `people` from their own account and
/// registered by an administrator.
fn register_keys(sb: &Sandbox, people: &[&str]) {
    let mut text = DIRECTORY.to_owned();
    for person in people {
        let made = as_actor(sb, person, &[], &["approvals", "keygen"]);
        assert_eq!(made.status.code(), Some(0), "{}", stderr(&made));
        let line = stdout(&made)
            .lines()
            .find(|l| l.starts_with("public_key = "))
            .unwrap()
            .to_owned();
        text.push_str(&format!("[people.{person}]\n{line}\n"));
    }
    std::fs::write(sb.managed.join("directory.toml"), text).unwrap();
}

fn with_directory() -> Sandbox {
    let sb = Sandbox::init();
    register_keys(&sb, &["bob"]);
    std::fs::write(
        sb.managed.join("config.toml"),
        "[risk.destructive]\nfour_eyes = true\nexpiry = \"15m\"\n",
    )
    .unwrap();
    let cfg = sb.ws.join(".warrant/config.toml");
    let mut text = std::fs::read_to_string(&cfg).unwrap_or_default();
    text.push_str("\n[approvals]\nteam = \"payments\"\n");
    std::fs::write(cfg, text).unwrap();
    sb
}

fn as_actor(
    sb: &Sandbox,
    actor: &str,
    extra: &[(&str, &str)],
    args: &[&str],
) -> std::process::Output {
    let mut c = sb.std_cmd(args);
    // Each person's own user configuration directory (their approver key is there).
    c.env("WARRANT_ACTOR", actor)
        .env("XDG_CONFIG_HOME", sb.home.join(format!("{actor}-config")));
    for (k, v) in extra {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn rejections(events: &[Value]) -> Vec<(String, String)> {
    events
        .iter()
        .filter(|e| e["kind"] == "approval_rejected")
        .map(|e| {
            (
                e["payload"]["reason"].as_str().unwrap().to_owned(),
                e["payload"]["approver"]["actor"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_destructive_request_goes_to_the_team_and_never_to_its_requester() {
    let sb = with_directory();
    let model = sb.transcript("version: 1\nturns:\n  - calls:\n      - tool: delete_path\n        args: { path: notes, recursive: true }\n  - say: done\n");
    let out = sb.run(&["run", "--prompt", "never", "--model", &model, "clean"]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let request = parked_request(&out);
    let (run, _) = sb.last_run();

    let listed = stdout(&sb.run(&["approvals", "list"]));
    assert!(
        listed.contains("asked of: team payments (bob, tester); not tester (four eyes)"),
        "{listed}"
    );

    // The requester (the person the run acts for) may not approve their own deletion.
    let own = as_actor(&sb, "tester", &[], &["approve", &request]);
    assert_eq!(own.status.code(), Some(2));
    assert!(stderr(&own).contains("W-APPROVAL-021"), "{}", stderr(&own));
    // Someone outside the team may not either.
    let outsider = as_actor(&sb, "carol", &[], &["approve", &request]);
    assert_eq!(outsider.status.code(), Some(2));
    assert!(
        stderr(&outsider).contains("W-APPROVAL-020"),
        "{}",
        stderr(&outsider)
    );
    // Nor someone acting on the requester's behalf.
    let proxy = as_actor(
        &sb,
        "bob",
        &[("WARRANT_ON_BEHALF_OF", "tester")],
        &["approve", &request],
    );
    assert_eq!(proxy.status.code(), Some(2));
    assert!(
        stderr(&proxy).contains("W-APPROVAL-022"),
        "{}",
        stderr(&proxy)
    );
    assert!(sb.exists("notes"));

    // A team member may.
    let ok = as_actor(&sb, "bob", &[], &["approve", &request]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let done = sb.run(&["resume", "--prompt", "never", &run]);
    assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
    assert!(!sb.exists("notes"));

    let (_, events) = sb.last_run();
    assert_eq!(
        rejections(&events),
        vec![
            ("four_eyes".to_owned(), "tester".to_owned()),
            ("not_eligible".to_owned(), "carol".to_owned()),
            ("on_behalf".to_owned(), "bob".to_owned()),
        ]
    );
    let granted = events
        .iter()
        .find(|e| e["kind"] == "approval_granted")
        .unwrap();
    assert_eq!(granted["payload"]["approver"]["actor"], "bob");
    // Bound to this run and park, expiring after the configured 15 minutes.
    assert_eq!(
        granted["payload"]["binding"]["run"],
        Value::from(run.as_str())
    );
    assert_eq!(
        granted["payload"]["binding"]["request"],
        Value::from(request.as_str())
    );
}

#[test]
fn without_a_team_the_administrators_are_asked_and_the_reason_is_listed() {
    let sb = Sandbox::init();
    register_keys(&sb, &["root"]);
    let model = sb.quickstart_model();
    let out = sb.run(&["run", "--prompt", "never", "--model", &model, "q"]);
    let request = parked_request(&out);
    let listed = sb.json(&["approvals", "list", "--json"]);
    let row = &listed["requests"][0]["summary"];
    assert_eq!(
        (row["approvers"].clone(), row["fell_through"].clone()),
        (
            serde_json::json!(["root"]),
            Value::from(
                "the project names no responsible team ([approvals] team in .warrant/config.toml)"
            )
        )
    );
    let bob = as_actor(&sb, "bob", &[], &["approve", &request]);
    assert_eq!(bob.status.code(), Some(2), "{}", stderr(&bob));
    let root = as_actor(&sb, "root", &[], &["approve", &request]);
    assert_eq!(root.status.code(), Some(0), "{}", stderr(&root));
}

#[test]
fn an_approved_diff_whose_file_changed_is_asked_again_with_the_new_diff() {
    let sb = Sandbox::init();
    // Writes need a person here (a risk rule, not a policy edit).
    let cfg = sb.ws.join(".warrant/config.toml");
    let mut text = std::fs::read_to_string(&cfg).unwrap_or_default();
    text.push_str("\n[risk.change]\nneeds = \"person\"\n");
    std::fs::write(&cfg, text).unwrap();
    sb.write("notes/todo.md", "one\ntwo\n");
    let explained = sb.run(&[
        "policy",
        "explain",
        "--action",
        "fs.write",
        "--target",
        "notes/todo.md",
    ]);
    assert!(
        stderr(&explained).contains("note: [risk.change] needs = \"person\""),
        "{}",
        stderr(&explained)
    );
    let model = sb.transcript("version: 1\nturns:\n  - calls:\n      - tool: write_file\n        args: { path: notes/todo.md, content: \"one\\nthree\\n\" }\n  - say: ok\n");
    let out = sb.run(&["run", "--prompt", "never", "--model", &model, "edit"]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let first = parked_request(&out);
    let (run, _) = sb.last_run();
    assert_eq!(sb.run(&["approve", &first]).status.code(), Some(0));

    // The file changes after the diff was shown and approved.
    sb.write("notes/todo.md", "one\ntwo\nsomeone else's line\n");
    let again = sb.run(&["resume", "--prompt", "never", &run]);
    assert_eq!(again.status.code(), Some(10), "{}", stderr(&again));
    let second = parked_request(&again);
    assert_ne!(second, first);
    assert!(
        stdout(&again).contains("-someone else's line"),
        "{}",
        stdout(&again)
    );
    assert_eq!(
        std::fs::read_to_string(sb.ws.join("notes/todo.md")).unwrap(),
        "one\ntwo\nsomeone else's line\n",
        "nothing was written under the stale approval"
    );
    let (_, events) = sb.last_run();
    assert_eq!(
        rejections(&events),
        vec![("action_changed".to_owned(), "tester".to_owned())]
    );
    let decided = events
        .iter()
        .find(|e| e["kind"] == "policy_decided")
        .unwrap();
    assert_eq!(
        decided["payload"]["reasons"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()["policy"],
        "builtin:risk-rule"
    );

    assert_eq!(sb.run(&["approve", &second]).status.code(), Some(0));
    let done = sb.run(&["resume", "--prompt", "never", &run]);
    assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
    assert_eq!(
        std::fs::read_to_string(sb.ws.join("notes/todo.md")).unwrap(),
        "one\nthree\n"
    );
}

#[test]
fn the_prompt_words_a_session_approval_as_class_pattern_and_this_run_only() {
    let sb = Sandbox::init();
    let model = sb.transcript("version: 1\nturns:\n  - calls:\n      - tool: delete_path\n        args: { path: notes, recursive: true }\n  - say: done\n");
    let out = sb.run_stdin(
        &["run", "--prompt", "always", "--model", &model, "clean"],
        "d\nno\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    let want = format!(
        "  [s]ession destructive actions matching exactly `fs.delete {}/notes (recursive: the directory and everything in it)`; this run only, for at most 8h; never saved as policy (to allow it for good, add a permit under .warrant/policies/)",
        sb.ws.display()
    );
    assert!(err.contains(&want), "{err}");
    assert!(
        err.contains("asked of: any person who is not an agent (no identity directory)"),
        "{err}"
    );
}

#[test]
fn a_permit_that_tries_to_allow_deletion_silently_is_reported_and_still_asked() {
    let sb = Sandbox::init();
    sb.write(
        ".warrant/policies/yolo.cedar",
        "@id(\"delete-freely\")\npermit(principal, action == Warrant::Action::\"fs.delete\", resource is Warrant::Path);\n",
    );
    let model = sb.transcript("version: 1\nturns:\n  - calls:\n      - tool: delete_path\n        args: { path: notes, recursive: true }\n  - say: done\n");
    let out = sb.run(&["run", "--prompt", "never", "--model", &model, "clean"]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("warning: policy project:delete-freely"),
        "{}",
        stderr(&out)
    );
    assert!(sb.exists("notes"));
    let doctor = stdout(&sb.run(&["doctor"]));
    assert!(doctor.contains("without @ask"), "{doctor}");
    let explain = sb.run(&[
        "policy",
        "explain",
        "--action",
        "fs.delete",
        "--target",
        "notes",
    ]);
    assert!(
        stderr(&explain).contains("project:delete-freely"),
        "{}",
        stderr(&explain)
    );
}

#[test]
fn risk_configuration_cannot_relax_the_classes_that_always_need_a_person() {
    let sb = Sandbox::init();
    std::fs::write(
        sb.managed.join("config.toml"),
        "[risk.destructive]\nneeds = \"policy\"\n",
    )
    .unwrap();
    let model = sb.quickstart_model();
    let out = sb.run(&["run", "--prompt", "never", "--model", &model, "q"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("W-CONFIG-020"), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("always need a person"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn with_a_registered_key_only_a_signed_approval_counts() {
    let sb = with_directory();
    // bob makes his key (in his own HOME) and the administrator registers its public half.
    let bob_home = sb.dir.path().join("bob-home");
    std::fs::create_dir_all(&bob_home).unwrap();
    let as_bob = |args: &[&str]| {
        let mut c = sb.std_cmd(args);
        c.env("WARRANT_ACTOR", "bob").env("HOME", &bob_home);
        c.output().unwrap()
    };
    let made = as_bob(&["approvals", "keygen"]);
    assert_eq!(made.status.code(), Some(0), "{}", stderr(&made));
    let printed = stdout(&made);
    let line = printed
        .lines()
        .find(|l| l.starts_with("public_key = "))
        .unwrap();
    assert!(printed.contains("[people.bob]"), "{printed}");
    std::fs::write(
        sb.managed.join("directory.toml"),
        format!("{DIRECTORY}\n[people.bob]\n{line}\n"),
    )
    .unwrap();
    assert_eq!(
        as_bob(&["approvals", "keygen"]).status.code(),
        Some(2),
        "no silent overwrite"
    );

    let model = sb.quickstart_model();
    let out = sb.run(&["run", "--prompt", "never", "--model", &model, "q"]);
    let request = parked_request(&out);
    let (run, _) = sb.last_run();
    // bob from an account without his key: refused, recorded.
    let unsigned = as_actor(&sb, "bob", &[], &["approve", &request]);
    assert_eq!(unsigned.status.code(), Some(2));
    assert!(
        stderr(&unsigned).contains("W-APPROVAL-023"),
        "{}",
        stderr(&unsigned)
    );
    // bob with his key: signed, and the run goes on.
    let signed = as_bob(&["approve", &request]);
    assert_eq!(signed.status.code(), Some(0), "{}", stderr(&signed));
    let done = sb.run(&["resume", "--prompt", "never", &run]);
    assert!(
        matches!(done.status.code(), Some(0 | 10)),
        "{}",
        stderr(&done)
    );
    let (_, events) = sb.last_run();
    assert_eq!(
        rejections(&events)[0],
        ("unsigned".to_owned(), "bob".to_owned())
    );
    let granted = events
        .iter()
        .find(|e| e["kind"] == "approval_granted")
        .unwrap();
    assert_eq!(granted["payload"]["signature"].as_str().unwrap().len(), 128);
    assert!(
        !events
            .iter()
            .any(|e| e["kind"] == "approval_rejected" && e["payload"]["reason"] == "forged"),
        "the signed approval verified at time of use"
    );
}

#[test]
fn an_approval_past_its_configured_expiry_is_refused_and_asked_again() {
    let sb = Sandbox::init();
    let cfg = sb.ws.join(".warrant/config.toml");
    let mut text = std::fs::read_to_string(&cfg).unwrap_or_default();
    text.push_str("\n[risk.destructive]\nexpiry = \"1s\"\n");
    std::fs::write(&cfg, text).unwrap();
    // The quickstart's first request is the deletion of build/ (destructive).
    let model = sb.quickstart_model();
    let out = sb.run(&["run", "--prompt", "never", "--model", &model, "q"]);
    let request = parked_request(&out);
    let (run, _) = sb.last_run();
    assert_eq!(sb.run(&["approve", &request]).status.code(), Some(0));
    // Let the one-second approval lapse before the run continues.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let again = sb.run(&["resume", "--prompt", "never", &run]);
    assert_eq!(again.status.code(), Some(10), "{}", stderr(&again));
    assert_ne!(parked_request(&again), request);
    let (_, events) = sb.last_run();
    assert_eq!(
        rejections(&events),
        vec![("expired".to_owned(), "tester".to_owned())]
    );
    // The audit trail says when it expired.
    let tail = stdout(&sb.run(&["audit", "tail", "-n", "200", "--json"]));
    assert!(tail.contains("\"expires_at\""), "{tail}");
    assert!(tail.contains("approval rejected: expired"), "{tail}");
}
