//! Replay never re-runs a non-idempotent effect: one that was started (journaled) but never
//! completed is recorded in doubt and the run parks until a person resolves it; an idempotent
//! one runs again.

use pretty_assertions::assert_eq;
use serde_json::json;
use warrant_core::{RequestId, digest_of};
use warrant_kernel::pdp::Pdp;
use warrant_kernel::{
    Answer, CallResult, CallStep, DecisionPoint, NoPrompter, Resolution, RunEvent, RunState, Scope,
    ToolRegistry,
};
use warrant_store::RunStatus;

use super::harness::{SECRET, World, bob, settings};
use super::scenarios::result_label;

/// `sh -c 'echo x >> counter'`, approved with `scope`, then a crash right after the go-ahead
/// was journaled. A new process resumes from the log alone; it must park in doubt. Then the
/// person resolves it with `resolution` (if any) and the call is driven again. Returns what
/// resuming appended, the call's result and the counter file.
fn crash_after_start_of_approved_command(
    scope: Scope,
    resolution: Option<Resolution>,
) -> (Vec<String>, String, Option<String>) {
    let w = World::new();
    let pdp = Pdp(&w.engine);
    let ring = w.ring(&pdp, SECRET);
    let mut state = w.start(&ring, settings());
    let call = w.propose(
        &ring,
        &mut state,
        "run_command",
        json!({"argv": ["sh", "-c", "echo x >> counter"]}),
    );
    let CallStep::Parked(request) = w.process(&ring, &mut state, &call, &mut NoPrompter) else {
        panic!("sh should need a person under the default pack");
    };
    ring.answer(
        &mut state,
        &request,
        &bob(),
        &warrant_kernel::Via::Terminal,
        Answer::Approve(scope),
    )
    .unwrap();
    ring.resume(&mut state, &bob()).unwrap();
    started(&ring, &mut state, &call, Some(request));

    let mut resumed = ring.load(&state.run).unwrap();
    let from = resumed.next_seq;
    let CallStep::Parked(in_doubt) = w.process(&ring, &mut resumed, &call, &mut NoPrompter) else {
        panic!("a started, unfinished command must park in doubt");
    };
    assert_eq!(
        resumed.call(&call).unwrap().in_doubt,
        Some(in_doubt.clone())
    );
    // Approving is the wrong answer to "did it happen?".
    let wrong = ring
        .answer(
            &mut resumed,
            &in_doubt,
            &bob(),
            &warrant_kernel::Via::Terminal,
            Answer::Approve(Scope::Once),
        )
        .unwrap_err();
    // The error says what it asks, and hints (typed) how it is answered: by resolving.
    assert!(wrong.to_string().contains("interrupted effect"), "{wrong}");
    assert!(
        matches!(
            warrant_core::Coded::hint(&wrong),
            Some(warrant_core::Hint::ResolveInDoubt { ref step, .. }) if *step == call
        ),
        "{wrong:?}"
    );
    if let Some(resolution) = resolution {
        ring.resolve(
            &mut resumed,
            &call,
            &bob(),
            &warrant_kernel::Via::Cli,
            resolution,
        )
        .unwrap();
        assert_eq!(
            w.process(&ring, &mut resumed, &call, &mut NoPrompter),
            CallStep::Done
        );
    }
    (
        w.kinds_from(&resumed, from),
        result_label(&resumed, &call),
        std::fs::read_to_string(format!("{}/counter", w.ws())).ok(),
    )
}

/// The ring's `EffectStarted`, appended by hand: the process died before the executor ran.
fn started(
    ring: &warrant_kernel::Ring<'_>,
    state: &mut RunState,
    call: &str,
    approval: Option<RequestId>,
) {
    ring.append_for_tests(
        state,
        vec![RunEvent::EffectStarted {
            call_id: call.to_owned(),
            approval,
            session_grant: None,
        }],
        Some(RunStatus::Running),
        vec![],
    )
    .unwrap();
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn a_started_command_parks_in_doubt_whatever_the_approval_scope() {
    for scope in [Scope::Session, Scope::Once] {
        assert_eq!(
            crash_after_start_of_approved_command(scope, None),
            (
                strings(&["effect_in_doubt", "run_parked"]),
                "open".to_owned(),
                None
            ),
            "{scope:?}"
        );
    }
}

#[test]
fn a_person_resolves_the_doubt_and_only_retry_runs_it_again() {
    assert_eq!(
        crash_after_start_of_approved_command(Scope::Once, Some(Resolution::Completed)),
        (
            strings(&[
                "effect_in_doubt",
                "run_parked",
                "in_doubt_resolved",
                "effect_completed"
            ]),
            "completed ok=true".to_owned(),
            None
        )
    );
    assert_eq!(
        crash_after_start_of_approved_command(Scope::Once, Some(Resolution::Failed)),
        (
            strings(&[
                "effect_in_doubt",
                "run_parked",
                "in_doubt_resolved",
                "effect_completed"
            ]),
            "completed ok=false".to_owned(),
            None
        )
    );
    assert_eq!(
        crash_after_start_of_approved_command(Scope::Once, Some(Resolution::Retry)),
        (
            strings(&[
                "effect_in_doubt",
                "run_parked",
                "in_doubt_resolved",
                "effect_started",
                "effect_completed"
            ]),
            "completed ok=true".to_owned(),
            Some("x\n".to_owned())
        )
    );
}

#[test]
fn a_started_read_is_run_again_and_completed() {
    let w = World::new();
    let pdp = Pdp(&w.engine);
    let ring = w.ring(&pdp, SECRET);
    let mut state = w.start(&ring, settings());
    let args = json!({"path": "notes.txt"});
    let call = w.propose(&ring, &mut state, "read_file", args.clone());
    // What the ring journals before the executor, written the same way, then the crash.
    let actions = w
        .tools
        .get("read_file")
        .unwrap()
        .normalize(&args, &w.env)
        .unwrap();
    let v = pdp.decide(&state.principal, &actions[0], &state.workspace);
    ring.append_for_tests(
        &mut state,
        vec![
            RunEvent::ActionProposed {
                call_id: call.clone(),
                tool: "read_file".into(),
                actions: actions.clone(),
                digest: digest_of(&actions).unwrap(),
            },
            RunEvent::PolicyDecided {
                call_id: call.clone(),
                index: 0,
                action_digest: actions[0].digest(),
                verdict: v.verdict,
                risk: v.risk,
                reasons: v.reasons,
                errors: v.errors,
            },
        ],
        None,
        vec![],
    )
    .unwrap();
    started(&ring, &mut state, &call, None);

    let mut resumed = ring.load(&state.run).unwrap();
    let from = resumed.next_seq;
    assert_eq!(
        w.process(&ring, &mut resumed, &call, &mut NoPrompter),
        CallStep::Done
    );
    let Some(CallResult::Completed { ok, result }) = &resumed.call(&call).unwrap().result else {
        panic!("{:?}", resumed.call(&call));
    };
    assert_eq!(
        (w.kinds_from(&resumed, from), *ok, result["content"].clone()),
        (vec!["effect_completed".to_owned()], true, json!("hello\n"))
    );
}

/// The built-in tools minus one: a later warrant that dropped a tool.
struct Without<'a> {
    tools: &'a dyn ToolRegistry,
    hidden: &'static str,
}

impl ToolRegistry for Without<'_> {
    fn get(&self, name: &str) -> Option<&dyn warrant_kernel::Tool> {
        (name != self.hidden)
            .then(|| self.tools.get(name))
            .flatten()
    }
    fn specs(&self) -> Vec<warrant_core::ToolSpec> {
        self.tools
            .specs()
            .into_iter()
            .filter(|s| s.name != self.hidden)
            .collect()
    }
    fn validate(
        &self,
        name: &str,
        args: &serde_json::Value,
    ) -> Result<(), warrant_kernel::Refusal> {
        self.tools.validate(name, args)
    }
}

#[test]
fn a_changed_tool_catalogue_is_recorded_or_refused_when_a_completed_step_needs_a_missing_tool() {
    let w = World::new();
    let pdp = Pdp(&w.engine);
    let ring = w.ring(&pdp, SECRET);
    let mut state = w.start(&ring, settings());
    let call = w.propose(&ring, &mut state, "read_file", json!({"path": "notes.txt"}));
    assert_eq!(
        w.process(&ring, &mut state, &call, &mut NoPrompter),
        CallStep::Done
    );

    // A catalogue without list_dir: nothing completed needs it, so the change is recorded.
    let fewer = Without {
        tools: &w.tools,
        hidden: "list_dir",
    };
    let digest = digest_of(&fewer.specs()).unwrap();
    let from = state.next_seq;
    ring.check_replay(&mut state, &fewer, &digest).unwrap();
    assert_eq!(w.kinds_from(&state, from), vec!["tools_changed".to_owned()]);
    assert_eq!(state.tools_digest, Some(digest));

    // Without read_file, the completed step could not be replayed: refused, nothing written.
    let without_read = Without {
        tools: &w.tools,
        hidden: "read_file",
    };
    let digest = digest_of(&without_read.specs()).unwrap();
    let before = state.next_seq;
    let err = ring
        .check_replay(&mut state, &without_read, &digest)
        .unwrap_err();
    assert_eq!(warrant_core::Coded::code(&err), "W-KERNEL-008");
    assert!(err.to_string().contains("`read_file`"), "{err}");
    assert_eq!(state.next_seq, before);
}
