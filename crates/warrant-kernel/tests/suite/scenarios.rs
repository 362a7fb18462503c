//! Every built-in call kind × every answer a person can give, through the real ring and the
//! default policy pack: the events appended, how the call ended, and what happened on disk.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use warrant_kernel::pdp::Pdp;
use warrant_kernel::{Answer, CallResult, CallStep, DeniedBy, RunState, Scope, Verdict};

use super::harness::{SECRET, Script, World, req, settings};

/// The kinds of call the built-in tools take, one row each in the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    ReadInside,
    ReadDotEnv,
    ReadOutside,
    Write,
    DeleteRecursive,
    RunLs,
    RunTouch,
}

impl Kind {
    pub const ALL: [Kind; 7] = [
        Kind::ReadInside,
        Kind::ReadDotEnv,
        Kind::ReadOutside,
        Kind::Write,
        Kind::DeleteRecursive,
        Kind::RunLs,
        Kind::RunTouch,
    ];

    pub fn call(self) -> (&'static str, Value) {
        match self {
            Kind::ReadInside => ("read_file", json!({"path": "notes.txt"})),
            Kind::ReadDotEnv => ("read_file", json!({"path": ".env"})),
            Kind::ReadOutside => ("read_file", json!({"path": "../outside.txt"})),
            Kind::Write => (
                "write_file",
                json!({"path": "report.md", "content": "# Report\n"}),
            ),
            Kind::DeleteRecursive => ("delete_path", json!({"path": "build", "recursive": true})),
            Kind::RunLs => ("run_command", json!({"argv": ["ls"]})),
            Kind::RunTouch => ("run_command", json!({"argv": ["touch", "x"]})),
        }
    }

    /// What the default pack decides, and the policies a denial names.
    fn verdict(self) -> (Verdict, Vec<&'static str>) {
        match self {
            Kind::ReadInside | Kind::Write => (Verdict::Allow, vec![]),
            Kind::ReadDotEnv => (Verdict::Deny, vec!["project:no-secret-files"]),
            // Nothing permits it: denied by default, with no determining policy.
            Kind::ReadOutside => (Verdict::Deny, vec![]),
            // The harness's profile is unconfined, so every command is asked, `ls` too.
            Kind::DeleteRecursive | Kind::RunLs | Kind::RunTouch => (Verdict::Ask, vec![]),
        }
    }

    /// The disk after the effect ran.
    fn applied(self, mut disk: Disk) -> Disk {
        match self {
            Kind::ReadInside | Kind::ReadDotEnv | Kind::ReadOutside | Kind::RunLs => {}
            Kind::Write => disk.report = Some("# Report\n".into()),
            Kind::DeleteRecursive => disk.build = false,
            Kind::RunTouch => disk.x = true,
        }
        disk
    }
}

/// The answers a person at the terminal can give (or nobody is there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    Nobody,
    Approve(Scope),
    Deny,
}

impl Reply {
    pub const ALL: [Reply; 4] = [
        Reply::Nobody,
        Reply::Approve(Scope::Once),
        Reply::Approve(Scope::Session),
        Reply::Deny,
    ];

    pub fn answer(self) -> Option<Answer> {
        match self {
            Reply::Nobody => None,
            Reply::Approve(scope) => Some(Answer::Approve(scope)),
            Reply::Deny => Some(Answer::Deny {
                reason: "not today".into(),
            }),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Disk {
    pub notes: String,
    pub report: Option<String>,
    pub build: bool,
    pub x: bool,
    pub outside: String,
}

pub fn disk(w: &World) -> Disk {
    let ws = w.ws();
    Disk {
        notes: std::fs::read_to_string(format!("{ws}/notes.txt")).unwrap(),
        report: std::fs::read_to_string(format!("{ws}/report.md")).ok(),
        build: w.exists("build"),
        x: w.exists("x"),
        outside: std::fs::read_to_string(format!("{}/outside.txt", w.root)).unwrap(),
    }
}

/// How a call ended, in a form a table can hold.
pub fn result_label(state: &RunState, call: &str) -> String {
    match &state.call(call).unwrap().result {
        None => "open".into(),
        Some(CallResult::Completed { ok, .. }) => format!("completed ok={ok}"),
        Some(CallResult::Refused { code, .. }) => format!("refused {code}"),
        Some(CallResult::Denied {
            denied: DeniedBy::Policy { reasons },
            ..
        }) => format!(
            "denied by policy [{}]",
            reasons
                .iter()
                .map(|r| r.policy.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Some(CallResult::Denied {
            denied: DeniedBy::Person { approver, reason },
            ..
        }) => format!("denied by {} ({}): {reason}", approver.actor, approver.via),
        Some(CallResult::InDoubt) => "in doubt".into(),
    }
}

#[derive(Debug, PartialEq)]
struct Row {
    kind: Kind,
    reply: Reply,
    events: Vec<String>,
    step: CallStep,
    result: String,
    prompts: usize,
    disk: Disk,
}

fn expected(kind: Kind, reply: Reply, before: Disk) -> Row {
    let head = ["model_responded", "action_proposed", "policy_decided"];
    let ran = ["effect_started", "effect_completed"];
    let (verdict, policies) = kind.verdict();
    let (tail, step, result, prompts, did_run): (Vec<&str>, CallStep, String, usize, bool) =
        match (verdict, reply) {
            (Verdict::Allow, _) => (
                ran.to_vec(),
                CallStep::Done,
                "completed ok=true".into(),
                0,
                true,
            ),
            (Verdict::Deny, _) => (
                vec!["effect_denied"],
                CallStep::Done,
                format!("denied by policy [{}]", policies.join(", ")),
                0,
                false,
            ),
            (Verdict::Ask, Reply::Nobody) => (
                vec!["approval_requested", "run_parked"],
                CallStep::Parked(req(2)),
                "open".into(),
                1,
                false,
            ),
            (Verdict::Ask, Reply::Approve(_)) => (
                [&["approval_requested", "approval_granted"][..], &ran[..]].concat(),
                CallStep::Done,
                "completed ok=true".into(),
                1,
                true,
            ),
            (Verdict::Ask, Reply::Deny) => (
                vec!["approval_requested", "approval_denied", "effect_denied"],
                CallStep::Done,
                "denied by bob (terminal): not today".into(),
                1,
                false,
            ),
        };
    Row {
        kind,
        reply,
        events: head
            .iter()
            .chain(tail.iter())
            .map(|s| s.to_string())
            .collect(),
        step,
        result,
        prompts,
        disk: if did_run {
            kind.applied(before)
        } else {
            before
        },
    }
}

#[test]
fn every_call_kind_meets_every_answer() {
    let mut want = Vec::new();
    let mut got = Vec::new();
    for kind in Kind::ALL {
        for reply in Reply::ALL {
            let w = World::new();
            let pdp = Pdp(&w.engine);
            let ring = w.ring(&pdp, SECRET);
            let mut state = w.start(&ring, settings());
            let before = disk(&w);
            let (tool, args) = kind.call();
            let call = w.propose(&ring, &mut state, tool, args);
            let mut prompter = Script::new(reply.answer());
            let step = w.process(&ring, &mut state, &call, &mut prompter);
            want.push(expected(kind, reply, before));
            got.push(Row {
                kind,
                reply,
                events: w.kinds_from(&state, 2),
                step,
                result: result_label(&state, &call),
                prompts: prompter.asked.len(),
                disk: disk(&w),
            });
        }
    }
    assert_eq!(got, want);
}
