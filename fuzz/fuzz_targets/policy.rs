//! The policy loader: arbitrary Cedar text as the user and project layers (split on a line
//! `//---`), loaded strictly against Warrant's schema beside a fixed managed layer. When it loads:
//! the digest is stable, a managed `forbid` still denies whatever the lower layers permit, an
//! action whose class always needs a person is never allowed silently, an `ask` is never for a
//! lesser class than the action's own, and `explain` agrees with `decide`.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use warrant_core::config::LayerKind;
use warrant_core::{Action, CanonicalPath, Coded, Principal, PrincipalKind};
use warrant_policy::{DecisionRequest, PolicyEngine, PolicySource, Verdict};

const MANAGED: &str = r#"
@id("no-mkfs")
@reason("managed: formatting disks is never allowed")
forbid (principal, action == Warrant::Action::"shell.exec", resource is Warrant::Command)
when { resource.program == "mkfs" };
"#;

fn path(s: &str) -> Option<CanonicalPath> {
    CanonicalPath::from_normalized(s).ok()
}

fn actions(ws: &CanonicalPath) -> Option<Vec<Action>> {
    let shell = |argv: &[&str]| Action::ShellExec {
        argv: argv.iter().map(|s| (*s).to_owned()).collect(),
        cwd: ws.clone(),
        profile: "default".to_owned(),
        timeout_ms: 1000,
        program: None,
        contained: false,
        judged: warrant_core::Judging::Changeset,
    };
    Some(vec![
        Action::FsRead { path: path("/w/src/main.rs")? },
        Action::FsRead { path: path("/w/.env")? },
        Action::FsWrite { path: path("/w/a.txt")?, content: "x".to_owned() },
        Action::FsDelete { path: path("/w/target")?, recursive: true },
        Action::FsList { path: path("/etc")? },
        shell(&["ls", "-la"]),
        shell(&["rm", "-rf", "/w/src"]),
        shell(&["mkfs", "/dev/sda"]),
        shell(&["git", "push", "--force"]),
        Action::ProviderCall { provider: "scripted".to_owned(), model: "t".to_owned() },
    ])
}

fn principals() -> Vec<Principal> {
    let base = |actor: &str, kind| Principal {
        tenant: "default".to_owned(),
        actor: actor.to_owned(),
        kind,
        on_behalf_of: None,
        roles: vec!["dev".to_owned()],
        teams: vec!["core".to_owned()],
        attrs: BTreeMap::new(),
    };
    let mut agent = base("bot", PrincipalKind::Agent);
    agent.on_behalf_of = Some("alice".to_owned());
    vec![base("alice", PrincipalKind::User), agent]
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut sources = vec![PolicySource {
        layer: LayerKind::Managed,
        path: "/etc/warrant/policies/managed.cedar".to_owned(),
        text: MANAGED.to_owned(),
    }];
    for (layer, part) in [LayerKind::User, LayerKind::Project].into_iter().zip(text.split("\n//---\n")) {
        sources.push(PolicySource {
            layer,
            path: format!("/fuzz/{}.cedar", layer.as_str()),
            text: part.to_owned(),
        });
    }
    let engine = match PolicyEngine::load(&sources) {
        Ok(engine) => engine,
        Err(e) => {
            assert!(e.code().starts_with("W-POLICY-"), "{e:?}");
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    let again = PolicyEngine::load(&sources);
    assert_eq!(again.as_ref().map(|e| e.digest().clone()).ok(), Some(engine.digest().clone()));
    let ids: Vec<&str> = engine.policy_ids().collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(ids, sorted, "policy ids not sorted and unique");
    let _ = engine.warnings();

    let Some(ws) = path("/w") else { return };
    let Some(actions) = actions(&ws) else { return };
    for principal in principals() {
        for action in &actions {
            let req = DecisionRequest {
                principal: &principal,
                action,
                workspace: &ws,
                installed_skills: &[],
            };
            let decision = engine.decide(&req);
            let class = action.risk();
            if class.always_needs_person() {
                assert_ne!(decision.verdict, Verdict::Allow, "{action:?} allowed silently");
            }
            if let Verdict::Ask { risk } = decision.verdict {
                assert!(risk >= class, "asks for {risk:?} on a {class:?} action");
            }
            if action.target().starts_with("mkfs ") {
                assert_eq!(decision.verdict, Verdict::Deny, "managed forbid overridden");
            }
            assert_eq!(engine.explain(&req).decision, decision);
        }
    }
});
