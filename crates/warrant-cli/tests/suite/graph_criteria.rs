//! `command` and `json_schema` success criteria of agentic graphs (AGS §10.2) from the binary.
//! A criterion's command is a `run_command` the graph makes through the ring: decided by
//! policy under the node's permission ceiling, run under the default (confined) subprocess
//! profile, journaled and audited, and what it came to recorded on the node's step and in the
//! run record. Shown here: a failing command fails its attempt and the retry passes, an
//! advisory one is run and recorded but never fails the node, one that policy forbids (or the
//! node's ceiling does not cover) fails without running, one that needs a shell is refused
//! before anything runs, the spec's own `minimal` example end to end, and a script the node's
//! agent wrote, run by the criterion, still confined (the control: the same criterion under a
//! default profile configured unconfined reads `.env` and writes `.warrant/`).

use pretty_assertions::assert_eq;
use serde_json::Value;

use super::graph::{record, step, steps};
use super::harness::{Sandbox, parked_request, stderr};

const CHECKED: &str = r#"ags_version: "1.0"
kind: AgenticGraph
id: warrant/checked
title: Notes a command checks
objective: Write the notes; a command checks them.
requires_conformance: 1
entrypoints: [write]
nodes:
  write:
    title: Write the notes
    description: Write NOTES.md.
    requirements:
      workspace: read_write
      permissions: ["shell:exec:grep *"]
    outputs:
      notes: {type: file, description: The notes.}
    failure:
      retry: {max_attempts: 2, retry_on: [criteria_failed]}
    success:
      criteria:
        - id: mentions_release
          kind: command
          description: The notes mention the release.
          run: grep -q release NOTES.md
          timeout_seconds: 20
        - id: no_todo
          kind: command
          description: The notes have no TODO left.
          run: grep -c TODO NOTES.md
          expect_exit_code: 1
          severity: advisory
"#;

fn write_turns(contents: &[&str]) -> String {
    let mut t = String::from("version: 1\nturns:\n");
    for c in contents {
        t.push_str(&format!(
            "  - calls:\n      - tool: write_file\n        args: {{ path: NOTES.md, content: \"{c}\" }}\n  - say: '{{\"notes\": \"NOTES.md\"}}'\n"
        ));
    }
    t
}

/// `(criterion, call, outcome)` of each settled check step, in order.
fn checks(events: &[Value]) -> Vec<(String, u64, String)> {
    events
        .iter()
        .filter(|e| e["kind"] == "graph_node")
        .map(|e| &e["payload"])
        .filter(|p| p["check"]["outcome"].is_string())
        .map(|p| {
            (
                p["check"]["criterion"].as_str().unwrap().to_owned(),
                p["attempt"].as_u64().unwrap(),
                p["check"]["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn check(c: &str, attempt: u64, outcome: &str) -> (String, u64, String) {
    (c.to_owned(), attempt, outcome.to_owned())
}

/// A command that exits 1 fails its attempt (its exit status in the retry's feedback); the
/// retry's passes; an advisory one that fails is run and recorded each time and never fails
/// the node. Each command is a `run_command` call of the graph's, decided by policy (allowed:
/// contained) and run confined, its result journaled and audited.
#[test]
fn command_criteria_fail_and_pass_by_exit_status_and_advisory_ones_only_record() {
    let sb = Sandbox::init();
    let g = sb.write("checked.agraph.yaml", CHECKED);
    let model = sb.transcript(&write_turns(&["draft TODO", "the release notes, TODO"]));
    let out = sb.run(&["graph", "run", g.to_str().unwrap(), "--model", &model]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (run, events) = sb.last_run();
    assert_eq!(
        checks(&events),
        vec![
            check("mentions_release", 1, "failed"),
            check("no_todo", 1, "failed"),
            check("mentions_release", 2, "passed"),
            check("no_todo", 2, "failed"),
        ]
    );
    let failed = events
        .iter()
        .find(|e| e["kind"] == "graph_node" && e["payload"]["status"] == "attempt_failed")
        .unwrap();
    let reason = failed["payload"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("criterion `mentions_release` failed: The notes mention the release. (exit status 1 (expected 0))"),
        "{reason}"
    );
    assert_eq!(
        steps(&events).last().unwrap(),
        &step("write", "succeeded", 2)
    );
    // Through the ring like the agent's commands: proposed, decided, started, completed.
    let calls: Vec<&Value> = events
        .iter()
        .filter(|e| {
            e["kind"] == "call_received"
                && e["payload"]["call"]["id"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("graph-write-"))
        })
        .collect();
    assert_eq!(calls.len(), 4);
    assert_eq!(calls[0]["payload"]["client"], "graph");
    assert_eq!(
        calls[0]["payload"]["call"]["args"],
        serde_json::json!({"argv": ["grep", "-q", "release", "NOTES.md"], "timeout_ms": 20000})
    );
    let id = calls[0]["payload"]["call"]["id"].as_str().unwrap();
    let of_call = |kind: &str| {
        events
            .iter()
            .find(|e| e["kind"] == kind && e["payload"]["call_id"] == id)
            .unwrap_or_else(|| panic!("no {kind} for {id}"))
            .clone()
    };
    assert_eq!(of_call("policy_decided")["payload"]["verdict"], "allow");
    let done = of_call("effect_completed");
    assert_eq!(done["payload"]["result"]["exit_code"], 1, "{done}");
    assert!(
        done["payload"]["result"]["sandbox"]["applied"]
            .as_array()
            .is_some_and(|a| a.contains(&Value::from("view"))),
        "confined: {done}"
    );
    // The run record carries each criterion's result, advisory ones included.
    let rec = record(&sb, &run);
    let attempts = rec["nodes"][0]["attempts"].as_array().unwrap();
    assert_eq!(attempts[0]["success"]["passed"], false);
    assert_eq!(attempts[1]["success"]["passed"], true);
    let results = attempts[1]["success"]["results"].as_array().unwrap();
    assert_eq!(
        (
            &results[1]["id"],
            &results[1]["severity"],
            &results[1]["passed"]
        ),
        (
            &Value::from("no_todo"),
            &Value::from("advisory"),
            &Value::from(false)
        )
    );
    assert!(
        results[1]["evidence"]
            .as_str()
            .unwrap()
            .starts_with("exit status 0 (expected 1)\nstdout:\n1"),
        "{results:?}"
    );
    let audit = sb.run(&["audit", "verify"]);
    assert_eq!(audit.status.code(), Some(0), "{}", stderr(&audit));
}

/// A command policy forbids is never run: the criterion fails (`permission_denied`, not
/// retried), with policy's reason; the node fails and the run with it. The previous test is
/// the control (the same graph, no forbid: the command runs).
#[test]
fn a_command_policy_forbids_fails_its_criterion_without_running() {
    let sb = Sandbox::init();
    sb.write(
        ".warrant/policies/no-commands.cedar",
        "@id(\"no-commands\")\n@reason(\"No commands run in this project.\")\nforbid (principal, action == Warrant::Action::\"shell.exec\", resource is Warrant::Command);\n",
    );
    let g = sb.write("checked.agraph.yaml", CHECKED);
    let model = sb.transcript(&write_turns(&["the release notes"]));
    let out = sb.run(&["graph", "run", g.to_str().unwrap(), "--model", &model]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let (_, events) = sb.last_run();
    assert_eq!(
        checks(&events),
        vec![
            check("mentions_release", 1, "refused"),
            check("no_todo", 1, "refused")
        ]
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| e["kind"] == "effect_started")
            .count(),
        1,
        "only the agent's write ran"
    );
    let failed = events
        .iter()
        .find(|e| e["kind"] == "graph_node" && e["payload"]["status"] == "failed")
        .unwrap();
    assert_eq!(failed["payload"]["code"], "permission_denied");
    let reason = failed["payload"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("criterion `mentions_release` failed: the command was not run")
            && reason.contains("no-commands"),
        "{reason}"
    );
}

/// A `run` only a shell could run is refused before anything starts (W-GRAPH-003), naming
/// what needs the shell; `sh -c` said outright is a command like any other.
#[test]
fn a_command_that_needs_a_shell_is_refused_before_anything_runs() {
    let sb = Sandbox::init();
    let g = sb.write(
        "piped.agraph.yaml",
        &CHECKED.replace("grep -q release NOTES.md", "grep release NOTES.md | wc -l"),
    );
    let model = sb.transcript(&write_turns(&["x"]));
    let out = sb.run(&["graph", "run", g.to_str().unwrap(), "--model", &model]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("W-GRAPH-003")
            && stderr(&out).contains("criterion `mentions_release`")
            && stderr(&out).contains("the operator `|`"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        sb.json(&["runs", "list", "--json"])["runs"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
}

/// The spec's own level-1 `examples/minimal.agraph.yaml`, end to end from the binary: the
/// draft is written under the node's permissions, `file_exists` passes, the advisory markdown
/// lint is put to the ring and denied by the node's ceiling (it declares no `shell:exec`), so
/// it is recorded as not passed and the node still succeeds; the maintainer's gate parks the
/// run; once they approve, it completes, and its record validates against the spec's schema.
#[test]
fn the_spec_minimal_example_runs_end_to_end() {
    let example = super::graph::fixtures().join("examples/minimal.agraph.yaml");
    let sb = Sandbox::init();
    let guide = "Set up, test, branch and commit conventions. ".repeat(16);
    let model = sb.transcript(&format!(
        "version: 1\nturns:\n  - calls:\n      - tool: write_file\n        args: {{ path: CONTRIBUTING.md, content: \"{guide}\" }}\n  - say: '{{\"contributing\": \"CONTRIBUTING.md\"}}'\n"
    ));
    let out = sb.run(&["graph", "run", example.to_str().unwrap(), "--model", &model]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let req = parked_request(&out);
    let (run, events) = sb.last_run();
    assert_eq!(checks(&events), vec![check("markdown_lints", 1, "refused")]);
    let decided = events
        .iter()
        .find(|e| {
            e["kind"] == "policy_decided"
                && e["payload"]["call_id"] == "graph-draft_contributing-1-criterion-markdown_lints"
        })
        .unwrap();
    assert_eq!(decided["payload"]["verdict"], "deny");
    assert_eq!(
        decided["payload"]["reasons"][0]["policy"],
        "graph:draft_contributing"
    );
    let ok = sb.run(&["requests", "answer", &req, "--option", "1"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let done = sb.run(&["graph", "resume", &run]);
    assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
    let (_, events) = sb.last_run();
    assert_eq!(
        steps(&events)
            .into_iter()
            .filter(|(_, s, _)| s != "running")
            .collect::<Vec<_>>(),
        vec![
            step("draft_contributing", "succeeded", 1),
            step("maintainer_approval", "awaiting_human", 1),
            step("maintainer_approval", "succeeded", 1),
        ]
    );
    let rec = record(&sb, &run);
    assert_eq!(rec["status"], "succeeded");
    assert_eq!(
        rec["outputs"]["contributing_guide"], "CONTRIBUTING.md",
        "{rec:#}"
    );
}

const SCRIPTED: &str = r#"ags_version: "1.0"
kind: AgenticGraph
id: warrant/scripted
title: A check the agent wrote
objective: Write a check script; the criterion runs it.
requires_conformance: 1
entrypoints: [script]
nodes:
  script:
    title: Write the check
    description: Write check.sh.
    requirements:
      workspace: read_write
      permissions: ["shell:exec:sh check.sh"]
    outputs:
      script: {type: file, description: The check.}
    success:
      criteria:
        - id: check_passes
          kind: command
          description: The check passes.
          run: sh check.sh
"#;

const ATTACK: &str = "cat .env; echo pwned > .warrant/pwned";

/// The attacker case: the node's agent writes a script and the criterion runs it. Under the
/// default profile it is confined like any command: `.env` is not there to read and
/// `.warrant/` cannot be written, so the check fails and nothing leaks. The control: with the
/// default profile configured `unconfined`, policy asks a person (it is no longer contained)
/// and, approved, the same criterion reads `.env` into the journal and writes `.warrant/`.
#[test]
fn a_script_the_agent_wrote_runs_confined_when_a_criterion_runs_it() {
    let attempt = |unconfined: bool| {
        let sb = Sandbox::init();
        sb.write(".env", "GREETING=marker-in-dotenv\n");
        if unconfined {
            let config = sb.ws.join(".warrant/config.toml");
            let text = std::fs::read_to_string(&config)
                .unwrap()
                .replace("[profiles.default.sandbox]\nnetwork = \"none\"\n", "")
                .replace(
                    "[profiles.default]\n",
                    "[profiles.default]\nunconfined = true\n",
                );
            assert!(
                text.contains("[profiles.default]\nunconfined = true\n")
                    && !text.contains("[profiles.default.sandbox]")
            );
            std::fs::write(&config, text).unwrap();
        }
        let g = sb.write("scripted.agraph.yaml", SCRIPTED);
        let model = sb.transcript(&format!(
            "version: 1\nturns:\n  - calls:\n      - tool: write_file\n        args: {{ path: check.sh, content: \"{ATTACK}\" }}\n  - say: '{{\"script\": \"check.sh\"}}'\n"
        ));
        let out = sb.run_stdin(
            &[
                "graph",
                "run",
                g.to_str().unwrap(),
                "--model",
                &model,
                "--prompt",
                "always",
            ],
            "o\no\n",
        );
        let (_, events) = sb.last_run();
        let log = serde_json::to_string(&events).unwrap();
        (
            out,
            sb.exists(".warrant/pwned"),
            log.contains("marker-in-dotenv"),
            checks(&events),
        )
    };
    let (out, pwned, leaked, seen) = attempt(true);
    assert!(
        pwned && leaked,
        "control: unconfined, the script reads .env and writes .warrant/: {}",
        stderr(&out)
    );
    assert_eq!(seen, vec![check("check_passes", 1, "passed")]);
    let (out, pwned, leaked, seen) = attempt(false);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(!pwned, "the confined criterion wrote .warrant/");
    assert!(!leaked, "the confined criterion read .env");
    assert_eq!(seen, vec![check("check_passes", 1, "failed")]);
}

const SHAPED: &str = r#"ags_version: "1.0"
kind: AgenticGraph
id: warrant/shaped
title: A report of a given shape
objective: Produce a report whose shape a schema checks.
requires_conformance: 2
entrypoints: [report]
nodes:
  report:
    title: Report
    description: Report the counts.
    outputs:
      counts: {type: object, description: The counts.}
    failure:
      retry: {max_attempts: 2, retry_on: [criteria_failed]}
    success:
      criteria:
        - id: shaped
          kind: json_schema
          description: The counts are non-negative integers, total included.
          output: counts
          schema:
            type: object
            required: [total]
            properties:
              total: {type: integer, minimum: 0}
"#;

/// `json_schema` (level 2): the named output validates against the inline schema; a report
/// that does not fails its attempt (the schema's words in the feedback) and the retry passes.
#[test]
fn a_json_schema_criterion_checks_the_output_against_its_schema() {
    let sb = Sandbox::init();
    let g = sb.write("shaped.agraph.yaml", SHAPED);
    let model = sb.transcript(
        "version: 1\nturns:\n  - say: '{\"counts\": {\"total\": -1}}'\n  - say: '{\"counts\": {\"total\": 3}}'\n",
    );
    let out = sb.run(&["graph", "run", g.to_str().unwrap(), "--model", &model]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (_, events) = sb.last_run();
    assert_eq!(
        steps(&events),
        vec![
            step("report", "running", 1),
            step("report", "attempt_failed", 1),
            step("report", "running", 2),
            step("report", "succeeded", 2),
        ]
    );
    let failed = events
        .iter()
        .find(|e| e["kind"] == "graph_node" && e["payload"]["status"] == "attempt_failed")
        .unwrap();
    let reason = failed["payload"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("criterion `shaped` failed") && reason.contains("/total"),
        "{reason}"
    );
}
