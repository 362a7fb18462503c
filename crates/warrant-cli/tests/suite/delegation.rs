//! Delegation tokens from the binary: issued by one principal to another, verified offline with
//! only the public keys, refused for the wrong holder, when expired, when minted by another key,
//! when a re-delegation would widen, and once revoked (in the store, and offline through the
//! list file; without the list the offline verifier still accepts it: the control).

use pretty_assertions::assert_eq;

use super::harness::{Sandbox, parked_request, stderr, stdout};

fn as_actor(sb: &mut Sandbox, actor: &str) {
    sb.extra_env.retain(|(k, _)| k != "WARRANT_ACTOR");
    sb.extra_env.push(("WARRANT_ACTOR".into(), actor.into()));
}

/// Runs and returns (exit code, the `W-…` code on standard error, if any).
fn outcome(out: &std::process::Output) -> (Option<i32>, Option<String>) {
    let err = stderr(out);
    let code = err
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .find(|w| w.starts_with("W-DELEGATE-"))
        .map(str::to_owned);
    (out.status.code(), code)
}

#[test]
fn a_token_is_verified_offline_narrowed_only_and_stopped_by_revocation() {
    let mut sb = Sandbox::init();
    as_actor(&mut sb, "alice");
    let tok = sb.dir.path().join("builder.token");
    let issued = sb.run(&[
        "delegate",
        "issue",
        "--holder",
        "builder@harbour",
        "--verb",
        "fs.read",
        "--verb",
        "fs.write",
        "--resource",
        "/srv/app/*",
        "--ceiling",
        "change",
        "--ttl",
        "1h",
        "--out",
        tok.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(issued.status.code(), Some(0), "{}", stderr(&issued));
    let issued: serde_json::Value = serde_json::from_slice(&issued.stdout).unwrap();
    let id = issued["grant"]["id"].as_str().unwrap().to_owned();
    assert_eq!(issued["grant"]["delegator"], "alice@harbour");
    assert_eq!(
        std::fs::read_to_string(&tok).unwrap().trim(),
        issued["token"].as_str().unwrap()
    );

    // Offline: only the public keys, from a directory with no installation.
    let keys = sb.dir.path().join("keys.pub");
    std::fs::write(&keys, sb.run(&["audit", "keys", "export"]).stdout).unwrap();
    let offline = |sb: &Sandbox, token: &std::path::Path, holder: &str, list: Option<&str>| {
        let mut args = vec![
            "delegate".to_owned(),
            "verify".into(),
            token.to_str().unwrap().into(),
            "--holder".into(),
            holder.into(),
            "--pubkeys".into(),
            keys.to_str().unwrap().into(),
            "--json".into(),
        ];
        if let Some(list) = list {
            args.push("--revoked".into());
            args.push(list.into());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut cmd = sb.std_cmd(&args);
        cmd.current_dir(sb.dir.path());
        cmd.output().unwrap()
    };
    let ok = offline(&sb, &tok, "builder@harbour", None);
    assert_eq!(outcome(&ok), (Some(0), None), "{}", stderr(&ok));
    let verified: serde_json::Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert_eq!(verified["grant"], issued["grant"]);
    assert_eq!(verified["digest"], issued["digest"]);

    // The wrong holder.
    let wrong = offline(&sb, &tok, "mallory@harbour", None);
    assert_eq!(
        outcome(&wrong).1.as_deref(),
        Some("W-DELEGATE-005"),
        "{}",
        stderr(&wrong)
    );

    // Minted by another installation's key: the verifier cannot be made to accept it.
    let mut other = Sandbox::init();
    as_actor(&mut other, "alice");
    let forged = other.dir.path().join("forged.token");
    let made = other.run(&[
        "delegate",
        "issue",
        "--holder",
        "builder@harbour",
        "--verb",
        "fs.*",
        "--resource",
        "/*",
        "--ceiling",
        "irreversible",
        "--out",
        forged.to_str().unwrap(),
    ]);
    assert_eq!(made.status.code(), Some(0), "{}", stderr(&made));
    let refused = offline(&sb, &forged, "builder@harbour", None);
    assert_eq!(
        outcome(&refused).1.as_deref(),
        Some("W-DELEGATE-002"),
        "{}",
        stderr(&refused)
    );

    // Expired: a token valid for no time at all.
    let brief = sb.dir.path().join("brief.token");
    let made = sb.run(&[
        "delegate",
        "issue",
        "--holder",
        "builder@harbour",
        "--verb",
        "fs.read",
        "--resource",
        "/srv/app/*",
        "--ceiling",
        "read",
        "--ttl",
        "0s",
        "--out",
        brief.to_str().unwrap(),
    ]);
    assert_eq!(made.status.code(), Some(0), "{}", stderr(&made));
    let expired = offline(&sb, &brief, "builder@harbour", None);
    assert_eq!(
        outcome(&expired).1.as_deref(),
        Some("W-DELEGATE-003"),
        "{}",
        stderr(&expired)
    );

    // The holder re-delegates a narrower part; a wider one is refused.
    as_actor(&mut sb, "builder");
    let child = sb.dir.path().join("helper.token");
    let narrowed = sb.run(&[
        "delegate",
        "issue",
        "--from",
        tok.to_str().unwrap(),
        "--holder",
        "helper@harbour",
        "--verb",
        "fs.read",
        "--resource",
        "/srv/app/docs/*",
        "--ceiling",
        "read",
        "--ttl",
        "10m",
        "--out",
        child.to_str().unwrap(),
    ]);
    assert_eq!(narrowed.status.code(), Some(0), "{}", stderr(&narrowed));
    let widened = sb.run(&[
        "delegate",
        "issue",
        "--from",
        tok.to_str().unwrap(),
        "--holder",
        "helper@harbour",
        "--verb",
        "fs.delete",
        "--resource",
        "/srv/app/docs/*",
        "--ceiling",
        "read",
    ]);
    assert_eq!(
        outcome(&widened),
        (Some(2), Some("W-DELEGATE-007".into())),
        "{}",
        stderr(&widened)
    );
    assert_eq!(stdout(&widened), "");
    // Someone who does not hold the token cannot hand it on.
    as_actor(&mut sb, "mallory");
    let stolen = sb.run(&[
        "delegate",
        "issue",
        "--from",
        tok.to_str().unwrap(),
        "--holder",
        "mallory@harbour",
        "--verb",
        "fs.read",
        "--resource",
        "/srv/app/*",
        "--ceiling",
        "read",
    ]);
    assert_eq!(
        outcome(&stolen).1.as_deref(),
        Some("W-DELEGATE-005"),
        "{}",
        stderr(&stolen)
    );

    // Revoked: refused by the installation and by an offline verifier given the list; the
    // control: an offline verifier without the list does not know.
    as_actor(&mut sb, "alice");
    let revoked = sb.run(&["delegate", "revoke", &id, "--reason", "job done"]);
    assert_eq!(revoked.status.code(), Some(0), "{}", stderr(&revoked));
    let list = sb.ws.join(".warrant/delegations.revoked");
    assert!(std::fs::read_to_string(&list).unwrap().contains(&id));
    let here = sb.run(&[
        "delegate",
        "verify",
        tok.to_str().unwrap(),
        "--holder",
        "builder@harbour",
    ]);
    assert_eq!(
        outcome(&here).1.as_deref(),
        Some("W-DELEGATE-006"),
        "{}",
        stderr(&here)
    );
    let with_list = offline(&sb, &tok, "builder@harbour", Some(list.to_str().unwrap()));
    assert_eq!(outcome(&with_list).1.as_deref(), Some("W-DELEGATE-006"));
    // The re-delegated token falls with its parent.
    let child_refused = offline(&sb, &child, "helper@harbour", Some(list.to_str().unwrap()));
    assert_eq!(outcome(&child_refused).1.as_deref(), Some("W-DELEGATE-006"));
    let unaware = offline(&sb, &tok, "builder@harbour", None);
    assert_eq!(outcome(&unaware), (Some(0), None));
}

/// The call_refused codes of a run's events, and how many effects started.
fn refused_and_started(events: &[serde_json::Value]) -> (Vec<String>, usize) {
    let refused = events
        .iter()
        .filter(|e| e["kind"] == "call_refused")
        .map(|e| e["payload"]["code"].as_str().unwrap_or_default().to_owned())
        .collect();
    let started = events
        .iter()
        .filter(|e| e["kind"] == "effect_started")
        .count();
    (refused, started)
}

/// A run under a token: each effect is held to the token (an action outside it is refused),
/// and a revocation while the run waits stops its next effect. The control is the same run
/// without the revocation, whose read goes through.
#[test]
fn a_revoked_token_stops_the_next_effect_of_a_run_under_it() {
    let mut sb = Sandbox::init();
    sb.write("notes.txt", "hello\n");
    as_actor(&mut sb, "alice");
    let tok = sb.dir.path().join("tester.token");
    let resource = format!("{}/*", sb.ws.display());
    let issued = sb.run(&[
        "delegate",
        "issue",
        "--holder",
        "tester@harbour",
        "--verb",
        "fs.read",
        "--resource",
        &resource,
        "--ceiling",
        "change",
        "--out",
        tok.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(issued.status.code(), Some(0), "{}", stderr(&issued));
    let issued: serde_json::Value = serde_json::from_slice(&issued.stdout).unwrap();
    let id = issued["grant"]["id"].as_str().unwrap().to_owned();
    let token = issued["token"].as_str().unwrap().to_owned();
    as_actor(&mut sb, "tester");
    let model = sb.transcript(concat!(
        "version: 1\nturns:\n",
        "  - calls:\n      - tool: read_file\n        args: { path: notes.txt }\n",
        "  - calls:\n      - tool: ask_question\n        args: { question: \"Go on?\" }\n",
        "  - calls:\n      - tool: read_file\n        args: { path: notes.txt }\n",
        "  - calls:\n      - tool: write_file\n        args: { path: out.txt, content: x }\n",
        "  - say: done\n"
    ));
    let drive = |sb: &mut Sandbox, revoke: bool| -> Vec<serde_json::Value> {
        let out = sb.run(&[
            "run",
            "--prompt",
            "never",
            "--delegation",
            tok.to_str().unwrap(),
            "--model",
            &model,
            "read notes",
        ]);
        assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
        let req = parked_request(&out);
        let (run, _) = sb.last_run();
        if revoke {
            as_actor(sb, "alice");
            let r = sb.run(&["delegate", "revoke", &id]);
            assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
            as_actor(sb, "tester");
        }
        let answered = sb.run(&["requests", "answer", &req, "--text", "yes"]);
        assert_eq!(answered.status.code(), Some(0), "{}", stderr(&answered));
        let resumed = sb.run(&["resume", &run]);
        assert!(resumed.status.code().is_some(), "{}", stderr(&resumed));
        let shown = sb.json(&["runs", "show", &run, "--json"]);
        shown["events"].as_array().unwrap().clone()
    };
    // The control: the token holds; the second read runs, the write is outside the token.
    let control = drive(&mut sb, false);
    assert_eq!(
        refused_and_started(&control),
        (vec!["W-DELEGATE-017".to_owned()], 2)
    );
    assert!(!sb.exists("out.txt"));
    // The log keeps the grant and the token's digest, never the token.
    let log = serde_json::to_string(&control).unwrap();
    assert!(!log.contains(&token), "the token itself reached the log");
    assert_eq!(
        control[0]["payload"]["settings"]["delegation"]["digest"],
        issued["digest"]
    );
    // Revoked while the run waited: its next effect (and every one after) is refused.
    let revoked = drive(&mut sb, true);
    assert_eq!(
        refused_and_started(&revoked),
        (
            vec!["W-DELEGATE-006".to_owned(), "W-DELEGATE-006".to_owned()],
            1
        )
    );
    // And a new run under it does not start.
    let refused = sb.run(&[
        "run",
        "--prompt",
        "never",
        "--delegation",
        tok.to_str().unwrap(),
        "--model",
        &model,
        "again",
    ]);
    assert_eq!(
        outcome(&refused),
        (Some(2), Some("W-DELEGATE-006".into())),
        "{}",
        stderr(&refused)
    );
}

/// A run submitted under a token is held to it by whichever worker drives it.
#[test]
fn a_worker_drives_a_submitted_run_held_to_its_token() {
    let mut sb = Sandbox::init();
    sb.write("notes.txt", "hello\n");
    as_actor(&mut sb, "alice");
    let tok = sb.dir.path().join("tester.token");
    let resource = format!("{}/*", sb.ws.display());
    let issued = sb.run(&[
        "delegate",
        "issue",
        "--holder",
        "tester@harbour",
        "--verb",
        "fs.read",
        "--resource",
        &resource,
        "--ceiling",
        "read",
        "--out",
        tok.to_str().unwrap(),
    ]);
    assert_eq!(issued.status.code(), Some(0), "{}", stderr(&issued));
    as_actor(&mut sb, "tester");
    let model = sb.transcript(concat!(
        "version: 1\nturns:\n",
        "  - calls:\n      - tool: read_file\n        args: { path: notes.txt }\n",
        "  - calls:\n      - tool: write_file\n        args: { path: notes.txt, content: gone }\n",
        "  - say: done\n"
    ));
    let submitted = sb.json(&[
        "submit",
        "--json",
        "--delegation",
        tok.to_str().unwrap(),
        "--model",
        &model,
        "tidy",
    ]);
    let run = submitted["run"].as_str().unwrap().to_owned();
    let worked = sb.run(&["worker", "--once"]);
    assert_eq!(worked.status.code(), Some(0), "{}", stderr(&worked));
    let shown = sb.json(&["runs", "show", &run, "--json"]);
    let events = shown["events"].as_array().unwrap();
    assert_eq!(
        refused_and_started(events),
        (vec!["W-DELEGATE-017".to_owned()], 1)
    );
    assert_eq!(
        std::fs::read_to_string(sb.ws.join("notes.txt")).unwrap(),
        "hello\n"
    );
}

/// Issues a token from alice to tester for `verbs` on every resource, ceiling `ceiling`; returns
/// its file, id and digest. Leaves the sandbox acting as tester.
fn issue_for_tester(
    sb: &mut Sandbox,
    verbs: &[&str],
    ceiling: &str,
) -> (std::path::PathBuf, String, String) {
    as_actor(sb, "alice");
    let tok = sb.dir.path().join(format!("tester-{}.token", verbs.len()));
    let mut args = vec!["delegate", "issue", "--holder", "tester@harbour"];
    for v in verbs {
        args.extend_from_slice(&["--verb", v]);
    }
    args.extend_from_slice(&[
        "--resource",
        "*",
        "--ceiling",
        ceiling,
        "--out",
        tok.to_str().unwrap(),
        "--json",
    ]);
    let issued = sb.run(&args);
    assert_eq!(issued.status.code(), Some(0), "{}", stderr(&issued));
    let issued: serde_json::Value = serde_json::from_slice(&issued.stdout).unwrap();
    as_actor(sb, "tester");
    (
        tok,
        issued["grant"]["id"].as_str().unwrap().to_owned(),
        issued["digest"].as_str().unwrap().to_owned(),
    )
}

/// The token is checked before policy: a delete outside it (the token allows reads only) is
/// refused without an approval request ever being raised, and the run goes on to its end. The
/// negative control (debug-only `WARRANT_TEST_DISABLE=delegation-first`, the token checked only
/// at the effect) asks a person first: the run parks on an approval request.
#[test]
fn an_action_outside_the_token_is_refused_before_anyone_is_asked() {
    let mut sb = Sandbox::init();
    sb.write("notes/a.txt", "hello\n");
    let (tok, _, _) = issue_for_tester(&mut sb, &["fs.read"], "destructive");
    let model = sb.transcript(concat!(
        "version: 1\nturns:\n",
        "  - calls:\n      - tool: delete_path\n        args: { path: notes, recursive: true }\n",
        "  - say: done\n"
    ));
    let args = [
        "run",
        "--prompt",
        "never",
        "--delegation",
        tok.to_str().unwrap(),
        "--model",
        &model,
        "clear notes",
    ];
    let out = sb.run(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(sb.exists("notes/a.txt"));
    let (_, events) = sb.last_run();
    assert_eq!(
        refused_and_started(&events),
        (vec!["W-DELEGATE-017".to_owned()], 0)
    );
    for kind in ["policy_decided", "approval_requested"] {
        assert!(
            !events.iter().any(|e| e["kind"] == kind),
            "{kind} in {events:?}"
        );
    }
    let pending = sb.run(&["approvals", "list", "--all", "--json"]);
    assert!(!stdout(&pending).contains("notes"), "{}", stdout(&pending));

    // The control: checked only at the effect, the delete is asked of a person first.
    let late = sb
        .std_cmd(&args)
        .env("WARRANT_TEST_DISABLE", "delegation-first")
        .output()
        .unwrap();
    assert_eq!(late.status.code(), Some(10), "{}", stderr(&late));
    let (_, events) = sb.last_run();
    assert!(events.iter().any(|e| e["kind"] == "approval_requested"));
}

/// A subagent of a run under a token acts under a token minted for it, narrowed from its
/// parent's (its own id and digest in its `run_started`, the parent's id as its parent), never
/// the parent's token itself; revoking the parent's token while the child waits for a person
/// stops the child's next effect. The control, unrevoked, deletes.
#[test]
fn a_subagent_acts_under_a_narrowed_token_and_revoking_the_parents_stops_it() {
    let transcript = r#"
version: 1
turns:
  - calls:
      - tool: spawn_agent
        args: { task: "clear the notes" }
  - say: "Parent done."
children:
  - turns:
      - calls:
          - tool: delete_path
            args: { path: "notes", recursive: true }
      - say: "Notes cleared."
"#;
    for revoke in [false, true] {
        let mut sb = Sandbox::init();
        sb.write("notes/a.txt", "hello\n");
        let (tok, id, digest) = issue_for_tester(&mut sb, &["fs.*", "agent.spawn"], "destructive");
        let model = sb.transcript(transcript);
        let out = sb.run(&[
            "run",
            "--delegation",
            tok.to_str().unwrap(),
            "--model",
            &model,
            "clean up",
        ]);
        assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
        let request = parked_request(&out);
        let runs = sb.json(&["runs", "list", "--json"]);
        let mut ids: Vec<String> = runs["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["run"].as_str().unwrap().to_owned())
            .collect();
        ids.sort_by_key(String::len);
        let (parent, child) = (ids[0].clone(), ids[1].clone());
        let started = |run: &str| -> serde_json::Value {
            sb.json(&["runs", "show", run, "--json"])["events"][0]["payload"]["settings"]
                ["delegation"]
                .clone()
        };
        let (p, c) = (started(&parent), started(&child));
        assert_eq!(p["digest"], digest.as_str());
        assert_eq!(p["grant"]["id"], id.as_str());
        assert_ne!(
            c["digest"], p["digest"],
            "the child holds the parent's token"
        );
        assert_ne!(c["grant"]["id"], p["grant"]["id"]);
        assert_eq!(c["grant"]["parent"], id.as_str());
        assert_eq!(c["grant"]["holder"], "tester@harbour");
        assert_eq!(c["grant"]["ceiling"], p["grant"]["ceiling"]);
        if revoke {
            as_actor(&mut sb, "alice");
            let r = sb.run(&["delegate", "revoke", &id]);
            assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
            as_actor(&mut sb, "tester");
        }
        let ok = sb.run(&["approve", &request]);
        assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
        let resumed = sb.run(&["resume", &parent]);
        assert!(resumed.status.code().is_some(), "{}", stderr(&resumed));
        let child_events = sb.json(&["runs", "show", &child, "--json"])["events"]
            .as_array()
            .unwrap()
            .clone();
        if revoke {
            assert!(sb.exists("notes/a.txt"), "the revoked child deleted");
            assert_eq!(
                refused_and_started(&child_events),
                (vec!["W-DELEGATE-006".to_owned()], 0)
            );
        } else {
            assert!(!sb.exists("notes"), "{}", stderr(&resumed));
            assert_eq!(refused_and_started(&child_events), (vec![], 1));
        }
    }
}
