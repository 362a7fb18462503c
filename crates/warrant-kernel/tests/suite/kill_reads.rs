//! The kill switch read before an effect: a step's read that found no switch moments ago
//! stands for it, but never across a person's answer. A switch set while the person was asked
//! stops the effect; the negative control keeps the step's read across the answer (the
//! kernel's `testing` switch) and the effect runs under the switch.

use pretty_assertions::assert_eq;
use serde_json::json;
use warrant_core::Principal;
use warrant_kernel::pdp::Pdp;
use warrant_kernel::{Answer, CallStep, PromptView, Prompter, Scope};
use warrant_store::{EnvelopeStore, KillScope};

use super::harness::{SECRET, World, bob, settings};

/// A person who approves, while someone else (another process, an operator) sets the kill
/// switch for every run.
struct ApprovedAsTheSwitchIsSet<'w> {
    world: &'w World,
}

impl Prompter for ApprovedAsTheSwitchIsSet<'_> {
    fn ask(&mut self, _view: &PromptView<'_>) -> Option<(Answer, Principal)> {
        self.world
            .store
            .set_kill(&KillScope::All, "operator", "stop everything")
            .unwrap();
        Some((Answer::Approve(Scope::Once), bob()))
    }
}

/// What happened to `doomed.txt` and how the call's events ended, after a step read the
/// switch clear and the call asked a person who answered as the switch was set.
fn asked_while_the_switch_is_set(keep_read_across_asks: bool) -> (bool, Vec<String>) {
    let w = World::new();
    std::fs::write(format!("{}/doomed.txt", w.ws()), "x").unwrap();
    let pdp = Pdp(&w.engine);
    let ring = w.ring(&pdp, SECRET);
    if keep_read_across_asks {
        ring.keep_clear_read_across_asks();
    }
    let mut state = w.start(&ring, settings());
    let call = w.propose(
        &ring,
        &mut state,
        "delete_path",
        json!({"path": "doomed.txt"}),
    );
    let from = state.next_seq;
    // The agent loop's step boundary: it reads the switch (none is set yet).
    let signals = ring.stop_signals(&state).unwrap();
    assert!(signals.kill.is_none());
    let mut person = ApprovedAsTheSwitchIsSet { world: &w };
    assert_eq!(
        w.process(&ring, &mut state, &call, &mut person),
        CallStep::Done
    );
    (w.exists("doomed.txt"), w.kinds_from(&state, from))
}

#[test]
fn a_switch_set_while_a_person_was_asked_stops_the_effect() {
    let (kept, kinds) = asked_while_the_switch_is_set(false);
    assert!(kept, "the file was deleted under the kill switch");
    assert!(kinds.iter().any(|k| k == "halted"), "{kinds:?}");
    assert!(!kinds.iter().any(|k| k == "effect_started"), "{kinds:?}");

    // Negative control: the step's read kept across the answer, the effect runs.
    let (kept, kinds) = asked_while_the_switch_is_set(true);
    assert!(!kept, "the control did not run the effect: {kinds:?}");
    assert!(kinds.iter().any(|k| k == "effect_completed"), "{kinds:?}");
}

/// Without a step's read just before (a resumed call, a caller that did not read), the switch
/// is read right before the effect, as always.
#[test]
fn without_a_step_s_read_the_switch_is_read_before_the_effect() {
    let w = World::new();
    std::fs::write(format!("{}/kept.txt", w.ws()), "x").unwrap();
    let pdp = Pdp(&w.engine);
    let ring = w.ring(&pdp, SECRET);
    let mut state = w.start(&ring, settings());
    let call = w.propose(&ring, &mut state, "read_file", json!({"path": "kept.txt"}));
    let from = state.next_seq;
    w.store
        .set_kill(&KillScope::All, "operator", "stop everything")
        .unwrap();
    w.process(&ring, &mut state, &call, &mut warrant_kernel::NoPrompter);
    let kinds = w.kinds_from(&state, from);
    assert!(kinds.iter().any(|k| k == "halted"), "{kinds:?}");
    assert!(!kinds.iter().any(|k| k == "effect_started"), "{kinds:?}");
}
