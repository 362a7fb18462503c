//! The kernel: run events, fold and replay, and the effect ring every action passes.
//! The ring is the only code that constructs [`Authorized`], so the only way to an executor.

pub mod agent_profile;
pub mod approval;
pub mod asks;
pub mod authority;
pub mod authorized;
pub mod confidential;
pub mod delegation;
pub mod elicit;
pub mod error;
pub mod events;
pub mod graph;
pub mod journal;
pub mod model_gate;
pub mod pdp;
pub mod ring;
pub mod skills;
pub mod state;
pub mod summary;
pub mod tool;

pub use asks::{
    Ask, AskError, AskKind, AskState, ProfileChange, Reply, RequestTtls, ResourceKind, SecretSource,
};
pub use authority::{ApprovalRules, Governed};
pub use authorized::Authorized;
pub use confidential::{Confidential, InTheClear};
pub use error::KernelError;
pub use events::{
    Approver, AskedOf, Binding, BudgetMetric, BudgetScope, CallRecord, DelegationSettings,
    DeniedBy, FenceRecord, Halt, InDoubtOutcome, Interrupted, ModelRequest, Outcome, ParentLink,
    Presentation, ReasonRecord, RejectReason, Resolution, RunEvent, RunLimit, RunSettings,
    SampledMessage, SamplingAsk, Scope, SessionSettings, SpawnSettings, ToolReach, Verdict, Via,
};
pub use model_gate::{
    Crossing, GuardSettings, Headroom, ModelGate, ModelRules, ModelUsage, USAGE_KINDS,
    fold_budget_totals, recorded_usage,
};
pub use ring::{
    Answer, CallStep, DecisionPoint, NewRunSpec, NoPrompter, Observer, PolicyVerdict, PromptView,
    Prompter, Ring, RingParts, Silent, above_ceiling, reachable,
};
pub use state::{
    CallResult, CallState, Compaction, PersonMessage, RequestAnswer, RequestKind, RequestState,
    RunState,
};
pub use summary::{ApprovalSummary, AskedSummary, InDoubtSummary, RequestSummary};
pub use tool::{
    EffectResult, NoPeerAsks, PENDING_JUDGEMENT, PeerAsks, PendingJudgement, ReadFilter, Refusal,
    RunContext, Sampled, SpawnOutcome, Spawner, StopCheck, Tool, ToolEnv, ToolRegistry,
};
