//! The errors of the audit room, each with a stable `W-AUDIT-NNN` code.
//! Verification findings are not errors: a broken chain is a [`crate::VerifyReport`], because
//! "the trail was tampered with" is an answer, not a failure to answer.

use std::io;
use std::path::PathBuf;

use thiserror::Error;
use warrant_core::Coded;
use warrant_store::StoreError;

use crate::CheckpointError;

#[derive(Debug, Error)]
pub enum AuditError {
    #[error(
        "no audit key at {path}; restore it from a backup of .warrant/keys/ (a new key would not verify the existing trail)"
    )]
    KeyMissing { path: PathBuf },
    #[error("the audit key file {path} is malformed: {reason}; restore it from backup")]
    KeyMalformed { path: PathBuf, reason: String },
    #[error(
        "the audit private key {path} is readable by group or others (mode {mode:o}); refusing to load it. Run `chmod 600 {path}` and check who may have copied it"
    )]
    KeyPermissions { path: PathBuf, mode: u32 },
    #[error(
        "an audit key already exists at {path}; refusing to overwrite it, because records signed with it could no longer be verified. Move it aside first"
    )]
    KeyExists { path: PathBuf },
    #[error(
        "the audit public key {public} does not belong to the private key {private}; one of them was replaced. Restore the pair from backup"
    )]
    KeyMismatch { private: PathBuf, public: PathBuf },
    #[error("cannot {op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the public key list {path} is malformed at line {line}: {reason}")]
    PublicKeysMalformed {
        path: PathBuf,
        line: u64,
        reason: String,
    },
    #[error("reading audit records from the store failed: {0}")]
    Store(#[from] StoreError),
    #[error(
        "the last record of the sink file {path} cannot be read ({reason}); nothing was appended"
    )]
    SinkCorrupt { path: PathBuf, reason: String },
    #[error(
        "the sink file {path} ends at record {sink_seq} but the store's chain ends at {store_seq}; it belongs to another store or the store was replaced. Nothing was appended"
    )]
    SinkAhead {
        path: PathBuf,
        sink_seq: u64,
        store_seq: u64,
    },
    #[error(
        "the store returned audit record {found} where {expected} was due; its outbox has a gap. Nothing past record {after} was appended to {path}"
    )]
    StoreGap {
        path: PathBuf,
        after: u64,
        expected: u64,
        found: u64,
    },
    #[error(
        "the store's audit chain ends at record {head_seq} but it served records only up to {to_seq}; {path} holds everything up to {to_seq}"
    )]
    StoreShort {
        path: PathBuf,
        to_seq: u64,
        head_seq: u64,
    },
    #[error("cannot seal the audit record: {0}")]
    Seal(String),
    #[error(
        "the audit sink {sink} refused a batch with status {status} ({body}); records up to {acknowledged} were delivered, the rest stay in the outbox. Fix what the receiver objects to (URL, credentials, size limit); delivery resumes from there"
    )]
    SinkRejected {
        sink: String,
        status: u16,
        body: String,
        acknowledged: u64,
    },
    #[error(
        "the audit sink {sink} did not take a batch after {attempts} attempts (last: {reason}); records up to {acknowledged} were delivered, the rest stay in the outbox and the next delivery retries them"
    )]
    SinkUnreachable {
        sink: String,
        attempts: u32,
        reason: String,
        acknowledged: u64,
    },
    #[error(
        "cannot send to the audit sink {sink}: {reason}; check its URL and headers. Records up to {acknowledged} were delivered"
    )]
    SinkMisconfigured {
        sink: String,
        reason: String,
        acknowledged: u64,
    },
    #[error(
        "the store returned audit record {found} where {expected} was due; its outbox has a gap. Nothing past record {after} was sent to the audit sink {sink}"
    )]
    OutboxGap {
        sink: String,
        after: u64,
        expected: u64,
        found: u64,
    },
    #[error(
        "the retired public key {path} holds a different key than the one it is named for; it was edited or replaced. Nothing was rotated. Restore it from backup (its kid must be its file name)"
    )]
    RetiredKeyConflict { path: PathBuf },
    #[error(
        "rotating the sink file {current} would overwrite {rotated}, which already holds records {first}..={last}; the sink repeats records it has rotated away. Nothing was appended"
    )]
    RotatedExists {
        current: PathBuf,
        rotated: PathBuf,
        first: u64,
        last: u64,
    },
    #[error(
        "audit record {seq} (for the sink file {path}) has no usable `time` ({reason}), which rotation by age needs; nothing past the previous record was appended"
    )]
    RecordTime {
        path: PathBuf,
        seq: u64,
        reason: String,
    },
    /// The sink's checkpoint does not hold, or says more was delivered than the copy has;
    /// the delivery appended nothing.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
}

impl Coded for AuditError {
    fn code(&self) -> &'static str {
        match self {
            Self::KeyMissing { .. } => "W-AUDIT-001",
            Self::KeyMalformed { .. } => "W-AUDIT-002",
            Self::KeyPermissions { .. } => "W-AUDIT-003",
            Self::KeyExists { .. } => "W-AUDIT-004",
            Self::KeyMismatch { .. } => "W-AUDIT-005",
            Self::Io { .. } => "W-AUDIT-006",
            Self::PublicKeysMalformed { .. } => "W-AUDIT-007",
            Self::Store(_) => "W-AUDIT-008",
            Self::SinkCorrupt { .. } => "W-AUDIT-009",
            Self::SinkAhead { .. } => "W-AUDIT-010",
            Self::StoreGap { .. } => "W-AUDIT-011",
            Self::Seal(_) => "W-AUDIT-012",
            Self::StoreShort { .. } => "W-AUDIT-013",
            Self::SinkRejected { .. } => "W-AUDIT-014",
            Self::SinkUnreachable { .. } => "W-AUDIT-015",
            Self::SinkMisconfigured { .. } => "W-AUDIT-016",
            Self::OutboxGap { .. } => "W-AUDIT-017",
            Self::RetiredKeyConflict { .. } => "W-AUDIT-024",
            Self::RotatedExists { .. } => "W-AUDIT-025",
            Self::RecordTime { .. } => "W-AUDIT-026",
            Self::Checkpoint(e) => e.code(),
        }
    }

    fn hint(&self) -> Option<warrant_core::Hint> {
        use warrant_core::Hint;
        match self {
            Self::SinkCorrupt { .. } => Some(Hint::VerifySinkCopy),
            Self::StoreShort { .. } => Some(Hint::VerifyStore),
            Self::RotatedExists { .. } => Some(Hint::VerifyBothCopies),
            Self::RecordTime { .. } => Some(Hint::Verify),
            Self::Checkpoint(e) => e.hint(),
            Self::KeyMissing { .. }
            | Self::KeyMalformed { .. }
            | Self::KeyPermissions { .. }
            | Self::KeyExists { .. }
            | Self::KeyMismatch { .. }
            | Self::Io { .. }
            | Self::PublicKeysMalformed { .. }
            | Self::Store(_)
            | Self::SinkAhead { .. }
            | Self::StoreGap { .. }
            | Self::Seal(_)
            | Self::SinkRejected { .. }
            | Self::SinkUnreachable { .. }
            | Self::SinkMisconfigured { .. }
            | Self::OutboxGap { .. }
            | Self::RetiredKeyConflict { .. } => None,
        }
    }
}

impl AuditError {
    /// How far a delivery that stopped early got: the last seq the sink acknowledged, for the
    /// caller to record as that sink's cursor. `None` for errors that are not about a delivery
    /// that made (or kept) progress.
    pub fn acknowledged(&self) -> Option<u64> {
        match self {
            Self::SinkRejected { acknowledged, .. }
            | Self::SinkUnreachable { acknowledged, .. }
            | Self::SinkMisconfigured { acknowledged, .. } => Some(*acknowledged),
            Self::OutboxGap { after, .. } => Some(*after),
            Self::KeyMissing { .. }
            | Self::KeyMalformed { .. }
            | Self::KeyPermissions { .. }
            | Self::KeyExists { .. }
            | Self::KeyMismatch { .. }
            | Self::Io { .. }
            | Self::PublicKeysMalformed { .. }
            | Self::Store(_)
            | Self::SinkCorrupt { .. }
            | Self::SinkAhead { .. }
            | Self::StoreGap { .. }
            | Self::StoreShort { .. }
            | Self::Seal(_)
            | Self::RetiredKeyConflict { .. }
            | Self::RotatedExists { .. }
            | Self::RecordTime { .. }
            | Self::Checkpoint(_) => None,
        }
    }

    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Self::Io {
            op,
            path: path.into(),
            source,
        }
    }
}
