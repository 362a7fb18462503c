//! `catalog.list` / `catalog.read`: a catalog object as `catalog/<catalog>/<ns…>[/<table>]`.
//! The default pack permits reading every configured catalog; a layer hides a namespace (and
//! all below it) from a principal by name, and a name holding `/` cannot pass for a deeper one.

use pretty_assertions::assert_eq;
use warrant_core::config::LayerKind;
use warrant_core::{Action, PrincipalKind, RiskClass};
use warrant_policy::{PolicyEngine, Verdict};

use super::common::*;

const FILE: &str = "/w/.warrant/policies/catalog.cedar";
const TEXT: &str = r#"
@id("finance-only")
@reason("The finance namespace is for the finance role.")
forbid (principal, action, resource is Warrant::CatalogObject)
when { resource.name like "catalog/lake/finance/*" || resource.name == "catalog/lake/finance" }
unless { principal in Warrant::Role::"finance" };
"#;

fn levels(ns: &[&str]) -> Vec<String> {
    ns.iter().map(|s| (*s).to_owned()).collect()
}

fn list(ns: &[&str]) -> Action {
    Action::CatalogList {
        catalog: "lake".into(),
        namespace: levels(ns),
    }
}

fn read(ns: &[&str], table: &str) -> Action {
    Action::CatalogRead {
        catalog: "lake".into(),
        namespace: levels(ns),
        table: table.into(),
    }
}

#[test]
fn a_namespace_is_hidden_from_a_principal_by_name_and_everything_else_is_readable() {
    let engine =
        PolicyEngine::load(&[pack_source(), source(LayerKind::Project, FILE, TEXT)]).unwrap();
    let mut finance = principal(PrincipalKind::User, "fiona");
    finance.roles = vec!["finance".into()];
    let bob = principal(PrincipalKind::User, "bob");
    let hidden = reason_in(LayerKind::Project, FILE, TEXT, "finance-only");
    let allowed = pack_reason("catalog-read");
    let rows = [
        (&bob, list(&[]), Verdict::Allow, vec![allowed.clone()]),
        (
            &bob,
            list(&["sales", "eu"]),
            Verdict::Allow,
            vec![allowed.clone()],
        ),
        (
            &bob,
            read(&["sales"], "orders"),
            Verdict::Allow,
            vec![allowed.clone()],
        ),
        (
            &bob,
            list(&["finance"]),
            Verdict::Deny,
            vec![hidden.clone()],
        ),
        (
            &bob,
            read(&["finance", "q3"], "ledger"),
            Verdict::Deny,
            vec![hidden],
        ),
        // A namespace named `finance/q3` is not the namespace `finance` holding `q3`: its name
        // is escaped, so the rule above does not match it (and it is a namespace of its own).
        (
            &bob,
            list(&["finance/q3"]),
            Verdict::Allow,
            vec![allowed.clone()],
        ),
        (
            &finance,
            read(&["finance", "q3"], "ledger"),
            Verdict::Allow,
            vec![allowed],
        ),
    ];
    for (who, action, verdict, reasons) in rows {
        let got = decide(&engine, who, &action);
        assert_eq!(
            (got.verdict, got.risk, got.reasons),
            (verdict, RiskClass::Read, reasons),
            "{} by {}",
            action.target(),
            who.actor
        );
    }
}
