//! The executor writes only the bytes the actions were decided on: an `artifact.create` whose
//! spec was swapped after its digest was decided is refused (W-EXEC-030) and nothing is written;
//! the same call unchanged is written with provenance that verifies.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use warrant_artifacts::{Artifacts, verify_artifact};
use warrant_audit::{AuditKey, PublicKeys};
use warrant_core::{Action, CanonicalPath, FixedClock, Timestamp};
use warrant_kernel::{Authorized, Tool, ToolEnv};
use warrant_tools::ToolSource as _;

fn env(ws: &str) -> ToolEnv {
    ToolEnv {
        workspace: CanonicalPath::from_normalized(ws).unwrap(),
        profiles: Default::default(),
        parent_env: Vec::new(),
        secrets: None,
        no_overlays: false,
        run: None,
        tests: Default::default(),
        web: Default::default(),
        web_addresses_unguarded: false,
        web_loopback_allowed: false,
        menus: Default::default(),
        spawn_unnarrowed: false,
        ceiling_unchecked: false,
        delegation_late: false,
    }
}

fn report_tool(key: &AuditKey) -> Box<dyn Tool> {
    let clock = FixedClock(Timestamp::from_millis(0).unwrap());
    let source = Artifacts::new(Arc::new(key.clone()), None, Arc::new(clock));
    source
        .tools()
        .into_iter()
        .find(|t| t.spec().name == "create_report")
        .unwrap()
}

fn run(tool: &dyn Tool, actions: Vec<Action>, env: &ToolEnv) -> (bool, Value) {
    let authorized: Vec<Authorized<Action>> =
        actions.into_iter().map(Authorized::for_tests).collect();
    let r = tool.execute(&authorized, env, &|_| true, &|| None);
    (r.ok, r.result)
}

#[test]
fn only_the_decided_bytes_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let env = env(ws.to_str().unwrap());
    let key = AuditKey::from_seed([3; 32]);
    let tool = report_tool(&key);
    let actions = tool
        .normalize(&json!({"path": "r.md", "markdown": "# decided"}), &env)
        .unwrap();

    // The spec swapped after the digest was decided: refused, nothing written.
    let mut swapped = actions.clone();
    if let Some(Action::ArtifactCreate { spec, .. }) = swapped.get_mut(1) {
        spec["input"]["markdown"] = json!("# something else");
    }
    let (ok, result) = run(tool.as_ref(), swapped, &env);
    assert_eq!((ok, &result["code"]), (false, &json!("W-EXEC-030")));
    assert!(!ws.join("r.md").exists());
    assert!(!ws.join("r.md.intoto.jsonl").exists());

    // The control: the decided actions write the file, and its provenance verifies.
    let (ok, result) = run(tool.as_ref(), actions, &env);
    assert!(ok, "{result}");
    assert_eq!(
        std::fs::read_to_string(ws.join("r.md")).unwrap(),
        "# decided"
    );
    let keys = PublicKeys::from_keys([key.verifying_key()]);
    let v = verify_artifact(&ws.join("r.md"), &keys, Some(&key.kid()), false);
    assert!(v.ok, "{v:?}");
    assert_eq!(
        v.predicate.map(|p| (p.tool, p.created_at, p.path)),
        Some((
            "create_report".to_owned(),
            "1970-01-01T00:00:00.000Z".to_owned(),
            "r.md".to_owned()
        ))
    );
}
