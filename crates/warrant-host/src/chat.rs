//! A chat session: a run that waits for its person's next message. The wait is an event in
//! the run's log (`awaiting_message`, the run parked), each message an event
//! (`message_received`), so a session survives its process like any parked run and a follow-up
//! continues the same conversation. The front end supplies the messages (an [`Inbox`]: a
//! terminal's line editor, or standard input line by line) and the person's Ctrl-C flag.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use warrant_agent::RunExit;
use warrant_core::{PrincipalKind, RunId, Timestamp};
use warrant_kernel::{CallState, Observer, Prompter, RunState, SessionSettings};

use crate::drive::{self, Drive};
use crate::request_views::RequestItem;
use crate::touched::Touched;
use crate::{Class, Host, HostError, Result, Where, install, tools_digest};

/// History kept whole up to this many estimated tokens before the oldest turns are compacted.
pub const DEFAULT_HISTORY_TOKENS: u64 = 24_000;

/// What a session starts with.
#[derive(Clone, Debug)]
pub struct ChatRequest {
    pub model: String,
    pub history_tokens: u64,
    pub deadline: Option<Timestamp>,
    /// Continue this session instead of starting one.
    pub resume: Option<RunId>,
}

/// What the person does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Incoming {
    Message(String),
    /// `/exit`, or the end of input: the session ends, completed.
    End,
}

/// Where a session's messages come from.
pub trait Inbox {
    /// The person's next message. `state` is the session as it stands (`None` before its first
    /// message); the host is there for the front end's own commands (`/audit`, `/approvals`).
    fn next(&mut self, host: &Host, state: Option<&RunState>) -> Incoming;
}

/// How a session ended here.
#[derive(Clone, Debug)]
pub struct Chatted {
    /// `None` when the person left before the first message.
    pub run: Option<RunId>,
    pub exit: RunExit,
}

impl Host {
    /// Holds a session: each message of the person from `inbox`, the model's answers and its
    /// tool calls through the ring (approvals asked of `prompter`), until the person ends it
    /// or the run ends or parks on something nobody here can answer.
    pub fn chat(
        &self,
        request: ChatRequest,
        observer: &dyn Observer,
        prompter: &mut dyn Prompter,
        inbox: &mut dyn Inbox,
        interrupt: Arc<AtomicBool>,
    ) -> Result<Chatted> {
        self.preflight()?;
        let tools = self.tools()?;
        let env = self.tool_env()?;
        crate::layers::sweep(self.inst.store.as_ref(), &env.workspace);
        self.with_ring(&tools, observer, |ring| {
            ring.watch_interrupt(Some(interrupt.clone()));
            let failed = |e: warrant_kernel::KernelError| HostError::failed(&e);
            let (mut state, model) = match &request.resume {
                Some(run) => {
                    let mut state = install::load_run(&self.inst, ring, run, Class::Usage)?;
                    if !state.is_session() {
                        return Err(HostError::usage(
                            "W-SESSION-001",
                            format!(
                                "run {run} is not a chat session; continue it with `warrant resume`"
                            ),
                        ));
                    }
                    if let Some(outcome) = &state.ended {
                        return Err(HostError::usage(
                            "W-KERNEL-005",
                            format!(
                                "session {run} has already ended ({})",
                                warrant_kernel::ring::outcome_label(outcome)
                            ),
                        ));
                    }
                    if let Err(e) = ring.refuse_unless_owner(&mut state, &self.identity.principal) {
                        self.deliver();
                        return Err(HostError::coded(&e, Class::Refused));
                    }
                    let model = self.provider(&state.model, &tools)?;
                    let digest = tools_digest(&tools)?;
                    ring.check_replay(&mut state, &tools, &digest)
                        .map_err(|e| HostError::bad_input(&e))?;
                    (state, model)
                }
                None => {
                    let model = self.provider(&request.model, &tools)?;
                    let Incoming::Message(first) = inbox.next(self, None) else {
                        return Ok(Chatted {
                            run: None,
                            exit: RunExit::Completed,
                        });
                    };
                    let (label, _) = warrant_core::render::neutralize(&first);
                    let mut spec = self.new_run_spec(
                        &tools,
                        &env,
                        &request.model,
                        label,
                        request.deadline,
                        false,
                    );
                    spec.settings.session = Some(SessionSettings {
                        history_tokens: request.history_tokens,
                    });
                    let mut state = ring.start(spec).map_err(failed)?;
                    ring.await_message(&mut state).map_err(failed)?;
                    ring.receive_message(&mut state, &first, &self.identity.principal)
                        .map_err(failed)?;
                    (state, model)
                }
            };
            loop {
                if state.awaiting {
                    // Between turns the run is parked; nobody drives it.
                    match inbox.next(self, Some(&state)) {
                        Incoming::Message(text) => {
                            ring.receive_message(&mut state, &text, &self.identity.principal)
                                .map_err(|e| HostError::bad_input(&e))?;
                        }
                        Incoming::End => {
                            ring.end_session(&mut state).map_err(failed)?;
                            self.deliver();
                            return Ok(Chatted {
                                run: Some(state.run),
                                exit: RunExit::Completed,
                            });
                        }
                    }
                }
                // A Ctrl-C given while nothing ran is not carried into the next turn.
                interrupt.store(false, std::sync::atomic::Ordering::SeqCst);
                let lease = drive::lease_here(
                    self.inst.store.as_ref(),
                    &state.run,
                    self.inst.notices.as_ref(),
                )
                .map_err(|e| HostError::bad_input(&e))?;
                ring.hold_fence(Some(lease.token));
                if state.parked.is_some() {
                    ring.resume(&mut state, &self.identity.principal)
                        .map_err(|e| HostError::bad_input(&e))?;
                }
                let driver = Drive {
                    store: self.inst.store.as_ref(),
                    ring,
                    env: &env,
                    model: model.as_ref(),
                    ttl: drive::LEASE_TTL,
                    backpressure: &install::OutboxBound::new(&self.inst, ring),
                };
                let exit = driver.run(&mut state, lease, prompter);
                self.deliver();
                let exit = exit.map_err(|e| HostError::failed(&e))?;
                if exit != RunExit::AwaitingMessage {
                    return Ok(Chatted {
                        run: Some(state.run),
                        exit,
                    });
                }
            }
        })
    }
}

/// One subprocess profile and what confines its commands, as an approval prompt words it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ProfileWords {
    pub name: String,
    pub confinement: String,
}

impl Host {
    /// Every configured profile with its confinement in words (`/profile` in a session).
    pub fn profiles_in_words(&self) -> Vec<ProfileWords> {
        self.settings
            .profiles
            .iter()
            .map(|(name, profile)| ProfileWords {
                name: name.clone(),
                confinement: warrant_tools::confinement_words(profile, profile.is_contained()),
            })
            .collect()
    }
}

/// The model a session talks to: the one given, else (resuming) the one its log names (an
/// empty spec here), else `WARRANT_MODEL`, else `[providers] model`; `None` when none is.
pub fn model_for(at: &Where, given: Option<String>, resuming: bool) -> Option<String> {
    given
        .or_else(|| resuming.then(String::new))
        .or_else(|| std::env::var("WARRANT_MODEL").ok())
        .or_else(|| crate::runs::configured_model(at))
}

/// Whether a session may ask its person for approvals where it runs: never for an agent;
/// `always` and `never` as said; `auto` only when the session has a terminal to ask at.
pub fn may_prompt(kind: PrincipalKind, mode: &str, terminal: bool) -> bool {
    kind != PrincipalKind::Agent
        && match mode {
            "always" => true,
            "never" => false,
            _ => terminal,
        }
}

/// A line of the person that is a command to the session (`/cost`, `/audit`, …) rather than a
/// message for the model: what it asks for, read from the session and the installation.
#[derive(Debug)]
pub enum Slash {
    /// `/exit` or `/quit`: the session ends.
    Exit,
    Help,
    /// `/cost`: `None` before the session's first message.
    Cost(Option<Spent>),
    /// `/explain`: the session's latest call that policy decided, if any.
    Explain(Option<Box<CallState>>),
    /// `/profile`: the subprocess profiles and what confines their commands.
    Profiles(Vec<ProfileWords>),
    /// `/approvals`: the session's requests waiting for a person.
    Approvals(Result<Vec<RequestItem>>),
    /// `/audit`: what the session touched, from its verified records; `None` before its first
    /// message.
    Audit(Option<Result<Touched>>),
    /// A command the session does not know (its name).
    Unknown(String),
}

/// What a session's model calls cost so far.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Spent {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub turns: u32,
    pub cost_usd: f64,
}

impl Host {
    /// The command `line` gives the session, or `None` when it is a message (it does not start
    /// with `/`). `state` is the session as it stands.
    pub fn slash(&self, line: &str, state: Option<&RunState>) -> Option<Slash> {
        let command = line.trim().strip_prefix('/')?;
        let name = command.split_whitespace().next().unwrap_or("");
        Some(match name {
            "exit" | "quit" => Slash::Exit,
            "help" => Slash::Help,
            "cost" => Slash::Cost(state.map(|s| Spent {
                input_tokens: s.usage.input_tokens,
                output_tokens: s.usage.output_tokens,
                turns: s.turns,
                cost_usd: s.usage.cost_usd,
            })),
            "explain" => Slash::Explain(
                state
                    .and_then(|s| s.calls.iter().rev().find(|c| !c.decisions.is_empty()))
                    .map(|c| Box::new(c.clone())),
            ),
            "profile" => Slash::Profiles(self.profiles_in_words()),
            "approvals" => Slash::Approvals(match state {
                None => Ok(Vec::new()),
                Some(s) => self
                    .records()
                    .request_items(false, None)
                    .map(|items| items.into_iter().filter(|i| i.run == s.run).collect()),
            }),
            "audit" => Slash::Audit(state.map(|s| self.records().touched(&s.run))),
            other => Slash::Unknown(other.to_owned()),
        })
    }
}
