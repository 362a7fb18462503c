//! The JSONL file sink: appends the store's sealed lines in seq order, fsyncing each batch
//! (unless told not to), and rotates the file by size or age into
//! `<stem>-<first seq>-<last seq>.jsonl` beside it. The files themselves are the delivery
//! cursor (the current file's last record, else the newest rotated file's name), so delivery
//! is idempotent and crash-safe. With a [`Checkpointer`], every batch made durable is vouched
//! for by a signed checkpoint beside the current file, and a copy shorter than its checkpoint
//! is refused rather than silently refilled. Limits: one deliverer per file (no lock).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use warrant_core::Timestamp;
use warrant_store::{AuditOutbox, SealedRecord};

use crate::keys::sync_dir;
use crate::record::{closes_delivery, whole_batches};
use crate::{
    AuditError, Checkpoint, CheckpointError, Checkpointer, checkpoint_path, read_checkpoint,
};

pub const DEFAULT_BATCH: usize = 500;
const TAIL_CHUNK: u64 = 8 * 1024;
/// No record line is this long; a tail without a line end within it is not a JSONL file.
const MAX_LINE: usize = 64 * 1024 * 1024;
/// Seq numbers in rotated file names are zero-padded to this many digits, so names sort.
const SEQ_DIGITS: usize = 12;

/// When the sink forces appended lines to disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FsyncPolicy {
    /// `fsync` after each batch, before the next is fetched: a crash loses nothing the sink
    /// reported as delivered.
    #[default]
    EveryBatch,
    /// Leave it to the operating system: faster, and a crash may lose the last lines written
    /// (the next delivery writes them again, since the file is the cursor). Directory entries
    /// of new and rotated files are still synced.
    Never,
}

#[derive(Clone, Debug)]
pub struct JsonlSink {
    path: PathBuf,
    batch: usize,
    max_bytes: Option<u64>,
    max_age: Option<Duration>,
    fsync: FsyncPolicy,
    checkpointer: Option<Arc<Checkpointer>>,
    turns: bool,
}

/// What one delivery did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryReport {
    /// The last seq delivered before this delivery (0 for a new sink).
    pub from_seq: u64,
    /// Records appended.
    pub delivered: u64,
    /// The last seq delivered after this delivery.
    pub to_seq: u64,
    /// Bytes of a torn final line (a write cut short by a crash) removed before appending.
    pub repaired_bytes: u64,
    /// Files this delivery rotated the current file into, oldest first.
    #[serde(default)]
    pub rotated: Vec<PathBuf>,
}

/// Where the file's complete lines end, and its last complete line.
struct Tail {
    complete_len: u64,
    last_line: Option<Vec<u8>>,
}

/// The current file as far as rotation cares.
#[derive(Default)]
struct Current {
    /// Seq and time of its first record; `None` while it is empty.
    first: Option<(u64, Option<Timestamp>)>,
    len: u64,
}

/// A rotated file, by what its name says it holds.
struct Rotated {
    first: u64,
    last: u64,
    path: PathBuf,
}

impl JsonlSink {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            batch: DEFAULT_BATCH,
            max_bytes: None,
            max_age: None,
            fsync: FsyncPolicy::default(),
            checkpointer: None,
            turns: true,
        }
    }

    /// Whether deliveries take turns on [`JsonlSink::lock_path`] (the default). Off only to
    /// show, in a test, what the turns prevent.
    pub fn with_turns(mut self, turns: bool) -> Self {
        self.turns = turns;
        self
    }

    /// Records fetched from the store (and fsynced) per round; at least 1.
    pub fn with_batch(mut self, batch: usize) -> Self {
        self.batch = batch.max(1);
        self
    }

    /// Rotates the current file before a record that would take it past `max_bytes`, or whose
    /// `time` is more than `max_age` after the file's first record. Age is judged on record
    /// times, not the wall clock, so the same chain always splits into the same files and an
    /// idle file is rotated only when the next record arrives. A record longer than
    /// `max_bytes` gets a file of its own.
    pub fn with_rotation(mut self, max_bytes: Option<u64>, max_age: Option<Duration>) -> Self {
        self.max_bytes = max_bytes;
        self.max_age = max_age;
        self
    }

    pub fn with_fsync(mut self, policy: FsyncPolicy) -> Self {
        self.fsync = policy;
        self
    }

    /// Writes a signed checkpoint ([`JsonlSink::checkpoint_path`]) once the records it names
    /// are durable: after each batch under [`FsyncPolicy::EveryBatch`], at the end of a
    /// delivery (after one fsync) under [`FsyncPolicy::Never`]. A checkpoint never names a
    /// record a crash could still take from the file, so a file that ends before its
    /// checkpoint was cut, and delivery refuses to append to it.
    pub fn with_checkpoint(mut self, checkpointer: Checkpointer) -> Self {
        self.checkpointer = Some(Arc::new(checkpointer));
        self
    }

    /// The signer of this sink's checkpoints, which other sinks vouch for their copies with.
    pub fn checkpointer(&self) -> Option<&Arc<Checkpointer>> {
        self.checkpointer.as_ref()
    }

    /// Whether this sink writes (and so must have) a checkpoint.
    pub fn has_checkpoint(&self) -> bool {
        self.checkpointer.is_some()
    }

    /// The current file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the checkpoint of this sink's copy is: beside the current file, covering the
    /// rotated files as well.
    pub fn checkpoint_path(&self) -> PathBuf {
        checkpoint_path(&self.path)
    }

    /// Every file of this sink in chain order: the rotated files by seq, then the current
    /// file if it exists. What [`crate::verify_files`] takes.
    pub fn files(&self) -> Result<Vec<PathBuf>, AuditError> {
        let mut files: Vec<PathBuf> = self.rotated()?.into_iter().map(|r| r.path).collect();
        if self.path.exists() {
            files.push(self.path.clone());
        }
        Ok(files)
    }

    /// Appends every record the store has past the sink's last one. A torn final line (no
    /// newline) is cut away first: it was never delivered, and the store still has it.
    ///
    /// Deliveries of one copy take turns (an exclusive lock on [`Self::lock_path`]): every
    /// process of the installation (a run, each worker, `audit flush`) delivers after what it
    /// appends, and two that read the same last line would otherwise both append what follows
    /// it.
    pub fn deliver(&self, store: &dyn AuditOutbox) -> Result<DeliveryReport, AuditError> {
        let _turn = if self.turns {
            Some(self.take_turn()?)
        } else {
            None
        };
        let path = &self.path;
        // Read before the file: a checkpoint is written only after its records, so whatever it
        // names is already in the file read next, even while another delivery appends.
        let signed = match &self.checkpointer {
            Some(c) => read_checkpoint(&self.checkpoint_path(), c.trusted())?,
            None => None,
        };
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
                .and_then(|()| self.sync(&file))
                .map_err(|e| AuditError::io("cut the torn last line of", path, e))?;
        }
        let corrupt = |reason: String| AuditError::SinkCorrupt {
            path: path.clone(),
            reason,
        };
        let (from_seq, mut current) = match &tail.last_line {
            // An empty current file continues from the newest rotated one.
            None => (
                self.rotated()?.last().map_or(0, |r| r.last),
                Current::default(),
            ),
            Some(line) => {
                let last = line_seq(line).map_err(corrupt)?;
                let first = read_head(&mut file)
                    .map_err(|e| AuditError::io("read", path, e))?
                    .ok_or_else(|| corrupt(format!("no line end in its first {MAX_LINE} bytes")))?;
                let seq = line_seq(&first).map_err(|r| corrupt(format!("its first line: {r}")))?;
                let time = match self.max_age {
                    None => None,
                    Some(_) => {
                        Some(line_time(&first).map_err(|reason| AuditError::RecordTime {
                            path: path.clone(),
                            seq,
                            reason,
                        })?)
                    }
                };
                (
                    last,
                    Current {
                        first: Some((seq, time)),
                        len: tail.complete_len,
                    },
                )
            }
        };
        if let Some(signed) = &signed {
            self.still_holds(signed, from_seq, tail.last_line.as_deref())?;
        }
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
        let mut last_hash = String::new();
        let mut rotated = Vec::new();
        let mut inside_batch = false;
        loop {
            let records = whole_batches(store, last, self.batch)?;
            if records.is_empty() {
                break;
            }
            let mut buf = String::new();
            for record in &records {
                let expected = last + 1;
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
                let time = match self.max_age {
                    None => None,
                    Some(_) => Some(self.record_time(record)?),
                };
                let line_len = record.line.len() as u64 + 1;
                // A file never ends inside a batch: each rotated file verifies on its own.
                if let Some((first, first_time)) = current.first
                    && !inside_batch
                    && self.is_due(current.len + buf.len() as u64, line_len, first_time, time)
                {
                    // Whole lines only: what is buffered belongs to the file being closed.
                    self.append(&mut file, &buf)?;
                    buf.clear();
                    let (next, done) = self.rotate(file, first, last)?;
                    file = next;
                    rotated.push(done);
                    current = Current::default();
                }
                if current.first.is_none() {
                    current.first = Some((record.seq, time));
                }
                buf.push_str(&record.line);
                buf.push('\n');
                inside_batch = !closes_delivery(&record.line);
                last = record.seq;
                delivered += 1;
            }
            self.append(&mut file, &buf)?;
            current.len += buf.len() as u64;
            if let Some(record) = records.last() {
                last_hash.clone_from(&record.hash);
            }
            if let (Some(c), FsyncPolicy::EveryBatch) = (&self.checkpointer, self.fsync) {
                c.write(&self.checkpoint_path(), last, &last_hash)?;
            }
        }
        if let Some(c) = &self.checkpointer
            && last > 0
        {
            if delivered == 0 {
                if signed.as_ref().is_none_or(|s| s.seq < last) {
                    self.vouch(c, store, &file, last, tail.last_line.as_deref())?;
                }
            } else if self.fsync == FsyncPolicy::Never {
                file.sync_data()
                    .map_err(|e| AuditError::io("sync", path, e))?;
                c.write(&self.checkpoint_path(), last, &last_hash)?;
            }
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
            rotated,
        })
    }

    /// A checkpoint read before this delivery must still describe the copy: the copy reaches
    /// its seq (`from_seq` is where the copy ends), and where they end together, in its hash.
    fn still_holds(
        &self,
        signed: &Checkpoint,
        from_seq: u64,
        last_line: Option<&[u8]>,
    ) -> Result<(), AuditError> {
        let path = self.checkpoint_path();
        if signed.seq > from_seq {
            return Err(CheckpointError::Truncated {
                path,
                checkpoint_seq: signed.seq,
                last_seq: from_seq,
            }
            .into());
        }
        if signed.seq == from_seq
            && let Some(line) = last_line
        {
            let found = line_hash(line).map_err(|reason| AuditError::SinkCorrupt {
                path: self.path.clone(),
                reason,
            })?;
            if found != signed.hash {
                return Err(CheckpointError::Diverged {
                    path,
                    seq: signed.seq,
                    signed: signed.hash.clone(),
                    found,
                }
                .into());
            }
        }
        Ok(())
    }

    /// A checkpoint for records an earlier delivery wrote but did not vouch for (a crash
    /// between the two, or a copy older than checkpoints): written only when the file's last
    /// record is the store's record of that seq, and after making the file durable.
    fn vouch(
        &self,
        checkpointer: &Checkpointer,
        store: &dyn AuditOutbox,
        file: &File,
        last: u64,
        last_line: Option<&[u8]>,
    ) -> Result<(), AuditError> {
        let record = store
            .audit_records(last - 1, 1)?
            .into_iter()
            .next()
            .filter(|r| r.seq == last)
            .ok_or_else(|| AuditError::StoreShort {
                path: self.path.clone(),
                to_seq: last - 1,
                head_seq: last,
            })?;
        let on_disk = match last_line {
            Some(line) => Some(line.to_vec()),
            None => self.newest_rotated_tail()?,
        };
        let found = on_disk
            .as_deref()
            .map(line_hash)
            .transpose()
            .map_err(|reason| AuditError::SinkCorrupt {
                path: self.path.clone(),
                reason,
            })?;
        if found.as_deref() != Some(record.hash.as_str()) {
            return Err(AuditError::SinkCorrupt {
                path: self.path.clone(),
                reason: format!(
                    "its last record {last} has hash {}, but the store's record {last} has {}; no checkpoint was written",
                    found.unwrap_or_else(|| "(none)".into()),
                    record.hash
                ),
            });
        }
        file.sync_data()
            .map_err(|e| AuditError::io("sync", &self.path, e))?;
        checkpointer.write(&self.checkpoint_path(), last, &record.hash)?;
        Ok(())
    }

    /// The last line of the newest rotated file, when the current file is empty.
    fn newest_rotated_tail(&self) -> Result<Option<Vec<u8>>, AuditError> {
        let Some(newest) = self.rotated()?.pop() else {
            return Ok(None);
        };
        let mut file =
            File::open(&newest.path).map_err(|e| AuditError::io("open", &newest.path, e))?;
        let len = file
            .metadata()
            .map_err(|e| AuditError::io("read the size of", &newest.path, e))?
            .len();
        let tail =
            read_tail(&mut file, len).map_err(|e| AuditError::io("read", &newest.path, e))?;
        Ok(tail.and_then(|t| t.last_line))
    }

    /// Whether a line of `line_len` bytes (and record time `time`) must start a new file.
    fn is_due(
        &self,
        current_len: u64,
        line_len: u64,
        first_time: Option<Timestamp>,
        time: Option<Timestamp>,
    ) -> bool {
        let too_big = self
            .max_bytes
            .is_some_and(|max| current_len.saturating_add(line_len) > max);
        let too_old = match (self.max_age, first_time, time) {
            (Some(age), Some(first), Some(now)) => {
                let elapsed =
                    u128::try_from(now.millis().saturating_sub(first.millis())).unwrap_or_default();
                elapsed > age.as_millis()
            }
            _ => false,
        };
        too_big || too_old
    }

    fn record_time(&self, record: &SealedRecord) -> Result<Timestamp, AuditError> {
        line_time(record.line.as_bytes()).map_err(|reason| AuditError::RecordTime {
            path: self.path.clone(),
            seq: record.seq,
            reason,
        })
    }

    /// One write per batch (and one fsync, by policy): a crash leaves whole lines plus at most
    /// one torn line, which the next delivery cuts away.
    fn append(&self, file: &mut File, buf: &str) -> Result<(), AuditError> {
        if buf.is_empty() {
            return Ok(());
        }
        file.write_all(buf.as_bytes())
            .and_then(|()| self.sync(file))
            .map_err(|e| AuditError::io("append to", &self.path, e))
    }

    fn sync(&self, file: &File) -> io::Result<()> {
        match self.fsync {
            FsyncPolicy::EveryBatch => file.sync_data(),
            FsyncPolicy::Never => Ok(()),
        }
    }

    /// Renames the current file (holding `first..=last`) to its rotated name and starts an
    /// empty current file. Between the two a crash leaves no current file, which delivery
    /// reads as "continue after the newest rotated file".
    fn rotate(&self, file: File, first: u64, last: u64) -> Result<(File, PathBuf), AuditError> {
        // A rotated file is closed for good: durable before it is renamed, whatever the policy,
        // so a checkpoint written later never names records a crash could take from it.
        file.sync_data()
            .map_err(|e| AuditError::io("sync", &self.path, e))?;
        drop(file);
        let dir = self.dir();
        let target = dir.join(format!(
            "{}-{first:0w$}-{last:0w$}.jsonl",
            self.stem(),
            w = SEQ_DIGITS
        ));
        if target.exists() {
            return Err(AuditError::RotatedExists {
                current: self.path.clone(),
                rotated: target,
                first,
                last,
            });
        }
        fs::rename(&self.path, &target)
            .and_then(|()| sync_dir(&dir))
            .map_err(|e| AuditError::io("rotate the sink file to", &target, e))?;
        Ok((self.open()?, target))
    }

    fn dir(&self) -> PathBuf {
        self.path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
    }

    fn stem(&self) -> String {
        self.path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// The rotated files beside the current one, in seq order. A missing directory has none.
    fn rotated(&self) -> Result<Vec<Rotated>, AuditError> {
        let dir = self.dir();
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(AuditError::io("list", &dir, e)),
        };
        let prefix = format!("{}-", self.stem());
        let mut found = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| AuditError::io("list", &dir, e))?;
            let name = entry.file_name();
            let Some(range) = name
                .to_str()
                .and_then(|n| n.strip_prefix(&prefix))
                .and_then(|rest| rest.strip_suffix(".jsonl"))
            else {
                continue;
            };
            if let Some((first, last)) = parse_range(range) {
                found.push(Rotated {
                    first,
                    last,
                    path: entry.path(),
                });
            }
        }
        found.sort_by_key(|r| (r.first, r.last));
        Ok(found)
    }

    /// The file whose lock serializes deliveries to this copy: beside it, never rotated.
    pub fn lock_path(&self) -> PathBuf {
        let mut name = self.path.file_name().unwrap_or_default().to_os_string();
        name.push(".lock");
        self.path.with_file_name(name)
    }

    /// Waits for this process's turn to append to the copy; the turn ends when the returned
    /// file is dropped (the lock goes with the descriptor, so a killed process gives it back).
    fn take_turn(&self) -> Result<File, AuditError> {
        let dir = self.dir();
        fs::create_dir_all(&dir).map_err(|e| AuditError::io("create the directory", &dir, e))?;
        let path = self.lock_path();
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| AuditError::io("open", &path, e))?;
        file.lock().map_err(|e| AuditError::io("lock", &path, e))?;
        Ok(file)
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
        if !existed {
            // A new file's directory entry must be durable too, or a crash can lose the file
            // with everything fsynced into it.
            let dir = self.dir();
            sync_dir(&dir).map_err(|e| AuditError::io("sync the directory", &dir, e))?;
        }
        Ok(file)
    }
}

/// `<first>-<last>`, both at least [`SEQ_DIGITS`] digits, first <= last.
fn parse_range(range: &str) -> Option<(u64, u64)> {
    let (first, last) = range.split_once('-')?;
    let seq = |s: &str| {
        (s.len() >= SEQ_DIGITS && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<u64>().ok())
            .flatten()
    };
    let (first, last) = (seq(first)?, seq(last)?);
    (first <= last).then_some((first, last))
}

/// The first line of the file (without its newline); `None` when no line ends within
/// [`MAX_LINE`] bytes.
fn read_head(file: &mut File) -> io::Result<Option<Vec<u8>>> {
    file.seek(SeekFrom::Start(0))?;
    let mut line = Vec::new();
    let mut chunk = vec![0u8; usize::try_from(TAIL_CHUNK).unwrap_or(8192)];
    loop {
        let n = file.read(&mut chunk)?;
        if n == 0 {
            return Ok(None);
        }
        if let Some(end) = chunk[..n].iter().position(|b| *b == b'\n') {
            line.extend_from_slice(&chunk[..end]);
            return Ok(Some(line));
        }
        line.extend_from_slice(&chunk[..n]);
        if line.len() > MAX_LINE {
            return Ok(None);
        }
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

/// A line's outbox position: its `pos` (a partitioned store's records and anchors), else its
/// `seq` (an unpartitioned chain, where the two are the same).
fn line_seq(line: &[u8]) -> Result<u64, String> {
    let value: Value = serde_json::from_slice(line).map_err(|e| format!("not JSON: {e}"))?;
    value
        .get("pos")
        .or_else(|| value.get("seq"))
        .and_then(Value::as_u64)
        .ok_or_else(|| "it has no numeric seq".to_owned())
}

fn line_hash(line: &[u8]) -> Result<String, String> {
    let value: Value = serde_json::from_slice(line).map_err(|e| format!("not JSON: {e}"))?;
    value
        .get("hash")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| "its last record has no hash".to_owned())
}

fn line_time(line: &[u8]) -> Result<Timestamp, String> {
    let value: Value = serde_json::from_slice(line).map_err(|e| format!("not JSON: {e}"))?;
    let time = value
        .get("time")
        .and_then(Value::as_str)
        .ok_or_else(|| "no time attribute".to_owned())?;
    Timestamp::parse(time).ok_or_else(|| format!("time {time:?} is not RFC 3339"))
}
