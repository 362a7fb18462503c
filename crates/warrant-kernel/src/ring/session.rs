//! A chat session is a run that waits for its person's next message: the wait is an
//! `awaiting_message` event (the run is parked, durable like any park), the message a
//! `message_received` event, and the compaction of a long history a `history_compacted` event,
//! so resuming a session rebuilds exactly the conversation the model saw.

use super::*;
use crate::events::Interrupted;

/// The code of a call the person's Ctrl-C stopped before it ran.
pub const STOPPED_BY_PERSON: &str = "W-SESSION-002";

impl Ring<'_> {
    /// Journals a session model's answer that asks for no call, and the wait for the person's
    /// next message, in one transaction.
    pub fn record_session_reply(
        &self,
        state: &mut RunState,
        request: Option<ModelRequest>,
        text: Option<String>,
        usage: Option<Value>,
        model: String,
    ) -> Result<(), KernelError> {
        let turn = state.turns;
        self.append(
            state,
            vec![
                RunEvent::ModelResponded {
                    turn,
                    text,
                    calls: vec![],
                    usage,
                    model,
                    request,
                },
                RunEvent::AwaitingMessage {
                    turn: turn + 1,
                    interrupted: None,
                    usage: None,
                },
            ],
            Some(RunStatus::Parked),
            vec![],
        )
    }

    /// The person stopped the current turn (Ctrl-C): every call of it that has not started is
    /// refused (the model is told the person stopped it), and the session waits for the next
    /// message. `usage` is what a model answer cut off on the way had cost.
    pub fn interrupt_turn(
        &self,
        state: &mut RunState,
        during: Interrupted,
        usage: Option<Value>,
    ) -> Result<(), KernelError> {
        let mut events: Vec<RunEvent> = state
            .calls
            .iter()
            .filter(|c| c.result.is_none() && c.started.is_none())
            .map(|c| RunEvent::CallRefused {
                call_id: c.record.id.clone(),
                tool: c.record.tool.clone(),
                code: STOPPED_BY_PERSON.to_owned(),
                message: "the person stopped this turn (Ctrl-C) before this call ran".to_owned(),
            })
            .collect();
        events.push(RunEvent::AwaitingMessage {
            turn: state.turns,
            interrupted: Some(during),
            usage,
        });
        self.append(state, events, Some(RunStatus::Parked), vec![])
    }

    /// A session's turn ended without the answer that waits (a reply recorded while the run
    /// could not yet wait, or a log from before): wait for the person now.
    pub fn await_message(&self, state: &mut RunState) -> Result<(), KernelError> {
        self.append(
            state,
            vec![RunEvent::AwaitingMessage {
                turn: state.turns,
                interrupted: None,
                usage: None,
            }],
            Some(RunStatus::Parked),
            vec![],
        )
    }

    /// The person's next message: only for a session that waits for one, only from its own
    /// person. Control characters in it are neutralized and listed in the event.
    pub fn receive_message(
        &self,
        state: &mut RunState,
        text: &str,
        by: &Principal,
    ) -> Result<(), KernelError> {
        let run = state.run.to_string();
        let why = if !state.is_session() {
            Some("is not a chat session".to_owned())
        } else if let Some(outcome) = &state.ended {
            Some(format!("has ended ({})", outcome_label(outcome)))
        } else if !state.awaiting {
            Some("is not waiting for a message".to_owned())
        } else {
            None
        };
        self.refuse_unless_owner(state, by)?;
        if let Some(why) = why {
            return Err(KernelError::NotAwaitingMessage { run, why });
        }
        let (text, neutralized) = warrant_core::render::neutralize(text);
        self.append(
            state,
            vec![RunEvent::MessageReceived {
                by: by.actor.clone(),
                text,
                neutralized,
            }],
            Some(RunStatus::Running),
            vec![],
        )
    }

    /// A session is continued only by its own person: anyone else is refused, and the refusal
    /// is recorded in the session (`message_refused`, audited as a denial).
    pub fn refuse_unless_owner(
        &self,
        state: &mut RunState,
        by: &Principal,
    ) -> Result<(), KernelError> {
        if by.actor == state.principal.actor && by.tenant == state.principal.tenant {
            return Ok(());
        }
        let refusal = KernelError::NotTheSessionsPerson {
            run: state.run.to_string(),
            owner: state.principal.actor.clone(),
            actor: by.actor.clone(),
        };
        self.append(
            state,
            vec![RunEvent::MessageRefused {
                by: by.actor.clone(),
                code: warrant_core::Coded::code(&refusal).to_owned(),
                reason: format!(
                    "{} is {}'s session; only that person continues it",
                    state.run, state.principal.actor
                ),
            }],
            None,
            vec![],
        )?;
        Err(refusal)
    }

    /// Records that the turns before `through_turn` are replaced by `summary` in every later
    /// prompt of this session.
    pub fn record_compaction(
        &self,
        state: &mut RunState,
        through_turn: u32,
        summary: String,
        replaced: Digest,
        estimated_tokens: u64,
        budget: u64,
    ) -> Result<(), KernelError> {
        self.append(
            state,
            vec![RunEvent::HistoryCompacted {
                through_turn,
                summary,
                replaced,
                estimated_tokens,
                budget,
            }],
            None,
            vec![],
        )
    }

    /// Ends a session at its person's word (`/exit`, end of input): completed.
    pub fn end_session(&self, state: &mut RunState) -> Result<(), KernelError> {
        self.end(state, Outcome::Completed)
    }
}
