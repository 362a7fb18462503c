//! Normalization: model input becomes actions with canonical paths (symlinks resolved to where
//! they really lead), create vs replace decided from the disk, command limits clamped to the
//! profile; malformed input is refused with the schema's own words.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use warrant_core::Action;
use warrant_kernel::Refusal;

use super::env::Env;

#[test]
fn paths_become_canonical_and_writes_say_whether_they_create() {
    let e = Env::new();
    let ws = e.env.workspace.as_str().to_owned();
    let cases: Vec<(&str, Value)> = vec![
        ("read_file", json!({"path": "existing.txt"})),
        ("read_file", json!({"path": format!("{ws}/existing.txt")})),
        ("read_file", json!({"path": "./sub/../existing.txt"})),
        ("read_file", json!({"path": "../secret.txt"})),
        ("read_file", json!({"path": "link"})),
        ("list_dir", json!({"path": "sub/up/.."})),
        ("search_files", json!({"pattern": "TODO"})),
        ("write_file", json!({"path": "new.txt", "content": "n"})),
        (
            "write_file",
            json!({"path": "existing.txt", "content": "e"}),
        ),
        ("write_file", json!({"path": "link", "content": "x"})),
        ("delete_path", json!({"path": "sub", "recursive": true})),
        ("delete_path", json!({"path": "sub/up/existing.txt"})),
    ];
    let got: Vec<Result<Vec<Action>, Refusal>> =
        cases.iter().map(|(t, a)| e.normalize(t, a)).collect();
    let one = |a: Action| Ok(vec![a]);
    assert_eq!(
        got,
        vec![
            one(Action::FsRead {
                path: e.path("ws/existing.txt")
            }),
            one(Action::FsRead {
                path: e.path("ws/existing.txt")
            }),
            one(Action::FsRead {
                path: e.path("ws/existing.txt")
            }),
            one(Action::FsRead {
                path: e.path("secret.txt")
            }),
            // The link is followed: what is decided on is the file outside the workspace.
            one(Action::FsRead {
                path: e.path("secret.txt")
            }),
            one(Action::FsList { path: e.path("") }),
            one(Action::FsSearch {
                path: e.path("ws"),
                pattern: "TODO".into()
            }),
            one(Action::FsCreate {
                path: e.path("ws/new.txt"),
                content: "n".into()
            }),
            one(Action::FsWrite {
                path: e.path("ws/existing.txt"),
                content: "e".into()
            }),
            one(Action::FsWrite {
                path: e.path("secret.txt"),
                content: "x".into()
            }),
            one(Action::FsDelete {
                path: e.path("ws/sub"),
                recursive: true
            }),
            one(Action::FsDelete {
                path: e.path("ws/existing.txt"),
                recursive: false
            }),
        ]
    );
}

#[test]
fn commands_get_a_cwd_inside_and_at_most_the_profiles_time() {
    let e = Env::new();
    let exec = |cwd: &str, profile: &str, timeout_ms: u64| {
        Ok(vec![Action::ShellExec {
            argv: vec!["make".into(), "test".into()],
            cwd: e.path(cwd),
            profile: profile.into(),
            timeout_ms,
            program: Some(e.path("bin/make")),
            contained: false,
            judged: warrant_core::Judging::Changeset,
        }])
    };
    // argv[0] is looked up with the command's PATH and cwd, symlinks followed; a name that
    // finds nothing is left unresolved.
    let program = |argv: Value| match e.normalize("run_command", &json!({"argv": argv})) {
        Ok(actions) => match actions.as_slice() {
            [Action::ShellExec { program, .. }] => program.clone(),
            _ => None,
        },
        Err(_) => None,
    };
    assert_eq!(
        [
            program(json!(["./mk"])),
            program(json!(["cargo"])),
            program(json!(["rm"])),
            program(json!([format!("{}/bin/make", e.root)])),
        ],
        [
            Some(e.path("bin/make")),
            Some(e.path("bin/cargo")),
            None,
            Some(e.path("bin/make")),
        ]
    );
    let argv = json!(["make", "test"]);
    let got: Vec<Result<Vec<Action>, Refusal>> = [
        json!({"argv": argv}),
        json!({"argv": argv, "cwd": "sub", "timeout_ms": 500}),
        json!({"argv": argv, "timeout_ms": 999_999}),
        json!({"argv": argv, "profile": "slow", "timeout_ms": 999_999}),
        json!({"argv": argv, "profile": "root"}),
    ]
    .iter()
    .map(|a| e.normalize("run_command", a))
    .collect();
    assert_eq!(
        got,
        vec![
            exec("ws", "default", 10_000),
            exec("ws/sub", "default", 500),
            exec("ws", "default", 10_000),
            exec("ws", "slow", 60_000),
            Err(Refusal {
                code: "W-TOOL-005".into(),
                message: "unknown subprocess profile `root`; configured: default, slow".into()
            }),
        ]
    );
}

#[test]
fn malformed_arguments_are_refused_with_the_schemas_words() {
    let e = Env::new();
    let cases: Vec<(&str, Value)> = vec![
        ("read_file", json!({})),
        ("read_file", json!({"path": "a", "mode": "rb"})),
        ("read_file", json!({"path": 7})),
        ("read_file", json!({"path": ""})),
        ("write_file", json!({"path": "a"})),
        ("delete_path", json!({"path": "a", "recursive": "yes"})),
        ("run_command", json!({"argv": []})),
        ("run_command", json!({"argv": "ls -la"})),
        ("run_command", json!({"argv": ["ls"], "timeout_ms": 0})),
        // Passes the schema, but names no program.
        ("run_command", json!({"argv": [""]})),
        ("fetch_url", json!({"url": "http://example.com"})),
    ];
    let mut lines = Vec::new();
    for (tool, args) in &cases {
        let refusal = e.normalize(tool, args).unwrap_err();
        lines.push(format!(
            "{tool} {args}\n  {}: {}",
            refusal.code, refusal.message
        ));
    }
    insta::assert_snapshot!("schema_refusals", lines.join("\n"));
}
