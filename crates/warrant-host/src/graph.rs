//! Agentic Graph runs (`warrant graph validate|plan|run|resume`). A graph run is ONE Warrant
//! run: a session whose messages come from the graph instead of a person. Each task or
//! decision node's brief is the run's next message (journaled with the node's step and its
//! permission ceiling in one append), the agent works it through the ring like any turn, and its
//! answer is the node's outputs; a gate is a request to a person raised through the ring (the
//! run parks, exit 10, and `warrant requests answer` then `warrant graph resume` continue it).
//! Where the run stands is always the fold of its journal (`state.graph`): a resume, or a crash,
//! picks up at the same node. Scheduling, AGX and the failure ladder are `warrant-graph`'s.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use warrant_agent::RunExit;
use warrant_core::{Coded, RunId, Timestamp};
use warrant_graph::attempt::{self, Failure, Rung};
use warrant_graph::plan::{Decide, Decided, Plan};
use warrant_graph::schedule::{self, Next};
use warrant_graph::{Graph, GraphError, NodeKind};
use warrant_kernel::graph::{GraphPin, NodeCeiling, NodeStatus, NodeStep, Permission};
use warrant_kernel::{
    CallRecord, CallStep, Observer, Outcome, Prompter, Reply, Ring, RunState, SessionSettings,
    ToolEnv,
};
use warrant_llm::ModelProvider;

use crate::drive::{self, Drive};
use crate::runs::Driven;
use crate::{Class, Host, HostError, Notices, Result, Where, install};

/// Resume refused: the graph file's digest is not the one the run pinned (AGS RT053).
pub const CHANGED: &str = "W-GRAPH-005";
/// A run-time AGX evaluation error under `policy.on_expression_error: fail`.
pub const EXPRESSION: &str = "W-GRAPH-006";
/// The run ended failed: a node failed and no `on_failure` edge took it up.
pub const NODE_FAILED: &str = "W-GRAPH-007";
/// The run is not a graph run (`graph resume`), or a graph run continued another way.
pub const NOT_A_GRAPH_RUN: &str = "W-GRAPH-008";

pub(crate) fn graph_error(e: &GraphError) -> HostError {
    HostError::usage(e.code(), e.to_string())
}

/// What a graph run starts with.
#[derive(Clone, Debug)]
pub struct GraphRunRequest {
    pub path: PathBuf,
    pub model: String,
    /// `NAME=VALUE` each.
    pub params: Vec<String>,
    pub deadline: Option<Timestamp>,
}

/// `graph validate`: every finding of the spec's catalogue.
pub fn validate(path: &Path) -> warrant_graph::Validation {
    warrant_graph::validate(path)
}

/// Policy's answer through `policy explain`'s own path, so the plan says what a run would get.
struct Explainer<'a> {
    at: &'a Where,
    notices: Arc<dyn Notices + Send>,
}

impl Decide for Explainer<'_> {
    fn decide(&self, action: &str, target: &str) -> std::result::Result<Decided, String> {
        let e = crate::explain::explain(self.at, self.notices.clone(), action, target, None)
            .map_err(|e| e.message)?;
        let d = &e.explanation.decision;
        let reason = e
            .explanation
            .decision
            .reasons
            .iter()
            .map(|m| m.id.clone())
            .collect::<Vec<_>>()
            .join(", ");
        Ok(Decided {
            verdict: match d.verdict {
                warrant_policy::Verdict::Allow => "allow",
                warrant_policy::Verdict::Ask { .. } => "ask",
                warrant_policy::Verdict::Deny => "deny",
            }
            .to_owned(),
            person_needed: e.person_needed.is_some(),
            reason: if reason.is_empty() {
                "no policy permits it".to_owned()
            } else {
                format!("policy {reason}")
            },
        })
    }
}

/// `graph plan`: read-only; nothing is started and nothing is journaled.
pub fn plan(at: &Where, notices: Arc<dyn Notices + Send>, path: &Path) -> Result<Plan> {
    let graph = Graph::load(path).map_err(|e| graph_error(&e))?;
    Ok(warrant_graph::plan::plan(
        &graph,
        &Explainer { at, notices },
    ))
}

fn absolute(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

fn step(node: &str, status: NodeStatus, attempt: u32) -> NodeStep {
    NodeStep {
        node: node.to_owned(),
        status,
        attempt,
        code: None,
        reason: None,
        outputs: None,
        ceiling: None,
    }
}

fn ceiling_of(node: &warrant_graph::Node) -> NodeCeiling {
    NodeCeiling {
        node: node.id.clone(),
        permissions: node
            .permissions
            .iter()
            .filter_map(|p| Permission::parse(p))
            .collect(),
        workspace: node.workspace.clone(),
    }
}

/// One drive of a graph run: the loaded graph, its parameters and what a node's turn needs.
struct GraphDrive<'a> {
    host: &'a Host,
    ring: &'a Ring<'a>,
    env: &'a ToolEnv,
    model: &'a dyn ModelProvider,
    graph: &'a Graph,
    params: Value,
    /// Whether this installation can put a gate to a person (the request tool is offered).
    can_ask: bool,
}

/// What one node step came to.
enum Stepped {
    Continue,
    Exit(RunExit),
}

impl GraphDrive<'_> {
    fn failed(e: &warrant_kernel::KernelError) -> HostError {
        HostError::failed(e)
    }

    /// Drives the graph until the run ends or parks.
    fn run(&self, state: &mut RunState, prompter: &mut dyn Prompter) -> Result<RunExit> {
        loop {
            if let Some(outcome) = &state.ended {
                return Ok(match outcome {
                    Outcome::Completed => RunExit::Completed,
                    Outcome::Failed { code, message } => RunExit::Failed {
                        code: code.clone(),
                        message: message.clone(),
                    },
                    Outcome::Stopped { reason } => RunExit::Stopped {
                        reason: reason.clone(),
                    },
                });
            }
            let runs = schedule::runs_of(&state.graph);
            let next = match schedule::next(self.graph, &self.params, &runs) {
                Ok(next) => next,
                Err(e) => {
                    return self.end_failed(state, None, EXPRESSION, e.to_string());
                }
            };
            match next {
                Next::Skip { node, reason } => {
                    let mut s = step(&node, NodeStatus::Skipped, 0);
                    s.reason = Some(reason);
                    self.ring
                        .record_graph_step(state, s)
                        .map_err(|e| Self::failed(&e))?;
                }
                Next::Finished { unabsorbed } if unabsorbed.is_empty() => {
                    self.ring
                        .end_graph(state, None, Outcome::Completed)
                        .map_err(|e| Self::failed(&e))?;
                    self.host.deliver();
                    return Ok(RunExit::Completed);
                }
                Next::Finished { unabsorbed } => {
                    return self.end_failed(
                        state,
                        None,
                        NODE_FAILED,
                        format!(
                            "node(s) {} failed and no on_failure edge took the failure up",
                            unabsorbed.join(", ")
                        ),
                    );
                }
                Next::Run(id) => {
                    let Some(node) = self.graph.node(&id) else {
                        return self.end_failed(
                            state,
                            None,
                            NODE_FAILED,
                            format!("the journal names node `{id}`, which the graph does not have"),
                        );
                    };
                    let run = runs.get(&id).cloned();
                    let stepped = match node.kind {
                        NodeKind::Gate => self.gate(state, node, run.as_ref(), prompter)?,
                        NodeKind::Task
                        | NodeKind::Decision
                        | NodeKind::Loop
                        | NodeKind::Map
                        | NodeKind::Subgraph => self.task(state, node, run.as_ref(), prompter)?,
                    };
                    if let Stepped::Exit(exit) = stepped {
                        return Ok(exit);
                    }
                }
            }
        }
    }

    fn end_failed(
        &self,
        state: &mut RunState,
        last: Option<NodeStep>,
        code: &str,
        message: String,
    ) -> Result<RunExit> {
        self.ring
            .end_graph(
                state,
                last,
                Outcome::Failed {
                    code: code.to_owned(),
                    message: message.clone(),
                },
            )
            .map_err(|e| Self::failed(&e))?;
        self.host.deliver();
        Ok(RunExit::Failed {
            code: code.to_owned(),
            message,
        })
    }

    fn scope(&self, state: &RunState) -> Value {
        schedule::scope(self.graph, &self.params, &schedule::runs_of(&state.graph))
    }

    /// A failed attempt: the failure ladder decides what comes next, and it is journaled.
    fn attempt_failed(
        &self,
        state: &mut RunState,
        node: &warrant_graph::Node,
        attempt: u32,
        failure: Failure,
    ) -> Result<Stepped> {
        let scope = self.scope(state);
        let rung = attempt::ladder(node, attempt, &failure, &scope);
        let mut s = step(&node.id, NodeStatus::AttemptFailed, attempt);
        s.code = Some(failure.code.unwrap_or(failure.class).to_owned());
        s.reason = Some(failure.reason);
        let last = match rung {
            Rung::Retry | Rung::Alternate(_) => s,
            Rung::Skip => {
                s.status = NodeStatus::Skipped;
                s
            }
            Rung::Degraded => {
                s.status = NodeStatus::Succeeded;
                s.code = Some("RT042".into());
                s.outputs = Some(json!({}));
                s
            }
            Rung::Fail => {
                s.status = NodeStatus::Failed;
                s
            }
        };
        let halt = last.status == NodeStatus::Failed && self.graph.on_node_failure == "halt";
        self.ring
            .record_graph_step(state, last)
            .map_err(|e| Self::failed(&e))?;
        if halt {
            // The scheduler ends the run at the next step (policy.on_node_failure: halt).
            return Ok(Stepped::Continue);
        }
        Ok(Stepped::Continue)
    }

    fn task(
        &self,
        state: &mut RunState,
        node: &warrant_graph::Node,
        run: Option<&schedule::NodeRun>,
        prompter: &mut dyn Prompter,
    ) -> Result<Stepped> {
        let (attempt, fresh) = match run {
            None => (1, true),
            Some(r) if r.status == NodeStatus::AttemptFailed => (r.attempt + 1, true),
            Some(r) => (r.attempt, false),
        };
        let brief = attempt::brief_of(self.graph, node, attempt);
        let run_scope = self.scope(state);
        if fresh {
            let inputs = match attempt::inputs(brief, &run_scope) {
                Ok(i) => i,
                Err(f) => return self.attempt_failed(state, node, attempt, f),
            };
            let scope = attempt::node_scope(&run_scope, brief, attempt, &inputs, &Value::Null);
            // An expression decision needs no model: its branches decide.
            if let Some(d) = &node.decision
                && d.evaluator == "expression"
            {
                return self.decide_by_expression(state, node, attempt, &scope);
            }
            let feedback = state
                .graph
                .iter()
                .rev()
                .find(|s| s.node == node.id && s.status == NodeStatus::AttemptFailed)
                .and_then(|s| s.reason.clone());
            let text =
                match attempt::message(brief, &self.graph.id, &scope, attempt, feedback.as_deref())
                {
                    Ok(t) => t,
                    Err(e) => {
                        return self
                            .end_failed(state, None, EXPRESSION, e.to_string())
                            .map(Stepped::Exit);
                    }
                };
            let mut s = step(&node.id, NodeStatus::Running, attempt);
            s.ceiling = Some(ceiling_of(brief));
            if !std::ptr::eq(brief, node) {
                s.reason = Some(format!("fallback: alternate node `{}`", brief.id));
            }
            self.ring
                .start_graph_turn(state, s, &text)
                .map_err(|e| Self::failed(&e))?;
        }
        if !state.awaiting {
            // The agent works the node's turn through the ring, under a lease.
            let lease = drive::lease_here(
                self.host.inst.store.as_ref(),
                &state.run,
                self.host.inst.notices.as_ref(),
            )
            .map_err(|e| HostError::bad_input(&e))?;
            if state.parked.is_some() {
                self.ring
                    .resume(state, &self.host.identity.principal)
                    .map_err(|e| HostError::bad_input(&e))?;
            }
            let driver = Drive {
                store: self.host.inst.store.as_ref(),
                ring: self.ring,
                env: self.env,
                model: self.model,
                ttl: drive::LEASE_TTL,
                backpressure: &install::OutboxBound {
                    inst: &self.host.inst,
                    ring: self.ring,
                },
            };
            let exit = driver.run(state, lease, prompter);
            self.host.deliver();
            match exit.map_err(|e| HostError::failed(&e))? {
                RunExit::AwaitingMessage => {}
                other @ (RunExit::Completed
                | RunExit::Failed { .. }
                | RunExit::Stopped { .. }
                | RunExit::Parked { .. }
                | RunExit::Superseded { .. }) => return Ok(Stepped::Exit(other)),
            }
        }
        // The node's turn is answered: its outputs, then whether they pass.
        let answer = state.turn_texts.last().cloned().flatten();
        let mut outputs = attempt::outputs_from_answer(answer.as_deref());
        let mut warning = None;
        if let Some(d) = &node.decision {
            match attempt::chosen_label(node, answer.as_deref()) {
                Some(label) => {
                    outputs = json!({ "decision": label });
                }
                None => match &d.default_branch {
                    Some(default) => {
                        outputs = json!({ "decision": default });
                        warning = Some((
                            "RT022",
                            "the answer named no declared branch; default_branch used",
                        ));
                    }
                    None => {
                        let f = Failure {
                            class: "criteria_failed",
                            code: None,
                            reason: "the answer named none of the declared branches".into(),
                        };
                        return self.attempt_failed(state, node, attempt, f);
                    }
                },
            }
        }
        let inputs = attempt::inputs(brief, &run_scope).unwrap_or(Value::Null);
        let scope = attempt::node_scope(&run_scope, node, attempt, &inputs, &outputs);
        match attempt::judge(node, &scope) {
            Ok(()) => {
                let mut s = step(&node.id, NodeStatus::Succeeded, attempt);
                s.outputs = Some(outputs);
                if let Some((code, reason)) = warning {
                    s.code = Some(code.into());
                    s.reason = Some(reason.into());
                }
                self.ring
                    .record_graph_step(state, s)
                    .map_err(|e| Self::failed(&e))?;
                Ok(Stepped::Continue)
            }
            Err(f) => self.attempt_failed(state, node, attempt, f),
        }
    }

    fn decide_by_expression(
        &self,
        state: &mut RunState,
        node: &warrant_graph::Node,
        attempt: u32,
        scope: &Value,
    ) -> Result<Stepped> {
        let Some(d) = &node.decision else {
            return Ok(Stepped::Continue);
        };
        let mut chosen = None;
        for b in &d.branches {
            let when = b.when.as_deref().unwrap_or("false");
            match schedule::guard(self.graph, when, scope) {
                Ok(true) => {
                    chosen = Some(b.label.clone());
                    break;
                }
                Ok(false) => {}
                Err(e) => {
                    return self
                        .end_failed(state, None, EXPRESSION, e.to_string())
                        .map(Stepped::Exit);
                }
            }
        }
        match chosen.or_else(|| d.default_branch.clone()) {
            Some(label) => {
                let mut s = step(&node.id, NodeStatus::Succeeded, attempt);
                s.outputs = Some(json!({ "decision": label }));
                self.ring
                    .record_graph_step(state, s)
                    .map_err(|e| Self::failed(&e))?;
                Ok(Stepped::Continue)
            }
            None => {
                let f = Failure {
                    class: "criteria_failed",
                    code: None,
                    reason: "no branch's `when` held and there is no default_branch".into(),
                };
                self.attempt_failed(state, node, attempt, f)
            }
        }
    }

    fn gate(
        &self,
        state: &mut RunState,
        node: &warrant_graph::Node,
        run: Option<&schedule::NodeRun>,
        prompter: &mut dyn Prompter,
    ) -> Result<Stepped> {
        let Some(g) = &node.gate else {
            return Ok(Stepped::Continue);
        };
        let attempt = match run {
            None => 1,
            Some(r) if r.status == NodeStatus::AttemptFailed => r.attempt + 1,
            Some(r) => r.attempt,
        };
        let call_id = format!("graph-{}-{attempt}", node.id);
        if run.is_none_or(|r| r.status == NodeStatus::AttemptFailed) {
            if g.mode == "notify" {
                let mut s = step(&node.id, NodeStatus::Succeeded, attempt);
                s.reason = Some("notify: nobody is waited for".into());
                s.outputs = Some(json!({}));
                self.ring
                    .record_graph_step(state, s)
                    .map_err(|e| Self::failed(&e))?;
                return Ok(Stepped::Continue);
            }
            // A checkpoint that cannot be put to a person fails its node; it is never skipped.
            if !self.can_ask {
                let f = Failure {
                    class: "permission_denied",
                    code: Some("RT015"),
                    reason: "this installation offers no way to ask a person (the ask_question tool is not in the run's menu)".into(),
                };
                return self.attempt_failed(state, node, attempt, f);
            }
            let scope = self.scope(state);
            let prompt = match warrant_graph::agx::render(&g.prompt, &scope) {
                Ok(p) => p,
                Err(e) => {
                    return self
                        .end_failed(state, None, EXPRESSION, e.to_string())
                        .map(Stepped::Exit);
                }
            };
            let mut question = format!(
                "Graph `{}`, gate `{}`: {}\n\n{}",
                self.graph.id,
                node.id,
                node.title,
                prompt.trim()
            );
            for p in &g.present {
                let v = warrant_graph::agx::eval(p, &scope).unwrap_or(Value::Null);
                question.push_str(&format!("\n\n{p}:\n{}", warrant_graph::agx::stringify(&v)));
            }
            question.truncate(3900);
            let s = step(&node.id, NodeStatus::AwaitingHuman, attempt);
            let call = CallRecord {
                id: call_id.clone(),
                tool: "ask_question".into(),
                args: json!({ "question": question, "options": ["approve", "reject"] }),
            };
            self.ring
                .raise_graph_gate(state, s, call)
                .map_err(|e| Self::failed(&e))?;
        }
        if state.call(&call_id).is_some_and(|c| c.result.is_none()) {
            let lease = drive::lease_here(
                self.host.inst.store.as_ref(),
                &state.run,
                self.host.inst.notices.as_ref(),
            )
            .map_err(|e| HostError::bad_input(&e))?;
            self.ring.hold_fence(Some(lease.token));
            let stepped = self.ring.process_call(state, &call_id, self.env, prompter);
            let _ = self.host.inst.store.release(&lease);
            self.ring.hold_fence(None);
            self.host.deliver();
            if let CallStep::Parked(request) = stepped.map_err(|e| HostError::failed(&e))? {
                return Ok(Stepped::Exit(RunExit::Parked { request }));
            }
        }
        if state.parked.is_some() {
            self.ring
                .resume(state, &self.host.identity.principal)
                .map_err(|e| HostError::bad_input(&e))?;
        }
        // The person's word: approve, reject, a decline, or no answer in time.
        let ask = state.asks.values().find(|a| a.call_id == call_id);
        let (approved, by) = match ask.map(|a| (&a.reply, a.expired)) {
            Some((Some((Reply::Answered { option, text }, by)), _)) => {
                (*option == Some(1) || text == "approve", by.actor.clone())
            }
            Some((Some((other, by)), _)) => {
                let _ = other;
                (false, by.actor.clone())
            }
            Some((None, Some(_))) => {
                let f = Failure {
                    class: "timeout",
                    code: None,
                    reason: "nobody answered the gate in time".into(),
                };
                return self.attempt_failed(state, node, attempt, f);
            }
            _ => {
                let f = Failure {
                    class: "permission_denied",
                    code: Some("RT015"),
                    reason: "the gate's request could not be put to a person".into(),
                };
                return self.attempt_failed(state, node, attempt, f);
            }
        };
        let route = g.on_reject == "route";
        let mut s = step(&node.id, NodeStatus::Succeeded, attempt);
        s.reason = Some(format!(
            "{} by {by}",
            if approved { "approved" } else { "rejected" }
        ));
        s.outputs = Some(if route {
            json!({ "decision": if approved { "approved" } else { "rejected" } })
        } else {
            json!({})
        });
        if !approved && !route {
            s.outputs = None;
            s.status = if g.on_reject == "skip_dependents" {
                NodeStatus::Skipped
            } else {
                NodeStatus::Failed
            };
            s.code = Some("rejected".into());
        }
        self.ring
            .record_graph_step(state, s)
            .map_err(|e| Self::failed(&e))?;
        Ok(Stepped::Continue)
    }
}

impl Host {
    /// Starts a run of the graph at `request.path` and drives it here until it ends or parks.
    pub fn graph_run(
        &self,
        request: GraphRunRequest,
        observer: &dyn Observer,
        prompter: &mut dyn Prompter,
    ) -> Result<Driven> {
        self.preflight()?;
        let path = absolute(&request.path);
        let graph = Graph::load(&path).map_err(|e| graph_error(&e))?;
        let unsupported = schedule::unsupported(&graph);
        if !unsupported.is_empty() {
            return Err(graph_error(&GraphError::Unsupported {
                path: path.display().to_string(),
                features: unsupported,
            }));
        }
        let supplied = request
            .params
            .iter()
            .map(|p| warrant_graph::parse_param(p))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| graph_error(&e))?;
        let params = graph.params(&supplied).map_err(|e| graph_error(&e))?;
        let tools = self.tools()?;
        let model = self.provider(&request.model, &tools)?;
        let env = self.tool_env()?;
        crate::layers::sweep(self.inst.store.as_ref(), &env.workspace);
        let mut spec = self.new_run_spec(
            &tools,
            &env,
            &request.model,
            format!("graph {}: {}", graph.id, graph.title),
            request.deadline,
            false,
        );
        spec.settings.session = Some(SessionSettings {
            history_tokens: crate::chat::DEFAULT_HISTORY_TOKENS,
        });
        // The graph's declared ceiling (`x-warrant-ceiling`) only tightens the run's.
        spec.settings.ceiling = crate::ceilings::tightest(spec.settings.ceiling, graph.ceiling);
        spec.settings.graph = Some(Box::new(GraphPin {
            id: graph.id.clone(),
            title: graph.title.clone(),
            path: path.display().to_string(),
            digest: graph.digest.clone(),
            params: params.clone(),
        }));
        let can_ask = can_ask(&tools);
        self.with_ring(&tools, observer, |ring| {
            let mut state = ring.start(spec).map_err(|e| HostError::failed(&e))?;
            ring.await_message(&mut state)
                .map_err(|e| HostError::failed(&e))?;
            let driver = GraphDrive {
                host: self,
                ring,
                env: &env,
                model: model.as_ref(),
                graph: &graph,
                params,
                can_ask,
            };
            let exit = driver.run(&mut state, prompter)?;
            Ok(Driven {
                run: state.run,
                exit,
            })
        })
    }

    /// Whether `run` executes a graph (its first event pinned one). Only routes a resume:
    /// whichever path it takes loads the run and checks it against its signed records, so
    /// this reads the first event alone (no toolbox, no MCP server started, no second
    /// verification of the whole log).
    pub fn is_graph_run(&self, run: &RunId) -> Result<bool> {
        let events = self
            .inst
            .scoped()
            .events(run)
            .map_err(|e| HostError::failed(&e))?;
        Ok(matches!(
            events.first().map(warrant_kernel::RunEvent::from_stored),
            Some(Ok(warrant_kernel::RunEvent::RunStarted { settings, .. })) if settings.graph.is_some()
        ))
    }

    /// Continues a graph run: only with the very graph it pinned (same digest, RT053).
    pub fn graph_resume(
        &self,
        run: &RunId,
        observer: &dyn Observer,
        prompter: &mut dyn Prompter,
    ) -> Result<Driven> {
        let tools = self.tools()?;
        let env = self.tool_env()?;
        let can_ask = can_ask(&tools);
        self.with_ring(&tools, observer, |ring| {
            let mut state = install::load_run(&self.inst, ring, run, Class::Usage)?;
            let Some(pin) = state.settings.graph.clone() else {
                return Err(HostError::usage(
                    NOT_A_GRAPH_RUN,
                    format!(
                        "run {run} is not a graph run; continue it with `warrant resume {run}`"
                    ),
                ));
            };
            if let Some(outcome) = &state.ended {
                return Err(HostError::usage(
                    "W-KERNEL-005",
                    format!(
                        "run {run} has already ended ({}); there is nothing to resume",
                        warrant_kernel::ring::outcome_label(outcome)
                    ),
                ));
            }
            let graph = Graph::load(Path::new(&pin.path)).map_err(|e| graph_error(&e))?;
            if graph.digest != pin.digest {
                return Err(HostError::coded(
                    &Changed {
                        run: run.to_string(),
                        path: pin.path.clone(),
                        pinned: pin.digest.clone(),
                        now: graph.digest.clone(),
                    },
                    Class::Refused,
                ));
            }
            let model = self.provider(&state.model, &tools)?;
            let digest = crate::tools_digest(&tools)?;
            ring.check_replay(&mut state, &tools, &digest)
                .map_err(|e| HostError::bad_input(&e))?;
            let driver = GraphDrive {
                host: self,
                ring,
                env: &env,
                model: model.as_ref(),
                graph: &graph,
                params: pin.params.clone(),
                can_ask,
            };
            let exit = driver.run(&mut state, prompter)?;
            Ok(Driven {
                run: state.run,
                exit,
            })
        })
    }
}

/// Whether a gate can be put to a person: the request tool is in the run's menu (a menu that
/// leaves it out, or the debug-only `WARRANT_TEST_DISABLE=graph-gate`, makes gates fail RT015).
fn can_ask(tools: &warrant_tools::Toolbox) -> bool {
    if crate::controls::disabled("graph-gate") {
        return false;
    }
    warrant_kernel::ToolRegistry::specs(tools)
        .iter()
        .any(|s| s.name == "ask_question")
}

/// Resume refused: the graph changed since the run pinned it.
#[derive(Debug)]
pub struct Changed {
    pub run: String,
    pub path: String,
    pub pinned: String,
    pub now: String,
}

impl std::fmt::Display for Changed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "run {} was started on graph {} with digest {}; the file now has digest {} \
             (AGS RT053). Node outputs recorded against one graph mean nothing against another: \
             restore the file, or start a new run with `warrant graph run`",
            self.run, self.path, self.pinned, self.now
        )
    }
}

impl Coded for Changed {
    fn code(&self) -> &'static str {
        CHANGED
    }
}
