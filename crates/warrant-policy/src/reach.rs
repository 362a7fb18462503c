//! Permits no request can match (`warrant config check`): each permit checked on its own
//! against Warrant's schema, three ways, the first that finds it dead reported:
//! - its scope: the actions it names apply (the schema's `appliesTo`) to resource types that
//!   never include the one its resource scope names (`action == "fs.read", resource is Command`);
//! - Cedar's strict validator: the typechecker finds its condition false for every valid
//!   request (an `ImpossiblePolicy` warning; such a set does not load either);
//! - a forbid without conditions whose scope covers the permit's: forbid wins, so the permit
//!   never takes effect.
//!
//! Limits: conditions are not solved (a `when` that contradicts itself through string
//! patterns is found only when Cedar's typechecker sees it), and a principal scope naming a
//! role nobody holds is not checked against the directory.

use std::collections::BTreeSet;

use cedar_policy::{
    ActionConstraint, Effect, EntityTypeName, EntityUid, Policy, PolicySet, PrincipalConstraint,
    ResourceConstraint, ValidationMode, ValidationWarning, Validator,
};

use crate::engine::{PolicySource, parse_source};
use crate::schema::CedarNames;

/// One permit that no request can match.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unreachable {
    /// `layer:id`.
    pub id: String,
    pub file: String,
    /// 1-based line where the permit starts in its file (its first annotation).
    pub line: usize,
    /// Why, in words.
    pub reason: String,
    /// Cedar's validator refuses it too, so the set does not load.
    pub blocks_loading: bool,
}

struct Parsed {
    id: String,
    file: String,
    line: usize,
    policy: Policy,
}

fn line_in(text: &str, policy_text: &str) -> usize {
    text.find(policy_text)
        .and_then(|o| text.get(..o))
        .map(|before| before.matches('\n').count() + 1)
        .unwrap_or(1)
}

/// The actions a constraint covers; `None`: every action.
fn actions_of(policy: &Policy) -> Option<BTreeSet<EntityUid>> {
    match policy.action_constraint() {
        ActionConstraint::Any => None,
        ActionConstraint::Eq(uid) => Some(BTreeSet::from([uid])),
        ActionConstraint::In(uids) => Some(uids.into_iter().collect()),
    }
}

/// The one entity type a resource scope pins, when it pins one.
fn resource_type(policy: &Policy) -> Option<EntityTypeName> {
    match policy.resource_constraint() {
        ResourceConstraint::Any | ResourceConstraint::In(_) => None,
        ResourceConstraint::Eq(uid) => Some(uid.type_name().clone()),
        ResourceConstraint::Is(t) | ResourceConstraint::IsIn(t, _) => Some(t),
    }
}

/// The scope check: none of the permit's actions applies to the resource type it names.
fn scope_mismatch(names: &CedarNames, policy: &Policy) -> Option<String> {
    let wanted = resource_type(policy)?;
    let actions: Vec<EntityUid> = match actions_of(policy) {
        Some(a) => a.into_iter().collect(),
        None => return None,
    };
    let mut applies: BTreeSet<String> = BTreeSet::new();
    for a in &actions {
        if let Some(types) = names.schema.resources_for_action(a) {
            for t in types {
                if *t == wanted {
                    return None;
                }
                applies.insert(t.to_string());
            }
        }
    }
    let named = actions
        .iter()
        .map(|a| a.id().unescaped().to_owned())
        .collect::<Vec<_>>()
        .join(", ");
    Some(format!(
        "its actions ({named}) apply only to resources of type {} in Warrant's schema, never to {wanted}",
        applies.into_iter().collect::<Vec<_>>().join(", ")
    ))
}

/// Cedar's strict validator on the permit alone: an `ImpossiblePolicy` warning.
fn impossible(names: &CedarNames, policy: &Policy) -> Option<String> {
    let mut set = PolicySet::new();
    set.add(policy.clone()).ok()?;
    let result = Validator::new(names.schema.clone()).validate(&set, ValidationMode::Strict);
    result.validation_warnings().find_map(|w| {
        if let ValidationWarning::ImpossiblePolicy(_) = w {
            Some(format!(
                "Cedar's strict validation finds its condition false for every request Warrant's schema allows ({w})"
            ))
        } else {
            None
        }
    })
}

/// A forbid without conditions whose scope covers `permit`'s.
fn shadowed_by(permit: &Policy, forbids: &[&Parsed]) -> Option<String> {
    let covers_principal = |f: &Policy| {
        matches!(f.principal_constraint(), PrincipalConstraint::Any)
            || f.principal_constraint() == permit.principal_constraint()
    };
    let covers_resource = |f: &Policy| {
        matches!(f.resource_constraint(), ResourceConstraint::Any)
            || f.resource_constraint() == permit.resource_constraint()
    };
    let covers_actions = |f: &Policy| match (actions_of(f), actions_of(permit)) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(f), Some(p)) => p.is_subset(&f),
    };
    forbids
        .iter()
        .find(|f| {
            !f.policy.has_non_scope_constraint()
                && covers_principal(&f.policy)
                && covers_actions(&f.policy)
                && covers_resource(&f.policy)
        })
        .map(|f| {
            format!(
                "forbid {} ({}:{}) has no condition and covers every request it matches; forbid wins",
                f.id, f.file, f.line
            )
        })
}

/// Every permit of `sources` that no request can match. Sources that do not parse are
/// skipped (loading reports them).
pub fn unreachable_permits(sources: &[PolicySource]) -> Vec<Unreachable> {
    let Ok(names) = CedarNames::shared() else {
        return Vec::new();
    };
    let mut all: Vec<Parsed> = Vec::new();
    for source in sources {
        let Ok(parsed) = parse_source(source) else {
            continue;
        };
        for (_, policy, meta) in parsed {
            all.push(Parsed {
                id: format!("{}:{}", source.layer.as_str(), policy_id(&policy)),
                file: source.path.clone(),
                line: line_in(&source.text, &meta.text),
                policy,
            });
        }
    }
    let forbids: Vec<&Parsed> = all
        .iter()
        .filter(|p| p.policy.effect() == Effect::Forbid)
        .collect();
    all.iter()
        .filter(|p| p.policy.effect() == Effect::Permit)
        .filter_map(|p| {
            let (reason, blocks_loading) = if let Some(r) = scope_mismatch(names, &p.policy) {
                (r, impossible(names, &p.policy).is_some())
            } else if let Some(r) = impossible(names, &p.policy) {
                (r, true)
            } else {
                (shadowed_by(&p.policy, &forbids)?, false)
            };
            Some(Unreachable {
                id: p.id.clone(),
                file: p.file.clone(),
                line: p.line,
                reason,
                blocks_loading,
            })
        })
        .collect()
}

fn policy_id(policy: &Policy) -> String {
    policy
        .annotation("id")
        .map(str::trim)
        .unwrap_or_default()
        .to_owned()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;
    use warrant_core::config::LayerKind;

    fn source(text: &str) -> PolicySource {
        PolicySource {
            layer: LayerKind::Project,
            path: "p.cedar".into(),
            text: text.into(),
        }
    }

    #[test]
    fn dead_permits_are_found_and_live_ones_are_not() {
        let text = r#"@id("live")
permit(principal, action == Warrant::Action::"fs.read", resource is Warrant::Path)
  when { resource.in_workspace };

@id("wrong-type")
permit(principal, action == Warrant::Action::"fs.read", resource is Warrant::Command);

@id("never")
permit(principal, action == Warrant::Action::"fs.list", resource) when { false };

@id("no-deletes")
forbid(principal, action in [Warrant::Action::"fs.delete", Warrant::Action::"git.push"], resource);

@id("shadowed")
permit(principal, action == Warrant::Action::"fs.delete", resource)
  when { resource.in_workspace };

@id("conditional-forbid")
forbid(principal, action == Warrant::Action::"fs.write", resource) when { resource.ext == "key" };

@id("not-shadowed")
permit(principal, action == Warrant::Action::"fs.write", resource);
"#;
        let got: Vec<(String, usize, bool)> = unreachable_permits(&[source(text)])
            .into_iter()
            .map(|u| (u.id, u.line, u.blocks_loading))
            .collect();
        assert_eq!(
            got,
            vec![
                ("project:wrong-type".to_owned(), 5, true),
                ("project:never".to_owned(), 8, true),
                ("project:shadowed".to_owned(), 14, false),
            ]
        );
        let reasons: Vec<String> = unreachable_permits(&[source(text)])
            .into_iter()
            .map(|u| u.reason)
            .collect();
        assert!(
            reasons[0].contains("never to Warrant::Command"),
            "{reasons:?}"
        );
        assert!(
            reasons[1].contains("Cedar's strict validation"),
            "{reasons:?}"
        );
        assert!(
            reasons[2].contains("forbid project:no-deletes (p.cedar:11)"),
            "{reasons:?}"
        );
    }
}
