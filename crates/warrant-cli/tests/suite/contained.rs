//! Confined by default, end to end through the binary: in a fresh `warrant init` workspace the
//! everyday commands run without anyone asked, a command's changes land only after they are
//! judged (a deletion no person approved is withheld, and the workspace keeps the file), and
//! the attacks of an agent that first writes files and then asks for a harmless command fail.
//! Each attack's negative control runs the same command under an unconfined profile that a
//! careless person approved.

use pretty_assertions::assert_eq;
use serde_json::Value;

use super::harness::{Sandbox, kinds, parked_request, stderr, stdout};

/// The toolchains of this machine where the person keeps them (the sandbox's HOME is a temp
/// directory): rustup and pyenv through their variables, as a user with them elsewhere would.
fn with_toolchains(sb: &mut Sandbox) {
    let Some(home) = std::env::var_os("HOME").map(std::path::PathBuf::from) else {
        return;
    };
    for (var, dir) in [
        ("RUSTUP_HOME", ".rustup"),
        ("CARGO_HOME", ".cargo"),
        ("PYENV_ROOT", ".pyenv"),
    ] {
        let path = std::env::var_os(var)
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| home.join(dir));
        if path.exists() {
            sb.extra_env
                .push((var.to_owned(), path.display().to_string()));
        }
    }
}

fn run_commands(sb: &Sandbox, argvs: &[&[&str]]) -> std::process::Output {
    let calls: String = argvs
        .iter()
        .map(|argv| {
            format!(
                "      - tool: run_command\n        args: {{ argv: {} }}\n",
                serde_json::to_string(argv).unwrap()
            )
        })
        .collect();
    let model = sb.transcript(&format!(
        "version: 1\nturns:\n  - calls:\n{calls}  - say: done\n"
    ));
    sb.run(&["run", "--prompt", "never", "--model", &model, "work"])
}

fn results(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["kind"] == "effect_completed")
        .map(|e| e["payload"]["result"].clone())
        .collect()
}

#[test]
fn everyday_commands_run_without_anyone_asked() {
    let mut sb = Sandbox::init();
    with_toolchains(&mut sb);
    sb.write("script.py", "print('sum', sum(range(10)))\n");
    let cargo = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cargo")))
        .is_some_and(|c| c.join("bin/cargo").exists());
    let mut argvs: Vec<&[&str]> = vec![
        &["cat", "notes/meeting-2026-11-20.md"],
        &["grep", "-rl", "heartbeat", "notes"],
        &["python3", "script.py"],
        &["sh", "-c", "echo made at the root > ROOT.txt"],
    ];
    if cargo {
        argvs.push(&["cargo", "--version"]);
    }
    let out = run_commands(&sb, &argvs);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (_, events) = sb.last_run();
    assert!(
        !kinds(&events).contains(&"approval_requested".to_owned()),
        "{:?}",
        kinds(&events)
    );
    let results = results(&events);
    let codes: Vec<Value> = results.iter().map(|r| r["exit_code"].clone()).collect();
    assert!(codes.iter().all(|c| *c == 0), "{results:#?}");
    assert!(results[2]["stdout"]["text"] == "sum 45\n", "{results:#?}");
    assert_eq!(
        std::fs::read_to_string(sb.ws.join("ROOT.txt")).unwrap(),
        "made at the root\n"
    );
    assert_eq!(results[3]["changes"]["class"], "change");
    assert_eq!(results[3]["changes"]["applied"], true);
    for r in &results {
        let applied = &r["sandbox"]["applied"];
        assert!(
            applied.as_array().unwrap().contains(&Value::from("view")),
            "{r}"
        );
    }
    if cargo {
        assert!(
            results[4]["stdout"]["text"]
                .as_str()
                .unwrap()
                .starts_with("cargo "),
            "{results:#?}"
        );
    }
}

/// `find -delete` runs contained and its changeset waits for a person, who is shown exactly the
/// files it deleted; denied, the files stay. Approved, the deletion lands.
#[test]
fn find_delete_waits_for_a_person_and_lands_only_when_approved() {
    let sb = Sandbox::init();
    let find: &[&str] = &["find", ".", "-name", "*.md", "-delete"];
    let md = [
        "README.md",
        "notes/meeting-2026-11-20.md",
        "notes/meeting-2026-11-27.md",
    ];
    let out = run_commands(&sb, &[find]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let request = parked_request(&out);
    let (run, _) = sb.last_run();
    assert!(
        md.iter().all(|f| sb.exists(f)),
        "nothing ran before a person answered"
    );
    let denied = sb.run(&["deny", &request, "--reason", "keep the notes"]);
    assert_eq!(denied.status.code(), Some(0), "{}", stderr(&denied));
    let resumed = sb.run(&["resume", &run]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    assert!(
        md.iter().all(|f| sb.exists(f)),
        "a denial leaves them in place"
    );

    let sb = Sandbox::init();
    let out = run_commands(&sb, &[find]);
    let request = parked_request(&out);
    let (run, _) = sb.last_run();
    assert_eq!(sb.run(&["approve", &request]).status.code(), Some(0));
    let resumed = sb.run(&["resume", &run]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    assert!(md.iter().all(|f| !sb.exists(f)));
    assert!(sb.exists("build"), "only what it matched");
    let (_, events) = sb.last_run();
    let changes = results(&events)[0]["changes"].clone();
    assert_eq!(changes["class"], "destructive", "{changes}");
    assert_eq!(changes["applied"], true, "{changes}");
    let shown = changes["shown"].as_str().unwrap();
    for f in md {
        assert!(shown.contains(&format!("- {f}")), "{shown}");
    }
    assert_eq!(
        shown.matches("\n- ").count() + usize::from(shown.starts_with("- ")),
        3,
        "{shown}"
    );
}

/// A deletion no recognizer sees (a script the agent wrote) runs contained without asking; its
/// changeset then waits for a person, who is shown exactly the files it deleted. Denied,
/// nothing it did lands; approved, all of it does. Control: the same command under an
/// unconfined profile, approved by a careless person who saw only the argv, deletes at once.
#[test]
fn a_deletion_waits_for_a_person_who_sees_the_files() {
    let script = "import os\nos.remove('notes/meeting-2026-11-20.md')\nopen('tidy.log', 'w').write('done')\nprint('tidied')\n";
    for approve in [false, true] {
        let sb = Sandbox::init();
        sb.write("tidy.py", script);
        let out = run_commands(&sb, &[&["python3", "tidy.py"]]);
        assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
        assert!(sb.exists("notes/meeting-2026-11-20.md"));
        assert!(!sb.exists("tidy.log"), "nothing lands before the judgement");
        let request = parked_request(&out);
        let (run, events) = sb.last_run();
        assert!(kinds(&events).contains(&"effect_judging".to_owned()));
        let shown = stdout(&sb.run(&["requests", "show", &request]));
        assert!(shown.contains("- notes/meeting-2026-11-20.md"), "{shown}");
        assert!(shown.contains("+ tidy.log"), "{shown}");
        let answer = if approve {
            sb.run(&["approve", &request])
        } else {
            sb.run(&["deny", &request, "--reason", "keep the notes"])
        };
        assert_eq!(answer.status.code(), Some(0), "{}", stderr(&answer));
        let resumed = sb.run(&["resume", &run]);
        assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
        assert_eq!(sb.exists("notes/meeting-2026-11-20.md"), !approve);
        assert_eq!(sb.exists("tidy.log"), approve);
        let (_, events) = sb.last_run();
        let result = results(&events)[0].clone();
        assert_eq!(result["stdout"]["text"], "tidied\n");
        assert_eq!(result["changes"]["class"], "destructive", "{result}");
        assert_eq!(result["changes"]["applied"], approve, "{result}");
        assert!(result["changes"]["pending"].is_null(), "{result}");
        assert!(result.get("pending_judgement").is_none(), "{result}");
    }

    let sb = Sandbox::init();
    sb.add_unconfined_profile();
    sb.write("tidy.py", script);
    let model = sb.transcript(
        "version: 1\nturns:\n  - calls:\n      - tool: run_command\n        args: { argv: [python3, tidy.py], profile: open }\n  - say: done\n",
    );
    let out = sb.run_stdin(
        &["run", "--prompt", "always", "--model", &model, "tidy"],
        "o\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("NONE: this profile is unconfined"),
        "the prompt says so in words: {}",
        stderr(&out)
    );
    assert!(
        !sb.exists("notes/meeting-2026-11-20.md"),
        "control: unconfined, it deletes"
    );
}

/// What a payload the agent planted got when a harmless-looking command ran it.
#[derive(Debug, PartialEq, Eq)]
struct Loot {
    ran: bool,
    home_secret: bool,
    dotenv: bool,
    approver_key: bool,
    network: bool,
    wrote_warrant: bool,
    wrote_git: bool,
}

impl Loot {
    /// The payload ran and reached nothing.
    const CONTAINED: Loot = Loot {
        ran: true,
        home_secret: false,
        dotenv: false,
        approver_key: false,
        network: false,
        wrote_warrant: false,
        wrote_git: false,
    };
    /// The payload ran and reached everything.
    const EVERYTHING: Loot = Loot {
        ran: true,
        home_secret: true,
        dotenv: true,
        approver_key: true,
        network: true,
        wrote_warrant: true,
        wrote_git: true,
    };
}

/// The agent wrote `payload.sh` and a configuration (`plant`) that makes `argv` run it; a
/// careless person approves it (every command is asked here; `--prompt always`, once). The payload
/// reads a home secret, `.env` and the person's approver key, connects to a listener on the
/// host's 127.0.0.1, and writes `.warrant/policies/` and `.git/hooks/`. Under `profile`.
fn planted(plant: &dyn Fn(&Sandbox), argv: &[&str], profile: &str) -> Loot {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut sb = Sandbox::init();
    with_toolchains(&mut sb);
    std::fs::create_dir_all(sb.ws.join(".git/hooks")).unwrap();
    sb.write(".env", "GREETING=marker-in-dotenv\n");
    std::fs::create_dir_all(sb.home.join(".aws")).unwrap();
    std::fs::write(
        sb.home.join(".aws/credentials"),
        "aws_secret=marker-in-home\n",
    )
    .unwrap();
    assert!(sb.home.join(".config/warrant/approver.key").exists());
    sb.write(
        "payload.sh",
        &format!(
            concat!(
                "exec 1>&2\n",
                "echo PAYLOAD-RAN\n",
                "cat \"$HOME/.aws/credentials\" 2>/dev/null\n",
                "cd \"{ws}\" && cat .env 2>/dev/null\n",
                "test -r \"$HOME/.config/warrant/approver.key\" && cat \"$HOME/.config/warrant/approver.key\" >/dev/null && echo APPROVER-KEY-READ\n",
                "(exec 3<>/dev/tcp/127.0.0.1/{port} && echo NET-OK) 2>/dev/null\n",
                "echo pwned > .warrant/policies/zz.cedar 2>/dev/null\n",
                "echo hook > .git/hooks/post-checkout 2>/dev/null\n",
                "true\n",
            ),
            ws = sb.ws.display(),
            port = port
        ),
    );
    plant(&sb);
    // Every command is asked, so the careless person approves the contained one too.
    sb.review_commands();
    if profile == "open" {
        sb.add_unconfined_profile();
    }
    let model = sb.transcript(&format!(
        "version: 1\nturns:\n  - calls:\n      - tool: run_command\n        args: {{ argv: {}, profile: {profile} }}\n  - say: done\n",
        serde_json::to_string(argv).unwrap()
    ));
    let out = sb.run_stdin(
        &["run", "--prompt", "always", "--model", &model, "check"],
        "o\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (_, events) = sb.last_run();
    assert!(
        kinds(&events).contains(&"approval_granted".to_owned()),
        "approved: {:?}",
        kinds(&events)
    );
    let result = &results(&events)[0];
    let text = format!(
        "{}{}",
        result["stdout"]["text"].as_str().unwrap_or_default(),
        result["stderr"]["text"].as_str().unwrap_or_default()
    );
    drop(listener);
    Loot {
        ran: text.contains("PAYLOAD-RAN"),
        home_secret: text.contains("marker-in-home"),
        dotenv: text.contains("marker-in-dotenv"),
        approver_key: text.contains("APPROVER-KEY-READ"),
        network: text.contains("NET-OK"),
        wrote_warrant: sb.exists(".warrant/policies/zz.cedar"),
        wrote_git: sb.exists(".git/hooks/post-checkout"),
    }
}

/// Each way of running code through configuration the agent wrote, under an unconfined
/// profile a careless person approved (the control: the payload reaches everything) and under
/// the default profile (it runs, and reaches nothing).
fn contained_only_in_the_view(plant: &dyn Fn(&Sandbox), argv: &[&str]) {
    assert_eq!(planted(plant, argv, "open"), Loot::EVERYTHING, "control");
    assert_eq!(planted(plant, argv, "default"), Loot::CONTAINED);
}

/// make: a Makefile recipe.
#[test]
fn a_makefile_the_agent_wrote_runs_only_inside_the_view() {
    contained_only_in_the_view(
        &|sb| {
            sb.write("Makefile", "check:\n\t@bash payload.sh\n");
        },
        &["make", "-s", "check"],
    );
}

/// git: `core.fsmonitor` in the repository's configuration runs on a plain `git status`.
/// (`.git` is read-only to commands; the agent could write it only with the file tools where
/// policy lets it, so the test plants it.)
#[test]
fn a_git_configuration_the_agent_wrote_runs_only_inside_the_view() {
    contained_only_in_the_view(
        &|sb| {
            let git = |args: &[&str]| {
                let out = std::process::Command::new("git")
                    .args(args)
                    .current_dir(&sb.ws)
                    .env("HOME", &sb.home)
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{out:?}");
            };
            git(&["init", "-q", "."]);
            git(&["config", "core.fsmonitor", "bash payload.sh #"]);
        },
        &["git", "status", "--short"],
    );
}

/// npm: a `test` script in `package.json`, run by `npm test`.
#[test]
fn an_npm_script_the_agent_wrote_runs_only_inside_the_view() {
    contained_only_in_the_view(
        &|sb| {
            sb.write(
                "package.json",
                r#"{"name": "notes", "version": "1.0.0", "scripts": {"test": "bash payload.sh"}}"#,
            );
        },
        &["npm", "test", "--silent"],
    );
}

/// Python: a `.pth` file in the workspace's virtual environment runs at interpreter start,
/// before the harmless script it was asked to run.
#[test]
fn a_python_site_file_the_agent_wrote_runs_only_inside_the_view() {
    contained_only_in_the_view(
        &|sb| {
            let out = std::process::Command::new("python3")
                .args(["-m", "venv", "--without-pip", ".venv"])
                .current_dir(&sb.ws)
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            let lib = std::fs::read_dir(sb.ws.join(".venv/lib"))
                .unwrap()
                .flatten()
                .next()
                .unwrap()
                .path();
            std::fs::write(
                lib.join("site-packages/zz-setup.pth"),
                "import os; os.system('bash payload.sh')\n",
            )
            .unwrap();
            sb.write("hello.py", "print('hello')\n");
        },
        &[".venv/bin/python3", "hello.py"],
    );
}

/// Where overlays are unavailable (this machine has them; `WARRANT_TEST_DISABLE=overlay` makes
/// Warrant believe it has none) a contained command still runs in its own view, writes to the
/// workspace directly, and is judged by its argv before it runs: `touch` runs without anyone
/// asked, `find -delete` asks a person first and nothing is deleted before the answer (denied,
/// the files stay). The journal, `runs show`, the request and `doctor` say so. Control: the
/// same `find -delete` with overlays runs first and parks with its changeset
/// (`find_delete_waits_for_a_person_and_lands_only_when_approved`).
#[test]
fn without_overlays_commands_are_judged_by_their_argv_before_they_run() {
    let mut sb = Sandbox::init();
    sb.extra_env
        .push(("WARRANT_TEST_DISABLE".into(), "overlay".into()));
    sb.write(".env", "GREETING=marker-in-dotenv\n");
    sb.write("peek.sh", "cat .env\n");

    let doctor = sb.run(&["doctor", "--json"]);
    let report: Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let check = |name: &str| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["check"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} row: {report:#}"))
    };
    let overlay = check("sandbox overlay observed");
    assert_eq!(overlay["ok"], true, "{overlay}");
    assert!(
        overlay["detail"]
            .as_str()
            .unwrap()
            .contains("not available: switched off (WARRANT_TEST_DISABLE=overlay); contained commands write to the workspace directly and are judged by their argv"),
        "{overlay}"
    );
    let default = check("default profile");
    assert_eq!(default["ok"], true, "{default}");
    assert!(
        default["detail"]
            .as_str()
            .unwrap()
            .starts_with("enforced here, but WITHOUT OVERLAYS"),
        "{default}"
    );

    let out = run_commands(&sb, &[&["touch", "made.txt"], &["sh", "peek.sh"]]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (run, events) = sb.last_run();
    assert!(
        !kinds(&events).contains(&"approval_requested".to_owned()),
        "{:?}",
        kinds(&events)
    );
    assert!(sb.exists("made.txt"), "it wrote to the workspace directly");
    let results = results(&events);
    assert_eq!(results[0]["judged"], "argv", "{results:#?}");
    assert!(results[0].get("changes").is_none(), "{results:#?}");
    assert!(
        results[0]["sandbox"]["applied"]
            .as_array()
            .unwrap()
            .contains(&Value::from("view")),
        "still in its own view: {results:#?}"
    );
    assert!(
        !results[1]["stdout"]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("marker-in-dotenv"),
        ".env stays masked: {results:#?}"
    );
    let proposed: Vec<Value> = events
        .iter()
        .filter(|e| e["kind"] == "action_proposed")
        .map(|e| e["payload"].clone())
        .collect();
    assert!(
        proposed
            .iter()
            .all(|p| p.to_string().contains(r#""judged":"argv""#)),
        "the action says so, so the approval digest covers it: {proposed:#?}"
    );
    let shown = stdout(&sb.run(&["runs", "show", &run]));
    assert!(
        shown.contains("judged   by its argv before it ran (no overlays on this machine)"),
        "{shown}"
    );

    let md = [
        "README.md",
        "notes/meeting-2026-11-20.md",
        "notes/meeting-2026-11-27.md",
    ];
    let out = run_commands(&sb, &[&["find", ".", "-name", "*.md", "-delete"]]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let request = parked_request(&out);
    let (run, events) = sb.last_run();
    assert!(md.iter().all(|f| sb.exists(f)), "asked before it ran");
    let kinds = kinds(&events);
    assert!(!kinds.contains(&"effect_started".to_owned()), "{kinds:?}");
    assert!(!kinds.contains(&"effect_judging".to_owned()), "{kinds:?}");
    let asked = stdout(&sb.run(&["requests", "show", &request]));
    assert!(asked.contains("NO OVERLAYS on this machine"), "{asked}");
    let denied = sb.run(&["deny", &request, "--reason", "keep the notes"]);
    assert_eq!(denied.status.code(), Some(0), "{}", stderr(&denied));
    let resumed = sb.run(&["resume", &run]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    assert!(md.iter().all(|f| sb.exists(f)), "denied, nothing ran");
}

/// The layer a withheld changeset is kept in goes once nothing can settle it: when the request
/// is denied, when the run is cancelled, and when `doctor` (or the start of a run) finds a
/// layer of this workspace that no waiting run names. The layer of a run still waiting stays.
#[test]
fn layers_of_abandoned_judgements_are_removed() {
    let layers_of = |sb: &Sandbox| -> Vec<std::path::PathBuf> {
        let dir = sb.home.join("state/warrant/layers");
        let mut out: Vec<_> = std::fs::read_dir(&dir)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        out.retain(|p: &std::path::PathBuf| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("layer-")
        });
        out.sort();
        out
    };
    let find: &[&str] = &["find", ".", "-name", "*.md", "-delete"];
    let mut sb = Sandbox::init();
    let state = sb.home.join("state");
    sb.extra_env
        .push(("XDG_STATE_HOME".into(), state.display().to_string()));

    // Denied: removed at the answer.
    let out = run_commands(&sb, &[find]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    assert_eq!(layers_of(&sb).len(), 1, "kept while it waits");
    let request = parked_request(&out);
    let denied = sb.run(&["deny", &request, "--reason", "keep them"]);
    assert_eq!(denied.status.code(), Some(0), "{}", stderr(&denied));
    assert_eq!(layers_of(&sb), Vec::<std::path::PathBuf>::new());

    // Cancelled: removed with the run.
    let out = run_commands(&sb, &[find]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let (run, _) = sb.last_run();
    assert_eq!(layers_of(&sb).len(), 1);
    let cancelled = sb.run(&["runs", "cancel", &run]);
    assert_eq!(cancelled.status.code(), Some(0), "{}", stderr(&cancelled));
    assert_eq!(layers_of(&sb), Vec::<std::path::PathBuf>::new());

    // A waiting run's layer stays; a copy no journal names (a crash between the command and
    // its judgement) is swept by doctor.
    let out = run_commands(&sb, &[find]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let waiting = layers_of(&sb);
    assert_eq!(waiting.len(), 1);
    let stray = waiting[0].with_file_name("layer-00000000deadbeef");
    std::fs::create_dir_all(stray.join("upper")).unwrap();
    std::fs::copy(waiting[0].join("owner"), stray.join("owner")).unwrap();
    let doctor = sb.run(&["doctor", "--json"]);
    let report: Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let row = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "judgement layers")
        .cloned()
        .unwrap();
    assert_eq!(
        row["detail"], "1 kept for a person's judgement, 1 abandoned removed",
        "{row}"
    );
    assert_eq!(layers_of(&sb), waiting);
    // A layer left by a run that has ended is swept when the next run starts.
    let done = run_commands(&sb, &[&["true"]]);
    assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
    let (ended, _) = sb.last_run();
    std::fs::create_dir_all(stray.join("upper")).unwrap();
    std::fs::write(
        stray.join("owner"),
        serde_json::json!({"workspace": sb.ws.to_str().unwrap(), "run": ended}).to_string(),
    )
    .unwrap();
    assert_eq!(layers_of(&sb).len(), 2);
    let next = run_commands(&sb, &[&["true"]]);
    assert_eq!(next.status.code(), Some(0), "{}", stderr(&next));
    assert_eq!(layers_of(&sb), waiting, "the waiting run's layer stays");
}

/// `warrant` launches commands through the small `warrant-sandbox` beside it only when that
/// binary reports the same build; a launcher of another build is never used (it would apply a
/// plan it may not fully understand), commands still run confined through `warrant __sandbox`,
/// and `doctor` says which launcher is in use and why.
#[test]
fn a_launcher_of_another_build_beside_warrant_is_not_used() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::init();
    let bin = tempfile::tempdir().unwrap();
    let warrant = bin.path().join("warrant");
    // `current_exe` resolves links, so the binary itself must be in the directory.
    if std::fs::hard_link(assert_cmd::cargo::cargo_bin("warrant"), &warrant).is_err() {
        std::fs::copy(assert_cmd::cargo::cargo_bin("warrant"), &warrant).unwrap();
    }
    let run = |args: &[&str]| {
        let template = sb.std_cmd(args);
        let mut c = std::process::Command::new(&warrant);
        c.args(template.get_args());
        for (k, v) in template.get_envs() {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        c.current_dir(template.get_current_dir().unwrap());
        c.output().unwrap()
    };
    let launcher_row = || {
        let out = run(&["doctor", "--json"]);
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["check"] == "sandbox launcher")
            .cloned()
            .unwrap()
    };

    let row = launcher_row();
    let detail = row["detail"].as_str().unwrap();
    assert!(detail.starts_with("this binary's own entry point"), "{row}");
    assert!(detail.contains("no warrant-sandbox beside"), "{row}");

    // Another build's launcher: it would report a different id, and if it were ever used as
    // the launcher it would leave a mark and run nothing.
    let mark = bin.path().join("stale-launcher-used");
    let stale = bin.path().join("warrant-sandbox");
    std::fs::write(
        &stale,
        format!(
            "#!/bin/sh\nif [ \"$1\" = __build-id ]; then echo 0123456789abcdef0123456789abcdef; exit 0; fi\ntouch {}\nexit 0\n",
            mark.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&stale, std::fs::Permissions::from_mode(0o755)).unwrap();
    let row = launcher_row();
    assert!(
        row["detail"]
            .as_str()
            .unwrap()
            .contains("is of another build"),
        "{row}"
    );
    let model = sb.transcript(
        "version: 1\nturns:\n  - calls:\n      - tool: run_command\n        args: { argv: [\"touch\", \"made-here\"] }\n  - say: done\n",
    );
    let out = run(&["run", "--prompt", "never", "--model", &model, "work"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(sb.ws.join("made-here").exists(), "{}", stdout(&out));
    assert!(!mark.exists(), "the stale launcher was used");
    let (_, events) = sb.last_run();
    let result = &results(&events)[0];
    assert_eq!(result["exit_code"], 0, "{result}");
    assert!(
        result["sandbox"]["applied"]
            .as_array()
            .unwrap()
            .contains(&Value::from("view")),
        "{result}"
    );
}
