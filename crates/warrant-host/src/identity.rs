//! `whoami`: the principal this process acts as, and where each of its fields came from
//! (which configuration layer or environment variable, and whether a layer required or
//! locked it).

use serde::ser::SerializeMap as _;
use serde::{Serialize, Serializer};
use warrant_core::Principal;
use warrant_core::config::{IdentityField, ResolvedIdentity, Source};

use crate::{Result, Where, install};

#[derive(Debug, Serialize)]
pub struct Identity {
    pub principal: Principal,
    /// By field name, in the order of the fields.
    #[serde(serialize_with = "as_map")]
    pub sources: Vec<(IdentityField, Origin)>,
}

#[derive(Debug, Serialize)]
pub struct Origin {
    pub from: Source,
    /// `from` in words.
    pub display: String,
    pub required: bool,
    pub locked: bool,
}

/// One field's row: its name, its value in words, where it came from and how it is held.
#[derive(Debug)]
pub struct FieldRow<'a> {
    pub field: &'static str,
    pub value: String,
    pub origin: &'a Origin,
}

fn as_map<S: Serializer>(
    v: &[(IdentityField, Origin)],
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    let mut map = s.serialize_map(Some(v.len()))?;
    for (k, o) in v {
        map.serialize_entry(k.as_str(), o)?;
    }
    map.end()
}

fn listed(v: &[String]) -> String {
    if v.is_empty() {
        "-".into()
    } else {
        v.join(",")
    }
}

impl Identity {
    pub fn of(id: &ResolvedIdentity) -> Self {
        Self {
            principal: id.principal.clone(),
            sources: id
                .sources
                .iter()
                .map(|(f, o)| {
                    let origin = Origin {
                        from: o.source.clone(),
                        display: o.source.to_string(),
                        required: o.required,
                        locked: o.locked,
                    };
                    (*f, origin)
                })
                .collect(),
        }
    }

    pub fn rows(&self) -> Vec<FieldRow<'_>> {
        let p = &self.principal;
        self.sources
            .iter()
            .map(|(field, origin)| {
                let value = match field {
                    IdentityField::Tenant => p.tenant.clone(),
                    IdentityField::Actor => p.actor.clone(),
                    IdentityField::Kind => p.kind.as_str().to_owned(),
                    IdentityField::OnBehalfOf => {
                        p.on_behalf_of.clone().unwrap_or_else(|| "-".into())
                    }
                    IdentityField::Roles => listed(&p.roles),
                    IdentityField::Teams => listed(&p.teams),
                };
                FieldRow {
                    field: field.as_str(),
                    value,
                    origin,
                }
            })
            .collect()
    }
}

/// Who this process is at `at`. Outside a workspace too: the managed and user layers and the
/// environment still apply.
pub fn whoami(at: &Where) -> Result<Identity> {
    let outside = at.workspace.is_none() && !install::in_a_workspace();
    let paths = install::paths(at, outside)?;
    let layers = install::read_layers(&paths)?;
    Ok(Identity::of(&install::identity(&layers)?))
}
