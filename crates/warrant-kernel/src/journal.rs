//! The journal check before the ring acts: a run is folded for a resume, a worker's lease or
//! an answer only after its events were checked against its signed audit records
//! ([`warrant_audit::verify_run`]). A mismatch is refused: `journal_rejected` is appended (with
//! its own signed record) naming the verifier's code and the first bad seq, the run is marked
//! stopped in the index so no worker leases it again, and nothing else happens.
//!
//! Limits: the check sees this run's records only, so the run's last events removed together
//! with their records are found by `warrant audit verify` (a gap in the chain) or, at the
//! chain's very end, by a sink's checkpoint. Whoever holds the installation's signing key can
//! re-sign anything; the sink's copy is the witness against that.

use warrant_audit::{AuditRecord, BindingError, PublicKeys, RunBinding, verify_run};
use warrant_core::{Coded as _, Principal, PrincipalKind, RunId};
use warrant_store::{
    Append, AuditQuery, EventStore, RunStatus, SealedRecord, StoreError, StoredEvent,
};

use crate::error::KernelError;
use crate::events::RunEvent;
use crate::ring::Ring;

#[cfg(feature = "testing")]
thread_local! {
    static UNCHECKED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether folds that feed the ring check the journal. Always `true` in the shipped binary;
/// the kernel's `testing` feature lets a test switch the check off on its own thread, for the
/// negative control of the tampering tests.
pub fn checks_enabled() -> bool {
    #[cfg(feature = "testing")]
    {
        !UNCHECKED.with(std::cell::Cell::get)
    }
    #[cfg(not(feature = "testing"))]
    {
        true
    }
}

/// Test only: switch the journal check off (or on again) for the calling thread.
#[cfg(feature = "testing")]
pub fn set_checks_for_this_thread(enabled: bool) {
    UNCHECKED.with(|c| c.set(!enabled));
}

/// The run's audit records, in chain order.
pub fn run_records(store: &dyn EventStore, run: &RunId) -> Result<Vec<SealedRecord>, StoreError> {
    store.query_audit(&AuditQuery {
        run: Some(run.to_string()),
        ..AuditQuery::default()
    })
}

/// Checks `events` of `run` against the store's records of it, recording nothing: for views
/// and `audit verify`.
pub fn check(
    store: &dyn EventStore,
    keys: &PublicKeys,
    run: &RunId,
    events: &[StoredEvent],
) -> Result<Result<RunBinding, BindingError>, StoreError> {
    let records = run_records(store, run)?;
    Ok(verify_run(run, events, &records, keys))
}

impl Ring<'_> {
    /// The run's events, checked against its signed records first. On a mismatch the refusal
    /// is appended and the error names it.
    pub fn verified_events(&self, run: &RunId) -> Result<Vec<StoredEvent>, KernelError> {
        let events = self.store.events(run)?;
        if events.is_empty() || !checks_enabled() {
            return Ok(events);
        }
        let records = run_records(self.store, run)?;
        match verify_run(run, &events, &records, self.keys) {
            Ok(_) => Ok(events),
            Err(error) => {
                let recorded = self.reject_journal(run, &records, &error).ok();
                Err(KernelError::Journal { error, recorded })
            }
        }
    }

    /// Appends `journal_rejected` (without a fencing token: the refusing process may not hold
    /// the lease) and stops the run in the index. Its audit record names the actor of the run's
    /// first signed record, since the log's own `run_started` cannot be trusted.
    fn reject_journal(
        &self,
        run: &RunId,
        records: &[SealedRecord],
        error: &BindingError,
    ) -> Result<u64, KernelError> {
        let event = RunEvent::JournalRejected {
            code: error.code().to_owned(),
            seq: error.seq(),
            problem: error.what().to_owned(),
            detail: error.detail().to_owned(),
        };
        let principal = signed_principal(records);
        let mut expected = self
            .store
            .run(run)?
            .map_or(1, |row| row.events.saturating_add(1));
        // One retry: a writer that appended in between moves the position on.
        for _ in 0..2 {
            let draft = self.draft(&principal, run, expected, &event, None)?;
            let append = Append {
                run: run.clone(),
                expected_seq: expected,
                events: vec![draft],
                status: Some(RunStatus::Stopped),
                requests: vec![],
                fence: None,
            };
            match self.store.append(append, self.sealer) {
                Ok(stored) => {
                    for s in &stored {
                        self.observer.committed(s, &event);
                    }
                    return Ok(expected);
                }
                Err(StoreError::Conflict { found, .. }) => expected = found,
                Err(e) => return Err(e.into()),
            }
        }
        Err(KernelError::Inconsistent {
            run: run.to_string(),
            message: "the refusal could not be appended: the log kept moving".into(),
        })
    }
}

/// Actor, tenant and on-behalf-of of the run's first record, or a placeholder actor.
fn signed_principal(records: &[SealedRecord]) -> Principal {
    let first: Option<AuditRecord> = records
        .first()
        .and_then(|r| serde_json::from_str(&r.line).ok());
    let (actor, tenant, on_behalf_of) = match first {
        Some(r) => (r.data.actor, r.data.tenant, r.data.on_behalf_of),
        None => ("unknown".to_owned(), String::new(), None),
    };
    Principal {
        tenant,
        actor,
        kind: PrincipalKind::User,
        on_behalf_of,
        roles: vec![],
        teams: vec![],
        attrs: Default::default(),
    }
}
