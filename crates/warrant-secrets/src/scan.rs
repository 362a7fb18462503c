//! The scanner, with gitleaks' semantics: a keyword prefilter (Aho-Corasick, case-insensitive)
//! picks the rules that can match; each picked rule's regex runs, its secret group is taken
//! (the first non-empty group unless `secretGroup` says), entropy and allowlists are checked;
//! then bounded decoding rounds; last, a `generic*` finding is dropped when a specific rule
//! found the same secret on the same line.
//!
//! Nothing is done up front for gitleaks' default rules: they are parsed and translated on the
//! first scan (once per process), and each rule's regex is compiled the first time a text holds
//! one of its keywords (a rule without keywords: on the first scan), once per process, and
//! shared by every clone of the scanner. Should the default rules fail to build, every scan
//! reports the whole text as one secret ([`RULES_UNAVAILABLE_RULE`]), so nothing passes
//! unscanned. Rules that come from a user's file are parsed, checked and compiled when loaded
//! instead, so a pattern that does not compile fails the load and names the rule.

use std::sync::{Arc, OnceLock};

use aho_corasick::AhoCorasick;
use regex::{Regex, RegexSet};
use sha2::{Digest, Sha256};

use crate::decode::{Layered, MAX_DECODE_DEPTH};
use crate::rules::{Allowlist, Condition, RegexTarget, Rule, RuleSet, RulesError};

/// The comment that marks a line as accepted (honoured by `warrant secrets scan`, as gitleaks
/// does; never by redaction, where the text may come from whoever wants a secret through).
pub const ALLOW_COMMENT: &str = "gitleaks:allow";

/// The rule id of the finding a scan reports, covering the whole text, when the rules it
/// should scan with could not be built: the text cannot be shown to be free of secrets.
pub const RULES_UNAVAILABLE_RULE: &str = "secret-rules-unavailable";

/// A secret found in a text.
#[derive(Clone, PartialEq)]
pub struct Finding {
    pub rule: String,
    /// The secret's byte range in the scanned text; for a secret found after decoding, the
    /// encoded stretch that holds it.
    pub start: usize,
    pub end: usize,
    /// The whole match of the rule's pattern (same caveat for decoded text).
    pub match_start: usize,
    pub match_end: usize,
    pub entropy: f64,
    /// How many decoding rounds it took (0: found as written).
    pub decode_depth: usize,
    /// A path-only rule (e.g. `pkcs12-file`): the file itself is the finding; no range.
    pub whole_file: bool,
    secret: String,
}

impl std::fmt::Debug for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the value.
        f.debug_struct("Finding")
            .field("rule", &self.rule)
            .field("start", &self.start)
            .field("end", &self.end)
            .field("decode_depth", &self.decode_depth)
            .field("whole_file", &self.whole_file)
            .finish_non_exhaustive()
    }
}

impl Finding {
    /// SHA-256 of the secret, hex: identifies it (for baselines) without holding it.
    pub fn secret_sha256(&self) -> String {
        hex::encode(Sha256::digest(self.secret.as_bytes()))
    }

    /// The secret shown safely: a short prefix (at most 4 characters and a quarter of the
    /// value) and its length.
    pub fn secret_redacted(&self) -> String {
        let n = self.secret.chars().count();
        let keep = (n / 4).min(4);
        let head: String = self.secret.chars().take(keep).collect();
        format!("{head}…({n} chars)")
    }

    pub(crate) fn secret_bytes(&self) -> &[u8] {
        self.secret.as_bytes()
    }

    pub fn secret_len(&self) -> usize {
        self.secret.len()
    }
}

/// A regex compiled on first use.
struct Lazy {
    pattern: String,
    cell: OnceLock<Option<Regex>>,
}

fn build(pattern: &str) -> Result<Regex, regex::Error> {
    regex::RegexBuilder::new(pattern)
        .size_limit(64 << 20)
        .dfa_size_limit(16 << 20)
        .build()
}

impl Lazy {
    fn new(pattern: String) -> Self {
        Self {
            pattern,
            cell: OnceLock::new(),
        }
    }

    /// Compiles now; the error names the pattern's rule.
    fn eager(pattern: String, id: &str) -> Result<Self, RulesError> {
        let re = build(&pattern).map_err(|e| RulesError::Regex {
            id: id.to_owned(),
            error: e.to_string(),
        })?;
        let cell = OnceLock::new();
        let _ = cell.set(Some(re));
        Ok(Self { pattern, cell })
    }

    /// `None` only if a pattern that parsed does not compile (the shipped rules are tested to
    /// compile; a user's are compiled when loaded).
    fn get(&self) -> Option<&Regex> {
        self.cell.get_or_init(|| build(&self.pattern).ok()).as_ref()
    }
}

struct LazySet {
    patterns: Vec<String>,
    cell: OnceLock<Option<RegexSet>>,
}

impl LazySet {
    fn new(patterns: Vec<String>) -> Self {
        Self {
            patterns,
            cell: OnceLock::new(),
        }
    }

    fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// A set that does not compile matches nothing: allowlists then allow nothing.
    fn is_match(&self, text: &str) -> bool {
        self.cell
            .get_or_init(|| {
                regex::RegexSetBuilder::new(&self.patterns)
                    .size_limit(64 << 20)
                    .build()
                    .ok()
            })
            .as_ref()
            .is_some_and(|s| s.is_match(text))
    }
}

struct CAllow {
    condition: Condition,
    target: RegexTarget,
    regexes: LazySet,
    stopwords: Vec<String>,
    paths: LazySet,
    has_commits: bool,
}

impl CAllow {
    fn new(a: &Allowlist) -> Self {
        Self {
            condition: a.condition,
            target: a.regex_target,
            regexes: LazySet::new(a.regexes.clone()),
            stopwords: a.stopwords.clone(),
            paths: LazySet::new(a.paths.clone()),
            has_commits: !a.commits.is_empty(),
        }
    }

    fn path_allowed(&self, path: Option<&str>) -> bool {
        !self.paths.is_empty() && path.is_some_and(|p| self.paths.is_match(p))
    }

    /// gitleaks' check before scanning a file: commits and paths only.
    fn skips_file(&self, path: Option<&str>) -> bool {
        path.is_some()
            && match self.condition {
                Condition::Or => self.path_allowed(path),
                Condition::And => {
                    if !self.regexes.is_empty() || !self.stopwords.is_empty() {
                        return false;
                    }
                    !self.has_commits && self.path_allowed(path)
                }
            }
    }

    fn allows(&self, secret: &str, matched: &str, line: &str, path: Option<&str>) -> bool {
        let target = match self.target {
            RegexTarget::Secret => secret,
            RegexTarget::Match => matched,
            RegexTarget::Line => line,
        };
        let regex_ok = !self.regexes.is_empty() && self.regexes.is_match(target);
        let stop_ok = !self.stopwords.is_empty() && {
            let lower = secret.to_lowercase();
            self.stopwords.iter().any(|w| lower.contains(w.as_str()))
        };
        match self.condition {
            Condition::Or => regex_ok || stop_ok,
            Condition::And => {
                (!self.has_commits)
                    && (self.paths.is_empty() || self.path_allowed(path))
                    && (self.regexes.is_empty() || regex_ok)
                    && (self.stopwords.is_empty() || stop_ok)
            }
        }
    }
}

struct CRule {
    id: String,
    description: String,
    group: usize,
    regex: Option<Lazy>,
    path: Option<Lazy>,
    secret_group: usize,
    entropy: Option<f64>,
    keywords: Vec<usize>,
    allow: Vec<CAllow>,
}

/// Keywords that code, configuration and Warrant's own texts (a policy's reasons, a profile's
/// words) hold so often that the rules they select are built in nearly every process that
/// scans: built ahead by [`Scanner::prewarm`], off the path of the first tool result.
const COMMON_KEYWORDS: &[&str] = &[
    "access", "api", "auth", "key", "password", "secret", "token",
];

struct Inner {
    rules: Vec<CRule>,
    /// Global allowlists (without `targetRules`), by rule group (one group per layer).
    globals: Vec<Vec<CAllow>>,
    words: Vec<String>,
    prefilter: OnceLock<Option<AhoCorasick>>,
    max_decode_depth: usize,
}

/// Rules grouped by where they come from: a group's global allowlists apply to its own rules
/// only (so a project's allowlist cannot silence the managed rules).
#[derive(Clone, Debug)]
pub struct RuleGroup {
    pub set: RuleSet,
    /// Compile now every pattern that is not one of gitleaks' default rules (rules from a
    /// user's file: a bad one fails the load, naming the rule).
    pub eager: bool,
}

/// How a scan treats `gitleaks:allow` comments and decoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanOptions {
    pub honour_allow_comment: bool,
}

/// Where a scanner's compiled rules come from.
enum Rules {
    /// Built when the scanner was made.
    Built(Inner),
    /// Built by `load` on the first use (gitleaks' default rules); if that fails, every scan
    /// reports the whole text (see [`RULES_UNAVAILABLE_RULE`]).
    OnFirstUse {
        load: fn() -> Result<RuleSet, RulesError>,
        cell: OnceLock<Result<Inner, RulesError>>,
    },
}

#[derive(Clone)]
pub struct Scanner {
    rules: Arc<Rules>,
}

impl std::fmt::Debug for Scanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Scanner");
        match &*self.rules {
            Rules::Built(inner) => d.field("rules", &inner.rules.len()),
            Rules::OnFirstUse { cell, .. } => match cell.get() {
                None => d.field("rules", &"built on first use"),
                Some(Ok(inner)) => d.field("rules", &inner.rules.len()),
                Some(Err(e)) => d.field("unavailable", e),
            },
        };
        d.finish_non_exhaustive()
    }
}

/// One raw hit of a pass, in the coordinates of the text that pass scanned.
struct Hit {
    rule: usize,
    secret: (usize, usize),
    matched: (usize, usize),
    entropy: f64,
}

/// gitleaks' Shannon entropy: over the characters, divided by the byte length (the same as
/// bits per character for ASCII).
pub fn shannon_entropy(s: &str) -> f64 {
    if s.is_empty() {
        return 0.0;
    }
    let mut counts = std::collections::HashMap::new();
    for c in s.chars() {
        *counts.entry(c).or_insert(0usize) += 1;
    }
    let inv = 1.0 / s.len() as f64;
    counts
        .values()
        .map(|&c| {
            let p = c as f64 * inv;
            -p * p.log2()
        })
        .sum()
}

fn line_around(text: &str, a: usize, b: usize) -> &str {
    let s = text
        .get(..a)
        .and_then(|t| t.rfind('\n'))
        .map_or(0, |i| i + 1);
    let e = text
        .get(b..)
        .and_then(|t| t.find('\n'))
        .map_or(text.len(), |i| b + i);
    text.get(s..e).unwrap_or("")
}

impl Scanner {
    /// The scanner over gitleaks' default rules, one per process (later calls share it). The
    /// rules are parsed on its first scan, not here: a process that never scans (a run whose
    /// tools return nothing) does not pay for them. If they cannot be built, every scan
    /// reports the whole text as a secret ([`RULES_UNAVAILABLE_RULE`]): never fail open.
    pub fn default_rules() -> Self {
        static DEFAULT: OnceLock<Scanner> = OnceLock::new();
        DEFAULT
            .get_or_init(|| Self::on_first_use(|| crate::rules::default_set().cloned()))
            .clone()
    }

    /// A scanner whose rules `load` gives, built on the first scan.
    fn on_first_use(load: fn() -> Result<RuleSet, RulesError>) -> Self {
        Self {
            rules: Arc::new(Rules::OnFirstUse {
                load,
                cell: OnceLock::new(),
            }),
        }
    }

    /// The compiled rules, built now if this is their first use.
    fn inner(&self) -> Result<&Inner, &RulesError> {
        match &*self.rules {
            Rules::Built(inner) => Ok(inner),
            Rules::OnFirstUse { load, cell } => cell
                .get_or_init(|| {
                    let set = load()?;
                    Inner::from_groups(vec![RuleGroup { set, eager: false }])
                })
                .as_ref(),
        }
    }

    /// Why this scanner cannot scan (its rules could not be built), if it cannot; builds them
    /// now if this is their first use.
    pub fn unavailable(&self) -> Option<&RulesError> {
        self.inner().err()
    }

    /// One rule set, compiled now (every pattern checked).
    pub fn new(set: &RuleSet) -> Result<Self, RulesError> {
        Self::from_groups(vec![RuleGroup {
            set: set.clone(),
            eager: true,
        }])
    }

    pub fn from_groups(groups: Vec<RuleGroup>) -> Result<Self, RulesError> {
        Ok(Self {
            rules: Arc::new(Rules::Built(Inner::from_groups(groups)?)),
        })
    }
}

impl Inner {
    fn from_groups(groups: Vec<RuleGroup>) -> Result<Self, RulesError> {
        let mut words: Vec<String> = Vec::new();
        let mut rules = Vec::new();
        let mut globals = Vec::new();
        for (g, group) in groups.iter().enumerate() {
            let mut global = Vec::new();
            for a in &group.set.allowlists {
                if a.target_rules.is_empty() {
                    global.push(CAllow::new(a));
                }
            }
            globals.push(global);
            for r in &group.set.rules {
                rules.push(Self::compile_rule(r, g, group, &mut words)?);
            }
        }
        Ok(Self {
            rules,
            globals,
            words,
            prefilter: OnceLock::new(),
            max_decode_depth: MAX_DECODE_DEPTH,
        })
    }

    fn compile_rule(
        r: &Rule,
        g: usize,
        group: &RuleGroup,
        words: &mut Vec<String>,
    ) -> Result<CRule, RulesError> {
        // gitleaks' own rules are tested to compile: they stay lazy even in a user's file.
        let eager = group.eager
            && !crate::rules::default_set()
                .map(|d| d.rules.iter().any(|x| x == r))
                .unwrap_or(false);
        let lazy = |p: &String| {
            if eager {
                Lazy::eager(p.clone(), &r.id)
            } else {
                Ok(Lazy::new(p.clone()))
            }
        };
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
        let mut allow: Vec<CAllow> = r.allowlists.iter().map(CAllow::new).collect();
        // Global allowlists with `targetRules` belong to the rules they name.
        allow.extend(
            group
                .set
                .allowlists
                .iter()
                .filter(|a| a.target_rules.contains(&r.id))
                .map(CAllow::new),
        );
        Ok(CRule {
            id: r.id.clone(),
            description: r.description.clone(),
            group: g,
            regex: r.regex.as_ref().map(lazy).transpose()?,
            path: r.path.as_ref().map(lazy).transpose()?,
            secret_group: r.secret_group,
            entropy: r.entropy,
            keywords,
            allow,
        })
    }
}

impl Scanner {
    /// The rule's description (empty for an unknown id).
    pub fn describe(&self, id: &str) -> &str {
        if id == RULES_UNAVAILABLE_RULE {
            return "the secret-scanning rules could not be built, so the whole text is held back";
        }
        self.inner()
            .ok()
            .and_then(|inner| inner.rules.iter().find(|r| r.id == id))
            .map_or("", |r| r.description.as_str())
    }

    /// The rules' ids (none if they could not be built).
    pub fn rule_ids(&self) -> impl Iterator<Item = &str> {
        self.inner()
            .ok()
            .into_iter()
            .flat_map(|inner| inner.rules.iter().map(|r| r.id.as_str()))
    }

    /// How many rules have compiled their pattern so far (what laziness saves); 0 while the
    /// rules themselves are not built yet (this does not build them).
    pub fn compiled_rules(&self) -> usize {
        let inner = match &*self.rules {
            Rules::Built(inner) => inner,
            Rules::OnFirstUse { cell, .. } => match cell.get() {
                Some(Ok(inner)) => inner,
                Some(Err(_)) | None => return 0,
            },
        };
        inner
            .rules
            .iter()
            .filter(|r| r.regex.as_ref().is_some_and(|l| l.cell.get().is_some()))
            .count()
    }
    /// Builds what the first scan needs (the rules, their prefilter, the rules that every scan
    /// tries and those that common words select), so that a front end can do it on another
    /// thread at start-up.
    pub fn prewarm(&self) {
        if let Ok(inner) = self.inner() {
            inner.prewarm();
        }
    }

    /// Every secret in `text` (no path; `gitleaks:allow` not honoured), ordered by position.
    pub fn scan(&self, text: &str) -> Vec<Finding> {
        self.scan_with(
            text,
            None,
            ScanOptions {
                honour_allow_comment: false,
            },
        )
    }

    /// Every secret in the file `path` holding `text`, as `warrant secrets scan` reports them.
    pub fn scan_file(&self, path: &str, text: &str) -> Vec<Finding> {
        self.scan_with(
            text,
            Some(path),
            ScanOptions {
                honour_allow_comment: true,
            },
        )
    }

    /// Every secret in `text`, ordered by position. If the rules could not be built, one
    /// finding ([`RULES_UNAVAILABLE_RULE`]) covers the whole text.
    pub fn scan_with(&self, text: &str, path: Option<&str>, opts: ScanOptions) -> Vec<Finding> {
        match self.inner() {
            Ok(inner) => inner.scan_with(text, path, opts),
            Err(_) => vec![Finding {
                rule: RULES_UNAVAILABLE_RULE.to_owned(),
                start: 0,
                end: text.len(),
                match_start: 0,
                match_end: text.len(),
                entropy: shannon_entropy(text),
                decode_depth: 0,
                whole_file: false,
                secret: text.to_owned(),
            }],
        }
    }
}

impl Inner {
    fn scan_with(&self, text: &str, path: Option<&str>, opts: ScanOptions) -> Vec<Finding> {
        let inner = self;
        let skipped: Vec<bool> = inner
            .globals
            .iter()
            .map(|g| g.iter().any(|a| a.skips_file(path)))
            .collect();
        let mut out: Vec<Finding> = Vec::new();
        // Path-only rules.
        if let Some(p) = path {
            for r in &inner.rules {
                if r.regex.is_none()
                    && !skipped.get(r.group).copied().unwrap_or(false)
                    && !r.allow.iter().any(|a| a.skips_file(path))
                    && r.path
                        .as_ref()
                        .and_then(Lazy::get)
                        .is_some_and(|re| re.is_match(p))
                {
                    out.push(Finding {
                        rule: r.id.clone(),
                        start: 0,
                        end: 0,
                        match_start: 0,
                        match_end: 0,
                        entropy: 0.0,
                        decode_depth: 0,
                        whole_file: true,
                        secret: format!("file detected: {p}"),
                    });
                }
            }
        }
        for h in self.pass(text, 0, path, &skipped, opts) {
            out.push(self.finding(text, &h, h.secret, h.matched, 0));
        }
        let mut layered = Layered::original(text);
        for round in 1..=inner.max_decode_depth {
            let Some(next) = layered.decode(round) else {
                break;
            };
            layered = next;
            for (ws, we) in windows(&layered, round) {
                let Some(window) = layered.text.get(ws..we) else {
                    continue;
                };
                for h in self.pass(window, ws, path, &skipped, opts) {
                    let secret = (h.secret.0 + ws, h.secret.1 + ws);
                    if !layered.touches(secret.0, secret.1, round) {
                        continue;
                    }
                    let matched = (h.matched.0 + ws, h.matched.1 + ws);
                    let mut f = self.finding(&layered.text, &h, secret, matched, round);
                    (f.start, f.end) = layered.map(secret.0, secret.1);
                    (f.match_start, f.match_end) = layered.map(matched.0, matched.1);
                    out.push(f);
                }
            }
        }
        out.sort_by(|a, b| (a.start, a.end, &a.rule).cmp(&(b.start, b.end, &b.rule)));
        out.dedup_by(|a, b| a.rule == b.rule && a.start == b.start && a.end == b.end);
        drop_generic_duplicates(text, out)
    }

    fn finding(
        &self,
        text: &str,
        h: &Hit,
        secret: (usize, usize),
        matched: (usize, usize),
        depth: usize,
    ) -> Finding {
        Finding {
            rule: self
                .rules
                .get(h.rule)
                .map(|r| r.id.clone())
                .unwrap_or_default(),
            start: secret.0,
            end: secret.1,
            match_start: matched.0,
            match_end: matched.1,
            entropy: h.entropy,
            decode_depth: depth,
            whole_file: false,
            secret: text.get(secret.0..secret.1).unwrap_or("").to_owned(),
        }
    }

    fn prefilter(&self) -> Option<&AhoCorasick> {
        self.prefilter
            .get_or_init(|| {
                AhoCorasick::builder()
                    .ascii_case_insensitive(true)
                    .build(&self.words)
                    .ok()
            })
            .as_ref()
    }

    /// Builds now what the first scan would: the keyword prefilter, the rules every scan tries
    /// (those without keywords), and the rules that words nearly every run's text holds select
    /// ([`COMMON_KEYWORDS`], or a keyword inside one: gitleaks' `ey` of `jwt` is inside `key`),
    /// gitleaks' generic rule among them, whose pattern is the costliest to build.
    fn prewarm(&self) {
        let _ = self.prefilter();
        let common = |r: &&CRule| {
            r.keywords.is_empty()
                || r.keywords.iter().any(|k| {
                    self.words
                        .get(*k)
                        .map(|w| w.to_ascii_lowercase())
                        .is_some_and(|w| COMMON_KEYWORDS.iter().any(|c| c.contains(w.as_str())))
                })
        };
        for rule in self.rules.iter().filter(common) {
            if let Some(lazy) = &rule.regex {
                let _ = lazy.get();
            }
        }
    }

    /// One scan of `text` with every rule whose keywords occur in it.
    fn pass(
        &self,
        text: &str,
        _offset: usize,
        path: Option<&str>,
        skipped: &[bool],
        opts: ScanOptions,
    ) -> Vec<Hit> {
        let inner = self;
        let mut present = vec![false; inner.words.len()];
        if let Some(ac) = self.prefilter() {
            for m in ac.find_overlapping_iter(text) {
                if let Some(p) = present.get_mut(m.pattern().as_usize()) {
                    *p = true;
                }
            }
        }
        let mut hits = Vec::new();
        for (i, r) in inner.rules.iter().enumerate() {
            let Some(lazy) = &r.regex else {
                continue;
            };
            if skipped.get(r.group).copied().unwrap_or(false) {
                continue;
            }
            if !r.keywords.is_empty()
                && !r
                    .keywords
                    .iter()
                    .any(|k| present.get(*k).copied().unwrap_or(false))
            {
                continue;
            }
            if r.allow.iter().any(|a| a.skips_file(path)) {
                continue;
            }
            if let Some(p) = &r.path {
                let ok = path.is_some_and(|path| p.get().is_some_and(|re| re.is_match(path)));
                if !ok {
                    continue;
                }
            }
            let Some(re) = lazy.get() else {
                continue;
            };
            for caps in re.captures_iter(text) {
                let Some(m) = caps.get(0) else {
                    continue;
                };
                let raw = m.as_str();
                let lead = raw.len() - raw.trim_start_matches('\n').len();
                let trimmed = raw.trim_matches('\n');
                let ms = m.start() + lead;
                let me = ms + trimmed.len();
                let secret = if r.secret_group > 0 {
                    match caps.get(r.secret_group) {
                        Some(g) => (g.start(), g.end()),
                        None => continue,
                    }
                } else {
                    caps.iter()
                        .skip(1)
                        .flatten()
                        .find(|g| !g.as_str().is_empty())
                        .map_or((ms, me), |g| (g.start(), g.end()))
                };
                let value = text.get(secret.0..secret.1).unwrap_or("");
                let entropy = shannon_entropy(value);
                if r.entropy.is_some_and(|min| entropy <= min) {
                    continue;
                }
                let line = line_around(text, ms, me);
                if opts.honour_allow_comment && line.contains(ALLOW_COMMENT) {
                    continue;
                }
                let matched = text.get(ms..me).unwrap_or("");
                let global = inner.globals.get(r.group).map(Vec::as_slice).unwrap_or(&[]);
                if global
                    .iter()
                    .chain(r.allow.iter())
                    .any(|a| a.allows(value, matched, line, path))
                {
                    continue;
                }
                hits.push(Hit {
                    rule: i,
                    secret,
                    matched: (ms, me),
                    entropy,
                });
            }
        }
        hits
    }
}

/// Where a decoding round can have made a new match: the lines around what it decoded.
fn windows(l: &Layered, round: usize) -> Vec<(usize, usize)> {
    const REACH: usize = 4096;
    let text = &l.text;
    let mut out: Vec<(usize, usize)> = Vec::new();
    for (a, b) in l.decoded_in(round) {
        let lo = a.saturating_sub(REACH);
        let hi = (b + REACH).min(text.len());
        let s = text
            .get(lo..a)
            .and_then(|t| t.rfind('\n'))
            .map_or(lo, |i| lo + i + 1);
        let e = text
            .get(b..hi)
            .and_then(|t| t.find('\n'))
            .map_or(hi, |i| b + i);
        let (s, e) = (floor_char(text, s), ceil_char(text, e));
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

fn floor_char(t: &str, mut i: usize) -> usize {
    while i > 0 && !t.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char(t: &str, mut i: usize) -> usize {
    while i < t.len() && !t.is_char_boundary(i) {
        i += 1;
    }
    i.min(t.len())
}

/// gitleaks' filter: a `generic*` finding is dropped when a specific rule's finding on the same
/// line holds its secret.
fn drop_generic_duplicates(text: &str, findings: Vec<Finding>) -> Vec<Finding> {
    if !findings
        .iter()
        .any(|f| f.rule.to_lowercase().contains("generic"))
    {
        return findings;
    }
    let line_of = |pos: usize| text.get(..pos).map_or(0, |t| t.matches('\n').count());
    let lines: Vec<usize> = findings.iter().map(|f| line_of(f.match_start)).collect();
    let keep: Vec<bool> = findings
        .iter()
        .enumerate()
        .map(|(i, f)| {
            if !f.rule.to_lowercase().contains("generic") {
                return true;
            }
            !findings.iter().enumerate().any(|(j, o)| {
                j != i
                    && lines.get(j) == lines.get(i)
                    && o.rule != f.rule
                    && !o.rule.to_lowercase().contains("generic")
                    && o.secret.contains(f.secret.as_str())
            })
        })
        .collect();
    findings
        .into_iter()
        .zip(keep)
        .filter_map(|(f, k)| k.then_some(f))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::Redactor;

    fn broken() -> Result<RuleSet, RulesError> {
        Err(RulesError::Parse(
            "the default rules: simulated damage".into(),
        ))
    }

    #[test]
    fn rules_that_cannot_be_built_hold_back_the_whole_text() {
        let s = Scanner::on_first_use(broken);
        let text = "nothing secret here, but it cannot be checked\nsecond line";
        for found in [s.scan(text), s.scan_file("notes.txt", text)] {
            assert_eq!(found.len(), 1, "{found:?}");
            let f = &found[0];
            assert_eq!(f.rule, RULES_UNAVAILABLE_RULE);
            assert_eq!((f.start, f.end), (0, text.len()));
            assert!(!f.whole_file);
            assert_eq!(f.secret_len(), text.len());
        }
        assert!(s.unavailable().is_some());
        assert_eq!(s.rule_ids().count(), 0);
        assert!(!s.describe(RULES_UNAVAILABLE_RULE).is_empty());
        let (out, report) = Redactor::new(s.clone(), Vec::new()).redact(text);
        assert_eq!(out, "[REDACTED:secret-rules-unavailable]");
        assert_eq!(report.counts.get(RULES_UNAVAILABLE_RULE), Some(&1));
        // A JSON result: every string is held back, keys and numbers stay.
        let (v, _) = Redactor::new(s, Vec::new())
            .redact_json(&serde_json::json!({"stdout": "ok", "exit_code": 0}));
        assert_eq!(
            v,
            serde_json::json!({"stdout": "[REDACTED:secret-rules-unavailable]", "exit_code": 0})
        );
    }

    static LOADS: AtomicUsize = AtomicUsize::new(0);

    fn counted() -> Result<RuleSet, RulesError> {
        LOADS.fetch_add(1, Ordering::SeqCst);
        crate::rules::default_set().cloned()
    }

    #[test]
    fn the_default_rules_are_built_on_the_first_scan_once_for_every_clone() {
        let s = Scanner::on_first_use(counted);
        let twin = s.clone();
        assert_eq!(
            LOADS.load(Ordering::SeqCst),
            0,
            "nothing built at construction"
        );
        assert_eq!(s.compiled_rules(), 0);
        let gh = "token ghp_4Jx9ZkQ2mW7rT1vB8nL3cY6pH0sD5fG2aE9u";
        assert!(s.scan(gh).iter().any(|f| f.rule == "github-pat"));
        assert!(twin.scan(gh).iter().any(|f| f.rule == "github-pat"));
        assert_eq!(LOADS.load(Ordering::SeqCst), 1);
        assert!(s.unavailable().is_none());
        assert!(twin.compiled_rules() >= 1);
    }
}
