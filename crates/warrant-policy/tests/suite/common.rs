//! Shared fixtures: the workspace `/ws`, principals, actions, and expected reasons read from
//! the policy text itself so the tests do not copy the pack's wording.

use std::collections::BTreeMap;
use std::str::FromStr;

use warrant_core::config::LayerKind;
use warrant_core::{Action, CanonicalPath, Principal, PrincipalKind, RiskClass};
use warrant_policy::{
    Decision, DecisionRequest, PolicyEffect, PolicyEngine, PolicyReason, PolicySource, Verdict,
    default_pack,
};

pub const PACK_FILE: &str = "/ws/.warrant/policy/default.cedar";

pub fn ws() -> CanonicalPath {
    path("/ws")
}

pub fn path(s: &str) -> CanonicalPath {
    CanonicalPath::from_normalized(s).unwrap()
}

pub fn principal(kind: PrincipalKind, actor: &str) -> Principal {
    Principal {
        tenant: "acme".into(),
        actor: actor.into(),
        kind,
        on_behalf_of: None,
        roles: Vec::new(),
        teams: Vec::new(),
        attrs: BTreeMap::new(),
    }
}

pub fn alice() -> Principal {
    Principal {
        roles: vec!["dev".into()],
        teams: vec!["payments".into()],
        ..principal(PrincipalKind::User, "alice")
    }
}

pub fn source(layer: LayerKind, file: &str, text: &str) -> PolicySource {
    PolicySource {
        layer,
        path: file.into(),
        text: text.into(),
    }
}

pub fn pack_source() -> PolicySource {
    source(LayerKind::Project, PACK_FILE, default_pack())
}

pub fn default_engine() -> PolicyEngine {
    PolicyEngine::load(&[pack_source()]).unwrap()
}

pub fn exec(argv: &[&str], cwd: &str) -> Action {
    Action::ShellExec {
        argv: argv.iter().map(|s| (*s).to_owned()).collect(),
        cwd: path(cwd),
        profile: "default".into(),
        timeout_ms: 10_000,
        program: None,
        contained: false,
        judged: warrant_core::Judging::Changeset,
    }
}

pub fn decide(engine: &PolicyEngine, who: &Principal, action: &Action) -> Decision {
    engine.decide(&DecisionRequest {
        principal: who,
        action,
        workspace: &ws(),
        installed_skills: &[],
    })
}

/// The reason a policy of `text` (file `file`, layer `layer`) gives, found by its @id.
pub fn reason_in(layer: LayerKind, file: &str, text: &str, id: &str) -> PolicyReason {
    let set = cedar_policy::PolicySet::from_str(text).unwrap();
    let policy = set
        .policies()
        .find(|p| p.annotation("id") == Some(id))
        .unwrap_or_else(|| panic!("no policy @id({id}) in {file}"));
    PolicyReason {
        id: format!("{}:{id}", layer.as_str()),
        layer: layer.into(),
        file: file.into(),
        effect: match policy.effect() {
            cedar_policy::Effect::Permit => PolicyEffect::Permit,
            cedar_policy::Effect::Forbid => PolicyEffect::Forbid,
        },
        reason: policy.annotation("reason").map(str::to_owned),
        ask: policy.annotation("ask").and_then(RiskClass::parse),
    }
}

pub fn pack_reason(id: &str) -> PolicyReason {
    reason_in(LayerKind::Project, PACK_FILE, default_pack(), id)
}

pub fn decision(verdict: Verdict, risk: RiskClass, reasons: Vec<PolicyReason>) -> Decision {
    Decision {
        verdict,
        risk,
        reasons,
        errors: Vec::new(),
    }
}
