//! What a person sees is what runs: text the model wrote (a file's content, a path, an argv)
//! cannot steer the terminal that shows it. Every payload is a known trick: a carriage return
//! that overwrites the line, cursor movement and erase-line, a bidirectional override, a
//! zero-width character, a line feed faking a line of Warrant's own. The negative control turns
//! the renderer off (`WARRANT_TEST_DISABLE=render`, debug builds only) and shows the raw bytes
//! reaching the terminal.

use super::harness::{Sandbox, Screen, parked_request, stderr, stdout};

const ASK_WRITES: &str = r#"
@id("ask-writes")
@ask("change")
@reason("Writes in this project are reviewed")
permit(principal, action in [Warrant::Action::"fs.write", Warrant::Action::"fs.create"], resource is Warrant::Path)
when { resource.in_workspace };
"#;

/// A write whose content and name carry every payload; the model's transcript spells them in
/// YAML's double-quoted escapes.
const SPOOF: &str = "version: 1\nturns:\n  - calls:\n      - tool: write_file\n        args: { path: \"notes/a\\u202Etxt.md\", content: \"rm -rf ~\\rrisk read  run ls -la\\n\\e[1A\\e[2Kall clear\\nzero\\u200Bwidth\\n\" }\n  - say: ok\n";

/// Characters that must never reach a person's terminal raw.
fn hazards(text: &str) -> Vec<char> {
    text.chars()
        .filter(|c| matches!(c, '\r' | '\u{1b}' | '\u{8}' | '\u{202e}' | '\u{200b}'))
        .collect()
}

fn spoofed(sb: &Sandbox, prompt_answer: &str) -> std::process::Output {
    sb.write(".warrant/policies/ask-writes.cedar", ASK_WRITES);
    let model = sb.transcript(SPOOF);
    sb.run_stdin(
        &["run", "--prompt", "always", "--model", &model, "spoof"],
        prompt_answer,
    )
}

#[test]
fn the_approval_prompt_shows_control_characters_as_text() {
    let sb = Sandbox::init();
    let out = spoofed(&sb, "d\nnot this\n");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("approval needed"), "{err}");
    assert_eq!(hazards(&err), Vec::<char>::new(), "{err}");
    // The diff tool ends a line at the carriage return; it shows as text either way.
    assert!(err.contains(r"+rm -rf ~\r+risk read  run ls -la"), "{err}");
    assert!(err.contains(r"\u001b[1A\u001b[2Kall clear"), "{err}");
    assert!(err.contains(r"zero\u200bwidth"), "{err}");
    assert!(err.contains(r"a\u202etxt.md"), "{err}");
    assert_eq!(hazards(&stdout(&out)), Vec::<char>::new());
    // Denied: nothing was written.
    assert!(!sb.ws.join("notes/a\u{202e}txt.md").exists());
    assert!(sb.ws.join("notes").is_dir());
}

#[test]
fn listings_show_control_characters_as_text() {
    let sb = Sandbox::init();
    sb.write(".warrant/policies/ask-writes.cedar", ASK_WRITES);
    let model = sb.transcript(SPOOF);
    let out = sb.run(&["run", "--prompt", "never", "--model", &model, "spoof"]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let request = parked_request(&out);
    let (run, _) = sb.last_run();
    for args in [
        vec!["approvals", "list"],
        vec!["runs", "show", run.as_str()],
        vec!["approvals", "list", "--json"],
    ] {
        let listed = sb.run(&args);
        assert_eq!(
            listed.status.code(),
            Some(0),
            "{args:?}: {}",
            stderr(&listed)
        );
        let text = stdout(&listed);
        assert!(
            text.contains(&request) || args[0] == "runs",
            "{args:?}: {text}"
        );
        assert_eq!(hazards(&text), Vec::<char>::new(), "{args:?}: {text}");
        if args.contains(&"--json") {
            // Still JSON, and it still means the model's exact path.
            let doc: serde_json::Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("not JSON after rendering ({e}): {text}"));
            // The title is a presentation, stored as it was shown (and bound into the
            // approval digest that way): the path in it is escaped once, as text.
            assert_eq!(
                doc["requests"][0]["summary"]["title"], "create notes/a\\u202etxt.md",
                "{text}"
            );
        }
    }
}

#[test]
fn negative_control_without_the_renderer_the_terminal_gets_raw_escapes() {
    let mut sb = Sandbox::init();
    sb.extra_env
        .push(("WARRANT_TEST_DISABLE".into(), "render".into()));
    let out = spoofed(&sb, "d\nnot this\n");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(hazards(&err).contains(&'\r'), "{err}");
    assert!(hazards(&err).contains(&'\u{1b}'), "{err}");
}

/// Spoofing attempts, each a write whose path or content carries one trick, and what the
/// screen must show on one of its rows for the person to see the real action.
const ON_SCREEN: &[(&str, &str, &str, &str)] = &[
    // (name, path, content, what a row of the screen must show)
    (
        "carriage return",
        "notes/a.md",
        r"rm -rf ~\rrisk read  run ls -la",
        r"rm -rf ~\r",
    ),
    (
        "cursor up and erase line",
        "notes/a.md",
        r"\e[1A\e[2Kall clear",
        r"\u001b[1A\u001b[2Kall clear",
    ),
    (
        "clear screen and home",
        "notes/a.md",
        r"\e[2J\e[Hnothing here",
        r"\u001b[2J\u001b[Hnothing here",
    ),
    (
        "backspaces",
        "notes/a.md",
        r"rm -rf /\b\b\b\b\b\b\b\bls -la",
        r"rm -rf /\b\b\b\b\b\b\b\bls -la",
    ),
    (
        "hyperlink",
        "notes/a.md",
        r"\e]8;;https://example.invalid\e\\click\e]8;;\e\\",
        r"\u001b]8;;https://example.invalid",
    ),
    (
        "window title",
        "notes/a.md",
        r"\e]0;all clear\a",
        r"\u001b]0;all clear\u0007",
    ),
    (
        "bidi override in the path",
        r"notes/a\u202Etxt.md",
        "hello",
        r"notes/a\u202etxt.md",
    ),
    (
        "zero width in the path",
        r"notes/zero\u200Bwidth.md",
        "hello",
        r"notes/zero\u200bwidth.md",
    ),
    (
        "line feed in the path",
        r"notes/x\n--- approval needed: y (risk read) ---",
        "hello",
        r"notes/x\n--- approval needed",
    ),
];

/// The rows of the approval prompt: what the person decides on (empty when the prompt's first
/// row is not on the screen at all).
fn prompt_rows(screen: &Screen) -> Vec<String> {
    let start = screen
        .lines
        .iter()
        .position(|l| l.starts_with("--- approval needed"));
    let Some(start) = start else {
        return Vec::new();
    };
    screen.lines[start..]
        .iter()
        .take_while(|l| !l.starts_with("approve [o]nce"))
        .cloned()
        .collect()
}

fn on_screen(sb: &Sandbox, path: &str, content: &str) -> Screen {
    let model = sb.transcript(&format!(
        "version: 1\nturns:\n  - calls:\n      - tool: write_file\n        args: {{ path: \"{path}\", content: \"{content}\\n\" }}\n  - say: ok\n"
    ));
    sb.run_on_screen(
        &["run", "--prompt", "always", "--model", &model, "spoof"],
        "d\nnot this\n",
        100,
    )
}

#[test]
fn a_terminal_shows_the_real_action_for_every_spoofing_attempt() {
    let sb = Sandbox::init();
    sb.write(".warrant/policies/ask-writes.cedar", ASK_WRITES);
    let mut missing = Vec::new();
    for (name, path, content, shown) in ON_SCREEN {
        let screen = on_screen(&sb, path, content);
        assert_eq!(screen.exit, 0, "{name}: {:#?}", screen.lines);
        if !prompt_rows(&screen).iter().any(|l| l.contains(shown)) {
            missing.push((*name, screen.lines.join("\n")));
        }
        let raw: Vec<char> = screen.lines.iter().flat_map(|l| hazards(l)).collect();
        assert_eq!(raw, Vec::<char>::new(), "{name}: {:#?}", screen.lines);
    }
    assert_eq!(missing, Vec::<(&str, String)>::new());
}

#[test]
fn negative_control_without_the_renderer_the_screen_lies() {
    let mut sb = Sandbox::init();
    sb.extra_env
        .push(("WARRANT_TEST_DISABLE".into(), "render".into()));
    sb.write(".warrant/policies/ask-writes.cedar", ASK_WRITES);
    let mut told_the_truth = Vec::new();
    // The payloads in a file's content: a path is also escaped where the tool builds its title
    // (a second layer, covered by warrant-tools' own tests), so only these reach the screen raw
    // when the renderer alone is off.
    for (name, path, content, shown) in ON_SCREEN.iter().filter(|c| c.1 == "notes/a.md") {
        let screen = on_screen(&sb, path, content);
        if prompt_rows(&screen).iter().any(|l| l.contains(shown)) {
            told_the_truth.push(*name);
        }
        if *name == "carriage return" {
            // The row a person reads says the harmless thing; the real command is gone.
            assert!(
                screen
                    .lines
                    .iter()
                    .any(|l| l.ends_with("risk read  run ls -la")),
                "{:#?}",
                screen.lines
            );
            assert!(
                !screen.lines.iter().any(|l| l.contains("+rm -rf ~")),
                "{:#?}",
                screen.lines
            );
        }
    }
    assert_eq!(told_the_truth, Vec::<&str>::new());
}
