//! Effect-class ceilings declared by an agent profile, a skill and a graph (issue 19, part 3)
//! from the binary. Each format's own extension point carries it: an OAP profile's
//! `metadata.annotations."warrant.dev/ceiling"`, a skill's `metadata: { warrant-ceiling: … }`,
//! a graph's top-level `x-warrant-ceiling`. `warrant verify` and the run's static check take
//! the tightest declared (W-ENVELOPE-007); a skill activated mid-run narrows the dynamic check
//! from then on (W-ENVELOPE-006). Each case has its control: the same without the
//! declaration acts.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::harness::{Sandbox, stderr, stdout};

/// A menu of a read and a write (`change`): it holds under no ceiling.
const TIDY_MENU: &str =
    "\n[run]\nmenu = \"tidy\"\n[menus.tidy]\ntools = [\"read_file\", \"write_file\"]\n";

const WRITE: &str = "version: 1\nturns:\n  - calls:\n      - tool: write_file\n        args: { path: note.txt, content: x }\n  - say: done\n";

fn profile(name: &str, annotation: &str) -> String {
    format!(
        "oap: \"1.0\"\nkind: AgentProfile\nmetadata:\n  name: {name}\n  description: Tidies notes.\n{annotation}spec:\n  role:\n    instructions: You tidy notes.\n  tools:\n    allow: [read, write]\n  permissions:\n    default: allow\n"
    )
}

fn verify(sb: &Sandbox, args: &[&str]) -> (Option<i32>, Value) {
    let mut all = vec!["verify", "--json"];
    all.extend_from_slice(args);
    let out = sb.run(&all);
    (
        out.status.code(),
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out))),
    )
}

fn only_run_events(sb: &Sandbox) -> Vec<Value> {
    sb.last_run().1
}

fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_profiles_declared_ceiling_is_verified_and_stops_a_run_that_could_reach_above_it() {
    let sb = Sandbox::init();
    std::fs::write(sb.managed.join("config.toml"), TIDY_MENU).unwrap();
    sb.write(
        ".agents/reader.agent.yaml",
        &profile("reader", "  annotations:\n    warrant.dev/ceiling: read\n"),
    );
    sb.write(".agents/writer.agent.yaml", &profile("writer", ""));
    // No ceiling declared anywhere: the composition holds.
    let (code, plain) = verify(&sb, &[]);
    assert_eq!(code, Some(0), "{plain}");
    assert_eq!(plain["composition"]["ceiling"], Value::Null);
    // The profile declares `read`: its write tool is above it.
    let (code, reader) = verify(&sb, &["--profile", "reader"]);
    assert_eq!(code, Some(1), "{reader}");
    assert_eq!(
        reader["composition"]["declared"],
        json!([{"by": "agent profile reader", "ceiling": "read"}])
    );
    assert_eq!(
        reader["composition"]["above"],
        json!([{"tool": "write_file", "class": "change"}])
    );
    // With a looser `[run] ceiling` too, the tightest counts.
    std::fs::write(
        sb.managed.join("config.toml"),
        TIDY_MENU.replace("[run]\n", "[run]\nceiling = \"external\"\n"),
    )
    .unwrap();
    let (code, both) = verify(&sb, &["--profile", "reader"]);
    assert_eq!(code, Some(1), "{both}");
    assert_eq!(both["composition"]["ceiling"], "read");
    assert_eq!(
        both["composition"]["declared"],
        json!([{"by": "[run]", "ceiling": "external"}, {"by": "agent profile reader", "ceiling": "read"}])
    );
    let text = stdout(&sb.run(&["verify", "--profile", "reader"]));
    assert!(
        text.contains(
            "ceilings declared: [run] `external`, agent profile reader `read` (the tightest counts)"
        ) && text.contains("W-ENVELOPE-007"),
        "{text}"
    );

    // A run under the profile stops before its first step, typed and audited.
    let model = sb.transcript(WRITE);
    let out = sb.run(&[
        "run",
        "--prompt",
        "never",
        "--profile",
        "reader",
        "--model",
        &model,
        "tidy",
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(!sb.exists("note.txt"));
    let events = only_run_events(&sb);
    assert_eq!(kinds(&events), vec!["run_started", "halted", "run_ended"]);
    assert_eq!(events[0]["payload"]["settings"]["ceiling"], "read");
    assert_eq!(events[1]["payload"]["code"], "W-ENVELOPE-007");
    // The control: the same profile without the annotation runs and writes (`[run]` allows
    // `external`).
    let out = sb.run(&[
        "run",
        "--prompt",
        "never",
        "--profile",
        "writer",
        "--model",
        &model,
        "tidy",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(sb.exists("note.txt"));

    // A value that is not a risk class is refused, naming where.
    sb.write(
        ".agents/bad.agent.yaml",
        &profile("bad", "  annotations:\n    warrant.dev/ceiling: lots\n"),
    );
    let out = sb.run(&["verify", "--profile", "bad"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("warrant.dev~1ceiling") && stderr(&out).contains("lots"),
        "{}",
        stderr(&out)
    );
}

const GRAPH: &str = r#"ags_version: "1.0"
kind: AgenticGraph
id: warrant/tidy
title: Tidy
objective: Tidy the notes.
entrypoints: [tidy]
CEILING
nodes:
  tidy:
    title: Tidy
    description: Tidy the notes.
    outputs:
      done: {type: boolean, description: Done.}
"#;

#[test]
fn a_graphs_declared_ceiling_is_verified_and_stops_its_run_before_the_first_node() {
    let sb = Sandbox::init();
    std::fs::write(sb.managed.join("config.toml"), TIDY_MENU).unwrap();
    let held = sb.write(
        "held.agraph.yaml",
        &GRAPH.replace("CEILING", "x-warrant-ceiling: read"),
    );
    let free = sb.write("free.agraph.yaml", &GRAPH.replace("CEILING\n", ""));
    let out = sb.run(&["graph", "validate", held.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let (code, v) = verify(&sb, &["--graph", held.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{v}");
    assert_eq!(v["composition"]["graph"], "warrant/tidy");
    assert_eq!(
        v["composition"]["declared"],
        json!([{"by": "graph warrant/tidy", "ceiling": "read"}])
    );
    let (code, v) = verify(&sb, &["--graph", free.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{v}");

    let model = sb.transcript("version: 1\nturns:\n  - say: '{\"done\": true}'\n");
    let out = sb.run(&["graph", "run", held.to_str().unwrap(), "--model", &model]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let events = only_run_events(&sb);
    assert_eq!(events[0]["payload"]["settings"]["ceiling"], "read");
    let halted: Vec<&Value> = events.iter().filter(|e| e["kind"] == "halted").collect();
    assert_eq!(halted.len(), 1, "{:?}", kinds(&events));
    assert_eq!(halted[0]["payload"]["code"], "W-ENVELOPE-007");
    assert!(!events.iter().any(|e| e["kind"] == "model_responded"));
    // The control: the same graph without the field runs its node.
    let out = sb.run(&["graph", "run", free.to_str().unwrap(), "--model", &model]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // A value that is not a risk class is refused before anything runs.
    let bad = sb.write(
        "bad.agraph.yaml",
        &GRAPH.replace("CEILING", "x-warrant-ceiling: lots"),
    );
    let out = sb.run(&["verify", "--graph", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("W-ENVELOPE-009"), "{}", stderr(&out));
}

fn skill(ceiling: &str) -> String {
    format!(
        "---\nname: reader\ndescription: Reads notes. Use when notes are mentioned.\n{ceiling}---\n# Reader\n\nOnly read.\n"
    )
}

/// Activating a skill that declares `read` narrows the run from then on: a write before it
/// lands, the same write after it is refused at run time (W-ENVELOPE-006, naming the skill)
/// before anyone is asked. The control: the skill without the declaration changes nothing.
#[test]
fn activating_a_skill_with_a_tighter_ceiling_narrows_the_run_from_then_on() {
    let transcript = "version: 1\nturns:\n  - calls:\n      - tool: write_file\n        args: { path: before.txt, content: x }\n  - calls:\n      - tool: activate_skill\n        args: { name: reader }\n  - calls:\n      - tool: write_file\n        args: { path: after.txt, content: x }\n  - say: done\n";
    for (declared, after_lands) in [("metadata:\n  warrant-ceiling: read\n", false), ("", true)] {
        let sb = Sandbox::init();
        sb.json(&["skills", "trust", "--json"]);
        let dir = sb.ws.join(".agents/skills/reader");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("SKILL.md"), skill(declared)).unwrap();
        let model = sb.transcript(transcript);
        let out = sb.run(&["run", "--prompt", "never", "--model", &model, "notes"]);
        assert_eq!(out.status.code(), Some(0), "{declared}: {}", stderr(&out));
        assert!(sb.exists("before.txt"), "{declared}");
        assert_eq!(sb.exists("after.txt"), after_lands, "{declared}");
        let events = only_run_events(&sb);
        let refused: Vec<Value> = events
            .iter()
            .filter(|e| e["kind"] == "call_refused")
            .map(|e| json!({"tool": e["payload"]["tool"], "code": e["payload"]["code"], "message": e["payload"]["message"]}))
            .collect();
        if after_lands {
            assert_eq!(refused, Vec::<Value>::new());
        } else {
            assert_eq!(
                refused,
                vec![json!({"tool": "write_file", "code": "W-ENVELOPE-006",
                    "message": "this call reaches the risk class `change`, above the run's ceiling `read` (narrowed by the skill `reader`, activated in this run); nothing ran"})]
            );
            assert!(!events.iter().any(|e| e["kind"] == "approval_requested"));
        }
    }
    // A declaration that is not a risk class makes the skill unusable, with its code.
    let sb = Sandbox::init();
    sb.json(&["skills", "trust", "--json"]);
    let dir = sb.ws.join(".agents/skills/reader");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        skill("metadata:\n  warrant-ceiling: lots\n"),
    )
    .unwrap();
    let v = sb.json(&["skills", "list", "--json"]);
    assert_eq!(v["skills"][0]["reason"]["code"], "W-SKILL-009", "{v}");
}
