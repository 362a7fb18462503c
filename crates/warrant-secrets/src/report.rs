//! Scanning files for people (`warrant secrets scan`): walking paths with `.gitignore`-style
//! excludes, fingerprints, baselines, and the three outputs (text, JSON, SARIF 2.1.0). A report
//! never holds a secret: only its rule, place, a redacted form and a fingerprint.
//!
//! Fingerprint: `RULE:PATH:H`, where `H` is the first 16 hex digits of
//! SHA-256(`warrant-secrets/v1` NUL rule NUL secret). It stays the same when the secret moves
//! within the file (unlike gitleaks' `file:rule:line`), changes when the secret changes, and
//! does not give the secret away (a guess can be confirmed, as with any hash, so keep baselines
//! where the code is).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use thiserror::Error;
use warrant_core::Coded;

use crate::scan::{Finding, Scanner};

/// Files larger than this are not read (their path-only rules still apply).
pub const MAX_FILE_BYTES: u64 = 64 << 20;

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ReportError {
    #[error("cannot scan {path}: {error}")]
    Walk { path: String, error: String },
    #[error("the baseline {path} cannot be read: {error}")]
    Baseline { path: String, error: String },
}

impl Coded for ReportError {
    fn code(&self) -> &'static str {
        match self {
            Self::Walk { .. } => "W-SECRETS-017",
            Self::Baseline { .. } => "W-SECRETS-016",
        }
    }
}

/// One finding in a file, safe to print.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FileFinding {
    pub rule: String,
    pub description: String,
    pub path: String,
    /// 1-based; 0 for a finding that is the file itself (a path-only rule).
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    pub end_line: usize,
    pub end_column: usize,
    pub secret: String,
    pub entropy: f64,
    pub decode_depth: usize,
    pub fingerprint: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Report {
    pub findings: Vec<FileFinding>,
    pub files: usize,
    pub bytes: u64,
    /// Findings the baseline accepted (not in `findings`).
    pub baselined: usize,
    /// Files not read because they are binary or larger than [`MAX_FILE_BYTES`].
    pub skipped: usize,
}

/// Known findings, by fingerprint.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Baseline {
    pub fingerprints: BTreeSet<String>,
}

impl Baseline {
    /// A baseline file: a JSON report of `warrant secrets scan --json` (its findings'
    /// fingerprints), a JSON array of fingerprints, or one fingerprint per line (`#` comments).
    pub fn load(path: &Path) -> Result<Self, ReportError> {
        let err = |error: String| ReportError::Baseline {
            path: path.display().to_string(),
            error,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let trimmed = text.trim_start();
        let mut fingerprints = BTreeSet::new();
        if trimmed.starts_with('{') || trimmed.starts_with('[') {
            let v: Value = serde_json::from_str(&text).map_err(|e| err(e.to_string()))?;
            let items: Vec<Value> = match v {
                Value::Array(a) => a,
                Value::Object(mut o) => match o.remove("findings") {
                    Some(Value::Array(a)) => a,
                    _ => return Err(err("a JSON baseline needs a `findings` array".into())),
                },
                Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {
                    return Err(err("a JSON baseline is an object or an array".into()));
                }
            };
            for item in items {
                let fp = match &item {
                    Value::String(s) => Some(s.clone()),
                    Value::Object(o) => o
                        .get("fingerprint")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    Value::Null | Value::Bool(_) | Value::Number(_) | Value::Array(_) => None,
                };
                match fp {
                    Some(f) => {
                        fingerprints.insert(f);
                    }
                    None => return Err(err(format!("entry without a fingerprint: {item}"))),
                }
            }
        } else {
            for line in text.lines().map(str::trim) {
                if !line.is_empty() && !line.starts_with('#') {
                    fingerprints.insert(line.to_owned());
                }
            }
        }
        Ok(Self { fingerprints })
    }
}

/// See the module comment.
pub fn fingerprint(rule: &str, path: &str, finding: &Finding) -> String {
    let mut h = Sha256::new();
    h.update(b"warrant-secrets/v1\0");
    h.update(rule.as_bytes());
    h.update(b"\0");
    h.update(finding.secret_bytes());
    let digest = hex::encode(h.finalize());
    format!("{rule}:{path}:{}", &digest[..16])
}

fn position(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before
        .rfind('\n')
        .map_or(before, |i| &before[i + 1..])
        .chars()
        .count()
        + 1;
    (line, col)
}

fn display(path: &Path) -> String {
    let s = path.to_string_lossy().replace('\\', "/");
    s.strip_prefix("./").map(str::to_owned).unwrap_or(s)
}

fn is_binary(bytes: &[u8]) -> bool {
    bytes.iter().take(8000).any(|b| *b == 0)
}

/// Scans every file under `paths` (files or directories), skipping what `.gitignore`,
/// `.ignore` and git's excludes exclude (in or outside a git repository) and `.git/`.
pub fn scan_paths(
    scanner: &Scanner,
    paths: &[PathBuf],
    baseline: Option<&Baseline>,
) -> Result<Report, ReportError> {
    let mut report = Report::default();
    for root in paths {
        if std::fs::symlink_metadata(root).is_err() {
            return Err(ReportError::Walk {
                path: root.display().to_string(),
                error: "no such file or directory".into(),
            });
        }
        let walk = ignore::WalkBuilder::new(root)
            .hidden(false)
            .parents(true)
            .git_ignore(true)
            .git_exclude(true)
            .require_git(false)
            .follow_links(false)
            .sort_by_file_path(|a, b| a.cmp(b))
            .filter_entry(|e| e.file_name() != ".git")
            .build();
        for entry in walk {
            let entry = entry.map_err(|e| ReportError::Walk {
                path: root.display().to_string(),
                error: e.to_string(),
            })?;
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let path = entry.path();
            let shown = display(path);
            let meta = entry.metadata().map_err(|e| ReportError::Walk {
                path: shown.clone(),
                error: e.to_string(),
            })?;
            report.files += 1;
            let text = if meta.len() > MAX_FILE_BYTES {
                report.skipped += 1;
                String::new()
            } else {
                let bytes = std::fs::read(path).map_err(|e| ReportError::Walk {
                    path: shown.clone(),
                    error: e.to_string(),
                })?;
                report.bytes += bytes.len() as u64;
                if is_binary(&bytes) {
                    report.skipped += 1;
                    String::new()
                } else {
                    String::from_utf8_lossy(&bytes).into_owned()
                }
            };
            for f in scanner.scan_file(&shown, &text) {
                let fp = fingerprint(&f.rule, &shown, &f);
                if baseline.is_some_and(|b| b.fingerprints.contains(&fp)) {
                    report.baselined += 1;
                    continue;
                }
                let ((line, column), (end_line, end_column)) = if f.whole_file {
                    ((0, 0), (0, 0))
                } else {
                    (position(&text, f.start), position(&text, f.end))
                };
                report.findings.push(FileFinding {
                    description: scanner.describe(&f.rule).to_owned(),
                    secret: if f.whole_file {
                        "(the file itself)".into()
                    } else {
                        f.secret_redacted()
                    },
                    rule: f.rule,
                    path: shown.clone(),
                    line,
                    column,
                    end_line,
                    end_column,
                    entropy: (f.entropy * 1000.0).round() / 1000.0,
                    decode_depth: f.decode_depth,
                    fingerprint: fp,
                });
            }
        }
    }
    Ok(report)
}

impl Report {
    /// One line per finding, then a summary line.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for f in &self.findings {
            out.push_str(&format!(
                "{}:{}:{}: {}: {} [{}]\n",
                f.path, f.line, f.column, f.rule, f.secret, f.fingerprint
            ));
        }
        out.push_str(&format!(
            "{} finding(s) in {} file(s) scanned ({} bytes){}\n",
            self.findings.len(),
            self.files,
            self.bytes,
            if self.baselined > 0 {
                format!("; {} accepted by the baseline", self.baselined)
            } else {
                String::new()
            }
        ));
        out
    }

    pub fn json(&self) -> Value {
        json!({
            "findings": self.findings,
            "summary": {
                "files": self.files,
                "bytes": self.bytes,
                "findings": self.findings.len(),
                "baselined": self.baselined,
                "skipped": self.skipped,
            }
        })
    }

    /// SARIF 2.1.0: one run, the rules that have findings in `tool.driver.rules`, one result
    /// per finding with its fingerprint in `partialFingerprints`.
    pub fn sarif(&self, version: &str) -> Value {
        let mut rules: Vec<(&str, &str)> = self
            .findings
            .iter()
            .map(|f| (f.rule.as_str(), f.description.as_str()))
            .collect();
        rules.sort();
        rules.dedup_by(|a, b| a.0 == b.0);
        let index = |id: &str| rules.iter().position(|r| r.0 == id).unwrap_or(0);
        let results: Vec<Value> = self
            .findings
            .iter()
            .map(|f| {
                let mut physical = json!({ "artifactLocation": { "uri": f.path } });
                if f.line > 0 {
                    physical["region"] = json!({
                        "startLine": f.line,
                        "startColumn": f.column,
                        "endLine": f.end_line,
                        "endColumn": f.end_column,
                    });
                }
                json!({
                    "ruleId": f.rule,
                    "ruleIndex": index(&f.rule),
                    "level": "error",
                    "message": { "text": format!("{} ({}): {}", f.rule, f.description, f.secret) },
                    "locations": [ { "physicalLocation": physical } ],
                    "partialFingerprints": { "warrantSecret/v1": f.fingerprint },
                })
            })
            .collect();
        json!({
            "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
            "version": "2.1.0",
            "runs": [ {
                "tool": { "driver": {
                    "name": "warrant-secrets",
                    "version": version,
                    "informationUri": "https://github.com/gitleaks/gitleaks",
                    "rules": rules.iter().map(|(id, d)| json!({
                        "id": id,
                        "shortDescription": { "text": if d.is_empty() { *id } else { *d } },
                    })).collect::<Vec<_>>(),
                } },
                "columnKind": "unicodeCodePoints",
                "results": results,
            } ]
        })
    }
}
