//! The autonomy envelope from the binary: a kill switch set by one process stops the next
//! effect of a run another process drives (a worker, a `warrant run`), on SQLite and on
//! PostgreSQL; it fails closed when the switch cannot be read; lifting it is a person's act.

use std::process::{Child, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use warrant_testkit::pg::TestDb;

use super::harness::{Sandbox, stderr, stdout, wait_until};

/// An OpenAI-compatible endpoint whose second answer waits for the test: turn 1 writes
/// `a.txt`; turn 2 (held until the gate opens) writes `b.txt`; then "done". What the test does
/// while turn 2 is held happens, by construction, between the two effects.
struct GatedModel {
    url: String,
    seen: Arc<AtomicUsize>,
    gate: mpsc::Sender<()>,
}

fn gated_model() -> GatedModel {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", server.server_addr().to_ip().unwrap());
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    let (gate, opened) = mpsc::channel::<()>();
    let opened = Arc::new(Mutex::new(opened));
    thread::spawn(move || {
        for mut req in server.incoming_requests() {
            let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
            let opened = opened.clone();
            thread::spawn(move || {
                let mut body = String::new();
                req.as_reader().read_to_string(&mut body).unwrap();
                let call = |id: &str, file: &str| {
                    json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
                        "function": {"name": "write_file", "arguments": json!({"path": file, "content": "written\n"}).to_string()}}]})
                };
                let message = match n {
                    1 => call("call_1", "a.txt"),
                    2 => {
                        let _ = opened.lock().unwrap().recv_timeout(Duration::from_secs(60));
                        call("call_2", "b.txt")
                    }
                    _ => json!({"role": "assistant", "content": "done"}),
                };
                let reply = json!({"id": "x", "object": "chat.completion", "created": 0, "model": "gpt-test",
                    "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]});
                let header =
                    tiny_http::Header::from_bytes("Content-Type", "application/json").unwrap();
                let _ = req.respond(
                    tiny_http::Response::from_string(reply.to_string()).with_header(header),
                );
            });
        }
    });
    GatedModel { url, seen, gate }
}

fn events(sb: &Sandbox, run: &str) -> Vec<Value> {
    sb.json(&["runs", "show", run, "--json"])["events"]
        .as_array()
        .unwrap()
        .clone()
}

/// A worker in its own process drives a submitted run; while the model's second turn is held,
/// `what` runs from this process; then the turn is released and the worker finishes.
fn worker_scenario(sb: &mut Sandbox, what: impl FnOnce(&Sandbox, &str)) -> (String, Output) {
    let model = gated_model();
    sb.extra_env
        .push(("OPENAI_BASE_URL".into(), model.url.clone()));
    let submitted = sb.json(&[
        "submit",
        "--json",
        "--model",
        "openai:gpt-test",
        "two files",
    ]);
    let run = submitted["run"].as_str().unwrap().to_owned();
    let worker: Child = sb
        .std_cmd(&["worker", "--once", "--id", "worker-k"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until(
        "the worker to ask for turn 2",
        Duration::from_secs(30),
        || model.seen.load(Ordering::SeqCst) >= 2,
    );
    assert!(sb.exists("a.txt"), "turn 1's effect ran before the switch");
    what(sb, &run);
    model.gate.send(()).unwrap();
    let out = worker.wait_with_output().unwrap();
    (run, out)
}

fn kill_stops_a_worker_in_another_process(mut sb: Sandbox) {
    let (run, worker) = worker_scenario(&mut sb, |sb, _| {
        let out = sb.run(&["kill", "--all", "--reason", "incident 42"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(
            stdout(&out).starts_with("set      all by tester at "),
            "{}",
            stdout(&out)
        );
    });
    assert_eq!(worker.status.code(), Some(0), "{}", stderr(&worker));
    assert!(
        !sb.exists("b.txt"),
        "the effect after the switch must not run"
    );
    let all = events(&sb, &run);
    let tail: Vec<Value> = all[all.len() - 2..]
        .iter()
        .map(|e| json!({"kind": e["kind"], "payload": e["payload"]}))
        .collect();
    let at = tail[0]["payload"]["halt"]["set_at"].clone();
    let reason = format!(
        "stopped by the kill switch (all) set by tester at {}: incident 42",
        at.as_str().unwrap()
    );
    assert_eq!(
        tail,
        vec![
            json!({"kind": "halted", "payload": {"code": "W-ENVELOPE-001", "halt": {
                "control": "kill_switch", "scope": "all", "reason": "incident 42",
                "set_by": "tester", "set_at": at}}}),
            json!({"kind": "run_ended", "payload": {"outcome": {"status": "stopped", "reason": reason}}}),
        ]
    );
    // The refusal is in the signed audit trail.
    let audit = sb.run(&["audit", "query", "--run", &run, "--json"]);
    assert!(
        stdout(&audit).contains("W-ENVELOPE-001"),
        "{}",
        stdout(&audit)
    );
    assert_eq!(sb.run(&["audit", "verify"]).status.code(), Some(0));
    // Never retried: the run is final, and a new run under the switch stops before acting.
    let queued = sb.json(&["runs", "show", &run, "--json"]);
    assert_eq!(queued["run"]["status"], "stopped");
    let model = sb.transcript(
        "version: 1\nturns:\n  - calls:\n      - tool: write_file\n        args: { path: c.txt, content: x }\n  - say: done\n",
    );
    let blocked = sb.run(&["run", "--model", &model, "write c"]);
    assert_eq!(blocked.status.code(), Some(3), "{}", stderr(&blocked));
    assert!(!sb.exists("c.txt"));
    // Lifted by a person, the next run acts again.
    let listed = sb.json(&["kill", "--list", "--json"]);
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    let lifted = sb.run(&["kill", "--lift", "--all", "--reason", "resolved"]);
    assert_eq!(lifted.status.code(), Some(0), "{}", stderr(&lifted));
    assert!(
        stdout(&lifted).starts_with("lifted   all by tester"),
        "{}",
        stdout(&lifted)
    );
    assert_eq!(sb.json(&["kill", "--list", "--json"]), json!([]));
    let again = sb.run(&["run", "--model", &model, "write c"]);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    assert!(sb.exists("c.txt"));
}

#[test]
fn kill_from_another_process_stops_a_worker_on_sqlite() {
    kill_stops_a_worker_in_another_process(Sandbox::init());
}

#[test]
fn kill_from_another_process_stops_a_worker_on_postgres() {
    let db = TestDb::new();
    kill_stops_a_worker_in_another_process(Sandbox::init_with(Some(db.url.clone())));
}

/// The negative control: the same two processes, the switch set for another tenant, another
/// actor and another run: the worker's run is not covered and writes `b.txt`.
#[test]
fn a_switch_for_someone_else_does_not_stop_the_run() {
    let mut sb = Sandbox::init();
    let (run, worker) = worker_scenario(&mut sb, |sb, _| {
        for args in [
            ["kill", "--tenant", "other-tenant"],
            ["kill", "--actor", "someone-else"],
        ] {
            let out = sb.run(&args);
            assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        }
    });
    assert_eq!(worker.status.code(), Some(0), "{}", stderr(&worker));
    assert!(sb.exists("b.txt"));
    assert_eq!(
        sb.json(&["runs", "show", &run, "--json"])["run"]["status"],
        "completed"
    );
}

/// Each scope that covers the run stops it: its tenant, its actor, the run itself. And a
/// `warrant run` in its own process exits 3.
#[test]
fn tenant_actor_and_run_switches_each_stop_a_run_with_exit_3() {
    for scope in ["tenant", "actor", "run"] {
        let sb = Sandbox::init();
        let model = gated_model();
        let mut sb = sb;
        sb.extra_env
            .push(("OPENAI_BASE_URL".into(), model.url.clone()));
        let child = sb
            .std_cmd(&[
                "run",
                "--prompt",
                "never",
                "--model",
                "openai:gpt-test",
                "two files",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_until("the run to ask for turn 2", Duration::from_secs(30), || {
            model.seen.load(Ordering::SeqCst) >= 2
        });
        let runs = sb.json(&["runs", "list", "--json"]);
        let run = runs["runs"][0]["run"].as_str().unwrap().to_owned();
        let target = match scope {
            "tenant" => "harbour".to_owned(),
            "actor" => "tester".to_owned(),
            _ => run.clone(),
        };
        let out = sb.run(&["kill", &format!("--{scope}"), &target]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        model.gate.send(()).unwrap();
        let done = child.wait_with_output().unwrap();
        assert_eq!(done.status.code(), Some(3), "{scope}: {}", stderr(&done));
        assert!(!sb.exists("b.txt"), "{scope}");
        let all = events(&sb, &run);
        let halted = all.iter().find(|e| e["kind"] == "halted").unwrap();
        assert_eq!(halted["payload"]["halt"]["scope"], scope);
        assert_eq!(halted["payload"]["halt"]["target"], target.as_str());
    }
}

/// Fail closed: when the switch cannot be read (its table is gone), the next effect does not
/// happen and the run says why.
#[test]
fn an_unreadable_switch_stops_the_run() {
    let mut sb = Sandbox::init();
    let db = sb.ws.join(".warrant/store.db");
    let (run, worker) = worker_scenario(&mut sb, |_, _| {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch("DROP TABLE kill_switches").unwrap();
    });
    assert_eq!(worker.status.code(), Some(0), "{}", stderr(&worker));
    assert!(!sb.exists("b.txt"));
    let all = events(&sb, &run);
    let halted = all.iter().find(|e| e["kind"] == "halted").unwrap();
    assert_eq!(halted["payload"]["code"], "W-ENVELOPE-002");
    assert!(
        halted["payload"]["halt"]["error"]
            .as_str()
            .unwrap()
            .contains("kill_switches"),
        "{halted}"
    );
}

/// A command of a run cannot lift the switch (it would free the run that was stopped); setting
/// one needs a run that exists; a scope is required.
#[test]
fn lifting_from_a_command_and_bad_scopes_are_refused() {
    let mut sb = Sandbox::init();
    assert_eq!(sb.run(&["kill", "--all"]).status.code(), Some(0));
    let again = sb.run(&["kill", "--all", "--reason", "second"]);
    assert!(
        stdout(&again).starts_with("already set all by tester"),
        "{}",
        stdout(&again)
    );
    sb.extra_env.push(("WARRANT_COMMAND".into(), "r-1".into()));
    let out = sb.run(&["kill", "--lift", "--all"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("W-APPROVAL-026"), "{}", stderr(&out));
    assert_eq!(
        sb.json(&["kill", "--list", "--json"])
            .as_array()
            .unwrap()
            .len(),
        1
    );
    sb.extra_env.pop();
    let unknown = sb.run(&["kill", "--run", "run-0000abcd"]);
    assert_eq!(unknown.status.code(), Some(2), "{}", stderr(&unknown));
    let none = sb.run(&["kill"]);
    assert_eq!(none.status.code(), Some(2));
    assert!(
        stderr(&none).contains("W-ENVELOPE-004"),
        "{}",
        stderr(&none)
    );
}

const THREE_WRITES: &str = "version: 1\nturns:\n  - calls:\n      - tool: write_file\n        args: { path: one.txt, content: x }\n  - calls:\n      - tool: write_file\n        args: { path: two.txt, content: x }\n  - calls:\n      - tool: write_file\n        args: { path: three.txt, content: x }\n  - say: done\n";

/// `[rate.kinds.fs]`: two `fs` actions at once per principal, refilled at one a minute (so
/// nothing refills while the test runs). The third write is refused, typed and audited; the
/// bucket is the store's, so the same person's next run, in another process, is refused at its
/// first write; another person has a bucket of their own; without `[rate]` all three land.
#[test]
fn a_rate_limit_is_shared_by_every_process_of_a_principal() {
    let sb = Sandbox::init();
    let cfg = sb.ws.join(".warrant/config.toml");
    let mut text = std::fs::read_to_string(&cfg).unwrap_or_default();
    text.push_str("\n[rate.kinds.fs]\nper_minute = 1\nburst = 2\n");
    std::fs::write(&cfg, text).unwrap();
    let model = sb.transcript(THREE_WRITES);
    let out = sb.run(&["run", "--model", &model, "three files"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(sb.exists("one.txt") && sb.exists("two.txt") && !sb.exists("three.txt"));
    let runs = sb.json(&["runs", "list", "--json"]);
    let run = runs["runs"][0]["run"].as_str().unwrap().to_owned();
    let refused: Vec<Value> = events(&sb, &run)
        .into_iter()
        .filter(|e| e["kind"] == "call_refused")
        .map(|e| e["payload"].clone())
        .collect();
    assert_eq!(
        refused,
        vec![
            json!({"call_id": refused[0]["call_id"], "tool": "write_file", "code": "W-ENVELOPE-005",
            "message": "rate limit: `fs` actions of harbour/tester may be 1 a minute (at most 2 at once); the next is possible in 60 s. Nothing ran, and it is not retried"})
        ]
    );
    let audit = sb.run(&["audit", "query", "--run", &run, "--json"]);
    assert!(stdout(&audit).contains("W-ENVELOPE-005"));

    // Another process, the same principal: the bucket is still empty.
    std::fs::remove_file(sb.ws.join("one.txt")).unwrap();
    let again = sb.run(&["run", "--model", &model, "three files"]);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    assert!(!sb.exists("one.txt"));

    // Another person: a bucket of their own.
    let other = sb
        .std_cmd(&["run", "--model", &model, "three files"])
        .env("WARRANT_ACTOR", "someone-else")
        .output()
        .unwrap();
    assert_eq!(other.status.code(), Some(0), "{}", stderr(&other));
    assert!(sb.exists("one.txt"));

    // The control: no `[rate]`, and every write lands.
    let free = Sandbox::init();
    let model = free.transcript(THREE_WRITES);
    let out = free.run(&["run", "--model", &model, "three files"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(free.exists("one.txt") && free.exists("two.txt") && free.exists("three.txt"));
}

/// The dynamic half: a write (`change` by what `write_file` does) to a credential file is
/// `secret` by its content, above the ceiling `change` of a composition that holds statically;
/// it is refused at run time before any person is asked, typed and audited, and the plain
/// write runs. `[run] ceiling` and the menu's count the same way; the control, without a
/// ceiling, leaves the credential write to policy (which denies it: no `call_refused`).
#[test]
fn an_action_above_the_runs_ceiling_is_refused_before_anyone_is_asked() {
    let transcript = "version: 1\nturns:\n  - calls:\n      - tool: write_file\n        args: { path: note.txt, content: x }\n  - calls:\n      - tool: write_file\n        args: { path: .env, content: \"TOKEN=1\" }\n  - say: done\n";
    let menu = "[menus.tidy]\ntools = [\"write_file\", \"read_file\"]\n";
    for config in [
        format!("\n[run]\nceiling = \"change\"\nmenu = \"tidy\"\n{menu}"),
        format!("\n[run]\nmenu = \"tidy\"\n{menu}ceiling = \"change\"\n"),
    ] {
        let sb = Sandbox::init();
        std::fs::write(sb.managed.join("config.toml"), &config).unwrap();
        let model = sb.transcript(transcript);
        let out = sb.run(&["run", "--prompt", "never", "--model", &model, "tidy"]);
        assert_eq!(out.status.code(), Some(0), "{config}: {}", stderr(&out));
        assert!(sb.exists("note.txt"), "{config}");
        let env = std::fs::read_to_string(sb.ws.join(".env")).unwrap_or_default();
        assert!(!env.contains("TOKEN=1"), "{config}");
        let runs = sb.json(&["runs", "list", "--json"]);
        let run = runs["runs"][0]["run"].as_str().unwrap().to_owned();
        let all = events(&sb, &run);
        assert!(
            !all.iter().any(|e| e["kind"] == "approval_requested"),
            "{config}"
        );
        let refused: Vec<Value> = all
            .iter()
            .filter(|e| e["kind"] == "call_refused")
            .map(|e| json!({"tool": e["payload"]["tool"], "code": e["payload"]["code"], "message": e["payload"]["message"]}))
            .collect();
        assert_eq!(
            refused,
            vec![json!({"tool": "write_file", "code": "W-ENVELOPE-006",
                "message": "this call reaches the risk class `secret`, above the run's ceiling `change`; nothing ran"})],
            "{config}"
        );
        let audit = sb.run(&["audit", "query", "--run", &run, "--json"]);
        assert!(stdout(&audit).contains("W-ENVELOPE-006"));
    }
    let control = Sandbox::init();
    std::fs::write(
        control.managed.join("config.toml"),
        format!("\n[run]\nmenu = \"tidy\"\n{menu}"),
    )
    .unwrap();
    let model = control.transcript(transcript);
    let out = control.run(&["run", "--prompt", "never", "--model", &model, "tidy"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let runs = control.json(&["runs", "list", "--json"]);
    let run = runs["runs"][0]["run"].as_str().unwrap().to_owned();
    let all = events(&control, &run);
    assert!(!all.iter().any(|e| e["kind"] == "call_refused"));
    // Without a ceiling it is policy's to decide (the default policy denies credential files).
    assert_eq!(
        all.iter().filter(|e| e["kind"] == "effect_denied").count(),
        1
    );
}

/// The static half: `warrant verify` names each tool of a composition that can reach worse
/// than its ceiling, with its class (exit 1), and passes a narrower menu (exit 0); a run of the
/// failing composition stops before its first step (exit 3, a typed `halted` event in its
/// audited log, no model turn, nothing written). The negative control: with the check
/// switched off (debug-only `WARRANT_TEST_DISABLE=static-ceiling`) the same run starts and
/// its write lands.
#[test]
fn a_composition_that_can_reach_above_its_ceiling_is_reported_and_never_starts() {
    let sb = Sandbox::init();
    std::fs::write(
        sb.managed.join("config.toml"),
        "\n[run]\nceiling = \"change\"\nmenu = \"wide\"\n[menus.wide]\ntools = [\"write_file\", \"delete_path\", \"run_command\", \"git_status\"]\n[menus.tidy]\ntools = [\"read_file\", \"write_file\", \"git_status\", \"ask_question\"]\n",
    )
    .unwrap();
    let verify = |args: &[&str]| -> (Option<i32>, Value) {
        let mut all = vec!["verify", "--json"];
        all.extend_from_slice(args);
        let out = sb.run(&all);
        (
            out.status.code(),
            serde_json::from_slice(&out.stdout).unwrap(),
        )
    };
    let (code, wide) = verify(&[]);
    assert_eq!(code, Some(1), "{wide}");
    assert_eq!(wide["holds"], false);
    assert_eq!(wide["composition"]["menu"], "wide");
    assert_eq!(wide["composition"]["ceiling"], "change");
    assert_eq!(
        wide["composition"]["above"],
        json!([{"tool": "delete_path", "class": "destructive"}, {"tool": "run_command", "class": "irreversible"}])
    );
    let (code, tidy) = verify(&["--menu", "tidy"]);
    assert_eq!(code, Some(0), "{tidy}");
    assert_eq!(tidy["holds"], true);
    assert_eq!(
        tidy["composition"]["tools"],
        json!([{"tool": "ask_question", "class": "read"}, {"tool": "git_status", "class": "read"},
               {"tool": "read_file", "class": "read"}, {"tool": "write_file", "class": "change"}])
    );
    let text = sb.run(&["verify"]);
    assert_eq!(text.status.code(), Some(1));
    let text = stdout(&text);
    assert!(text.contains("W-ENVELOPE-007"), "{text}");
    assert!(
        text.contains("delete_path") && text.contains("irreversible"),
        "{text}"
    );
    // An agent profile narrows the composition by the tools it denies: the code reviewer
    // (reads, searches and git reads only) holds under the same wide menu's ceiling.
    sb.write(
        ".agents/code-reviewer.agent.yaml",
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../warrant-oap/tests/fixtures/oap/examples/code-reviewer.agent.yaml"),
        )
        .unwrap(),
    );
    let (code, reviewer) = verify(&["--menu", "tidy", "--profile", "code-reviewer"]);
    assert_eq!(code, Some(0), "{reviewer}");
    assert_eq!(reviewer["composition"]["profile"], "code-reviewer");
    assert!(
        reviewer["composition"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["tool"] != "write_file"),
        "{reviewer}"
    );
    let unknown = sb.run(&["verify", "--menu", "nosuch"]);
    assert_eq!(unknown.status.code(), Some(2), "{}", stderr(&unknown));

    let transcript = "version: 1\nturns:\n  - calls:\n      - tool: write_file\n        args: { path: note.txt, content: x }\n  - say: done\n";
    let model = sb.transcript(transcript);
    let out = sb.run(&["run", "--prompt", "never", "--model", &model, "tidy"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("W-ENVELOPE-007") || stdout(&out).contains("W-ENVELOPE-007"));
    assert!(!sb.exists("note.txt"));
    let runs = sb.json(&["runs", "list", "--json"]);
    let run = runs["runs"][0]["run"].as_str().unwrap().to_owned();
    let kinds: Vec<Value> = events(&sb, &run)
        .iter()
        .map(|e| e["kind"].clone())
        .collect();
    assert_eq!(
        kinds,
        vec![json!("run_started"), json!("halted"), json!("run_ended")]
    );
    let halted = events(&sb, &run)[1]["payload"].clone();
    assert_eq!(halted["code"], "W-ENVELOPE-007");
    assert_eq!(halted["halt"]["control"], "ceiling_exceeded");
    let audit = sb.run(&["audit", "query", "--run", &run, "--json"]);
    assert!(stdout(&audit).contains("W-ENVELOPE-007"));

    // The negative control: the check off, the same composition starts and acts.
    let off = sb
        .std_cmd(&["run", "--prompt", "never", "--model", &model, "tidy"])
        .env("WARRANT_TEST_DISABLE", "static-ceiling")
        .output()
        .unwrap();
    assert_eq!(off.status.code(), Some(0), "{}", stderr(&off));
    assert!(sb.exists("note.txt"));
}
