//! A chat session: a run that waits for its person's next message. The wait is an event in
//! the run's log (`awaiting_message`, the run parked), each message an event
//! (`message_received`), so a session survives its process like any parked run and a follow-up
//! continues the same conversation. The front end supplies the messages (an [`Inbox`]: a
//! terminal's line editor, or standard input line by line) and the person's Ctrl-C flag.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use warrant_agent::RunExit;
use warrant_core::{RunId, Timestamp};
use warrant_kernel::{Observer, Prompter, RunState, SessionSettings};

use crate::drive::{self, Drive};
use crate::{Class, Host, HostError, Result, install, tools_digest};

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
                    backpressure: &install::OutboxBound {
                        inst: &self.inst,
                        ring,
                    },
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
