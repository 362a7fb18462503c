//! Finds secrets in text and redacts them. Rules are written in gitleaks' configuration format
//! (`rules/gitleaks-8.30.1.toml`, gitleaks' own default set, is shipped and is the default), so
//! an organisation's `.gitleaks.toml` works unchanged; Go RE2 patterns are translated to Rust
//! (`re2`), and what cannot be translated or is not implemented is a load error naming the
//! rule. A keyword prefilter decides which rules can match; rules compile lazily, once; bounded
//! decoding finds base64/hex/percent-encoded secrets. Used before tool output reaches a model
//! and by `warrant secrets scan` (`report`: JSON, SARIF 2.1.0, baselines). A redaction report
//! names rules and counts, never a value.

mod decode;
mod layers;
mod re2;
mod redact;
pub mod report;
mod rules;
mod scan;

pub use decode::MAX_DECODE_DEPTH;
pub use layers::{LayerRules, scanner_for_layers};
pub use redact::{
    CUT_SECRET_RULE, KNOWN_SECRET_RULE, MIN_CUT_LEN, MIN_KNOWN_SECRET_LEN, Redaction, Redactor,
    cut_spans,
};
pub use rules::{
    Allowlist, Condition, MAX_EXTEND_DEPTH, RegexTarget, Rule, RuleSet, RulesError,
    translate_default_rules,
};
pub use scan::{
    ALLOW_COMMENT, Finding, RULES_UNAVAILABLE_RULE, RuleGroup, ScanOptions, Scanner,
    shannon_entropy,
};

/// gitleaks' default configuration (v8.30.1, MIT; the licence is in the file's header).
pub const DEFAULT_RULES: &str = include_str!("../rules/gitleaks-8.30.1.toml");

/// [`DEFAULT_RULES`] parsed and translated to Rust regex syntax ([`RuleSet`] as JSON), which is
/// what a process loads. Generated from the TOML by the test
/// `translated_default_rules_are_current` (`WARRANT_REGENERATE=1` rewrites it), which fails
/// whenever the two differ.
pub const DEFAULT_RULES_TRANSLATED: &str = include_str!("../rules/gitleaks-8.30.1.rules.json");
