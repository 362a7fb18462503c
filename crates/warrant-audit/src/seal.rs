//! The installation's [`Sealer`]: turns one stored event's audit facts into the next chained,
//! signed v2 record, bound to the event by its [`crate::event_digest`]. Called by the store inside its append transaction, so it does no I/O and
//! keeps no state beyond the id source; the chain position comes from the head it is given.

use std::fmt;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Value};
use warrant_core::{Digest, IdSource, Timestamp};
use warrant_store::{AnchorFacts, AuditIndex, ChainHead, SealedRecord, Sealer, StoredEvent};

use crate::record::{
    ANCHOR_SCHEMA, ANCHOR_TYPE, AnchorData, AnchorRecord, AuditData, AuditRecord,
    DATA_CONTENT_TYPE, DATA_SCHEMA_V2, Decision, GENESIS_HASH, SPEC_VERSION, chain_hash,
    chain_hash_unwritten, event_digest, event_type, float_free,
};
use crate::{AuditError, AuditKey};

pub struct InstallationSealer {
    key: AuditKey,
    source: String,
    ids: Arc<dyn IdSource>,
}

impl fmt::Debug for InstallationSealer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InstallationSealer")
            .field("key", &self.key)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl InstallationSealer {
    /// `installation` becomes the CloudEvents source `warrant://<installation>`.
    pub fn new(key: AuditKey, installation: &str, ids: Arc<dyn IdSource>) -> Self {
        Self {
            key,
            source: format!("warrant://{installation}"),
            ids,
        }
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn key(&self) -> &AuditKey {
        &self.key
    }

    /// [`Sealer::seal`] with a typed error. The record at `batch_end` is signed; one before it
    /// (an earlier record of the same committed batch) names `batch_end` instead.
    pub fn seal_record(
        &self,
        head: &ChainHead,
        event: &StoredEvent,
        audit: &Value,
        batch_end: u64,
    ) -> Result<SealedRecord, AuditError> {
        Ok(self.seal_indexed_in(0, head, event, audit, batch_end)?.0)
    }

    /// [`Self::seal_record`] for a record of partition `part`, after that partition's `head`,
    /// with the columns the store indexes the record by, taken from the facts just sealed
    /// instead of parsed back from the line.
    pub fn seal_indexed_in(
        &self,
        part: u64,
        head: &ChainHead,
        event: &StoredEvent,
        audit: &Value,
        batch_end: u64,
    ) -> Result<(SealedRecord, AuditIndex), AuditError> {
        let prevhash = prev_hash(head)?;
        let data = audit_data(event, audit)?;
        let event_type = event_type(&event.kind).ok_or_else(|| {
            AuditError::Seal(format!(
                "event kind {:?} is not lower-case [a-z0-9_] words",
                event.kind
            ))
        })?;
        let id = self.ids.record_id();
        let seq = head.seq + 1;
        if batch_end < seq {
            return Err(AuditError::Seal(format!(
                "record {seq} cannot belong to a batch that ends at {batch_end}"
            )));
        }
        let mut record = AuditRecord {
            specversion: SPEC_VERSION.to_owned(),
            id: id.clone(),
            source: self.source.clone(),
            event_type,
            time: event.recorded_at.rfc3339(),
            subject: event.run.as_str().to_owned(),
            datacontenttype: DATA_CONTENT_TYPE.to_owned(),
            dataschema: DATA_SCHEMA_V2.to_owned(),
            seq,
            part: (part > 0).then_some(part),
            prevhash,
            batchend: (batch_end > seq).then_some(batch_end),
            hash: None,
            kid: None,
            sig: None,
            data,
        };
        let hash = record_hash(&record, audit, true)?;
        record.hash = Some(hash.as_str().to_owned());
        if record.batchend.is_none() {
            let signature = self.key.sign(&hash.bytes());
            record.kid = Some(self.key.kid());
            record.sig = Some(BASE64.encode(signature.to_bytes()));
        }
        let line = serde_json::to_string(&record).map_err(seal_json)?;
        let index = index_of(&record);
        Ok((
            SealedRecord {
                seq,
                id,
                hash: hash.as_str().to_owned(),
                line,
            },
            index,
        ))
    }
}

/// What [`AuditIndex::of`] reads from the line `record` is written as.
fn index_of(record: &AuditRecord) -> AuditIndex {
    let data = &record.data;
    AuditIndex {
        at: Timestamp::parse(&record.time).map(|t| t.millis()),
        run: Some(data.run.clone()),
        actor: Some(data.actor.clone()),
        on_behalf_of: data.on_behalf_of.clone(),
        event: Some(data.event.clone()),
        verb: data
            .action
            .as_ref()
            .and_then(|a| a.views().first())
            .and_then(|view| view["verb"].as_str())
            .map(str::to_owned),
        resource: data.resource.clone(),
        decision: data.decision.map(|d| {
            match d {
                Decision::Allow => "allow",
                Decision::Ask => "ask",
                Decision::Deny => "deny",
            }
            .to_owned()
        }),
    }
}

impl InstallationSealer {
    /// The anchor after `head` (the anchor chain's) stating `facts`: always signed, its outbox
    /// position on the line (unhashed, as every positioned record's) and in its data (hashed).
    pub fn seal_anchor_record(
        &self,
        head: &ChainHead,
        facts: &AnchorFacts,
    ) -> Result<SealedRecord, AuditError> {
        let prevhash = prev_hash(head)?;
        let id = self.ids.record_id();
        let seq = head.seq + 1;
        let mut record = AnchorRecord {
            pos: facts.pos,
            specversion: SPEC_VERSION.to_owned(),
            id: id.clone(),
            source: self.source.clone(),
            event_type: ANCHOR_TYPE.to_owned(),
            time: facts.at.rfc3339(),
            datacontenttype: DATA_CONTENT_TYPE.to_owned(),
            dataschema: ANCHOR_SCHEMA.to_owned(),
            seq,
            prevhash,
            hash: None,
            kid: None,
            sig: None,
            data: AnchorData {
                pos: facts.pos,
                from: facts.from,
                heads: facts.heads.clone(),
            },
        };
        let unsigned = serde_json::to_string(&record).map_err(seal_json)?;
        let parsed: Map<String, Value> = serde_json::from_str(&unsigned).map_err(seal_json)?;
        let hash = chain_hash(&record.prevhash, &parsed).map_err(seal_json)?;
        let signature = self.key.sign(&hash.bytes());
        record.hash = Some(hash.as_str().to_owned());
        record.kid = Some(self.key.kid());
        record.sig = Some(BASE64.encode(signature.to_bytes()));
        let line = serde_json::to_string(&record).map_err(seal_json)?;
        Ok(SealedRecord {
            seq,
            id,
            hash: hash.as_str().to_owned(),
            line,
        })
    }
}

impl Sealer for InstallationSealer {
    fn seal_in(
        &self,
        part: u64,
        head: &ChainHead,
        event: &StoredEvent,
        audit: &Value,
        batch_end: u64,
    ) -> Result<SealedRecord, String> {
        self.seal_indexed_in(part, head, event, audit, batch_end)
            .map(|(record, _)| record)
            .map_err(coded)
    }

    fn seal_indexed(
        &self,
        part: u64,
        head: &ChainHead,
        event: &StoredEvent,
        audit: &Value,
        batch_end: u64,
    ) -> Result<(SealedRecord, Option<AuditIndex>), String> {
        self.seal_indexed_in(part, head, event, audit, batch_end)
            .map(|(record, index)| (record, Some(index)))
            .map_err(coded)
    }

    fn seal_anchor(&self, head: &ChainHead, facts: &AnchorFacts) -> Result<SealedRecord, String> {
        self.seal_anchor_record(head, facts).map_err(coded)
    }

    fn seal(
        &self,
        head: &ChainHead,
        event: &StoredEvent,
        audit: &Value,
        batch_end: u64,
    ) -> Result<SealedRecord, String> {
        self.seal_record(head, event, audit, batch_end)
            .map_err(coded)
    }
}

/// The chain hash of `record` (not yet hashed or signed) as a verifier will compute it from the
/// line it is written as. Without a float among the `facts` it was built from (every other value
/// of a record is a string or an integer) that is the hash of its own values; with one, the line
/// is written and parsed back first, so a float inside an action view canonicalizes identically
/// on both sides. `float_guard: false` is the tests' negative control: every record hashed from
/// its values.
fn record_hash(
    record: &AuditRecord,
    facts: &Value,
    float_guard: bool,
) -> Result<Digest, AuditError> {
    if !float_guard || float_free(facts) {
        return chain_hash_unwritten(&record.prevhash, record).map_err(seal_json);
    }
    let unsigned = serde_json::to_string(record).map_err(seal_json)?;
    let parsed: Map<String, Value> = serde_json::from_str(&unsigned).map_err(seal_json)?;
    chain_hash(&record.prevhash, &parsed).map_err(seal_json)
}

/// A sealing error as the store carries it: its code, then its message.
fn coded(e: AuditError) -> String {
    use warrant_core::Coded as _;
    format!("{}: {e}", e.code())
}

fn seal_json(e: serde_json::Error) -> AuditError {
    AuditError::Seal(format!("cannot serialize the record: {e}"))
}

/// An empty chain may report its hash as empty or as the genesis hash; anything else must be
/// a real digest, or the new record would link to nothing verifiable.
fn prev_hash(head: &ChainHead) -> Result<String, AuditError> {
    if head.seq == 0 {
        if head.hash.is_empty() || head.hash == GENESIS_HASH {
            return Ok(GENESIS_HASH.to_owned());
        }
        return Err(AuditError::Seal(format!(
            "the chain head says seq 0 but carries hash {:?}",
            head.hash
        )));
    }
    match Digest::parse(&head.hash) {
        Some(d) => Ok(d.as_str().to_owned()),
        None => Err(AuditError::Seal(format!(
            "the chain head at seq {} has no valid hash ({:?})",
            head.seq, head.hash
        ))),
    }
}

/// The store's facts (run, event seq, kind) fill in what the kernel left out, because the
/// kernel drafts before the store numbers the event; a value that disagrees is a bug upstream
/// and is refused rather than silently overwritten.
fn audit_data(event: &StoredEvent, audit: &Value) -> Result<AuditData, AuditError> {
    let Value::Object(map) = audit else {
        return Err(AuditError::Seal(format!(
            "the audit facts of {} event {} are not a JSON object",
            event.run, event.seq
        )));
    };
    let mut map = map.clone();
    let facts = [
        ("run", Value::from(event.run.as_str())),
        ("event_seq", Value::from(event.seq)),
        ("event", Value::from(event.kind.as_str())),
        ("event_digest", Value::from(bound_digest(event)?.as_str())),
    ];
    for (field, stored) in facts {
        match map.get(field) {
            None => {
                map.insert(field.to_owned(), stored);
            }
            Some(given) if *given == stored => {}
            Some(given) => {
                return Err(AuditError::Seal(format!(
                    "audit field {field} is {given} but the stored event says {stored}"
                )));
            }
        }
    }
    // Checked before the typed parse, so the message names the format rather than a type.
    if let Some(approval) = map.get("approval")
        && !approval.is_object()
    {
        return Err(AuditError::Seal(format!(
            "audit approval must be an object (request id, approver, scope), got {approval}"
        )));
    }
    if let Some(decision) = map.get("decision")
        && !matches!(decision.as_str(), Some("allow" | "ask" | "deny"))
    {
        let shown = decision
            .as_str()
            .map_or_else(|| decision.to_string(), |d| format!("{d:?}"));
        return Err(AuditError::Seal(format!(
            "audit decision {shown} is not allow, ask or deny"
        )));
    }
    let data: AuditData = serde_json::from_value(Value::Object(map)).map_err(|e| {
        AuditError::Seal(format!(
            "the audit facts of {} event {} are not AuditData v2: {e}",
            event.run, event.seq
        ))
    })?;
    Ok(data)
}

/// The digest of the event as a reader of the store will see it: a payload with a float goes
/// through the same text the store writes (`Value::to_string`) and is parsed back, so a float
/// that does not survive the trip exactly hashes the same on both sides (any other payload
/// reads back as the same value).
fn bound_digest(event: &StoredEvent) -> Result<Digest, AuditError> {
    let fail = |e: serde_json::Error| {
        AuditError::Seal(format!(
            "cannot digest {} event {}: {e}",
            event.run, event.seq
        ))
    };
    if float_free(&event.payload) {
        return event_digest(event).map_err(fail);
    }
    let payload: Value = serde_json::from_str(&event.payload.to_string()).map_err(fail)?;
    let stored = StoredEvent {
        run: event.run.clone(),
        seq: event.seq,
        kind: event.kind.clone(),
        version: event.version,
        recorded_at: event.recorded_at,
        payload,
    };
    event_digest(&stored).map_err(fail)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use serde_json::json;
    use warrant_core::{RunId, SequentialIds};

    use super::*;

    /// A float among the facts: the record hashes as its line reads back. Whether the record's
    /// own values would hash the same depends on serde_json's parser: with `float_roundtrip`
    /// (turned on in this workspace by `jsonschema`) it reads every float back exactly, without
    /// it this one comes back one unit in the last place away and a record hashed from its
    /// values would not verify (the negative control, `float_guard: false`).
    #[test]
    fn a_float_in_the_facts_is_hashed_as_its_line_reads_back() {
        let float = 1.071_566_039_146_582_6e-75_f64;
        let read_back: f64 = serde_json::from_str(&json!(float).to_string()).unwrap();
        let exact = read_back.to_bits() == float.to_bits();
        let sealer = InstallationSealer::new(
            AuditKey::from_seed([3; 32]),
            "inst-test",
            Arc::new(SequentialIds::default()),
        );
        let event = StoredEvent {
            run: RunId::parse("run-0000000000aa").unwrap(),
            seq: 1,
            kind: "effect_completed".into(),
            version: 1,
            recorded_at: Timestamp::from_millis(1_750_000_000_000).unwrap(),
            payload: json!({"ratio": float}),
        };
        let facts = json!({"actor": "alice", "tenant": "acme",
            "action": {"verb": "mcp.call", "args": {"ratio": float}}});
        let head = ChainHead {
            seq: 0,
            hash: String::new(),
        };
        let (sealed, _) = sealer.seal_indexed_in(0, &head, &event, &facts, 1).unwrap();
        let line: Map<String, Value> = serde_json::from_str(&sealed.line).unwrap();
        let verified = chain_hash(GENESIS_HASH, &line).unwrap();
        assert_eq!(verified.as_str(), sealed.hash);
        // The negative control: the same record hashed from its values, as if it held no float.
        let mut record: AuditRecord = serde_json::from_str(&sealed.line).unwrap();
        (record.hash, record.kid, record.sig) = (None, None, None);
        record.data.action = Some(crate::record::AuditAction::One(
            json!({"verb": "mcp.call", "args": {"ratio": float}}),
        ));
        let unguarded = record_hash(&record, &facts, false).unwrap();
        let guarded = record_hash(&record, &facts, true).unwrap();
        assert_eq!(guarded, verified);
        assert_eq!(
            unguarded == verified,
            exact,
            "hashed from its values, the record verifies exactly when its float reads back exactly"
        );
    }
}
