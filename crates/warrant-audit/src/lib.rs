//! Versioned audit records, hash chain, Ed25519 signatures, the JSONL sink and verification.
//! The store calls [`InstallationSealer`] inside its append transaction; [`JsonlSink`] copies
//! the sealed lines out (rotating its files); `verify_*` checks any copy, one file or several;
//! keys rotate without orphaning old records; [`verify_run`] checks a run's journal against
//! its signed records; a [`Checkpoint`] beside a sink's copy proves it complete up to a signed
//! record; [`Sinks`] delivers the outbox to every sink and reports each one's [`SinkHealth`].
//! No policy decisions live here.

mod binding;
mod checkpoint;
mod delivery;
mod dsse;
mod error;
mod http;
mod keys;
mod record;
mod seal;
mod sink;
mod verify;

pub use binding::{
    BindingError, JournalReport, RunBinding, RunProblem, records_by_run, verify_run,
};
pub use checkpoint::{
    CHECKPOINT_SUFFIX, CHECKPOINT_TYPE, CHECKPOINT_VERSION, Checkpoint, CheckpointError,
    CheckpointRule, Checkpointer, CopyReport, checkpoint_path, parse_checkpoint, read_checkpoint,
    verify_copy,
};
pub use delivery::{Delivered, JSONL_SINK, Patience, SinkHealth, Sinks};
pub use dsse::{
    DsseError, Envelope, EnvelopeSignature, INTOTO_PAYLOAD_TYPE, STATEMENT_TYPE, SignedBy,
    Statement, Subject, pae,
};
pub use error::AuditError;
pub use http::{
    CHECKPOINT_HEADER, CLOUDEVENTS_BATCH, HttpDeliveryReport, HttpSink, HttpSinkConfig,
};
pub use keys::{
    AuditKey, PRIVATE_KEY_FILE, PUBLIC_KEY_FILE, PublicKeys, RETIRED_DIR, Rotation, kid_of,
};
pub use record::{
    ANCHOR_SCHEMA, ANCHOR_TYPE, AnchorData, AnchorRecord, AuditAction, AuditApproval, AuditData,
    AuditRecord, DATA_CONTENT_TYPE, DATA_SCHEMA_V1, DATA_SCHEMA_V2, Decision, GENESIS_HASH,
    RECORD_SCHEMA_V1, RECORD_SCHEMA_V2, RECORD_VERSION, SPEC_VERSION, TYPE_PREFIX, batch_end_of,
    chain_hash, closes_delivery, event_digest, event_type, is_anchor_line,
};
pub use seal::InstallationSealer;
pub use sink::{DEFAULT_BATCH, DeliveryReport, FsyncPolicy, JsonlSink};
pub use verify::{
    Problem, ProblemKind, VerifyReport, verify_file, verify_files, verify_lines, verify_sealed,
};
