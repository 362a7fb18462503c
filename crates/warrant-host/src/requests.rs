//! Requests the agent raised (questions, secrets, resources): folding their run to read them,
//! and recording a person's reply, never from a process a run started.

use serde::Serialize;
use warrant_core::{RequestId, RunId};
use warrant_exec::resource;
use warrant_exec::vault::Vault;
use warrant_kernel::asks::secret_handle;
use warrant_kernel::{Ask, AskState, Reply, ResourceKind, RunState};

use crate::{Class, Host, HostError, Result, install};

impl Host {
    /// Folds `run` after checking its journal against the signed chain (a mismatch is refused,
    /// recorded and delivered, and fails as [`Class::Refused`]); other errors are of `class`.
    pub fn load_run(&self, run: &RunId, class: Class) -> Result<RunState> {
        let tools = self.own_tools()?;
        self.with_ring(&tools, &warrant_kernel::Silent, |ring| {
            install::load_run(&self.inst, ring, run, class)
        })
    }

    /// Refuses, and records the attempt in the run, when this process was started by a run:
    /// a command can never `what` (answer a request, provide a secret).
    pub fn refuse_from_command(
        &self,
        state: &mut RunState,
        request: &RequestId,
        what: &str,
    ) -> Result<()> {
        let tools = self.own_tools()?;
        self.with_ring(&tools, &warrant_kernel::Silent, |ring| {
            let refused = crate::origin::refuse_recorded(
                ring,
                state,
                request,
                &self.identity.principal,
                what,
            );
            if refused.is_err() {
                self.deliver();
            }
            refused
        })
    }

    /// Records `reply` to `request` as this process's person, then delivers the trail. The
    /// reply's text passes the redactor first: a secret pasted into an answer, a decline or a
    /// resource check reaches neither the journal, the audit trail nor the model.
    pub fn reply(&self, state: &mut RunState, request: &RequestId, reply: Reply) -> Result<()> {
        let reply = match crate::controls::redacting(&self.redactor) {
            Some(redactor) => redacted(&redactor, reply),
            None => reply,
        };
        let tools = self.own_tools()?;
        self.with_ring(&tools, &warrant_kernel::Silent, |ring| {
            let result = ring.reply(
                state,
                request,
                &self.identity.principal,
                crate::origin::via_from(self.front).as_str(),
                reply,
            );
            self.deliver();
            result.map_err(|e| HostError::bad_input(&e))
        })
    }
}

/// A reply recorded to a request the agent raised.
#[derive(Clone, Debug, Serialize)]
pub struct Replied {
    pub request: RequestId,
    pub run: RunId,
    /// `answered`, `declined`, `provided` or `connected`.
    pub reply: &'static str,
    pub by: String,
}

/// A secret's value as a person gave it: one trailing line end dropped (a pipe's `echo`), and
/// refused when nothing is left (W-REQUEST-006).
pub fn secret_value(name: &str, mut value: Vec<u8>) -> Result<Vec<u8>> {
    if value.ends_with(b"\n") {
        value.pop();
        if value.ends_with(b"\r") {
            value.pop();
        }
    }
    if value.is_empty() {
        return Err(HostError::usage(
            "W-REQUEST-006",
            format!(
                "the value of secret {name} is empty; pipe it on standard input or type it at the prompt"
            ),
        ));
    }
    Ok(value)
}

/// What a person connects to a resource request: their own URL or command, or (only when
/// they say so) what the agent proposed.
#[derive(Clone, Debug, Default)]
pub struct Connection {
    pub url: Option<String>,
    pub command: Option<Vec<String>>,
    pub use_proposed: bool,
    pub timeout: std::time::Duration,
}

impl Host {
    /// Loads the run of a request the agent raised, with the request as folded.
    pub fn ask_of(&self, request: &RequestId) -> Result<(RunState, AskState)> {
        let row = self.records().request_row(request)?;
        let state = self.load_run(&row.run, Class::Failed)?;
        let Some(ask) = state.asks.get(request).cloned() else {
            return Err(HostError::usage(
                "W-REQUEST-008",
                format!("request {request} is not a request raised by the agent"),
            )
            .with_hint(crate::Hint::ApproveOrDeny));
        };
        Ok((state, ask))
    }

    /// Refuses a reply from a process a run started, then records `reply` as this person.
    fn replied(&self, state: &mut RunState, request: &RequestId, reply: Reply) -> Result<Replied> {
        let label = reply.label();
        self.refuse_from_command(state, request, "answer a request")?;
        self.reply(state, request, reply)?;
        Ok(Replied {
            request: request.clone(),
            run: state.run.clone(),
            reply: label,
            by: self.identity.principal.actor.clone(),
        })
    }

    /// Answers a question: option `n` (1 = the first), or free text.
    pub fn answer_question(
        &self,
        request: &RequestId,
        option: Option<u32>,
        text: Option<String>,
    ) -> Result<Replied> {
        let (mut state, ask) = self.ask_of(request)?;
        if let Ask::Proposal { profile, .. } = &ask.ask {
            let approves = match (option, text.as_deref().map(str::trim)) {
                (Some(n), _) => n == 1,
                (None, Some(t)) => t.eq_ignore_ascii_case("approve"),
                (None, None) => false,
            };
            if !approves {
                return Err(HostError::usage(
                    "W-REQUEST-002",
                    format!(
                        "request {request} proposes a change to agent profile `{profile}`: it is approved with --text approve (or --option 1), or declined with a reason"
                    ),
                ));
            }
            return self.approve_proposal(&mut state, request, &ask);
        }
        let reply = match (option, text) {
            (Some(n), _) => {
                let chosen = match &ask.ask {
                    Ask::Question { options, .. } => usize::try_from(n)
                        .ok()
                        .and_then(|i| i.checked_sub(1))
                        .and_then(|i| options.get(i))
                        .cloned(),
                    Ask::Secret { .. }
                    | Ask::Resource { .. }
                    | Ask::Elicitation { .. }
                    | Ask::Proposal { .. } => None,
                };
                Reply::Answered {
                    option: Some(n),
                    text: chosen.unwrap_or_default(),
                }
            }
            (None, Some(text)) => match &ask.ask {
                Ask::Elicitation { server, schema, .. } => {
                    self.refuse_from_command(&mut state, request, "answer a request")?;
                    let content = self.elicited(&mut state, request, server, schema, &text)?;
                    Reply::Accepted { content }
                }
                Ask::Question { .. }
                | Ask::Secret { .. }
                | Ask::Resource { .. }
                | Ask::Proposal { .. } => Reply::Answered { option: None, text },
            },
            (None, None) => {
                return Err(HostError::usage(
                    "W-REQUEST-002",
                    format!("answer {request} with --option N or --text TEXT"),
                ));
            }
        };
        self.replied(&mut state, request, reply)
    }

    /// The person's answer to a server's elicitation: a JSON object of the requested fields,
    /// checked against the schema with its defaults filled in (a wrong answer is refused and
    /// may be given again), and scanned for secrets: the protocol forbids a server to ask for
    /// sensitive information in form mode, so an answer in which the secret scanner finds one
    /// is refused and never sent (W-MCP-015, recorded in the run as a refused answer; the
    /// request stays open for another answer or a decline).
    fn elicited(
        &self,
        state: &mut RunState,
        request: &RequestId,
        server: &str,
        schema: &serde_json::Value,
        text: &str,
    ) -> Result<serde_json::Value> {
        let given: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            HostError::usage(
                "W-REQUEST-002",
                format!(
                    "request {request} asks for fields: answer with --text '{{\"field\": value, ...}}' (a JSON object; `{{}}` takes every default): {e}"
                ),
            )
        })?;
        let content = warrant_kernel::elicit::accept(schema, &given).map_err(|why| {
            HostError::usage("W-REQUEST-002", format!("request {request}: {why}"))
        })?;
        if !crate::controls::disabled("elicit-scan") {
            let (_, found) = self.redactor.redact_json(&content);
            if !found.is_empty() {
                let kinds = found.counts.keys().cloned().collect::<Vec<_>>().join(", ");
                let detail = format!(
                    "the answer to MCP server `{server}` holds what the secret scanner takes for a secret ({kinds}); a server may not ask for one in a form, so nothing was sent (W-MCP-015)"
                );
                let tools = self.own_tools()?;
                self.with_ring(&tools, &warrant_kernel::Silent, |ring| {
                    ring.record_refused_answer(
                        state,
                        request,
                        &self.identity.principal,
                        crate::origin::via_from(self.front).as_str(),
                        detail.clone(),
                    )
                    .map_err(|e| HostError::failed(&e))
                })?;
                self.deliver();
                return Err(HostError::usage("W-MCP-015", detail));
            }
        }
        Ok(content)
    }

    pub fn decline(&self, request: &RequestId, reason: String) -> Result<Replied> {
        let (mut state, _) = self.ask_of(request)?;
        self.replied(&mut state, request, Reply::Declined { reason })
    }

    /// Provides a requested secret: `read` gets the value from the person (never from an
    /// argument); it is stored encrypted in the installation's vault and the agent sees only
    /// its handle. A reply that could not be recorded anyway is refused before `read` is asked.
    pub fn provide_secret(
        &self,
        request: &RequestId,
        read: impl FnOnce(&str) -> Result<Vec<u8>>,
    ) -> Result<Replied> {
        let (mut state, ask) = self.ask_of(request)?;
        let Ask::Secret { name, .. } = &ask.ask else {
            return Err(not_asked(request, &ask, "a secret"));
        };
        let handle = || Reply::SecretProvided {
            handle: secret_handle(name),
        };
        self.refuse_from_command(&mut state, request, "provide a secret")?;
        if ask.reply.is_some() || ask.expired.is_some() || state.ended.is_some() {
            self.reply(&mut state, request, handle())?;
        }
        let mut value = read(name)?;
        let vault = Vault::open(&self.paths.dot, &self.inst.secret);
        let stored = vault.put(name, &value);
        value.iter_mut().for_each(|b| *b = 0);
        stored.map_err(|e| HostError::failed(&e))?;
        self.replied(&mut state, request, handle())
    }

    /// Connects a resource after confirming it answers: an endpoint must answer HTTP, an MCP
    /// server must answer `initialize`. What the agent proposed is the model's choice, and
    /// checking it starts a command or sends a request from this machine, outside the ring:
    /// it is used only when the person says so.
    pub fn connect(&self, request: &RequestId, with: Connection) -> Result<Replied> {
        let (mut state, ask) = self.ask_of(request)?;
        let Ask::Resource {
            resource,
            url: proposed_url,
            command: proposed_command,
            ..
        } = &ask.ask
        else {
            return Err(not_asked(request, &ask, "a resource"));
        };
        let refuse_implied = |proposal: String, flag: &str| {
            HostError::usage(
                "W-REQUEST-013",
                format!(
                    "request {request}: name the {} to check with {flag}, or take the agent's proposal ({proposal}) with --use-proposed; Warrant does not check what the agent chose unless you say so",
                    resource.as_str()
                ),
            )
        };
        let checked = match resource {
            ResourceKind::Endpoint => {
                let url = match (with.url, with.use_proposed) {
                    (Some(u), _) => u,
                    (None, true) => proposed_url.clone().unwrap_or_default(),
                    (None, false) => {
                        let shown = proposed_url.clone().unwrap_or_else(|| "none".into());
                        return Err(refuse_implied(shown, "--url URL"));
                    }
                };
                resource::check_endpoint(&url, with.timeout)
            }
            ResourceKind::Mcp => {
                let argv = match (with.command, with.use_proposed) {
                    (Some(c), _) => c,
                    (None, true) => proposed_command.clone().unwrap_or_default(),
                    (None, false) => {
                        let shown = proposed_command
                            .as_ref()
                            .map(|c| format!("`{}`", c.join(" ")))
                            .unwrap_or_else(|| "none".into());
                        return Err(refuse_implied(shown, "--command PROGRAM ARGS..."));
                    }
                };
                let workspace = self.paths.workspace_canonical()?;
                resource::check_mcp_server(
                    &argv,
                    &self.settings.profiles,
                    install::parent_env(),
                    &workspace,
                    with.timeout,
                )
            }
        };
        let check = checked.map_err(|why| {
            HostError::usage(
                "W-REQUEST-007",
                format!(
                    "the {} of request {request} could not be confirmed, so it is not connected: {why}",
                    resource.as_str()
                ),
            )
        })?;
        self.replied(&mut state, request, Reply::Connected { check })
    }
}

/// `reply` with its free text redacted (an option's text is the agent's own, redacted too).
fn redacted(redactor: &warrant_secrets::Redactor, reply: Reply) -> Reply {
    let clean = |text: String| redactor.redact(&text).0;
    match reply {
        Reply::Answered { option, text } => Reply::Answered {
            option,
            text: clean(text),
        },
        Reply::Declined { reason } => Reply::Declined {
            reason: clean(reason),
        },
        Reply::Connected { check } => Reply::Connected {
            check: clean(check),
        },
        Reply::SecretProvided { handle } => Reply::SecretProvided { handle },
        // Scanned before it was built: an answer holding a secret is refused, not redacted.
        Reply::Accepted { content } => Reply::Accepted { content },
        Reply::Applied {
            revision,
            profile_digest,
        } => Reply::Applied {
            revision,
            profile_digest,
        },
    }
}

fn not_asked(request: &RequestId, ask: &AskState, what: &str) -> HostError {
    HostError::usage(
        "W-REQUEST-001",
        format!(
            "request {request} asks for {}, not {what}",
            ask.ask.kind().as_str()
        ),
    )
    .with_hint(crate::Hint::ShowRequest {
        request: request.clone(),
    })
}
