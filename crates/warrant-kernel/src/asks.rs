//! Requests the agent raises of a person, besides approving an action: answer a question,
//! provide a secret, connect a resource. Raising one is not an effect on the world, so it
//! has no action and passes no policy; it is journaled, audited, parks the run, and expires.
//! The person's reply arrives from another process (`warrant requests …`); a secret's value
//! never enters the kernel: the reply carries only its handle (`secret:NAME`).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use thiserror::Error;
use warrant_core::directory::Directory;
use warrant_core::{Coded, Principal, PrincipalKind, RequestId, RiskClass, Timestamp};
use warrant_store::{RequestUpdate, RunStatus};

use crate::authority::ApprovalRules;
use crate::error::KernelError;
use crate::events::{Approver, RunEvent};
use crate::ring::{CallStep, Ring};
use crate::state::RunState;
use crate::tool::ToolRegistry;

/// What kind of resource the agent asks a person to connect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResourceKind {
    /// An MCP server started by a command (stdio).
    Mcp,
    /// A (credentialed) HTTP endpoint.
    Endpoint,
}

impl ResourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Mcp => "mcp",
            Self::Endpoint => "endpoint",
        }
    }
}

/// One JSON-pointer operation a proposal would make to an agent profile (OAP §6:
/// `add|replace|remove` under `/metadata` or `/spec`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProfileChange {
    pub op: String,
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
}

/// What the agent asks of a person.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Ask {
    Question {
        question: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        options: Vec<String>,
    },
    /// A credential: its name, what it is for and where it will be used. The value is read
    /// by Warrant from a person, stored encrypted, and never shown to the model.
    Secret {
        name: String,
        purpose: String,
        used_by: String,
    },
    Resource {
        resource: ResourceKind,
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        command: Option<Vec<String>>,
    },
    /// An MCP server's elicitation (form mode) made while one of its tool calls runs: the
    /// server's message (untrusted, shown fenced as `mcp-elicitation:<server>`) and the schema
    /// of what it asks for. The call waits in-process for the reply.
    Elicitation {
        server: String,
        message: String,
        schema: Value,
    },
    /// A change to an agent profile's `metadata` or `spec` that a session's state delta
    /// proposed (OAP §6): never applied without a person. It targets the profile at
    /// `revision` with digest `digest` (a profile changed since is refused at approval);
    /// `risk` is Warrant's (`high` for anything widening tools, permissions, memory or
    /// subagents, whatever the delta declared); `diff` is the change in words, before and
    /// after. Raised in a run of its own that ends with the reply.
    Proposal {
        profile: String,
        revision: u64,
        digest: String,
        /// The spec digest then: a later revision that changed only learned state (the same
        /// spec digest) still takes the proposal.
        spec_digest: String,
        operations: Vec<ProfileChange>,
        diff: Vec<String>,
        rationale: String,
        risk: String,
        /// The delta declared a lower risk than Warrant assigned.
        #[serde(default)]
        risk_raised: bool,
        /// The session (run) whose delta proposed it.
        session: String,
    },
}

/// The kinds of request, for expiry and listings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AskKind {
    Question,
    Secret,
    Resource,
    Elicitation,
    Proposal,
}

impl AskKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Question => "question",
            Self::Secret => "secret",
            Self::Resource => "resource",
            Self::Elicitation => "elicitation",
            Self::Proposal => "proposal",
        }
    }
}

impl Ask {
    pub fn kind(&self) -> AskKind {
        match self {
            Self::Question { .. } => AskKind::Question,
            Self::Secret { .. } => AskKind::Secret,
            Self::Resource { .. } => AskKind::Resource,
            Self::Elicitation { .. } => AskKind::Elicitation,
            Self::Proposal { .. } => AskKind::Proposal,
        }
    }

    /// One line for listings.
    pub fn title(&self) -> String {
        match self {
            Self::Question { question, options } if options.is_empty() => {
                format!("question: {question}")
            }
            Self::Question { question, options } => {
                format!("question: {question} [{}]", options.join(" | "))
            }
            Self::Secret {
                name,
                purpose,
                used_by,
            } => format!("secret {name} for {purpose} (used by {used_by})"),
            Self::Resource {
                resource,
                name,
                url,
                command,
            } => {
                let at = url
                    .clone()
                    .or_else(|| command.as_ref().map(|c| c.join(" ")))
                    .unwrap_or_default();
                format!("connect {} {name} {at}", resource.as_str())
                    .trim_end()
                    .to_owned()
            }
            Self::Elicitation { server, schema, .. } => {
                let fields: Vec<String> = crate::elicit::fields(schema)
                    .into_iter()
                    .map(|f| f.name)
                    .collect();
                format!(
                    "MCP server `{server}` asks you for {}",
                    if fields.is_empty() {
                        "a confirmation".to_owned()
                    } else {
                        fields.join(", ")
                    }
                )
            }
            Self::Proposal {
                profile,
                revision,
                operations,
                risk,
                ..
            } => format!(
                "change agent profile `{profile}` (revision {revision}, {risk} risk): {}",
                operations
                    .iter()
                    .map(|o| format!("{} {}", o.op, o.path))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// What a person is shown besides the title: for an elicitation, the server's message
    /// fenced as untrusted and each requested field in words.
    pub fn details(&self) -> Vec<String> {
        match self {
            Self::Elicitation {
                server,
                message,
                schema,
            } => {
                let source = crate::elicit::fence_source(server);
                let mut out = vec![format!(
                    "<untrusted source=\"{source}\">\n{}\n</untrusted>",
                    message.replace("</untrusted", "<\\/untrusted")
                )];
                out.extend(
                    crate::elicit::fields_in_words(schema)
                        .into_iter()
                        .map(|f| format!("field {f}")),
                );
                out
            }
            Self::Proposal {
                digest,
                diff,
                rationale,
                risk_raised,
                session,
                ..
            } => {
                let mut out = vec![format!("profile digest {digest}")];
                if *risk_raised {
                    out.push("risk raised by Warrant over what the delta declared".to_owned());
                }
                out.push(format!("why ({session}): {rationale}"));
                out.extend(diff.iter().cloned());
                out
            }
            Self::Question { .. } | Self::Secret { .. } | Self::Resource { .. } => Vec::new(),
        }
    }
}

/// How long each kind of request waits for a person. Recorded in the run's settings when the
/// run starts, so the expiry in force is part of the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestTtls {
    pub question_ms: u64,
    pub secret_ms: u64,
    pub resource_ms: u64,
}

/// 24 hours.
pub const DEFAULT_REQUEST_TTL_MS: u64 = 24 * 60 * 60 * 1000;

impl Default for RequestTtls {
    fn default() -> Self {
        Self {
            question_ms: DEFAULT_REQUEST_TTL_MS,
            secret_ms: DEFAULT_REQUEST_TTL_MS,
            resource_ms: DEFAULT_REQUEST_TTL_MS,
        }
    }
}

impl RequestTtls {
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    pub fn for_kind(&self, kind: AskKind) -> u64 {
        match kind {
            AskKind::Question | AskKind::Elicitation | AskKind::Proposal => self.question_ms,
            AskKind::Secret => self.secret_ms,
            AskKind::Resource => self.resource_ms,
        }
    }
}

/// A person's reply to a request. A secret reply holds the handle, never the value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Reply {
    Answered {
        /// 1-based index of the option chosen, when the question offered options.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        option: Option<u32>,
        text: String,
    },
    SecretProvided {
        handle: String,
    },
    Connected {
        /// What Warrant checked before believing the resource exists.
        check: String,
    },
    /// The person's answer to an elicitation: the content, checked against the requested
    /// schema with its defaults filled in.
    Accepted {
        content: Value,
    },
    /// A person approved a proposal and Warrant applied it: the profile's new revision and
    /// digest.
    Applied {
        revision: u64,
        profile_digest: String,
    },
    Declined {
        reason: String,
    },
}

impl Reply {
    pub fn label(&self) -> &'static str {
        match self {
            Self::Answered { .. } => "answered",
            Self::SecretProvided { .. } => "secret provided",
            Self::Connected { .. } => "connected",
            Self::Accepted { .. } => "accepted",
            Self::Applied { .. } => "approved",
            Self::Declined { .. } => "declined",
        }
    }
}

/// Where executors get secret values: the configuration says which secrets a profile's
/// commands receive (as environment variables), the vault holds the values. Implemented by
/// the CLI over `warrant-exec::vault`; the kernel and the model only ever see names.
pub trait SecretSource: Send + Sync + std::fmt::Debug {
    /// `(variable, secret name)` pairs for commands under `profile`.
    fn env_for(&self, profile: &str) -> Vec<(String, String)>;
    /// The value of the secret `name`, or why it cannot be had (with its error code).
    fn value(&self, name: &str) -> Result<String, (String, String)>;
}

/// The client a proposal's call is received from (the profile applicator, not the agent).
pub const PROPOSAL_CLIENT: &str = "oap";

/// The name a proposal's call is recorded under; no tool of that name is ever offered.
pub const PROPOSAL_TOOL: &str = "profile_proposal";

/// The handle the model sees for a secret named `name`.
pub fn secret_handle(name: &str) -> String {
    format!("secret:{name}")
}

/// A request raised by the agent, as folded from the log.
#[derive(Clone, Debug, PartialEq)]
pub struct AskState {
    pub id: RequestId,
    pub call_id: String,
    pub ask: Ask,
    pub raised_at_seq: u64,
    pub expires_at: Timestamp,
    pub asked_of: Vec<String>,
    pub reply: Option<(Reply, Approver)>,
    pub expired: Option<Timestamp>,
}

impl AskState {
    pub fn status(&self) -> &'static str {
        match (&self.reply, &self.expired) {
            (Some((r, _)), _) => r.label(),
            (None, Some(_)) => "expired",
            (None, None) => "open",
        }
    }
}

/// What the model is told once the request has an outcome: `(ok, result)`.
pub fn result_for_model(ask: &AskState) -> Option<(bool, Value)> {
    // An elicitation belongs to the tool call that waits for it: the call's result comes
    // from the server, not from the request.
    if ask.ask.kind() == AskKind::Elicitation {
        return None;
    }
    if let Some((reply, by)) = &ask.reply {
        return Some(match reply {
            Reply::Answered { option, text } => (
                true,
                json!({"request": ask.id, "answer": text, "option": option, "answered_by": by.actor}),
            ),
            Reply::SecretProvided { handle } => (
                true,
                json!({"request": ask.id, "secret": handle, "provided_by": by.actor,
                       "note": "Warrant holds the value; you never see it. Use the handle where the secret is needed."}),
            ),
            Reply::Connected { check } => (
                true,
                json!({"request": ask.id, "connected": ask.ask.title(), "checked": check, "connected_by": by.actor}),
            ),
            // Only an elicitation is accepted, and it never reaches here.
            Reply::Accepted { .. } => (false, json!({"request": ask.id})),
            Reply::Applied {
                revision,
                profile_digest,
            } => (
                true,
                json!({"request": ask.id, "applied": revision, "profile_digest": profile_digest, "approved_by": by.actor}),
            ),
            Reply::Declined { reason } => (
                false,
                json!({"request": ask.id, "declined": reason, "declined_by": by.actor}),
            ),
        });
    }
    ask.expired.map(|at| {
        (
            false,
            json!({"request": ask.id, "expired": format!("nobody answered before {}", at.rfc3339())}),
        )
    })
}

/// Who is asked: the person the agent works for (or the actor), the person's teams, and the
/// administrators for secrets and resources, or when the person has no team. A small
/// function on purpose: an identity directory can replace it without touching the ring.
pub fn asked_of(principal: &Principal, kind: AskKind) -> Vec<String> {
    let person = principal
        .on_behalf_of
        .clone()
        .unwrap_or_else(|| principal.actor.clone());
    let mut out = vec![format!("user:{person}")];
    out.extend(principal.teams.iter().map(|t| format!("team:{t}")));
    let admins = match kind {
        AskKind::Secret | AskKind::Resource | AskKind::Proposal => true,
        AskKind::Question | AskKind::Elicitation => principal.teams.is_empty(),
    };
    if admins {
        out.push("admins".to_owned());
    }
    out
}

/// Who is asked, routed through the identity directory when there is one: the person the run
/// acts for, and the project's responsible team, or the administrators when the project names
/// no team or its team has no members (the same fall-through as approvals). Secrets and
/// resources always also go to the administrators. Without a directory, [`asked_of`].
pub fn asked_of_with(rules: &ApprovalRules, principal: &Principal, kind: AskKind) -> Vec<String> {
    if rules.directory.is_none() {
        return asked_of(principal, kind);
    }
    let risk = match kind {
        AskKind::Question | AskKind::Elicitation => RiskClass::Read,
        AskKind::Secret => RiskClass::Secret,
        AskKind::Resource => RiskClass::External,
        // A profile's spec bounds what every later run under it may do.
        AskKind::Proposal => RiskClass::Change,
    };
    let routed = rules.asked_of(principal, risk);
    let mut out = vec![format!("user:{}", crate::authority::requester(principal))];
    match &routed.team {
        Some(team) => out.push(format!("team:{team}")),
        None => out.push("admins".to_owned()),
    }
    if matches!(
        kind,
        AskKind::Secret | AskKind::Resource | AskKind::Proposal
    ) && !out.iter().any(|w| w == "admins")
    {
        out.push("admins".to_owned());
    }
    out
}

/// Whether a request asked of `asked_of` is asked of `me` (`--mine`): by name, by one of my
/// teams, or of the administrators when I am one. Teams and administrators come from my
/// identity (`teams`, the `admin` role) and, when there is one, the identity directory.
pub fn is_asked_of(asked_of: &[String], me: &Principal, directory: Option<&Directory>) -> bool {
    asked_of.iter().any(|who| {
        if who == "anyone" {
            return me.kind != PrincipalKind::Agent;
        }
        if let Some(person) = who.strip_prefix("user:") {
            return person == me.actor;
        }
        if let Some(team) = who.strip_prefix("team:") {
            return me.teams.iter().any(|t| t == team)
                || directory.is_some_and(|d| d.team_members(team).contains(&me.actor));
        }
        who == "admins"
            && (me.roles.iter().any(|r| r == "admin")
                || directory.is_some_and(|d| d.is_admin(&me.actor)))
    })
}

#[derive(Debug, Error)]
pub enum AskError {
    #[error(transparent)]
    Kernel(#[from] KernelError),
    #[error("request {id} asks for {}", asked_for(.asked))]
    WrongReply { id: String, asked: AskKind },
    #[error("request {id}: {message}")]
    BadOption { id: String, message: String },
    #[error(
        "{actor} may not answer request {id}: it is asked of {asked_of} (the identity directory decides who belongs to a team and who administers)"
    )]
    NotAsked {
        id: String,
        actor: String,
        asked_of: String,
    },
    #[error("request {id} expired at {at}; the agent is told it expired when the run continues")]
    Expired {
        id: String,
        at: String,
        run: warrant_core::RunId,
    },
    #[error("request {id} was already answered ({answer}); a request is answered once")]
    AlreadyReplied { id: String, answer: String },
    #[error("{actor} is an agent; an agent can never answer a request")]
    AgentCannotAnswer { actor: String },
    #[error("request {0} is not a request raised by the agent")]
    NotAnAsk(String),
}

impl Coded for AskError {
    fn code(&self) -> &'static str {
        match self {
            Self::Kernel(e) => e.code(),
            Self::WrongReply { .. } => "W-REQUEST-001",
            Self::BadOption { .. } => "W-REQUEST-002",
            Self::Expired { .. } => "W-REQUEST-003",
            Self::AlreadyReplied { .. } => "W-REQUEST-004",
            Self::AgentCannotAnswer { .. } => "W-REQUEST-005",
            Self::NotAnAsk(_) => "W-REQUEST-008",
            Self::NotAsked { .. } => "W-REQUEST-012",
        }
    }

    fn hint(&self) -> Option<warrant_core::Hint> {
        use warrant_core::Hint;
        match self {
            Self::Kernel(e) => e.hint(),
            Self::WrongReply { asked, .. } => Some(match asked {
                AskKind::Question => Hint::AnswerQuestion,
                AskKind::Secret => Hint::ProvideSecret,
                AskKind::Resource => Hint::ConnectResource,
                AskKind::Elicitation | AskKind::Proposal => Hint::AnswerQuestion,
            }),
            Self::Expired { run, .. } => Some(Hint::Resume { run: run.clone() }),
            Self::NotAnAsk(_) => Some(Hint::ApproveOrDeny),
            Self::BadOption { .. }
            | Self::AlreadyReplied { .. }
            | Self::AgentCannotAnswer { .. }
            | Self::NotAsked { .. } => None,
        }
    }
}

/// What a request of `kind` asks for, in words.
fn asked_for(kind: &AskKind) -> &'static str {
    match kind {
        AskKind::Question => "an answer",
        AskKind::Secret => "a secret",
        AskKind::Resource => "a resource",
        AskKind::Elicitation => "an answer to the requested fields",
        AskKind::Proposal => "approval of a profile change (answer `approve`) or a decline",
    }
}

impl Ring<'_> {
    /// The ring's step for a call to a request tool: raise the request and park, keep waiting,
    /// or answer it as expired. `None` when the call is not a request (or its arguments fail
    /// the schema, which the ordinary normalization step reports).
    pub(crate) fn ask_step(
        &self,
        state: &mut RunState,
        call_id: &str,
        tools: &dyn ToolRegistry,
    ) -> Result<Option<CallStep>, KernelError> {
        let Some(call) = state.call(call_id).cloned() else {
            return Ok(None);
        };
        // A proposal's run has no agent: its one call is the proposal, waiting for a person.
        if let Some(open) = state
            .asks
            .values()
            .find(|a| a.call_id == call_id && a.ask.kind() == AskKind::Proposal)
            .cloned()
        {
            if open.reply.is_some() || open.expired.is_some() {
                return Ok(Some(CallStep::Done));
            }
            if self.clock.now() >= open.expires_at {
                self.expire(state, &open.id)?;
                return Ok(Some(CallStep::Done));
            }
            return Ok(Some(CallStep::Parked(open.id)));
        }
        let Some(tool) = tools.get(&call.record.tool) else {
            return Ok(None);
        };
        if tools
            .validate(&call.record.tool, &call.record.args)
            .is_err()
        {
            return Ok(None);
        }
        let Some(parsed) = tool.ask(&call.record.args) else {
            return Ok(None);
        };
        let existing = state.asks.values().find(|a| a.call_id == call_id).cloned();
        let Some(open) = existing else {
            let ask = match parsed {
                Ok(ask) => ask,
                Err(refusal) => {
                    self.append(
                        state,
                        vec![RunEvent::CallRefused {
                            call_id: call_id.to_owned(),
                            tool: call.record.tool.clone(),
                            code: refusal.code,
                            message: refusal.message,
                        }],
                        None,
                        vec![],
                    )?;
                    return Ok(Some(CallStep::Done));
                }
            };
            let request =
                self.raise_and_park(state, Vec::new(), call_id, &call.record.tool, ask)?;
            return Ok(Some(CallStep::Parked(request)));
        };
        // Answered requests give the call its result when folded; only waiting ones reach here.
        if self.clock.now() >= open.expires_at {
            self.expire(state, &open.id)?;
            return Ok(Some(CallStep::Done));
        }
        if state.parked.as_ref() != Some(&open.id) {
            self.append(
                state,
                vec![RunEvent::RunParked {
                    request_id: open.id.clone(),
                }],
                Some(RunStatus::Parked),
                vec![],
            )?;
        }
        Ok(Some(CallStep::Parked(open.id)))
    }

    /// Records that a request ran out of time; the call's result tells the agent so.
    fn expire(&self, state: &mut RunState, request: &RequestId) -> Result<(), KernelError> {
        let Some(ask) = state.asks.get(request).cloned() else {
            return Err(KernelError::UnknownRequest(request.to_string()));
        };
        let mut events = vec![RunEvent::RequestExpired {
            call_id: ask.call_id,
            request_id: request.clone(),
            expires_at: ask.expires_at,
        }];
        let mut status = state.parked.is_some().then_some(RunStatus::Queued);
        // A proposal's run exists for its request alone: it ends with it.
        if ask.ask.kind() == AskKind::Proposal {
            events.push(RunEvent::RunEnded {
                outcome: crate::events::Outcome::Failed {
                    code: "W-REQUEST-003".to_owned(),
                    message: format!(
                        "nobody answered the proposal before {}",
                        ask.expires_at.rfc3339()
                    ),
                },
            });
            status = Some(RunStatus::Failed);
        }
        self.append(
            state,
            events,
            status,
            vec![RequestUpdate::Answered {
                id: request.clone(),
            }],
        )
    }

    /// Raises a proposal to change an agent profile (`ask` must be [`Ask::Proposal`]) in
    /// `state`, a run started for it alone: the proposal is the run's one call, received from
    /// the profile applicator (not a call of the agent's: it passes no policy, since raising
    /// it changes nothing), its request routed like the others (the run's person, their
    /// teams, the administrators), and the run parked until a person replies. The reply ends
    /// the run.
    pub fn raise_proposal(&self, state: &mut RunState, ask: Ask) -> Result<RequestId, KernelError> {
        if ask.kind() != AskKind::Proposal || !state.calls.is_empty() {
            return Err(KernelError::Inconsistent {
                run: state.run.to_string(),
                message: "a proposal is raised as the only call of a run of its own".to_owned(),
            });
        }
        let call = crate::events::CallRecord {
            id: "proposal".to_owned(),
            tool: PROPOSAL_TOOL.to_owned(),
            args: serde_json::to_value(&ask).unwrap_or(Value::Null),
        };
        let lead = vec![RunEvent::CallReceived {
            client: PROPOSAL_CLIENT.to_owned(),
            call: call.clone(),
        }];
        self.raise_and_park(state, lead, &call.id, &call.tool, ask)
    }

    /// Raises `ask` for the call `call_id` (of `tool`) and parks the run until a person replies:
    /// `lead`, then the raised request and the park, appended as one batch with the request's
    /// index entry (routing and expiry from the run's settings and the approval rules).
    fn raise_and_park(
        &self,
        state: &mut RunState,
        lead: Vec<RunEvent>,
        call_id: &str,
        tool: &str,
        ask: Ask,
    ) -> Result<RequestId, KernelError> {
        let request = self.ids.request_id();
        let now = self.clock.now();
        let ttl = state.settings.requests.for_kind(ask.kind());
        let expires_at = Timestamp::from_millis(
            now.millis()
                .saturating_add(i64::try_from(ttl).unwrap_or(i64::MAX)),
        )
        .unwrap_or(now);
        let asked_of = asked_of_with(&self.rules(), &state.principal, ask.kind());
        let summary = crate::RequestSummary::Asked(crate::AskedSummary {
            kind: ask.kind().as_str().to_owned(),
            run: state.run.clone(),
            call: call_id.to_owned(),
            tool: tool.to_owned(),
            title: ask.title(),
            ask: ask.clone(),
            requested_by: state.principal.actor.clone(),
            asked_of: asked_of.clone(),
            expires_at: expires_at.rfc3339(),
        })
        .to_value();
        let mut events = lead;
        events.push(RunEvent::RequestRaised {
            call_id: call_id.to_owned(),
            request_id: request.clone(),
            ask,
            expires_at,
            asked_of,
        });
        events.push(RunEvent::RunParked {
            request_id: request.clone(),
        });
        self.append(
            state,
            events,
            Some(RunStatus::Parked),
            vec![RequestUpdate::Open {
                id: request.clone(),
                summary,
            }],
        )?;
        Ok(request)
    }

    /// Records a person's reply to a request the agent raised. The person is the principal
    /// Warrant established for this process; an agent never may. A reply after the request
    /// expired is refused, and the expiry recorded.
    pub fn reply(
        &self,
        state: &mut RunState,
        request: &RequestId,
        person: &Principal,
        via: &str,
        reply: Reply,
    ) -> Result<(), AskError> {
        let ask = match self.check_reply(state, request, person, &reply) {
            Err(AskError::Expired { .. }) | Ok(_) => {
                // The expiry is recorded below when it is due; everything else was checked.
                state.asks.get(request).cloned().ok_or_else(|| {
                    AskError::from(KernelError::UnknownRequest(request.to_string()))
                })?
            }
            Err(e) => return Err(e),
        };
        let expired = || AskError::Expired {
            id: request.to_string(),
            at: ask.expires_at.rfc3339(),
            run: state.run.clone(),
        };
        if ask.expired.is_some() {
            return Err(expired());
        }
        if self.clock.now() >= ask.expires_at {
            let err = expired();
            self.expire(state, request)?;
            return Err(err);
        }
        let by = Approver {
            tenant: person.tenant.clone(),
            actor: person.actor.clone(),
            via: via.to_owned(),
        };
        let mut events = vec![RunEvent::RequestReplied {
            call_id: ask.call_id.clone(),
            request_id: request.clone(),
            by,
            reply,
        }];
        let mut status = state.parked.is_some().then_some(RunStatus::Queued);
        // A proposal's run exists for its request alone: the reply ends it, in the same append,
        // so no worker ever takes it up to drive.
        if ask.ask.kind() == AskKind::Proposal {
            events.push(RunEvent::RunEnded {
                outcome: crate::events::Outcome::Completed,
            });
            status = Some(RunStatus::Completed);
        }
        self.append(
            state,
            events,
            status,
            vec![RequestUpdate::Answered {
                id: request.clone(),
            }],
        )?;
        Ok(())
    }

    /// Whether `person` may record `reply` to `request` now, without recording anything: an
    /// agent may not, the request must be open, not expired, of the run that has not ended,
    /// put to this person (with an identity directory), and the reply of the kind asked. A
    /// front end checks before it acts on a reply (applying an approved proposal), so that
    /// what it did is then recorded.
    pub fn check_reply(
        &self,
        state: &RunState,
        request: &RequestId,
        person: &Principal,
        reply: &Reply,
    ) -> Result<AskState, AskError> {
        if person.kind == PrincipalKind::Agent {
            return Err(AskError::AgentCannotAnswer {
                actor: person.actor.clone(),
            });
        }
        let Some(ask) = state.asks.get(request).cloned() else {
            if state.requests.contains_key(request) {
                return Err(AskError::NotAnAsk(request.to_string()));
            }
            return Err(KernelError::UnknownRequest(request.to_string()).into());
        };
        if let Some((previous, by)) = &ask.reply {
            return Err(AskError::AlreadyReplied {
                id: request.to_string(),
                answer: format!("{} by {}", previous.label(), by.actor),
            });
        }
        if let Some(outcome) = &state.ended {
            return Err(KernelError::RunEnded {
                run: state.run.to_string(),
                outcome: crate::ring::outcome_label(outcome),
            }
            .into());
        }
        let expired = || AskError::Expired {
            id: request.to_string(),
            at: ask.expires_at.rfc3339(),
            run: state.run.clone(),
        };
        if ask.expired.is_some() || self.clock.now() >= ask.expires_at {
            return Err(expired());
        }
        check_fits(&ask, reply)?;
        // With an identity directory, only those the request was put to may answer it.
        let rules = self.rules();
        if let Some(dir) = &rules.directory
            && !is_asked_of(&ask.asked_of, person, Some(dir))
            && !dir.is_admin(&person.actor)
        {
            return Err(AskError::NotAsked {
                id: request.to_string(),
                actor: person.actor.clone(),
                asked_of: ask.asked_of.join(", "),
            });
        }
        Ok(ask)
    }
}

/// A reply must be of the kind asked (a decline fits every kind).
fn check_fits(ask: &AskState, reply: &Reply) -> Result<(), AskError> {
    let wrong = || AskError::WrongReply {
        id: ask.id.to_string(),
        asked: ask.ask.kind(),
    };
    match (&ask.ask, reply) {
        (_, Reply::Declined { reason }) => {
            if reason.trim().is_empty() {
                return Err(AskError::BadOption {
                    id: ask.id.to_string(),
                    message: "a decline needs a reason the agent can act on".into(),
                });
            }
            Ok(())
        }
        (Ask::Question { options, .. }, Reply::Answered { option, text }) => match option {
            Some(n) => {
                let fits = usize::try_from(*n)
                    .ok()
                    .and_then(|i| i.checked_sub(1))
                    .and_then(|i| options.get(i))
                    .is_some_and(|o| o == text);
                if fits {
                    Ok(())
                } else if options.is_empty() {
                    Err(AskError::BadOption {
                        id: ask.id.to_string(),
                        message: "this question offers no options; answer with --text".into(),
                    })
                } else {
                    Err(AskError::BadOption {
                        id: ask.id.to_string(),
                        message: format!(
                            "option {n} does not exist; choose 1 to {}: {}",
                            options.len(),
                            options
                                .iter()
                                .enumerate()
                                .map(|(i, o)| format!("{}. {o}", i + 1))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    })
                }
            }
            None if text.trim().is_empty() => Err(AskError::BadOption {
                id: ask.id.to_string(),
                message: "the answer is empty".into(),
            }),
            None => Ok(()),
        },
        (Ask::Secret { name, .. }, Reply::SecretProvided { handle }) => {
            if *handle == secret_handle(name) {
                Ok(())
            } else {
                Err(wrong())
            }
        }
        (Ask::Resource { .. }, Reply::Connected { .. }) => Ok(()),
        (Ask::Proposal { .. }, Reply::Applied { .. }) => Ok(()),
        (Ask::Elicitation { schema, .. }, Reply::Accepted { content }) => {
            match crate::elicit::accept(schema, content) {
                Ok(checked) if checked == *content => Ok(()),
                Ok(_) => Err(AskError::BadOption {
                    id: ask.id.to_string(),
                    message: "the answer must be recorded with the schema's defaults filled in"
                        .into(),
                }),
                Err(message) => Err(AskError::BadOption {
                    id: ask.id.to_string(),
                    message,
                }),
            }
        }
        (
            Ask::Question { .. },
            Reply::SecretProvided { .. }
            | Reply::Connected { .. }
            | Reply::Accepted { .. }
            | Reply::Applied { .. },
        )
        | (
            Ask::Secret { .. },
            Reply::Answered { .. }
            | Reply::Connected { .. }
            | Reply::Accepted { .. }
            | Reply::Applied { .. },
        )
        | (
            Ask::Resource { .. },
            Reply::Answered { .. }
            | Reply::SecretProvided { .. }
            | Reply::Accepted { .. }
            | Reply::Applied { .. },
        )
        | (
            Ask::Elicitation { .. },
            Reply::Answered { .. }
            | Reply::SecretProvided { .. }
            | Reply::Connected { .. }
            | Reply::Applied { .. },
        )
        | (
            Ask::Proposal { .. },
            Reply::Answered { .. }
            | Reply::SecretProvided { .. }
            | Reply::Connected { .. }
            | Reply::Accepted { .. },
        ) => Err(wrong()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;

    fn state(ask: Ask) -> AskState {
        AskState {
            id: RequestId::parse("req-01").unwrap(),
            call_id: "c1".into(),
            ask,
            raised_at_seq: 3,
            expires_at: Timestamp::from_millis(1_000).unwrap(),
            asked_of: vec![],
            reply: None,
            expired: None,
        }
    }

    /// Every kind of request against every kind of reply: only the matching one (and a
    /// decline with a reason) fits.
    #[test]
    fn a_reply_must_fit_the_request() {
        let question = state(Ask::Question {
            question: "colour?".into(),
            options: vec!["red".into(), "blue".into()],
        });
        let free = state(Ask::Question {
            question: "why?".into(),
            options: vec![],
        });
        let secret = state(Ask::Secret {
            name: "TOKEN".into(),
            purpose: "p".into(),
            used_by: "u".into(),
        });
        let resource = state(Ask::Resource {
            resource: ResourceKind::Endpoint,
            name: "api".into(),
            url: Some("http://x".into()),
            command: None,
        });
        let proposal = state(Ask::Proposal {
            profile: "reviewer".into(),
            revision: 3,
            digest: "sha256:0".into(),
            spec_digest: "sha256:1".into(),
            operations: vec![ProfileChange {
                op: "replace".into(),
                path: "/spec/tools/allow".into(),
                value: Some(json!(["read", "shell"])),
            }],
            diff: vec![],
            rationale: "denied twice".into(),
            risk: "high".into(),
            risk_raised: false,
            session: "run-1".into(),
        });
        let applied = Reply::Applied {
            revision: 4,
            profile_digest: "sha256:2".into(),
        };
        let answered = |option: Option<u32>, text: &str| Reply::Answered {
            option,
            text: text.into(),
        };
        let provided = |h: &str| Reply::SecretProvided { handle: h.into() };
        let connected = Reply::Connected { check: "ok".into() };
        let declined = |r: &str| Reply::Declined { reason: r.into() };
        let code = |a: &AskState, r: &Reply| check_fits(a, r).err().map(|e| e.code());
        let table: Vec<(&AskState, Reply, Option<&str>)> = vec![
            (&question, answered(Some(2), "blue"), None),
            (&question, answered(Some(3), ""), Some("W-REQUEST-002")),
            (&question, answered(Some(0), ""), Some("W-REQUEST-002")),
            (&question, answered(Some(1), "blue"), Some("W-REQUEST-002")),
            (&question, answered(None, "neither"), None),
            (&question, answered(None, " "), Some("W-REQUEST-002")),
            (&free, answered(Some(1), ""), Some("W-REQUEST-002")),
            (&question, provided("secret:TOKEN"), Some("W-REQUEST-001")),
            (&question, connected.clone(), Some("W-REQUEST-001")),
            (&secret, provided("secret:TOKEN"), None),
            (&secret, provided("secret:OTHER"), Some("W-REQUEST-001")),
            (&secret, answered(None, "hunter2"), Some("W-REQUEST-001")),
            (&secret, connected.clone(), Some("W-REQUEST-001")),
            (&resource, connected, None),
            (&resource, answered(None, "x"), Some("W-REQUEST-001")),
            (&resource, provided("secret:TOKEN"), Some("W-REQUEST-001")),
            (&question, declined("not now"), None),
            (&secret, declined("ask ops"), None),
            (&resource, declined("no"), None),
            (&resource, declined("  "), Some("W-REQUEST-002")),
            (&proposal, applied.clone(), None),
            (&proposal, declined("not this tool"), None),
            (&proposal, answered(None, "approve"), Some("W-REQUEST-001")),
            (&proposal, provided("secret:TOKEN"), Some("W-REQUEST-001")),
            (&question, applied.clone(), Some("W-REQUEST-001")),
            (&secret, applied.clone(), Some("W-REQUEST-001")),
            (&resource, applied, Some("W-REQUEST-001")),
        ];
        for (ask, reply, expected) in table {
            assert_eq!(code(ask, &reply), expected, "{:?} / {reply:?}", ask.ask);
        }
    }

    #[test]
    fn who_is_asked_and_what_is_mine() {
        let mut p = Principal {
            tenant: "t".into(),
            actor: "bot".into(),
            kind: PrincipalKind::Agent,
            on_behalf_of: Some("alice".into()),
            roles: vec![],
            teams: vec!["web".into()],
            attrs: Default::default(),
        };
        assert_eq!(
            asked_of(&p, AskKind::Question),
            vec!["user:alice".to_owned(), "team:web".to_owned()]
        );
        assert_eq!(
            asked_of(&p, AskKind::Secret),
            vec![
                "user:alice".to_owned(),
                "team:web".to_owned(),
                "admins".to_owned()
            ]
        );
        assert_eq!(
            asked_of(&p, AskKind::Proposal),
            vec![
                "user:alice".to_owned(),
                "team:web".to_owned(),
                "admins".to_owned()
            ],
            "a change to a profile also goes to the administrators"
        );
        p.teams.clear();
        p.on_behalf_of = None;
        assert_eq!(
            asked_of(&p, AskKind::Question),
            vec!["user:bot".to_owned(), "admins".to_owned()]
        );
        let of = vec!["user:alice".to_owned(), "team:web".to_owned()];
        let me = |actor: &str, teams: &[&str], roles: &[&str]| Principal {
            tenant: "t".into(),
            actor: actor.into(),
            kind: PrincipalKind::User,
            on_behalf_of: None,
            roles: roles.iter().map(|s| (*s).to_owned()).collect(),
            teams: teams.iter().map(|s| (*s).to_owned()).collect(),
            attrs: Default::default(),
        };
        assert!(is_asked_of(&of, &me("alice", &[], &[]), None));
        assert!(is_asked_of(&of, &me("bob", &["web"], &[]), None));
        assert!(!is_asked_of(&of, &me("bob", &["db"], &["admin"]), None));
        let admins = vec!["admins".to_owned()];
        assert!(is_asked_of(&admins, &me("carol", &[], &["admin"]), None));
        assert!(!is_asked_of(&admins, &me("carol", &[], &[]), None));
    }

    #[test]
    fn with_a_directory_requests_go_to_the_project_team_or_fall_through_to_the_admins() {
        use warrant_core::directory::Directory;
        let dir = Directory::parse(
            "directory.toml",
            "admins = [\"root\"]\n[teams.web]\nmembers = [\"bob\"]\n[teams.empty]\nmembers = []\n",
        )
        .unwrap();
        let p = Principal {
            tenant: "t".into(),
            actor: "agent-1".into(),
            kind: PrincipalKind::Agent,
            on_behalf_of: Some("alice".into()),
            roles: vec![],
            teams: vec![],
            attrs: Default::default(),
        };
        let rules = |team: Option<&str>| ApprovalRules {
            directory: Some(dir.clone()),
            team: team.map(str::to_owned),
            ..Default::default()
        };
        let me = |actor: &str| Principal {
            tenant: "t".into(),
            actor: actor.into(),
            kind: PrincipalKind::User,
            on_behalf_of: None,
            roles: vec![],
            teams: vec![],
            attrs: Default::default(),
        };
        // (project team, kind) -> who is asked
        let table: [(Option<&str>, AskKind, &[&str]); 5] = [
            (Some("web"), AskKind::Question, &["user:alice", "team:web"]),
            (
                Some("web"),
                AskKind::Secret,
                &["user:alice", "team:web", "admins"],
            ),
            (Some("empty"), AskKind::Question, &["user:alice", "admins"]),
            (None, AskKind::Question, &["user:alice", "admins"]),
            (None, AskKind::Resource, &["user:alice", "admins"]),
        ];
        for (team, kind, want) in table {
            let got = asked_of_with(&rules(team), &p, kind);
            assert_eq!(got, want, "team {team:?}, {kind:?}");
        }
        // Membership comes from the directory, not only from the answering person's identity.
        let web = asked_of_with(&rules(Some("web")), &p, AskKind::Question);
        assert!(is_asked_of(&web, &me("bob"), Some(&dir)));
        assert!(
            !is_asked_of(&web, &me("bob"), None),
            "control: without the directory"
        );
        assert!(!is_asked_of(&web, &me("mallory"), Some(&dir)));
        assert!(is_asked_of(&web, &me("alice"), Some(&dir)));
        let fell = asked_of_with(&rules(None), &p, AskKind::Question);
        assert!(is_asked_of(&fell, &me("root"), Some(&dir)));
        assert!(!is_asked_of(&fell, &me("bob"), Some(&dir)));
    }
}
