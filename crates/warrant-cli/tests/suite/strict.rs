//! Strict mode from the binary: every front end that opens or serves a run refuses to start
//! while a baseline control is missing, listing every gap at once; with the controls in place
//! it runs; without strict mode the gaps are one notice.

use pretty_assertions::assert_eq;

use super::harness::{Sandbox, stderr};

const STRICT_LOCKED: &str = "[security]\nstrict = true\nlocked = true\n";

/// The controls strict mode asks for: a directory with an administrator holding a key, the
/// project's team, a budget and a ceiling every tool is within (the default audit sink and
/// confined profile are in place).
fn with_controls(sb: &Sandbox, managed_extra: &str) {
    std::fs::write(
        sb.managed.join("directory.toml"),
        format!(
            "admins = [\"root\"]\n[teams.payments]\nmembers = [\"tester\"]\n[people.root]\npublic_key = \"{}\"\n[people.tester]\npublic_key = \"{}\"\n",
            "ab".repeat(32),
            "cd".repeat(32)
        ),
    )
    .unwrap();
    std::fs::write(
        sb.managed.join("config.toml"),
        format!(
            "{managed_extra}[budgets.run]\ntokens = 100000\n[run]\nceiling = \"irreversible\"\n"
        ),
    )
    .unwrap();
    let cfg = sb.ws.join(".warrant/config.toml");
    let mut text = std::fs::read_to_string(&cfg).unwrap_or_default();
    text.push_str("\n[approvals]\nteam = \"payments\"\n");
    std::fs::write(cfg, text).unwrap();
}

#[test]
fn strict_mode_refuses_every_front_end_listing_every_gap() {
    let sb = Sandbox::init();
    std::fs::write(sb.managed.join("config.toml"), STRICT_LOCKED).unwrap();
    // The project cannot turn a locked strict mode off.
    let cfg = sb.ws.join(".warrant/config.toml");
    let mut text = std::fs::read_to_string(&cfg).unwrap_or_default();
    text.push_str("\n[security]\nstrict = false\n");
    std::fs::write(&cfg, text).unwrap();
    let model = sb.quickstart_model();
    let fronts: Vec<Vec<&str>> = vec![
        vec!["run", "--model", &model, "task"],
        vec!["submit", "--model", &model, "task"],
        vec!["worker", "--once"],
        vec!["chat", "--model", &model],
        vec!["mcp", "serve"],
    ];
    for args in &fronts {
        let out = sb.run_stdin(args, "");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert_eq!(
            stderr(&out).trim_end(),
            "error[W-STRICT-001]: strict mode refuses to start: 3 control(s) missing: \
             [approval-route] no identity directory (managed directory.toml): nobody is named to approve the classes that need a person (destructive, secret, irreversible); \
             [budget] no budget is configured (`[budgets.run|actor|tenant] tokens` or `cost_usd`); \
             [preflight-verification] no effect-class ceiling is declared (`[run] ceiling` or the menu's `ceiling`), so the run's tools cannot be verified against one before it starts. Nothing was started",
            "{args:?}"
        );
    }
    // Nothing was started by any of them.
    let runs = sb.json(&["runs", "list", "--json"]);
    assert_eq!(runs["runs"], serde_json::json!([]));
}

#[test]
fn strict_mode_names_approvers_without_keys_and_starts_once_the_controls_are_in_place() {
    let sb = Sandbox::init();
    with_controls(&sb, STRICT_LOCKED);
    let model = sb.transcript("version: 1\nturns:\n  - say: done\n");
    let ok = sb.run(&["run", "--model", &model, "task"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert!(!stderr(&ok).contains("baseline"), "{}", stderr(&ok));
    // Strict gives the run a deadline it was not asked for.
    let runs = sb.json(&["runs", "list", "--json"]);
    let run = runs["runs"][0]["run"].as_str().unwrap().to_owned();
    let shown = sb.json(&["runs", "show", &run, "--json"]);
    assert!(
        shown["events"][0]["payload"]["settings"]["deadline"].is_string(),
        "{}",
        shown["events"][0]
    );
    // An approver whose key is gone is a gap: answers from them cannot be authenticated.
    let dir = std::fs::read_to_string(sb.managed.join("directory.toml")).unwrap();
    let cut = dir.split("[people.tester]").next().unwrap().to_owned();
    std::fs::write(sb.managed.join("directory.toml"), cut).unwrap();
    let out = sb.run(&["run", "--model", &model, "task"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("[approver-keys] approvers without a registered Ed25519 key in the directory (their answers cannot be authenticated): tester"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn without_strict_mode_the_gaps_are_one_notice_and_the_run_goes_on() {
    let sb = Sandbox::init();
    let model = sb.transcript("version: 1\nturns:\n  - say: done\n");
    let out = sb.run(&["run", "--model", &model, "task"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    let notices: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("notice: "))
        .map(|l| l.split(':').nth(1).unwrap_or(""))
        .collect();
    assert_eq!(
        notices,
        vec![" 3 baseline control(s) missing (strict mode would refuse to start)"]
    );
    // `[security] locked` is the managed layer's alone.
    let cfg = sb.ws.join(".warrant/config.toml");
    let mut text = std::fs::read_to_string(&cfg).unwrap_or_default();
    text.push_str("\n[security]\nstrict = true\nlocked = true\n");
    std::fs::write(&cfg, text).unwrap();
    let refused = sb.run(&["run", "--model", &model, "task"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("W-CONFIG-002"),
        "{}",
        stderr(&refused)
    );
}

/// Pre-flight verification is part of strict's baseline: a ceiling the run's tools can reach
/// above is a gap naming them (nothing starts); under a menu within it the run starts.
#[test]
fn strict_mode_refuses_a_composition_that_fails_pre_flight_verification() {
    let sb = Sandbox::init();
    with_controls(&sb, STRICT_LOCKED);
    let managed = sb.managed.join("config.toml");
    let text = std::fs::read_to_string(&managed).unwrap();
    let text = text.replace("ceiling = \"irreversible\"", "ceiling = \"change\"");
    std::fs::write(&managed, &text).unwrap();
    let model = sb.transcript("version: 1\nturns:\n  - say: done\n");
    let out = sb.run(&["run", "--model", &model, "task"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("[preflight-verification] the run's tools can reach worse than its ceiling `change` (`warrant verify`): ")
            && err.contains("delete_path (destructive)")
            && err.contains("run_command (irreversible)"),
        "{err}"
    );
    let runs = sb.json(&["runs", "list", "--json"]);
    assert_eq!(runs["runs"], serde_json::json!([]));
    std::fs::write(
        &managed,
        format!(
            "{text}menu = \"reading\"\n[menus.reading]\ntools = [\"read_file\", \"write_file\"]\n"
        ),
    )
    .unwrap();
    let ok = sb.run(&["run", "--model", &model, "task"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
}

/// Replay divergence refused: a strict run parked for a person, resumed after the policy set
/// changed, stops (exit 3) with a typed `halted` event in its audited log and nothing run. The
/// control, the same run not strict, goes on waiting for its person (exit 10).
#[test]
fn a_strict_run_resumed_under_another_policy_set_stops() {
    for strict in [true, false] {
        let sb = Sandbox::init();
        with_controls(&sb, if strict { STRICT_LOCKED } else { "" });
        sb.write("notes/a.txt", "x\n");
        let model = sb.transcript(
            "version: 1\nturns:\n  - calls:\n      - tool: delete_path\n        args: { path: notes, recursive: true }\n  - say: done\n",
        );
        let out = sb.run(&["run", "--prompt", "never", "--model", &model, "task"]);
        assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
        let runs = sb.json(&["runs", "list", "--json"]);
        let run = runs["runs"][0]["run"].as_str().unwrap().to_owned();
        sb.write(
            ".warrant/policies/extra.cedar",
            "@id(\"read-anywhere\")\npermit(principal, action == Warrant::Action::\"fs.read\", resource is Warrant::Path);\n",
        );
        let resumed = sb.run(&["resume", "--prompt", "never", &run]);
        let shown = sb.json(&["runs", "show", &run, "--json"]);
        let kinds: Vec<&str> = shown["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["kind"].as_str().unwrap())
            .collect();
        assert!(sb.exists("notes/a.txt"));
        if strict {
            assert_eq!(resumed.status.code(), Some(3), "{}", stderr(&resumed));
            let halted = shown["events"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["kind"] == "halted")
                .unwrap_or_else(|| panic!("{kinds:?}"))["payload"]
                .clone();
            assert_eq!(halted["code"], "W-STRICT-002");
            assert_eq!(halted["halt"]["what"], "policy");
            assert!(!kinds.contains(&"policy_changed"), "{kinds:?}");
            let audit = sb.run(&["audit", "query", "--run", &run, "--json"]);
            assert!(super::harness::stdout(&audit).contains("W-STRICT-002"));
        } else {
            // Still waiting for its person (the change is recorded when it is next driven).
            assert_eq!(resumed.status.code(), Some(10), "{}", stderr(&resumed));
            assert!(!kinds.contains(&"halted"), "{kinds:?}");
        }
    }
}
