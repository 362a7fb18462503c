//! Turns a Warrant principal + action + workspace into the Cedar request, entities and
//! context. One typed description feeds both the Cedar objects and the JSON that `explain`
//! shows, so what a person reads is exactly what was evaluated.

use std::collections::{HashMap, HashSet};

use cedar_policy::{Context, Entities, Entity, EntityUid, Request, RestrictedExpression};
use serde_json::{Map, Value, json};
use warrant_core::{
    Action, CanonicalPath, GitRead, MemoryScope, Principal, PrincipalKind, Verb, memory_resource,
};

use crate::error::PolicyError;
use crate::schema::{CedarNames, EntityKind};

/// Attribute values our schema uses: strings and booleans only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum AttrValue {
    Str(String),
    Bool(bool),
    Long(i64),
}

impl AttrValue {
    fn to_cedar(&self) -> RestrictedExpression {
        match self {
            Self::Str(s) => RestrictedExpression::new_string(s.clone()),
            Self::Bool(b) => RestrictedExpression::new_bool(*b),
            Self::Long(n) => RestrictedExpression::new_long(*n),
        }
    }

    fn to_json(&self) -> Value {
        match self {
            Self::Str(s) => json!(s),
            Self::Bool(b) => json!(b),
            Self::Long(n) => json!(n),
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct EntitySpec {
    pub(crate) kind: EntityKind,
    pub(crate) id: String,
    attrs: Vec<(&'static str, AttrValue)>,
    parents: Vec<(EntityKind, String)>,
}

impl EntitySpec {
    fn new(kind: EntityKind, id: impl Into<String>) -> Self {
        Self {
            kind,
            id: id.into(),
            attrs: Vec::new(),
            parents: Vec::new(),
        }
    }

    fn attr(mut self, name: &'static str, value: AttrValue) -> Self {
        self.attrs.push((name, value));
        self
    }

    fn str(self, name: &'static str, value: impl Into<String>) -> Self {
        self.attr(name, AttrValue::Str(value.into()))
    }

    /// The uid as Cedar prints it, e.g. `Warrant::Path::"/w/a"`.
    pub(crate) fn uid_string(&self) -> String {
        format!("{}::{}", self.kind.qualified(), json!(self.id))
    }

    fn to_cedar(&self, names: &CedarNames) -> Result<Entity, PolicyError> {
        let attrs: HashMap<String, RestrictedExpression> = self
            .attrs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.to_cedar()))
            .collect();
        let parents = self
            .parents
            .iter()
            .map(|(kind, id)| names.uid(*kind, id))
            .collect::<Result<HashSet<EntityUid>, PolicyError>>()?;
        Entity::new(names.uid(self.kind, &self.id)?, attrs, parents).map_err(|e| {
            PolicyError::Evaluation {
                message: format!("entity {}: {e}", self.uid_string()),
            }
        })
    }

    /// Cedar's entity JSON format, so the output can be fed to the `cedar` CLI as is.
    fn to_json(&self) -> Value {
        let attrs: Map<String, Value> = self
            .attrs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.to_json()))
            .collect();
        let parents: Vec<Value> = self
            .parents
            .iter()
            .map(|(kind, id)| json!({"type": kind.qualified(), "id": id}))
            .collect();
        json!({
            "uid": {"type": self.kind.qualified(), "id": self.id},
            "attrs": attrs,
            "parents": parents,
        })
    }
}

/// Everything one Cedar evaluation needs, before it becomes Cedar objects.
#[derive(Clone, Debug)]
pub(crate) struct RequestSpec {
    pub(crate) principal: EntitySpec,
    pub(crate) verb: Verb,
    pub(crate) resource: EntitySpec,
    /// Role and Team entities the principal is in.
    groups: Vec<EntitySpec>,
    context: Vec<(&'static str, String)>,
    /// Whether the resource (path, or a command's cwd) lies in the workspace; for messages.
    pub(crate) in_workspace: bool,
}

impl RequestSpec {
    /// The request for `principal` itself (an agent's own roles and teams).
    pub(crate) fn for_principal(
        principal: &Principal,
        action: &Action,
        workspace: &CanonicalPath,
    ) -> Self {
        let kind = match principal.kind {
            PrincipalKind::User => EntityKind::User,
            PrincipalKind::Agent => EntityKind::Agent,
            PrincipalKind::Service => EntityKind::Service,
        };
        let mut entity = principal_entity(kind, &principal.tenant, &principal.actor);
        let mut groups = Vec::new();
        let memberships = principal
            .roles
            .iter()
            .map(|r| (EntityKind::Role, r))
            .chain(principal.teams.iter().map(|t| (EntityKind::Team, t)));
        for (kind, name) in memberships {
            // A name listed twice would be a duplicate entity, which Cedar rejects.
            if !entity.parents.iter().any(|(k, n)| *k == kind && n == name) {
                entity.parents.push((kind, name.clone()));
                groups.push(EntitySpec::new(kind, name.clone()));
            }
        }
        Self::build(entity, groups, principal, action, workspace)
    }

    /// The request for the person an agent acts for, with the roles and teams their standing
    /// in the identity directory gives them on this project. Without one (no directory, or a
    /// person it does not know) the entity is just the name: a policy that grants by role or
    /// team does not grant to them.
    pub(crate) fn for_person(
        person: &str,
        standing: Option<&warrant_core::directory::Standing>,
        principal: &Principal,
        action: &Action,
        workspace: &CanonicalPath,
    ) -> Self {
        let mut entity = principal_entity(EntityKind::User, &principal.tenant, person);
        let mut groups = Vec::new();
        if let Some(s) = standing {
            let memberships = s
                .roles
                .iter()
                .map(|r| (EntityKind::Role, r))
                .chain(s.teams.iter().map(|t| (EntityKind::Team, t)));
            for (kind, name) in memberships {
                entity.parents.push((kind, name.clone()));
                groups.push(EntitySpec::new(kind, name.clone()));
            }
        }
        Self::build(entity, groups, principal, action, workspace)
    }

    fn build(
        principal_entity: EntitySpec,
        groups: Vec<EntitySpec>,
        principal: &Principal,
        action: &Action,
        workspace: &CanonicalPath,
    ) -> Self {
        let (resource, in_workspace) = resource_entity(action, workspace);
        let context = vec![
            ("tenant", principal.tenant.clone()),
            (
                "on_behalf_of",
                principal.on_behalf_of.clone().unwrap_or_default(),
            ),
            ("workspace", workspace.as_str().to_owned()),
        ];
        Self {
            principal: principal_entity,
            verb: action.verb(),
            resource,
            groups,
            context,
            in_workspace,
        }
    }

    /// The Cedar request (validated against the schema) and entities (validated too).
    pub(crate) fn to_cedar(&self, names: &CedarNames) -> Result<(Request, Entities), PolicyError> {
        let context = Context::from_pairs(
            self.context
                .iter()
                .map(|(k, v)| ((*k).to_owned(), RestrictedExpression::new_string(v.clone()))),
        )
        .map_err(|e| PolicyError::Evaluation {
            message: format!("context: {e}"),
        })?;
        let request = Request::new(
            names.uid(self.principal.kind, &self.principal.id)?,
            names.action(self.verb)?,
            names.uid(self.resource.kind, &self.resource.id)?,
            context,
            Some(&names.schema),
        )
        .map_err(|e| PolicyError::Evaluation {
            message: format!("request: {e}"),
        })?;
        let entities = self
            .all_entities()
            .map(|e| e.to_cedar(names))
            .collect::<Result<Vec<Entity>, PolicyError>>()?;
        let entities = Entities::from_entities(entities, Some(&names.schema)).map_err(|e| {
            PolicyError::Evaluation {
                message: format!("entities: {e}"),
            }
        })?;
        Ok((request, entities))
    }

    /// Marks a path resource beneath one of `dirs` (installed skills verified against their
    /// approval) as `in_installed_skill`.
    pub(crate) fn with_installed_skills(mut self, action: &Action, dirs: &[CanonicalPath]) -> Self {
        let (Action::FsRead { path }
        | Action::FsList { path }
        | Action::FsSearch { path, .. }
        | Action::FsWrite { path, .. }
        | Action::FsCreate { path, .. }
        | Action::FsDelete { path, .. }) = action
        else {
            return self;
        };
        if dirs.iter().any(|d| path.starts_with(d)) {
            for (k, v) in &mut self.resource.attrs {
                if *k == "in_installed_skill" {
                    *v = AttrValue::Bool(true);
                }
            }
        }
        self
    }

    fn all_entities(&self) -> impl Iterator<Item = &EntitySpec> {
        [&self.principal, &self.resource]
            .into_iter()
            .chain(self.groups.iter())
    }

    pub(crate) fn entities_json(&self) -> Value {
        Value::Array(self.all_entities().map(EntitySpec::to_json).collect())
    }

    pub(crate) fn context_json(&self) -> Value {
        Value::Object(
            self.context
                .iter()
                .map(|(k, v)| ((*k).to_owned(), json!(v)))
                .collect(),
        )
    }

    pub(crate) fn action_uid_string(&self) -> String {
        format!("Warrant::Action::{}", json!(self.verb.as_str()))
    }
}

fn principal_entity(kind: EntityKind, tenant: &str, actor: &str) -> EntitySpec {
    EntitySpec::new(kind, actor)
        .str("tenant", tenant)
        .str("actor", actor)
}

/// A catalog object: `name` the canonical `catalog/<catalog>/<ns…>[/<table>]` (for `like`),
/// `namespace` its levels joined with `.` (empty at a catalog's top level), `table` empty for
/// a listing.
fn catalog_entity(action: &Action, catalog: &str, namespace: &[String], table: &str) -> EntitySpec {
    let name = action.target();
    EntitySpec::new(EntityKind::CatalogObject, name.clone())
        .str("name", name)
        .str("catalog", catalog)
        .str("namespace", namespace.join("."))
        .str("table", table)
}

/// The resource entity of an action, and whether it lies in the workspace.
fn resource_entity(action: &Action, workspace: &CanonicalPath) -> (EntitySpec, bool) {
    match action {
        Action::FsRead { path }
        | Action::FsList { path }
        | Action::FsSearch { path, .. }
        | Action::FsWrite { path, .. }
        | Action::FsCreate { path, .. }
        | Action::FsDelete { path, .. } => {
            let inside = path.starts_with(workspace);
            let name = path.file_name();
            let entity = EntitySpec::new(EntityKind::Path, path.as_str())
                .str("path", path.as_str())
                .str("name", name)
                .str("ext", extension(name))
                .attr("in_workspace", AttrValue::Bool(inside))
                .attr("in_installed_skill", AttrValue::Bool(false))
                .str("workspace", workspace.as_str());
            (entity, inside)
        }
        Action::ShellExec {
            argv,
            cwd,
            profile,
            program: resolved,
            contained,
            ..
        } => {
            let inside = cwd.starts_with(workspace);
            let joined = argv.join(" ");
            // The program is the file argv[0] resolved to when that is known, else argv[0]'s
            // basename: `./ls` linked to `/usr/bin/rm` is `rm`.
            let program = match resolved {
                Some(p) => p.file_name(),
                None => argv
                    .first()
                    .and_then(|a| a.rsplit('/').next())
                    .unwrap_or_default(),
            };
            let entity = EntitySpec::new(EntityKind::Command, joined.clone())
                .str("program", program)
                .str(
                    "executable",
                    resolved
                        .as_ref()
                        .map(CanonicalPath::as_str)
                        .unwrap_or_default(),
                )
                .attr(
                    "executable_in_workspace",
                    AttrValue::Bool(resolved.as_ref().is_some_and(|p| p.starts_with(workspace))),
                )
                .str("argv", joined)
                .str("cwd", cwd.as_str())
                .attr("in_workspace", AttrValue::Bool(inside))
                .str("profile", profile.as_str())
                .attr("contained", AttrValue::Bool(*contained));
            (entity, inside)
        }
        Action::ProviderCall { provider, model } => {
            let name = format!("{provider}:{model}");
            let entity = EntitySpec::new(EntityKind::Provider, name.clone())
                .str("name", name)
                .str("provider", provider.as_str())
                .str("model", model.as_str());
            // A model call leaves the machine; it is never "in the workspace".
            (entity, false)
        }
        Action::MemoryWrite {
            scope, namespace, ..
        }
        | Action::MemoryRead {
            scope, namespace, ..
        }
        | Action::MemoryDelete {
            scope, namespace, ..
        } => (memory_entity(*scope, namespace), false),
        Action::MemoryPropose { namespace, .. } | Action::MemoryPublish { namespace, .. } => {
            (memory_entity(MemoryScope::Shared, namespace), false)
        }
        Action::GitRead { repo, .. }
        | Action::GitCommit { repo, .. }
        | Action::GitBranch { repo, .. }
        | Action::GitCheckout { repo, .. }
        | Action::GitPush { repo, .. } => {
            let inside = repo.starts_with(workspace);
            let (op, refname, remote) = match action {
                Action::GitRead { what, .. } => {
                    let op = match what {
                        GitRead::Status => "status",
                        GitRead::Diff { .. } => "diff",
                        GitRead::Log { .. } => "log",
                        GitRead::Show { .. } => "show",
                    };
                    let rev = match what {
                        GitRead::Show { rev } => rev.clone(),
                        GitRead::Status | GitRead::Diff { .. } | GitRead::Log { .. } => {
                            String::new()
                        }
                    };
                    (op, rev, String::new())
                }
                Action::GitCommit { .. } => ("commit", String::new(), String::new()),
                Action::GitBranch { name, .. } => ("branch", name.clone(), String::new()),
                Action::GitCheckout { rev, .. } => ("checkout", rev.clone(), String::new()),
                Action::GitPush { remote, branch, .. } => ("push", branch.clone(), remote.clone()),
                Action::FsRead { .. }
                | Action::FsList { .. }
                | Action::FsSearch { .. }
                | Action::FsWrite { .. }
                | Action::FsCreate { .. }
                | Action::FsDelete { .. }
                | Action::ShellExec { .. }
                | Action::ProviderCall { .. }
                | Action::MemoryWrite { .. }
                | Action::MemoryRead { .. }
                | Action::MemoryDelete { .. }
                | Action::MemoryPropose { .. }
                | Action::MemoryPublish { .. }
                | Action::McpCall { .. }
                | Action::AgentSpawn { .. }
                | Action::CatalogList { .. }
                | Action::CatalogRead { .. }
                | Action::ArtifactCreate { .. }
                | Action::WebFetch { .. } => ("", String::new(), String::new()),
            };
            let name = action.target();
            let entity = EntitySpec::new(EntityKind::GitRef, name.clone())
                .str("name", name)
                .str("repo", repo.as_str())
                .attr("in_workspace", AttrValue::Bool(inside))
                .str("op", op)
                .str("refname", refname)
                .str("remote", remote);
            (entity, inside)
        }
        Action::WebFetch {
            url,
            host,
            port,
            allowlisted,
        } => {
            let scheme = url.split_once("://").map_or("", |(s, _)| s);
            let entity = EntitySpec::new(EntityKind::Url, url.clone())
                .str("url", url.as_str())
                .str("scheme", scheme)
                .str("host", host.as_str())
                .str("port", port.to_string())
                .attr("allowlisted", AttrValue::Bool(*allowlisted));
            // A fetch leaves the machine; it is never "in the workspace".
            (entity, false)
        }
        Action::CatalogList { catalog, namespace } => {
            (catalog_entity(action, catalog, namespace, ""), false)
        }
        Action::CatalogRead {
            catalog,
            namespace,
            table,
        } => (catalog_entity(action, catalog, namespace, table), false),
        Action::ArtifactCreate { path, kind, .. } => {
            let inside = path.starts_with(workspace);
            let entity = EntitySpec::new(EntityKind::Artifact, path.as_str())
                .str("path", path.as_str())
                .str("name", path.file_name())
                .str("kind", kind.as_str())
                .attr("in_workspace", AttrValue::Bool(inside))
                .str("workspace", workspace.as_str());
            (entity, inside)
        }
        Action::McpCall {
            server,
            tool,
            arguments,
            risk,
            ..
        } => {
            let name = format!("mcp/{server}/{tool}");
            // The arguments as canonical JSON text, so a policy can match them with `like`.
            let arguments =
                warrant_core::canonical_json(arguments).unwrap_or_else(|_| arguments.to_string());
            let entity = EntitySpec::new(EntityKind::McpTool, name.clone())
                .str("name", name)
                .str("server", server.as_str())
                .str("tool", tool.as_str())
                .str("arguments", arguments)
                .str("risk", risk.as_str());
            // An MCP server is outside Warrant's workspace whatever it touches.
            (entity, false)
        }
        Action::AgentSpawn {
            task,
            tools,
            profile,
            depth,
            ..
        } => {
            let name = action.target();
            let entity = EntitySpec::new(EntityKind::Subagent, name.clone())
                .str("name", name)
                .str("task", task.as_str())
                .str("tools", tools.join(","))
                .str("profile", profile.clone().unwrap_or_default())
                .attr("depth", AttrValue::Long(i64::from(*depth)));
            // A child run works in this run's workspace, under this run's principal.
            (entity, true)
        }
    }
}

/// A memory namespace as policy sees it: `memory/<scope>/<namespace>`. Memory lives in the
/// store, not in the workspace's files.
fn memory_entity(scope: MemoryScope, namespace: &str) -> EntitySpec {
    let name = memory_resource(scope, namespace);
    EntitySpec::new(EntityKind::MemoryNamespace, name.clone())
        .str("name", name)
        .str("scope", scope.as_str())
        .str("namespace", namespace)
}

/// The extension without the dot; "" when there is none. A leading dot starts a hidden name,
/// not an extension, so `.env` has none and `.env.local` has `local`.
pub(crate) fn extension(name: &str) -> &str {
    match name.rfind('.') {
        None | Some(0) => "",
        Some(i) => name.get(i + 1..).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn extensions_follow_hidden_file_rules() {
        let cases = [
            ("main.rs", "rs"),
            (".env", ""),
            (".env.local", "local"),
            ("id_rsa", ""),
            ("server.key", "key"),
            ("archive.tar.gz", "gz"),
            ("trailing.", ""),
            ("/", ""),
        ];
        for (name, want) in cases {
            assert_eq!(extension(name), want, "{name}");
        }
    }
}
