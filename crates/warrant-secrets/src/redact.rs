//! Redaction: known secret values by exact match first, then the scanner. The report counts
//! redactions per rule; it never holds a value, so it can be journaled and audited.

use std::collections::BTreeMap;

use aho_corasick::{AhoCorasick, MatchKind};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::scan::Scanner;

/// The rule id recorded for a value Warrant knows to be secret (a key it resolved, a
/// credential in its environment).
pub const KNOWN_SECRET_RULE: &str = "known-secret";

/// Shorter known values are not matched: they would redact ordinary words.
pub const MIN_KNOWN_SECRET_LEN: usize = 8;

/// What was redacted: count per rule id. Never a value.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Redaction {
    pub counts: BTreeMap<String, u32>,
}

impl Redaction {
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    pub fn total(&self) -> u32 {
        self.counts.values().sum()
    }

    fn add(&mut self, rule: &str) {
        *self.counts.entry(rule.to_owned()).or_insert(0) += 1;
    }

    pub fn merge(&mut self, other: &Self) {
        for (k, v) in &other.counts {
            *self.counts.entry(k.clone()).or_insert(0) += v;
        }
    }
}

pub struct Redactor {
    scanner: Scanner,
    known: Option<AhoCorasick>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the known values.
        f.debug_struct("Redactor")
            .field("scanner", &self.scanner)
            .field("known", &self.known.as_ref().map(|k| k.patterns_len()))
            .finish()
    }
}

fn placeholder(rule: &str) -> String {
    format!("[REDACTED:{rule}]")
}

impl Redactor {
    /// `known` values shorter than [`MIN_KNOWN_SECRET_LEN`] are ignored.
    pub fn new(scanner: Scanner, known: impl IntoIterator<Item = String>) -> Self {
        let mut values: Vec<String> = known
            .into_iter()
            .filter(|v| v.len() >= MIN_KNOWN_SECRET_LEN)
            .collect();
        values.sort();
        values.dedup();
        let known = if values.is_empty() {
            None
        } else {
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .build(&values)
                .ok()
        };
        Self { scanner, known }
    }

    pub fn scanner(&self) -> &Scanner {
        &self.scanner
    }

    /// `text` with every secret replaced by `[REDACTED:<rule>]`.
    pub fn redact(&self, text: &str) -> (String, Redaction) {
        let mut report = Redaction::default();
        let text = match &self.known {
            Some(ac) => {
                let mut out = String::with_capacity(text.len());
                let mut last = 0;
                for m in ac.find_iter(text) {
                    out.push_str(&text[last..m.start()]);
                    out.push_str(&placeholder(KNOWN_SECRET_RULE));
                    report.add(KNOWN_SECRET_RULE);
                    last = m.end();
                }
                out.push_str(&text[last..]);
                out
            }
            None => text.to_owned(),
        };
        let findings = self.scanner.scan(&text);
        if findings.is_empty() {
            return (text, report);
        }
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        for f in findings {
            if f.start < last {
                // Overlaps a secret already redacted (two rules, one value).
                continue;
            }
            out.push_str(&text[last..f.start]);
            out.push_str(&placeholder(&f.rule));
            report.add(&f.rule);
            last = f.end;
        }
        out.push_str(&text[last..]);
        (out, report)
    }

    /// Redacts every string inside a JSON value (keys are left alone).
    pub fn redact_json(&self, value: &Value) -> (Value, Redaction) {
        let mut report = Redaction::default();
        let v = self.walk(value, &mut report);
        (v, report)
    }

    fn walk(&self, value: &Value, report: &mut Redaction) -> Value {
        match value {
            Value::String(s) => {
                let (s, r) = self.redact(s);
                report.merge(&r);
                Value::String(s)
            }
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| self.walk(v, report)).collect())
            }
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), self.walk(v, report)))
                    .collect(),
            ),
            Value::Null | Value::Bool(_) | Value::Number(_) => value.clone(),
        }
    }
}
