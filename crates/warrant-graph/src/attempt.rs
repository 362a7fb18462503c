//! One attempt of one node, as far as it is pure: how a node's brief becomes the turn the agent
//! is given, how the agent's answer becomes the node's outputs, whether the attempt succeeded
//! (required outputs, `success` criteria) and, when it did not, which rung of the failure
//! ladder comes next (§14.2).
//!
//! The turn: a task node's title, description, rendered `instructions`, resolved inputs and the
//! outputs it must produce, sent to the run's agent as the next message of the run (a graph run
//! is a session whose person is the graph). The agent works through the ring as in any run and
//! ends its turn with an answer; a JSON object in that answer (bare or in a ```json fence) is
//! the node's outputs, and any other answer is `{"text": …}`.

use serde_json::{Map, Value, json};

use crate::agx::{self, AgxError};
use crate::model::{Collected, Criterion, Node, NodeKind};

/// Why an attempt did not succeed: an AGS failure class (§14.1), the runtime code when there is
/// one, and what happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub class: &'static str,
    pub code: Option<&'static str>,
    pub reason: String,
}

/// The node's scope: the run's, plus `self` (and its alias `nodes.self`).
pub fn node_scope(
    run_scope: &Value,
    node: &Node,
    attempt: u32,
    inputs: &Value,
    outputs: &Value,
) -> Value {
    let me = json!({"id": node.id, "attempt": attempt, "inputs": inputs, "outputs": outputs});
    let mut scope = run_scope.clone();
    if let Some(map) = scope.as_object_mut() {
        map.insert("self".into(), me.clone());
        if let Some(nodes) = map.get_mut("nodes").and_then(Value::as_object_mut) {
            nodes.insert("self".into(), me);
        }
    }
    scope
}

/// Resolves the node's inputs once (§9.2): `from`, `template`, `value`, or by name from
/// `params` then `context`; a required input that stays absent fails the node (RT033).
pub fn inputs(node: &Node, scope: &Value) -> Result<Value, Failure> {
    let eval_err = |e: AgxError| Failure {
        class: "output_missing",
        code: Some("RT033"),
        reason: format!("an input could not be resolved: {e}"),
    };
    let mut out = Map::new();
    for i in &node.inputs {
        let v = if let Some(from) = &i.from {
            agx::eval(from, scope).map_err(eval_err)?
        } else if let Some(t) = &i.template {
            Value::String(agx::render(t, scope).map_err(eval_err)?)
        } else if let Some(v) = &i.value {
            v.clone()
        } else {
            let by_name = |ns: &str| scope.get(ns).and_then(|n| n.get(&i.name)).cloned();
            by_name("params")
                .or_else(|| by_name("context"))
                .unwrap_or(Value::Null)
        };
        let v = match (v, &i.default) {
            (Value::Null, Some(d)) => d.clone(),
            (v, _) => v,
        };
        if v.is_null() && i.required && i.default.is_none() {
            return Err(Failure {
                class: "output_missing",
                code: Some("RT033"),
                reason: format!("required input `{}` resolved to nothing", i.name),
            });
        }
        out.insert(i.name.clone(), v);
    }
    Ok(Value::Object(out))
}

/// The turn a task or decision node gives the agent. `feedback`: why the previous attempt
/// failed, for a retry.
pub fn message(
    node: &Node,
    graph_id: &str,
    scope: &Value,
    attempt: u32,
    feedback: Option<&str>,
) -> Result<String, AgxError> {
    let mut m = format!(
        "Agentic graph `{graph_id}`, node `{}` (attempt {attempt}): {}\n\n{}",
        node.id, node.title, node.description
    );
    if let Some(i) = &node.instructions {
        m.push_str("\n\n");
        m.push_str(&agx::render(i, scope)?);
    }
    if let Some(inputs) = scope.get("self").and_then(|s| s.get("inputs"))
        && inputs.as_object().is_some_and(|o| !o.is_empty())
    {
        m.push_str(&format!("\n\nInputs (JSON): {inputs}"));
    }
    match (node.kind, &node.decision) {
        (NodeKind::Decision, Some(d)) => {
            m.push_str(&format!(
                "\n\n{}\n\nChoose exactly one of:",
                agx::render(&d.question, scope)?
            ));
            for b in &d.branches {
                m.push_str(&format!("\n- {}: {}", b.label, b.description));
            }
            m.push_str("\n\nAnswer with the label alone, or a JSON object {\"decision\": LABEL}.");
        }
        _ if !node.outputs.is_empty() => {
            let names: Vec<&str> = node.outputs.iter().map(|o| o.name.as_str()).collect();
            m.push_str(&format!(
                "\n\nWhen you are done, answer with a JSON object with the keys: {}.",
                names.join(", ")
            ));
        }
        _ => {}
    }
    if let Some(f) = feedback {
        m.push_str(&format!("\n\nThe previous attempt failed: {f}"));
    }
    Ok(m)
}

/// The node's outputs from the agent's final answer.
pub fn outputs_from_answer(answer: Option<&str>) -> Value {
    let text = answer.unwrap_or_default().trim();
    let body = text
        .strip_prefix("```json")
        .or_else(|| text.strip_prefix("```"))
        .and_then(|t| t.trim_end().strip_suffix("```"))
        .unwrap_or(text)
        .trim();
    match serde_json::from_str::<Value>(body) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({ "text": text }),
    }
}

/// The label a decision's agent chose, if it is one of the branches.
pub fn chosen_label(node: &Node, answer: Option<&str>) -> Option<String> {
    let d = node.decision.as_ref()?;
    let outputs = outputs_from_answer(answer);
    let said = outputs
        .get("decision")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| {
            answer
                .unwrap_or_default()
                .trim()
                .trim_matches('"')
                .to_owned()
        });
    d.branches
        .iter()
        .find(|b| b.label == said)
        .map(|b| b.label.clone())
}

/// Whether the attempt's outputs pass: required outputs present (RT033), then every required
/// criterion (`expression`, `regex`, `artifact_present`, `json_schema`); advisory ones never
/// fail a node.
pub fn judge(node: &Node, scope: &Value) -> Result<(), Failure> {
    judge_with(node, scope, &|_| None)
}

/// What the host says of a criterion it checks against the world (`file_exists`, `command`).
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Pass,
    /// Checked and not met: the failure class (`criteria_failed`, or `timeout` for a command
    /// stopped at its timeout) and what was seen.
    Fail {
        class: &'static str,
        evidence: Option<String>,
    },
    /// It could not be evaluated (RT062).
    Error(AgxError),
    /// It was not allowed to run (policy, the node's ceiling or a person said no).
    Refused(String),
}

/// A criterion the host checks: `None` when it cannot.
pub type HostCheck<'a> = &'a dyn Fn(&Criterion) -> Option<Verdict>;

/// The node's outputs from `scope` (`self.outputs`).
fn outputs_of(scope: &Value) -> Value {
    scope
        .get("self")
        .and_then(|s| s.get("outputs"))
        .cloned()
        .unwrap_or(Value::Null)
}

/// Required outputs that were not produced (RT033): checked before any criterion (§10.3).
pub fn missing_outputs(node: &Node, scope: &Value) -> Result<(), Failure> {
    let outputs = outputs_of(scope);
    let missing: Vec<&str> = node
        .outputs
        .iter()
        .filter(|o| o.required && outputs.get(&o.name).is_none_or(Value::is_null))
        .map(|o| o.name.as_str())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(Failure {
        class: "output_missing",
        code: Some("RT033"),
        reason: format!("required output(s) not produced: {}", missing.join(", ")),
    })
}

/// `json_schema` (§10.2): the named output validates against the inline `schema`.
fn json_schema(c: &Criterion, outputs: &Value) -> Verdict {
    let Some(schema) = &c.schema else {
        return Verdict::Error(AgxError(
            "no inline `schema` (a `schema_ref` is not read)".into(),
        ));
    };
    let validator = match jsonschema::validator_for(schema) {
        Ok(v) => v,
        Err(e) => return Verdict::Error(AgxError(format!("`schema` is not a schema: {e}"))),
    };
    let name = c.output.as_deref().unwrap_or_default();
    let value = outputs.get(name).cloned().unwrap_or(Value::Null);
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .take(3)
        .map(|e| format!("{} at `{}`", e, e.instance_path()))
        .collect();
    if errors.is_empty() {
        Verdict::Pass
    } else {
        Verdict::Fail {
            class: "criteria_failed",
            evidence: Some(format!("output `{name}`: {}", errors.join("; "))),
        }
    }
}

/// [`judge`], with `host` answering the criteria that look at the workspace or ran a command.
pub fn judge_with(node: &Node, scope: &Value, host: HostCheck<'_>) -> Result<(), Failure> {
    missing_outputs(node, scope)?;
    let outputs = outputs_of(scope);
    let of = |passed: Result<bool, AgxError>| match passed {
        Ok(true) => Verdict::Pass,
        Ok(false) => Verdict::Fail {
            class: "criteria_failed",
            evidence: None,
        },
        Err(e) => Verdict::Error(e),
    };
    for c in node.criteria.iter().filter(|c| c.required) {
        let verdict = match c.kind.as_str() {
            "expression" => of(agx::eval_bool(c.expr.as_deref().unwrap_or("false"), scope)),
            // The named output was produced and is not empty (§10.2).
            "artifact_present" => of(Ok(c
                .output
                .as_deref()
                .and_then(|name| outputs.get(name))
                .is_some_and(|v| match v {
                    Value::Null => false,
                    Value::String(s) => !s.is_empty(),
                    Value::Array(a) => !a.is_empty(),
                    Value::Object(o) => !o.is_empty(),
                    Value::Bool(_) | Value::Number(_) => true,
                }))),
            "regex" => {
                // `target` (an expression) or `output` (a declared output's name).
                let target = match (&c.target, &c.output) {
                    (None, Some(o)) => Ok(agx::stringify(outputs.get(o).unwrap_or(&Value::Null))),
                    (t, _) => {
                        agx::eval(t.as_deref().unwrap_or("null"), scope).map(|v| agx::stringify(&v))
                    }
                };
                of(
                    match (
                        target,
                        regex::Regex::new(c.pattern.as_deref().unwrap_or("")),
                    ) {
                        (Ok(t), Ok(re)) => Ok(re.is_match(&t)),
                        (Err(e), _) => Err(e),
                        (_, Err(e)) => Err(AgxError(format!("bad pattern: {e}"))),
                    },
                )
            }
            "json_schema" => json_schema(c, &outputs),
            other => host(c).unwrap_or_else(|| {
                Verdict::Error(AgxError(format!(
                    "criterion kind `{other}` is not evaluated"
                )))
            }),
        };
        match verdict {
            Verdict::Pass => {}
            Verdict::Fail { class, evidence } => {
                return Err(Failure {
                    class,
                    code: None,
                    reason: match evidence {
                        None => format!("criterion `{}` failed: {}", c.id, c.description),
                        Some(e) => {
                            format!("criterion `{}` failed: {} ({e})", c.id, c.description)
                        }
                    },
                });
            }
            Verdict::Error(e) => {
                return Err(Failure {
                    class: "criteria_failed",
                    code: Some("RT062"),
                    reason: format!("criterion `{}` could not be evaluated: {e}", c.id),
                });
            }
            Verdict::Refused(why) => {
                return Err(Failure {
                    class: "permission_denied",
                    code: None,
                    reason: format!("criterion `{}` failed: {why}", c.id),
                });
            }
        }
    }
    Ok(())
}

/// What a person's answer to a gate or a `human` checkpoint says, by its mode.
#[derive(Clone, Debug, PartialEq)]
pub enum Said {
    Approved,
    Rejected,
    /// Values a person supplied (`input`) or outputs they edited (`review`).
    Values(Map<String, Value>),
    /// An `input` answer that leaves a required value out.
    Missing(String),
}

/// Reads an answer: `approve` (option 1) or `reject` (option 2); in mode `review`, a JSON
/// object is the outputs as the person edited them; in mode `input`, a JSON object of the
/// collected values (or, when one value is collected, the text itself), defaults filled in.
/// Anything else is a rejection: a person's unclear word never approves.
pub fn said(mode: &str, option: Option<u32>, text: &str, collect: &[Collected]) -> Said {
    let text = text.trim();
    let object = || match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(o)) => Some(o),
        _ => None,
    };
    match mode {
        "input" => {
            let mut values = match (object(), collect) {
                (Some(o), _) => o,
                (None, [one]) if !text.is_empty() => {
                    let mut m = Map::new();
                    m.insert(one.name.clone(), Value::String(text.to_owned()));
                    m
                }
                (None, _) => Map::new(),
            };
            for c in collect {
                if values.get(&c.name).is_none_or(Value::is_null) {
                    match (&c.default, c.required) {
                        (Some(d), _) => {
                            values.insert(c.name.clone(), d.clone());
                        }
                        (None, true) => {
                            return Said::Missing(format!(
                                "required value `{}` not supplied",
                                c.name
                            ));
                        }
                        (None, false) => {}
                    }
                }
            }
            Said::Values(values)
        }
        _ if option == Some(1) || text == "approve" => Said::Approved,
        "review" => match object() {
            Some(o) if option.is_none() => Said::Values(o),
            _ => Said::Rejected,
        },
        _ => Said::Rejected,
    }
}

/// How a person is asked for `collect`ed values.
pub fn collect_prompt(collect: &[Collected]) -> String {
    let mut out = String::from("\n\nAnswer with a JSON object of these values");
    if let [one] = collect {
        out.push_str(&format!(" (or `{}` alone, as text)", one.name));
    }
    out.push(':');
    for c in collect {
        out.push_str(&format!("\n- {} ({}): {}", c.name, c.kind, c.description));
        match (&c.default, c.required) {
            (Some(d), _) => out.push_str(&format!(" [default {d}]")),
            (None, false) => out.push_str(" [optional]"),
            (None, true) => {}
        }
    }
    out
}

/// The next rung of the failure ladder after attempt `attempt` failed with `failure`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rung {
    /// Try again (attempt + 1), with feedback.
    Retry,
    /// Run the named node's brief in this node's place (its outputs are adopted).
    Alternate(String),
    /// `fallback: skip` or `on_exhausted: skip`.
    Skip,
    /// `on_exhausted: succeed_degraded` (RT042).
    Degraded,
    /// `on_exhausted: fail`.
    Fail,
    /// `failure.escalation` (or `on_exhausted: escalate`): a person decides what comes next.
    Escalate,
}

/// Decides the next rung. Attempts `1..=max_attempts` are the retries; the fallbacks follow in
/// order, one attempt each, each behind its `when`; then the escalation, then `on_exhausted`.
pub fn ladder(node: &Node, attempt: u32, failure: &Failure, scope: &Value) -> Rung {
    let max = node.retry.as_ref().map_or(1, |r| r.max_attempts);
    let retried = node.retry.as_ref().is_some_and(|r| {
        r.retry_on.is_empty() || r.retry_on.iter().any(|c| c == failure.class || c == "any")
    });
    if attempt < max && retried {
        return Rung::Retry;
    }
    let used = attempt.saturating_sub(max) as usize;
    for f in node.fallback.iter().skip(used) {
        if let Some(w) = &f.when
            && agx::eval_bool(w, scope) != Ok(true)
        {
            continue;
        }
        match (f.strategy.as_str(), &f.node) {
            ("alternate_node", Some(n)) => return Rung::Alternate(n.clone()),
            ("skip", _) => return Rung::Skip,
            _ => {}
        }
    }
    if node.escalation.is_some() || node.on_exhausted == "escalate" {
        return Rung::Escalate;
    }
    exhausted(node)
}

/// The terminal disposition, `on_exhausted` (after an escalation a person gave up on,
/// `escalate` means `fail`).
pub fn exhausted(node: &Node) -> Rung {
    match node.on_exhausted.as_str() {
        "skip" => Rung::Skip,
        "succeed_degraded" => Rung::Degraded,
        _ => Rung::Fail,
    }
}

/// Which node's brief attempt `attempt` of `node` runs: its own, or the alternate of the
/// fallback that attempt belongs to.
pub fn brief_of<'g>(graph: &'g crate::Graph, node: &'g Node, attempt: u32) -> &'g Node {
    let max = node.retry.as_ref().map_or(1, |r| r.max_attempts);
    if attempt <= max {
        return node;
    }
    node.fallback
        .get((attempt - max - 1) as usize)
        .and_then(|f| f.node.as_deref())
        .and_then(|id| graph.node(id))
        .unwrap_or(node)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn node(v: Value) -> Node {
        Node::read("n", &v)
    }

    #[test]
    fn answers_become_outputs() {
        assert_eq!(outputs_from_answer(Some("{\"a\": 1}")), json!({"a": 1}));
        assert_eq!(
            outputs_from_answer(Some("```json\n{\"a\": 1}\n```")),
            json!({"a": 1})
        );
        assert_eq!(outputs_from_answer(Some("done")), json!({"text": "done"}));
    }

    #[test]
    fn the_ladder_retries_then_falls_back_then_ends() {
        let n = node(json!({
            "title": "t", "description": "d",
            "failure": {
                "retry": {"max_attempts": 2, "retry_on": ["criteria_failed"]},
                "fallback": [{"strategy": "alternate_node", "node": "alt"}],
                "on_exhausted": "skip"
            }
        }));
        let f = Failure {
            class: "criteria_failed",
            code: None,
            reason: String::new(),
        };
        let other = Failure {
            class: "tool_error",
            ..f.clone()
        };
        let s = json!({});
        assert_eq!(ladder(&n, 1, &f, &s), Rung::Retry);
        assert_eq!(ladder(&n, 1, &other, &s), Rung::Alternate("alt".into()));
        assert_eq!(ladder(&n, 2, &f, &s), Rung::Alternate("alt".into()));
        assert_eq!(ladder(&n, 3, &f, &s), Rung::Skip);
        let escalated = node(json!({
            "title": "t", "description": "d",
            "failure": {"escalation": {"to": "human"}, "on_exhausted": "skip"}
        }));
        assert_eq!(ladder(&escalated, 1, &f, &s), Rung::Escalate);
        assert_eq!(exhausted(&escalated), Rung::Skip);
    }

    #[test]
    fn answers_are_read_by_mode_and_never_approve_by_accident() {
        let one = vec![Collected {
            name: "version".into(),
            kind: "string".into(),
            description: "v".into(),
            required: true,
            default: None,
        }];
        let mut two = one.clone();
        two.push(Collected {
            name: "channel".into(),
            kind: "string".into(),
            description: "c".into(),
            required: false,
            default: Some(json!("stable")),
        });
        let values = |v: Value| Said::Values(v.as_object().unwrap().clone());
        let cases = [
            ("approve", Some(1), "", &one, Said::Approved),
            ("approve", None, "approve", &one, Said::Approved),
            ("approve", Some(2), "", &one, Said::Rejected),
            ("approve", None, "sure, whatever", &one, Said::Rejected),
            (
                "review",
                None,
                "{\"notes\": \"edited\"}",
                &one,
                values(json!({"notes": "edited"})),
            ),
            ("review", None, "fine", &one, Said::Rejected),
            (
                "input",
                None,
                "2.1.0",
                &one,
                values(json!({"version": "2.1.0"})),
            ),
            (
                "input",
                None,
                "{\"version\": \"3\"}",
                &two,
                values(json!({"version": "3", "channel": "stable"})),
            ),
            (
                "input",
                None,
                "",
                &one,
                Said::Missing("required value `version` not supplied".into()),
            ),
        ];
        for (mode, option, text, collect, want) in cases {
            assert_eq!(
                said(mode, option, text, collect),
                want,
                "{mode} {option:?} {text}"
            );
        }
    }

    #[test]
    fn judging_checks_outputs_then_criteria() {
        let n = node(json!({
            "title": "t", "description": "d",
            "outputs": {"status": {"type": "string", "description": "s"}},
            "success": {"criteria": [{"id": "green", "kind": "expression",
                "description": "the build is green", "expr": "self.outputs.status == 'green'"}]}
        }));
        let scope = |o: Value| node_scope(&json!({"nodes": {}}), &n, 1, &json!({}), &o);
        assert_eq!(judge(&n, &scope(json!({"status": "green"}))), Ok(()));
        assert_eq!(
            judge(&n, &scope(json!({}))).unwrap_err().code,
            Some("RT033")
        );
        assert_eq!(
            judge(&n, &scope(json!({"status": "red"})))
                .unwrap_err()
                .class,
            "criteria_failed"
        );
    }
}
