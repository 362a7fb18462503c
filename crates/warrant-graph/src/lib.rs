//! Agentic Graph Specification 1.0 for Warrant (issue 18, part 3). Loading and validation go
//! through the spec's own support crate (`agentic-graph-spec`: duplicate keys, schema, the AG
//! diagnostic codes, RFC 8785 digests, the effective edge set and topological order); this
//! crate adds what a harness must: AGX evaluation (`agx`), the Level 2 scheduler (`schedule`),
//! one node attempt's message, outputs, criteria and failure ladder (`attempt`), the read-only
//! plan (`plan`) and the conformance result (`conformance`). Nothing here touches the world:
//! the host runs each node as a governed step of one run through the ring.

pub mod agx;
pub mod attempt;
pub mod command;
pub mod conformance;
pub mod model;
pub mod plan;
pub mod record;
pub mod schedule;

use std::path::{Path, PathBuf};

use agentic_graph_spec::{Document, EffectiveEdge};
use serde::Serialize;
use serde_json::{Map, Value};
use warrant_core::Coded;

pub use model::{Node, NodeKind};

/// The conformance level Warrant claims (§19), with the limits `conformance` lists.
pub const LEVEL: u8 = 2;

/// One diagnostic of the spec's catalogue (§18): its `AG` code, severity and place.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub code: String,
    pub severity: String,
    pub message: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub pointer: String,
}

impl From<agentic_graph_spec::Finding> for Finding {
    fn from(f: agentic_graph_spec::Finding) -> Self {
        Self {
            code: f.code,
            severity: f.severity,
            message: f.message,
            pointer: f.pointer,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    #[error("cannot read graph {path}: {error}")]
    Unreadable { path: String, error: String },
    #[error("graph {path} is not valid: {}", summary(.findings))]
    Invalid {
        path: String,
        findings: Vec<Finding>,
    },
    #[error(
        "graph {path} uses what Warrant does not execute (conformance level {LEVEL}): {}; \
         `warrant graph plan` shows it without running it",
        .features.join("; ")
    )]
    Unsupported { path: String, features: Vec<String> },
    #[error("parameter `{name}`: {message} [{code}]")]
    Param {
        name: String,
        code: &'static str,
        message: String,
    },
    #[error("`--param {0}` is not NAME=VALUE")]
    ParamSyntax(String),
}

fn summary(findings: &[Finding]) -> String {
    findings
        .iter()
        .filter(|f| f.severity == "error")
        .map(|f| {
            if f.pointer.is_empty() {
                format!("{} {}", f.code, f.message)
            } else {
                format!("{} {} (at {})", f.code, f.message, f.pointer)
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

impl Coded for GraphError {
    fn code(&self) -> &'static str {
        match self {
            Self::Unreadable { .. } => "W-GRAPH-001",
            Self::Invalid { .. } => "W-GRAPH-002",
            Self::Unsupported { .. } => "W-GRAPH-003",
            Self::Param { .. } | Self::ParamSyntax(_) => "W-GRAPH-004",
        }
    }
}

/// What `graph validate` reports: every finding of the spec's catalogue, and the digest.
#[derive(Clone, Debug, Serialize)]
pub struct Validation {
    pub path: String,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph_digest: Option<String>,
    pub findings: Vec<Finding>,
}

fn read_document(path: &Path) -> Result<Document, Finding> {
    let text = std::fs::read_to_string(path).map_err(|e| Finding {
        code: "AG001".into(),
        severity: "error".into(),
        message: format!("cannot read the file: {e}"),
        pointer: String::new(),
    })?;
    let format = if path.extension().and_then(|e| e.to_str()) == Some("json") {
        "json"
    } else {
        "yaml"
    };
    agentic_graph_spec::parse(&text, format).map_err(|e| Finding {
        code: e.code.into(),
        severity: "error".into(),
        message: e.message,
        pointer: String::new(),
    })
}

/// Validates a file against the whole catalogue (layers 1–3 and the advisories).
pub fn validate(path: &Path) -> Validation {
    let shown = path.display().to_string();
    let doc = match read_document(path) {
        Ok(doc) => doc,
        Err(f) => {
            return Validation {
                path: shown,
                ok: false,
                id: None,
                graph_digest: None,
                findings: vec![f],
            };
        }
    };
    let report = agentic_graph_spec::validate(&doc);
    Validation {
        path: shown,
        ok: report.ok,
        id: doc.get("id").and_then(Value::as_str).map(str::to_owned),
        graph_digest: agentic_graph_spec::graph_digest(&doc).ok(),
        findings: report.findings.into_iter().map(Finding::from).collect(),
    }
}

/// A valid graph, read for planning and running.
#[derive(Clone, Debug)]
pub struct Graph {
    pub path: PathBuf,
    pub document: Document,
    pub digest: String,
    pub id: String,
    pub title: String,
    pub objective: String,
    pub entrypoints: Vec<String>,
    /// Declaration order.
    pub nodes: Vec<Node>,
    pub edges: Vec<EffectiveEdge>,
    /// Topological order, ties broken by declaration order (§17.4).
    pub order: Vec<String>,
    pub requires_conformance: u64,
    /// `policy.on_node_failure`: `halt`, `isolate` (default) or `continue`.
    pub on_node_failure: String,
    /// `policy.on_expression_error`: `fail` (default) or `false`.
    pub on_expression_error: String,
    /// `x-warrant-ceiling` (a top-level extension field, which AGS allows on every object):
    /// the worst risk class a run of the graph may reach.
    pub ceiling: Option<warrant_core::RiskClass>,
    pub warnings: Vec<Finding>,
}

/// The extension field a graph declares its effect-class ceiling in.
pub const CEILING_FIELD: &str = "x-warrant-ceiling";

impl Graph {
    /// Loads and validates `path`; any error-severity finding refuses it.
    pub fn load(path: &Path) -> Result<Self, GraphError> {
        let shown = path.display().to_string();
        let doc = read_document(path).map_err(|f| {
            if f.code == "AG001" && f.message.starts_with("cannot read") {
                GraphError::Unreadable {
                    path: shown.clone(),
                    error: f.message,
                }
            } else {
                GraphError::Invalid {
                    path: shown.clone(),
                    findings: vec![f],
                }
            }
        })?;
        let report = agentic_graph_spec::validate(&doc);
        let findings: Vec<Finding> = report.findings.into_iter().map(Finding::from).collect();
        if !report.ok {
            return Err(GraphError::Invalid {
                path: shown,
                findings,
            });
        }
        let invalid = |code: &str, message: String| GraphError::Invalid {
            path: shown.clone(),
            findings: vec![Finding {
                code: code.into(),
                severity: "error".into(),
                message,
                pointer: String::new(),
            }],
        };
        let digest = agentic_graph_spec::graph_digest(&doc)
            .map_err(|e| invalid("AG001", format!("cannot compute the digest: {e}")))?;
        agentic_graph_spec::topological_order(&doc).map_err(|e| invalid("AG111", e.to_string()))?;
        let text = |k: &str| {
            doc.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let defaults = doc.get("defaults").and_then(Value::as_object).cloned();
        let nodes = doc
            .get("nodes")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(id, raw)| {
                let mut merged = raw.clone();
                if let (Some(d), Some(m)) = (&defaults, merged.as_object_mut()) {
                    for (k, v) in d {
                        m.entry(k.clone()).or_insert_with(|| v.clone());
                    }
                }
                Node::read(id, &merged)
            })
            .collect();
        let policy = doc.get("policy").cloned().unwrap_or(Value::Null);
        let policy_of = |k: &str, d: &str| {
            policy
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or(d)
                .to_owned()
        };
        let ceiling = match doc.get(CEILING_FIELD) {
            None => None,
            Some(v) => Some(
                v.as_str()
                    .and_then(warrant_core::RiskClass::parse)
                    .ok_or_else(|| GraphError::Invalid {
                        path: shown.clone(),
                        findings: vec![Finding {
                            code: "W-ENVELOPE-009".into(),
                            severity: "error".into(),
                            message: format!(
                                "`{CEILING_FIELD}` must be a risk class (read, change, external, destructive, secret, irreversible), not {v}"
                            ),
                            pointer: format!("/{CEILING_FIELD}"),
                        }],
                    })?,
            ),
        };
        let mut graph = Self {
            path: path.to_path_buf(),
            edges: agentic_graph_spec::graph_effective_edges(&doc),
            id: text("id"),
            title: text("title"),
            objective: text("objective"),
            entrypoints: doc
                .get("entrypoints")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            requires_conformance: doc
                .get("requires_conformance")
                .and_then(Value::as_u64)
                .unwrap_or(1),
            on_node_failure: policy_of("on_node_failure", "isolate"),
            on_expression_error: policy_of("on_expression_error", "fail"),
            ceiling,
            nodes,
            order: Vec::new(),
            digest,
            document: doc,
            warnings: findings,
        };
        graph.order = schedule::order(&graph);
        Ok(graph)
    }

    pub fn node(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// The parameters of a run: the supplied ones over the declared defaults, checked (AG301,
    /// AG302 for `enum`).
    pub fn params(&self, supplied: &[(String, Value)]) -> Result<Value, GraphError> {
        let declared = self
            .document
            .get("params")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut out = Map::new();
        for (name, value) in supplied {
            if !declared.contains_key(name) {
                return Err(GraphError::Param {
                    name: name.clone(),
                    code: "AG203",
                    message: "the graph declares no such parameter".into(),
                });
            }
            out.insert(name.clone(), value.clone());
        }
        for (name, spec) in &declared {
            if let Some(allowed) = spec.get("enum").and_then(Value::as_array)
                && let Some(v) = out.get(name)
                && !allowed.contains(v)
            {
                return Err(GraphError::Param {
                    name: name.clone(),
                    code: "AG302",
                    message: format!("{v} is not one of {}", Value::Array(allowed.clone())),
                });
            }
            if out.contains_key(name) {
                continue;
            }
            match spec.get("default") {
                Some(d) => {
                    out.insert(name.clone(), d.clone());
                }
                None if spec.get("required").and_then(Value::as_bool) != Some(false) => {
                    return Err(GraphError::Param {
                        name: name.clone(),
                        code: "AG301",
                        message: "required, with no default; give it with --param NAME=VALUE"
                            .into(),
                    });
                }
                None => {}
            }
        }
        Ok(Value::Object(out))
    }
}

/// `NAME=VALUE`: the value as JSON when it parses as JSON, as a string otherwise.
pub fn parse_param(text: &str) -> Result<(String, Value), GraphError> {
    let (name, value) = text
        .split_once('=')
        .filter(|(n, _)| !n.is_empty())
        .ok_or_else(|| GraphError::ParamSyntax(text.to_owned()))?;
    let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_owned()));
    Ok((name.to_owned(), value))
}
