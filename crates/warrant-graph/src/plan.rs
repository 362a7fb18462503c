//! `warrant graph plan`: what a run of the graph would do, without doing any of it (AGS §17.1
//! PLAN): the order, each node's declared permissions put to the installation's policy (allow,
//! ask or deny: a node's permissions are a ceiling, policy always wins), the gates, and every
//! point where a person would be asked. The policy question is the caller's ([`Decide`]).

use serde::Serialize;
use warrant_kernel::graph::{Permission, PermissionScope};

use crate::model::{Join, NodeKind};
use crate::{Finding, Graph, LEVEL, schedule};

/// Policy's answer for one action on one target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Decided {
    /// `allow`, `ask` or `deny`.
    pub verdict: String,
    /// Policy allows, but the risk class's rule asks a person anyway.
    pub person_needed: bool,
    pub reason: String,
}

/// Puts one action (`fs.write`, `shell.exec`, …) on one target to policy.
pub trait Decide {
    fn decide(&self, action: &str, target: &str) -> Result<Decided, String>;
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PermissionPlan {
    /// As declared (`fs:write:src/*`), or `workspace:read_write`.
    pub permission: String,
    /// The Warrant action it was put to policy as, and on what.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// `allow`, `ask`, `deny`, or `not_decided` (no Warrant action performs it, or no target
    /// was named: policy decides each call at run time).
    pub verdict: String,
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GatePlan {
    pub mode: String,
    pub prompt: String,
    pub roles: Vec<String>,
    pub on_reject: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodePlan {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    /// Incoming edges: `from` (`kind`, and its guard).
    pub after: Vec<String>,
    pub join: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    pub workspace: String,
    pub permissions: Vec<PermissionPlan>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate: Option<GatePlan>,
    pub max_attempts: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fallback: Vec<String>,
}

/// The whole plan, also the `--json` output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub path: String,
    pub id: String,
    pub title: String,
    pub graph_digest: String,
    pub level: u8,
    pub requires_conformance: u64,
    /// Whether `warrant graph run` would take it (nothing in `unsupported`).
    pub runnable: bool,
    pub unsupported: Vec<String>,
    pub entrypoints: Vec<String>,
    pub order: Vec<String>,
    pub nodes: Vec<NodePlan>,
    /// Every point where a run would wait for a person, in order: gates, `human` checkpoints,
    /// escalations, and permissions policy asks about.
    pub asks_person: Vec<String>,
    pub warnings: Vec<Finding>,
}

/// The Warrant action and target a permission is put to policy as; `Err`: why it is not.
fn as_action(p: &Permission) -> Result<(&'static str, String), String> {
    let target = p
        .target
        .as_deref()
        .map(|t| {
            t.split('*')
                .next()
                .unwrap_or_default()
                .trim_end_matches('/')
        })
        .filter(|t| !t.is_empty());
    let path = || target.unwrap_or(".").to_owned();
    let verb = match (p.scope, p.action.as_str()) {
        (PermissionScope::Fs, "read" | "list" | "search") => "fs.read",
        (PermissionScope::Fs, "write" | "edit" | "create" | "*") => "fs.write",
        (PermissionScope::Fs, "delete") => "fs.delete",
        (PermissionScope::Shell | PermissionScope::Process, _) => {
            return Ok(("shell.exec", target.unwrap_or("sh").to_owned()));
        }
        (PermissionScope::Git, "read" | "status" | "diff" | "log") => "git.read",
        (PermissionScope::Git, "commit") => "git.commit",
        (PermissionScope::Git, "branch") => "git.branch",
        (PermissionScope::Git, "checkout") => "git.checkout",
        (PermissionScope::Git, "push") => "git.push",
        (PermissionScope::Net, _) => {
            let Some(host) = target else {
                return Err("no host named: policy decides each fetch at run time".into());
            };
            let url = if host.contains("://") {
                host.to_owned()
            } else {
                format!("https://{host}/")
            };
            return Ok(("web.fetch", url));
        }
        (scope, action) => {
            return Err(format!(
                "no Warrant action performs `{}:{action}`; the ceiling still denies anything it does not cover",
                scope.as_str()
            ));
        }
    };
    Ok((verb, path()))
}

fn decide_one(text: &str, decide: &dyn Decide) -> PermissionPlan {
    let Some(p) = Permission::parse(text) else {
        return PermissionPlan {
            permission: text.to_owned(),
            action: None,
            target: None,
            verdict: "not_decided".into(),
            reason: "not of the form scope:action[:target]; it covers nothing".into(),
        };
    };
    match as_action(&p) {
        Err(reason) => PermissionPlan {
            permission: text.to_owned(),
            action: None,
            target: None,
            verdict: "not_decided".into(),
            reason,
        },
        Ok((action, target)) => {
            let (verdict, reason) = match decide.decide(action, &target) {
                Ok(d) if d.person_needed => (
                    "ask".to_owned(),
                    format!("{} (its risk class asks a person)", d.reason),
                ),
                Ok(d) => (d.verdict, d.reason),
                Err(e) => ("not_decided".to_owned(), e),
            };
            PermissionPlan {
                permission: text.to_owned(),
                action: Some(action.to_owned()),
                target: Some(target),
                verdict,
                reason,
            }
        }
    }
}

/// Plans `graph`, asking `decide` about every declared permission.
pub fn plan(graph: &Graph, decide: &dyn Decide) -> Plan {
    let unsupported = schedule::unsupported(graph);
    let mut asks = Vec::new();
    let nodes = schedule::order(graph)
        .iter()
        .filter_map(|id| graph.node(id))
        .map(|n| {
            let mut declared: Vec<String> = n.permissions.clone();
            if n.workspace == "read_write" {
                declared.insert(0, "fs:write".to_owned());
            }
            let permissions: Vec<PermissionPlan> =
                declared.iter().map(|p| decide_one(p, decide)).collect();
            for p in permissions.iter().filter(|p| p.verdict == "ask") {
                asks.push(format!(
                    "node `{}`: {} on {} (policy asks a person)",
                    n.id,
                    p.action.as_deref().unwrap_or_default(),
                    p.target.as_deref().unwrap_or_default()
                ));
            }
            let gate = n.gate.as_ref().map(|g| GatePlan {
                mode: g.mode.clone(),
                prompt: g.prompt.trim().to_owned(),
                roles: g.roles.clone(),
                on_reject: g.on_reject.clone(),
            });
            if let Some(g) = &gate
                && g.mode != "notify"
            {
                asks.push(format!(
                    "gate `{}`: {} ({}; a rejection means {})",
                    n.id,
                    g.prompt.lines().next().unwrap_or_default(),
                    g.mode,
                    g.on_reject
                ));
            }
            for c in n.human.iter().filter(|c| c.mode != "notify") {
                let guard = c.when.as_ref().map(|w| format!(", when {w}")).unwrap_or_default();
                asks.push(match c.at {
                    crate::model::Stage::BeforeSideEffects => format!(
                        "node `{}`: checkpoint `{}` before each change it makes (approval requests{guard})",
                        n.id, c.id
                    ),
                    at @ (crate::model::Stage::BeforeStart
                    | crate::model::Stage::AfterOutputs
                    | crate::model::Stage::OnCriteriaFailure
                    | crate::model::Stage::OnFailure
                    | crate::model::Stage::OnEscalation) => format!(
                        "node `{}`: checkpoint `{}` {} ({}{guard})",
                        n.id,
                        c.id,
                        at.as_str(),
                        c.mode
                    ),
                });
            }
            if n.escalation.is_some() || n.on_exhausted == "escalate" {
                asks.push(format!(
                    "node `{}`: escalation to a person when its attempts are exhausted",
                    n.id
                ));
            }
            NodePlan {
                id: n.id.clone(),
                kind: n.kind.as_str().to_owned(),
                title: n.title.clone(),
                after: graph
                    .edges
                    .iter()
                    .filter(|e| e.to == n.id)
                    .map(|e| match &e.when {
                        Some(w) => format!("{} ({}, when {w})", e.from, e.kind),
                        None => format!("{} ({})", e.from, e.kind),
                    })
                    .collect(),
                join: match n.join {
                    Join::All => "all".into(),
                    Join::Any => "any".into(),
                    Join::NOf(k) => format!("n_of {k}"),
                },
                when: n.when.clone(),
                workspace: n.workspace.clone(),
                permissions: if n.kind == NodeKind::Gate {
                    Vec::new()
                } else {
                    permissions
                },
                gate,
                max_attempts: n.retry.as_ref().map_or(1, |r| r.max_attempts),
                fallback: n
                    .fallback
                    .iter()
                    .map(|f| match &f.node {
                        Some(node) => format!("{} {node}", f.strategy),
                        None => f.strategy.clone(),
                    })
                    .collect(),
            }
        })
        .collect();
    Plan {
        path: graph.path.display().to_string(),
        id: graph.id.clone(),
        title: graph.title.clone(),
        graph_digest: graph.digest.clone(),
        level: LEVEL,
        requires_conformance: graph.requires_conformance,
        runnable: unsupported.is_empty(),
        unsupported,
        entrypoints: graph.entrypoints.clone(),
        order: schedule::order(graph),
        nodes,
        asks_person: asks,
        warnings: graph.warnings.clone(),
    }
}
