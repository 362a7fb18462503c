//! The event store: append-only run logs, the run and request indexes derived from them, and
//! the audit outbox, committed together in one transaction per append. SQLite is the embedded
//! default; the trait is what a shared PostgreSQL store implements later.
//!
//! The store knows run events only as `(kind, version, payload)`; it never interprets them.

mod error;
mod sqlite;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use warrant_core::{RequestId, RunId, Timestamp};

pub use error::StoreError;
pub use sqlite::{SCHEMA_VERSION, SqliteStore};

/// An event about to be appended.
#[derive(Clone, Debug, PartialEq)]
pub struct EventDraft {
    pub kind: String,
    pub version: u32,
    pub payload: Value,
    /// The audit facts the kernel derived from this event (an `AuditData` of warrant-audit,
    /// serialized), sealed into the audit outbox in the same transaction.
    pub audit: Value,
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
    Running,
    Parked,
    Completed,
    Failed,
    Stopped,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Parked => "parked",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Stopped => "stopped",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "running" => Some(Self::Running),
            "parked" => Some(Self::Parked),
            "completed" => Some(Self::Completed),
            "failed" => Some(Self::Failed),
            "stopped" => Some(Self::Stopped),
            _ => None,
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
}

/// The last record of the installation's audit chain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainHead {
    /// 0 when the chain is empty.
    pub seq: u64,
    pub hash: String,
}

/// An audit record ready for the outbox: its position, identity and the exact line sinks get.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedRecord {
    pub seq: u64,
    pub id: String,
    pub hash: String,
    pub line: String,
}

/// Turns an event's audit facts into the next chained, signed record. Implemented by
/// warrant-audit; called by the store inside the append transaction, so the chain order is
/// the commit order.
pub trait Sealer {
    fn seal(
        &self,
        head: &ChainHead,
        event: &StoredEvent,
        audit: &Value,
    ) -> Result<SealedRecord, String>;
}

/// New run metadata for the index.
#[derive(Clone, Debug)]
pub struct NewRun {
    pub run: RunId,
    pub actor: String,
    pub task: String,
}

pub trait EventStore {
    /// Creates the run and appends its first events, atomically.
    fn create_run(
        &self,
        run: &NewRun,
        events: Vec<EventDraft>,
        sealer: &dyn Sealer,
    ) -> Result<Vec<StoredEvent>, StoreError>;

    /// Appends to an existing run, atomically with index updates and audit records.
    fn append(&self, append: Append, sealer: &dyn Sealer) -> Result<Vec<StoredEvent>, StoreError>;

    fn events(&self, run: &RunId) -> Result<Vec<StoredEvent>, StoreError>;
    fn run(&self, run: &RunId) -> Result<Option<RunRow>, StoreError>;
    fn runs(&self) -> Result<Vec<RunRow>, StoreError>;
    fn request(&self, id: &RequestId) -> Result<Option<RequestRow>, StoreError>;
    fn requests(&self, status: Option<RequestStatus>) -> Result<Vec<RequestRow>, StoreError>;

    /// Audit records with `seq > after`, in order, at most `limit`.
    fn audit_records(&self, after: u64, limit: usize) -> Result<Vec<SealedRecord>, StoreError>;
    fn audit_head(&self) -> Result<ChainHead, StoreError>;
}
