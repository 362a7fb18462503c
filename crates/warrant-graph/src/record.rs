//! The AGS Run Record (§20, `schema/agentic-graph-run-1.0.schema.json`): a portable account
//! of one run of a graph, built from what the run's journal holds (its node steps, the
//! answers people gave, when each was recorded). Pure: the host reads the journal, this folds
//! it. The journal and the signed audit trail stay the record of authority; this document is
//! their projection into the spec's vocabulary, for tools that speak AGS.
//!
//! What Warrant does not journal is left out rather than invented: resolved inputs (they are in
//! the node's message), per-attempt token usage and routing (one model serves the run).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};
use warrant_core::Timestamp;
use warrant_kernel::graph::{NodeStatus, NodeStep};

use crate::attempt::{self, Said};
use crate::schedule::{self, Runs};
use crate::{Graph, LEVEL};

/// The media type of a run record (§3).
pub const MEDIA_TYPE: &str = "application/vnd.agentic-graph-run+json; version=1.0";

/// What the harness can do, for `harness.supported_features` (§19).
pub const FEATURES: &[&str] = &[
    "node.task",
    "node.decision",
    "node.gate",
    "gate.approve",
    "gate.review",
    "gate.input",
    "gate.notify",
    "edge.sequence",
    "edge.conditional",
    "edge.on_failure",
    "join.all",
    "join.any",
    "join.n_of",
    "when",
    "agx",
    "criterion.expression",
    "criterion.regex",
    "criterion.artifact_present",
    "criterion.file_exists",
    "criterion.human",
    "criterion.command",
    "criterion.json_schema",
    "failure.retry",
    "failure.fallback.alternate_node",
    "failure.fallback.skip",
    "failure.escalation.human",
    "failure.on_exhausted",
    "human.before_start",
    "human.before_side_effects",
    "human.after_outputs",
    "human.on_criteria_failure",
    "human.on_failure",
    "human.on_escalation",
    "policy.on_node_failure.halt",
    "policy.on_node_failure.isolate",
    "policy.on_expression_error",
    "params",
    "resume",
    "run_record",
    "x-warrant-ceiling",
];

/// A person's answer to one of the graph's questions, as the journal holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    pub option: Option<u32>,
    pub text: String,
    /// Declined rather than answered.
    pub declined: bool,
    pub actor: String,
    pub at: Timestamp,
}

/// How the run stands, from its journal.
#[derive(Clone, Debug, PartialEq)]
pub enum Ended {
    Completed,
    Failed { code: String, message: String },
    Stopped { reason: String },
}

/// Everything the record is built from.
#[derive(Clone, Debug)]
pub struct Journal {
    pub run_id: String,
    pub started_at: Timestamp,
    /// The run's end and when, if it ended.
    pub ended: Option<(Timestamp, Ended)>,
    /// Parked for a person.
    pub parked: bool,
    /// Every `graph_node` step with the time it was recorded.
    pub steps: Vec<(Timestamp, NodeStep)>,
    /// Answers by the id of the graph's call that asked.
    pub answers: BTreeMap<String, Answer>,
    /// Calls whose request expired unanswered.
    pub expired: Vec<String>,
    /// The run's parameters, as bound when it started.
    pub params: Value,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Harness {
    pub name: &'static str,
    pub version: &'static str,
    pub conformance_level: u8,
    pub supported_features: Vec<&'static str>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Diagnostic {
    pub code: String,
    pub severity: &'static str,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AttemptRecord {
    pub attempt: u32,
    /// `succeeded`, `failed`, `timeout`, `budget_exceeded`, `criteria_failed`, `cancelled`.
    pub status: &'static str,
    pub started_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The criteria whose evaluation the journal keeps (each `command` criterion's outcome
    /// and evidence); `passed` says whether the required ones among them passed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub success: Option<CriteriaResults>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CriteriaResults {
    pub passed: bool,
    pub results: Vec<CriterionResult>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CriterionResult {
    pub id: String,
    pub kind: &'static str,
    pub severity: String,
    pub passed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    pub evaluated_at: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HumanEvent {
    pub checkpoint_id: String,
    pub at_stage: String,
    pub mode: String,
    /// `approved`, `rejected`, `edited`, `provided`, `notified`, `timed_out`.
    pub outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeRecord {
    pub node_id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outputs: Option<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<AttemptRecord>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_used: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub escalated: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub human_events: Vec<HumanEvent>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EdgeTaken {
    pub from: String,
    pub to: String,
    pub kind: String,
    pub active: bool,
    /// The guard's value, for an edge that has one.
    pub when_result: Option<bool>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Usage {
    pub node_executions: u64,
}

/// The run record document.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunRecord {
    pub ags_version: &'static str,
    pub kind: &'static str,
    pub run_id: String,
    pub graph_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph_version: Option<String>,
    pub graph_digest: String,
    pub harness: Harness,
    /// `running`, `succeeded`, `failed`, `cancelled`, `awaiting_human`, `partial`.
    pub status: &'static str,
    pub started_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    pub params: Value,
    pub context: Value,
    pub outputs: Map<String, Value>,
    pub usage: Usage,
    pub diagnostics: Vec<Diagnostic>,
    pub nodes: Vec<NodeRecord>,
    pub edges_taken: Vec<EdgeTaken>,
}

fn node_status(s: NodeStatus) -> &'static str {
    match s {
        // Between attempts the node is still under way.
        NodeStatus::Running | NodeStatus::AttemptFailed => "running",
        NodeStatus::AwaitingHuman => "awaiting_human",
        NodeStatus::Succeeded => "succeeded",
        NodeStatus::Failed => "failed",
        NodeStatus::Skipped => "skipped",
        NodeStatus::Blocked => "blocked",
    }
}

/// An attempt's status from the code of the step that ended it (a failure class or an RT
/// code; the schema's attempt statuses are a subset of the classes).
fn attempt_status(step: &NodeStep) -> &'static str {
    match (step.status, step.code.as_deref()) {
        (NodeStatus::Succeeded, _) => "succeeded",
        (_, Some("criteria_failed")) => "criteria_failed",
        (_, Some("timeout")) => "timeout",
        (_, Some("budget_exceeded")) => "budget_exceeded",
        _ => "failed",
    }
}

/// The outcome of a person's answer at a step that asked, by the step's mode.
fn outcome(mode: &str, at: &str, answer: &Answer) -> &'static str {
    if answer.declined {
        return "rejected";
    }
    if at == "escalation" {
        return match (answer.option, answer.text.trim()) {
            (Some(2), _) | (_, "give up") => "rejected",
            (Some(1), _) | (_, "retry") => "approved",
            _ => "provided",
        };
    }
    match attempt::said(mode, answer.option, &answer.text, &[]) {
        Said::Approved => "approved",
        Said::Rejected => "rejected",
        Said::Values(_) if mode == "review" => "edited",
        Said::Values(_) | Said::Missing(_) => "provided",
    }
}

fn severity(code: &str) -> &'static str {
    match code {
        "RT022" | "RT042" | "RT062" => "warning",
        _ => "error",
    }
}

/// Builds the record of a run of `graph` from its journal.
pub fn build(graph: &Graph, journal: &Journal) -> RunRecord {
    let steps: Vec<NodeStep> = journal.steps.iter().map(|(_, s)| s.clone()).collect();
    let runs: Runs = schedule::runs_of(&steps);
    let scope = schedule::scope(graph, &journal.params, &runs);
    let time = |t: &Timestamp| t.rfc3339();

    let mut diagnostics = Vec::new();
    let mut nodes = Vec::new();
    let mut executions = 0u64;
    for node in &graph.nodes {
        let mine: Vec<&(Timestamp, NodeStep)> = journal
            .steps
            .iter()
            .filter(|(_, s)| s.node == node.id)
            .collect();
        let Some((last_at, last)) = mine.last() else {
            nodes.push(NodeRecord {
                node_id: node.id.clone(),
                kind: node.kind.as_str(),
                status: "pending",
                skip_reason: None,
                started_at: None,
                finished_at: None,
                outputs: None,
                attempts: Vec::new(),
                fallback_used: None,
                escalated: false,
                human_events: Vec::new(),
                decision: None,
            });
            continue;
        };
        let mut attempts: Vec<AttemptRecord> = Vec::new();
        let mut human_events = Vec::new();
        for (at, s) in &mine {
            if let Some(code) = s.code.as_deref().filter(|c| c.starts_with("RT")) {
                diagnostics.push(Diagnostic {
                    code: code.to_owned(),
                    severity: severity(code),
                    message: s.reason.clone().unwrap_or_default(),
                    node_id: Some(node.id.clone()),
                    at: Some(time(at)),
                });
            }
            // A criterion's command is part of its attempt, not another execution.
            if s.status == NodeStatus::Running && s.check.is_none() {
                executions += 1;
            }
            if s.attempt >= 1 && !attempts.iter().any(|a| a.attempt == s.attempt) {
                attempts.push(AttemptRecord {
                    attempt: s.attempt,
                    status: "failed",
                    started_at: time(at),
                    finished_at: None,
                    error: None,
                    success: None,
                });
            }
            if let Some(c) = &s.check
                && let Some(outcome) = c.outcome
                && let Some(a) = attempts.iter_mut().find(|a| a.attempt == s.attempt)
            {
                let passed = outcome == warrant_kernel::graph::CheckOutcome::Passed;
                let block = a.success.get_or_insert(CriteriaResults {
                    passed: true,
                    results: Vec::new(),
                });
                if c.severity == "required" && !passed {
                    block.passed = false;
                }
                block.results.push(CriterionResult {
                    id: c.criterion.clone(),
                    kind: "command",
                    severity: c.severity.clone(),
                    passed,
                    evidence: c.evidence.clone(),
                    evaluated_at: time(at),
                });
            }
            let ends = matches!(
                s.status,
                NodeStatus::AttemptFailed
                    | NodeStatus::Succeeded
                    | NodeStatus::Failed
                    | NodeStatus::Skipped
                    | NodeStatus::Blocked
            );
            if ends && let Some(a) = attempts.iter_mut().find(|a| a.attempt == s.attempt) {
                a.status = attempt_status(s);
                a.finished_at = Some(time(at));
                if s.status != NodeStatus::Succeeded {
                    a.error = s.reason.clone();
                }
            }
            if let Some(h) = &s.human {
                let answer = journal.answers.get(&h.call);
                let outcome = match answer {
                    _ if h.mode == "notify" => Some("notified"),
                    Some(a) => Some(outcome(&h.mode, &h.at, a)),
                    None if journal.expired.contains(&h.call) => Some("timed_out"),
                    None => None,
                };
                if let Some(outcome) = outcome {
                    human_events.push(HumanEvent {
                        checkpoint_id: h.checkpoint.clone(),
                        at_stage: h.at.clone(),
                        mode: h.mode.clone(),
                        outcome,
                        actor: answer.map(|a| a.actor.clone()),
                        note: answer
                            .map(|a| a.text.trim().to_owned())
                            .filter(|t| !t.is_empty()),
                        at: Some(answer.map_or_else(|| time(at), |a| time(&a.at))),
                    });
                }
            }
        }
        // An attempt still under way has no status the schema can state yet.
        attempts.retain(|a| a.finished_at.is_some());
        let outputs = (last.status == NodeStatus::Succeeded)
            .then(|| last.outputs.clone())
            .flatten();
        let max_attempt = mine.iter().map(|(_, s)| s.attempt).max().unwrap_or(0);
        let brief = attempt::brief_of(graph, node, max_attempt.max(1));
        nodes.push(NodeRecord {
            node_id: node.id.clone(),
            kind: node.kind.as_str(),
            status: node_status(last.status),
            skip_reason: (last.status == NodeStatus::Skipped)
                .then(|| last.reason.clone())
                .flatten(),
            started_at: mine.first().map(|(at, _)| time(at)),
            finished_at: last.status.is_terminal().then(|| time(last_at)),
            decision: outputs
                .as_ref()
                .and_then(|o| o.get("decision"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            outputs,
            attempts,
            fallback_used: (!std::ptr::eq(brief, node)).then(|| brief.id.clone()),
            escalated: mine
                .iter()
                .any(|(_, s)| s.human.as_ref().is_some_and(|h| h.at == "escalation")),
            human_events,
        });
    }

    let edges_taken = schedule::resolved_edges(graph, &runs, &scope)
        .into_iter()
        .map(|(e, active, when_result)| EdgeTaken {
            from: e.from.clone(),
            to: e.to.clone(),
            kind: e.kind.clone(),
            active,
            when_result,
        })
        .collect();

    // FINALIZE (§17.1): the graph's outputs, bound in the final scope.
    let mut outputs = Map::new();
    let mut unbound = Vec::new();
    for (name, spec) in graph
        .document
        .get("outputs")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let value = spec
            .get("from")
            .and_then(Value::as_str)
            .and_then(|from| crate::agx::eval(from, &scope).ok())
            .filter(|v| !v.is_null());
        match value {
            Some(v) => {
                outputs.insert(name.clone(), v);
            }
            None if spec.get("required").and_then(Value::as_bool) != Some(false) => {
                unbound.push(name.clone());
            }
            None => {}
        }
    }

    let degraded = steps
        .iter()
        .any(|s| s.status == NodeStatus::Succeeded && s.code.as_deref() == Some("RT042"));
    let status = match &journal.ended {
        Some((_, Ended::Completed)) if degraded || !unbound.is_empty() => "partial",
        Some((_, Ended::Completed)) => "succeeded",
        Some((_, Ended::Failed { .. })) => "failed",
        Some((_, Ended::Stopped { .. })) => "cancelled",
        None if journal.parked || runs.values().any(|r| r.status == NodeStatus::AwaitingHuman) => {
            "awaiting_human"
        }
        None => "running",
    };
    if let Some((at, end)) = &journal.ended {
        if !unbound.is_empty() && matches!(end, Ended::Completed) {
            diagnostics.push(Diagnostic {
                code: "RT041".into(),
                severity: "warning",
                message: format!("graph output(s) not bound: {}", unbound.join(", ")),
                node_id: None,
                at: Some(time(at)),
            });
        }
        match end {
            Ended::Failed { code, message } => diagnostics.push(Diagnostic {
                code: code.clone(),
                severity: "error",
                message: message.clone(),
                node_id: None,
                at: Some(time(at)),
            }),
            Ended::Stopped { reason } => diagnostics.push(Diagnostic {
                code: "stopped".into(),
                severity: "error",
                message: reason.clone(),
                node_id: None,
                at: Some(time(at)),
            }),
            Ended::Completed => {}
        }
    }

    RunRecord {
        ags_version: "1.0",
        kind: "AgenticGraphRun",
        run_id: journal.run_id.clone(),
        graph_id: graph.id.clone(),
        graph_version: graph
            .document
            .get("version")
            .and_then(Value::as_str)
            .map(str::to_owned),
        graph_digest: graph.digest.clone(),
        harness: Harness {
            name: "warrant",
            version: env!("CARGO_PKG_VERSION"),
            conformance_level: LEVEL,
            supported_features: FEATURES.to_vec(),
        },
        status,
        started_at: time(&journal.started_at),
        finished_at: journal.ended.as_ref().map(|(at, _)| time(at)),
        params: journal.params.clone(),
        context: graph
            .document
            .get("context")
            .cloned()
            .unwrap_or_else(crate::agx::object),
        outputs,
        usage: Usage {
            node_executions: executions,
        },
        diagnostics,
        nodes,
        edges_taken,
    }
}
