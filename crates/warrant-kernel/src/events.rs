//! The run log's vocabulary: typed, versioned events. A run is nothing but a list of these;
//! its state is their fold ([`crate::state`]). Stored as `(kind, version, payload)` where kind
//! is the snake_case variant name and payload the variant's fields.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use warrant_core::{
    Action, CanonicalPath, Digest, Principal, RequestId, RiskClass, RunId, Timestamp,
};

pub use crate::authority::{AskedOf, RejectReason};
use warrant_store::StoredEvent;

use crate::asks::{Ask, Reply, RequestTtls};
use crate::error::KernelError;

/// The event schema version this build writes. Older versions are read; newer are refused.
pub const EVENT_VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    pub max_denials: u32,
    pub max_turns: u32,
    /// The run stops at its next effect boundary after this instant (a running command is
    /// killed). Logs written before deadlines existed read as `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Timestamp>,
    /// How long requests the agent raises wait for a person, per kind (default 24 h each).
    /// Boxed: it is rarely set and keeps `RunStarted` small.
    #[serde(default, skip_serializing_if = "default_ttls")]
    pub requests: Box<RequestTtls>,
    /// The run stops before its tool call number `max_tool_calls + 1` is processed. Logs
    /// written before this cap existed read as `None` (no cap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tool_calls: Option<u32>,
    /// Set for a chat session: the run waits for its person's next message instead of ending
    /// when the model answers without a call. Absent for a one-task run (and in older logs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionSettings>,
    /// The spawn envelope the run works under and, for a subagent, the run and call that
    /// started it. Absent in logs written before subagents (such a run cannot spawn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawn: Option<Box<SpawnSettings>>,
    /// The Open Agent Profile the run works under (`run --profile`), pinned when it starts;
    /// a subagent carries its parent's. Absent for a run without one (and in older logs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_profile: Option<Box<crate::agent_profile::ProfilePin>>,
    /// The standing in the identity directory of the person the run acts for, when it
    /// started: losing any of it (leaving the directory, a role, a team, the approver key)
    /// stops the run at its next step. Absent without a directory, and in older logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standing: Option<Box<warrant_core::directory::Standing>>,
    /// `[rate]` as it was when the run started: the token buckets its actions draw from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Box<warrant_core::config::RateConfig>>,
    /// The worst risk class the run may reach (`[run] ceiling`, the menu's); an action above
    /// it is refused (W-ENVELOPE-006).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling: Option<RiskClass>,
    /// Strict mode (`[security] strict`) as it was when the run started: a resume whose tool
    /// catalogue or policy set differs from the one the run logged is refused (W-STRICT-002)
    /// instead of being accepted and recorded. Absent (false) for a run not started strict.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub strict: bool,
    /// For a run driven under a delegation token: what the token grants and its digest (the
    /// token itself is never written). Every effect must also be within it, and the token must
    /// be unexpired and unrevoked at that effect. Absent for a run under its own authority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegation: Option<Box<DelegationSettings>>,
    /// The Agentic Graph the run executes (`warrant graph run`), pinned when it starts.
    /// Absent for any other run (and in older logs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph: Option<Box<crate::graph::GraphPin>>,
    /// The Agent Skills the run was offered (their catalog), pinned when it starts. Empty
    /// without usable skills (and in older logs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<crate::skills::SkillPin>,
}

/// The delegation a run acts under (see [`crate::delegation`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelegationSettings {
    /// SHA-256 of the token as presented (for a subagent, of the token minted for it).
    pub digest: Digest,
    pub grant: crate::delegation::Grant,
    /// For a subagent's token: the ids of every token above it, nearest first (its grant names
    /// only the nearest); revoking any of them stops the subagent's next effect.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub above: Vec<String>,
}

impl DelegationSettings {
    /// Every token id whose revocation stops a run under this one: its own, its grant's
    /// parent, and every one above.
    pub fn ids(&self) -> impl Iterator<Item = &String> {
        std::iter::once(&self.grant.id)
            .chain(self.grant.parent.iter())
            .chain(self.above.iter())
    }
}

/// A run's place among subagents, fixed when it starts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpawnSettings {
    /// For a subagent: the run and call that started it. `None` for a top-level run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentLink>,
    /// 0 for a top-level run, its parent's plus one for a subagent.
    pub depth: u32,
    /// No subagent deeper than this (`[run] max_depth`).
    pub max_depth: u32,
    /// At most this many subagents started by this run (`[run] max_children`).
    pub max_children: u32,
    /// At most this many subagents running at once in this run's tree (an agent profile's
    /// `spec.runtime.subagents.max_concurrent`). Subagents run inside their parent's call, so
    /// a subagent at depth `d` runs while the `d - 1` above it wait for it: `d` are running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent: Option<u32>,
    /// The subprocess profile every command of this run is held to (a subagent's `profile`);
    /// `None`: any profile, as policy decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The share of its parent's run budget a subagent was given (tokens, cost): its own
    /// run-scope limit, on top of the configured one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<warrant_core::config::BudgetLimit>,
    /// For a run that answers an MCP server's sampling request made during its parent's call:
    /// what the server asked. Its messages are the server's words, so they reach the model
    /// fenced as untrusted, never as the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<Box<SamplingAsk>>,
}

/// What an MCP server asked the model for (`sampling/createMessage`), as the run that answers
/// it records it: the text of its messages (other content is refused before a run starts).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SamplingAsk {
    /// The configured name of the server that asked.
    pub server: String,
    /// The system prompt it proposed, if any: shown to the model as part of its fenced request,
    /// never as Warrant's system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// Its messages in order.
    pub messages: Vec<SampledMessage>,
    /// The most tokens it asked for.
    pub max_tokens: u32,
}

/// One message of a sampling request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampledMessage {
    /// `user` or `assistant`.
    pub role: String,
    pub text: String,
}

/// The run and call that started a subagent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParentLink {
    pub run: RunId,
    pub call: String,
}

/// How a chat session keeps its history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSettings {
    /// Estimated tokens of history (about four characters each) beyond which the oldest part
    /// is compacted into a summary before the next model call.
    pub history_tokens: u64,
}

/// What a person's Ctrl-C stopped in a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Interrupted {
    /// A model answer, cut off as it streamed in.
    ModelCall,
    /// A running effect (its process group was stopped) or the calls of the turn not yet run.
    Effect,
}

impl Interrupted {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ModelCall => "model_call",
            Self::Effect => "effect",
        }
    }
}

fn default_ttls(t: &RequestTtls) -> bool {
    t.is_default()
}

/// Why the autonomy envelope stopped a run, named in [`RunEvent::Halted`]: the run ends
/// stopped in the same append, and nothing is retried.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "control", rename_all = "snake_case")]
pub enum Halt {
    /// A kill switch covering the run is set (`warrant kill`).
    KillSwitch {
        #[serde(flatten)]
        switch: warrant_store::KillSwitch,
    },
    /// The kill switch could not be read, so the run stops rather than act unchecked.
    KillSwitchUnreadable { error: String },
    /// The person the run acts for lost standing in the identity directory since it started.
    AuthorityLost { person: String, lost: String },
    /// A strict run was resumed under a tool catalogue or policy set other than the one it
    /// logged: replaying it there could decide differently, so it stops instead.
    ReplayDiverged {
        /// `tools` or `policy`.
        what: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<Digest>,
        to: Digest,
    },
    /// The run's tools can reach a worse risk class than its ceiling (the static check, before
    /// a step): each offending tool with the worst class it declares.
    CeilingExceeded {
        ceiling: warrant_core::RiskClass,
        tools: Vec<ToolReach>,
    },
}

/// A tool and the worst risk class it can reach (its declaration, `irreversible` when it
/// declares none).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolReach {
    pub tool: String,
    pub class: warrant_core::RiskClass,
}

impl Halt {
    /// Stable error code of the refusal.
    pub fn code(&self) -> &'static str {
        match self {
            Self::KillSwitch { .. } => "W-ENVELOPE-001",
            Self::KillSwitchUnreadable { .. } => "W-ENVELOPE-002",
            Self::AuthorityLost { .. } => "W-AUTHORITY-001",
            Self::CeilingExceeded { .. } => "W-ENVELOPE-007",
            Self::ReplayDiverged { .. } => "W-STRICT-002",
        }
    }

    /// The run's end reason, in words.
    pub fn reason(&self) -> String {
        match self {
            Self::KillSwitch { switch } => format!(
                "stopped by the kill switch ({}) set by {} at {}: {}",
                switch.scope.describe(),
                switch.set_by,
                switch.set_at.rfc3339(),
                switch.reason
            ),
            Self::KillSwitchUnreadable { error } => format!(
                "stopped because the kill switch could not be read ({error}); the run does not act unchecked"
            ),
            Self::AuthorityLost { lost, .. } => format!(
                "stopped because {lost} since the run started; nothing runs as them any more"
            ),
            Self::ReplayDiverged { what, .. } => format!(
                "stopped because the run is strict and was resumed under another {} than the one it logged (replay divergence); nothing ran. Start the work again as a new run",
                if what == "tools" {
                    "tool catalogue"
                } else {
                    "policy set"
                }
            ),
            Self::CeilingExceeded { ceiling, tools } => format!(
                "refused before its first step: the run's ceiling is `{}`, and its tools can reach worse: {}. Nothing ran; narrow the menu (`[menus.NAME]`) or raise the ceiling, and see `warrant verify`",
                ceiling.as_str(),
                tools
                    .iter()
                    .map(|t| format!("{} ({})", t.tool, t.class.as_str()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// A cap on a run's work, named in [`RunEvent::LimitReached`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunLimit {
    /// Model turns (`[run] max_turns`).
    Turns,
    /// Tool calls (`[run] max_tool_calls`).
    ToolCalls,
}

impl RunLimit {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Turns => "turns",
            Self::ToolCalls => "tool_calls",
        }
    }
}

/// What was sent to the model for a turn, after the prompt guard passed it: the digest of
/// exactly that request (conversation and tools, JCS) and the fences it carried. The text
/// itself is rebuilt from the log (`warrant_agent::prompt`), deterministically.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelRequest {
    pub digest: Digest,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fences: Vec<FenceRecord>,
}

/// One fenced piece of untrusted content in a model request, as journaled: where it came from
/// and the digest of the fenced text that was sent (the text itself is rebuilt from the log).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FenceRecord {
    pub source: String,
    pub digest: Digest,
}

/// How a person resolved an effect that was in doubt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Resolution {
    /// It happened; record it as done without running it again.
    Completed,
    /// It did not happen (or is safe to repeat); run it again.
    Retry,
    /// Record it as failed; the model is told.
    Failed,
}

impl Resolution {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Retry => "retry",
            Self::Failed => "failed",
        }
    }
}

/// The result an in-doubt effect completes with once a person resolved it, journaled as its
/// `effect_completed` result for the model to read: how it was resolved, by whom, and what that
/// means for the model (the output of an effect nobody saw finish was never recorded).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InDoubtOutcome {
    pub resolved: Resolution,
    /// The actor who resolved it; `None` (serialized `null`) when the request holds no
    /// resolution.
    pub by: Option<String>,
    pub note: String,
}

impl InDoubtOutcome {
    /// As the `effect_completed` result carries it.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    pub id: String,
    pub tool: String,
    pub args: Value,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Allow,
    Ask,
    Deny,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }
}

/// One policy that determined a decision, as recorded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReasonRecord {
    pub policy: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Once,
    Session,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Once => "once",
            Self::Session => "session",
        }
    }
}

/// Who answered a request, as Warrant established them (never a claimed name).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approver {
    pub tenant: String,
    pub actor: String,
    /// `terminal` when answered at the run's own prompt, `cli` from `warrant approve`, `command`
    /// for a refused answer from a process a run started ([`Via`]).
    pub via: String,
}

/// Where an answer came from, as the front end established it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Via {
    /// The run's own prompt, read by the process driving the run from its own terminal (no
    /// command has that terminal: commands run in a session of their own with no input).
    Terminal,
    /// Another process of a person (`warrant approve`, `warrant requests answer`).
    Cli,
    /// The local web interface (`warrant web`), a person's own process signed in with the
    /// launch's token; authenticated like `Cli` (an approver key where the rules ask one).
    Web,
    /// A process that a Warrant run started, or a descendant of one; the evidence says how it
    /// was recognized. Always refused.
    Command(String),
}

impl Via {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Terminal => "terminal",
            Self::Cli => "cli",
            Self::Web => "web",
            Self::Command(_) => "command",
        }
    }
}

/// What a granted approval claims to be bound to, besides digest, approver and scope. The
/// proof covers these; the ring compares them with the run, park and clock at time of use.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    pub run: RunId,
    pub request: RequestId,
    pub park: u64,
    pub expires_at: Timestamp,
}

/// What the person was shown, exactly; the approval binds to `digest`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Presentation {
    pub title: String,
    /// The body as shown: a diff for writes, argv/cwd/profile for commands.
    pub body: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "lowercase")]
pub enum DeniedBy {
    Policy { reasons: Vec<ReasonRecord> },
    Person { approver: Approver, reason: String },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum Outcome {
    Completed,
    Failed { code: String, message: String },
    Stopped { reason: String },
}

/// Whose model-call budget: this run's, the actor's (all their runs) or the tenant's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BudgetScope {
    Run,
    Actor,
    Tenant,
}

impl BudgetScope {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Run => "run",
            Self::Actor => "actor",
            Self::Tenant => "tenant",
        }
    }
}

/// What a budget counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetMetric {
    /// Input plus output tokens.
    Tokens,
    /// US dollars, from the price table.
    CostUsd,
}

impl BudgetMetric {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tokens => "tokens",
            Self::CostUsd => "cost_usd",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RunEvent {
    RunStarted {
        principal: Principal,
        task: String,
        model: String,
        workspace: CanonicalPath,
        policy_digest: Digest,
        settings: RunSettings,
        tools: Vec<String>,
        /// Digest of the tool catalogue the model was offered (absent in older logs).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tools_digest: Option<Digest>,
        /// Digest of the subprocess profiles in force (absent in older logs).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        profiles_digest: Option<Digest>,
    },
    /// On resume, the policy set was no longer the one the run was deciding under; pending
    /// actions are decided again under the new one.
    PolicyChanged {
        from: Digest,
        to: Digest,
        reevaluated: Vec<String>,
    },
    /// On resume, the tool catalogue differed; every completed step's tool was still there.
    ToolsChanged {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<Digest>,
        to: Digest,
    },
    ModelResponded {
        turn: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        calls: Vec<CallRecord>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Value>,
        model: String,
        /// The guarded request this answers (absent in older logs).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request: Option<ModelRequest>,
    },
    /// A tool call a client made directly, not a model: a caller of `warrant mcp serve`
    /// (`client` says which transport and client). It goes through the ring like a model's.
    CallReceived {
        client: String,
        call: CallRecord,
    },
    /// A request to a Warrant server refused before it reached the ring (`warrant mcp serve`
    /// over HTTP: no or an unknown token, a foreign `Host` or `Origin`, a body over the limit).
    /// `status` is the HTTP status answered; `suppressed` counts like refusals not recorded
    /// one by one since the last record (a flood is summarized, not stored per request).
    AccessRefused {
        transport: String,
        status: u16,
        reason: String,
        #[serde(default)]
        suppressed: u64,
    },
    /// A call that never became an action: unknown tool, arguments failing the schema, a path
    /// that cannot be resolved. Nothing ran; the model is told why.
    CallRefused {
        call_id: String,
        tool: String,
        code: String,
        message: String,
    },
    ActionProposed {
        call_id: String,
        tool: String,
        actions: Vec<Action>,
        digest: Digest,
    },
    PolicyDecided {
        call_id: String,
        index: u32,
        action_digest: Digest,
        verdict: Verdict,
        risk: RiskClass,
        reasons: Vec<ReasonRecord>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        errors: Vec<String>,
    },
    ApprovalRequested {
        call_id: String,
        request_id: RequestId,
        digest: Digest,
        risk: RiskClass,
        presentation: Presentation,
        /// When set, `digest` is the bound digest (actions + what was shown + the base state
        /// of what they change) and this is the digest of the actions alone. Absent in older
        /// logs, where `digest` is the actions' digest.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        action_digest: Option<Digest>,
        /// Who the request is put to, and why it fell through to them (absent in older logs).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        asked: Option<AskedOf>,
    },
    ApprovalGranted {
        request_id: RequestId,
        approver: Approver,
        scope: Scope,
        digest: Digest,
        /// HMAC-SHA256 under the installation secret over run, request, park, digest,
        /// approver and scope (and, with a binding, the binding's expiry).
        proof: String,
        /// Run, request, park and expiry the approval claims (absent in older logs).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        binding: Option<Binding>,
        /// Hex Ed25519 signature by the approver's own key over the same message, when the
        /// identity directory registers a key for them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// An approval was refused: at time of use (forged, another run or park, replayed, the
    /// action changed, expired; the person is asked again) or when given (by someone not
    /// eligible, against four eyes, on someone's behalf; the request stays open).
    ApprovalRejected {
        request_id: RequestId,
        reason: RejectReason,
        detail: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        approver: Option<Approver>,
    },
    ApprovalDenied {
        request_id: RequestId,
        approver: Approver,
        reason: String,
    },
    RunParked {
        request_id: RequestId,
    },
    RunResumed {
        by: String,
    },
    EffectStarted {
        call_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        approval: Option<RequestId>,
        /// Set when a session-scoped approval, not a fresh one, let this call through.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_grant: Option<RequestId>,
    },
    EffectCompleted {
        call_id: String,
        ok: bool,
        /// What the model sees (bounded by the executor), journaled so replay never re-runs.
        result: Value,
    },
    EffectDenied {
        call_id: String,
        denied: DeniedBy,
        message: String,
    },
    /// The effect ran, but part of what it did waits for a person before it lands (a contained
    /// command's destructive changeset): `result` is its outcome so far; the approval request
    /// that follows in the same commit shows what waits. `effect_completed` follows once it
    /// was settled.
    EffectJudging {
        call_id: String,
        ok: bool,
        result: Value,
    },
    /// A non-idempotent effect started before an interruption and has no journaled result:
    /// nobody knows whether it happened. The run parks until a person resolves it.
    EffectInDoubt {
        call_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_id: Option<RequestId>,
    },
    InDoubtResolved {
        call_id: String,
        request_id: RequestId,
        resolution: Resolution,
        by: Approver,
        /// HMAC under the installation secret over run, request, park, digest, person and
        /// resolution, like an approval's.
        proof: String,
    },
    /// The audit outbox was over its bound with `on_full = "drop"`: records `from..=to` will
    /// never reach `sink`. The marker itself is audited, so the gap is never silent.
    AuditGap {
        sink: String,
        from: u64,
        to: u64,
    },
    /// A cap of the run was reached; the run ends stopped in the same append.
    LimitReached {
        limit: RunLimit,
        max: u32,
    },
    /// The autonomy envelope refused the run's next effect; the run ends stopped in the same
    /// append.
    Halted {
        code: String,
        halt: Halt,
        /// Requests of the run that were still open, cancelled with the same reason.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        cancelled: Vec<RequestId>,
    },
    RunEnded {
        outcome: Outcome,
    },
    /// The agent asked a person for something (an answer, a secret, a resource); the run
    /// parks until a reply, or until `expires_at`.
    RequestRaised {
        call_id: String,
        request_id: RequestId,
        ask: Ask,
        expires_at: Timestamp,
        /// Who is asked: `user:NAME`, `team:NAME`, `admins`.
        asked_of: Vec<String>,
    },
    /// A person replied (a secret reply holds only its handle).
    RequestReplied {
        call_id: String,
        request_id: RequestId,
        by: Approver,
        reply: Reply,
    },
    /// Nobody replied in time; the agent is told so.
    RequestExpired {
        call_id: String,
        request_id: RequestId,
        expires_at: Timestamp,
    },
    /// The ring refused a model call before it was made (`provider.call` not allowed for this
    /// principal, or a cost budget that cannot be priced). The run ends with it.
    ModelCallDenied {
        turn: u32,
        action: Action,
        verdict: Verdict,
        reasons: Vec<ReasonRecord>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        errors: Vec<String>,
        message: String,
    },
    /// A budget was used up before a model call, or crossed while an answer streamed in, which
    /// was then cut off. `usage` is what the cut-off answer had cost (counted by the server,
    /// or estimated) and counts toward every total. The run ends with it.
    BudgetExceeded {
        turn: u32,
        scope: BudgetScope,
        metric: BudgetMetric,
        limit: f64,
        /// Used in that scope, including the cut-off answer.
        used: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Value>,
        message: String,
    },
    /// A session's model answered without asking for a call (or the person stopped the turn):
    /// the run waits for its person's next message, durably, like any park.
    AwaitingMessage {
        /// The model turn the next message follows.
        turn: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        interrupted: Option<Interrupted>,
        /// What a model answer cut off by the person had cost.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Value>,
    },
    /// The person's next message in a session, with every control, bidirectional and
    /// zero-width character escaped (each listed in `neutralized` as `U+XXXX`).
    MessageReceived {
        by: String,
        text: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        neutralized: Vec<String>,
    },
    /// Someone other than the session's person tried to continue it: nothing else changed.
    MessageRefused {
        by: String,
        code: String,
        reason: String,
    },
    /// A session's history grew past its budget: the turns before `through_turn` (and the
    /// messages among them) are replaced, in every later prompt, by `summary`, which is
    /// computed from the log alone (the person's words, the model's words, the tools used).
    HistoryCompacted {
        through_turn: u32,
        summary: String,
        /// Digest of the messages the summary replaces, as they were last sent.
        replaced: Digest,
        /// Estimated tokens of the history before, and the budget it was over.
        estimated_tokens: u64,
        budget: u64,
    },
    /// The run's journal did not match its signed audit records when it was folded to be acted
    /// on (resume, a worker's lease, an answer): nothing was done. `code` is the verifier's
    /// (`W-AUDIT-027`..`031`), `seq` the first bad event, `problem` one of `edited`,
    /// `inserted`, `removed`, `reordered`, `record`.
    JournalRejected {
        code: String,
        seq: u64,
        problem: String,
        detail: String,
    },
    /// A step of one node of the run's Agentic Graph: an attempt started (with the node's
    /// permission ceiling), a gate put to a person, an attempt failed, the node's end.
    GraphNode(crate::graph::NodeStep),
}

impl RunEvent {
    pub fn kind(&self) -> &'static str {
        match self {
            Self::RunStarted { .. } => "run_started",
            Self::PolicyChanged { .. } => "policy_changed",
            Self::ToolsChanged { .. } => "tools_changed",
            Self::InDoubtResolved { .. } => "in_doubt_resolved",
            Self::ModelResponded { .. } => "model_responded",
            Self::CallReceived { .. } => "call_received",
            Self::AccessRefused { .. } => "access_refused",
            Self::CallRefused { .. } => "call_refused",
            Self::ActionProposed { .. } => "action_proposed",
            Self::PolicyDecided { .. } => "policy_decided",
            Self::ApprovalRequested { .. } => "approval_requested",
            Self::ApprovalGranted { .. } => "approval_granted",
            Self::ApprovalDenied { .. } => "approval_denied",
            Self::ApprovalRejected { .. } => "approval_rejected",
            Self::RunParked { .. } => "run_parked",
            Self::RunResumed { .. } => "run_resumed",
            Self::EffectStarted { .. } => "effect_started",
            Self::EffectCompleted { .. } => "effect_completed",
            Self::EffectDenied { .. } => "effect_denied",
            Self::EffectJudging { .. } => "effect_judging",
            Self::EffectInDoubt { .. } => "effect_in_doubt",
            Self::AuditGap { .. } => "audit_gap",
            Self::LimitReached { .. } => "limit_reached",
            Self::Halted { .. } => "halted",
            Self::RunEnded { .. } => "run_ended",
            Self::RequestRaised { .. } => "request_raised",
            Self::RequestReplied { .. } => "request_replied",
            Self::RequestExpired { .. } => "request_expired",
            Self::ModelCallDenied { .. } => "model_call_denied",
            Self::BudgetExceeded { .. } => "budget_exceeded",
            Self::JournalRejected { .. } => "journal_rejected",
            Self::AwaitingMessage { .. } => "awaiting_message",
            Self::MessageReceived { .. } => "message_received",
            Self::HistoryCompacted { .. } => "history_compacted",
            Self::MessageRefused { .. } => "message_refused",
            Self::GraphNode(_) => "graph_node",
        }
    }

    /// Payload for the store: the variant's fields without the tag.
    pub fn payload(&self) -> Result<Value, KernelError> {
        let mut v = serde_json::to_value(self).map_err(|e| KernelError::Encode(e.to_string()))?;
        if let Some(map) = v.as_object_mut() {
            map.remove("type");
        }
        Ok(v)
    }

    /// Reads a stored event back; refuses versions newer than this build understands.
    pub fn from_stored(e: &StoredEvent) -> Result<Self, KernelError> {
        if e.version > EVENT_VERSION {
            return Err(KernelError::NewerEvent {
                run: e.run.to_string(),
                seq: e.seq,
                version: e.version,
                supported: EVENT_VERSION,
            });
        }
        let mut payload = e.payload.clone();
        match payload.as_object_mut() {
            Some(map) => {
                map.insert("type".into(), Value::String(e.kind.clone()));
            }
            None => {
                return Err(KernelError::BadEvent {
                    run: e.run.to_string(),
                    seq: e.seq,
                    message: "payload is not an object".into(),
                });
            }
        }
        serde_json::from_value(payload).map_err(|err| KernelError::BadEvent {
            run: e.run.to_string(),
            seq: e.seq,
            message: format!("{} event: {err}", e.kind),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::{InDoubtOutcome, Resolution};

    /// The typed result is serialized exactly as the `json!` block it replaced: same keys, same
    /// order, `by` as `null` when nobody is named.
    #[test]
    fn an_in_doubt_outcome_is_serialized_as_before() {
        let cases = [
            (Resolution::Completed, Some("alice"), "done"),
            (Resolution::Failed, None, "failed"),
            (Resolution::Retry, Some("bob"), "not applied"),
        ];
        for (resolved, by, note) in cases {
            let typed = InDoubtOutcome {
                resolved,
                by: by.map(str::to_owned),
                note: note.to_owned(),
            }
            .to_value();
            let before =
                serde_json::json!({"resolved": Some(resolved.as_str()), "by": by, "note": note});
            assert_eq!(
                serde_json::to_string(&typed).unwrap(),
                serde_json::to_string(&before).unwrap()
            );
        }
        let one = InDoubtOutcome {
            resolved: Resolution::Failed,
            by: None,
            note: "n".to_owned(),
        };
        assert_eq!(
            serde_json::to_string(&one.to_value()).unwrap(),
            r#"{"resolved":"failed","by":null,"note":"n"}"#
        );
    }
}
