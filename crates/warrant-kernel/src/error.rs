use thiserror::Error;
use warrant_core::Coded;
use warrant_store::StoreError;

#[derive(Debug, Error)]
pub enum KernelError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("could not encode an event: {0}")]
    Encode(String),
    #[error(
        "event {seq} of run {run} has version {version}, newer than this warrant reads ({supported}); upgrade warrant"
    )]
    NewerEvent {
        run: String,
        seq: u64,
        version: u32,
        supported: u32,
    },
    #[error("event {seq} of run {run} cannot be read: {message}")]
    BadEvent {
        run: String,
        seq: u64,
        message: String,
    },
    #[error("run {0} does not exist")]
    UnknownRun(String),
    #[error("request {0} does not exist")]
    UnknownRequest(String),
    #[error("request {id} was already answered ({answer}); a request is answered once")]
    AlreadyAnswered { id: String, answer: String },
    #[error("{actor} is an agent; an agent can never approve a request")]
    AgentCannotApprove { actor: String },
    #[error("run {run} has already ended ({outcome}); there is nothing to resume")]
    RunEnded { run: String, outcome: String },
    /// An in-doubt request, answered as if it were an approval.
    #[error(
        "request {id} cannot be answered this way: it asks whether an interrupted effect happened"
    )]
    WrongRequestKind {
        id: String,
        run: warrant_core::RunId,
        step: String,
    },
    #[error(
        "run {run} completed step {call} with tool `{tool}`, which this warrant no longer offers; it cannot be resumed safely with this tool catalogue"
    )]
    ToolMissing {
        run: String,
        call: String,
        tool: String,
    },
    #[error("run {run} has no effect in doubt at step `{step}`")]
    NotInDoubt { run: String, step: String },
    #[error("approval of request {id} refused ({}): {detail}", reason.as_str())]
    ApprovalRefused {
        id: String,
        reason: crate::authority::RejectReason,
        detail: String,
    },
    /// A message for a run that is not a chat session waiting for one.
    #[error("run {run} {why}; a message continues only a chat session that waits for one")]
    NotAwaitingMessage { run: String, why: String },
    /// A message from someone other than the session's person.
    #[error("run {run} is {owner}'s session; {actor} cannot continue it")]
    NotTheSessionsPerson {
        run: String,
        owner: String,
        actor: String,
    },
    #[error("the log of run {run} is inconsistent: {message}")]
    Inconsistent { run: String, message: String },
    /// The run's events are not what its signed audit records say; nothing was done.
    #[error("{error}{}", match recorded {
        Some(seq) => format!("; the refusal is recorded as event {seq} of the run"),
        None => "; the refusal could not be recorded in the run".to_owned(),
    })]
    Journal {
        error: warrant_audit::BindingError,
        /// The seq of the `journal_rejected` event, when it could be appended.
        recorded: Option<u64>,
    },
}

impl Coded for KernelError {
    fn code(&self) -> &'static str {
        match self {
            Self::Store(e) => e.code(),
            Self::Encode(_) => "W-KERNEL-001",
            Self::NewerEvent { .. } => "W-KERNEL-002",
            Self::BadEvent { .. } => "W-KERNEL-003",
            Self::UnknownRun(_) => "W-KERNEL-004",
            Self::UnknownRequest(_) => "W-APPROVAL-001",
            Self::AlreadyAnswered { .. } => "W-APPROVAL-002",
            Self::AgentCannotApprove { .. } => "W-APPROVAL-003",
            Self::RunEnded { .. } => "W-KERNEL-005",
            Self::WrongRequestKind { .. } => "W-APPROVAL-005",
            Self::ToolMissing { .. } => "W-KERNEL-008",
            Self::NotInDoubt { .. } => "W-KERNEL-009",
            Self::Inconsistent { .. } => "W-KERNEL-007",
            Self::NotAwaitingMessage { .. } => "W-SESSION-001",
            Self::NotTheSessionsPerson { .. } => "W-SESSION-003",
            Self::Journal { error, .. } => error.code(),
            Self::ApprovalRefused { reason, .. } => match reason {
                crate::authority::RejectReason::FourEyes => "W-APPROVAL-021",
                crate::authority::RejectReason::OnBehalf => "W-APPROVAL-022",
                crate::authority::RejectReason::Unsigned => "W-APPROVAL-023",
                crate::authority::RejectReason::Unauthenticated => "W-APPROVAL-025",
                crate::authority::RejectReason::FromCommand => "W-APPROVAL-026",
                crate::authority::RejectReason::SecretInAnswer => "W-MCP-015",
                crate::authority::RejectReason::StaleProposal => "W-OAP-011",
                crate::authority::RejectReason::NotEligible
                | crate::authority::RejectReason::Forged
                | crate::authority::RejectReason::OtherRun
                | crate::authority::RejectReason::OtherPark
                | crate::authority::RejectReason::AlreadyUsed
                | crate::authority::RejectReason::ActionChanged
                | crate::authority::RejectReason::Expired => "W-APPROVAL-020",
            },
        }
    }

    fn hint(&self) -> Option<warrant_core::Hint> {
        use warrant_core::Hint;
        match self {
            Self::Store(e) => e.hint(),
            Self::UnknownRun(_) => Some(Hint::ListRuns),
            Self::UnknownRequest(_) => Some(Hint::ListApprovals),
            Self::WrongRequestKind { run, step, .. } => Some(Hint::ResolveInDoubt {
                run: run.clone(),
                step: step.clone(),
            }),
            Self::NotInDoubt { run, .. } => {
                warrant_core::RunId::parse(run).map(|run| Hint::ShowRun { run })
            }
            Self::Journal { error, .. } => error.hint(),
            Self::Encode(_)
            | Self::NewerEvent { .. }
            | Self::BadEvent { .. }
            | Self::AlreadyAnswered { .. }
            | Self::AgentCannotApprove { .. }
            | Self::RunEnded { .. }
            | Self::ToolMissing { .. }
            | Self::ApprovalRefused { .. }
            | Self::Inconsistent { .. } => None,
            Self::NotAwaitingMessage { run, .. } | Self::NotTheSessionsPerson { run, .. } => {
                warrant_core::RunId::parse(run).map(|run| Hint::ShowRun { run })
            }
        }
    }
}

impl KernelError {
    /// Whether this is the ring refusing to act on a journal that does not match its signed
    /// records (a refusal by governance, not a failure).
    pub fn is_journal_refusal(&self) -> bool {
        match self {
            Self::Journal { .. } => true,
            Self::Store(_)
            | Self::Encode(_)
            | Self::NewerEvent { .. }
            | Self::BadEvent { .. }
            | Self::UnknownRun(_)
            | Self::UnknownRequest(_)
            | Self::AlreadyAnswered { .. }
            | Self::AgentCannotApprove { .. }
            | Self::RunEnded { .. }
            | Self::WrongRequestKind { .. }
            | Self::ToolMissing { .. }
            | Self::NotInDoubt { .. }
            | Self::ApprovalRefused { .. }
            | Self::NotAwaitingMessage { .. }
            | Self::NotTheSessionsPerson { .. }
            | Self::Inconsistent { .. } => false,
        }
    }
}
