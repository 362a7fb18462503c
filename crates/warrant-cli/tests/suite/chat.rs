//! `warrant chat`: a session is one run that waits for its person's next message. From standard
//! input (a message per line, approvals answered between them) and on a real pseudo-terminal
//! (the line editor, the inline approval, slash commands, Ctrl-C).

use pretty_assertions::assert_eq;
use serde_json::Value;
use std::io::Write as _;
use std::time::Duration;

use super::harness::{Sandbox, kinds, parked_request, stderr, stdout};

/// Three messages: the first reads, the second deletes (a person's approval in the middle),
/// the third only talks (the web interface's conversation test drives it too).
pub(super) const TRANSCRIPT: &str = r#"version: 1
turns:
  - say: "Reading the notes."
    calls:
      - tool: read_file
        args: { path: "notes/meeting-2026-11-20.md" }
  - say: "The notes cover the tide-table import."
  - say: "Removing the old build artifacts."
    calls:
      - tool: delete_path
        args: { path: "build", recursive: true }
  - say: "Removed build/."
  - say: "You're welcome."
"#;

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The kinds of a session's three turns with the approval in the middle, from its start.
fn three_turns() -> Vec<&'static str> {
    vec![
        "run_started",
        "awaiting_message",
        "message_received",
        "model_responded",
        "action_proposed",
        "policy_decided",
        "effect_started",
        "effect_completed",
        "model_responded",
        "awaiting_message",
        "message_received",
        "model_responded",
        "action_proposed",
        "policy_decided",
        "approval_requested",
        "approval_granted",
        "effect_started",
        "effect_completed",
        "model_responded",
        "awaiting_message",
        "message_received",
        "model_responded",
        "awaiting_message",
        "run_ended",
    ]
}

#[test]
fn a_session_from_standard_input_holds_three_turns_with_an_approval_in_the_middle() {
    let sb = Sandbox::init();
    let model = sb.transcript(TRANSCRIPT);
    let out = sb.run_stdin(
        &["chat", "--model", &model, "--json", "--prompt", "always"],
        "summarize the notes\nnow clean up build/\no\nthanks \u{1b}[2J\u{7}\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = json_lines(&stdout(&out));
    assert_eq!(kinds(&events), three_turns());
    // One run: every message continued it.
    let runs: Vec<&str> = events.iter().map(|e| e["run"].as_str().unwrap()).collect();
    assert!(runs.iter().all(|r| *r == runs[0]));
    let messages: Vec<Value> = events
        .iter()
        .filter(|e| e["kind"] == "message_received")
        .map(|e| e["payload"].clone())
        .collect();
    assert_eq!(
        messages,
        vec![
            serde_json::json!({"by": "tester", "text": "summarize the notes"}),
            serde_json::json!({"by": "tester", "text": "now clean up build/"}),
            // The control characters are escaped in what is kept and listed, in order.
            serde_json::json!({"by": "tester", "text": "thanks \\u001b[2J\\u0007",
                               "neutralized": ["U+001B", "U+0007"]}),
        ]
    );
    assert!(!sb.exists("build"), "the approved delete ran");
    // The session's record verifies like any run's, the neutralization in it.
    let verify = sb.run(&["audit", "verify"]);
    assert_eq!(verify.status.code(), Some(0), "{}", stdout(&verify));
    let records = json_lines(&stdout(&sb.run(&["audit", "query", "--json"])));
    let neutralized: Vec<&Value> = records
        .iter()
        .filter(|r| {
            r["data"]["event"] == "message_received"
                && r["data"]["reasons"]
                    .as_array()
                    .is_some_and(|a| !a.is_empty())
        })
        .map(|r| &r["data"]["reasons"])
        .collect();
    assert_eq!(
        neutralized,
        vec![&serde_json::json!([
            "2 control character(s) neutralized: U+001B U+0007"
        ])]
    );
}

#[test]
fn a_session_survives_its_process_and_continues_the_same_conversation() {
    let sb = Sandbox::init();
    let model = sb.transcript(TRANSCRIPT);
    // Nobody answers approvals here: the session parks on the delete and the process ends.
    let out = sb.run_stdin(
        &["chat", "--model", &model, "--prompt", "never"],
        "summarize the notes\nnow clean up build/\nthis line is never read\n",
    );
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let request = parked_request(&out);
    let (run, _) = sb.last_run();
    assert!(
        stdout(&out).contains(&format!("warrant chat --resume {run}")),
        "{}",
        stdout(&out)
    );
    let approve = sb.run(&["approve", &request]);
    assert_eq!(approve.status.code(), Some(0), "{}", stderr(&approve));

    // Someone else cannot continue this person's session.
    let mut other = sb.cmd(&["chat", "--resume", &run]);
    other.env("WARRANT_ACTOR", "mallory").write_stdin("hi\n");
    let refused = other.output().unwrap();
    assert_eq!(refused.status.code(), Some(3), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("W-SESSION-003"),
        "{}",
        stderr(&refused)
    );

    // Its person continues it: the approved delete runs, the model answers, a follow-up.
    let out = sb.run_stdin(&["chat", "--resume", &run, "--json"], "thanks\n");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (again, events) = sb.last_run();
    assert_eq!(again, run, "no second run");
    let mut expected = three_turns();
    // The park and its resumption sit between the request and its answer.
    let at = expected
        .iter()
        .position(|k| *k == "approval_granted")
        .unwrap();
    expected.splice(at..at, ["run_parked"]);
    // Mallory's attempt is on the record, and changed nothing else.
    expected.splice(at + 2..at + 2, ["message_refused", "run_resumed"]);
    assert_eq!(kinds(&events), expected);
    let refused = events
        .iter()
        .find(|e| e["kind"] == "message_refused")
        .unwrap();
    assert_eq!(
        refused["payload"],
        serde_json::json!({"by": "mallory", "code": "W-SESSION-003",
                           "reason": format!("{run} is tester's session; only that person continues it")})
    );
    assert!(!sb.exists("build"));
    let turns: Vec<u64> = events
        .iter()
        .filter(|e| e["kind"] == "model_responded")
        .map(|e| e["payload"]["turn"].as_u64().unwrap())
        .collect();
    assert_eq!(turns, vec![0, 1, 2, 3, 4]);
}

#[test]
fn end_of_input_before_any_message_starts_nothing() {
    let sb = Sandbox::init();
    let model = sb.transcript(TRANSCRIPT);
    let out = sb.run_stdin(&["chat", "--model", &model], "");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "");
    let runs = sb.json(&["runs", "list", "--json"]);
    assert_eq!(runs["runs"], serde_json::json!([]));
}

#[test]
fn slash_commands_answer_without_reaching_the_model() {
    let sb = Sandbox::init();
    let model = sb.transcript(TRANSCRIPT);
    let out = sb.run_stdin(
        &["chat", "--model", &model],
        "summarize the notes\n/explain\n/cost\n/nope\n/exit\nnever sent\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    for expected in [
        "read_file (call-0-0) {\"path\":\"notes/meeting-2026-11-20.md\"}",
        "  allow (risk read): project:workspace-read: Reading, listing and searching inside the workspace is allowed.",
        "this session: 0 input and 0 output tokens over 2 model turn(s), $0.0000",
        "unknown command /nope; the commands are:",
        "session ",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    let (_, events) = sb.last_run();
    // `/exit` ended it; the line after was never a message.
    assert_eq!(
        events
            .iter()
            .filter(|e| e["kind"] == "message_received")
            .count(),
        1
    );
    assert_eq!(kinds(&events).last().unwrap(), "run_ended");
}

#[test]
fn a_session_on_a_terminal_holds_three_turns_with_an_inline_approval() {
    let sb = Sandbox::init();
    let model = sb.transcript(TRANSCRIPT);
    let screen = sb.converse_on_screen(
        &["chat", "--model", &model],
        &[
            ("you> ", "summarize the notes\r"),
            ("you> ", "now clean up build/\r"),
            ("or [d]eny? ", "o\n"),
            // Ctrl-V types the escape character itself into the line.
            ("you> ", "thanks \u{16}\u{1b}[31mred\r"),
            ("you> ", "/cost\r"),
            ("you> ", "/exit\r"),
        ],
        120,
    );
    assert_eq!(screen.exit, 0, "{}", screen.lines.join("\n"));
    let text = screen.lines.join("\n");
    for expected in [
        "you> summarize the notes",
        "model    The notes cover the tide-table import.",
        "--- approval needed: ",
        "approve [o]nce, for this [s]ession, or [d]eny? o",
        "model    Removed build/.",
        "(your message had 1 control character(s), neutralized: U+001B)",
        "model    You're welcome.",
        "this session: 0 input and 0 output tokens over 5 model turn(s), $0.0000",
        "end      completed",
    ] {
        assert!(text.contains(expected), "missing {expected:?} on:\n{text}");
    }
    assert!(!sb.exists("build"));
    let (_, events) = sb.last_run();
    let last: Value = events
        .iter()
        .rfind(|e| e["kind"] == "message_received")
        .unwrap()["payload"]
        .clone();
    assert_eq!(
        last,
        serde_json::json!({"by": "tester", "text": "thanks \\u001b[31mred",
                           "neutralized": ["U+001B"]})
    );
}

#[test]
fn ctrl_c_on_a_terminal_stops_the_running_command_and_keeps_the_session() {
    let sb = Sandbox::init();
    let model = sb.transcript(
        r#"version: 1
turns:
  - say: "Waiting a while."
    calls:
      - tool: run_command
        args: { argv: ["sleep", "30"] }
  - say: "Stopped, as you asked."
"#,
    );
    let screen = sb.converse_on_screen(
        &["chat", "--model", &model],
        &[
            ("you> ", "wait a while\r"),
            ("call     run_command", "\u{3}"),
            ("you> ", "/exit\r"),
        ],
        120,
    );
    assert_eq!(screen.exit, 0, "{}", screen.lines.join("\n"));
    let text = screen.lines.join("\n");
    assert!(
        text.contains(
            "stopped  by the person (Ctrl-C during the tool calls); waiting for the next message"
        ),
        "{text}"
    );
    let (_, events) = sb.last_run();
    let interrupted: Vec<Value> = events
        .iter()
        .filter(|e| e["kind"] == "awaiting_message")
        .map(|e| e["payload"]["interrupted"].clone())
        .collect();
    assert_eq!(interrupted, vec![Value::Null, serde_json::json!("effect")]);
    // The command either was stopped while it ran, or never started.
    let call_end = events
        .iter()
        .find(|e| e["kind"] == "effect_completed" || e["kind"] == "call_refused")
        .unwrap();
    let stopped = call_end["payload"].to_string();
    assert!(
        stopped.contains("stopped by the person") || stopped.contains("W-SESSION-002"),
        "{stopped}"
    );
    assert_eq!(kinds(&events).last().unwrap(), "run_ended");
}

/// The summaries and where they cut, from a session's events (the digest of what a summary
/// replaced names this workspace's paths, so it is checked for its form only).
fn compactions(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["kind"] == "history_compacted")
        .map(|e| {
            let p = &e["payload"];
            assert!(p["replaced"].as_str().unwrap().starts_with("sha256:"));
            serde_json::json!([p["through_turn"], p["summary"]])
        })
        .collect()
}

#[test]
fn a_long_session_is_compacted_the_same_way_every_time() {
    let mut seen = Vec::new();
    for _ in 0..2 {
        let sb = Sandbox::init();
        let model = sb.transcript(TRANSCRIPT);
        let out = sb.run_stdin(
            &[
                "chat",
                "--model",
                &model,
                "--prompt",
                "always",
                "--history-tokens",
                "150",
            ],
            "summarize the notes\nnow clean up build/\no\nthanks\n",
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let (_, events) = sb.last_run();
        // Each compaction is an event of the run, before the model call it made room for.
        let at: Vec<usize> = events
            .iter()
            .enumerate()
            .filter(|(_, e)| e["kind"] == "history_compacted")
            .map(|(i, _)| i)
            .collect();
        assert!(!at.is_empty(), "no compaction in {:?}", kinds(&events));
        for i in &at {
            assert_eq!(events[i + 1]["kind"], "model_responded");
        }
        seen.push(compactions(&events));
    }
    assert_eq!(seen[0], seen[1], "the same log compacts the same way");
    let first = &seen[0][0];
    assert_eq!(first[0], 1);
    assert_eq!(
        first[1],
        "[Earlier in this session, compacted by Warrant: 1 model turn(s) are summarized here.]\nThe person wrote: summarize the notes\nYou answered: Reading the notes.\nYou called: read_file"
    );
}

#[test]
fn warrant_alone_is_a_session_on_a_terminal_and_the_usage_elsewhere() {
    let mut sb = Sandbox::init();
    let model = sb.transcript(TRANSCRIPT);
    sb.extra_env.push(("WARRANT_MODEL".to_owned(), model));
    let screen = sb.converse_on_screen(
        &[],
        &[("you> ", "summarize the notes\r"), ("you> ", "/exit\r")],
        120,
    );
    assert_eq!(screen.exit, 0, "{}", screen.lines.join("\n"));
    let text = screen.lines.join("\n");
    assert!(
        text.contains("model    The notes cover the tide-table import."),
        "{text}"
    );
    // Not on a terminal: the usage, and nothing started.
    let out = sb.run_stdin(&[], "summarize the notes\n");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("Usage: warrant"), "{}", stderr(&out));
    let (_, events) = sb.last_run();
    assert_eq!(
        events
            .iter()
            .filter(|e| e["kind"] == "message_received")
            .count(),
        1
    );
}

#[test]
fn a_session_without_a_model_says_how_to_name_one() {
    let sb = Sandbox::init();
    let out = sb.run_stdin(&["chat"], "hello\n");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "error[W-SESSION-004]: no model for the session: pass --model PROVIDER:MODEL (e.g. openai:gpt-4.1), configure one with `warrant configure`, or set WARRANT_MODEL\n"
    );
}

/// An OpenAI-compatible server that streams one answer in two parts and holds the second until
/// `release` fires (or a minute passes): whether the first part was on the session's output
/// before the answer ended is then a fact of order, not of timing. Returns its base URL and
/// whether the release came before the end.
fn held_stream(
    first: &str,
    rest: &str,
    release: std::sync::mpsc::Receiver<()>,
) -> (String, std::thread::JoinHandle<bool>) {
    use std::io::{BufRead as _, Read as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let chunk = |content: &str, finish: Option<&str>| {
        format!(
            "data: {}\n\n",
            serde_json::json!({"id": "c", "object": "chat.completion.chunk", "model": "gpt-test",
                "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}]})
        )
    };
    let (first, rest) = (chunk(first, None), chunk(rest, Some("stop")));
    let handle = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
            if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body).unwrap();
        let mut out = stream;
        write!(
            out,
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n{first}"
        )
        .unwrap();
        out.flush().unwrap();
        let released = release.recv_timeout(Duration::from_secs(60)).is_ok();
        write!(out, "{rest}data: [DONE]\n\n").unwrap();
        out.flush().unwrap();
        released
    });
    (base, handle)
}

/// Runs `warrant chat` against a held stream; returns the session's output and whether its
/// first line was printed before the answer ended.
fn chat_while_streaming(disable: Option<&str>) -> (String, bool) {
    use std::io::BufRead as _;
    let sb = Sandbox::init();
    let (release, held) = std::sync::mpsc::channel();
    let (base, server) = held_stream(
        "First line of the answer.\nSecond ",
        "part, with a \u{1b}[2J\u{1b}[31mforged screen\u{1b}[0m.\nLast words",
        held,
    );
    let mut cmd = sb.std_cmd(&["chat", "--model", "openai:gpt-test"]);
    cmd.env("OPENAI_BASE_URL", &base)
        .env("OPENAI_API_KEY", "sk-test")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    if let Some(d) = disable {
        cmd.env("WARRANT_TEST_DISABLE", d);
    }
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"tell me something\n")
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = Vec::new();
    let mut release = Some(release);
    for line in std::io::BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if line.contains("First line of the answer.") {
            // Only now may the server finish the answer.
            if let Some(r) = release.take() {
                r.send(()).unwrap();
            }
        }
        lines.push(line);
    }
    drop(release);
    let status = child.wait().unwrap();
    let released = server.join().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    (lines.join("\n"), released)
}

#[test]
fn a_chat_answer_is_printed_as_it_streams_each_line_rendered_control_unrendered() {
    let (text, released) = chat_while_streaming(None);
    assert!(
        released,
        "the first line was not on the output before the answer ended:\n{text}"
    );
    // Shown once, as it streamed, in lines: not again when the answer was journaled.
    assert_eq!(
        text.matches("First line of the answer.").count(),
        1,
        "{text}"
    );
    assert!(
        text.contains("model    First line of the answer.\n         Second part, with a "),
        "{text}"
    );
    assert!(text.contains("\n         Last words"), "{text}");
    // The escape sequences, split from nothing but sent in the stream, reach the terminal
    // escaped: no screen clear, no colour.
    assert!(!text.contains('\u{1b}'), "{text:?}");
    assert!(text.contains("forged screen"), "{text}");
    // The negative control: with the renderer off, the same stream clears the screen.
    let (text, _) = chat_while_streaming(Some("render"));
    assert!(text.contains("\u{1b}[2J"), "{text:?}");
}
