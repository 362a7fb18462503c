//! The coding tools end to end (issue 15): a scripted run edits a file, applies a patch, runs
//! the tests, commits as its principal and has its push parked for a person; and the bad input
//! each tool must refuse with a clear, recorded outcome.

use std::path::Path;
use std::process::Command;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::harness::{Sandbox, parked_request, stderr};

/// Runs the machine's git for setting up and checking (never through Warrant).
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .args([
            "-c",
            "user.name=Setup",
            "-c",
            "user.email=setup@example.invalid",
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The workspace as a small Rust project under git, committed once.
fn project(sb: &Sandbox) {
    sb.write(
        "Cargo.toml",
        "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    );
    sb.write(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() {\n        assert_eq!(super::add(2, 3), 5);\n    }\n}\n",
    );
    sb.write(".gitignore", "/target\n.env\nCargo.lock\n");
    git(&sb.ws, &["init", "-q", "-b", "main"]);
    git(&sb.ws, &["add", "-A"]);
    git(&sb.ws, &["commit", "-q", "-m", "start"]);
}

/// The results the model saw, by tool, in order.
fn results(events: &[Value], tool: &str) -> Vec<Value> {
    let ids: Vec<String> = events
        .iter()
        .filter(|e| e["kind"] == "action_proposed" && e["payload"]["tool"] == tool)
        .map(|e| e["payload"]["call_id"].as_str().unwrap().to_owned())
        .collect();
    events
        .iter()
        .filter(|e| {
            e["kind"] == "effect_completed"
                && ids.iter().any(|i| e["payload"]["call_id"] == i.as_str())
        })
        .map(|e| e["payload"].clone())
        .collect()
}

/// Refusals before anything ran: `(tool, code, message)`.
fn refusals(events: &[Value]) -> Vec<(String, String, String)> {
    events
        .iter()
        .filter(|e| e["kind"] == "call_refused")
        .map(|e| {
            let p = &e["payload"];
            (
                p["tool"].as_str().unwrap().to_owned(),
                p["code"].as_str().unwrap().to_owned(),
                p["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

const DONE_WHEN: &str = r#"version: 1
turns:
  - say: "Fix the bug, note it, test, commit, push."
    calls:
      - tool: edit_file
        args: { path: src/lib.rs, old: "    a - b\n", new: "    a + b\n" }
  - calls:
      - tool: apply_patch
        args:
          patch: |
            --- a/README.md
            +++ b/README.md
            @@ -1,1 +1,2 @@
             __FIRST__
            +Calc adds numbers.
            --- /dev/null
            +++ b/CHANGES.md
            @@ -0,0 +1 @@
            +- add() adds
  - calls:
      - tool: run_tests
        args: {}
  - calls:
      - tool: git_commit
        args: { message: "Fix add() to add" }
  - calls:
      - tool: git_push
        args: {}
  - say: "Pushed."
"#;

#[test]
fn a_scripted_run_edits_patches_tests_commits_and_its_push_waits_for_a_person() {
    let sb = Sandbox::init();
    project(&sb);
    let remote = sb.dir.path().join("remote.git");
    git(sb.dir.path(), &["init", "-q", "--bare", "remote.git"]);
    git(
        &sb.ws,
        &["remote", "add", "origin", remote.to_str().unwrap()],
    );
    let readme = std::fs::read_to_string(sb.ws.join("README.md")).unwrap();
    let first = readme.lines().next().unwrap().to_owned();
    let model = sb.transcript(&DONE_WHEN.replace("__FIRST__", &first));

    let out = sb.run(&["run", "--model", &model, "fix add"]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let request = parked_request(&out);
    let (run, events) = sb.last_run();

    // The edit and the patch landed.
    assert!(
        std::fs::read_to_string(sb.ws.join("src/lib.rs"))
            .unwrap()
            .contains("    a + b\n")
    );
    assert_eq!(
        std::fs::read_to_string(sb.ws.join("CHANGES.md")).unwrap(),
        "- add() adds\n"
    );
    // The tests ran contained, as a command, and the model got their counts.
    let tests = results(&events, "run_tests");
    assert_eq!(tests.len(), 1);
    assert_eq!(tests[0]["ok"], true, "{}", tests[0]);
    assert_eq!(
        tests[0]["result"]["summary"],
        serde_json::json!({"passed": 1, "failed": 0, "counted": true, "first_failures": []})
    );
    // The commit: authored by the principal, the agent as co-author, the run as a trailer.
    let log = git(&sb.ws, &["log", "-1", "--format=%an <%ae>|%cn <%ce>%n%B"]);
    assert_eq!(
        log.trim_end(),
        format!(
            "tester <tester@harbour.invalid>|tester <tester@harbour.invalid>\nFix add() to add\n\nCo-authored-by: Warrant agent (scripted) <agent@warrant.invalid>\nWarrant-Run: {run}"
        )
    );
    let files = git(&sb.ws, &["show", "--name-only", "--format=", "HEAD"]);
    assert_eq!(files.trim(), "CHANGES.md\nREADME.md\nsrc/lib.rs");
    // The push waits: nothing reached the remote yet, and the person sees where it goes.
    assert_eq!(git(&remote, &["branch", "--list"]).trim(), "");
    let shown = sb.json(&["requests", "show", &request, "--json"]);
    let text = shown.to_string();
    assert!(text.contains("push main to origin"), "{text}");
    assert!(text.contains(remote.to_str().unwrap()), "{text}");

    let ok = sb.run(&["approve", &request]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let done = sb.run(&["resume", &run]);
    assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
    assert_eq!(
        git(&remote, &["rev-parse", "main"]),
        git(&sb.ws, &["rev-parse", "HEAD"])
    );
    let (_, events) = sb.last_run();
    let push = results(&events, "git_push");
    assert_eq!(push.len(), 1);
    assert_eq!(push[0]["ok"], true, "{}", push[0]);
}

#[test]
fn bad_edits_and_patches_are_refused_with_where_and_why() {
    let sb = Sandbox::init();
    sb.write("src/twice.txt", "x = 1\nkeep\nx = 1\n");
    sb.write("src/lines.txt", "one\ntwo\nthree\n");
    sb.write("outside/target.txt", "outside\n");
    std::os::unix::fs::symlink(sb.ws.join("outside"), sb.ws.join("linked")).unwrap();
    let yaml = r#"version: 1
turns:
  - calls:
      - tool: edit_file
        args: { path: src/twice.txt, old: "x = 1", new: "x = 2" }
      - tool: edit_file
        args: { path: src/twice.txt, old: "  keep  ", new: "k" }
      - tool: edit_file
        args: { path: .env, old: "HARBOUR", new: "X" }
      - tool: apply_patch
        args:
          patch: |
            --- a/../escape.txt
            +++ b/../escape.txt
            @@ -0,0 +1 @@
            +x
      - tool: apply_patch
        args:
          patch: |
            --- a/linked/target.txt
            +++ b/linked/target.txt
            @@ -1 +1 @@
            -outside
            +changed
      - tool: apply_patch
        args:
          patch: |
            --- a/src/lines.txt
            +++ b/src/lines.txt
            @@ -1,3 +1,3 @@
             one
            -TWO
            +2
             three
            --- /dev/null
            +++ b/src/new.txt
            @@ -0,0 +1 @@
            +new
  - say: done
"#;
    let model = sb.transcript(yaml);
    let out = sb.run(&["run", "--model", &model, "bad edits"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (_, events) = sb.last_run();
    let got: Vec<(String, String, String)> = refusals(&events);
    let expected: Vec<(String, String, String)> = [
        ("edit_file", "W-EDIT-002", "`old` occurs 2 times in src/twice.txt (lines 1, 3), expected 1; add surrounding lines to make it unique, or set `count` to 2".to_owned()),
        ("edit_file", "W-EDIT-002", "`old` does not occur in src/twice.txt; its first line (trimmed) is on line(s) 2: check indentation and line endings".to_owned()),
        ("edit_file", "W-EDIT-007", ".env is not edited by edit_file or apply_patch: it is git's or Warrant's own state, or holds credentials".to_owned()),
        ("apply_patch", "W-EDIT-004", "the patch names the path \"../escape.txt\"; patch paths are relative to the workspace, without `.` or `..` components".to_owned()),
        ("apply_patch", "W-EDIT-004", format!("the patch path \"linked/target.txt\" goes through a symbolic link (it resolves to {}/outside/target.txt); patch the file by its real path", sb.ws.display())),
        ("apply_patch", "W-EDIT-003", "the patch does not apply, nothing was changed: hunk #1 (@@ -1,3 @@) does not match src/lines.txt at line 1: expected \"one\" there or nearby; the file may have changed since it was read: read it again and make a new patch".to_owned()),
    ]
    .into_iter()
    .map(|(t, c, m)| (t.to_owned(), c.to_owned(), m))
    .collect();
    assert_eq!(got, expected);
    // Nothing changed anywhere: not the ambiguous file, not the file behind the link, and the
    // patch's second file was not created either (all or nothing).
    assert_eq!(
        std::fs::read_to_string(sb.ws.join("src/twice.txt")).unwrap(),
        "x = 1\nkeep\nx = 1\n"
    );
    assert_eq!(
        std::fs::read_to_string(sb.ws.join("outside/target.txt")).unwrap(),
        "outside\n"
    );
    assert!(!sb.exists("src/new.txt"));
    assert!(!sb.dir.path().join("escape.txt").exists());
}

const ASK_WRITES: &str = r#"
@id("ask-writes")
@ask("change")
@reason("Writes in this project are reviewed")
permit(principal, action in [Warrant::Action::"fs.write", Warrant::Action::"fs.create"], resource is Warrant::Path)
when { resource.in_workspace };
"#;

#[test]
fn an_approved_patch_is_refused_when_its_file_changed_after_it_was_shown() {
    let sb = Sandbox::init();
    sb.write(".warrant/policies/ask-writes.cedar", ASK_WRITES);
    sb.write("src/lines.txt", "one\ntwo\nthree\n");
    let yaml = r#"version: 1
turns:
  - calls:
      - tool: apply_patch
        args:
          patch: |
            --- a/src/lines.txt
            +++ b/src/lines.txt
            @@ -1,3 +1,3 @@
             one
            -two
            +2
             three
  - say: done
"#;
    let model = sb.transcript(yaml);
    let out = sb.run(&["run", "--model", &model, "patch"]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let request = parked_request(&out);
    let (run, _) = sb.last_run();
    // The person is shown the diff.
    let shown = sb
        .json(&["requests", "show", &request, "--json"])
        .to_string();
    assert!(shown.contains("-two") && shown.contains("+2"), "{shown}");

    // Someone changes the file while the request waits; then the person approves.
    sb.write("src/lines.txt", "one\ntwo\nthree\nfour\n");
    let ok = sb.run(&["approve", &request]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let again = sb.run(&["resume", &run]);
    assert_eq!(again.status.code(), Some(10), "{}", stderr(&again));
    let (_, events) = sb.last_run();
    let rejected: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "approval_rejected")
        .collect();
    assert_eq!(rejected.len(), 1, "{events:?}");
    assert_eq!(
        rejected[0]["payload"]["reason"], "action_changed",
        "{}",
        rejected[0]
    );
    // The change made meanwhile is intact: the patch's content was never written.
    assert_eq!(
        std::fs::read_to_string(sb.ws.join("src/lines.txt")).unwrap(),
        "one\ntwo\nthree\nfour\n"
    );
}

/// A repository whose hooks, fsmonitor and clean filter each leave a mark when run.
fn hostile_repo(sb: &Sandbox) -> std::path::PathBuf {
    project(sb);
    let marks = sb.dir.path().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let m = marks.display();
    for hook in [
        "pre-commit",
        "commit-msg",
        "post-commit",
        "prepare-commit-msg",
    ] {
        let p = sb.ws.join(".git/hooks").join(hook);
        std::fs::write(&p, format!("#!/bin/sh\ntouch {m}/{hook}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    git(
        &sb.ws,
        &[
            "config",
            "core.fsmonitor",
            &format!("touch {m}/fsmonitor; true"),
        ],
    );
    git(
        &sb.ws,
        &[
            "config",
            "filter.evil.clean",
            &format!("touch {m}/filter; cat"),
        ],
    );
    sb.write(".gitattributes", "*.rs filter=evil\n");
    marks
}

fn marks_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_commit_never_runs_the_repository_s_hooks_fsmonitor_or_filters() {
    // Negative control: the same repository, committed by plain git, runs all of them.
    let control = Sandbox::new();
    let marks = hostile_repo(&control);
    control.write(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    );
    git(&control.ws, &["commit", "-q", "-am", "plain"]);
    assert_eq!(
        marks_in(&marks),
        [
            "commit-msg",
            "filter",
            "fsmonitor",
            "post-commit",
            "pre-commit",
            "prepare-commit-msg"
        ]
    );

    let sb = Sandbox::init();
    let marks = hostile_repo(&sb);
    sb.write(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    );
    let yaml = r#"version: 1
turns:
  - calls:
      - tool: git_status
        args: {}
      - tool: git_diff
        args: {}
      - tool: git_commit
        args: { message: "fix" }
      - tool: git_log
        args: { max: 1 }
  - say: done
"#;
    let model = sb.transcript(yaml);
    let out = sb.run(&["run", "--model", &model, "commit"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(marks_in(&marks), Vec::<String>::new());
    let (_, events) = sb.last_run();
    let commit = results(&events, "git_commit");
    assert_eq!(commit[0]["ok"], true, "{}", commit[0]);
    assert_eq!(
        git(&sb.ws, &["log", "-1", "--format=%an %s"]).trim(),
        "tester fix"
    );
    let log = results(&events, "git_log");
    assert!(
        log[0]["result"]["output"]
            .as_str()
            .unwrap()
            .contains("\ttester <tester@harbour.invalid>\t"),
        "{}",
        log[0]
    );
}

#[test]
fn git_refuses_credentials_in_a_commit_and_a_checkout_over_uncommitted_work() {
    let sb = Sandbox::init();
    project(&sb);
    // .env is ignored by the project; a key file is not.
    sb.write("deploy/server.key", "-----BEGIN PRIVATE KEY-----\n");
    let yaml = r#"version: 1
turns:
  - calls:
      - tool: git_commit
        args: { message: "everything" }
  - calls:
      - tool: git_branch
        args: { name: "--force" }
      - tool: git_branch
        args: { name: topic }
  - calls:
      - tool: write_file
        args: { path: src/lib.rs, content: "// unsaved work\n" }
      - tool: git_checkout
        args: { rev: topic }
  - say: done
"#;
    let model = sb.transcript(yaml);
    let out = sb.run(&["run", "--model", &model, "commit all"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (_, events) = sb.last_run();
    let commit = results(&events, "git_commit");
    assert_eq!(commit[0]["ok"], false);
    assert_eq!(commit[0]["result"]["code"], "W-GIT-009", "{}", commit[0]);
    assert!(
        commit[0]["result"]["error"]
            .as_str()
            .unwrap()
            .contains("deploy/server.key"),
        "{}",
        commit[0]
    );
    assert_eq!(git(&sb.ws, &["log", "--format=%s"]).trim(), "start");
    let refused = refusals(&events);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].1, "W-GIT-007");
    let checkout = results(&events, "git_checkout");
    assert_eq!(
        checkout[0]["result"]["code"], "W-GIT-006",
        "{}",
        checkout[0]
    );
    assert_eq!(
        std::fs::read_to_string(sb.ws.join("src/lib.rs")).unwrap(),
        "// unsaved work\n"
    );
    assert_eq!(git(&sb.ws, &["branch", "--show-current"]).trim(), "main");
}

/// A local web server: `/` answers a small HTML page, `/huge` a 100 MB body (streamed, never
/// held), `/to-metadata` redirects to the cloud metadata address, `/elsewhere` to a host off
/// the allow list. Returns its port.
fn web_server() -> u16 {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let port = server.server_addr().to_ip().unwrap().port();
    std::thread::spawn(move || {
        for req in server.incoming_requests() {
            let url = req.url().to_owned();
            let _ = match url.as_str() {
                "/huge" => req.respond(tiny_http::Response::new(
                    tiny_http::StatusCode(200),
                    vec![],
                    std::io::Read::take(std::io::repeat(b'a'), 100 * 1024 * 1024),
                    Some(100 * 1024 * 1024),
                    None,
                )),
                "/to-metadata" | "/elsewhere" => {
                    let to = if url == "/to-metadata" {
                        "http://169.254.169.254/latest/meta-data/"
                    } else {
                        "http://example.invalid/"
                    };
                    req.respond(
                        tiny_http::Response::empty(302).with_header(
                            tiny_http::Header::from_bytes("Location", to).unwrap(),
                        ),
                    )
                }
                _ => req.respond(
                    tiny_http::Response::from_string(
                        "<html><body><h1>Docs</h1><p>The answer is 42.</p><script>evil()</script></body></html>",
                    )
                    .with_header(
                        tiny_http::Header::from_bytes("Content-Type", "text/html").unwrap(),
                    ),
                ),
            };
        }
    });
    port
}

fn allow_web(sb: &Sandbox, entries: &[String]) {
    let config = sb.ws.join(".warrant/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "\n[web]\nallow = {}\nmax_bytes = 1048576\ntimeout_ms = 20000\n",
        serde_json::to_string(entries).unwrap()
    ));
    std::fs::write(&config, text).unwrap();
}

fn fetch_run(sb: &Sandbox, urls: &[String]) -> Vec<Value> {
    let calls: String = urls
        .iter()
        .map(|u| format!("      - tool: web_fetch\n        args: {{ url: \"{u}\" }}\n"))
        .collect();
    let model = sb.transcript(&format!(
        "version: 1\nturns:\n  - calls:\n{calls}  - say: done\n"
    ));
    let out = sb.run(&["run", "--model", &model, "fetch"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    sb.last_run().1
}

/// `(ok, code or "", text or error)` of each fetch's result.
fn fetched(events: &[Value]) -> Vec<(bool, String, String)> {
    results(events, "web_fetch")
        .iter()
        .map(|r| {
            let res = &r["result"];
            (
                r["ok"].as_bool().unwrap(),
                res["code"].as_str().unwrap_or_default().to_owned(),
                res["error"]
                    .as_str()
                    .or(res["text"].as_str())
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect()
}

#[test]
fn web_fetch_is_off_by_default_and_refuses_internal_addresses() {
    let port = web_server();
    let local = format!("http://127.0.0.1:{port}/");

    // Off by default: no [web] allow list, so policy denies the fetch (recorded, nothing sent).
    let sb = Sandbox::init();
    let events = fetch_run(&sb, std::slice::from_ref(&local));
    let denied: Vec<String> = events
        .iter()
        .filter(|e| e["kind"] == "effect_denied")
        .map(|e| e["payload"]["message"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        denied,
        [format!("denied: web.fetch {local}: no policy permits it")]
    );
    assert!(fetched(&events).is_empty());

    // Listed, loopback and the metadata address are still refused by the address guard.
    let sb = Sandbox::init();
    allow_web(
        &sb,
        &[format!("127.0.0.1:{port}"), "169.254.169.254:80".to_owned()],
    );
    let events = fetch_run(
        &sb,
        &[
            local.clone(),
            "http://169.254.169.254/latest/meta-data/".to_owned(),
        ],
    );
    assert_eq!(
        fetched(&events),
        vec![
            (false, "W-WEB-003".to_owned(), "refused to connect to 127.0.0.1: 127.0.0.1 is a loopback address".to_owned()),
            (false, "W-WEB-003".to_owned(), "refused to connect to 169.254.169.254: 169.254.169.254 is a link-local address (cloud metadata services live here)".to_owned()),
        ]
    );

    // Negative control: with the guard off (debug build), the same fetch reaches the server.
    let mut sb = Sandbox::init();
    allow_web(&sb, &[format!("127.0.0.1:{port}")]);
    sb.extra_env
        .push(("WARRANT_TEST_DISABLE".into(), "web-address".into()));
    let events = fetch_run(&sb, std::slice::from_ref(&local));
    let got = fetched(&events);
    assert_eq!(got.len(), 1);
    assert!(got[0].0, "{got:?}");
    assert!(got[0].2.contains("The answer is 42."), "{got:?}");
    assert!(!got[0].2.contains("<p>"), "HTML reduced to text: {got:?}");
}

#[test]
fn web_fetch_rechecks_redirects_and_cuts_a_huge_page() {
    let port = web_server();
    // Loopback is let through (debug build) so the local server stands in for a public one;
    // every other internal address is still refused.
    let mut sb = Sandbox::init();
    allow_web(
        &sb,
        &[format!("127.0.0.1:{port}"), "169.254.169.254:80".to_owned()],
    );
    sb.extra_env
        .push(("WARRANT_TEST_DISABLE".into(), "web-loopback".into()));
    let base = format!("http://127.0.0.1:{port}");
    let events = fetch_run(
        &sb,
        &[
            format!("{base}/to-metadata"),
            format!("{base}/elsewhere"),
            format!("{base}/huge"),
        ],
    );
    let got = fetched(&events);
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(
        got[0],
        (false, "W-WEB-003".to_owned(), "refused to connect to 169.254.169.254: 169.254.169.254 is a link-local address (cloud metadata services live here)".to_owned())
    );
    assert_eq!(got[1].1, "W-WEB-002", "{got:?}");
    assert!(
        got[1]
            .2
            .starts_with("example.invalid:80 is not on the [web] allow list"),
        "{got:?}"
    );
    let huge = results(&events, "web_fetch")[2].clone();
    assert_eq!(huge["ok"], true, "{huge}");
    assert_eq!(huge["result"]["truncated"], true);
    assert_eq!(huge["result"]["bytes"], 1_048_576);
}

/// An HTTPS server on 127.0.0.1 answering every request with a small page, its certificate for
/// `localhost` signed by a test CA; its port and the CA's PEM.
fn https_server() -> (u16, String) {
    use std::io::{BufRead, Write};
    use std::sync::Arc;
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()),
        )
        .unwrap(),
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut tcp) = conn else { continue };
            let Ok(mut tls) = rustls::ServerConnection::new(Arc::clone(&config)) else {
                continue;
            };
            let mut stream = rustls::Stream::new(&mut tls, &mut tcp);
            let mut reader = std::io::BufReader::new(&mut stream);
            let mut line = String::new();
            let complete = loop {
                line.clear();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => break false,
                    Ok(_) if line == "\r\n" => break true,
                    Ok(_) => {}
                }
            };
            if complete {
                let page = "<html><body><p>Served over TLS.</p></body></html>";
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                    page.len()
                );
                let _ = stream.flush();
            }
            tls.send_close_notify();
            let _ = tls.complete_io(&mut tcp);
        }
    });
    (port, ca.pem())
}

#[test]
fn web_fetch_over_https_goes_through_the_egress_proxy_and_verifies_the_server() {
    let (port, ca_pem) = https_server();
    let url = format!("https://localhost:{port}/docs");
    let run = |ca: Option<&str>| {
        // Loopback is let through (debug build) so the local server stands in for a public one.
        let mut sb = Sandbox::init();
        let ca_file = sb.ws.join("test-ca.pem");
        std::fs::write(&ca_file, &ca_pem).unwrap();
        let config = sb.ws.join(".warrant/config.toml");
        let mut text = std::fs::read_to_string(&config).unwrap();
        text.push_str(&format!("\n[web]\nallow = [\"localhost:{port}\"]\n"));
        if ca.is_some() {
            text.push_str(&format!("ca_certificates = \"{}\"\n", ca_file.display()));
        }
        std::fs::write(&config, text).unwrap();
        sb.extra_env
            .push(("WARRANT_TEST_DISABLE".into(), "web-loopback".into()));
        let events = fetch_run(&sb, std::slice::from_ref(&url));
        results(&events, "web_fetch")[0].clone()
    };

    let trusted = run(Some("test-ca"));
    assert_eq!(trusted["ok"], true, "{trusted}");
    assert_eq!(
        (
            trusted["result"]["text"].as_str().unwrap().trim(),
            &trusted["result"]["egress"]
        ),
        (
            "Served over TLS.",
            &json!({"allowed": [{"method": "CONNECT", "target": format!("localhost:{port}"), "peer": format!("127.0.0.1:{port}")}], "refused": []})
        )
    );

    // Control: the same fetch without the test CA is refused by certificate verification.
    let untrusted = run(None);
    assert_eq!(untrusted["ok"], false, "{untrusted}");
    assert_eq!(untrusted["result"]["code"], "W-WEB-004", "{untrusted}");
    assert!(
        untrusted["result"]["error"]
            .as_str()
            .unwrap()
            .contains("UnknownIssuer"),
        "{untrusted}"
    );
}
