//! `mcp.call`: a tool of a configured MCP server, as the resource `mcp/<server>/<tool>` with its
//! server, tool, risk and arguments (canonical JSON). Nothing is permitted by the default pack;
//! a layer permits servers or tools, and forbids a server, a tool, or arguments by attribute.

use pretty_assertions::assert_eq;
use serde_json::json;
use warrant_core::config::LayerKind;
use warrant_core::{Action, PrincipalKind, RiskClass};
use warrant_policy::{PolicyEngine, Verdict};

use super::common::*;

const FILE: &str = "/w/.warrant/policies/mcp.cedar";
const TEXT: &str = r#"
@id("mcp-reads")
@reason("Read-only MCP tools may run.")
permit (principal, action == Warrant::Action::"mcp.call", resource is Warrant::McpTool)
when { resource.risk == "read" };

@id("tickets-asks")
@reason("Changes to tickets are shown to a person.")
@ask("change")
permit (principal, action == Warrant::Action::"mcp.call", resource is Warrant::McpTool)
when { resource.server == "tickets" };

@id("no-shady")
@reason("The shady server is not to be used.")
forbid (principal, action == Warrant::Action::"mcp.call", resource is Warrant::McpTool)
when { resource.server == "shady" };

@id("no-deletes")
@reason("No MCP tool that deletes.")
forbid (principal, action == Warrant::Action::"mcp.call", resource is Warrant::McpTool)
when { resource.tool like "delete_*" };

@id("no-etc")
@reason("No MCP call names a path under /etc.")
forbid (principal, action == Warrant::Action::"mcp.call", resource is Warrant::McpTool)
when { resource.arguments like "*\"/etc/*" };
"#;

fn mcp(server: &str, tool: &str, arguments: serde_json::Value, risk: RiskClass) -> Action {
    Action::McpCall {
        server: server.into(),
        tool: tool.into(),
        arguments,
        risk,
        definition: "sha256:00".into(),
    }
}

#[test]
fn mcp_calls_are_decided_by_server_tool_risk_and_arguments() {
    let engine =
        PolicyEngine::load(&[pack_source(), source(LayerKind::Project, FILE, TEXT)]).unwrap();
    let who = principal(PrincipalKind::User, "alice");
    let reason = |id: &str| reason_in(LayerKind::Project, FILE, TEXT, id);
    let read = RiskClass::Read;
    let change = RiskClass::Change;
    let table = [
        (
            mcp("git", "git_status", json!({}), read),
            decision(Verdict::Allow, read, vec![reason("mcp-reads")]),
        ),
        (
            mcp("tickets", "create", json!({"title": "x"}), change),
            decision(
                Verdict::Ask { risk: change },
                change,
                vec![reason("tickets-asks")],
            ),
        ),
        (
            mcp("shady", "lookup", json!({}), read),
            decision(Verdict::Deny, read, vec![reason("no-shady")]),
        ),
        (
            mcp("tickets", "delete_ticket", json!({"id": 1}), change),
            decision(Verdict::Deny, change, vec![reason("no-deletes")]),
        ),
        (
            mcp("git", "read", json!({"path": "/etc/shadow"}), read),
            decision(Verdict::Deny, read, vec![reason("no-etc")]),
        ),
        // Not permitted by anything: denied.
        (
            mcp("git", "git_commit", json!({}), change),
            decision(Verdict::Deny, change, vec![]),
        ),
    ];
    for (action, want) in table {
        let got = decide(&engine, &who, &action);
        assert_eq!(
            (got.verdict, got.risk, got.reasons),
            (want.verdict, want.risk, want.reasons),
            "{}",
            action.target()
        );
    }
    // The default pack permits no MCP call.
    let none = decide(
        &default_engine(),
        &who,
        &mcp("git", "git_status", json!({}), read),
    );
    assert_eq!(none.verdict, Verdict::Deny);
    // A destructive tool is asked even where a policy permits it outright.
    let wipe = decide(
        &engine,
        &who,
        &mcp("tickets", "wipe", json!({}), RiskClass::Destructive),
    );
    assert_eq!(
        wipe.verdict,
        Verdict::Ask {
            risk: RiskClass::Destructive
        }
    );
}
