//! The scheduling loop of AGS §17.3–17.6, as a pure function of what the run's journal says
//! about each node: edge activation, readiness under `join` and `when`, skip propagation, and
//! the run's end. Sequential: one node at a time, picked by topological order and then
//! declaration order (the spec's normative tie-break).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};
use warrant_kernel::graph::{NodeStatus, NodeStep};

use crate::agx::{self, AgxError};
use crate::model::Join;
use crate::{Graph, LEVEL};

/// Where one node stands, folded from its journaled steps.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeRun {
    pub status: NodeStatus,
    pub attempt: u32,
    pub outputs: Value,
}

/// Every node that has a step, by id.
pub type Runs = BTreeMap<String, NodeRun>;

/// Folds the run's `graph_node` steps (the last step of a node is where it stands).
pub fn runs_of(steps: &[NodeStep]) -> Runs {
    let mut runs = Runs::new();
    for step in steps {
        let entry = runs.entry(step.node.clone()).or_insert(NodeRun {
            status: step.status,
            attempt: step.attempt,
            outputs: Value::Null,
        });
        entry.status = step.status;
        entry.attempt = entry.attempt.max(step.attempt);
        if let Some(o) = &step.outputs
            && step.status == NodeStatus::Succeeded
        {
            entry.outputs = o.clone();
        }
    }
    runs
}

/// What the scheduler wants done next.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// Start (or continue) this node.
    Run(String),
    /// This node can no longer run: its join is unsatisfiable, or its `when` is false.
    Skip { node: String, reason: String },
    /// Nothing more can run. `unabsorbed`: failed nodes no `on_failure` edge took up.
    Finished { unabsorbed: Vec<String> },
}

/// The expression scope of the run so far (§16.2); `self` is added per node.
pub fn scope(graph: &Graph, params: &Value, runs: &Runs) -> Value {
    let mut nodes = Map::new();
    for (id, run) in runs {
        nodes.insert(
            id.clone(),
            json!({
                "status": run.status.as_str(),
                "outputs": run.outputs,
                "attempts": run.attempt,
                "decision": run.outputs.get("decision").cloned().unwrap_or(Value::Null),
            }),
        );
    }
    let d = &graph.document;
    json!({
        "graph": {
            "id": graph.id,
            "title": graph.title,
            "objective": graph.objective,
            "version": d.get("version").cloned().unwrap_or(Value::Null),
            "description": d.get("description").cloned().unwrap_or(Value::Null),
        },
        "params": params,
        "context": d.get("context").cloned().unwrap_or_else(agx::object),
        "attachments": agx::object(),
        "nodes": nodes,
    })
}

/// Evaluates a guard under the graph's `policy.on_expression_error`: with `false`, an
/// evaluation error reads as `false` (AGS RT062) instead of failing the run.
pub fn guard(graph: &Graph, expr: &str, scope: &Value) -> Result<bool, AgxError> {
    match agx::eval_bool(expr, scope) {
        Ok(b) => Ok(b),
        Err(_) if graph.on_expression_error == "false" => Ok(false),
        Err(e) => Err(AgxError(format!("`{expr}`: {e}"))),
    }
}

/// Edge resolution (§17.3): `Some(active)` once the source is terminal, `None` before.
fn edge_state(
    graph: &Graph,
    edge: &agentic_graph_spec::EffectiveEdge,
    runs: &Runs,
    scope: &Value,
) -> Result<Option<bool>, AgxError> {
    let Some(from) = runs.get(&edge.from).filter(|r| r.status.is_terminal()) else {
        return Ok(None);
    };
    let active = match (from.status, edge.kind.as_str()) {
        (NodeStatus::Succeeded, "sequence") => true,
        (NodeStatus::Succeeded, "conditional") => match &edge.when {
            Some(w) => guard(graph, w, scope)?,
            None => false,
        },
        (NodeStatus::Failed | NodeStatus::Blocked, "on_failure") => match &edge.when {
            Some(w) => guard(graph, w, scope)?,
            None => true,
        },
        _ => false,
    };
    Ok(Some(active))
}

/// Every effective edge whose source has reached a terminal state: whether it is active
/// (§17.3) and, for an edge with a guard that was evaluated, the guard's value.
pub fn resolved_edges<'g>(
    graph: &'g Graph,
    runs: &Runs,
    scope: &Value,
) -> Vec<(&'g agentic_graph_spec::EffectiveEdge, bool, Option<bool>)> {
    let mut out = Vec::new();
    for e in &graph.edges {
        let Ok(Some(active)) = edge_state(graph, e, runs, scope) else {
            continue;
        };
        let evaluated = match runs.get(&e.from).map(|r| r.status) {
            Some(NodeStatus::Succeeded) => e.kind == "conditional",
            Some(NodeStatus::Failed | NodeStatus::Blocked) => e.kind == "on_failure",
            _ => false,
        };
        let when_result = match &e.when {
            Some(w) if evaluated => guard(graph, w, scope).ok(),
            _ => None,
        };
        out.push((e, active, when_result));
    }
    out
}

/// The topological order with ties broken by declaration order (§17.4).
pub fn order(graph: &Graph) -> Vec<String> {
    let ids: Vec<&str> = graph.nodes.iter().map(|n| n.id.as_str()).collect();
    let mut incoming: BTreeMap<&str, usize> = ids.iter().map(|i| (*i, 0)).collect();
    for e in &graph.edges {
        if let Some(c) = incoming.get_mut(e.to.as_str()) {
            *c += 1;
        }
    }
    let mut out: Vec<String> = Vec::new();
    while out.len() < ids.len() {
        let Some(next) = ids
            .iter()
            .find(|i| incoming.get(**i) == Some(&0) && !out.iter().any(|o| o == *i))
        else {
            break;
        };
        out.push((*next).to_owned());
        for e in graph.edges.iter().filter(|e| e.from == *next) {
            if let Some(c) = incoming.get_mut(e.to.as_str()) {
                *c = c.saturating_sub(1);
            }
        }
    }
    out
}

/// The next thing to do, given what has happened.
pub fn next(graph: &Graph, params: &Value, runs: &Runs) -> Result<Next, AgxError> {
    // A node under way is continued before anything else starts (sequential scheduling).
    if let Some((id, _)) = runs.iter().find(|(_, r)| !r.status.is_terminal()) {
        return Ok(Next::Run(id.clone()));
    }
    let scope = scope(graph, params, runs);
    let unabsorbed = unabsorbed(graph, runs, &scope)?;
    if graph.on_node_failure == "halt" && !unabsorbed.is_empty() {
        return Ok(Next::Finished { unabsorbed });
    }
    for id in order(graph) {
        if runs.contains_key(&id) {
            continue;
        }
        let Some(node) = graph.node(&id) else {
            continue;
        };
        let incoming: Vec<_> = graph.edges.iter().filter(|e| e.to == id).collect();
        let mut states = Vec::new();
        for e in &incoming {
            states.push(edge_state(graph, e, runs, &scope)?);
        }
        let active = states.iter().filter(|s| **s == Some(true)).count();
        let inactive = states.iter().filter(|s| **s == Some(false)).count();
        let unresolved = states.iter().filter(|s| s.is_none()).count();
        let (ready, dead) = if incoming.is_empty() {
            // Without incoming edges only an entrypoint ever runs (others are AG903).
            (graph.entrypoints.contains(&id), false)
        } else {
            match node.join {
                Join::All => (active == incoming.len(), inactive > 0),
                Join::Any => (active >= 1, unresolved == 0 && active == 0),
                Join::NOf(k) => (active >= k, active + unresolved < k),
            }
        };
        if dead {
            return Ok(Next::Skip {
                node: id,
                reason: "its join can no longer be satisfied (an incoming edge is inactive)".into(),
            });
        }
        if !ready {
            continue;
        }
        if let Some(when) = &node.when
            && !guard(graph, when, &scope)?
        {
            return Ok(Next::Skip {
                node: id,
                reason: format!("its `when` is false: {when}"),
            });
        }
        return Ok(Next::Run(id));
    }
    Ok(Next::Finished { unabsorbed })
}

/// Failed (or blocked) nodes whose failure no active `on_failure` edge takes up.
fn unabsorbed(graph: &Graph, runs: &Runs, scope: &Value) -> Result<Vec<String>, AgxError> {
    let mut out = Vec::new();
    for (id, run) in runs {
        if !matches!(run.status, NodeStatus::Failed | NodeStatus::Blocked) {
            continue;
        }
        let mut absorbed = false;
        for e in graph
            .edges
            .iter()
            .filter(|e| e.from == *id && e.kind == "on_failure")
        {
            if edge_state(graph, e, runs, scope)? == Some(true) {
                absorbed = true;
            }
        }
        if !absorbed {
            out.push(id.clone());
        }
    }
    Ok(out)
}

/// The features of `graph` Warrant does not execute at its level, each said plainly. A
/// harness MUST refuse such a graph rather than ignore what it cannot do (§19).
pub fn unsupported(graph: &Graph) -> Vec<String> {
    let mut out = Vec::new();
    if graph.requires_conformance > u64::from(LEVEL) {
        out.push(format!(
            "AG303: requires_conformance {} is above Warrant's level {LEVEL}",
            graph.requires_conformance
        ));
    }
    if graph.on_node_failure == "continue" {
        out.push("policy.on_node_failure `continue`".into());
    }
    for n in &graph.nodes {
        let at = |what: String| format!("node `{}`: {what}", n.id);
        match n.kind {
            crate::NodeKind::Loop | crate::NodeKind::Map | crate::NodeKind::Subgraph => {
                out.push(at(format!("node type `{}` (level 3)", n.kind.as_str())));
            }
            crate::NodeKind::Task | crate::NodeKind::Decision | crate::NodeKind::Gate => {}
        }
        // Every tier is routed to the run's one model (§11.4 rule 4 lets a harness route up);
        // a context floor (rule 5, a hard one) is not something Warrant knows of that model.
        if graph
            .document
            .get("nodes")
            .and_then(|ns| ns.get(&n.id))
            .and_then(|d| d.get("intelligence"))
            .and_then(|i| i.get("min_context_tokens"))
            .is_some()
        {
            out.push(at(
                "`intelligence.min_context_tokens` (Warrant does not know the context window of the run's model, so cannot honour the floor)".into(),
            ));
        }
        for c in &n.human {
            if c.mode == "input" && c.at != crate::model::Stage::AfterOutputs {
                out.push(at(format!(
                    "human checkpoint `{}`: mode `input` at {} (Warrant collects values after outputs only)",
                    c.id,
                    c.at.as_str()
                )));
            }
        }
        if let Some(e) = &n.escalation
            && e.to != "human"
        {
            out.push(at(format!(
                "`failure.escalation` to `{}` (Warrant escalates to a person only)",
                e.to
            )));
        }
        for c in &n.criteria {
            match c.kind.as_str() {
                "expression" | "regex" | "artifact_present" | "file_exists" | "human" => {}
                // Run through the ring as a program with arguments: what needs a shell is
                // refused here, before anything runs.
                "command" => {
                    if let Err(e) = crate::command::argv(c.run.as_deref().unwrap_or_default()) {
                        out.push(at(format!("success criterion `{}`: {e}", c.id)));
                    }
                }
                "json_schema" if c.schema.is_none() => out.push(at(format!(
                    "success criterion `{}`: `schema_ref` (Warrant reads an inline `schema` only)",
                    c.id
                ))),
                "json_schema" => {}
                _ => out.push(at(format!(
                    "success criterion kind `{}` (`{}`)",
                    c.kind, c.id
                ))),
            }
        }
        for f in &n.fallback {
            if !matches!(f.strategy.as_str(), "alternate_node" | "skip") {
                out.push(at(format!("fallback strategy `{}`", f.strategy)));
            }
        }
    }
    out
}
