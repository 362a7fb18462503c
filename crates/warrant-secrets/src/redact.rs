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

/// The rule id recorded for the piece of a value cut by the head/tail capture of command
/// output: no rule can recognise half a secret, so the cut word is masked whatever it is.
pub const CUT_SECRET_RULE: &str = "cut-at-capture-boundary";

/// A cut word shorter than this is left alone: too short to be much of any secret.
pub const MIN_CUT_LEN: usize = 6;

/// The marker `warrant_exec::HeadTail` puts where it dropped the middle of an output.
fn cut_marker() -> Option<&'static regex::Regex> {
    static RE: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    RE.get_or_init(|| regex::Regex::new(r"\n\[… [0-9]+ bytes omitted …\]\n").ok())
        .as_ref()
}

const PEM_BEGIN: &str = "-----BEGIN";
const PEM_END: &str = "-----END";

/// What to mask around each cut of a head/tail capture: the word the cut went through on
/// either side (when it has at least [`MIN_CUT_LEN`] characters), and a PEM block whose
/// `BEGIN` is in the head but whose `END` was cut away (or the reverse in the tail), so a
/// private key split by the cut is masked up to the cut.
pub fn cut_spans(text: &str) -> Vec<(usize, usize)> {
    let Some(re) = cut_marker() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut prev_end = 0;
    let marks: Vec<(usize, usize)> = re.find_iter(text).map(|m| (m.start(), m.end())).collect();
    for (i, &(ms, me)) in marks.iter().enumerate() {
        let head = text.get(prev_end..ms).unwrap_or("");
        let next_start = marks.get(i + 1).map_or(text.len(), |m| m.0);
        let tail = text.get(me..next_start).unwrap_or("");
        // The head side: the last word, up to the cut.
        let word_start = head.rfind(char::is_whitespace).map_or(0, |j| {
            j + head[j..].chars().next().map_or(1, char::len_utf8)
        });
        if head[word_start..].chars().count() >= MIN_CUT_LEN {
            out.push((prev_end + word_start, ms));
        }
        if let Some(b) = head.rfind(PEM_BEGIN)
            && head.rfind(PEM_END).is_none_or(|e| e < b)
        {
            let body = head[b..].find('\n').map_or(head.len(), |n| b + n + 1);
            if body < head.len() {
                out.push((prev_end + body, ms));
            }
        }
        // The tail side: the first word, from the cut.
        let word_end = tail.find(char::is_whitespace).unwrap_or(tail.len());
        if tail[..word_end].chars().count() >= MIN_CUT_LEN {
            out.push((me, me + word_end));
        }
        if let Some(e) = tail.find(PEM_END)
            && tail.find(PEM_BEGIN).is_none_or(|b| b > e)
        {
            let body_end = tail[..e].rfind('\n').unwrap_or(0);
            if body_end > 0 {
                out.push((me, me + body_end));
            }
        }
        prev_end = me;
    }
    out
}

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

    /// `text` with every secret replaced by `[REDACTED:<rule>]`: known values first, then
    /// every rule (secrets inside base64, hex or percent-encoded stretches too: the whole
    /// encoded stretch is replaced), then what a capture cut in two (see [`cut_spans`]).
    pub fn redact(&self, text: &str) -> (String, Redaction) {
        self.replace_secrets(text, |_, rule| placeholder(rule))
    }

    /// `text` with every secret the redactor finds (as [`Redactor::redact`] finds them)
    /// replaced by what `replace` makes of it, given the secret's text and the rule that found
    /// it: the journal seals instead of dropping. What `replace` returns is never scanned again.
    pub fn replace_secrets(
        &self,
        text: &str,
        mut replace: impl FnMut(&str, &str) -> String,
    ) -> (String, Redaction) {
        let mut report = Redaction::default();
        // Where the known values' replacements sit in the text the rules then scan.
        let mut replaced: Vec<(usize, usize)> = Vec::new();
        let text = match &self.known {
            Some(ac) => {
                let mut out = String::with_capacity(text.len());
                let mut last = 0;
                for m in ac.find_iter(text) {
                    out.push_str(&text[last..m.start()]);
                    let start = out.len();
                    out.push_str(&replace(&text[m.start()..m.end()], KNOWN_SECRET_RULE));
                    replaced.push((start, out.len()));
                    report.add(KNOWN_SECRET_RULE);
                    last = m.end();
                }
                out.push_str(&text[last..]);
                out
            }
            None => text.to_owned(),
        };
        let outside = |a: usize, b: usize| replaced.iter().all(|&(x, y)| b <= x || a >= y);
        let mut spans: Vec<(usize, usize, String)> = self
            .scanner
            .scan(&text)
            .into_iter()
            .filter(|f| !f.whole_file && f.start < f.end && outside(f.start, f.end))
            .map(|f| (f.start, f.end, f.rule))
            .collect();
        spans.extend(
            cut_spans(&text)
                .into_iter()
                .filter(|&(a, b)| outside(a, b))
                .map(|(a, b)| (a, b, CUT_SECRET_RULE.to_owned())),
        );
        if spans.is_empty() {
            return (text, report);
        }
        spans.sort_by(|a, b| (a.0, b.1).cmp(&(b.0, a.1)));
        // Overlapping findings (two rules, one value; a secret inside an encoded stretch that
        // another rule also matched) become one redaction, named by the first.
        let mut merged: Vec<(usize, usize, String)> = Vec::new();
        for (a, b, rule) in spans {
            match merged.last_mut() {
                Some(last) if a < last.1 => last.1 = last.1.max(b),
                _ => merged.push((a, b, rule)),
            }
        }
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        for (a, b, rule) in merged {
            // Ranges come from matches, so they are on character boundaries; were one not,
            // widen it rather than leave anything of the value.
            let a = floor_boundary(&text, a.max(last));
            let b = ceil_boundary(&text, b);
            out.push_str(text.get(last..a).unwrap_or(""));
            out.push_str(&replace(text.get(a..b).unwrap_or(""), &rule));
            report.add(&rule);
            last = b;
        }
        out.push_str(text.get(last..).unwrap_or(""));
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

fn floor_boundary(t: &str, mut i: usize) -> usize {
    i = i.min(t.len());
    while i > 0 && !t.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(t: &str, mut i: usize) -> usize {
    i = i.min(t.len());
    while i < t.len() && !t.is_char_boundary(i) {
        i += 1;
    }
    i
}
