//! `[secrets] rules = "FILE"` in the configuration layers (managed, user, project), merged so
//! that a lower layer can only add:
//!
//! - The base is the managed layer's file when it names one (it decides whether gitleaks'
//!   default rules are in, with `[extend] useDefault`); otherwise gitleaks' default rules.
//! - A user or project file adds its rules. A rule it shares with a higher layer (same id) must
//!   be identical (as when both extend the default rules) or the load fails; `disabledRules`
//!   naming a higher layer's rule fails the load.
//! - Each file's global allowlists apply to the rules that file brought only, so a project's
//!   allowlist cannot silence a managed (or default) rule.

use std::path::PathBuf;

use warrant_core::config::LayerKind;

use crate::rules::{RuleSet, RulesError};
use crate::scan::{RuleGroup, Scanner};

/// One layer's `[secrets] rules`, its path already resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerRules {
    pub kind: LayerKind,
    pub file: PathBuf,
}

fn describe(kind: Option<LayerKind>) -> &'static str {
    match kind {
        Some(LayerKind::Managed) => "the managed configuration",
        Some(LayerKind::User) => "the user configuration",
        Some(LayerKind::Project) => "the project configuration",
        None => "the default rules",
    }
}

/// The scanner for these layers (no layer: gitleaks' default rules).
pub fn scanner_for_layers(layers: &[LayerRules]) -> Result<Scanner, RulesError> {
    if layers.is_empty() {
        return Ok(Scanner::default_rules());
    }
    let mut layers = layers.to_vec();
    layers.sort_by_key(|l| l.kind);
    let mut groups: Vec<(Option<LayerKind>, RuleGroup)> = Vec::new();
    let mut rest = layers.as_slice();
    if let Some(first) = layers.first()
        && first.kind == LayerKind::Managed
    {
        groups.push((
            Some(LayerKind::Managed),
            RuleGroup {
                set: RuleSet::load(&first.file)?,
                eager: true,
            },
        ));
        rest = &layers[1..];
    } else {
        groups.push((
            None,
            RuleGroup {
                set: RuleSet::default_rules()?,
                eager: false,
            },
        ));
    }
    for layer in rest {
        let mut set = RuleSet::load(&layer.file)?;
        for (kind, higher) in &groups {
            for d in &set.disabled {
                if higher.set.rules.iter().any(|r| &r.id == d) {
                    return Err(RulesError::Layer {
                        why: format!(
                            "{} ({}) disables rule `{d}`, which {} sets; a lower layer cannot disable it",
                            describe(Some(layer.kind)),
                            layer.file.display(),
                            describe(*kind)
                        ),
                    });
                }
            }
            let mut own = Vec::with_capacity(set.rules.len());
            for r in set.rules {
                match higher.set.rules.iter().find(|h| h.id == r.id) {
                    Some(h) if *h == r => {}
                    Some(_) => {
                        return Err(RulesError::Layer {
                            why: format!(
                                "{} ({}) redefines rule `{}`, which {} sets; a lower layer cannot change it (give the rule another id)",
                                describe(Some(layer.kind)),
                                layer.file.display(),
                                r.id,
                                describe(*kind)
                            ),
                        });
                    }
                    None => own.push(r),
                }
            }
            set.rules = own;
        }
        groups.push((Some(layer.kind), RuleGroup { set, eager: true }));
    }
    Scanner::from_groups(groups.into_iter().map(|(_, g)| g).collect())
}
