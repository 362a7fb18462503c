//! What the ring needs from a tool. Tools live in warrant-tools; they describe actions and
//! run executors, but an executor only accepts `Authorized` values, which only the ring makes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use warrant_core::config::ProfileConfig;
use warrant_core::{Action, CanonicalPath, RiskClass, ToolSpec};

use crate::asks::Ask;
use crate::authorized::Authorized;
use crate::events::Presentation;

/// Why a call could not become an action (nothing ran).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub code: String,
    pub message: String,
}

impl Refusal {
    /// The refusal a coded error makes: its code and its message.
    pub fn of(e: &(impl warrant_core::Coded + std::fmt::Display)) -> Self {
        Self {
            code: e.code().to_owned(),
            message: e.to_string(),
        }
    }
}

/// The environment tools normalize and execute in.
#[derive(Debug, Clone)]
pub struct ToolEnv {
    pub workspace: CanonicalPath,
    pub profiles: BTreeMap<String, ProfileConfig>,
    /// Warrant's own environment, from which a profile picks what a command may see.
    pub parent_env: Vec<(String, String)>,
    /// Secrets a profile's commands receive (`[secret_env]`), from the vault; `None`: none.
    pub secrets: Option<std::sync::Arc<dyn crate::asks::SecretSource>>,
    /// Behave as if this machine had no overlays: contained commands are judged by their argv
    /// and write to the workspace directly. Set only by a debug build's test switch
    /// (`WARRANT_TEST_DISABLE=overlay`); otherwise the executor finds out by trying.
    pub no_overlays: bool,
    /// The run a call belongs to, set by the ring when it normalizes the call (git commits name
    /// the run's principal as their author and the run in a trailer); `None` outside a run.
    pub run: Option<RunContext>,
    /// `[tests.<name>]` from configuration, for `run_tests`.
    pub tests: BTreeMap<String, warrant_core::config::TestsConfig>,
    /// `[web]` from configuration, for `web_fetch`.
    pub web: warrant_core::config::WebConfig,
    /// A debug build's negative control only (`WARRANT_TEST_DISABLE=web-address`): `web_fetch`
    /// no longer refuses loopback, private, link-local and metadata addresses.
    pub web_addresses_unguarded: bool,
    /// A debug build's negative control only (`WARRANT_TEST_DISABLE=web-loopback`): loopback
    /// addresses pass the guard, every other internal address is still refused.
    pub web_loopback_allowed: bool,
    /// `[menus.*]` from configuration, for `spawn_agent` (a subagent's narrower menu).
    pub menus: BTreeMap<String, warrant_core::config::MenuConfig>,
    /// A debug build's negative control only (`WARRANT_TEST_DISABLE=spawn-narrowing`):
    /// `spawn_agent` gives a subagent the menu it names even when it is wider than its parent's.
    pub spawn_unnarrowed: bool,
    /// A debug build's negative control only (`WARRANT_TEST_DISABLE=static-ceiling`): a run
    /// whose tools can reach worse than its ceiling starts anyway (the check at each call
    /// still holds).
    pub ceiling_unchecked: bool,
    /// A debug build's negative control only (`WARRANT_TEST_DISABLE=delegation-first`): a
    /// run's delegation token is checked only right before the effect, after policy (and any
    /// person) decided.
    pub delegation_late: bool,
}

/// Who a call runs for, from the run's log (never from the caller).
#[derive(Debug, Clone, PartialEq)]
pub struct RunContext {
    pub run: warrant_core::RunId,
    pub principal: warrant_core::Principal,
    /// The model the run was started with (`PROVIDER:MODEL`).
    pub model: String,
    /// The call being normalized (a subagent's id is derived from it).
    pub call: String,
    /// The tools the run was offered (a subagent gets these or fewer).
    pub tools: Vec<String>,
    /// The run's spawn envelope and, for a subagent, its parent and profile.
    pub spawn: Option<crate::events::SpawnSettings>,
    /// The policy set the run decides under, and the subprocess profiles in force: what an
    /// artifact's provenance names.
    pub policy_digest: warrant_core::Digest,
    pub profiles_digest: Option<warrant_core::Digest>,
    /// The run had been shown untrusted content (a completed tool result) before this call, as
    /// [`crate::Authorized::seen_untrusted`] will say when it runs: what the call makes may carry
    /// an injection (an artifact then writes formulas as text).
    pub seen_untrusted: bool,
    /// The run's pinned skill catalog, for `activate_skill`.
    pub skills: Vec<crate::skills::SkillPin>,
}

impl RunContext {
    /// The subprocess profile every command of this run is held to, if any.
    pub fn held_profile(&self) -> Option<&str> {
        self.spawn.as_ref().and_then(|s| s.profile.as_deref())
    }
}

/// A tool's result as journaled and shown to the model.
#[derive(Clone, Debug, PartialEq)]
pub struct EffectResult {
    pub ok: bool,
    pub result: Value,
}

impl EffectResult {
    /// A failed effect as the model reads it: `{"code", "error"}`.
    pub fn failed(code: &str, message: &str) -> Self {
        Self {
            ok: false,
            result: serde_json::json!({"code": code, "error": message}),
        }
    }

    /// [`Self::failed`] from a coded error.
    pub fn failure(e: &(impl warrant_core::Coded + std::fmt::Display)) -> Self {
        Self::failed(e.code(), &e.to_string())
    }
}

/// Asks the policy whether a file may be read, for tools that open files the model did not
/// name one by one (search). Files it refuses are skipped and counted, never opened.
pub type ReadFilter<'a> = &'a dyn Fn(&CanonicalPath) -> bool;

/// Asked while an effect runs: `Some(reason)` when it must stop now (the run was cancelled or
/// passed its deadline). Long effects (commands) poll it and stop their process group.
pub type StopCheck<'a> = &'a dyn Fn() -> Option<String>;

pub trait Tool: Send + Sync {
    fn spec(&self) -> &ToolSpec;

    /// The worst risk class this tool's actions can reach by what the tool does (the classes
    /// of the verbs it produces; for a tool running a command line of the model's, any class).
    /// What the static ceiling check (`warrant verify`, the check before a run's first step)
    /// measures a composition by. A raise by an action's content (a credential path) is held
    /// by the dynamic check at each call. `None`: the tool declares nothing and counts as the
    /// worst class there is.
    fn worst_class(&self) -> Option<RiskClass> {
        None
    }

    /// Turns validated arguments into normalized actions (canonical paths, clamped limits).
    fn normalize(&self, args: &Value, env: &ToolEnv) -> Result<Vec<Action>, Refusal>;

    /// What a person is shown before approving these exact actions.
    fn present(&self, actions: &[Action], env: &ToolEnv) -> Presentation;

    /// The state the actions are shown against, which an approval also binds to: e.g. the
    /// hash of the file a diff was computed from. A change there means the person saw
    /// something else, so the approval no longer applies. `Null` when nothing is read.
    fn base(&self, _actions: &[Action], _env: &ToolEnv) -> Value {
        Value::Null
    }

    /// Runs the authorized actions. Failures are results (`ok: false`), not errors: the
    /// model is told what went wrong.
    fn execute(
        &self,
        actions: &[Authorized<Action>],
        env: &ToolEnv,
        may_read: ReadFilter<'_>,
        stop: StopCheck<'_>,
    ) -> EffectResult;

    /// [`Self::execute`] for a tool whose peer may ask something of the run while the effect
    /// runs (an MCP server's sampling request): the ring hands it `peers`, through which such
    /// an ask becomes governed work of its own. Every other tool keeps the default.
    fn execute_with(
        &self,
        actions: &[Authorized<Action>],
        env: &ToolEnv,
        may_read: ReadFilter<'_>,
        stop: StopCheck<'_>,
        _peers: &dyn PeerAsks,
    ) -> EffectResult {
        self.execute(actions, env, may_read, stop)
    }

    /// For a tool that raises a request of a person instead of acting (ask_question,
    /// request_secret, request_resource): the request its validated arguments make, or why
    /// they cannot. The ring handles such calls itself; `None` for every ordinary tool.
    fn ask(&self, _args: &Value) -> Option<Result<Ask, Refusal>> {
        None
    }

    /// For an effect whose result held a [`PENDING_JUDGEMENT`]: make what waited for a person
    /// land (`approved`) or discard it, and return the result the model sees. Only tools that
    /// leave something to judge (a contained command's changeset) implement it.
    fn settle(
        &self,
        _actions: &[Authorized<Action>],
        result: &Value,
        _approved: bool,
        _env: &ToolEnv,
    ) -> EffectResult {
        EffectResult {
            ok: false,
            result: serde_json::json!({
                "error": "this tool left nothing to judge",
                "result": result,
            }),
        }
    }
}

/// The key of an effect's result under which a tool says that part of what it did waits for a
/// person before it lands: `{ "risk": <class>, "title": …, "body": …, "digest": "sha256:…" }`.
/// The ring takes it out of the result, journals the effect as `effect_judging` with an
/// approval request bound to `digest`, and calls [`Tool::settle`] once a person answered.
pub const PENDING_JUDGEMENT: &str = "pending_judgement";

/// What a tool puts under [`PENDING_JUDGEMENT`]: the class of what waits, what the person is
/// shown, and the tool's digest of it (which the approval binds to).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingJudgement {
    /// A class the tool did not name is asked as `destructive`.
    #[serde(default = "destructive")]
    pub risk: RiskClass,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub body: String,
    #[serde(default)]
    pub digest: String,
}

fn destructive() -> RiskClass {
    RiskClass::Destructive
}

impl PendingJudgement {
    /// As the result carries it.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// Starts or continues the subagent an `agent.spawn` action names, and drives it until it ends
/// or waits for a person. The host implements it (driving a run is the agent loop's job, above
/// the kernel); the ring calls it only with a spawn it authorized, after the spawn envelope.
pub trait Spawner {
    fn spawn(
        &self,
        spawn: &Authorized<warrant_core::AgentSpawn>,
        parent: &crate::RunState,
        stop: StopCheck<'_>,
    ) -> SpawnOutcome;

    /// Answers a sampling request a peer made during `call` of `parent` (the `ordinal`-th of
    /// that call) with a child run, driven here to its end. The default refuses.
    fn sample(
        &self,
        _parent: &crate::RunState,
        _call: &str,
        _ordinal: usize,
        ask: &crate::events::SamplingAsk,
        _stop: StopCheck<'_>,
    ) -> Sampled {
        NoPeerAsks.sample(ask)
    }
}

/// What a tool's peer may ask of the run while the tool's effect runs. The ring implements it
/// for the effect it is running; each answer is a run of its own, linked to the call.
pub trait PeerAsks {
    /// An MCP server's sampling request: a model call on the run's behalf. It is answered by a
    /// child run under the run's principal (every model call a `provider.call` decided by
    /// policy, on the parent's remaining budget), or refused.
    fn sample(&self, ask: &crate::events::SamplingAsk) -> Sampled;

    /// An MCP server's elicitation: a request to the run's person, raised in the run while the
    /// call waits, answered from anywhere a request is answered, and bounded by the ask's
    /// timeout and the run's stop conditions. The default refuses (no run to ask under).
    fn elicit(&self, _ask: &crate::elicit::ElicitAsk) -> crate::elicit::Elicited {
        crate::elicit::Elicited::refused(
            "W-MCP-012",
            "elicitation cannot be answered here: no run to ask the person under",
        )
    }
}

/// How a sampling request was answered: the child run that answered it (when one started: its
/// model use counts against its parent's budget whatever the answer), the model, and the text
/// or why there is none.
#[derive(Clone, Debug, PartialEq)]
pub struct Sampled {
    pub run: Option<warrant_core::RunId>,
    pub model: String,
    pub answer: Result<String, Refusal>,
}

impl Sampled {
    /// Refused before any run started.
    pub fn refused(code: &str, message: impl Into<String>) -> Self {
        Self {
            run: None,
            model: String::new(),
            answer: Err(Refusal {
                code: code.to_owned(),
                message: message.into(),
            }),
        }
    }
}

/// Peers get nothing: every ask refused (outside a run, or without a host to run it).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoPeerAsks;

impl PeerAsks for NoPeerAsks {
    fn sample(&self, _ask: &crate::events::SamplingAsk) -> Sampled {
        Sampled::refused(
            "W-MCP-012",
            "sampling cannot be answered here: no run to answer it under",
        )
    }
}

/// How a subagent's drive ended for its parent.
#[derive(Clone, Debug, PartialEq)]
pub enum SpawnOutcome {
    /// It ended (completed, failed or stopped): what its parent's model is told.
    Ended(EffectResult),
    /// It waits for a person on `request` (an approval, a question): the parent parks on the
    /// same request, and continues the same subagent when it is resumed.
    Parked { request: warrant_core::RequestId },
}

/// The tools of a run, by model-facing name.
pub trait ToolRegistry {
    fn get(&self, name: &str) -> Option<&dyn Tool>;
    fn specs(&self) -> Vec<ToolSpec>;

    /// [`Self::specs`], shared: a registry whose offer is fixed makes the list once, and each
    /// model request borrows it instead of copying every schema.
    fn shared_specs(&self) -> std::sync::Arc<[ToolSpec]> {
        self.specs().into()
    }

    /// The tools offered (the menu's), each with the worst class it can reach; a tool that
    /// declares none counts as `irreversible`.
    fn reach(&self) -> Vec<(String, RiskClass)> {
        self.specs()
            .into_iter()
            .map(|s| {
                let class = self
                    .get(&s.name)
                    .and_then(|t| t.worst_class())
                    .unwrap_or(RiskClass::Irreversible);
                (s.name, class)
            })
            .collect()
    }
    /// Validates arguments against the tool's JSON Schema before anything else looks at them.
    fn validate(&self, name: &str, args: &Value) -> Result<(), Refusal>;
}
