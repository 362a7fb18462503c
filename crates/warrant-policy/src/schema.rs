//! The Cedar schema for Warrant's resource kinds, embedded at build time, and the Cedar
//! names (entity types, action uids) the request builder needs. Everything a policy may say
//! is declared here; strict validation rejects the rest.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::OnceLock;

use cedar_policy::{EntityId, EntityTypeName, EntityUid, Schema};
use warrant_core::Verb;

use crate::error::PolicyError;

/// The schema source, Cedar syntax: what people read and edit.
pub const SCHEMA_TEXT: &str = include_str!("schema.cedarschema");

/// The same schema in Cedar's JSON form, which is what every command parses: about 3× cheaper
/// than the Cedar syntax (2.2 against 0.7–0.9 ms in a release build), and it is parsed on
/// every start. Generated from [`SCHEMA_TEXT`]; a test checks that the two agree and
/// rewrites this file when run with `WARRANT_REGENERATE_SCHEMA=1`.
pub const SCHEMA_JSON: &str = include_str!("schema.cedarschema.json");

/// The namespace every Warrant entity type and action lives in.
pub const NAMESPACE: &str = "Warrant";

/// Entity types a request can name, in one closed enum so the builder matches exhaustively.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum EntityKind {
    User,
    Agent,
    Service,
    Role,
    Team,
    Path,
    Command,
    GitRef,
    MemoryNamespace,
    CatalogObject,
    Provider,
    McpTool,
    Channel,
    Url,
    Subagent,
    Artifact,
}

impl EntityKind {
    pub(crate) const ALL: [EntityKind; 16] = [
        Self::User,
        Self::Agent,
        Self::Service,
        Self::Role,
        Self::Team,
        Self::Path,
        Self::Command,
        Self::GitRef,
        Self::MemoryNamespace,
        Self::CatalogObject,
        Self::Provider,
        Self::McpTool,
        Self::Channel,
        Self::Url,
        Self::Subagent,
        Self::Artifact,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::User => "User",
            Self::Agent => "Agent",
            Self::Service => "Service",
            Self::Role => "Role",
            Self::Team => "Team",
            Self::Path => "Path",
            Self::Command => "Command",
            Self::GitRef => "GitRef",
            Self::MemoryNamespace => "MemoryNamespace",
            Self::CatalogObject => "CatalogObject",
            Self::Provider => "Provider",
            Self::McpTool => "McpTool",
            Self::Channel => "Channel",
            Self::Url => "Url",
            Self::Subagent => "Subagent",
            Self::Artifact => "Artifact",
        }
    }

    /// The fully qualified Cedar name, e.g. `Warrant::Path`.
    pub(crate) fn qualified(self) -> String {
        format!("{NAMESPACE}::{}", self.name())
    }
}

/// The parsed schema plus the Cedar names built once, so a decision does no parsing.
#[derive(Debug)]
pub(crate) struct CedarNames {
    pub(crate) schema: Schema,
    types: BTreeMap<EntityKind, EntityTypeName>,
    actions: BTreeMap<Verb, EntityUid>,
}

impl CedarNames {
    /// The names of this process, built once: parsing the schema is a large part of loading a
    /// policy set, and it never changes within a build.
    pub(crate) fn shared() -> Result<&'static CedarNames, PolicyError> {
        static NAMES: OnceLock<Result<CedarNames, PolicyError>> = OnceLock::new();
        NAMES.get_or_init(Self::new).as_ref().map_err(Clone::clone)
    }

    pub(crate) fn new() -> Result<Self, PolicyError> {
        let schema = Schema::from_json_str(SCHEMA_JSON).map_err(|e| PolicyError::Schema {
            message: e.to_string(),
        })?;
        let parse_type = |s: &str| {
            EntityTypeName::from_str(s).map_err(|e| PolicyError::Schema {
                message: format!("entity type {s}: {e}"),
            })
        };
        let mut types = BTreeMap::new();
        for kind in EntityKind::ALL {
            types.insert(kind, parse_type(&kind.qualified())?);
        }
        let action_type = parse_type(&format!("{NAMESPACE}::Action"))?;
        let actions = Verb::ALL
            .into_iter()
            .map(|verb| {
                let uid = EntityUid::from_type_name_and_id(
                    action_type.clone(),
                    EntityId::new(verb.as_str()),
                );
                (verb, uid)
            })
            .collect();
        Ok(Self {
            schema,
            types,
            actions,
        })
    }

    pub(crate) fn uid(&self, kind: EntityKind, id: &str) -> Result<EntityUid, PolicyError> {
        let ty = self.types.get(&kind).ok_or_else(|| PolicyError::Schema {
            message: format!("entity type {} missing", kind.qualified()),
        })?;
        Ok(EntityUid::from_type_name_and_id(
            ty.clone(),
            EntityId::new(id),
        ))
    }

    pub(crate) fn action(&self, verb: Verb) -> Result<EntityUid, PolicyError> {
        self.actions
            .get(&verb)
            .cloned()
            .ok_or_else(|| PolicyError::Schema {
                message: format!("action {} missing", verb.as_str()),
            })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;
    use std::collections::BTreeSet;

    #[test]
    fn the_shipped_json_schema_is_the_cedar_syntax_schema() {
        let (fragment, _warnings) =
            cedar_policy::SchemaFragment::from_cedarschema_str(SCHEMA_TEXT).unwrap();
        let expected: serde_json::Value =
            serde_json::from_str(&fragment.to_json_string().unwrap()).unwrap();
        if std::env::var_os("WARRANT_REGENERATE_SCHEMA").is_some() {
            let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/schema.cedarschema.json");
            let text = serde_json::to_string_pretty(&expected).unwrap() + "\n";
            std::fs::write(path, text).unwrap();
            return;
        }
        let shipped: serde_json::Value = serde_json::from_str(SCHEMA_JSON).unwrap();
        assert!(
            shipped == expected,
            "src/schema.cedarschema.json is not src/schema.cedarschema in JSON form; regenerate it: \
             WARRANT_REGENERATE_SCHEMA=1 cargo test -p warrant-policy --lib shipped_json_schema"
        );
    }

    #[test]
    fn schema_declares_exactly_the_verbs_and_kinds() {
        let names = CedarNames::new().unwrap();
        let actions: BTreeSet<String> = names
            .schema
            .actions()
            .map(|a| a.id().unescaped().to_owned())
            .collect();
        let verbs: BTreeSet<String> = Verb::ALL.iter().map(|v| v.as_str().to_owned()).collect();
        assert_eq!(actions, verbs);
        let types: BTreeSet<String> = names
            .schema
            .entity_types()
            .map(ToString::to_string)
            .collect();
        let kinds: BTreeSet<String> = EntityKind::ALL.iter().map(|k| k.qualified()).collect();
        assert_eq!(types, kinds);
    }
}
