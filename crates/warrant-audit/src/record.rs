//! Audit record format v2: a CloudEvents 1.0 envelope around [`AuditData`], with the chain
//! attributes `seq`, `prevhash`, `hash`, `kid`, `sig`, the one hash definition that the
//! sealer and the verifier share, and the digest that binds a record to its stored event
//! ([`event_digest`]). v1 records (no `event_digest`) still verify as a chain and are reported
//! as unbound. It knows nothing of keys on disk, stores or files.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use warrant_core::{Digest, canonical_json};
use warrant_store::{AuditOutbox, PartHead, SealedRecord, StoreError, StoredEvent};

/// The version of [`AuditData`] and of the record layout.
pub const RECORD_VERSION: u32 = 2;
/// `prevhash` of the first record of a chain.
pub const GENESIS_HASH: &str =
    "sha256:0000000000000000000000000000000000000000000000000000000000000000";
pub const SPEC_VERSION: &str = "1.0";
pub const DATA_CONTENT_TYPE: &str = "application/json";
/// `dataschema` of records written before events were bound (no `event_digest`).
pub const DATA_SCHEMA_V1: &str = "https://warrant.dev/schemas/audit/v1.json";
/// `dataschema` of the records written now: v1 plus a required `event_digest`.
pub const DATA_SCHEMA_V2: &str = "https://warrant.dev/schemas/audit/v2.json";
/// The JSON Schema (2020-12) every v1 record line conforms to.
pub const RECORD_SCHEMA_V1: &str = include_str!("../schema/audit-record-v1.json");
/// The JSON Schema (2020-12) every v2 record line conforms to.
pub const RECORD_SCHEMA_V2: &str = include_str!("../schema/audit-record-v2.json");
/// Prefix of the CloudEvents `type`; the event kind follows with `_` turned into `.`.
pub const TYPE_PREFIX: &str = "dev.warrant.";

/// The CloudEvents `type` of an anchor record (issue 22): the signed statement of every
/// partition's head after the records positioned before it.
pub const ANCHOR_TYPE: &str = "dev.warrant.audit.anchor";
/// `dataschema` of an anchor record.
pub const ANCHOR_SCHEMA: &str = "https://warrant.dev/schemas/audit/anchor-v1.json";

/// The attributes that are not covered by `hash`: the hash itself, its signature, and the
/// outbox position an anchoring writes into a record after it was sealed (an anchor states
/// the positions it covers, inside its hashed data, and a verifier checks them).
pub(crate) const UNHASHED: [&str; 4] = ["hash", "kid", "sig", "pos"];

/// The facts the kernel derives from one run event (version 2). Never content: an action
/// appears as its audit view, and the trail never holds a secret value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditData {
    pub actor: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_behalf_of: Option<String>,
    pub tenant: String,
    pub run: String,
    pub event_seq: u64,
    /// The event kind, e.g. `policy_decided`.
    pub event: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<AuditAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    /// Policy ids and human reasons.
    #[serde(default)]
    pub reasons: Vec<String>,
    /// Request id, approver, scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<AuditApproval>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// The risk class policy assigned (on decisions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk: Option<String>,
    /// Digest of the input that led here (a run's task), never the input itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_digest: Option<String>,
    /// Digest of an effect's result as journaled, never the result itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_digest: Option<String>,
    /// [`event_digest`] of the stored event this record is about: what binds the journal to
    /// the signed chain. Set by the sealer; absent only in v1 records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_digest: Option<String>,
}

impl AuditData {
    /// The facts every record carries, for the event `event` (its kind) at `event_seq` of
    /// `run`, done by `actor` of `tenant`, for `on_behalf_of`; the rest is filled per kind.
    pub fn new(
        actor: &str,
        on_behalf_of: Option<&str>,
        tenant: &str,
        run: &str,
        event_seq: u64,
        event: &str,
    ) -> Self {
        Self {
            actor: actor.to_owned(),
            on_behalf_of: on_behalf_of.map(str::to_owned),
            tenant: tenant.to_owned(),
            run: run.to_owned(),
            event_seq,
            event: event.to_owned(),
            action: None,
            resource: None,
            decision: None,
            reasons: Vec::new(),
            approval: None,
            outcome: None,
            risk: None,
            input_digest: None,
            output_digest: None,
            event_digest: None,
        }
    }
}

/// What a record says was decided about its action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Allow,
    Ask,
    Deny,
}

/// The action(s) a record is about, as their audit views (never content): one object for a
/// single action, an array when a call proposed several.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum AuditAction {
    Many(Vec<Value>),
    One(Value),
}

impl AuditAction {
    /// The audit views, one per action.
    pub fn views(&self) -> &[Value] {
        match self {
            Self::Many(views) => views,
            Self::One(view) => std::slice::from_ref(view),
        }
    }
}

/// Who was asked or who answered, and for which request. Which fields a record holds depends
/// on its event; the field order is the one every event writes them in, so a record line reads
/// as it always has.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditApproval {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// The person who answered, as Warrant established them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approver: Option<String>,
    /// Where the answer came from: `terminal`, `cli`, `command`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// `once` or `session`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// What the approval binds to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk: Option<String>,
    /// The kind of request a run raised (`question`, `secret`, `resource`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Who the request is put to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked_of: Option<Vec<String>>,
    /// The park an approval is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub park: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// Whether the approver signed with their own key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed: Option<bool>,
}

impl AuditApproval {
    /// The request alone.
    pub fn request(id: &str) -> Self {
        Self {
            request: Some(id.to_owned()),
            ..Self::default()
        }
    }

    /// A person's answer to `request` (when named): who and where from.
    pub fn answer(request: Option<&str>, approver: &str, via: &str) -> Self {
        Self {
            request: request.map(str::to_owned),
            approver: Some(approver.to_owned()),
            via: Some(via.to_owned()),
            ..Self::default()
        }
    }
}

/// One record as it appears on a line. Field order here is the order on the line; the
/// hash does not depend on it (JCS sorts keys).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    pub specversion: String,
    pub id: String,
    /// `warrant://<installation id>`.
    pub source: String,
    #[serde(rename = "type")]
    pub event_type: String,
    /// RFC 3339, milliseconds, UTC: when the store recorded the event.
    pub time: String,
    /// The run id.
    pub subject: String,
    pub datacontenttype: String,
    pub dataschema: String,
    /// Position in its partition's chain, 1-based (the installation-wide position in a store
    /// of one partition).
    pub seq: u64,
    /// The partition whose chain the record is in; absent for partition 0, so a record of an
    /// unpartitioned chain reads as it always has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<u64>,
    pub prevhash: String,
    /// Batch signing: on every record of a committed batch but its last, the seq of that last
    /// record, whose signature covers this one (through the `prevhash` links); such a record
    /// has no `kid` and `sig`. Absent on a signed record. Covered by `hash`, so a verifier
    /// knows where each record's signature must be and a stripped one is noticed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batchend: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sig: Option<String>,
    pub data: AuditData,
}

/// An anchor as it appears on a line: a record of the anchor chain (its own `seq` and
/// `prevhash`), always signed, stating the outbox positions it covers and every partition's head.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnchorRecord {
    /// The outbox position, also stated (hashed) in `data.pos`.
    pub pos: u64,
    pub specversion: String,
    pub id: String,
    pub source: String,
    #[serde(rename = "type")]
    pub event_type: String,
    pub time: String,
    pub datacontenttype: String,
    pub dataschema: String,
    /// Position in the anchor chain, 1-based.
    pub seq: u64,
    pub prevhash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sig: Option<String>,
    pub data: AnchorData,
}

/// What an anchor states: it is at outbox position `pos`; the records it anchors are at
/// `from..pos`; after them each partition's last record is the one in `heads` (every
/// partition, in order; seq 0 and the genesis hash for one still empty).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnchorData {
    pub pos: u64,
    pub from: u64,
    pub heads: Vec<PartHead>,
}

/// Whether a sealed line is an anchor, read from its text (delivery only; verification parses):
/// the first `"type":` of a line is the CloudEvents one, written before `data`.
pub fn is_anchor_line(line: &str) -> bool {
    const KEY: &str = "\"type\":";
    line.find(KEY)
        .is_some_and(|at| line[at + KEY.len()..].starts_with(&format!("\"{ANCHOR_TYPE}\"")))
}

/// Whether a delivery may end after this line: not inside a batch (whose signature is on its
/// last record), and not inside a partitioned store's run of positioned records before their
/// anchor (a positioned record carries `pos` first; an unpartitioned chain's records do not).
pub fn closes_delivery(line: &str) -> bool {
    batch_end_of(line).is_none() && (!line.starts_with("{\"pos\":") || is_anchor_line(line))
}

/// The `batchend` a sealed line declares, read from its text without parsing it: delivery uses
/// it to move whole batches (never to trust anything; verification parses and checks every
/// line). The sealer writes the attribute before `data`, so its first occurrence is it.
pub fn batch_end_of(line: &str) -> Option<u64> {
    const KEY: &str = "\"batchend\":";
    let at = line.find(KEY)? + KEY.len();
    let digits: &str = &line[at..];
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    digits[..end].parse().ok()
}

/// Up to `limit` records of `outbox` after `after`, and then, when the last of them is inside a
/// batch or before its anchor, the rest up to the record that closes it ([`closes_delivery`]):
/// a delivery never ends inside a batch, so a copy never ends with records whose signature it
/// does not hold, and a partitioned store's copy ends at an anchor, which its checkpoint names.
pub(crate) fn whole_batches(
    outbox: &dyn AuditOutbox,
    after: u64,
    limit: usize,
) -> Result<Vec<SealedRecord>, StoreError> {
    let mut records = outbox.audit_records(after, limit)?;
    'more: while let Some(last) = records.last()
        && !closes_delivery(&last.line)
    {
        let more = outbox.audit_records(last.seq, limit.clamp(1, 512))?;
        if more.is_empty() {
            break;
        }
        for record in more {
            let closes = closes_delivery(&record.line);
            records.push(record);
            if closes {
                break 'more;
            }
        }
    }
    Ok(records)
}

/// The CloudEvents `type` of an event kind: `policy_decided` → `dev.warrant.policy.decided`.
/// `None` when the kind is not lower-case `[a-z0-9_]`, which would make an ambiguous type.
pub fn event_type(kind: &str) -> Option<String> {
    let ok = !kind.is_empty()
        && !kind.starts_with('_')
        && !kind.ends_with('_')
        && !kind.contains("__")
        && kind
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    ok.then(|| format!("{TYPE_PREFIX}{}", kind.replace('_', ".")))
}

/// `hash = sha256(prevhash ‖ JCS(record without hash, kid, sig))`. `record` is the parsed
/// line; the unhashed attributes are ignored whether present or not.
pub fn chain_hash(
    prevhash: &str,
    record: &Map<String, Value>,
) -> Result<Digest, serde_json::Error> {
    /// The record's members but the unhashed ones, written as one object without copying them.
    struct Covered<'a>(&'a Map<String, Value>);
    impl Serialize for Covered<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap as _;
            let mut map = s.serialize_map(None)?;
            for (k, v) in self.0 {
                if !UNHASHED.contains(&k.as_str()) {
                    map.serialize_entry(k, v)?;
                }
            }
            map.end()
        }
    }
    chain_hash_unwritten(prevhash, &Covered(record))
}

/// [`chain_hash`] of a record being sealed, from its values: the same digest as hashing the
/// line it is written as, parsed back, as long as the record holds no JSON number that is not
/// an integer (see [`float_free`]) and none of the unhashed attributes is set yet. A float is
/// the one value a parser may read back as another (one unit in the last place away, without
/// serde_json's `float_roundtrip`), and a verifier hashes what it parses.
pub(crate) fn chain_hash_unwritten<T: Serialize + ?Sized>(
    prevhash: &str,
    record: &T,
) -> Result<Digest, serde_json::Error> {
    let mut bytes = Vec::with_capacity(prevhash.len() + 1024);
    bytes.extend_from_slice(prevhash.as_bytes());
    warrant_core::canonical::write(&mut bytes, record)?;
    Ok(Digest::of_bytes(&bytes))
}

/// Whether `value` holds only integers among its numbers: then its text parses back to the
/// very same value, and its digest can be taken from the value instead of from its text.
pub(crate) fn float_free(value: &Value) -> bool {
    match value {
        Value::Number(n) => !n.is_f64(),
        Value::Array(items) => items.iter().all(float_free),
        Value::Object(map) => map.values().all(float_free),
        Value::Null | Value::Bool(_) | Value::String(_) => true,
    }
}

/// SHA-256 of the RFC 8785 form of everything the store keeps of an event and the ring folds:
/// `{kind, payload, recorded_at (ms), run, seq, version}`. The seq and run are inside, so the
/// digest alone names one event of one run; an edited, renumbered or moved row no longer
/// matches. The payload must be the value as read back from the store (the sealer parses the
/// stored text again), so both sides hash the same numbers.
pub fn event_digest(event: &StoredEvent) -> Result<Digest, serde_json::Error> {
    event_digest_at(event, event.seq)
}

/// [`event_digest`] of `event` as if it were event `seq` of its run: how a verifier recognises
/// an event that was moved from where it was signed.
pub(crate) fn event_digest_at(event: &StoredEvent, seq: u64) -> Result<Digest, serde_json::Error> {
    #[derive(Serialize)]
    struct Identity<'a> {
        run: &'a str,
        seq: u64,
        kind: &'a str,
        version: u32,
        recorded_at: i64,
        payload: &'a Value,
    }
    let bytes = canonical_json(&Identity {
        run: event.run.as_str(),
        seq,
        kind: &event.kind,
        version: event.version,
        recorded_at: event.recorded_at.millis(),
        payload: &event.payload,
    })?;
    Ok(Digest::of_bytes(bytes.as_bytes()))
}
