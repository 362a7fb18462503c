//! An MCP server's elicitation while its call runs: a request raised in the run (journaled,
//! audited, listed with the other requests), answered from another process (or a terminal)
//! by appending its reply to this run's log, which the waiting call reads back. Nothing parks:
//! the MCP session lives in this process, so the call waits here, bounded by the ask's
//! timeout and the run's stop conditions (Ctrl-C, kill switch, cancellation, deadline), and a
//! request still open when the wait ends is closed as expired (the server hears `cancel`).

use std::time::Duration;

use warrant_core::Timestamp;
use warrant_store::{RequestUpdate, StoreError};

use crate::asks::{Ask, AskKind, Reply, asked_of_with};
use crate::elicit::{ElicitAsk, ElicitOutcome, Elicited};
use crate::error::KernelError;
use crate::events::RunEvent;
use crate::ring::Ring;
use crate::state::RunState;
use crate::tool::StopCheck;

/// How often the waiting call looks for a reply in the run's log.
const POLL: Duration = Duration::from_millis(100);

impl Ring<'_> {
    /// Raises `ask` as a request of `call_id` and waits for its reply, its expiry or a stop.
    pub(super) fn elicit_in(
        &self,
        state: &mut RunState,
        call_id: &str,
        ask: &ElicitAsk,
        stop: StopCheck<'_>,
    ) -> Result<Elicited, KernelError> {
        if let Err(message) = crate::elicit::check_schema(&ask.schema) {
            return Ok(Elicited::refused("W-MCP-016", message));
        }
        let request = self.ids.request_id();
        let now = self.clock.now();
        let expires_at = Timestamp::from_millis(
            now.millis()
                .saturating_add(i64::try_from(ask.timeout_ms).unwrap_or(i64::MAX)),
        )
        .unwrap_or(now);
        let the_ask = Ask::Elicitation {
            server: ask.server.clone(),
            message: ask.message.clone(),
            schema: ask.schema.clone(),
        };
        let asked_of = asked_of_with(&self.rules(), &state.principal, AskKind::Elicitation);
        let tool = state
            .call(call_id)
            .map(|c| c.record.tool.clone())
            .unwrap_or_default();
        let summary = crate::RequestSummary::Asked(crate::AskedSummary {
            kind: AskKind::Elicitation.as_str().to_owned(),
            run: state.run.clone(),
            call: call_id.to_owned(),
            tool,
            title: the_ask.title(),
            ask: the_ask.clone(),
            requested_by: state.principal.actor.clone(),
            asked_of: asked_of.clone(),
            expires_at: expires_at.rfc3339(),
        })
        .to_value();
        self.append(
            state,
            vec![RunEvent::RequestRaised {
                call_id: call_id.to_owned(),
                request_id: request.clone(),
                ask: the_ask,
                expires_at,
                asked_of,
            }],
            None,
            vec![RequestUpdate::Open {
                id: request.clone(),
                summary,
            }],
        )?;
        let done = |outcome| {
            Ok(Elicited {
                request: Some(request.clone()),
                outcome,
            })
        };
        loop {
            self.catch_up(state)?;
            let Some(open) = state.asks.get(&request) else {
                return Err(KernelError::UnknownRequest(request.to_string()));
            };
            match (&open.reply, open.expired) {
                (Some((Reply::Accepted { content }, _)), _) => {
                    return done(ElicitOutcome::Accepted(content.clone()));
                }
                (Some((Reply::Declined { reason }, _)), _) => {
                    return done(ElicitOutcome::Declined(reason.clone()));
                }
                (Some((other, _)), _) => {
                    return done(ElicitOutcome::Cancelled(format!(
                        "the reply ({}) does not answer an elicitation",
                        other.label()
                    )));
                }
                (None, Some(at)) => {
                    return done(ElicitOutcome::Cancelled(format!(
                        "nobody answered before {}",
                        at.rfc3339()
                    )));
                }
                (None, None) => {}
            }
            let now = self.clock.now();
            let why = stop().or_else(|| {
                (now >= expires_at).then(|| format!("nobody answered within {} ms", ask.timeout_ms))
            });
            if let Some(why) = why {
                let closed = self.append(
                    state,
                    vec![RunEvent::RequestExpired {
                        call_id: call_id.to_owned(),
                        request_id: request.clone(),
                        expires_at: now.min(expires_at),
                    }],
                    None,
                    vec![RequestUpdate::Answered {
                        id: request.clone(),
                    }],
                );
                match closed {
                    Ok(()) => return done(ElicitOutcome::Cancelled(why)),
                    // A reply landed meanwhile: read it and look again.
                    Err(KernelError::Store(StoreError::Conflict { .. })) => continue,
                    Err(e) => return Err(e),
                }
            }
            std::thread::sleep(POLL);
        }
    }

    /// Applies what other processes appended to this run since `state` was last advanced (a
    /// reply, a refused reply, an expiry), after checking the journal against its records.
    fn catch_up(&self, state: &mut RunState) -> Result<(), KernelError> {
        let Some(row) = self.store.run(&state.run)? else {
            return Ok(());
        };
        if row.events < state.next_seq {
            return Ok(());
        }
        let events = self.verified_events(&state.run)?;
        let from = state.next_seq;
        for mut stored in events.into_iter().filter(|e| e.seq >= from) {
            self.confidential.open(&stored.run, &mut stored.payload);
            let event = RunEvent::from_stored(&stored)?;
            self.observer.committed(&stored, &event);
            state.apply(stored.seq, event)?;
            state.next_seq = stored.seq + 1;
        }
        Ok(())
    }
}
