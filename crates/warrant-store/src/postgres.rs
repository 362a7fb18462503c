//! The shared store: one PostgreSQL database that several machines work from. Every append is
//! one transaction that first takes an installation-wide advisory lock, so the audit chain is
//! sealed in commit order across writers; workers lease runs with `FOR UPDATE SKIP LOCKED`.
//! Synchronous on purpose (the `postgres` crate), over plain TCP: TLS is not wired yet.

use std::str::FromStr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use postgres::error::SqlState;
use postgres::{Client, Config, NoTls, Row, Transaction};
use serde_json::Value;
use warrant_core::{Clock, RequestId, RunId, Timestamp};

use crate::{
    Append, AuditIndex, AuditOutbox, AuditQuery, CancelRequest, ChainHead, EventDraft, EventStore,
    FenceRejection, Lease, NewRun, RequestRow, RequestStatus, RequestUpdate, RunRow, RunStatus,
    SCHEMA_VERSION, SealedRecord, Sealer, SinkState, StoreError, StoredEvent,
};

const GENESIS: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// Advisory lock keys (arbitrary, fixed): one serializes appends (the audit chain), one
/// serializes schema migrations of concurrently starting processes.
const CHAIN_LOCK: i64 = 0x5741_5252_0000_0001;
const SCHEMA_LOCK: i64 = 0x5741_5252_0000_0002;

/// Connection attempts before giving up, and the first pause between them (doubling).
const CONNECT_ATTEMPTS: u32 = 4;
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// Tables this store owns; finding one without `warrant_schema` means the database is not ours.
const TABLES: [&str; 6] = [
    "warrant_schema",
    "runs",
    "events",
    "requests",
    "audit",
    "fence_rejections",
];

/// The same steps as the SQLite store's, so both stores share one schema version.
const SCHEMA_V1: &str = "
CREATE TABLE runs (
    run_id     TEXT PRIMARY KEY,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    actor      TEXT NOT NULL,
    task       TEXT NOT NULL,
    status     TEXT NOT NULL,
    events     BIGINT NOT NULL
);
CREATE TABLE events (
    run_id      TEXT NOT NULL REFERENCES runs(run_id),
    seq         BIGINT NOT NULL,
    kind        TEXT NOT NULL,
    version     BIGINT NOT NULL,
    recorded_at BIGINT NOT NULL,
    payload     TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE requests (
    request_id TEXT PRIMARY KEY,
    run_id     TEXT NOT NULL REFERENCES runs(run_id),
    status     TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    summary    TEXT NOT NULL
);
CREATE INDEX requests_by_status ON requests(status, created_at);
CREATE TABLE audit (
    seq       BIGINT PRIMARY KEY,
    record_id TEXT NOT NULL UNIQUE,
    hash      TEXT NOT NULL,
    line      TEXT NOT NULL
);
";

/// Version 2: leases with fencing tokens, cancellation, and the record of fenced appends.
const SCHEMA_V2: &str = "
ALTER TABLE runs
    ADD COLUMN lease_holder TEXT,
    ADD COLUMN lease_token BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN lease_expires BIGINT,
    ADD COLUMN cancel_by TEXT,
    ADD COLUMN cancel_reason TEXT,
    ADD COLUMN cancel_at BIGINT;
CREATE INDEX runs_by_status ON runs(status, created_at);
CREATE SEQUENCE lease_tokens;
CREATE TABLE fence_rejections (
    id            BIGSERIAL PRIMARY KEY,
    run_id        TEXT NOT NULL REFERENCES runs(run_id),
    presented     BIGINT NOT NULL,
    current_token BIGINT NOT NULL,
    at            BIGINT NOT NULL,
    kinds         TEXT NOT NULL
);
";

/// Version 3: per-sink delivery state, and audit records indexed for queries (older records
/// are indexed from their lines as the migration runs).
const SCHEMA_V3: &str = "
CREATE TABLE sink_state (
    sink            TEXT PRIMARY KEY,
    acknowledged    BIGINT NOT NULL DEFAULT 0,
    delivered_total BIGINT NOT NULL DEFAULT 0,
    first_success   BIGINT,
    last_success    BIGINT,
    last_error      TEXT,
    last_error_at   BIGINT,
    failing_since   BIGINT
);
ALTER TABLE audit
    ADD COLUMN at BIGINT,
    ADD COLUMN run_id TEXT,
    ADD COLUMN actor TEXT,
    ADD COLUMN on_behalf_of TEXT,
    ADD COLUMN event TEXT,
    ADD COLUMN verb TEXT,
    ADD COLUMN resource TEXT,
    ADD COLUMN decision TEXT;
UPDATE audit SET
    at = (extract(epoch FROM (line::jsonb->>'time')::timestamptz) * 1000)::bigint,
    run_id = line::jsonb->'data'->>'run',
    actor = line::jsonb->'data'->>'actor',
    on_behalf_of = line::jsonb->'data'->>'on_behalf_of',
    event = line::jsonb->'data'->>'event',
    verb = coalesce(line::jsonb->'data'->'action'->>'verb', line::jsonb->'data'->'action'->0->>'verb'),
    resource = line::jsonb->'data'->>'resource',
    decision = line::jsonb->'data'->>'decision';
CREATE INDEX audit_by_run ON audit(run_id, seq);
CREATE INDEX audit_by_actor ON audit(actor, decision, seq);
CREATE INDEX audit_by_at ON audit(at);
";

/// Each step takes the schema from version `i` to `i + 1`.
const MIGRATIONS: [&str; 3] = [SCHEMA_V1, SCHEMA_V2, SCHEMA_V3];

const RUN_COLUMNS: &str = "run_id, created_at, updated_at, actor, task, status, events";
const REQUEST_COLUMNS: &str = "request_id, run_id, status, created_at, summary";

pub struct PostgresStore {
    /// The URL as given, password included: only ever used to reconnect, never shown.
    config: Config,
    /// The URL without its password, for messages.
    shown: String,
    client: Mutex<Client>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("url", &self.shown)
            .finish()
    }
}

impl PostgresStore {
    /// Connects (retrying with backoff while the server cannot be reached), creates the schema
    /// in a fresh database, migrates an older one forward and refuses a newer one.
    pub fn connect(url: &str, clock: Arc<dyn Clock>) -> Result<Self, StoreError> {
        let shown = redact(url);
        let mut config = Config::from_str(url).map_err(|e| StoreError::Open {
            path: shown.clone(),
            message: describe(&e),
        })?;
        if config.get_connect_timeout().is_none() {
            // A blackholed host would otherwise hang each attempt for the OS's TCP timeout.
            config.connect_timeout(Duration::from_secs(5));
        }
        let client = connect_with_backoff(&config, &shown)?;
        let store = Self {
            config,
            shown,
            client: Mutex::new(client),
            clock,
        };
        store.migrate()?;
        Ok(store)
    }

    /// The store's URL, without its password.
    pub fn url(&self) -> &str {
        &self.shown
    }

    fn migrate(&self) -> Result<(), StoreError> {
        let mut client = self.lock()?;
        let mut tx = client.transaction().map_err(|e| self.err(&e))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
            .map_err(|e| self.err(&e))?;
        let present: Vec<String> = tx
            .query(
                "SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema() AND tablename = ANY($1)",
                &[&&TABLES[..]],
            )
            .map_err(|e| self.err(&e))?
            .iter()
            .map(|r| r.try_get(0))
            .collect::<Result<_, _>>()
            .map_err(|e| self.err(&e))?;
        let version: u32 = if present.iter().any(|t| t == "warrant_schema") {
            let rows = tx
                .query("SELECT version FROM warrant_schema", &[])
                .map_err(|e| self.err(&e))?;
            match rows.as_slice() {
                [row] => {
                    let v: i32 = row.try_get(0).map_err(|e| self.err(&e))?;
                    u32::try_from(v).map_err(|_| self.corrupt(format!("schema version {v}")))?
                }
                _ => {
                    return Err(
                        self.corrupt(format!("warrant_schema holds {} rows, not one", rows.len()))
                    );
                }
            }
        } else if present.is_empty() {
            tx.batch_execute(
                "CREATE TABLE warrant_schema (
                    one     BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
                    version INTEGER NOT NULL
                );
                INSERT INTO warrant_schema (version) VALUES (0);",
            )
            .map_err(|e| self.err(&e))?;
            0
        } else {
            return Err(self.corrupt(format!(
                "the database has Warrant's table names ({}) but no warrant_schema version",
                present.join(", ")
            )));
        };
        if version > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                path: self.shown.clone(),
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        if version < SCHEMA_VERSION {
            for step in &MIGRATIONS[version as usize..] {
                tx.batch_execute(step).map_err(|e| self.err(&e))?;
            }
            tx.execute(
                "UPDATE warrant_schema SET version = $1",
                &[&(SCHEMA_VERSION as i32)],
            )
            .map_err(|e| self.err(&e))?;
        }
        tx.commit().map_err(|e| self.err(&e))
    }

    /// The connection, reconnected first if the server closed it (a restart, a failover).
    fn lock(&self) -> Result<MutexGuard<'_, Client>, StoreError> {
        // A poisoned lock only means another thread panicked mid-call; the server rolled back
        // its transaction when the `Transaction` was dropped.
        let mut client = self.client.lock().unwrap_or_else(|p| p.into_inner());
        if client.is_closed() {
            *client = connect_with_backoff(&self.config, &self.shown)?;
        }
        Ok(client)
    }

    fn err(&self, e: &postgres::Error) -> StoreError {
        StoreError::Query(format!("{} (store {})", describe(e), self.shown))
    }

    fn corrupt(&self, message: String) -> StoreError {
        StoreError::Corrupt {
            path: self.shown.clone(),
            message,
        }
    }

    fn bad_row(&self, what: String) -> StoreError {
        StoreError::Query(format!("{what} (store {})", self.shown))
    }

    /// Takes the lease of `run` inside `tx`: refused while another holder's lease is live.
    fn take_lease(
        &self,
        tx: &mut Transaction<'_>,
        run: &RunId,
        holder: &str,
        ttl: Duration,
        now: Timestamp,
    ) -> Result<Lease, StoreError> {
        let row = tx
            .query_opt(
                "SELECT status, lease_holder, lease_token, lease_expires FROM runs WHERE run_id = $1 FOR UPDATE",
                &[&run.as_str()],
            )
            .map_err(|e| self.err(&e))?
            .ok_or_else(|| StoreError::UnknownRun(run.to_string()))?;
        let status: String = row.try_get(0).map_err(|e| self.err(&e))?;
        let current_holder: Option<String> = row.try_get(1).map_err(|e| self.err(&e))?;
        let expires: Option<i64> = row.try_get(3).map_err(|e| self.err(&e))?;
        let status = RunStatus::parse(&status).unwrap_or(RunStatus::Failed);
        if status.is_final() {
            return Err(StoreError::Final {
                run: run.to_string(),
                status: status.as_str().to_owned(),
            });
        }
        if let (Some(other), Some(until)) = (current_holder, expires)
            && until > now.millis()
        {
            return Err(StoreError::Leased {
                run: run.to_string(),
                holder: other,
                until: Timestamp::from_millis(until)
                    .map(|t| t.rfc3339())
                    .unwrap_or_default(),
            });
        }
        // Tokens come from one sequence for the whole store, so a token of one run never
        // passes for another run's.
        let token: i64 = tx
            .query_one("SELECT nextval('lease_tokens')", &[])
            .and_then(|r| r.try_get(0))
            .map_err(|e| self.err(&e))?;
        let expires = now.millis() + ttl_millis(ttl);
        tx.execute(
            "UPDATE runs SET lease_holder = $2, lease_token = $3, lease_expires = $4, status = CASE status WHEN 'queued' THEN 'running' ELSE status END WHERE run_id = $1",
            &[&run.as_str(), &holder, &token, &expires],
        )
        .map_err(|e| self.err(&e))?;
        Ok(Lease {
            run: run.clone(),
            holder: holder.to_owned(),
            token: token as u64,
            expires_at: Timestamp::from_millis(expires).unwrap_or(now),
        })
    }

    /// Inserts the events and their audit records. The caller holds `CHAIN_LOCK`, so the head
    /// read here is the head this transaction commits after.
    fn insert_events(
        &self,
        tx: &mut Transaction<'_>,
        run: &RunId,
        first_seq: u64,
        events: Vec<EventDraft>,
        sealer: &dyn Sealer,
        now: Timestamp,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let mut stored = Vec::with_capacity(events.len());
        let mut head = self.head(tx)?;
        let insert_event = tx
            .prepare(
                "INSERT INTO events (run_id, seq, kind, version, recorded_at, payload) VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .map_err(|e| self.err(&e))?;
        let insert_record = tx
            .prepare("INSERT INTO audit (seq, record_id, hash, line, at, run_id, actor, on_behalf_of, event, verb, resource, decision) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)")
            .map_err(|e| self.err(&e))?;
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
                &insert_event,
                &[
                    &run.as_str(),
                    &(event.seq as i64),
                    &event.kind,
                    &i64::from(event.version),
                    &now.millis(),
                    &event.payload.to_string(),
                ],
            )
            .map_err(|e| self.err(&e))?;
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
                &insert_record,
                &[
                    &(record.seq as i64),
                    &record.id,
                    &record.hash,
                    &record.line,
                    &ix.at,
                    &ix.run,
                    &ix.actor,
                    &ix.on_behalf_of,
                    &ix.event,
                    &ix.verb,
                    &ix.resource,
                    &ix.decision,
                ],
            )
            .map_err(|e| self.err(&e))?;
            head = ChainHead {
                seq: record.seq,
                hash: record.hash,
            };
            stored.push(event);
        }
        Ok(stored)
    }

    fn head<C: postgres::GenericClient>(&self, client: &mut C) -> Result<ChainHead, StoreError> {
        let row = client
            .query_opt("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1", &[])
            .map_err(|e| self.err(&e))?;
        match row {
            None => Ok(ChainHead {
                seq: 0,
                hash: GENESIS.to_owned(),
            }),
            Some(r) => Ok(ChainHead {
                seq: r.try_get::<_, i64>(0).map_err(|e| self.err(&e))? as u64,
                hash: r.try_get(1).map_err(|e| self.err(&e))?,
            }),
        }
    }

    fn row_to_event(&self, r: &Row) -> Result<StoredEvent, StoreError> {
        let e = |e: postgres::Error| self.err(&e);
        let version: i64 = r.try_get(3).map_err(e)?;
        Ok(StoredEvent {
            run: self.run_id(&r.try_get::<_, String>(0).map_err(e)?)?,
            seq: r.try_get::<_, i64>(1).map_err(e)? as u64,
            kind: r.try_get(2).map_err(e)?,
            version: u32::try_from(version)
                .map_err(|_| self.bad_row(format!("event version {version} out of range")))?,
            recorded_at: self.ts(r.try_get(4).map_err(e)?)?,
            payload: self.json(&r.try_get::<_, String>(5).map_err(e)?)?,
        })
    }

    fn row_to_run(&self, r: &Row) -> Result<RunRow, StoreError> {
        let e = |e: postgres::Error| self.err(&e);
        let status: String = r.try_get(5).map_err(e)?;
        Ok(RunRow {
            run: self.run_id(&r.try_get::<_, String>(0).map_err(e)?)?,
            created_at: self.ts(r.try_get(1).map_err(e)?)?,
            updated_at: self.ts(r.try_get(2).map_err(e)?)?,
            actor: r.try_get(3).map_err(e)?,
            task: r.try_get(4).map_err(e)?,
            status: RunStatus::parse(&status)
                .ok_or_else(|| self.bad_row(format!("unknown status {status:?}")))?,
            events: r.try_get::<_, i64>(6).map_err(e)? as u64,
        })
    }

    fn row_to_request(&self, r: &Row) -> Result<RequestRow, StoreError> {
        let e = |e: postgres::Error| self.err(&e);
        let id: String = r.try_get(0).map_err(e)?;
        let status: String = r.try_get(2).map_err(e)?;
        Ok(RequestRow {
            id: RequestId::parse(&id)
                .ok_or_else(|| self.bad_row(format!("malformed request id {id:?}")))?,
            run: self.run_id(&r.try_get::<_, String>(1).map_err(e)?)?,
            status: match status.as_str() {
                "open" => RequestStatus::Open,
                "answered" => RequestStatus::Answered,
                other => return Err(self.bad_row(format!("unknown request status {other:?}"))),
            },
            created_at: self.ts(r.try_get(3).map_err(e)?)?,
            summary: self.json(&r.try_get::<_, String>(4).map_err(e)?)?,
        })
    }

    fn ts(&self, ms: i64) -> Result<Timestamp, StoreError> {
        Timestamp::from_millis(ms)
            .ok_or_else(|| self.bad_row(format!("timestamp {ms} out of range")))
    }

    fn run_id(&self, s: &str) -> Result<RunId, StoreError> {
        RunId::parse(s).ok_or_else(|| self.bad_row(format!("malformed run id {s:?}")))
    }

    fn json(&self, s: &str) -> Result<Value, StoreError> {
        serde_json::from_str(s).map_err(|e| self.bad_row(format!("malformed JSON: {e}")))
    }
}

fn ttl_millis(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX / 2)
}

/// Connects, retrying with exponential backoff while the server cannot be reached. A server
/// that answers and refuses (wrong password, no such database) is not retried: waiting will
/// not change its answer.
fn connect_with_backoff(config: &Config, shown: &str) -> Result<Client, StoreError> {
    let mut pause = FIRST_BACKOFF;
    let mut attempt = 1;
    loop {
        match config.connect(NoTls) {
            Ok(client) => return Ok(client),
            Err(e) => {
                let transient = match e.as_db_error() {
                    None => true,
                    Some(db) => db.code() == &SqlState::CANNOT_CONNECT_NOW,
                };
                if !transient {
                    return Err(StoreError::Open {
                        path: shown.to_owned(),
                        message: describe(&e),
                    });
                }
                if attempt >= CONNECT_ATTEMPTS {
                    return Err(StoreError::Unreachable {
                        url: shown.to_owned(),
                        attempts: attempt,
                        message: describe(&e),
                    });
                }
            }
        }
        std::thread::sleep(pause);
        pause *= 2;
        attempt += 1;
    }
}

/// The driver's message with its cause: its own `Display` says only "db error" or
/// "error connecting to server".
fn describe(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return db.to_string();
    }
    match std::error::Error::source(e) {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    }
}

/// The connection string without its password, for messages and `Debug`: the userinfo
/// password of a URL, and any `password=` parameter (URL query or key-value form).
pub(crate) fn redact(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some(scheme_end) = out.find("://") {
        let rest_start = scheme_end + 3;
        let authority_end = out[rest_start..]
            .find(['/', '?'])
            .map_or(out.len(), |i| rest_start + i);
        if let Some(at) = out[rest_start..authority_end].rfind('@') {
            let at = rest_start + at;
            if let Some(colon) = out[rest_start..at].find(':') {
                out.replace_range(rest_start + colon..at, "");
            }
        }
    }
    // `password=...` up to the next separator, in a query string or a key-value string.
    while let Some(start) = out.to_ascii_lowercase().find("password=") {
        let value_start = start + "password=".len();
        let end = out[value_start..]
            .find(['&', ' '])
            .map_or(out.len(), |i| value_start + i);
        out.replace_range(start..end, "password-removed");
    }
    out
}

impl EventStore for PostgresStore {
    fn create_run(
        &self,
        run: &NewRun,
        events: Vec<EventDraft>,
        sealer: &dyn Sealer,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let now = self.clock.now();
        let mut client = self.lock()?;
        let mut tx = client.transaction().map_err(|e| self.err(&e))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&CHAIN_LOCK])
            .map_err(|e| self.err(&e))?;
        let exists = tx
            .query_opt("SELECT 1 FROM runs WHERE run_id = $1", &[&run.run.as_str()])
            .map_err(|e| self.err(&e))?
            .is_some();
        if exists {
            return Err(StoreError::RunExists {
                run: run.run.to_string(),
            });
        }
        let count = events.len() as i64;
        tx.execute(
            "INSERT INTO runs (run_id, created_at, updated_at, actor, task, status, events) VALUES ($1, $2, $2, $3, $4, $5, $6)",
            &[&run.run.as_str(), &now.millis(), &run.actor, &run.task, &run.status.as_str(), &count],
        )
        .map_err(|e| self.err(&e))?;
        let stored = self.insert_events(&mut tx, &run.run, 1, events, sealer, now)?;
        tx.commit().map_err(|e| self.err(&e))?;
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
        let mut client = self.lock()?;
        let mut tx = client.transaction().map_err(|e| self.err(&e))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&CHAIN_LOCK])
            .map_err(|e| self.err(&e))?;
        // The row lock orders this append against a concurrent lease: a new lease commits
        // either before (and this append is fenced) or after it.
        let row = tx
            .query_opt(
                "SELECT events, lease_token FROM runs WHERE run_id = $1 FOR UPDATE",
                &[&run.as_str()],
            )
            .map_err(|e| self.err(&e))?
            .ok_or_else(|| StoreError::UnknownRun(run.to_string()))?;
        let current = row.try_get::<_, i64>(0).map_err(|e| self.err(&e))? as u64;
        let token = row.try_get::<_, i64>(1).map_err(|e| self.err(&e))? as u64;
        if let Some(presented) = fence
            && presented != token
        {
            tx.rollback().map_err(|e| self.err(&e))?;
            let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
            client
                .execute(
                    "INSERT INTO fence_rejections (run_id, presented, current_token, at, kinds) VALUES ($1, $2, $3, $4, $5)",
                    &[
                        &run.as_str(),
                        &(presented as i64),
                        &(token as i64),
                        &now.millis(),
                        &serde_json::to_string(&kinds).unwrap_or_default(),
                    ],
                )
                .map_err(|e| self.err(&e))?;
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
        let stored = self.insert_events(&mut tx, &run, expected_seq, events, sealer, now)?;
        tx.execute(
            "UPDATE runs SET events = $2, updated_at = $3, status = COALESCE($4, status) WHERE run_id = $1",
            &[
                &run.as_str(),
                &((current + added) as i64),
                &now.millis(),
                &status.map(RunStatus::as_str),
            ],
        )
        .map_err(|e| self.err(&e))?;
        for update in requests {
            match update {
                RequestUpdate::Open { id, summary } => tx.execute(
                    "INSERT INTO requests (request_id, run_id, status, created_at, summary) VALUES ($1, $2, 'open', $3, $4)",
                    &[&id.as_str(), &run.as_str(), &now.millis(), &summary.to_string()],
                ),
                RequestUpdate::Answered { id } => tx.execute(
                    "UPDATE requests SET status = 'answered' WHERE request_id = $1",
                    &[&id.as_str()],
                ),
            }
            .map_err(|e| self.err(&e))?;
        }
        tx.commit().map_err(|e| self.err(&e))?;
        Ok(stored)
    }

    fn events(&self, run: &RunId) -> Result<Vec<StoredEvent>, StoreError> {
        let rows = self
            .lock()?
            .query(
                "SELECT run_id, seq, kind, version, recorded_at, payload FROM events WHERE run_id = $1 ORDER BY seq",
                &[&run.as_str()],
            )
            .map_err(|e| self.err(&e))?;
        rows.iter().map(|r| self.row_to_event(r)).collect()
    }

    fn run(&self, run: &RunId) -> Result<Option<RunRow>, StoreError> {
        let row = self
            .lock()?
            .query_opt(
                &format!("SELECT {RUN_COLUMNS} FROM runs WHERE run_id = $1"),
                &[&run.as_str()],
            )
            .map_err(|e| self.err(&e))?;
        row.map(|r| self.row_to_run(&r)).transpose()
    }

    fn runs(&self) -> Result<Vec<RunRow>, StoreError> {
        let rows = self
            .lock()?
            .query(
                &format!("SELECT {RUN_COLUMNS} FROM runs ORDER BY created_at, run_id"),
                &[],
            )
            .map_err(|e| self.err(&e))?;
        rows.iter().map(|r| self.row_to_run(r)).collect()
    }

    fn request(&self, id: &RequestId) -> Result<Option<RequestRow>, StoreError> {
        let row = self
            .lock()?
            .query_opt(
                &format!("SELECT {REQUEST_COLUMNS} FROM requests WHERE request_id = $1"),
                &[&id.as_str()],
            )
            .map_err(|e| self.err(&e))?;
        row.map(|r| self.row_to_request(&r)).transpose()
    }

    fn requests(&self, status: Option<RequestStatus>) -> Result<Vec<RequestRow>, StoreError> {
        let filter = status.map(|s| match s {
            RequestStatus::Open => "open",
            RequestStatus::Answered => "answered",
        });
        let rows = self
            .lock()?
            .query(
                &format!(
                    "SELECT {REQUEST_COLUMNS} FROM requests WHERE $1::text IS NULL OR status = $1 ORDER BY created_at, request_id"
                ),
                &[&filter],
            )
            .map_err(|e| self.err(&e))?;
        rows.iter().map(|r| self.row_to_request(r)).collect()
    }

    fn lease_run(&self, run: &RunId, holder: &str, ttl: Duration) -> Result<Lease, StoreError> {
        let now = self.clock.now();
        let mut client = self.lock()?;
        let mut tx = client.transaction().map_err(|e| self.err(&e))?;
        let lease = self.take_lease(&mut tx, run, holder, ttl, now)?;
        tx.commit().map_err(|e| self.err(&e))?;
        Ok(lease)
    }

    fn lease_next(&self, holder: &str, ttl: Duration) -> Result<Option<Lease>, StoreError> {
        let now = self.clock.now();
        let mut client = self.lock()?;
        let mut tx = client.transaction().map_err(|e| self.err(&e))?;
        // SKIP LOCKED: workers polling at once each get a different run instead of queueing
        // behind the first one's row lock.
        let next = tx
            .query_opt(
                "SELECT run_id FROM runs WHERE status = 'queued' OR (status = 'running' AND lease_expires IS NOT NULL AND lease_expires <= $1) ORDER BY created_at, run_id LIMIT 1 FOR UPDATE SKIP LOCKED",
                &[&now.millis()],
            )
            .map_err(|e| self.err(&e))?;
        let Some(next) = next else {
            return Ok(None);
        };
        let run = self.run_id(&next.try_get::<_, String>(0).map_err(|e| self.err(&e))?)?;
        let lease = self.take_lease(&mut tx, &run, holder, ttl, now)?;
        tx.commit().map_err(|e| self.err(&e))?;
        Ok(Some(lease))
    }

    fn heartbeat(&self, lease: &Lease, ttl: Duration) -> Result<Lease, StoreError> {
        let now = self.clock.now();
        let expires = now.millis() + ttl_millis(ttl);
        let mut client = self.lock()?;
        let changed = client
            .execute(
                "UPDATE runs SET lease_expires = $4 WHERE run_id = $1 AND lease_token = $2 AND lease_holder = $3",
                &[&lease.run.as_str(), &(lease.token as i64), &lease.holder, &expires],
            )
            .map_err(|e| self.err(&e))?;
        if changed == 0 {
            let current: i64 = client
                .query_opt(
                    "SELECT lease_token FROM runs WHERE run_id = $1",
                    &[&lease.run.as_str()],
                )
                .map_err(|e| self.err(&e))?
                .ok_or_else(|| StoreError::UnknownRun(lease.run.to_string()))?
                .try_get(0)
                .map_err(|e| self.err(&e))?;
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
        self.lock()?
            .execute(
                "UPDATE runs SET lease_holder = NULL, lease_expires = 0 WHERE run_id = $1 AND lease_token = $2",
                &[&lease.run.as_str(), &(lease.token as i64)],
            )
            .map_err(|e| self.err(&e))?;
        Ok(())
    }

    fn break_lease(&self, run: &RunId, holder: &str) -> Result<bool, StoreError> {
        let changed = self
            .lock()?
            .execute(
                "UPDATE runs SET lease_expires = 0 WHERE run_id = $1 AND lease_holder = $2",
                &[&run.as_str(), &holder],
            )
            .map_err(|e| self.err(&e))?;
        Ok(changed > 0)
    }

    fn sink_state(&self, sink: &str) -> Result<SinkState, StoreError> {
        let row = self
            .lock()?
            .query_opt(
                "SELECT acknowledged, delivered_total, last_success, last_error, last_error_at, failing_since, first_success FROM sink_state WHERE sink = $1",
                &[&sink],
            )
            .map_err(|e| self.err(&e))?;
        let Some(row) = row else {
            return Ok(SinkState {
                sink: sink.to_owned(),
                ..SinkState::default()
            });
        };
        let get_i64 =
            |i: usize| -> Result<i64, StoreError> { row.try_get(i).map_err(|e| self.err(&e)) };
        let get_opt = |i: usize| -> Result<Option<i64>, StoreError> {
            row.try_get(i).map_err(|e| self.err(&e))
        };
        let opt_ts = |i: usize| -> Result<Option<Timestamp>, StoreError> {
            get_opt(i)?.map(|ms| self.ts(ms)).transpose()
        };
        Ok(SinkState {
            sink: sink.to_owned(),
            acknowledged: get_i64(0)? as u64,
            delivered_total: get_i64(1)? as u64,
            last_success: opt_ts(2)?,
            last_error: row.try_get(3).map_err(|e| self.err(&e))?,
            last_error_at: opt_ts(4)?,
            failing_since: opt_ts(5)?,
            first_success: opt_ts(6)?,
        })
    }

    fn record_delivery(
        &self,
        sink: &str,
        acknowledged: u64,
        delivered: u64,
    ) -> Result<(), StoreError> {
        let now = self.clock.now().millis();
        self.lock()?
            .execute(
                "INSERT INTO sink_state (sink, acknowledged, delivered_total, first_success, last_success) VALUES ($1, $2, $3, $4, $4)
                 ON CONFLICT (sink) DO UPDATE SET acknowledged = greatest(sink_state.acknowledged, $2), delivered_total = sink_state.delivered_total + $3, first_success = coalesce(sink_state.first_success, $4), last_success = $4, failing_since = NULL",
                &[&sink, &(acknowledged as i64), &(delivered as i64), &now],
            )
            .map_err(|e| self.err(&e))?;
        Ok(())
    }

    fn record_delivery_failure(
        &self,
        sink: &str,
        acknowledged: u64,
        error: &str,
    ) -> Result<(), StoreError> {
        let now = self.clock.now().millis();
        self.lock()?
            .execute(
                "INSERT INTO sink_state (sink, acknowledged, last_error, last_error_at, failing_since) VALUES ($1, $2, $3, $4, $4)
                 ON CONFLICT (sink) DO UPDATE SET acknowledged = greatest(sink_state.acknowledged, $2), last_error = $3, last_error_at = $4, failing_since = coalesce(sink_state.failing_since, $4)",
                &[&sink, &(acknowledged as i64), &error, &now],
            )
            .map_err(|e| self.err(&e))?;
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
            q.clause(|n| format!("${n}"))
        );
        let mut values: Vec<&(dyn postgres::types::ToSql + Sync)> = Vec::new();
        for t in &texts {
            values.push(t);
        }
        for t in &times {
            values.push(t);
        }
        let rows = self
            .lock()?
            .query(sql.as_str(), &values)
            .map_err(|e| self.err(&e))?;
        rows.iter()
            .map(|r| {
                Ok(SealedRecord {
                    seq: r.try_get::<_, i64>(0).map_err(|e| self.err(&e))? as u64,
                    id: r.try_get(1).map_err(|e| self.err(&e))?,
                    hash: r.try_get(2).map_err(|e| self.err(&e))?,
                    line: r.try_get(3).map_err(|e| self.err(&e))?,
                })
            })
            .collect()
    }

    fn fence_rejections(&self, run: &RunId) -> Result<Vec<FenceRejection>, StoreError> {
        let rows = self
            .lock()?
            .query(
                "SELECT run_id, presented, current_token, at, kinds FROM fence_rejections WHERE run_id = $1 ORDER BY at, id",
                &[&run.as_str()],
            )
            .map_err(|e| self.err(&e))?;
        rows.iter()
            .map(|r| {
                let e = |e: postgres::Error| self.err(&e);
                Ok(FenceRejection {
                    run: self.run_id(&r.try_get::<_, String>(0).map_err(e)?)?,
                    presented: r.try_get::<_, i64>(1).map_err(e)? as u64,
                    current: r.try_get::<_, i64>(2).map_err(e)? as u64,
                    at: self.ts(r.try_get(3).map_err(e)?)?,
                    kinds: serde_json::from_str(&r.try_get::<_, String>(4).map_err(e)?)
                        .map_err(|e| self.bad_row(format!("malformed kinds: {e}")))?,
                })
            })
            .collect()
    }

    fn request_cancel(&self, run: &RunId, by: &str, reason: &str) -> Result<(), StoreError> {
        let now = self.clock.now();
        let found = self
            .lock()?
            .execute(
                "UPDATE runs SET cancel_by = COALESCE(cancel_by, $2), cancel_reason = COALESCE(cancel_reason, $3), cancel_at = COALESCE(cancel_at, $4) WHERE run_id = $1",
                &[&run.as_str(), &by, &reason, &now.millis()],
            )
            .map_err(|e| self.err(&e))?;
        if found == 0 {
            return Err(StoreError::UnknownRun(run.to_string()));
        }
        Ok(())
    }

    fn cancel_request(&self, run: &RunId) -> Result<Option<CancelRequest>, StoreError> {
        let row = self
            .lock()?
            .query_opt(
                "SELECT cancel_by, cancel_reason, cancel_at FROM runs WHERE run_id = $1",
                &[&run.as_str()],
            )
            .map_err(|e| self.err(&e))?
            .ok_or_else(|| StoreError::UnknownRun(run.to_string()))?;
        let e = |e: postgres::Error| self.err(&e);
        let by: Option<String> = row.try_get(0).map_err(e)?;
        let reason: Option<String> = row.try_get(1).map_err(e)?;
        let at: Option<i64> = row.try_get(2).map_err(e)?;
        match (by, reason, at) {
            (Some(by), Some(reason), Some(at)) => Ok(Some(CancelRequest {
                by,
                reason,
                at: self.ts(at)?,
            })),
            _ => Ok(None),
        }
    }
}

impl AuditOutbox for PostgresStore {
    fn audit_records(&self, after: u64, limit: usize) -> Result<Vec<SealedRecord>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .lock()?
            .query(
                "SELECT seq, record_id, hash, line FROM audit WHERE seq > $1 ORDER BY seq LIMIT $2",
                &[&(after as i64), &limit],
            )
            .map_err(|e| self.err(&e))?;
        rows.iter()
            .map(|r| {
                let e = |e: postgres::Error| self.err(&e);
                Ok(SealedRecord {
                    seq: r.try_get::<_, i64>(0).map_err(e)? as u64,
                    id: r.try_get(1).map_err(e)?,
                    hash: r.try_get(2).map_err(e)?,
                    line: r.try_get(3).map_err(e)?,
                })
            })
            .collect()
    }

    fn audit_head(&self) -> Result<ChainHead, StoreError> {
        let mut client = self.lock()?;
        self.head(&mut *client)
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_are_removed_from_urls() {
        let cases = [
            (
                "postgres://alice:s3cret@db.example:5432/warrant",
                "postgres://alice@db.example:5432/warrant",
            ),
            (
                "postgresql://alice:p@ss:w@rd@db/warrant?sslmode=disable",
                "postgresql://alice@db/warrant?sslmode=disable",
            ),
            (
                "postgres://alice@db/warrant?password=s3cret&connect_timeout=3",
                "postgres://alice@db/warrant?password-removed&connect_timeout=3",
            ),
            (
                "host=db user=alice password=s3cret dbname=w",
                "host=db user=alice password-removed dbname=w",
            ),
            ("postgres://db/warrant", "postgres://db/warrant"),
        ];
        let got: Vec<(&str, String)> = cases.iter().map(|(url, _)| (*url, redact(url))).collect();
        let want: Vec<(&str, String)> = cases
            .iter()
            .map(|(url, shown)| (*url, (*shown).to_owned()))
            .collect();
        assert_eq!(got, want);
    }
}
