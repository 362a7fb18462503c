//! Where shared memory lives: the drafts agents propose and the entries people publish from
//! them, per tenant. Two backends: this workspace's memory database ([`crate::MemoryStore`],
//! the default, one tenant: the workspace's) and PostgreSQL ([`crate::PgShared`], namespaces as
//! rows of each tenant, searched through `tsvector`). What a review must find (the draft still
//! open, saying what the reviewer saw) and what a published entry records are decided here,
//! once, for both.

use serde_json::{Value, json};
use warrant_core::Digest;

use crate::{Draft, DraftStatus, Entry, Found, MemoryError, Provenance};

/// A person's decision on a draft (publish or reject), or on a published entry (retract).
#[derive(Clone, Copy, Debug)]
pub struct Review<'a> {
    /// The draft (publish, reject) or the entry (retract).
    pub id: &'a str,
    /// The digest the reviewer was shown (publish, reject).
    pub seen: &'a Digest,
    pub reviewer: &'a str,
    pub reason: &'a str,
    /// RFC 3339.
    pub at: &'a str,
    /// The run that records the decision.
    pub run: Option<&'a str>,
}

/// The store of shared memory. Every method names the tenant it acts for (from the principal
/// of the run or of the person); a backend that keeps one tenant only may ignore it.
pub trait SharedStore: Send + Sync + std::fmt::Debug {
    /// `local` or `postgres`, for messages and `doctor`.
    fn backend(&self) -> &'static str;

    /// Records a draft (keyed by `id`: proposing the same id again changes nothing); returns
    /// its digest.
    fn propose(
        &self,
        tenant: &str,
        id: &str,
        namespace: &str,
        text: &str,
        tags: &[String],
        provenance: &Provenance,
    ) -> Result<Digest, MemoryError>;

    /// One draft of the tenant.
    fn draft(&self, tenant: &str, id: &str) -> Result<Option<Draft>, MemoryError>;

    /// The tenant's drafts, newest first; only open ones unless `all`.
    fn drafts(&self, tenant: &str, all: bool) -> Result<Vec<Draft>, MemoryError>;

    /// Publishes the draft as reviewed, in one transaction with the draft's decision. A draft
    /// this reviewer already published returns its entry (a replay); any other decided draft,
    /// or one whose text changed, is refused.
    fn publish(&self, tenant: &str, review: &Review<'_>) -> Result<Entry, MemoryError>;

    /// Rejects the open draft as reviewed.
    fn reject(&self, tenant: &str, review: &Review<'_>) -> Result<Draft, MemoryError>;

    /// Withdraws a published entry: kept, marked with who withdrew it, when and why, and no
    /// longer recalled or listed. Withdrawing it again returns it as it is.
    fn retract(&self, tenant: &str, review: &Review<'_>) -> Result<Entry, MemoryError>;

    /// The published entries of a namespace matching any of `terms`, best first.
    fn recall(
        &self,
        tenant: &str,
        namespace: &str,
        terms: &[String],
        limit: u32,
    ) -> Result<Vec<Found>, MemoryError>;

    /// One published entry of the tenant (withdrawn ones too).
    fn entry(&self, tenant: &str, id: &str) -> Result<Option<Entry>, MemoryError>;

    /// The tenant's newest published entries (not withdrawn), optionally of one namespace.
    fn entries(
        &self,
        tenant: &str,
        namespace: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Entry>, MemoryError>;
}

/// The id of the entry a draft becomes.
pub(crate) fn entry_id(draft: &str) -> String {
    format!("pub-{draft}")
}

/// The draft as a review must find it: saying what the reviewer saw and what was proposed.
pub(crate) fn check_digest(draft: Draft, seen: &Digest) -> Result<Draft, MemoryError> {
    if draft.current_digest != *seen || draft.digest != *seen {
        let now = if draft.current_digest == draft.digest {
            draft.current_digest.to_string()
        } else {
            format!(
                "{} (edited since it was proposed as {})",
                draft.current_digest, draft.digest
            )
        };
        return Err(MemoryError::DraftChanged {
            id: draft.id,
            now,
            seen: seen.to_string(),
        });
    }
    Ok(draft)
}

/// What a review of `draft` may do: `Ok(true)` decide it now, `Ok(false)` it is a replay of
/// this reviewer's own decision `replay`, `Err` it was decided otherwise.
pub(crate) fn may_decide(
    draft: &Draft,
    reviewer: &str,
    replay: DraftStatus,
) -> Result<bool, MemoryError> {
    match draft.status {
        DraftStatus::Open => Ok(true),
        s @ (DraftStatus::Published | DraftStatus::Rejected)
            if s == replay && draft.reviewer.as_deref() == Some(reviewer) =>
        {
            Ok(false)
        }
        s @ (DraftStatus::Published | DraftStatus::Rejected) => Err(MemoryError::DraftDecided {
            id: draft.id.clone(),
            status: s.as_str().to_owned(),
        }),
    }
}

/// What a published entry records of its draft and its review.
pub(crate) fn publication(draft: &Draft, review: &Review<'_>) -> Value {
    json!({
        "draft": draft.id,
        "proposer": draft.provenance.actor,
        "proposed_for": draft.provenance.on_behalf_of,
        "proposed_in": draft.provenance.run,
        "proposed_at": draft.provenance.at,
        "proposal_digest": draft.digest,
        "reviewer": review.reviewer,
        "reviewed_digest": review.seen,
        "reviewed_in": review.run,
        "reason": review.reason,
    })
}

/// What a withdrawn entry records of its withdrawal.
pub(crate) fn retraction(review: &Review<'_>) -> Value {
    json!({
        "by": review.reviewer,
        "reason": review.reason,
        "at": review.at,
        "run": review.run,
    })
}
