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

fn fixtures() -> PathBuf {
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
fn steps(events: &[Value]) -> Vec<(String, String, u64)> {
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

fn step(node: &str, status: &str, attempt: u64) -> (String, String, u64) {
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
    assert_eq!(seen.len(), 18);
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
