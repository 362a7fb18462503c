//! `policy explain`: the decision, the policies that determined it with their reasons, and the
//! entities and context used. The JSON is a stable surface, snapshot-tested.

use pretty_assertions::assert_eq;

use super::harness::{Sandbox, stderr, stdout};

fn explain_json(sb: &Sandbox, action: &str, target: &str) -> serde_json::Value {
    let out = sb.run(&[
        "policy", "explain", "--action", action, "--target", target, "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out).replace(sb.ws.to_str().unwrap(), "/WS");
    serde_json::from_str(&text).unwrap()
}

#[test]
fn explain_json_is_stable() {
    let sb = Sandbox::init();
    let mut settings = insta::Settings::clone_current();
    settings.add_redaction(".**.file", "[policy file]");
    // Where `ls` lives depends on the machine; that it resolved to a file named `ls` does not.
    settings.add_redaction(
        ".**.executable",
        insta::dynamic_redaction(|value, _| {
            let path = value.as_str().unwrap_or_default().to_owned();
            assert!(path.starts_with('/') && path.ends_with("/ls"), "{path}");
            "[the ls on PATH]"
        }),
    );
    settings.bind(|| {
        insta::assert_json_snapshot!("explain_read_env", explain_json(&sb, "fs.read", ".env"));
        insta::assert_json_snapshot!(
            "explain_delete_build",
            explain_json(&sb, "fs.delete", "build")
        );
        insta::assert_json_snapshot!("explain_ls", explain_json(&sb, "shell.exec", "ls -la"));
    });
}

#[test]
fn explain_reads_well_and_rejects_unknown_actions() {
    let sb = Sandbox::init();
    let out = sb.run(&[
        "policy", "explain", "--action", "fs.read", "--target", ".env",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(text.starts_with("deny"), "{text}");
    assert!(text.contains("no-secret-files"), "{text}");
    let out = sb.run(&[
        "policy",
        "explain",
        "--action",
        "fs.read",
        "--target",
        "/etc/passwd",
        "--as",
        "auditor",
    ]);
    assert!(
        stdout(&out).contains("outside the workspace"),
        "{}",
        stdout(&out)
    );
    assert!(stdout(&out).contains("auditor"), "{}", stdout(&out));
    let out = sb.run(&["policy", "explain", "--action", "fs.chmod", "--target", "x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unknown action `fs.chmod`"),
        "{}",
        stderr(&out)
    );
}
