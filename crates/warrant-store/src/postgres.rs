//! The shared store: one PostgreSQL database that several machines work from. An append locks
//! its run's row and its audit partition's head row, so each partition's chain is sealed in
//! commit order; workers lease runs with `FOR UPDATE SKIP LOCKED`. Synchronous to its callers:
//! each connection is the driver's asynchronous client on a runtime of its own, driven by the
//! calling thread, so a transaction's requests are pipelined (its `BEGIN` goes with its first
//! statement, its writes with its `COMMIT`: an append is two round trips). Over TLS with
//! libpq's `sslmode` meanings (see [`crate::tls`]). The algorithm is the shared one of
//! [`crate::sql`]; this file holds what is PostgreSQL's own: connecting, its schema steps,
//! locks, prepared statements, pipelining and how its errors read.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use postgres::error::SqlState;
use postgres::types::{ToSql, Type};
use postgres::{NoTls, Statement};
use tokio::runtime::Runtime;
use tokio_postgres::{Client, Config};
use warrant_core::Clock;

use tokio_postgres_rustls::MakeRustlsConnect;

use crate::sql::{Dialect, Row, Store, TxKind, Val, numbered_dollars};
use crate::tls::{self, SslMode};
use crate::{SCHEMA_VERSION, StoreError};

/// Advisory lock keys (arbitrary, fixed): one serializes anchorings of the partitioned audit
/// chain (appends wait only on their partition's head row), one serializes schema migrations
/// of concurrently starting processes. The anchoring key, 0x5741_5252_0000_0001, is spelled
/// in decimal in the statements that take it.
const SCHEMA_LOCK: i64 = 0x5741_5252_0000_0002;

/// The `BEGIN` of an anchoring: it waits for the anchoring lock.
const BEGIN_ANCHOR: &str = "BEGIN; SELECT pg_advisory_xact_lock(6287397066926718977)";

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

/// Version 4: the autonomy envelope: kill switches (set and lifted, kept as history; at most
/// one set per scope and target) and the shared rate buckets.
const SCHEMA_V4: &str = "
CREATE TABLE kill_switches (
    id        BIGSERIAL PRIMARY KEY,
    scope       TEXT NOT NULL,
    target      TEXT NOT NULL,
    reason      TEXT NOT NULL,
    set_by      TEXT NOT NULL,
    set_at      BIGINT NOT NULL,
    lifted_by   TEXT,
    lifted_at   BIGINT,
    lift_reason TEXT
);
CREATE UNIQUE INDEX kill_switches_set ON kill_switches(scope, target) WHERE lifted_at IS NULL;
CREATE TABLE rate_buckets (
    bucket     TEXT PRIMARY KEY,
    level      BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
";

/// Version 5: tenants (see the SQLite step), and row-level security as the second layer: a
/// session sees only the rows of the tenant in `warrant.tenant` (every row for `*`, the
/// installation's own statements; none when unset). `FORCE` holds the table owner to it too;
/// a superuser or a `BYPASSRLS` role is held by no policy, so the store's role must be neither
/// for this layer to hold (the statements' own filter holds either way).
const SCHEMA_V5: &str = "
ALTER TABLE runs ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';
ALTER TABLE events ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';
ALTER TABLE requests ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';
ALTER TABLE audit ADD COLUMN tenant TEXT;
UPDATE runs r SET tenant = coalesce(
    (SELECT e.payload::jsonb->'principal'->>'tenant' FROM events e WHERE e.run_id = r.run_id AND e.seq = 1),
    'default');
UPDATE events e SET tenant = r.tenant FROM runs r WHERE r.run_id = e.run_id;
UPDATE requests q SET tenant = r.tenant FROM runs r WHERE r.run_id = q.run_id;
UPDATE audit a SET tenant = coalesce(
    (SELECT r.tenant FROM runs r WHERE r.run_id = a.run_id),
    a.line::jsonb->'data'->>'tenant');
CREATE INDEX runs_by_tenant ON runs(tenant, created_at);
CREATE INDEX events_by_tenant ON events(tenant, run_id, seq);
CREATE INDEX requests_by_tenant ON requests(tenant, status, created_at);
CREATE INDEX audit_by_tenant ON audit(tenant, seq);
CREATE TABLE tenant_refusals (
    id        BIGSERIAL PRIMARY KEY,
    tenant    TEXT NOT NULL,
    actor     TEXT NOT NULL,
    operation TEXT NOT NULL,
    target    TEXT NOT NULL,
    owner     TEXT NOT NULL,
    at        BIGINT NOT NULL
);
CREATE INDEX tenant_refusals_by_tenant ON tenant_refusals(tenant, at);
CREATE INDEX tenant_refusals_by_owner ON tenant_refusals(owner, at);
CREATE TABLE delegation_revocations (
    id         TEXT PRIMARY KEY,
    revoked_by TEXT NOT NULL,
    reason     TEXT NOT NULL,
    at         BIGINT NOT NULL
);
ALTER TABLE runs ENABLE ROW LEVEL SECURITY;
ALTER TABLE runs FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON runs
    USING (current_setting('warrant.tenant', true) IN ('*', tenant));
ALTER TABLE events ENABLE ROW LEVEL SECURITY;
ALTER TABLE events FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON events
    USING (current_setting('warrant.tenant', true) IN ('*', tenant));
ALTER TABLE requests ENABLE ROW LEVEL SECURITY;
ALTER TABLE requests FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON requests
    USING (current_setting('warrant.tenant', true) IN ('*', tenant));
ALTER TABLE audit ENABLE ROW LEVEL SECURITY;
ALTER TABLE audit FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON audit
    USING (current_setting('warrant.tenant', true) IN ('*', tenant));
ALTER TABLE tenant_refusals ENABLE ROW LEVEL SECURITY;
ALTER TABLE tenant_refusals FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON tenant_refusals
    USING (current_setting('warrant.tenant', true) IN ('*', tenant, owner));
";

/// Version 6: budget totals (see the SQLite store's step), under the same row-level security.
const SCHEMA_V6: &str = "
CREATE TABLE budget_totals (
    tenant        TEXT NOT NULL,
    actor         TEXT NOT NULL,
    input_tokens  BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    cost_nanos    BIGINT NOT NULL DEFAULT 0,
    updated_at    BIGINT NOT NULL,
    PRIMARY KEY (tenant, actor)
);
INSERT INTO budget_totals (tenant, actor, input_tokens, output_tokens, cost_nanos, updated_at)
SELECT r.tenant, r.actor, sum(u.input_tokens), sum(u.output_tokens), sum(u.cost_nanos), max(u.at)
FROM runs r JOIN (
    SELECT run_id, recorded_at AS at,
        CASE WHEN p->'usage'->>'input_tokens' ~ '^[0-9]+$'
            THEN (p->'usage'->>'input_tokens')::bigint ELSE 0 END AS input_tokens,
        CASE WHEN p->'usage'->>'output_tokens' ~ '^[0-9]+$'
            THEN (p->'usage'->>'output_tokens')::bigint ELSE 0 END AS output_tokens,
        CASE WHEN jsonb_typeof(p->'usage'->'cost_usd') = 'number'
            AND (p->'usage'->>'cost_usd')::float8 > 0
            THEN trunc((p->'usage'->>'cost_usd')::float8 * 1e9::float8 + 0.5::float8)::bigint ELSE 0 END AS cost_nanos
    FROM (SELECT run_id, recorded_at, payload::jsonb AS p FROM events
        WHERE kind IN ('model_responded', 'budget_exceeded', 'awaiting_message')) e
    WHERE jsonb_typeof(p->'usage') = 'object'
) u ON u.run_id = r.run_id
GROUP BY r.tenant, r.actor
HAVING sum(u.input_tokens) + sum(u.output_tokens) + sum(u.cost_nanos) > 0;
ALTER TABLE budget_totals ENABLE ROW LEVEL SECURITY;
ALTER TABLE budget_totals FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON budget_totals
    USING (current_setting('warrant.tenant', true) IN ('*', tenant));
";

/// Version 7: the partitioned audit chain (see the SQLite step). Existing records are
/// partition 0's history at their seq; a store created now gets
/// [`Dialect::DEFAULT_PARTITIONS`] partitions (added by [`Postgres::migrate`]).
const SCHEMA_V7: &str = "
ALTER TABLE audit
    ADD COLUMN part BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN pos BIGINT;
UPDATE audit SET pos = seq;
ALTER TABLE audit DROP CONSTRAINT audit_pkey;
ALTER TABLE audit ADD PRIMARY KEY (part, seq);
CREATE UNIQUE INDEX audit_by_pos ON audit(pos);
CREATE INDEX audit_unpositioned ON audit(part, seq) WHERE pos IS NULL;
CREATE TABLE audit_partitions (
    part          BIGINT PRIMARY KEY,
    seq           BIGINT NOT NULL,
    hash          TEXT NOT NULL
);
INSERT INTO audit_partitions (part, seq, hash)
    SELECT 0, coalesce(max(seq), 0), coalesce((SELECT hash FROM audit ORDER BY seq DESC LIMIT 1), 'sha256:0000000000000000000000000000000000000000000000000000000000000000')
    FROM audit;
INSERT INTO audit_partitions (part, seq, hash) VALUES (-1, 0, 'sha256:0000000000000000000000000000000000000000000000000000000000000000');
";

/// Version 8: audit rows are written once (see the SQLite step). `audit_order` holds what
/// `audit` rows held only to be rewritten by an anchoring, each of which touched every index
/// of the table twice per record (an update of an indexed column is never a heap-only one).
/// Like `audit_partitions` it holds positions and no content, and has no row security.
const SCHEMA_V8: &str = "
CREATE TABLE audit_order (
    pos           BIGINT PRIMARY KEY,
    part          BIGINT NOT NULL,
    seq           BIGINT NOT NULL,
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

/// Prepared statements kept per connection before the cache starts over (audit queries are
/// built from their filters, so their texts vary).
const STATEMENT_CACHE: usize = 128;

/// The shared PostgreSQL store: the shared algorithm over a small pool of connections.
pub type PostgresStore = Store<Postgres>;

/// PostgreSQL's side of the store: where the server is, and how statements and errors are
/// spelled.
pub struct Postgres {
    /// The URL as given, password included: only ever used to reconnect, never shown.
    config: Config,
    /// The URL without its password, for messages.
    shown: String,
    /// The TLS the location asks for, and the connector that applies it (none: plain TCP).
    tls_mode: SslMode,
    tls: Option<MakeRustlsConnect>,
}

/// A connection and the statements prepared on it: the driver's client, and the runtime of
/// one thread (the caller's) that drives it.
pub struct PgConn {
    client: Client,
    runtime: Runtime,
    statements: HashMap<String, Statement>,
    /// Between this connection's `BEGIN` and its `COMMIT`/`ROLLBACK`.
    in_tx: bool,
    /// The open transaction's `BEGIN`, not sent yet: it goes with the first statement.
    begin: Option<&'static str>,
    /// Writes of the open transaction not sent yet (their answer is only success), with
    /// `?N` placeholders: they go with the next statement, or with the `COMMIT`.
    pending: Vec<(String, Vec<Val>)>,
    /// The tenant this session's `warrant.tenant` is set to (`*`: every tenant); `None` until
    /// set, when row-level security shows no row at all.
    scope: Option<String>,
}

impl std::fmt::Debug for PgConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgConn")
            .field("statements", &self.statements.len())
            .finish()
    }
}

impl std::fmt::Debug for Postgres {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Postgres")
            .field("url", &self.shown)
            .field("sslmode", &self.tls_mode.as_str())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Store<Postgres> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("url", &self.dialect.shown)
            .finish()
    }
}

impl Store<Postgres> {
    /// Connects (retrying with backoff while the server cannot be reached), creates the schema
    /// in a fresh database, migrates an older one forward and refuses a newer one.
    pub fn connect(url: &str, clock: Arc<dyn Clock>) -> Result<Self, StoreError> {
        Self::connect_with_password(url, None, clock)
    }

    /// [`Self::connect`] with the password given apart from the URL; it wins over one in it.
    pub fn connect_with_password(
        url: &str,
        password: Option<&str>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StoreError> {
        let dialect = Postgres::configure(url, password)?;
        let mut conn = dialect.connect()?;
        dialect.migrate(&mut conn)?;
        Ok(Self::new(dialect, conn, clock))
    }

    /// The store's URL, without its password.
    pub fn url(&self) -> &str {
        &self.dialect.shown
    }
}

/// A connection to a PostgreSQL server made as the store makes its own (the same URL forms,
/// `sslmode` meanings and TLS, password apart from the URL, connect timeout, backoff), for a
/// crate that keeps tables of its own in the same or another database (shared memory).
pub struct PgConnector(Postgres);

impl std::fmt::Debug for PgConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl PgConnector {
    /// Reads `url` (and `password`, which wins over one in it); connects nothing yet.
    pub fn new(url: &str, password: Option<&str>) -> Result<Self, StoreError> {
        Postgres::configure(url, password).map(Self)
    }

    /// A new connection, retried with backoff while the server cannot be reached.
    pub fn connect(&self) -> Result<postgres::Client, StoreError> {
        let config = postgres::Config::from(self.0.config.clone());
        with_backoff(&self.0.shown, || match &self.0.tls {
            Some(tls) => config.connect(tls.clone()),
            None => config.connect(NoTls),
        })
    }

    /// The URL without its password, for messages.
    pub fn shown(&self) -> &str {
        &self.0.shown
    }

    /// A driver error as the store words it (the server's own message, the location without
    /// its password; a lost connection as [`StoreError::Interrupted`]).
    pub fn error(&self, e: &postgres::Error) -> StoreError {
        self.0.err(e)
    }
}

impl Postgres {
    fn configure(url: &str, password: Option<&str>) -> Result<Self, StoreError> {
        let shown = redact(url);
        let open_err = |message: String| StoreError::Open {
            path: shown.clone(),
            message,
        };
        let (driver_url, params) = tls::split(url).map_err(open_err)?;
        let tls = tls::connector(&params).map_err(open_err)?;
        let mut config = Config::from_str(&driver_url).map_err(|e| open_err(describe(&e)))?;
        config.ssl_mode(params.mode.driver());
        if let Some(password) = password {
            config.password(password);
        }
        if config.get_connect_timeout().is_none() {
            // A blackholed host would otherwise hang each attempt for the OS's TCP timeout.
            config.connect_timeout(Duration::from_secs(5));
        }
        Ok(Postgres {
            config,
            shown,
            tls_mode: params.mode,
            tls,
        })
    }

    fn migrate(&self, conn: &mut PgConn) -> Result<(), StoreError> {
        let PgConn {
            client, runtime, ..
        } = conn;
        runtime.block_on(self.migrate_on(client))
    }

    async fn migrate_on(&self, client: &mut Client) -> Result<(), StoreError> {
        let tx = client.transaction().await.map_err(|e| self.err(&e))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
            .await
            .map_err(|e| self.err(&e))?;
        // Migration steps see every tenant's rows (row-level security from version 4 on).
        tx.execute("SELECT set_config('warrant.tenant', '*', true)", &[])
            .await
            .map_err(|e| self.err(&e))?;
        let present: Vec<String> = tx
            .query(
                "SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema() AND tablename = ANY($1)",
                &[&&TABLES[..]],
            )
            .await
            .map_err(|e| self.err(&e))?
            .iter()
            .map(|r| r.try_get(0))
            .collect::<Result<_, _>>()
            .map_err(|e| self.err(&e))?;
        let version: u32 = if present.iter().any(|t| t == "warrant_schema") {
            let rows = tx
                .query("SELECT version FROM warrant_schema", &[])
                .await
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
            .await
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
                tx.batch_execute(step).await.map_err(|e| self.err(&e))?;
            }
            if version == 0 {
                // A new store: its chain is partitioned from the start (an existing one keeps
                // its one chain: its partitions are fixed once records exist).
                tx.execute(
                    "INSERT INTO audit_partitions (part, seq, hash) SELECT g, 0, $1 FROM generate_series(1::bigint, $2::bigint) g",
                    &[&crate::sql::GENESIS, &(<Postgres as Dialect>::DEFAULT_PARTITIONS as i64 - 1)],
                )
                .await
                .map_err(|e| self.err(&e))?;
            }
            tx.execute(
                "UPDATE warrant_schema SET version = $1",
                &[&(SCHEMA_VERSION as i32)],
            )
            .await
            .map_err(|e| self.err(&e))?;
        }
        tx.commit().await.map_err(|e| self.err(&e))
    }

    fn err(&self, e: &postgres::Error) -> StoreError {
        if connection_lost(e) {
            return StoreError::Interrupted {
                url: self.shown.clone(),
                message: describe(e),
            };
        }
        StoreError::Query(format!("{} (store {})", describe(e), self.shown))
    }

    fn corrupt(&self, message: String) -> StoreError {
        StoreError::Corrupt {
            path: self.shown.clone(),
            message,
        }
    }

    /// Replaces a connection that died with a new one (its prepared statements and whatever
    /// of a transaction it held go with it).
    fn reopen(&self, conn: &mut PgConn) -> Result<(), StoreError> {
        let scope = conn.scope.take();
        *conn = self.connect()?;
        // The new session is scoped as the old one was.
        match scope {
            Some(scope) => self.set_scope(conn, &scope),
            None => Ok(()),
        }
    }

    fn set_scope(&self, conn: &mut PgConn, scope: &str) -> Result<(), StoreError> {
        let PgConn {
            client, runtime, ..
        } = conn;
        runtime
            .block_on(client.execute("SELECT set_config('warrant.tenant', $1, false)", &[&scope]))
            .map_err(|e| self.err(&e))?;
        conn.scope = Some(scope.to_owned());
        Ok(())
    }

    /// Sends what the open transaction still holds back (its `BEGIN`, its pending writes), then
    /// `last`, in one round trip, and `last`'s answer; the first failure otherwise (a failed
    /// statement aborts the transaction, and a `COMMIT` after it rolls back).
    fn send(&self, conn: &mut PgConn, last: Request) -> Result<Answer, postgres::Error> {
        let pending = std::mem::take(&mut conn.pending);
        let mut ready = Vec::with_capacity(pending.len() + 2);
        ready.extend(conn.begin.map(Ready::Simple));
        // Statements not prepared on this connection yet are prepared first (a round trip
        // each, once per connection).
        for request in pending
            .into_iter()
            .map(|(sql, values)| Request::Statement(sql, values, false))
            .chain([last])
        {
            ready.push(match request {
                Request::Simple(sql) => Ready::Simple(sql),
                Request::Statement(sql, values, rows) => {
                    Ready::Prepared(prepared(conn, &sql)?, values, rows)
                }
            });
        }
        conn.begin = None;
        let PgConn {
            client, runtime, ..
        } = conn;
        let client: &Client = client;
        let answers = runtime.block_on(in_order(
            ready
                .iter()
                .map(|request| Box::pin(request.send(client)) as PendingAnswer<'_>)
                .collect(),
        ));
        let mut last = Answer::Done;
        for answer in answers {
            last = answer?;
        }
        Ok(last)
    }

    /// [`Postgres::send`], sending the transaction's first round trip again on a new
    /// connection when the old one turned out dead (a cut, an idle timeout, a restart):
    /// whatever of the transaction reached the server was rolled back with the connection, and
    /// nothing of it had been committed. A round trip with a `COMMIT` is never sent again:
    /// whether it committed is unknown there.
    fn send_retrying(&self, conn: &mut PgConn, last: Request) -> Result<Answer, StoreError> {
        let replay = conn
            .begin
            .filter(|_| !last.is_commit())
            .map(|begin| (begin, conn.pending.clone(), last.clone()));
        match self.send(conn, last) {
            Err(e) if connection_lost(&e) => match replay {
                Some((begin, pending, last)) => {
                    self.reopen(conn)?;
                    conn.in_tx = true;
                    conn.begin = Some(begin);
                    conn.pending = pending;
                    self.send(conn, last).map_err(|e| self.err(&e))
                }
                None => Err(self.err(&e)),
            },
            other => other.map_err(|e| self.err(&e)),
        }
    }
}

/// One request of a pipeline.
#[derive(Clone, Debug)]
enum Request {
    /// A statement without parameters, in the simple protocol (`BEGIN`, `COMMIT`).
    Simple(&'static str),
    /// A statement with `?N` placeholders and its parameters; `true`: its rows are wanted,
    /// else the count it changed.
    Statement(String, Vec<Val>, bool),
}

impl Request {
    fn is_commit(&self) -> bool {
        matches!(self, Self::Simple(sql) if sql.starts_with("COMMIT"))
    }
}

/// A request ready to send: its statement prepared on the connection.
enum Ready {
    Simple(&'static str),
    Prepared(Statement, Vec<Val>, bool),
}

/// What a request answered.
enum Answer {
    Done,
    Changed(u64),
    Rows(Vec<tokio_postgres::Row>),
}

type PendingAnswer<'a> = Pin<Box<dyn Future<Output = Result<Answer, postgres::Error>> + 'a>>;

impl Ready {
    async fn send(&self, client: &Client) -> Result<Answer, postgres::Error> {
        match self {
            Self::Simple(sql) => client.batch_execute(sql).await.map(|()| Answer::Done),
            Self::Prepared(statement, values, true) => client
                .query(statement, &params(values))
                .await
                .map(Answer::Rows),
            Self::Prepared(statement, values, false) => client
                .execute(statement, &params(values))
                .await
                .map(Answer::Changed),
        }
    }
}

/// Runs `requests` together, first polling each in order: the driver sends a request when it
/// is first polled, so they go out in this order, in one write, and are answered in one
/// round trip.
async fn in_order(mut requests: Vec<PendingAnswer<'_>>) -> Vec<Result<Answer, postgres::Error>> {
    let mut answers: Vec<Option<Result<Answer, postgres::Error>>> =
        requests.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        for (request, answer) in requests.iter_mut().zip(answers.iter_mut()) {
            if answer.is_none()
                && let Poll::Ready(done) = request.as_mut().poll(cx)
            {
                *answer = Some(done);
            }
        }
        if answers.iter().all(Option::is_some) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    answers.into_iter().flatten().collect()
}

/// The parameters as the driver takes them: a NULL keeps its type.
fn params(params: &[Val]) -> Vec<&(dyn ToSql + Sync)> {
    params
        .iter()
        .map(|v| match v {
            Val::Int(v) => v as &(dyn ToSql + Sync),
            Val::Text(v) => v as &(dyn ToSql + Sync),
        })
        .collect()
}

fn read_row(row: &postgres::Row) -> Result<Row, postgres::Error> {
    let mut out = Vec::with_capacity(row.len());
    for (i, column) in row.columns().iter().enumerate() {
        let ty = column.type_();
        out.push(if *ty == Type::INT8 {
            Val::Int(row.try_get::<_, Option<i64>>(i)?)
        } else if *ty == Type::INT4 {
            Val::Int(row.try_get::<_, Option<i32>>(i)?.map(i64::from))
        } else if *ty == Type::INT2 {
            Val::Int(row.try_get::<_, Option<i16>>(i)?.map(i64::from))
        } else if *ty == Type::BOOL {
            Val::Int(row.try_get::<_, Option<bool>>(i)?.map(i64::from))
        } else {
            // Text columns; any other type fails here with the driver's own words.
            Val::Text(row.try_get::<_, Option<String>>(i)?)
        });
    }
    Ok(Row(out))
}

impl Dialect for Postgres {
    type Conn = PgConn;

    const FOR_UPDATE: &'static str = " FOR UPDATE";
    const SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
    /// One sequence for the whole store, so a token of one run never passes for another's.
    const NEXT_TOKEN: &'static str = "SELECT nextval('lease_tokens')";
    const GREATEST: &'static str = "greatest";
    const FENCE_CURRENT: &'static str = "current_token";
    const FENCE_ORDER: &'static str = "id";
    const TRY_ANCHOR: &'static str = "SELECT pg_try_advisory_xact_lock(6287397066926718977)";
    /// Enough that four to eight workers rarely meet on one partition's head row.
    const DEFAULT_PARTITIONS: u64 = 8;
    /// An append's writes (events, audit records, the partition head, the run's row) are one
    /// statement: one round trip instead of four.
    const WRITES_IN_ONE: bool = true;
    /// An append is first tried as one guarded statement: one round trip, no row lock held
    /// across round trips (see `Store::guarded_append`).
    const GUARDED_APPEND: bool = true;

    /// The worker's appends, the lease heartbeat and the delivery loop each get their own.
    const POOL: usize = 4;

    fn connect(&self) -> Result<PgConn, StoreError> {
        // What the `postgres` crate does per connection, kept here so requests can be
        // pipelined: a runtime driven by the calling thread, and the connection's task on it.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| StoreError::Open {
                path: self.shown.clone(),
                message: format!("cannot start the connection's runtime: {e}"),
            })?;
        let client = with_backoff(&self.shown, || {
            runtime.block_on(async {
                let client = match &self.tls {
                    Some(tls) => {
                        let (client, connection) = self.config.connect(tls.clone()).await?;
                        tokio::spawn(connection);
                        client
                    }
                    None => {
                        let (client, connection) = self.config.connect(NoTls).await?;
                        tokio::spawn(connection);
                        client
                    }
                };
                Ok(client)
            })
        })?;
        Ok(PgConn {
            client,
            runtime,
            statements: HashMap::new(),
            in_tx: false,
            begin: None,
            pending: Vec::new(),
            scope: None,
        })
    }

    /// Reconnects first if the server closed the connection (a restart, a failover); the
    /// statements prepared on the old one are gone with it.
    fn ready(&self, conn: &mut PgConn) -> Result<(), StoreError> {
        if conn.client.is_closed() {
            *conn = self.connect()?;
        }
        Ok(())
    }

    /// Sets `warrant.tenant` for the session when it differs from what it holds: the tenant,
    /// or `*` for the installation's own statements. Row-level security reads it.
    fn scope(&self, conn: &mut PgConn, tenant: Option<&str>) -> Result<(), StoreError> {
        let want = tenant.unwrap_or("*");
        if conn.scope.as_deref() == Some(want) {
            return Ok(());
        }
        self.set_scope(conn, want)
    }

    /// Sends nothing yet: the `BEGIN` goes with the transaction's first statement.
    fn begin(&self, conn: &mut PgConn, kind: TxKind) -> Result<(), StoreError> {
        conn.begin = Some(match kind {
            // Appends wait only for the same partition's (its head row, `FOR UPDATE`).
            TxKind::Chain | TxKind::Lease => "BEGIN",
            TxKind::Anchor => BEGIN_ANCHOR,
        });
        conn.pending.clear();
        conn.in_tx = true;
        Ok(())
    }

    /// The pending writes and the `COMMIT`, in one round trip; nothing at all for a
    /// transaction that never sent a statement.
    fn commit(&self, conn: &mut PgConn) -> Result<(), StoreError> {
        conn.in_tx = false;
        if conn.begin.is_some() && conn.pending.is_empty() {
            conn.begin = None;
            return Ok(());
        }
        self.send_retrying(conn, Request::Simple("COMMIT"))
            .map(|_| ())
    }

    fn rollback(&self, conn: &mut PgConn) -> Result<(), StoreError> {
        conn.in_tx = false;
        conn.pending.clear();
        if conn.begin.take().is_some() {
            // Nothing of the transaction was sent.
            return Ok(());
        }
        let PgConn {
            client, runtime, ..
        } = conn;
        runtime
            .block_on(client.batch_execute("ROLLBACK"))
            .map_err(|e| self.err(&e))
    }

    fn execute(&self, conn: &mut PgConn, sql: &str, values: &[Val]) -> Result<u64, StoreError> {
        match self.send_retrying(
            conn,
            Request::Statement(sql.to_owned(), values.to_vec(), false),
        )? {
            Answer::Changed(n) => Ok(n),
            Answer::Done | Answer::Rows(_) => Ok(0),
        }
    }

    /// Inside a transaction, held back until its next statement or its `COMMIT`.
    fn write(&self, conn: &mut PgConn, sql: &str, values: Vec<Val>) -> Result<(), StoreError> {
        if conn.in_tx {
            conn.pending.push((sql.to_owned(), values));
            return Ok(());
        }
        self.execute(conn, sql, &values).map(|_| ())
    }

    fn query(&self, conn: &mut PgConn, sql: &str, values: &[Val]) -> Result<Vec<Row>, StoreError> {
        let request = Request::Statement(sql.to_owned(), values.to_vec(), true);
        let answer = if conn.in_tx {
            self.send_retrying(conn, request)?
        } else {
            match self.send(conn, request.clone()) {
                // A read outside a transaction on a connection that died while idle: read
                // again on a new one (a read changes nothing, so repeating it is safe).
                Err(e) if sql.trim_start().starts_with("SELECT") && connection_lost(&e) => {
                    self.reopen(conn)?;
                    self.send(conn, request).map_err(|e| self.err(&e))?
                }
                other => other.map_err(|e| self.err(&e))?,
            }
        };
        let rows = match answer {
            Answer::Rows(rows) => rows,
            Answer::Done | Answer::Changed(_) => Vec::new(),
        };
        rows.iter()
            .map(read_row)
            .collect::<Result<_, _>>()
            .map_err(|e| self.err(&e))
    }

    /// A superuser or a `BYPASSRLS` role is not held by row-level security, even `FORCE`d.
    fn row_security(&self, conn: &mut PgConn) -> Result<Option<crate::RowSecurity>, StoreError> {
        let rows = self.query(
            conn,
            "SELECT current_user::text, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user",
            &[],
        )?;
        match rows.first().map(|r| r.0.as_slice()) {
            Some(
                [
                    Val::Text(Some(role)),
                    Val::Int(Some(sup)),
                    Val::Int(Some(bypass)),
                ],
            ) => Ok(Some(crate::RowSecurity {
                role: role.clone(),
                superuser: *sup != 0,
                bypass_rls: *bypass != 0,
            })),
            _ => Err(self
                .bad_row("the login role's attributes could not be read from pg_roles".to_owned())),
        }
    }

    fn transport(&self, conn: &mut PgConn) -> Result<String, StoreError> {
        let rows = self.query(
            conn,
            "SELECT ssl, coalesce(version, ''), coalesce(cipher, '') FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )?;
        let encrypted = rows.first().and_then(|r| match r.0.as_slice() {
            [
                Val::Int(Some(1)),
                Val::Text(Some(version)),
                Val::Text(Some(cipher)),
            ] => Some(format!("{version} {cipher}")),
            _ => None,
        });
        let checked = match self.tls_mode {
            SslMode::VerifyFull => "certificate and host name verified",
            SslMode::VerifyCa => "certificate chain verified, host name not checked",
            SslMode::Require | SslMode::Prefer | SslMode::Disable => "server not authenticated",
        };
        Ok(match encrypted {
            Some(tls) => format!(
                "TLS ({tls}), {checked} (sslmode={})",
                self.tls_mode.as_str()
            ),
            None => format!(
                "plain TCP, not encrypted (sslmode={})",
                self.tls_mode.as_str()
            ),
        })
    }

    fn bad_row(&self, what: String) -> StoreError {
        StoreError::Query(format!("{what} (store {})", self.shown))
    }
}

/// Connects (`attempt`), retrying with exponential backoff while the server cannot be
/// reached. A server that answers and refuses (wrong password, no such database) is not
/// retried: waiting will not change its answer.
fn with_backoff<C>(
    shown: &str,
    mut attempt: impl FnMut() -> Result<C, postgres::Error>,
) -> Result<C, StoreError> {
    let mut pause = FIRST_BACKOFF;
    let mut tries = 1;
    loop {
        match attempt() {
            Ok(client) => return Ok(client),
            Err(e) => {
                // A certificate the client refused is refused again next time: not retried.
                let transient = match e.as_db_error() {
                    None => !is_tls_refusal(&e),
                    Some(db) => db.code() == &SqlState::CANNOT_CONNECT_NOW,
                };
                if !transient {
                    return Err(StoreError::Open {
                        path: shown.to_owned(),
                        message: describe(&e),
                    });
                }
                if tries >= CONNECT_ATTEMPTS {
                    return Err(StoreError::Unreachable {
                        url: shown.to_owned(),
                        attempts: tries,
                        message: describe(&e),
                    });
                }
            }
        }
        std::thread::sleep(pause);
        pause *= 2;
        tries += 1;
    }
}

/// The statement for `sql`, from the connection's cache or prepared now.
fn prepared(conn: &mut PgConn, sql: &str) -> Result<Statement, postgres::Error> {
    if let Some(statement) = conn.statements.get(sql) {
        return Ok(statement.clone());
    }
    let statement = conn
        .runtime
        .block_on(conn.client.prepare(&numbered_dollars(sql)))?;
    if conn.statements.len() >= STATEMENT_CACHE {
        conn.statements.clear();
    }
    conn.statements.insert(sql.to_owned(), statement.clone());
    Ok(statement)
}

/// Whether a call failed because the connection is gone (closed, reset, cut), not because
/// the server refused the statement.
fn connection_lost(e: &postgres::Error) -> bool {
    if let Some(db) = e.as_db_error() {
        // The server said why it closed an idle connection (a shutdown, a restart, an idle
        // session timeout) before closing it.
        return [
            SqlState::ADMIN_SHUTDOWN,
            SqlState::CRASH_SHUTDOWN,
            SqlState::CANNOT_CONNECT_NOW,
            SqlState::IDLE_SESSION_TIMEOUT,
        ]
        .contains(db.code());
    }
    if e.is_closed() {
        return true;
    }
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        if c.is::<std::io::Error>() {
            return true;
        }
        cause = c.source();
    }
    false
}

/// Whether the connection failed because TLS refused the server (its certificate, its name,
/// the handshake), as opposed to the server being out of reach.
fn is_tls_refusal(e: &postgres::Error) -> bool {
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        if c.downcast_ref::<rustls::Error>().is_some() {
            return true;
        }
        if let Some(io) = c.downcast_ref::<std::io::Error>()
            && io
                .get_ref()
                .is_some_and(|inner| inner.is::<rustls::Error>())
        {
            return true;
        }
        cause = c.source();
    }
    false
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
pub fn redact(url: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::{BEGIN_ANCHOR, Dialect, Postgres, redact};

    #[test]
    fn an_anchoring_waits_for_the_lock_a_try_takes() {
        let key = 0x5741_5252_0000_0001_i64.to_string();
        assert_eq!(
            (BEGIN_ANCHOR, <Postgres as Dialect>::TRY_ANCHOR),
            (
                format!("BEGIN; SELECT pg_advisory_xact_lock({key})").as_str(),
                format!("SELECT pg_try_advisory_xact_lock({key})").as_str()
            )
        );
    }

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
