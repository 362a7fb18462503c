//! Where a published entry of shared memory goes besides this workspace's store: a backend
//! (an Apache Iceberg table, in `warrant-iceberg`) that other agents and people read. The
//! publish executor hands each published entry to the sink after the store kept it; a sink
//! makes a repeated append of the same entry a no-op, since replay may run a publish twice.

use serde::Serialize;
use serde_json::Value;

/// A published entry with its provenance, as a shared backend stores it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Published {
    pub entry_id: String,
    pub namespace: String,
    pub text: String,
    pub tags: Vec<String>,
    /// Who proposed it (the agent), and for whom.
    pub author: String,
    pub on_behalf_of: Option<String>,
    /// The run that proposed it.
    pub run: Option<String>,
    /// Who reviewed and published it, in which run, when (RFC 3339), and why.
    pub publisher: String,
    pub publish_run: Option<String>,
    pub published_at: String,
    pub reason: String,
    /// `sha256:` of the text, and of the draft as reviewed.
    pub content_digest: String,
    pub draft: String,
    pub draft_digest: String,
}

/// A shared-memory backend a published entry is appended to.
pub trait SharedSink: Send + Sync + std::fmt::Debug {
    /// Appends `entry` (once: appending it again returns what the first append did). `Ok` is
    /// what the audit trail should name (e.g. the table and its snapshot id); `Err` is a coded
    /// error, `(code, message)`.
    fn append(&self, entry: &Published) -> Result<Value, (String, String)>;
}
