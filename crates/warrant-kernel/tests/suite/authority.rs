//! Who may approve, as a scenario table: risk class × approver × scope → outcome, under an
//! identity directory with a responsible team, the administrators, and four eyes on
//! destructive actions. Then: where a request falls through to, and what a `session` approval
//! covers (same class, same resource pattern, this run, until it expires).

use std::collections::BTreeMap;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use warrant_core::directory::Directory;
use warrant_core::risk::{RiskRuleConfig, RiskRules};
use warrant_core::{FixedClock, Principal, PrincipalKind, RequestId, RiskClass, Timestamp};
use warrant_kernel::approval::{ApproverKey, Ed25519ApproverKey};
use warrant_kernel::pdp::Pdp;
use warrant_kernel::{
    Answer, ApprovalRules, CallStep, Governed, KernelError, NoPrompter, Ring, RingParts, RunState,
    Scope, Via,
};
use warrant_store::EventStore;

use super::harness::{SECRET, World, principal, settings};

const DIRECTORY: &str = r#"
admins = ["root"]
[people.alice]
teams = ["payments"]
[people.bob]
teams = ["payments"]
[people.carol]
teams = ["web"]
[teams.payments]
[teams.web]
[teams.empty]
"#;

fn rules(team: Option<&str>) -> ApprovalRules {
    let four_eyes = BTreeMap::from([(
        "destructive".to_owned(),
        RiskRuleConfig {
            four_eyes: Some(true),
            ..Default::default()
        },
    )]);
    ApprovalRules {
        risk: RiskRules::resolve(&[("managed", &four_eyes)]).unwrap(),
        directory: Some(Directory::parse("directory.toml", &directory_with_keys()).unwrap()),
        team: team.map(str::to_owned),
        ..Default::default()
    }
}

/// Each person's own approver key (a fixed seed per name, so tests are repeatable).
fn key_of(actor: &str) -> Ed25519ApproverKey {
    let bytes: [u8; 32] = warrant_core::Digest::of_bytes(actor.as_bytes())
        .bytes()
        .try_into()
        .unwrap();
    Ed25519ApproverKey::from_seed(&bytes)
}

/// [`DIRECTORY`] with every person's public key registered, root's included.
fn directory_with_keys() -> String {
    let mut text = String::new();
    for line in DIRECTORY.lines() {
        text.push_str(line);
        text.push('\n');
        if let Some(name) = line
            .strip_prefix("[people.")
            .and_then(|l| l.strip_suffix(']'))
        {
            text.push_str(&format!("public_key = \"{}\"\n", key_of(name).public_hex()));
        }
    }
    text.push_str(&format!(
        "[people.root]\npublic_key = \"{}\"\n",
        key_of("root").public_hex()
    ));
    text
}

fn user(actor: &str) -> Principal {
    principal(actor, PrincipalKind::User)
}

/// Alice's run parked on one command of the given class.
fn parked_on(w: &World, ring: &Ring<'_>, class: RiskClass) -> (RunState, String, RequestId) {
    parked_for(w, ring, class, &user("alice"))
}

/// A run for `requester` parked on one command of the given class.
fn parked_for(
    w: &World,
    ring: &Ring<'_>,
    class: RiskClass,
    requester: &Principal,
) -> (RunState, String, RequestId) {
    let argv = match class {
        RiskClass::Change => json!(["touch", "x"]),
        RiskClass::Destructive => json!(["rm", "notes.txt"]),
        RiskClass::External => json!(["curl", "https://example.invalid"]),
        RiskClass::Read | RiskClass::Secret | RiskClass::Irreversible => {
            panic!("no row uses {class:?}")
        }
    };
    let mut state = ring
        .start(warrant_kernel::NewRunSpec {
            queued: false,
            principal: requester.clone(),
            task: "t".into(),
            model: "scripted:test".into(),
            workspace: w.env.workspace.clone(),
            settings: settings(),
            tools: vec![],
            tools_digest: None,
            profiles_digest: None,
        })
        .unwrap();
    let call = w.propose(ring, &mut state, "run_command", json!({ "argv": argv }));
    let CallStep::Parked(request) = w.process(ring, &mut state, &call, &mut NoPrompter) else {
        panic!("not parked")
    };
    assert_eq!(state.requests[&request].risk, class);
    (state, call, request)
}

/// `runs` (the effect ran) or `refused <reason>` with the reason recorded in the log.
fn attempt(class: RiskClass, requester: &Principal, approver: &Principal, scope: Scope) -> String {
    // Each person approves from their own process, signing with their own key.
    let key = key_of(&approver.actor);
    attempt_with(
        rules(Some("payments")),
        class,
        requester,
        approver,
        scope,
        &Via::Cli,
        Some(&key),
    )
}

fn attempt_with(
    rules: ApprovalRules,
    class: RiskClass,
    requester: &Principal,
    approver: &Principal,
    scope: Scope,
    via: &Via,
    key: Option<&dyn ApproverKey>,
) -> String {
    let w = World::new();
    let pdp = Pdp(&w.engine);
    let governed = Governed { inner: &pdp, rules };
    let ring = Ring::new(RingParts {
        pdp: &governed,
        ..w.ring(&pdp, SECRET).parts()
    });
    let (mut state, call, request) = parked_for(&w, &ring, class, requester);
    match ring.answer_signed(
        &mut state,
        &request,
        approver,
        via,
        Answer::Approve(scope),
        key,
    ) {
        Ok(()) => {
            ring.resume(&mut state, approver).unwrap();
            let step = w.process(&ring, &mut state, &call, &mut NoPrompter);
            assert_eq!(step, CallStep::Done);
            "runs".into()
        }
        Err(e) => {
            let recorded = w
                .store
                .events(&state.run)
                .unwrap()
                .last()
                .map(|e| (e.kind.clone(), e.payload["reason"].clone()))
                .unwrap();
            let reason = if let KernelError::ApprovalRefused { reason, .. } = &e {
                reason.as_str().to_owned()
            } else {
                assert!(
                    matches!(e, KernelError::AgentCannotApprove { .. }),
                    "unexpected {e:?}"
                );
                "on_behalf".into()
            };
            assert_eq!(
                recorded,
                ("approval_rejected".to_owned(), Value::from(reason.as_str())),
                "the refusal is recorded"
            );
            assert!(state.requests[&request].answer.is_none(), "still open");
            format!("refused {reason} ({})", e.code_str())
        }
    }
}

trait CodeStr {
    fn code_str(&self) -> &'static str;
}

impl CodeStr for KernelError {
    fn code_str(&self) -> &'static str {
        warrant_core::Coded::code(self)
    }
}

#[test]
fn who_may_approve_scenario_table() {
    let alice = user("alice");
    let bob = user("bob");
    // An agent working for alice: the requester is alice, not the agent.
    let agent_run = Principal {
        on_behalf_of: Some("alice".into()),
        ..principal("helper-bot", PrincipalKind::Agent)
    };
    // (class, requester, approver, scope) -> outcome. Team payments = alice, bob; root admin;
    // four eyes on destructive.
    let rows: Vec<(RiskClass, &Principal, Principal, Scope, &str)> = vec![
        (
            RiskClass::Change,
            &alice,
            user("alice"),
            Scope::Once,
            "runs",
        ),
        (
            RiskClass::Change,
            &alice,
            user("bob"),
            Scope::Session,
            "runs",
        ),
        (RiskClass::Change, &alice, user("root"), Scope::Once, "runs"),
        (
            RiskClass::Change,
            &alice,
            user("carol"),
            Scope::Once,
            "refused not_eligible (W-APPROVAL-020)",
        ),
        (
            RiskClass::Change,
            &alice,
            user("mallory"),
            Scope::Once,
            "refused not_eligible (W-APPROVAL-020)",
        ),
        (
            RiskClass::External,
            &alice,
            user("bob"),
            Scope::Once,
            "runs",
        ),
        (
            RiskClass::External,
            &alice,
            user("alice"),
            Scope::Once,
            "runs",
        ),
        (
            RiskClass::Destructive,
            &alice,
            user("alice"),
            Scope::Once,
            "refused four_eyes (W-APPROVAL-021)",
        ),
        (
            RiskClass::Destructive,
            &alice,
            user("alice"),
            Scope::Session,
            "refused four_eyes (W-APPROVAL-021)",
        ),
        (
            RiskClass::Destructive,
            &alice,
            user("bob"),
            Scope::Once,
            "runs",
        ),
        (
            RiskClass::Destructive,
            &alice,
            user("root"),
            Scope::Session,
            "runs",
        ),
        (
            RiskClass::Destructive,
            &alice,
            user("carol"),
            Scope::Once,
            "refused not_eligible (W-APPROVAL-020)",
        ),
        // Bob's run: alice is just another team member for it.
        (
            RiskClass::Destructive,
            &bob,
            user("alice"),
            Scope::Once,
            "runs",
        ),
        (
            RiskClass::Destructive,
            &bob,
            user("bob"),
            Scope::Once,
            "refused four_eyes (W-APPROVAL-021)",
        ),
        // An agent's run for alice: alice is the requester; the agent never approves.
        (
            RiskClass::Destructive,
            &agent_run,
            user("alice"),
            Scope::Once,
            "refused four_eyes (W-APPROVAL-021)",
        ),
        (
            RiskClass::Destructive,
            &agent_run,
            user("bob"),
            Scope::Once,
            "runs",
        ),
        (
            RiskClass::Change,
            &agent_run,
            user("alice"),
            Scope::Once,
            "runs",
        ),
        (
            RiskClass::Destructive,
            &alice,
            agent_run.clone(),
            Scope::Once,
            "refused on_behalf (W-APPROVAL-003)",
        ),
        (
            RiskClass::Change,
            &agent_run,
            agent_run.clone(),
            Scope::Once,
            "refused on_behalf (W-APPROVAL-003)",
        ),
        (
            RiskClass::Change,
            &alice,
            Principal {
                on_behalf_of: Some("alice".into()),
                ..user("assistant")
            },
            Scope::Once,
            "refused on_behalf (W-APPROVAL-022)",
        ),
    ];
    let line = |class: &RiskClass, requester: &Principal, who: &Principal, scope: &Scope| {
        format!(
            "{} for {} by {} ({})",
            class.as_str(),
            requester.actor,
            who.actor,
            scope.as_str()
        )
    };
    let got: Vec<String> = rows
        .iter()
        .map(|(class, requester, who, scope, _)| {
            format!(
                "{}: {}",
                line(class, requester, who, scope),
                attempt(*class, requester, who, *scope)
            )
        })
        .collect();
    let want: Vec<String> = rows
        .iter()
        .map(|(class, requester, who, scope, outcome)| {
            format!("{}: {outcome}", line(class, requester, who, scope))
        })
        .collect();
    assert_eq!(got, want);
}

#[test]
fn a_request_falls_through_to_the_administrators_with_the_reason() {
    let alice = user("alice");
    type Asked<'a> = (Option<&'a str>, Vec<&'a str>, Option<&'a str>);
    let table: Vec<(Option<&str>, Asked<'_>)> = vec![
        (
            Some("payments"),
            (Some("payments"), vec!["alice", "bob"], None),
        ),
        (
            Some("empty"),
            (
                None,
                vec!["root"],
                Some("the project's team `empty` has no members in the identity directory"),
            ),
        ),
        (
            None,
            (
                None,
                vec!["root"],
                Some(
                    "the project names no responsible team ([approvals] team in .warrant/config.toml)",
                ),
            ),
        ),
    ];
    for (team, (want_team, want_people, want_why)) in table {
        let asked = rules(team).asked_of(&alice, RiskClass::Change);
        assert_eq!(
            (
                asked.team.as_deref(),
                asked.people.iter().map(String::as_str).collect::<Vec<_>>(),
                asked.fell_through.as_deref()
            ),
            (want_team, want_people, want_why),
            "{team:?}"
        );
    }

    // The reason is in the ApprovalRequested record and the request index; bob (not an
    // admin) may not answer, root may.
    let w = World::new();
    let pdp = Pdp(&w.engine);
    let governed = Governed {
        inner: &pdp,
        rules: rules(None),
    };
    let ring = Ring::new(RingParts {
        pdp: &governed,
        ..w.ring(&pdp, SECRET).parts()
    });
    let (mut state, _, request) = parked_on(&w, &ring, RiskClass::Change);
    let asked = state.requests[&request].asked.clone().unwrap();
    assert_eq!(asked.people, vec!["root".to_owned()]);
    let row = w.store.request(&request).unwrap().unwrap();
    assert_eq!(
        row.summary["fell_through"],
        json!("the project names no responsible team ([approvals] team in .warrant/config.toml)")
    );
    assert!(
        ring.answer(
            &mut state,
            &request,
            &user("bob"),
            &warrant_kernel::Via::Cli,
            Answer::Approve(Scope::Once)
        )
        .is_err()
    );
    ring.answer_signed(
        &mut state,
        &request,
        &user("root"),
        &warrant_kernel::Via::Cli,
        Answer::Approve(Scope::Once),
        Some(&key_of("root")),
    )
    .unwrap();
}

#[test]
fn a_session_approval_covers_the_same_class_and_pattern_in_this_run_until_it_expires() {
    let w = World::new();
    let pdp = Pdp(&w.engine);
    let start = Timestamp::from_millis(1_767_225_600_000).unwrap();
    let t0 = FixedClock(start);
    let ring = Ring::new(RingParts {
        clock: &t0,
        ..w.ring(&pdp, SECRET).parts()
    });
    let mut state = w.start(&ring, settings());
    let first = w.propose(
        &ring,
        &mut state,
        "delete_path",
        json!({"path": "build/obj/a.o"}),
    );
    let CallStep::Parked(request) = w.process(&ring, &mut state, &first, &mut NoPrompter) else {
        panic!("not parked")
    };
    ring.answer(
        &mut state,
        &request,
        &user("bob"),
        &warrant_kernel::Via::Terminal,
        Answer::Approve(Scope::Session),
    )
    .unwrap();
    ring.resume(&mut state, &user("bob")).unwrap();
    assert_eq!(
        w.process(&ring, &mut state, &first, &mut NoPrompter),
        CallStep::Done
    );
    std::fs::write(format!("{}/build/obj/b.o", w.ws()), "b").unwrap();
    std::fs::write(format!("{}/build/c.o", w.ws()), "c").unwrap();
    std::fs::write(format!("{}/build/obj/d.o", w.ws()), "d").unwrap();

    // Same class (destructive), same pattern (fs.delete <ws>/build/obj/*): covered.
    let same = w.propose(
        &ring,
        &mut state,
        "delete_path",
        json!({"path": "build/obj/b.o"}),
    );
    assert_eq!(
        w.process(&ring, &mut state, &same, &mut NoPrompter),
        CallStep::Done
    );
    assert!(!w.exists("build/obj/b.o"));
    // Another directory: not covered, asked.
    let other_dir = w.propose(
        &ring,
        &mut state,
        "delete_path",
        json!({"path": "build/c.o"}),
    );
    assert!(matches!(
        w.process(&ring, &mut state, &other_dir, &mut NoPrompter),
        CallStep::Parked(_)
    ));
    // After the session expiry (8 h by default): the same pattern is asked again.
    let later = FixedClock(Timestamp::from_millis(start.millis() + 9 * 3_600_000).unwrap());
    let ring = Ring::new(RingParts {
        clock: &later,
        ..ring.parts()
    });
    let expired = w.propose(
        &ring,
        &mut state,
        "delete_path",
        json!({"path": "build/obj/d.o"}),
    );
    assert!(matches!(
        w.process(&ring, &mut state, &expired, &mut NoPrompter),
        CallStep::Parked(_)
    ));
    assert!(w.exists("build/obj/d.o"));

    // Another run of the same person is never covered: the grant lives in this run's log.
    let ring = Ring::new(RingParts {
        clock: &t0,
        ..ring.parts()
    });
    let mut other = w.start(&ring, settings());
    let call = w.propose(
        &ring,
        &mut other,
        "delete_path",
        json!({"path": "build/obj/d.o"}),
    );
    assert!(matches!(
        w.process(&ring, &mut other, &call, &mut NoPrompter),
        CallStep::Parked(_)
    ));
}

/// With a key registered in the directory, bob's approvals must be signed by it: unsigned
/// answers are refused at answer time (recorded); a grant signed by another key, planted in the
/// store with a valid installation HMAC, is refused at time of use (and runs with the checks
/// off: the negative control); a properly signed one runs.
#[test]
fn a_registered_approver_key_must_sign_the_approval() {
    use warrant_kernel::RunEvent;
    use warrant_kernel::approval::set_checks_for_this_thread;

    let bobs = Ed25519ApproverKey::from_seed(&[7; 32]);
    let mallorys = Ed25519ApproverKey::from_seed(&[9; 32]);
    let with_key = |w: &World| {
        let mut r = rules(Some("payments"));
        let dir = r.directory.as_mut().unwrap();
        dir.people.get_mut("bob").unwrap().public_key = Some(bobs.public_hex());
        let _ = w;
        r
    };
    let setup = |w: &World, signer: Option<&dyn ApproverKey>| -> (RunState, String, bool) {
        let pdp = Pdp(&w.engine);
        let governed = Governed {
            inner: &pdp,
            rules: with_key(w),
        };
        let ring = Ring::new(RingParts {
            pdp: &governed,
            ..w.ring(&pdp, SECRET).parts()
        });
        let (mut state, call, request) = parked_on(w, &ring, RiskClass::Change);
        let ok = ring
            .answer_signed(
                &mut state,
                &request,
                &user("bob"),
                &warrant_kernel::Via::Cli,
                Answer::Approve(Scope::Once),
                signer,
            )
            .is_ok();
        (state, call, ok)
    };
    let process = |w: &World, state: &mut RunState, call: &str| {
        let pdp = Pdp(&w.engine);
        let governed = Governed {
            inner: &pdp,
            rules: with_key(w),
        };
        let ring = Ring::new(RingParts {
            pdp: &governed,
            ..w.ring(&pdp, SECRET).parts()
        });
        ring.resume(state, &user("bob")).unwrap();
        w.process(&ring, state, call, &mut NoPrompter)
    };
    let last_kind = |w: &World, state: &RunState| {
        w.store
            .events(&state.run)
            .unwrap()
            .last()
            .unwrap()
            .kind
            .clone()
    };

    // Unsigned, or signed by a key that is not bob's: refused when given, and recorded.
    for signer in [None, Some(&mallorys as &dyn ApproverKey)] {
        let w = World::new();
        let (state, _, ok) = setup(&w, signer);
        assert!(!ok);
        let events = w.store.events(&state.run).unwrap();
        let last = events.last().unwrap();
        assert_eq!(
            (last.kind.as_str(), last.payload["reason"].as_str()),
            ("approval_rejected", Some("unsigned"))
        );
    }

    // Signed by bob's key: runs.
    let w = World::new();
    let (mut state, call, ok) = setup(&w, Some(&bobs));
    assert!(ok);
    assert_eq!(process(&w, &mut state, &call), CallStep::Done);
    assert!(w.exists("x"));

    // A grant carrying a valid HMAC but mallory's signature, planted by someone with the
    // installation secret and store access: forged at time of use; runs with checks off.
    for checks in [true, false] {
        let w = World::new();
        let (mut state, call, ok) = setup(&w, Some(&bobs));
        assert!(ok);
        let events = w.store.events(&state.run).unwrap();
        let last = events.last().unwrap();
        let mut grant = RunEvent::from_stored(last).unwrap();
        if let RunEvent::ApprovalGranted {
            signature,
            binding: Some(b),
            approver,
            scope,
            digest,
            ..
        } = &mut grant
        {
            let input = warrant_kernel::approval::BoundInput {
                base: warrant_kernel::approval::ProofInput {
                    run: &b.run,
                    request: &b.request,
                    park_seq: b.park,
                    digest,
                    approver,
                    scope: *scope,
                },
                expires_at: b.expires_at,
            };
            *signature =
                Some(mallorys.sign_hex(warrant_kernel::approval::bound_message(&input).as_bytes()));
        }
        // Appended over the genuine answer, as an attacker with store access would.
        let pdp = Pdp(&w.engine);
        w.ring(&pdp, SECRET)
            .append_for_tests(&mut state, vec![grant], None, vec![])
            .unwrap();
        set_checks_for_this_thread(checks);
        let step = process(&w, &mut state, &call);
        set_checks_for_this_thread(true);
        if checks {
            assert!(matches!(step, CallStep::Parked(_)));
            assert!(!w.exists("x"));
            let rejected = w
                .store
                .events(&state.run)
                .unwrap()
                .into_iter()
                .find(|e| e.kind == "approval_rejected")
                .unwrap();
            assert_eq!(rejected.payload["reason"], "forged");
            assert_eq!(last_kind(&w, &state), "run_parked");
        } else {
            assert_eq!(step, CallStep::Done);
            assert!(
                w.exists("x"),
                "negative control: the planted signature runs"
            );
        }
    }
}

/// One row: what happens, the rules, the class, where the answer came from, its key, outcome.
type Row<'a> = (
    &'a str,
    ApprovalRules,
    RiskClass,
    Via,
    Option<&'a dyn ApproverKey>,
    &'a str,
);

/// An answer to a request that always needs a person counts only from the run's own prompt or
/// signed with a key registered for the person; the identity proven is the key's, so a process
/// that names itself someone else gains nothing; and an answer from a process a run started
/// never counts. No identity directory here: keys come from the installation's enrollment.
/// Negative control: with authentication off, the unsigned answer from another process runs.
#[test]
fn answers_that_need_a_person_must_be_proven() {
    let alice = user("alice");
    let bob = user("bob");
    let enrolled = |who: &[&str]| ApprovalRules {
        enrolled: who
            .iter()
            .map(|a| ((*a).to_owned(), key_of(a).public_hex()))
            .collect(),
        ..Default::default()
    };
    let (alices, bobs) = (key_of("alice"), key_of("bob"));
    let command = Via::Command("WARRANT_COMMAND=1 is in its environment".into());
    let rows: Vec<Row<'_>> = vec![
        (
            "unsigned, from another process",
            enrolled(&[]),
            RiskClass::Destructive,
            Via::Cli,
            None,
            "refused unauthenticated (W-APPROVAL-025)",
        ),
        (
            "negative control: the same with authentication off",
            ApprovalRules {
                allow_unauthenticated: true,
                ..enrolled(&[])
            },
            RiskClass::Destructive,
            Via::Cli,
            None,
            "runs",
        ),
        (
            "signed with bob's enrolled key",
            enrolled(&["bob"]),
            RiskClass::Destructive,
            Via::Cli,
            Some(&bobs),
            "runs",
        ),
        (
            "named bob, signed with alice's key",
            enrolled(&["alice"]),
            RiskClass::Destructive,
            Via::Cli,
            Some(&alices),
            "refused unauthenticated (W-APPROVAL-025)",
        ),
        (
            "named bob, signed with alice's key, bob enrolled",
            enrolled(&["alice", "bob"]),
            RiskClass::Destructive,
            Via::Cli,
            Some(&alices),
            "refused unsigned (W-APPROVAL-023)",
        ),
        (
            "at the run's own prompt",
            enrolled(&[]),
            RiskClass::Destructive,
            Via::Terminal,
            None,
            "runs",
        ),
        (
            "from a command, even signed",
            enrolled(&["bob"]),
            RiskClass::Destructive,
            command.clone(),
            Some(&bobs),
            "refused from_command (W-APPROVAL-026)",
        ),
        (
            "from a command, a class policy may allow",
            enrolled(&[]),
            RiskClass::Change,
            command,
            None,
            "refused from_command (W-APPROVAL-026)",
        ),
        (
            "unsigned, a class policy may allow",
            enrolled(&[]),
            RiskClass::Change,
            Via::Cli,
            None,
            "runs",
        ),
    ];
    let got: Vec<String> = rows
        .iter()
        .map(|(label, rules, class, via, key, _)| {
            format!(
                "{label}: {}",
                attempt_with(rules.clone(), *class, &alice, &bob, Scope::Once, via, *key)
            )
        })
        .collect();
    let want: Vec<String> = rows
        .iter()
        .map(|(label, .., outcome)| format!("{label}: {outcome}"))
        .collect();
    assert_eq!(got, want);
}

/// A run asks the decision point about its model call before every turn; the ring gives the
/// same request the verdict it already had, and asks again when the request differs.
#[test]
fn a_model_call_verdict_is_asked_once_per_request() {
    use std::cell::Cell;
    use warrant_core::{Action, CanonicalPath};
    use warrant_kernel::{DecisionPoint, ModelGate, PolicyVerdict};

    struct Counting<'a> {
        inner: Pdp<'a>,
        asked: Cell<u32>,
    }
    impl DecisionPoint for Counting<'_> {
        fn decide(&self, p: &Principal, a: &Action, w: &CanonicalPath) -> PolicyVerdict {
            if matches!(a, Action::ProviderCall { .. }) {
                self.asked.set(self.asked.get() + 1);
            }
            self.inner.decide(p, a, w)
        }
        fn digest(&self) -> warrant_core::Digest {
            self.inner.digest()
        }
    }

    let w = World::new();
    let counting = Counting {
        inner: Pdp(&w.engine),
        asked: Cell::new(0),
    };
    let plain = Pdp(&w.engine);
    let ring = Ring::new(RingParts {
        pdp: &counting,
        ..w.ring(&plain, SECRET).parts()
    });
    let mut state = w.start(&ring, settings());
    for _ in 0..3 {
        assert!(matches!(
            ring.gate_model_call(&mut state).unwrap(),
            ModelGate::Go(_)
        ));
    }
    assert_eq!(counting.asked.get(), 1);
    // Another principal (a run of someone else's, driven by the same ring) is asked about.
    state.principal = principal("bob", PrincipalKind::User);
    assert!(matches!(
        ring.gate_model_call(&mut state).unwrap(),
        ModelGate::Go(_)
    ));
    assert_eq!(counting.asked.get(), 2);
}
