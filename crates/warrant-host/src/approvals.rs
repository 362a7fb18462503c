//! Answering an approval: a person (never a process a run started) approves or denies a
//! parked request, authenticated by their approver key where the rules need one.

use serde::Serialize;
use warrant_core::{RequestId, RunId};
use warrant_kernel::Answer;

use crate::{Class, Host, HostError, Result, install};

/// A recorded answer.
#[derive(Clone, Debug, Serialize)]
pub struct Answered {
    pub request: RequestId,
    pub run: RunId,
    /// `approved` or `denied`.
    pub answer: &'static str,
    /// `once` or `session` for an approval.
    pub scope: Option<String>,
    pub by: String,
}

/// An approval, for this one action or for the rest of the run (`session`).
pub fn approval(session: bool) -> Answer {
    Answer::Approve(if session {
        warrant_kernel::Scope::Session
    } else {
        warrant_kernel::Scope::Once
    })
}

/// A denial; it must say why, because the agent is told.
pub fn denial(reason: String) -> Result<Answer> {
    if reason.trim().is_empty() {
        return Err(HostError::usage(
            "W-APPROVAL-004",
            "--reason must say why; the agent is told",
        ));
    }
    Ok(Answer::Deny { reason })
}

/// Parses a request id, or says what one looks like.
pub fn parse_request(id: &str) -> Result<RequestId> {
    RequestId::parse(id).ok_or_else(|| {
        HostError::usage(
            "W-APPROVAL-001",
            format!("`{id}` is not a request id (they look like req-0195f0c3a1b2-1a2b3c4d)"),
        )
    })
}

impl Host {
    /// Approves or denies `request` as this process's person.
    pub fn answer(&self, request: &RequestId, answer: Answer) -> Result<Answered> {
        let row = self
            .inst
            .scoped()
            .request(request)
            .map_err(|e| HostError::failed(&e))?
            .ok_or_else(|| {
                self.inst.refused(
                    "answer an approval",
                    warrant_store::Target::Request(request.clone()),
                );
                HostError::usage(
                    "W-APPROVAL-001",
                    format!("request {request} does not exist"),
                )
                .with_hint(crate::Hint::ListApprovals)
            })?;
        let tools = self.own_tools()?;
        self.with_ring(&tools, &warrant_kernel::Silent, |ring| {
            let mut state = install::load_run(&self.inst, ring, &row.run, Class::Failed)?;
            if state.asks.contains_key(request) {
                return Err(HostError::usage(
                    "W-REQUEST-001",
                    format!("request {request} was raised by the agent, it is not an approval"),
                )
                .with_hint(crate::Hint::ShowRequest {
                    request: request.clone(),
                }));
            }
            let key = crate::approver_key::load(&self.paths)?;
            let via = crate::origin::via_from(self.front);
            let result = ring.answer_signed(
                &mut state,
                request,
                &self.identity.principal,
                &via,
                answer.clone(),
                key.as_ref()
                    .map(|k| k as &dyn warrant_kernel::approval::ApproverKey),
            );
            self.deliver();
            result.map_err(|e| HostError::bad_input(&e))?;
            // A denied judgement's layer is not needed any more.
            if matches!(answer, Answer::Deny { .. })
                && let Ok(ws) = self.paths.workspace_canonical()
            {
                crate::layers::sweep(self.inst.store.as_ref(), &ws);
            }
            let (verb, scope) = match &answer {
                Answer::Approve(s) => ("approved", Some(s.as_str().to_owned())),
                Answer::Deny { .. } => ("denied", None),
            };
            Ok(Answered {
                request: request.clone(),
                run: row.run.clone(),
                answer: verb,
                scope,
                by: self.identity.principal.actor.clone(),
            })
        })
    }
}
