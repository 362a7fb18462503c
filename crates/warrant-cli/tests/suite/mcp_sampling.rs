//! An MCP server's sampling request through the ring (issue 14, part 1): the reference server's
//! `trigger-sampling-request` tool asks the client for a completion while its call runs. With
//! `sampling = true` the request is answered by a run of its own (the caller's principal, no
//! tools, the server's messages fenced as untrusted, its one model call a `provider.call`
//! decided by policy on the parent's budget), and the call's journaled result names that run.
//! The controls: a policy that forbids the answering run's model refuses the request (the
//! server hears the refusal, the model's text never reaches it), and without `sampling` the
//! capability is not declared, so the server does not even offer the tool.

use pretty_assertions::assert_eq;
use serde_json::Value;
use warrant_core::config::DEFAULT_READ_ROOTS;

use super::harness::{Sandbox, stderr};
use super::mcp::everything;

fn tool() -> String {
    warrant_mcp::model_name("every", "trigger-sampling-request")
}

fn setup(sb: &Sandbox, index: &std::path::Path, sampling: bool) {
    let npm = index
        .ancestors()
        .nth(4)
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let mut roots: Vec<String> = DEFAULT_READ_ROOTS
        .iter()
        .map(|s| format!("{s:?}"))
        .collect();
    roots.push(format!("{npm:?}"));
    let config = sb.ws.join(".warrant/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        r#"
[profiles.mcp-stdio.sandbox]
read_roots = [{roots}]

[mcp.servers.every]
command = ["node", {index:?}, "stdio"]
tools = ["trigger-sampling-request"]
sampling = {sampling}
"#,
        roots = roots.join(", "),
        index = index.to_str().unwrap(),
    ));
    std::fs::write(&config, text).unwrap();
    sb.write(
        ".warrant/policies/mcp.cedar",
        "@id(\"mcp-sampling-tool\")\n@reason(\"The test server's sampling tool may be called.\")\npermit (principal, action == Warrant::Action::\"mcp.call\", resource is Warrant::McpTool)\nwhen { resource.server == \"every\" };\n",
    );
}

fn transcript(sb: &Sandbox) -> String {
    let tool = tool();
    sb.transcript(&format!(
        r#"version: 1
turns:
  - calls:
      - tool: {tool}
        args: {{ prompt: "name a colour of the sea", maxTokens: 40 }}
  - say: done
children:
  - turns:
      - say: "Teal, like the harbour at dusk."
"#
    ))
}

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

fn events_of(sb: &Sandbox, run: &str) -> Vec<Value> {
    sb.json(&["runs", "show", run, "--json"])["events"]
        .as_array()
        .unwrap()
        .clone()
}

/// The run that called the tool: the first one listed (its sampling run starts after it).
fn parent_run(sb: &Sandbox) -> String {
    let runs = sb.json(&["runs", "list", "--json"]);
    runs["runs"].as_array().unwrap()[0]["run"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn a_servers_sampling_request_is_answered_by_a_governed_run_of_its_own() {
    let index = everything();
    let sb = Sandbox::init();
    setup(&sb, &index, true);
    let model = transcript(&sb);
    let out = sb.run(&["run", "--model", &model, "ask the server"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    let parent = parent_run(&sb);
    let events = events_of(&sb, &parent);
    let done = of_kind(&events, "effect_completed");
    assert_eq!(done.len(), 1, "{events:#?}");
    let result = &done[0]["payload"]["result"];
    // The server received the answering run's text and put it in its result.
    assert!(
        result
            .to_string()
            .contains("Teal, like the harbour at dusk."),
        "{result}"
    );
    let sampled = result["sampled"].as_array().unwrap();
    assert_eq!(sampled.len(), 1, "{result}");
    assert_eq!(sampled[0]["outcome"], "answered", "{result}");
    let child = sampled[0]["child_run"].as_str().unwrap().to_owned();
    assert!(
        child.starts_with(&parent),
        "{child} is not named from {parent}"
    );

    // The answering run: the caller's principal, linked to the call, the server's request in
    // its settings, its model call decided by policy, the request fenced as untrusted.
    let child_events = events_of(&sb, &child);
    let started = &of_kind(&child_events, "run_started")[0]["payload"];
    let spawn = &started["settings"]["spawn"];
    assert_eq!(spawn["parent"]["run"], Value::String(parent.clone()));
    assert_eq!(spawn["sampling"]["server"], "every");
    assert!(
        spawn["sampling"]["messages"][0]["text"]
            .as_str()
            .unwrap()
            .contains("name a colour of the sea"),
        "{spawn}"
    );
    assert_eq!(spawn["sampling"]["max_tokens"], 40);
    let parent_started = &of_kind(&events, "run_started")[0]["payload"];
    assert_eq!(started["principal"], parent_started["principal"]);
    let responded = of_kind(&child_events, "model_responded");
    assert_eq!(responded.len(), 1, "{child_events:#?}");
    let fences = responded[0]["payload"]["request"]["fences"].to_string();
    assert!(fences.contains("mcp-sampling:every"), "{fences}");
    assert!(
        !started["task"]
            .as_str()
            .unwrap()
            .contains("name a colour of the sea"),
        "the server's words are not the task"
    );
    // `runs show` links the answering run from its parent.
    let shown = sb.json(&["runs", "show", &parent, "--json"]);
    assert!(shown["subagents"].to_string().contains(&child), "{shown}");
    let verified = sb.run(&["audit", "verify"]);
    assert_eq!(verified.status.code(), Some(0), "{}", stderr(&verified));
}

#[test]
fn a_policy_that_forbids_the_answering_runs_model_refuses_the_sampling_request() {
    let index = everything();
    let sb = Sandbox::init();
    setup(&sb, &index, true);
    // The answering run's model is the transcript's first child (`scripted:PATH#0`).
    sb.write(
        ".warrant/policies/no-sampling.cedar",
        "@id(\"no-sampling-model\")\n@reason(\"Servers may not have the model answer them.\")\nforbid (principal, action == Warrant::Action::\"provider.call\", resource is Warrant::Provider)\nwhen { resource.model like \"*#0\" };\n",
    );
    let model = transcript(&sb);
    let out = sb.run(&["run", "--model", &model, "ask the server"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let parent = parent_run(&sb);
    let events = events_of(&sb, &parent);
    let done = of_kind(&events, "effect_completed");
    assert_eq!(done.len(), 1, "{events:#?}");
    let result = &done[0]["payload"]["result"];
    assert!(
        !result.to_string().contains("Teal"),
        "the forbidden model's answer reached the server: {result}"
    );
    let sampled = result["sampled"].as_array().unwrap();
    assert_eq!(sampled[0]["outcome"], "refused", "{result}");
    assert!(
        sampled[0]["error"]
            .as_str()
            .unwrap()
            .contains("no-sampling-model")
            || sampled[0].to_string().contains("W-POLICY")
            || sampled[0].to_string().contains("denied"),
        "{result}"
    );
    // The refusal is the answering run's own record.
    let child = sampled[0]["child_run"].as_str().unwrap().to_owned();
    let child_events = events_of(&sb, &child);
    assert!(
        of_kind(&child_events, "model_responded").is_empty(),
        "{child_events:#?}"
    );
    assert!(
        child_events
            .iter()
            .any(|e| e.to_string().contains("no-sampling-model")),
        "{child_events:#?}"
    );
}

#[test]
fn without_sampling_configured_the_capability_is_not_declared_and_the_tool_not_offered() {
    let index = everything();
    let sb = Sandbox::init();
    setup(&sb, &index, false);
    let model = transcript(&sb);
    let out = sb.run(&["run", "--model", &model, "ask the server"]);
    // The server offers its sampling tool only to a client that declares sampling: here the
    // transcript names a tool the run is not offered.
    assert_ne!(out.status.code(), Some(0));
    let text = format!("{}{}", stderr(&out), String::from_utf8_lossy(&out.stdout));
    assert!(text.contains(&tool()), "{text}");
    assert!(text.contains("W-TRANSCRIPT-005"), "{text}");
}
