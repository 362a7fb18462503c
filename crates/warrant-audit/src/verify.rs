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

use std::collections::{BTreeMap, BTreeSet};

use crate::record::{ANCHOR_TYPE, AnchorData, GENESIS_HASH, chain_hash};
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
    /// A partitioned copy ends with records no anchor names: they may be the rest of a cut
    /// copy, and nothing signed says what belongs after them.
    Unanchored,
    /// An anchor does not fit the copy: it names another head for a partition than the copy
    /// has reached there (with the same seq but another hash), states positions the copy does
    /// not have, or names another set of partitions than the anchors before it.
    BrokenAnchor,
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
        if Some(checked.pos) == watch && checked.pos > 0 {
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
        if stored.seq != checked.pos {
            return problem(
                ProblemKind::Malformed,
                format!(
                    "the store's position column says {} but the line says {}",
                    stored.seq, checked.pos
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

/// The chain a record is in: a partition's (absent `part` is partition 0, the whole chain of an
/// unpartitioned store) or the anchors'.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Chain {
    Part(u64),
    Anchor,
}

impl Chain {
    fn of(record: &Map<String, Value>) -> Result<Self, String> {
        if record.get("type").and_then(Value::as_str) == Some(ANCHOR_TYPE) {
            return Ok(Self::Anchor);
        }
        match record.get("part") {
            None => Ok(Self::Part(0)),
            Some(v) => v
                .as_u64()
                .map(Self::Part)
                .ok_or_else(|| format!("part is {v}, not a partition number")),
        }
    }

    /// "record 7", or "record 7 of partition 3", or "anchor 2".
    fn name(self, seq: u64) -> String {
        match self {
            Self::Part(0) => format!("record {seq}"),
            Self::Part(p) => format!("record {seq} of partition {p}"),
            Self::Anchor => format!("anchor {seq}"),
        }
    }

    /// The chain of a line that was not (yet) verified, for looking ahead; `None` when it does
    /// not parse.
    fn peek(text: &str) -> Option<(Self, u64)> {
        let v: Map<String, Value> = serde_json::from_str(text).ok()?;
        let chain = Self::of(&v).ok()?;
        Some((chain, v.get("seq").and_then(Value::as_u64)?))
    }
}

/// A record that passed every check. One inside a batch (`batchend` set) is authentic only once
/// the record at `batchend` is signed.
#[derive(Debug)]
struct Checked {
    chain: Chain,
    seq: u64,
    /// Its outbox position (`pos`, or the seq of a record of an unpartitioned chain); 0 for a
    /// record not positioned yet.
    pos: u64,
    /// The line carries `pos`: a partitioned store's record.
    positioned: bool,
    id: Option<String>,
    hash: String,
    batchend: Option<u64>,
    /// What an anchor states.
    anchor: Option<AnchorData>,
    /// An anchor's position problem, reported after its heads are checked: a record moved
    /// across it or cut before it shifts its position too, and the heads say which.
    late: Option<(ProblemKind, String)>,
}

/// One chain so far: everything before this point verified.
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

/// Where a run of consecutive verified records of one chain starts: seq `seq` is at `at`, and
/// each next seq on the next line of the same file. A new one starts wherever the chain's
/// records stop being on consecutive lines (another file, or another chain's records between),
/// so the position of any earlier seq is known.
struct Segment {
    seq: u64,
    at: Pos,
}

/// What `check` needs to place and name what it finds.
struct Places<'a> {
    segments: &'a BTreeMap<Chain, Vec<Segment>>,
    names: &'a [String],
}

impl Places<'_> {
    fn name(&self, at: Pos) -> Option<String> {
        at.file.and_then(|i| self.names.get(i)).cloned()
    }

    /// Where verified record `seq` of `chain` is.
    fn of(&self, chain: Chain, seq: u64) -> Option<Pos> {
        self.segments
            .get(&chain)?
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
    /// The seq of `chain` jumped from `expected` to the record's; Gap or Reordered, decided by
    /// looking at the rest of the stream.
    Ahead(Box<Problem>, Chain, u64),
}

/// Everything verified so far: each chain's head, and what the outbox positions and anchors
/// have established.
#[derive(Default)]
struct State {
    chains: BTreeMap<Chain, Prev>,
    segments: BTreeMap<Chain, Vec<Segment>>,
    /// The position of the last positioned record.
    last_pos: u64,
    /// A record without a position was seen after positioned ones (a store's tail not
    /// anchored yet): no positioned record may follow.
    unpositioned: bool,
    /// Any record carried `pos`: the copy is a partitioned store's.
    partitioned: bool,
    /// The position of the last anchor, and the partitions anchors name.
    anchor_pos: u64,
    parts: Option<BTreeSet<u64>>,
    /// The first positioned record after the last anchor (none: the copy ends at an anchor).
    unanchored: Option<Problem>,
    records: u64,
    last_hash: Option<String>,
}

fn drive<I, F>(mut lines: I, names: &[String], keys: &PublicKeys, mut extra: F) -> VerifyReport
where
    I: Iterator<Item = (Pos, Result<String, String>)>,
    F: FnMut(u64, &Checked) -> Option<Problem>,
{
    let mut st = State::default();
    let problem = loop {
        let Some((at, text)) = lines.next() else {
            break None;
        };
        let places = Places {
            segments: &st.segments,
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
            Ok(text) => check(at, &text, &st, &places, keys),
        };
        let checked = match checked {
            Ok(checked) => checked,
            Err(Finding::Problem(problem)) => break Some(problem),
            Err(Finding::Ahead(problem, chain, expected)) => {
                let before = st.chains.get(&chain).map(|p| p.at);
                break Some(resolve_ahead(
                    *problem, chain, expected, at, before, &places, lines,
                ));
            }
        };
        let found = Problem {
            file: places.name(at),
            line: at.line,
            record_id: checked.id.clone(),
            seq: Some(checked.seq),
            kind: ProblemKind::Malformed,
            detail: String::new(),
        };
        if let Some(anchor) = &checked.anchor
            && let Some(problem) = check_anchor(&found, anchor, &st, at, &places, &mut lines)
        {
            break Some(problem);
        }
        if let Some((kind, detail)) = checked.late.clone() {
            break Some(Problem {
                kind,
                detail,
                ..found
            });
        }
        if let Some(problem) = extra(at.line, &checked) {
            break Some(problem);
        }
        let prev = st.chains.remove(&checked.chain);
        let open = match (prev.and_then(|p| p.open), checked.batchend) {
            (Some(open), Some(_)) => Some(open),
            (None, Some(end)) => Some(OpenBatch {
                end,
                first: Problem {
                    kind: ProblemKind::Unsigned,
                    ..found.clone()
                },
            }),
            (_, None) => None,
        };
        let segments = st.segments.entry(checked.chain).or_default();
        let follows = segments.last().is_some_and(|s| {
            s.at.file == at.file && s.at.line + (checked.seq - s.seq.min(checked.seq)) == at.line
        });
        if !follows {
            segments.push(Segment {
                seq: checked.seq,
                at,
            });
        }
        if checked.pos > 0 {
            st.last_pos = checked.pos;
        } else {
            st.unpositioned = true;
        }
        st.partitioned |= checked.positioned || checked.chain != Chain::Part(0);
        if checked.anchor.is_some() {
            st.anchor_pos = checked.pos;
            st.unanchored = None;
        } else if st.partitioned && st.unanchored.is_none() {
            st.unanchored = Some(found);
        }
        st.records += 1;
        st.last_hash = Some(checked.hash.clone());
        st.chains.insert(
            checked.chain,
            Prev {
                seq: checked.seq,
                hash: checked.hash,
                at,
                open,
            },
        );
    };
    // A copy that ends inside a batch holds records no signature covers yet.
    let problem = problem.or_else(|| {
        st.chains.iter().find_map(|(chain, p)| {
            let open = p.open.as_ref()?;
            let first = open.first.seq.unwrap_or(p.seq);
            let mut problem = open.first.clone();
            let of = match chain {
                Chain::Part(0) | Chain::Anchor => String::new(),
                Chain::Part(part) => format!(" of partition {part}"),
            };
            problem.detail = format!(
                "records {first}..={}{of} are signed by record {}, which is not in the copy: the copy ends inside a batch",
                p.seq, open.end
            );
            Some(problem)
        })
    });
    // A partitioned copy ends at an anchor: what follows the last one is named by none.
    let problem = problem.or_else(|| {
        let mut problem = st.unanchored.take()?;
        problem.kind = ProblemKind::Unanchored;
        problem.detail = format!(
            "the copy ends with records after its last anchor (position {}): no anchor names them, so a cut after them could not be seen",
            st.anchor_pos
        );
        Some(problem)
    });
    VerifyReport {
        records: st.records,
        first_problem: problem,
        head: st.last_hash,
    }
}

/// An anchor (its own chain link, hash and signature already verified) against the copy: it
/// must sit at the position it states, after the positions of the anchor before it, name the
/// same partitions as every anchor, and name for each partition exactly the head the copy has
/// reached there. A partition behind its named head is missing records, or they were moved
/// after the anchor (looked for in the rest of the stream); one ahead of it holds records moved
/// before the anchor.
fn check_anchor<I>(
    found: &Problem,
    anchor: &AnchorData,
    st: &State,
    at: Pos,
    places: &Places<'_>,
    rest: &mut I,
) -> Option<Problem>
where
    I: Iterator<Item = (Pos, Result<String, String>)>,
{
    let fail = |kind, detail: String| {
        Some(Problem {
            kind,
            detail,
            ..found.clone()
        })
    };
    if anchor.from != st.anchor_pos + 1 || anchor.from > anchor.pos {
        return fail(
            ProblemKind::BrokenAnchor,
            format!(
                "the anchor covers positions {}..{}, but the anchor before it ends at position {}",
                anchor.from, anchor.pos, st.anchor_pos
            ),
        );
    }
    let parts: BTreeSet<u64> = anchor.heads.iter().map(|h| h.part).collect();
    let count = parts.len() as u64;
    if parts.len() != anchor.heads.len() || parts.iter().copied().ne(0..count) {
        return fail(
            ProblemKind::BrokenAnchor,
            "the anchor does not name each of its partitions 0..P once".into(),
        );
    }
    if let Some(known) = &st.parts
        && *known != parts
    {
        return fail(
            ProblemKind::BrokenAnchor,
            format!(
                "the anchor names {} partitions, the anchors before it {}",
                parts.len(),
                known.len()
            ),
        );
    }
    if let Some(Chain::Part(p)) = st
        .chains
        .keys()
        .find(|c| matches!(c, Chain::Part(p) if !parts.contains(p)))
    {
        return fail(
            ProblemKind::BrokenAnchor,
            format!("the copy has records of partition {p}, which the anchor does not name"),
        );
    }
    for head in &anchor.heads {
        let chain = Chain::Part(head.part);
        let (seq, hash) = st
            .chains
            .get(&chain)
            .map_or((0, GENESIS_HASH), |p| (p.seq, p.hash.as_str()));
        if seq == head.seq && hash == head.hash {
            continue;
        }
        if seq == head.seq {
            return fail(
                ProblemKind::BrokenAnchor,
                format!(
                    "the anchor names {} with hash {}, but the copy's has {hash}",
                    chain.name(seq),
                    head.hash
                ),
            );
        }
        if seq > head.seq {
            let moved = head.seq + 1;
            let place = places
                .of(chain, moved)
                .map(|p| format!(" (at {})", places.describe(p, at)))
                .unwrap_or_default();
            return Some(Problem {
                kind: ProblemKind::Reordered,
                seq: Some(moved),
                detail: format!(
                    "{}{place} is before the anchor at position {}, which names partition {}'s head at record {}: the record was moved across the anchor",
                    chain.name(moved),
                    anchor.pos,
                    head.part,
                    head.seq
                ),
                ..found.clone()
            });
        }
        let missing = seq + 1;
        for (later, text) in rest.by_ref() {
            if let Some((c, s)) = text.ok().as_deref().and_then(Chain::peek)
                && c == chain
                && (missing..=head.seq).contains(&s)
            {
                return fail(
                    ProblemKind::Reordered,
                    format!(
                        "the anchor names partition {}'s head at record {}, but {} is after it, at {}: the record was moved across the anchor",
                        head.part,
                        head.seq,
                        chain.name(s),
                        places.describe(later, at)
                    ),
                );
            }
        }
        return fail(
            ProblemKind::Gap,
            format!(
                "the anchor names partition {}'s head at record {}, but the copy's partition {} ends at record {seq}: {}..={} are missing",
                head.part,
                head.seq,
                head.part,
                chain.name(missing),
                head.seq
            ),
        );
    }
    None
}

/// A seq that jumped ahead is a reordering when a skipped seq of the same chain shows up later,
/// else a gap. A gap where one file ends and the next begins says so: a rotated file may be
/// missing.
fn resolve_ahead<I>(
    mut problem: Problem,
    chain: Chain,
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
        if let Some((c, seq)) = text.ok().as_deref().and_then(Chain::peek)
            && c == chain
            && (expected..found).contains(&seq)
        {
            problem.kind = ProblemKind::Reordered;
            problem.detail = format!(
                "expected {} here but found {found}; {} appears later, at {}",
                chain.name(expected),
                chain.name(seq),
                places.describe(later, at)
            );
            return problem;
        }
    }
    problem.kind = ProblemKind::Gap;
    let of = match chain {
        Chain::Part(0) => String::new(),
        Chain::Part(p) => format!(" of partition {p}"),
        Chain::Anchor => " of the anchor chain".to_owned(),
    };
    problem.detail = if found - expected == 1 {
        format!("record {expected}{of} is missing (expected {expected}, found {found})")
    } else {
        format!(
            "records {expected}..={}{of} are missing (expected {expected}, found {found})",
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
    st: &State,
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
    let chain =
        Chain::of(&record).map_err(|detail| fail(ProblemKind::Malformed, detail, &found))?;
    let prev = st.chains.get(&chain);

    let expected = prev.map_or(1, |p| p.seq + 1);
    if seq < expected {
        let earlier = places.describe(places.of(chain, seq).unwrap_or(at), at);
        let detail = match prev {
            Some(p)
                if p.seq == seq && record.get("hash").and_then(Value::as_str) == Some(&p.hash) =>
            {
                format!("{} again: an exact copy of {earlier}", chain.name(seq))
            }
            Some(_) | None => format!("{} already appeared at {earlier}", chain.name(seq)),
        };
        return Err(fail(ProblemKind::Duplicate, detail, &found));
    }
    if seq > expected {
        return Err(Finding::Ahead(Box::new(found), chain, expected));
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
    if chain == Chain::Anchor && batchend.is_some() {
        return Err(fail(
            ProblemKind::BrokenBatch,
            "an anchor is signed on its own; it belongs to no batch".into(),
            &found,
        ));
    }
    if batchend.is_none()
        && let Some((kind, detail)) = signature_problem(&record, &claimed, keys)
    {
        return Err(fail(kind, detail, &found));
    }

    let anchor = match chain {
        Chain::Anchor => {
            let data = record.get("data").cloned().unwrap_or(Value::Null);
            Some(serde_json::from_value::<AnchorData>(data).map_err(|e| {
                fail(
                    ProblemKind::Malformed,
                    format!("the anchor's data is not an anchor's: {e}"),
                    &found,
                )
            })?)
        }
        Chain::Part(_) => None,
    };
    let (pos, late) = match position(&record, chain, seq, anchor.as_ref(), st) {
        Ok(pos) => (pos, None),
        Err(problem) if anchor.is_some() => (0, Some(problem)),
        Err((kind, detail)) => return Err(fail(kind, detail, &found)),
    };
    Ok(Checked {
        late,
        chain,
        seq,
        pos,
        positioned: record.contains_key("pos"),
        id: found.record_id,
        hash: claimed.as_str().to_owned(),
        batchend,
        anchor,
    })
}

/// The record's outbox position, checked against the previous one's: a positioned record
/// (`pos`) is at the next position; a record of an unpartitioned chain (no `pos`, partition 0,
/// no positioned record before it) is at its seq; an anchor states its position in its hashed
/// data too. A record not positioned yet (0) may only be followed by others like it.
fn position(
    record: &Map<String, Value>,
    chain: Chain,
    seq: u64,
    anchor: Option<&AnchorData>,
    st: &State,
) -> Result<u64, (ProblemKind, String)> {
    let stated = match record.get("pos") {
        None => None,
        Some(v) => Some(v.as_u64().filter(|p| *p > 0).ok_or_else(|| {
            (
                ProblemKind::Malformed,
                format!("pos is {v}, not a position"),
            )
        })?),
    };
    if let Some(anchor) = anchor
        && stated != Some(anchor.pos)
    {
        return Err((
            ProblemKind::BrokenAnchor,
            format!(
                "the anchor states position {} but its line is at {stated:?}",
                anchor.pos
            ),
        ));
    }
    let pos = match stated {
        Some(pos) => pos,
        None if chain == Chain::Part(0) && !st.partitioned && !st.unpositioned => seq,
        None => return Ok(0),
    };
    if st.unpositioned {
        return Err((
            ProblemKind::Malformed,
            format!("position {pos} follows records that have none"),
        ));
    }
    let expected = st.last_pos + 1;
    if pos < expected {
        return Err((
            ProblemKind::Duplicate,
            format!("position {pos} again (expected {expected})"),
        ));
    }
    if pos > expected {
        return Err((
            ProblemKind::Gap,
            format!(
                "positions {expected}..={} are missing (expected {expected}, found {pos})",
                pos - 1
            ),
        ));
    }
    Ok(pos)
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
