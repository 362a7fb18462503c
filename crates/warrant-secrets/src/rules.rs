//! Rules as data: parsed from TOML and checked (every pattern compiles) before use.

use serde::Deserialize;
use thiserror::Error;
use warrant_core::Coded;

/// One rule as written in the rules file.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub id: String,
    pub regex: String,
    /// Which capture group is the secret; default 1 when the pattern has one, else 0.
    #[serde(default)]
    pub secret_group: Option<usize>,
    #[serde(default)]
    pub keywords: Vec<String>,
    #[serde(default)]
    pub entropy: Option<f64>,
    #[serde(default)]
    pub stopwords: Vec<String>,
}

/// Applies to every rule: a secret matching one of these is not a finding.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Allowlist {
    #[serde(default)]
    pub regexes: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSet {
    #[serde(default)]
    pub allowlist: Allowlist,
    pub rules: Vec<Rule>,
}

impl RuleSet {
    pub fn parse(text: &str) -> Result<Self, RulesError> {
        let set: Self = toml::from_str(text).map_err(|e| RulesError::Parse(e.to_string()))?;
        let mut seen = std::collections::BTreeSet::new();
        for r in &set.rules {
            if !seen.insert(r.id.as_str()) {
                return Err(RulesError::Parse(format!(
                    "rule id `{}` appears twice",
                    r.id
                )));
            }
            if r.keywords
                .iter()
                .any(|k| k.is_empty() || *k != k.to_lowercase())
            {
                return Err(RulesError::Parse(format!(
                    "rule `{}`: keywords must be non-empty and lower-case",
                    r.id
                )));
            }
        }
        Ok(set)
    }
}

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum RulesError {
    #[error("the secret-scanning rules cannot be read: {0}")]
    Parse(String),
    #[error("secret-scanning rule `{id}` has a pattern that does not compile: {error}")]
    Regex { id: String, error: String },
}

impl Coded for RulesError {
    fn code(&self) -> &'static str {
        match self {
            Self::Parse(_) => "W-SECRETS-001",
            Self::Regex { .. } => "W-SECRETS-002",
        }
    }
}
