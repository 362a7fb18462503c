//! A run, an approval and a request, each through the typed operations a front end calls.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use warrant_agent::RunExit;
use warrant_host::runs::{Resumed, RunRequest};
use warrant_host::{Class, Host, Notice, Notices, Where};
use warrant_kernel::{Answer, NoPrompter, Reply, Scope, Silent};

/// Collects notices, so a test can see what a front end would have been told.
#[derive(Default)]
struct Told(Mutex<Vec<Notice>>);

impl Notices for Told {
    fn notice(&self, notice: Notice) {
        if let Ok(mut v) = self.0.lock() {
            v.push(notice);
        }
    }
}

pub(super) struct Place {
    _dir: tempfile::TempDir,
    pub(super) root: PathBuf,
    pub(super) at: Where,
}

/// A fresh workspace with its installation, and configuration directories of its own (never
/// this machine's `/etc/warrant` or the user's home).
pub(super) fn place() -> Place {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let ws = root.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(root.join("managed")).unwrap();
    let at = Where {
        workspace: Some(ws),
        store: None,
        managed_dir: Some(root.join("managed")),
        user_dir: Some(root.join("user")),
    };
    let paths = warrant_host::install::paths(&at, true).unwrap();
    warrant_host::init::init(&paths).unwrap();
    Place {
        _dir: dir,
        root,
        at,
    }
}

pub(super) fn transcript(place: &Place, name: &str, text: &str) -> String {
    let path = place.root.join(name);
    std::fs::write(&path, text).unwrap();
    format!("scripted:{}", path.display())
}

/// Writes `file` (holding `text`) into the workspace and returns a model that deletes it.
pub(super) fn delete_model(place: &Place, file: &str, text: &str) -> String {
    std::fs::write(ws(place).join(file), text).unwrap();
    transcript(
        place,
        "t.yaml",
        &format!(
            "version: 1\nturns:\n  - calls:\n      - tool: delete_path\n        args: {{ path: {file} }}\n  - say: done\n"
        ),
    )
}

pub(super) fn open(place: &Place) -> Host {
    Host::open(&place.at, Arc::new(Told::default())).unwrap()
}

/// Starts a run of `model` driven here with nobody to prompt, and returns it parked.
pub(super) fn parked(host: &Host, model: String) -> (warrant_core::RunId, warrant_core::RequestId) {
    let driven = host
        .run(
            RunRequest {
                agent_profile: None,
                model,
                task: "a task".into(),
                deadline: None,
            },
            &Silent,
            &mut NoPrompter,
        )
        .unwrap();
    let RunExit::Parked { request } = driven.exit else {
        panic!("expected a park, got {:?}", driven.exit);
    };
    (driven.run, request)
}

pub(super) fn ws(place: &Place) -> &Path {
    place.at.workspace.as_deref().unwrap()
}

#[test]
fn a_destructive_call_parks_is_approved_and_runs_on_resume() {
    let place = place();
    let model = delete_model(&place, "old.txt", "bye");
    let host = open(&place);
    let (run, request) = parked(&host, model);
    assert!(
        ws(&place).join("old.txt").exists(),
        "nothing runs before a person answers"
    );

    let answered = host.answer(&request, Answer::Approve(Scope::Once)).unwrap();
    assert_eq!(answered.answer, "approved");
    assert_eq!(answered.run, run);

    let resumed = host.resume(&run, &Silent, &mut NoPrompter, false).unwrap();
    let Resumed::Driven(d) = resumed else {
        panic!("expected the run to be driven, got {resumed:?}");
    };
    assert_eq!(d.exit, RunExit::Completed);
    assert!(
        !ws(&place).join("old.txt").exists(),
        "the approved delete ran"
    );
}

#[test]
fn a_denied_call_never_runs() {
    let place = place();
    let model = delete_model(&place, "keep.txt", "stay");
    let host = open(&place);
    let (run, request) = parked(&host, model);
    host.answer(
        &request,
        Answer::Deny {
            reason: "keep it".into(),
        },
    )
    .unwrap();
    let resumed = host.resume(&run, &Silent, &mut NoPrompter, false).unwrap();
    assert!(matches!(resumed, Resumed::Driven(_)), "{resumed:?}");
    assert!(ws(&place).join("keep.txt").exists());
    // Answering twice is refused, typed.
    let again = host
        .answer(&request, Answer::Approve(Scope::Once))
        .unwrap_err();
    assert_eq!(again.class, Class::Usage, "{again}");
}

#[test]
fn a_question_waits_for_a_reply_then_the_run_goes_on() {
    let place = place();
    let model = transcript(
        &place,
        "t.yaml",
        "version: 1\nturns:\n  - calls:\n      - tool: ask_question\n        args: { question: \"Ship it?\" }\n  - say: ok\n",
    );
    let host = open(&place);
    let (run, request) = parked(&host, model);
    // Resuming before anyone replied appends nothing and says what it waits for.
    let waiting = host.resume(&run, &Silent, &mut NoPrompter, false).unwrap();
    assert!(
        matches!(&waiting, Resumed::AwaitsReply { request: r, .. } if *r == request),
        "{waiting:?}"
    );
    // An approval operation on a question is refused with the right code.
    let wrong = host
        .answer(&request, Answer::Approve(Scope::Once))
        .unwrap_err();
    assert_eq!(wrong.code, "W-REQUEST-001");

    let mut state = host.load_run(&run, Class::Failed).unwrap();
    host.refuse_from_command(&mut state, &request, "answer a request")
        .unwrap();
    host.reply(
        &mut state,
        &request,
        Reply::Answered {
            option: None,
            text: "yes".into(),
        },
    )
    .unwrap();
    let resumed = host.resume(&run, &Silent, &mut NoPrompter, false).unwrap();
    let Resumed::Driven(d) = resumed else {
        panic!("expected the run to be driven, got {resumed:?}");
    };
    assert_eq!(d.exit, RunExit::Completed);
}

#[test]
fn a_bad_transcript_is_refused_before_anything_starts() {
    let place = place();
    let model = transcript(&place, "t.yaml", "version: 1\nturns: [\n");
    let host = open(&place);
    let err = host
        .submit(RunRequest {
            agent_profile: None,
            model,
            task: "x".into(),
            deadline: None,
        })
        .unwrap_err();
    assert_eq!(err.class, Class::Usage, "{err}");
    assert!(
        host.inst.store.runs().unwrap().is_empty(),
        "nothing was queued"
    );
}
