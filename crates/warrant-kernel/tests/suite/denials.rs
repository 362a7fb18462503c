//! The denial count the agent loop stops on counts every denial, by policy or by a person.

use pretty_assertions::assert_eq;
use serde_json::json;
use warrant_kernel::pdp::Pdp;
use warrant_kernel::{Answer, RunSettings, RunState};
use warrant_store::EventStore;

use super::harness::{SECRET, Script, World};
use super::scenarios::result_label;

#[test]
fn denials_by_policy_and_by_person_both_count() {
    let w = World::new();
    let pdp = Pdp(&w.engine);
    let ring = w.ring(&pdp, SECRET);
    let settings = RunSettings {
        agent_profile: None,
        delegation: None,
        graph: None,
        skills: Vec::new(),
        max_denials: 2,
        max_turns: 20,
        deadline: None,
        requests: Default::default(),
        max_tool_calls: None,
        session: None,
        spawn: None,
        standing: None,
        rate: None,
        ceiling: None,
        strict: false,
    };
    let mut state = w.start(&ring, settings.clone());
    let calls: Vec<(&str, serde_json::Value, Option<Answer>)> = vec![
        ("read_file", json!({"path": ".env"}), None),
        ("read_file", json!({"path": "notes.txt"}), None),
        (
            "delete_path",
            json!({"path": "build", "recursive": true}),
            Some(Answer::Deny {
                reason: "keep the build".into(),
            }),
        ),
    ];
    let mut results = Vec::new();
    for (tool, args, answer) in calls {
        let call = w.propose(&ring, &mut state, tool, args);
        w.process(&ring, &mut state, &call, &mut Script::new(answer));
        results.push(result_label(&state, &call));
    }
    let folded = RunState::fold(&w.store.events(&state.run).unwrap()).unwrap();
    assert_eq!(
        (results, state.denials, folded.denials, &state.settings),
        (
            vec![
                "denied by policy [project:no-secret-files]".to_owned(),
                "completed ok=true".to_owned(),
                "denied by bob (terminal): keep the build".to_owned(),
            ],
            2,
            2,
            &settings
        )
    );
    assert!(
        state.denials >= state.settings.max_denials,
        "the limit is reached"
    );
}
