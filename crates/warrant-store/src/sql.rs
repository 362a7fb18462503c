//! The store's algorithm, written once for every SQL database: appending events with their
//! index updates and chained audit records in one transaction, fencing, leases, reads, sink
//! state and cancellation. What really differs between databases (placeholder syntax, a few
//! spellings, how a connection and a transaction are handled, how errors read) is a
//! [`Dialect`]; `SqliteStore` and `PostgresStore` are this [`Store`] over theirs.
//!
//! Statements are written with numbered `?N` placeholders; a dialect that spells them
//! otherwise rewrites them (see [`numbered_dollars`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::Duration;

use serde_json::Value;
use warrant_core::{Clock, RequestId, RunId, Timestamp};

use crate::envelope::{EnvelopeStore, KillSubject, SWITCH_COLUMNS, StopSignals, read_switch};
use crate::{
    AnchorFacts, Append, AuditIndex, AuditOutbox, AuditQuery, CancelRequest, ChainHead, EventDraft,
    EventStore, FenceRejection, Lease, NewRun, PartHead, RequestRow, RequestStatus, RequestUpdate,
    RunRow, RunStatus, SealedRecord, Sealer, SinkState, StoreError, StoredEvent, Usage,
    partition_of,
};

/// The hash the first audit record chains to.
pub(crate) const GENESIS: &str =
    "sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// The most partitions a chain may have (each is a head row every anchoring reads).
pub const MAX_PARTITIONS: u64 = 1024;

/// The `part` of the anchor chain's rows (in `audit` and in `audit_partitions`): the records
/// partitions hold are numbered from 0.
pub const ANCHOR_PART: i64 = -1;

/// Inserts the unhashed outbox position into a sealed line, as its first attribute: the hash
/// and the signature do not cover it (an anchor states the positions it covers, and a verifier
/// checks them), so the record as signed is unchanged.
pub(crate) fn with_pos(line: &str, pos: u64) -> String {
    if line.starts_with("{\"pos\":") {
        // Positioned already: an anchor, sealed with its position, or a record an anchoring
        // of schema 7 wrote back with it.
        return line.to_owned();
    }
    match line.strip_prefix('{') {
        Some(rest) if rest.trim_start().starts_with('}') => format!("{{\"pos\":{pos}}}"),
        Some(rest) => format!("{{\"pos\":{pos},{rest}"),
        None => line.to_owned(),
    }
}

/// The position an anchor's line states (`data.pos`, hashed) and the partition heads it names
/// (`data.heads`).
fn anchor_state(line: &str) -> Result<(u64, Vec<PartHead>), String> {
    let value: Value =
        serde_json::from_str(line).map_err(|e| format!("the last anchor is not JSON: {e}"))?;
    let pos = value["data"]["pos"]
        .as_u64()
        .ok_or("the last anchor states no position")?;
    let heads = serde_json::from_value(value["data"]["heads"].clone())
        .map_err(|e| format!("the last anchor names no partition heads: {e}"))?;
    Ok((pos, heads))
}

/// A statement parameter or a column value. Every column the algorithm touches is an integer
/// or a text; the type travels with a NULL, because PostgreSQL checks it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Val {
    Int(Option<i64>),
    Text(Option<String>),
}

impl From<i64> for Val {
    fn from(v: i64) -> Self {
        Self::Int(Some(v))
    }
}

impl From<u64> for Val {
    /// Sequence numbers, counts and tokens: stored as `i64`, as they always were.
    fn from(v: u64) -> Self {
        Self::Int(Some(v as i64))
    }
}

impl From<Option<i64>> for Val {
    fn from(v: Option<i64>) -> Self {
        Self::Int(v)
    }
}

impl From<&str> for Val {
    fn from(v: &str) -> Self {
        Self::Text(Some(v.to_owned()))
    }
}

impl From<String> for Val {
    fn from(v: String) -> Self {
        Self::Text(Some(v))
    }
}

impl From<&String> for Val {
    fn from(v: &String) -> Self {
        Self::Text(Some(v.clone()))
    }
}

impl From<Option<String>> for Val {
    fn from(v: Option<String>) -> Self {
        Self::Text(v)
    }
}

impl From<Option<&str>> for Val {
    fn from(v: Option<&str>) -> Self {
        Self::Text(v.map(str::to_owned))
    }
}

/// The parameters of one statement.
macro_rules! vals {
    ($($v:expr),* $(,)?) => { [$(Val::from($v)),*] };
}
pub(crate) use vals;

/// One result row. Accessors name what was wrong in words; the store adds which store.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Row(pub(crate) Vec<Val>);

impl Row {
    pub(crate) fn opt_int(&self, i: usize) -> Result<Option<i64>, String> {
        match self.0.get(i) {
            Some(Val::Int(v)) => Ok(*v),
            Some(Val::Text(Some(s))) => s
                .parse()
                .map(Some)
                .map_err(|_| format!("column {i} holds {s:?}, not an integer")),
            Some(Val::Text(None)) => Ok(None),
            None => Err(format!("no column {i}")),
        }
    }

    pub(crate) fn int(&self, i: usize) -> Result<i64, String> {
        self.opt_int(i)?
            .ok_or_else(|| format!("column {i} is NULL, not an integer"))
    }

    pub(crate) fn u64(&self, i: usize) -> Result<u64, String> {
        Ok(self.int(i)? as u64)
    }

    pub(crate) fn opt_text(&self, i: usize) -> Result<Option<String>, String> {
        match self.0.get(i) {
            Some(Val::Text(v)) => Ok(v.clone()),
            Some(Val::Int(None)) => Ok(None),
            Some(Val::Int(Some(_))) => Err(format!("column {i} holds an integer, not a text")),
            None => Err(format!("no column {i}")),
        }
    }

    pub(crate) fn text(&self, i: usize) -> Result<String, String> {
        self.opt_text(i)?
            .ok_or_else(|| format!("column {i} is NULL, not a text"))
    }

    pub(crate) fn ts(&self, i: usize) -> Result<Timestamp, String> {
        millis(self.int(i)?)
    }

    pub(crate) fn opt_ts(&self, i: usize) -> Result<Option<Timestamp>, String> {
        self.opt_int(i)?.map(millis).transpose()
    }

    pub(crate) fn run_id(&self, i: usize) -> Result<RunId, String> {
        let s = self.text(i)?;
        RunId::parse(&s).ok_or_else(|| format!("malformed run id {s:?}"))
    }

    pub(crate) fn json(&self, i: usize) -> Result<Value, String> {
        serde_json::from_str(&self.text(i)?).map_err(|e| format!("malformed JSON: {e}"))
    }
}

fn millis(ms: i64) -> Result<Timestamp, String> {
    Timestamp::from_millis(ms).ok_or_else(|| format!("timestamp {ms} out of range"))
}

/// What a transaction is for, so a dialect can take the locks it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxKind {
    /// Appends events and seals audit records: writers of one partition commit in its chain
    /// order (they wait on its head row); writers of different partitions do not wait.
    Chain,
    /// Positions records and appends an anchor: one anchoring at a time.
    Anchor,
    /// Changes leases only.
    Lease,
}

/// What differs between SQL databases. Everything else is [`Store`].
pub trait Dialect: Send + Sync + 'static {
    type Conn: Send;

    /// Appended to a `SELECT` of the run row the transaction is about to change.
    const FOR_UPDATE: &'static str;
    /// Appended to the worker's pick of the next run: workers polling at once skip each
    /// other's picks instead of queueing behind them.
    const SKIP_LOCKED: &'static str;
    /// One row, one column: the next fencing token, unique across the store.
    const NEXT_TOKEN: &'static str;
    /// The two-argument maximum function.
    const GREATEST: &'static str;
    /// The column of `fence_rejections` holding the run's token at the refusal.
    const FENCE_CURRENT: &'static str;
    /// The column that orders `fence_rejections` rows of one instant.
    const FENCE_ORDER: &'static str;

    /// One row, one column, true when this transaction took the anchoring lock without
    /// waiting (false: another process is anchoring now).
    const TRY_ANCHOR: &'static str;
    /// How many partitions a store created now gets.
    const DEFAULT_PARTITIONS: u64;
    /// Whether one statement may carry several writes as data-modifying `WITH` parts (one
    /// round trip to a server instead of one per write); where not, each is its own statement.
    const WRITES_IN_ONE: bool;
    /// Whether an append may first be tried as one guarded statement outside a transaction
    /// (see [`Store::guarded_append`]): worth it where each statement is a round trip to a
    /// server and a row lock held across round trips makes concurrent appenders wait.
    const GUARDED_APPEND: bool;

    /// Connections a store of this dialect keeps per process, opened as concurrent calls need
    /// them (one for an embedded file, a few for a server).
    const POOL: usize;

    /// Opens one more connection to the same store, for the pool.
    fn connect(&self) -> Result<Self::Conn, StoreError>;
    /// Makes the connection usable (reconnecting one the server closed).
    fn ready(&self, conn: &mut Self::Conn) -> Result<(), StoreError>;
    fn begin(&self, conn: &mut Self::Conn, kind: TxKind) -> Result<(), StoreError>;
    fn commit(&self, conn: &mut Self::Conn) -> Result<(), StoreError>;
    fn rollback(&self, conn: &mut Self::Conn) -> Result<(), StoreError>;
    /// Runs a statement; the number of rows it changed.
    fn execute(&self, conn: &mut Self::Conn, sql: &str, params: &[Val]) -> Result<u64, StoreError>;
    /// Runs a write whose only answer is success. Inside a transaction a dialect may hold it
    /// back and send it with the next statement or the commit (its failure then fails that
    /// one, and the transaction).
    fn write(&self, conn: &mut Self::Conn, sql: &str, params: Vec<Val>) -> Result<(), StoreError> {
        self.execute(conn, sql, &params).map(|_| ())
    }
    fn query(
        &self,
        conn: &mut Self::Conn,
        sql: &str,
        params: &[Val],
    ) -> Result<Vec<Row>, StoreError>;
    /// A row that does not hold what the schema says, worded with the store's name.
    fn bad_row(&self, what: String) -> StoreError;
    /// How this process reaches the store, in words (`doctor`): a local file, or the TLS the
    /// server negotiated on this connection.
    fn transport(&self, conn: &mut Self::Conn) -> Result<String, StoreError>;
    /// Tells the database which tenant the next statements on `conn` act for (`None`: the
    /// installation itself, every tenant), for a database that enforces it as a second layer
    /// (PostgreSQL's row-level security). A no-op where the database has no such layer.
    fn scope(&self, conn: &mut Self::Conn, tenant: Option<&str>) -> Result<(), StoreError>;
    /// The login's standing against row-level security (`doctor`); `None` where the database
    /// has no such layer.
    fn row_security(&self, conn: &mut Self::Conn)
    -> Result<Option<crate::RowSecurity>, StoreError>;
}

/// Rewrites `?N` placeholders as `$N`, for databases that number them that way. A `?` in a
/// string literal would be rewritten too; the store's statements have none.
pub(crate) fn numbered_dollars(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

/// Rewrites the numbered placeholders `?N` of `sql` as `?{N + offset}`, so statements written
/// apart can share one parameter list.
fn shift_placeholders(sql: &str, offset: usize) -> String {
    if offset == 0 {
        return sql.to_owned();
    }
    let mut out = String::with_capacity(sql.len() + 8);
    let mut rest = sql;
    while let Some(at) = rest.find('?') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        match after[..digits].parse::<usize>() {
            Ok(n) => {
                out.push('?');
                out.push_str(&(n + offset).to_string());
            }
            Err(_) => out.push_str(&rest[at..at + 1 + digits]),
        }
        rest = &after[digits..];
    }
    out.push_str(rest);
    out
}

/// The writes of one transaction that need no answer but success, gathered so a dialect that
/// can ([`Dialect::WRITES_IN_ONE`]) sends them as one statement. Each is written with its own
/// placeholders from `?1`; the order they take effect in is not defined, so they must not
/// touch the same row.
#[derive(Debug, Default)]
pub(crate) struct Writes {
    statements: Vec<(String, Vec<Val>)>,
}

impl Writes {
    pub(crate) fn push(&mut self, sql: impl Into<String>, params: impl IntoIterator<Item = Val>) {
        self.statements
            .push((sql.into(), params.into_iter().collect()));
    }

    /// `insert` (ending in `VALUES `) with `values`, `columns` per row, as few statements as
    /// [`ROWS_PER_STATEMENT`] allows.
    fn push_rows(&mut self, insert: &str, columns: usize, values: Vec<Val>) {
        for chunk in values.chunks(columns * ROWS_PER_STATEMENT) {
            let sql = format!("{insert}{}", values_list(columns, chunk.len() / columns));
            self.push(sql, chunk.iter().cloned());
        }
    }

    /// One statement doing every write: all but the last as `WITH` parts, the last as the
    /// statement itself; `None` when there is nothing to write.
    fn combined(self) -> Option<(String, Vec<Val>)> {
        let last = self.statements.len().checked_sub(1)?;
        let mut sql = String::new();
        let mut params = Vec::new();
        for (i, (part, values)) in self.statements.into_iter().enumerate() {
            let part = shift_placeholders(&part, params.len());
            if i == last {
                if i > 0 {
                    sql.push(' ');
                }
                sql.push_str(&part);
            } else {
                sql.push_str(if i == 0 { "WITH " } else { ", " });
                sql.push_str(&format!("w{i} AS ({part})"));
            }
            params.extend(values);
        }
        Some((sql, params))
    }
}

/// An event store over a small pool of connections of dialect `D` ([`Dialect::POOL`]): a call
/// takes an idle connection, opening the next slot's only when every open one is busy (the
/// lease heartbeat or the delivery loop while a run appends), and waits for the first when all
/// are taken.
pub struct Store<D: Dialect> {
    pub(crate) dialect: D,
    slots: Vec<Mutex<Option<D::Conn>>>,
    pub(crate) clock: Arc<dyn Clock>,
    /// The number of audit partitions once read (0: not yet); fixed for the store's life.
    partitions: AtomicU64,
    /// What this process last committed of each partition's head, and whose runs it appended
    /// to: what a guarded append expects to find (the guard, not this memory, is what holds).
    hot: Mutex<Hot>,
}

/// See [`Store::guarded_append`].
#[derive(Default)]
struct Hot {
    heads: std::collections::HashMap<u64, ChainHead>,
    /// A run's tenant and actor (fixed at its start).
    owners: std::collections::HashMap<RunId, (String, String)>,
    committed: u64,
    fell_back: u64,
}

/// How the appends of this process went: committed by one guarded statement, or taken to the
/// locked transaction because the guard did not hold (another process moved the partition's
/// head or the run) or the statement failed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GuardedAppends {
    pub committed: u64,
    pub fell_back: u64,
}

/// One slot of the pool, taken: its connection is open (see [`Store::conn`]).
pub(crate) type Slot<'a, C> = MutexGuard<'a, Option<C>>;

/// The connection of a taken slot; a slot is filled before it is handed out, so `None` is a
/// bug reported as an error, not a panic.
fn open_conn<'s, C>(slot: &'s mut Slot<'_, C>) -> Result<&'s mut C, StoreError> {
    slot.as_mut()
        .ok_or_else(|| StoreError::Query("a pool slot was handed out unopened".to_owned()))
}

/// An open transaction: rolled back when dropped uncommitted (an error, a panic).
pub(crate) struct Tx<'a, D: Dialect> {
    dialect: &'a D,
    conn: Slot<'a, D::Conn>,
    open: bool,
}

impl<D: Dialect> Drop for Tx<'_, D> {
    fn drop(&mut self) {
        if self.open
            && let Some(conn) = self.conn.as_mut()
        {
            // Best effort: a connection that broke mid-transaction was rolled back by the
            // server, and the next call reconnects.
            let _ = self.dialect.rollback(conn);
        }
    }
}

impl<D: Dialect> Tx<'_, D> {
    pub(crate) fn execute(&mut self, sql: &str, params: &[Val]) -> Result<u64, StoreError> {
        self.dialect
            .execute(open_conn(&mut self.conn)?, sql, params)
    }

    pub(crate) fn rows<T>(
        &mut self,
        sql: &str,
        params: &[Val],
        read: impl Fn(&Row) -> Result<T, String>,
    ) -> Result<Vec<T>, StoreError> {
        let rows = self
            .dialect
            .query(open_conn(&mut self.conn)?, sql, params)?;
        rows.iter()
            .map(|r| read(r).map_err(|e| self.dialect.bad_row(e)))
            .collect()
    }

    pub(crate) fn row<T>(
        &mut self,
        sql: &str,
        params: &[Val],
        read: impl Fn(&Row) -> Result<T, String>,
    ) -> Result<Option<T>, StoreError> {
        Ok(self.rows(sql, params, read)?.into_iter().next())
    }

    /// Does `writes`: as one statement where the dialect can, else one after another.
    pub(crate) fn write(&mut self, writes: Writes) -> Result<(), StoreError> {
        let conn = open_conn(&mut self.conn)?;
        if D::WRITES_IN_ONE {
            if let Some((sql, params)) = writes.combined() {
                self.dialect.write(conn, &sql, params)?;
            }
            return Ok(());
        }
        for (sql, params) in writes.statements {
            self.dialect.write(conn, &sql, params)?;
        }
        Ok(())
    }

    pub(crate) fn commit(mut self) -> Result<(), StoreError> {
        self.open = false;
        self.dialect.commit(open_conn(&mut self.conn)?)
    }
}

impl<D: Dialect> Store<D> {
    pub(crate) fn new(dialect: D, conn: D::Conn, clock: Arc<dyn Clock>) -> Self {
        let mut slots = vec![Mutex::new(Some(conn))];
        slots.extend((1..D::POOL).map(|_| Mutex::new(None)));
        Self {
            dialect,
            slots,
            clock,
            partitions: AtomicU64::new(0),
            hot: Mutex::new(Hot::default()),
        }
    }

    fn hot(&self) -> MutexGuard<'_, Hot> {
        self.hot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// How this process's appends went (benchmarks and tests).
    pub fn guarded_appends(&self) -> GuardedAppends {
        let hot = self.hot();
        GuardedAppends {
            committed: hot.committed,
            fell_back: hot.fell_back,
        }
    }

    /// A connection of the pool, made ready: the first idle slot (opened now if it never was),
    /// else the first slot once it is free.
    pub(crate) fn conn(&self) -> Result<Slot<'_, D::Conn>, StoreError> {
        self.conn_as(None)
    }

    /// [`Store::conn`], scoped for the database's own tenant layer to `tenant` (`None`: all).
    pub(crate) fn conn_as(&self, tenant: Option<&str>) -> Result<Slot<'_, D::Conn>, StoreError> {
        // A poisoned lock only means another thread panicked mid-call; its transaction was
        // rolled back when its `Tx` was dropped, so the connection is still consistent.
        let idle = self.slots.iter().find_map(|slot| match slot.try_lock() {
            Ok(taken) => Some(taken),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        });
        let mut slot = match idle {
            Some(slot) => slot,
            None => self
                .slots
                .first()
                .ok_or_else(|| StoreError::Query("the store has no connection slots".to_owned()))?
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        };
        if slot.is_none() {
            *slot = Some(self.dialect.connect()?);
        }
        self.dialect.ready(open_conn(&mut slot)?)?;
        self.dialect.scope(open_conn(&mut slot)?, tenant)?;
        Ok(slot)
    }

    /// How many connections of the pool are open (tests, `Debug`).
    pub fn open_connections(&self) -> usize {
        // A slot in use is open (a call holds it); an idle one is looked at without waiting.
        self.slots
            .iter()
            .filter(|s| match s.try_lock() {
                Ok(c) => c.is_some(),
                Err(TryLockError::Poisoned(p)) => p.into_inner().is_some(),
                Err(TryLockError::WouldBlock) => true,
            })
            .count()
    }

    /// One statement outside any explicit transaction.
    pub(crate) fn single(&self) -> Result<Tx<'_, D>, StoreError> {
        self.single_as(None)
    }

    /// One statement for `tenant` alone (`None`: the installation, every tenant).
    pub(crate) fn single_as(&self, tenant: Option<&str>) -> Result<Tx<'_, D>, StoreError> {
        Ok(Tx {
            dialect: &self.dialect,
            conn: self.conn_as(tenant)?,
            open: false,
        })
    }

    pub(crate) fn begin(&self, kind: TxKind) -> Result<Tx<'_, D>, StoreError> {
        self.begin_as(kind, None)
    }

    pub(crate) fn begin_as(
        &self,
        kind: TxKind,
        tenant: Option<&str>,
    ) -> Result<Tx<'_, D>, StoreError> {
        let mut conn = self.conn_as(tenant)?;
        self.dialect.begin(open_conn(&mut conn)?, kind)?;
        Ok(Tx {
            dialect: &self.dialect,
            conn,
            open: true,
        })
    }

    /// The head of partition `part`, locked for this transaction (where the dialect has row
    /// locks): appends to one partition queue here, appends to others do not.
    fn part_head(tx: &mut Tx<'_, D>, part: i64) -> Result<ChainHead, StoreError> {
        tx.row(
            &format!(
                "SELECT seq, hash FROM audit_partitions WHERE part = ?1{}",
                D::FOR_UPDATE
            ),
            &vals![part],
            |r| {
                Ok(ChainHead {
                    seq: r.u64(0)?,
                    hash: r.text(1)?,
                })
            },
        )?
        .ok_or_else(|| {
            tx.dialect
                .bad_row(format!("audit partition {part} has no head row"))
        })
    }

    /// Adds the model usage `events` record to the budget totals of `tenant` and `actor`, to
    /// the writes of the transaction that appends them: the totals can never disagree with
    /// the logs.
    fn count_usage(
        writes: &mut Writes,
        tenant: &str,
        actor: &str,
        events: &[EventDraft],
        now: Timestamp,
    ) {
        let mut usage = Usage::default();
        for u in events.iter().filter_map(|e| e.usage.as_ref()) {
            usage.add(u);
        }
        if usage.is_zero() || crate::tenant::disabled("budget-totals") {
            return;
        }
        writes.push(
            "INSERT INTO budget_totals (tenant, actor, input_tokens, output_tokens, cost_nanos, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (tenant, actor) DO UPDATE SET input_tokens = budget_totals.input_tokens + ?3, output_tokens = budget_totals.output_tokens + ?4, cost_nanos = budget_totals.cost_nanos + ?5, updated_at = ?6",
            vals![
                tenant,
                actor,
                usage.input_tokens,
                usage.output_tokens,
                usage.cost_nanos,
                now.millis(),
            ],
        );
    }

    /// How many partitions the chain has (read once; it never changes once records exist).
    fn partitions_in(&self, tx: &mut Tx<'_, D>) -> Result<u64, StoreError> {
        let known = self.partitions.load(Ordering::Relaxed);
        if known > 0 {
            return Ok(known);
        }
        let count = tx
            .row(
                "SELECT count(*) FROM audit_partitions WHERE part >= 0",
                &[],
                |r| r.u64(0),
            )?
            .unwrap_or(0);
        if count == 0 {
            return Err(tx
                .dialect
                .bad_row("the audit chain has no partition".into()));
        }
        self.partitions.store(count, Ordering::Relaxed);
        Ok(count)
    }

    /// Sets the number of audit partitions of a store that holds no audit record yet (a
    /// store's partitions are fixed once its chain has begun: a run's records must stay in
    /// one partition). `1` is the unpartitioned chain.
    pub fn set_audit_partitions(&self, partitions: u64) -> Result<(), StoreError> {
        match self.partition_chain(partitions)? {
            Ok(()) => Ok(()),
            Err(records) => Err(StoreError::Query(format!(
                "the audit chain already holds {records} records: its partitions are fixed"
            ))),
        }
    }

    /// [`Self::set_audit_partitions`], answering `Err(records)` (in `Ok`) when the chain has
    /// begun and its partitions are fixed.
    fn partition_chain(&self, partitions: u64) -> Result<Result<(), u64>, StoreError> {
        if partitions == 0 || partitions > MAX_PARTITIONS {
            return Err(StoreError::Query(format!(
                "{partitions} audit partitions: a store has 1 to {MAX_PARTITIONS}"
            )));
        }
        let mut tx = self.begin(TxKind::Anchor)?;
        let records = tx
            .row("SELECT count(*) FROM audit", &[], |r| r.u64(0))?
            .unwrap_or(0);
        if records > 0 {
            return Ok(Err(records));
        }
        tx.execute("DELETE FROM audit_partitions WHERE part > 0", &[])?;
        for part in 1..partitions {
            tx.execute(
                "INSERT INTO audit_partitions (part, seq, hash) VALUES (?1, 0, ?2)",
                &vals![part, GENESIS],
            )?;
        }
        tx.commit()?;
        self.partitions.store(partitions, Ordering::Relaxed);
        Ok(Ok(()))
    }

    /// Moves partition `part`'s head to `head` (in the transaction that locked it).
    fn move_head(writes: &mut Writes, part: u64, head: &ChainHead) {
        writes.push(
            "UPDATE audit_partitions SET seq = ?2, hash = ?3 WHERE part = ?1",
            vals![part, head.seq, &head.hash],
        );
    }

    /// Seals `events` after `head` of partition `part` and adds their rows (events and audit
    /// records) to `writes`; the stored events and the partition's new head. The head is the
    /// one the caller's transaction locked (so the head read is the head it commits after), or,
    /// for a guarded append, the one its statement's guard checks. The rows are written once:
    /// in a store of one partition a record's outbox position is its seq; else an anchoring
    /// records it in `audit_order`.
    #[allow(clippy::too_many_arguments)]
    fn seal_into(
        writes: &mut Writes,
        part: u64,
        run: &RunId,
        tenant: &str,
        first_seq: u64,
        events: Vec<EventDraft>,
        sealer: &dyn Sealer,
        now: Timestamp,
        mut head: ChainHead,
    ) -> Result<(Vec<StoredEvent>, ChainHead), StoreError> {
        let mut stored = Vec::with_capacity(events.len());
        let batch_end = head.seq + events.len() as u64;
        // Sealed one after another (each record names the hash of the one before), then
        // written with one multi-row insert per table, not two per event (each a round trip
        // to a PostgreSQL server).
        let mut event_rows = Vec::with_capacity(events.len() * EVENT_INSERT_COLUMNS);
        let mut audit_rows = Vec::with_capacity(events.len() * AUDIT_INSERT_COLUMNS);
        for (i, draft) in events.into_iter().enumerate() {
            let event = StoredEvent {
                run: run.clone(),
                seq: first_seq + i as u64,
                kind: draft.kind,
                version: draft.version,
                recorded_at: now,
                payload: draft.payload,
            };
            event_rows.extend(vals![
                run.as_str(),
                event.seq,
                event.kind.as_str(),
                i64::from(event.version),
                now.millis(),
                event.payload.to_string(),
                tenant,
            ]);
            let (record, index) = sealer
                .seal_indexed(part, &head, &event, &draft.audit, batch_end)
                .map_err(StoreError::Seal)?;
            if record.seq != head.seq + 1 {
                return Err(StoreError::Seal(format!(
                    "sealer returned seq {} after head {}",
                    record.seq, head.seq
                )));
            }
            let ix = index.unwrap_or_else(|| AuditIndex::of(&record.line));
            audit_rows.extend(vals![
                record.seq,
                record.id,
                &record.hash,
                record.line,
                ix.at,
                ix.run,
                ix.actor,
                ix.on_behalf_of,
                ix.event,
                ix.verb,
                ix.resource,
                ix.decision,
                tenant,
                part,
            ]);
            head = ChainHead {
                seq: record.seq,
                hash: record.hash,
            };
            stored.push(event);
        }
        writes.push_rows(
            "INSERT INTO events (run_id, seq, kind, version, recorded_at, payload, tenant) VALUES ",
            EVENT_INSERT_COLUMNS,
            event_rows,
        );
        writes.push_rows(
            "INSERT INTO audit (seq, record_id, hash, line, at, run_id, actor, on_behalf_of, event, verb, resource, decision, tenant, part) VALUES ",
            AUDIT_INSERT_COLUMNS,
            audit_rows,
        );
        Ok((stored, head))
    }

    /// The run's row and first events, and whatever `then` does in the same transaction before
    /// it commits (taking the run's lease).
    fn create_run_in<T>(
        &self,
        run: &NewRun,
        events: Vec<EventDraft>,
        sealer: &dyn Sealer,
        then: impl FnOnce(&mut Tx<'_, D>, Timestamp) -> Result<T, StoreError>,
    ) -> Result<(Vec<StoredEvent>, T), StoreError> {
        let now = self.clock.now();
        let mut tx = self.begin(TxKind::Chain)?;
        let partitions = self.partitions_in(&mut tx)?;
        let exists = tx
            .row(
                "SELECT run_id FROM runs WHERE run_id = ?1",
                &vals![run.run.as_str()],
                |_| Ok(()),
            )?
            .is_some();
        if exists {
            return Err(StoreError::RunExists {
                run: run.run.to_string(),
            });
        }
        // The run's row first: its events refer to it.
        tx.execute(
            "INSERT INTO runs (run_id, created_at, updated_at, actor, task, status, events, tenant) VALUES (?1, ?2, ?2, ?3, ?4, ?5, ?6, ?7)",
            &vals![
                run.run.as_str(),
                now.millis(),
                run.actor.as_str(),
                run.task.as_str(),
                run.status.as_str(),
                events.len() as u64,
                run.tenant.as_str(),
            ],
        )?;
        let mut writes = Writes::default();
        Self::count_usage(&mut writes, run.tenant.as_str(), &run.actor, &events, now);
        let part = partition_of(run.run.as_str(), partitions);
        let head = Self::part_head(&mut tx, part as i64)?;
        let (stored, head) = Self::seal_into(
            &mut writes,
            part,
            &run.run,
            run.tenant.as_str(),
            1,
            events,
            sealer,
            now,
            head,
        )?;
        Self::move_head(&mut writes, part, &head);
        tx.write(writes)?;
        let then = then(&mut tx, now)?;
        tx.commit()?;
        Ok((stored, then))
    }

    /// Takes the lease of `run` inside `tx`: refused while another holder's lease is live.
    pub(crate) fn take_lease(
        tx: &mut Tx<'_, D>,
        run: &RunId,
        holder: &str,
        ttl: Duration,
        now: Timestamp,
    ) -> Result<Lease, StoreError> {
        let row = tx.row(
            &format!(
                "SELECT status, lease_holder, lease_expires FROM runs WHERE run_id = ?1{}",
                D::FOR_UPDATE
            ),
            &vals![run.as_str()],
            |r| Ok((r.text(0)?, r.opt_text(1)?, r.opt_int(2)?)),
        )?;
        let (status, current_holder, expires) =
            row.ok_or_else(|| StoreError::UnknownRun(run.to_string()))?;
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
        let token = tx
            .row(D::NEXT_TOKEN, &[], |r| r.u64(0))?
            .ok_or_else(|| tx.dialect.bad_row("no next lease token".into()))?;
        let expires = now.millis() + ttl_millis(ttl);
        tx.execute(
            "UPDATE runs SET lease_holder = ?2, lease_token = ?3, lease_expires = ?4, status = CASE status WHEN 'queued' THEN 'running' ELSE status END WHERE run_id = ?1",
            &vals![run.as_str(), holder, token, expires],
        )?;
        Ok(Lease {
            run: run.clone(),
            holder: holder.to_owned(),
            token,
            expires_at: Timestamp::from_millis(expires).unwrap_or(now),
        })
    }
}

impl<D: Dialect> Store<D> {
    /// Leases the oldest run a worker may take (see [`EventStore::lease_next`]), of `tenant`
    /// alone when given.
    pub(crate) fn lease_next_in(
        &self,
        holder: &str,
        ttl: Duration,
        tenant: Option<&str>,
    ) -> Result<Option<Lease>, StoreError> {
        let now = self.clock.now();
        let mut tx = self.begin_as(TxKind::Lease, tenant)?;
        let pick = "(status = 'queued' OR (status = 'running' AND lease_expires IS NOT NULL AND lease_expires <= ?1))";
        let next = match tenant {
            None => tx.row(
                &format!(
                    "SELECT run_id FROM runs WHERE {pick} ORDER BY created_at, run_id LIMIT 1{}",
                    D::SKIP_LOCKED
                ),
                &vals![now.millis()],
                |r| r.run_id(0),
            )?,
            Some(tenant) => tx.row(
                &format!(
                    "SELECT run_id FROM runs WHERE {pick} AND {} ORDER BY created_at, run_id LIMIT 1{}",
                    crate::tenant::filter("tenant", 2),
                    D::SKIP_LOCKED
                ),
                &vals![now.millis(), tenant],
                |r| r.run_id(0),
            )?,
        };
        let Some(run) = next else {
            return Ok(None);
        };
        let lease = Self::take_lease(&mut tx, &run, holder, ttl, now)?;
        tx.commit()?;
        Ok(Some(lease))
    }
}

fn ttl_millis(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX / 2)
}

pub(crate) const RUN_COLUMNS: &str = "run_id, created_at, updated_at, actor, task, status, events";
pub(crate) const REQUEST_COLUMNS: &str = "request_id, run_id, status, created_at, summary";
pub(crate) const EVENT_COLUMNS: &str = "run_id, seq, kind, version, recorded_at, payload";

pub(crate) fn read_event(r: &Row) -> Result<StoredEvent, String> {
    let version = r.int(3)?;
    Ok(StoredEvent {
        run: r.run_id(0)?,
        seq: r.u64(1)?,
        kind: r.text(2)?,
        version: u32::try_from(version)
            .map_err(|_| format!("event version {version} out of range"))?,
        recorded_at: r.ts(4)?,
        payload: r.json(5)?,
    })
}

pub(crate) fn read_run(r: &Row) -> Result<RunRow, String> {
    let status = r.text(5)?;
    Ok(RunRow {
        run: r.run_id(0)?,
        created_at: r.ts(1)?,
        updated_at: r.ts(2)?,
        actor: r.text(3)?,
        task: r.text(4)?,
        status: RunStatus::parse(&status).ok_or_else(|| format!("unknown status {status:?}"))?,
        events: r.u64(6)?,
    })
}

pub(crate) fn read_request(r: &Row) -> Result<RequestRow, String> {
    let id = r.text(0)?;
    let status = r.text(2)?;
    Ok(RequestRow {
        id: RequestId::parse(&id).ok_or_else(|| format!("malformed request id {id:?}"))?,
        run: r.run_id(1)?,
        status: match status.as_str() {
            "open" => RequestStatus::Open,
            "answered" => RequestStatus::Answered,
            other => return Err(format!("unknown request status {other:?}")),
        },
        created_at: r.ts(3)?,
        summary: r.json(4)?,
    })
}

pub(crate) fn read_record(r: &Row) -> Result<SealedRecord, String> {
    Ok(SealedRecord {
        seq: r.u64(0)?,
        id: r.text(1)?,
        hash: r.text(2)?,
        line: r.text(3)?,
    })
}

/// [`read_record`] of a row whose fifth column is the record's position in `audit_order` (NULL
/// where it has none): a positioned record's line states it, as delivered.
pub(crate) fn read_placed(r: &Row) -> Result<SealedRecord, String> {
    let mut record = read_record(r)?;
    if let Some(pos) = r.opt_int(4)? {
        record.line = with_pos(&record.line, pos as u64);
    }
    Ok(record)
}

/// The audit query's statement, `filter` its `WHERE` clause (or none): records in outbox order,
/// those no anchoring has positioned yet after them in chain order. A store of one partition
/// has no `audit_order` rows (a record's position is its seq), so there the order is the seq's.
pub(crate) fn audit_query_sql(filter: &str, limit: i64) -> String {
    format!(
        "SELECT a.seq, a.record_id, a.hash, a.line, o.pos FROM audit a LEFT JOIN audit_order o ON o.part = a.part AND o.seq = a.seq {filter} ORDER BY (o.pos IS NULL), o.pos, a.part, a.seq LIMIT {limit}"
    )
}

impl<D: Dialect> EventStore for Store<D> {
    fn transport(&self) -> Result<String, StoreError> {
        self.dialect.transport(open_conn(&mut self.conn()?)?)
    }

    fn row_security(&self) -> Result<Option<crate::RowSecurity>, StoreError> {
        self.dialect.row_security(open_conn(&mut self.conn()?)?)
    }

    fn create_run(
        &self,
        run: &NewRun,
        events: Vec<EventDraft>,
        sealer: &dyn Sealer,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        Ok(self.create_run_in(run, events, sealer, |_, _| Ok(()))?.0)
    }

    fn create_run_leased(
        &self,
        run: &NewRun,
        events: Vec<EventDraft>,
        sealer: &dyn Sealer,
        holder: &str,
        ttl: Duration,
    ) -> Result<(Vec<StoredEvent>, Lease), StoreError> {
        self.create_run_in(run, events, sealer, |tx, now| {
            Self::take_lease(tx, &run.run, holder, ttl, now)
        })
    }

    fn append(&self, append: Append, sealer: &dyn Sealer) -> Result<Vec<StoredEvent>, StoreError> {
        Ok(self.append_in(append, Stops::Unread, sealer)?.0)
    }

    fn append_unless_stopped(
        &self,
        append: Append,
        stops: &KillSubject<'_>,
        sealer: &dyn Sealer,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        Ok(self.append_in(append, Stops::Refuse(stops), sealer)?.0)
    }

    fn append_reading_stops(
        &self,
        append: Append,
        stops: &KillSubject<'_>,
        sealer: &dyn Sealer,
    ) -> Result<(Vec<StoredEvent>, bool), StoreError> {
        let (stored, stopped) = self.append_in(append, Stops::Read(stops), sealer)?;
        Ok((stored, stopped.unwrap_or(true)))
    }

    fn events(&self, run: &RunId) -> Result<Vec<StoredEvent>, StoreError> {
        self.single()?.rows(
            &format!("SELECT {EVENT_COLUMNS} FROM events WHERE run_id = ?1 ORDER BY seq"),
            &vals![run.as_str()],
            read_event,
        )
    }

    fn run(&self, run: &RunId) -> Result<Option<RunRow>, StoreError> {
        self.single()?.row(
            &format!("SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?1"),
            &vals![run.as_str()],
            read_run,
        )
    }

    fn runs(&self) -> Result<Vec<RunRow>, StoreError> {
        self.single()?.rows(
            &format!("SELECT {RUN_COLUMNS} FROM runs ORDER BY created_at, run_id"),
            &[],
            read_run,
        )
    }

    fn request(&self, id: &RequestId) -> Result<Option<RequestRow>, StoreError> {
        self.single()?.row(
            &format!("SELECT {REQUEST_COLUMNS} FROM requests WHERE request_id = ?1"),
            &vals![id.as_str()],
            read_request,
        )
    }

    fn requests(&self, status: Option<RequestStatus>) -> Result<Vec<RequestRow>, StoreError> {
        let mut tx = self.single()?;
        let order = "ORDER BY created_at, request_id";
        match status {
            None => tx.rows(
                &format!("SELECT {REQUEST_COLUMNS} FROM requests {order}"),
                &[],
                read_request,
            ),
            Some(s) => tx.rows(
                &format!("SELECT {REQUEST_COLUMNS} FROM requests WHERE status = ?1 {order}"),
                &vals![match s {
                    RequestStatus::Open => "open",
                    RequestStatus::Answered => "answered",
                }],
                read_request,
            ),
        }
    }

    fn lease_run(&self, run: &RunId, holder: &str, ttl: Duration) -> Result<Lease, StoreError> {
        let now = self.clock.now();
        let mut tx = self.begin(TxKind::Lease)?;
        let lease = Self::take_lease(&mut tx, run, holder, ttl, now)?;
        tx.commit()?;
        Ok(lease)
    }

    fn lease_next(&self, holder: &str, ttl: Duration) -> Result<Option<Lease>, StoreError> {
        self.lease_next_in(holder, ttl, None)
    }

    fn heartbeat(&self, lease: &Lease, ttl: Duration) -> Result<Lease, StoreError> {
        let now = self.clock.now();
        let expires = now.millis() + ttl_millis(ttl);
        let mut tx = self.single()?;
        let changed = tx.execute(
            "UPDATE runs SET lease_expires = ?4 WHERE run_id = ?1 AND lease_token = ?2 AND lease_holder = ?3",
            &vals![lease.run.as_str(), lease.token, lease.holder.as_str(), expires],
        )?;
        if changed == 0 {
            let current = tx
                .row(
                    "SELECT lease_token FROM runs WHERE run_id = ?1",
                    &vals![lease.run.as_str()],
                    |r| r.u64(0),
                )?
                .ok_or_else(|| StoreError::UnknownRun(lease.run.to_string()))?;
            return Err(StoreError::Fenced {
                run: lease.run.to_string(),
                presented: lease.token,
                current,
            });
        }
        Ok(Lease {
            expires_at: Timestamp::from_millis(expires).unwrap_or(now),
            ..lease.clone()
        })
    }

    fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.single()?.execute(
            "UPDATE runs SET lease_holder = NULL, lease_expires = 0 WHERE run_id = ?1 AND lease_token = ?2 AND lease_holder IS NOT NULL",
            &vals![lease.run.as_str(), lease.token],
        )?;
        Ok(())
    }

    fn break_lease(&self, run: &RunId, holder: &str) -> Result<bool, StoreError> {
        let changed = self.single()?.execute(
            "UPDATE runs SET lease_expires = 0 WHERE run_id = ?1 AND lease_holder = ?2",
            &vals![run.as_str(), holder],
        )?;
        Ok(changed > 0)
    }

    fn sink_state(&self, sink: &str) -> Result<SinkState, StoreError> {
        let row = self.single()?.row(
            "SELECT acknowledged, delivered_total, last_success, last_error, last_error_at, failing_since, first_success FROM sink_state WHERE sink = ?1",
            &vals![sink],
            |r| {
                Ok(SinkState {
                    sink: sink.to_owned(),
                    acknowledged: r.u64(0)?,
                    delivered_total: r.u64(1)?,
                    last_success: r.opt_ts(2)?,
                    last_error: r.opt_text(3)?,
                    last_error_at: r.opt_ts(4)?,
                    failing_since: r.opt_ts(5)?,
                    first_success: r.opt_ts(6)?,
                })
            },
        )?;
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
        self.single()?.execute(
            &format!(
                "INSERT INTO sink_state (sink, acknowledged, delivered_total, first_success, last_success) VALUES (?1, ?2, ?3, ?4, ?4)
                 ON CONFLICT (sink) DO UPDATE SET acknowledged = {}(sink_state.acknowledged, ?2), delivered_total = sink_state.delivered_total + ?3, first_success = coalesce(sink_state.first_success, ?4), last_success = ?4, failing_since = NULL",
                D::GREATEST
            ),
            &vals![sink, acknowledged, delivered, now],
        )?;
        Ok(())
    }

    fn record_delivery_failure(
        &self,
        sink: &str,
        acknowledged: u64,
        error: &str,
    ) -> Result<(), StoreError> {
        let now = self.clock.now().millis();
        self.single()?.execute(
            &format!(
                "INSERT INTO sink_state (sink, acknowledged, last_error, last_error_at, failing_since) VALUES (?1, ?2, ?3, ?4, ?4)
                 ON CONFLICT (sink) DO UPDATE SET acknowledged = {}(sink_state.acknowledged, ?2), last_error = ?3, last_error_at = ?4, failing_since = coalesce(sink_state.failing_since, ?4)",
                D::GREATEST
            ),
            &vals![sink, acknowledged, error, now],
        )?;
        Ok(())
    }

    fn query_audit(&self, q: &AuditQuery) -> Result<Vec<SealedRecord>, StoreError> {
        let limit = if q.limit == 0 {
            i64::MAX
        } else {
            q.limit as i64
        };
        let (texts, times) = q.values();
        let sql = audit_query_sql(&q.clause(|n| format!("?{n}")), limit);
        let params: Vec<Val> = texts
            .into_iter()
            .map(Val::from)
            .chain(times.into_iter().map(Val::from))
            .collect();
        self.single()?.rows(&sql, &params, read_placed)
    }

    fn fence_rejections(&self, run: &RunId) -> Result<Vec<FenceRejection>, StoreError> {
        self.single()?.rows(
            &format!(
                "SELECT run_id, presented, {}, at, kinds FROM fence_rejections WHERE run_id = ?1 ORDER BY at, {}",
                D::FENCE_CURRENT,
                D::FENCE_ORDER
            ),
            &vals![run.as_str()],
            |r| {
                Ok(FenceRejection {
                    run: r.run_id(0)?,
                    presented: r.u64(1)?,
                    current: r.u64(2)?,
                    at: r.ts(3)?,
                    kinds: serde_json::from_str(&r.text(4)?)
                        .map_err(|e| format!("malformed kinds: {e}"))?,
                })
            },
        )
    }

    fn request_cancel(&self, run: &RunId, by: &str, reason: &str) -> Result<(), StoreError> {
        let now = self.clock.now();
        let found = self.single()?.execute(
            "UPDATE runs SET cancel_by = COALESCE(cancel_by, ?2), cancel_reason = COALESCE(cancel_reason, ?3), cancel_at = COALESCE(cancel_at, ?4) WHERE run_id = ?1",
            &vals![run.as_str(), by, reason, now.millis()],
        )?;
        if found == 0 {
            return Err(StoreError::UnknownRun(run.to_string()));
        }
        Ok(())
    }

    fn stop_signals(&self, subject: &KillSubject<'_>) -> Result<StopSignals, StoreError> {
        if subject.runs.is_empty() {
            return Ok(StopSignals {
                kill: self.kill_for(subject)?,
                cancels: Vec::new(),
            });
        }
        // The switches that are set (oldest first, as `kill_for` reads them) and the rows of
        // the run and its ancestors, in one statement: tagged 0 and 1 in the first column.
        let runs = (1..=subject.runs.len())
            .map(|n| format!("?{n}"))
            .collect::<Vec<_>>()
            .join(", ");
        let rows = self.single()?.rows(
            &format!(
                "SELECT 0, {SWITCH_COLUMNS} FROM kill_switches WHERE lifted_at IS NULL \
                 UNION ALL SELECT 1, run_id, cancel_by, cancel_reason, NULL, cancel_at FROM runs WHERE run_id IN ({runs}) \
                 ORDER BY 1, 6, 2, 3"
            ),
            &subject
                .runs
                .iter()
                .map(|r| Val::from(r.as_str()))
                .collect::<Vec<_>>(),
            |r| {
                let rest = Row(r.0.get(1..).unwrap_or_default().to_vec());
                Ok(if r.int(0)? == 0 {
                    Err(read_switch(&rest)?)
                } else {
                    let cancel = match (rest.opt_text(1)?, rest.opt_text(2)?, rest.opt_ts(4)?) {
                        (Some(by), Some(reason), Some(at)) => Some(CancelRequest { by, reason, at }),
                        _ => None,
                    };
                    Ok((rest.run_id(0)?, cancel))
                })
            },
        )?;
        let mut kill = None;
        let mut found = BTreeMap::new();
        for row in rows {
            match row {
                Err(switch) => {
                    if kill.is_none() && subject.stopped_by(&switch) {
                        kill = Some(switch);
                    }
                }
                Ok((run, cancel)) => {
                    found.insert(run, cancel);
                }
            }
        }
        let cancels = subject
            .runs
            .iter()
            .map(|run| {
                found
                    .get(run)
                    .cloned()
                    .ok_or_else(|| StoreError::UnknownRun(run.to_string()))
            })
            .collect::<Result<_, _>>()?;
        Ok(StopSignals { kill, cancels })
    }

    fn cancel_request(&self, run: &RunId) -> Result<Option<CancelRequest>, StoreError> {
        let row = self
            .single()?
            .row(
                "SELECT cancel_by, cancel_reason, cancel_at FROM runs WHERE run_id = ?1",
                &vals![run.as_str()],
                |r| Ok((r.opt_text(0)?, r.opt_text(1)?, r.opt_ts(2)?)),
            )?
            .ok_or_else(|| StoreError::UnknownRun(run.to_string()))?;
        match row {
            (Some(by), Some(reason), Some(at)) => Ok(Some(CancelRequest { by, reason, at })),
            _ => Ok(None),
        }
    }
}

/// The run's row after an append of events ?2 (its new count), at ?3, to status ?4 (or as it
/// was), letting go of the lease when ?5 is 1 (the run ended): the locked path's update, and
/// the guarded statement's with its guard added.
const RUN_AFTER_APPEND: &str = "UPDATE runs SET events = ?2, updated_at = ?3, status = COALESCE(?4, status), lease_holder = CASE WHEN CAST(?5 AS BIGINT) = 1 THEN NULL ELSE lease_holder END, lease_expires = CASE WHEN CAST(?5 AS BIGINT) = 1 THEN 0 ELSE lease_expires END WHERE run_id = ?1";

/// Columns of one event row as [`Store::seal_into`] writes it.
const EVENT_INSERT_COLUMNS: usize = 7;
/// Columns of one audit row as [`Store::seal_into`] writes it.
const AUDIT_INSERT_COLUMNS: usize = 14;
/// Rows per multi-row statement: far under SQLite's and PostgreSQL's parameter limits.
const ROWS_PER_STATEMENT: usize = 64;
/// Multi-row statements per [`Writes`] of an anchoring (one statement on PostgreSQL).
const STATEMENTS_PER_WRITE: usize = 32;

/// `(?1, ?2, …), (…)`: the VALUES list of `rows` rows of `columns` numbered placeholders.
fn values_list(columns: usize, rows: usize) -> String {
    placeholders(columns, rows, false)
}

/// [`values_list`] with every placeholder cast to `BIGINT`, for a `VALUES` list that is a
/// table of its own (PostgreSQL infers no type for its columns).
fn typed_values(columns: usize, rows: usize) -> String {
    placeholders(columns, rows, true)
}

fn placeholders(columns: usize, rows: usize, typed: bool) -> String {
    let mut out = String::with_capacity(rows * columns * if typed { 24 } else { 5 });
    for r in 0..rows {
        if r > 0 {
            out.push_str(", ");
        }
        out.push('(');
        for c in 0..columns {
            if c > 0 {
                out.push_str(", ");
            }
            if typed {
                out.push_str("CAST(");
            }
            out.push('?');
            out.push_str(&(r * columns + c + 1).to_string());
            if typed {
                out.push_str(" AS BIGINT)");
            }
        }
        out.push(')');
    }
    out
}

impl<D: Dialect> AuditOutbox for Store<D> {
    fn audit_records(&self, after: u64, limit: usize) -> Result<Vec<SealedRecord>, StoreError> {
        let mut tx = self.single()?;
        let params = vals![after, i64::try_from(limit).unwrap_or(i64::MAX)];
        if self.partitions_in(&mut tx)? > 1 {
            tx.rows(
                "SELECT o.pos, a.record_id, a.hash, a.line, o.pos FROM audit_order o JOIN audit a ON a.part = o.part AND a.seq = o.seq WHERE o.pos > ?1 ORDER BY o.pos LIMIT ?2",
                &params,
                read_placed,
            )
        } else {
            tx.rows(
                "SELECT seq, record_id, hash, line FROM audit WHERE part = 0 AND seq > ?1 ORDER BY seq LIMIT ?2",
                &params,
                read_record,
            )
        }
    }

    fn audit_head(&self) -> Result<ChainHead, StoreError> {
        let mut tx = self.single()?;
        let sql = if self.partitions_in(&mut tx)? > 1 {
            "SELECT o.pos, a.hash FROM audit_order o JOIN audit a ON a.part = o.part AND a.seq = o.seq ORDER BY o.pos DESC LIMIT 1"
        } else {
            "SELECT seq, hash FROM audit WHERE part = 0 ORDER BY seq DESC LIMIT 1"
        };
        let head = tx.row(sql, &[], |r| {
            Ok(ChainHead {
                seq: r.u64(0)?,
                hash: r.text(1)?,
            })
        })?;
        Ok(head.unwrap_or_else(|| ChainHead {
            seq: 0,
            hash: GENESIS.to_owned(),
        }))
    }

    fn audit_partitions(&self) -> Result<u64, StoreError> {
        let mut tx = self.single()?;
        self.partitions_in(&mut tx)
    }

    fn partition_new_chain(&self, partitions: u64) -> Result<bool, StoreError> {
        Ok(self.partition_chain(partitions)?.is_ok())
    }

    fn anchor(&self, sealer: &dyn Sealer, wait: bool) -> Result<Option<SealedRecord>, StoreError> {
        if self.audit_partitions()? <= 1 {
            return Ok(None);
        }
        let mut tx = if wait {
            self.begin(TxKind::Anchor)?
        } else {
            let mut tx = self.begin(TxKind::Lease)?;
            let took = tx.row(D::TRY_ANCHOR, &[], |r| r.int(0))?.unwrap_or(0) != 0;
            if !took {
                return Ok(None);
            }
            tx
        };
        // The heads the last anchor named (read from its line, so an anchoring never touches
        // the partitions' head rows, which appends lock): where each partition goes on.
        let partitions = self.partitions_in(&mut tx)?;
        let mut heads: BTreeMap<i64, (u64, String)> = (0..partitions as i64)
            .map(|part| (part, (0, GENESIS.to_owned())))
            .collect();
        let last_anchor = tx.row(
            "SELECT line FROM audit WHERE part = ?1 ORDER BY seq DESC LIMIT 1",
            &vals![ANCHOR_PART],
            |r| r.text(0),
        )?;
        // The last position too: every position is given by an anchoring, whose anchor takes
        // the last one it gives.
        let mut last = 0;
        if let Some(line) = last_anchor {
            let (pos, named) = anchor_state(&line).map_err(|e| tx.dialect.bad_row(e))?;
            last = pos;
            for head in named {
                heads.insert(head.part as i64, (head.seq, head.hash));
            }
        }
        // What each partition holds after the head its last anchor named, read in one
        // statement, one snapshot: within a partition commits are serialized on its head row,
        // so what is committed of each partition is a prefix of its chain.
        let after: Vec<Val> = heads
            .iter()
            .flat_map(|(part, (seq, _))| vals![*part, *seq])
            .collect();
        let fresh = tx.rows(
            &format!(
                "SELECT a.part, a.seq, a.hash FROM audit a JOIN (VALUES {}) AS h ON a.part = h.column1 AND a.seq > h.column2 ORDER BY a.part, a.seq",
                typed_values(2, heads.len())
            ),
            &after,
            |r| Ok((r.int(0)?, r.u64(1)?, r.text(2)?)),
        )?;
        if fresh.is_empty() {
            tx.commit()?;
            return Ok(None);
        }
        let from = last + 1;
        let mut pos = last;
        // Each record's place in the whole trail, in a table of its own (the record's row is
        // never rewritten), written with the anchor as one statement where the dialect can.
        let mut placed = Vec::with_capacity(fresh.len() * 3);
        for (part, seq, hash) in fresh {
            let Some(anchored) = heads.get(&part) else {
                return Err(tx.dialect.bad_row(format!(
                    "an audit record names partition {part}, which the store does not have"
                )));
            };
            if seq != anchored.0 + 1 {
                // Never vouch for a hole: the record before this one is not in the store.
                return Err(tx.dialect.bad_row(format!(
                    "audit partition {part}: record {seq} follows record {} (records {}..{seq} are missing)",
                    anchored.0,
                    anchored.0 + 1
                )));
            }
            pos += 1;
            placed.extend(vals![pos, part, seq]);
            heads.insert(part, (seq, hash));
        }
        pos += 1;
        let head = Self::part_head(&mut tx, ANCHOR_PART)?;
        let facts = AnchorFacts {
            pos,
            from,
            heads: heads
                .iter()
                .map(|(part, (seq, hash))| PartHead {
                    part: *part as u64,
                    seq: *seq,
                    hash: hash.clone(),
                })
                .collect(),
            at: self.clock.now(),
        };
        let record = sealer
            .seal_anchor(&head, &facts)
            .map_err(StoreError::Seal)?;
        if record.seq != head.seq + 1 {
            return Err(StoreError::Seal(format!(
                "sealer returned anchor {} after anchor {}",
                record.seq, head.seq
            )));
        }
        // The positions, the anchor's own among them, then the anchor and its chain's head:
        // held back and sent with the commit where the dialect can, each write far under
        // PostgreSQL's 65,535 parameters however long the backlog.
        placed.extend(vals![pos, ANCHOR_PART, record.seq]);
        for chunk in placed.chunks(3 * ROWS_PER_STATEMENT * STATEMENTS_PER_WRITE) {
            let mut writes = Writes::default();
            writes.push_rows(
                "INSERT INTO audit_order (pos, part, seq) VALUES ",
                3,
                chunk.to_vec(),
            );
            tx.write(writes)?;
        }
        let ix = AuditIndex::of(&record.line);
        let mut writes = Writes::default();
        writes.push(
            "INSERT INTO audit (seq, record_id, hash, line, at, event, part) VALUES (?1, ?2, ?3, ?4, ?5, 'audit_anchor', ?6)",
            vals![
                record.seq,
                record.id.as_str(),
                record.hash.as_str(),
                record.line.as_str(),
                ix.at,
                ANCHOR_PART,
            ],
        );
        writes.push(
            "UPDATE audit_partitions SET seq = ?2, hash = ?3 WHERE part = ?1",
            vals![ANCHOR_PART, record.seq, record.hash.as_str()],
        );
        tx.write(writes)?;
        tx.commit()?;
        Ok(Some(SealedRecord { seq: pos, ..record }))
    }
}

/// `(EXISTS … OR EXISTS …)`, true when a kill switch covering `subject` is set or one of its
/// runs was asked to stop (what [`EventStore::stop_signals`] reads, as one condition), with its
/// parameters numbered from `?1`.
fn stopped_clause(subject: &KillSubject<'_>) -> (String, Vec<Val>) {
    let mut params = vec![Val::from(subject.tenant)];
    let mut list = |items: Vec<Val>| {
        let first = params.len() + 1;
        let numbers: Vec<String> = (first..first + items.len())
            .map(|n| format!("?{n}"))
            .collect();
        params.extend(items);
        // An empty list matches nothing (`IN ()` is not SQL).
        if numbers.is_empty() {
            "NULL".to_owned()
        } else {
            numbers.join(", ")
        }
    };
    let actors = list(subject.actors.iter().map(|a| Val::from(*a)).collect());
    let runs = list(subject.runs.iter().map(|r| Val::from(r.as_str())).collect());
    let clause = format!(
        "(EXISTS (SELECT 1 FROM kill_switches WHERE lifted_at IS NULL AND (scope = 'all' \
         OR (scope = 'tenant' AND target = ?1) OR (scope = 'actor' AND target IN ({actors})) \
         OR (scope = 'run' AND target IN ({runs})))) \
         OR EXISTS (SELECT 1 FROM runs WHERE run_id IN ({runs}) AND cancel_by IS NOT NULL))"
    );
    (clause, params)
}

/// How many runs' owners a process remembers for guarded appends; past it the memory starts
/// over (a worker drives one run at a time).
const HOT_RUNS: usize = 1024;

impl<D: Dialect> Store<D> {
    /// An append, with the stop signals as `stops` says: tried as one guarded statement where
    /// the dialect allows, else in a locked transaction. With [`Stops::Read`], whether anything
    /// stops the run as the append's transaction saw it (`None`: not known).
    fn append_in(
        &self,
        append: Append,
        stops: Stops<'_>,
        sealer: &dyn Sealer,
    ) -> Result<Appended, StoreError> {
        let now = self.clock.now();
        if D::GUARDED_APPEND
            && append.requests.is_empty()
            && let Some(stored) = self.guarded_append(&append, stops, sealer, now)?
        {
            return Ok(stored);
        }
        let run = append.run.clone();
        let appended = self.locked_append(append, stops, sealer, now);
        if appended.is_err() {
            // What this process knew of the partition may be stale now.
            let partitions = self.partitions.load(Ordering::Relaxed);
            if partitions > 0 {
                self.hot()
                    .heads
                    .remove(&partition_of(run.as_str(), partitions));
            }
        }
        appended
    }

    /// An append as one statement, outside a transaction, that holds only if the run and its
    /// partition are as this process left them: the run's row at `expected_seq - 1` events
    /// (and, fenced, still under the presented lease token), the partition's head at the
    /// record this process last committed there. Both rows are changed by the statement itself
    /// and every write goes with them; when either did not match, the statement fails as a
    /// whole (it ends by turning a failed guard into an error) and nothing of it stays. One
    /// round trip, and no row lock held while this process seals: the locked transaction
    /// takes two, holding the partition's head across them.
    ///
    /// `Ok(None)`: not tried (nothing known of the partition or the run yet, or a request
    /// update to make), or the guard failed or the statement was refused; the caller takes
    /// the locked path, which reads the rows afresh and reports what is wrong, if anything.
    /// The connection lost during the statement is the one ambiguous case (it may have
    /// committed): the store is asked whether its last record is there.
    fn guarded_append(
        &self,
        append: &Append,
        stops: Stops<'_>,
        sealer: &dyn Sealer,
        now: Timestamp,
    ) -> Result<Option<Appended>, StoreError> {
        let Append {
            run,
            expected_seq,
            events,
            status,
            fence,
            ..
        } = append;
        let (expected_seq, status, fence) = (*expected_seq, *status, *fence);
        let partitions = self.partitions.load(Ordering::Relaxed);
        if partitions == 0 || events.is_empty() || expected_seq == 0 {
            return Ok(None);
        }
        let part = partition_of(run.as_str(), partitions);
        let (head, (tenant, actor)) = {
            let hot = self.hot();
            match (hot.heads.get(&part), hot.owners.get(run)) {
                (Some(head), Some(owner)) => (head.clone(), owner.clone()),
                _ => return Ok(None),
            }
        };
        let mut rows = Writes::default();
        Self::count_usage(&mut rows, &tenant, &actor, events, now);
        // A record sealed here and never committed is dropped with the statement: the chain
        // holds only what committed. A sealer that refuses refuses again on the locked path,
        // which reports it.
        let Ok((stored, new_head)) = Self::seal_into(
            &mut rows,
            part,
            run,
            &tenant,
            expected_seq,
            events.to_vec(),
            sealer,
            now,
            head.clone(),
        ) else {
            self.hot().fell_back += 1;
            return Ok(None);
        };
        let added = events.len() as u64;
        let ends = i64::from(status.is_some_and(RunStatus::is_final));
        let mut writes = Writes::default();
        // w0: the run's row, as the append expects it.
        let mut run_params = vals![
            run.as_str(),
            expected_seq - 1 + added,
            now.millis(),
            status.map(RunStatus::as_str),
            ends,
            expected_seq - 1,
        ]
        .to_vec();
        let fenced = match fence {
            // The negative control of the fence's guard (debug builds only).
            Some(_) if crate::tenant::disabled("append-fence-guard") => "",
            Some(token) => {
                run_params.push(Val::from(token));
                " AND lease_token = ?7"
            }
            None => "",
        };
        writes.push(
            format!("{RUN_AFTER_APPEND} AND events = ?6{fenced} RETURNING 1"),
            run_params,
        );
        // w1: the partition's head, as this process left it.
        writes.push(
            "UPDATE audit_partitions SET seq = ?2, hash = ?3 WHERE part = ?1 AND seq = ?4 AND hash = ?5 RETURNING 1",
            vals![part, new_head.seq, &new_head.hash, head.seq, &head.hash],
        );
        writes.statements.extend(rows.statements);
        // Last: a guard that did not hold fails the statement, so none of its writes stays.
        // Refusing on `stops`, a switch or a cancellation that stops the run is a guard too;
        // reading them, the statement answers 2 when one does, 1 when none does.
        let guard = "(SELECT count(*) FROM w0) = 1 AND (SELECT count(*) FROM w1) = 1";
        let (answer, stop_params) = match stops {
            Stops::Unread => ("'1'".to_owned(), Vec::new()),
            Stops::Refuse(subject) => {
                let (clause, params) = stopped_clause(subject);
                (
                    format!("CASE WHEN {clause} THEN 'its run stopped' ELSE '1' END"),
                    params,
                )
            }
            Stops::Read(subject) => {
                let (clause, params) = stopped_clause(subject);
                (format!("CASE WHEN {clause} THEN '2' ELSE '1' END"), params)
            }
        };
        writes.push(
            format!("SELECT CAST(CASE WHEN {guard} THEN {answer} ELSE 'the append found its run or its partition moved on' END AS BIGINT)"),
            stop_params,
        );
        let Some((sql, params)) = writes.combined() else {
            return Ok(None);
        };
        let sent = self
            .single()
            .and_then(|mut one| one.row(&sql, &params, |r| r.int(0)));
        let mut stopped = None;
        let landed = match sent {
            Ok(answer) => {
                if matches!(stops, Stops::Read(_)) {
                    stopped = answer.map(|a| a == 2);
                }
                true
            }
            // Sent, and then the connection was lost: committed or not, the store says which.
            // Not there: the locked path locks the run's row, so a statement still on its way
            // either commits first (and the locked path finds the run moved on) or finds its
            // guard broken; never both.
            Err(StoreError::Interrupted { .. }) => self.has_record(part, &new_head)?,
            // The guard did not hold, or the server refused a write: nothing of it stayed.
            Err(_) => false,
        };
        let mut hot = self.hot();
        if landed {
            hot.committed += 1;
            hot.heads.insert(part, new_head);
            Ok(Some((stored, stopped)))
        } else {
            hot.fell_back += 1;
            hot.heads.remove(&part);
            Ok(None)
        }
    }

    /// Whether partition `part` holds `record` (its sequence number and hash).
    fn has_record(&self, part: u64, record: &ChainHead) -> Result<bool, StoreError> {
        Ok(self
            .single()?
            .row(
                "SELECT count(*) FROM audit WHERE part = ?1 AND seq = ?2 AND hash = ?3",
                &vals![part, record.seq, &record.hash],
                |r| r.int(0),
            )?
            .unwrap_or(0)
            > 0)
    }

    /// The append in a transaction that locks the run's row and its partition's head first.
    fn locked_append(
        &self,
        append: Append,
        stops: Stops<'_>,
        sealer: &dyn Sealer,
        now: Timestamp,
    ) -> Result<Appended, StoreError> {
        let Append {
            run,
            expected_seq,
            events,
            status,
            requests,
            fence,
        } = append;
        let run = &run;
        let mut tx = self.begin(TxKind::Chain)?;
        let partitions = self.partitions_in(&mut tx)?;
        let part = partition_of(run.as_str(), partitions);
        // The row locks (where the dialect has them) order this append against a concurrent
        // lease (a new lease commits either before, and this append is fenced, or after it)
        // and against other appends to the partition; the run's row and the partition's head
        // are read and locked by one statement.
        let locked = tx.row(
            &format!(
                "SELECT r.events, r.lease_token, r.tenant, r.actor, p.seq, p.hash FROM runs r, audit_partitions p WHERE r.run_id = ?1 AND p.part = ?2{}",
                D::FOR_UPDATE
            ),
            &vals![run.as_str(), part as i64],
            |r| {
                Ok((
                    (r.u64(0)?, r.u64(1)?, r.text(2)?, r.text(3)?),
                    ChainHead {
                        seq: r.u64(4)?,
                        hash: r.text(5)?,
                    },
                ))
            },
        )?;
        let ((current, token, tenant, actor), head) = match locked {
            Some(found) => found,
            None => {
                // Which of the two rows is missing, for the error.
                if tx
                    .row(
                        "SELECT 1 FROM runs WHERE run_id = ?1",
                        &vals![run.as_str()],
                        |r| r.int(0),
                    )?
                    .is_none()
                {
                    return Err(StoreError::UnknownRun(run.to_string()));
                }
                return Err(tx
                    .dialect
                    .bad_row(format!("audit partition {part} has no head row")));
            }
        };
        if let Some(presented) = fence
            && presented != token
        {
            // Nothing else was written in this transaction: committing it keeps only the
            // refusal, as a durable fact.
            let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
            tx.execute(
                &format!(
                    "INSERT INTO fence_rejections (run_id, presented, {}, at, kinds) VALUES (?1, ?2, ?3, ?4, ?5)",
                    D::FENCE_CURRENT
                ),
                &vals![
                    run.as_str(),
                    presented,
                    token,
                    now.millis(),
                    serde_json::to_string(&kinds).unwrap_or_default(),
                ],
            )?;
            tx.commit()?;
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
        // Under the locks, so a switch or a cancellation committed before them is seen.
        let found_stopped = |tx: &mut Tx<'_, D>, subject: &KillSubject<'_>| {
            let (clause, params) = stopped_clause(subject);
            tx.row(
                &format!("SELECT CASE WHEN {clause} THEN 1 ELSE 0 END"),
                &params,
                |r| r.int(0),
            )
            .map(|found| found != Some(0))
        };
        let stopped = match stops {
            Stops::Unread => None,
            Stops::Refuse(subject) => {
                if found_stopped(&mut tx, subject)? {
                    return Err(StoreError::Stopped {
                        run: run.to_string(),
                    });
                }
                None
            }
            Stops::Read(subject) => Some(found_stopped(&mut tx, subject)?),
        };
        let added = events.len() as u64;
        // Every write of the append, sent as one statement where the dialect can: the locks
        // taken above keep them one step of the run and of its partition's chain.
        let mut writes = Writes::default();
        Self::count_usage(&mut writes, &tenant, &actor, &events, now);
        let (stored, new_head) = Self::seal_into(
            &mut writes,
            part,
            run,
            &tenant,
            expected_seq,
            events,
            sealer,
            now,
            head,
        )?;
        Self::move_head(&mut writes, part, &new_head);
        // A run that ends lets go of its lease in the same transaction: nobody may lease an
        // ended run, and the driver's release after it then writes nothing (no commit to wait for).
        let ends = i64::from(status.is_some_and(RunStatus::is_final));
        writes.push(
            RUN_AFTER_APPEND,
            vals![
                run.as_str(),
                current + added,
                now.millis(),
                status.map(RunStatus::as_str),
                ends,
            ],
        );
        tx.write(writes)?;
        // A request's updates stay statements of their own: two of one request in one append
        // would touch one row twice, which a single statement may not.
        for update in requests {
            match update {
                RequestUpdate::Open { id, summary } => tx.execute(
                    "INSERT INTO requests (request_id, run_id, status, created_at, summary, tenant) VALUES (?1, ?2, 'open', ?3, ?4, ?5)",
                    &vals![id.as_str(), run.as_str(), now.millis(), summary.to_string(), tenant.as_str()],
                ),
                RequestUpdate::Answered { id } => tx.execute(
                    "UPDATE requests SET status = 'answered' WHERE request_id = ?1",
                    &vals![id.as_str()],
                ),
            }?;
        }
        tx.commit()?;
        let mut hot = self.hot();
        hot.heads.insert(part, new_head);
        if !hot.owners.contains_key(run) {
            if hot.owners.len() >= HOT_RUNS {
                hot.owners.clear();
            }
            hot.owners.insert(run.clone(), (tenant, actor));
        }
        Ok((stored, stopped))
    }
}

/// The events an append stored, and whether it found the run stopped when it read the stop
/// signals (`None`: it did not read them).
type Appended = (Vec<StoredEvent>, Option<bool>);

/// What an append does with the run's stop signals (the kill switches covering it and the
/// cancellations of it and its ancestors).
#[derive(Clone, Copy)]
enum Stops<'a> {
    /// Nothing.
    Unread,
    /// Commits only if none stops it ([`EventStore::append_unless_stopped`]).
    Refuse(&'a KillSubject<'a>),
    /// Commits, and tells whether one does ([`EventStore::append_reading_stops`]).
    Read(&'a KillSubject<'a>),
}

#[cfg(test)]
mod tests {
    use super::{Val, Writes, numbered_dollars, shift_placeholders, typed_values, values_list};

    #[test]
    fn a_values_list_numbers_every_placeholder_once_row_by_row() {
        assert_eq!(values_list(2, 1), "(?1, ?2)");
        assert_eq!(values_list(3, 2), "(?1, ?2, ?3), (?4, ?5, ?6)");
        assert_eq!(
            typed_values(2, 1),
            "(CAST(?1 AS BIGINT), CAST(?2 AS BIGINT))"
        );
    }

    #[test]
    fn shifted_placeholders_keep_their_order_and_nothing_else_changes() {
        assert_eq!(
            shift_placeholders("UPDATE t SET a = ?2, b = ?10 WHERE c = ?1 AND d = '?'", 7),
            "UPDATE t SET a = ?9, b = ?17 WHERE c = ?8 AND d = '?'"
        );
        assert_eq!(shift_placeholders("SELECT ?1", 0), "SELECT ?1");
    }

    #[test]
    fn writes_become_one_statement_with_one_parameter_list() {
        let mut writes = Writes::default();
        writes.push_rows(
            "INSERT INTO e (a, b) VALUES ",
            2,
            vec![
                Val::from(1_i64),
                Val::from("x"),
                Val::from(2_i64),
                Val::from("y"),
            ],
        );
        writes.push(
            "UPDATE r SET n = ?2 WHERE id = ?1",
            [Val::from("r1"), Val::from(2_i64)],
        );
        assert_eq!(
            writes.combined(),
            Some((
                "WITH w0 AS (INSERT INTO e (a, b) VALUES (?1, ?2), (?3, ?4)) UPDATE r SET n = ?6 WHERE id = ?5".to_owned(),
                vec![
                    Val::from(1_i64),
                    Val::from("x"),
                    Val::from(2_i64),
                    Val::from("y"),
                    Val::from("r1"),
                    Val::from(2_i64),
                ]
            ))
        );
        assert_eq!(Writes::default().combined(), None);
    }

    #[test]
    fn numbered_placeholders_become_dollars_and_nothing_else_changes() {
        assert_eq!(
            numbered_dollars("SELECT a FROM t WHERE b = ?1 AND c = ?12 AND d LIKE ?2 || '.%' ?"),
            "SELECT a FROM t WHERE b = $1 AND c = $12 AND d LIKE $2 || '.%' ?"
        );
    }
}
