//! The embedded default store: one SQLite file in the workspace's `.warrant/`. WAL mode with
//! `synchronous=FULL`, so an append that returned survives a power cut. Every append is one
//! `BEGIN IMMEDIATE` transaction covering the events, the run and request indexes and the
//! audit outbox records, so they can never disagree. The algorithm is the shared one of
//! [`crate::sql`]; this file holds what is SQLite's own: the file, its schema steps, the
//! spelling of a few statements and how its errors read.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, ErrorCode, OpenFlags, ToSql};
use warrant_core::Clock;

use crate::StoreError;
use crate::sql::{Dialect, Row, Store, TxKind, Val};

/// The schema this build writes, in SQLite and PostgreSQL alike (the same steps). Older stores
/// are migrated forward on open; newer are refused.
pub const SCHEMA_VERSION: u32 = 8;

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

/// Version 4: the autonomy envelope: kill switches (set and lifted, kept as history; at most
/// one set per scope and target) and the shared rate buckets.
const SCHEMA_V4: &str = "
CREATE TABLE kill_switches (
    id        INTEGER PRIMARY KEY,
    scope       TEXT NOT NULL,
    target      TEXT NOT NULL,
    reason      TEXT NOT NULL,
    set_by      TEXT NOT NULL,
    set_at      INTEGER NOT NULL,
    lifted_by   TEXT,
    lifted_at   INTEGER,
    lift_reason TEXT
);
CREATE UNIQUE INDEX kill_switches_set ON kill_switches(scope, target) WHERE lifted_at IS NULL;
CREATE TABLE rate_buckets (
    bucket     TEXT PRIMARY KEY,
    level      INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
";

/// Version 5: tenants. Every run, event, request and audit row carries the tenant of the run's
/// principal (runs made before take the tenant their `run_started` recorded), indexes lead with
/// it, and refused attempts to reach another tenant's records are kept.
const SCHEMA_V5: &str = "
ALTER TABLE runs ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';
ALTER TABLE events ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';
ALTER TABLE requests ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';
ALTER TABLE audit ADD COLUMN tenant TEXT;
UPDATE runs SET tenant = coalesce(
    (SELECT json_extract(e.payload, '$.principal.tenant') FROM events e WHERE e.run_id = runs.run_id AND e.seq = 1),
    'default');
UPDATE events SET tenant = (SELECT r.tenant FROM runs r WHERE r.run_id = events.run_id);
UPDATE requests SET tenant = (SELECT r.tenant FROM runs r WHERE r.run_id = requests.run_id);
UPDATE audit SET tenant = coalesce(
    (SELECT r.tenant FROM runs r WHERE r.run_id = audit.run_id),
    json_extract(line, '$.data.tenant'));
CREATE INDEX runs_by_tenant ON runs(tenant, created_at);
CREATE INDEX events_by_tenant ON events(tenant, run_id, seq);
CREATE INDEX requests_by_tenant ON requests(tenant, status, created_at);
CREATE INDEX audit_by_tenant ON audit(tenant, seq);
CREATE TABLE tenant_refusals (
    tenant    TEXT NOT NULL,
    actor     TEXT NOT NULL,
    operation TEXT NOT NULL,
    target    TEXT NOT NULL,
    owner     TEXT NOT NULL,
    at        INTEGER NOT NULL
);
CREATE INDEX tenant_refusals_by_tenant ON tenant_refusals(tenant, at);
CREATE INDEX tenant_refusals_by_owner ON tenant_refusals(owner, at);
CREATE TABLE delegation_revocations (
    id         TEXT PRIMARY KEY,
    revoked_by TEXT NOT NULL,
    reason     TEXT NOT NULL,
    at         INTEGER NOT NULL
);
";

/// Version 6: budget totals, what each actor of each tenant has used over all its runs, kept
/// by every append that records model usage (in its transaction). Backfilled here from the
/// usage of the events that carry one (`model_responded`, `budget_exceeded`,
/// `awaiting_message`), each cost rounded to billionths once, as the kernel does.
const SCHEMA_V6: &str = "
CREATE TABLE budget_totals (
    tenant        TEXT NOT NULL,
    actor         TEXT NOT NULL,
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost_nanos    INTEGER NOT NULL DEFAULT 0,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (tenant, actor)
) WITHOUT ROWID;
INSERT INTO budget_totals (tenant, actor, input_tokens, output_tokens, cost_nanos, updated_at)
SELECT r.tenant, r.actor, sum(u.input_tokens), sum(u.output_tokens), sum(u.cost_nanos), max(u.at)
FROM runs r JOIN (
    SELECT run_id, recorded_at AS at,
        CASE WHEN json_type(payload, '$.usage.input_tokens') = 'integer'
            AND json_extract(payload, '$.usage.input_tokens') >= 0
            THEN json_extract(payload, '$.usage.input_tokens') ELSE 0 END AS input_tokens,
        CASE WHEN json_type(payload, '$.usage.output_tokens') = 'integer'
            AND json_extract(payload, '$.usage.output_tokens') >= 0
            THEN json_extract(payload, '$.usage.output_tokens') ELSE 0 END AS output_tokens,
        CASE WHEN json_type(payload, '$.usage.cost_usd') IN ('integer', 'real')
            AND json_extract(payload, '$.usage.cost_usd') > 0
            THEN CAST(json_extract(payload, '$.usage.cost_usd') * 1e9 + 0.5 AS INTEGER) ELSE 0 END AS cost_nanos
    FROM events
    WHERE kind IN ('model_responded', 'budget_exceeded', 'awaiting_message')
        AND json_type(payload, '$.usage') = 'object'
) u ON u.run_id = r.run_id
GROUP BY r.tenant, r.actor
HAVING sum(u.input_tokens) + sum(u.output_tokens) + sum(u.cost_nanos) > 0;
";

/// Version 7: the partitioned audit chain (issue 22). A record is keyed by its partition and
/// its seq there; `pos` is its outbox position (the sinks' cursor), set as it is appended in a
/// store of one partition and by an anchoring otherwise. Existing records are partition 0's
/// history, positioned at their seq, so they verify as they did. `audit_partitions` holds
/// each partition's head (locked by appends to it); row -1 is the anchor chain's.
/// SQLite cannot change a primary key in place, so the table is rebuilt.
const SCHEMA_V7: &str = "
CREATE TABLE audit_v6 (
    part         INTEGER NOT NULL DEFAULT 0,
    seq          INTEGER NOT NULL,
    record_id    TEXT NOT NULL UNIQUE,
    hash         TEXT NOT NULL,
    line         TEXT NOT NULL,
    at           INTEGER,
    run_id       TEXT,
    actor        TEXT,
    on_behalf_of TEXT,
    event        TEXT,
    verb         TEXT,
    resource     TEXT,
    decision     TEXT,
    tenant       TEXT,
    pos          INTEGER,
    PRIMARY KEY (part, seq)
);
INSERT INTO audit_v6 (part, seq, record_id, hash, line, at, run_id, actor, on_behalf_of, event, verb, resource, decision, tenant, pos)
    SELECT 0, seq, record_id, hash, line, at, run_id, actor, on_behalf_of, event, verb, resource, decision, tenant, seq FROM audit;
DROP TABLE audit;
ALTER TABLE audit_v6 RENAME TO audit;
CREATE INDEX audit_by_run ON audit(run_id, seq);
CREATE INDEX audit_by_actor ON audit(actor, decision, seq);
CREATE INDEX audit_by_at ON audit(at);
CREATE INDEX audit_by_tenant ON audit(tenant, seq);
CREATE UNIQUE INDEX audit_by_pos ON audit(pos);
CREATE INDEX audit_unpositioned ON audit(part, seq) WHERE pos IS NULL;
CREATE TABLE audit_partitions (
    part          INTEGER PRIMARY KEY,
    seq           INTEGER NOT NULL,
    hash          TEXT NOT NULL
);
INSERT INTO audit_partitions (part, seq, hash)
    SELECT 0, coalesce(max(seq), 0), coalesce((SELECT hash FROM audit ORDER BY seq DESC LIMIT 1), 'sha256:0000000000000000000000000000000000000000000000000000000000000000')
    FROM audit;
INSERT INTO audit_partitions (part, seq, hash) VALUES (-1, 0, 'sha256:0000000000000000000000000000000000000000000000000000000000000000');
";

/// Version 8: audit rows are written once (issue 22). An anchoring used to write each
/// record's outbox position (and the line stating it) back into its row; the positions it
/// assigns now have a table of their own, and a line states its position as it is read. In
/// a store of one partition a record's position is its seq, as before, and needs no row.
/// A partitioned store's positions move to `audit_order`.
const SCHEMA_V8: &str = "
CREATE TABLE audit_order (
    pos           INTEGER PRIMARY KEY,
    part          INTEGER NOT NULL,
    seq           INTEGER NOT NULL,
    UNIQUE (part, seq)
);
INSERT INTO audit_order (pos, part, seq)
    SELECT pos, part, seq FROM audit
    WHERE pos IS NOT NULL AND (SELECT count(*) FROM audit_partitions WHERE part >= 0) > 1;
DROP INDEX audit_by_pos;
DROP INDEX audit_unpositioned;
ALTER TABLE audit DROP COLUMN pos;
";

/// Each step takes the schema from version `i` to `i + 1`.
const MIGRATIONS: [&str; 8] = [
    SCHEMA_V1, SCHEMA_V2, SCHEMA_V3, SCHEMA_V4, SCHEMA_V5, SCHEMA_V6, SCHEMA_V7, SCHEMA_V8,
];

/// The embedded SQLite store: the shared algorithm over one SQLite file.
pub type SqliteStore = Store<Sqlite>;

/// SQLite's side of the store: which file, and how its statements and errors are spelled.
#[derive(Debug)]
pub struct Sqlite {
    path: PathBuf,
}

impl std::fmt::Debug for Store<Sqlite> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.dialect.path)
            .finish()
    }
}

impl Store<Sqlite> {
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
        Self::configure(path, conn, clock)
    }

    /// Opens an existing store, migrating an older schema forward and refusing a newer one.
    pub fn open(path: &Path, clock: Arc<dyn Clock>) -> Result<Self, StoreError> {
        if !path.exists() {
            return Err(StoreError::Missing {
                path: path.display().to_string(),
            });
        }
        let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE)
            .map_err(|e| open_err(path, &e))?;
        Self::configure(path, conn, clock)
    }

    fn configure(
        path: &Path,
        mut conn: Connection,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StoreError> {
        let dialect = Sqlite {
            path: path.to_owned(),
        };
        let wrap = |e: rusqlite::Error| dialect.err(e);
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
        // Every commit is already durable in the WAL (`synchronous=FULL`). Checkpointing it
        // into the database file when the last connection closes only adds an `fsync` of the
        // database, and the WAL's removal means the next process re-creates it (a directory
        // `fsync`). The WAL is still checkpointed as it grows (`wal_autocheckpoint`), and a
        // reader of the store must read `store.db` with its `-wal` (SQLite does).
        conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
            true,
        )
        .map_err(wrap)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(wrap)?;
        migrate(&dialect, &mut conn)?;
        Ok(Self::new(dialect, conn, clock))
    }

    pub fn path(&self) -> &Path {
        &self.dialect.path
    }
}

/// Brings the schema to [`SCHEMA_VERSION`] and checks its shape.
fn migrate(dialect: &Sqlite, conn: &mut Connection) -> Result<(), StoreError> {
    let p = dialect.path.display().to_string();
    let version: u32 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| dialect.err(e))?;
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
            .map_err(|e| dialect.err(e))?;
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
            .map_err(|e| dialect.err(e))?;
        for step in &MIGRATIONS[version as usize..] {
            tx.execute_batch(step).map_err(|e| dialect.err(e))?;
        }
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)
            .map_err(|e| dialect.err(e))?;
        tx.commit().map_err(|e| dialect.err(e))?;
    }
    // Check the shape we expect is really there (a foreign file with our version number):
    // preparing a statement resolves its tables and columns without reading a row, so this
    // costs the same for an empty store and for one with a million events. Damage inside the
    // tables is reported when a page is read (`Sqlite::err` maps it to `Corrupt`).
    conn.prepare("SELECT run_id, lease_token, seq FROM runs JOIN events USING (run_id)")
        .map(drop)
        .map_err(|e| StoreError::Corrupt {
            path: p.clone(),
            message: e.to_string(),
        })?;
    Ok(())
}

impl Sqlite {
    /// Corruption and "not a database" are their own error: the user's next step differs.
    fn err(&self, e: rusqlite::Error) -> StoreError {
        let path = self.path.display().to_string();
        let corrupt = matches!(
            e.sqlite_error_code(),
            Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase)
        );
        if corrupt {
            StoreError::Corrupt {
                path,
                message: e.to_string(),
            }
        } else {
            StoreError::Query(format!("{e} (store {path})"))
        }
    }
}

fn open_err(path: &Path, e: &rusqlite::Error) -> StoreError {
    StoreError::Open {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

impl ToSql for Val {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Self::Int(Some(v)) => ToSqlOutput::from(*v),
            Self::Text(Some(v)) => ToSqlOutput::from(v.as_str()),
            Self::Int(None) | Self::Text(None) => ToSqlOutput::from(rusqlite::types::Null),
        })
    }
}

fn read_row(r: &rusqlite::Row<'_>, columns: usize) -> rusqlite::Result<Row> {
    (0..columns)
        .map(|i| {
            Ok(match r.get_ref(i)? {
                ValueRef::Null => Val::Int(None),
                ValueRef::Integer(v) => Val::Int(Some(v)),
                ValueRef::Text(t) => Val::Text(Some(String::from_utf8_lossy(t).into_owned())),
                ValueRef::Real(v) => Val::Text(Some(v.to_string())),
                ValueRef::Blob(b) => Val::Text(Some(String::from_utf8_lossy(b).into_owned())),
            })
        })
        .collect::<rusqlite::Result<_>>()
        .map(Row)
}

impl Dialect for Sqlite {
    type Conn = Connection;

    /// Writers are serialized by `BEGIN IMMEDIATE`; there are no row locks.
    const FOR_UPDATE: &'static str = "";
    const SKIP_LOCKED: &'static str = "";
    /// Unique across the store: the transaction is IMMEDIATE, so no other writer interleaves.
    const NEXT_TOKEN: &'static str = "SELECT coalesce(max(lease_token), 0) + 1 FROM runs";
    const GREATEST: &'static str = "max";
    const FENCE_CURRENT: &'static str = "current";
    const FENCE_ORDER: &'static str = "rowid";
    /// `BEGIN IMMEDIATE` already holds the file's one write lock.
    const TRY_ANCHOR: &'static str = "SELECT 1";
    /// One writer at a time anyway: partitions would buy nothing.
    const DEFAULT_PARTITIONS: u64 = 1;
    /// SQLite has no data-modifying `WITH`; its statements cost no round trip anyway.
    const WRITES_IN_ONE: bool = false;
    /// One writer at a time on a local file: the locked transaction costs no round trip.
    const GUARDED_APPEND: bool = false;

    fn ready(&self, _conn: &mut Connection) -> Result<(), StoreError> {
        Ok(())
    }

    fn begin(&self, conn: &mut Connection, _kind: TxKind) -> Result<(), StoreError> {
        // One write lock for the whole file: the audit chain is sealed in commit order.
        conn.execute_batch("BEGIN IMMEDIATE")
            .map_err(|e| self.err(e))
    }

    fn commit(&self, conn: &mut Connection) -> Result<(), StoreError> {
        conn.execute_batch("COMMIT").map_err(|e| self.err(e))
    }

    fn rollback(&self, conn: &mut Connection) -> Result<(), StoreError> {
        conn.execute_batch("ROLLBACK").map_err(|e| self.err(e))
    }

    fn execute(&self, conn: &mut Connection, sql: &str, params: &[Val]) -> Result<u64, StoreError> {
        let mut stmt = conn.prepare_cached(sql).map_err(|e| self.err(e))?;
        let changed = stmt
            .execute(rusqlite::params_from_iter(params))
            .map_err(|e| self.err(e))?;
        Ok(changed as u64)
    }

    fn query(
        &self,
        conn: &mut Connection,
        sql: &str,
        params: &[Val],
    ) -> Result<Vec<Row>, StoreError> {
        let mut stmt = conn.prepare_cached(sql).map_err(|e| self.err(e))?;
        let columns = stmt.column_count();
        let rows = stmt
            .query_map(rusqlite::params_from_iter(params), |r| read_row(r, columns))
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    /// One connection: SQLite serializes writers anyway, and `BEGIN IMMEDIATE` on one
    /// connection is what keeps a transaction's reads and its writes one snapshot.
    const POOL: usize = 1;

    fn connect(&self) -> Result<Self::Conn, StoreError> {
        Err(StoreError::Query(
            "the SQLite store keeps one connection".to_owned(),
        ))
    }

    fn transport(&self, _conn: &mut Self::Conn) -> Result<String, StoreError> {
        Ok("a local file".to_owned())
    }

    /// A file of one installation has no database roles: the statements' own tenant filter is
    /// the only layer.
    fn scope(&self, _conn: &mut Self::Conn, _tenant: Option<&str>) -> Result<(), StoreError> {
        Ok(())
    }

    fn row_security(
        &self,
        _conn: &mut Self::Conn,
    ) -> Result<Option<crate::RowSecurity>, StoreError> {
        Ok(None)
    }

    fn bad_row(&self, what: String) -> StoreError {
        StoreError::Query(format!("{what} (store {})", self.path.display()))
    }
}
