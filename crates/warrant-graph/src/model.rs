//! The parts of a validated AGS document Warrant executes, read into types. The document was
//! checked by the spec's schema first, so reading is lenient: a missing field takes the
//! spec's default (Appendix A).

use serde_json::Value;

/// AGS node types (§7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    Task,
    Decision,
    Gate,
    Loop,
    Map,
    Subgraph,
}

impl NodeKind {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "task" => Self::Task,
            "decision" => Self::Decision,
            "gate" => Self::Gate,
            "loop" => Self::Loop,
            "map" => Self::Map,
            "subgraph" => Self::Subgraph,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Task => "task",
            Self::Decision => "decision",
            Self::Gate => "gate",
            Self::Loop => "loop",
            Self::Map => "map",
            Self::Subgraph => "subgraph",
        }
    }
}

/// How a node's incoming edges combine (§17.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Join {
    All,
    Any,
    NOf(usize),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Output {
    pub name: String,
    pub required: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Input {
    pub name: String,
    pub from: Option<String>,
    pub template: Option<String>,
    pub value: Option<Value>,
    pub default: Option<Value>,
    pub required: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Criterion {
    pub id: String,
    pub kind: String,
    pub description: String,
    pub required: bool,
    /// `expr` of an `expression` criterion.
    pub expr: Option<String>,
    /// `target` and `pattern` of a `regex` criterion.
    pub target: Option<String>,
    pub pattern: Option<String>,
    /// `output` of an `artifact_present` criterion.
    pub output: Option<String>,
    /// `path` (a workspace path or glob) and `min_bytes` of a `file_exists` criterion.
    pub path: Option<String>,
    pub min_bytes: u64,
    /// `prompt` and `roles` of a `human` criterion.
    pub prompt: Option<String>,
    pub roles: Vec<String>,
    /// `run`, `cwd`, `expect_exit_code` (default 0), `expect_stdout_matches` and
    /// `timeout_seconds` of a `command` criterion.
    pub run: Option<String>,
    pub cwd: Option<String>,
    pub expect_exit_code: i64,
    pub expect_stdout_matches: Option<String>,
    pub timeout_seconds: Option<u64>,
    /// `schema` (inline JSON Schema) and `schema_ref` of a `json_schema` criterion.
    pub schema: Option<Value>,
    pub schema_ref: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Retry {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// Failure classes that are retried; empty: every class.
    pub retry_on: Vec<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Fallback {
    pub strategy: String,
    pub node: Option<String>,
    pub when: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Gate {
    pub mode: String,
    pub prompt: String,
    pub present: Vec<String>,
    pub roles: Vec<String>,
    pub on_reject: String,
    /// `gate.collect` (mode `input`): what the person supplies, each a node output.
    pub collect: Vec<Collected>,
}

/// One value a person supplies (`collect` of a gate or checkpoint in mode `input`).
#[derive(Clone, Debug, PartialEq)]
pub struct Collected {
    pub name: String,
    pub kind: String,
    pub description: String,
    pub required: bool,
    pub default: Option<Value>,
}

/// When a `human` checkpoint fires in its node's life (AGS §15).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    BeforeStart,
    BeforeSideEffects,
    AfterOutputs,
    OnCriteriaFailure,
    OnFailure,
    OnEscalation,
}

impl Stage {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "before_start" => Self::BeforeStart,
            "before_side_effects" => Self::BeforeSideEffects,
            "after_outputs" => Self::AfterOutputs,
            "on_criteria_failure" => Self::OnCriteriaFailure,
            "on_failure" => Self::OnFailure,
            "on_escalation" => Self::OnEscalation,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::BeforeStart => "before_start",
            Self::BeforeSideEffects => "before_side_effects",
            Self::AfterOutputs => "after_outputs",
            Self::OnCriteriaFailure => "on_criteria_failure",
            Self::OnFailure => "on_failure",
            Self::OnEscalation => "on_escalation",
        }
    }
}

/// A `human` checkpoint on a node.
#[derive(Clone, Debug, PartialEq)]
pub struct Checkpoint {
    /// Its `id`, or `human[N]` when it has none.
    pub id: String,
    pub at: Stage,
    /// `approve`, `review`, `input` or `notify`.
    pub mode: String,
    pub prompt: String,
    pub roles: Vec<String>,
    pub when: Option<String>,
    pub collect: Vec<Collected>,
}

/// `failure.escalation` (§14.2).
#[derive(Clone, Debug, PartialEq)]
pub struct Escalation {
    /// `human`, `node`, `supervisor` or `external`.
    pub to: String,
    pub roles: Vec<String>,
    pub message: Option<String>,
    /// What accompanies it: `inputs`, `outputs`, `failed_criteria`, `transcript`,
    /// `diagnostics` (default the last two of those that are about the failure).
    pub include: Vec<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Branch {
    pub label: String,
    pub description: String,
    pub when: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct DecisionBlock {
    pub question: String,
    pub evaluator: String,
    pub branches: Vec<Branch>,
    pub default_branch: Option<String>,
}

/// One node as Warrant runs it.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub id: String,
    pub kind: NodeKind,
    pub title: String,
    pub description: String,
    pub instructions: Option<String>,
    pub join: Join,
    pub when: Option<String>,
    pub inputs: Vec<Input>,
    pub outputs: Vec<Output>,
    pub criteria: Vec<Criterion>,
    pub retry: Option<Retry>,
    pub fallback: Vec<Fallback>,
    pub escalation: Option<Escalation>,
    pub on_exhausted: String,
    pub compensation: bool,
    pub gate: Option<Gate>,
    pub decision: Option<DecisionBlock>,
    pub permissions: Vec<String>,
    pub workspace: String,
    pub human: Vec<Checkpoint>,
}

impl Node {
    /// The checkpoints that fire at `stage`, in declaration order.
    pub fn checkpoints(&self, stage: Stage) -> impl Iterator<Item = &Checkpoint> {
        self.human.iter().filter(move |c| c.at == stage)
    }
}

fn s(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_owned)
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

fn named<T>(v: Option<&Value>, f: impl Fn(&str, &Value) -> T) -> Vec<T> {
    v.and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| f(k, v))
        .collect()
}

fn collected(v: Option<&Value>) -> Vec<Collected> {
    named(v, |name, c| Collected {
        name: name.to_owned(),
        kind: s(c, "type").unwrap_or_else(|| "string".into()),
        description: s(c, "description").unwrap_or_default(),
        required: c.get("required").and_then(Value::as_bool).unwrap_or(true),
        default: c.get("default").cloned(),
    })
}

impl Node {
    /// Reads node `id` (defaults already merged by the caller).
    pub fn read(id: &str, v: &Value) -> Self {
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .and_then(NodeKind::parse)
            .unwrap_or(NodeKind::Task);
        let join = match v.get("join").and_then(Value::as_str) {
            Some("any") => Join::Any,
            Some("n_of") => Join::NOf(
                v.get("join_count")
                    .and_then(Value::as_u64)
                    .map_or(1, |n| n as usize),
            ),
            _ => Join::All,
        };
        let success = v.get("success");
        let criteria = success
            .and_then(|s| s.get("criteria"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| Criterion {
                id: s(c, "id").unwrap_or_default(),
                kind: s(c, "kind").unwrap_or_default(),
                description: s(c, "description").unwrap_or_default(),
                required: s(c, "severity").as_deref() != Some("advisory"),
                expr: s(c, "expr"),
                target: s(c, "target"),
                pattern: s(c, "pattern"),
                output: s(c, "output"),
                path: s(c, "path"),
                min_bytes: c.get("min_bytes").and_then(Value::as_u64).unwrap_or(0),
                prompt: s(c, "prompt"),
                roles: strings(c.get("roles")),
                run: s(c, "run"),
                cwd: s(c, "cwd"),
                expect_exit_code: c
                    .get("expect_exit_code")
                    .and_then(Value::as_i64)
                    .unwrap_or(0),
                expect_stdout_matches: s(c, "expect_stdout_matches"),
                timeout_seconds: c.get("timeout_seconds").and_then(Value::as_u64),
                schema: c.get("schema").cloned(),
                schema_ref: s(c, "schema_ref"),
            })
            .collect();
        let failure = v.get("failure");
        let retry = failure.and_then(|f| f.get("retry")).map(|r| Retry {
            max_attempts: r
                .get("max_attempts")
                .and_then(Value::as_u64)
                .map_or(1, |n| n.clamp(1, 100) as u32),
            retry_on: strings(r.get("retry_on")),
        });
        let fallback = failure
            .and_then(|f| f.get("fallback"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|f| Fallback {
                strategy: s(f, "strategy").unwrap_or_default(),
                node: s(f, "node"),
                when: s(f, "when"),
            })
            .collect();
        let gate = v.get("gate").map(|g| Gate {
            mode: s(g, "mode").unwrap_or_else(|| "approve".into()),
            prompt: s(g, "prompt").unwrap_or_default(),
            present: strings(g.get("present")),
            roles: strings(g.get("roles")),
            on_reject: s(g, "on_reject").unwrap_or_else(|| "fail".into()),
            collect: collected(g.get("collect")),
        });
        let decision = v.get("decision").map(|d| DecisionBlock {
            question: s(d, "question").unwrap_or_default(),
            evaluator: s(d, "evaluator").unwrap_or_else(|| "agent".into()),
            branches: d
                .get("branches")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|b| Branch {
                    label: s(b, "label").unwrap_or_default(),
                    description: s(b, "description").unwrap_or_default(),
                    when: s(b, "when"),
                })
                .collect(),
            default_branch: s(d, "default_branch"),
        });
        let req = v.get("requirements");
        Self {
            id: id.to_owned(),
            kind,
            title: s(v, "title").unwrap_or_default(),
            description: s(v, "description").unwrap_or_default(),
            instructions: s(v, "instructions"),
            join,
            when: s(v, "when"),
            inputs: named(v.get("inputs"), |name, i| Input {
                name: name.to_owned(),
                from: s(i, "from"),
                template: s(i, "template"),
                value: i.get("value").cloned(),
                default: i.get("default").cloned(),
                required: i.get("required").and_then(Value::as_bool).unwrap_or(true),
            }),
            outputs: named(v.get("outputs"), |name, o| Output {
                name: name.to_owned(),
                required: o.get("required").and_then(Value::as_bool).unwrap_or(true),
            }),
            criteria,
            retry,
            fallback,
            escalation: failure
                .and_then(|f| f.get("escalation"))
                .map(|e| Escalation {
                    to: s(e, "to").unwrap_or_else(|| "human".into()),
                    roles: strings(e.get("roles")),
                    message: s(e, "message"),
                    include: match e.get("include") {
                        Some(i) => strings(Some(i)),
                        None => vec!["failed_criteria".into(), "diagnostics".into()],
                    },
                }),
            on_exhausted: failure
                .and_then(|f| s(f, "on_exhausted"))
                .unwrap_or_else(|| "fail".into()),
            compensation: failure.is_some_and(|f| f.get("compensation").is_some()),
            gate,
            decision,
            permissions: strings(req.and_then(|r| r.get("permissions"))),
            workspace: req
                .and_then(|r| s(r, "workspace"))
                .unwrap_or_else(|| "read_only".into()),
            human: v
                .get("human")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
                .filter_map(|(i, c)| {
                    Some(Checkpoint {
                        id: s(c, "id").unwrap_or_else(|| format!("human[{i}]")),
                        at: Stage::parse(&s(c, "at")?)?,
                        mode: s(c, "mode").unwrap_or_else(|| "approve".into()),
                        prompt: s(c, "prompt").unwrap_or_default(),
                        roles: strings(c.get("roles")),
                        when: s(c, "when"),
                        collect: collected(c.get("collect")),
                    })
                })
                .collect(),
        }
    }
}
