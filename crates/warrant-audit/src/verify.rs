//! Verification of a chain copy: a sink's JSONL file or its rotated files in order, any stream
//! of lines, or the store's own sealed records. It checks order, links, hashes and signatures and names the FIRST broken
//! record; records after it are not judged. A truncated tail cannot be seen from the lines
//! alone: [`crate::verify_copy`] checks them against the sink's signed checkpoint.

use std::fs::File;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::Signature;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use warrant_core::Digest;
use warrant_store::SealedRecord;

use crate::record::{GENESIS_HASH, chain_hash};
use crate::{AuditError, PublicKeys};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyReport {
    /// Records verified intact, from the start up to (not including) the first problem.
    pub records: u64,
    pub first_problem: Option<Problem>,
    /// The hash of the last intact record; `None` when there was none.
    pub head: Option<String>,
}

impl VerifyReport {
    pub fn is_ok(&self) -> bool {
        self.first_problem.is_none()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// The file the line is in, when several files were verified as one chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// 1-based line in its file (or position, for the store's records).
    pub line: u64,
    pub record_id: Option<String>,
    pub seq: Option<u64>,
    pub kind: ProblemKind,
    pub detail: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// Not a JSON object, or a chain attribute is missing or mistyped.
    Malformed,
    /// Records are missing: the seq jumps and the missing ones appear nowhere later.
    Gap,
    /// A seq that already appeared.
    Duplicate,
    /// The seq jumps ahead and a skipped record appears later.
    Reordered,
    /// `prevhash` is not the previous record's hash.
    BrokenLink,
    /// `hash` does not recompute from the record's content.
    HashMismatch,
    /// `kid` names no trusted key.
    UnknownKey,
    /// The signature is not valid for the hash under the named key.
    BadSignature,
    /// `kid` or `sig` is missing: on a record that should be signed, or on the record whose
    /// signature the records of its batch wait for (the copy ends before it).
    Unsigned,
    /// A record's `batchend` does not fit its batch: it names another end than the records
    /// before it, is not after the record itself, or a record inside a batch carries a
    /// signature.
    BrokenBatch,
}

/// Where a line is: which of the verified files (by index), and its 1-based line there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pos {
    file: Option<usize>,
    line: u64,
}

impl Pos {
    fn single(line: u64) -> Self {
        Self { file: None, line }
    }
}

/// Verifies a stream of `(line number, line)`.
pub fn verify_lines(lines: impl Iterator<Item = (u64, String)>, keys: &PublicKeys) -> VerifyReport {
    drive(
        lines.map(|(n, l)| (Pos::single(n), Ok(l))),
        &[],
        keys,
        |_, _| None,
    )
}

/// Verifies a JSONL file. A line that is not UTF-8 is a [`ProblemKind::Malformed`] record;
/// only a failure to read the file is an error.
pub fn verify_file(path: &Path, keys: &PublicKeys) -> Result<VerifyReport, AuditError> {
    let paths = [path.to_path_buf()];
    let mut lines = FileLines::new(&paths, false);
    let report = drive(&mut lines, &[], keys, |_, _| None);
    lines.finish(report)
}

/// Verifies files that together hold one chain, in order (a sink's rotated files, then its
/// current file: [`crate::JsonlSink::files`]). The chain must run on from one file into the
/// next, so a file missing in the middle is a [`ProblemKind::Gap`] at the first record of the
/// file after it. Every problem names its file; lines are numbered within each file.
pub fn verify_files(paths: &[PathBuf], keys: &PublicKeys) -> Result<VerifyReport, AuditError> {
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let mut lines = FileLines::new(paths, true);
    let report = drive(&mut lines, &names, keys, |_, _| None);
    lines.finish(report)
}

/// [`verify_files`] (or [`verify_file`] when not `named`), also giving the hash of record
/// `watch` when the intact records reach it: what a checkpoint is checked against.
pub(crate) fn verify_paths(
    paths: &[PathBuf],
    named: bool,
    keys: &PublicKeys,
    watch: Option<u64>,
) -> Result<(VerifyReport, Option<String>), AuditError> {
    let names: Vec<String> = if named {
        paths.iter().map(|p| p.display().to_string()).collect()
    } else {
        Vec::new()
    };
    let mut lines = FileLines::new(paths, named);
    let mut seen = None;
    let report = drive(&mut lines, &names, keys, |_, checked| {
        if Some(checked.seq) == watch {
            seen = Some(checked.hash.clone());
        }
        None
    });
    Ok((lines.finish(report)?, seen))
}

/// The lines of several files, one after another, opened lazily. A read failure ends the
/// stream and is kept for [`FileLines::finish`].
struct FileLines<'a> {
    paths: &'a [PathBuf],
    named: bool,
    next_file: usize,
    reader: Option<(usize, BufReader<File>)>,
    line_no: u64,
    failure: Option<AuditError>,
}

impl<'a> FileLines<'a> {
    fn new(paths: &'a [PathBuf], named: bool) -> Self {
        Self {
            paths,
            named,
            next_file: 0,
            reader: None,
            line_no: 0,
            failure: None,
        }
    }

    fn finish(self, report: VerifyReport) -> Result<VerifyReport, AuditError> {
        match self.failure {
            Some(e) => Err(e),
            None => Ok(report),
        }
    }
}

impl Iterator for FileLines<'_> {
    type Item = (Pos, Result<String, String>);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.failure.is_some() {
                return None;
            }
            let Some((index, reader)) = self.reader.as_mut() else {
                let path = self.paths.get(self.next_file)?;
                match File::open(path) {
                    Ok(file) => self.reader = Some((self.next_file, BufReader::new(file))),
                    Err(e) => self.failure = Some(AuditError::io("open", path, e)),
                }
                self.next_file += 1;
                self.line_no = 0;
                continue;
            };
            let mut buf = Vec::new();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) => self.reader = None,
                Ok(_) => {
                    self.line_no += 1;
                    if buf.last() == Some(&b'\n') {
                        buf.pop();
                    }
                    let text = String::from_utf8(buf).map_err(|e| format!("not UTF-8: {e}"));
                    let pos = Pos {
                        file: self.named.then_some(*index),
                        line: self.line_no,
                    };
                    return Some((pos, text));
                }
                Err(e) => {
                    let path = self.paths.get(*index).cloned().unwrap_or_default();
                    self.failure = Some(AuditError::io("read", path, e));
                }
            }
        }
    }
}

/// Verifies the store's own copy, and that each record's columns agree with its line.
pub fn verify_sealed(records: &[SealedRecord], keys: &PublicKeys) -> VerifyReport {
    let lines = (1u64..)
        .zip(records)
        .map(|(n, r)| (Pos::single(n), Ok(r.line.clone())));
    drive(lines, &[], keys, |line, checked| {
        let stored = usize::try_from(line - 1)
            .ok()
            .and_then(|i| records.get(i))?;
        let problem = |kind, detail| {
            Some(Problem {
                file: None,
                line,
                record_id: checked.id.clone(),
                seq: Some(checked.seq),
                kind,
                detail,
            })
        };
        if stored.seq != checked.seq {
            return problem(
                ProblemKind::Malformed,
                format!(
                    "the store's seq column says {} but the line says {}",
                    stored.seq, checked.seq
                ),
            );
        }
        if stored.hash != checked.hash {
            return problem(
                ProblemKind::HashMismatch,
                format!(
                    "the store's hash column says {} but the line says {}",
                    stored.hash, checked.hash
                ),
            );
        }
        if checked.id.as_deref() != Some(stored.id.as_str()) {
            return problem(
                ProblemKind::Malformed,
                format!(
                    "the store's id column says {} but the line says {:?}",
                    stored.id, checked.id
                ),
            );
        }
        None
    })
}

/// A record that passed every check. One inside a batch (`batchend` set) is authentic only once
/// the record at `batchend` is signed.
#[derive(Debug)]
struct Checked {
    seq: u64,
    id: Option<String>,
    hash: String,
    batchend: Option<u64>,
}

/// The chain so far: everything before this point verified.
struct Prev {
    seq: u64,
    hash: String,
    at: Pos,
    /// The batch still waiting for its signature: where its first record is, and its end.
    open: Option<OpenBatch>,
}

#[derive(Clone)]
struct OpenBatch {
    end: u64,
    first: Problem,
}

/// Where a run of consecutive verified records starts: seq `seq` is at `at`, and each next
/// seq on the next line of the same file. One per file, so the position of any earlier seq
/// is known without remembering every record.
struct Segment {
    seq: u64,
    at: Pos,
}

/// What `check` needs to place and name what it finds.
struct Places<'a> {
    segments: &'a [Segment],
    names: &'a [String],
}

impl Places<'_> {
    fn name(&self, at: Pos) -> Option<String> {
        at.file.and_then(|i| self.names.get(i)).cloned()
    }

    /// Where verified record `seq` is.
    fn of(&self, seq: u64) -> Option<Pos> {
        self.segments
            .iter()
            .rev()
            .find(|s| s.seq <= seq)
            .map(|s| Pos {
                file: s.at.file,
                line: s.at.line + (seq - s.seq),
            })
    }

    /// "line N", with the file when it is not the one `from` is in.
    fn describe(&self, at: Pos, from: Pos) -> String {
        match self.name(at) {
            Some(name) if at.file != from.file => format!("line {} of {name}", at.line),
            Some(_) | None => format!("line {}", at.line),
        }
    }
}

enum Finding {
    Problem(Problem),
    /// The seq jumped from `expected` to the record's; Gap or Reordered, decided by looking
    /// at the rest of the stream.
    Ahead(Problem, u64),
}

fn drive<I, F>(mut lines: I, names: &[String], keys: &PublicKeys, mut extra: F) -> VerifyReport
where
    I: Iterator<Item = (Pos, Result<String, String>)>,
    F: FnMut(u64, &Checked) -> Option<Problem>,
{
    let mut records = 0u64;
    let mut prev: Option<Prev> = None;
    let mut segments: Vec<Segment> = Vec::new();
    let problem = loop {
        let Some((at, text)) = lines.next() else {
            break None;
        };
        let places = Places {
            segments: &segments,
            names,
        };
        let checked = match text {
            Err(detail) => Err(Finding::Problem(Problem {
                file: places.name(at),
                line: at.line,
                record_id: None,
                seq: None,
                kind: ProblemKind::Malformed,
                detail,
            })),
            Ok(text) => check(at, &text, prev.as_ref(), &places, keys),
        };
        match checked {
            Ok(checked) => {
                if let Some(problem) = extra(at.line, &checked) {
                    break Some(problem);
                }
                let open = match (prev.and_then(|p| p.open), checked.batchend) {
                    (Some(open), Some(_)) => Some(open),
                    (None, Some(end)) => Some(OpenBatch {
                        end,
                        first: Problem {
                            file: places.name(at),
                            line: at.line,
                            record_id: checked.id.clone(),
                            seq: Some(checked.seq),
                            kind: ProblemKind::Unsigned,
                            detail: String::new(),
                        },
                    }),
                    (_, None) => None,
                };
                if segments.last().is_none_or(|s| s.at.file != at.file) {
                    segments.push(Segment {
                        seq: checked.seq,
                        at,
                    });
                }
                records += 1;
                prev = Some(Prev {
                    seq: checked.seq,
                    hash: checked.hash,
                    at,
                    open,
                });
            }
            Err(Finding::Problem(problem)) => break Some(problem),
            Err(Finding::Ahead(problem, expected)) => {
                let before = prev.as_ref().map(|p| p.at);
                break Some(resolve_ahead(problem, expected, at, before, &places, lines));
            }
        }
    };
    // A copy that ends inside a batch holds records no signature covers yet.
    let problem = problem.or_else(|| {
        let p = prev.as_ref()?;
        let open = p.open.as_ref()?;
        let first = open.first.seq.unwrap_or(p.seq);
        let mut problem = open.first.clone();
        problem.detail = format!(
            "records {first}..={} are signed by record {}, which is not in the copy: the copy ends inside a batch",
            p.seq, open.end
        );
        Some(problem)
    });
    VerifyReport {
        records,
        first_problem: problem,
        head: prev.map(|p| p.hash),
    }
}

/// A seq that jumped ahead is a reordering when a skipped seq shows up later, else a gap.
/// A gap where one file ends and the next begins says so: a rotated file may be missing.
fn resolve_ahead<I>(
    mut problem: Problem,
    expected: u64,
    at: Pos,
    before: Option<Pos>,
    places: &Places<'_>,
    rest: I,
) -> Problem
where
    I: Iterator<Item = (Pos, Result<String, String>)>,
{
    let found = problem.seq.unwrap_or(expected);
    for (later, text) in rest {
        let seq = text
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|v| v.get("seq").and_then(Value::as_u64));
        if let Some(seq) = seq
            && (expected..found).contains(&seq)
        {
            problem.kind = ProblemKind::Reordered;
            problem.detail = format!(
                "expected record {expected} here but found {found}; record {seq} appears later, at {}",
                places.describe(later, at)
            );
            return problem;
        }
    }
    problem.kind = ProblemKind::Gap;
    problem.detail = if found - expected == 1 {
        format!("record {expected} is missing (expected {expected}, found {found})")
    } else {
        format!(
            "records {expected}..={} are missing (expected {expected}, found {found})",
            found - 1
        )
    };
    if let (Some(before), Some(this)) = (before, places.name(at))
        && before.file != at.file
    {
        let previous = places.name(before).unwrap_or_default();
        problem.detail.push_str(&format!(
            "; {previous} ends at record {} and {this} starts at {found}: a file between them may be missing",
            expected - 1
        ));
    }
    problem
}

fn check(
    at: Pos,
    text: &str,
    prev: Option<&Prev>,
    places: &Places<'_>,
    keys: &PublicKeys,
) -> Result<Checked, Finding> {
    let mut found = Problem {
        file: places.name(at),
        line: at.line,
        record_id: None,
        seq: None,
        kind: ProblemKind::Malformed,
        detail: String::new(),
    };
    let fail = |kind: ProblemKind, detail: String, at: &Problem| {
        Finding::Problem(Problem {
            kind,
            detail,
            ..at.clone()
        })
    };
    let record: Map<String, Value> = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => map,
        Ok(_) => {
            return Err(fail(
                ProblemKind::Malformed,
                "not a JSON object".into(),
                &found,
            ));
        }
        Err(e) => {
            return Err(fail(
                ProblemKind::Malformed,
                format!("not JSON: {e}"),
                &found,
            ));
        }
    };
    found.record_id = record.get("id").and_then(Value::as_str).map(str::to_owned);
    let Some(seq) = record.get("seq").and_then(Value::as_u64) else {
        return Err(fail(
            ProblemKind::Malformed,
            "no numeric seq".into(),
            &found,
        ));
    };
    found.seq = Some(seq);
    if seq == 0 {
        return Err(fail(
            ProblemKind::Malformed,
            "seq 0: chains start at 1".into(),
            &found,
        ));
    }

    let expected = prev.map_or(1, |p| p.seq + 1);
    if seq < expected {
        let earlier = places.describe(places.of(seq).unwrap_or(at), at);
        let detail = match prev {
            Some(p)
                if p.seq == seq && record.get("hash").and_then(Value::as_str) == Some(&p.hash) =>
            {
                format!("record {seq} again: an exact copy of {earlier}")
            }
            Some(_) | None => format!("record {seq} already appeared at {earlier}"),
        };
        return Err(fail(ProblemKind::Duplicate, detail, &found));
    }
    if seq > expected {
        return Err(Finding::Ahead(found, expected));
    }

    let Some(prevhash) = record.get("prevhash").and_then(Value::as_str) else {
        return Err(fail(ProblemKind::Malformed, "no prevhash".into(), &found));
    };
    let want_prev = prev.map_or(GENESIS_HASH, |p| p.hash.as_str());
    if prevhash != want_prev {
        let detail = match prev {
            Some(_) => {
                format!("prevhash is {prevhash} but the previous record's hash is {want_prev}")
            }
            None => format!("the first record's prevhash is {prevhash}, not the genesis hash"),
        };
        return Err(fail(ProblemKind::BrokenLink, detail, &found));
    }

    let claimed = match record
        .get("hash")
        .and_then(Value::as_str)
        .map(Digest::parse)
    {
        Some(Some(d)) => d,
        Some(None) => {
            return Err(fail(
                ProblemKind::Malformed,
                "hash is not sha256:<64 hex>".into(),
                &found,
            ));
        }
        None => return Err(fail(ProblemKind::Malformed, "no hash".into(), &found)),
    };
    let actual = chain_hash(prevhash, &record).map_err(|e| {
        fail(
            ProblemKind::Malformed,
            format!("cannot canonicalize: {e}"),
            &found,
        )
    })?;
    if actual != claimed {
        return Err(fail(
            ProblemKind::HashMismatch,
            format!("the content hashes to {actual} but the record says {claimed}"),
            &found,
        ));
    }

    let batchend = batch_end(&record, seq, prev.and_then(|p| p.open.as_ref()))
        .map_err(|detail| fail(ProblemKind::BrokenBatch, detail, &found))?;
    if batchend.is_none()
        && let Some((kind, detail)) = signature_problem(&record, &claimed, keys)
    {
        return Err(fail(kind, detail, &found));
    }
    Ok(Checked {
        seq,
        id: found.record_id,
        hash: claimed.as_str().to_owned(),
        batchend,
    })
}

/// The `batchend` of record `seq` (its hash already verified), checked against the batch the
/// records before it are in: every record of a batch names the same end, after itself, and
/// carries no signature; the record at the end carries no `batchend` and is signed (checked by
/// the caller), so its signature covers the whole batch through the `prevhash` links.
fn batch_end(
    record: &Map<String, Value>,
    seq: u64,
    open: Option<&OpenBatch>,
) -> Result<Option<u64>, String> {
    let mine = match record.get("batchend") {
        None => None,
        Some(v) => match v.as_u64() {
            Some(end) if end > seq => Some(end),
            _ => {
                return Err(format!(
                    "batchend is {v}, not a seq after the record's own ({seq})"
                ));
            }
        },
    };
    match (open.map(|o| o.end), mine) {
        (Some(end), Some(mine)) if end != mine => {
            return Err(format!(
                "the record names batch end {mine} but the records before it end their batch at {end}"
            ));
        }
        (Some(end), None) if end != seq => {
            return Err(format!(
                "the batch the records before it are in ends at record {end}, but this record closes it"
            ));
        }
        _ => {}
    }
    if let Some(end) = mine
        && (record.contains_key("sig") || record.contains_key("kid"))
    {
        return Err(format!(
            "a record inside a batch is not signed itself (record {end} signs it), yet it carries kid or sig"
        ));
    }
    Ok(mine)
}

/// Why `claimed` (a record's verified hash) is not signed by a trusted key as the record's
/// `kid` and `sig` say; `None` when it is.
pub(crate) fn signature_problem(
    record: &Map<String, Value>,
    claimed: &Digest,
    keys: &PublicKeys,
) -> Option<(ProblemKind, String)> {
    let (kid, sig) = match (record.get("kid"), record.get("sig")) {
        (Some(Value::String(kid)), Some(Value::String(sig))) => (kid, sig),
        (None, _) | (_, None) => {
            return Some((ProblemKind::Unsigned, "kid or sig is missing".into()));
        }
        (Some(_), Some(_)) => {
            return Some((ProblemKind::Malformed, "kid and sig must be strings".into()));
        }
    };
    let Some(key) = keys.get(kid) else {
        return Some((
            ProblemKind::UnknownKey,
            format!(
                "signed by key {kid}, which is not among the {} trusted keys",
                keys.len()
            ),
        ));
    };
    let signature = BASE64
        .decode(sig)
        .ok()
        .and_then(|bytes| Signature::from_slice(&bytes).ok());
    let Some(signature) = signature else {
        return Some((
            ProblemKind::BadSignature,
            "sig is not base64 of a 64-byte Ed25519 signature".into(),
        ));
    };
    if key.verify_strict(&claimed.bytes(), &signature).is_err() {
        return Some((
            ProblemKind::BadSignature,
            format!("the signature does not verify under key {kid}"),
        ));
    }
    None
}
