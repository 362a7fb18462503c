//! What a `session` approval covers, exactly: a grant for deleting one file does not cover a
//! recursive delete of a sibling directory, and a grant for one command line covers that argv
//! and no other that joins to the same text. Each with its negative control: with the old
//! coarse patterns (the kernel's `testing` switch) the second action ran without a person.

use pretty_assertions::assert_eq;
use serde_json::json;
use warrant_core::Principal;
use warrant_kernel::authority::set_precise_sessions_for_this_thread;
use warrant_kernel::pdp::Pdp;
use warrant_kernel::{Answer, CallStep, NoPrompter, PromptView, Prompter, Scope};

use super::harness::{SECRET, World, bob, settings};

/// A person at the terminal who approves for the session and remembers what they were told
/// the session would cover.
#[derive(Default)]
struct SessionApprover {
    told: Vec<String>,
}

impl Prompter for SessionApprover {
    fn ask(&mut self, view: &PromptView<'_>) -> Option<(Answer, Principal)> {
        self.told.push(view.session.to_owned());
        Some((Answer::Approve(Scope::Session), bob()))
    }
}

/// What happened to each later action: done without a person (the files show it ran under
/// the grant), or asked a person again.
fn outcome(step: CallStep) -> &'static str {
    match step {
        CallStep::Done => "covered: ran",
        CallStep::Parked(_) => "asked again",
    }
}

/// Approves `first` for the session, then processes each of `later` with nobody at the
/// terminal. Returns what the person was told and each later outcome.
fn scenario(
    precise: bool,
    first: (&str, serde_json::Value),
    later: &[(&str, serde_json::Value)],
    files: &[&str],
) -> (World, Vec<String>, Vec<&'static str>) {
    set_precise_sessions_for_this_thread(precise);
    let w = World::new();
    for f in files {
        let path = format!("{}/{f}", w.ws());
        std::fs::create_dir_all(std::path::Path::new(&path).parent().unwrap()).unwrap();
        std::fs::write(path, "x").unwrap();
    }
    let pdp = Pdp(&w.engine);
    let ring = w.ring(&pdp, SECRET);
    let mut state = w.start(&ring, settings());
    let mut person = SessionApprover::default();
    let call = w.propose(&ring, &mut state, first.0, first.1);
    assert_eq!(
        w.process(&ring, &mut state, &call, &mut person),
        CallStep::Done
    );
    let outcomes = later
        .iter()
        .map(|(tool, args)| {
            let call = w.propose(&ring, &mut state, tool, args.clone());
            outcome(w.process(&ring, &mut state, &call, &mut NoPrompter))
        })
        .collect();
    set_precise_sessions_for_this_thread(true);
    let told = person
        .told
        .iter()
        .map(|t| t.replace(&w.ws(), "<ws>"))
        .collect();
    (w, told, outcomes)
}

#[test]
fn a_session_grant_for_deleting_one_file_does_not_cover_a_recursive_delete() {
    let files = ["a/x.txt", "a/y.txt", "a/dir/z.txt"];
    let first = ("delete_path", json!({"path": "a/x.txt"}));
    let later = [
        ("delete_path", json!({"path": "a/y.txt"})),
        ("delete_path", json!({"path": "a/dir", "recursive": true})),
    ];
    let (w, told, outcomes) = scenario(true, first.clone(), &later, &files);
    assert_eq!(outcomes, vec!["covered: ran", "asked again"]);
    assert!(
        w.exists("a/dir/z.txt"),
        "the tree was deleted without a person"
    );
    insta::assert_snapshot!(told.join("\n"), @"destructive actions matching exactly `fs.delete <ws>/a/* (one entry at a time, not recursive)`; this run only, for at most 8h; never saved as policy (to allow it for good, add a permit under .warrant/policies/)");

    // Negative control: with the old pattern (`fs.delete <ws>/a/*`) the tree goes too.
    let (w, _, outcomes) = scenario(false, first, &later, &files);
    assert_eq!(outcomes, vec!["covered: ran", "covered: ran"]);
    assert!(!w.exists("a/dir"));
}

#[test]
fn a_session_grant_for_a_command_covers_exactly_its_argv() {
    let files = ["f g", "f", "g"];
    let first = ("run_command", json!({"argv": ["rm", "f g"]}));
    let later = [
        ("run_command", json!({"argv": ["rm", "f", "g"]})),
        ("run_command", json!({"argv": ["rm", "f g"]})),
    ];
    let (w, told, outcomes) = scenario(true, first.clone(), &later, &files);
    // The same argv again is covered (and finds nothing to delete); the other one is asked.
    assert_eq!(outcomes, vec!["asked again", "covered: ran"]);
    assert!(w.exists("f") && w.exists("g"));
    insta::assert_snapshot!(told.join("\n"), @r#"destructive actions matching exactly `shell.exec argv ["rm","f g"] in <ws>, profile default`; this run only, for at most 8h; never saved as policy (to allow it for good, add a permit under .warrant/policies/)"#);

    // Negative control: the old pattern joined argv with spaces, so `rm f g` was covered.
    let (w, _, outcomes) = scenario(false, first, &later, &files);
    assert_eq!(outcomes, vec!["covered: ran", "covered: ran"]);
    assert!(!w.exists("f") && !w.exists("g"));
}
