//! The read side and the request operations through the application layer's API: each view
//! a front end prints, serves or posts, built from a real installation and real runs.

use std::sync::Arc;

use warrant_host::narrate::{Narrator, Next, Words};
use warrant_host::request_views::RequestView;
use warrant_host::requests::Connection;
use warrant_host::{Quiet, records};
use warrant_kernel::{Answer, NoPrompter, Scope, Silent};

use super::operations::{delete_model, open, parked, place, transcript, ws};

#[test]
fn a_run_reads_the_same_from_every_view_after_an_approval() {
    let place = place();
    let model = delete_model(&place, "old.txt", "bye");
    let host = open(&place);
    let (run, request) = parked(&host, model);

    let items = host.records().request_items(false, None).unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(
        (items[0].kind.as_str(), items[0].status),
        ("approval", "open")
    );
    let shown = host.show_request(&request).unwrap();
    let RequestView::Approval(a) = &shown.view else {
        panic!("an approval, got {:?}", shown.view);
    };
    assert_eq!((a.status, a.risk.as_str()), ("open", "destructive"));

    host.answer(&request, Answer::Approve(Scope::Once)).unwrap();
    host.resume(&run, &Silent, &mut NoPrompter, false).unwrap();

    // Opened to read only: no identity or policy needed.
    let opened = records::open(&place.at, Arc::new(Quiet)).unwrap();
    let r = opened.records();
    assert_eq!(r.runs().unwrap().len(), 1);
    let view = r.run(&run).unwrap();
    assert_eq!(view.events.len() as u64, view.run.events);
    let touched = r.touched(&run).unwrap();
    let fs = &touched.touched["fs"];
    assert_eq!(fs.len(), 1, "{fs:?}");
    assert_eq!(
        (fs[0].verb.as_str(), fs[0].status.as_str()),
        ("fs.delete", "changed")
    );
    assert!(fs[0].by.contains("approved once"), "{}", fs[0].by);
    assert!(
        r.requests(false).unwrap().is_empty(),
        "answered, so not open"
    );
    assert_eq!(r.requests(true).unwrap().len(), 1);

    let verified = r.verify(None, None).unwrap();
    assert!(verified.ok, "{verified:?}");
    assert!(verified.journal.as_ref().is_some_and(|j| j.ok));
    let status = r.audit_status().unwrap();
    assert!(status.head > 0);
    let jsonl = &status.sinks[0];
    assert_eq!(
        (jsonl.sink.as_str(), jsonl.pending),
        ("jsonl", 0),
        "{jsonl:?}"
    );
    assert!(r.flush(std::time::Duration::ZERO).unwrap().flushed);

    let json = serde_json::to_value(&verified).unwrap();
    assert_eq!(json["checked"][0]["source"], "store");
}

#[test]
fn doctor_reports_each_part_and_a_broken_policy_fails_only_its_row() {
    let place = place();
    let report = warrant_host::doctor::doctor(&place.at, Arc::new(Quiet)).unwrap();
    for name in [
        "configuration",
        "identity",
        "policy",
        "approvals",
        "store and keys",
        "audit chain",
    ] {
        let row = report.checks.iter().find(|c| c.check == name).unwrap();
        assert!(row.ok, "{row:?}");
    }
    let policy = ws(&place).join(".warrant/policies/default.cedar");
    std::fs::write(&policy, "permit(principal, action, resource) when {").unwrap();
    let report = warrant_host::doctor::doctor(&place.at, Arc::new(Quiet)).unwrap();
    assert!(!report.ok);
    let failed: Vec<&str> = report
        .checks
        .iter()
        .filter(|c| !c.ok && !c.check.starts_with("sandbox") && !c.check.contains("profile"))
        .map(|c| c.check.as_str())
        .collect();
    assert_eq!(failed, ["policy"]);
    // A listing still works while the policy is being fixed.
    records::open(&place.at, Arc::new(Quiet))
        .unwrap()
        .records()
        .runs()
        .unwrap();
}

#[test]
fn a_question_is_answered_and_the_wrong_reply_is_refused_by_code() {
    let place = place();
    let model = transcript(
        &place,
        "t.yaml",
        "version: 1\nturns:\n  - calls:\n      - tool: ask_question\n        args: { question: \"Ship it?\", options: [\"yes\", \"no\"] }\n  - say: ok\n",
    );
    let host = open(&place);
    let (run, request) = parked(&host, model);
    let provide = host.provide_secret(&request, |_| panic!("never read for a question"));
    assert_eq!(provide.unwrap_err().code, "W-REQUEST-001");
    let connect = host.connect(&request, Connection::default());
    assert_eq!(connect.unwrap_err().code, "W-REQUEST-001");
    let neither = host.answer_question(&request, None, None).unwrap_err();
    assert_eq!(neither.code, "W-REQUEST-002");

    let replied = host.answer_question(&request, Some(2), None).unwrap();
    assert_eq!((replied.reply, &replied.run), ("answered", &run));
    let RequestView::Asked(a) = host.show_request(&request).unwrap().view else {
        panic!("an agent's request");
    };
    let reply = a.reply.unwrap();
    assert_eq!(serde_json::to_value(&reply.reply).unwrap()["text"], "no");
    let again = host.decline(&request, "late".into()).unwrap_err();
    assert_eq!(again.code, "W-REQUEST-004");
}

#[test]
fn a_resource_is_never_checked_on_the_agents_word_alone() {
    let place = place();
    let model = transcript(
        &place,
        "t.yaml",
        "version: 1\nturns:\n  - calls:\n      - tool: request_resource\n        args: { kind: endpoint, name: api, url: \"http://127.0.0.1:9/\" }\n  - say: ok\n",
    );
    let host = open(&place);
    let (_, request) = parked(&host, model);
    let implied = host.connect(&request, Connection::default()).unwrap_err();
    assert_eq!(implied.code, "W-REQUEST-013", "{implied}");
    let with = Connection {
        use_proposed: true,
        timeout: std::time::Duration::from_millis(500),
        ..Connection::default()
    };
    let unreachable = host.connect(&request, with).unwrap_err();
    assert_eq!(unreachable.code, "W-REQUEST-007", "{unreachable}");
    assert!(host.records().request_items(false, None).unwrap()[0].status == "open");
}

/// A chat gateway's words: the same narration, other instructions.
struct Chat;

impl Words for Chat {
    fn next(&self, step: Next<'_>) -> String {
        match step {
            Next::Approve { request } => format!("reply /approve {request} or /deny {request}"),
            other @ (Next::Answer { .. }
            | Next::Provide { .. }
            | Next::Connect { .. }
            | Next::WholeRun) => {
                format!("{other:?}")
            }
        }
    }
}

#[test]
fn the_narration_words_next_steps_in_the_front_ends_own_words() {
    let place = place();
    let model = delete_model(&place, "old.txt", "bye");
    let host = open(&place);
    let (run, request) = parked(&host, model);
    let narrator = Narrator::new(Box::new(Chat));
    let view = host.records().run(&run).unwrap();
    let lines: Vec<String> = view
        .events
        .iter()
        .filter_map(|e| warrant_kernel::RunEvent::from_stored(e).ok())
        .flat_map(|e| narrator.lines(&e))
        .collect();
    let text = lines.join("\n");
    assert!(
        text.contains(&format!("reply /approve {request} or /deny {request}")),
        "{text}"
    );
    assert!(
        !text.contains("warrant approve"),
        "no command line words: {text}"
    );
    assert!(
        text.contains(&format!("request  {request}")),
        "the approval request is narrated: {text}"
    );
}

#[test]
fn touched_says_on_whose_behalf_the_run_acted() {
    let place = place();
    let config = ws(&place).join(".warrant/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[identity]\nactor = \"build-bot\"\non_behalf_of = \"alice\"\n");
    std::fs::write(&config, text).unwrap();
    std::fs::write(ws(&place).join("notes.txt"), "hi").unwrap();
    let model = transcript(
        &place,
        "t.yaml",
        "version: 1\nturns:\n  - calls:\n      - tool: read_file\n        args: { path: notes.txt }\n  - say: done\n",
    );
    let host = open(&place);
    let driven = host
        .run(
            warrant_host::runs::RunRequest {
                agent_profile: None,
                model,
                task: "read".into(),
                deadline: None,
            },
            &Silent,
            &mut NoPrompter,
        )
        .unwrap();
    let touched = host.records().touched(&driven.run).unwrap();
    assert_eq!(touched.actor, "build-bot");
    assert_eq!(touched.on_behalf_of.as_deref(), Some("alice"));
    // Each action says on whose behalf it ran, as its own signed record says.
    let notes = ws(&place).canonicalize().unwrap().join("notes.txt");
    assert_eq!(
        touched.touched["fs"],
        vec![warrant_host::touched::TouchedRow {
            resource: notes.display().to_string(),
            verb: "fs.read".into(),
            status: "read".into(),
            by: "policy project:workspace-read".into(),
            call: "call-0-0".into(),
            on_behalf_of: Some("alice".into()),
        }]
    );
    let json = serde_json::to_value(&touched).unwrap();
    assert_eq!(json["on_behalf_of"], "alice");
    assert_eq!(json["touched"]["fs"][0]["on_behalf_of"], "alice");
}

/// `touched` says who allowed each action from the signed records: a call let through by a
/// session grant is credited to the person who granted it, like the call they were asked about.
#[test]
fn touched_credits_a_session_grant_to_the_person_who_gave_it() {
    let place = place();
    let obj = ws(&place).join("build/obj");
    std::fs::create_dir_all(&obj).unwrap();
    std::fs::write(obj.join("a.o"), "a").unwrap();
    std::fs::write(obj.join("b.o"), "b").unwrap();
    let model = transcript(
        &place,
        "t.yaml",
        "version: 1\nturns:\n  - calls:\n      - tool: delete_path\n        args: { path: build/obj/a.o }\n  - calls:\n      - tool: delete_path\n        args: { path: build/obj/b.o }\n  - say: done\n",
    );
    let host = open(&place);
    let (run, request) = parked(&host, model);
    host.answer(&request, Answer::Approve(Scope::Session))
        .unwrap();
    host.resume(&run, &Silent, &mut NoPrompter, false).unwrap();
    assert!(
        !obj.join("b.o").exists(),
        "the grant covered the second delete"
    );

    let touched = host.records().touched(&run).unwrap();
    let by = format!("{} (approved session, via cli)", touched.actor);
    let rows: Vec<(&str, &str, &str)> = touched.touched["fs"]
        .iter()
        .map(|r| (r.verb.as_str(), r.status.as_str(), r.by.as_str()))
        .collect();
    assert_eq!(
        rows,
        vec![
            ("fs.delete", "changed", by.as_str()),
            ("fs.delete", "changed", by.as_str()),
        ]
    );
}

#[test]
fn a_sessions_slash_commands_read_the_session_and_the_installation() {
    use warrant_host::chat::Slash;

    let place = place();
    let model = delete_model(&place, "old.txt", "bye");
    let host = open(&place);
    // A message, and commands before the session's first message.
    assert!(host.slash("hello /cost", None).is_none());
    assert!(matches!(host.slash("  /quit now", None), Some(Slash::Exit)));
    assert!(matches!(host.slash("/cost", None), Some(Slash::Cost(None))));
    assert!(matches!(
        host.slash("/audit", None),
        Some(Slash::Audit(None))
    ));
    assert!(matches!(
        host.slash("/approvals", None),
        Some(Slash::Approvals(Ok(v))) if v.is_empty()
    ));
    let Some(Slash::Unknown(name)) = host.slash("/frobnicate it", None) else {
        panic!("an unknown command");
    };
    assert_eq!(name, "frobnicate");

    // A session parked on an approval: its request, its latest decided call.
    let (run, request) = parked(&host, model);
    let events = host.inst.store.events(&run).unwrap();
    let state = warrant_kernel::RunState::fold(&events).unwrap();
    let Some(Slash::Approvals(Ok(items))) = host.slash("/approvals", Some(&state)) else {
        panic!("the session's requests");
    };
    assert_eq!(
        items
            .iter()
            .map(|i| (&i.id, i.run.clone()))
            .collect::<Vec<_>>(),
        vec![(&request, run.clone())]
    );
    let Some(Slash::Explain(Some(call))) = host.slash("/explain", Some(&state)) else {
        panic!("the latest decided call");
    };
    assert_eq!(call.record.tool, "delete_path");
    let Some(Slash::Cost(Some(spent))) = host.slash("/cost", Some(&state)) else {
        panic!("what the session spent");
    };
    assert_eq!(spent.turns, state.turns);
    let Some(Slash::Audit(Some(Ok(touched)))) = host.slash("/audit", Some(&state)) else {
        panic!("what the session touched");
    };
    assert_eq!(touched.run, run);
}
