//! The effect ring: the one path from a model's tool call to the world. In order: the
//! principal comes from the log, the call is normalized into actions, the decision point
//! rules on each, a person is asked where policy says so (parking the run durably when nobody
//! can answer now), and only then is an executor reached, with `Authorized` values that only
//! this module makes. Every step is journaled before the next one depends on it, and every
//! refusal is a typed event.

use std::cell::Cell;

use serde_json::{Value, json};
use warrant_core::{
    Action, CanonicalPath, Clock, Digest, IdSource, Principal, PrincipalKind, RequestId, RiskClass,
    RunId, Timestamp, digest_of,
};
use warrant_store::{
    Append, EventDraft, EventStore, NewRun, RequestUpdate, RunStatus, Sealer, StoredEvent,
};

use warrant_audit::PublicKeys;

use crate::approval::{self, ApproverKey, BoundInput, ProofInput};
use crate::authority::{ApprovalRules, RejectReason, bound_digest, session_pattern};
use crate::authorized::Authorized;
use crate::confidential::Confidential;
use crate::error::KernelError;
use crate::events::{
    Approver, Binding, CallRecord, DeniedBy, EVENT_VERSION, InDoubtOutcome, ModelRequest, Outcome,
    ReasonRecord, Resolution, RunEvent, RunLimit, RunSettings, Scope, Verdict, Via,
};
use crate::state::{RequestAnswer, RequestKind, RequestState, RunState};
use crate::tool::{EffectResult, PENDING_JUDGEMENT, PendingJudgement, ToolEnv, ToolRegistry};

/// What the policy decision point says about one action.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyVerdict {
    pub verdict: Verdict,
    pub risk: RiskClass,
    pub reasons: Vec<ReasonRecord>,
    pub errors: Vec<String>,
}

/// The policy decision point as the ring sees it (warrant-policy implements it).
pub trait DecisionPoint {
    /// The verdict on `action` by `principal` in `workspace`: a function of these alone for
    /// the decision point's life (its policy set, directory and rules are fixed when it is
    /// made), so a ring may give the same request the verdict it already had (it does for a
    /// run's model calls, asked before every turn).
    fn decide(
        &self,
        principal: &Principal,
        action: &Action,
        workspace: &CanonicalPath,
    ) -> PolicyVerdict;
    fn digest(&self) -> Digest;

    /// Risk rules and the identity directory, when the caller has them
    /// ([`crate::authority::Governed`]); `None` means the defaults and no directory.
    fn approval_rules(&self) -> Option<&ApprovalRules> {
        None
    }
}

/// A person's answer to a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Approve(Scope),
    Deny { reason: String },
}

/// What the person at the run's terminal is shown.
#[derive(Clone, Debug)]
pub struct PromptView<'a> {
    pub run: &'a RunId,
    pub request: &'a RequestId,
    pub risk: RiskClass,
    pub title: &'a str,
    pub body: &'a str,
    pub digest: &'a Digest,
    pub reasons: &'a [ReasonRecord],
    /// What a `session` answer would cover, worded for the person: class, pattern, this run.
    pub session: &'a str,
    /// Who the request is put to (and why, when it fell through).
    pub asked: &'a str,
}

/// Asks a person at the run's own terminal. Returns `None` when nobody can be asked now (no
/// terminal): the run then parks and waits for `warrant approve` / `deny`.
pub trait Prompter {
    fn ask(&mut self, view: &PromptView<'_>) -> Option<(Answer, Principal)>;
}

/// Never asks: every approval parks the run.
#[derive(Debug, Default)]
pub struct NoPrompter;

impl Prompter for NoPrompter {
    fn ask(&mut self, _view: &PromptView<'_>) -> Option<(Answer, Principal)> {
        None
    }
}

/// Sees every event as it is committed (the CLI prints them).
pub trait Observer {
    fn committed(&self, stored: &StoredEvent, event: &RunEvent);

    /// Called just before events are appended (fault injection uses it to die at that point).
    fn before_append(&self, _events: &[RunEvent]) {}

    /// The model's answer text as it streams in, before it is journaled whole with
    /// `model_responded`. A front end may show it; nothing is recorded from here.
    fn streamed(&self, _text: &str) {}
}

#[derive(Debug, Default)]
pub struct Silent;

impl Observer for Silent {
    fn committed(&self, _stored: &StoredEvent, _event: &RunEvent) {}
}

/// How processing one call ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallStep {
    /// The call has a result (completed, refused or denied).
    Done,
    /// Waiting for a person; the run is parked durably.
    Parked(RequestId),
}

/// The effect ring. Built only by [`Ring::new`] from [`RingParts`], which names every control;
/// its fields are the kernel's own.
pub struct Ring<'a> {
    pub(crate) store: &'a dyn EventStore,
    pub(crate) sealer: &'a dyn Sealer,
    pub(crate) pdp: &'a dyn DecisionPoint,
    pub(crate) ids: &'a dyn IdSource,
    pub(crate) clock: &'a dyn Clock,
    /// The installation secret approvals are proven under.
    pub(crate) secret: &'a [u8],
    pub(crate) observer: &'a dyn Observer,
    /// The fencing token of the lease this process holds on the run it drives; every append
    /// presents it. `None` for writers that do not drive the run (approve, deny, cancel).
    pub(crate) fence: Cell<Option<u64>>,
    /// The run whose step last read the kill switch and found none, and when: that read stands
    /// for the one right before the step's effect when nobody was asked in between (see
    /// [`Ring::halt_before_effect`]).
    pub(crate) clear_read: std::cell::RefCell<Option<(RunId, std::time::Instant)>>,
    /// Tests' negative control only: the clear read survives a person's answer.
    pub(crate) keep_clear_read: Cell<bool>,
    /// The run whose call, not yet started, left its stop check to its first commit: every
    /// append of the call until its effect is recorded as started commits only if no kill
    /// switch covers the run and no cancellation reaches it, as the append's own transaction
    /// sees them (`EventStore::append_unless_stopped`). The step then needs no read of its
    /// own, and nothing can be set between a read and the commit the effect starts behind.
    pub(crate) stops_in_commit: std::cell::RefCell<Option<RunId>>,
    /// Tests' negative control only: the appends of a call leave the stop check out.
    pub(crate) unguarded_commits: Cell<bool>,
    /// The run whose effect's completion committed with no switch or cancellation stopping it,
    /// and when: that read stands for the next step's when it is a model step that follows
    /// within [`CLEAR_READ_STANDS`](envelope::CLEAR_READ_STANDS) (see [`Ring::step_signals`]).
    pub(crate) commit_read: std::cell::RefCell<Option<(RunId, std::time::Instant)>>,
    /// Set by the person's Ctrl-C in a chat session: a running effect stops (its process group
    /// is stopped) and the turn ends waiting for the next message. `None` outside a session.
    pub(crate) interrupt: std::cell::RefCell<Option<std::sync::Arc<std::sync::atomic::AtomicBool>>>,
    /// The installation's public keys (current and retired): a run is folded to be acted on
    /// only after its events were checked against the records they signed.
    pub(crate) keys: &'a PublicKeys,
    pub(crate) confidential: &'a dyn Confidential,
    pub(crate) tools: &'a dyn ToolRegistry,
    pub(crate) budgets: &'a crate::ModelRules,
    pub(crate) guard: crate::GuardSettings,
    pub(crate) spawner: Option<&'a dyn crate::tool::Spawner>,
    /// The decision point's last verdict on a model call, with the request it answered: a run
    /// asks before every turn, and the same request gets the same verdict (see
    /// [`DecisionPoint::decide`]).
    pub(crate) model_call_verdict:
        std::cell::RefCell<Option<(Principal, Action, CanonicalPath, PolicyVerdict)>>,
}

/// Everything a ring is made of. It has no `Default` and every field is required, so whoever
/// builds a ring names each control: a new one added here breaks every construction until it
/// is wired.
#[derive(Clone, Copy)]
pub struct RingParts<'a> {
    /// The journal; every append is one transaction with its audit records.
    pub store: &'a dyn EventStore,
    /// Audit delivery's first step: seals each event's record into the outbox, in the
    /// transaction of the event.
    pub sealer: &'a dyn Sealer,
    /// The decision point every action passes (the host's is the governed one: policy, risk
    /// rules and the identity directory).
    pub pdp: &'a dyn DecisionPoint,
    pub ids: &'a dyn IdSource,
    pub clock: &'a dyn Clock,
    /// The installation secret approvals are proven under.
    pub secret: &'a [u8],
    pub observer: &'a dyn Observer,
    /// The keys a run's journal is checked against before a fold that feeds the ring.
    pub keys: &'a PublicKeys,
    /// What the journal must not hold in the clear: every event is sealed by it before it is
    /// stored and opened by it when the ring folds a run ([`crate::confidential`]).
    pub confidential: &'a dyn Confidential,
    /// The run's tools, behind its menu and result redaction (the host's `Toolbox`).
    pub tools: &'a dyn ToolRegistry,
    /// Budgets and prices every model call is gated by.
    pub budgets: &'a crate::ModelRules,
    /// The prompt guard's switches for every model request.
    pub guard: crate::GuardSettings,
    /// Starts and drives subagents (`agent.spawn`); `None`: a spawn is refused (W-SPAWN-004).
    pub spawner: Option<&'a dyn crate::tool::Spawner>,
}

impl std::fmt::Debug for RingParts<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingParts").finish_non_exhaustive()
    }
}

impl<'a> Ring<'a> {
    /// The one way to build a ring (a test scans the workspace for a second one).
    pub fn new(parts: RingParts<'a>) -> Self {
        let RingParts {
            store,
            sealer,
            pdp,
            ids,
            clock,
            secret,
            observer,
            keys,
            confidential,
            tools,
            budgets,
            guard,
            spawner,
        } = parts;
        Ring {
            store,
            sealer,
            pdp,
            ids,
            clock,
            secret,
            observer,
            fence: Cell::new(None),
            clear_read: std::cell::RefCell::new(None),
            keep_clear_read: Cell::new(false),
            stops_in_commit: std::cell::RefCell::new(None),
            unguarded_commits: Cell::new(false),
            commit_read: std::cell::RefCell::new(None),
            interrupt: std::cell::RefCell::new(None),
            keys,
            confidential,
            tools,
            budgets,
            guard,
            spawner,
            model_call_verdict: std::cell::RefCell::new(None),
        }
    }

    /// The parts this ring was built from, for tests that build a variant of it (another clock,
    /// another decision point).
    #[cfg(feature = "testing")]
    pub fn parts(&self) -> RingParts<'a> {
        RingParts {
            store: self.store,
            sealer: self.sealer,
            pdp: self.pdp,
            ids: self.ids,
            clock: self.clock,
            secret: self.secret,
            observer: self.observer,
            keys: self.keys,
            confidential: self.confidential,
            tools: self.tools,
            budgets: self.budgets,
            guard: self.guard,
            spawner: self.spawner,
        }
    }

    /// The run's tools (what the model is offered and what a call runs).
    pub fn tools(&self) -> &'a dyn ToolRegistry {
        self.tools
    }

    /// Budgets and prices of model calls.
    pub fn budgets(&self) -> &'a crate::ModelRules {
        self.budgets
    }

    /// The prompt guard's switches.
    pub fn guard(&self) -> crate::GuardSettings {
        self.guard
    }

    /// The ring's clock: deadlines and expiry are read from it.
    pub fn clock(&self) -> &'a dyn Clock {
        self.clock
    }

    /// Presents `token` (the lease this process holds on the run it drives) on every append
    /// from now on; `None` once the lease is given back.
    pub fn hold_fence(&self, token: Option<u64>) {
        self.fence.set(token);
    }

    /// Hands the model's answer text, as it streams in, to the observer.
    pub fn stream_text(&self, text: &str) {
        self.observer.streamed(text);
    }

    /// Watches `flag` (a person's Ctrl-C) while this ring drives a session.
    pub fn watch_interrupt(&self, flag: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>) {
        *self.interrupt.borrow_mut() = flag;
    }

    /// Whether the person asked to stop the current turn (and takes the request: it is
    /// answered once).
    pub fn take_interrupt(&self) -> bool {
        self.interrupt
            .borrow()
            .as_ref()
            .is_some_and(|f| f.swap(false, std::sync::atomic::Ordering::SeqCst))
    }

    /// Whether the person asked to stop the current turn (without taking the request).
    pub fn interrupt_requested(&self) -> bool {
        self.interrupt
            .borrow()
            .as_ref()
            .is_some_and(|f| f.load(std::sync::atomic::Ordering::SeqCst))
    }
}

impl std::fmt::Debug for Ring<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring").finish_non_exhaustive()
    }
}

#[derive(Debug, Clone)]
pub struct NewRunSpec {
    /// Queued for a worker (`submit`) rather than driven by this process.
    pub queued: bool,
    pub principal: Principal,
    pub task: String,
    pub model: String,
    pub workspace: CanonicalPath,
    pub settings: RunSettings,
    pub tools: Vec<String>,
    pub tools_digest: Option<Digest>,
    pub profiles_digest: Option<Digest>,
}

mod answers;
mod calls;
mod delegated;
mod effects;
mod elicitation;
mod envelope;
mod facts;
mod graph;
mod lifecycle;
mod session;

pub use envelope::{above_ceiling, reachable};
pub(crate) use facts::audit_facts;

/// What a request listing shows of an approval request.
/// Undoes staged steps: their call as it was before them, and the sequence number they took.
/// Puts `state` back to what the journal holds, undoing what `staged` had applied.
fn put_back(state: &mut RunState, staged: crate::state::Staged) {
    if let Some(before) = staged.before_answer {
        *state = *before;
    } else if let Some((index, call, first)) = staged.undo {
        state.calls[index] = call;
        state.next_seq = first;
    }
}

fn request_summary(
    state: &RunState,
    call_id: &str,
    tool: &str,
    risk: RiskClass,
    title: &str,
    digest: &Digest,
    asked: &crate::AskedOf,
) -> Value {
    crate::RequestSummary::Approval(crate::ApprovalSummary {
        run: state.run.clone(),
        call: call_id.to_owned(),
        tool: tool.to_owned(),
        risk,
        title: title.to_owned(),
        digest: digest.clone(),
        requested_by: state.principal.actor.clone(),
        requester: asked.requester.clone(),
        asked_of: Some(asked.describe()),
        approvers: asked.people.clone(),
        team: asked.team.clone(),
        admins: asked.admins,
        fell_through: asked.fell_through.clone(),
    })
    .to_value()
}

/// How the prompt words a `session` answer: the class, exactly what it covers (verb, recursive
/// or not, resource pattern), this run only.
fn session_wording(risk: RiskClass, actions: &[Action], rules: &ApprovalRules) -> String {
    let mut patterns: Vec<String> = actions.iter().map(session_pattern).collect();
    patterns.sort();
    patterns.dedup();
    let secs = rules.expiry_secs(risk, true);
    let expiry = if secs.is_multiple_of(3600) {
        format!("{}h", secs / 3600)
    } else if secs.is_multiple_of(60) {
        format!("{}m", secs / 60)
    } else {
        format!("{secs}s")
    };
    format!(
        "{} actions matching exactly {}; this run only, for at most {expiry}; never saved as policy (to allow it for good, add a permit under .warrant/policies/)",
        risk.as_str(),
        patterns
            .iter()
            .map(|p| format!("`{p}`"))
            .collect::<Vec<_>>()
            .join(" or ")
    )
}

fn severity(v: Verdict) -> u8 {
    match v {
        Verdict::Allow => 0,
        Verdict::Ask => 1,
        Verdict::Deny => 2,
    }
}

pub fn outcome_label(o: &Outcome) -> String {
    match o {
        Outcome::Completed => "completed".into(),
        Outcome::Failed { code, message } => format!("failed: {code} {message}"),
        Outcome::Stopped { reason } => format!("stopped: {reason}"),
    }
}

/// `fs.read /w/.env` — how an action reads in messages.
pub fn describe(a: &Action) -> String {
    format!("{} {}", a.verb().as_str(), a.target())
}

fn denial_message(
    actions: &[Action],
    reasons: &[ReasonRecord],
    workspace: &CanonicalPath,
) -> String {
    let what = actions.iter().map(describe).collect::<Vec<_>>().join("; ");
    if reasons.is_empty() {
        let outside = actions.iter().any(|a| match a {
            Action::FsRead { path }
            | Action::FsList { path }
            | Action::FsSearch { path, .. }
            | Action::FsWrite { path, .. }
            | Action::FsCreate { path, .. }
            | Action::FsDelete { path, .. } => !path.starts_with(workspace),
            Action::ShellExec { cwd, .. } => !cwd.starts_with(workspace),
            Action::ProviderCall { .. }
            | Action::MemoryWrite { .. }
            | Action::MemoryRead { .. }
            | Action::MemoryDelete { .. }
            | Action::MemoryPropose { .. }
            | Action::McpCall { .. }
            | Action::AgentSpawn { .. }
            | Action::MemoryPublish { .. } => false,
            Action::ArtifactCreate { path, .. } => !path.starts_with(workspace),
            Action::GitRead { repo, .. }
            | Action::GitCommit { repo, .. }
            | Action::GitBranch { repo, .. }
            | Action::GitCheckout { repo, .. }
            | Action::GitPush { repo, .. } => !repo.starts_with(workspace),
            Action::WebFetch { .. } | Action::CatalogList { .. } | Action::CatalogRead { .. } => {
                false
            }
        });
        if outside {
            format!(
                "denied: {what}: no policy permits it, and it is outside the workspace {workspace}"
            )
        } else {
            format!("denied: {what}: no policy permits it")
        }
    } else {
        let why = reasons
            .iter()
            .map(|r| match &r.reason {
                Some(text) => format!("{} ({text})", r.policy),
                None => r.policy.clone(),
            })
            .collect::<Vec<_>>()
            .join("; ");
        format!("denied: {what}: {why}")
    }
}
