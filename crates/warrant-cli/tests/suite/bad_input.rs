//! Bad input: each gets a specific error with a code, exit 2, and nothing is started or lost.

use std::fs;

use pretty_assertions::assert_eq;

use super::harness::{Sandbox, stderr};

fn runs(sb: &Sandbox) -> usize {
    sb.json(&["runs", "list", "--json"])["runs"]
        .as_array()
        .unwrap()
        .len()
}

#[test]
fn a_bad_transcript_is_refused_before_the_run_starts() {
    let sb = Sandbox::init();
    let cases = [
        (
            "version: 1\nturns:\n  - calls:\n      - tool: rm_rf\n        args: {}\n",
            "W-TRANSCRIPT-005",
            "turn 1, call 1",
        ),
        (
            "version: 1\nturns:\n  - say: hi\n  - calls:\n      - tool: read_file\n        args: { file: x }\n",
            "W-TRANSCRIPT-006",
            "turn 2, call 1",
        ),
        (
            "version: 1\nturns:\n  - sya: typo\n",
            "W-TRANSCRIPT-003",
            "sya",
        ),
        ("version: 2\nturns: []\n", "W-TRANSCRIPT-004", "version"),
        ("version: 1\nturns: [\n", "W-TRANSCRIPT-002", "line"),
    ];
    for (yaml, code, mentions) in cases {
        let model = sb.transcript(yaml);
        let out = sb.run(&["run", "--model", &model, "t"]);
        assert_eq!(out.status.code(), Some(2), "{yaml}");
        let err = stderr(&out);
        assert!(err.contains(code), "{yaml}: {err}");
        assert!(err.contains(mentions), "{yaml}: {err}");
    }
    let out = sb.run(&["run", "--model", "scripted:/no/such/file.yaml", "t"]);
    assert_eq!(out.status.code(), Some(2));
    let out = sb.run(&["run", "--model", "gpt-4", "t"]);
    assert!(stderr(&out).contains("W-MODEL-001"), "{}", stderr(&out));
    assert_eq!(runs(&sb), 0, "nothing was started");
}

/// A forbid naming an attribute the schema does not have: strict validation refuses it.
const BROKEN_FORBID: &str =
    "@id(\"typo\")\nforbid(principal, action, resource) when { resource.secretive };\n";

#[test]
fn a_remembered_validation_never_lets_an_edited_policy_skip_its_check() {
    let mut sb = Sandbox::init();
    let state = sb.home.join("state");
    sb.extra_env
        .push(("XDG_STATE_HOME".into(), state.display().to_string()));
    sb.write("say.yaml", "version: 1\nturns:\n  - say: done\n");
    let model = format!("scripted:{}", sb.ws.join("say.yaml").display());
    let validated = state.join("warrant/validated");
    let remembered = || fs::read_dir(&validated).map_or(0, |d| d.count());
    // The first run validates the set and remembers that it passed, in the person's state
    // directory; the same set again adds nothing.
    assert_eq!(
        sb.run(&["run", "--model", &model, "t"]).status.code(),
        Some(0)
    );
    assert_eq!(remembered(), 1);
    assert_eq!(
        sb.run(&["run", "--model", &model, "t"]).status.code(),
        Some(0)
    );
    assert_eq!(remembered(), 1);
    // An edit that fails validation is refused as before, and not remembered.
    sb.write(".warrant/policies/typo.cedar", BROKEN_FORBID);
    let out = sb.run(&["run", "--model", &model, "t"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("W-POLICY-"), "{}", stderr(&out));
    assert_eq!(remembered(), 1);
    // A valid edit is another set: validated, then remembered beside the first.
    sb.write(
        ".warrant/policies/typo.cedar",
        "@id(\"typo\")\nforbid(principal, action == Warrant::Action::\"fs.delete\", resource);\n",
    );
    assert_eq!(
        sb.run(&["run", "--model", &model, "t"]).status.code(),
        Some(0)
    );
    assert_eq!(remembered(), 2);
    // `config check` validates whatever was remembered.
    sb.write(".warrant/policies/typo.cedar", BROKEN_FORBID);
    let out = sb.run(&["config", "check"]);
    assert_ne!(out.status.code(), Some(0));
}

#[test]
fn malformed_config_and_policy_fail_closed() {
    let sb = Sandbox::init();
    let model = sb.quickstart_model();
    let config = sb.ws.join(".warrant/config.toml");
    let good = fs::read_to_string(&config).unwrap();
    fs::write(&config, "[run]\nmax_denial = 3\n").unwrap();
    let out = sb.run(&["run", "--model", &model, "t"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("W-CONFIG-001"), "{}", stderr(&out));
    assert!(stderr(&out).contains("max_denial"), "{}", stderr(&out));
    fs::write(&config, good).unwrap();

    // A policy naming an attribute the schema does not have stops everything.
    sb.write(
        ".warrant/policies/typo.cedar",
        "@id(\"typo\")\npermit(principal, action, resource) when { resource.secretive };\n",
    );
    let out = sb.run(&["run", "--model", &model, "t"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("W-POLICY-"), "{err}");
    assert!(err.contains("typo.cedar"), "{err}");
    let out = sb.run(&[
        "policy",
        "explain",
        "--action",
        "fs.read",
        "--target",
        "README.md",
    ]);
    assert_eq!(out.status.code(), Some(2));
    fs::remove_file(sb.ws.join(".warrant/policies/typo.cedar")).unwrap();
    // A profile that would leak secrets into commands is refused at load.
    fs::write(
        &config,
        "[profiles.leaky]\nset_env = { GITHUB_TOKEN = \"x\" }\n",
    )
    .unwrap();
    let out = sb.run(&["run", "--model", &model, "t"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("GITHUB_TOKEN"), "{}", stderr(&out));
    fs::write(&config, "").unwrap();
    assert_eq!(runs(&sb), 0);
}

#[test]
fn paths_escaping_the_workspace_are_denied_and_explained() {
    let sb = Sandbox::init();
    let outside = sb.dir.path().join("outside.txt");
    fs::write(&outside, "secret outside").unwrap();
    std::os::unix::fs::symlink(&outside, sb.ws.join("innocent.txt")).unwrap();
    let model = sb.transcript("version: 1\nturns:\n  - calls:\n      - tool: read_file\n        args: { path: \"../outside.txt\" }\n      - tool: read_file\n        args: { path: innocent.txt }\n  - say: done\n");
    let out = sb.run(&["run", "--model", &model, "t"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (_, events) = sb.last_run();
    let proposed: Vec<String> = events
        .iter()
        .filter(|e| e["kind"] == "action_proposed")
        .map(|e| {
            e["payload"]["actions"][0]["path"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let canonical = fs::canonicalize(&outside).unwrap().display().to_string();
    assert_eq!(
        proposed,
        vec![canonical.clone(), canonical],
        "policy saw the resolved path both times"
    );
    let denials: Vec<&str> = events
        .iter()
        .filter(|e| e["kind"] == "effect_denied")
        .map(|e| e["payload"]["message"].as_str().unwrap())
        .collect();
    assert_eq!(denials.len(), 2);
    assert!(
        denials[0].contains("outside the workspace"),
        "{}",
        denials[0]
    );
    let transcript = serde_json::to_string(&events).unwrap();
    assert!(!transcript.contains("secret outside"));
}

#[test]
fn unknown_tools_and_bad_arguments_from_a_model_are_refused_without_running() {
    // The scripted transcript is validated up front, so this goes through the OpenAI provider
    // path in openai.rs; here the refusal reaches the model for an unknown profile instead.
    let sb = Sandbox::init();
    let model = sb.transcript("version: 1\nturns:\n  - calls:\n      - tool: run_command\n        args: { argv: [ls], profile: nope }\n  - say: done\n");
    let out = sb.run(&["run", "--model", &model, "t"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (_, events) = sb.last_run();
    let refused = events.iter().find(|e| e["kind"] == "call_refused").unwrap();
    assert_eq!(refused["payload"]["code"], "W-TOOL-005");
    assert!(!events.iter().any(|e| e["kind"] == "effect_started"));
}

#[test]
fn corrupt_truncated_and_newer_stores_are_refused_untouched() {
    let sb = Sandbox::init();
    let store = sb.ws.join(".warrant/store.db");
    let model = sb.quickstart_model();
    // The store is `store.db` with its WAL (the last close does not checkpoint): move the WAL
    // into the file first, so the file alone is the whole store and damage to it is seen.
    rusqlite_conn(&store)
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    let good = fs::read(&store).unwrap();

    fs::write(
        &store,
        b"not a database at all, just text that is long enough to look like a header",
    )
    .unwrap();
    let before = fs::read(&store).unwrap();
    let out = sb.run(&["run", "--model", &model, "t"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("W-STORE-002"), "{}", stderr(&out));
    assert_eq!(
        fs::read(&store).unwrap(),
        before,
        "the file is left as it was"
    );

    fs::write(&store, &good).unwrap();
    {
        let conn = rusqlite_conn(&store);
        conn.pragma_update(None, "user_version", 99).unwrap();
    }
    let out = sb.run(&["runs", "list"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("W-STORE-003"), "{}", stderr(&out));
}

fn rusqlite_conn(p: &std::path::Path) -> rusqlite::Connection {
    rusqlite::Connection::open(p).unwrap()
}

#[test]
fn init_twice_and_commands_outside_a_workspace_are_clear_errors() {
    let sb = Sandbox::init();
    let out = sb.run(&["init", "--yes"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("W-INIT-001"));
    let bare = Sandbox::new();
    let out = bare.run(&["runs", "list"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("warrant init"), "{}", stderr(&out));
    let out = bare.run(&["init"]);
    assert_eq!(out.status.code(), Some(2), "no terminal and no --yes");
    assert!(!bare.exists(".warrant"));
}

#[test]
fn an_unreachable_store_is_a_clear_error_after_retries_and_starts_nothing() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut sb = Sandbox::init();
    sb.store = Some(format!("postgres://warrant:hunter2@127.0.0.1:{port}/runs"));
    let started = std::time::Instant::now();
    let out = sb.run(&["run", "--model", &sb.quickstart_model(), "t"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("W-STORE-012"), "{err}");
    assert!(err.contains("after 4 attempts"), "{err}");
    assert!(!err.contains("hunter2"), "the password never shows: {err}");
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(500),
        "it retried with backoff"
    );
    sb.store = None;
    assert_eq!(runs(&sb), 0, "nothing was started anywhere");
}
