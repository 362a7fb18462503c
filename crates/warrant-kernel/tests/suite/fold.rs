//! State is the fold of the log: whatever the ring did in memory, folding what it stored gives
//! the same state, every time. Logs this build cannot read are refused, not guessed at.

use pretty_assertions::assert_eq;
use proptest::prelude::*;
use warrant_core::Coded;
use warrant_kernel::pdp::Pdp;
use warrant_kernel::{CallStep, KernelError, NoPrompter, RunState};
use warrant_store::EventStore;

use super::harness::{SECRET, Script, World, bob, settings};
use super::scenarios::{Kind, Reply};

/// One model turn: a call, the answer it gets, and whether that answer comes later through
/// `warrant approve` (park, answer, resume) instead of at the terminal.
fn step() -> impl Strategy<Value = (Kind, Reply, bool)> {
    (
        prop::sample::select(Kind::ALL.to_vec()),
        prop::sample::select(Reply::ALL.to_vec()),
        any::<bool>(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn folding_the_stored_log_gives_the_state_the_ring_advanced(
        steps in prop::collection::vec(step(), 1..6)
    ) {
        let w = World::new();
        let pdp = Pdp(&w.engine);
        let ring = w.ring(&pdp, SECRET);
        let mut state = w.start(&ring, settings());
        for (kind, reply, later) in steps {
            let (tool, args) = kind.call();
            let call = w.propose(&ring, &mut state, tool, args);
            match (later, reply.answer()) {
                (true, Some(answer)) => {
                    if let CallStep::Parked(request) =
                        w.process(&ring, &mut state, &call, &mut NoPrompter)
                    {
                        ring.answer(&mut state, &request, &bob(), &warrant_kernel::Via::Terminal, answer).unwrap();
                        ring.resume(&mut state, &bob()).unwrap();
                        assert_eq!(w.process(&ring, &mut state, &call, &mut NoPrompter), CallStep::Done);
                    }
                }
                (false, _) | (true, None) => {
                    w.process(&ring, &mut state, &call, &mut Script::new(reply.answer()));
                }
            }
        }
        let events = w.store.events(&state.run).unwrap();
        let folded = RunState::fold(&events).unwrap();
        assert_eq!(folded, state);
        assert_eq!(RunState::fold(&events).unwrap(), folded, "folding is deterministic");
        assert_eq!(ring.load(&state.run).unwrap(), folded);
    }
}

#[test]
fn logs_this_build_cannot_read_are_refused() {
    let w = World::new();
    let pdp = Pdp(&w.engine);
    let ring = w.ring(&pdp, SECRET);
    let mut state = w.start(&ring, settings());
    let (tool, args) = Kind::ReadInside.call();
    let call = w.propose(&ring, &mut state, tool, args);
    w.process(&ring, &mut state, &call, &mut NoPrompter);
    let events = w.store.events(&state.run).unwrap();

    let mut newer = events.clone();
    newer[2].version = 2;
    let newer = RunState::fold(&newer).unwrap_err();
    assert!(
        matches!(
            &newer,
            KernelError::NewerEvent {
                seq: 3,
                version: 2,
                supported: 1,
                ..
            }
        ),
        "{newer:?}"
    );

    let mut unknown = events.clone();
    unknown[1].kind = "model_pondered".into();
    let unknown = RunState::fold(&unknown).unwrap_err();
    assert!(
        matches!(&unknown, KernelError::BadEvent { seq: 2, .. }),
        "{unknown:?}"
    );

    let headless = RunState::fold(&events[1..]).unwrap_err();
    assert!(
        matches!(&headless, KernelError::Inconsistent { .. }),
        "{headless:?}"
    );

    insta::assert_snapshot!(
        "unreadable_logs",
        [&newer, &unknown, &headless]
            .iter()
            .map(|e| format!("{}: {e}", e.code()))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
