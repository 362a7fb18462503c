//! Layers share one policy set: forbid wins whatever layer it is in, so an organisation's
//! managed forbid beats a project's permit.

use pretty_assertions::assert_eq;
use warrant_core::config::LayerKind;
use warrant_core::{Action, RiskClass};
use warrant_policy::{PolicyEngine, Verdict};

use super::common::*;

const MANAGED_FILE: &str = "/etc/warrant/policy/org.cedar";
const MANAGED: &str = r#"
@id("no-lockfile-edits")
@reason("Lockfiles change only through the dependency bot.")
forbid (principal, action in [Warrant::Action::"fs.write", Warrant::Action::"fs.create"], resource is Warrant::Path)
when { resource.name like "*.lock" };
"#;

#[test]
fn managed_forbid_beats_project_permit() {
    let engine = PolicyEngine::load(&[
        pack_source(),
        source(LayerKind::Managed, MANAGED_FILE, MANAGED),
    ])
    .unwrap();
    let write = |p: &str| Action::FsWrite {
        path: path(p),
        content: "x".into(),
    };
    assert_eq!(
        decide(&engine, &alice(), &write("/ws/Cargo.lock")),
        decision(
            Verdict::Deny,
            RiskClass::Change,
            vec![reason_in(
                LayerKind::Managed,
                MANAGED_FILE,
                MANAGED,
                "no-lockfile-edits"
            )]
        )
    );
    // Negative control: without the managed layer the project permit allows the same write.
    assert_eq!(
        decide(&default_engine(), &alice(), &write("/ws/Cargo.lock")),
        decision(
            Verdict::Allow,
            RiskClass::Change,
            vec![pack_reason("workspace-write")]
        )
    );
    // Other writes are untouched by the managed layer.
    assert_eq!(
        decide(&engine, &alice(), &write("/ws/src/lib.rs")).verdict,
        Verdict::Allow
    );
}
