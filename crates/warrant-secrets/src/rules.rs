//! Rules in gitleaks' configuration format (gitleaks 8.x `.gitleaks.toml`): parsed, checked
//! and translated to Rust regex syntax here, compiled later (lazily, by the scanner).
//!
//! Read: `title`, `description`, `minVersion` (informational); `[extend]` `useDefault`, `path`,
//! `disabledRules`; `[[rules]]` `id`, `description`, `regex`, `secretGroup`, `entropy`,
//! `keywords`, `path`, `tags`, `[[rules.allowlists]]` (and the older single
//! `[rules.allowlist]`); global `[allowlist]` and `[[allowlists]]` (`targetRules` too). Each
//! allowlist: `description`, `condition` (`OR`/`AND`), `regexTarget` (`secret`/`match`/`line`),
//! `regexes`, `stopwords`, `paths`, `commits` (Warrant scans no commits: a commit never
//! matches, so an `OR` allowlist's commits allow nothing and an `AND` allowlist with commits
//! never applies). Anything else, and `[extend] url`, `skipReport` and `[[rules.required]]`,
//! is a load error naming the rule: a rule is never skipped silently.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;
use toml::{Table, Value};
use warrant_core::Coded;

/// gitleaks extends at most this deep (a file extending a file extending the default).
pub const MAX_EXTEND_DEPTH: usize = 2;

/// What an allowlist's `regexes` are matched against.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RegexTarget {
    #[default]
    Secret,
    Match,
    Line,
}

/// How an allowlist's checks combine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    #[default]
    Or,
    And,
}

/// One allowlist, patterns already in Rust syntax.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Allowlist {
    pub description: String,
    pub condition: Condition,
    pub regex_target: RegexTarget,
    pub regexes: Vec<String>,
    /// Lower-cased.
    pub stopwords: Vec<String>,
    pub paths: Vec<String>,
    /// Kept so a configuration round-trips; never matches (see the module comment).
    pub commits: Vec<String>,
    /// For a global allowlist: the rule ids it applies to (empty: all).
    pub target_rules: Vec<String>,
}

/// One rule, patterns already in Rust syntax.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub id: String,
    pub description: String,
    pub regex: Option<String>,
    /// 0: the first non-empty capture group, or the whole match without groups (gitleaks).
    pub secret_group: usize,
    /// Findings whose secret has at most this Shannon entropy are dropped.
    pub entropy: Option<f64>,
    /// Lower-cased; the rule is tried only when one occurs (no keywords: always tried).
    pub keywords: Vec<String>,
    pub path: Option<String>,
    pub tags: Vec<String>,
    pub allowlists: Vec<Allowlist>,
}

/// A resolved configuration file: its rules (after `[extend]`) and global allowlists.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSet {
    pub rules: Vec<Rule>,
    pub allowlists: Vec<Allowlist>,
    /// What `[extend] disabledRules` removed (checked against higher layers' rules).
    pub disabled: Vec<String>,
}

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum RulesError {
    #[error("the secret-scanning rules cannot be read: {0}")]
    Parse(String),
    #[error("secret-scanning rule `{id}` has a pattern that does not compile: {error}")]
    Regex { id: String, error: String },
    #[error("secret-scanning rule `{id}` ({origin}): `{key}` is not supported: {why}")]
    Unsupported {
        origin: String,
        id: String,
        key: String,
        why: String,
    },
    #[error(
        "secret-scanning rule `{id}` ({origin}): its pattern cannot be translated from Go RE2 to Rust: {why}"
    )]
    Untranslatable {
        origin: String,
        id: String,
        why: String,
    },
    #[error("secret-scanning rule `{id}` ({origin}) is invalid: {why}")]
    Invalid {
        origin: String,
        id: String,
        why: String,
    },
    #[error("secret-scanning rules {origin}: `[extend]` {why}")]
    Extend { origin: String, why: String },
    #[error("secret-scanning rules: {why}")]
    Layer { why: String },
    #[error("cannot read the secret-scanning rules file {path}: {error}")]
    Read { path: String, error: String },
}

impl Coded for RulesError {
    fn code(&self) -> &'static str {
        match self {
            Self::Parse(_) => "W-SECRETS-001",
            Self::Regex { .. } => "W-SECRETS-002",
            Self::Unsupported { .. } => "W-SECRETS-010",
            Self::Untranslatable { .. } => "W-SECRETS-011",
            Self::Invalid { .. } => "W-SECRETS-012",
            Self::Extend { .. } => "W-SECRETS-013",
            Self::Layer { .. } => "W-SECRETS-014",
            Self::Read { .. } => "W-SECRETS-015",
        }
    }
}

const TOP_KEYS: &[&str] = &[
    "title",
    "description",
    "minVersion",
    "extend",
    "rules",
    "allowlist",
    "allowlists",
];
const RULE_KEYS: &[&str] = &[
    "id",
    "description",
    "regex",
    "secretGroup",
    "entropy",
    "keywords",
    "path",
    "tags",
    "allowlists",
    "allowlist",
];
const ALLOW_KEYS: &[&str] = &[
    "description",
    "condition",
    "matchCondition",
    "regexTarget",
    "regexes",
    "stopwords",
    "paths",
    "commits",
    "targetRules",
];
const EXTEND_KEYS: &[&str] = &["useDefault", "path", "disabledRules"];

/// Why gitleaks keys that Warrant reads but does not implement are refused.
fn unsupported_why(key: &str) -> &'static str {
    match key {
        "skipReport" | "required" | "requiredRules" => {
            "multi-part rules (gitleaks' `required` and `skipReport`) are not implemented"
        }
        "url" => "extending a configuration from a URL is not implemented",
        _ => "it is not a key of gitleaks' configuration format",
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AllowDoc {
    #[serde(default)]
    description: String,
    condition: Option<String>,
    match_condition: Option<String>,
    regex_target: Option<String>,
    #[serde(default)]
    regexes: Vec<String>,
    #[serde(default)]
    stopwords: Vec<String>,
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    commits: Vec<String>,
    #[serde(default)]
    target_rules: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RuleDoc {
    #[serde(default)]
    description: String,
    regex: Option<String>,
    secret_group: Option<i64>,
    entropy: Option<f64>,
    #[serde(default)]
    keywords: Vec<String>,
    path: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ExtendDoc {
    #[serde(default)]
    use_default: bool,
    path: Option<String>,
    #[serde(default)]
    disabled_rules: Vec<String>,
}

/// Where the rules of a file come from, for `[extend] path` and messages.
#[derive(Clone, Debug)]
struct Origin {
    name: String,
    dir: Option<PathBuf>,
    /// Check each pattern's syntax (and a `secretGroup` against its groups) while loading.
    /// Off only for gitleaks' default rules, which the tests check instead
    /// (`every_default_rule_translates_and_compiles`): their load is on the first scan's path.
    check: bool,
}

fn check_keys(
    table: &Table,
    allowed: &[&str],
    origin: &Origin,
    id: &str,
) -> Result<(), RulesError> {
    for key in table.keys() {
        if !allowed.contains(&key.as_str()) {
            return Err(RulesError::Unsupported {
                origin: origin.name.clone(),
                id: id.to_owned(),
                key: key.clone(),
                why: unsupported_why(key).to_owned(),
            });
        }
    }
    Ok(())
}

fn tr(pattern: &str, origin: &Origin, id: &str) -> Result<String, RulesError> {
    let rust = crate::re2::translate(pattern).map_err(|why| RulesError::Untranslatable {
        origin: origin.name.clone(),
        id: id.to_owned(),
        why,
    })?;
    if !origin.check {
        return Ok(rust);
    }
    // The syntax only (cheap): translating to HIR (Unicode classes, case folding) costs about
    // as much as compiling, which happens lazily. What only compiling finds is caught when a
    // user's rule is compiled at load, and for the shipped rules by the tests.
    regex_syntax::ast::parse::Parser::new()
        .parse(&rust)
        .map_err(|e| RulesError::Regex {
            id: id.to_owned(),
            error: e.to_string(),
        })?;
    Ok(rust)
}

fn allowlist(value: &Value, origin: &Origin, id: &str) -> Result<Allowlist, RulesError> {
    let invalid = |why: String| RulesError::Invalid {
        origin: origin.name.clone(),
        id: id.to_owned(),
        why,
    };
    let table = value
        .as_table()
        .ok_or_else(|| invalid("an allowlist must be a table".into()))?;
    check_keys(table, ALLOW_KEYS, origin, id)?;
    let doc: AllowDoc = value
        .clone()
        .try_into()
        .map_err(|e: toml::de::Error| invalid(format!("allowlist: {}", e.message())))?;
    let condition = match doc
        .condition
        .or(doc.match_condition)
        .map(|c| c.to_uppercase())
        .as_deref()
    {
        None | Some("OR") | Some("") => Condition::Or,
        Some("AND") => Condition::And,
        Some(other) => {
            return Err(invalid(format!(
                "allowlist condition `{other}` is neither OR nor AND"
            )));
        }
    };
    let regex_target = match doc.regex_target.as_deref() {
        None | Some("") | Some("secret") => RegexTarget::Secret,
        Some("match") => RegexTarget::Match,
        Some("line") => RegexTarget::Line,
        Some(other) => {
            return Err(invalid(format!(
                "allowlist regexTarget `{other}` is not secret, match or line"
            )));
        }
    };
    let empty = doc.regexes.is_empty()
        && doc.stopwords.is_empty()
        && doc.paths.is_empty()
        && doc.commits.is_empty();
    if empty {
        return Err(invalid(
            "an allowlist needs at least one of regexes, stopwords, paths or commits".into(),
        ));
    }
    Ok(Allowlist {
        description: doc.description,
        condition,
        regex_target,
        regexes: doc
            .regexes
            .iter()
            .map(|p| tr(p, origin, id))
            .collect::<Result<_, _>>()?,
        stopwords: doc.stopwords.iter().map(|s| s.to_lowercase()).collect(),
        paths: doc
            .paths
            .iter()
            .map(|p| tr(p, origin, id))
            .collect::<Result<_, _>>()?,
        commits: doc.commits,
        target_rules: doc.target_rules,
    })
}

fn rule(value: &Value, origin: &Origin) -> Result<Rule, RulesError> {
    let table = value.as_table().ok_or_else(|| RulesError::Invalid {
        origin: origin.name.clone(),
        id: "?".into(),
        why: "each [[rules]] entry must be a table".into(),
    })?;
    let id = table
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let invalid = |why: String| RulesError::Invalid {
        origin: origin.name.clone(),
        id: if id.is_empty() {
            "?".into()
        } else {
            id.clone()
        },
        why,
    };
    if id.is_empty() {
        return Err(invalid("a rule needs a non-empty `id`".into()));
    }
    check_keys(table, RULE_KEYS, origin, &id)?;
    let mut plain = table.clone();
    let lists: Vec<Value> = match (plain.remove("allowlists"), plain.remove("allowlist")) {
        (Some(Value::Array(a)), one) => a.into_iter().chain(one).collect(),
        (None, Some(one)) => vec![one],
        (None, None) => Vec::new(),
        (Some(_), _) => return Err(invalid("`allowlists` must be an array of tables".into())),
    };
    let doc: RuleDoc = Value::Table(plain)
        .try_into()
        .map_err(|e: toml::de::Error| invalid(e.message().to_owned()))?;
    if doc.regex.as_deref() == Some("") {
        return Err(invalid("`regex` is empty".into()));
    }
    let secret_group = match doc.secret_group {
        None => 0,
        Some(g) => usize::try_from(g).map_err(|_| invalid("`secretGroup` is negative".into()))?,
    };
    if let Some(e) = doc.entropy
        && !(0.0..=64.0).contains(&e)
    {
        return Err(invalid(format!("`entropy` {e} is out of range")));
    }
    let regex = doc
        .regex
        .as_deref()
        .map(|p| tr(p, origin, &id))
        .transpose()?;
    if let Some(re) = &regex
        && secret_group > 0
        && origin.check
    {
        let groups = regex_syntax::ParserBuilder::new()
            .build()
            .parse(re)
            .map(|h| h.properties().explicit_captures_len())
            .unwrap_or(0);
        if secret_group > groups {
            return Err(invalid(format!(
                "`secretGroup = {secret_group}` but the pattern has {groups} capture groups"
            )));
        }
    }
    Ok(Rule {
        regex,
        path: doc
            .path
            .as_deref()
            .map(|p| tr(p, origin, &id))
            .transpose()?,
        secret_group,
        entropy: doc.entropy.filter(|e| *e > 0.0),
        keywords: doc
            .keywords
            .iter()
            .filter(|k| !k.is_empty())
            .map(|k| k.to_lowercase())
            .collect(),
        tags: doc.tags,
        description: doc.description,
        allowlists: lists
            .iter()
            .map(|v| allowlist(v, origin, &id))
            .collect::<Result<_, _>>()?,
        id,
    })
}

/// Reads `path` (for `[extend] path` and `[secrets] rules`).
pub(crate) fn read(path: &Path) -> Result<String, RulesError> {
    std::fs::read_to_string(path).map_err(|e| RulesError::Read {
        path: path.display().to_string(),
        error: e.to_string(),
    })
}

/// gitleaks' merge of an extending rule over the rule it extends: fields set here win,
/// keywords and tags are joined, allowlists appended.
fn merge_rule(base: Rule, over: Rule) -> Rule {
    let mut keywords = base.keywords;
    for k in over.keywords {
        if !keywords.contains(&k) {
            keywords.push(k);
        }
    }
    let mut tags = base.tags;
    for t in over.tags {
        if !tags.contains(&t) {
            tags.push(t);
        }
    }
    let mut allowlists = base.allowlists;
    allowlists.extend(over.allowlists);
    Rule {
        id: over.id,
        description: if over.description.is_empty() {
            base.description
        } else {
            over.description
        },
        regex: over.regex.or(base.regex),
        secret_group: if over.secret_group > 0 {
            over.secret_group
        } else {
            base.secret_group
        },
        entropy: over.entropy.or(base.entropy),
        keywords,
        path: over.path.or(base.path),
        tags,
        allowlists,
    }
}

fn parse_at(text: &str, origin: &Origin, depth: usize) -> Result<RuleSet, RulesError> {
    let doc: Table = toml::from_str(text)
        .map_err(|e| RulesError::Parse(format!("{}: {}", origin.name, e.message().trim_end())))?;
    check_keys(&doc, TOP_KEYS, origin, "(the file)")?;
    let mut allowlists = Vec::new();
    if let Some(v) = doc.get("allowlist") {
        allowlists.push(allowlist(v, origin, "(global allowlist)")?);
    }
    match doc.get("allowlists") {
        Some(Value::Array(a)) => {
            for v in a {
                allowlists.push(allowlist(v, origin, "(global allowlist)")?);
            }
        }
        Some(_) => {
            return Err(RulesError::Parse(format!(
                "{}: `allowlists` must be an array of tables",
                origin.name
            )));
        }
        None => {}
    }
    let mut rules: Vec<Rule> = Vec::new();
    match doc.get("rules") {
        Some(Value::Array(a)) => {
            for v in a {
                let r = rule(v, origin)?;
                if rules.iter().any(|x| x.id == r.id) {
                    return Err(RulesError::Invalid {
                        origin: origin.name.clone(),
                        id: r.id,
                        why: "the id appears twice".into(),
                    });
                }
                rules.push(r);
            }
        }
        Some(_) => {
            return Err(RulesError::Parse(format!(
                "{}: `rules` must be an array of tables",
                origin.name
            )));
        }
        None => {}
    }
    let Some(ext) = doc.get("extend") else {
        return checked(
            RuleSet {
                rules,
                allowlists,
                disabled: Vec::new(),
            },
            origin,
        );
    };
    let ext_table = ext.as_table().ok_or_else(|| RulesError::Extend {
        origin: origin.name.clone(),
        why: "must be a table".into(),
    })?;
    if let Some(key) = ext_table
        .keys()
        .find(|k| !EXTEND_KEYS.contains(&k.as_str()))
    {
        return Err(RulesError::Extend {
            origin: origin.name.clone(),
            why: format!("`{key}` is not supported: {}", unsupported_why(key)),
        });
    }
    let ext: ExtendDoc =
        ext.clone()
            .try_into()
            .map_err(|e: toml::de::Error| RulesError::Extend {
                origin: origin.name.clone(),
                why: e.message().to_owned(),
            })?;
    let base = match (ext.use_default, &ext.path) {
        (true, Some(_)) => {
            return Err(RulesError::Extend {
                origin: origin.name.clone(),
                why: "sets both `useDefault` and `path`; gitleaks allows one".into(),
            });
        }
        (false, None) => None,
        _ if depth >= MAX_EXTEND_DEPTH => {
            return Err(RulesError::Extend {
                origin: origin.name.clone(),
                why: format!("goes deeper than {MAX_EXTEND_DEPTH} levels"),
            });
        }
        (true, None) => Some(default_set()?.clone()),
        (false, Some(p)) => {
            let path = match &origin.dir {
                Some(d) => d.join(p),
                None => PathBuf::from(p),
            };
            let text = read(&path)?;
            let o = Origin {
                name: path.display().to_string(),
                dir: path.parent().map(Path::to_owned),
                check: true,
            };
            Some(parse_at(&text, &o, depth + 1)?)
        }
    };
    let Some(base) = base else {
        return checked(
            RuleSet {
                rules,
                allowlists,
                disabled: Vec::new(),
            },
            origin,
        );
    };
    let mut merged: Vec<Rule> = Vec::new();
    for b in base.rules {
        if ext.disabled_rules.contains(&b.id) {
            continue;
        }
        match rules.iter().position(|r| r.id == b.id) {
            Some(i) => merged.push(merge_rule(b, rules.remove(i))),
            None => merged.push(b),
        }
    }
    merged.extend(rules);
    let mut all_allow = base.allowlists;
    all_allow.extend(allowlists);
    checked(
        RuleSet {
            rules: merged,
            allowlists: all_allow,
            disabled: ext.disabled_rules,
        },
        origin,
    )
}

/// Checks that need the whole (extended) set. A global allowlist naming a rule that is not
/// there would be a silent no-op: refused.
fn checked(set: RuleSet, origin: &Origin) -> Result<RuleSet, RulesError> {
    // After `[extend]`: an extending rule may leave the pattern to the rule it extends.
    if let Some(r) = set
        .rules
        .iter()
        .find(|r| r.regex.is_none() && r.path.is_none())
    {
        return Err(RulesError::Invalid {
            origin: origin.name.clone(),
            id: r.id.clone(),
            why: "a rule needs a `regex`, a `path` or both".into(),
        });
    }
    for a in &set.allowlists {
        for t in &a.target_rules {
            if !set.rules.iter().any(|r| &r.id == t) {
                return Err(RulesError::Invalid {
                    origin: origin.name.clone(),
                    id: t.clone(),
                    why: "a global allowlist's `targetRules` names it, but there is no such rule"
                        .into(),
                });
            }
        }
    }
    Ok(set)
}

/// gitleaks' default rules, once per process: read from their translation
/// ([`crate::DEFAULT_RULES_TRANSLATED`], the [`RuleSet`] that parsing and translating
/// [`crate::DEFAULT_RULES`] gives, as JSON), which costs a tenth of parsing the TOML at every
/// start. A test fails when the translation differs from what the TOML gives now.
pub(crate) fn default_set() -> Result<&'static RuleSet, RulesError> {
    static DEFAULT: std::sync::OnceLock<Result<RuleSet, RulesError>> = std::sync::OnceLock::new();
    DEFAULT
        .get_or_init(|| {
            serde_json::from_str(crate::DEFAULT_RULES_TRANSLATED)
                .map_err(|e| RulesError::Parse(format!("the translated default rules: {e}")))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// gitleaks' default rules parsed and translated from their TOML, every pattern's syntax
/// checked: what [`crate::DEFAULT_RULES_TRANSLATED`] must hold.
pub fn translate_default_rules() -> Result<RuleSet, RulesError> {
    parse_at(
        crate::DEFAULT_RULES,
        &Origin {
            name: "the default rules".into(),
            dir: None,
            check: true,
        },
        MAX_EXTEND_DEPTH,
    )
}

impl RuleSet {
    /// A gitleaks configuration given as text; `[extend] path` is relative to the current
    /// directory.
    pub fn parse(text: &str) -> Result<Self, RulesError> {
        parse_at(
            text,
            &Origin {
                name: "(inline rules)".into(),
                dir: None,
                check: true,
            },
            0,
        )
    }

    /// A gitleaks configuration file; `[extend] path` is relative to its directory.
    pub fn load(path: &Path) -> Result<Self, RulesError> {
        let text = read(path)?;
        parse_at(
            &text,
            &Origin {
                name: path.display().to_string(),
                dir: path.parent().map(Path::to_owned),
                check: true,
            },
            0,
        )
    }

    /// gitleaks' default rule set (what `[extend] useDefault = true` extends).
    pub fn default_rules() -> Result<Self, RulesError> {
        default_set().cloned()
    }
}
