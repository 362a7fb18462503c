//! What the kernel knows of an Agentic Graph run (AGS 1.0, `warrant graph run`): the graph the
//! run pinned when it started, each node's step as a typed event, and the permission ceiling of
//! the node that runs now. The scheduling itself lives in `warrant-graph`; the kernel only
//! journals its steps and holds every action of a node to that node's declared permissions
//! (never above policy: the ceiling can only lower a verdict).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use warrant_core::{Action, CanonicalPath, Verb};

use crate::events::{ReasonRecord, Verdict};
use crate::ring::PolicyVerdict;

/// The client named on the calls a graph makes itself (a gate's request of a person).
pub const GRAPH_CLIENT: &str = "graph";

/// The graph a run executes, fixed when it starts: resuming with a document of another digest
/// is refused (AGS RT053).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphPin {
    /// The document's `id`.
    pub id: String,
    pub title: String,
    /// The file as given, made absolute.
    pub path: String,
    /// AGS `graph_digest`: `sha256-<base64>` over the RFC 8785 form of the document.
    pub digest: String,
    /// The run's parameters, bound once when it started (declared defaults included).
    #[serde(default)]
    pub params: Value,
}

/// Where a node stands (AGS §17.2, the states Warrant journals).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeStatus {
    /// An attempt started (`attempt` counts from 1).
    Running,
    /// A gate's request is put to a person; the run parks.
    AwaitingHuman,
    /// One attempt failed; the failure ladder goes on (a retry, a fallback).
    AttemptFailed,
    Succeeded,
    Failed,
    Skipped,
    /// Could not start: a requirement could not be supplied.
    Blocked,
}

impl NodeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::AwaitingHuman => "awaiting_human",
            Self::AttemptFailed => "attempt_failed",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Skipped => "skipped",
            Self::Blocked => "blocked",
        }
    }

    /// Whether the node is done for this run.
    pub fn is_terminal(self) -> bool {
        match self {
            Self::Succeeded | Self::Failed | Self::Skipped | Self::Blocked => true,
            Self::Running | Self::AwaitingHuman | Self::AttemptFailed => false,
        }
    }
}

/// One step of one node, as journaled (`graph_node` events) and folded into the run's state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeStep {
    pub node: String,
    pub status: NodeStatus,
    pub attempt: u32,
    /// An AGS runtime code (`RT015`, `RT022`, …) or failure class when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The node's outputs, when it succeeded (or a failed attempt's, for the record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<Value>,
    /// The permission ceiling the attempt runs under (set with `running`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling: Option<NodeCeiling>,
    /// What a person is asked (set with `awaiting_human`): a gate, a `human` checkpoint or an
    /// escalation, and the graph's call that carries the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub human: Option<HumanStep>,
    /// A success criterion the harness runs through the ring (a `command` criterion): set on
    /// the `running` step that raises its call (with the attempt's ceiling, which the command
    /// runs under) and on the one that records what it came to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<CheckStep>,
}

/// A `command` success criterion of a node's attempt (AGS §10.2): the call the graph makes to
/// run it (a `run_command` decided by policy under the node's ceiling, like the agent's), and,
/// once the call has its result, whether it passed and what was seen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckStep {
    /// The criterion's `id`.
    pub criterion: String,
    /// `required` or `advisory` (an advisory one is run and recorded, and never fails a node).
    pub severity: String,
    /// The id of the graph's call that runs it.
    pub call: String,
    /// Absent until the call has its result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<CheckOutcome>,
    /// What decided it: the exit status and the end of the output, or why it did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
}

/// What a criterion's command came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckOutcome {
    /// It ran and its exit status (and output, when a pattern is given) were as expected.
    Passed,
    /// It ran and they were not.
    Failed,
    /// It ran past its `timeout_seconds` (or the profile's) and was stopped.
    TimedOut,
    /// It did not run: policy or the node's ceiling denied it, a person did, or the call was
    /// refused; never a pass.
    Refused,
}

impl CheckOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::Failed => "failed",
            Self::TimedOut => "timed_out",
            Self::Refused => "refused",
        }
    }
}

/// A point where the graph puts a question to a person (AGS §7.3, §14.2, §15).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HumanStep {
    /// The checkpoint's id, or `gate` / `escalation`.
    pub checkpoint: String,
    /// The stage (`before_start`, `after_outputs`, …), or `gate` / `escalation`.
    pub at: String,
    /// `approve`, `review`, `input` or `notify`.
    pub mode: String,
    /// The id of the graph's call that raised the request (its answer is that call's).
    pub call: String,
}

/// AGS permission scopes (`scope:action[:target]`, §12).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionScope {
    Fs,
    Net,
    Shell,
    Git,
    Process,
    Secret,
    Mcp,
    Human,
    Custom,
}

impl PermissionScope {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "fs" => Self::Fs,
            "net" => Self::Net,
            "shell" => Self::Shell,
            "git" => Self::Git,
            "process" => Self::Process,
            "secret" => Self::Secret,
            "mcp" => Self::Mcp,
            "human" => Self::Human,
            "custom" => Self::Custom,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fs => "fs",
            Self::Net => "net",
            Self::Shell => "shell",
            Self::Git => "git",
            Self::Process => "process",
            Self::Secret => "secret",
            Self::Mcp => "mcp",
            Self::Human => "human",
            Self::Custom => "custom",
        }
    }
}

/// One declared permission: `scope:action[:target]`. `*` in the action matches any action;
/// in the target, `*` matches any run of characters (`/` included).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Permission {
    pub scope: PermissionScope,
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

impl Permission {
    /// Parses `scope:action[:target]`; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        let mut parts = text.splitn(3, ':');
        let scope = PermissionScope::parse(parts.next()?)?;
        let action = parts.next().filter(|a| !a.is_empty())?.to_owned();
        let target = parts.next().filter(|t| !t.is_empty()).map(str::to_owned);
        Some(Self {
            scope,
            action,
            target,
        })
    }

    pub fn text(&self) -> String {
        match &self.target {
            Some(t) => format!("{}:{}:{t}", self.scope.as_str(), self.action),
            None => format!("{}:{}", self.scope.as_str(), self.action),
        }
    }
}

/// What a node may do at most: its declared permissions and workspace access. An action none
/// of them covers is denied, whatever policy says; one they cover is what policy says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeCeiling {
    pub node: String,
    pub permissions: Vec<Permission>,
    /// AGS `requirements.workspace`: `none`, `read_only` (the default) or `read_write`.
    pub workspace: String,
    /// A `human` checkpoint `at: before_side_effects` (its id, or its index): every mutating
    /// call of the node goes to a person before it runs, the first included (AGS §15).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_side_effects: Option<String>,
}

/// An action as an AGS permission names it: scope, action and target.
pub fn permission_of(
    action: &Action,
    workspace: &CanonicalPath,
) -> Option<(PermissionScope, &'static str, String)> {
    let rel = |p: &CanonicalPath| {
        p.relative_to(workspace)
            .unwrap_or_else(|| p.as_str().to_owned())
    };
    let (scope, verb) = match action.verb() {
        Verb::FsRead | Verb::FsList | Verb::FsSearch => (PermissionScope::Fs, "read"),
        Verb::FsWrite | Verb::FsCreate | Verb::ArtifactCreate => (PermissionScope::Fs, "write"),
        Verb::FsDelete => (PermissionScope::Fs, "delete"),
        Verb::ShellExec => (PermissionScope::Shell, "exec"),
        Verb::GitRead => (PermissionScope::Git, "read"),
        Verb::GitCommit => (PermissionScope::Git, "commit"),
        Verb::GitBranch => (PermissionScope::Git, "branch"),
        Verb::GitCheckout => (PermissionScope::Git, "checkout"),
        Verb::GitPush => (PermissionScope::Git, "push"),
        Verb::WebFetch => (PermissionScope::Net, "fetch"),
        Verb::CatalogList | Verb::CatalogRead => (PermissionScope::Net, "catalog"),
        Verb::MessageSend => (PermissionScope::Net, "message"),
        Verb::McpCall => (PermissionScope::Mcp, "call"),
        Verb::AgentSpawn => (PermissionScope::Process, "spawn"),
        Verb::MemoryRead => (PermissionScope::Custom, "memory.read"),
        Verb::MemoryWrite | Verb::MemoryDelete | Verb::MemoryPropose | Verb::MemoryPublish => {
            (PermissionScope::Custom, "memory.write")
        }
        // The harness's own model call is not the node's to permit.
        Verb::ProviderCall => return None,
    };
    let target = match action {
        Action::FsRead { path }
        | Action::FsList { path }
        | Action::FsSearch { path, .. }
        | Action::FsWrite { path, .. }
        | Action::FsCreate { path, .. }
        | Action::FsDelete { path, .. }
        | Action::ArtifactCreate { path, .. } => rel(path),
        Action::ShellExec { argv, .. } => argv.join(" "),
        Action::WebFetch { host, .. } => host.clone(),
        Action::McpCall { server, tool, .. } => format!("{server}/{tool}"),
        Action::ProviderCall { .. }
        | Action::MemoryRead { .. }
        | Action::MemoryWrite { .. }
        | Action::MemoryDelete { .. }
        | Action::MemoryPropose { .. }
        | Action::MemoryPublish { .. }
        | Action::GitRead { .. }
        | Action::GitCommit { .. }
        | Action::GitBranch { .. }
        | Action::GitCheckout { .. }
        | Action::GitPush { .. }
        | Action::AgentSpawn { .. }
        | Action::CatalogList { .. }
        | Action::CatalogRead { .. } => action.target(),
    };
    Some((scope, verb, target))
}

/// Whether an action of this AGS scope and verb changes something outside the node (a write,
/// a commit, a command, a message, a call of an MCP tool): what a `before_side_effects`
/// checkpoint pauses at. Reads, listings and fetches do not.
pub fn mutating(scope: PermissionScope, verb: &str) -> bool {
    match scope {
        PermissionScope::Fs => verb != "read",
        PermissionScope::Git => verb != "read",
        PermissionScope::Net => verb == "message",
        PermissionScope::Custom => verb != "memory.read",
        PermissionScope::Shell
        | PermissionScope::Process
        | PermissionScope::Mcp
        | PermissionScope::Secret
        | PermissionScope::Human => true,
    }
}

/// `*` matches any run of characters; everything else matches itself.
pub fn glob_matches(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && p[pi] != '*' && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

impl NodeCeiling {
    /// The declared permission that covers `action`, or why none does.
    pub fn covers(&self, action: &Action, workspace: &CanonicalPath) -> Result<String, String> {
        let Some((scope, verb, target)) = permission_of(action, workspace) else {
            return Ok("the harness's own model call".to_owned());
        };
        // Reading the workspace is the default (`workspace: read_only`); `none` takes it away
        // and `read_write` adds writing it.
        if scope == PermissionScope::Fs {
            match (self.workspace.as_str(), verb) {
                ("read_only" | "read_write", "read") => {
                    return Ok(format!("workspace: {}", self.workspace));
                }
                ("read_write", "write") => return Ok("workspace: read_write".to_owned()),
                _ => {}
            }
        }
        let wanted = format!("{}:{verb}:{target}", scope.as_str());
        for p in &self.permissions {
            let scope_ok = p.scope == scope
                || (p.scope == PermissionScope::Process && scope == PermissionScope::Shell);
            let action_ok = p.action == "*" || p.action == verb;
            let target_ok = p.target.as_deref().is_none_or(|t| glob_matches(t, &target));
            if scope_ok && action_ok && target_ok {
                return Ok(p.text());
            }
        }
        Err(format!(
            "graph node `{}` declares no permission covering {wanted}",
            self.node
        ))
    }

    /// Policy's verdict, lowered to a deny when the node's ceiling does not cover the action,
    /// and to an ask when the node has a `before_side_effects` checkpoint and the action
    /// mutates (never raised: a deny stays a deny).
    pub fn narrow(
        &self,
        verdict: PolicyVerdict,
        action: &Action,
        workspace: &CanonicalPath,
    ) -> PolicyVerdict {
        match (verdict.verdict, self.covers(action, workspace)) {
            (Verdict::Allow, Ok(_))
                if self.before_side_effects.is_some()
                    && permission_of(action, workspace)
                        .is_some_and(|(scope, verb, _)| mutating(scope, verb)) =>
            {
                let checkpoint = self.before_side_effects.as_deref().unwrap_or_default();
                PolicyVerdict {
                    verdict: Verdict::Ask,
                    risk: verdict.risk,
                    reasons: vec![ReasonRecord {
                        policy: format!("graph:{}", self.node),
                        reason: Some(format!(
                            "the node's human checkpoint `{checkpoint}` (before_side_effects): a person approves what it changes before it runs"
                        )),
                    }],
                    errors: verdict.errors,
                }
            }
            (Verdict::Deny, _) | (_, Ok(_)) => verdict,
            (Verdict::Allow | Verdict::Ask, Err(why)) => PolicyVerdict {
                verdict: Verdict::Deny,
                risk: verdict.risk,
                reasons: vec![ReasonRecord {
                    policy: format!("graph:{}", self.node),
                    reason: Some(format!("{why} (its permissions are a ceiling)")),
                }],
                errors: verdict.errors,
            },
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use warrant_core::RiskClass;

    fn ws() -> CanonicalPath {
        CanonicalPath::from_normalized("/w").unwrap()
    }

    fn write(p: &str) -> Action {
        Action::FsWrite {
            path: CanonicalPath::from_normalized(p).unwrap(),
            content: String::new(),
        }
    }

    fn verdict(v: Verdict) -> PolicyVerdict {
        PolicyVerdict {
            verdict: v,
            risk: RiskClass::Change,
            reasons: vec![],
            errors: vec![],
        }
    }

    #[test]
    fn a_ceiling_lowers_and_never_raises() {
        let ceiling = NodeCeiling {
            node: "n".into(),
            permissions: vec![Permission::parse("fs:write:docs/*").unwrap()],
            workspace: "read_only".into(),
            before_side_effects: None,
        };
        for v in [Verdict::Allow, Verdict::Ask, Verdict::Deny] {
            // Covered: policy's verdict stands, whatever it is.
            assert_eq!(
                ceiling
                    .narrow(verdict(v), &write("/w/docs/a.md"), &ws())
                    .verdict,
                v
            );
            // Not covered: a deny, whatever policy said.
            assert_eq!(
                ceiling
                    .narrow(verdict(v), &write("/w/src/a.rs"), &ws())
                    .verdict,
                Verdict::Deny
            );
        }
        let read = Action::FsRead {
            path: CanonicalPath::from_normalized("/w/src/a.rs").unwrap(),
        };
        assert!(ceiling.covers(&read, &ws()).is_ok());
        let none = NodeCeiling {
            workspace: "none".into(),
            ..ceiling
        };
        assert!(none.covers(&read, &ws()).is_err());
    }

    #[test]
    fn a_before_side_effects_checkpoint_asks_for_mutations_only() {
        let ceiling = NodeCeiling {
            node: "n".into(),
            permissions: vec![Permission::parse("fs:write:docs/*").unwrap()],
            workspace: "read_only".into(),
            before_side_effects: Some("pre".into()),
        };
        let read = Action::FsRead {
            path: CanonicalPath::from_normalized("/w/docs/a.md").unwrap(),
        };
        let cases = [
            (Verdict::Allow, write("/w/docs/a.md"), Verdict::Ask),
            (Verdict::Ask, write("/w/docs/a.md"), Verdict::Ask),
            (Verdict::Deny, write("/w/docs/a.md"), Verdict::Deny),
            (Verdict::Allow, write("/w/src/a.rs"), Verdict::Deny),
            (Verdict::Allow, read, Verdict::Allow),
        ];
        for (policy, action, want) in cases {
            let got = ceiling.narrow(verdict(policy), &action, &ws());
            assert_eq!((policy, got.verdict), (policy, want), "{action:?}");
        }
        let asked = ceiling.narrow(verdict(Verdict::Allow), &write("/w/docs/a.md"), &ws());
        assert_eq!(asked.reasons[0].policy, "graph:n");
    }

    #[test]
    fn permissions_parse_and_globs_match() {
        assert_eq!(Permission::parse("fs"), None);
        assert_eq!(Permission::parse("disk:read"), None);
        assert_eq!(
            Permission::parse("shell:exec:cargo *").unwrap().text(),
            "shell:exec:cargo *"
        );
        assert!(glob_matches("src/*", "src/a/b.rs"));
        assert!(glob_matches("*.md", "README.md"));
        assert!(!glob_matches("docs/*", "src/docs/a"));
        assert!(glob_matches("cargo test", "cargo test"));
        assert!(!glob_matches("cargo test", "cargo test --all"));
    }
}
