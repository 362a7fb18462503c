//! The scripted provider: a YAML transcript (`--model scripted:PATH`) whose turns are answered in
//! order, so tests and demos run without a model and replay identically. The whole transcript is
//! checked against the tools before a run starts; it never looks at the conversation.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;
use serde_yaml_ng::Value as Yaml;
use thiserror::Error;
use warrant_core::{Coded, ToolSpec};

use crate::error::ModelError;
use crate::types::{Conversation, ModelProvider, ModelResponse, ToolCall};

/// The only transcript format version there is.
pub const TRANSCRIPT_VERSION: u64 = 1;

/// A parsed transcript. Build it with [`Transcript::parse`] or [`Transcript::load`].
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transcript {
    /// Required at the top (checked before the typed parse); a child's may be left out.
    #[serde(default = "first_version")]
    pub version: u64,
    pub turns: Vec<Turn>,
    /// The subagents' transcripts, in the order the run's `spawn_agent` calls start them: the
    /// first call gets the first, and each may hold its own `children`.
    #[serde(default)]
    pub children: Vec<Transcript>,
}

fn first_version() -> u64 {
    TRANSCRIPT_VERSION
}

/// One model response.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    #[serde(default)]
    pub say: Option<String>,
    #[serde(default)]
    pub calls: Vec<ScriptedCall>,
    /// What the answer is said to have cost, as a server would count it (none by default: a
    /// scripted answer is free). For tests of budgets and their totals.
    #[serde(default)]
    pub usage: Option<ScriptedUsage>,
}

/// A scripted answer's token counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedCall {
    pub tool: String,
    /// A call without `args` passes `{}`; the tool's schema decides whether that is enough.
    #[serde(default = "empty_object")]
    pub args: Value,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// The keys each level of a transcript may have. Checked by hand before typed parsing so the
/// error can name the turn and call, which serde's own message cannot.
const TOP_KEYS: [&str; 3] = ["version", "turns", "children"];
const TURN_KEYS: [&str; 3] = ["say", "calls", "usage"];
const CALL_KEYS: [&str; 2] = ["tool", "args"];

impl Transcript {
    /// Read and parse a transcript file. `validate` it against the tools before use.
    pub fn load(path: &Path) -> Result<Self, TranscriptError> {
        let source = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| TranscriptError::Unreadable {
            source_name: source.clone(),
            message: e.to_string(),
        })?;
        Self::parse(&source, &text)
    }

    /// Parse transcript text; `source_name` names it in errors (usually the path).
    pub fn parse(source_name: &str, text: &str) -> Result<Self, TranscriptError> {
        let src = || source_name.to_owned();
        let doc: Yaml = serde_yaml_ng::from_str(text).map_err(|e| TranscriptError::Syntax {
            source_name: src(),
            line: e.location().map(|l| l.line()),
            column: e.location().map(|l| l.column()),
            message: e.to_string(),
        })?;
        let Yaml::Mapping(top) = &doc else {
            return Err(TranscriptError::Shape {
                source_name: src(),
                message: "expected a mapping with `version: 1` and `turns`".to_owned(),
            });
        };
        // Version first: a newer format may have keys this one does not know.
        match top.get("version") {
            Some(Yaml::Number(n)) if n.as_u64() == Some(TRANSCRIPT_VERSION) => {}
            Some(other) => {
                return Err(TranscriptError::BadVersion {
                    source_name: src(),
                    found: Some(yaml_inline(other)),
                });
            }
            None => {
                return Err(TranscriptError::BadVersion {
                    source_name: src(),
                    found: None,
                });
            }
        }
        unknown_keys(&doc, &TOP_KEYS, None, None).map_err(|e| e.into_error(src()))?;
        if let Some(Yaml::Sequence(turns)) = top.get("turns") {
            for (t, turn) in turns.iter().enumerate() {
                unknown_keys(turn, &TURN_KEYS, Some(t + 1), None)
                    .map_err(|e| e.into_error(src()))?;
                if let Some(Yaml::Sequence(calls)) = turn.get("calls") {
                    for (c, call) in calls.iter().enumerate() {
                        unknown_keys(call, &CALL_KEYS, Some(t + 1), Some(c + 1))
                            .map_err(|e| e.into_error(src()))?;
                    }
                }
            }
        }
        // Parse the text again, not the value, so type errors keep their line and column.
        serde_yaml_ng::from_str(text).map_err(|e| TranscriptError::Shape {
            source_name: src(),
            message: e.to_string(),
        })
    }

    /// The transcript of a subagent: `path` gives the index among its parent's spawns at each
    /// level (`[0, 1]`: the second subagent of the first).
    pub fn child(&self, path: &[usize]) -> Option<&Transcript> {
        path.iter().try_fold(self, |t, i| t.children.get(*i))
    }

    /// Check every call against the tools: the tool exists and the arguments satisfy its input
    /// schema. Stops at the first problem; indices in the error are 1-based. Subagents'
    /// transcripts are checked too.
    pub fn validate(&self, tools: &[ToolSpec]) -> Result<(), TranscriptError> {
        for child in &self.children {
            child.validate(tools)?;
        }
        let mut validators: BTreeMap<&str, jsonschema::Validator> = BTreeMap::new();
        for (t, turn) in self.turns.iter().enumerate() {
            for (c, call) in turn.calls.iter().enumerate() {
                let (turn_no, call_no) = (t + 1, c + 1);
                let Some(spec) = tools.iter().find(|s| s.name == call.tool) else {
                    return Err(TranscriptError::UnknownTool {
                        turn: turn_no,
                        call: call_no,
                        tool: call.tool.clone(),
                        known: tools.iter().map(|s| s.name.clone()).collect(),
                    });
                };
                if !validators.contains_key(spec.name.as_str()) {
                    let v = jsonschema::validator_for(&spec.input_schema).map_err(|e| {
                        TranscriptError::ToolSchema {
                            tool: spec.name.clone(),
                            message: e.to_string(),
                        }
                    })?;
                    validators.insert(spec.name.as_str(), v);
                }
                if let Some(v) = validators.get(spec.name.as_str())
                    && let Err(e) = v.validate(&call.args)
                {
                    return Err(TranscriptError::Schema {
                        turn: turn_no,
                        call: call_no,
                        tool: call.tool.clone(),
                        instance_path: e.instance_path().as_str().to_owned(),
                        message: e.to_string(),
                    });
                }
            }
        }
        Ok(())
    }
}

fn yaml_inline(v: &Yaml) -> String {
    serde_yaml_ng::to_string(v)
        .map(|s| s.trim_end().to_owned())
        .unwrap_or_else(|_| "an unprintable value".to_owned())
}

/// An unknown key found before the source name is attached.
struct UnknownKey {
    key: String,
    turn: Option<usize>,
    call: Option<usize>,
    expected: &'static [&'static str],
}

impl UnknownKey {
    fn into_error(self, source_name: String) -> TranscriptError {
        let place = match (self.turn, self.call) {
            (Some(t), Some(c)) => format!("turn {t}, call {c}"),
            (Some(t), None) => format!("turn {t}"),
            (None, Some(_)) | (None, None) => "top level".to_owned(),
        };
        TranscriptError::UnknownKey {
            source_name,
            place,
            key: self.key,
            expected: self
                .expected
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
}

/// Keys of `value` (when it is a mapping) that are not in `allowed`. Non-mappings are left to
/// the typed parse, which reports them with a line and column.
fn unknown_keys(
    value: &Yaml,
    allowed: &'static [&'static str],
    turn: Option<usize>,
    call: Option<usize>,
) -> Result<(), UnknownKey> {
    let Yaml::Mapping(map) = value else {
        return Ok(());
    };
    for key in map.keys() {
        let name = match key {
            Yaml::String(s) => s.clone(),
            Yaml::Null
            | Yaml::Bool(_)
            | Yaml::Number(_)
            | Yaml::Sequence(_)
            | Yaml::Mapping(_)
            | Yaml::Tagged(_) => yaml_inline(key),
        };
        if !allowed.contains(&name.as_str()) {
            return Err(UnknownKey {
                key: name,
                turn,
                call,
                expected: allowed,
            });
        }
    }
    Ok(())
}

/// Why a transcript was refused. All are input errors found before a run starts.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum TranscriptError {
    #[error("cannot read transcript {source_name}: {message}")]
    Unreadable {
        source_name: String,
        message: String,
    },
    #[error("transcript {source_name} is not valid YAML: {message}")]
    Syntax {
        source_name: String,
        line: Option<usize>,
        column: Option<usize>,
        message: String,
    },
    #[error("transcript {source_name}, {place}: unknown key `{key}`; expected one of {expected}")]
    UnknownKey {
        source_name: String,
        place: String,
        key: String,
        expected: String,
    },
    #[error(
        "transcript {source_name} {}; this Warrant reads `version: 1`",
        version_found(.found.as_deref())
    )]
    BadVersion {
        source_name: String,
        /// The value as YAML, or `None` when the key is missing.
        found: Option<String>,
    },
    #[error("turn {turn}, call {call}: unknown tool `{tool}`; known tools: {}", known_list(.known))]
    UnknownTool {
        turn: usize,
        call: usize,
        tool: String,
        known: Vec<String>,
    },
    #[error(
        "turn {turn}, call {call}: arguments of `{tool}` do not match its schema at {}: {message}",
        path_or_root(.instance_path)
    )]
    Schema {
        turn: usize,
        call: usize,
        tool: String,
        /// JSON Pointer into the arguments; empty for the arguments object itself.
        instance_path: String,
        message: String,
    },
    #[error("transcript {source_name} is not a valid transcript: {message}")]
    Shape {
        source_name: String,
        message: String,
    },
    #[error("tool `{tool}` has an input schema that cannot be compiled: {message}")]
    ToolSchema { tool: String, message: String },
}

fn known_list(known: &[String]) -> String {
    if known.is_empty() {
        return "(none)".to_owned();
    }
    known
        .iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn version_found(found: Option<&str>) -> String {
    match found {
        Some(v) => format!("has version {v}"),
        None => "has no `version`".to_owned(),
    }
}

fn path_or_root(path: &str) -> String {
    if path.is_empty() {
        "the top level".to_owned()
    } else {
        format!("`{path}`")
    }
}

impl Coded for TranscriptError {
    fn code(&self) -> &'static str {
        match self {
            Self::Unreadable { .. } => "W-TRANSCRIPT-001",
            Self::Syntax { .. } => "W-TRANSCRIPT-002",
            Self::UnknownKey { .. } => "W-TRANSCRIPT-003",
            Self::BadVersion { .. } => "W-TRANSCRIPT-004",
            Self::UnknownTool { .. } => "W-TRANSCRIPT-005",
            Self::Schema { .. } => "W-TRANSCRIPT-006",
            Self::Shape { .. } => "W-TRANSCRIPT-007",
            Self::ToolSchema { .. } => "W-TRANSCRIPT-008",
        }
    }
}

/// Answers turn `n` of the run with turn `n` of the transcript.
#[derive(Clone, Debug)]
pub struct ScriptedProvider {
    transcript: Transcript,
    source_name: String,
    /// Prefixed to call ids (a subagent's, so its calls read apart from its parent's).
    call_prefix: String,
}

impl ScriptedProvider {
    pub fn new(transcript: Transcript, source_name: impl Into<String>) -> Self {
        Self {
            transcript,
            source_name: source_name.into(),
            call_prefix: String::new(),
        }
    }

    /// The provider of a subagent's transcript: its call ids start with `prefix`.
    pub fn with_call_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.call_prefix = prefix.into();
        self
    }

    /// Load a transcript file; the caller still validates it against the tools.
    pub fn load(path: &Path) -> Result<Self, TranscriptError> {
        Ok(Self::new(
            Transcript::load(path)?,
            path.display().to_string(),
        ))
    }

    pub fn transcript(&self) -> &Transcript {
        &self.transcript
    }
}

impl ModelProvider for ScriptedProvider {
    fn describe(&self) -> String {
        format!(
            "scripted:{} ({} turns)",
            self.source_name,
            self.transcript.turns.len()
        )
    }

    fn respond(
        &self,
        _conversation: &Conversation,
        _tools: &[ToolSpec],
        turn: u32,
    ) -> Result<ModelResponse, ModelError> {
        let found = usize::try_from(turn)
            .ok()
            .and_then(|t| self.transcript.turns.get(t));
        // Past the end is an empty answer, which ends the run: a script never errors at run time.
        let Some(scripted) = found else {
            return Ok(ModelResponse {
                text: None,
                calls: Vec::new(),
                usage: None,
                model: "scripted".to_owned(),
            });
        };
        Ok(ModelResponse {
            text: scripted.say.clone(),
            calls: scripted
                .calls
                .iter()
                .enumerate()
                .map(|(i, c)| ToolCall {
                    id: format!("{}call-{turn}-{i}", self.call_prefix),
                    name: c.tool.clone(),
                    arguments: c.args.clone(),
                })
                .collect(),
            usage: scripted.usage.map(|u| crate::types::Usage {
                input_tokens: u.input_tokens,
                output_tokens: u.output_tokens,
            }),
            model: "scripted".to_owned(),
        })
    }
}
