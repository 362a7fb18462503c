//! Snapshots of `explain`, the user-visible account of a decision, as JSON and as text.

use warrant_core::{Action, Principal};
use warrant_policy::{DecisionRequest, Explanation};

use super::common::*;

fn explain(who: &Principal, action: &Action) -> Explanation {
    default_engine().explain(&DecisionRequest {
        principal: who,
        action,
        workspace: &ws(),
        installed_skills: &[],
    })
}

/// The digest changes with every edit of the pack; the snapshots are about the shape.
macro_rules! snapshot_both {
    ($name:literal, $ex:expr) => {{
        let ex = $ex;
        insta::assert_json_snapshot!(concat!($name, "_json"), ex, {".policy_digest" => "[digest]"});
        insta::with_settings!({filters => vec![(r"sha256:[0-9a-f]{64}", "[digest]")]}, {
            insta::assert_snapshot!(concat!($name, "_text"), ex.to_string());
        });
    }};
}

#[test]
fn explain_allow_read() {
    snapshot_both!(
        "allow_read",
        explain(
            &alice(),
            &Action::FsRead {
                path: path("/ws/src/main.rs")
            }
        )
    );
}

#[test]
fn explain_deny_env() {
    snapshot_both!(
        "deny_env",
        explain(
            &alice(),
            &Action::FsRead {
                path: path("/ws/.env")
            }
        )
    );
}

#[test]
fn explain_ask_delete() {
    snapshot_both!(
        "ask_delete",
        explain(
            &alice(),
            &Action::FsDelete {
                path: path("/ws/build/out.o"),
                recursive: false,
            }
        )
    );
}

#[test]
fn explain_default_deny_outside() {
    let ex = explain(
        &alice(),
        &Action::FsRead {
            path: path("/etc/passwd"),
        },
    );
    pretty_assertions::assert_eq!(
        ex.note.as_deref(),
        Some("no policy permits fs.read on /etc/passwd, which is outside the workspace /ws")
    );
    insta::with_settings!({filters => vec![(r"sha256:[0-9a-f]{64}", "[digest]")]}, {
        insta::assert_snapshot!("deny_outside_text", ex.to_string());
    });
}
