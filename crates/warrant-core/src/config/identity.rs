//! Who runs: the `[identity]` table, and the resolution of this process's principal from the
//! managed layer, the environment, the lower layers and the OS user, with where each field came
//! from and the managed layer's `required` and `locked` fields enforced.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::{ConfigError, Layer, LayerKind, ordered};
use crate::principal::{Principal, PrincipalKind};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentityConfig {
    pub tenant: Option<String>,
    pub actor: Option<String>,
    pub kind: Option<String>,
    pub on_behalf_of: Option<String>,
    pub roles: Option<Vec<String>>,
    pub teams: Option<Vec<String>>,
    /// Managed layer only: fields a run cannot start without.
    #[serde(default)]
    pub required: Vec<IdentityField>,
    /// Managed layer only: fields no lower layer or the environment may set.
    #[serde(default)]
    pub locked: Vec<IdentityField>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdentityField {
    Tenant,
    Actor,
    Kind,
    OnBehalfOf,
    Roles,
    Teams,
}

impl IdentityField {
    pub const ALL: [IdentityField; 6] = [
        Self::Tenant,
        Self::Actor,
        Self::Kind,
        Self::OnBehalfOf,
        Self::Roles,
        Self::Teams,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tenant => "tenant",
            Self::Actor => "actor",
            Self::Kind => "kind",
            Self::OnBehalfOf => "on_behalf_of",
            Self::Roles => "roles",
            Self::Teams => "teams",
        }
    }

    pub fn env_var(self) -> &'static str {
        match self {
            Self::Tenant => "WARRANT_TENANT",
            Self::Actor => "WARRANT_ACTOR",
            Self::Kind => "WARRANT_KIND",
            Self::OnBehalfOf => "WARRANT_ON_BEHALF_OF",
            Self::Roles => "WARRANT_ROLES",
            Self::Teams => "WARRANT_TEAMS",
        }
    }
}

impl fmt::Display for IdentityField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where one identity field's value came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "from", rename_all = "snake_case")]
pub enum Source {
    Layer { layer: LayerKind, path: String },
    Env { var: String },
    OsUser,
    Default,
    Unset,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Layer { layer, path } => write!(f, "{} ({path})", layer.as_str()),
            Self::Env { var } => write!(f, "environment ({var})"),
            Self::OsUser => f.write_str("operating system user"),
            Self::Default => f.write_str("default"),
            Self::Unset => f.write_str("unset"),
        }
    }
}

/// The principal plus, for each field, where it came from and whether it is locked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResolvedIdentity {
    pub principal: Principal,
    pub sources: BTreeMap<IdentityField, FieldOrigin>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FieldOrigin {
    pub source: Source,
    pub required: bool,
    pub locked: bool,
}

/// A raw value for one field, before typing.
enum Raw {
    One(String),
    Many(Vec<String>),
}

fn layer_value(doc: &IdentityConfig, field: IdentityField) -> Option<Raw> {
    match field {
        IdentityField::Tenant => doc.tenant.clone().map(Raw::One),
        IdentityField::Actor => doc.actor.clone().map(Raw::One),
        IdentityField::Kind => doc.kind.clone().map(Raw::One),
        IdentityField::OnBehalfOf => doc.on_behalf_of.clone().map(Raw::One),
        IdentityField::Roles => doc.roles.clone().map(Raw::Many),
        IdentityField::Teams => doc.teams.clone().map(Raw::Many),
    }
}

fn env_value(env: &BTreeMap<String, String>, field: IdentityField) -> Option<Raw> {
    let v = env.get(field.env_var())?;
    match field {
        IdentityField::Roles | IdentityField::Teams => Some(Raw::Many(
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
        )),
        IdentityField::Tenant
        | IdentityField::Actor
        | IdentityField::Kind
        | IdentityField::OnBehalfOf => Some(Raw::One(v.clone())),
    }
}

/// Resolve the principal of this process from the layers, the environment and the OS user.
pub fn resolve_identity(
    layers: &[Layer],
    env: &BTreeMap<String, String>,
    os_user: Option<&str>,
) -> Result<ResolvedIdentity, ConfigError> {
    let layers = ordered(layers);
    let managed = layers.iter().find(|l| l.kind == LayerKind::Managed);
    let required: Vec<IdentityField> = managed
        .map(|l| l.doc.identity.required.clone())
        .unwrap_or_default();
    let locked: Vec<IdentityField> = managed
        .map(|l| l.doc.identity.locked.clone())
        .unwrap_or_default();

    let mut values: BTreeMap<IdentityField, (Raw, Source)> = BTreeMap::new();
    for field in IdentityField::ALL {
        let is_locked = locked.contains(&field);
        let mut candidates: Vec<(Raw, Source)> = Vec::new();
        if let Some(m) = managed
            && let Some(v) = layer_value(&m.doc.identity, field)
        {
            candidates.push((
                v,
                Source::Layer {
                    layer: LayerKind::Managed,
                    path: m.path.clone(),
                },
            ));
        }
        if let Some(v) = env_value(env, field) {
            candidates.push((
                v,
                Source::Env {
                    var: field.env_var().to_owned(),
                },
            ));
        }
        for layer in layers.iter().filter(|l| l.kind != LayerKind::Managed) {
            if let Some(v) = layer_value(&layer.doc.identity, field) {
                candidates.push((
                    v,
                    Source::Layer {
                        layer: layer.kind,
                        path: layer.path.clone(),
                    },
                ));
            }
        }
        if is_locked
            && let Some((_, source)) = candidates.iter().find(|(_, s)| {
                !matches!(
                    s,
                    Source::Layer {
                        layer: LayerKind::Managed,
                        ..
                    }
                )
            })
        {
            return Err(ConfigError::Locked {
                field,
                origin: source.clone(),
            });
        }
        if let Some(first) = candidates.into_iter().next() {
            values.insert(field, first);
        }
    }

    // Defaults for what nobody set.
    if !values.contains_key(&IdentityField::Actor)
        && let Some(user) = os_user
    {
        values.insert(
            IdentityField::Actor,
            (Raw::One(user.to_owned()), Source::OsUser),
        );
    }

    for field in &required {
        if !values.contains_key(field) {
            return Err(ConfigError::MissingRequired {
                field: *field,
                hint: if locked.contains(field) {
                    "the managed configuration (/etc/warrant/config.toml)".to_owned()
                } else {
                    format!("{} or a config.toml [identity] table", field.env_var())
                },
            });
        }
    }

    let one = |field: IdentityField, values: &BTreeMap<IdentityField, (Raw, Source)>| match values
        .get(&field)
    {
        Some((Raw::One(s), _)) => Some(s.clone()),
        Some((Raw::Many(v), _)) => Some(v.join(",")),
        None => None,
    };
    let many = |field: IdentityField| match values.get(&field) {
        Some((Raw::Many(v), _)) => v.clone(),
        Some((Raw::One(s), _)) => vec![s.clone()],
        None => Vec::new(),
    };

    let actor = one(IdentityField::Actor, &values).ok_or(ConfigError::MissingRequired {
        field: IdentityField::Actor,
        hint:
            "WARRANT_ACTOR or a config.toml [identity] table (no operating system user was found)"
                .to_owned(),
    })?;
    validate_name(IdentityField::Actor, &actor)?;
    let tenant = one(IdentityField::Tenant, &values).unwrap_or_else(|| "default".to_owned());
    validate_name(IdentityField::Tenant, &tenant)?;
    let kind = match one(IdentityField::Kind, &values) {
        Some(k) => PrincipalKind::parse(&k).ok_or(ConfigError::Invalid {
            field: IdentityField::Kind,
            value: k.clone(),
            reason: "expected user, service or agent".to_owned(),
        })?,
        None => PrincipalKind::User,
    };
    let on_behalf_of = one(IdentityField::OnBehalfOf, &values);
    if let Some(o) = &on_behalf_of {
        validate_name(IdentityField::OnBehalfOf, o)?;
    }
    let principal = Principal {
        tenant,
        actor,
        kind,
        on_behalf_of,
        roles: many(IdentityField::Roles),
        teams: many(IdentityField::Teams),
        attrs: BTreeMap::new(),
    };
    let sources = IdentityField::ALL
        .into_iter()
        .map(|field| {
            let source = match values.get(&field) {
                Some((_, s)) => s.clone(),
                None => match field {
                    IdentityField::Tenant | IdentityField::Kind => Source::Default,
                    IdentityField::Actor
                    | IdentityField::OnBehalfOf
                    | IdentityField::Roles
                    | IdentityField::Teams => Source::Unset,
                },
            };
            (
                field,
                FieldOrigin {
                    source,
                    required: required.contains(&field),
                    locked: locked.contains(&field),
                },
            )
        })
        .collect();
    Ok(ResolvedIdentity { principal, sources })
}

fn validate_name(field: IdentityField, value: &str) -> Result<(), ConfigError> {
    let ok = !value.is_empty()
        && value.len() <= 128
        && value
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '@' | '+'));
    if ok {
        Ok(())
    } else {
        Err(ConfigError::Invalid {
            field,
            value: value.to_owned(),
            reason: "use 1-128 letters, digits, '.', '_', '-', '@' or '+'".to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::error::Coded;
    use pretty_assertions::assert_eq;

    fn layer(kind: LayerKind, text: &str) -> Layer {
        Layer::parse(kind, &format!("/{}/config.toml", kind.as_str()), text).unwrap()
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn managed_wins_env_beats_files_os_user_is_the_default() {
        let layers = [
            layer(
                LayerKind::Project,
                "[identity]\ntenant = \"proj\"\nroles = [\"dev\"]",
            ),
            layer(LayerKind::Managed, "[identity]\ntenant = \"acme\"\n"),
            layer(LayerKind::User, "[identity]\nteams = [\"payments\"]"),
        ];
        let got = resolve_identity(
            &layers,
            &env(&[("WARRANT_TEAMS", "core, infra")]),
            Some("alice"),
        )
        .unwrap();
        assert_eq!(
            got.principal,
            Principal {
                tenant: "acme".into(),
                actor: "alice".into(),
                kind: PrincipalKind::User,
                on_behalf_of: None,
                roles: vec!["dev".into()],
                teams: vec!["core".into(), "infra".into()],
                attrs: BTreeMap::new(),
            }
        );
        assert_eq!(got.sources[&IdentityField::Actor].source, Source::OsUser);
        assert_eq!(
            got.sources[&IdentityField::Teams].source,
            Source::Env {
                var: "WARRANT_TEAMS".into()
            }
        );
        assert_eq!(
            got.sources[&IdentityField::Tenant].source,
            Source::Layer {
                layer: LayerKind::Managed,
                path: "/managed/config.toml".into()
            }
        );
    }

    #[test]
    fn locked_and_required_fields_are_enforced() {
        let managed = layer(
            LayerKind::Managed,
            "[identity]\nrequired = [\"tenant\", \"actor\"]\nlocked = [\"actor\"]\n",
        );
        let err = resolve_identity(
            std::slice::from_ref(&managed),
            &env(&[("WARRANT_ACTOR", "mallory")]),
            Some("alice"),
        )
        .unwrap_err();
        assert_eq!(
            err,
            ConfigError::Locked {
                field: IdentityField::Actor,
                origin: Source::Env {
                    var: "WARRANT_ACTOR".into()
                }
            }
        );
        assert_eq!(err.code(), "W-CONFIG-004");
        let err =
            resolve_identity(std::slice::from_ref(&managed), &env(&[]), Some("alice")).unwrap_err();
        assert_eq!(err.code(), "W-CONFIG-003");
        assert!(err.to_string().contains("`tenant`"), "{err}");
        let ok = resolve_identity(
            &[managed],
            &env(&[("WARRANT_TENANT", "acme")]),
            Some("alice"),
        )
        .unwrap();
        assert_eq!(ok.principal.actor, "alice");
        assert!(ok.sources[&IdentityField::Actor].locked);
    }

    #[test]
    fn bad_files_are_specific_errors() {
        let err = Layer::parse(LayerKind::Project, "p", "[identity]\nactr = \"x\"").unwrap_err();
        assert_eq!(err.code(), "W-CONFIG-001");
        assert!(err.to_string().contains("unknown field `actr`"), "{err}");
        let err =
            Layer::parse(LayerKind::User, "u", "[identity]\nlocked = [\"actor\"]").unwrap_err();
        assert_eq!(err.code(), "W-CONFIG-002");
        let err = resolve_identity(&[], &env(&[("WARRANT_KIND", "robot")]), Some("a")).unwrap_err();
        assert_eq!(err.code(), "W-CONFIG-005");
    }
}
