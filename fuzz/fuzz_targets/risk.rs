//! The risk recognizers over arbitrary command lines and paths. `classify` never panics, is
//! deterministic, never lowers a verb's default class (and gives a reason exactly when it
//! raises it), and `sh -c S` is classified at least as high as each command visible in `S`
//! (read as the shell reads it: a leading `NAME=value` is an assignment, not the program).
//!
//! Input: argv words separated by NUL bytes; a 0x01 byte splits them into a second command.
#![no_main]

use libfuzzer_sys::fuzz_target;
use warrant_core::risk::classify;
use warrant_core::{Action, CanonicalPath, RiskClass};

/// Characters a shell takes literally inside an unquoted word: no quotes, escapes, expansions,
/// comments, redirections or separators, so the word means the same in argv and in `sh -c`.
fn shell_literal(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_./=+-,:@%^".contains(c)
}

fn exec(argv: Vec<String>) -> Action {
    Action::ShellExec {
        argv,
        cwd: CanonicalPath::from_normalized("/w").unwrap_or_else(|_| unreachable!()),
        profile: "default".to_owned(),
        timeout_ms: 1000,
        program: None,
        contained: false,
        judged: warrant_core::Judging::Changeset,
    }
}

fn check(action: &Action) -> RiskClass {
    let (class, why) = classify(action);
    let default = action.verb().default_risk();
    assert!(class >= default, "{action:?} lowered to {class:?} below {default:?}");
    assert_eq!(why.is_some(), class > default, "{action:?}: {class:?} with reason {why:?}");
    assert_eq!(classify(action), (class, why), "not deterministic");
    assert_eq!(action.risk(), class);
    class
}

fn words(part: &[u8]) -> Vec<String> {
    part.split(|b| *b == 0)
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect()
}

/// The same command with every word cut down to its shell-literal characters (empty words
/// dropped): what a script would say to run it.
fn literal(argv: &[String]) -> Vec<String> {
    argv.iter()
        .map(|w| w.chars().filter(|c| shell_literal(*c)).collect::<String>())
        .filter(|w| !w.is_empty())
        .collect()
}

/// `NAME=value`, which a shell reads as an assignment when it leads a command.
fn assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit())
    })
}

/// The command a shell runs for `words`: what follows the leading assignments, which hand it
/// their values (so they count as words of it). In argv a leading `NAME=value` is the program.
fn as_shell_runs(words: &[String]) -> Vec<String> {
    let k = words.iter().take_while(|w| assignment(w)).count();
    words[k..].iter().chain(&words[..k]).cloned().collect()
}

fn sh_c(script: String) -> Action {
    exec(vec!["sh".to_owned(), "-c".to_owned(), script])
}

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(2, |b| *b == 1);
    let first = words(parts.next().unwrap_or_default());
    let second = parts.next().map(words);

    check(&exec(first.clone()));
    // The same bytes as a path, for the file verbs.
    let joined = first.join("/");
    if let Ok(path) = CanonicalPath::from_normalized(&format!("/w/{joined}")) {
        for action in [
            Action::FsRead { path: path.clone() },
            Action::FsList { path: path.clone() },
            Action::FsSearch { path: path.clone(), pattern: joined.clone() },
            Action::FsWrite { path: path.clone(), content: String::new() },
            Action::FsCreate { path: path.clone(), content: String::new() },
            Action::FsDelete { path: path.clone(), recursive: false },
        ] {
            check(&action);
        }
    }

    let a = literal(&first);
    if a.is_empty() {
        return;
    }
    let class_a = check(&exec(as_shell_runs(&a)));
    let script_a = a.join(" ");
    for wrapped in [format!("( {script_a} )"), format!("{{ {script_a}; }}"), format!("if true; then {script_a}; fi")] {
        let class = check(&sh_c(wrapped.clone()));
        assert!(class >= class_a, "sh -c {wrapped:?} is {class:?}, the command {class_a:?}");
    }
    // A shell reads a `-c` string that starts with `-` or `+` as options of its own (`sh -c
    // --x` and `sh -c +x` are errors, and nothing runs), so only scripts that do not are
    // compared bare.
    if script_a.starts_with(['-', '+']) {
        return;
    }
    let alone = check(&sh_c(script_a.clone()));
    assert!(alone >= class_a, "sh -c {script_a:?} is {alone:?}, the command itself {class_a:?}");
    let Some(second) = second else { return };
    let b = literal(&second);
    if b.is_empty() {
        return;
    }
    let class_b = check(&exec(as_shell_runs(&b)));
    let script_b = b.join(" ");
    for sep in ["; ", " && ", " || ", " | ", "\n", " & "] {
        let script = format!("{script_a}{sep}{script_b}");
        let both = check(&sh_c(script.clone()));
        assert!(
            both >= class_a.max(class_b),
            "sh -c {script:?} is {both:?}, its commands {class_a:?} and {class_b:?}"
        );
    }
});
