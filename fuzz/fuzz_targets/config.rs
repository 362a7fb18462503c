//! The layered configuration: up to three `config.toml` texts (managed, user, project, split
//! on a line `#---`) are parsed, merged and resolved into an identity, as the CLI does.
//! Invariants: only the managed layer may say `required`/`locked`; merging and resolving do not
//! depend on the order the layers are given in; a locked field never comes from the environment
//! or a lower layer; a required field is never left unset; budgets only tighten.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use warrant_core::Coded;
use warrant_core::config::{
    ConfigError, IdentityField, Layer, LayerKind, Source, merge_settings, resolve_identity,
};

const KINDS: [LayerKind; 3] = [LayerKind::Managed, LayerKind::User, LayerKind::Project];

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut layers = Vec::new();
    for (kind, part) in KINDS.into_iter().zip(text.split("\n#---\n")) {
        let path = format!("/fuzz/{}/config.toml", kind.as_str());
        match Layer::parse(kind, &path, part) {
            Ok(layer) => {
                if kind != LayerKind::Managed {
                    assert!(layer.doc.identity.required.is_empty());
                    assert!(layer.doc.identity.locked.is_empty());
                }
                layers.push(layer);
            }
            Err(e) => {
                assert!(e.code().starts_with("W-CONFIG-"), "{e:?}");
                return;
            }
        }
    }
    let mut reversed = layers.clone();
    reversed.reverse();

    let settings = merge_settings(&layers);
    // Debug, not ==: a `nan` budget is a legal TOML float and NaN != NaN.
    assert_eq!(
        format!("{settings:?}"),
        format!("{:?}", merge_settings(&reversed)),
        "merge depends on layer order"
    );
    assert!(settings.profiles.contains_key("default"));
    for layer in &layers {
        let b = &layer.doc.budgets;
        let m = &settings.budgets;
        // Whatever a layer limits stays limited at least as tightly after the merge.
        for (mine, merged) in [(&b.run, &m.run), (&b.actor, &m.actor), (&b.tenant, &m.tenant)] {
            tighter_or_equal(mine, merged);
        }
    }

    let env: BTreeMap<String, String> = IdentityField::ALL
        .into_iter()
        .map(|f| (f.env_var().to_owned(), "from-env".to_owned()))
        .collect();
    for env in [BTreeMap::new(), env] {
        for os_user in [None, Some("osuser")] {
            let resolved = resolve_identity(&layers, &env, os_user);
            assert_eq!(
                resolved,
                resolve_identity(&reversed, &env, os_user),
                "identity depends on layer order"
            );
            let id = match resolved {
                Ok(id) => id,
                Err(e) => {
                    assert!(e.code().starts_with("W-CONFIG-"), "{e:?}");
                    assert!(!matches!(e, ConfigError::ManagedOnly { .. }));
                    continue;
                }
            };
            for (field, origin) in &id.sources {
                if origin.locked {
                    assert!(
                        matches!(
                            origin.source,
                            Source::Layer { layer: LayerKind::Managed, .. }
                                | Source::OsUser
                                | Source::Default
                                | Source::Unset
                        ),
                        "locked {field} came from {:?}",
                        origin.source
                    );
                }
                if origin.required {
                    assert_ne!(origin.source, Source::Unset, "required {field} is unset");
                }
            }
        }
    }
});

fn tighter_or_equal(
    mine: &warrant_core::config::BudgetLimit,
    merged: &warrant_core::config::BudgetLimit,
) {
    if let Some(a) = mine.tokens {
        let m = merged.tokens.unwrap_or(u64::MAX);
        assert!(m <= a, "merged tokens {m} looser than a layer's {a}");
    }
    // A NaN merged limit is refused before a run (ModelRules::validate), so it cannot loosen.
    if let Some(a) = mine.cost_usd.filter(|a| !a.is_nan()) {
        let m = merged.cost_usd;
        assert!(
            m.is_some_and(|m| m.is_nan() || m <= a),
            "merged cost {m:?} looser than a layer's {a}"
        );
    }
}
