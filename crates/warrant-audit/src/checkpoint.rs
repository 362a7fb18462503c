//! The signed checkpoint of a sink's copy: a small JSON file beside the copy
//! (`<file>.checkpoint`) saying "records 1..=seq were delivered here, the last one with this
//! hash", signed with the installation's key. A copy's lines alone cannot show that records
//! were cut from their end; against a checkpoint they can. Records past the checkpoint (written
//! after it) are fine. Limits: a removed checkpoint is seen only where one is required (the
//! installation's own sink) and until a delivery writes a new one (after checking the copy's
//! last record against the store); it proves nothing about records after it.

use std::ffi::OsString;
use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::Signature;
use serde::{Deserialize, Serialize};
use thiserror::Error;
use warrant_core::{Clock, Coded, Digest, canonical_json};

use crate::keys::sync_dir;
use crate::verify::verify_paths;
use crate::{AuditError, AuditKey, PublicKeys, VerifyReport};

/// The `type` of a checkpoint: what it is, so its signature cannot pass for a record's.
pub const CHECKPOINT_TYPE: &str = "dev.warrant.audit.checkpoint";
pub const CHECKPOINT_VERSION: u32 = 1;
/// Appended to a copy's file name to name its checkpoint.
pub const CHECKPOINT_SUFFIX: &str = ".checkpoint";

/// What a sink vouches for. `sig` is Ed25519, base64, over the RFC 8785 form of every other
/// field (`kid` included, so the key cannot be swapped for another trusted one).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    #[serde(rename = "type")]
    pub kind: String,
    pub version: u32,
    /// The installation id, as in the records' `source` (`warrant://<installation>`).
    pub installation: String,
    /// The last record delivered: the copy holds records 1..=seq.
    pub seq: u64,
    /// That record's `hash`.
    pub hash: String,
    /// Records the copy holds up to `seq`; a copy starts at the chain's first record, so this
    /// equals `seq`, and a checkpoint where it does not is malformed.
    pub count: u64,
    /// RFC 3339: when the checkpoint was written (the sink's clock, not a record's time).
    pub time: String,
    pub kid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sig: Option<String>,
}

impl Checkpoint {
    /// The bytes the signature covers: everything but `sig`, canonical.
    fn signed_bytes(&self) -> Result<String, serde_json::Error> {
        let unsigned = Self {
            sig: None,
            ..self.clone()
        };
        canonical_json(&unsigned)
    }
}

/// The checkpoint of the copy at `copy`: `<copy>.checkpoint`.
pub fn checkpoint_path(copy: &Path) -> PathBuf {
    let mut name = OsString::from(copy.as_os_str());
    name.push(CHECKPOINT_SUFFIX);
    PathBuf::from(name)
}

/// Why a copy is not proven complete up to its checkpoint, or the checkpoint is not to be
/// trusted. A finding of verification (like a broken chain), and the reason a delivery
/// refuses to append to a copy it can no longer vouch for.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum CheckpointError {
    #[error(
        "the sink copy's intact records end at record {last_seq}, but its signed checkpoint ({path}) says records up to {checkpoint_seq} were delivered: records {}..={checkpoint_seq} were removed from its end, or do not verify. Treat it as tampering; the store still holds them",
        last_seq + 1
    )]
    Truncated {
        path: PathBuf,
        checkpoint_seq: u64,
        last_seq: u64,
    },
    #[error(
        "the checkpoint {path} is not signed by a trusted key ({detail}); it was edited or forged. Treat it as tampering"
    )]
    Forged { path: PathBuf, detail: String },
    #[error("the checkpoint {path} is malformed ({reason}). Treat it as tampering")]
    Malformed { path: PathBuf, reason: String },
    #[error(
        "the copy's record {seq} has hash {found}, but the checkpoint {path} signed {signed}: the copy's records were replaced, or the checkpoint belongs to another chain. Treat it as tampering"
    )]
    Diverged {
        path: PathBuf,
        seq: u64,
        signed: String,
        found: String,
    },
    #[error(
        "the copy holds {records} records but has no checkpoint at {path}; records removed from its end could not be seen"
    )]
    Missing { path: PathBuf, records: u64 },
    #[error("cannot read the checkpoint {path}: {reason}")]
    Unreadable { path: PathBuf, reason: String },
}

impl Coded for CheckpointError {
    fn code(&self) -> &'static str {
        match self {
            Self::Truncated { .. } => "W-AUDIT-032",
            Self::Forged { .. } => "W-AUDIT-033",
            Self::Malformed { .. } => "W-AUDIT-034",
            Self::Diverged { .. } => "W-AUDIT-035",
            Self::Missing { .. } => "W-AUDIT-036",
            Self::Unreadable { .. } => "W-AUDIT-037",
        }
    }

    fn hint(&self) -> Option<warrant_core::Hint> {
        use warrant_core::Hint;
        match self {
            Self::Truncated { .. } => Some(Hint::RestoreCopy),
            Self::Forged { .. } | Self::Malformed { .. } => Some(Hint::VerifyCopy),
            Self::Missing { .. } => Some(Hint::WriteCheckpoint),
            Self::Diverged { .. } | Self::Unreadable { .. } => None,
        }
    }
}

/// Signs checkpoints for a sink, and reads back the one it wrote before.
pub struct Checkpointer {
    key: AuditKey,
    installation: String,
    clock: Arc<dyn Clock>,
    trusted: PublicKeys,
}

impl std::fmt::Debug for Checkpointer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpointer")
            .field("key", &self.key)
            .field("installation", &self.installation)
            .finish_non_exhaustive()
    }
}

impl Checkpointer {
    /// `trusted` are the keys an existing checkpoint may be signed with (after a key rotation,
    /// the retired ones); the signing key is always among them.
    pub fn new(
        key: AuditKey,
        installation: &str,
        clock: Arc<dyn Clock>,
        mut trusted: PublicKeys,
    ) -> Self {
        trusted.insert(key.verifying_key());
        Self {
            key,
            installation: installation.to_owned(),
            clock,
            trusted,
        }
    }

    pub fn trusted(&self) -> &PublicKeys {
        &self.trusted
    }

    /// The signed checkpoint for a copy holding records 1..=`seq`, the last with `hash`.
    pub fn sign(&self, seq: u64, hash: &str) -> Result<Checkpoint, serde_json::Error> {
        let mut checkpoint = Checkpoint {
            kind: CHECKPOINT_TYPE.to_owned(),
            version: CHECKPOINT_VERSION,
            installation: self.installation.clone(),
            seq,
            hash: hash.to_owned(),
            count: seq,
            time: self.clock.now().rfc3339(),
            kid: self.key.kid(),
            sig: None,
        };
        let signature = self.key.sign(checkpoint.signed_bytes()?.as_bytes());
        checkpoint.sig = Some(BASE64.encode(signature.to_bytes()));
        Ok(checkpoint)
    }

    /// Signs and writes the checkpoint at `path`: a temporary file beside it, fsynced, renamed
    /// over it, the directory fsynced. A reader sees the old checkpoint or the new one, never
    /// half of one. The caller has made the records it vouches for durable first.
    pub fn write(&self, path: &Path, seq: u64, hash: &str) -> Result<Checkpoint, AuditError> {
        let checkpoint = self.sign(seq, hash).map_err(|e| {
            AuditError::Checkpoint(CheckpointError::Malformed {
                path: path.to_path_buf(),
                reason: format!("cannot serialize it: {e}"),
            })
        })?;
        let text = serde_json::to_string(&checkpoint).map_err(|e| {
            AuditError::Checkpoint(CheckpointError::Malformed {
                path: path.to_path_buf(),
                reason: format!("cannot serialize it: {e}"),
            })
        })?;
        // One name per process: two deliverers never write into each other's temporary file.
        let mut temp = OsString::from(path.as_os_str());
        temp.push(format!(".{}.tmp", std::process::id()));
        let temp = PathBuf::from(temp);
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        write_synced(&temp, format!("{text}\n").as_bytes())
            .and_then(|()| fs::rename(&temp, path))
            .and_then(|()| sync_dir(&dir))
            .map_err(|e| AuditError::io("write the checkpoint", path, e))?;
        Ok(checkpoint)
    }
}

fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = fs::File::create(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Reads the checkpoint at `path` and checks its form and its signature under `keys`.
/// `Ok(None)` when there is none.
pub fn read_checkpoint(
    path: &Path,
    keys: &PublicKeys,
) -> Result<Option<Checkpoint>, CheckpointError> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(CheckpointError::Unreadable {
                path: path.to_path_buf(),
                reason: e.to_string(),
            });
        }
    };
    parse_checkpoint(path, &bytes, keys).map(Some)
}

/// A checkpoint's bytes (named `path` in errors), its signature checked with `keys`: what
/// [`read_checkpoint`] does once the file is read, for a checkpoint carried elsewhere (an
/// evidence bundle).
pub fn parse_checkpoint(
    path: &Path,
    bytes: &[u8],
    keys: &PublicKeys,
) -> Result<Checkpoint, CheckpointError> {
    let malformed = |reason: String| CheckpointError::Malformed {
        path: path.to_path_buf(),
        reason,
    };
    let forged = |detail: String| CheckpointError::Forged {
        path: path.to_path_buf(),
        detail,
    };
    let checkpoint: Checkpoint =
        serde_json::from_slice(bytes).map_err(|e| malformed(format!("not a checkpoint: {e}")))?;
    if checkpoint.kind != CHECKPOINT_TYPE || checkpoint.version != CHECKPOINT_VERSION {
        return Err(malformed(format!(
            "type {:?} version {}, expected {CHECKPOINT_TYPE:?} version {CHECKPOINT_VERSION}",
            checkpoint.kind, checkpoint.version
        )));
    }
    if checkpoint.seq == 0 {
        return Err(malformed(
            "seq 0: a checkpoint names a delivered record".into(),
        ));
    }
    if checkpoint.count != checkpoint.seq {
        return Err(malformed(format!(
            "count {} is not seq {}: a copy holds every record from the first",
            checkpoint.count, checkpoint.seq
        )));
    }
    if Digest::parse(&checkpoint.hash).is_none() {
        return Err(malformed("hash is not sha256:<64 hex>".into()));
    }
    let Some(sig) = &checkpoint.sig else {
        return Err(forged("it has no sig".into()));
    };
    let Some(key) = keys.get(&checkpoint.kid) else {
        return Err(forged(format!(
            "signed by key {}, which is not among the {} trusted keys",
            checkpoint.kid,
            keys.len()
        )));
    };
    let signature = BASE64
        .decode(sig)
        .ok()
        .and_then(|b| Signature::from_slice(&b).ok())
        .ok_or_else(|| forged("sig is not base64 of a 64-byte Ed25519 signature".into()))?;
    let signed = checkpoint
        .signed_bytes()
        .map_err(|e| malformed(format!("cannot canonicalize: {e}")))?;
    if key.verify_strict(signed.as_bytes(), &signature).is_err() {
        return Err(forged(format!(
            "the signature does not verify under key {}",
            checkpoint.kid
        )));
    }
    Ok(checkpoint)
}

/// Whether a copy must have a checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckpointRule {
    /// The installation's own sink: it writes one after every delivery, so a copy with
    /// records and no checkpoint had it removed.
    Required,
    /// A file handed over on its own (a rotated file, a receiver's copy): checked when there.
    IfPresent,
}

/// A copy's chain and its checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyReport {
    pub chain: VerifyReport,
    /// The checkpoint that holds (`None`: there is none, and none was required), or why the
    /// copy is not proven complete up to it.
    pub checkpoint: Result<Option<Checkpoint>, CheckpointError>,
}

impl CopyReport {
    pub fn is_ok(&self) -> bool {
        self.chain.is_ok() && self.checkpoint.is_ok()
    }
}

/// Verifies a copy's files in chain order (as [`crate::verify_files`]; `named` says whether
/// problems name their file) and the checkpoint at `checkpoint`: its signature, and that the
/// copy's intact records reach its seq, ending there in its hash. Only a failure to read the
/// copy is an error.
pub fn verify_copy(
    paths: &[PathBuf],
    named: bool,
    checkpoint: &Path,
    keys: &PublicKeys,
    rule: CheckpointRule,
) -> Result<CopyReport, AuditError> {
    let read = read_checkpoint(checkpoint, keys);
    let watch = read.as_ref().ok().and_then(|c| c.as_ref()).map(|c| c.seq);
    let (chain, at_seq) = verify_paths(paths, named, keys, watch)?;
    let checkpoint = match read {
        Err(e) => Err(e),
        Ok(None) => match rule {
            CheckpointRule::Required if chain.records > 0 || chain.first_problem.is_some() => {
                Err(CheckpointError::Missing {
                    path: checkpoint.to_path_buf(),
                    records: chain.records,
                })
            }
            CheckpointRule::Required | CheckpointRule::IfPresent => Ok(None),
        },
        Ok(Some(c)) => match at_seq {
            Some(found) if found == c.hash => Ok(Some(c)),
            Some(found) => Err(CheckpointError::Diverged {
                path: checkpoint.to_path_buf(),
                seq: c.seq,
                signed: c.hash,
                found,
            }),
            // Intact records run from seq 1 without a break, so their count is the last seq.
            None => Err(CheckpointError::Truncated {
                path: checkpoint.to_path_buf(),
                checkpoint_seq: c.seq,
                last_seq: chain.records,
            }),
        },
    };
    Ok(CopyReport { chain, checkpoint })
}
