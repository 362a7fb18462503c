//! Load-time findings that do not stop loading: a permit without `@ask` whose action scope
//! reaches a verb whose risk class always needs a person. Such a permit cannot take effect
//! (the built-in always-ask rule still sends the action to a person), but its author clearly
//! meant something Warrant will not do, so it is reported.

use cedar_policy::{ActionConstraint, Policy};
use warrant_core::Verb;

/// The always-person verbs a permit's action constraint covers.
pub(crate) fn person_verbs(policy: &Policy) -> Vec<Verb> {
    let named = |uid: &cedar_policy::EntityUid| Verb::parse(uid.id().unescaped());
    let covered: Vec<Verb> = match policy.action_constraint() {
        ActionConstraint::Any => Verb::ALL.to_vec(),
        ActionConstraint::Eq(uid) => named(&uid).into_iter().collect(),
        ActionConstraint::In(uids) => uids.iter().filter_map(named).collect(),
    };
    covered
        .into_iter()
        .filter(|v| v.default_risk().always_needs_person())
        .collect()
}

pub(crate) fn silent_permit(id: &str, file: &str, verbs: &[Verb]) -> String {
    let names = verbs
        .iter()
        .map(|v| v.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let classes = verbs
        .iter()
        .map(|v| v.default_risk().as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "policy {id} ({file}) permits {names} without @ask, but {classes} actions always need a person: they are still asked (add @ask(\"{}\") to say so)",
        verbs
            .first()
            .map(|v| v.default_risk().as_str())
            .unwrap_or("destructive")
    )
}
