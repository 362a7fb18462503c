//! Agentic graphs (AGS 1.0, issue 18 part 3) from the binary: validation on the spec's
//! `conformance/invalid/` fixtures (each yields its expected code), a read-only plan against
//! policy, a run whose gate parks it until a person answers, a failing node retried and then
//! taking its `on_failure` edge, a node's permission ceiling under policy (and, declaring the
//! permission, the same write going through: the control), a gate that cannot be presented
//! failing its node (RT015; with the request tool offered, the same gate parks: the control),
//! resume refused after the graph file changed (and continuing once it is restored: the
//! control), and bad graphs refused with the spec's codes.

use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use serde_json::Value;

use super::harness::{Sandbox, parked_request, stderr, stdout};

pub(super) fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../warrant-graph/tests/fixtures/ags")
}

fn expected(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .next()
        .and_then(|l| l.strip_prefix("# EXPECT: "))
        .unwrap()
        .trim()
        .to_owned()
}

/// Every `(node, status, attempt)` step of the run, in order.
pub(super) fn steps(events: &[Value]) -> Vec<(String, String, u64)> {
    events
        .iter()
        .filter(|e| e["kind"] == "graph_node")
        .map(|e| &e["payload"])
        .map(|p| {
            (
                p["node"].as_str().unwrap().to_owned(),
                p["status"].as_str().unwrap().to_owned(),
                p["attempt"].as_u64().unwrap(),
            )
        })
        .collect()
}

pub(super) fn step(node: &str, status: &str, attempt: u64) -> (String, String, u64) {
    (node.to_owned(), status.to_owned(), attempt)
}

const GATED: &str = r#"ags_version: "1.0"
kind: AgenticGraph
id: warrant/release
title: Release with approval
objective: Draft, approve, publish.
requires_conformance: 2
entrypoints: [draft]
nodes:
  draft:
    title: Draft the notes
    description: Write the release notes.
    outputs:
      summary: {type: string, description: One line.}
  approve:
    type: gate
    title: Approve the release
    description: A person approves.
    depends_on: [draft]
    gate:
      mode: approve
      prompt: "Ship it? ${{ nodes.draft.outputs.summary }}"
      on_reject: fail
  publish:
    title: Publish
    description: Publish the release.
    depends_on: [approve]
    outputs:
      done: {type: boolean, description: Published.}
"#;

const GATED_TURNS: &str = r#"version: 1
turns:
  - say: '{"summary": "v2 is ready"}'
  - say: '{"done": true}'
"#;

#[test]
fn the_spec_fixtures_yield_their_codes_and_good_graphs_validate() {
    let sb = Sandbox::new();
    let mut seen = Vec::new();
    for dir in ["invalid", "warrant"] {
        for e in std::fs::read_dir(fixtures().join(dir)).unwrap() {
            let p = e.unwrap().path();
            let code = expected(&p);
            let out = sb.run(&["graph", "validate", p.to_str().unwrap(), "--json"]);
            assert_eq!(out.status.code(), Some(1), "{}", p.display());
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            let codes: Vec<&str> = v["findings"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f["code"].as_str().unwrap())
                .collect();
            assert!(codes.contains(&code.as_str()), "{}: {codes:?}", p.display());
            seen.push(code);
        }
    }
    seen.sort();
    assert_eq!(seen.len(), 24);
    let good = sb.write("release.agraph.yaml", GATED);
    let out = sb.run(&["graph", "validate", good.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("graph digest sha256-"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn bad_graphs_are_refused_with_the_spec_codes_before_anything_runs() {
    let sb = Sandbox::init();
    let model = sb.transcript(GATED_TURNS);
    for (file, code) in [
        ("ag111-cycle.agraph.yaml", "AG111"),
        ("ag004-unknown-node-kind.agraph.yaml", "AG004"),
        ("ag204-bad-expression.agraph.yaml", "AG204"),
        ("ag005-duplicate-key.agraph.yaml", "AG005"),
    ] {
        let p = fixtures().join("warrant").join(file);
        let out = sb.run(&["graph", "run", p.to_str().unwrap(), "--model", &model]);
        assert_eq!(out.status.code(), Some(2), "{file}: {}", stderr(&out));
        assert!(stderr(&out).contains("W-GRAPH-002"), "{}", stderr(&out));
        assert!(stderr(&out).contains(code), "{file}: {}", stderr(&out));
    }
    let runs = sb.json(&["runs", "list", "--json"]);
    assert_eq!(runs["runs"].as_array().unwrap().len(), 0);
    // A graph that needs more than Warrant executes is refused, naming why, not run in part.
    let l3 = sb.write(
        "l3.agraph.yaml",
        &GATED.replace("requires_conformance: 2", "requires_conformance: 3"),
    );
    let out = sb.run(&["graph", "run", l3.to_str().unwrap(), "--model", &model]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("W-GRAPH-003"), "{}", stderr(&out));
    assert!(stderr(&out).contains("AG303"), "{}", stderr(&out));
    assert_eq!(
        sb.json(&["runs", "list", "--json"])["runs"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
}

#[test]
fn a_plan_puts_each_permission_to_policy_and_runs_nothing() {
    let sb = Sandbox::init();
    let g = sb.write(
        "plan.agraph.yaml",
        r#"ags_version: "1.0"
kind: AgenticGraph
id: warrant/plan
title: Plan
objective: Show the plan.
entrypoints: [read]
nodes:
  read:
    title: Read
    description: Reads the sources.
    requirements:
      permissions: ["fs:read:src", "secret:read:TOKEN"]
  gate:
    type: gate
    title: Approve
    description: A person approves.
    depends_on: [read]
    gate: {mode: approve, prompt: "Go on?"}
"#,
    );
    let plan = sb.json(&["graph", "plan", g.to_str().unwrap(), "--json"]);
    assert_eq!(plan["order"], serde_json::json!(["read", "gate"]));
    assert_eq!(plan["runnable"], Value::Bool(true));
    let perms = &plan["nodes"][0]["permissions"];
    assert_eq!(
        (perms[0]["action"].as_str(), perms[0]["verdict"].as_str()),
        (Some("fs.read"), Some("allow"))
    );
    assert_eq!(perms[1]["verdict"].as_str(), Some("not_decided"));
    assert_eq!(
        plan["asks_person"][0].as_str(),
        Some("gate `gate`: Go on? (approve; a rejection means fail)")
    );
    let runs = sb.json(&["runs", "list", "--json"]);
    assert_eq!(runs["runs"].as_array().unwrap().len(), 0);
}

#[test]
fn a_gate_parks_the_run_until_a_person_answers_and_resume_checks_the_graph() {
    let sb = Sandbox::init();
    let g = sb.write("release.agraph.yaml", GATED);
    let model = sb.transcript(GATED_TURNS);
    let out = sb.run(&["graph", "run", g.to_str().unwrap(), "--model", &model]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let req = parked_request(&out);
    let (run, events) = sb.last_run();
    assert_eq!(
        steps(&events),
        vec![
            step("draft", "running", 1),
            step("draft", "succeeded", 1),
            step("approve", "awaiting_human", 1)
        ]
    );
    // The gate is a request to a person, with what the graph presents.
    let listed = sb.json(&["requests", "list", "--json"]);
    assert!(
        listed.to_string().contains("Ship it? v2 is ready"),
        "{listed}"
    );
    let ok = sb.run(&["requests", "answer", &req, "--option", "1"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));

    // The graph file changed since the run started: resume is refused, nothing appended.
    let before = sb.last_run().1.len();
    sb.write(
        "release.agraph.yaml",
        &GATED.replace("Release with approval", "Other"),
    );
    let refused = sb.run(&["graph", "resume", &run]);
    assert_eq!(refused.status.code(), Some(3), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("W-GRAPH-005"),
        "{}",
        stderr(&refused)
    );
    assert!(stderr(&refused).contains("RT053"), "{}", stderr(&refused));
    assert_eq!(sb.last_run().1.len(), before);

    // The control: the same resume with the graph as it was continues to the end.
    sb.write("release.agraph.yaml", GATED);
    let done = sb.run(&["resume", &run]);
    assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
    let (_, events) = sb.last_run();
    assert_eq!(
        steps(&events)[3..].to_vec(),
        vec![
            step("approve", "succeeded", 1),
            step("publish", "running", 1),
            step("publish", "succeeded", 1)
        ]
    );
    assert_eq!(events.last().unwrap()["kind"], "run_ended");
    let audit = sb.run(&["audit", "verify"]);
    assert_eq!(audit.status.code(), Some(0), "{}", stderr(&audit));
}

/// A worker that leases a graph run (its gate was answered, so it is queued again) drives it
/// through its graph, as `graph resume` does: the nodes after the gate run, and a changed graph
/// file is refused the same way.
#[test]
fn a_worker_continues_a_graph_run_through_its_graph() {
    let sb = Sandbox::init();
    let g = sb.write("release.agraph.yaml", GATED);
    let model = sb.transcript(GATED_TURNS);
    let out = sb.run(&["graph", "run", g.to_str().unwrap(), "--model", &model]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let req = parked_request(&out);
    let ok = sb.run(&["requests", "answer", &req, "--option", "1"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let worked = sb.run(&["worker", "--once"]);
    assert_eq!(worked.status.code(), Some(0), "{}", stderr(&worked));
    let (_, events) = sb.last_run();
    assert_eq!(
        steps(&events)[3..].to_vec(),
        vec![
            step("approve", "succeeded", 1),
            step("publish", "running", 1),
            step("publish", "succeeded", 1)
        ]
    );
    assert_eq!(events.last().unwrap()["kind"], "run_ended");
}

#[test]
fn a_gate_that_cannot_be_presented_fails_its_node() {
    let sb = Sandbox::init();
    let g = sb.write("release.agraph.yaml", GATED);
    let model = sb.transcript(GATED_TURNS);
    let out = sb
        .cmd(&["graph", "run", g.to_str().unwrap(), "--model", &model])
        .env("WARRANT_TEST_DISABLE", "graph-gate")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stdout(&out).contains("W-GRAPH-007"), "{}", stdout(&out));
    let (_, events) = sb.last_run();
    let failed = events
        .iter()
        .find(|e| e["kind"] == "graph_node" && e["payload"]["status"] == "failed")
        .unwrap();
    assert_eq!(failed["payload"]["node"], "approve");
    assert_eq!(failed["payload"]["code"], "RT015");
    assert_eq!(
        steps(&events).last().unwrap(),
        &step("publish", "skipped", 0)
    );
}

const FLAKY: &str = r#"ags_version: "1.0"
kind: AgenticGraph
id: warrant/build
title: Build, or fix
objective: Build; when the build fails, fix instead.
requires_conformance: 2
entrypoints: [build]
nodes:
  build:
    title: Build
    description: Build the project.
    outputs:
      status: {type: string, description: green or red.}
    success:
      criteria:
        - id: green
          kind: expression
          description: The build is green.
          expr: self.outputs.status == "green"
    failure:
      retry: {max_attempts: 2, retry_on: [criteria_failed]}
  ship:
    title: Ship
    description: Ship the build.
    depends_on: [build]
  fix:
    title: Fix
    description: Write down what broke.
    requirements:
      permissions: ["fs:write:notes/*"]
edges:
  - from: build
    to: fix
    kind: on_failure
"#;

#[test]
fn a_failing_node_is_retried_then_takes_its_on_failure_edge() {
    let sb = Sandbox::init();
    let g = sb.write("build.agraph.yaml", FLAKY);
    let model = sb.transcript(
        r#"version: 1
turns:
  - say: '{"status": "red"}'
  - say: '{"status": "red"}'
  - calls:
      - tool: write_file
        args: { path: "notes/broken.md", content: "the build is red" }
  - say: "written"
"#,
    );
    let out = sb.run(&["graph", "run", g.to_str().unwrap(), "--model", &model]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (_, events) = sb.last_run();
    assert_eq!(
        steps(&events),
        vec![
            step("build", "running", 1),
            step("build", "attempt_failed", 1),
            step("build", "running", 2),
            step("build", "failed", 2),
            step("ship", "skipped", 0),
            step("fix", "running", 1),
            step("fix", "succeeded", 1),
        ]
    );
    // The retry was told why the first attempt failed.
    let retry = events
        .iter()
        .filter(|e| e["kind"] == "message_received")
        .nth(1)
        .unwrap();
    assert!(
        retry["payload"]["text"]
            .as_str()
            .unwrap()
            .contains("The previous attempt failed: criterion `green` failed"),
        "{retry}"
    );
    // `fix` declared the write it makes: it went through.
    assert!(sb.exists("notes/broken.md"));
}

#[test]
fn a_node_cannot_do_what_it_did_not_declare_whatever_policy_allows() {
    let sb = Sandbox::init();
    // The same graph, but `fix` declares no write: the ceiling denies it in the ring.
    let g = sb.write(
        "build.agraph.yaml",
        &FLAKY.replace(
            "      permissions: [\"fs:write:notes/*\"]",
            "      permissions: [\"fs:read\"]",
        ),
    );
    let model = sb.transcript(
        r#"version: 1
turns:
  - say: '{"status": "red"}'
  - say: '{"status": "red"}'
  - calls:
      - tool: write_file
        args: { path: "notes/broken.md", content: "the build is red" }
  - say: "could not write"
"#,
    );
    let out = sb.run(&["graph", "run", g.to_str().unwrap(), "--model", &model]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!sb.exists("notes/broken.md"));
    let (_, events) = sb.last_run();
    let decided: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "policy_decided")
        .collect();
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(decided[0]["payload"]["verdict"], "deny");
    assert_eq!(decided[0]["payload"]["reasons"][0]["policy"], "graph:fix");
}

/// The spec's own `examples/` from the binary: each validates with no finding and plans
/// read-only; a level-3 one is refused by `graph run` before anything starts (AG303). (The
/// level-1 `minimal` and `link-audit` run end to end: `graph_criteria.rs` and below.)
#[test]
fn the_spec_examples_validate_plan_and_are_refused_honestly_when_beyond_warrant() {
    let sb = Sandbox::init();
    let dir = fixtures().join("examples");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 6);
    for name in &names {
        let p = dir.join(name);
        let v = sb.json(&["graph", "validate", p.to_str().unwrap(), "--json"]);
        assert_eq!(
            (v["ok"].clone(), v["findings"].clone()),
            (Value::Bool(true), serde_json::json!([])),
            "{name}"
        );
        let plan = sb.json(&["graph", "plan", p.to_str().unwrap(), "--json"]);
        assert_eq!(plan["id"], v["id"], "{name}");
        assert!(!plan["order"].as_array().unwrap().is_empty(), "{name}");
    }
    let model = sb.transcript(GATED_TURNS);
    let l3 = dir.join("library-v1-release.agraph.yaml");
    let out = sb.run(&["graph", "run", l3.to_str().unwrap(), "--model", &model]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("W-GRAPH-003"), "{}", stderr(&out));
    assert!(stderr(&out).contains("AG303"), "{}", stderr(&out));
    assert_eq!(
        sb.json(&["runs", "list", "--json"])["runs"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
}

fn run_schema() -> jsonschema::Validator {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("schema/agentic-graph-run-1.0.schema.json"))
            .unwrap(),
    )
    .unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

/// The run record of `run`, checked against the spec's run-record schema.
pub(super) fn record(sb: &Sandbox, run: &str) -> Value {
    let out = sb.run(&["graph", "record", run, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    let errors: Vec<String> = run_schema()
        .iter_errors(&rec)
        .map(|e| e.to_string())
        .collect();
    assert_eq!(errors, Vec::<String>::new(), "{rec:#}");
    rec
}

/// `(checkpoint, stage, mode, outcome)` of each human event of a node in a record.
fn human_events(node: &Value) -> Vec<(String, String, String, String)> {
    node["human_events"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|h| {
            (
                h["checkpoint_id"].as_str().unwrap().to_owned(),
                h["at_stage"].as_str().unwrap().to_owned(),
                h["mode"].as_str().unwrap().to_owned(),
                h["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn event(c: &str, at: &str, mode: &str, outcome: &str) -> (String, String, String, String) {
    (c.into(), at.into(), mode.into(), outcome.into())
}

const CHECKPOINTS: &str = r#"ags_version: "1.0"
kind: AgenticGraph
id: warrant/checkpoints
title: Notes a person checks
objective: Draft the notes; a person lets the work start and reviews what it produced.
requires_conformance: 2
entrypoints: [draft]
nodes:
  draft:
    title: Draft the notes
    description: Write the release notes.
    outputs:
      summary: {type: string, description: One line.}
    human:
      - id: go
        at: before_start
        mode: approve
        prompt: "Start drafting the notes?"
      - id: check
        at: after_outputs
        mode: review
        prompt: "Check the summary: ${{ self.outputs.summary }}"
  publish:
    title: Publish
    description: Publish the notes.
    depends_on: [draft]
    instructions: "Publish this summary: ${{ nodes.draft.outputs.summary }}"
"#;

/// `human[]` checkpoints (AGS §15) through Warrant's requests: `before_start` parks the run
/// before the agent is given anything, `after_outputs` (mode `review`) parks it with the
/// outputs shown, and the person's edit becomes the node's outputs. The record says who
/// answered what. Negative control: with no way to ask a person, the checkpoint fails its node
/// (RT015); it is never skipped.
#[test]
fn human_checkpoints_park_the_run_and_a_reviewers_edit_becomes_the_output() {
    let sb = Sandbox::init();
    let g = sb.write("notes.agraph.yaml", CHECKPOINTS);
    let plan = sb.json(&["graph", "plan", g.to_str().unwrap(), "--json"]);
    assert_eq!(
        plan["asks_person"],
        serde_json::json!([
            "node `draft`: checkpoint `go` before_start (approve)",
            "node `draft`: checkpoint `check` after_outputs (review)"
        ])
    );
    let model = sb.transcript(
        r#"version: 1
turns:
  - say: '{"summary": "v2 is ready"}'
  - say: "published"
"#,
    );
    let out = sb.run(&["graph", "run", g.to_str().unwrap(), "--model", &model]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let (run, events) = sb.last_run();
    assert_eq!(steps(&events), vec![step("draft", "awaiting_human", 1)]);
    assert_eq!(
        events
            .iter()
            .filter(|e| e["kind"] == "message_received")
            .count(),
        0,
        "the agent is given nothing before the person lets the node start"
    );
    let listed = sb.json(&["requests", "list", "--json"]).to_string();
    assert!(listed.contains("Start drafting the notes?"), "{listed}");
    let req = parked_request(&out);
    assert_eq!(
        sb.run(&["requests", "answer", &req, "--option", "1"])
            .status
            .code(),
        Some(0)
    );

    let out = sb.run(&["graph", "resume", &run]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let listed = sb.json(&["requests", "list", "--json"]).to_string();
    assert!(
        listed.contains("Check the summary: v2 is ready"),
        "{listed}"
    );
    let req = parked_request(&out);
    let edited = r#"{"summary": "v2 is ready, reviewed"}"#;
    assert_eq!(
        sb.run(&["requests", "answer", &req, "--text", edited])
            .status
            .code(),
        Some(0)
    );
    let done = sb.run(&["graph", "resume", &run]);
    assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
    let (_, events) = sb.last_run();
    assert_eq!(
        steps(&events),
        vec![
            step("draft", "awaiting_human", 1),
            step("draft", "running", 1),
            step("draft", "awaiting_human", 1),
            step("draft", "succeeded", 1),
            step("publish", "running", 1),
            step("publish", "succeeded", 1),
        ]
    );
    let published = events
        .iter()
        .filter(|e| e["kind"] == "message_received")
        .nth(1)
        .unwrap();
    assert!(
        published["payload"]["text"]
            .as_str()
            .unwrap()
            .contains("Publish this summary: v2 is ready, reviewed"),
        "{published}"
    );

    let rec = record(&sb, &run);
    assert_eq!(
        (
            rec["status"].as_str(),
            rec["nodes"][0]["status"].as_str(),
            rec["nodes"][0]["outputs"].clone()
        ),
        (
            Some("succeeded"),
            Some("succeeded"),
            serde_json::json!({"summary": "v2 is ready, reviewed"})
        )
    );
    assert_eq!(
        human_events(&rec["nodes"][0]),
        vec![
            event("go", "before_start", "approve", "approved"),
            event("check", "after_outputs", "review", "edited"),
        ]
    );

    // The negative control: the same graph where no person can be asked.
    let sb = Sandbox::init();
    let g = sb.write("notes.agraph.yaml", CHECKPOINTS);
    let model = sb.transcript("version: 1\nturns:\n  - say: 'never asked'\n");
    let out = sb
        .cmd(&["graph", "run", g.to_str().unwrap(), "--model", &model])
        .env("WARRANT_TEST_DISABLE", "graph-gate")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let (_, events) = sb.last_run();
    assert_eq!(
        steps(&events),
        vec![step("draft", "failed", 1), step("publish", "skipped", 0)]
    );
    let failed = events
        .iter()
        .find(|e| e["kind"] == "graph_node" && e["payload"]["status"] == "failed")
        .unwrap();
    assert_eq!(failed["payload"]["code"], "RT015");
}

const SIDE_EFFECTS: &str = r#"ags_version: "1.0"
kind: AgenticGraph
id: warrant/side-effects
title: Notes written with a person's leave
objective: Write down what broke, once a person approves the write.
requires_conformance: 2
entrypoints: [fix]
nodes:
  fix:
    title: Fix
    description: Write down what broke.
    requirements:
      permissions: ["fs:write:notes/*"]
    human:
      - id: pre_write
        at: before_side_effects
        mode: approve
        prompt: "About to write the notes."
"#;

/// A `before_side_effects` checkpoint: the node's first mutating call (here its only one)
/// waits for a person as an approval request of the ring; reads would not. The control: the
/// same node without the checkpoint writes at once.
#[test]
fn a_before_side_effects_checkpoint_holds_the_write_for_a_person() {
    let turns = r#"version: 1
turns:
  - calls:
      - tool: write_file
        args: { path: "notes/broken.md", content: "the build is red" }
  - say: "written"
"#;
    let sb = Sandbox::init();
    let g = sb.write("fix.agraph.yaml", SIDE_EFFECTS);
    let model = sb.transcript(turns);
    let out = sb.run(&["graph", "run", g.to_str().unwrap(), "--model", &model]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    assert!(!sb.exists("notes/broken.md"));
    let (run, events) = sb.last_run();
    let decided: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "policy_decided")
        .collect();
    assert_eq!(
        (
            decided.len(),
            decided[0]["payload"]["verdict"].as_str(),
            decided[0]["payload"]["reasons"][0]["policy"].as_str()
        ),
        (1, Some("ask"), Some("graph:fix"))
    );
    let req = parked_request(&out);
    assert_eq!(sb.run(&["approve", &req]).status.code(), Some(0));
    let done = sb.run(&["graph", "resume", &run]);
    assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
    assert!(sb.exists("notes/broken.md"));

    // The control: no checkpoint, no person asked, the write runs.
    let sb = Sandbox::init();
    let g = sb.write(
        "fix.agraph.yaml",
        SIDE_EFFECTS.split("    human:").next().unwrap(),
    );
    let model = sb.transcript(turns);
    let out = sb.run(&["graph", "run", g.to_str().unwrap(), "--model", &model]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(sb.exists("notes/broken.md"));
}

const INPUT_GATE: &str = r#"ags_version: "1.0"
kind: AgenticGraph
id: warrant/input
title: Release the version a person names
objective: A person names the version; the agent releases it.
requires_conformance: 2
entrypoints: [ask]
nodes:
  ask:
    type: gate
    title: Which version
    description: A person names the version to release.
    outputs:
      version: {type: string, description: The version to release.}
    gate:
      mode: input
      prompt: "Which version do we release?"
      collect:
        version: {type: string, description: The version to release.}
  release:
    title: Release
    description: Release the version.
    depends_on: [ask]
    instructions: "Release version ${{ nodes.ask.outputs.version }}."
"#;

/// A gate in mode `input` (AGS §7.3): the person's answer supplies the gate's `collect`ed
/// values, which become its outputs for the nodes after it. `--record` writes the run record
/// where the run parks (`awaiting_human`) and again when it ends.
#[test]
fn an_input_gate_takes_the_persons_values_as_its_outputs() {
    let sb = Sandbox::init();
    let g = sb.write("input.agraph.yaml", INPUT_GATE);
    let model = sb.transcript("version: 1\nturns:\n  - say: 'released'\n");
    let rec_path = sb.write("record.json", "");
    let out = sb.run(&[
        "graph",
        "run",
        g.to_str().unwrap(),
        "--model",
        &model,
        "--record",
        rec_path.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let parked: Value = serde_json::from_str(&std::fs::read_to_string(&rec_path).unwrap()).unwrap();
    assert_eq!(run_schema().iter_errors(&parked).count(), 0, "{parked:#}");
    assert_eq!(
        (
            parked["status"].as_str(),
            parked["nodes"][0]["status"].as_str()
        ),
        (Some("awaiting_human"), Some("awaiting_human"))
    );
    let listed = sb.json(&["requests", "list", "--json"]).to_string();
    assert!(listed.contains("Which version do we release?"), "{listed}");
    assert!(listed.contains("version (string)"), "{listed}");
    let req = parked_request(&out);
    assert_eq!(
        sb.run(&["requests", "answer", &req, "--text", "2.1.0"])
            .status
            .code(),
        Some(0)
    );
    let (run, _) = sb.last_run();
    let done = sb.run(&[
        "graph",
        "resume",
        &run,
        "--record",
        rec_path.to_str().unwrap(),
    ]);
    assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
    let (_, events) = sb.last_run();
    let release = events
        .iter()
        .find(|e| e["kind"] == "message_received")
        .unwrap();
    assert!(
        release["payload"]["text"]
            .as_str()
            .unwrap()
            .contains("Release version 2.1.0."),
        "{release}"
    );
    let rec: Value = serde_json::from_str(&std::fs::read_to_string(&rec_path).unwrap()).unwrap();
    assert_eq!(run_schema().iter_errors(&rec).count(), 0, "{rec:#}");
    assert_eq!(
        (
            rec["status"].as_str(),
            rec["nodes"][0]["outputs"].clone(),
            human_events(&rec["nodes"][0])
        ),
        (
            Some("succeeded"),
            serde_json::json!({"version": "2.1.0"}),
            vec![event("gate", "gate", "input", "provided")]
        )
    );
}

const ESCALATED: &str = r#"ags_version: "1.0"
kind: AgenticGraph
id: warrant/escalated
title: Build, or ask a person
objective: Build; when the build stays red, a person decides.
requires_conformance: 2
entrypoints: [build]
nodes:
  build:
    title: Build
    description: Build the project.
    outputs:
      status: {type: string, description: green or red.}
    success:
      criteria:
        - id: green
          kind: expression
          description: The build is green.
          expr: self.outputs.status == "green"
    failure:
      escalation:
        to: human
        roles: [maintainer]
        message: "The build of ${{ graph.id }} is red."
      on_exhausted: fail
"#;

/// `failure.escalation` to a person (AGS §14.2): once the ladder is exhausted, the failure and
/// why go to a person as a request (the run parks). Their guidance starts another attempt,
/// which is told it; when they give up, `on_exhausted` ends the node. Negative control: with no
/// way to ask a person, the escalation fails the node at once (RT015).
#[test]
fn an_escalation_puts_the_failure_to_a_person_who_decides_what_comes_next() {
    let sb = Sandbox::init();
    let g = sb.write("esc.agraph.yaml", ESCALATED);
    let plan = sb.json(&["graph", "plan", g.to_str().unwrap(), "--json"]);
    assert_eq!(
        plan["asks_person"],
        serde_json::json!(["node `build`: escalation to a person when its attempts are exhausted"])
    );
    let model = sb.transcript(
        r#"version: 1
turns:
  - say: '{"status": "red"}'
  - say: '{"status": "red"}'
"#,
    );
    let out = sb.run(&["graph", "run", g.to_str().unwrap(), "--model", &model]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let listed = sb.json(&["requests", "list", "--json"]).to_string();
    assert!(
        listed.contains("The build of warrant/escalated is red."),
        "{listed}"
    );
    assert!(listed.contains("criterion `green` failed"), "{listed}");
    let req = parked_request(&out);
    assert_eq!(
        sb.run(&["requests", "answer", &req, "--text", "try the clean build"])
            .status
            .code(),
        Some(0)
    );
    let (run, _) = sb.last_run();
    let out = sb.run(&["graph", "resume", &run]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let (_, events) = sb.last_run();
    let retry = events
        .iter()
        .filter(|e| e["kind"] == "message_received")
        .nth(1)
        .unwrap();
    assert!(
        retry["payload"]["text"]
            .as_str()
            .unwrap()
            .contains("try the clean build"),
        "{retry}"
    );
    let req = parked_request(&out);
    assert_eq!(
        sb.run(&["requests", "answer", &req, "--option", "2"])
            .status
            .code(),
        Some(0)
    );
    let out = sb.run(&["graph", "resume", &run]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stdout(&out).contains("W-GRAPH-007"), "{}", stdout(&out));
    let (_, events) = sb.last_run();
    assert_eq!(
        steps(&events),
        vec![
            step("build", "running", 1),
            step("build", "awaiting_human", 1),
            step("build", "attempt_failed", 1),
            step("build", "running", 2),
            step("build", "awaiting_human", 2),
            step("build", "failed", 2),
        ]
    );
    let rec = record(&sb, &run);
    let node = &rec["nodes"][0];
    assert_eq!(
        (
            rec["status"].as_str(),
            node["status"].as_str(),
            node["escalated"].as_bool(),
            node["attempts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a["status"].as_str().unwrap())
                .collect::<Vec<_>>(),
            human_events(node)
        ),
        (
            Some("failed"),
            Some("failed"),
            Some(true),
            vec!["criteria_failed", "criteria_failed"],
            vec![
                event("escalation", "escalation", "approve", "provided"),
                event("escalation", "escalation", "approve", "rejected"),
            ]
        )
    );

    // The negative control: nobody can be asked, so the escalation fails the node (RT015).
    let sb = Sandbox::init();
    let g = sb.write("esc.agraph.yaml", ESCALATED);
    let model = sb.transcript("version: 1\nturns:\n  - say: '{\"status\": \"red\"}'\n");
    let out = sb
        .cmd(&["graph", "run", g.to_str().unwrap(), "--model", &model])
        .env("WARRANT_TEST_DISABLE", "graph-gate")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let (_, events) = sb.last_run();
    let failed = events
        .iter()
        .find(|e| e["kind"] == "graph_node" && e["payload"]["status"] == "failed")
        .unwrap();
    assert_eq!(failed["payload"]["code"], "RT015");
}

fn link_audit_turns(report: &str) -> String {
    format!(
        r#"version: 1
turns:
  - say: '{{"links": [{{"url": "guide.html", "source_page": "index.html", "kind": "internal"}}]}}'
  - calls:
      - tool: write_file
        args: {{ path: "docs/internal/link-audit.md", content: "{report}" }}
  - say: '{{"broken_links": [], "audit_report": "docs/internal/link-audit.md"}}'
"#
    )
}

/// The spec's own level-1 example `link-audit` runs end to end from the binary: its nodes in
/// order, each under its declared permissions, its `expression` and `file_exists` criteria
/// judged, its graph outputs bound in the run record (valid against the spec's schema). The
/// control: an agent that writes a stub report fails `file_exists` (`min_bytes: 200`) and the
/// run with it.
#[test]
fn the_spec_link_audit_example_runs_end_to_end() {
    let example = fixtures().join("examples/link-audit.agraph.yaml");
    let report = "Link audit. ".repeat(20);
    let sb = Sandbox::init();
    let model = sb.transcript(&link_audit_turns(&report));
    let out = sb.run(&[
        "graph",
        "run",
        example.to_str().unwrap(),
        "--model",
        &model,
        "--param",
        "site_root=site",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (run, events) = sb.last_run();
    assert_eq!(
        steps(&events),
        vec![
            step("crawl_links", "running", 1),
            step("crawl_links", "succeeded", 1),
            step("check_links", "running", 1),
            step("check_links", "succeeded", 1),
        ]
    );
    let rec = record(&sb, &run);
    assert_eq!(
        (rec["status"].as_str(), rec["outputs"].clone()),
        (
            Some("succeeded"),
            serde_json::json!({
                "audit_report": "docs/internal/link-audit.md",
                "broken_links": [],
                "link_inventory": [
                    {"url": "guide.html", "source_page": "index.html", "kind": "internal"}
                ]
            })
        )
    );

    // The control: a stub report is not "at least 200 bytes".
    let sb = Sandbox::init();
    let model = sb.transcript(&link_audit_turns("stub"));
    let out = sb.run(&[
        "graph",
        "run",
        example.to_str().unwrap(),
        "--model",
        &model,
        "--param",
        "site_root=site",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let (_, events) = sb.last_run();
    let failed = events
        .iter()
        .find(|e| e["kind"] == "graph_node" && e["payload"]["status"] == "failed")
        .unwrap();
    assert_eq!(failed["payload"]["node"], "check_links");
    assert!(
        failed["payload"]["reason"]
            .as_str()
            .unwrap()
            .contains("criterion `report_written` failed"),
        "{failed}"
    );
}

const CONFIRMED: &str = r#"ags_version: "1.0"
kind: AgenticGraph
id: warrant/confirmed
title: Notes a maintainer confirms
objective: Draft the notes; a maintainer confirms them.
requires_conformance: 1
entrypoints: [draft]
nodes:
  draft:
    title: Draft the notes
    description: Write the release notes.
    outputs:
      summary: {type: string, description: One line.}
    failure:
      retry: {max_attempts: 2, retry_on: [criteria_failed]}
    success:
      criteria:
        - id: confirmed
          kind: human
          description: A maintainer confirms the notes.
          prompt: "Are these notes right?"
          roles: [maintainer]
"#;

/// A `human` success criterion (AGS §10.2, level 1): once the node's outputs are in, a person
/// confirms; their "no" fails the attempt like any criterion, and the retry is told why.
#[test]
fn a_human_criterion_is_a_persons_confirmation_and_a_no_fails_the_attempt() {
    let sb = Sandbox::init();
    let g = sb.write("confirmed.agraph.yaml", CONFIRMED);
    let model = sb.transcript(
        r#"version: 1
turns:
  - say: '{"summary": "v2"}'
  - say: '{"summary": "v2 is ready"}'
"#,
    );
    let out = sb.run(&["graph", "run", g.to_str().unwrap(), "--model", &model]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let listed = sb.json(&["requests", "list", "--json"]).to_string();
    assert!(listed.contains("Are these notes right?"), "{listed}");
    let req = parked_request(&out);
    assert_eq!(
        sb.run(&["requests", "answer", &req, "--option", "2"])
            .status
            .code(),
        Some(0)
    );
    let (run, _) = sb.last_run();
    let out = sb.run(&["graph", "resume", &run]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let req = parked_request(&out);
    assert_eq!(
        sb.run(&["requests", "answer", &req, "--option", "1"])
            .status
            .code(),
        Some(0)
    );
    let done = sb.run(&["graph", "resume", &run]);
    assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
    let (_, events) = sb.last_run();
    assert_eq!(
        steps(&events),
        vec![
            step("draft", "running", 1),
            step("draft", "awaiting_human", 1),
            step("draft", "attempt_failed", 1),
            step("draft", "running", 2),
            step("draft", "awaiting_human", 2),
            step("draft", "succeeded", 2),
        ]
    );
    let retry = events
        .iter()
        .filter(|e| e["kind"] == "message_received")
        .nth(1)
        .unwrap();
    assert!(
        retry["payload"]["text"]
            .as_str()
            .unwrap()
            .contains("The previous attempt failed: criterion `confirmed`"),
        "{retry}"
    );
    let rec = record(&sb, &run);
    assert_eq!(
        human_events(&rec["nodes"][0]),
        vec![
            event(
                "criterion-confirmed",
                "after_outputs",
                "approve",
                "rejected"
            ),
            event(
                "criterion-confirmed",
                "after_outputs",
                "approve",
                "approved"
            ),
        ]
    );
}
