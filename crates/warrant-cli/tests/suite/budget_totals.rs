//! Budget totals as an indexed projection (issue 19, part 4) from the binary: the actor and
//! tenant totals the gate checks before each model call are the store's `budget_totals`, kept
//! by the append that records each answer's usage; `audit verify` folds every run's log and
//! proves the two agree. The negative control (`WARRANT_TEST_DISABLE=budget-totals`, debug
//! builds) leaves the projection unwritten: the gate then lets the next run call the model,
//! and `audit verify` names the difference (W-ENVELOPE-008).

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use warrant_testkit::pg::TestDb;

use super::harness::{Sandbox, stderr, stdout};

/// One answer that says it cost 2000 + 1000 tokens.
const SPEND: &str =
    "version: 1\nturns:\n  - usage: { input_tokens: 2000, output_tokens: 1000 }\n    say: done\n";

fn add_config(sb: &Sandbox, text: &str) {
    let path = sb.ws.join(".warrant/config.toml");
    let mut config = std::fs::read_to_string(&path).unwrap();
    config.push('\n');
    config.push_str(text);
    std::fs::write(path, config).unwrap();
}

fn verify(sb: &Sandbox) -> (Option<i32>, Value) {
    let out = sb.run(&["audit", "verify", "--json"]);
    (
        out.status.code(),
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out))),
    )
}

fn actor_of(events: &[Value]) -> String {
    events[0]["payload"]["principal"]["actor"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn spend_twice(sb: &Sandbox, disable: Option<&str>) -> (Option<i32>, Option<i32>) {
    let model = sb.transcript(SPEND);
    let run = |task: &str| {
        let mut cmd = sb.std_cmd(&["run", "--prompt", "never", "--model", &model, task]);
        if let Some(d) = disable {
            cmd.env("WARRANT_TEST_DISABLE", d);
        }
        let out = cmd.output().unwrap();
        (out.status.code(), stderr(&out))
    };
    let (first, err) = run("first");
    assert_eq!(first, Some(0), "{err}");
    let (second, _) = run("second");
    (first, second)
}

fn the_actor_budget_is_read_from_the_projection(pg: Option<&TestDb>) {
    let sb = Sandbox::init_with(pg.map(|db| db.url.clone()));
    add_config(&sb, "[budgets.actor]\ntokens = 3000\n");
    let (_, second) = spend_twice(&sb, None);
    // The first run used the whole budget (3000, not more); the second may not call.
    assert_eq!(second, Some(3));
    let (_, events) = sb.last_run();
    let stopped: Vec<Value> = events
        .iter()
        .filter(|e| e["kind"] == "budget_exceeded")
        .map(|e| e["payload"].clone())
        .collect();
    assert_eq!(
        stopped,
        vec![json!({
            "turn": 0, "scope": "actor", "metric": "tokens", "limit": 3000.0, "used": 3000.0,
            "message": "the actor budget of 3000 tokens is used up (3000 used)",
        })]
    );
    assert!(!events.iter().any(|e| e["kind"] == "model_responded"));
    let actor = actor_of(&events);
    let (code, v) = verify(&sb);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["budget"]["ok"], true);
    assert_eq!(v["budget"]["runs"], 2);
    assert_eq!(
        v["budget"]["totals"][&actor],
        json!({"input_tokens": 2000, "output_tokens": 1000, "cost_nanos": 0})
    );
    let text = stdout(&sb.run(&["audit", "verify"]));
    assert!(
        text.contains("ok       budget totals: 1 actors, each equal to the fold of 2 runs' logs"),
        "{text}"
    );
}

#[test]
fn the_actor_budget_is_read_from_the_projection_on_sqlite() {
    the_actor_budget_is_read_from_the_projection(None);
}

#[test]
fn the_actor_budget_is_read_from_the_projection_on_postgres() {
    let db = TestDb::new();
    the_actor_budget_is_read_from_the_projection(Some(&db));
}

/// The negative control: with the projection left unwritten, the gate has nothing to read, so
/// the second run calls the model though the actor's budget is spent; `audit verify` folds the
/// logs and names the actor whose total is out of step.
#[test]
fn without_the_projection_the_gate_misses_the_spend_and_audit_verify_says_so() {
    let sb = Sandbox::init();
    add_config(&sb, "[budgets.actor]\ntokens = 3000\n");
    let (_, second) = spend_twice(&sb, Some("budget-totals"));
    assert_eq!(second, Some(0), "the gate saw nothing spent");
    let (_, events) = sb.last_run();
    let actor = actor_of(&events);
    let (code, v) = verify(&sb);
    assert_eq!(code, Some(1), "{v}");
    assert_eq!(v["ok"], false);
    assert_eq!(
        v["budget"]["mismatches"],
        json!([{
            "code": "W-ENVELOPE-008",
            "actor": actor,
            "projected": {"input_tokens": 0, "output_tokens": 0, "cost_nanos": 0},
            "folded": {"input_tokens": 4000, "output_tokens": 2000, "cost_nanos": 0},
        }])
    );
    let out = sb.run(&["audit", "verify"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.contains("BROKEN   budget totals: 1 of 1 actors differ")
            && text.contains("W-ENVELOPE-008"),
        "{text}"
    );
}

/// A subagent's usage is its own run's, counted once: the parent's log names the child, and
/// neither the projection nor the fold adds the child's answers to the parent's again.
#[test]
fn a_subagents_usage_counts_once() {
    let sb = Sandbox::init();
    let model = sb.transcript(
        r#"
version: 1
turns:
  - usage: { input_tokens: 100, output_tokens: 10 }
    calls:
      - tool: spawn_agent
        args: { task: "say hello" }
  - usage: { input_tokens: 200, output_tokens: 20 }
    say: "done"
children:
  - turns:
      - usage: { input_tokens: 40, output_tokens: 4 }
        say: "hello"
"#,
    );
    let out = sb.run(&["run", "--prompt", "never", "--model", &model, "delegate"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let runs = sb.json(&["runs", "list", "--json"]);
    assert_eq!(runs["runs"].as_array().unwrap().len(), 2, "{runs}");
    let (_, events) = sb.last_run();
    let actor = actor_of(&events);
    let (code, v) = verify(&sb);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(
        v["budget"]["totals"][&actor],
        json!({"input_tokens": 340, "output_tokens": 34, "cost_nanos": 0})
    );
}
