//! Approval binding: a granted approval lets exactly the shown action run, under this
//! installation's secret, once. Each attack is checked against the same run answered properly
//! (the negative control), which must run the effect.

use pretty_assertions::assert_eq;
use serde_json::json;
use warrant_core::{Coded, Digest, PrincipalKind, RequestId};
use warrant_kernel::approval::{ProofInput, prove};
use warrant_kernel::pdp::Pdp;
use warrant_kernel::{
    Answer, Approver, CallStep, KernelError, NoPrompter, Ring, RunEvent, RunState, Scope,
};
use warrant_store::{EventStore, RequestUpdate};

use super::harness::{SECRET, World, bob, principal, req, settings};
use super::scenarios::result_label;

/// A run parked on `touch x`, which the default pack sends to a person.
fn parked(w: &World, ring: &Ring<'_>) -> (RunState, String, RequestId) {
    let mut state = w.start(ring, settings());
    let call = w.propose(
        ring,
        &mut state,
        "run_command",
        json!({"argv": ["touch", "x"]}),
    );
    let step = w.process(ring, &mut state, &call, &mut NoPrompter);
    assert_eq!(step, CallStep::Parked(req(2)));
    (state, call, req(2))
}

fn bob_via_cli() -> Approver {
    Approver {
        tenant: "acme".into(),
        actor: "bob".into(),
        via: "cli".into(),
    }
}

/// Appends an `ApprovalGranted` written by hand, as a forger with store access would.
fn forge(
    ring: &Ring<'_>,
    state: &mut RunState,
    request: &RequestId,
    digest: Digest,
    proof: String,
) {
    ring.append(
        state,
        vec![RunEvent::ApprovalGranted {
            request_id: request.clone(),
            approver: bob_via_cli(),
            scope: Scope::Once,
            digest,
            proof,
        }],
        None,
        vec![RequestUpdate::Answered {
            id: request.clone(),
        }],
    )
    .unwrap();
}

fn last_event(w: &World, state: &RunState) -> RunEvent {
    let events = w.store.events(&state.run).unwrap();
    RunEvent::from_stored(events.last().unwrap()).unwrap()
}

#[test]
fn only_a_proper_approval_of_the_shown_action_lets_it_run() {
    // (a) Negative control: answered through the ring, the effect runs.
    let w = World::new();
    let pdp = Pdp(&w.engine);
    let ring = w.ring(&pdp, SECRET);
    let (mut state, call, request) = parked(&w, &ring);
    ring.answer(
        &mut state,
        &request,
        &bob(),
        "cli",
        Answer::Approve(Scope::Once),
    )
    .unwrap();
    ring.resume(&mut state, &bob()).unwrap();
    let from = state.next_seq;
    assert_eq!(
        w.process(&ring, &mut state, &call, &mut NoPrompter),
        CallStep::Done
    );
    assert_eq!(
        (
            w.kinds_from(&state, from),
            result_label(&state, &call),
            w.exists("x")
        ),
        (
            vec!["effect_started".to_owned(), "effect_completed".to_owned()],
            "completed ok=true".to_owned(),
            true
        )
    );

    // (b) The same approval with an altered proof.
    let w = World::new();
    let pdp = Pdp(&w.engine);
    let ring = w.ring(&pdp, SECRET);
    let (mut state, call, request) = parked(&w, &ring);
    let digest = state.requests[&request].digest.clone();
    forge(&ring, &mut state, &request, digest, "00".repeat(32));
    let from = state.next_seq;
    assert_eq!(
        w.process(&ring, &mut state, &call, &mut NoPrompter),
        CallStep::Done
    );
    assert_eq!(w.kinds_from(&state, from), vec!["effect_denied".to_owned()]);
    assert!(!w.exists("x"), "a forged approval ran the command");
    insta::assert_json_snapshot!("forged_proof", last_event(&w, &state));

    // (c) A proof made under another installation's secret.
    let w = World::new();
    let pdp = Pdp(&w.engine);
    let ring = w.ring(&pdp, SECRET);
    let (mut state, call, request) = parked(&w, &ring);
    ring.answer(
        &mut state,
        &request,
        &bob(),
        "cli",
        Answer::Approve(Scope::Once),
    )
    .unwrap();
    let other = w.ring(&pdp, b"the secret of another installation");
    let from = state.next_seq;
    assert_eq!(
        w.process(&other, &mut state, &call, &mut NoPrompter),
        CallStep::Done
    );
    assert_eq!(w.kinds_from(&state, from), vec!["effect_denied".to_owned()]);
    assert!(
        !w.exists("x"),
        "a proof from another installation ran the command"
    );
    insta::assert_json_snapshot!("other_secret", last_event(&w, &state));

    // (d) A genuine proof, but for a different action than the one about to run.
    let w = World::new();
    let pdp = Pdp(&w.engine);
    let ring = w.ring(&pdp, SECRET);
    let (mut state, call, request) = parked(&w, &ring);
    let shown_something_else = Digest::of_bytes(b"touch y");
    let proof = prove(
        SECRET,
        &ProofInput {
            run: &state.run,
            request: &request,
            park_seq: state.requests[&request].park_seq,
            digest: &shown_something_else,
            approver: &bob_via_cli(),
            scope: Scope::Once,
        },
    );
    forge(&ring, &mut state, &request, shown_something_else, proof);
    let from = state.next_seq;
    assert_eq!(
        w.process(&ring, &mut state, &call, &mut NoPrompter),
        CallStep::Done
    );
    assert_eq!(w.kinds_from(&state, from), vec!["effect_denied".to_owned()]);
    assert!(
        !w.exists("x"),
        "an approval of another action ran the command"
    );
    insta::assert_json_snapshot!("action_changed", last_event(&w, &state));
}

#[test]
fn agents_never_approve_and_a_request_is_answered_once() {
    let w = World::new();
    let pdp = Pdp(&w.engine);
    let ring = w.ring(&pdp, SECRET);
    let (mut state, _call, request) = parked(&w, &ring);
    let before = state.clone();

    // (e) An agent's answer is refused and leaves no trace.
    let bot = principal("helper-bot", PrincipalKind::Agent);
    let agent = ring
        .answer(
            &mut state,
            &request,
            &bot,
            "cli",
            Answer::Approve(Scope::Once),
        )
        .unwrap_err();
    assert!(
        matches!(&agent, KernelError::AgentCannotApprove { actor } if actor == "helper-bot"),
        "{agent:?}"
    );
    assert_eq!(state, before);
    assert_eq!(
        RunState::fold(&w.store.events(&state.run).unwrap()).unwrap(),
        before
    );

    // (f) A second answer to the same request is refused.
    ring.answer(
        &mut state,
        &request,
        &bob(),
        "cli",
        Answer::Approve(Scope::Once),
    )
    .unwrap();
    let answered = state.clone();
    let twice = ring
        .answer(
            &mut state,
            &request,
            &bob(),
            "cli",
            Answer::Deny {
                reason: "changed my mind".into(),
            },
        )
        .unwrap_err();
    assert!(
        matches!(&twice, KernelError::AlreadyAnswered { id, answer }
            if id == request.as_str() && answer == "approved once by bob"),
        "{twice:?}"
    );
    assert_eq!(state, answered);

    insta::assert_snapshot!(
        "answer_refusals",
        [&agent, &twice]
            .iter()
            .map(|e| format!("{}: {e}", e.code()))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
