//! Model calls as governed effects. Before each call the ring decides the `provider.call`
//! action under the run's principal and checks every budget (run, actor, tenant; tokens and
//! cost); while the answer streams in, the caller measures it against the [`Headroom`] left
//! and cuts it off at the first crossing. A refusal or a stop is one atomic append of its
//! typed event and the run's end, so it is durable and audited like any other verdict.
//! Actor and tenant totals are read from the store's budget totals, a projection every append
//! that records usage updates in its own transaction ([`recorded_usage`] says which events
//! carry one): one indexed lookup per call, however many runs the store holds. The fold of
//! every run's log it replaced is kept ([`Ring::budget_totals_folded`], [`fold_budget_totals`])
//! to prove the two agree (`audit verify`, the crash matrices, the benches).

use std::collections::BTreeMap;

use serde_json::{Value, json};
use warrant_core::config::{BudgetLimit, BudgetsConfig, PriceConfig};
use warrant_core::{Action, CanonicalPath, Principal};
use warrant_store::RunStatus;

use crate::error::KernelError;
use crate::events::{BudgetMetric, BudgetScope, Outcome, ReasonRecord, RunEvent, Verdict};
use crate::ring::{PolicyVerdict, Ring};
use crate::state::RunState;

/// What model calls consumed: tokens as the server counted them (or as estimated when it did
/// not), and their cost when the model has a price.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ModelUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
}

impl ModelUsage {
    pub fn tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    /// Adds a usage object as journaled (`{"input_tokens", "output_tokens", "cost_usd"?}`).
    pub fn add_recorded(&mut self, usage: Option<&Value>) {
        let Some(usage) = usage else { return };
        let int = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
        self.input_tokens = self.input_tokens.saturating_add(int("input_tokens"));
        self.output_tokens = self.output_tokens.saturating_add(int("output_tokens"));
        self.cost_usd += usage.get("cost_usd").and_then(Value::as_f64).unwrap_or(0.0);
    }

    /// A budget total as the gate compares it.
    pub fn of_total(total: &warrant_store::Usage) -> Self {
        Self {
            input_tokens: total.input_tokens,
            output_tokens: total.output_tokens,
            cost_usd: total.cost_usd(),
        }
    }

    fn add(&mut self, other: &ModelUsage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cost_usd += other.cost_usd;
    }
}

/// The prompt guard's switches, a control of every model call the ring lets through (the agent
/// loop applies them when it builds a request). Production runs have all on; turning one off
/// exists only for the negative controls of the security tests (the host honours it in debug
/// builds only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GuardSettings {
    /// Fence untrusted content (off: raw text in the tool message).
    pub fence: bool,
    /// Neutralise fence tags inside fenced content (off: a forged end tag closes the fence).
    pub escape: bool,
    /// Check the assembled request before it is sent (off: send whatever was assembled).
    pub check: bool,
}

impl Default for GuardSettings {
    fn default() -> Self {
        Self {
            fence: true,
            escape: true,
            check: true,
        }
    }
}

/// Budgets and prices in force for model calls (from configuration, read at each call, so a
/// tightened budget applies to a resumed run too).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelRules {
    pub budgets: BudgetsConfig,
    /// By `provider:model`, as in `--model`.
    pub prices: BTreeMap<String, PriceConfig>,
}

/// A budget or price in configuration that cannot be used. Reported before a run starts.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "{setting} = {value} cannot be used: budgets and prices must be finite numbers of zero or more"
)]
pub struct RulesError {
    pub setting: String,
    pub value: String,
}

impl warrant_core::Coded for RulesError {
    fn code(&self) -> &'static str {
        "W-MODEL-016"
    }
}

impl ModelRules {
    /// Refuses negative or non-finite limits and prices (a NaN limit would never be crossed).
    pub fn validate(&self) -> Result<(), RulesError> {
        let bad = |v: f64| !v.is_finite() || v < 0.0;
        for (scope, limit) in self.limits() {
            if let Some(cost) = limit.cost_usd.filter(|c| bad(*c)) {
                return Err(RulesError {
                    setting: format!("budgets.{}.cost_usd", scope.as_str()),
                    value: cost.to_string(),
                });
            }
        }
        for (model, price) in &self.prices {
            for (field, value) in [
                ("input_per_million", price.input_per_million),
                ("output_per_million", price.output_per_million),
            ] {
                if bad(value) {
                    return Err(RulesError {
                        setting: format!("prices.\"{model}\".{field}"),
                        value: value.to_string(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Cost in US dollars of `input` + `output` tokens of `provider:model`, if it has a price.
    pub fn cost(&self, provider: &str, model: &str, input: u64, output: u64) -> Option<f64> {
        let price = self.prices.get(&format!("{provider}:{model}"))?;
        // Token counts stay far below 2^53, where f64 is exact.
        #[allow(clippy::cast_precision_loss)]
        let (input, output) = (input as f64, output as f64);
        Some((input * price.input_per_million + output * price.output_per_million) / 1_000_000.0)
    }

    /// The usage object journaled with a model answer.
    pub fn usage_record(
        &self,
        provider: &str,
        model: &str,
        input: u64,
        output: u64,
        estimated: bool,
    ) -> Value {
        let mut usage = json!({"input_tokens": input, "output_tokens": output});
        if let Some(cost) = self.cost(provider, model, input, output) {
            usage["cost_usd"] = json!(cost);
        }
        if estimated {
            usage["estimated"] = json!(true);
        }
        usage
    }

    fn limits(&self) -> [(BudgetScope, BudgetLimit); 3] {
        [
            (BudgetScope::Run, self.budgets.run),
            (BudgetScope::Actor, self.budgets.actor),
            (BudgetScope::Tenant, self.budgets.tenant),
        ]
    }

    fn has_cost_limit(&self) -> bool {
        self.limits().iter().any(|(_, l)| l.cost_usd.is_some())
    }
}

/// One budget line: its scope and metric, its limit and what was used before this call.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Line {
    scope: BudgetScope,
    metric: BudgetMetric,
    limit: f64,
    used: f64,
}

/// A budget crossed: which one, by how much.
#[derive(Clone, Debug, PartialEq)]
pub struct Crossing {
    pub scope: BudgetScope,
    pub metric: BudgetMetric,
    pub limit: f64,
    /// Used in that scope, including the answer so far.
    pub used: f64,
}

impl Crossing {
    pub fn message(&self) -> String {
        let (used, limit) = match self.metric {
            BudgetMetric::Tokens => (format!("{}", self.used), format!("{}", self.limit)),
            BudgetMetric::CostUsd => (format!("${:.6}", self.used), format!("${:.6}", self.limit)),
        };
        let state = if self.used > self.limit {
            "exceeded"
        } else {
            "used up"
        };
        format!(
            "the {} budget of {limit} {} is {state} ({used} used)",
            self.scope.as_str(),
            self.metric.as_str()
        )
    }
}

/// What is left of every budget for one call.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Headroom {
    lines: Vec<Line>,
}

impl Headroom {
    /// The crossing an answer that has cost `tokens` and `cost` so far would make, if any.
    /// Where several budgets are crossed, the one with the least room left (the most
    /// restrictive) is reported.
    pub fn check(&self, tokens: u64, cost: Option<f64>) -> Option<Crossing> {
        #[allow(clippy::cast_precision_loss)]
        let tokens = tokens as f64;
        self.lines
            .iter()
            .filter_map(|line| {
                let extra = match line.metric {
                    BudgetMetric::Tokens => tokens,
                    BudgetMetric::CostUsd => cost.unwrap_or(0.0),
                };
                let used = line.used + extra;
                (used > line.limit).then_some((line.limit - line.used, line, used))
            })
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, line, used)| Crossing {
                scope: line.scope,
                metric: line.metric,
                limit: line.limit,
                used,
            })
    }

    /// A budget with nothing left before the call is made.
    fn exhausted(&self) -> Option<Crossing> {
        self.lines
            .iter()
            .filter(|l| l.used >= l.limit)
            .min_by(|a, b| (a.limit - a.used).total_cmp(&(b.limit - b.used)))
            .map(|l| Crossing {
                scope: l.scope,
                metric: l.metric,
                limit: l.limit,
                used: l.used,
            })
    }
}

/// The ring's answer before a model call.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelGate {
    /// Call the model; stop the answer at the first crossing of this headroom.
    Go(Headroom),
    /// Refused and recorded; the run has ended.
    Refused,
}

/// `provider:model` as the run names its model (`scripted:PATH` keeps the path as the model).
pub fn split_model(spec: &str) -> (&str, &str) {
    spec.split_once(':').unwrap_or((spec, ""))
}

impl Ring<'_> {
    /// Decides the next model call of the run: policy on `provider.call`, then every budget.
    pub fn gate_model_call(&self, state: &mut RunState) -> Result<ModelGate, KernelError> {
        let rules = self.budgets;
        let (provider, model) = split_model(&state.model);
        let action = Action::ProviderCall {
            provider: provider.to_owned(),
            model: model.to_owned(),
        };
        let turn = state.turns;
        let verdict = self.decide_model_call(&state.principal, &action, &state.workspace);
        if verdict.verdict != Verdict::Allow {
            let why = match verdict.verdict {
                // Nobody is asked about a model call: the run would stall on every turn.
                Verdict::Ask => "policy asks for approval, which model calls cannot wait for",
                Verdict::Allow | Verdict::Deny => "policy does not allow it",
            };
            let named: Vec<String> = verdict
                .reasons
                .iter()
                .map(|r| match &r.reason {
                    Some(reason) => format!("{} ({reason})", r.policy),
                    None => r.policy.clone(),
                })
                .collect();
            let message = if named.is_empty() && verdict.verdict == Verdict::Deny {
                // Default deny: most likely a policy set written before model calls were
                // governed, which has no permit for them.
                format!(
                    "model call to {} refused: no policy permits provider.call; add a permit like the default pack's `model-calls` (policy sets written by `warrant init` before model calls were governed lack it)",
                    action.target()
                )
            } else if named.is_empty() {
                format!("model call to {} refused: {why}", action.target())
            } else {
                format!(
                    "model call to {} refused: {why}: {}",
                    action.target(),
                    named.join("; ")
                )
            };
            self.refuse_model_call(
                state,
                RunEvent::ModelCallDenied {
                    turn,
                    action,
                    verdict: verdict.verdict,
                    reasons: verdict.reasons,
                    errors: verdict.errors,
                    message: message.clone(),
                },
                message,
            )?;
            return Ok(ModelGate::Refused);
        }
        if rules.has_cost_limit() && rules.cost(provider, model, 0, 0).is_none() {
            let message = format!(
                "model call to {} refused: a cost budget is set but [prices] has no price for `{}`, so its cost cannot be metered",
                action.target(),
                action.target()
            );
            self.refuse_model_call(
                state,
                RunEvent::ModelCallDenied {
                    turn,
                    action,
                    verdict: Verdict::Deny,
                    reasons: vec![ReasonRecord {
                        policy: "budgets".into(),
                        reason: Some("a cost budget needs a price for the model".into()),
                    }],
                    errors: Vec::new(),
                    message: message.clone(),
                },
                message,
            )?;
            return Ok(ModelGate::Refused);
        }
        let headroom = self.headroom(state, rules)?;
        if let Some(crossing) = headroom.exhausted() {
            self.record_budget_stop(state, &crossing, None)?;
            return Ok(ModelGate::Refused);
        }
        Ok(ModelGate::Go(headroom))
    }

    /// The decision point's verdict on a model call; the same call by the same principal in
    /// the same workspace as the last one is given that one's verdict (a worker's ring drives
    /// one run after another, each asking before every turn).
    fn decide_model_call(
        &self,
        principal: &Principal,
        action: &Action,
        workspace: &CanonicalPath,
    ) -> PolicyVerdict {
        if let Some((p, a, w, verdict)) = self.model_call_verdict.borrow().as_ref()
            && (p, a, w) == (principal, action, workspace)
        {
            return verdict.clone();
        }
        let verdict = self.pdp.decide(principal, action, workspace);
        *self.model_call_verdict.borrow_mut() = Some((
            principal.clone(),
            action.clone(),
            workspace.clone(),
            verdict.clone(),
        ));
        verdict
    }

    /// Records a budget crossed (with what the cut-off answer cost) and ends the run.
    pub fn record_budget_stop(
        &self,
        state: &mut RunState,
        crossing: &Crossing,
        usage: Option<Value>,
    ) -> Result<(), KernelError> {
        let message = crossing.message();
        let event = RunEvent::BudgetExceeded {
            turn: state.turns,
            scope: crossing.scope,
            metric: crossing.metric,
            limit: crossing.limit,
            used: crossing.used,
            usage,
            message: message.clone(),
        };
        self.refuse_model_call(state, event, message)
    }

    fn refuse_model_call(
        &self,
        state: &mut RunState,
        event: RunEvent,
        reason: String,
    ) -> Result<(), KernelError> {
        self.append(
            state,
            vec![
                event,
                RunEvent::RunEnded {
                    outcome: Outcome::Stopped { reason },
                },
            ],
            Some(RunStatus::Stopped),
            vec![],
        )
    }

    fn headroom(&self, state: &RunState, rules: &ModelRules) -> Result<Headroom, KernelError> {
        let needs = |limit: &BudgetLimit| limit.tokens.is_some() || limit.cost_usd.is_some();
        let (actor, tenant) = if needs(&rules.budgets.actor) || needs(&rules.budgets.tenant) {
            self.budget_totals(state)?
        } else {
            (ModelUsage::default(), ModelUsage::default())
        };
        // A run's budget covers its subagents: they spend the share they were given out of it.
        let (run_limit, run_used) = self.run_budget(state, rules)?;
        let mut lines = Vec::new();
        for (scope, limit) in rules.limits() {
            let limit = match scope {
                BudgetScope::Run => run_limit,
                BudgetScope::Actor | BudgetScope::Tenant => limit,
            };
            let used = match scope {
                BudgetScope::Run => run_used,
                BudgetScope::Actor => actor,
                BudgetScope::Tenant => tenant,
            };
            if let Some(tokens) = limit.tokens {
                #[allow(clippy::cast_precision_loss)]
                lines.push(Line {
                    scope,
                    metric: BudgetMetric::Tokens,
                    limit: tokens as f64,
                    used: used.tokens() as f64,
                });
            }
            if let Some(cost) = limit.cost_usd {
                lines.push(Line {
                    scope,
                    metric: BudgetMetric::CostUsd,
                    limit: cost,
                    used: used.cost_usd,
                });
            }
        }
        Ok(Headroom { lines })
    }
}

impl Ring<'_> {
    /// What the actor of `state` and its tenant have used over all their runs, this one
    /// included, from the store's budget totals (two indexed lookups, scoped to the tenant).
    pub fn budget_totals(&self, state: &RunState) -> Result<(ModelUsage, ModelUsage), KernelError> {
        let tenant = warrant_store::Tenant::of(&state.principal);
        let scoped = warrant_store::Scoped::new(self.store, &tenant);
        let actor = scoped.budget(Some(&state.principal.actor))?;
        let all = scoped.budget(None)?;
        Ok((ModelUsage::of_total(&actor), ModelUsage::of_total(&all)))
    }

    /// The same totals folded from every run's log, as the gate did before the projection:
    /// linear in the store's size. Kept to prove the two agree (benches, tests).
    pub fn budget_totals_folded(
        &self,
        state: &RunState,
    ) -> Result<(ModelUsage, ModelUsage), KernelError> {
        let mut actor = ModelUsage::default();
        let mut tenant = ModelUsage::default();
        for row in self.store.runs()? {
            if row.run == state.run {
                continue;
            }
            let other = self.load_unverified(&row.run)?;
            if same_actor(&other.principal, &state.principal) {
                actor.add(&other.usage);
            }
            if other.principal.tenant == state.principal.tenant {
                tenant.add(&other.usage);
            }
        }
        actor.add(&state.usage);
        tenant.add(&state.usage);
        Ok((actor, tenant))
    }

    /// The run-scope limit of `state` (the configured one, tightened by the share a subagent
    /// was given) and what the run and its subagents have used of it.
    fn run_budget(
        &self,
        state: &RunState,
        rules: &ModelRules,
    ) -> Result<(BudgetLimit, ModelUsage), KernelError> {
        let share = state
            .settings
            .spawn
            .as_ref()
            .and_then(|s| s.budget)
            .unwrap_or_default();
        let limit = rules.budgets.run.tightest(share);
        let mut used = state.usage;
        if limit.tokens.is_some() || limit.cost_usd.is_some() {
            used.add(&self.subagents_usage(state)?);
        }
        Ok((limit, used))
    }

    /// What every subagent below `state` has used (theirs included), read from their logs.
    fn subagents_usage(&self, state: &RunState) -> Result<ModelUsage, KernelError> {
        let mut total = ModelUsage::default();
        for child in subagents(state) {
            // A spawn recorded but not yet started has no log.
            if self.store.events(&child)?.is_empty() {
                continue;
            }
            let child = self.load_unverified(&child)?;
            total.add(&child.usage);
            total.add(&self.subagents_usage(&child)?);
        }
        Ok(total)
    }

    /// The model turns `state` has used, its subagents' (and theirs) included: a subagent's
    /// turns are taken from its parent's.
    pub fn turns_used(&self, state: &RunState) -> Result<u32, KernelError> {
        let mut used = state.turns;
        for child in subagents(state) {
            if self.store.events(&child)?.is_empty() {
                continue;
            }
            let child = self.load_unverified(&child)?;
            used = used.saturating_add(self.turns_used(&child)?);
        }
        Ok(used)
    }

    /// What is left of the run budget of `state` for a subagent's share: tokens and cost, each
    /// `None` when unlimited.
    pub fn run_budget_left(&self, state: &RunState) -> Result<BudgetLimit, KernelError> {
        let (limit, used) = self.run_budget(state, self.budgets)?;
        Ok(BudgetLimit {
            tokens: limit.tokens.map(|t| t.saturating_sub(used.tokens())),
            cost_usd: limit.cost_usd.map(|c| (c - used.cost_usd).max(0.0)),
        })
    }
}

/// The subagents a run has started (or is starting), by the spawns it proposed.
pub fn subagents(state: &RunState) -> Vec<warrant_core::RunId> {
    let spawned = state
        .calls
        .iter()
        .filter(|c| c.started.is_some())
        .flat_map(|c| c.actions.iter().flatten())
        .filter_map(|a| {
            if let Action::AgentSpawn { child, .. } = a {
                Some(child.clone())
            } else {
                None
            }
        });
    spawned.chain(sampling_runs(state)).collect()
}

/// The runs that answered sampling requests of the peers of `state`'s completed calls (named
/// in each call's result under `sampled`): their model use is their parent's too.
pub fn sampling_runs(state: &RunState) -> Vec<warrant_core::RunId> {
    state
        .calls
        .iter()
        .filter_map(|c| match &c.result {
            Some(crate::CallResult::Completed { result, .. }) => Some(result),
            _ => None,
        })
        .flat_map(sampling_runs_in)
        .collect()
}

/// The runs a completed call's result names under `sampled` (each answered a sampling request
/// of the call's peer).
pub fn sampling_runs_in(result: &serde_json::Value) -> Vec<warrant_core::RunId> {
    result
        .get("sampled")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.get("child_run").and_then(serde_json::Value::as_str))
        .filter_map(warrant_core::RunId::parse)
        .collect()
}

/// How many sampling requests `call`'s peer made (answered or refused).
pub fn sampling_runs_of(call: &crate::CallState) -> usize {
    sampled_of(call).len()
}

fn sampled_of(call: &crate::CallState) -> &[serde_json::Value] {
    match &call.result {
        Some(crate::CallResult::Completed { result, .. }) => result
            .get("sampled")
            .and_then(serde_json::Value::as_array)
            .map_or(&[], Vec::as_slice),
        _ => &[],
    }
}

/// The model usage `event` records, as the budget totals count it (tokens as recorded, the
/// cost rounded to billionths of a dollar once); `None` for an event that records none.
pub fn recorded_usage(event: &RunEvent) -> Option<warrant_store::Usage> {
    let usage = match event {
        RunEvent::ModelResponded { usage, .. }
        | RunEvent::BudgetExceeded { usage, .. }
        | RunEvent::AwaitingMessage { usage, .. } => usage.as_ref()?,
        // Listed, so a new event that records usage is a decision here, not a silent miss.
        RunEvent::RunStarted { .. }
        | RunEvent::PolicyChanged { .. }
        | RunEvent::ToolsChanged { .. }
        | RunEvent::CallReceived { .. }
        | RunEvent::AccessRefused { .. }
        | RunEvent::CallRefused { .. }
        | RunEvent::ActionProposed { .. }
        | RunEvent::PolicyDecided { .. }
        | RunEvent::ApprovalRequested { .. }
        | RunEvent::ApprovalGranted { .. }
        | RunEvent::ApprovalRejected { .. }
        | RunEvent::ApprovalDenied { .. }
        | RunEvent::RunParked { .. }
        | RunEvent::RunResumed { .. }
        | RunEvent::EffectStarted { .. }
        | RunEvent::EffectCompleted { .. }
        | RunEvent::EffectDenied { .. }
        | RunEvent::EffectJudging { .. }
        | RunEvent::EffectInDoubt { .. }
        | RunEvent::InDoubtResolved { .. }
        | RunEvent::AuditGap { .. }
        | RunEvent::LimitReached { .. }
        | RunEvent::Halted { .. }
        | RunEvent::RunEnded { .. }
        | RunEvent::RequestRaised { .. }
        | RunEvent::RequestReplied { .. }
        | RunEvent::RequestExpired { .. }
        | RunEvent::ModelCallDenied { .. }
        | RunEvent::MessageReceived { .. }
        | RunEvent::MessageRefused { .. }
        | RunEvent::HistoryCompacted { .. }
        | RunEvent::JournalRejected { .. }
        | RunEvent::GraphNode(_) => return None,
    };
    Some(usage_of(usage))
}

/// The event kinds that may record model usage (see [`recorded_usage`]).
pub const USAGE_KINDS: [&str; 3] = ["model_responded", "budget_exceeded", "awaiting_message"];

/// A journaled usage object (`{"input_tokens", "output_tokens", "cost_usd"?}`) as counted.
fn usage_of(usage: &Value) -> warrant_store::Usage {
    let int = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
    warrant_store::Usage {
        input_tokens: int("input_tokens"),
        output_tokens: int("output_tokens"),
        cost_nanos: warrant_store::Usage::nanos(
            usage.get("cost_usd").and_then(Value::as_f64).unwrap_or(0.0),
        ),
    }
}

/// The budget totals folded from the logs of `runs` (each run's events in order), by tenant
/// and actor as each run's `run_started` names them: what the store's projection must equal.
/// Read from the stored payloads alone (a usage object is never sealed), so a log whose other
/// fields cannot be decoded is still counted.
pub fn fold_budget_totals<I>(runs: I) -> BTreeMap<(String, String), warrant_store::Usage>
where
    I: IntoIterator<Item = Vec<warrant_store::StoredEvent>>,
{
    let mut totals: BTreeMap<(String, String), warrant_store::Usage> = BTreeMap::new();
    for events in runs {
        let mut owner: Option<(String, String)> = None;
        for stored in &events {
            let p = &stored.payload;
            if stored.kind == "run_started" {
                let text = |k: &str| p["principal"][k].as_str().unwrap_or_default().to_owned();
                owner = Some((text("tenant"), text("actor")));
            }
            if !USAGE_KINDS.contains(&stored.kind.as_str()) {
                continue;
            }
            if let (Some(usage), Some(key)) = (p.get("usage").filter(|u| u.is_object()), &owner) {
                totals.entry(key.clone()).or_default().add(&usage_of(usage));
            }
        }
    }
    totals.retain(|_, u| !u.is_zero());
    totals
}

fn same_actor(a: &Principal, b: &Principal) -> bool {
    a.tenant == b.tenant && a.actor == b.actor
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn line(scope: BudgetScope, metric: BudgetMetric, limit: f64, used: f64) -> Line {
        Line {
            scope,
            metric,
            limit,
            used,
        }
    }

    #[test]
    fn the_most_restrictive_crossing_wins() {
        let headroom = Headroom {
            lines: vec![
                line(BudgetScope::Run, BudgetMetric::Tokens, 1000.0, 0.0),
                line(BudgetScope::Actor, BudgetMetric::Tokens, 5000.0, 4900.0),
                line(BudgetScope::Tenant, BudgetMetric::CostUsd, 1.0, 0.99),
            ],
        };
        assert_eq!(headroom.check(50, Some(0.001)), None);
        // Both the actor's tokens (100 left) and the tenant's cost (0.01 left) are crossed;
        // the tenant's line had the least room.
        assert_eq!(
            headroom.check(150, Some(0.02)),
            Some(Crossing {
                scope: BudgetScope::Tenant,
                metric: BudgetMetric::CostUsd,
                limit: 1.0,
                used: 1.01,
            })
        );
        assert_eq!(
            headroom.check(150, Some(0.0)).map(|c| c.scope),
            Some(BudgetScope::Actor)
        );
        assert_eq!(headroom.exhausted(), None);
        let spent = Headroom {
            lines: vec![line(BudgetScope::Run, BudgetMetric::Tokens, 10.0, 10.0)],
        };
        assert_eq!(
            spent.exhausted().map(|c| c.message()),
            Some("the run budget of 10 tokens is used up (10 used)".to_owned())
        );
    }

    #[test]
    fn unusable_numbers_are_refused() {
        let mut rules = ModelRules::default();
        rules.budgets.actor.cost_usd = Some(-1.0);
        assert_eq!(
            rules.validate().map_err(|e| e.to_string()),
            Err("budgets.actor.cost_usd = -1 cannot be used: budgets and prices must be finite numbers of zero or more".to_owned())
        );
        rules.budgets.actor.cost_usd = Some(1.0);
        rules.prices.insert(
            "openai:m".into(),
            PriceConfig {
                input_per_million: f64::NAN,
                output_per_million: 1.0,
            },
        );
        assert_eq!(
            rules.validate().map_err(|e| e.setting),
            Err("prices.\"openai:m\".input_per_million".to_owned())
        );
        rules.prices.clear();
        assert_eq!(rules.validate(), Ok(()));
    }

    #[test]
    fn costs_come_from_the_price_table() {
        let rules = ModelRules {
            budgets: BudgetsConfig::default(),
            prices: [(
                "openai:gpt-test".to_owned(),
                PriceConfig {
                    input_per_million: 2.0,
                    output_per_million: 8.0,
                },
            )]
            .into(),
        };
        assert_eq!(
            rules.cost("openai", "gpt-test", 1_000_000, 500_000),
            Some(6.0)
        );
        assert_eq!(rules.cost("openai", "other", 1, 1), None);
        assert_eq!(
            rules.usage_record("openai", "gpt-test", 1000, 0, true),
            json!({"input_tokens": 1000, "output_tokens": 0, "cost_usd": 0.002, "estimated": true})
        );
        let mut total = ModelUsage::default();
        total.add_recorded(Some(
            &json!({"input_tokens": 3, "output_tokens": 4, "cost_usd": 0.5}),
        ));
        total.add_recorded(Some(&json!({"input_tokens": 1, "output_tokens": 1})));
        assert_eq!(
            total,
            ModelUsage {
                input_tokens: 4,
                output_tokens: 5,
                cost_usd: 0.5
            }
        );
    }
}
