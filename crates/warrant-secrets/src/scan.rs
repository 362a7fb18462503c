//! The scanner: keyword prefilter, one `RegexSet` pass, then capture + entropy per rule.

use aho_corasick::AhoCorasick;
use regex::{Regex, RegexSet};

use crate::rules::{RuleSet, RulesError};

struct Compiled {
    id: String,
    regex: Regex,
    group: usize,
    keywords: Vec<usize>,
    entropy: Option<f64>,
    stopwords: Vec<String>,
}

/// A secret found in a text: which rule, and the byte range of the secret itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub rule: String,
    pub start: usize,
    pub end: usize,
}

pub struct Scanner {
    rules: Vec<Compiled>,
    set: RegexSet,
    keywords: AhoCorasick,
    keyword_count: usize,
    allow: Vec<Regex>,
}

impl std::fmt::Debug for Scanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scanner")
            .field("rules", &self.rules.len())
            .finish_non_exhaustive()
    }
}

fn compile(id: &str, pattern: &str) -> Result<Regex, RulesError> {
    regex::RegexBuilder::new(pattern)
        .size_limit(50 << 20)
        .build()
        .map_err(|e| RulesError::Regex {
            id: id.to_owned(),
            error: e.to_string(),
        })
}

impl Scanner {
    /// The scanner over the rules shipped with Warrant.
    pub fn default_rules() -> Result<Self, RulesError> {
        Self::new(&RuleSet::parse(crate::DEFAULT_RULES)?)
    }

    pub fn new(set: &RuleSet) -> Result<Self, RulesError> {
        let mut words: Vec<String> = Vec::new();
        let mut rules = Vec::new();
        for r in &set.rules {
            let regex = compile(&r.id, &r.regex)?;
            let group = r
                .secret_group
                .unwrap_or(if regex.captures_len() > 1 { 1 } else { 0 });
            if group >= regex.captures_len() {
                return Err(RulesError::Regex {
                    id: r.id.clone(),
                    error: format!("secret_group {group} does not exist in the pattern"),
                });
            }
            let keywords = r
                .keywords
                .iter()
                .map(|k| match words.iter().position(|w| w == k) {
                    Some(i) => i,
                    None => {
                        words.push(k.clone());
                        words.len() - 1
                    }
                })
                .collect();
            rules.push(Compiled {
                id: r.id.clone(),
                regex,
                group,
                keywords,
                entropy: r.entropy,
                stopwords: r.stopwords.iter().map(|s| s.to_lowercase()).collect(),
            });
        }
        let set_regex = regex::RegexSetBuilder::new(set.rules.iter().map(|r| r.regex.as_str()))
            .size_limit(200 << 20)
            .dfa_size_limit(50 << 20)
            .build()
            .map_err(|e| RulesError::Regex {
                id: "(the combined set)".into(),
                error: e.to_string(),
            })?;
        let keywords = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(&words)
            .map_err(|e| RulesError::Parse(format!("keywords: {e}")))?;
        let allow = set
            .allowlist
            .regexes
            .iter()
            .map(|p| compile("allowlist", p))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            rules,
            set: set_regex,
            keywords,
            keyword_count: words.len(),
            allow,
        })
    }

    pub fn rule_ids(&self) -> impl Iterator<Item = &str> {
        self.rules.iter().map(|r| r.id.as_str())
    }

    /// Every secret in `text`, in order of position (overlaps possible between rules).
    pub fn scan(&self, text: &str) -> Vec<Finding> {
        let mut present = vec![false; self.keyword_count];
        let mut any = false;
        for m in self.keywords.find_overlapping_iter(text) {
            present[m.pattern().as_usize()] = true;
            any = true;
        }
        let wanted = |r: &Compiled| r.keywords.is_empty() || r.keywords.iter().any(|k| present[*k]);
        if !any && self.rules.iter().all(|r| !r.keywords.is_empty()) {
            return Vec::new();
        }
        let mut out = Vec::new();
        for i in self.set.matches(text).iter() {
            let Some(rule) = self.rules.get(i) else {
                continue;
            };
            if !wanted(rule) {
                continue;
            }
            for caps in rule.regex.captures_iter(text) {
                let Some(m) = caps.get(rule.group) else {
                    continue;
                };
                if self.keeps(rule, m.as_str()) {
                    out.push(Finding {
                        rule: rule.id.clone(),
                        start: m.start(),
                        end: m.end(),
                    });
                }
            }
        }
        out.sort_by_key(|f| (f.start, f.end));
        out
    }

    fn keeps(&self, rule: &Compiled, secret: &str) -> bool {
        if rule
            .entropy
            .is_some_and(|min| shannon_entropy(secret) < min)
        {
            return false;
        }
        let lower = secret.to_lowercase();
        if rule.stopwords.iter().any(|s| lower.contains(s.as_str())) {
            return false;
        }
        !self.allow.iter().any(|a| a.is_match(secret))
    }
}

/// Shannon entropy of the characters of `s`, in bits per character.
pub fn shannon_entropy(s: &str) -> f64 {
    let mut counts = std::collections::HashMap::new();
    let mut n = 0usize;
    for c in s.chars() {
        *counts.entry(c).or_insert(0usize) += 1;
        n += 1;
    }
    if n == 0 {
        return 0.0;
    }
    let n = n as f64;
    counts
        .values()
        .map(|&c| {
            let p = c as f64 / n;
            -p * p.log2()
        })
        .sum()
}
