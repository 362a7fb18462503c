//! Several processes, one run: fenced workers on PostgreSQL, two resumes at once,
//! cancellation and deadlines, and a resume under a changed policy.

use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use warrant_testkit::pg::TestDb;

use super::harness::{Sandbox, parked_request, stderr, stdout, wait_until};

fn signal(child: &Child, sig: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, sig).unwrap();
}

fn events(sb: &Sandbox, run: &str) -> Value {
    sb.json(&["runs", "show", run, "--json"])
}

fn kinds_of(shown: &Value) -> Vec<String> {
    shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_owned())
        .collect()
}

/// An OpenAI-compatible endpoint that takes `delay` to answer each request: a tool call that
/// creates out.txt, then "done" once the tool result is in the conversation.
fn slow_model(delay: Duration) -> (String, Arc<AtomicUsize>) {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", server.server_addr().to_ip().unwrap());
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    thread::spawn(move || {
        for mut req in server.incoming_requests() {
            counter.fetch_add(1, Ordering::SeqCst);
            thread::spawn(move || {
                let mut body = String::new();
                req.as_reader().read_to_string(&mut body).unwrap();
                let request: Value = serde_json::from_str(&body).unwrap();
                let answered = request["messages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|m| m["role"] == "tool");
                let message = if answered {
                    json!({"role": "assistant", "content": "done"})
                } else {
                    json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "write_file", "arguments": "{\"path\":\"out.txt\",\"content\":\"written once\\n\"}"}}]})
                };
                thread::sleep(delay);
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
    (url, seen)
}

/// Two workers, one run. Worker A leases it and is paused (SIGSTOP) in the middle of a model
/// call, past its lease; worker B takes the run over and completes it. When A wakes up, its
/// append carries a stale fencing token: refused and recorded. The run completed exactly once.
#[test]
fn a_paused_worker_is_fenced_out_and_the_run_completes_once() {
    let db = TestDb::new();
    let mut sb = Sandbox::init_with(Some(db.url.clone()));
    let (url, requests) = slow_model(Duration::from_millis(1500));
    sb.extra_env.push(("OPENAI_BASE_URL".into(), url));
    let submitted = sb.json(&[
        "submit",
        "--json",
        "--model",
        "openai:gpt-test",
        "write out.txt",
    ]);
    let run = submitted["run"].as_str().unwrap().to_owned();

    let mut a = sb
        .std_cmd(&[
            "worker",
            "--lease-ms",
            "1000",
            "--poll-ms",
            "100",
            "--id",
            "worker-a",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until(
        "worker A to call the model",
        Duration::from_secs(20),
        || requests.load(Ordering::SeqCst) >= 1,
    );
    signal(&a, rustix::process::Signal::STOP);
    // Past A's lease: nobody renews it while A is stopped.
    thread::sleep(Duration::from_millis(2500));

    let b = sb.run(&[
        "worker",
        "--once",
        "--lease-ms",
        "1000",
        "--poll-ms",
        "100",
        "--id",
        "worker-b",
    ]);
    assert_eq!(b.status.code(), Some(0), "{}", stderr(&b));
    assert!(stderr(&b).contains("leased"), "{}", stderr(&b));
    let shown = events(&sb, &run);
    assert_eq!(shown["run"]["status"], "completed", "{}", shown["run"]);

    signal(&a, rustix::process::Signal::CONT);
    wait_until(
        "worker A's stale append to be refused",
        Duration::from_secs(20),
        || {
            !events(&sb, &run)["fence_rejections"]
                .as_array()
                .unwrap()
                .is_empty()
        },
    );
    a.kill().unwrap();
    a.wait().unwrap();

    let shown = events(&sb, &run);
    let rejections = shown["fence_rejections"].as_array().unwrap();
    assert!(
        rejections[0]["presented"].as_u64().unwrap() < rejections[0]["current"].as_u64().unwrap()
    );
    // A's answer was held for its call's first batch, so the refused append is that batch
    // whole: its effect never started.
    assert_eq!(
        rejections[0]["kinds"],
        json!([
            "model_responded",
            "action_proposed",
            "policy_decided",
            "effect_started"
        ])
    );
    let kinds = kinds_of(&shown);
    assert_eq!(
        kinds.iter().filter(|k| *k == "effect_completed").count(),
        1,
        "{kinds:?}"
    );
    assert_eq!(
        kinds.iter().filter(|k| *k == "model_responded").count(),
        2,
        "{kinds:?}"
    );
    assert_eq!(kinds.last().unwrap(), "run_ended");
    assert_eq!(
        std::fs::read_to_string(sb.ws.join("out.txt")).unwrap(),
        "written once\n"
    );
    let verify = sb.run(&["audit", "verify"]);
    assert_eq!(verify.status.code(), Some(0), "{}", stdout(&verify));
}

const SLOW: &str = "version: 1\nturns:\n  - calls:\n      - tool: run_command\n        args: { argv: [sh, -c, \"sleep 30\"] }\n  - say: done\n";

fn start_slow(sb: &Sandbox, extra: &[&str]) -> (Child, String) {
    let model = sb.transcript(SLOW);
    let mut args = vec!["run", "--prompt", "always", "--model", &model];
    args.extend_from_slice(extra);
    args.push("wait");
    let mut child = sb
        .std_cmd(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"o\n").unwrap();
    let mut run = String::new();
    wait_until("the command to start", Duration::from_secs(20), || {
        let runs = sb.json(&["runs", "list", "--json"]);
        match runs["runs"].as_array().unwrap().last() {
            Some(r) => {
                run = r["run"].as_str().unwrap().to_owned();
                kinds_of(&events(sb, &run)).contains(&"effect_started".to_owned())
            }
            None => false,
        }
    });
    (child, run)
}

#[test]
fn cancelling_a_running_run_kills_its_command_and_records_who() {
    let sb = Sandbox::init();
    let (child, run) = start_slow(&sb, &[]);
    let started = Instant::now();
    let out = sb.run(&["runs", "cancel", &run, "--reason", "taking too long"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("stops it at its next effect boundary"),
        "{}",
        stdout(&out)
    );
    let done = child.wait_with_output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(
        done.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let shown = events(&sb, &run);
    let all = shown["events"].as_array().unwrap();
    let completed = all
        .iter()
        .find(|e| e["kind"] == "effect_completed")
        .unwrap();
    assert!(
        completed["payload"]["result"]["stopped"]
            .as_str()
            .unwrap()
            .contains("cancelled by tester")
    );
    let end = all.last().unwrap();
    assert_eq!(end["payload"]["outcome"]["status"], "stopped");
    assert!(
        end["payload"]["outcome"]["reason"]
            .as_str()
            .unwrap()
            .contains("taking too long")
    );
}

#[test]
fn a_deadline_stops_the_run_and_its_command() {
    let sb = Sandbox::init();
    let (child, run) = start_slow(&sb, &["--deadline", "1s"]);
    let done = child.wait_with_output().unwrap();
    assert_eq!(
        done.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let shown = events(&sb, &run);
    let end = shown["events"].as_array().unwrap().last().unwrap().clone();
    assert!(
        end["payload"]["outcome"]["reason"]
            .as_str()
            .unwrap()
            .contains("deadline"),
        "{end}"
    );
    let bad = sb.run(&[
        "run",
        "--deadline",
        "soon",
        "--model",
        &sb.quickstart_model(),
        "t",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("W-CLI-003"));
}

#[test]
fn two_resumes_at_once_one_drives_the_other_is_told() {
    let sb = Sandbox::init();
    sb.review_commands();
    let model = sb.transcript(SLOW);
    let out = sb.run(&["run", "--prompt", "never", "--model", &model, "wait"]);
    let request = parked_request(&out);
    let (run, _) = sb.last_run();
    assert_eq!(sb.run(&["approve", &request]).status.code(), Some(0));
    let first = sb
        .std_cmd(&["resume", &run])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until(
        "the first resume to start the command",
        Duration::from_secs(20),
        || kinds_of(&events(&sb, &run)).contains(&"effect_started".to_owned()),
    );
    let second = sb.run(&["resume", &run]);
    assert_eq!(second.status.code(), Some(2));
    assert!(
        stderr(&second).contains("W-STORE-009"),
        "{}",
        stderr(&second)
    );
    assert!(
        stderr(&second).contains("is being driven by"),
        "{}",
        stderr(&second)
    );
    assert_eq!(sb.run(&["runs", "cancel", &run]).status.code(), Some(0));
    let first = first.wait_with_output().unwrap();
    assert_eq!(first.status.code(), Some(3));
}

#[test]
fn cancelling_a_parked_run_ends_it_now() {
    let sb = Sandbox::init();
    let out = sb.run(&[
        "run",
        "--prompt",
        "never",
        "--model",
        &sb.quickstart_model(),
        "q",
    ]);
    assert_eq!(out.status.code(), Some(10));
    let (run, _) = sb.last_run();
    let out = sb.run(&["runs", "cancel", &run, "--reason", "not needed"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("stopped"));
    let again = sb.run(&["resume", &run]);
    assert_eq!(again.status.code(), Some(2));
    assert!(stderr(&again).contains("W-KERNEL-005"));
    assert!(sb.exists("build/build.log"));
}

/// A run parked on `rm -rf build`; meanwhile the policy forbids deletes. The resume decides
/// the pending action again under the new policy, records that it did, and nothing is deleted
/// even though the old request was approved.
#[test]
fn resuming_under_a_changed_policy_decides_again_and_says_so() {
    let sb = Sandbox::init();
    let out = sb.run(&[
        "run",
        "--prompt",
        "never",
        "--model",
        &sb.quickstart_model(),
        "q",
    ]);
    let request = parked_request(&out);
    let (run, _) = sb.last_run();
    assert_eq!(sb.run(&["approve", &request]).status.code(), Some(0));
    sb.write(
        ".warrant/policies/freeze.cedar",
        "@id(\"freeze-deletes\")\n@reason(\"Release freeze: nothing is deleted this week\")\nforbid(principal, action == Warrant::Action::\"fs.delete\", resource);\n",
    );
    let out = sb.run(&["resume", &run]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("decided again"), "{}", stdout(&out));
    let shown = events(&sb, &run);
    let all = shown["events"].as_array().unwrap();
    let changed = all.iter().find(|e| e["kind"] == "policy_changed").unwrap();
    assert_eq!(
        changed["payload"]["reevaluated"].as_array().unwrap().len(),
        1
    );
    let denied = all
        .iter()
        .rev()
        .find(|e| e["kind"] == "effect_denied")
        .unwrap();
    assert_eq!(
        denied["payload"]["denied"]["reasons"][0]["policy"],
        "project:freeze-deletes"
    );
    assert!(sb.exists("build/build.log"));
}

/// A queued run that needs a person parks; once approved it is queued again, and the next
/// worker continues it from where it stopped.
#[test]
fn a_worker_parks_a_run_that_asks_and_continues_it_once_answered() {
    let sb = Sandbox::init();
    let model = sb.transcript("version: 1\nturns:\n  - calls:\n      - tool: delete_path\n        args: { path: build, recursive: true }\n  - say: done\n");
    let queued = sb.json(&["submit", "--json", "--model", &model, "clean"]);
    let run = queued["run"].as_str().unwrap().to_owned();
    assert_eq!(events(&sb, &run)["run"]["status"], "queued");
    let w = sb.run(&["worker", "--once"]);
    assert_eq!(w.status.code(), Some(0), "{}", stderr(&w));
    let shown = events(&sb, &run);
    assert_eq!(shown["run"]["status"], "parked");
    let open = sb.json(&["approvals", "list", "--json"]);
    let request = open["requests"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(sb.run(&["approve", &request]).status.code(), Some(0));
    assert_eq!(events(&sb, &run)["run"]["status"], "queued");
    let w = sb.run(&["worker", "--once"]);
    assert_eq!(w.status.code(), Some(0), "{}", stderr(&w));
    let shown = events(&sb, &run);
    assert_eq!(shown["run"]["status"], "completed");
    assert!(!sb.exists("build"));
    let kinds = kinds_of(&shown);
    assert_eq!(
        kinds.iter().filter(|k| *k == "run_resumed").count(),
        1,
        "{kinds:?}"
    );
}
