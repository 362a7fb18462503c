//! Deletes spelled through a wrapper are still deletes: under a profile that does not contain
//! its commands (asked before they run), `env rm -rf notes` and `find . -name '*.md' -delete`
//! are classified destructive, so the person is told what they are and the files stay until
//! someone answers. Negative control: with the recognizers' following switched off
//! (`WARRANT_TEST_DISABLE=follow`, debug builds only) they pass as `change` and delete at once.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::harness::{Sandbox, stderr};

/// Runs one command through a scripted model; returns the exit code, the open requests' risk
/// classes and whether each file is still there.
fn attempt(argv: &[&str], follow: bool, files: &[&str]) -> (Option<i32>, Value, Vec<bool>) {
    let mut sb = Sandbox::init();
    // A profile that is not contained (Landlock over the host's view), so the command is asked
    // before it runs and the class the recognizers gave it is what the person is told.
    let config = sb.ws.join(".warrant/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[profiles.ll]\n[profiles.ll.sandbox]\nisolation = \"landlock\"\n");
    std::fs::write(&config, text).unwrap();
    if !follow {
        sb.extra_env
            .push(("WARRANT_TEST_DISABLE".into(), "follow".into()));
    }
    let model = sb.transcript(&format!(
        "version: 1\nturns:\n  - calls:\n      - tool: run_command\n        args: {{ argv: {}, profile: ll }}\n  - say: done\n",
        serde_json::to_string(argv).unwrap()
    ));
    let out = sb.run(&["run", "--prompt", "never", "--model", &model, "tidy"]);
    let listed = sb.json(&["approvals", "list", "--json"]);
    let risks: Vec<Value> = listed["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| json!({"risk": r["summary"]["risk"], "title": r["summary"]["title"]}))
        .collect();
    let present = files.iter().map(|f| sb.ws.join(f).exists()).collect();
    assert!(
        matches!(out.status.code(), Some(0 | 10)),
        "{}",
        stderr(&out)
    );
    (out.status.code(), Value::from(risks), present)
}

#[test]
fn deletes_through_env_and_find_wait_for_a_person() {
    let md = [
        "README.md",
        "notes/meeting-2026-11-20.md",
        "notes/meeting-2026-11-27.md",
    ];
    // The title quotes a word a shell would not take as it is (`'*.md'`).
    let cases: [(&[&str], &[&str], &str); 2] = [
        (
            &["env", "rm", "-rf", "notes"],
            &["notes"],
            "run env rm -rf notes",
        ),
        (
            &["find", ".", "-name", "*.md", "-delete"],
            &md,
            "run find . -name '*.md' -delete",
        ),
    ];
    for (argv, files, title) in cases {
        let parked = (
            Some(10),
            json!([{"risk": "destructive", "title": title}]),
            vec![true; files.len()],
        );
        assert_eq!(attempt(argv, true, files), parked, "{argv:?}");
        // Negative control: without following, the same line is only `change` (the person
        // would be told less than it does). Under the default profile neither spelling gets
        // far: it runs contained and its deletions wait as a changeset (suite::contained).
        let ran = (
            Some(10),
            json!([{"risk": "change", "title": title}]),
            vec![true; files.len()],
        );
        assert_eq!(
            attempt(argv, false, files),
            ran,
            "{argv:?} with following off"
        );
    }
}
