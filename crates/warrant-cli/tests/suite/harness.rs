//! A sandbox per test: a workspace copied from the quickstart, and an environment with its own
//! managed and user layers, so nothing on the machine (or in this process) leaks in.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use serde_json::Value;
use tempfile::TempDir;

pub struct Sandbox {
    pub dir: TempDir,
    pub ws: PathBuf,
    pub managed: PathBuf,
    pub home: PathBuf,
    pub extra_env: Vec<(String, String)>,
    /// `--store` for every command (a PostgreSQL test database); `None`: the SQLite default.
    pub store: Option<String>,
}

pub fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/quickstart")
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            fs::copy(e.path(), &target).unwrap();
        }
    }
}

impl Sandbox {
    /// A quickstart workspace, not yet initialized.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        copy_dir(&examples().join("workspace"), &ws);
        let managed = dir.path().join("managed");
        let home = dir.path().join("home");
        fs::create_dir_all(&managed).unwrap();
        fs::create_dir_all(&home).unwrap();
        // Canonical path, as Warrant will see it.
        let ws = fs::canonicalize(ws).unwrap();
        Self {
            dir,
            ws,
            managed,
            home,
            extra_env: Vec::new(),
            store: None,
        }
    }

    /// A quickstart workspace after `warrant init --yes`.
    pub fn init() -> Self {
        Self::init_with(None)
    }

    /// A quickstart workspace after `warrant init --yes`, using `store` when given.
    pub fn init_with(store: Option<String>) -> Self {
        let mut sb = Self::new();
        sb.store = store;
        let out = sb.cmd(&["init", "--yes"]).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        sb
    }

    /// The command as a plain `std::process::Command`, for tests that run it in the background.
    pub fn std_cmd(&self, args: &[&str]) -> std::process::Command {
        let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("warrant"));
        c.current_dir(&self.ws);
        for (k, _) in std::env::vars() {
            if k.starts_with("WARRANT_") || k.starts_with("OPENAI_") || k == "XDG_CONFIG_HOME" {
                c.env_remove(k);
            }
        }
        c.env("WARRANT_MANAGED_DIR", &self.managed)
            .env("HOME", &self.home)
            .env("WARRANT_ACTOR", "tester")
            .env("WARRANT_TENANT", "harbour")
            // No OS keyring unless a test starts one: a developer's desktop keyring stays out.
            .env(
                "DBUS_SESSION_BUS_ADDRESS",
                format!("unix:path={}", self.dir.path().join("no-bus").display()),
            );
        for (k, v) in &self.extra_env {
            c.env(k, v);
        }
        if let Some(store) = &self.store {
            c.arg("--store").arg(store);
        }
        c.args(args);
        c
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        Command::from_std(self.std_cmd(args))
    }

    /// Runs warrant on a real pseudo-terminal (util-linux `script`), typing `input`. Returns
    /// `None` when `script` is not installed.
    pub fn run_in_pty(&self, args: &[&str], input: &str) -> Option<Output> {
        if !Path::new("/usr/bin/script").exists() {
            return None;
        }
        let bin = assert_cmd::cargo::cargo_bin("warrant");
        let quoted: Vec<String> = std::iter::once(bin.display().to_string())
            .chain(args.iter().map(|a| (*a).to_owned()))
            .map(|a| format!("'{}'", a.replace('\'', "'\\''")))
            .collect();
        let mut c = std::process::Command::new("/usr/bin/script");
        c.args(["-q", "-e", "-c", &quoted.join(" "), "/dev/null"])
            .current_dir(&self.ws);
        for (k, _) in std::env::vars() {
            if k.starts_with("WARRANT_") || k.starts_with("OPENAI_") || k == "XDG_CONFIG_HOME" {
                c.env_remove(k);
            }
        }
        c.env("WARRANT_MANAGED_DIR", &self.managed)
            .env("HOME", &self.home)
            .env("WARRANT_ACTOR", "tester")
            .env("WARRANT_TENANT", "harbour");
        let mut cmd = assert_cmd::Command::from_std(c);
        Some(
            cmd.write_stdin(input.to_owned())
                .timeout(std::time::Duration::from_secs(60))
                .output()
                .unwrap(),
        )
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    pub fn run_stdin(&self, args: &[&str], stdin: &str) -> Output {
        self.cmd(args)
            .write_stdin(stdin.to_owned())
            .output()
            .unwrap()
    }

    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.ws.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, text).unwrap();
        p
    }

    /// Writes a transcript outside the workspace and returns the `--model` value.
    pub fn transcript(&self, yaml: &str) -> String {
        let p = self.dir.path().join(format!("t{}.yaml", rand_suffix()));
        fs::write(&p, yaml).unwrap();
        format!("scripted:{}", p.display())
    }

    pub fn quickstart_model(&self) -> String {
        format!("scripted:{}", examples().join("transcript.yaml").display())
    }

    pub fn json(&self, args: &[&str]) -> Value {
        let out = self.run(args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The last run's id and its events. A run raised only to hold a proposal to change an
    /// agent profile (started after the run whose delta proposed it) is not counted.
    pub fn last_run(&self) -> (String, Vec<Value>) {
        let runs = self.json(&["runs", "list", "--json"]);
        let run = runs["runs"]
            .as_array()
            .unwrap()
            .iter()
            .rfind(|r| {
                !r["task"]
                    .as_str()
                    .unwrap_or_default()
                    .starts_with("a person reviews a proposal")
            })
            .unwrap()["run"]
            .as_str()
            .unwrap()
            .to_owned();
        let shown = self.json(&["runs", "show", &run, "--json"]);
        (run, shown["events"].as_array().unwrap().clone())
    }

    /// A project whose commands are all reviewed: a policy that asks a person for every
    /// `shell.exec` (contained commands otherwise run without asking).
    pub fn review_commands(&self) {
        self.write(
            ".warrant/policies/review-commands.cedar",
            "@id(\"review-commands\")\n@ask(\"change\")\n@reason(\"Commands in this project are reviewed by a person.\")\npermit (principal, action == Warrant::Action::\"shell.exec\", resource is Warrant::Command)\nwhen { resource.in_workspace };\n",
        );
    }

    /// Adds `[profiles.open]` with `unconfined = true` to the project configuration.
    pub fn add_unconfined_profile(&self) {
        let config = self.ws.join(".warrant/config.toml");
        let mut text = std::fs::read_to_string(&config).unwrap();
        text.push_str("\n[profiles.open]\nunconfined = true\n");
        std::fs::write(&config, text).unwrap();
    }

    pub fn exists(&self, rel: &str) -> bool {
        self.ws.join(rel).exists()
    }
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::SeqCst)
}

/// `s` as a regular expression that matches it literally (for snapshot filters).
pub fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if "\\.+*?()|[]{}^$".contains(c) {
                vec!['\\', c]
            } else {
                vec![c]
            }
        })
        .collect()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_owned())
        .collect()
}

/// The request id a parked run printed on standard error.
pub fn parked_request(o: &Output) -> String {
    stderr(o)
        .lines()
        .find_map(|l| l.strip_prefix("parked: "))
        .unwrap_or_else(|| panic!("no parked line in: {}", stderr(o)))
        .trim()
        .to_owned()
}

/// Installs the terminal emulator the screen tests read with, once per test process, when this
/// machine's Python does not have it (as the PostgreSQL harness installs its server): the test
/// command works on a fresh machine as written, and never skips.
fn ensure_pyte() {
    static READY: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    READY.get_or_init(|| {
        let has = |py: &str| {
            std::process::Command::new("python3")
                .args(["-c", py])
                .output()
                .is_ok_and(|o| o.status.success())
        };
        if has("import pyte") {
            return;
        }
        eprintln!("the screen tests need the Python package pyte: installing it with pip");
        let out = std::process::Command::new("python3")
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "pyte",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success() && has("import pyte"),
            "could not install pyte (`python3 -m pip install pyte`): {}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

/// What a person's terminal showed: the screen of a terminal emulator fed every byte `warrant`
/// wrote on a real pseudo-terminal.
pub struct Screen {
    pub exit: i32,
    pub lines: Vec<String>,
}

impl Sandbox {
    /// Runs warrant on a real pseudo-terminal of `cols` columns, types `answer` at its
    /// approval prompt, and returns the emulated screen (tests/pty/screen.py, on the Python
    /// package `pyte`, which `.ci/run` installs).
    pub fn run_on_screen(&self, args: &[&str], answer: &str, cols: u16) -> Screen {
        ensure_pyte();
        let warrant = self.std_cmd(args);
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pty/screen.py");
        let mut c = std::process::Command::new("python3");
        c.arg(script)
            .arg(cols.to_string())
            .arg("400")
            .arg("or [d]eny? ")
            .arg(answer.replace('\n', "\\n"))
            .arg("--")
            .arg(warrant.get_program())
            .args(warrant.get_args());
        if let Some(dir) = warrant.get_current_dir() {
            c.current_dir(dir);
        }
        for (k, v) in warrant.get_envs() {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "the pty screen script failed (is `pyte` installed? `pip install pyte`): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        Screen {
            exit: i32::try_from(doc["exit"].as_i64().unwrap()).unwrap(),
            lines: doc["screen"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l.as_str().unwrap().to_owned())
                .collect(),
        }
    }
}

impl Sandbox {
    /// Runs warrant on a real pseudo-terminal and holds a conversation with it: each
    /// `(marker, typed)` step is typed once its marker has appeared after the previous one's
    /// (tests/pty/screen.py --steps). Fails the test when a marker never appears.
    pub fn converse_on_screen(&self, args: &[&str], steps: &[(&str, &str)], cols: u16) -> Screen {
        ensure_pyte();
        let warrant = self.std_cmd(args);
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pty/screen.py");
        let steps: Vec<[&str; 2]> = steps.iter().map(|(m, t)| [*m, *t]).collect();
        let mut c = std::process::Command::new("python3");
        c.arg(script)
            .arg(cols.to_string())
            .arg("200")
            .arg("--steps")
            .arg(serde_json::to_string(&steps).unwrap())
            .arg("--")
            .arg(warrant.get_program())
            .args(warrant.get_args());
        if let Some(dir) = warrant.get_current_dir() {
            c.current_dir(dir);
        }
        for (k, v) in warrant.get_envs() {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        let out = c.output().unwrap();
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        assert!(
            out.status.success(),
            "the conversation stopped at step {} of {}: {}\nwhat the program wrote:\n{}",
            doc["steps"],
            steps.len(),
            String::from_utf8_lossy(&out.stderr),
            doc["raw"].as_str().unwrap_or("")
        );
        Screen {
            exit: i32::try_from(doc["exit"].as_i64().unwrap()).unwrap(),
            lines: doc["screen"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l.as_str().unwrap().to_owned())
                .collect(),
        }
    }
}

/// Where test peers are cached: outside the repository, kept between runs.
pub fn peers_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("warrant-test-peers")
}

/// A cached virtual environment `name` under [`peers_dir`] whose Python can run `probe`
/// (an import line), made and filled with `packages` by pip the first time; never skipped: a
/// failed install fails the test with pip's words. Returns the venv's directory.
pub fn python_venv(name: &str, probe: &str, packages: &[&str]) -> PathBuf {
    let venv = peers_dir().join(name);
    let python = venv.join("bin/python");
    let has = || {
        std::process::Command::new(&python)
            .args(["-c", probe])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if has() {
        return venv;
    }
    eprintln!("installing {packages:?} into {}", venv.display());
    std::fs::create_dir_all(peers_dir()).unwrap();
    let made = std::process::Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "python3 -m venv: {}",
        String::from_utf8_lossy(&made.stderr)
    );
    let pip = std::process::Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(packages)
        .output()
        .unwrap();
    assert!(
        pip.status.success() && has(),
        "could not install {packages:?}: {}",
        String::from_utf8_lossy(&pip.stderr)
    );
    venv
}

/// Polls `cond` every 50 ms until it holds; panics naming `what` after `limit` (a guard against
/// a hang, not a timing assertion).
pub fn wait_until(what: &str, limit: std::time::Duration, mut cond: impl FnMut() -> bool) {
    let started = std::time::Instant::now();
    while !cond() {
        assert!(started.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
