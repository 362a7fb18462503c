//! The coding tools end to end (issue 15): a scripted run edits a file, applies a patch, runs
//! the tests, commits as its principal and has its push parked for a person; and the bad input
//! each tool must refuse with a clear, recorded outcome.

use std::path::Path;
use std::process::Command;

use pretty_assertions::assert_eq;
use serde_json::Value;

use super::harness::{Sandbox, parked_request, stderr};

/// Runs the machine's git for setting up and checking (never through Warrant).
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .args(["-c", "user.name=Setup", "-c", "user.email=setup@example.invalid"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The workspace as a small Rust project under git, committed once.
fn project(sb: &Sandbox) {
    sb.write(
        "Cargo.toml",
        "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    );
    sb.write(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() {\n        assert_eq!(super::add(2, 3), 5);\n    }\n}\n",
    );
    sb.write(".gitignore", "/target\n.env\nCargo.lock\n");
    git(&sb.ws, &["init", "-q", "-b", "main"]);
    git(&sb.ws, &["add", "-A"]);
    git(&sb.ws, &["commit", "-q", "-m", "start"]);
}

/// The results the model saw, by tool, in order.
fn results(events: &[Value], tool: &str) -> Vec<Value> {
    let ids: Vec<String> = events
        .iter()
        .filter(|e| e["kind"] == "action_proposed" && e["payload"]["tool"] == tool)
        .map(|e| e["payload"]["call_id"].as_str().unwrap().to_owned())
        .collect();
    events
        .iter()
        .filter(|e| {
            e["kind"] == "effect_completed"
                && ids.iter().any(|i| e["payload"]["call_id"] == i.as_str())
        })
        .map(|e| e["payload"].clone())
        .collect()
}

/// Refusals before anything ran: `(tool, code, message)`.
fn refusals(events: &[Value]) -> Vec<(String, String, String)> {
    events
        .iter()
        .filter(|e| e["kind"] == "call_refused")
        .map(|e| {
            let p = &e["payload"];
            (
                p["tool"].as_str().unwrap().to_owned(),
                p["code"].as_str().unwrap().to_owned(),
                p["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

const DONE_WHEN: &str = r#"version: 1
turns:
  - say: "Fix the bug, note it, test, commit, push."
    calls:
      - tool: edit_file
        args: { path: src/lib.rs, old: "    a - b\n", new: "    a + b\n" }
  - calls:
      - tool: apply_patch
        args:
          patch: |
            --- a/README.md
            +++ b/README.md
            @@ -1,1 +1,2 @@
             __FIRST__
            +Calc adds numbers.
            --- /dev/null
            +++ b/CHANGES.md
            @@ -0,0 +1 @@
            +- add() adds
  - calls:
      - tool: run_tests
        args: {}
  - calls:
      - tool: git_commit
        args: { message: "Fix add() to add" }
  - calls:
      - tool: git_push
        args: {}
  - say: "Pushed."
"#;

#[test]
fn a_scripted_run_edits_patches_tests_commits_and_its_push_waits_for_a_person() {
    let sb = Sandbox::init();
    project(&sb);
    let remote = sb.dir.path().join("remote.git");
    git(sb.dir.path(), &["init", "-q", "--bare", "remote.git"]);
    git(&sb.ws, &["remote", "add", "origin", remote.to_str().unwrap()]);
    let readme = std::fs::read_to_string(sb.ws.join("README.md")).unwrap();
    let first = readme.lines().next().unwrap().to_owned();
    let model = sb.transcript(&DONE_WHEN.replace("__FIRST__", &first));

    let out = sb.run(&["run", "--model", &model, "fix add"]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let request = parked_request(&out);
    let (run, events) = sb.last_run();

    // The edit and the patch landed.
    assert!(
        std::fs::read_to_string(sb.ws.join("src/lib.rs"))
            .unwrap()
            .contains("    a + b\n")
    );
    assert_eq!(
        std::fs::read_to_string(sb.ws.join("CHANGES.md")).unwrap(),
        "- add() adds\n"
    );
    // The tests ran contained, as a command, and the model got their counts.
    let tests = results(&events, "run_tests");
    assert_eq!(tests.len(), 1);
    assert_eq!(tests[0]["ok"], true, "{}", tests[0]);
    assert_eq!(
        tests[0]["result"]["summary"],
        serde_json::json!({"passed": 1, "failed": 0, "counted": true, "first_failures": []})
    );
    // The commit: authored by the principal, the agent as co-author, the run as a trailer.
    let log = git(&sb.ws, &["log", "-1", "--format=%an <%ae>|%cn <%ce>%n%B"]);
    assert_eq!(
        log.trim_end(),
        format!(
            "tester <tester@harbour.invalid>|tester <tester@harbour.invalid>\nFix add() to add\n\nCo-authored-by: Warrant agent (scripted) <agent@warrant.invalid>\nWarrant-Run: {run}"
        )
    );
    let files = git(&sb.ws, &["show", "--name-only", "--format=", "HEAD"]);
    assert_eq!(files.trim(), "CHANGES.md\nREADME.md\nsrc/lib.rs");
    // The push waits: nothing reached the remote yet, and the person sees where it goes.
    assert_eq!(git(&remote, &["branch", "--list"]).trim(), "");
    let shown = sb.json(&["requests", "show", &request, "--json"]);
    let text = shown.to_string();
    assert!(text.contains("push main to origin"), "{text}");
    assert!(text.contains(remote.to_str().unwrap()), "{text}");

    let ok = sb.run(&["approve", &request]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let done = sb.run(&["resume", &run]);
    assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
    assert_eq!(
        git(&remote, &["rev-parse", "main"]),
        git(&sb.ws, &["rev-parse", "HEAD"])
    );
    let (_, events) = sb.last_run();
    let push = results(&events, "git_push");
    assert_eq!(push.len(), 1);
    assert_eq!(push[0]["ok"], true, "{}", push[0]);
}
