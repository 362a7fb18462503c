//! What a person is shown before approving: exactly the actions, readable. Snapshotted
//! because a change here changes what people approve.

use serde_json::json;
use warrant_kernel::ToolRegistry;

use super::env::Env;

fn shown(e: &Env, tool: &str, args: serde_json::Value) -> String {
    let actions = e.normalize(tool, &args).unwrap();
    let p = e.tools.get(tool).unwrap().present(&actions, &e.env);
    e.redact(&format!("title: {}\n---\n{}", p.title, p.body))
}

#[test]
fn a_write_shows_its_diff_against_the_file_on_disk() {
    let e = Env::new();
    insta::assert_snapshot!(
        "write_existing",
        shown(
            &e,
            "write_file",
            json!({"path": "existing.txt", "content": "line 1\nline two\nline 3\nline 4\n"})
        )
    );
    insta::assert_snapshot!(
        "write_new",
        shown(
            &e,
            "write_file",
            json!({"path": "sub/new.md", "content": "# New\n\nbody\n"})
        )
    );
}

/// A file that holds credentials is shown by its size and digest, never its content; an
/// ordinary file beside it is shown as a diff (the control).
#[test]
fn a_write_to_a_credentials_file_shows_size_and_digest_not_content() {
    let e = Env::new();
    let value = "aws_secret_access_key = planted-value-1234";
    let secret = shown(
        &e,
        "write_file",
        json!({"path": "deploy/credentials", "content": value}),
    );
    assert!(!secret.contains("planted-value-1234"), "{secret}");
    assert!(
        secret.contains("holds credentials; its content is not shown: 42 bytes, sha256:"),
        "{secret}"
    );
    let plain = shown(
        &e,
        "write_file",
        json!({"path": "deploy/notes.txt", "content": "visible-text"}),
    );
    assert!(plain.contains("+visible-text"), "{plain}");
}

#[test]
fn a_command_shows_argv_cwd_and_profile() {
    let e = Env::new();
    insta::assert_snapshot!(
        "command",
        shown(
            &e,
            "run_command",
            json!({"argv": ["cargo", "test", "--", "it's"], "cwd": "sub", "profile": "slow", "timeout_ms": 120_000})
        )
    );
    insta::assert_snapshot!(
        "delete_recursive",
        shown(&e, "delete_path", json!({"path": "sub", "recursive": true}))
    );
}
