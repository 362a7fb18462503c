//! Approval records: a granted approval lets exactly the shown action run, under this
//! installation's secret, in this run, at this park, before it expires, once. Every attack is
//! refused with a named reason (an `approval_rejected` record) and the person is asked again;
//! each attack is also replayed with the checks switched off (the negative control), where it
//! must run the effect.

use pretty_assertions::assert_eq;
use serde_json::json;
use warrant_core::{Coded, Digest, FixedClock, PrincipalKind, RequestId, Timestamp};
use warrant_kernel::approval::{BoundInput, ProofInput, prove_bound, set_checks_for_this_thread};
use warrant_kernel::pdp::Pdp;
use warrant_kernel::{
    Answer, Approver, Binding, CallStep, KernelError, NoPrompter, Ring, RingParts, RunEvent,
    RunState, Scope,
};
use warrant_store::{AuditOutbox, EventStore, RequestUpdate};

use super::harness::{SECRET, World, bob, principal, req, settings};

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
    let CallStep::Parked(request) = step else {
        panic!("not parked: {step:?}")
    };
    (state, call, request)
}

fn bob_via_cli() -> Approver {
    Approver {
        tenant: "acme".into(),
        actor: "bob".into(),
        via: "cli".into(),
    }
}

/// The `approval_granted` event of `request`, as stored.
fn grant_of(w: &World, state: &RunState, request: &RequestId) -> RunEvent {
    w.store
        .events(&state.run)
        .unwrap()
        .iter()
        .map(|e| RunEvent::from_stored(e).unwrap())
        .find(
            |e| matches!(e, RunEvent::ApprovalGranted { request_id, .. } if request_id == request),
        )
        .unwrap()
}

/// Appends an `ApprovalGranted` for `request` written by hand, as a forger with write access
/// to the store would: the other fields copied from `like`.
fn plant(ring: &Ring<'_>, state: &mut RunState, request: &RequestId, like: RunEvent) {
    let RunEvent::ApprovalGranted {
        approver,
        scope,
        digest,
        proof,
        binding,
        signature,
        ..
    } = like
    else {
        panic!("not a grant")
    };
    ring.append_for_tests(
        state,
        vec![RunEvent::ApprovalGranted {
            request_id: request.clone(),
            approver,
            scope,
            digest,
            proof,
            binding,
            signature,
        }],
        None,
        vec![RequestUpdate::Answered {
            id: request.clone(),
        }],
    )
    .unwrap();
}

fn approve(ring: &Ring<'_>, state: &mut RunState, request: &RequestId) {
    ring.answer(
        state,
        request,
        &bob(),
        &warrant_kernel::Via::Cli,
        Answer::Approve(Scope::Once),
    )
    .unwrap();
    ring.resume(state, &bob()).unwrap();
}

/// What happened when the call was processed after the attack: the kinds appended, whether
/// `x` was made, and the rejection reason recorded (if any).
#[derive(Debug, PartialEq)]
struct Outcome {
    kinds: Vec<String>,
    ran: bool,
    rejected: Option<String>,
}

fn outcome(w: &World, state: &RunState, from: u64, file: &str) -> Outcome {
    let events: Vec<RunEvent> = w
        .store
        .events(&state.run)
        .unwrap()
        .iter()
        .filter(|e| e.seq >= from)
        .map(|e| RunEvent::from_stored(e).unwrap())
        .collect();
    Outcome {
        kinds: events.iter().map(|e| e.kind().to_owned()).collect(),
        ran: w.exists(file),
        rejected: events.iter().find_map(|e| {
            if let RunEvent::ApprovalRejected { reason, .. } = e {
                Some(reason.as_str().to_owned())
            } else {
                None
            }
        }),
    }
}

fn refused(reason: &str) -> Outcome {
    Outcome {
        kinds: vec![
            "approval_rejected".into(),
            "approval_requested".into(),
            "run_parked".into(),
        ],
        ran: false,
        rejected: Some(reason.into()),
    }
}

fn ran() -> Outcome {
    Outcome {
        kinds: vec!["effect_started".into(), "effect_completed".into()],
        ran: true,
        rejected: None,
    }
}

/// Digests over what was shown depend on the tempdir's path; the snapshot keeps the words.
fn redact_digests(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("sha256:") {
        out.push_str(&rest[..i + 7]);
        out.push('…');
        rest = rest[i + 7..].trim_start_matches(|c: char| c.is_ascii_hexdigit());
    }
    out.push_str(rest);
    out
}

/// Sets up one attack in a fresh world and returns the world, the run and the call to process.
type Attack = fn(&World, &Ring<'_>) -> (RunState, String);

fn forged(w: &World, ring: &Ring<'_>) -> (RunState, String) {
    let (mut state, call, request) = parked(w, ring);
    let req = state.requests[&request].clone();
    let binding = Binding {
        run: state.run.clone(),
        request: request.clone(),
        park: req.park_seq,
        expires_at: Timestamp::from_millis(4_102_444_800_000).unwrap(),
    };
    let like = RunEvent::ApprovalGranted {
        request_id: request.clone(),
        approver: bob_via_cli(),
        scope: Scope::Once,
        digest: req.digest,
        proof: "00".repeat(32),
        binding: Some(binding),
        signature: None,
    };
    plant(ring, &mut state, &request, like);
    ring.resume(&mut state, &bob()).unwrap();
    (state, call)
}

fn other_installation(w: &World, ring: &Ring<'_>) -> (RunState, String) {
    let (mut state, call, request) = parked(w, ring);
    let pdp = Pdp(&w.engine);
    let other = w.ring(&pdp, b"the secret of another installation");
    approve(&other, &mut state, &request);
    (state, call)
}

fn altered_action(w: &World, ring: &Ring<'_>) -> (RunState, String) {
    let (mut state, call, request) = parked(w, ring);
    let req = state.requests[&request].clone();
    // A genuine proof, but over a different action than the one shown and about to run.
    let shown_something_else = Digest::of_bytes(b"touch y");
    let binding = Binding {
        run: state.run.clone(),
        request: request.clone(),
        park: req.park_seq,
        expires_at: Timestamp::from_millis(4_102_444_800_000).unwrap(),
    };
    let proof = prove_bound(
        SECRET,
        &BoundInput {
            base: ProofInput {
                run: &binding.run,
                request: &binding.request,
                park_seq: binding.park,
                digest: &shown_something_else,
                approver: &bob_via_cli(),
                scope: Scope::Once,
            },
            expires_at: binding.expires_at,
        },
    );
    let like = RunEvent::ApprovalGranted {
        request_id: request.clone(),
        approver: bob_via_cli(),
        scope: Scope::Once,
        digest: shown_something_else,
        proof,
        binding: Some(binding),
        signature: None,
    };
    plant(ring, &mut state, &request, like);
    ring.resume(&mut state, &bob()).unwrap();
    (state, call)
}

fn cross_run(w: &World, ring: &Ring<'_>) -> (RunState, String) {
    // A proper approval in one run, planted into another run parked on the same action.
    let (mut donor, _, donor_req) = parked(w, ring);
    ring.answer(
        &mut donor,
        &donor_req,
        &bob(),
        &warrant_kernel::Via::Cli,
        Answer::Approve(Scope::Once),
    )
    .unwrap();
    let (mut state, call, request) = parked(w, ring);
    plant(ring, &mut state, &request, grant_of(w, &donor, &donor_req));
    ring.resume(&mut state, &bob()).unwrap();
    (state, call)
}

/// Two calls of the same action parked in one run; returns the run, both calls and requests.
fn two_parks(w: &World, ring: &Ring<'_>) -> (RunState, [(String, RequestId); 2]) {
    let mut state = w.start(ring, settings());
    let cmd = json!({"argv": ["touch", "x"]});
    let first = w.propose(ring, &mut state, "run_command", cmd.clone());
    let CallStep::Parked(a) = w.process(ring, &mut state, &first, &mut NoPrompter) else {
        panic!("first call not parked")
    };
    let second = w.propose(ring, &mut state, "run_command", cmd);
    let CallStep::Parked(b) = w.process(ring, &mut state, &second, &mut NoPrompter) else {
        panic!("second call not parked")
    };
    (state, [(first, a), (second, b)])
}

fn cross_park(w: &World, ring: &Ring<'_>) -> (RunState, String) {
    // The approval of the first park, planted onto the second (the first is never used).
    let (mut state, [(_, a), (second, b)]) = two_parks(w, ring);
    ring.answer(
        &mut state,
        &a,
        &bob(),
        &warrant_kernel::Via::Cli,
        Answer::Approve(Scope::Once),
    )
    .unwrap();
    let grant = grant_of(w, &state, &a);
    plant(ring, &mut state, &b, grant);
    ring.resume(&mut state, &bob()).unwrap();
    (state, second)
}

fn replayed(w: &World, ring: &Ring<'_>) -> (RunState, String) {
    // A `once` approval, used, then replayed onto the next request for the same action.
    let (mut state, [(first, a), (second, b)]) = two_parks(w, ring);
    approve(ring, &mut state, &a);
    assert_eq!(
        w.process(ring, &mut state, &first, &mut NoPrompter),
        CallStep::Done
    );
    std::fs::remove_file(format!("{}/x", w.ws())).unwrap();
    let grant = grant_of(w, &state, &a);
    plant(ring, &mut state, &b, grant);
    (state, second)
}

fn expired(w: &World, ring: &Ring<'_>) -> (RunState, String) {
    let (mut state, call, request) = parked(w, ring);
    // Answered by a ring whose clock reads 2001: a one-hour approval long expired now.
    let pdp = Pdp(&w.engine);
    let then = FixedClock(Timestamp::from_millis(978_307_200_000).unwrap());
    let past = Ring::new(RingParts {
        clock: &then,
        ..w.ring(&pdp, SECRET).parts()
    });
    approve(&past, &mut state, &request);
    (state, call)
}

#[test]
fn every_forged_or_misbound_approval_is_refused_by_name_and_asked_again() {
    let attacks: Vec<(&str, Attack, &str)> = vec![
        ("forged proof", forged, "forged"),
        (
            "another installation's secret",
            other_installation,
            "forged",
        ),
        ("altered action", altered_action, "action_changed"),
        ("cross-run", cross_run, "other_run"),
        ("cross-park", cross_park, "other_park"),
        ("replayed", replayed, "already_used"),
        ("expired", expired, "expired"),
    ];
    let mut rows = Vec::new();
    for (name, attack, reason) in &attacks {
        // With the checks: refused, recorded, asked again, nothing ran.
        let w = World::new();
        let pdp = Pdp(&w.engine);
        let ring = w.ring(&pdp, SECRET);
        let (mut state, call) = attack(&w, &ring);
        let from = state.next_seq;
        let step = w.process(&ring, &mut state, &call, &mut NoPrompter);
        assert!(matches!(step, CallStep::Parked(_)), "{name}: {step:?}");
        assert_eq!(outcome(&w, &state, from, "x"), refused(reason), "{name}");
        let RunEvent::ApprovalRejected { detail, .. } = w
            .store
            .events(&state.run)
            .unwrap()
            .iter()
            .map(|e| RunEvent::from_stored(e).unwrap())
            .find(|e| e.kind() == "approval_rejected")
            .unwrap()
        else {
            unreachable!()
        };
        rows.push(format!("{name}: {reason}: {}", redact_digests(&detail)));
        // The audit trail holds the refusal with its reason.
        let audit = w.store.audit_records(0, 10_000).unwrap();
        assert!(
            audit
                .iter()
                .any(|r| r.line.contains(&format!("approval rejected: {reason}"))),
            "{name}: no audit record of the rejection"
        );

        // Negative control: the same attack with the checks switched off runs the effect.
        let w = World::new();
        let pdp = Pdp(&w.engine);
        let ring = w.ring(&pdp, SECRET);
        let (mut state, call) = attack(&w, &ring);
        let from = state.next_seq;
        set_checks_for_this_thread(false);
        let step = w.process(&ring, &mut state, &call, &mut NoPrompter);
        set_checks_for_this_thread(true);
        assert_eq!(step, CallStep::Done, "{name} (checks off)");
        assert_eq!(outcome(&w, &state, from, "x"), ran(), "{name} (checks off)");
    }
    insta::assert_snapshot!("rejections", rows.join("\n"));
}

#[test]
fn a_proper_approval_runs_once_and_a_rejected_one_is_asked_again_with_what_runs_now() {
    let w = World::new();
    let pdp = Pdp(&w.engine);
    let ring = w.ring(&pdp, SECRET);
    let (mut state, call, request) = parked(&w, &ring);
    approve(&ring, &mut state, &request);
    let from = state.next_seq;
    assert_eq!(
        w.process(&ring, &mut state, &call, &mut NoPrompter),
        CallStep::Done
    );
    assert_eq!(outcome(&w, &state, from, "x"), ran());
    let RunEvent::ApprovalGranted { binding, .. } = grant_of(&w, &state, &request) else {
        unreachable!()
    };
    let binding = binding.unwrap();
    assert_eq!(
        (binding.run, binding.request, binding.park),
        (
            state.run.clone(),
            request.clone(),
            state.requests[&request].park_seq
        )
    );

    // After a forged grant is rejected, the fresh request can be answered properly.
    let w = World::new();
    let ring = w.ring(&pdp, SECRET);
    let (mut state, call) = forged(&w, &ring);
    let CallStep::Parked(again) = w.process(&ring, &mut state, &call, &mut NoPrompter) else {
        panic!("not asked again")
    };
    assert_eq!(again, req(3));
    approve(&ring, &mut state, &again);
    let from = state.next_seq;
    assert_eq!(
        w.process(&ring, &mut state, &call, &mut NoPrompter),
        CallStep::Done
    );
    assert_eq!(outcome(&w, &state, from, "x"), ran());
}

#[test]
fn a_changed_file_under_an_approved_diff_is_asked_again() {
    let w = World::new();
    let pdp = Pdp(&w.engine);
    let ring = w.ring(&pdp, SECRET);
    let mut state = w.start(&ring, settings());
    // The default pack allows workspace writes; make them ask so there is a diff to approve.
    let rules = warrant_kernel::ApprovalRules {
        risk: warrant_core::risk::RiskRules::resolve(&[(
            "test",
            &std::collections::BTreeMap::from([(
                "change".to_owned(),
                warrant_core::risk::RiskRuleConfig {
                    needs: Some(warrant_core::risk::Needs::Person),
                    ..Default::default()
                },
            )]),
        )])
        .unwrap(),
        ..Default::default()
    };
    let governed = warrant_kernel::Governed { inner: &pdp, rules };
    let ring = Ring::new(RingParts {
        pdp: &governed,
        ..ring.parts()
    });
    let call = w.propose(
        &ring,
        &mut state,
        "write_file",
        json!({"path": "notes.txt", "content": "hello\nworld\n"}),
    );
    let CallStep::Parked(first) = w.process(&ring, &mut state, &call, &mut NoPrompter) else {
        panic!("not parked")
    };
    assert!(
        state.requests[&first].presentation.body.contains("+world"),
        "{}",
        state.requests[&first].presentation.body
    );
    approve(&ring, &mut state, &first);
    // Someone edits the file after the diff was shown and approved.
    std::fs::write(format!("{}/notes.txt", w.ws()), "hello\nimportant line\n").unwrap();
    let from = state.next_seq;
    let CallStep::Parked(second) = w.process(&ring, &mut state, &call, &mut NoPrompter) else {
        panic!("the changed file was written under the old approval")
    };
    assert_eq!(
        outcome(&w, &state, from, "notes.txt").rejected.as_deref(),
        Some("action_changed")
    );
    assert_eq!(
        std::fs::read_to_string(format!("{}/notes.txt", w.ws())).unwrap(),
        "hello\nimportant line\n"
    );
    // The new request shows the diff against what is on disk now.
    assert!(
        state.requests[&second]
            .presentation
            .body
            .contains("-important line"),
        "{}",
        state.requests[&second].presentation.body
    );
    approve(&ring, &mut state, &second);
    assert_eq!(
        w.process(&ring, &mut state, &call, &mut NoPrompter),
        CallStep::Done
    );
    assert_eq!(
        std::fs::read_to_string(format!("{}/notes.txt", w.ws())).unwrap(),
        "hello\nworld\n"
    );
}

#[test]
fn agents_never_approve_and_a_request_is_answered_once() {
    let w = World::new();
    let pdp = Pdp(&w.engine);
    let ring = w.ring(&pdp, SECRET);
    let (mut state, _call, request) = parked(&w, &ring);
    let before = state.requests[&request].clone();

    // (e) An agent's answer is refused and recorded; the request stays open.
    let bot = principal("helper-bot", PrincipalKind::Agent);
    let from = state.next_seq;
    let agent = ring
        .answer(
            &mut state,
            &request,
            &bot,
            &warrant_kernel::Via::Cli,
            Answer::Approve(Scope::Once),
        )
        .unwrap_err();
    assert!(
        matches!(&agent, KernelError::AgentCannotApprove { actor } if actor == "helper-bot"),
        "{agent:?}"
    );
    assert_eq!(state.requests[&request], before);
    assert_eq!(
        outcome(&w, &state, from, "x").kinds,
        vec!["approval_rejected".to_owned()]
    );

    // (f) A second answer to the same request is refused.
    ring.answer(
        &mut state,
        &request,
        &bob(),
        &warrant_kernel::Via::Cli,
        Answer::Approve(Scope::Once),
    )
    .unwrap();
    let answered = state.clone();
    let twice = ring
        .answer(
            &mut state,
            &request,
            &bob(),
            &warrant_kernel::Via::Cli,
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
