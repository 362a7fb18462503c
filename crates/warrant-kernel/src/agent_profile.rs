//! The Open Agent Profile a run was started with (`warrant run --profile NAME`), as the ring
//! sees it: pinned in `run_started` (name, revision, digests, the prompt sections and the
//! ceiling computed when the run started), it can only narrow a policy decision, never widen
//! one. Resolving and validating profiles is `warrant-oap`'s job; this is the part every
//! decision of the run passes through, so it lives beside the ring.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use warrant_core::{Action, MemoryScope, Verb};

use crate::events::{ReasonRecord, Verdict};
use crate::ring::PolicyVerdict;

/// A profile's decision for an action: `deny < ask < allow` (OAP §3.4); the effective decision
/// is the minimum of the profile's and policy's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ceiling {
    Deny,
    Ask,
    Allow,
}

impl Ceiling {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deny => "deny",
            Self::Ask => "ask",
            Self::Allow => "allow",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "deny" => Some(Self::Deny),
            "ask" => Some(Self::Ask),
            "allow" => Some(Self::Allow),
            _ => None,
        }
    }
}

/// The permission family an action belongs to in a profile's `spec.permissions`
/// (`shell`, `edit`, `network`, else `default`) and `spec.memory.mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    Shell,
    Edit,
    Network,
    MemoryRead,
    MemoryWrite,
    Default,
}

impl Family {
    /// The family of a verb; `None` for the harness's own model call, which a profile does
    /// not govern (`spec.model` chooses a model, it does not permit one).
    pub fn of(verb: Verb) -> Option<Self> {
        match verb {
            Verb::ShellExec => Some(Self::Shell),
            Verb::FsWrite
            | Verb::FsCreate
            | Verb::FsDelete
            | Verb::GitCommit
            | Verb::GitBranch
            | Verb::GitCheckout
            | Verb::ArtifactCreate => Some(Self::Edit),
            Verb::WebFetch
            | Verb::GitPush
            | Verb::MessageSend
            | Verb::CatalogList
            | Verb::CatalogRead => Some(Self::Network),
            Verb::MemoryRead => Some(Self::MemoryRead),
            Verb::MemoryWrite | Verb::MemoryDelete | Verb::MemoryPropose | Verb::MemoryPublish => {
                Some(Self::MemoryWrite)
            }
            Verb::FsRead
            | Verb::FsList
            | Verb::FsSearch
            | Verb::GitRead
            | Verb::McpCall
            | Verb::AgentSpawn => Some(Self::Default),
            Verb::ProviderCall => None,
        }
    }

    /// The word a profile's `rules[].action` matches.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Shell => "shell",
            Self::Edit => "write",
            Self::Network => "network",
            Self::MemoryRead => "memory_read",
            Self::MemoryWrite => "memory_write",
            Self::Default => "read",
        }
    }
}

/// One of the profile's `spec.permissions.rules`, in order; the first that matches decides
/// (before the family's ceiling), and it too can only narrow.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedRule {
    /// A glob over the tool's names (the OAP name such as `shell` or `mcp/srv/tool`, or
    /// Warrant's own such as `run_command`).
    pub tool: String,
    /// A glob over the family word (`read`, `write`, `shell`, `network`, …).
    pub action: String,
    /// A glob over the action's target (path, URL, argv), `*` for any.
    pub target: String,
    pub decision: Ceiling,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Something of the profile the harness dropped, narrowed or substituted, and why (L1-I9).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Adjustment {
    pub field: String,
    pub requested: String,
    pub effective: String,
    pub reason: String,
}

/// The profile a run works under, fixed when it starts. The prompt sections are journaled so
/// that a resumed run sees the very contract it started with (L1-I10), and `resume` refuses
/// when the file on disk is no longer this one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProfilePin {
    pub name: String,
    pub revision: u64,
    /// `sha256:<hex>` over metadata (without revision, updated_at, trust) and spec.
    pub spec_digest: String,
    /// `sha256:<hex>` over the whole document (state and history included).
    pub profile_digest: String,
    /// `managed`, `user`, `project` or `imported`: from the root it was found in.
    pub trust: String,
    /// Where it was read from.
    pub source: String,
    /// The profile's part of the system prompt: instructions, objectives, persona,
    /// constraints, examples, in the spec's order (§3.2 steps 2–6).
    pub prompt: String,
    /// The learned state (§3.2 step 7): agent-authored, untrusted, fenced when the prompt is
    /// built and never able to change this pin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Per tool of the run (by its Warrant name): what the profile's `spec.tools` allows.
    /// A tool missing here is denied.
    pub tools: BTreeMap<String, Ceiling>,
    /// Other names each tool answers to in `rules[].tool` (its OAP names).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub aliases: BTreeMap<String, Vec<String>>,
    /// Per family: `spec.permissions.shell|edit|network|default` and `spec.memory.mode`.
    pub families: BTreeMap<Family, Ceiling>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<PinnedRule>,
    /// `spec.permissions.filesystem`, made absolute against the run's workspace: reads only
    /// under `read_roots`, writes only under `write_roots` (each `None` when the profile does
    /// not set it), nothing under `deny_paths`.
    #[serde(default, skip_serializing_if = "PathCeiling::is_open")]
    pub paths: PathCeiling,
    /// `spec.permissions.allow_hosts`: a fetch or push elsewhere is denied (`None`: not set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_hosts: Option<Vec<String>>,
    /// `spec.memory.scopes`: memory actions only in these namespaces (a scope `kind:name`
    /// names the namespace `name`); `None` when the profile sets none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_scopes: Option<Vec<String>>,
    /// `spec.memory.stores` attached to Warrant's memory (OAP L3-Y1): when the profile names
    /// an external store, memory actions reach only the backends attached here, and write only
    /// to a `read_write` one. `None` when it names none (Warrant's memory as a whole, under
    /// `spec.memory.mode` and `scopes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_stores: Option<Vec<PinnedStore>>,
    /// Everything dropped, narrowed or substituted when the run started.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adjustments: Vec<Adjustment>,
    /// `spec.tools.skills` as attached when the run started: each skill the profile named
    /// that was usable here (installed and approved, or a trusted project's) with the digest
    /// of its files then. The run's skill catalog is exactly these; `None` when the profile
    /// names no skills (the installation's catalog stands, under the tool ceiling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills: Option<Vec<PinnedSkill>>,
}

/// A skill a profile attached to a run, with the digest its files had then (L3-G2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedSkill {
    pub name: String,
    pub digest: String,
}

/// A store of `spec.memory.stores` mapped onto one of Warrant's memory backends: its
/// `warrant-local` kind is the workspace's local memory, `warrant-shared` the installation's
/// shared memory (drafts a person publishes). Every read and write of it is a `memory.*`
/// action the ring decides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedStore {
    pub name: String,
    pub kind: String,
    pub scope: MemoryScope,
    /// The store's `mode` (`read_write`) within `spec.memory.mode`; else reads only.
    pub writable: bool,
    pub required: bool,
}

/// Where a profile lets the agent read and write (absolute, canonical prefixes).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathCeiling {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_roots: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_roots: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
}

impl PathCeiling {
    pub fn is_open(&self) -> bool {
        self.read_roots.is_none() && self.write_roots.is_none() && self.deny.is_empty()
    }
}

/// `path` is `root` or below it (both absolute and canonical; a trailing `/` on the root or
/// a trailing `*` glob is allowed).
fn under(path: &str, root: &str) -> bool {
    let root = root.trim_end_matches('*');
    let root = root.strip_suffix('/').unwrap_or(root);
    path == root || path.starts_with(&format!("{root}/")) || root.is_empty()
}

/// The host of a URL (`scheme://[user@]host[:port]/…`), lower-cased.
fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://").map(|(_, r)| r)?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = host.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        host.split(':').next()?
    };
    Some(host.to_ascii_lowercase())
}

/// The namespace a memory action works in.
fn memory_namespace(action: &Action) -> Option<&str> {
    if let Action::MemoryRead { namespace, .. }
    | Action::MemoryWrite { namespace, .. }
    | Action::MemoryDelete { namespace, .. }
    | Action::MemoryPropose { namespace, .. }
    | Action::MemoryPublish { namespace, .. } = action
    {
        Some(namespace)
    } else {
        None
    }
}

/// The backend a memory action works on (a draft and its review are shared memory's).
fn memory_scope(action: &Action) -> Option<MemoryScope> {
    if let Action::MemoryRead { scope, .. }
    | Action::MemoryWrite { scope, .. }
    | Action::MemoryDelete { scope, .. } = action
    {
        Some(*scope)
    } else if let Action::MemoryPropose { .. } | Action::MemoryPublish { .. } = action {
        Some(MemoryScope::Shared)
    } else {
        None
    }
}

/// The policy name under which a profile's narrowing is recorded.
pub fn reason_policy(pin: &ProfilePin) -> String {
    format!("profile:{}", pin.name)
}

fn glob(pattern: &str, value: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    match pattern.strip_suffix('*') {
        Some(prefix) => value.starts_with(prefix),
        None => pattern == value,
    }
}

impl ProfilePin {
    /// The profile's decision for `action` of `tool`, and why.
    pub fn ceiling(&self, tool: &str, action: &Action) -> (Ceiling, String) {
        let Some(family) = Family::of(action.verb()) else {
            return (Ceiling::Allow, String::new());
        };
        let tool_ceiling = self.tools.get(tool).copied().unwrap_or(Ceiling::Deny);
        if tool_ceiling == Ceiling::Deny {
            return (
                Ceiling::Deny,
                format!("tool `{tool}` is not among the profile's tools (spec.tools)"),
            );
        }
        let names: Vec<&str> = std::iter::once(tool)
            .chain(
                self.aliases
                    .get(tool)
                    .into_iter()
                    .flatten()
                    .map(String::as_str),
            )
            .collect();
        let target = action.target();
        if let Some(denied) = self.outside(action, &target) {
            return (Ceiling::Deny, denied);
        }
        if let Some(rule) = self.rules.iter().find(|r| {
            names.iter().any(|n| glob(&r.tool, n))
                && glob(&r.action, family.as_str())
                && glob(&r.target, &target)
        }) {
            let why = rule.reason.clone().unwrap_or_else(|| {
                format!(
                    "rule tool={} action={} target={}",
                    rule.tool, rule.action, rule.target
                )
            });
            return (rule.decision.min(tool_ceiling), why);
        }
        let family_ceiling = self.families.get(&family).copied().unwrap_or(Ceiling::Ask);
        let decided = family_ceiling.min(tool_ceiling);
        let why = if family_ceiling <= tool_ceiling {
            format!(
                "spec.permissions for {} is {}",
                family.as_str(),
                family_ceiling.as_str()
            )
        } else {
            format!("tool `{tool}` is bound to {}", tool_ceiling.as_str())
        };
        (decided, why)
    }

    /// Why `action` is outside the profile's filesystem roots or hosts, if it is.
    fn outside(&self, action: &Action, target: &str) -> Option<String> {
        let (roots, what) = match action.verb() {
            Verb::FsRead | Verb::FsList | Verb::FsSearch => (&self.paths.read_roots, "read_roots"),
            Verb::FsWrite | Verb::FsCreate | Verb::FsDelete => {
                (&self.paths.write_roots, "write_roots")
            }
            Verb::WebFetch => {
                let hosts = self.allow_hosts.as_ref()?;
                let host = if let Action::WebFetch { host, .. } = action {
                    host.to_ascii_lowercase()
                } else {
                    url_host(target).unwrap_or_default()
                };
                return (!hosts.iter().any(|h| h.eq_ignore_ascii_case(&host)))
                    .then(|| format!("host `{host}` is not in spec.permissions.allow_hosts"));
            }
            Verb::MemoryRead
            | Verb::MemoryWrite
            | Verb::MemoryDelete
            | Verb::MemoryPropose
            | Verb::MemoryPublish => {
                if let Some(denied) = self.outside_stores(action) {
                    return Some(denied);
                }
                let scopes = self.memory_scopes.as_ref()?;
                let namespace = memory_namespace(action)?;
                let listed = scopes.iter().any(|s| {
                    s == namespace || s.split_once(':').is_some_and(|(_, n)| n == namespace)
                });
                return (!listed).then(|| {
                    format!("memory namespace `{namespace}` is not in spec.memory.scopes")
                });
            }
            Verb::ShellExec
            | Verb::GitCommit
            | Verb::GitPush
            | Verb::CatalogList
            | Verb::CatalogRead
            | Verb::ProviderCall
            | Verb::McpCall
            | Verb::ArtifactCreate
            | Verb::MessageSend
            | Verb::GitRead
            | Verb::GitBranch
            | Verb::GitCheckout
            | Verb::AgentSpawn => return None,
        };
        if let Some(d) = self.paths.deny.iter().find(|d| under(target, d)) {
            return Some(format!(
                "`{target}` is under spec.permissions.filesystem.deny_paths ({d})"
            ));
        }
        let roots = roots.as_ref()?;
        (!roots.iter().any(|r| under(target, r)))
            .then(|| format!("`{target}` is outside spec.permissions.filesystem.{what}"))
    }

    /// Why a memory action reaches no store the profile attached, or writes to a read-only
    /// one (only when the profile names external stores).
    fn outside_stores(&self, action: &Action) -> Option<String> {
        let stores = self.memory_stores.as_ref()?;
        let scope = memory_scope(action)?;
        let Some(store) = stores.iter().find(|s| s.scope == scope) else {
            return Some(format!(
                "no store of spec.memory.stores is attached to Warrant's {} memory",
                scope.as_str()
            ));
        };
        let writes = !matches!(action.verb(), Verb::MemoryRead);
        (writes && !store.writable).then(|| {
            format!(
                "spec.memory.stores `{}` ({}) is read-only for this profile",
                store.name, store.kind
            )
        })
    }

    /// Narrows policy's verdict by the profile: the result is never more permissive than
    /// `verdict` (an ask stays an ask at the same risk, a deny stays a deny).
    pub fn narrow(&self, verdict: PolicyVerdict, tool: &str, action: &Action) -> PolicyVerdict {
        let (ceiling, why) = self.ceiling(tool, action);
        let narrowed = match (verdict.verdict, ceiling) {
            (Verdict::Deny, _) | (Verdict::Ask, Ceiling::Ask | Ceiling::Allow) => None,
            (Verdict::Allow, Ceiling::Allow) => None,
            (Verdict::Allow | Verdict::Ask, Ceiling::Deny) => Some(Verdict::Deny),
            (Verdict::Allow, Ceiling::Ask) => Some(Verdict::Ask),
        };
        let Some(to) = narrowed else {
            return verdict;
        };
        // The profile's reason alone is the deciding one: the run's record says the profile
        // narrowed what policy would have let through.
        PolicyVerdict {
            verdict: to,
            risk: verdict.risk,
            reasons: vec![ReasonRecord {
                policy: reason_policy(self),
                reason: Some(format!(
                    "agent profile `{}` (revision {}) narrows this to {}: {why}",
                    self.name,
                    self.revision,
                    to.as_str()
                )),
            }],
            errors: verdict.errors,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use warrant_core::{CanonicalPath, RiskClass};

    fn pin(tools: &[(&str, Ceiling)], families: &[(Family, Ceiling)]) -> ProfilePin {
        ProfilePin {
            name: "p".into(),
            revision: 1,
            spec_digest: String::new(),
            profile_digest: String::new(),
            trust: "project".into(),
            source: String::new(),
            prompt: String::new(),
            state: None,
            tools: tools.iter().map(|(t, c)| ((*t).to_owned(), *c)).collect(),
            aliases: BTreeMap::new(),
            families: families.iter().copied().collect(),
            rules: vec![],
            paths: PathCeiling::default(),
            allow_hosts: None,
            memory_scopes: None,
            memory_stores: None,
            adjustments: vec![],
            skills: None,
        }
    }

    fn verdict(v: Verdict) -> PolicyVerdict {
        PolicyVerdict {
            verdict: v,
            risk: RiskClass::Read,
            reasons: vec![],
            errors: vec![],
        }
    }

    /// Every (policy, profile) pair: the result is the minimum, never above policy.
    #[test]
    fn narrowing_never_widens() {
        let read = Action::FsRead {
            path: CanonicalPath::from_normalized("/w/a").unwrap(),
        };
        for policy in [Verdict::Deny, Verdict::Ask, Verdict::Allow] {
            for profile in [Ceiling::Deny, Ceiling::Ask, Ceiling::Allow] {
                let p = pin(
                    &[("read_file", Ceiling::Allow)],
                    &[(Family::Default, profile)],
                );
                let got = p.narrow(verdict(policy), "read_file", &read).verdict;
                let rank = |v: Verdict| match v {
                    Verdict::Deny => 0,
                    Verdict::Ask => 1,
                    Verdict::Allow => 2,
                };
                let want = rank(policy).min(profile as u8);
                assert_eq!(rank(got), want, "policy {policy:?} profile {profile:?}");
            }
        }
        // A tool the profile does not list is denied whatever policy says.
        let p = pin(&[], &[(Family::Default, Ceiling::Allow)]);
        assert_eq!(
            p.narrow(verdict(Verdict::Allow), "read_file", &read)
                .verdict,
            Verdict::Deny
        );
    }

    /// L3-Y1: once a profile attaches a store, memory on another backend is out of its
    /// reach and a read-only store takes no write; without stores, memory is the families'.
    #[test]
    fn attached_stores_bound_memory_actions() {
        let tools = [
            ("remember", Ceiling::Allow),
            ("recall", Ceiling::Allow),
            ("propose_memory", Ceiling::Allow),
        ];
        let families = [
            (Family::MemoryRead, Ceiling::Allow),
            (Family::MemoryWrite, Ceiling::Allow),
        ];
        let write = Action::MemoryWrite {
            scope: MemoryScope::Local,
            namespace: "notes".into(),
            text: "t".into(),
            tags: vec![],
        };
        let read = Action::MemoryRead {
            scope: MemoryScope::Local,
            namespace: "notes".into(),
            query: "t".into(),
            limit: 5,
        };
        let propose = Action::MemoryPropose {
            namespace: "team".into(),
            text: "t".into(),
            tags: vec![],
        };
        let open = pin(&tools, &families);
        let mut bounded = pin(&tools, &families);
        bounded.memory_stores = Some(vec![PinnedStore {
            name: "notes".into(),
            kind: "warrant-local".into(),
            scope: MemoryScope::Local,
            writable: false,
            required: false,
        }]);
        let got = |p: &ProfilePin| {
            [
                p.ceiling("remember", &write),
                p.ceiling("recall", &read),
                p.ceiling("propose_memory", &propose),
            ]
        };
        assert_eq!(
            got(&open).map(|(c, _)| c),
            [Ceiling::Allow, Ceiling::Allow, Ceiling::Allow]
        );
        assert_eq!(
            got(&bounded),
            [
                (
                    Ceiling::Deny,
                    "spec.memory.stores `notes` (warrant-local) is read-only for this profile"
                        .to_owned()
                ),
                (
                    Ceiling::Allow,
                    "spec.permissions for memory_read is allow".to_owned()
                ),
                (
                    Ceiling::Deny,
                    "no store of spec.memory.stores is attached to Warrant's shared memory"
                        .to_owned()
                ),
            ]
        );
    }
}
