//! The kill switch before an effect: a step's read that found no switch moments ago stands for
//! the read before the effect, but never across a person's answer; a call the loop did not read
//! for checks the switch and cancellations in its own commits. A switch set while the person was
//! asked stops the effect; the negative controls keep the step's read across the answer, or
//! leave the check out of the commits (the kernel's `testing` switches), and the effect runs
//! under the switch.

use pretty_assertions::assert_eq;
use serde_json::json;
use warrant_core::Principal;
use warrant_kernel::pdp::Pdp;
use warrant_kernel::{Answer, CallStep, PromptView, Prompter, Scope};
use warrant_store::{EnvelopeStore, EventStore as _, KillScope};

use super::harness::{SECRET, World, bob, settings};

/// A world whose workspace holds `file`.
fn world_with(file: &str) -> World {
    let w = World::new();
    std::fs::write(format!("{}/{file}", w.ws()), "x").unwrap();
    w
}

/// A run started on `ring` whose model asked for `tool` on `path`: the run, the call, and the
/// first sequence number after the proposal.
fn asked(
    w: &World,
    ring: &warrant_kernel::Ring<'_>,
    tool: &str,
    path: &str,
) -> (warrant_kernel::RunState, String, u64) {
    let mut state = w.start(ring, settings());
    let call = w.propose(ring, &mut state, tool, json!({"path": path}));
    let from = state.next_seq;
    (state, call, from)
}

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
    let w = world_with("doomed.txt");
    let pdp = Pdp(&w.engine);
    let ring = w.ring(&pdp, SECRET);
    if keep_read_across_asks {
        ring.keep_clear_read_across_asks();
    }
    let (mut state, call, from) = asked(&w, &ring, "delete_path", "doomed.txt");
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

/// Without a step's read just before (the agent loop reads none for a call that has not
/// started; a caller that did not read), the switch is checked in the commit the effect starts
/// behind. The negative control leaves the check out of the commits (the kernel's `testing`
/// switch): nothing reads the switch, and the effect runs under it.
#[test]
fn without_a_step_s_read_the_effect_s_commit_checks_the_switch() {
    let under_switch = |guarded: bool| {
        let w = world_with("kept.txt");
        let pdp = Pdp(&w.engine);
        let ring = w.ring(&pdp, SECRET);
        if !guarded {
            ring.leave_stops_out_of_commits();
        }
        let (mut state, call, from) = asked(&w, &ring, "read_file", "kept.txt");
        w.store
            .set_kill(&KillScope::All, "operator", "stop everything")
            .unwrap();
        w.process(&ring, &mut state, &call, &mut warrant_kernel::NoPrompter);
        w.kinds_from(&state, from)
    };
    let kinds = under_switch(true);
    assert!(kinds.iter().any(|k| k == "halted"), "{kinds:?}");
    assert!(!kinds.iter().any(|k| k == "effect_started"), "{kinds:?}");

    let kinds = under_switch(false);
    assert!(
        kinds.iter().any(|k| k == "effect_completed"),
        "the control did not run the effect: {kinds:?}"
    );
}

/// A cancellation of the run, requested after its last step read nothing, is found by the
/// call's first commit: the run ends stopped, and the effect never starts.
#[test]
fn a_cancellation_is_found_by_the_call_s_first_commit() {
    let w = world_with("kept.txt");
    let pdp = Pdp(&w.engine);
    let ring = w.ring(&pdp, SECRET);
    let (mut state, call, from) = asked(&w, &ring, "read_file", "kept.txt");
    // The agent loop's boundary for a call not yet started: nothing is read there.
    let signals = ring.step_signals(&state).unwrap();
    assert!(!signals.stop());
    w.store
        .request_cancel(&state.run, "dave", "not needed")
        .unwrap();
    w.process(&ring, &mut state, &call, &mut warrant_kernel::NoPrompter);
    let kinds = w.kinds_from(&state, from);
    assert!(!kinds.iter().any(|k| k == "effect_started"), "{kinds:?}");
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("run_ended"),
        "{kinds:?}"
    );
    match &state.ended {
        Some(warrant_kernel::Outcome::Stopped { reason }) => {
            assert!(reason.contains("cancelled by dave"), "{reason}");
        }
        other => panic!("the run did not end stopped: {other:?}"),
    }
}

/// A person who must not be asked.
struct NotToBeAsked;

impl Prompter for NotToBeAsked {
    fn ask(&mut self, view: &PromptView<'_>) -> Option<(Answer, Principal)> {
        panic!("a person was asked about {} for a stopped run", view.title);
    }
}

/// Nobody is asked to approve a call of a run the switch stops: the commit that opens the
/// request finds the switch, and the run halts.
#[test]
fn nobody_is_asked_for_a_stopped_run() {
    let w = world_with("doomed.txt");
    let pdp = Pdp(&w.engine);
    let ring = w.ring(&pdp, SECRET);
    let (mut state, call, from) = asked(&w, &ring, "delete_path", "doomed.txt");
    w.store
        .set_kill(&KillScope::All, "operator", "stop everything")
        .unwrap();
    assert_eq!(
        w.process(&ring, &mut state, &call, &mut NotToBeAsked),
        CallStep::Done
    );
    let kinds = w.kinds_from(&state, from);
    assert!(w.exists("doomed.txt"));
    assert!(kinds.iter().any(|k| k == "halted"), "{kinds:?}");
    assert!(
        !kinds.iter().any(|k| k == "approval_requested"),
        "{kinds:?}"
    );
}

/// Sets the kill switch for every run as an effect's completion is about to be appended (the
/// effect has run; the switch is set before its completion commits).
struct SwitchAtCompletion<'w> {
    world: &'w World,
    armed: bool,
}

impl warrant_kernel::Observer for SwitchAtCompletion<'_> {
    fn committed(&self, _stored: &warrant_store::StoredEvent, _event: &warrant_kernel::RunEvent) {}

    fn before_append(&self, events: &[warrant_kernel::RunEvent]) {
        let completion = events
            .iter()
            .any(|e| matches!(e, warrant_kernel::RunEvent::EffectCompleted { .. }));
        if self.armed && completion {
            self.world
                .store
                .set_kill(&KillScope::All, "operator", "stop everything")
                .unwrap();
        }
    }
}

/// The commit of an effect's completion reads the stop signals for the model step after it: a
/// switch set before that commit is seen there, so the next step reads it and halts. With
/// none set there, the model step reads nothing: a switch set after the commit (within
/// `CLEAR_READ_STANDS`) is not read before the model is asked, and the next call's commit
/// refuses it (the documented window; the effect it would have started never starts).
#[test]
fn a_completion_s_commit_reads_the_switch_for_the_next_model_step() {
    for armed in [true, false] {
        let w = world_with("kept.txt");
        let pdp = Pdp(&w.engine);
        let observer = SwitchAtCompletion { world: &w, armed };
        let ring = warrant_kernel::Ring::new(warrant_kernel::RingParts {
            observer: &observer,
            ..w.ring(&pdp, SECRET).parts()
        });
        let (mut state, call, _) = asked(&w, &ring, "read_file", "kept.txt");
        w.process(&ring, &mut state, &call, &mut warrant_kernel::NoPrompter);
        assert!(state.next_open_call().is_none());
        if armed {
            // Set before the completion committed: the step after it reads, and finds it.
            let signals = ring.step_signals(&state).unwrap();
            assert!(signals.kill.is_some(), "{signals:?}");
        } else {
            // Set after: the completion's read stands for the model step's.
            w.store
                .set_kill(&KillScope::All, "operator", "stop everything")
                .unwrap();
            let signals = ring.step_signals(&state).unwrap();
            assert!(!signals.stop(), "{signals:?}");
            // The read stands once: the step after reads again.
            assert!(ring.step_signals(&state).unwrap().kill.is_some());
            // The next call never starts its effect.
            let from = state.next_seq;
            let next = w.propose(&ring, &mut state, "read_file", json!({"path": "kept.txt"}));
            w.process(&ring, &mut state, &next, &mut warrant_kernel::NoPrompter);
            let kinds = w.kinds_from(&state, from);
            assert!(!kinds.iter().any(|k| k == "effect_started"), "{kinds:?}");
            assert!(kinds.iter().any(|k| k == "halted"), "{kinds:?}");
        }
    }
}
