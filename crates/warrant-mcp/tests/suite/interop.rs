//! Interop with real servers from the package registries: the official Python SDK (`mcp`) as a
//! server, and the reference `mcp-server-git`, both over stdio.

use std::collections::BTreeMap;
use std::process::Command;

use pretty_assertions::assert_eq;
use serde_json::json;
use warrant_core::config::McpServerConfig;
use warrant_core::{Action, RiskClass};
use warrant_mcp::McpSource;
use warrant_tools::ToolSource;

use super::client::{call, ctx, env, names, stdio};
use super::peers;

#[test]
fn the_python_sdk_as_a_server_is_listed_vouched_for_and_called() {
    peers::python_module("mcp.server", "mcp");
    let dir = tempfile::tempdir().unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/peers/py_server.py");
    let servers = BTreeMap::from([(
        "py".to_owned(),
        McpServerConfig {
            trust_descriptions: true,
            ..stdio(&["python3", script])
        },
    )]);
    let source = McpSource::new(&servers, ctx(dir.path())).unwrap();
    let tools = source.tools();
    assert_eq!(source.failures(), vec![]);
    assert_eq!(names(&tools), vec!["mcp__py__add".to_owned()]);
    // Vouched for: its description and input schema pass.
    let spec = tools[0].spec();
    assert_eq!(spec.description, "Adds two integers.");
    assert_eq!(spec.input_schema["required"], json!(["a", "b"]));
    let (action, result) = call(
        &tools,
        "mcp__py__add",
        json!({"a": 2, "b": 40}),
        &env(dir.path()),
    );
    assert!(
        matches!(
            action,
            Action::McpCall {
                risk: RiskClass::Change,
                ..
            }
        ),
        "{action:?}"
    );
    assert!(result.ok, "{result:?}");
    assert_eq!(result.result["content"][0]["text"], json!("2 + 40 = 42"));
    let record = &result.result["connection"];
    assert_eq!(
        (record["server_info"].as_str(), record["protocol"].as_str()),
        (Some("py-peer "), Some("2025-11-25"))
    );
}

#[test]
fn mcp_server_git_reads_a_repository_with_a_risk_override() {
    peers::python_module("mcp_server_git", "mcp-server-git");
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().to_str().unwrap();
    for args in [
        vec!["init", "-q", "-b", "main", repo],
        vec![
            "-C",
            repo,
            "-c",
            "user.email=t@e",
            "-c",
            "user.name=t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "first",
        ],
    ] {
        assert!(Command::new("git").args(&args).status().unwrap().success());
    }
    let servers = BTreeMap::from([(
        "git".to_owned(),
        McpServerConfig {
            tools: Some(vec![
                "git_status".into(),
                "git_log".into(),
                "git_reset".into(),
            ]),
            risk: BTreeMap::from([("git_reset".to_owned(), RiskClass::Destructive)]),
            ..stdio(&["python3", "-m", "mcp_server_git", "--repository", repo])
        },
    )]);
    let source = McpSource::new(&servers, ctx(dir.path())).unwrap();
    let tools = source.tools();
    assert_eq!(source.failures(), vec![]);
    let mut listed = names(&tools);
    listed.sort();
    assert_eq!(
        listed,
        vec![
            "mcp__git__git_log",
            "mcp__git__git_reset",
            "mcp__git__git_status"
        ]
    );
    let env = env(dir.path());
    let (_, log) = call(
        &tools,
        "mcp__git__git_log",
        json!({"repo_path": repo}),
        &env,
    );
    assert!(log.ok, "{log:?}");
    assert!(log.result.to_string().contains("first"), "{}", log.result);
    let reset = tools
        .iter()
        .find(|t| t.spec().name == "mcp__git__git_reset")
        .unwrap();
    let action = reset
        .normalize(&json!({"repo_path": repo}), &env)
        .unwrap()
        .remove(0);
    assert!(
        matches!(
            action,
            Action::McpCall {
                risk: RiskClass::Destructive,
                ..
            }
        ),
        "{action:?}"
    );
    assert_eq!(action.risk(), RiskClass::Destructive);
}
