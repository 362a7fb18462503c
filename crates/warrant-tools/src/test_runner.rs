//! `run_tests`: a named test command from configuration (`[tests.<name>] argv, profile,
//! timeout_ms`), or the project's runner detected from its files (cargo, pytest, npm, go). It
//! normalizes into the same `shell.exec` action `run_command` makes, so it runs contained under
//! the default profile and is decided, judged and journaled like any command; its result adds
//! a summary for the model (counts, the first failures) beside the captured output.
//!
//! Limits: counts are read from each runner's usual summary lines; another runner's output gets
//! only its exit code and failure lines.

use serde::Serialize;
use serde_json::{Value, json};
use warrant_core::{Action, ToolSpec};
use warrant_kernel::{
    Authorized, EffectResult, Presentation, ReadFilter, Refusal, StopCheck, Tool, ToolEnv,
};

use crate::builtin::{RunCommand, spec};

pub(crate) fn all() -> Vec<Box<dyn Tool>> {
    vec![Box::new(RunTests {
        spec: spec(
            "run_tests",
            "Run the project's tests: a configured [tests.<name>] command, or the detected runner (cargo test, pytest, npm test, go test). Returns counts and the first failures, and the output.",
            json!({"type": "object", "properties": {"name": {"type": "string", "minLength": 1}}, "additionalProperties": false}),
        ),
        command: RunCommand::tool(),
    })]
}

struct RunTests {
    spec: ToolSpec,
    command: RunCommand,
}

/// The command, profile and timeout a `run_tests` call runs.
fn chosen(args: &Value, env: &ToolEnv) -> Result<(String, Value), Refusal> {
    let configured = |name: &str, t: &warrant_core::config::TestsConfig| {
        let mut a = json!({"argv": t.argv});
        if let Some(p) = &t.profile {
            a["profile"] = json!(p);
        }
        if let Some(ms) = t.timeout_ms {
            a["timeout_ms"] = json!(ms);
        }
        (name.to_owned(), a)
    };
    let names = || env.tests.keys().cloned().collect::<Vec<_>>().join(", ");
    if let Some(name) = args.get("name").and_then(Value::as_str) {
        return env
            .tests
            .get(name)
            .map(|t| configured(name, t))
            .ok_or_else(|| Refusal {
                code: "W-TEST-001".into(),
                message: if env.tests.is_empty() {
                    format!("no [tests.{name}] is configured (no [tests.*] at all); call run_tests without a name to use the detected runner")
                } else {
                    format!("no [tests.{name}] is configured; configured: {}", names())
                },
            });
    }
    match env.tests.len() {
        0 => {}
        1 => {
            if let Some((name, t)) = env.tests.iter().next() {
                return Ok(configured(name, t));
            }
        }
        _ => {
            return env
                .tests
                .get("default")
                .map(|t| configured("default", t))
                .ok_or_else(|| Refusal {
                    code: "W-TEST-001".into(),
                    message: format!(
                        "several test commands are configured ({}) and none is named `default`; name one",
                        names()
                    ),
                });
        }
    }
    let ws = env.workspace.as_path();
    let has = |f: &str| ws.join(f).exists();
    let argv: Option<&[&str]> = if has("Cargo.toml") {
        Some(&["cargo", "test"])
    } else if has("go.mod") {
        Some(&["go", "test", "./..."])
    } else if has("package.json") {
        Some(&["npm", "test"])
    } else if has("pytest.ini")
        || has("pyproject.toml")
        || has("setup.cfg")
        || has("tox.ini")
        || has("conftest.py")
        || has("tests")
    {
        Some(&["python3", "-m", "pytest", "-q"])
    } else {
        None
    };
    match argv {
        Some(argv) => Ok(("detected".to_owned(), json!({"argv": argv}))),
        None => Err(Refusal {
            code: "W-TEST-002".into(),
            message: format!(
                "no test runner found in {} (no Cargo.toml, go.mod, package.json or pytest files) and no [tests.<name>] configured",
                env.workspace
            ),
        }),
    }
}

impl Tool for RunTests {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// Any class: a configured test command is a command line like any other.
    fn worst_class(&self) -> Option<warrant_core::RiskClass> {
        Some(warrant_core::RiskClass::Irreversible)
    }

    fn normalize(&self, args: &Value, env: &ToolEnv) -> Result<Vec<Action>, Refusal> {
        let (_, command) = chosen(args, env)?;
        self.command.normalize(&command, env)
    }

    fn present(&self, actions: &[Action], env: &ToolEnv) -> Presentation {
        let mut p = self.command.present(actions, env);
        p.title = format!("tests: {}", p.title);
        p
    }

    fn execute(
        &self,
        actions: &[Authorized<Action>],
        env: &ToolEnv,
        may_read: ReadFilter<'_>,
        stop: StopCheck<'_>,
    ) -> EffectResult {
        let mut r = self.command.execute(actions, env, may_read, stop);
        add_summary(&mut r.result);
        r
    }

    fn settle(
        &self,
        actions: &[Authorized<Action>],
        result: &Value,
        approved: bool,
        env: &ToolEnv,
    ) -> EffectResult {
        self.command.settle(actions, result, approved, env)
    }
}

/// What the model reads first: pass/fail counts and the first failures.
#[derive(Debug, Default, PartialEq, Eq, Serialize)]
pub struct TestSummary {
    pub passed: u64,
    pub failed: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub ignored: u64,
    /// Whether counts were found in the output (else only the exit code speaks).
    pub counted: bool,
    pub first_failures: Vec<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn add_summary(result: &mut Value) {
    let out = |k: &str| {
        result
            .get(k)
            .and_then(|s| s.get("text"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let text = format!("{}\n{}", out("stdout"), out("stderr"));
    if let Some(map) = result.as_object_mut() {
        map.insert(
            "summary".into(),
            serde_json::to_value(summarize(&text)).unwrap_or(Value::Null),
        );
    }
}

/// The number before `word` in `line` (`12 passed` → 12).
fn count_before(line: &str, word: &str) -> Option<u64> {
    let words: Vec<&str> = line
        .split(|c: char| c.is_whitespace() || c == ',' || c == ';' || c == '=')
        .filter(|w| !w.is_empty())
        .collect();
    words
        .windows(2)
        .find(|w| w[1].trim_end_matches(['.', ',', ';']) == word)
        .and_then(|w| w[0].parse().ok())
}

/// Counts and failures from cargo's `test result:` lines, pytest's `N passed, M failed`, go's
/// `--- FAIL` / `ok` / `FAIL` lines and npm/jest/mocha's `Tests:` / `passing` / `failing`.
pub fn summarize(text: &str) -> TestSummary {
    let mut s = TestSummary::default();
    for line in text.lines() {
        let l = line.trim();
        let counts_line = l.starts_with("test result:")
            || (l.starts_with('=') && (l.contains(" passed") || l.contains(" failed")))
            || l.starts_with("Tests:")
            || l.ends_with(" passing")
            || l.ends_with(" failing")
            || l.contains("# pass")
            || l.contains("# fail");
        if counts_line {
            let add = |n: Option<u64>, to: &mut u64| {
                if let Some(n) = n {
                    *to += n;
                }
            };
            add(
                count_before(l, "passed").or(count_before(l, "passing")),
                &mut s.passed,
            );
            add(
                count_before(l, "failed").or(count_before(l, "failing")),
                &mut s.failed,
            );
            add(
                count_before(l, "ignored").or(count_before(l, "skipped")),
                &mut s.ignored,
            );
            if let Some(n) = l
                .strip_prefix("# pass")
                .and_then(|r| r.trim().parse::<u64>().ok())
            {
                s.passed += n;
            }
            if let Some(n) = l
                .strip_prefix("# fail")
                .and_then(|r| r.trim().parse::<u64>().ok())
            {
                s.failed += n;
            }
            s.counted = true;
        }
        if l.starts_with("--- PASS") {
            s.passed += 1;
            s.counted = true;
        }
        let failure = (l.starts_with("test ") && l.ends_with("... FAILED"))
            || l.starts_with("FAILED ")
            || l.starts_with("--- FAIL")
            || l.starts_with("✕")
            || l.starts_with("not ok ")
            || (l.starts_with("thread '") && l.contains("panicked"));
        if l.starts_with("--- FAIL") {
            s.failed += 1;
            s.counted = true;
        }
        if failure && s.first_failures.len() < 10 && !s.first_failures.iter().any(|f| f == l) {
            s.first_failures.push(l.chars().take(300).collect());
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn counts_come_from_each_runner_s_summary() {
        let cargo = "running 3 tests\ntest a ... ok\ntest b ... FAILED\nthread 'b' panicked at src/lib.rs:3:5:\ntest result: FAILED. 2 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out";
        assert_eq!(
            summarize(cargo),
            TestSummary {
                passed: 2,
                failed: 1,
                ignored: 1,
                counted: true,
                first_failures: vec![
                    "test b ... FAILED".into(),
                    "thread 'b' panicked at src/lib.rs:3:5:".into()
                ],
            }
        );
        let pytest = "FAILED tests/test_x.py::test_two - assert 1 == 2\n========= 1 failed, 4 passed in 0.03s =========";
        assert_eq!(
            summarize(pytest),
            TestSummary {
                passed: 4,
                failed: 1,
                ignored: 0,
                counted: true,
                first_failures: vec!["FAILED tests/test_x.py::test_two - assert 1 == 2".into()],
            }
        );
        let go = "--- FAIL: TestX (0.00s)\n--- PASS: TestY (0.00s)\nFAIL\tex.com/m\t0.01s";
        assert_eq!(
            summarize(go),
            TestSummary {
                passed: 1,
                failed: 1,
                ignored: 0,
                counted: true,
                first_failures: vec!["--- FAIL: TestX (0.00s)".into()],
            }
        );
        assert_eq!(summarize("nothing to see").counted, false);
    }
}
