//! The journal bound to the signed chain: given one run's stored events and that run's audit
//! records (in chain order), checks that every event has exactly one authentic record whose
//! `event_digest` is the event's, in order, with no record left over. Pure: no store, no keys
//! on disk. It sees only this run's records, so records removed together with the run's last
//! events are found by [`crate::verify_sealed`] (a gap in the chain), or at the chain's very end
//! by a sink's checkpoint, not here.
//!
//! Authenticity costs one signature per stretch of the run's records that are consecutive in
//! the chain: within a stretch every hash is recomputed and each record's `prevhash` must be
//! the previous record's hash, so the signature of its last record covers them all.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use thiserror::Error;
use warrant_core::{Coded, Digest, RunId};
use warrant_store::{SealedRecord, StoredEvent};

use crate::record::{DATA_SCHEMA_V1, DATA_SCHEMA_V2, chain_hash, event_digest_at};
use crate::verify::signature_problem;
use crate::{ProblemKind, PublicKeys};

/// What a run's journal proved.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RunBinding {
    pub events: u64,
    /// Events whose signed record carries their digest.
    pub bound: u64,
    /// Events recorded before the binding (v1 records): the record is authentic and names the
    /// event's seq and kind, but not its content, so an edit of such an event is not seen.
    pub unbound: u64,
}

/// The first event of a run whose journal is not what was signed. Every variant names that
/// event's seq; `detail` says what was found.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum BindingError {
    #[error(
        "event {seq} of run {run} was edited after it was signed: {detail}. Warrant does not act on this run; restore the store from a backup or start a new run"
    )]
    Edited {
        run: String,
        seq: u64,
        detail: String,
    },
    #[error(
        "event {seq} of run {run} has no signed audit record: {detail}. Warrant does not act on this run; restore the store from a backup or start a new run"
    )]
    Inserted {
        run: String,
        seq: u64,
        detail: String,
    },
    #[error(
        "event {seq} of run {run} was removed after it was signed: {detail}. Warrant does not act on this run; restore the store from a backup or start a new run"
    )]
    Removed {
        run: String,
        seq: u64,
        detail: String,
    },
    #[error(
        "event {seq} of run {run} is out of place: {detail}. Warrant does not act on this run; restore the store from a backup or start a new run"
    )]
    Reordered {
        run: String,
        seq: u64,
        detail: String,
    },
    #[error(
        "audit record {record} (event {seq} of run {run}) does not verify ({}): {detail}. Warrant does not act on this run",
        problem_name(*.kind)
    )]
    Record {
        run: String,
        seq: u64,
        /// The record's position in the installation's chain.
        record: u64,
        kind: ProblemKind,
        detail: String,
    },
}

impl Coded for BindingError {
    fn code(&self) -> &'static str {
        match self {
            Self::Edited { .. } => "W-AUDIT-027",
            Self::Inserted { .. } => "W-AUDIT-028",
            Self::Removed { .. } => "W-AUDIT-029",
            Self::Reordered { .. } => "W-AUDIT-030",
            Self::Record { .. } => "W-AUDIT-031",
        }
    }

    fn hint(&self) -> Option<warrant_core::Hint> {
        Some(match self {
            Self::Edited { .. }
            | Self::Inserted { .. }
            | Self::Removed { .. }
            | Self::Reordered { .. } => warrant_core::Hint::VerifyTrail,
            Self::Record { .. } => warrant_core::Hint::VerifyAsTampering,
        })
    }
}

impl BindingError {
    /// The first bad event's seq.
    pub fn seq(&self) -> u64 {
        match self {
            Self::Edited { seq, .. }
            | Self::Inserted { seq, .. }
            | Self::Removed { seq, .. }
            | Self::Reordered { seq, .. }
            | Self::Record { seq, .. } => *seq,
        }
    }

    /// One word for what is wrong: `edited`, `inserted`, `removed`, `reordered`, `record`.
    pub fn what(&self) -> &'static str {
        match self {
            Self::Edited { .. } => "edited",
            Self::Inserted { .. } => "inserted",
            Self::Removed { .. } => "removed",
            Self::Reordered { .. } => "reordered",
            Self::Record { .. } => "record",
        }
    }

    pub fn detail(&self) -> &str {
        match self {
            Self::Edited { detail, .. }
            | Self::Inserted { detail, .. }
            | Self::Removed { detail, .. }
            | Self::Reordered { detail, .. }
            | Self::Record { detail, .. } => detail,
        }
    }
}

fn problem_name(kind: ProblemKind) -> &'static str {
    match kind {
        ProblemKind::Malformed => "malformed",
        ProblemKind::Gap => "gap",
        ProblemKind::Duplicate => "duplicate",
        ProblemKind::Reordered => "reordered",
        ProblemKind::BrokenLink => "broken link",
        ProblemKind::HashMismatch => "hash mismatch",
        ProblemKind::UnknownKey => "unknown key",
        ProblemKind::BadSignature => "bad signature",
        ProblemKind::Unsigned => "unsigned",
        ProblemKind::BrokenBatch => "broken batch",
        ProblemKind::Unanchored => "unanchored",
        ProblemKind::BrokenAnchor => "broken anchor",
    }
}

/// What an authentic record says about its event.
struct Signed {
    /// Position in the installation's chain.
    record: u64,
    event_seq: u64,
    kind: String,
    /// `None` for a v1 record.
    digest: Option<Digest>,
}

/// A record whose hash recomputes, before its signature is known to hold.
struct Hashed {
    signed: Signed,
    prevhash: String,
    hash: Digest,
    line: Map<String, Value>,
}

/// Checks `events` (the run's, in seq order) against `records` (the run's audit records, in
/// chain order) under `keys`. The first problem found is the error.
pub fn verify_run(
    run: &RunId,
    events: &[StoredEvent],
    records: &[SealedRecord],
    keys: &PublicKeys,
) -> Result<RunBinding, BindingError> {
    let signed = authentic(run, records, keys)?;
    pair(run, events, &signed)
}

/// Each record's hash recomputed, its run and event named, its place in the run's order
/// checked, and a signature checked at the end of every chain stretch.
fn authentic(
    run: &RunId,
    records: &[SealedRecord],
    keys: &PublicKeys,
) -> Result<Vec<Signed>, BindingError> {
    let mut hashed: Vec<Hashed> = Vec::with_capacity(records.len());
    for stored in records {
        let next_seq = hashed.last().map_or(1, |h| h.signed.event_seq + 1);
        let h = hash_one(run, stored, next_seq)?;
        if let Some(prev) = hashed.last() {
            let bad = |kind, detail| BindingError::Record {
                run: run.to_string(),
                seq: h.signed.event_seq,
                record: h.signed.record,
                kind,
                detail,
            };
            if h.signed.record <= prev.signed.record || h.signed.event_seq <= prev.signed.event_seq
            {
                return Err(bad(
                    ProblemKind::Reordered,
                    format!(
                        "record {} (event {}) comes after record {} (event {})",
                        h.signed.record,
                        h.signed.event_seq,
                        prev.signed.record,
                        prev.signed.event_seq
                    ),
                ));
            }
            if h.signed.digest.is_none() && prev.signed.digest.is_some() {
                return Err(bad(
                    ProblemKind::Malformed,
                    "a record without an event digest follows one with it; the sealer never writes that".into(),
                ));
            }
        }
        hashed.push(h);
    }
    let mut out = Vec::with_capacity(hashed.len());
    let mut iter = hashed.into_iter().peekable();
    while let Some(h) = iter.next() {
        let linked = iter.peek().is_some_and(|next| {
            next.signed.record == h.signed.record + 1 && next.prevhash == h.hash.as_str()
        });
        if !linked && let Some((kind, detail)) = signature_problem(&h.line, &h.hash, keys) {
            return Err(BindingError::Record {
                run: run.to_string(),
                seq: h.signed.event_seq,
                record: h.signed.record,
                kind,
                detail,
            });
        }
        out.push(h.signed);
    }
    Ok(out)
}

fn hash_one(run: &RunId, stored: &SealedRecord, next_seq: u64) -> Result<Hashed, BindingError> {
    let bad = |seq: u64, kind, detail: String| BindingError::Record {
        run: run.to_string(),
        seq,
        record: stored.seq,
        kind,
        detail,
    };
    let line: Map<String, Value> = match serde_json::from_str::<Value>(&stored.line) {
        Ok(Value::Object(map)) => map,
        Ok(_) | Err(_) => {
            return Err(bad(
                next_seq,
                ProblemKind::Malformed,
                "its line is not a JSON object".into(),
            ));
        }
    };
    let data = line.get("data").and_then(Value::as_object);
    let event_seq = data
        .and_then(|d| d.get("event_seq"))
        .and_then(Value::as_u64)
        .unwrap_or(next_seq);
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    let (Some(record), Some(prevhash), Some(claimed)) = (
        line.get("seq").and_then(Value::as_u64),
        text(line.get("prevhash")),
        text(line.get("hash")).as_deref().and_then(Digest::parse),
    ) else {
        return Err(bad(
            event_seq,
            ProblemKind::Malformed,
            "seq, prevhash or hash is missing or mistyped".into(),
        ));
    };
    // The store names a record by its seq in its partition's chain, or (read from the outbox)
    // by its position, which a partitioned store's line carries as `pos`.
    if record != stored.seq && line.get("pos").and_then(Value::as_u64) != Some(stored.seq) {
        return Err(bad(
            event_seq,
            ProblemKind::Malformed,
            format!(
                "the store's seq column says {} but the line says {record}",
                stored.seq
            ),
        ));
    }
    let actual = chain_hash(&prevhash, &line).map_err(|e| {
        bad(
            event_seq,
            ProblemKind::Malformed,
            format!("cannot canonicalize: {e}"),
        )
    })?;
    if actual != claimed {
        return Err(bad(
            event_seq,
            ProblemKind::HashMismatch,
            format!("the content hashes to {actual} but the record says {claimed}"),
        ));
    }
    let data_run = text(data.and_then(|d| d.get("run")));
    let subject = text(line.get("subject"));
    if data_run.as_deref() != Some(run.as_str()) || subject.as_deref() != Some(run.as_str()) {
        return Err(bad(
            event_seq,
            ProblemKind::Malformed,
            format!(
                "it is about run {}, not {run}",
                data_run.or(subject).unwrap_or_else(|| "?".into())
            ),
        ));
    }
    let (Some(kind), Some(_)) = (
        text(data.and_then(|d| d.get("event"))),
        data.and_then(|d| d.get("event_seq"))
            .and_then(Value::as_u64),
    ) else {
        return Err(bad(
            event_seq,
            ProblemKind::Malformed,
            "it names no event kind or event seq".into(),
        ));
    };
    let digest = data.and_then(|d| d.get("event_digest"));
    let digest = match (text(line.get("dataschema")).as_deref(), digest) {
        (Some(DATA_SCHEMA_V1), None) => None,
        (Some(DATA_SCHEMA_V2), Some(d)) => match d.as_str().and_then(Digest::parse) {
            Some(d) => Some(d),
            None => {
                return Err(bad(
                    event_seq,
                    ProblemKind::Malformed,
                    format!("its event_digest {d} is not sha256:<64 hex>"),
                ));
            }
        },
        (schema, d) => {
            return Err(bad(
                event_seq,
                ProblemKind::Malformed,
                format!(
                    "dataschema {} with{} an event_digest",
                    schema.unwrap_or("(none)"),
                    if d.is_some() { "" } else { "out" }
                ),
            ));
        }
    };
    Ok(Hashed {
        signed: Signed {
            record,
            event_seq,
            kind,
            digest,
        },
        prevhash,
        hash: claimed,
        line,
    })
}

/// The event's digest at `seq` (the events table's seq is part of what was signed, so a moved
/// event is recognised by digesting it at its old place).
fn digest_at(event: &StoredEvent, seq: u64) -> Option<Digest> {
    event_digest_at(event, seq).ok()
}

fn pair(
    run: &RunId,
    events: &[StoredEvent],
    signed: &[Signed],
) -> Result<RunBinding, BindingError> {
    let by_seq: BTreeMap<u64, &Signed> = signed.iter().map(|s| (s.event_seq, s)).collect();
    let last_signed = signed.last().map_or(0, |s| s.event_seq);
    let n = events.len() as u64;
    let run_s = run.to_string();
    let mut bound = 0u64;
    let mut unbound = 0u64;
    for p in 1..=n.max(last_signed) {
        let event = usize::try_from(p - 1).ok().and_then(|i| events.get(i));
        let record = by_seq.get(&p).copied();
        match (event, record) {
            (None, None) => {}
            (None, Some(r)) => {
                return Err(BindingError::Removed {
                    run: run_s,
                    seq: p,
                    detail: format!(
                        "audit record {} was signed for it, and the journal ends at event {n}",
                        r.record
                    ),
                });
            }
            (Some(e), _) if e.seq != p => {
                return Err(if e.seq > p {
                    BindingError::Removed {
                        run: run_s,
                        seq: p,
                        detail: format!("the journal goes from event {} to event {}", p - 1, e.seq),
                    }
                } else {
                    BindingError::Reordered {
                        run: run_s,
                        seq: p,
                        detail: format!("the journal holds event {} in position {p}", e.seq),
                    }
                });
            }
            (Some(_), None) => {
                return Err(BindingError::Inserted {
                    run: run_s,
                    seq: p,
                    detail: if p > last_signed {
                        format!("the run's signed records end at event {last_signed}")
                    } else {
                        "no audit record of the run names it".into()
                    },
                });
            }
            (Some(e), Some(r)) => match &r.digest {
                None if e.kind == r.kind => unbound += 1,
                None => {
                    return Err(BindingError::Edited {
                        run: run_s,
                        seq: p,
                        detail: format!(
                            "its kind is {} but audit record {} (from before events were bound) says {}",
                            e.kind, r.record, r.kind
                        ),
                    });
                }
                Some(d) if digest_at(e, p).as_ref() == Some(d) => bound += 1,
                Some(d) => return Err(misplaced(run_s, p, e, d, r.record, events, &by_seq)),
            },
        }
    }
    Ok(RunBinding {
        events: n,
        bound,
        unbound,
    })
}

/// Event `p` does not match its record: say whether it is an edit, or events moved. Only on
/// the failure path, so it may digest every later event once.
fn misplaced(
    run: String,
    p: u64,
    event: &StoredEvent,
    signed_here: &Digest,
    record: u64,
    events: &[StoredEvent],
    by_seq: &BTreeMap<u64, &Signed>,
) -> BindingError {
    let at = |seq: u64| usize::try_from(seq - 1).ok().and_then(|i| events.get(i));
    // This event was signed further down: events before it are gone, or it swapped places.
    let signed_later = by_seq.range(p + 1..).find_map(|(&j, s)| {
        s.digest
            .as_ref()
            .filter(|d| digest_at(event, j).as_ref() == Some(*d))
            .map(|_| j)
    });
    if let Some(j) = signed_later {
        let swapped = at(j).is_some_and(|other| digest_at(other, p).as_ref() == Some(signed_here));
        return if swapped {
            BindingError::Reordered {
                run,
                seq: p,
                detail: format!("events {p} and {j} changed places"),
            }
        } else {
            BindingError::Removed {
                run,
                seq: p,
                detail: format!(
                    "the event now at {p} was signed as event {j}: {} event(s) before it are gone and the rest renumbered",
                    j - p
                ),
            }
        };
    }
    // What was signed as event p is further down: events were put in before it.
    let n = events.len() as u64;
    let moved_down = (p + 1..=n)
        .find(|&j| at(j).is_some_and(|other| digest_at(other, p).as_ref() == Some(signed_here)));
    if let Some(j) = moved_down {
        return BindingError::Inserted {
            run,
            seq: p,
            detail: format!(
                "what was signed as event {p} is now event {j}: {} event(s) were put in before it",
                j - p
            ),
        };
    }
    BindingError::Edited {
        run,
        seq: p,
        detail: format!(
            "its kind, payload or time no longer match the digest signed in audit record {record}"
        ),
    }
}

/// Every run's journal against the whole chain, as `warrant audit verify` reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct JournalReport {
    pub runs: u64,
    pub events: u64,
    pub bound: u64,
    pub unbound: u64,
    /// One per run whose journal is not what was signed, in run order.
    pub problems: Vec<RunProblem>,
}

impl JournalReport {
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }

    /// Adds one run's result.
    pub fn add(&mut self, run: &RunId, result: Result<RunBinding, BindingError>) {
        self.runs += 1;
        match result {
            Ok(b) => {
                self.events += b.events;
                self.bound += b.bound;
                self.unbound += b.unbound;
            }
            Err(e) => self.problems.push(RunProblem {
                run: run.to_string(),
                code: e.code().to_owned(),
                seq: e.seq(),
                what: e.what().to_owned(),
                message: e.to_string(),
                hint: e.hint(),
            }),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RunProblem {
    pub run: String,
    pub code: String,
    /// The first bad event.
    pub seq: u64,
    /// `edited`, `inserted`, `removed`, `reordered` or `record`.
    pub what: String,
    pub message: String,
    /// What a person can do, worded by each front end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<warrant_core::Hint>,
}

/// The chain's records grouped by the run their line names (`subject`), in chain order. The
/// line, not the store's index column, decides: a record re-labelled in the index still
/// counts for its run, and a run whose events are gone still has its records.
pub fn records_by_run(records: &[SealedRecord]) -> BTreeMap<String, Vec<SealedRecord>> {
    let mut out: BTreeMap<String, Vec<SealedRecord>> = BTreeMap::new();
    for r in records {
        let subject = serde_json::from_str::<Value>(&r.line)
            .ok()
            .and_then(|v| v.get("subject").and_then(Value::as_str).map(str::to_owned));
        if let Some(subject) = subject {
            out.entry(subject).or_default().push(r.clone());
        }
    }
    out
}
