//! How a run's events read to a person: one or a few lines per event, decisions first with
//! their reasons beside them, paths relative to the workspace, long output cut with where to
//! see it whole. The terminal prints these lines and a chat gateway can post them; what a
//! person can do next (approve, answer, provide, connect) is a [`Next`] step each front end
//! words itself.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::BTreeMap;

use serde_json::Value;
use warrant_core::{Action, CanonicalPath, RequestId};
use warrant_kernel::{DeniedBy, ReasonRecord, RunEvent, Verdict};

/// What a person can do next, named by the operation.
#[derive(Clone, Copy, Debug)]
pub enum Next<'a> {
    /// Approve or deny a parked approval request.
    Approve { request: &'a RequestId },
    /// Answer (or decline) a question the agent asked.
    Answer { request: &'a RequestId },
    /// Provide (or decline) a secret the agent asked for.
    Provide { request: &'a RequestId },
    /// Connect (or decline) a resource the agent asked for.
    Connect { request: &'a RequestId },
    /// See an event's whole text where a line was cut short.
    WholeRun,
}

/// A front end's words for each next step.
pub trait Words {
    fn next(&self, step: Next<'_>) -> String;
}

/// One value shown inside a line: control characters, bidirectional overrides, zero-width
/// characters and line feeds escaped, so a value cannot begin a line that looks like Warrant's
/// own (off only for a debug build's negative control, `WARRANT_TEST_DISABLE=render`).
pub fn inline(text: &str) -> Cow<'_, str> {
    if crate::controls::disabled("render") {
        return Cow::Borrowed(text);
    }
    warrant_core::render::inline(text)
}

/// Narrates one run's events in order (it remembers the workspace, the tools called and the
/// actions proposed, to word the events that follow).
pub struct Narrator {
    words: Box<dyn Words>,
    workspace: RefCell<Option<CanonicalPath>>,
    tools: RefCell<BTreeMap<String, String>>,
    actions: RefCell<BTreeMap<String, Vec<Action>>>,
}

impl std::fmt::Debug for Narrator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Narrator").finish_non_exhaustive()
    }
}

impl Narrator {
    pub fn new(words: Box<dyn Words>) -> Self {
        Self {
            words,
            workspace: RefCell::new(None),
            tools: RefCell::new(BTreeMap::new()),
            actions: RefCell::new(BTreeMap::new()),
        }
    }

    fn rel(&self, target: &str) -> String {
        match self.workspace.borrow().as_ref() {
            Some(ws) => CanonicalPath::from_normalized(target)
                .ok()
                .and_then(|p| p.relative_to(ws))
                .unwrap_or_else(|| target.to_owned()),
            None => target.to_owned(),
        }
    }

    /// The lines one event reads as, in order; none for an event a person need not see.
    pub fn lines(&self, event: &RunEvent) -> Vec<String> {
        match event {
            RunEvent::RunStarted {
                principal,
                model,
                workspace,
                task,
                settings,
                ..
            } => {
                *self.workspace.borrow_mut() = Some(workspace.clone());
                let link = settings.spawn.as_ref().and_then(|s| {
                    s.parent.as_ref().map(|p| {
                        format!(
                            "subagent of {} (call {}), depth {}",
                            p.run,
                            warrant_core::render::inline(&p.call),
                            s.depth
                        )
                    })
                });
                let mut who = format!("{} ({}", principal.actor, principal.kind.as_str());
                if let Some(o) = &principal.on_behalf_of {
                    who.push_str(&format!(", for {o}"));
                }
                who.push_str(&format!(", tenant {})", principal.tenant));
                let mut v = vec![
                    format!("run      as {who} with {model}"),
                    format!("         workspace {workspace}"),
                    format!("task     {task}"),
                ];
                if let Some(link) = link {
                    v.insert(1, format!("         {link}"));
                }
                v
            }
            RunEvent::ModelResponded { text, calls, .. } => {
                let mut v = Vec::new();
                if let Some(t) = text {
                    v.push(format!("model    {t}"));
                }
                for c in calls {
                    self.tools.borrow_mut().insert(c.id.clone(), c.tool.clone());
                    v.push(format!(
                        "call     {} {}",
                        c.tool,
                        clip(&c.args.to_string(), 100)
                    ));
                }
                if text.is_none() && calls.is_empty() {
                    v.push("model    (done)".into());
                }
                v
            }
            RunEvent::AccessRefused {
                transport,
                status,
                reason,
                ..
            } => vec![format!("refused  {transport} request ({status}): {reason}")],
            RunEvent::CallReceived { client, call } => {
                self.tools
                    .borrow_mut()
                    .insert(call.id.clone(), call.tool.clone());
                vec![format!(
                    "call     {} {} (from {client})",
                    call.tool,
                    clip(&call.args.to_string(), 100)
                )]
            }
            RunEvent::CallRefused {
                tool,
                code,
                message,
                ..
            } => {
                vec![format!("refused  {tool}: {message} [{code}]")]
            }
            RunEvent::ActionProposed {
                call_id, actions, ..
            } => {
                self.actions
                    .borrow_mut()
                    .insert(call_id.clone(), actions.clone());
                vec![]
            }
            RunEvent::PolicyDecided {
                verdict,
                reasons,
                errors,
                call_id,
                index,
                ..
            } => {
                let what = self
                    .actions
                    .borrow()
                    .get(call_id)
                    .and_then(|a| a.get(*index as usize).cloned())
                    .map(|a| format!("{} {}", a.verb().as_str(), self.rel(&a.target())))
                    .unwrap_or_default();
                let label = match verdict {
                    Verdict::Allow => "allow",
                    Verdict::Ask => "ask",
                    Verdict::Deny => "deny",
                };
                let why = if !reasons.is_empty() {
                    reasons_text(reasons)
                } else if *verdict == Verdict::Deny {
                    "no policy permits it".to_owned()
                } else {
                    String::new()
                };
                let mut v = vec![format!("{label:<8} {what}  [{why}]")];
                for e in errors {
                    v.push(format!("         policy error: {e}"));
                }
                v
            }
            RunEvent::ApprovalRequested {
                request_id,
                presentation,
                risk,
                asked,
                ..
            } => {
                let mut v = vec![format!(
                    "request  {request_id}: {} (risk {}) needs a person's approval",
                    inline(&presentation.title),
                    risk.as_str()
                )];
                if let Some(a) = asked {
                    v.push(format!("         asked of {}", a.describe()));
                }
                push_lines(&mut v, &presentation.body, 40, &self.words.next(Next::WholeRun));
                v
            }
            RunEvent::ApprovalGranted {
                request_id,
                approver,
                scope,
                ..
            } => vec![format!(
                "approved {request_id} by {} ({}, via {})",
                approver.actor,
                scope.as_str(),
                approver.via
            )],
            RunEvent::ApprovalDenied {
                request_id,
                approver,
                reason,
            } => vec![format!(
                "denied   {request_id} by {} (via {}): {reason}",
                approver.actor, approver.via
            )],
            RunEvent::ApprovalRejected {
                request_id,
                reason,
                detail,
                approver,
            } => vec![format!(
                "rejected approval of {request_id}{} ({}): {detail}",
                approver
                    .as_ref()
                    .map(|a| format!(" by {}", a.actor))
                    .unwrap_or_default(),
                reason.as_str()
            )],
            RunEvent::RunParked { request_id } => {
                let ask = self.tools.borrow().get(&format!("ask:{request_id}")).cloned();
                vec![
                    format!("parked   waiting for a person to answer {request_id}"),
                    format!(
                        "         {}",
                        ask.unwrap_or_else(|| self.words.next(Next::Approve { request: request_id }))
                    ),
                ]
            }
            RunEvent::RequestRaised {
                request_id,
                ask,
                expires_at,
                asked_of,
                ..
            } => {
                let hint = self.words.next(match ask {
                    warrant_kernel::Ask::Question { .. }
                    | warrant_kernel::Ask::Elicitation { .. }
                    | warrant_kernel::Ask::Proposal { .. } => {
                        Next::Answer { request: request_id }
                    }
                    warrant_kernel::Ask::Secret { .. } => Next::Provide { request: request_id },
                    warrant_kernel::Ask::Resource { .. } => Next::Connect { request: request_id },
                });
                self.tools
                    .borrow_mut()
                    .insert(format!("ask:{request_id}"), hint);
                let mut lines = vec![format!(
                    "asks     {request_id}: {} (of {}; expires {})",
                    inline(&ask.title()),
                    asked_of.join(", "),
                    expires_at.rfc3339()
                )];
                // An elicitation: the server's words fenced, and each field it asks for.
                lines.extend(
                    ask.details()
                        .iter()
                        .flat_map(|d| {
                            d.lines()
                                .map(|l| format!("         {}", inline(l)))
                                .collect::<Vec<_>>()
                        }),
                );
                lines
            }
            RunEvent::RequestReplied {
                request_id,
                by,
                reply,
                ..
            } => {
                let detail = match reply {
                    warrant_kernel::Reply::Answered { text, .. } => format!(": {}", clip(text, 100)),
                    warrant_kernel::Reply::Declined { reason } => format!(": {reason}"),
                    warrant_kernel::Reply::SecretProvided { handle } => format!(" ({handle})"),
                    warrant_kernel::Reply::Connected { check } => format!(": {check}"),
                    warrant_kernel::Reply::Applied {
                        revision,
                        profile_digest,
                    } => format!(": revision {revision} ({profile_digest})"),
                    // The values stay in the journal; the narration names the fields.
                    warrant_kernel::Reply::Accepted { content } => format!(
                        ": {}",
                        content
                            .as_object()
                            .map(|m| m.keys().cloned().collect::<Vec<_>>().join(", "))
                            .unwrap_or_default()
                    ),
                };
                vec![format!(
                    "replied  {request_id} {} by {} (via {}){detail}",
                    reply.label(),
                    by.actor,
                    by.via
                )]
            }
            RunEvent::RequestExpired {
                request_id,
                expires_at,
                ..
            } => vec![format!(
                "expired  {request_id}: nobody answered before {}",
                expires_at.rfc3339()
            )],
            RunEvent::RunResumed { by } => vec![format!("resumed  by {by}")],
            RunEvent::EffectStarted { .. } => vec![],
            RunEvent::EffectCompleted {
                call_id,
                ok,
                result,
            }
            | RunEvent::EffectJudging {
                call_id,
                ok,
                result,
            } => {
                let tool = self
                    .tools
                    .borrow()
                    .get(call_id)
                    .cloned()
                    .unwrap_or_default();
                let mut lines = self.result_lines(&tool, *ok, result);
                if matches!(event, RunEvent::EffectJudging { .. }) {
                    lines.push(
                        "judging  what it changed waits for a person before it reaches the workspace"
                            .to_owned(),
                    );
                }
                lines
            }
            RunEvent::EffectDenied {
                denied, message, ..
            } => match denied {
                // The deny line above already gave the policy and its reason.
                DeniedBy::Policy { reasons }
                    if reasons.iter().all(|r| !r.policy.starts_with("builtin:")) =>
                {
                    vec![]
                }
                DeniedBy::Policy { .. } => vec![format!("refused  {}", self.rel_message(message))],
                DeniedBy::Person { approver, reason } => {
                    vec![format!(
                        "refused  by {}: {reason}; nothing was done",
                        approver.actor
                    )]
                }
            },
            RunEvent::EffectInDoubt { call_id, request_id } => vec![format!(
                "in-doubt {call_id} started before an interruption and has no recorded result; {}",
                match request_id {
                    Some(r) => format!("a person must say what happened ({r})"),
                    None => "a person must check whether it happened".to_owned(),
                }
            )],
            RunEvent::InDoubtResolved { call_id, resolution, by, .. } => vec![format!(
                "resolved {call_id} as {} by {}",
                resolution.as_str(),
                by.actor
            )],
            RunEvent::PolicyChanged { from, to, reevaluated } => vec![format!(
                "policy   changed since the run started ({} -> {}); {} pending call(s) decided again",
                &from.as_str()[..15.min(from.as_str().len())],
                &to.as_str()[..15.min(to.as_str().len())],
                reevaluated.len()
            )],
            RunEvent::ToolsChanged { .. } => vec!["tools    the tool catalogue changed since the run started; every finished step's tool is still offered".to_owned()],
            RunEvent::AuditGap { sink, from, to } => vec![format!(
                "gap      audit records {from}..={to} dropped for sink {sink} (outbox over its bound, on_full = drop)"
            )],
            RunEvent::ModelCallDenied { message, .. } => {
                vec![format!("deny     {message}")]
            }
            RunEvent::BudgetExceeded { message, usage, .. } => {
                let mut v = vec![format!("budget   {message}")];
                if let Some(u) = usage {
                    v.push(format!("         the answer was cut off at {u}"));
                }
                v
            }
            RunEvent::JournalRejected { code, seq, problem, .. } => vec![format!(
                "refused  the journal does not match its signed audit records ({problem} at event {seq}) [{code}]; nothing was done"
            )],
            RunEvent::Halted { code, halt, .. } => {
                vec![format!("halted   {} [{code}]", halt.reason())]
            }
            RunEvent::LimitReached { limit, max } => vec![format!(
                "limit    the run reached its {} cap ({max})",
                limit.as_str()
            )],
            RunEvent::RunEnded { outcome } => {
                vec![format!(
                    "end      {}",
                    warrant_kernel::ring::outcome_label(outcome)
                )]
            }
            RunEvent::AwaitingMessage { interrupted, .. } => vec![match interrupted {
                Some(i) => format!(
                    "stopped  by the person (Ctrl-C during the {}); waiting for the next message",
                    match i {
                        warrant_kernel::Interrupted::ModelCall => "model's answer",
                        warrant_kernel::Interrupted::Effect => "tool calls",
                    }
                ),
                None => "waiting  for the next message".to_owned(),
            }],
            RunEvent::MessageReceived {
                by,
                text,
                neutralized,
            } => {
                let mut v = vec![format!("message  {by}: {}", inline(text))];
                if !neutralized.is_empty() {
                    v.push(format!(
                        "         {} control character(s) neutralized: {}",
                        neutralized.len(),
                        neutralized.join(" ")
                    ));
                }
                v
            }
            RunEvent::MessageRefused { by, code, reason } => {
                vec![format!("refused  a message from {by}: {reason} [{code}]")]
            }
            RunEvent::GraphNode(step) if step.check.is_some() => {
                let Some(c) = &step.check else {
                    return Vec::new();
                };
                let what = match (c.outcome, &c.evidence) {
                    (None, _) => "its command runs".to_owned(),
                    (Some(o), Some(e)) => format!(
                        "{}: {}",
                        o.as_str(),
                        inline(e.lines().next().unwrap_or_default())
                    ),
                    (Some(o), None) => o.as_str().to_owned(),
                };
                vec![format!(
                    "node     {} criterion `{}` ({}, attempt {}): {what}",
                    step.node, c.criterion, c.severity, step.attempt
                )]
            }
            RunEvent::GraphNode(step) => {
                let why = match (&step.code, &step.reason) {
                    (Some(c), Some(r)) => format!(": {} [{c}]", inline(r)),
                    (None, Some(r)) => format!(": {}", inline(r)),
                    (Some(c), None) => format!(" [{c}]"),
                    (None, None) => String::new(),
                };
                vec![format!(
                    "node     {} {} (attempt {}){why}",
                    step.node,
                    step.status.as_str(),
                    step.attempt
                )]
            }
            RunEvent::HistoryCompacted {
                through_turn,
                estimated_tokens,
                budget,
                ..
            } => vec![format!(
                "compact  the turns before {through_turn} are summarized (history of about {estimated_tokens} tokens, budget {budget})"
            )],
        }
    }

    fn rel_message(&self, message: &str) -> String {
        match self.workspace.borrow().as_ref() {
            Some(ws) => message.replace(&format!("{}/", ws.as_str()), ""),
            None => message.to_owned(),
        }
    }

    fn result_lines(&self, tool: &str, ok: bool, result: &Value) -> Vec<String> {
        if !ok {
            let msg = result
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("failed");
            return vec![format!("failed   {tool}: {msg}")];
        }
        let n = |k: &str| result.get(k).and_then(Value::as_u64).unwrap_or(0);
        match tool {
            "read_file" => vec![format!(
                "done     read {} ({} bytes)",
                self.rel(result.get("path").and_then(Value::as_str).unwrap_or("")),
                n("total_bytes")
            )],
            "write_file" => vec![format!(
                "done     wrote {} ({} bytes{})",
                self.rel(result.get("path").and_then(Value::as_str).unwrap_or("")),
                n("bytes"),
                if result.get("created").and_then(Value::as_bool) == Some(true) {
                    ", new file"
                } else {
                    ""
                }
            )],
            "list_dir" => {
                let names: Vec<String> = result
                    .get("entries")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|e| {
                                let name = e.get("name")?.as_str()?;
                                let dir = e.get("kind").and_then(Value::as_str) == Some("dir");
                                Some(if dir {
                                    format!("{name}/")
                                } else {
                                    name.to_owned()
                                })
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                vec![format!(
                    "done     listed {} entries: {}",
                    names.len(),
                    names.join(" ")
                )]
            }
            "delete_path" => vec![format!("done     deleted {} entries", n("removed_entries"))],
            "search_files" => vec![format!(
                "done     {} matching lines",
                result
                    .get("lines")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len)
            )],
            "run_command" => {
                let code = result
                    .get("exit_code")
                    .and_then(Value::as_i64)
                    .map_or_else(|| "none".to_owned(), |c| c.to_string());
                let mut v = vec![format!(
                    "done     exit {code}{}",
                    if result.get("timed_out").and_then(Value::as_bool) == Some(true) {
                        " (timed out, process group killed)"
                    } else {
                        ""
                    }
                )];
                let out = result
                    .pointer("/stdout/text")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                push_lines(&mut v, out, 12, &self.words.next(Next::WholeRun));
                // What a contained command changed, and whether it landed.
                if let Some(changes) = result.get("changes") {
                    let class = changes.get("class").and_then(Value::as_str).unwrap_or("");
                    let entries = changes.get("entries").and_then(Value::as_u64).unwrap_or(0);
                    let applied = changes.get("applied").and_then(Value::as_bool) == Some(true);
                    match changes.get("withheld").and_then(Value::as_str) {
                        Some(why) => {
                            v.push(format!(
                                "withheld {entries} change(s) ({class}), not in the workspace: {}",
                                warrant_core::render::inline(why)
                            ));
                            let shown = changes.get("shown").and_then(Value::as_str).unwrap_or("");
                            push_lines(&mut v, shown, 12, &self.words.next(Next::WholeRun));
                        }
                        None if applied => {
                            v.push(format!(
                                "applied  {entries} change(s) ({class}) to the workspace"
                            ));
                        }
                        None => {}
                    }
                }
                // No overlays here: it wrote to the workspace directly, judged by its argv.
                if result.get("judged").and_then(Value::as_str) == Some("argv") {
                    v.push(
                        "judged   by its argv before it ran (no overlays on this machine): its writes went to the workspace directly"
                            .to_owned(),
                    );
                }
                // What the sandbox's egress proxy refused is worth a line of its own.
                for refused in result
                    .pointer("/egress/refused")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let field = |k: &str| refused.get(k).and_then(Value::as_str).unwrap_or("");
                    v.push(format!(
                        "         egress refused: {} {} ({})",
                        field("method"),
                        field("target"),
                        field("reason")
                    ));
                }
                v
            }
            "spawn_agent" => {
                let field = |k: &str| result.get(k).and_then(Value::as_str).unwrap_or("");
                let mut v = vec![format!(
                    "done     subagent {} {}",
                    field("child_run"),
                    field("outcome")
                )];
                push_lines(
                    &mut v,
                    field("answer"),
                    12,
                    &self.words.next(Next::WholeRun),
                );
                v
            }
            _ => vec![format!("done     {tool}")],
        }
    }
}

/// Policies and their reasons, on one line.
pub fn reasons_text(reasons: &[ReasonRecord]) -> String {
    reasons
        .iter()
        .map(|r| match &r.reason {
            Some(why) => format!("{}: {why}", r.policy),
            None => r.policy.clone(),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The first `max` lines of `text`, indented, then how many were left out and where to see them all.
fn push_lines(v: &mut Vec<String>, text: &str, max: usize, whole: &str) {
    let total = text.lines().count();
    for l in text.lines().take(max) {
        v.push(format!("         | {l}"));
    }
    if total > max {
        v.push(format!(
            "         | … {} more lines ({whole} shows them all)",
            total - max
        ));
    }
}

/// At most `max` characters, with how many were left out.
fn clip(s: &str, max: usize) -> String {
    let total = s.chars().count();
    if total <= max {
        s.to_owned()
    } else {
        let head: String = s.chars().take(max).collect();
        format!("{head}… ({} more characters)", total - max)
    }
}
