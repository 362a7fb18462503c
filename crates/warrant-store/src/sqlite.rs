//! The embedded default store: one SQLite file in the workspace's `.warrant/`. WAL mode with
//! `synchronous=FULL`, so an append that returned survives a power cut. Every append is one
//! `BEGIN IMMEDIATE` transaction covering the events, the run and request indexes and the
//! audit outbox records, so they can never disagree.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, Transaction, params};
use serde_json::Value;
use warrant_core::{Clock, RequestId, RunId, Timestamp};

use crate::{
    Append, AuditIndex, AuditOutbox, AuditQuery, CancelRequest, ChainHead, EventDraft, EventStore,
    FenceRejection, Lease, NewRun, RequestRow, RequestStatus, RequestUpdate, RunRow, RunStatus,
    SealedRecord, Sealer, SinkState, StoreError, StoredEvent,
};

/// The schema this build writes, in SQLite and PostgreSQL alike (the same steps). Older stores
/// are migrated forward on open; newer are refused.
pub const SCHEMA_VERSION: u32 = 3;

const GENESIS: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

const SCHEMA_V1: &str = "
CREATE TABLE runs (
    run_id     TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    actor      TEXT NOT NULL,
    task       TEXT NOT NULL,
    status     TEXT NOT NULL,
    events     INTEGER NOT NULL
);
CREATE TABLE events (
    run_id      TEXT NOT NULL REFERENCES runs(run_id),
    seq         INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    version     INTEGER NOT NULL,
    recorded_at INTEGER NOT NULL,
    payload     TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE requests (
    request_id TEXT PRIMARY KEY,
    run_id     TEXT NOT NULL REFERENCES runs(run_id),
    status     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    summary    TEXT NOT NULL
);
CREATE INDEX requests_by_status ON requests(status, created_at);
CREATE TABLE audit (
    seq       INTEGER PRIMARY KEY,
    record_id TEXT NOT NULL UNIQUE,
    hash      TEXT NOT NULL,
    line      TEXT NOT NULL
);
";

/// Version 2: leases with fencing tokens, cancellation, and the record of fenced appends.
const SCHEMA_V2: &str = "
ALTER TABLE runs ADD COLUMN lease_holder TEXT;
ALTER TABLE runs ADD COLUMN lease_token INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN lease_expires INTEGER;
ALTER TABLE runs ADD COLUMN cancel_by TEXT;
ALTER TABLE runs ADD COLUMN cancel_reason TEXT;
ALTER TABLE runs ADD COLUMN cancel_at INTEGER;
CREATE INDEX runs_by_status ON runs(status, created_at);
CREATE TABLE fence_rejections (
    run_id    TEXT NOT NULL REFERENCES runs(run_id),
    presented INTEGER NOT NULL,
    current   INTEGER NOT NULL,
    at        INTEGER NOT NULL,
    kinds     TEXT NOT NULL
);
";

/// Version 3: per-sink delivery state, and audit records indexed for queries (older records
/// are indexed from their lines as the migration runs).
const SCHEMA_V3: &str = "
CREATE TABLE sink_state (
    sink            TEXT PRIMARY KEY,
    acknowledged    INTEGER NOT NULL DEFAULT 0,
    delivered_total INTEGER NOT NULL DEFAULT 0,
    first_success   INTEGER,
    last_success    INTEGER,
    last_error      TEXT,
    last_error_at   INTEGER,
    failing_since   INTEGER
);
ALTER TABLE audit ADD COLUMN at INTEGER;
ALTER TABLE audit ADD COLUMN run_id TEXT;
ALTER TABLE audit ADD COLUMN actor TEXT;
ALTER TABLE audit ADD COLUMN on_behalf_of TEXT;
ALTER TABLE audit ADD COLUMN event TEXT;
ALTER TABLE audit ADD COLUMN verb TEXT;
ALTER TABLE audit ADD COLUMN resource TEXT;
ALTER TABLE audit ADD COLUMN decision TEXT;
UPDATE audit SET
    at = CAST(round((julianday(json_extract(line, '$.time')) - 2440587.5) * 86400000) AS INTEGER),
    run_id = json_extract(line, '$.data.run'),
    actor = json_extract(line, '$.data.actor'),
    on_behalf_of = json_extract(line, '$.data.on_behalf_of'),
    event = json_extract(line, '$.data.event'),
    verb = coalesce(json_extract(line, '$.data.action.verb'), json_extract(line, '$.data.action[0].verb')),
    resource = json_extract(line, '$.data.resource'),
    decision = json_extract(line, '$.data.decision');
CREATE INDEX audit_by_run ON audit(run_id, seq);
CREATE INDEX audit_by_actor ON audit(actor, decision, seq);
CREATE INDEX audit_by_at ON audit(at);
";

/// Each step takes the schema from version `i` to `i + 1`.
const MIGRATIONS: [&str; 3] = [SCHEMA_V1, SCHEMA_V2, SCHEMA_V3];

pub struct SqliteStore {
    path: PathBuf,
    conn: Mutex<Connection>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish()
    }
}

impl SqliteStore {
    /// Creates a new store file (and its schema). Fails if the file exists.
    pub fn create(path: &Path, clock: Arc<dyn Clock>) -> Result<Self, StoreError> {
        if path.exists() {
            return Err(StoreError::Open {
                path: path.display().to_string(),
                message: "a store already exists there".into(),
            });
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
        )
        .map_err(|e| open_err(path, &e))?;
        let store = Self::configure(path, conn, clock)?;
        store.migrate()?;
        Ok(store)
    }

    /// Opens an existing store, migrating an older schema forward and refusing a newer one.
    pub fn open(path: &Path, clock: Arc<dyn Clock>) -> Result<Self, StoreError> {
        if !path.exists() {
            return Err(StoreError::Open {
                path: path.display().to_string(),
                message: "no store there; run `warrant init` in the workspace first".into(),
            });
        }
        let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE)
            .map_err(|e| open_err(path, &e))?;
        let store = Self::configure(path, conn, clock)?;
        store.migrate()?;
        Ok(store)
    }

    fn configure(path: &Path, conn: Connection, clock: Arc<dyn Clock>) -> Result<Self, StoreError> {
        let p = path.display().to_string();
        let wrap = |e: rusqlite::Error| classify(&p, e);
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(wrap)?;
        // Reading the header first: a file that is not SQLite fails here, before any write.
        let _: i64 = conn
            .query_row("PRAGMA schema_version", [], |r| r.get(0))
            .map_err(wrap)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(wrap)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(wrap)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(wrap)?;
        Ok(Self {
            path: path.to_owned(),
            conn: Mutex::new(conn),
            clock,
        })
    }

    fn migrate(&self) -> Result<(), StoreError> {
        let p = self.path.display().to_string();
        let mut conn = self.lock();
        let version: u32 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| classify(&p, e))?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                path: p,
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        if version == 0 {
            // A fresh file, or one that is SQLite but not ours.
            let tables: i64 = conn
                .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
                .map_err(|e| classify(&p, e))?;
            if tables > 0 {
                return Err(StoreError::Corrupt {
                    path: p,
                    message: "SQLite file without a Warrant schema version".into(),
                });
            }
        }
        if version < SCHEMA_VERSION {
            // Older stores are migrated forward, one step per version, in one transaction.
            let tx = conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(|e| classify(&p, e))?;
            for step in &MIGRATIONS[version as usize..] {
                tx.execute_batch(step).map_err(|e| classify(&p, e))?;
            }
            tx.pragma_update(None, "user_version", SCHEMA_VERSION)
                .map_err(|e| classify(&p, e))?;
            tx.commit().map_err(|e| classify(&p, e))?;
        }
        // Check the shape we expect is really there (a truncated or foreign file).
        conn.query_row(
            "SELECT count(*), max(lease_token) FROM runs JOIN events USING (run_id) LIMIT 1",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map_err(|e| StoreError::Corrupt {
            path: p.clone(),
            message: e.to_string(),
        })?;
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A poisoned lock only means another thread panicked mid-call; SQLite rolled back its
        // transaction, so the connection is still consistent.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, e: rusqlite::Error) -> StoreError {
        classify(&self.path.display().to_string(), e)
    }

    /// Takes the lease of `run` inside `tx`: refused while another holder's lease is live.
    fn take_lease(
        &self,
        tx: &Transaction<'_>,
        run: &RunId,
        holder: &str,
        ttl: Duration,
        now: Timestamp,
    ) -> Result<Lease, StoreError> {
        let row: Option<(String, Option<String>, i64, Option<i64>)> = tx
            .query_row(
                "SELECT status, lease_holder, lease_token, lease_expires FROM runs WHERE run_id = ?1",
                [run.as_str()],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        let (status, current_holder, _token, expires) =
            row.ok_or_else(|| StoreError::UnknownRun(run.to_string()))?;
        let status = RunStatus::parse(&status).unwrap_or(RunStatus::Failed);
        if status.is_final() {
            return Err(StoreError::Final {
                run: run.to_string(),
                status: status.as_str().to_owned(),
            });
        }
        if let (Some(other), Some(until)) = (&current_holder, expires)
            && until > now.millis()
        {
            return Err(StoreError::Leased {
                run: run.to_string(),
                holder: other.clone(),
                until: Timestamp::from_millis(until)
                    .map(|t| t.rfc3339())
                    .unwrap_or_default(),
            });
        }
        // Tokens are unique across the store (the transaction is IMMEDIATE, so no other writer
        // interleaves), so a token of one run never passes for another run's.
        let token: i64 = tx
            .query_row(
                "SELECT coalesce(max(lease_token), 0) + 1 FROM runs",
                [],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))?;
        let token = token as u64;
        let expires = now.millis() + ttl.as_millis() as i64;
        tx.execute(
            "UPDATE runs SET lease_holder = ?2, lease_token = ?3, lease_expires = ?4, status = CASE status WHEN 'queued' THEN 'running' ELSE status END WHERE run_id = ?1",
            params![run.as_str(), holder, token as i64, expires],
        )
        .map_err(|e| self.err(e))?;
        Ok(Lease {
            run: run.clone(),
            holder: holder.to_owned(),
            token,
            expires_at: Timestamp::from_millis(expires).unwrap_or(now),
        })
    }

    fn insert_events(
        &self,
        tx: &Transaction<'_>,
        run: &RunId,
        first_seq: u64,
        events: Vec<EventDraft>,
        sealer: &dyn Sealer,
        now: Timestamp,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let mut stored = Vec::with_capacity(events.len());
        let mut head = audit_head(tx).map_err(|e| self.err(e))?;
        for (i, draft) in events.into_iter().enumerate() {
            let event = StoredEvent {
                run: run.clone(),
                seq: first_seq + i as u64,
                kind: draft.kind,
                version: draft.version,
                recorded_at: now,
                payload: draft.payload,
            };
            tx.execute(
                "INSERT INTO events (run_id, seq, kind, version, recorded_at, payload) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    run.as_str(),
                    event.seq as i64,
                    event.kind,
                    event.version,
                    now.millis(),
                    event.payload.to_string()
                ],
            )
            .map_err(|e| self.err(e))?;
            let record = sealer
                .seal(&head, &event, &draft.audit)
                .map_err(StoreError::Seal)?;
            if record.seq != head.seq + 1 {
                return Err(StoreError::Seal(format!(
                    "sealer returned seq {} after head {}",
                    record.seq, head.seq
                )));
            }
            let ix = AuditIndex::of(&record.line);
            tx.execute(
                "INSERT INTO audit (seq, record_id, hash, line, at, run_id, actor, on_behalf_of, event, verb, resource, decision) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                params![
                    record.seq as i64,
                    record.id,
                    record.hash,
                    record.line,
                    ix.at,
                    ix.run,
                    ix.actor,
                    ix.on_behalf_of,
                    ix.event,
                    ix.verb,
                    ix.resource,
                    ix.decision
                ],
            )
            .map_err(|e| self.err(e))?;
            head = ChainHead {
                seq: record.seq,
                hash: record.hash,
            };
            stored.push(event);
        }
        Ok(stored)
    }
}

fn audit_head(tx: &Transaction<'_>) -> rusqlite::Result<ChainHead> {
    Ok(tx
        .query_row(
            "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
            [],
            |r| {
                Ok(ChainHead {
                    seq: r.get::<_, i64>(0)? as u64,
                    hash: r.get(1)?,
                })
            },
        )
        .optional()?
        .unwrap_or_else(|| ChainHead {
            seq: 0,
            hash: GENESIS.to_owned(),
        }))
}

fn open_err(path: &Path, e: &rusqlite::Error) -> StoreError {
    StoreError::Open {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// Corruption and "not a database" are their own error: the user's next step differs.
fn classify(path: &str, e: rusqlite::Error) -> StoreError {
    let corrupt = matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase)
    );
    if corrupt {
        StoreError::Corrupt {
            path: path.to_owned(),
            message: e.to_string(),
        }
    } else {
        StoreError::Query(format!("{e} (store {path})"))
    }
}

fn bad(col: usize, what: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(col, rusqlite::types::Type::Text, what.into())
}

fn ts(col: usize, ms: i64) -> rusqlite::Result<Timestamp> {
    Timestamp::from_millis(ms).ok_or_else(|| bad(col, format!("timestamp {ms} out of range")))
}

fn run_id(col: usize, s: &str) -> rusqlite::Result<RunId> {
    RunId::parse(s).ok_or_else(|| bad(col, format!("malformed run id {s:?}")))
}

fn json(col: usize, s: &str) -> rusqlite::Result<Value> {
    serde_json::from_str(s).map_err(|e| bad(col, format!("malformed JSON: {e}")))
}

fn row_to_event(r: &rusqlite::Row<'_>) -> rusqlite::Result<StoredEvent> {
    Ok(StoredEvent {
        run: run_id(0, &r.get::<_, String>(0)?)?,
        seq: r.get::<_, i64>(1)? as u64,
        kind: r.get(2)?,
        version: r.get(3)?,
        recorded_at: ts(4, r.get(4)?)?,
        payload: json(5, &r.get::<_, String>(5)?)?,
    })
}

fn row_to_run(r: &rusqlite::Row<'_>) -> rusqlite::Result<RunRow> {
    let status: String = r.get(5)?;
    Ok(RunRow {
        run: run_id(0, &r.get::<_, String>(0)?)?,
        created_at: ts(1, r.get(1)?)?,
        updated_at: ts(2, r.get(2)?)?,
        actor: r.get(3)?,
        task: r.get(4)?,
        status: RunStatus::parse(&status)
            .ok_or_else(|| bad(5, format!("unknown status {status:?}")))?,
        events: r.get::<_, i64>(6)? as u64,
    })
}

fn row_to_request(r: &rusqlite::Row<'_>) -> rusqlite::Result<RequestRow> {
    let id: String = r.get(0)?;
    let status: String = r.get(2)?;
    Ok(RequestRow {
        id: RequestId::parse(&id).ok_or_else(|| bad(0, format!("malformed request id {id:?}")))?,
        run: run_id(1, &r.get::<_, String>(1)?)?,
        status: match status.as_str() {
            "open" => RequestStatus::Open,
            "answered" => RequestStatus::Answered,
            other => return Err(bad(2, format!("unknown request status {other:?}"))),
        },
        created_at: ts(3, r.get(3)?)?,
        summary: json(4, &r.get::<_, String>(4)?)?,
    })
}

impl EventStore for SqliteStore {
    fn create_run(
        &self,
        run: &NewRun,
        events: Vec<EventDraft>,
        sealer: &dyn Sealer,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let now = self.clock.now();
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| self.err(e))?;
        let exists: bool = tx
            .query_row(
                "SELECT 1 FROM runs WHERE run_id = ?1",
                [run.run.as_str()],
                |_| Ok(true),
            )
            .optional()
            .map_err(|e| self.err(e))?
            .unwrap_or(false);
        if exists {
            return Err(StoreError::RunExists {
                run: run.run.to_string(),
            });
        }
        let count = events.len() as i64;
        tx.execute(
            "INSERT INTO runs (run_id, created_at, updated_at, actor, task, status, events) VALUES (?1, ?2, ?2, ?3, ?4, ?5, ?6)",
            params![run.run.as_str(), now.millis(), run.actor, run.task, run.status.as_str(), count],
        )
        .map_err(|e| self.err(e))?;
        let stored = self.insert_events(&tx, &run.run, 1, events, sealer, now)?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(stored)
    }

    fn append(&self, append: Append, sealer: &dyn Sealer) -> Result<Vec<StoredEvent>, StoreError> {
        let Append {
            run,
            expected_seq,
            events,
            status,
            requests,
            fence,
        } = append;
        let now = self.clock.now();
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| self.err(e))?;
        let current: Option<(i64, i64)> = tx
            .query_row(
                "SELECT events, lease_token FROM runs WHERE run_id = ?1",
                [run.as_str()],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        let (current, token) = current.ok_or_else(|| StoreError::UnknownRun(run.to_string()))?;
        let (current, token) = (current as u64, token as u64);
        if let Some(presented) = fence
            && presented != token
        {
            drop(tx);
            let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
            conn.execute(
                "INSERT INTO fence_rejections (run_id, presented, current, at, kinds) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![run.as_str(), presented as i64, token as i64, now.millis(), serde_json::to_string(&kinds).unwrap_or_default()],
            )
            .map_err(|e| self.err(e))?;
            return Err(StoreError::Fenced {
                run: run.to_string(),
                presented,
                current: token,
            });
        }
        if expected_seq != current + 1 {
            return Err(StoreError::Conflict {
                run: run.to_string(),
                expected: expected_seq,
                found: current + 1,
            });
        }
        let added = events.len() as u64;
        let stored = self.insert_events(&tx, &run, expected_seq, events, sealer, now)?;
        tx.execute(
            "UPDATE runs SET events = ?2, updated_at = ?3, status = COALESCE(?4, status) WHERE run_id = ?1",
            params![
                run.as_str(),
                (current + added) as i64,
                now.millis(),
                status.map(RunStatus::as_str)
            ],
        )
        .map_err(|e| self.err(e))?;
        for update in requests {
            match update {
                RequestUpdate::Open { id, summary } => tx.execute(
                    "INSERT INTO requests (request_id, run_id, status, created_at, summary) VALUES (?1, ?2, 'open', ?3, ?4)",
                    params![id.as_str(), run.as_str(), now.millis(), summary.to_string()],
                ),
                RequestUpdate::Answered { id } => tx.execute(
                    "UPDATE requests SET status = 'answered' WHERE request_id = ?1",
                    [id.as_str()],
                ),
            }
            .map_err(|e| self.err(e))?;
        }
        tx.commit().map_err(|e| self.err(e))?;
        Ok(stored)
    }

    fn events(&self, run: &RunId) -> Result<Vec<StoredEvent>, StoreError> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached(
                "SELECT run_id, seq, kind, version, recorded_at, payload FROM events WHERE run_id = ?1 ORDER BY seq",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([run.as_str()], row_to_event)
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    fn run(&self, run: &RunId) -> Result<Option<RunRow>, StoreError> {
        let conn = self.lock();
        conn.query_row(
            "SELECT run_id, created_at, updated_at, actor, task, status, events FROM runs WHERE run_id = ?1",
            [run.as_str()],
            row_to_run,
        )
        .optional()
        .map_err(|e| self.err(e))
    }

    fn runs(&self) -> Result<Vec<RunRow>, StoreError> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached(
                "SELECT run_id, created_at, updated_at, actor, task, status, events FROM runs ORDER BY created_at, run_id",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt.query_map([], row_to_run).map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    fn request(&self, id: &RequestId) -> Result<Option<RequestRow>, StoreError> {
        let conn = self.lock();
        conn.query_row(
            "SELECT request_id, run_id, status, created_at, summary FROM requests WHERE request_id = ?1",
            [id.as_str()],
            row_to_request,
        )
        .optional()
        .map_err(|e| self.err(e))
    }

    fn requests(&self, status: Option<RequestStatus>) -> Result<Vec<RequestRow>, StoreError> {
        let conn = self.lock();
        let filter = status.map(|s| match s {
            RequestStatus::Open => "open",
            RequestStatus::Answered => "answered",
        });
        let mut stmt = conn
            .prepare_cached(
                "SELECT request_id, run_id, status, created_at, summary FROM requests WHERE ?1 IS NULL OR status = ?1 ORDER BY created_at, request_id",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([filter], row_to_request)
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    fn lease_run(&self, run: &RunId, holder: &str, ttl: Duration) -> Result<Lease, StoreError> {
        let now = self.clock.now();
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| self.err(e))?;
        let lease = self.take_lease(&tx, run, holder, ttl, now)?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(lease)
    }

    fn lease_next(&self, holder: &str, ttl: Duration) -> Result<Option<Lease>, StoreError> {
        let now = self.clock.now();
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| self.err(e))?;
        let next: Option<String> = tx
            .query_row(
                "SELECT run_id FROM runs WHERE status = 'queued' OR (status = 'running' AND lease_expires IS NOT NULL AND lease_expires <= ?1) ORDER BY created_at, run_id LIMIT 1",
                [now.millis()],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        let Some(next) = next else {
            return Ok(None);
        };
        let run = run_id(0, &next).map_err(|e| self.err(e))?;
        let lease = self.take_lease(&tx, &run, holder, ttl, now)?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(Some(lease))
    }

    fn heartbeat(&self, lease: &Lease, ttl: Duration) -> Result<Lease, StoreError> {
        let now = self.clock.now();
        let expires = now.millis() + ttl.as_millis() as i64;
        let conn = self.lock();
        let changed = conn
            .execute(
                "UPDATE runs SET lease_expires = ?4 WHERE run_id = ?1 AND lease_token = ?2 AND lease_holder = ?3",
                params![lease.run.as_str(), lease.token as i64, lease.holder, expires],
            )
            .map_err(|e| self.err(e))?;
        if changed == 0 {
            let current: i64 = conn
                .query_row(
                    "SELECT lease_token FROM runs WHERE run_id = ?1",
                    [lease.run.as_str()],
                    |r| r.get(0),
                )
                .optional()
                .map_err(|e| self.err(e))?
                .ok_or_else(|| StoreError::UnknownRun(lease.run.to_string()))?;
            return Err(StoreError::Fenced {
                run: lease.run.to_string(),
                presented: lease.token,
                current: current as u64,
            });
        }
        Ok(Lease {
            expires_at: Timestamp::from_millis(expires).unwrap_or(now),
            ..lease.clone()
        })
    }

    fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let conn = self.lock();
        conn.execute(
            "UPDATE runs SET lease_holder = NULL, lease_expires = 0 WHERE run_id = ?1 AND lease_token = ?2",
            params![lease.run.as_str(), lease.token as i64],
        )
        .map_err(|e| self.err(e))?;
        Ok(())
    }

    fn break_lease(&self, run: &RunId, holder: &str) -> Result<bool, StoreError> {
        let conn = self.lock();
        let changed = conn
            .execute(
                "UPDATE runs SET lease_expires = 0 WHERE run_id = ?1 AND lease_holder = ?2",
                params![run.as_str(), holder],
            )
            .map_err(|e| self.err(e))?;
        Ok(changed > 0)
    }

    fn sink_state(&self, sink: &str) -> Result<SinkState, StoreError> {
        let conn = self.lock();
        let row = conn
            .query_row(
                "SELECT acknowledged, delivered_total, last_success, last_error, last_error_at, failing_since, first_success FROM sink_state WHERE sink = ?1",
                [sink],
                |r| {
                    let opt_ts = |i: usize| -> rusqlite::Result<Option<Timestamp>> {
                        r.get::<_, Option<i64>>(i)?.map(|ms| ts(i, ms)).transpose()
                    };
                    Ok(SinkState {
                        sink: sink.to_owned(),
                        acknowledged: r.get::<_, i64>(0)? as u64,
                        delivered_total: r.get::<_, i64>(1)? as u64,
                        last_success: opt_ts(2)?,
                        last_error: r.get(3)?,
                        last_error_at: opt_ts(4)?,
                        failing_since: opt_ts(5)?,
                        first_success: opt_ts(6)?,
                    })
                },
            )
            .optional()
            .map_err(|e| self.err(e))?;
        Ok(row.unwrap_or_else(|| SinkState {
            sink: sink.to_owned(),
            ..SinkState::default()
        }))
    }

    fn record_delivery(
        &self,
        sink: &str,
        acknowledged: u64,
        delivered: u64,
    ) -> Result<(), StoreError> {
        let now = self.clock.now().millis();
        self.lock()
            .execute(
                "INSERT INTO sink_state (sink, acknowledged, delivered_total, first_success, last_success) VALUES (?1, ?2, ?3, ?4, ?4)
                 ON CONFLICT(sink) DO UPDATE SET acknowledged = max(acknowledged, ?2), delivered_total = delivered_total + ?3, first_success = coalesce(first_success, ?4), last_success = ?4, failing_since = NULL",
                params![sink, acknowledged as i64, delivered as i64, now],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    fn record_delivery_failure(
        &self,
        sink: &str,
        acknowledged: u64,
        error: &str,
    ) -> Result<(), StoreError> {
        let now = self.clock.now().millis();
        self.lock()
            .execute(
                "INSERT INTO sink_state (sink, acknowledged, last_error, last_error_at, failing_since) VALUES (?1, ?2, ?3, ?4, ?4)
                 ON CONFLICT(sink) DO UPDATE SET acknowledged = max(acknowledged, ?2), last_error = ?3, last_error_at = ?4, failing_since = coalesce(failing_since, ?4)",
                params![sink, acknowledged as i64, error, now],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    fn query_audit(&self, q: &AuditQuery) -> Result<Vec<SealedRecord>, StoreError> {
        let limit = if q.limit == 0 {
            i64::MAX
        } else {
            q.limit as i64
        };
        let (texts, times) = q.values();
        let sql = format!(
            "SELECT seq, record_id, hash, line FROM audit {} ORDER BY seq LIMIT {limit}",
            q.clause(|n| format!("?{n}"))
        );
        let mut values: Vec<&dyn rusqlite::ToSql> = Vec::new();
        for t in &texts {
            values.push(t);
        }
        for t in &times {
            values.push(t);
        }
        let conn = self.lock();
        let mut stmt = conn.prepare_cached(&sql).map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(values.as_slice(), |r| {
                Ok(SealedRecord {
                    seq: r.get::<_, i64>(0)? as u64,
                    id: r.get(1)?,
                    hash: r.get(2)?,
                    line: r.get(3)?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    fn fence_rejections(&self, run: &RunId) -> Result<Vec<FenceRejection>, StoreError> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached("SELECT run_id, presented, current, at, kinds FROM fence_rejections WHERE run_id = ?1 ORDER BY at, rowid")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([run.as_str()], |r| {
                Ok(FenceRejection {
                    run: run_id(0, &r.get::<_, String>(0)?)?,
                    presented: r.get::<_, i64>(1)? as u64,
                    current: r.get::<_, i64>(2)? as u64,
                    at: ts(3, r.get(3)?)?,
                    kinds: serde_json::from_str(&r.get::<_, String>(4)?)
                        .map_err(|e| bad(4, format!("malformed kinds: {e}")))?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    fn request_cancel(&self, run: &RunId, by: &str, reason: &str) -> Result<(), StoreError> {
        let now = self.clock.now();
        let conn = self.lock();
        let found = conn
            .execute(
                "UPDATE runs SET cancel_by = COALESCE(cancel_by, ?2), cancel_reason = COALESCE(cancel_reason, ?3), cancel_at = COALESCE(cancel_at, ?4) WHERE run_id = ?1",
                params![run.as_str(), by, reason, now.millis()],
            )
            .map_err(|e| self.err(e))?;
        if found == 0 {
            return Err(StoreError::UnknownRun(run.to_string()));
        }
        Ok(())
    }

    fn cancel_request(&self, run: &RunId) -> Result<Option<CancelRequest>, StoreError> {
        let conn = self.lock();
        let row: Option<(Option<String>, Option<String>, Option<i64>)> = conn
            .query_row(
                "SELECT cancel_by, cancel_reason, cancel_at FROM runs WHERE run_id = ?1",
                [run.as_str()],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        match row {
            None => Err(StoreError::UnknownRun(run.to_string())),
            Some((Some(by), Some(reason), Some(at))) => Ok(Some(CancelRequest {
                by,
                reason,
                at: ts(2, at).map_err(|e| self.err(e))?,
            })),
            Some(_) => Ok(None),
        }
    }
}

impl AuditOutbox for SqliteStore {
    fn audit_records(&self, after: u64, limit: usize) -> Result<Vec<SealedRecord>, StoreError> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached(
                "SELECT seq, record_id, hash, line FROM audit WHERE seq > ?1 ORDER BY seq LIMIT ?2",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![after as i64, limit as i64], |r| {
                Ok(SealedRecord {
                    seq: r.get::<_, i64>(0)? as u64,
                    id: r.get(1)?,
                    hash: r.get(2)?,
                    line: r.get(3)?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    fn audit_head(&self) -> Result<ChainHead, StoreError> {
        let mut conn = self.lock();
        let tx = conn.transaction().map_err(|e| self.err(e))?;
        let head = audit_head(&tx).map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(head)
    }
}
