//! `audit touched`: what one run read, changed, was refused or left in doubt, by resource kind,
//! and who allowed each (a policy, or the person who approved it). Read from the run's journal
//! only after the journal has been checked against its signed audit records.

use std::collections::BTreeMap;

use serde::Serialize;
use warrant_core::{RiskClass, RunId};
use warrant_kernel::{CallResult, CallState, DeniedBy, RequestAnswer, RunState};

use crate::records::Records;
use crate::{HostError, Result};

#[derive(Debug, Serialize)]
pub struct Touched {
    pub run: RunId,
    pub actor: String,
    /// The person the run's actor acted for, when it acted for someone (an agent for its user).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_behalf_of: Option<String>,
    /// By resource kind (`fs`, `shell`, …), in the order the calls were made.
    pub touched: BTreeMap<String, Vec<TouchedRow>>,
}

#[derive(Debug, Serialize)]
pub struct TouchedRow {
    pub resource: String,
    pub verb: String,
    /// `read`, `changed`, `failed`, `refused` or `in doubt`.
    pub status: String,
    /// Who allowed it (or refused it): the policies, or the approver and how.
    pub by: String,
    pub call: String,
}

impl Records<'_> {
    pub fn touched(&self, run: &RunId) -> Result<Touched> {
        let events = self.checked_events(run)?;
        let state = RunState::fold(&events).map_err(|e| HostError::failed(&e))?;
        let mut touched: BTreeMap<String, Vec<TouchedRow>> = BTreeMap::new();
        for call in &state.calls {
            let Some(actions) = &call.actions else {
                continue;
            };
            let Some((what, by)) = outcome(&state, call) else {
                continue;
            };
            for a in actions {
                let verb = a.verb();
                let status = what.unwrap_or(if verb.default_risk() == RiskClass::Read {
                    "read"
                } else {
                    "changed"
                });
                touched
                    .entry(verb.kind().as_str().to_owned())
                    .or_default()
                    .push(TouchedRow {
                        resource: a.target(),
                        verb: verb.as_str().to_owned(),
                        status: status.to_owned(),
                        by: by.clone(),
                        call: call.record.id.clone(),
                    });
            }
        }
        Ok(Touched {
            run: run.clone(),
            actor: state.principal.actor,
            on_behalf_of: state.principal.on_behalf_of,
            touched,
        })
    }
}

/// How a call ended (`None` when it took effect as asked) and who decided; `None` for a call
/// that touched nothing (refused before a decision, or never started).
fn outcome(state: &RunState, call: &CallState) -> Option<(Option<&'static str>, String)> {
    let policies =
        |reasons: &mut dyn Iterator<Item = String>| reasons.collect::<Vec<_>>().join(", ");
    match &call.result {
        Some(CallResult::Completed { ok, .. }) => {
            let answer = call
                .request
                .as_ref()
                .and_then(|r| state.requests.get(r))
                .and_then(|r| r.answer.clone());
            let allowed_by = match answer {
                Some(RequestAnswer::Granted {
                    approver, scope, ..
                }) => format!(
                    "{} (approved {}, via {})",
                    approver.actor,
                    scope.as_str(),
                    approver.via
                ),
                _ => format!(
                    "policy {}",
                    policies(
                        &mut call
                            .decisions
                            .iter()
                            .flat_map(|d| d.reasons.iter().map(|r| r.policy.clone()))
                    )
                ),
            };
            Some((if *ok { None } else { Some("failed") }, allowed_by))
        }
        Some(CallResult::Denied { denied, .. }) => Some((
            Some("refused"),
            match denied {
                DeniedBy::Policy { reasons } => format!(
                    "denied by policy {}",
                    policies(&mut reasons.iter().map(|r| r.policy.clone()))
                ),
                DeniedBy::Person { approver, reason } => {
                    format!("denied by {}: {reason}", approver.actor)
                }
            },
        )),
        Some(CallResult::InDoubt) | None if call.in_doubt.is_some() || call.started.is_some() => {
            Some((Some("in doubt"), String::new()))
        }
        Some(CallResult::Refused { .. }) | Some(CallResult::InDoubt) | None => None,
    }
}
