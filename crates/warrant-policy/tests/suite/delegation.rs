//! An agent acting for a person is allowed only what both may do: Cedar is asked for each,
//! and the strictest verdict wins. Background work (no person) runs as the agent alone.

use pretty_assertions::assert_eq;
use warrant_core::config::LayerKind;
use warrant_core::{Action, Principal, PrincipalKind, RiskClass};
use warrant_policy::{DecisionRequest, EvaluatedAs, PolicyEngine, Verdict};

use super::common::*;

const FILE: &str = "/ws/.warrant/policy/people.cedar";
const TEXT: &str = r#"
@id("builders-read-write")
permit (
  principal in Warrant::Role::"builder",
  action in [Warrant::Action::"fs.read", Warrant::Action::"fs.write", Warrant::Action::"fs.create"],
  resource is Warrant::Path
) when { resource.in_workspace };

@id("alice-reads")
permit (principal == Warrant::User::"alice", action == Warrant::Action::"fs.read", resource is Warrant::Path)
when { resource.in_workspace };

@id("alice-creates-with-review")
@ask("external")
permit (principal == Warrant::User::"alice", action == Warrant::Action::"fs.create", resource is Warrant::Path)
when { resource.in_workspace };
"#;

fn engine() -> PolicyEngine {
    PolicyEngine::load(&[source(LayerKind::Project, FILE, TEXT)]).unwrap()
}

fn bot(on_behalf_of: Option<&str>) -> Principal {
    Principal {
        roles: vec!["builder".into()],
        on_behalf_of: on_behalf_of.map(str::to_owned),
        ..principal(PrincipalKind::Agent, "bot")
    }
}

fn r(id: &str) -> warrant_policy::PolicyReason {
    reason_in(LayerKind::Project, FILE, TEXT, id)
}

#[test]
fn both_must_allow_and_the_strictest_wins() {
    let engine = engine();
    let read = Action::FsRead {
        path: path("/ws/a.txt"),
    };
    let write = Action::FsWrite {
        path: path("/ws/a.txt"),
        content: "x".into(),
    };
    let create = Action::FsCreate {
        path: path("/ws/b.txt"),
        content: "x".into(),
    };
    let for_alice = bot(Some("alice"));

    // Both allow: the reasons of both are shown, agent's first.
    assert_eq!(
        decide(&engine, &for_alice, &read),
        decision(
            Verdict::Allow,
            RiskClass::Read,
            vec![r("builders-read-write"), r("alice-reads")]
        )
    );
    // The agent may write, alice may not: deny, by default (nothing permits alice).
    assert_eq!(
        decide(&engine, &for_alice, &write),
        decision(Verdict::Deny, RiskClass::Change, Vec::new())
    );
    // The agent is allowed, alice's permit asks: ask, with alice's risk.
    assert_eq!(
        decide(&engine, &for_alice, &create),
        decision(
            Verdict::Ask {
                risk: RiskClass::External
            },
            RiskClass::External,
            vec![r("alice-creates-with-review")]
        )
    );
    // Background work: the agent alone.
    assert_eq!(
        decide(&engine, &bot(None), &write),
        decision(
            Verdict::Allow,
            RiskClass::Change,
            vec![r("builders-read-write")]
        )
    );
    // A person acting for nobody else is evaluated once, as themselves.
    let alice = principal(PrincipalKind::User, "alice");
    assert_eq!(decide(&engine, &alice, &write).verdict, Verdict::Deny);
    assert_eq!(decide(&engine, &alice, &read).verdict, Verdict::Allow);
}

#[test]
fn explanation_shows_both_evaluations() {
    let engine = engine();
    let write = Action::FsWrite {
        path: path("/ws/a.txt"),
        content: "x".into(),
    };
    let who = bot(Some("alice"));
    let ex = engine.explain(&DecisionRequest {
        principal: &who,
        action: &write,
        workspace: &ws(),
        installed_skills: &[],
    });
    let summary: Vec<(EvaluatedAs, String, Verdict)> = ex
        .evaluations
        .iter()
        .map(|e| (e.evaluated_as, e.request.principal.clone(), e.verdict))
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                EvaluatedAs::Principal,
                r#"Warrant::Agent::"bot""#.to_owned(),
                Verdict::Allow
            ),
            (
                EvaluatedAs::OnBehalfOf,
                r#"Warrant::User::"alice""#.to_owned(),
                Verdict::Deny
            ),
        ]
    );
    assert_eq!(
        ex.note.as_deref(),
        Some(r#"no policy permits fs.write on /ws/a.txt for Warrant::User::"alice""#)
    );
}
