//! The JSONL file sink: appends the store's sealed lines in seq order, fsyncing each batch.
//! The file itself is the delivery cursor (its last record's `seq`), read from the tail only,
//! so delivery is idempotent and crash-safe. Limits: one deliverer per file (no lock), no
//! rotation yet.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use warrant_store::AuditOutbox;

use crate::AuditError;
use crate::keys::sync_dir;

pub const DEFAULT_BATCH: usize = 500;
const TAIL_CHUNK: u64 = 8 * 1024;
/// No record line is this long; a tail without a line end within it is not a JSONL file.
const MAX_LINE: usize = 64 * 1024 * 1024;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonlSink {
    path: PathBuf,
    batch: usize,
}

/// What one delivery did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryReport {
    /// The last seq in the file before this delivery (0 for a new file).
    pub from_seq: u64,
    /// Records appended.
    pub delivered: u64,
    /// The last seq in the file after this delivery.
    pub to_seq: u64,
    /// Bytes of a torn final line (a write cut short by a crash) removed before appending.
    pub repaired_bytes: u64,
}

/// Where the file's complete lines end, and its last complete line.
struct Tail {
    complete_len: u64,
    last_line: Option<Vec<u8>>,
}

impl JsonlSink {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            batch: DEFAULT_BATCH,
        }
    }

    /// Records fetched from the store (and fsynced) per round; at least 1.
    pub fn with_batch(mut self, batch: usize) -> Self {
        self.batch = batch.max(1);
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends every record the store has past the file's last one. A torn final line (no
    /// newline) is cut away first: it was never delivered, and the store still has it.
    pub fn deliver(&self, store: &dyn AuditOutbox) -> Result<DeliveryReport, AuditError> {
        let path = &self.path;
        let mut file = self.open()?;
        let len = file
            .metadata()
            .map_err(|e| AuditError::io("read the size of", path, e))?
            .len();
        let tail = read_tail(&mut file, len)
            .map_err(|e| AuditError::io("read", path, e))?
            .ok_or_else(|| AuditError::SinkCorrupt {
                path: path.clone(),
                reason: format!("no line end in its last {MAX_LINE} bytes"),
            })?;
        let repaired_bytes = len - tail.complete_len;
        if repaired_bytes > 0 {
            file.set_len(tail.complete_len)
                .and_then(|()| file.sync_data())
                .map_err(|e| AuditError::io("cut the torn last line of", path, e))?;
        }
        let from_seq = match &tail.last_line {
            None => 0,
            Some(line) => last_seq(line).map_err(|reason| AuditError::SinkCorrupt {
                path: path.clone(),
                reason,
            })?,
        };
        let head = store.audit_head()?;
        if from_seq > head.seq {
            return Err(AuditError::SinkAhead {
                path: path.clone(),
                sink_seq: from_seq,
                store_seq: head.seq,
            });
        }
        let mut last = from_seq;
        let mut delivered = 0u64;
        loop {
            let records = store.audit_records(last, self.batch)?;
            if records.is_empty() {
                break;
            }
            let mut buf = String::new();
            let mut expected = last + 1;
            for record in &records {
                if record.seq != expected {
                    return Err(AuditError::StoreGap {
                        path: path.clone(),
                        after: last,
                        expected,
                        found: record.seq,
                    });
                }
                if record.line.contains('\n') {
                    return Err(AuditError::SinkCorrupt {
                        path: path.clone(),
                        reason: format!("the store's record {} spans several lines", record.seq),
                    });
                }
                buf.push_str(&record.line);
                buf.push('\n');
                expected += 1;
            }
            // One write and one fsync per batch: a crash leaves whole lines plus at most one
            // torn line, which the next delivery cuts away.
            file.write_all(buf.as_bytes())
                .and_then(|()| file.sync_data())
                .map_err(|e| AuditError::io("append to", path, e))?;
            last = expected - 1;
            delivered += records.len() as u64;
        }
        if last < head.seq {
            // The head only grows, so records it counted must have been served.
            return Err(AuditError::StoreShort {
                path: path.clone(),
                to_seq: last,
                head_seq: head.seq,
            });
        }
        Ok(DeliveryReport {
            from_seq,
            delivered,
            to_seq: last,
            repaired_bytes,
        })
    }

    fn open(&self) -> Result<File, AuditError> {
        let path = &self.path;
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
        if let Some(dir) = parent {
            fs::create_dir_all(dir).map_err(|e| AuditError::io("create the directory", dir, e))?;
        }
        let existed = path.exists();
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .map_err(|e| AuditError::io("open", path, e))?;
        if !existed && let Some(dir) = parent {
            // A new file's directory entry must be durable too, or a crash can lose the file
            // with everything fsynced into it.
            sync_dir(dir).map_err(|e| AuditError::io("sync the directory", dir, e))?;
        }
        Ok(file)
    }
}

/// Reads backwards from the end, a chunk at a time, until the last complete line is in hand.
/// `None` when no line ends within [`MAX_LINE`] bytes, rather than reading a huge file whole.
fn read_tail(file: &mut File, len: u64) -> io::Result<Option<Tail>> {
    let mut start = len;
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = TAIL_CHUNK;
    loop {
        if let Some(end) = buf.iter().rposition(|b| *b == b'\n') {
            let before = &buf[..end];
            if let Some(prev) = before.iter().rposition(|b| *b == b'\n') {
                return Ok(Some(Tail {
                    complete_len: start + end as u64 + 1,
                    last_line: Some(before[prev + 1..].to_vec()),
                }));
            }
            if start == 0 {
                return Ok(Some(Tail {
                    complete_len: end as u64 + 1,
                    last_line: Some(before.to_vec()),
                }));
            }
        } else if start == 0 {
            return Ok(Some(Tail {
                complete_len: 0,
                last_line: None,
            }));
        }
        if buf.len() > MAX_LINE {
            return Ok(None);
        }
        let n = chunk.min(start);
        start -= n;
        file.seek(SeekFrom::Start(start))?;
        let mut piece = vec![0u8; usize::try_from(n).unwrap_or(usize::MAX)];
        file.read_exact(&mut piece)?;
        piece.extend_from_slice(&buf);
        buf = piece;
        // Long lines are rare; doubling keeps the re-copying linear.
        chunk = chunk.saturating_mul(2);
    }
}

fn last_seq(line: &[u8]) -> Result<u64, String> {
    let value: Value = serde_json::from_slice(line).map_err(|e| format!("not JSON: {e}"))?;
    value
        .get("seq")
        .and_then(Value::as_u64)
        .ok_or_else(|| "it has no numeric seq".to_owned())
}
