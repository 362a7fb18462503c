//! `provider.call`: the default pack lets any principal call a model; a layer can restrict
//! providers and models per principal, by actor, role or the person an agent acts for.

use pretty_assertions::assert_eq;
use warrant_core::config::LayerKind;
use warrant_core::{Action, Principal, PrincipalKind, RiskClass};
use warrant_policy::{PolicyEngine, Verdict};

use super::common::*;

const FILE: &str = "/etc/warrant/policies/models.cedar";
const TEXT: &str = r#"
@id("interns-small-models")
@reason("interns use the small models only")
forbid (principal in Warrant::Role::"intern", action == Warrant::Action::"provider.call", resource is Warrant::Provider)
unless { resource.model like "*-mini" };

@id("no-hosted-for-payments")
@reason("payments data stays on local models")
forbid (principal in Warrant::Team::"payments", action == Warrant::Action::"provider.call", resource is Warrant::Provider)
when { resource.provider != "openai" || !(resource.name like "openai:local-*") };
"#;

fn call(name: &str) -> Action {
    let (provider, model) = name.split_once(':').unwrap();
    Action::ProviderCall {
        provider: provider.into(),
        model: model.into(),
    }
}

fn with_roles(actor: &str, roles: &[&str], teams: &[&str]) -> Principal {
    Principal {
        roles: roles.iter().map(|r| (*r).to_owned()).collect(),
        teams: teams.iter().map(|t| (*t).to_owned()).collect(),
        ..principal(PrincipalKind::User, actor)
    }
}

#[test]
fn models_are_allowed_by_default_and_restricted_per_principal() {
    let engine =
        PolicyEngine::load(&[pack_source(), source(LayerKind::Managed, FILE, TEXT)]).unwrap();
    let default = default_engine();
    let intern = with_roles("ivy", &["intern"], &[]);
    let payments = with_roles("pat", &["dev"], &["payments"]);
    let dev = with_roles("dan", &["dev"], &[]);
    let forbid = |id: &str| reason_in(LayerKind::Managed, FILE, TEXT, id);
    let allow = || {
        decision(
            Verdict::Allow,
            RiskClass::External,
            vec![pack_reason("model-calls")],
        )
    };
    let deny = |id: &str| decision(Verdict::Deny, RiskClass::External, vec![forbid(id)]);
    let table = [
        (&default, &intern, "openai:gpt-4.1", allow()),
        (&engine, &dev, "anthropic:claude-opus-4", allow()),
        (&engine, &intern, "openai:gpt-4.1-mini", allow()),
        (
            &engine,
            &intern,
            "openai:gpt-4.1",
            deny("interns-small-models"),
        ),
        (&engine, &payments, "openai:local-llama", allow()),
        (
            &engine,
            &payments,
            "anthropic:claude-opus-4",
            deny("no-hosted-for-payments"),
        ),
        (
            &engine,
            &payments,
            "openai:gpt-4.1",
            deny("no-hosted-for-payments"),
        ),
    ];
    for (engine, who, model, want) in table {
        assert_eq!(
            decide(engine, who, &call(model)),
            want,
            "{} calls {model}",
            who.actor
        );
    }
}

#[test]
fn an_agent_may_call_a_model_only_if_the_person_it_acts_for_may() {
    let engine = PolicyEngine::load(&[
        pack_source(),
        source(
            LayerKind::Managed,
            FILE,
            r#"@id("no-opus-for-carol")
forbid (principal == Warrant::User::"carol", action == Warrant::Action::"provider.call", resource is Warrant::Provider)
when { resource.model == "claude-opus-4" };"#,
        ),
    ])
    .unwrap();
    let bot = |person: &str| Principal {
        on_behalf_of: Some(person.to_owned()),
        ..principal(PrincipalKind::Agent, "bot")
    };
    let opus = call("anthropic:claude-opus-4");
    assert_eq!(decide(&engine, &bot("dave"), &opus).verdict, Verdict::Allow);
    assert_eq!(decide(&engine, &bot("carol"), &opus).verdict, Verdict::Deny);
    assert_eq!(
        decide(&engine, &bot("carol"), &call("anthropic:claude-haiku")).verdict,
        Verdict::Allow
    );
}
