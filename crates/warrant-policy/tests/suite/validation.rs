//! Loading fails closed: every kind of mistake in a policy file stops the whole set with a
//! specific, coded error that names the file and the policy.

use pretty_assertions::assert_eq;
use warrant_core::Coded;
use warrant_core::config::LayerKind;
use warrant_policy::{PolicyEngine, PolicyError};

use super::common::*;

const FILE: &str = "/ws/.warrant/policy/team.cedar";

fn load_err(text: &str) -> PolicyError {
    // The good pack alongside shows one bad file is enough to stop everything.
    PolicyEngine::load(&[pack_source(), source(LayerKind::Project, FILE, text)]).unwrap_err()
}

#[test]
fn typo_in_an_attribute_is_a_validation_error() {
    let err = load_err(
        r#"@id("typo")
permit (principal, action == Warrant::Action::"fs.read", resource is Warrant::Path)
when { resource.pth like "/ws/*" };"#,
    );
    assert_eq!(err.code(), "W-POLICY-004");
    insta::assert_snapshot!(err.to_string());
}

#[test]
fn unqualified_type_is_a_validation_error() {
    let err = load_err(
        r#"@id("bare-type")
permit (principal, action == Warrant::Action::"fs.read", resource is Path);"#,
    );
    assert_eq!(err.code(), "W-POLICY-004");
    insta::assert_snapshot!(err.to_string());
}

#[test]
fn unknown_action_is_named() {
    let err = load_err(
        r#"@id("chmod")
permit (principal, action == Warrant::Action::"fs.chmod", resource);"#,
    );
    assert_eq!(err.code(), "W-POLICY-005");
    // Cedar's "did you mean" picks among equally close names in hash order.
    insta::with_settings!({filters => vec![(r"did you mean `[^`]*`", "did you mean [..]")]}, {
        insta::assert_snapshot!(err.to_string());
    });
}

#[test]
fn syntax_error_names_the_file_and_line() {
    let err = load_err(
        r#"@id("ok")
permit (principal, action, resource is Warrant::Path) when { resource.in_workspace };

@id("broken")
permit (principal, action, resource) when { resource.name == };"#,
    );
    assert_eq!(err.code(), "W-POLICY-001");
    insta::assert_snapshot!(err.to_string());
}

#[test]
fn policy_without_id_is_rejected() {
    let err = load_err(
        r#"@id("first")
permit (principal, action == Warrant::Action::"fs.read", resource is Warrant::Path);

@reason("no id here")
forbid (principal, action, resource is Warrant::Path) when { resource.name == "x" };"#,
    );
    assert_eq!(
        err,
        PolicyError::MissingId {
            layer: LayerKind::Project,
            file: FILE.into(),
            index: 2,
            line: 4,
            start: "@reason(\"no id here\")".into(),
        }
    );
    assert_eq!(err.code(), "W-POLICY-002");
    insta::assert_snapshot!(err.to_string());
}

#[test]
fn bad_ask_values_are_rejected() {
    let err = load_err(
        r#"@id("ask-typo")
@ask("dangerous")
permit (principal, action == Warrant::Action::"fs.write", resource is Warrant::Path);"#,
    );
    assert_eq!(
        err,
        PolicyError::BadAsk {
            file: FILE.into(),
            id: "project:ask-typo".into(),
            value: "dangerous".into(),
            problem: "not a risk class; use one of read, change, external, destructive, \
                      secret, irreversible"
                .into(),
        }
    );
    assert_eq!(err.code(), "W-POLICY-006");
    insta::assert_snapshot!(err.to_string());

    let err = load_err(
        r#"@id("ask-on-forbid")
@ask("change")
forbid (principal, action == Warrant::Action::"fs.write", resource is Warrant::Path);"#,
    );
    assert_eq!(err.code(), "W-POLICY-006");
    insta::assert_snapshot!(err.to_string());
}

#[test]
fn duplicate_ids_in_a_layer_are_rejected_but_layers_are_separate() {
    let text = r#"@id("workspace-read")
permit (principal, action == Warrant::Action::"fs.read", resource is Warrant::Path);"#;
    let err = load_err(text);
    assert_eq!(
        err,
        PolicyError::DuplicateId {
            id: "project:workspace-read".into(),
            first_file: PACK_FILE.into(),
            second_file: FILE.into(),
        }
    );
    assert_eq!(err.code(), "W-POLICY-003");
    // The same @id in another layer is a different policy.
    let engine = PolicyEngine::load(&[
        pack_source(),
        source(LayerKind::Managed, "/etc/warrant/policy/org.cedar", text),
    ])
    .unwrap();
    assert!(engine.policy_ids().any(|id| id == "managed:workspace-read"));
    assert!(engine.policy_ids().any(|id| id == "project:workspace-read"));
}

#[test]
fn impossible_policies_are_rejected() {
    // shell.exec never applies to a Path: a forbid like this would silently do nothing.
    let err = load_err(
        r#"@id("no-rm")
forbid (principal, action == Warrant::Action::"shell.exec", resource is Warrant::Path);"#,
    );
    assert_eq!(err.code(), "W-POLICY-004");
    insta::assert_snapshot!(err.to_string());
}

#[test]
fn templates_are_rejected() {
    let err = load_err(
        r#"@id("tmpl")
permit (principal == ?principal, action, resource);"#,
    );
    assert_eq!(err.code(), "W-POLICY-001");
}

#[test]
fn the_digest_covers_ids_and_text_not_file_order() {
    let a = source(
        LayerKind::Project,
        "a.cedar",
        r#"@id("a") permit (principal, action == Warrant::Action::"fs.read", resource is Warrant::Path);"#,
    );
    let b = source(
        LayerKind::Project,
        "b.cedar",
        r#"@id("b") permit (principal, action == Warrant::Action::"fs.list", resource is Warrant::Path);"#,
    );
    let ab = PolicyEngine::load(&[a.clone(), b.clone()]).unwrap();
    let ba = PolicyEngine::load(&[b, a.clone()]).unwrap();
    assert_eq!(ab.digest(), ba.digest());
    let b2 = source(
        LayerKind::Project,
        "b.cedar",
        r#"@id("b") permit (principal, action == Warrant::Action::"fs.search", resource is Warrant::Path);"#,
    );
    let changed = PolicyEngine::load(&[a, b2]).unwrap();
    assert_ne!(ab.digest(), changed.digest());
    // And the default pack itself loads cleanly.
    assert_eq!(default_engine().policy_ids().count(), 22);
}
