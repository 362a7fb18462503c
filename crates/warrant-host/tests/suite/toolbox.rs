//! A second tool source plugged into the host through its API alone (no CLI): its tool is
//! offered to the model, every call to it passes the ring (a call policy forbids is refused and
//! never reaches the tool), and what it returns is redacted before the model or the journal
//! sees it. The negative control runs the same tool through a toolbox without the redactor:
//! the secret comes out.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use warrant_core::{Action, ToolSpec};
use warrant_kernel::{
    Authorized, EffectResult, NoPrompter, Presentation, ReadFilter, Refusal, Silent, StopCheck,
    Tool, ToolEnv, ToolRegistry,
};
use warrant_tools::{Builtin, Controls, ToolSource, Toolbox};

use super::operations::{open, place, transcript, ws};

/// A GitHub token shape the default rules find.
const PAT: &str = "ghp_Xq7Lm2Vb9Tz4Kw1Rn8Yc3Hf6Jd0Sp5Ga2Ue7";

/// A source with one tool, `recall_note`: it reads a note by path (an `fs.read` for the ring to
/// decide) and answers from its own memory, which holds a token.
struct Notes {
    executed: Arc<AtomicUsize>,
}

struct RecallNote {
    spec: ToolSpec,
    executed: Arc<AtomicUsize>,
}

impl ToolSource for Notes {
    fn name(&self) -> &str {
        "notes"
    }

    fn tools(&self) -> Vec<Box<dyn Tool>> {
        vec![Box::new(RecallNote {
            spec: ToolSpec {
                name: "recall_note".into(),
                description: "Recall what is remembered about a note.".into(),
                input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}},
                    "required": ["path"], "additionalProperties": false}),
            },
            executed: self.executed.clone(),
        })]
    }
}

impl Tool for RecallNote {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn normalize(&self, args: &Value, env: &ToolEnv) -> Result<Vec<Action>, Refusal> {
        let path = args.get("path").and_then(Value::as_str).unwrap_or_default();
        Ok(vec![Action::FsRead {
            path: warrant_tools::normalize_path(env, path)?,
        }])
    }

    fn present(&self, actions: &[Action], _env: &ToolEnv) -> Presentation {
        Presentation {
            title: format!("recall {}", actions[0].target()),
            body: String::new(),
        }
    }

    fn execute(
        &self,
        _actions: &[Authorized<Action>],
        _env: &ToolEnv,
        _may_read: ReadFilter<'_>,
        _stop: StopCheck<'_>,
    ) -> EffectResult {
        self.executed.fetch_add(1, Ordering::SeqCst);
        EffectResult {
            ok: true,
            result: json!({"remembered": format!("deploy with {PAT}")}),
        }
    }
}

#[test]
fn a_second_source_is_offered_governed_and_redacted_without_the_cli() {
    let place = place();
    std::fs::write(ws(&place).join("notes.txt"), "hi").unwrap();
    std::fs::write(ws(&place).join(".env"), "X=1").unwrap();
    let executed = Arc::new(AtomicUsize::new(0));
    let host = open(&place).with_source(Arc::new(Notes {
        executed: executed.clone(),
    }));

    // Offered: on the run's tools next to the built-in ones.
    let tools = host.tools().unwrap();
    let names: Vec<String> = tools.specs().into_iter().map(|s| s.name).collect();
    assert!(names.contains(&"recall_note".to_owned()), "{names:?}");
    assert!(names.contains(&"read_file".to_owned()), "{names:?}");

    let model = transcript(
        &place,
        "t.yaml",
        "version: 1\nturns:\n  - calls:\n      - tool: recall_note\n        args: { path: notes.txt }\n      - tool: recall_note\n        args: { path: .env }\n  - say: done\n",
    );
    let driven = host
        .run(
            warrant_host::runs::RunRequest {
                agent_profile: None,
                model,
                task: "recall".into(),
                deadline: None,
            },
            &Silent,
            &mut NoPrompter,
        )
        .unwrap();

    // Governed: the call on `.env` was refused by policy and never reached the tool.
    assert_eq!(executed.load(Ordering::SeqCst), 1);
    let touched = host.records().touched(&driven.run).unwrap();
    let rows: Vec<(String, String)> = touched.touched["fs"]
        .iter()
        .map(|r| (r.status.clone(), r.by.clone()))
        .collect();
    assert_eq!(
        rows,
        vec![
            ("read".into(), "policy project:workspace-read".into()),
            (
                "refused".into(),
                "denied by policy project:no-secret-files".into()
            ),
        ]
    );

    // Redacted: the journaled result holds no token, and says what was taken out.
    let view = host.records().run(&driven.run).unwrap();
    let completed: Vec<&Value> = view
        .events
        .iter()
        .filter(|e| e.kind == "effect_completed")
        .map(|e| &e.payload["result"])
        .collect();
    assert_eq!(completed.len(), 1);
    assert!(!completed[0].to_string().contains(PAT), "{}", completed[0]);
    assert!(completed[0]["redacted"].is_object(), "{}", completed[0]);

    // Negative control: the same tool through a toolbox without the redactor gives the token.
    let bare = Toolbox::new(
        &[&Builtin, &Notes { executed }],
        Controls {
            menu: None,
            menus: &Default::default(),
            redactor: None,
        },
    )
    .unwrap();
    let env = ToolEnv {
        workspace: warrant_core::CanonicalPath::from_normalized(
            &ws(&place).canonicalize().unwrap().display().to_string(),
        )
        .unwrap(),
        profiles: Default::default(),
        parent_env: vec![],
        secrets: None,
        no_overlays: false,
        run: None,
        tests: Default::default(),
        web: Default::default(),
        web_addresses_unguarded: false,
        web_loopback_allowed: false,
        menus: Default::default(),
        spawn_unnarrowed: false,
        ceiling_unchecked: false,
        delegation_late: false,
    };
    let actions = bare
        .get("recall_note")
        .unwrap()
        .normalize(&json!({"path": "notes.txt"}), &env)
        .unwrap();
    let authorized: Vec<Authorized<Action>> =
        actions.into_iter().map(Authorized::for_tests).collect();
    let raw = bare.get("recall_note").unwrap().execute(
        &authorized,
        &env,
        &|_: &warrant_core::CanonicalPath| true,
        &|| None,
    );
    assert!(raw.result.to_string().contains(PAT), "{}", raw.result);
}
