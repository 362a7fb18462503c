//! Secrets never lie in the journal in the clear (issue 12 part 4). A token the model writes
//! into its text, a file's content or a command line is stored sealed under the installation's
//! key; the audit trail names the rule that found it. The ring opens it when it folds the run
//! to act, so an approved command parked across processes still runs with the real value.
//! After each kind of request (an approval, a question, a secret), the whole installation (the
//! store, the audit trail, every file under `.warrant/`) and every output are searched for the
//! planted values. Negative control: `WARRANT_TEST_DISABLE=seal` finds the token in the store.

use std::path::Path;

use pretty_assertions::assert_eq;

use super::harness::{Sandbox, parked_request, stderr};

const TOKEN: &str = "ghp_8f3KqL0vX2mB9nR4tY7wZ1cD6hJ5sP3aE2gU";
const ANSWER: &str = "glpat-Zq8Xw3Rt6Yu1Io4Pa7Sd";

fn files_holding(root: &Path, needle: &[u8], skip: &Path) -> Vec<String> {
    let mut hits = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if p == skip {
                continue;
            }
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            } else if e.file_type().unwrap().is_file()
                && std::fs::read(&p)
                    .unwrap()
                    .windows(needle.len())
                    .any(|w| w == needle)
            {
                hits.push(p.display().to_string());
            }
        }
    }
    hits.sort();
    hits
}

/// One run through every request kind with planted secrets; returns the files (other than
/// the command's own output file) and outputs that hold the token or the answer.
fn planted(seal: bool) -> (Vec<String>, usize, String) {
    let mut sb = Sandbox::init();
    if !seal {
        sb.extra_env
            .push(("WARRANT_TEST_DISABLE".into(), "seal".into()));
    }
    sb.add_unconfined_profile();
    let model = sb.transcript(&format!(
        concat!(
            "version: 1\nturns:\n",
            "  - say: \"The notes mention {t}; I will keep it.\"\n",
            "    calls:\n",
            "      - tool: write_file\n        args: {{ path: deploy.env.example, content: \"GH_TOKEN={t}\\n\" }}\n",
            "  - calls:\n",
            "      - tool: run_command\n        args: {{ argv: [sh, -c, \"printf %s {t} > used.txt\"], profile: open }}\n",
            "  - calls:\n",
            "      - tool: ask_question\n        args: {{ question: \"Which registry token?\" }}\n",
            "  - calls:\n",
            "      - tool: request_secret\n        args: {{ name: REGISTRY, purpose: publish, used_by: run_command }}\n",
            "  - say: done\n",
        ),
        t = TOKEN
    ));
    let mut outputs: Vec<Vec<u8>> = Vec::new();
    let mut keep = |o: &std::process::Output| {
        outputs.push(o.stdout.clone());
        outputs.push(o.stderr.clone());
    };
    // The unconfined command asks a person; nobody is at a terminal, so the run parks.
    let out = sb.run(&["run", "--model", &model, "publish"]);
    keep(&out);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let (run, _) = sb.last_run();
    let approval = parked_request(&out);
    let approved = sb.run(&["approve", &approval]);
    keep(&approved);
    assert_eq!(approved.status.code(), Some(0), "{}", stderr(&approved));
    // Resumed in a new process: the command comes from the journal, opened by the ring.
    let resumed = sb.run(&["resume", &run]);
    keep(&resumed);
    assert_eq!(resumed.status.code(), Some(10), "{}", stderr(&resumed));
    let question = parked_request(&resumed);
    let answered = sb.run(&["requests", "answer", &question, "--text", ANSWER]);
    keep(&answered);
    assert_eq!(answered.status.code(), Some(0), "{}", stderr(&answered));
    let resumed = sb.run(&["resume", &run]);
    keep(&resumed);
    assert_eq!(resumed.status.code(), Some(10), "{}", stderr(&resumed));
    let secret = parked_request(&resumed);
    let provided = sb.run_stdin(&["requests", "provide", &secret], "registry-value-4471\n");
    keep(&provided);
    assert_eq!(provided.status.code(), Some(0), "{}", stderr(&provided));
    let done = sb.run(&["resume", &run]);
    keep(&done);
    assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));

    let used = std::fs::read_to_string(sb.ws.join("used.txt")).unwrap();
    for args in [
        vec!["runs", "show", run.as_str(), "--json"],
        vec!["runs", "show", run.as_str()],
        vec!["approvals", "list", "--all", "--json"],
        vec!["requests", "list", "--all", "--json"],
        vec!["audit", "tail", "-n", "500", "--json"],
        vec!["audit", "verify"],
    ] {
        let o = sb.run(&args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        keep(&o);
    }
    let example = sb.ws.join("deploy.env.example");
    // The workspace (the installation is in it) and the home (keys, layers); the transcript,
    // which is the model's own words, lies beside them.
    let mut files = Vec::new();
    for root in [&sb.ws, &sb.home] {
        files.extend(files_holding(
            root,
            TOKEN.as_bytes(),
            &sb.ws.join("used.txt"),
        ));
        files.extend(files_holding(root, ANSWER.as_bytes(), &example));
    }
    files.retain(|f| Path::new(f) != example);
    let needles = [TOKEN.as_bytes(), ANSWER.as_bytes()];
    let leaked = outputs
        .iter()
        .filter(|o| {
            let hit = needles.iter().any(|n| o.windows(n.len()).any(|w| w == *n));
            if hit {
                eprintln!("leaked in: {}", String::from_utf8_lossy(o));
            }
            hit
        })
        .count();
    (files, leaked, used)
}

#[test]
fn secrets_are_sealed_in_the_journal_after_every_request_kind_and_open_for_the_ring() {
    let (files, leaked, used) = planted(true);
    // The approved command ran with the real token, read back from the journal.
    assert_eq!(used, TOKEN);
    assert_eq!(
        files,
        Vec::<String>::new(),
        "no file of the installation holds them"
    );
    assert_eq!(leaked, 0, "and no output shows them");
}

#[test]
fn negative_control_without_sealing_the_token_is_in_the_store() {
    let (files, _, used) = planted(false);
    assert_eq!(used, TOKEN);
    assert!(
        // The journal is `store.db` with its write-ahead log (a closing process leaves the
        // last commits in `store.db-wal`: no checkpoint on close).
        files
            .iter()
            .any(|f| f.ends_with("store.db") || f.ends_with("store.db-wal")),
        "without sealing the journal holds the token as written: {files:?}"
    );
}

/// At the run's own terminal the approval prompt names the rule, never the value, and the
/// write the person approved still writes the value. Control: with sealing off the screen shows
/// the token.
#[test]
fn the_approval_prompt_names_the_secret_and_the_approved_write_keeps_it() {
    let screen_of = |seal: bool| {
        let mut sb = Sandbox::init();
        if !seal {
            sb.extra_env
                .push(("WARRANT_TEST_DISABLE".into(), "seal".into()));
        }
        sb.write(
            ".warrant/policies/ask-writes.cedar",
            "@id(\"ask-writes\")\n@ask(\"change\")\n@reason(\"Writes wait for a person in this test\")\npermit(principal, action in [Warrant::Action::\"fs.write\", Warrant::Action::\"fs.create\"], resource is Warrant::Path)\nwhen { resource.in_workspace };\n",
        );
        let model = sb.transcript(&format!(
            "version: 1\nturns:\n  - calls:\n      - tool: write_file\n        args: {{ path: ci.env.example, content: \"GH_TOKEN={TOKEN}\\n\" }}\n  - say: ok\n"
        ));
        let screen = sb.run_on_screen(
            &["run", "--prompt", "always", "--model", &model, "write"],
            "o\n",
            120,
        );
        assert_eq!(screen.exit, 0, "{:#?}", screen.lines);
        let written = std::fs::read_to_string(sb.ws.join("ci.env.example")).unwrap();
        (screen.lines.join("\n"), written)
    };
    let (screen, written) = screen_of(true);
    assert!(!screen.contains(TOKEN), "{screen}");
    assert!(screen.contains("[REDACTED:github-pat]"), "{screen}");
    assert_eq!(written, format!("GH_TOKEN={TOKEN}\n"));
    let (screen, _) = screen_of(false);
    assert!(screen.contains(TOKEN), "control: {screen}");
}
