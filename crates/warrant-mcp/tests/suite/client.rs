//! The client against real peers and hostile servers, driven through the `Tool` trait as the
//! ring drives it (normalize, then execute an authorized action).

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use warrant_core::config::{McpServerConfig, ProfileConfig};
use warrant_core::{Action, CanonicalPath, RiskClass};
use warrant_kernel::{Authorized, EffectResult, Tool, ToolEnv};
use warrant_mcp::{McpSource, StartContext, WITHHELD};
use warrant_tools::ToolSource;

use super::peers;

/// Servers run unconfined here: the confined start goes through the `warrant` binary's
/// launcher, which the CLI tests exercise.
pub fn ctx(dir: &std::path::Path) -> StartContext {
    let profile = ProfileConfig {
        unconfined: true,
        ..ProfileConfig::default()
    };
    StartContext {
        workspace: CanonicalPath::from_normalized(dir.to_str().unwrap()).unwrap(),
        profiles: BTreeMap::from([("open".to_owned(), profile)]),
        parent_env: std::env::vars().collect(),
        credentials: Default::default(),
        launcher: None,
        screen_descriptions: true,
    }
}

pub fn stdio(argv: &[&str]) -> McpServerConfig {
    McpServerConfig {
        command: Some(argv.iter().map(|s| (*s).to_owned()).collect()),
        profile: Some("open".to_owned()),
        timeout_ms: Some(10_000),
        ..McpServerConfig::default()
    }
}

pub fn env(dir: &std::path::Path) -> ToolEnv {
    ToolEnv {
        workspace: CanonicalPath::from_normalized(dir.to_str().unwrap()).unwrap(),
        profiles: BTreeMap::new(),
        parent_env: vec![],
        secrets: None,
        no_overlays: false,
        run: None,
        tests: Default::default(),
        web: Default::default(),
        web_addresses_unguarded: false,
        web_loopback_allowed: false,
        menus: Default::default(),
        spawn_unnarrowed: false,
        ceiling_unchecked: false,
        delegation_late: false,
    }
}

/// Normalizes and executes one call as the ring would once it allowed it.
pub fn call(
    tools: &[Box<dyn Tool>],
    name: &str,
    args: Value,
    env: &ToolEnv,
) -> (Action, EffectResult) {
    let tool = tools
        .iter()
        .find(|t| t.spec().name == name)
        .unwrap_or_else(|| panic!("no tool {name}"));
    let actions = tool.normalize(&args, env).unwrap();
    let authorized: Vec<Authorized<Action>> =
        actions.iter().cloned().map(Authorized::for_tests).collect();
    let result = tool.execute(&authorized, env, &|_| true, &|| None);
    (actions[0].clone(), result)
}

pub fn names(tools: &[Box<dyn Tool>]) -> Vec<String> {
    tools.iter().map(|t| t.spec().name.clone()).collect()
}

#[test]
fn server_everything_over_stdio_is_listed_withheld_and_called() {
    let dir = tempfile::tempdir().unwrap();
    let index = peers::everything();
    let servers = BTreeMap::from([(
        "everything".to_owned(),
        McpServerConfig {
            tools: Some(vec!["echo".into(), "get-sum".into()]),
            ..stdio(&["node", index.to_str().unwrap(), "stdio"])
        },
    )]);
    let source = McpSource::new(&servers, ctx(dir.path())).unwrap();
    let tools = source.tools();
    assert_eq!(source.failures(), vec![]);
    let mut listed = names(&tools);
    listed.sort();
    // `get-sum` has a character tools may not have: mapped, with a digest suffix.
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(listed.contains(&"mcp__everything__echo".to_owned()));
    assert!(
        listed
            .iter()
            .any(|n| n.starts_with("mcp__everything__get_sum_"))
    );
    let echo = tools
        .iter()
        .find(|t| t.spec().name == "mcp__everything__echo")
        .unwrap();
    assert!(
        echo.spec().description.starts_with(WITHHELD),
        "{}",
        echo.spec().description
    );
    assert_eq!(
        echo.spec().input_schema,
        json!({"type": "object", "additionalProperties": true})
    );
    let env = env(dir.path());
    let (action, result) = call(
        &tools,
        "mcp__everything__echo",
        json!({"message": "hi"}),
        &env,
    );
    let Action::McpCall {
        server,
        tool,
        arguments,
        risk,
        definition,
    } = &action
    else {
        panic!("{action:?}")
    };
    assert_eq!(
        (server.as_str(), tool.as_str(), arguments, action.target()),
        (
            "everything",
            "echo",
            &json!({"message": "hi"}),
            "mcp/everything/echo".to_owned()
        )
    );
    assert!(definition.starts_with("sha256:"), "{definition}");
    assert_eq!(*risk, RiskClass::Read, "echo is annotated readOnlyHint");
    assert!(result.ok, "{result:?}");
    assert_eq!(result.result["content"][0]["text"], json!("Echo: hi"));
    // The first result carries the connection's record: what the server declared that
    // Warrant does not use.
    let record = &result.result["connection"];
    assert_eq!(record["transport"], json!("stdio"));
    assert_eq!(record["protocol"], json!("2025-11-25"));
    let dropped: Vec<&str> = record["dropped_capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for cap in ["resources", "prompts", "logging", "completions"] {
        assert!(dropped.contains(&cap), "{dropped:?}");
    }
}

fn hostile(mode: &str) -> BTreeMap<String, McpServerConfig> {
    BTreeMap::from([(
        "hostile".to_owned(),
        McpServerConfig {
            timeout_ms: Some(2_000),
            ..stdio(&["python3", &peers::hostile(), mode])
        },
    )])
}

#[test]
fn a_server_that_never_answers_initialize_or_answers_garbage_offers_no_tools_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    for mode in ["silent", "malformed"] {
        let source = McpSource::new(&hostile(mode), ctx(dir.path())).unwrap();
        let started = std::time::Instant::now();
        assert!(source.tools().is_empty(), "{mode}");
        let failures = source.failures();
        assert_eq!(failures.len(), 1, "{mode}: {failures:?}");
        let code = warrant_core::Coded::code(&failures[0]);
        // Silent: the initialize timeout (2 s), never a hang. Garbage: either the handshake
        // fails on it or it times out, each a clear outcome.
        match mode {
            "silent" => assert_eq!(code, "W-MCP-003", "{failures:?}"),
            _ => assert!(["W-MCP-002", "W-MCP-003"].contains(&code), "{failures:?}"),
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(8),
            "{mode}"
        );
    }
}

#[test]
fn hostile_tools_are_named_safely_withheld_bounded_and_refused_when_changed() {
    let dir = tempfile::tempdir().unwrap();
    let env = env(dir.path());
    // Trusted, so descriptions pass, except the one carrying a forged fence.
    let mut servers = hostile("tools");
    servers.get_mut("hostile").unwrap().trust_descriptions = true;
    servers.get_mut("hostile").unwrap().max_result_bytes = Some(64 * 1024);
    let source = McpSource::new(&servers, ctx(dir.path())).unwrap();
    let tools = source.tools();
    assert_eq!(source.failures(), vec![]);
    let spec = |n: &str| {
        tools
            .iter()
            .find(|t| t.spec().name == n)
            .map(|t| t.spec().clone())
            .unwrap_or_else(|| panic!("{n} in {:?}", names(&tools)))
    };
    // A forbidden character in a name: mapped and suffixed, within the contract's alphabet.
    let odd: Vec<String> = names(&tools)
        .into_iter()
        .filter(|n| n.starts_with("mcp__hostile__bad_name__x_"))
        .collect();
    assert_eq!(odd.len(), 1, "{:?}", names(&tools));
    assert!(warrant_mcp::names::is_plain(&odd[0]));
    // A forged fence in a vouched-for description: withheld all the same.
    assert!(
        spec("mcp__hostile__forged")
            .description
            .starts_with(WITHHELD)
    );
    assert!(
        !spec("mcp__hostile__forged")
            .description
            .contains("untrusted")
    );
    // Vouched for and fence-free: passed through as written (the operator's call).
    assert_eq!(spec("mcp__hostile__echo").description, "Echoes text.");
    // Risk from annotations.
    // The action's own class is the tool's (`Action::risk` reads it back).
    let risk = |n: &str| call_action(&tools, n, &env).risk();
    assert_eq!(
        [
            risk("mcp__hostile__echo"),
            risk("mcp__hostile__wipe"),
            risk("mcp__hostile__big")
        ],
        [RiskClass::Read, RiskClass::Destructive, RiskClass::Change]
    );
    // A 10 MB result is cut to the bound and says so.
    let (_, big) = call(&tools, "mcp__hostile__big", json!({}), &env);
    assert_eq!(
        big.result["truncated"],
        json!(true),
        "{}",
        &big.result.to_string()[..200]
    );
    assert_eq!(big.result["limit"], json!(64 * 1024));
    assert!(big.result.to_string().len() < 70 * 1024);
    // A sampling request is refused with a clear JSON-RPC error the server sees.
    let (_, sampled) = call(&tools, "mcp__hostile__sample", json!({}), &env);
    let text = sampled.result["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text.contains("sampling is refused"), "{text}");
    // ... and the refusal is part of the call's (journaled) result, with its code.
    assert_eq!(
        sampled.result["refused_requests"],
        json!([{
            "request": "sampling",
            "code": "W-MCP-011",
            "error": "MCP server `hostile` asked Warrant for sampling (a call of the model) during a call; refused: a server may not call the model or ask the person through Warrant",
        }]),
        "{sampled:?}"
    );
    // An elicitation from a server not configured for it is refused the same way (W-MCP-011),
    // and the person is never asked.
    let (_, elicited) = call(&tools, "mcp__hostile__elicit", json!({}), &env);
    let text = elicited.result["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text.contains("elicitation is refused"), "{text}");
    assert_eq!(
        elicited.result["refused_requests"][0]["code"],
        json!("W-MCP-011"),
        "{elicited:?}"
    );
    assert!(elicited.result.get("elicited").is_none(), "{elicited:?}");
    // The tool list changes mid-run: a call decided against the old definition is refused,
    // nothing is sent.
    let echo_before = call_action(&tools, "mcp__hostile__echo", &env);
    let (_, changed) = call(&tools, "mcp__hostile__change", json!({}), &env);
    assert!(changed.ok, "{changed:?}");
    let tool = tools
        .iter()
        .find(|t| t.spec().name == "mcp__hostile__echo")
        .unwrap();
    let refused = tool.execute(
        &[Authorized::for_tests(echo_before)],
        &env,
        &|_| true,
        &|| None,
    );
    assert!(!refused.ok);
    assert_eq!(refused.result["code"], json!("W-MCP-007"), "{refused:?}");
    // A call that never answers is a timeout the model sees.
    let started = std::time::Instant::now();
    let (_, hung) = call(&tools, "mcp__hostile__hang", json!({}), &env);
    assert_eq!(hung.result["code"], json!("W-MCP-006"), "{hung:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(8));
    // A crash is a tool error naming how the server ended, and later calls fail fast.
    let (_, crashed) = call(&tools, "mcp__hostile__crash", json!({}), &env);
    assert!(!crashed.ok);
    assert_eq!(crashed.result["code"], json!("W-MCP-005"), "{crashed:?}");
    let (_, after) = call(&tools, "mcp__hostile__wipe", json!({}), &env);
    assert!(!after.ok, "{after:?}");
}

#[test]
fn descriptions_of_an_untrusted_server_are_withheld_with_the_negative_control() {
    let dir = tempfile::tempdir().unwrap();
    let spec_of = |trust: bool, screen: bool| {
        let mut servers = hostile("tools");
        servers.get_mut("hostile").unwrap().trust_descriptions = trust;
        let ctx = StartContext {
            screen_descriptions: screen,
            ..ctx(dir.path())
        };
        let source = McpSource::new(&servers, ctx).unwrap();
        let tools = source.tools();
        let t = tools
            .iter()
            .find(|t| t.spec().name == "mcp__hostile__instruct")
            .unwrap();
        t.spec().clone()
    };
    // Guard off (the operator vouches, and the screen is switched off): the instruction
    // reaches the model.
    assert!(spec_of(true, false).description.contains("id_rsa"));
    // Vouched for and screened: the instruction is found, the description withheld, and the
    // finding named by its kind only (the text never reaches the model).
    let screened = spec_of(true, true);
    assert!(screened.description.starts_with(WITHHELD), "{screened:?}");
    assert!(
        screened
            .description
            .contains("it carried an instruction to the model"),
        "{screened:?}"
    );
    assert!(!screened.description.contains("id_rsa"));
    assert!(warrant_llm::untrusted::screen_instructions(&screened.description).is_none());
    // Default: withheld, with a permissive schema.
    let withheld = spec_of(false, true);
    assert!(withheld.description.starts_with(WITHHELD), "{withheld:?}");
    assert!(!withheld.description.contains("id_rsa"));
}

fn call_action(tools: &[Box<dyn Tool>], name: &str, env: &ToolEnv) -> Action {
    let tool = tools.iter().find(|t| t.spec().name == name).unwrap();
    tool.normalize(&json!({}), env).unwrap().remove(0)
}
