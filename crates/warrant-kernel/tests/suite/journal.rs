//! The journal bound to the signed chain, at the ring: a parked recursive delete whose
//! `policy_decided` row is edited from ask to allow in the store is refused when the run is
//! folded again (typed, recorded as `journal_rejected`, audited, the run stopped), and nothing
//! runs. With the check switched off (the negative control) the same edit deletes the tree.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use warrant_core::Coded as _;
use warrant_kernel::journal::set_checks_for_this_thread;
use warrant_kernel::pdp::Pdp;
use warrant_kernel::{CallStep, KernelError, NoPrompter, RunEvent};
use warrant_store::{AuditQuery, EventStore, RunStatus};

use super::harness::{SECRET, World, bob, settings};

/// A run parked on `rm -rf build`; returns the run and the seq of its `policy_decided`.
fn parked(w: &World) -> (warrant_kernel::RunState, String, u64) {
    let pdp = Pdp(&w.engine);
    let ring = w.ring(&pdp, SECRET);
    let mut state = w.start(&ring, settings());
    let call = w.propose(
        &ring,
        &mut state,
        "run_command",
        json!({"argv": ["rm", "-rf", "build"]}),
    );
    let step = w.process(&ring, &mut state, &call, &mut NoPrompter);
    assert!(matches!(step, CallStep::Parked(_)), "{step:?}");
    let decided = w
        .store
        .events(&state.run)
        .unwrap()
        .into_iter()
        .find(|e| e.kind == "policy_decided")
        .unwrap();
    assert_eq!(decided.payload["verdict"], json!("ask"));
    (state, call, decided.seq)
}

/// What an attacker with write access to the store does: the verdict becomes allow.
fn tamper(w: &World, run: &str, seq: u64) {
    let db = rusqlite::Connection::open(w.dir.path().join("store.db")).unwrap();
    let changed = db
        .execute(
            "UPDATE events SET payload = replace(payload, '\"verdict\":\"ask\"', '\"verdict\":\"allow\"') WHERE run_id = ?1 AND seq = ?2",
            rusqlite::params![run, seq as i64],
        )
        .unwrap();
    assert_eq!(changed, 1);
}

#[test]
fn an_edited_verdict_is_refused_recorded_and_nothing_runs() {
    let w = World::new();
    let (state, call, seq) = parked(&w);
    tamper(&w, state.run.as_str(), seq);
    let pdp = Pdp(&w.engine);
    let ring = w.ring(&pdp, SECRET);
    let before = w.store.events(&state.run).unwrap().len() as u64;

    let err = ring.load(&state.run).unwrap_err();
    let KernelError::Journal { error, recorded } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(
        (err.code(), error.seq(), error.what(), *recorded),
        ("W-AUDIT-027", seq, "edited", Some(before + 1))
    );
    insta::assert_snapshot!(err.to_string());

    // The refusal is the run's last event, with its own signed record, and the run is stopped
    // in the index, so no worker leases it again.
    let events = w.store.events(&state.run).unwrap();
    let last = RunEvent::from_stored(events.last().unwrap()).unwrap();
    assert_eq!(
        last,
        RunEvent::JournalRejected {
            code: "W-AUDIT-027".into(),
            seq,
            problem: "edited".into(),
            detail: error.detail().to_owned(),
        }
    );
    assert_eq!(
        w.store.run(&state.run).unwrap().unwrap().status,
        RunStatus::Stopped
    );
    let audited = w
        .store
        .query_audit(&AuditQuery {
            run: Some(state.run.to_string()),
            decision: Some("deny".into()),
            ..AuditQuery::default()
        })
        .unwrap();
    let data: Vec<Value> = audited
        .iter()
        .map(|r| serde_json::from_str::<Value>(&r.line).unwrap()["data"].clone())
        .map(|d| json!({"event": d["event"], "reasons": d["reasons"], "outcome": d["outcome"]}))
        .collect();
    assert_eq!(
        data,
        vec![json!({
            "event": "journal_rejected",
            "reasons": ["W-AUDIT-027", error.detail()],
            "outcome": format!("refused to act on the journal: edited at event {seq}"),
        })]
    );
    // Asked again, it is refused again (and recorded again): the edit is still there.
    let again = ring.load(&state.run).unwrap_err();
    assert_eq!(again.code(), "W-AUDIT-027");
    assert!(w.exists("build/obj/a.o"));
    let _ = call;
}

#[test]
fn negative_control_without_the_check_the_edited_verdict_deletes_the_tree() {
    let w = World::new();
    let (state, call, seq) = parked(&w);
    tamper(&w, state.run.as_str(), seq);
    let pdp = Pdp(&w.engine);
    let ring = w.ring(&pdp, SECRET);
    set_checks_for_this_thread(false);
    let mut state = ring.load(&state.run).unwrap();
    ring.resume(&mut state, &bob()).unwrap();
    let step = w.process(&ring, &mut state, &call, &mut NoPrompter);
    set_checks_for_this_thread(true);
    assert_eq!(
        (step, w.exists("build/obj/a.o"), w.exists("build")),
        (CallStep::Done, false, false)
    );
}

#[test]
fn an_untouched_journal_folds_as_before() {
    let w = World::new();
    let (state, _, _) = parked(&w);
    let pdp = Pdp(&w.engine);
    let ring = w.ring(&pdp, SECRET);
    let loaded = ring.load(&state.run).unwrap();
    assert_eq!(
        (loaded.next_seq, loaded.parked.is_some()),
        (state.next_seq, true)
    );
}
