//! `command` success criteria (AGS §10.2, level 1), as far as they are pure: the criterion's
//! `run` as the argv of a `run_command` call, and what the call's result means for the
//! criterion. The host raises the call through the ring, where it is decided by policy under
//! the node's permission ceiling, runs under the default subprocess profile (confined),
//! and is journaled and audited like any command the agent runs.
//!
//! Warrant never hands a command line to a shell: `run` is split into words the way a POSIX
//! shell would split a simple command (quotes and backslashes), and anything only a shell
//! could do (pipes, redirections, `;`, `&&`, substitutions, globs, variables, `~`, leading
//! `NAME=value`) is refused when the graph is loaded, naming it. A graph that wants a shell
//! says so (`sh -c '…'`), and policy decides that command as `sh`.

use serde_json::Value;
use warrant_kernel::CallResult;
use warrant_kernel::graph::CheckOutcome;

use crate::model::Criterion;

/// The most of a command's output kept as a criterion's evidence (its end: where test runners
/// and linters say what failed). The whole result, as the ring keeps it, is the call's.
pub const EVIDENCE_BYTES: usize = 2_000;

/// `run` as a program and its arguments, or what in it needs a shell.
pub fn argv(run: &str) -> Result<Vec<String>, String> {
    let needs_shell = |what: &str| {
        Err(format!(
            "`{run}` needs a shell ({what}); Warrant runs a criterion's command as a program \
             with arguments, never through a shell: write `sh -c '…'` to have one (policy then \
             decides it as `sh`)"
        ))
    };
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    // Whether a word is being built (an empty quoted word is still a word).
    let mut open = false;
    let mut chars = run.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => {
                if open {
                    words.push(std::mem::take(&mut word));
                    open = false;
                }
            }
            '\'' => {
                open = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err(format!("`{run}`: a quote ' is not closed")),
                    }
                }
            }
            '"' => {
                open = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\')) => word.push(c),
                            Some(c @ ('$' | '`')) => word.push(c),
                            Some('\n') => {}
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err(format!("`{run}`: a quote \" is not closed")),
                        },
                        Some('$') => return needs_shell("`$` inside double quotes"),
                        Some('`') => return needs_shell("a command substitution"),
                        Some(c) => word.push(c),
                        None => return Err(format!("`{run}`: a quote \" is not closed")),
                    }
                }
            }
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(c) => {
                    open = true;
                    word.push(c);
                }
                None => return Err(format!("`{run}` ends with a lone backslash")),
            },
            '|' | '&' | ';' | '<' | '>' | '(' | ')' => {
                return needs_shell(&format!("the operator `{c}`"));
            }
            '`' => return needs_shell("a command substitution"),
            '$' => return needs_shell("a variable or substitution `$`"),
            '*' | '?' => return needs_shell(&format!("the glob `{c}`")),
            '~' if !open => return needs_shell("`~` for a home directory"),
            '#' if !open => return needs_shell("a comment `#`"),
            '=' if words.is_empty() && open && !word.is_empty() => {
                return needs_shell("a leading NAME=value assignment");
            }
            c => {
                open = true;
                word.push(c);
            }
        }
    }
    if open {
        words.push(word);
    }
    if words.is_empty() {
        return Err("`run` names no program".into());
    }
    Ok(words)
}

/// The end of `text`, at most `max` bytes, cut at a character boundary.
fn tail(text: &str, max: usize) -> (&str, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    (&text[start..], true)
}

fn stream<'a>(result: &'a Value, name: &str) -> &'a str {
    result
        .get(name)
        .and_then(|s| s.get("text"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// What the call's result means for criterion `c`: it passes when the command exited with
/// `expect_exit_code` (default 0) and, when `expect_stdout_matches` is given, its standard
/// output matches that pattern. A command that did not run (denied, refused, in doubt) never
/// passes. The evidence is the exit status and the end of the output.
pub fn settle(c: &Criterion, result: &CallResult) -> (CheckOutcome, String) {
    let result = match result {
        CallResult::Completed { ok: true, result } => result,
        CallResult::Completed { ok: false, result } => {
            let code = result.get("code").and_then(Value::as_str).unwrap_or("");
            let message = result
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("the command could not be run");
            return (
                CheckOutcome::Refused,
                format!("the command could not be run: [{code}] {message}"),
            );
        }
        CallResult::Denied { message, .. } => {
            return (
                CheckOutcome::Refused,
                format!("the command was not run: {message}"),
            );
        }
        CallResult::Refused { code, message } => {
            return (
                CheckOutcome::Refused,
                format!("the command was refused: [{code}] {message}"),
            );
        }
        CallResult::InDoubt => {
            return (
                CheckOutcome::Refused,
                "whether the command ran is in doubt".into(),
            );
        }
    };
    let stdout = stream(result, "stdout");
    let stderr = stream(result, "stderr");
    let mut evidence = String::new();
    let outcome = if result.get("timed_out").and_then(Value::as_bool) == Some(true) {
        evidence.push_str(&format!(
            "timed out{}",
            c.timeout_seconds
                .map(|s| format!(" after {s} s"))
                .unwrap_or_default()
        ));
        CheckOutcome::TimedOut
    } else if let Some(stopped) = result.get("stopped").and_then(Value::as_str) {
        evidence.push_str(&format!("stopped: {stopped}"));
        CheckOutcome::Failed
    } else {
        let exit = result.get("exit_code").and_then(Value::as_i64);
        match exit {
            Some(code) => evidence.push_str(&format!(
                "exit status {code} (expected {})",
                c.expect_exit_code
            )),
            None => evidence.push_str(&format!(
                "ended by signal {} (expected exit status {})",
                result.get("signal").and_then(Value::as_i64).unwrap_or(0),
                c.expect_exit_code
            )),
        }
        let status_ok = exit == Some(c.expect_exit_code);
        let stdout_ok = match &c.expect_stdout_matches {
            None => true,
            Some(p) => match regex::Regex::new(p) {
                Ok(re) => {
                    let m = re.is_match(stdout);
                    evidence.push_str(&format!(
                        "; standard output {} /{p}/",
                        if m { "matches" } else { "does not match" }
                    ));
                    m
                }
                Err(e) => {
                    evidence.push_str(&format!("; `expect_stdout_matches` is not a pattern: {e}"));
                    false
                }
            },
        };
        if status_ok && stdout_ok {
            CheckOutcome::Passed
        } else {
            CheckOutcome::Failed
        }
    };
    for (name, text) in [("stdout", stdout), ("stderr", stderr)] {
        let text = text.trim_end();
        if !text.is_empty() {
            let (end, cut) = tail(text, EVIDENCE_BYTES / 2);
            evidence.push_str(&format!(
                "\n{name}{}:\n{end}",
                if cut { " (its end)" } else { "" }
            ));
        }
    }
    (outcome, evidence)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn a_simple_command_is_split_as_a_shell_would_and_shell_syntax_is_refused() {
        let ok = |s: &str| argv(s).unwrap();
        assert_eq!(
            ok("npx --yes markdownlint-cli CONTRIBUTING.md"),
            ["npx", "--yes", "markdownlint-cli", "CONTRIBUTING.md"]
        );
        assert_eq!(
            ok(r#"grep -q "two words" 'it''s' a\ b """#),
            ["grep", "-q", "two words", "its", "a b", ""]
        );
        assert_eq!(
            ok(r#"sh -c 'test -f a && echo $HOME | wc'"#),
            ["sh", "-c", "test -f a && echo $HOME | wc"]
        );
        assert_eq!(ok("[ -f x ]"), ["[", "-f", "x", "]"]);
        assert_eq!(ok("pytest a=b"), ["pytest", "a=b"]);
        for (bad, what) in [
            ("pytest | tee log", "`|`"),
            ("make && make test", "`&`"),
            ("a; b", "`;`"),
            ("cat < x", "`<`"),
            ("echo > x", "`>`"),
            ("echo $(id)", "`$`"),
            ("echo `id`", "substitution"),
            ("ls *.md", "glob"),
            ("cat ~/.ssh/id_rsa", "`~`"),
            ("CI=1 pytest", "NAME=value"),
            ("echo \"$HOME\"", "double quotes"),
            ("true # comment", "comment"),
        ] {
            let e = argv(bad).unwrap_err();
            assert!(e.contains(what) && e.contains("sh -c"), "{bad}: {e}");
        }
        assert!(argv("echo 'open").unwrap_err().contains("not closed"));
        assert!(argv("   ").unwrap_err().contains("no program"));
    }

    fn criterion(v: Value) -> Criterion {
        let n = crate::model::Node::read(
            "n",
            &json!({"title": "t", "description": "d", "success": {"criteria": [v]}}),
        );
        n.criteria[0].clone()
    }

    fn ran(exit: i64, stdout: &str) -> CallResult {
        CallResult::Completed {
            ok: true,
            result: json!({"exit_code": exit, "timed_out": false,
                "stdout": {"text": stdout}, "stderr": {"text": ""}}),
        }
    }

    #[test]
    fn a_result_passes_on_the_expected_status_and_output_and_never_when_it_did_not_run() {
        let c = criterion(json!({"id": "t", "kind": "command", "description": "d", "run": "x"}));
        assert_eq!(settle(&c, &ran(0, "")).0, CheckOutcome::Passed);
        let (o, evidence) = settle(&c, &ran(1, "3 failed\n"));
        assert_eq!(o, CheckOutcome::Failed);
        assert_eq!(evidence, "exit status 1 (expected 0)\nstdout:\n3 failed");
        let c2 = criterion(json!({"id": "t", "kind": "command", "description": "d",
            "run": "x", "expect_exit_code": 2, "expect_stdout_matches": "^ok$"}));
        assert_eq!(settle(&c2, &ran(2, "ok")).0, CheckOutcome::Passed);
        assert_eq!(settle(&c2, &ran(2, "ko")).0, CheckOutcome::Failed);
        assert_eq!(settle(&c2, &ran(0, "ok")).0, CheckOutcome::Failed);
        let timed = CallResult::Completed {
            ok: true,
            result: json!({"exit_code": null, "signal": 9, "timed_out": true}),
        };
        assert_eq!(settle(&c, &timed).0, CheckOutcome::TimedOut);
        let denied = CallResult::Denied {
            denied: warrant_kernel::DeniedBy::Policy {
                reasons: Vec::new(),
            },
            message: "policy denies it".into(),
        };
        assert_eq!(
            settle(&c, &denied),
            (
                CheckOutcome::Refused,
                "the command was not run: policy denies it".into()
            )
        );
        assert_eq!(settle(&c, &CallResult::InDoubt).0, CheckOutcome::Refused);
        let long = "x".repeat(10_000);
        let (_, evidence) = settle(&c, &ran(1, &long));
        assert!(evidence.len() < EVIDENCE_BYTES, "{}", evidence.len());
    }
}
