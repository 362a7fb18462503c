//! Group commit: a tool call costs two store transactions, one before its effect starts
//! (`action_proposed`, `policy_decided`, `effect_started`) and one after it ends
//! (`effect_completed`); a denial or an approval request is committed with the steps that led
//! to it. Every event still has its own chained audit record, each batch signed at its end. A crash (here: a
//! transaction the store never commits) inside a batch loses the whole batch and nothing else;
//! between batches it leaves a journal that verifies and resumes.

use std::cell::{Cell, RefCell};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::json;
use warrant_audit::verify_sealed;
use warrant_core::{RequestId, RunId};
use warrant_kernel::pdp::Pdp;
use warrant_kernel::{CallResult, CallStep, KernelError, NoPrompter, Ring, RingParts, RunState};
use warrant_store::{
    Append, AuditOutbox, AuditQuery, CancelRequest, ChainHead, EventDraft, EventStore,
    FenceRejection, Lease, NewRun, RequestRow, RequestStatus, RunRow, SealedRecord, Sealer,
    SinkState, StoreError, StoredEvent,
};

use super::harness::{SECRET, World, settings};

/// The world's store, seen through the appends the ring makes: the kinds each transaction
/// carried, and a crash point (the first transaction carrying `fail_on` is never committed).
struct Counting<'a> {
    inner: &'a dyn EventStore,
    appends: RefCell<Vec<Vec<String>>>,
    fail_on: Option<&'static str>,
    failed: Cell<bool>,
}

impl<'a> Counting<'a> {
    fn new(inner: &'a dyn EventStore, fail_on: Option<&'static str>) -> Self {
        Self {
            inner,
            appends: RefCell::new(Vec::new()),
            fail_on,
            failed: Cell::new(false),
        }
    }

    fn transactions(&self) -> Vec<Vec<String>> {
        self.appends.borrow().clone()
    }
}

impl AuditOutbox for Counting<'_> {
    fn audit_records(&self, after: u64, limit: usize) -> Result<Vec<SealedRecord>, StoreError> {
        self.inner.audit_records(after, limit)
    }

    fn audit_head(&self) -> Result<ChainHead, StoreError> {
        self.inner.audit_head()
    }
}

impl warrant_store::EnvelopeStore for Counting<'_> {
    fn set_kill(
        &self,
        scope: &warrant_store::KillScope,
        by: &str,
        reason: &str,
    ) -> Result<warrant_store::KillSwitch, StoreError> {
        self.inner.set_kill(scope, by, reason)
    }

    fn lift_kill(
        &self,
        scope: &warrant_store::KillScope,
        by: &str,
        reason: &str,
    ) -> Result<Option<warrant_store::KillSwitch>, StoreError> {
        self.inner.lift_kill(scope, by, reason)
    }

    fn kill_switches(&self) -> Result<Vec<warrant_store::KillSwitch>, StoreError> {
        self.inner.kill_switches()
    }

    fn kill_for(
        &self,
        subject: &warrant_store::KillSubject<'_>,
    ) -> Result<Option<warrant_store::KillSwitch>, StoreError> {
        self.inner.kill_for(subject)
    }

    fn take_token(
        &self,
        key: &str,
        capacity: u32,
        per_minute: u32,
    ) -> Result<warrant_store::Taken, StoreError> {
        self.inner.take_token(key, capacity, per_minute)
    }
}

impl warrant_store::TenantStore for Counting<'_> {
    fn tenant_runs(&self, t: &warrant_store::Tenant) -> Result<Vec<RunRow>, StoreError> {
        self.inner.tenant_runs(t)
    }

    fn tenant_run(
        &self,
        t: &warrant_store::Tenant,
        run: &RunId,
    ) -> Result<Option<RunRow>, StoreError> {
        self.inner.tenant_run(t, run)
    }

    fn tenant_events(
        &self,
        t: &warrant_store::Tenant,
        run: &RunId,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        self.inner.tenant_events(t, run)
    }

    fn tenant_requests(
        &self,
        t: &warrant_store::Tenant,
        status: Option<RequestStatus>,
    ) -> Result<Vec<RequestRow>, StoreError> {
        self.inner.tenant_requests(t, status)
    }

    fn tenant_request(
        &self,
        t: &warrant_store::Tenant,
        id: &RequestId,
    ) -> Result<Option<RequestRow>, StoreError> {
        self.inner.tenant_request(t, id)
    }

    fn tenant_audit(
        &self,
        t: &warrant_store::Tenant,
        q: &warrant_store::AuditQuery,
    ) -> Result<Vec<SealedRecord>, StoreError> {
        self.inner.tenant_audit(t, q)
    }

    fn tenant_lease_next(
        &self,
        t: &warrant_store::Tenant,
        holder: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, StoreError> {
        self.inner.tenant_lease_next(t, holder, ttl)
    }

    fn refuse_tenant(
        &self,
        t: &warrant_store::Tenant,
        actor: &str,
        operation: &str,
        target: &warrant_store::Target,
    ) -> Result<bool, StoreError> {
        self.inner.refuse_tenant(t, actor, operation, target)
    }

    fn tenant_refusals(
        &self,
        t: &warrant_store::Tenant,
    ) -> Result<Vec<warrant_store::TenantRefusal>, StoreError> {
        self.inner.tenant_refusals(t)
    }

    fn tenant_budget(
        &self,
        t: &warrant_store::Tenant,
        actor: Option<&str>,
    ) -> Result<warrant_store::Usage, StoreError> {
        self.inner.tenant_budget(t, actor)
    }

    fn tenant_budget_totals(
        &self,
        t: &warrant_store::Tenant,
    ) -> Result<Vec<warrant_store::BudgetTotal>, StoreError> {
        self.inner.tenant_budget_totals(t)
    }
}

impl warrant_store::RevocationStore for Counting<'_> {
    fn revoke_delegation(&self, id: &str, by: &str, reason: &str) -> Result<bool, StoreError> {
        self.inner.revoke_delegation(id, by, reason)
    }

    fn revoked_delegations(&self) -> Result<Vec<String>, StoreError> {
        self.inner.revoked_delegations()
    }
}

impl EventStore for Counting<'_> {
    fn transport(&self) -> Result<String, StoreError> {
        self.inner.transport()
    }

    fn create_run(
        &self,
        run: &NewRun,
        events: Vec<EventDraft>,
        sealer: &dyn Sealer,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        self.inner.create_run(run, events, sealer)
    }

    fn append(&self, append: Append, sealer: &dyn Sealer) -> Result<Vec<StoredEvent>, StoreError> {
        let kinds: Vec<String> = append.events.iter().map(|e| e.kind.clone()).collect();
        if !self.failed.get()
            && let Some(kind) = self.fail_on
            && kinds.iter().any(|k| k == kind)
        {
            // The process died before this transaction committed: nothing of it is written.
            self.failed.set(true);
            return Err(StoreError::Query(format!(
                "crashed before committing {kinds:?}"
            )));
        }
        self.appends.borrow_mut().push(kinds);
        self.inner.append(append, sealer)
    }

    fn events(&self, run: &RunId) -> Result<Vec<StoredEvent>, StoreError> {
        self.inner.events(run)
    }

    fn run(&self, run: &RunId) -> Result<Option<RunRow>, StoreError> {
        self.inner.run(run)
    }

    fn runs(&self) -> Result<Vec<RunRow>, StoreError> {
        self.inner.runs()
    }

    fn request(&self, id: &RequestId) -> Result<Option<RequestRow>, StoreError> {
        self.inner.request(id)
    }

    fn requests(&self, status: Option<RequestStatus>) -> Result<Vec<RequestRow>, StoreError> {
        self.inner.requests(status)
    }

    fn lease_run(&self, run: &RunId, holder: &str, ttl: Duration) -> Result<Lease, StoreError> {
        self.inner.lease_run(run, holder, ttl)
    }

    fn lease_next(&self, holder: &str, ttl: Duration) -> Result<Option<Lease>, StoreError> {
        self.inner.lease_next(holder, ttl)
    }

    fn heartbeat(&self, lease: &Lease, ttl: Duration) -> Result<Lease, StoreError> {
        self.inner.heartbeat(lease, ttl)
    }

    fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.inner.release(lease)
    }

    fn break_lease(&self, run: &RunId, holder: &str) -> Result<bool, StoreError> {
        self.inner.break_lease(run, holder)
    }

    fn sink_state(&self, sink: &str) -> Result<SinkState, StoreError> {
        self.inner.sink_state(sink)
    }

    fn record_delivery(&self, sink: &str, ack: u64, delivered: u64) -> Result<(), StoreError> {
        self.inner.record_delivery(sink, ack, delivered)
    }

    fn record_delivery_failure(&self, sink: &str, ack: u64, e: &str) -> Result<(), StoreError> {
        self.inner.record_delivery_failure(sink, ack, e)
    }

    fn query_audit(&self, query: &AuditQuery) -> Result<Vec<SealedRecord>, StoreError> {
        self.inner.query_audit(query)
    }

    fn fence_rejections(&self, run: &RunId) -> Result<Vec<FenceRejection>, StoreError> {
        self.inner.fence_rejections(run)
    }

    fn request_cancel(&self, run: &RunId, by: &str, reason: &str) -> Result<(), StoreError> {
        self.inner.request_cancel(run, by, reason)
    }

    fn cancel_request(&self, run: &RunId) -> Result<Option<CancelRequest>, StoreError> {
        self.inner.cancel_request(run)
    }
}

fn kinds(list: &[&str]) -> Vec<String> {
    list.iter().map(|k| (*k).to_owned()).collect()
}

/// The ring of `w` writing through `store`.
fn ring<'a>(w: &'a World, pdp: &'a Pdp<'a>, store: &'a Counting<'a>) -> Ring<'a> {
    Ring::new(RingParts {
        store,
        ..w.ring(pdp, SECRET).parts()
    })
}

/// Every event of the world's store has its own audit record, and the chain verifies.
fn assert_audited(w: &World, run: &RunId) {
    let records = w.store.audit_records(0, usize::MAX).unwrap();
    let events = w.store.events(run).unwrap();
    assert_eq!(records.len(), events.len(), "one record per event");
    let report = verify_sealed(&records, &w.keys);
    assert!(report.is_ok(), "{:?}", report.first_problem);
    assert_eq!(report.records, events.len() as u64);
}

/// Starts a run and has the model propose one call, straight on the world's store.
fn proposed(w: &World, tool: &str, args: serde_json::Value) -> (RunState, String) {
    let pdp = Pdp(&w.engine);
    let ring = w.ring(&pdp, SECRET);
    let mut state = w.start(&ring, settings());
    let call = w.propose(&ring, &mut state, tool, args);
    (state, call)
}

#[test]
fn an_allowed_call_is_two_transactions_a_denied_one_is_one() {
    let w = World::new();
    let (mut state, read) = proposed(&w, "read_file", json!({"path": "notes.txt"}));
    let pdp = Pdp(&w.engine);
    let counting = Counting::new(&w.store, None);
    let ring = ring(&w, &pdp, &counting);

    let step = w.process(&ring, &mut state, &read, &mut NoPrompter);
    assert_eq!(step, CallStep::Done);
    assert_eq!(
        counting.transactions(),
        vec![
            kinds(&["action_proposed", "policy_decided", "effect_started"]),
            kinds(&["effect_completed"]),
        ]
    );

    let denied = w.propose(&ring, &mut state, "read_file", json!({"path": ".env"}));
    counting.appends.borrow_mut().clear();
    assert_eq!(
        w.process(&ring, &mut state, &denied, &mut NoPrompter),
        CallStep::Done
    );
    assert_eq!(
        counting.transactions(),
        vec![kinds(&[
            "action_proposed",
            "policy_decided",
            "effect_denied"
        ])]
    );

    // A call that asks a person: the request is committed with the steps that led to it.
    let asked = w.propose(&ring, &mut state, "run_command", json!({"argv": ["ls"]}));
    counting.appends.borrow_mut().clear();
    let step = w.process(&ring, &mut state, &asked, &mut NoPrompter);
    assert!(matches!(step, CallStep::Parked(_)), "{step:?}");
    assert_eq!(
        counting.transactions().first(),
        Some(&kinds(&[
            "action_proposed",
            "policy_decided",
            "approval_requested"
        ]))
    );

    // The in-memory state is the fold of what was committed, and every event is audited.
    assert_eq!(ring.load(&state.run).unwrap(), state);
    assert_audited(&w, &state.run);
}

#[test]
fn a_crash_inside_the_first_batch_loses_all_of_it_and_the_call_runs_on_resume() {
    let w = World::new();
    let (mut state, call) = proposed(&w, "write_file", json!({"path": "r.md", "content": "r\n"}));
    let before = w.store.events(&state.run).unwrap().len();
    let pdp = Pdp(&w.engine);
    let crashing = Counting::new(&w.store, Some("effect_started"));
    let ring = ring(&w, &pdp, &crashing);

    let err = ring
        .process_call(&mut state, &call, &w.env, &mut NoPrompter)
        .unwrap_err();
    assert!(matches!(err, KernelError::Store(_)), "{err:?}");
    // Nothing of the batch reached the journal (not even the proposal), nothing ran, and
    // the in-memory state was put back to the journal's.
    assert_eq!(w.store.events(&state.run).unwrap().len(), before);
    assert!(!w.exists("r.md"));
    assert_eq!(ring.load(&state.run).unwrap(), state);

    // Resumed from the journal: the call is decided again and runs once, in two transactions.
    let mut resumed = ring.load(&state.run).unwrap();
    let step = w.process(&ring, &mut resumed, &call, &mut NoPrompter);
    assert_eq!(step, CallStep::Done);
    assert_eq!(
        std::fs::read_to_string(format!("{}/r.md", w.ws())).unwrap(),
        "r\n"
    );
    assert_eq!(
        crashing.transactions(),
        vec![
            kinds(&["action_proposed", "policy_decided", "effect_started"]),
            kinds(&["effect_completed"]),
        ]
    );
    assert_eq!(
        w.kinds_from(&resumed, before as u64 + 1),
        kinds(&[
            "action_proposed",
            "policy_decided",
            "effect_started",
            "effect_completed"
        ])
    );
    assert_audited(&w, &resumed.run);
}

#[test]
fn a_crash_between_the_batches_leaves_a_consistent_journal_that_resumes() {
    // An idempotent read re-runs; a write (not idempotent) is in doubt for a person.
    for (tool, args, idempotent) in [
        ("read_file", json!({"path": "notes.txt"}), true),
        (
            "write_file",
            json!({"path": "r.md", "content": "r\n"}),
            false,
        ),
    ] {
        let w = World::new();
        let (mut state, call) = proposed(&w, tool, args);
        let pdp = Pdp(&w.engine);
        let crashing = Counting::new(&w.store, Some("effect_completed"));
        let ring = ring(&w, &pdp, &crashing);
        let from = state.next_seq;

        let err = ring
            .process_call(&mut state, &call, &w.env, &mut NoPrompter)
            .unwrap_err();
        assert!(matches!(err, KernelError::Store(_)), "{tool}: {err:?}");
        // The first batch is durable as a whole, the second not at all; the journal
        // verifies against its records and folds to a call that started and has no result.
        assert_eq!(
            w.kinds_from(&state, from),
            kinds(&["action_proposed", "policy_decided", "effect_started"]),
            "{tool}"
        );
        assert_audited(&w, &state.run);
        let mut resumed = ring.load(&state.run).unwrap();
        let started = resumed.call(&call).unwrap();
        assert!(
            started.started.is_some() && started.result.is_none(),
            "{tool}"
        );

        let step = w.process(&ring, &mut resumed, &call, &mut NoPrompter);
        if idempotent {
            assert_eq!(step, CallStep::Done, "{tool}");
            assert!(
                matches!(
                    resumed.call(&call).unwrap().result,
                    Some(CallResult::Completed { ok: true, .. })
                ),
                "{tool}: {:?}",
                resumed.call(&call).unwrap().result
            );
        } else {
            assert!(matches!(step, CallStep::Parked(_)), "{tool}: {step:?}");
            assert_eq!(
                w.kinds_from(&resumed, from + 3),
                kinds(&["effect_in_doubt", "run_parked"]),
                "{tool}"
            );
        }
        assert_eq!(ring.load(&resumed.run).unwrap(), resumed, "{tool}");
        assert_audited(&w, &resumed.run);
    }
}

#[test]
fn a_final_answer_and_the_runs_end_are_one_transaction_unless_the_run_must_stop() {
    let w = World::new();
    let pdp = Pdp(&w.engine);
    let counting = Counting::new(&w.store, None);
    let ring = ring(&w, &pdp, &counting);
    let mut state = w.start(&ring, settings());
    counting.appends.borrow_mut().clear();

    assert!(ring.may_complete(&state).unwrap());
    ring.record_final_response(&mut state, None, Some("done".into()), None, "m".into())
        .unwrap();
    assert_eq!(
        counting.transactions(),
        vec![kinds(&["model_responded", "run_ended"])]
    );
    assert_eq!(state.ended, Some(warrant_kernel::Outcome::Completed));
    assert_eq!(
        w.store.run(&state.run).unwrap().unwrap().status,
        warrant_store::RunStatus::Completed
    );
    assert_eq!(ring.load(&state.run).unwrap(), state);
    assert_audited(&w, &state.run);

    // A run that must stop instead (here: cancelled) is not completed by its final answer:
    // the answer is then recorded alone and the next step ends the run stopped.
    let cancelled = w.start(&ring, settings());
    assert!(ring.may_complete(&cancelled).unwrap());
    w.store
        .request_cancel(&cancelled.run, "alice", "enough")
        .unwrap();
    assert!(!ring.may_complete(&cancelled).unwrap());
}

#[test]
fn a_model_answer_with_calls_is_committed_with_its_first_calls_start() {
    let w = World::new();
    let pdp = Pdp(&w.engine);
    let counting = Counting::new(&w.store, None);
    let ring = ring(&w, &pdp, &counting);
    let mut state = w.start(&ring, settings());
    counting.appends.borrow_mut().clear();
    let call = |id: &str, path: &str| warrant_kernel::CallRecord {
        id: id.into(),
        tool: "read_file".into(),
        args: json!({ "path": path }),
    };

    ring.hold_model_response(
        &mut state,
        None,
        Some("reading".into()),
        vec![call("call-1", "notes.txt"), call("call-2", "notes.txt")],
        None,
        "m".into(),
    )
    .unwrap();
    // Held: applied here, not yet in the journal.
    assert_eq!(state.turns, 1);
    assert!(counting.transactions().is_empty());
    assert_eq!(w.store.events(&state.run).unwrap().len(), 1);
    assert!(ring.load(&state.run).unwrap().calls.is_empty());

    for id in ["call-1", "call-2"] {
        assert_eq!(
            w.process(&ring, &mut state, id, &mut NoPrompter),
            CallStep::Done
        );
    }
    assert_eq!(
        counting.transactions(),
        vec![
            kinds(&[
                "model_responded",
                "action_proposed",
                "policy_decided",
                "effect_started"
            ]),
            kinds(&["effect_completed"]),
            kinds(&["action_proposed", "policy_decided", "effect_started"]),
            kinds(&["effect_completed"]),
        ]
    );
    assert_eq!(ring.load(&state.run).unwrap(), state);
    assert_audited(&w, &state.run);

    // Nothing may be held over steps not yet committed.
    let w = World::new();
    let (mut state, _) = proposed(&w, "read_file", json!({"path": "notes.txt"}));
    let ring = w.ring(&pdp, SECRET);
    ring.hold_model_response(
        &mut state,
        None,
        None,
        vec![call("call-9", "a")],
        None,
        "m".into(),
    )
    .unwrap();
    let err = ring
        .hold_model_response(
            &mut state,
            None,
            None,
            vec![call("call-10", "a")],
            None,
            "m".into(),
        )
        .unwrap_err();
    assert!(matches!(err, KernelError::Inconsistent { .. }), "{err:?}");
}

#[test]
fn a_crash_before_the_first_calls_start_loses_the_held_answer_and_the_model_is_asked_again() {
    let w = World::new();
    let pdp = Pdp(&w.engine);
    let crashing = Counting::new(&w.store, Some("effect_started"));
    let ring = ring(&w, &pdp, &crashing);
    let mut state = w.start(&ring, settings());
    let journal = ring.load(&state.run).unwrap();
    ring.hold_model_response(
        &mut state,
        None,
        None,
        vec![warrant_kernel::CallRecord {
            id: "call-1".into(),
            tool: "write_file".into(),
            args: json!({"path": "r.md", "content": "r\n"}),
        }],
        None,
        "m".into(),
    )
    .unwrap();

    let err = ring
        .process_call(&mut state, "call-1", &w.env, &mut NoPrompter)
        .unwrap_err();
    assert!(matches!(err, KernelError::Store(_)), "{err:?}");
    // Neither the answer nor the call's steps reached the journal, nothing ran, and the state
    // is back to before the answer: the next step asks the model again.
    assert_eq!(state, journal);
    assert_eq!(state.turns, 0);
    assert_eq!(w.store.events(&state.run).unwrap().len(), 1);
    assert!(!w.exists("r.md"));
    assert_audited(&w, &state.run);
}
