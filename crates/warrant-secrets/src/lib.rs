//! Finds secrets in text and redacts them. Rules are data (`rules/default.toml`, derived from
//! the gitleaks default set): a keyword prefilter decides which rules can match at all, one
//! `RegexSet` pass says which of those do, and only those run again to capture the secret and
//! check its entropy and allowlists. Used before tool output reaches a model, and later before
//! memory and artifact writes. A redaction report names rules and counts, never a value.

mod redact;
mod rules;
mod scan;

pub use redact::{KNOWN_SECRET_RULE, MIN_KNOWN_SECRET_LEN, Redaction, Redactor};
pub use rules::{Allowlist, Rule, RuleSet, RulesError};
pub use scan::{Finding, Scanner, shannon_entropy};

/// The rules shipped with Warrant.
pub const DEFAULT_RULES: &str = include_str!("../rules/default.toml");
