//! The translated default rules a process loads are exactly what parsing gitleaks' TOML gives.

use std::path::PathBuf;

use warrant_secrets::{DEFAULT_RULES_TRANSLATED, RuleSet, translate_default_rules};

fn translated_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("rules/gitleaks-8.30.1.rules.json")
}

/// Regenerate with `WARRANT_REGENERATE=1 cargo test -p warrant-secrets --test all translated`.
#[test]
fn translated_default_rules_are_current() {
    let from_toml = translate_default_rules().expect("the default TOML parses and translates");
    let text = serde_json::to_string_pretty(&from_toml).unwrap() + "\n";
    if std::env::var_os("WARRANT_REGENERATE").is_some() {
        std::fs::write(translated_path(), &text).unwrap();
        return;
    }
    let shipped: RuleSet = serde_json::from_str(DEFAULT_RULES_TRANSLATED).unwrap();
    assert_eq!(
        shipped, from_toml,
        "rules/gitleaks-8.30.1.rules.json is stale: regenerate it (see this test's comment)"
    );
    assert_eq!(
        DEFAULT_RULES_TRANSLATED, text,
        "rules/gitleaks-8.30.1.rules.json is not in its canonical form: regenerate it"
    );
}

/// The control: a translation that differs from the TOML in one pattern is caught.
#[test]
fn a_changed_translation_is_caught() {
    let mut shipped: RuleSet = serde_json::from_str(DEFAULT_RULES_TRANSLATED).unwrap();
    let from_toml = translate_default_rules().unwrap();
    assert_eq!(shipped, from_toml);
    let rule = shipped
        .rules
        .iter_mut()
        .find(|r| r.regex.is_some())
        .unwrap();
    rule.regex = Some("x".to_owned());
    assert_ne!(shipped, from_toml);
}

/// An unknown field in the translation is refused, not ignored.
#[test]
fn the_translation_refuses_unknown_fields() {
    let mut value: serde_json::Value = serde_json::from_str(DEFAULT_RULES_TRANSLATED).unwrap();
    value["rules"][0]["surprise"] = serde_json::json!(true);
    assert!(serde_json::from_value::<RuleSet>(value).is_err());
}
