//! The event store: append-only run logs, the run and request indexes derived from them, and
//! the audit outbox, committed together in one transaction per append. SQLite is the embedded
//! default, PostgreSQL the shared store; both are one algorithm (`sql`) over a small dialect.
//!
//! The store knows run events only as `(kind, version, payload)`; it never interprets them.

mod envelope;
mod error;
mod postgres;
mod revocations;
mod sql;
mod sqlite;
mod tenant;
pub mod tls;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use warrant_core::{Clock, RequestId, RunId, Timestamp};

pub use crate::envelope::{EnvelopeStore, KillScope, KillSubject, KillSwitch, StopSignals, Taken};
pub use crate::error::StoreError;
pub use crate::postgres::{PgConnector, Postgres, PostgresStore};
pub use crate::revocations::RevocationStore;
pub use crate::sql::{ANCHOR_PART, GuardedAppends, MAX_PARTITIONS, Store};
pub use crate::sqlite::{SCHEMA_VERSION, Sqlite, SqliteStore};
pub use crate::tenant::{Scoped, Target, Tenant, TenantRefusal, TenantStore};
/// A store location as messages may show it: a URL's password and any `password=` removed.
pub use postgres::redact as redact_location;

/// Opens the store at `location`: a `postgres://` or `postgresql://` URL is the shared
/// PostgreSQL store (its schema created on first use), anything else the path of an existing
/// SQLite store.
pub fn open(
    location: &str,
    clock: Arc<dyn Clock>,
) -> Result<Box<dyn EventStore + Send + Sync>, StoreError> {
    open_with_password(location, None, clock)
}

/// [`open`], with the PostgreSQL password given apart from the URL (resolved from a reference
/// by the caller). Ignored for a SQLite store.
pub fn open_with_password(
    location: &str,
    password: Option<&str>,
    clock: Arc<dyn Clock>,
) -> Result<Box<dyn EventStore + Send + Sync>, StoreError> {
    if is_postgres_url(location) {
        Ok(Box::new(PostgresStore::connect_with_password(
            location, password, clock,
        )?))
    } else {
        Ok(Box::new(SqliteStore::open(Path::new(location), clock)?))
    }
}

/// Whether `location` names a PostgreSQL store rather than a SQLite file.
pub fn is_postgres_url(location: &str) -> bool {
    let lower = location.get(..13).unwrap_or(location).to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// An event about to be appended.
#[derive(Clone, Debug, PartialEq)]
pub struct EventDraft {
    pub kind: String,
    pub version: u32,
    pub payload: Value,
    /// The audit facts the kernel derived from this event (an `AuditData` of warrant-audit,
    /// serialized), sealed into the audit outbox in the same transaction.
    pub audit: Value,
    /// The model usage this event records (the kernel says which events carry one), added to
    /// the budget totals of the run's tenant and actor in the same transaction.
    pub usage: Option<Usage>,
}

/// Model usage as the budget totals count it: tokens, and cost in billionths of a US dollar
/// (each recorded cost rounded once, so a total is an exact sum that any fold of the same
/// events reproduces, whatever the order).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_nanos: u64,
}

impl Usage {
    /// A recorded cost in US dollars as billionths (negative or non-finite counts as none;
    /// prices are checked to be finite and non-negative before any run).
    pub fn nanos(cost_usd: f64) -> u64 {
        if cost_usd.is_finite() && cost_usd > 0.0 {
            // Costs stay far below 2^63 billionths (9.2e9 dollars).
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let n = (cost_usd * 1e9 + 0.5).floor() as u64;
            n
        } else {
            0
        }
    }

    pub fn add(&mut self, other: &Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cost_nanos = self.cost_nanos.saturating_add(other.cost_nanos);
    }

    pub fn tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    pub fn cost_usd(&self) -> f64 {
        #[allow(clippy::cast_precision_loss)]
        let n = self.cost_nanos as f64;
        n / 1e9
    }

    pub fn is_zero(&self) -> bool {
        *self == Usage::default()
    }
}

/// One row of the budget totals: what one actor of one tenant has used over all its runs,
/// kept up to date by every append that records model usage.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetTotal {
    pub tenant: String,
    pub actor: String,
    #[serde(flatten)]
    pub usage: Usage,
    pub updated_at: Timestamp,
}

/// An event as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredEvent {
    pub run: RunId,
    /// 1-based, dense, per run.
    pub seq: u64,
    pub kind: String,
    pub version: u32,
    pub recorded_at: Timestamp,
    pub payload: Value,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Submitted, waiting for a worker to lease it.
    Queued,
    Running,
    Parked,
    Completed,
    Failed,
    Stopped,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Parked => "parked",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Stopped => "stopped",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "queued" => Some(Self::Queued),
            "running" => Some(Self::Running),
            "parked" => Some(Self::Parked),
            "completed" => Some(Self::Completed),
            "failed" => Some(Self::Failed),
            "stopped" => Some(Self::Stopped),
            _ => None,
        }
    }

    /// Completed, failed and stopped runs never move again.
    pub fn is_final(self) -> bool {
        match self {
            Self::Queued | Self::Running | Self::Parked => false,
            Self::Completed | Self::Failed | Self::Stopped => true,
        }
    }
}

/// One row of the run index.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRow {
    pub run: RunId,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub actor: String,
    pub task: String,
    pub status: RunStatus,
    /// Events in the log.
    pub events: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RequestStatus {
    Open,
    Answered,
}

/// One row of the request index: what a person is asked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestRow {
    pub id: RequestId,
    pub run: RunId,
    pub status: RequestStatus,
    pub created_at: Timestamp,
    /// What the person is shown in a listing (kind-specific, written by the kernel).
    pub summary: Value,
}

/// A change to the request index, applied in the same transaction as the events.
#[derive(Clone, Debug, PartialEq)]
pub enum RequestUpdate {
    Open { id: RequestId, summary: Value },
    Answered { id: RequestId },
}

/// One atomic append to a run's log.
#[derive(Clone, Debug)]
pub struct Append {
    pub run: RunId,
    /// The sequence number the first new event must get; a mismatch means another process
    /// appended first, and nothing is written.
    pub expected_seq: u64,
    pub events: Vec<EventDraft>,
    pub status: Option<RunStatus>,
    pub requests: Vec<RequestUpdate>,
    /// The fencing token of the lease the writer holds. When given, the append is refused
    /// (and the refusal recorded) unless it is the run's current token. Writers that do not
    /// drive the run (an approval, a cancellation) append without one.
    pub fence: Option<u64>,
}

/// The store login's standing against PostgreSQL's row-level security: a superuser or a
/// role with `BYPASSRLS` is not held by it, so tenants are then kept apart by the statements'
/// own filter alone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowSecurity {
    pub role: String,
    pub superuser: bool,
    pub bypass_rls: bool,
}

impl RowSecurity {
    pub fn holds(&self) -> bool {
        !self.superuser && !self.bypass_rls
    }

    /// Why it does not hold, in words; `None` when it does.
    pub fn problem(&self) -> Option<String> {
        let what = match (self.superuser, self.bypass_rls) {
            (false, false) => return None,
            (true, _) => "a superuser",
            (false, true) => "a role with BYPASSRLS",
        };
        Some(format!(
            "the store's login role `{}` is {what}: PostgreSQL's row-level security does not hold it, so tenants are kept apart by the statements' own filter alone; connect as a plain login role",
            self.role
        ))
    }
}

/// A lease on a run: its holder drives the run until the lease expires or is released. The
/// token grows each time the run is leased anew, so a holder that lost its lease (paused,
/// partitioned) is refused when it next appends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub run: RunId,
    pub holder: String,
    pub token: u64,
    pub expires_at: Timestamp,
}

/// An append the store refused because its fencing token was stale, kept as a durable fact.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FenceRejection {
    pub run: RunId,
    pub presented: u64,
    pub current: u64,
    pub at: Timestamp,
    /// The kinds of the events that were not written.
    pub kinds: Vec<String>,
}

/// A request to stop a run, honoured at its next effect boundary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelRequest {
    pub by: String,
    pub reason: String,
    pub at: Timestamp,
}

/// The last record of the installation's audit chain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainHead {
    /// 0 when the chain is empty.
    pub seq: u64,
    pub hash: String,
}

/// One partition's head as an anchor names it: the partition's last record before the anchor
/// (`seq` 0 and the genesis hash for a partition with no record yet).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartHead {
    pub part: u64,
    pub seq: u64,
    pub hash: String,
}

/// What an anchor record states (issue 22): it takes outbox position `pos`; the records it
/// anchors took `from..pos`; after them every partition's head is the one named in `heads`
/// (all of them, in partition order).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnchorFacts {
    pub pos: u64,
    pub from: u64,
    pub heads: Vec<PartHead>,
    pub at: Timestamp,
}

/// The partition a run's records go to in a store of `partitions` partitions: the first 8 bytes
/// of SHA-256(run id), big-endian, modulo `partitions`. Every batch of a run lands in the same
/// partition, so a run's records are one stretch of one hash chain.
pub fn partition_of(run: &str, partitions: u64) -> u64 {
    if partitions <= 1 {
        return 0;
    }
    let digest = warrant_core::Digest::of_bytes(run.as_bytes()).bytes();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first) % partitions
}

/// An audit record ready for the outbox: its position, identity and the exact line sinks get.
/// `seq` is the record's position as the reader asked for it: from [`AuditOutbox::audit_records`]
/// its outbox position (`pos`, the sinks' cursor: the same as the chain seq in an unpartitioned
/// store), from [`EventStore::query_audit`] its seq within its partition's chain, as on its line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedRecord {
    pub seq: u64,
    pub id: String,
    pub hash: String,
    pub line: String,
}

/// Turns an event's audit facts into the next chained record. Implemented by warrant-audit;
/// called by the store inside the append transaction, so the chain order is the commit order.
/// The records of one transaction are one batch: `batch_end` is the seq the batch's last record
/// will get. That record is signed, and its signature covers the batch's earlier records, which
/// name it (batch signing: one signature per committed batch).
pub trait Sealer {
    fn seal(
        &self,
        head: &ChainHead,
        event: &StoredEvent,
        audit: &Value,
        batch_end: u64,
    ) -> Result<SealedRecord, String>;

    /// [`Sealer::seal`] for a record of partition `part` (issue 22): the line names its
    /// partition (absent for partition 0, so an unpartitioned chain reads as it always has),
    /// and `head` is that partition's head.
    fn seal_in(
        &self,
        part: u64,
        head: &ChainHead,
        event: &StoredEvent,
        audit: &Value,
        batch_end: u64,
    ) -> Result<SealedRecord, String> {
        if part == 0 {
            self.seal(head, event, audit, batch_end)
        } else {
            Err(format!(
                "this sealer cannot seal records of partition {part}"
            ))
        }
    }

    /// [`Sealer::seal_in`], with the columns the record is indexed by when the sealer knows
    /// them from the facts it sealed; `None` (the default) has the store read them from the
    /// line, as [`AuditIndex::of`] does. A sealer that answers must answer exactly that.
    fn seal_indexed(
        &self,
        part: u64,
        head: &ChainHead,
        event: &StoredEvent,
        audit: &Value,
        batch_end: u64,
    ) -> Result<(SealedRecord, Option<AuditIndex>), String> {
        Ok((self.seal_in(part, head, event, audit, batch_end)?, None))
    }

    /// Seals the anchor after `head` (the anchor chain's head) stating `facts`: a signed record
    /// of its own chain, which the outbox places at `facts.pos`.
    fn seal_anchor(&self, _head: &ChainHead, _facts: &AnchorFacts) -> Result<SealedRecord, String> {
        Err("this sealer cannot sign anchors".to_owned())
    }
}

/// Delivery state of one audit sink, kept in the store beside the outbox.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinkState {
    pub sink: String,
    /// The last audit seq the sink acknowledged.
    pub acknowledged: u64,
    pub delivered_total: u64,
    /// The first successful delivery (with `delivered_total`, the sink's delivery rate).
    pub first_success: Option<Timestamp>,
    pub last_success: Option<Timestamp>,
    pub last_error: Option<String>,
    pub last_error_at: Option<Timestamp>,
    /// When the current run of failures began (cleared by a success).
    pub failing_since: Option<Timestamp>,
}

/// Filters of `warrant audit query`; every field narrows, `None` matches all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditQuery {
    pub run: Option<String>,
    pub actor: Option<String>,
    pub on_behalf_of: Option<String>,
    /// Resource kind: the part of the verb before the dot (`fs`, `shell`, …).
    pub kind: Option<String>,
    pub verb: Option<String>,
    pub decision: Option<String>,
    pub since: Option<Timestamp>,
    pub until: Option<Timestamp>,
    pub limit: usize,
}

impl AuditQuery {
    /// The WHERE clause of the filters that are set, numbered from `?1`/`$1` in the order of
    /// [`AuditQuery::values`], so the indexes on run, actor and time can be used (a catch-all
    /// `? IS NULL OR …` clause makes every query scan the whole trail).
    pub(crate) fn clause(&self, placeholder: fn(usize) -> String) -> String {
        let mut parts = Vec::new();
        let mut n = 0;
        let mut next = || {
            n += 1;
            placeholder(n)
        };
        for (set, column) in [
            (self.run.is_some(), "run_id = "),
            (self.actor.is_some(), "actor = "),
            (self.on_behalf_of.is_some(), "on_behalf_of = "),
            (self.verb.is_some(), "verb = "),
            (self.decision.is_some(), "decision = "),
        ] {
            if set {
                parts.push(format!("{column}{}", next()));
            }
        }
        if self.kind.is_some() {
            parts.push(format!("verb LIKE {} || '.%'", next()));
        }
        if self.since.is_some() {
            parts.push(format!("at >= {}", next()));
        }
        if self.until.is_some() {
            parts.push(format!("at < {}", next()));
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", parts.join(" AND "))
        }
    }

    /// The text filters that are set, in the order [`AuditQuery::clause`] numbers them, then
    /// the time bounds in milliseconds.
    pub(crate) fn values(&self) -> (Vec<&str>, Vec<i64>) {
        let texts = [
            &self.run,
            &self.actor,
            &self.on_behalf_of,
            &self.verb,
            &self.decision,
            &self.kind,
        ]
        .into_iter()
        .filter_map(|v| v.as_deref())
        .collect();
        let times = [self.since, self.until]
            .into_iter()
            .flatten()
            .map(|t| t.millis())
            .collect();
        (texts, times)
    }
}

/// The columns an audit record is indexed by (the audit queries' filters), as its line states
/// them: the record's time in milliseconds, and `data`'s run, actor, on-behalf-of, event kind,
/// first action's verb, resource and decision, each only where the line has it as a string.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditIndex {
    pub at: Option<i64>,
    pub run: Option<String>,
    pub actor: Option<String>,
    pub on_behalf_of: Option<String>,
    pub event: Option<String>,
    pub verb: Option<String>,
    pub resource: Option<String>,
    pub decision: Option<String>,
}

impl AuditIndex {
    /// The columns of the record written as `line` (none of a line that is not JSON).
    pub fn of(line: &str) -> Self {
        let v: Value = serde_json::from_str(line).unwrap_or(Value::Null);
        let data = &v["data"];
        let text = |x: &Value| x.as_str().map(str::to_owned);
        let verb = text(&data["action"]["verb"]).or_else(|| {
            data["action"]
                .as_array()
                .and_then(|a| a.first())
                .and_then(|a| a["verb"].as_str())
                .map(str::to_owned)
        });
        Self {
            at: v["time"]
                .as_str()
                .and_then(Timestamp::parse)
                .map(|t| t.millis()),
            run: text(&data["run"]),
            actor: text(&data["actor"]),
            on_behalf_of: text(&data["on_behalf_of"]),
            event: text(&data["event"]),
            verb,
            resource: text(&data["resource"]),
            decision: text(&data["decision"]),
        }
    }
}

/// New run metadata for the index.
#[derive(Clone, Debug)]
pub struct NewRun {
    pub run: RunId,
    /// The tenant of the principal the run acts for: every row of the run carries it.
    pub tenant: Tenant,
    pub actor: String,
    pub task: String,
    /// `Running` for a run driven by the process that starts it, `Queued` for `submit`.
    pub status: RunStatus,
}

/// The audit outbox as a sink reads it: sealed records in chain order.
pub trait AuditOutbox {
    /// Audit records with outbox position `> after`, in order, at most `limit`; each
    /// [`SealedRecord::seq`] is its position.
    fn audit_records(&self, after: u64, limit: usize) -> Result<Vec<SealedRecord>, StoreError>;
    /// The last positioned record (its position as `seq`).
    fn audit_head(&self) -> Result<ChainHead, StoreError>;

    /// How many partitions the chain has (1: one chain, positioned as it is appended).
    fn audit_partitions(&self) -> Result<u64, StoreError> {
        Ok(1)
    }

    /// Gives a chain that holds no record yet `partitions` partitions (1 to
    /// [`MAX_PARTITIONS`]); `false`, changing nothing, once the chain has begun (a run's
    /// records must stay in one partition, so the count is fixed from the first record).
    fn partition_new_chain(&self, partitions: u64) -> Result<bool, StoreError> {
        let _ = partitions;
        Ok(false)
    }

    /// Positions the records committed since the last anchor (partition, then seq order) and
    /// appends the anchor naming every partition's head, sealed by `sealer`. `None` when there
    /// was nothing to anchor, or (`wait` false) another process is anchoring now. A store of
    /// one partition positions records as they are appended and never anchors.
    fn anchor(
        &self,
        _sealer: &dyn Sealer,
        _wait: bool,
    ) -> Result<Option<SealedRecord>, StoreError> {
        Ok(None)
    }
}

pub trait EventStore: AuditOutbox + EnvelopeStore + TenantStore + RevocationStore {
    /// How this process reaches the store, in words (`doctor`): a local file, or the TLS the
    /// server negotiated on this connection and what was verified.
    fn transport(&self) -> Result<String, StoreError>;

    /// Whether the database's row-level security holds this login (`doctor`, strict mode);
    /// `None` where the store has no such layer (SQLite).
    fn row_security(&self) -> Result<Option<RowSecurity>, StoreError> {
        Ok(None)
    }

    /// Creates the run and appends its first events, atomically.
    fn create_run(
        &self,
        run: &NewRun,
        events: Vec<EventDraft>,
        sealer: &dyn Sealer,
    ) -> Result<Vec<StoredEvent>, StoreError>;

    /// [`EventStore::create_run`] with the run leased to `holder` for `ttl` in the same
    /// transaction: a run its creator drives (`warrant run`) is never seen running without a
    /// lease, and its start is one commit, not two. The default creates, then leases.
    fn create_run_leased(
        &self,
        run: &NewRun,
        events: Vec<EventDraft>,
        sealer: &dyn Sealer,
        holder: &str,
        ttl: Duration,
    ) -> Result<(Vec<StoredEvent>, Lease), StoreError> {
        let stored = self.create_run(run, events, sealer)?;
        let lease = self.lease_run(&run.run, holder, ttl)?;
        Ok((stored, lease))
    }

    /// Appends to an existing run, atomically with index updates and audit records.
    fn append(&self, append: Append, sealer: &dyn Sealer) -> Result<Vec<StoredEvent>, StoreError>;

    /// [`EventStore::append`], committed only if nothing stops the next effect of `stops`: no
    /// kill switch covering it is set and none of its runs was asked to stop, as the append's
    /// own transaction sees it, so nothing set before the commit slips between a read and the
    /// write. [`StoreError::Stopped`] when something does; nothing was written then. The
    /// default reads the signals, then appends (two steps; the SQL store makes them one).
    fn append_unless_stopped(
        &self,
        append: Append,
        stops: &KillSubject<'_>,
        sealer: &dyn Sealer,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        if self.stop_signals(stops)?.stop() {
            return Err(StoreError::Stopped {
                run: append.run.to_string(),
            });
        }
        self.append(append, sealer)
    }

    /// [`EventStore::append`], and whether anything stops the next effect of `stops` as the
    /// append's own transaction saw it (`true`: a kill switch covering it is set, or one of its
    /// runs was asked to stop). The append commits either way: it records what happened (an
    /// effect's completion), and its commit doubles as the read of the next step. The default
    /// appends, then reads; a read that fails answers `true`, so the next step reads again.
    fn append_reading_stops(
        &self,
        append: Append,
        stops: &KillSubject<'_>,
        sealer: &dyn Sealer,
    ) -> Result<(Vec<StoredEvent>, bool), StoreError> {
        let stored = self.append(append, sealer)?;
        let stopped = self.stop_signals(stops).map_or(true, |s| s.stop());
        Ok((stored, stopped))
    }

    fn events(&self, run: &RunId) -> Result<Vec<StoredEvent>, StoreError>;
    fn run(&self, run: &RunId) -> Result<Option<RunRow>, StoreError>;
    fn runs(&self) -> Result<Vec<RunRow>, StoreError>;
    fn request(&self, id: &RequestId) -> Result<Option<RequestRow>, StoreError>;
    fn requests(&self, status: Option<RequestStatus>) -> Result<Vec<RequestRow>, StoreError>;

    /// Takes the lease of one run for `holder` (a run driven in this process: `run`, `resume`).
    /// Refused with [`StoreError::Leased`] while another holder's lease is live, and with
    /// [`StoreError::Final`] for a run that has ended.
    fn lease_run(&self, run: &RunId, holder: &str, ttl: Duration) -> Result<Lease, StoreError>;

    /// Leases the oldest run a worker may take: a queued run, or a running one whose lease
    /// expired (its holder died or stalled) or was released. A running run that was never
    /// leased (its creator is about to lease it) is not taken. `None` when there is none.
    fn lease_next(&self, holder: &str, ttl: Duration) -> Result<Option<Lease>, StoreError>;

    /// Extends a lease. [`StoreError::Fenced`] when the run was leased anew since.
    fn heartbeat(&self, lease: &Lease, ttl: Duration) -> Result<Lease, StoreError>;

    /// Gives a lease up (no effect if it was already superseded). A run released while still
    /// running is free for `lease_next` at once.
    fn release(&self, lease: &Lease) -> Result<(), StoreError>;

    /// Ends the lease of `holder` on `run` now, whoever asks: for a holder known to be dead (a
    /// process of this host that no longer exists). Its token stays, so if it was alive after
    /// all, its appends are refused once the run is leased anew. Returns whether it held it.
    fn break_lease(&self, run: &RunId, holder: &str) -> Result<bool, StoreError>;

    /// How far a sink got, and how its deliveries went.
    fn sink_state(&self, sink: &str) -> Result<SinkState, StoreError>;

    /// Records a successful delivery up to `acknowledged` (`delivered` records this time).
    fn record_delivery(
        &self,
        sink: &str,
        acknowledged: u64,
        delivered: u64,
    ) -> Result<(), StoreError>;

    /// Records a failed delivery attempt; `acknowledged` is how far it got before failing.
    fn record_delivery_failure(
        &self,
        sink: &str,
        acknowledged: u64,
        error: &str,
    ) -> Result<(), StoreError>;

    /// Audit records matching `query`, in chain order.
    fn query_audit(&self, query: &AuditQuery) -> Result<Vec<SealedRecord>, StoreError>;

    /// Appends refused for a stale fencing token, oldest first.
    fn fence_rejections(&self, run: &RunId) -> Result<Vec<FenceRejection>, StoreError>;

    /// Asks a run to stop at its next effect boundary (idempotent: the first request stays).
    fn request_cancel(&self, run: &RunId, by: &str, reason: &str) -> Result<(), StoreError>;

    fn cancel_request(&self, run: &RunId) -> Result<Option<CancelRequest>, StoreError>;

    /// What stops the next effect of a run, read together: the kill switch that stops
    /// `subject` ([`EnvelopeStore::kill_for`]) and the cancellation request of each of
    /// `subject.runs` ([`EventStore::cancel_request`]). A SQL store reads both with one
    /// statement, so an effect boundary costs one round trip, not two.
    fn stop_signals(&self, subject: &KillSubject<'_>) -> Result<StopSignals, StoreError> {
        Ok(StopSignals {
            kill: self.kill_for(subject)?,
            cancels: subject
                .runs
                .iter()
                .map(|run| self.cancel_request(run))
                .collect::<Result<_, _>>()?,
        })
    }
}
