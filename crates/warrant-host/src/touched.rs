//! `audit touched`: what one run read, changed, was refused or left in doubt, by resource kind;
//! who allowed each (a policy, or the person who approved it) and on whose behalf each action
//! ran. Computed from the run's signed audit records, after they were checked (chain stretches,
//! signatures, and each record bound to its journal event by digest). The records name no call,
//! so the call id of each is read from the event its digest binds it to.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use warrant_audit::{AuditData, AuditRecord};
use warrant_core::{RiskClass, RunId, audit_view_target};
use warrant_kernel::RunEvent;
use warrant_store::StoredEvent;

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

#[derive(Debug, PartialEq, Eq, Serialize)]
pub struct TouchedRow {
    pub resource: String,
    pub verb: String,
    /// `read`, `changed`, `failed`, `refused` or `in doubt`.
    pub status: String,
    /// Who allowed it (or refused it): the policies, or the approver and how.
    pub by: String,
    pub call: String,
    /// The person this action was done for, as its signed record says (absent when the actor
    /// acted for nobody but itself).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_behalf_of: Option<String>,
}

/// How a call's effect ended, as its records say.
#[derive(Debug)]
enum End {
    Completed { ok: bool },
    Refused { by: String },
    InDoubt,
}

/// What one event of a call did to it.
#[derive(Clone, Copy, Debug)]
enum Step {
    Proposed,
    /// The decision on the action at this index.
    Decided(u32),
    /// A person was asked to approve it (before it ran, or what it left to judge).
    Asked,
    Started,
    Completed,
    Denied,
    InDoubt,
}

/// What the records of one call say.
#[derive(Debug, Default)]
struct CallTrail {
    /// The audit views of its actions (never content).
    views: Vec<Value>,
    /// The policies that decided its actions, in order.
    policies: Vec<String>,
    /// The last approval request put to a person for it (before it ran, or for what it left
    /// to judge).
    asked: Option<String>,
    /// The request whose approval (or session grant) it started under.
    approval: Option<String>,
    started: bool,
    end: Option<End>,
    /// On whose behalf the record that settled it says it ran.
    on_behalf_of: Option<String>,
}

/// Who approved a request: the approver, scope and where the answer came from.
struct Grant {
    approver: String,
    scope: String,
    via: String,
}

impl Records<'_> {
    pub fn touched(&self, run: &RunId) -> Result<Touched> {
        let (events, records) = self.checked_journal(run)?;
        let by_seq: BTreeMap<u64, &StoredEvent> = events.iter().map(|e| (e.seq, e)).collect();
        let mut first: Option<AuditData> = None;
        let mut order: Vec<String> = Vec::new();
        let mut calls: BTreeMap<String, CallTrail> = BTreeMap::new();
        let mut grants: BTreeMap<String, Grant> = BTreeMap::new();
        for sealed in &records {
            let record: AuditRecord = serde_json::from_str(&sealed.line).map_err(|e| {
                unreadable(format!(
                    "audit record {} of run {run} verifies but is not a record this build reads: {e}",
                    sealed.seq
                ))
            })?;
            let data = record.data;
            let event = by_seq
                .get(&data.event_seq)
                .and_then(|e| RunEvent::from_stored(e).ok());
            if let Some(event) = &event {
                if let Some((request, grant)) = granted(event, &data) {
                    grants.insert(request, grant);
                }
                if let Some((call, step)) = call_of(event) {
                    if !calls.contains_key(call) {
                        order.push(call.to_owned());
                    }
                    take(calls.entry(call.to_owned()).or_default(), step, &data);
                }
            }
            if first.is_none() {
                first = Some(data);
            }
        }
        let first =
            first.ok_or_else(|| unreadable(format!("run {run} has no signed audit records")))?;
        let mut touched: BTreeMap<String, Vec<TouchedRow>> = BTreeMap::new();
        for call in order {
            let Some(trail) = calls.get(&call) else {
                continue;
            };
            let Some((what, by)) = outcome(trail, &grants) else {
                continue;
            };
            for view in &trail.views {
                let Some((verb, resource)) = audit_view_target(view) else {
                    continue;
                };
                let status = what.unwrap_or(if verb.default_risk() == RiskClass::Read {
                    "read"
                } else {
                    "changed"
                });
                touched
                    .entry(verb.kind().as_str().to_owned())
                    .or_default()
                    .push(TouchedRow {
                        resource,
                        verb: verb.as_str().to_owned(),
                        status: status.to_owned(),
                        by: by.clone(),
                        call: call.clone(),
                        on_behalf_of: trail.on_behalf_of.clone(),
                    });
            }
        }
        Ok(Touched {
            run: run.clone(),
            actor: first.actor,
            on_behalf_of: first.on_behalf_of,
            touched,
        })
    }
}

fn unreadable(message: String) -> HostError {
    HostError {
        code: "W-AUDIT-038".into(),
        message,
        class: crate::Class::Failed,
        hint: None,
    }
}

/// The call an event is about, and what it did to it.
fn call_of(event: &RunEvent) -> Option<(&str, Step)> {
    match event {
        RunEvent::ActionProposed { call_id, .. } => Some((call_id, Step::Proposed)),
        RunEvent::PolicyDecided { call_id, index, .. } => Some((call_id, Step::Decided(*index))),
        RunEvent::EffectStarted { call_id, .. } => Some((call_id, Step::Started)),
        RunEvent::EffectCompleted { call_id, .. } => Some((call_id, Step::Completed)),
        RunEvent::EffectDenied { call_id, .. } => Some((call_id, Step::Denied)),
        RunEvent::EffectInDoubt { call_id, .. } => Some((call_id, Step::InDoubt)),
        RunEvent::ApprovalRequested { call_id, .. } => Some((call_id, Step::Asked)),
        // A judged effect ends in `effect_completed`; a resolved doubt in `effect_completed`
        // or a new `effect_started`; the rest are not about one call's effect.
        RunEvent::EffectJudging { .. }
        | RunEvent::InDoubtResolved { .. }
        | RunEvent::RunStarted { .. }
        | RunEvent::PolicyChanged { .. }
        | RunEvent::ToolsChanged { .. }
        | RunEvent::ModelResponded { .. }
        | RunEvent::CallReceived { .. }
        | RunEvent::AccessRefused { .. }
        | RunEvent::CallRefused { .. }
        | RunEvent::ApprovalGranted { .. }
        | RunEvent::ApprovalRejected { .. }
        | RunEvent::ApprovalDenied { .. }
        | RunEvent::RunParked { .. }
        | RunEvent::RunResumed { .. }
        | RunEvent::AuditGap { .. }
        | RunEvent::LimitReached { .. }
        | RunEvent::Halted { .. }
        | RunEvent::RunEnded { .. }
        | RunEvent::RequestRaised { .. }
        | RunEvent::RequestReplied { .. }
        | RunEvent::RequestExpired { .. }
        | RunEvent::ModelCallDenied { .. }
        | RunEvent::BudgetExceeded { .. }
        | RunEvent::JournalRejected { .. }
        | RunEvent::AwaitingMessage { .. }
        | RunEvent::MessageReceived { .. }
        | RunEvent::HistoryCompacted { .. }
        | RunEvent::MessageRefused { .. }
        | RunEvent::GraphNode(_) => None,
    }
}

/// A granted approval's record: its request and who granted it.
fn granted(event: &RunEvent, data: &AuditData) -> Option<(String, Grant)> {
    if !matches!(event, RunEvent::ApprovalGranted { .. }) {
        return None;
    }
    let a = data.approval.as_ref()?;
    Some((
        a.request.clone()?,
        Grant {
            approver: a.approver.clone()?,
            scope: a.scope.clone().unwrap_or_default(),
            via: a.via.clone().unwrap_or_default(),
        },
    ))
}

/// Folds one record of a call into what is known of it.
fn take(trail: &mut CallTrail, step: Step, data: &AuditData) {
    let views = || data.action.as_ref().map(|a| a.views().to_vec());
    match step {
        Step::Proposed => trail.views = views().unwrap_or_default(),
        Step::Decided(index) => {
            // Decided again from the first action on (a changed policy): the new decisions count.
            if index == 0 {
                trail.policies.clear();
            }
            trail.policies.extend(data.reasons.iter().cloned());
        }
        Step::Asked => trail.asked = data.approval.as_ref().and_then(|a| a.request.clone()),
        Step::Started => {
            trail.started = true;
            trail.end = None;
            trail.approval = data.approval.as_ref().and_then(|a| a.request.clone());
        }
        Step::Completed => {
            trail.end = Some(End::Completed {
                ok: data.outcome.as_deref() == Some("ok"),
            });
        }
        Step::Denied => {
            let person = data.approval.as_ref().and_then(|a| a.approver.clone());
            let by = match person {
                Some(who) => format!(
                    "denied by {who}: {}",
                    data.reasons.first().map_or("", String::as_str)
                ),
                None => format!("denied by policy {}", data.reasons.join(", ")),
            };
            trail.end = Some(End::Refused { by });
        }
        Step::InDoubt => trail.end = Some(End::InDoubt),
    }
    match step {
        Step::Proposed | Step::Decided(_) | Step::Asked => {}
        // The records of the effect itself name its actions and on whose behalf it ran.
        Step::Started | Step::Completed | Step::Denied | Step::InDoubt => {
            if let Some(v) = views() {
                trail.views = v;
            }
            trail.on_behalf_of.clone_from(&data.on_behalf_of);
        }
    }
}

/// How a call ended (`None` when it took effect as asked) and who decided; `None` for a call
/// that touched nothing (refused before a decision, or never started).
fn outcome(
    trail: &CallTrail,
    grants: &BTreeMap<String, Grant>,
) -> Option<(Option<&'static str>, String)> {
    match &trail.end {
        Some(End::Completed { ok }) => {
            // The person asked last (for what a command left to judge, or before it ran), else
            // the approval or session grant it started under.
            let granted = [&trail.asked, &trail.approval]
                .into_iter()
                .flatten()
                .find_map(|r| grants.get(r));
            let allowed_by = match granted {
                Some(g) => format!("{} (approved {}, via {})", g.approver, g.scope, g.via),
                None => format!("policy {}", trail.policies.join(", ")),
            };
            Some((if *ok { None } else { Some("failed") }, allowed_by))
        }
        Some(End::Refused { by }) => Some((Some("refused"), by.clone())),
        Some(End::InDoubt) => Some((Some("in doubt"), String::new())),
        None if trail.started => Some((Some("in doubt"), String::new())),
        None => None,
    }
}
