//! Agentic Graph runs (`warrant graph validate|plan|run|resume`). A graph run is ONE Warrant
//! run: a session whose messages come from the graph instead of a person. Each task or
//! decision node's brief is the run's next message (journaled with the node's step and its
//! permission ceiling in one append), the agent works it through the ring like any turn, and its
//! answer is the node's outputs; a gate is a request to a person raised through the ring (the
//! run parks, exit 10, and `warrant requests answer` then `warrant graph resume` continue it).
//! Where the run stands is always the fold of its journal (`state.graph`): a resume, or a crash,
//! picks up at the same node. Scheduling, AGX and the failure ladder are `warrant-graph`'s.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value, json};
use warrant_agent::RunExit;
use warrant_core::{Coded, RunId, Timestamp};
use warrant_graph::agx::AgxError;
use warrant_graph::attempt::{self, Failure, Rung, Said, Verdict};
use warrant_graph::model::{Checkpoint, Stage};
use warrant_graph::plan::{Decide, Decided, Plan};
use warrant_graph::record::{Answer, Ended, Journal, RunRecord};
use warrant_graph::schedule::{self, Next};
use warrant_graph::{Graph, GraphError, NodeKind};
use warrant_kernel::graph::{
    CheckOutcome, CheckStep, GraphPin, HumanStep, NodeCeiling, NodeStatus, NodeStep, Permission,
};
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
/// The run record could not be written where `--record` / `--out` said.
pub const RECORD_UNWRITABLE: &str = "W-GRAPH-009";

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
        human: None,
        check: None,
    }
}

fn ceiling_of(node: &warrant_graph::Node, before_side_effects: Option<String>) -> NodeCeiling {
    NodeCeiling {
        node: node.id.clone(),
        permissions: node
            .permissions
            .iter()
            .filter_map(|p| Permission::parse(p))
            .collect(),
        workspace: node.workspace.clone(),
        before_side_effects,
    }
}

/// The most entries a `file_exists` glob walks before it gives up (failing the criterion).
const FILE_EXISTS_WALK: usize = 20_000;

/// `file_exists` (AGS §10.2): a workspace path or glob (`*` matching any run of characters,
/// `/` included) names at least one regular file of at least `min_bytes` bytes. The harness
/// checks its own workspace: the pattern must be relative and stay inside (no `..`), links are
/// not followed, and `.git` and `.warrant` are not looked into.
fn file_exists(
    workspace: &Path,
    pattern: &str,
    min_bytes: u64,
) -> std::result::Result<bool, AgxError> {
    let rel = Path::new(pattern);
    if pattern.is_empty()
        || rel.is_absolute()
        || rel.components().any(|c| {
            !matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        })
    {
        return Err(AgxError(format!(
            "`{pattern}` is not a path inside the workspace"
        )));
    }
    let fits = |p: &Path| {
        std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_file() && m.len() >= min_bytes)
    };
    if !pattern.contains('*') {
        return Ok(fits(&workspace.join(rel)));
    }
    let pattern = pattern.trim_start_matches("./");
    let mut stack = vec![workspace.to_path_buf()];
    let mut seen = 0usize;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > FILE_EXISTS_WALK {
                return Err(AgxError(format!(
                    "`{pattern}`: the workspace has more than {FILE_EXISTS_WALK} entries to look through"
                )));
            }
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let Ok(rel) = path.strip_prefix(workspace) else {
                continue;
            };
            let rel = rel.to_string_lossy();
            if kind.is_dir() {
                if rel != ".git" && rel != ".warrant" {
                    stack.push(path);
                }
            } else if warrant_kernel::graph::glob_matches(pattern, &rel) && fits(&path) {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// At most `max` bytes of `text`, cut at a character boundary.
fn clip(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// What each `command` criterion of an attempt came to, by criterion id, with its evidence.
type Checks = BTreeMap<String, (CheckOutcome, String)>;

/// One drive of a graph run: the loaded graph, its parameters and what a node's turn needs.
struct GraphDrive<'a> {
    host: &'a Host,
    ring: &'a Ring<'a>,
    env: &'a ToolEnv,
    model: &'a dyn ModelProvider,
    graph: &'a Graph,
    params: Value,
    /// Whether this installation can put a question to a person (the request tool is offered).
    can_ask: bool,
}

/// What one node step came to.
enum Stepped {
    Continue,
    Exit(RunExit),
}

/// What a person said when the graph asked (a gate, a checkpoint, an escalation).
enum Heard {
    Answered {
        option: Option<u32>,
        text: String,
        by: String,
    },
    Declined {
        by: String,
    },
    /// Nobody answered in time.
    Expired,
    /// The question could not be put to a person (AGS RT015).
    Unpresentable,
}

/// A question put to a person: heard, or the run parked (or ended) waiting.
enum Asked {
    Heard(Heard),
    Stop(Stepped),
}

/// A `human` checkpoint passed: go on (with values a person supplied or edited), stop here
/// (the run parks), or the attempt fails.
enum Checked {
    Go(Option<Map<String, Value>>),
    Stop(Stepped),
    Failed(Failure),
}

/// Where in a node's life a checkpoint fires: the node, its attempt, the expression scope, and
/// what the person is shown beside the prompt.
#[derive(Clone, Copy)]
struct Moment<'a> {
    node: &'a warrant_graph::Node,
    attempt: u32,
    scope: &'a Value,
    material: &'a str,
}

/// What a person decided at an escalation.
enum Escalated {
    /// Another attempt, with the person's words as its feedback.
    Retry(Option<String>),
    /// The node's outputs, supplied by the person.
    Outputs(Value),
    /// Nothing more: `on_exhausted` decides.
    GaveUp(String),
    Stop(Stepped),
    Unpresentable,
}

fn rejected_by(by: &str, text: &str) -> String {
    if text.is_empty() || text == "reject" {
        format!("rejected by {by}")
    } else {
        format!("rejected by {by}: {text}")
    }
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

    /// `judge` with the criteria the host checks in the workspace (`file_exists`) and the
    /// `command` criteria `checks` holds (what each came to, [`Self::run_checks`]).
    fn judge(
        &self,
        node: &warrant_graph::Node,
        scope: &Value,
        checks: &Checks,
    ) -> std::result::Result<(), Failure> {
        let workspace = self.env.workspace.as_path();
        attempt::judge_with(node, scope, &|c| match c.kind.as_str() {
            "file_exists" => Some(
                match file_exists(
                    workspace,
                    c.path.as_deref().unwrap_or_default(),
                    c.min_bytes,
                ) {
                    Ok(true) => Verdict::Pass,
                    Ok(false) => Verdict::Fail {
                        class: "criteria_failed",
                        evidence: None,
                    },
                    Err(e) => Verdict::Error(e),
                },
            ),
            "command" => Some(match checks.get(&c.id) {
                Some((CheckOutcome::Passed, _)) => Verdict::Pass,
                Some((CheckOutcome::Failed, evidence)) => Verdict::Fail {
                    class: "criteria_failed",
                    evidence: Some(evidence.clone()),
                },
                Some((CheckOutcome::TimedOut, evidence)) => Verdict::Fail {
                    class: "timeout",
                    evidence: Some(evidence.clone()),
                },
                Some((CheckOutcome::Refused, evidence)) => Verdict::Refused(evidence.clone()),
                None => Verdict::Refused("its command was not run in this attempt".into()),
            }),
            // Asked of a person once everything else passed (`human_criteria`).
            "human" => Some(Verdict::Pass),
            _ => None,
        })
    }

    /// What the `command` criteria of `node`'s attempt `attempt` came to, as journaled.
    fn settled(state: &RunState, node: &str, attempt: u32) -> Checks {
        state
            .graph
            .iter()
            .filter(|s| s.node == node && s.attempt == attempt)
            .filter_map(|s| s.check.as_ref())
            .filter_map(|c| {
                Some((
                    c.criterion.clone(),
                    (c.outcome?, c.evidence.clone().unwrap_or_default()),
                ))
            })
            .collect()
    }

    /// Runs the `command` criteria of `node`'s attempt (AGS §10.2), required and advisory
    /// alike, in declared order. Each is a call the graph makes through the ring, exactly as
    /// the agent's `run_command`: a `shell.exec` decided by policy under the node's ceiling
    /// (the attempt's, carried by the `running` step that raises it), run under the default
    /// subprocess profile (confined), journaled and audited. Policy's `ask` asks a person as
    /// for any command (the run parks until they answer); a deny, the ceiling's or a
    /// person's, is a criterion that did not pass, never one skipped. What each came to is
    /// journaled on the node's step; a resume finds it there and runs nothing again.
    fn run_checks(
        &self,
        state: &mut RunState,
        node: &warrant_graph::Node,
        attempt: u32,
        prompter: &mut dyn Prompter,
    ) -> Result<std::result::Result<Checks, Stepped>> {
        let ceiling = state
            .graph
            .iter()
            .rev()
            .find(|s| {
                s.node == node.id
                    && s.attempt == attempt
                    && s.status == NodeStatus::Running
                    && s.check.is_none()
            })
            .and_then(|s| s.ceiling.clone());
        let mut checks = Self::settled(state, &node.id, attempt);
        for c in node.criteria.iter().filter(|c| c.kind == "command") {
            if checks.contains_key(&c.id) {
                continue;
            }
            let call_id = format!("graph-{}-{attempt}-criterion-{}", node.id, c.id);
            let check = |outcome: Option<CheckOutcome>, evidence: Option<String>| {
                let mut s = step(&node.id, NodeStatus::Running, attempt);
                s.ceiling = ceiling.clone();
                s.check = Some(CheckStep {
                    criterion: c.id.clone(),
                    severity: if c.required { "required" } else { "advisory" }.to_owned(),
                    call: call_id.clone(),
                    outcome,
                    evidence,
                });
                s
            };
            if state.call(&call_id).is_none() {
                // The graph was refused at load if its `run` needs a shell.
                let argv = warrant_graph::command::argv(c.run.as_deref().unwrap_or_default())
                    .map_err(|e| {
                        graph_error(&GraphError::Unsupported {
                            path: self.graph.path.display().to_string(),
                            features: vec![e],
                        })
                    })?;
                let mut args = json!({ "argv": argv });
                if let Some(t) = c.timeout_seconds {
                    args["timeout_ms"] = json!(t.saturating_mul(1000).max(1));
                }
                if let Some(cwd) = &c.cwd {
                    args["cwd"] = json!(cwd);
                }
                let call = CallRecord {
                    id: call_id.clone(),
                    tool: "run_command".into(),
                    args,
                };
                self.ring
                    .raise_graph_call(state, check(None, None), call)
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
                    return Ok(Err(Stepped::Exit(RunExit::Parked { request })));
                }
            }
            if state.parked.is_some() {
                self.ring
                    .resume(state, &self.host.identity.principal)
                    .map_err(|e| HostError::bad_input(&e))?;
            }
            let (outcome, evidence) = match state.call(&call_id).and_then(|c| c.result.clone()) {
                Some(result) => warrant_graph::command::settle(c, &result),
                None => (
                    CheckOutcome::Refused,
                    "the command's call has no result".to_owned(),
                ),
            };
            self.ring
                .record_graph_step(state, check(Some(outcome), Some(evidence.clone())))
                .map_err(|e| Self::failed(&e))?;
            checks.insert(c.id.clone(), (outcome, evidence));
        }
        Ok(Ok(checks))
    }

    /// Puts a question to a person through the ring, as a call the graph makes: raised once
    /// (journaled with `asking`, the node's `awaiting_human` step), then the run parks until
    /// the answer. Idempotent: a resume that comes back here finds the call and its answer.
    fn ask_person(
        &self,
        state: &mut RunState,
        asking: NodeStep,
        call_id: &str,
        question: String,
        options: &[&str],
        prompter: &mut dyn Prompter,
    ) -> Result<Asked> {
        if state.call(call_id).is_none() {
            // A question that cannot be put to a person fails its node; it is never skipped.
            if !self.can_ask {
                return Ok(Asked::Heard(Heard::Unpresentable));
            }
            let mut args = json!({ "question": clip(question, 3900) });
            if !options.is_empty() {
                args["options"] = json!(options);
            }
            let call = CallRecord {
                id: call_id.to_owned(),
                tool: "ask_question".into(),
                args,
            };
            self.ring
                .raise_graph_call(state, asking, call)
                .map_err(|e| Self::failed(&e))?;
        }
        if state.call(call_id).is_some_and(|c| c.result.is_none()) {
            let lease = drive::lease_here(
                self.host.inst.store.as_ref(),
                &state.run,
                self.host.inst.notices.as_ref(),
            )
            .map_err(|e| HostError::bad_input(&e))?;
            self.ring.hold_fence(Some(lease.token));
            let stepped = self.ring.process_call(state, call_id, self.env, prompter);
            let _ = self.host.inst.store.release(&lease);
            self.ring.hold_fence(None);
            self.host.deliver();
            if let CallStep::Parked(request) = stepped.map_err(|e| HostError::failed(&e))? {
                return Ok(Asked::Stop(Stepped::Exit(RunExit::Parked { request })));
            }
        }
        if state.parked.is_some() {
            self.ring
                .resume(state, &self.host.identity.principal)
                .map_err(|e| HostError::bad_input(&e))?;
        }
        let ask = state.asks.values().find(|a| a.call_id == call_id);
        Ok(Asked::Heard(match ask.map(|a| (&a.reply, a.expired)) {
            Some((Some((Reply::Answered { option, text }, by)), _)) => Heard::Answered {
                option: *option,
                text: text.clone(),
                by: by.actor.clone(),
            },
            Some((Some((_, by)), _)) => Heard::Declined {
                by: by.actor.clone(),
            },
            Some((None, Some(_))) => Heard::Expired,
            _ => Heard::Unpresentable,
        }))
    }

    /// A `human` checkpoint of `node` (AGS §15): a question to a person whose answer lets the
    /// node go on, supplies or edits its outputs (`input`, `review` after outputs), or fails
    /// the attempt. `notify` is journaled and waits for nobody; a checkpoint whose `when` is
    /// false does not fire.
    fn checkpoint(
        &self,
        state: &mut RunState,
        at: Moment<'_>,
        cp: &Checkpoint,
        prompter: &mut dyn Prompter,
    ) -> Result<Checked> {
        let Moment {
            node,
            attempt,
            scope,
            material,
        } = at;
        if let Some(when) = &cp.when {
            match schedule::guard(self.graph, when, scope) {
                Ok(true) => {}
                Ok(false) => return Ok(Checked::Go(None)),
                Err(e) => {
                    return Ok(Checked::Failed(Failure {
                        class: "criteria_failed",
                        code: Some("RT062"),
                        reason: format!("human checkpoint `{}`: {e}", cp.id),
                    }));
                }
            }
        }
        let call_id = format!("graph-{}-{attempt}-{}-{}", node.id, cp.at.as_str(), cp.id);
        let prompt =
            warrant_graph::agx::render(&cp.prompt, scope).unwrap_or_else(|_| cp.prompt.clone());
        let mut asking = step(&node.id, NodeStatus::AwaitingHuman, attempt);
        asking.human = Some(HumanStep {
            checkpoint: cp.id.clone(),
            at: cp.at.as_str().to_owned(),
            mode: cp.mode.clone(),
            call: call_id.clone(),
        });
        if cp.mode == "notify" {
            let journaled = state
                .graph
                .iter()
                .any(|s| s.human.as_ref().is_some_and(|h| h.call == call_id));
            if !journaled {
                asking.reason = Some(format!(
                    "notify `{}` ({}): {}; nobody is waited for",
                    cp.id,
                    cp.at.as_str(),
                    prompt.trim()
                ));
                self.ring
                    .record_graph_step(state, asking)
                    .map_err(|e| Self::failed(&e))?;
            }
            return Ok(Checked::Go(None));
        }
        asking.reason = Some(format!("human checkpoint `{}` ({})", cp.id, cp.at.as_str()));
        let roles = if cp.roles.is_empty() {
            String::new()
        } else {
            format!(" (for {})", cp.roles.join(", "))
        };
        let mut question = format!(
            "Graph `{}`, node `{}` ({}), attempt {attempt}: checkpoint `{}` {} ({}){roles}\n\n{}",
            self.graph.id,
            node.id,
            node.title,
            cp.id,
            cp.at.as_str(),
            cp.mode,
            prompt.trim()
        );
        if !material.is_empty() {
            question.push_str("\n\n");
            question.push_str(material);
        }
        let options: &[&str] = match cp.mode.as_str() {
            "input" => {
                question.push_str(&warrant_graph::attempt::collect_prompt(&cp.collect));
                &[]
            }
            "review" => {
                question.push_str(
                    "\n\nApprove, reject, or answer with a JSON object of the outputs you edited.",
                );
                &["approve", "reject"]
            }
            _ => &["approve", "reject"],
        };
        let heard = match self.ask_person(state, asking, &call_id, question, options, prompter)? {
            Asked::Stop(s) => return Ok(Checked::Stop(s)),
            Asked::Heard(h) => h,
        };
        // A person's "no" after outputs means the work is not accepted (retried with their
        // words as feedback); anywhere else it means the node may not go on.
        let refused = if cp.at == Stage::AfterOutputs {
            "criteria_failed"
        } else {
            "permission_denied"
        };
        Ok(match heard {
            Heard::Answered { option, text, by } => {
                match warrant_graph::attempt::said(&cp.mode, option, &text, &cp.collect) {
                    Said::Approved => Checked::Go(None),
                    Said::Values(values) => Checked::Go(Some(values)),
                    Said::Missing(reason) => Checked::Failed(Failure {
                        class: "output_missing",
                        code: Some("RT033"),
                        reason: format!("checkpoint `{}`: {reason}", cp.id),
                    }),
                    Said::Rejected => Checked::Failed(Failure {
                        class: refused,
                        code: None,
                        reason: format!("checkpoint `{}` {}", cp.id, rejected_by(&by, &text)),
                    }),
                }
            }
            Heard::Declined { by } => Checked::Failed(Failure {
                class: refused,
                code: None,
                reason: format!("checkpoint `{}` declined by {by}", cp.id),
            }),
            Heard::Expired => Checked::Failed(Failure {
                class: "timeout",
                code: None,
                reason: format!("nobody answered checkpoint `{}` in time", cp.id),
            }),
            Heard::Unpresentable => Checked::Failed(Failure {
                class: "permission_denied",
                code: Some("RT015"),
                reason: format!(
                    "checkpoint `{}` could not be put to a person (the ask_question tool is not in the run's menu)",
                    cp.id
                ),
            }),
        })
    }

    /// `failure.escalation` to a person (§14.2): what failed and why, and the person decides:
    /// another attempt (their words its feedback), the node's outputs themselves, or give up
    /// (`on_exhausted` decides).
    fn escalate(
        &self,
        state: &mut RunState,
        node: &warrant_graph::Node,
        attempt: u32,
        failure: &Failure,
        prompter: &mut dyn Prompter,
    ) -> Result<Escalated> {
        let scope = self.scope(state);
        let call_id = format!("graph-{}-{attempt}-escalation", node.id);
        let default = warrant_graph::model::Escalation {
            to: "human".into(),
            roles: Vec::new(),
            message: None,
            include: vec!["failed_criteria".into(), "diagnostics".into()],
        };
        let e = node.escalation.as_ref().unwrap_or(&default);
        let message = e
            .message
            .as_deref()
            .map(|m| warrant_graph::agx::render(m, &scope).unwrap_or_else(|_| m.to_owned()))
            .unwrap_or_else(|| format!("node `{}` ({}) did not succeed", node.id, node.title));
        let roles = if e.roles.is_empty() {
            String::new()
        } else {
            format!(" (for {})", e.roles.join(", "))
        };
        let mut question = format!(
            "Graph `{}`, node `{}`: escalated to a person after attempt {attempt}{roles}\n\n{}",
            self.graph.id,
            node.id,
            message.trim()
        );
        for what in &e.include {
            let part = match what.as_str() {
                "failed_criteria" | "diagnostics" => format!(
                    "{what}: {}{}",
                    failure.code.map(|c| format!("[{c}] ")).unwrap_or_default(),
                    failure.reason
                ),
                "outputs" => format!(
                    "outputs: {}",
                    state
                        .graph
                        .iter()
                        .rev()
                        .find(|s| s.node == node.id && s.outputs.is_some())
                        .and_then(|s| s.outputs.clone())
                        .unwrap_or(Value::Null)
                ),
                "inputs" => format!(
                    "inputs: {}",
                    attempt::inputs(node, &scope).unwrap_or(Value::Null)
                ),
                _ => format!(
                    "transcript: the run's journal (`warrant runs show {}`)",
                    state.run
                ),
            };
            if !question.contains(&part) {
                question.push_str("\n\n");
                question.push_str(&part);
            }
        }
        question.push_str(&format!(
            "\n\nAnswer `retry` (or any guidance as text) for another attempt, `give up` to let the node end ({}), or a JSON object of the node's outputs to supply them yourself.",
            node.on_exhausted
        ));
        let mut asking = step(&node.id, NodeStatus::AwaitingHuman, attempt);
        asking.code = Some(failure.code.unwrap_or(failure.class).to_owned());
        asking.reason = Some(format!("escalated to a person: {}", failure.reason));
        asking.human = Some(HumanStep {
            checkpoint: "escalation".into(),
            at: "escalation".into(),
            mode: "approve".into(),
            call: call_id.clone(),
        });
        let heard = match self.ask_person(
            state,
            asking,
            &call_id,
            question,
            &["retry", "give up"],
            prompter,
        )? {
            Asked::Stop(s) => return Ok(Escalated::Stop(s)),
            Asked::Heard(h) => h,
        };
        Ok(match heard {
            Heard::Answered { option, text, by } => {
                let text = text.trim();
                if option == Some(2) || text == "give up" {
                    Escalated::GaveUp(format!("{by} gave up at the escalation"))
                } else if option == Some(1) || text == "retry" || text.is_empty() {
                    Escalated::Retry(None)
                } else {
                    match serde_json::from_str::<Value>(text) {
                        Ok(v @ Value::Object(_)) => Escalated::Outputs(v),
                        _ => Escalated::Retry(Some(format!("{by} at the escalation: {text}"))),
                    }
                }
            }
            Heard::Declined { by } => Escalated::GaveUp(format!("{by} declined the escalation")),
            Heard::Expired => Escalated::GaveUp("nobody answered the escalation in time".into()),
            Heard::Unpresentable => Escalated::Unpresentable,
        })
    }

    /// The `human` checkpoints of a node at `stage` once its attempt failed (`on_escalation`,
    /// `on_failure`), each put to a person with why. What they answer cannot undo the failure,
    /// so it is journaled and the ladder goes on; only a stop (the run parks to ask) is
    /// returned.
    fn told(
        &self,
        state: &mut RunState,
        at: &Moment<'_>,
        stage: Stage,
        prompter: &mut dyn Prompter,
    ) -> Result<Option<Stepped>> {
        for cp in at.node.checkpoints(stage) {
            if let Checked::Stop(stop) = self.checkpoint(state, *at, cp, prompter)? {
                return Ok(Some(stop));
            }
        }
        Ok(None)
    }

    /// A failed attempt: the failure ladder decides what comes next (a person at an
    /// escalation, and at the `on_failure` checkpoints of a node that fails), and it is
    /// journaled.
    fn attempt_failed(
        &self,
        state: &mut RunState,
        node: &warrant_graph::Node,
        attempt: u32,
        failure: Failure,
        prompter: &mut dyn Prompter,
    ) -> Result<Stepped> {
        let scope = self.scope(state);
        let mut rung = attempt::ladder(node, attempt, &failure, &scope);
        let mut s = step(&node.id, NodeStatus::AttemptFailed, attempt);
        s.code = Some(failure.code.unwrap_or(failure.class).to_owned());
        s.reason = Some(failure.reason.clone());
        let at = Moment {
            node,
            attempt,
            scope: &scope,
            material: &format!("Why: {}", failure.reason),
        };
        if rung == Rung::Escalate {
            if let Some(stop) = self.told(state, &at, Stage::OnEscalation, prompter)? {
                return Ok(stop);
            }
            match self.escalate(state, node, attempt, &failure, prompter)? {
                Escalated::Stop(stop) => return Ok(stop),
                Escalated::Retry(note) => {
                    rung = Rung::Retry;
                    s.reason = Some(match note {
                        Some(n) => format!("{}; {n}", failure.reason),
                        None => format!("{}; a person asked for another attempt", failure.reason),
                    });
                }
                Escalated::Outputs(outputs) => {
                    let inputs = attempt::inputs(node, &scope).unwrap_or(Value::Null);
                    let judged = attempt::node_scope(&scope, node, attempt, &inputs, &outputs);
                    // The attempt's commands are not run again for outputs a person supplied:
                    // what they came to stands.
                    let checks = Self::settled(state, &node.id, attempt);
                    match self.judge(node, &judged, &checks) {
                        Ok(()) => {
                            let mut done = step(&node.id, NodeStatus::Succeeded, attempt);
                            done.code = Some("escalated".into());
                            done.reason = Some("a person supplied the outputs".into());
                            done.outputs = Some(outputs);
                            self.ring
                                .record_graph_step(state, done)
                                .map_err(|e| Self::failed(&e))?;
                            return Ok(Stepped::Continue);
                        }
                        Err(f) => {
                            rung = attempt::exhausted(node);
                            s.reason = Some(format!(
                                "{}; the outputs a person supplied did not pass: {}",
                                failure.reason, f.reason
                            ));
                        }
                    }
                }
                Escalated::GaveUp(why) => {
                    rung = attempt::exhausted(node);
                    s.reason = Some(format!("{}; {why}", failure.reason));
                }
                Escalated::Unpresentable => {
                    rung = Rung::Fail;
                    s.code = Some("RT015".into());
                    s.reason = Some(format!(
                        "{}; the escalation could not be put to a person",
                        failure.reason
                    ));
                }
            }
        }
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
            Rung::Fail | Rung::Escalate => {
                s.status = NodeStatus::Failed;
                s
            }
        };
        // A person is told before the node's failure is final (they cannot undo it).
        if last.status == NodeStatus::Failed
            && let Some(stop) = self.told(state, &at, Stage::OnFailure, prompter)?
        {
            return Ok(stop);
        }
        // With policy.on_node_failure `halt`, the scheduler ends the run at its next step.
        self.ring
            .record_graph_step(state, last)
            .map_err(|e| Self::failed(&e))?;
        Ok(Stepped::Continue)
    }

    fn task(
        &self,
        state: &mut RunState,
        node: &warrant_graph::Node,
        run: Option<&schedule::NodeRun>,
        prompter: &mut dyn Prompter,
    ) -> Result<Stepped> {
        let attempt = match run {
            None => 1,
            Some(r) if r.status == NodeStatus::AttemptFailed => r.attempt + 1,
            Some(r) => r.attempt,
        };
        let brief = attempt::brief_of(self.graph, node, attempt);
        let run_scope = self.scope(state);
        // Whether this attempt's turn has started: everything before it (inputs, the
        // `before_start` checkpoints) is derived again, the same, on a resume.
        let started = state
            .graph
            .iter()
            .any(|s| s.node == node.id && s.attempt == attempt && s.status == NodeStatus::Running);
        if !started {
            let inputs = match attempt::inputs(brief, &run_scope) {
                Ok(i) => i,
                Err(f) => return self.attempt_failed(state, node, attempt, f, prompter),
            };
            let scope = attempt::node_scope(&run_scope, brief, attempt, &inputs, &Value::Null);
            // After inputs resolve, before the first model call (§17.7 step 3).
            if attempt == 1 {
                let material = format!("Inputs (JSON): {inputs}");
                for cp in node.checkpoints(Stage::BeforeStart) {
                    match self.checkpoint(
                        state,
                        Moment {
                            node,
                            attempt,
                            scope: &scope,
                            material: &material,
                        },
                        cp,
                        prompter,
                    )? {
                        Checked::Go(_) => {}
                        Checked::Stop(stop) => return Ok(stop),
                        Checked::Failed(f) => {
                            return self.attempt_failed(state, node, attempt, f, prompter);
                        }
                    }
                }
            }
            // An expression decision needs no model: its branches decide.
            if let Some(d) = &node.decision
                && d.evaluator == "expression"
            {
                return self.decide_by_expression(state, node, attempt, &scope, prompter);
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
            // A `before_side_effects` checkpoint holds every mutating call of the attempt for
            // a person, in the ring (the node's ceiling asks instead of allowing).
            let mut side_effects = None;
            for cp in node.checkpoints(Stage::BeforeSideEffects) {
                let fires = match &cp.when {
                    None => true,
                    Some(w) => match schedule::guard(self.graph, w, &scope) {
                        Ok(b) => b,
                        Err(e) => {
                            return self
                                .end_failed(state, None, EXPRESSION, e.to_string())
                                .map(Stepped::Exit);
                        }
                    },
                };
                if fires && cp.mode != "notify" {
                    side_effects = Some(cp.id.clone());
                    break;
                }
            }
            let mut s = step(&node.id, NodeStatus::Running, attempt);
            s.ceiling = Some(ceiling_of(brief, side_effects));
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
                backpressure: &install::OutboxBound::new(&self.host.inst, self.ring),
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
                        return self.attempt_failed(state, node, attempt, f, prompter);
                    }
                },
            }
        }
        let inputs = attempt::inputs(brief, &run_scope).unwrap_or(Value::Null);
        // After outputs are collected, before `success` is evaluated (§17.7 step 8): a person
        // may approve them, edit them (`review`) or supply values (`input`).
        for cp in node.checkpoints(Stage::AfterOutputs) {
            let scope = attempt::node_scope(&run_scope, node, attempt, &inputs, &outputs);
            let material = format!("Outputs (JSON): {outputs}");
            match self.checkpoint(
                state,
                Moment {
                    node,
                    attempt,
                    scope: &scope,
                    material: &material,
                },
                cp,
                prompter,
            )? {
                Checked::Go(None) => {}
                Checked::Go(Some(values)) => {
                    if let Some(o) = outputs.as_object_mut() {
                        o.extend(values);
                    }
                }
                Checked::Stop(stop) => return Ok(stop),
                Checked::Failed(f) => {
                    return self.attempt_failed(state, node, attempt, f, prompter);
                }
            }
        }
        let scope = attempt::node_scope(&run_scope, node, attempt, &inputs, &outputs);
        // Required outputs first (RT033, which `judge` reports): no command runs for work that
        // is not there.
        let checks = if attempt::missing_outputs(node, &scope).is_ok() {
            match self.run_checks(state, node, attempt, prompter)? {
                Ok(checks) => checks,
                Err(stop) => return Ok(stop),
            }
        } else {
            Checks::new()
        };
        let judged = match self.judge(node, &scope, &checks) {
            // A `human` criterion (§10.2): a person confirms, after every other criterion
            // passed (a person is not asked about work a check already refused).
            Ok(()) => {
                let material = format!("Outputs (JSON): {outputs}");
                let mut confirmed = Ok(());
                for c in node
                    .criteria
                    .iter()
                    .filter(|c| c.kind == "human" && c.required)
                {
                    let cp = Checkpoint {
                        id: format!("criterion-{}", c.id),
                        at: Stage::AfterOutputs,
                        mode: "approve".into(),
                        prompt: format!(
                            "{}\n\n{}",
                            c.description.trim(),
                            c.prompt.as_deref().unwrap_or_default()
                        ),
                        roles: c.roles.clone(),
                        when: None,
                        collect: Vec::new(),
                    };
                    let at = Moment {
                        node,
                        attempt,
                        scope: &scope,
                        material: &material,
                    };
                    match self.checkpoint(state, at, &cp, prompter)? {
                        Checked::Go(_) => {}
                        Checked::Stop(stop) => return Ok(stop),
                        Checked::Failed(f) => {
                            confirmed = Err(Failure {
                                class: "criteria_failed",
                                code: f.code,
                                reason: format!("criterion `{}`: {}", c.id, f.reason),
                            });
                            break;
                        }
                    }
                }
                confirmed
            }
            Err(f) => Err(f),
        };
        match judged {
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
            Err(f) => {
                // After `success` fails, before the ladder (§17.7 step 10): a person's "no"
                // ends the retries.
                let mut failure = f;
                if failure.class == "criteria_failed" {
                    let material = format!("Why: {}", failure.reason);
                    for cp in node.checkpoints(Stage::OnCriteriaFailure) {
                        let at = Moment {
                            node,
                            attempt,
                            scope: &scope,
                            material: &material,
                        };
                        match self.checkpoint(state, at, cp, prompter)? {
                            Checked::Go(_) => {}
                            Checked::Stop(stop) => return Ok(stop),
                            Checked::Failed(f) => {
                                failure = Failure {
                                    class: f.class,
                                    code: f.code,
                                    reason: format!("{}; {}", failure.reason, f.reason),
                                };
                                break;
                            }
                        }
                    }
                }
                self.attempt_failed(state, node, attempt, failure, prompter)
            }
        }
    }

    fn decide_by_expression(
        &self,
        state: &mut RunState,
        node: &warrant_graph::Node,
        attempt: u32,
        scope: &Value,
        prompter: &mut dyn Prompter,
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
                self.attempt_failed(state, node, attempt, f, prompter)
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
        if g.mode == "notify" {
            let mut s = step(&node.id, NodeStatus::Succeeded, attempt);
            s.reason = Some("notify: nobody is waited for".into());
            s.outputs = Some(json!({}));
            self.ring
                .record_graph_step(state, s)
                .map_err(|e| Self::failed(&e))?;
            return Ok(Stepped::Continue);
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
        let options: &[&str] = if g.mode == "input" {
            question.push_str(&warrant_graph::attempt::collect_prompt(&g.collect));
            &[]
        } else {
            &["approve", "reject"]
        };
        let mut asking = step(&node.id, NodeStatus::AwaitingHuman, attempt);
        asking.human = Some(HumanStep {
            checkpoint: "gate".into(),
            at: "gate".into(),
            mode: g.mode.clone(),
            call: call_id.clone(),
        });
        let heard = match self.ask_person(state, asking, &call_id, question, options, prompter)? {
            Asked::Stop(stop) => return Ok(stop),
            Asked::Heard(h) => h,
        };
        // The person's word: approve, reject (or values, for `input`), a decline, or no
        // answer in time.
        let (said, by, text) = match heard {
            Heard::Answered { option, text, by } => (
                warrant_graph::attempt::said(&g.mode, option, &text, &g.collect),
                by,
                text,
            ),
            Heard::Declined { by } => (Said::Rejected, by, String::new()),
            Heard::Expired => {
                let f = Failure {
                    class: "timeout",
                    code: None,
                    reason: "nobody answered the gate in time".into(),
                };
                return self.attempt_failed(state, node, attempt, f, prompter);
            }
            Heard::Unpresentable => {
                let f = Failure {
                    class: "permission_denied",
                    code: Some("RT015"),
                    reason: "the gate could not be put to a person (the ask_question tool is not in the run's menu)".into(),
                };
                return self.attempt_failed(state, node, attempt, f, prompter);
            }
        };
        let route = g.on_reject == "route";
        let mut s = step(&node.id, NodeStatus::Succeeded, attempt);
        match said {
            Said::Approved => {
                s.reason = Some(format!("approved by {by}"));
                s.outputs = Some(if route {
                    json!({ "decision": "approved" })
                } else {
                    json!({})
                });
            }
            Said::Values(values) => {
                s.reason = Some(format!("values supplied by {by}"));
                s.outputs = Some(Value::Object(values));
            }
            Said::Missing(reason) => {
                let f = Failure {
                    class: "output_missing",
                    code: Some("RT033"),
                    reason,
                };
                return self.attempt_failed(state, node, attempt, f, prompter);
            }
            Said::Rejected if route => {
                s.reason = Some(rejected_by(&by, &text));
                s.outputs = Some(json!({ "decision": "rejected" }));
            }
            Said::Rejected => {
                s.reason = Some(rejected_by(&by, &text));
                s.status = if g.on_reject == "skip_dependents" {
                    NodeStatus::Skipped
                } else {
                    NodeStatus::Failed
                };
                s.code = Some("rejected".into());
            }
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

    /// The AGS run record (§20) of graph run `run`, built from its journal: where it stands
    /// now (a parked run's record says `awaiting_human`), every node step, every answer a
    /// person gave. The graph is read from the file the run pinned; a changed file is refused
    /// (RT053), as on resume, since its nodes would not be the run's.
    pub fn graph_record(&self, run: &RunId) -> Result<RunRecord> {
        let scoped = self.inst.scoped();
        let row = scoped
            .run(run)
            .map_err(|e| HostError::failed(&e))?
            .ok_or_else(|| {
                HostError::bad_input(&warrant_kernel::KernelError::UnknownRun(run.to_string()))
            })?;
        let events = scoped.events(run).map_err(|e| HostError::failed(&e))?;
        let mut pin = None;
        let mut journal = Journal {
            run_id: run.to_string(),
            started_at: row.created_at,
            ended: None,
            parked: row.status == warrant_store::RunStatus::Parked,
            steps: Vec::new(),
            answers: BTreeMap::new(),
            expired: Vec::new(),
            params: Value::Null,
        };
        for stored in &events {
            let at = stored.recorded_at;
            let event =
                warrant_kernel::RunEvent::from_stored(stored).map_err(|e| HostError::failed(&e))?;
            // Only these events make the record; every other kind is the journal's alone.
            if let warrant_kernel::RunEvent::RunStarted { settings, .. } = event {
                journal.started_at = at;
                pin = settings.graph;
            } else if let warrant_kernel::RunEvent::GraphNode(step) = event {
                journal.steps.push((at, step));
            } else if let warrant_kernel::RunEvent::RequestReplied {
                call_id, by, reply, ..
            } = event
            {
                let (option, text, declined) = match reply {
                    Reply::Answered { option, text } => (option, text, false),
                    Reply::Declined { reason } => (None, reason, true),
                    Reply::SecretProvided { .. }
                    | Reply::Connected { .. }
                    | Reply::Accepted { .. }
                    | Reply::Applied { .. } => (None, String::new(), false),
                };
                journal.answers.insert(
                    call_id,
                    Answer {
                        option,
                        text,
                        declined,
                        actor: by.actor,
                        at,
                    },
                );
            } else if let warrant_kernel::RunEvent::RequestExpired { call_id, .. } = event {
                journal.expired.push(call_id);
            } else if let warrant_kernel::RunEvent::RunEnded { outcome } = event {
                journal.ended = Some((
                    at,
                    match outcome {
                        Outcome::Completed => Ended::Completed,
                        Outcome::Failed { code, message } => Ended::Failed { code, message },
                        Outcome::Stopped { reason } => Ended::Stopped { reason },
                    },
                ));
            }
        }
        let Some(pin) = pin else {
            return Err(HostError::usage(
                NOT_A_GRAPH_RUN,
                format!("run {run} is not a graph run; it has no AGS run record"),
            ));
        };
        journal.params = pin.params.clone();
        let graph = Graph::load(Path::new(&pin.path)).map_err(|e| graph_error(&e))?;
        if graph.digest != pin.digest {
            return Err(HostError::coded(
                &Changed {
                    run: run.to_string(),
                    path: pin.path.clone(),
                    pinned: pin.digest.clone(),
                    now: graph.digest,
                },
                Class::Refused,
            ));
        }
        Ok(warrant_graph::record::build(&graph, &journal))
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
