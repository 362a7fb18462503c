//! Shared memory on PostgreSQL (`[memory.shared] backend = "postgres"`): drafts and published
//! entries as rows of the tenant that proposed them, in tables of this crate's own
//! (`memory_*`, versioned by `memory_schema`, created and migrated here, so the store's schema
//! is untouched even when both live in one database). Namespaces are rows
//! (`memory_namespaces`, per tenant); an entry's text and tags are indexed as a `tsvector`
//! (the `simple` configuration: no stemming, no stop words, like the local FTS5 index) and
//! searched with a `tsquery` of the bounded terms, ranked by `ts_rank_cd`.
//!
//! Tenants: every statement filters on its `tenant` column, and each transaction scopes the
//! session (`warrant.tenant`, as the store does) so row-level security hides other tenants'
//! rows from a statement that forgot its filter (a superuser login bypasses that second
//! layer). Connections are made by the store's own connector (URL forms, TLS, password apart).

use std::sync::{Mutex, PoisonError};

use postgres::{Client, Row, Transaction};
use warrant_core::{Digest, MemoryScope};
use warrant_store::PgConnector;

use crate::shared::{
    Review, SharedStore, check_digest, entry_id, may_decide, publication, retraction,
};
use crate::store::{tags_of, validate_content};
use crate::{
    Draft, DraftStatus, Entry, Found, MemoryError, Provenance, draft_digest, validate_namespace,
};

/// Serializes this crate's migrations across processes (arbitrary, fixed; not the store's).
const SCHEMA_LOCK: i64 = 0x5741_5252_4d45_4d01;

/// The schema this build writes.
const SCHEMA_VERSION: i32 = 1;

const SCHEMA_V1: &str = "
CREATE TABLE memory_namespaces (
    tenant     TEXT NOT NULL,
    name       TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (tenant, name)
);
CREATE TABLE memory_drafts (
    tenant       TEXT NOT NULL,
    id           TEXT NOT NULL,
    namespace    TEXT NOT NULL,
    text         TEXT NOT NULL,
    tags         TEXT NOT NULL,
    digest       TEXT NOT NULL,
    run          TEXT,
    actor        TEXT NOT NULL,
    on_behalf_of TEXT,
    created_at   TEXT NOT NULL,
    tainted      BOOLEAN NOT NULL,
    status       TEXT NOT NULL,
    reviewer     TEXT,
    reason       TEXT,
    decided_at   TEXT,
    entry        TEXT,
    PRIMARY KEY (tenant, id),
    FOREIGN KEY (tenant, namespace) REFERENCES memory_namespaces (tenant, name)
);
CREATE INDEX memory_drafts_by_status ON memory_drafts (tenant, status, created_at);
CREATE TABLE memory_entries (
    seq          BIGSERIAL PRIMARY KEY,
    tenant       TEXT NOT NULL,
    id           TEXT NOT NULL,
    namespace    TEXT NOT NULL,
    text         TEXT NOT NULL,
    tags         TEXT NOT NULL,
    digest       TEXT NOT NULL,
    run          TEXT,
    actor        TEXT NOT NULL,
    on_behalf_of TEXT,
    created_at   TEXT NOT NULL,
    tainted      BOOLEAN NOT NULL,
    published    TEXT NOT NULL,
    retracted    TEXT,
    search       tsvector GENERATED ALWAYS AS
                 (to_tsvector('simple', text) || to_tsvector('simple', tags)) STORED,
    UNIQUE (tenant, id),
    FOREIGN KEY (tenant, namespace) REFERENCES memory_namespaces (tenant, name)
);
CREATE INDEX memory_entries_by_namespace ON memory_entries (tenant, namespace, seq);
CREATE INDEX memory_entries_search ON memory_entries USING GIN (search);
ALTER TABLE memory_namespaces ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_namespaces FORCE ROW LEVEL SECURITY;
CREATE POLICY memory_tenant ON memory_namespaces
    USING (current_setting('warrant.tenant', true) IN ('*', tenant));
ALTER TABLE memory_drafts ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_drafts FORCE ROW LEVEL SECURITY;
CREATE POLICY memory_tenant ON memory_drafts
    USING (current_setting('warrant.tenant', true) IN ('*', tenant));
ALTER TABLE memory_entries ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_entries FORCE ROW LEVEL SECURITY;
CREATE POLICY memory_tenant ON memory_entries
    USING (current_setting('warrant.tenant', true) IN ('*', tenant));
";

const MIGRATIONS: [&str; 1] = [SCHEMA_V1];

const ENTRY_COLUMNS: &str = "id, namespace, text, tags, digest, run, actor, on_behalf_of, created_at, tainted, published, retracted";
const DRAFT_COLUMNS: &str = "id, namespace, text, tags, digest, run, actor, on_behalf_of, created_at, tainted, status, reviewer, reason, decided_at, entry";

/// Shared memory in a PostgreSQL database, connected on first use.
pub struct PgShared {
    connector: PgConnector,
    client: Mutex<Option<Client>>,
    /// Statements filter by tenant and scope the session; `false` only for a debug build's
    /// negative control (`WARRANT_TEST_DISABLE=memory-tenant`), which reads every tenant's.
    tenant_filter: bool,
}

impl std::fmt::Debug for PgShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgShared")
            .field("url", &self.connector.shown())
            .finish_non_exhaustive()
    }
}

fn entry_of(row: &Row) -> Result<Entry, postgres::Error> {
    let digest: String = row.try_get(4)?;
    let published: String = row.try_get(10)?;
    let retracted: Option<String> = row.try_get(11)?;
    Ok(Entry {
        id: row.try_get(0)?,
        scope: MemoryScope::Shared,
        namespace: row.try_get(1)?,
        text: row.try_get(2)?,
        tags: tags_of(&row.try_get::<_, String>(3)?),
        digest: Digest::parse(&digest).unwrap_or_else(|| Digest::of_bytes(b"")),
        provenance: Provenance {
            run: row.try_get(5)?,
            actor: row.try_get(6)?,
            on_behalf_of: row.try_get(7)?,
            at: row.try_get(8)?,
            tainted: row.try_get(9)?,
        },
        published: serde_json::from_str(&published).ok(),
        retracted: retracted.and_then(|r| serde_json::from_str(&r).ok()),
    })
}

fn draft_of(row: &Row) -> Result<Draft, postgres::Error> {
    let namespace: String = row.try_get(1)?;
    let text: String = row.try_get(2)?;
    let tags = tags_of(&row.try_get::<_, String>(3)?);
    let digest: String = row.try_get(4)?;
    let status: String = row.try_get(10)?;
    Ok(Draft {
        id: row.try_get(0)?,
        current_digest: draft_digest(&namespace, &text, &tags),
        namespace,
        text,
        tags,
        digest: Digest::parse(&digest).unwrap_or_else(|| Digest::of_bytes(b"")),
        provenance: Provenance {
            run: row.try_get(5)?,
            actor: row.try_get(6)?,
            on_behalf_of: row.try_get(7)?,
            at: row.try_get(8)?,
            tainted: row.try_get(9)?,
        },
        status: DraftStatus::parse(&status),
        reviewer: row.try_get(11)?,
        reason: row.try_get(12)?,
        decided_at: row.try_get(13)?,
        entry: row.try_get(14)?,
    })
}

/// The `tsquery` for bounded terms: each a quoted lexeme, joined with OR. The terms are
/// letters and digits only ([`crate::bound_query`]); quotes and backslashes are escaped anyway.
pub(crate) fn tsquery(terms: &[String]) -> String {
    terms
        .iter()
        .map(|t| format!("'{}'", t.replace('\\', "\\\\").replace('\'', "''")))
        .collect::<Vec<_>>()
        .join(" | ")
}

impl PgShared {
    /// Shared memory at `url` (its password apart, if given), connected on first use.
    pub fn new(
        url: &str,
        password: Option<&str>,
        tenant_filter: bool,
    ) -> Result<Self, MemoryError> {
        let connector =
            PgConnector::new(url, password).map_err(|e| MemoryError::Shared(e.to_string()))?;
        Ok(Self {
            connector,
            client: Mutex::new(None),
            tenant_filter,
        })
    }

    /// Connects now (creating or migrating the tables): a misconfiguration shows at once.
    pub fn check(&self) -> Result<(), MemoryError> {
        self.tx("*", |_, _| Ok(()))
    }

    fn pg(&self, e: &postgres::Error) -> MemoryError {
        MemoryError::Shared(self.connector.error(e).to_string())
    }

    /// `tenant = $n`, the one place a statement filters by tenant.
    fn tenant(&self, n: usize) -> String {
        if self.tenant_filter {
            format!("tenant = ${n}")
        } else {
            format!("(tenant = ${n} OR TRUE)")
        }
    }

    fn migrate(&self, client: &mut Client) -> Result<(), MemoryError> {
        let mut tx = client.transaction().map_err(|e| self.pg(&e))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
            .map_err(|e| self.pg(&e))?;
        let exists: bool = tx
            .query_one("SELECT to_regclass('memory_schema') IS NOT NULL", &[])
            .and_then(|r| r.try_get(0))
            .map_err(|e| self.pg(&e))?;
        if !exists {
            // A login that may not create tables finds them made already (by an owner).
            tx.batch_execute(
                "CREATE TABLE memory_schema (
                    one     BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
                    version INTEGER NOT NULL
                );
                INSERT INTO memory_schema (version) VALUES (0);",
            )
            .map_err(|e| self.pg(&e))?;
        }
        let version: i32 = tx
            .query_one("SELECT version FROM memory_schema", &[])
            .and_then(|r| r.try_get(0))
            .map_err(|e| self.pg(&e))?;
        if version > SCHEMA_VERSION {
            return Err(MemoryError::Shared(format!(
                "shared memory at {} has schema version {version}; this build knows {SCHEMA_VERSION}: upgrade Warrant",
                self.connector.shown()
            )));
        }
        let from = usize::try_from(version).unwrap_or(0);
        for step in MIGRATIONS.iter().skip(from) {
            tx.batch_execute(step).map_err(|e| self.pg(&e))?;
        }
        if version < SCHEMA_VERSION {
            tx.execute("UPDATE memory_schema SET version = $1", &[&SCHEMA_VERSION])
                .map_err(|e| self.pg(&e))?;
        }
        tx.commit().map_err(|e| self.pg(&e))
    }

    /// Runs `f` in one transaction scoped to `tenant` (`*`: every tenant, for migrations).
    fn tx<T>(
        &self,
        tenant: &str,
        f: impl FnOnce(&Self, &mut Transaction<'_>) -> Result<T, MemoryError>,
    ) -> Result<T, MemoryError> {
        let mut guard = self.client.lock().unwrap_or_else(PoisonError::into_inner);
        if guard.as_ref().is_none_or(Client::is_closed) {
            let mut client = self
                .connector
                .connect()
                .map_err(|e| MemoryError::Shared(e.to_string()))?;
            self.migrate(&mut client)?;
            *guard = Some(client);
        }
        let Some(client) = guard.as_mut() else {
            return Err(MemoryError::Shared("no connection".to_owned()));
        };
        let mut tx = client.transaction().map_err(|e| self.pg(&e))?;
        let scope = if self.tenant_filter { tenant } else { "*" };
        tx.execute("SELECT set_config('warrant.tenant', $1, true)", &[&scope])
            .map_err(|e| self.pg(&e))?;
        let out = f(self, &mut tx)?;
        tx.commit().map_err(|e| self.pg(&e))?;
        Ok(out)
    }

    fn find_draft(
        &self,
        tx: &mut Transaction<'_>,
        tenant: &str,
        id: &str,
        lock: bool,
    ) -> Result<Option<Draft>, MemoryError> {
        let sql = format!(
            "SELECT {DRAFT_COLUMNS} FROM memory_drafts WHERE {} AND id = $2{}",
            self.tenant(1),
            if lock { " FOR UPDATE" } else { "" }
        );
        let rows = tx.query(&sql, &[&tenant, &id]).map_err(|e| self.pg(&e))?;
        rows.first()
            .map(draft_of)
            .transpose()
            .map_err(|e| self.pg(&e))
    }

    fn find_entry(
        &self,
        tx: &mut Transaction<'_>,
        tenant: &str,
        id: &str,
    ) -> Result<Option<Entry>, MemoryError> {
        let sql = format!(
            "SELECT {ENTRY_COLUMNS} FROM memory_entries WHERE {} AND id = $2",
            self.tenant(1)
        );
        let rows = tx.query(&sql, &[&tenant, &id]).map_err(|e| self.pg(&e))?;
        rows.first()
            .map(entry_of)
            .transpose()
            .map_err(|e| self.pg(&e))
    }
}

impl SharedStore for PgShared {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    fn propose(
        &self,
        tenant: &str,
        id: &str,
        namespace: &str,
        text: &str,
        tags: &[String],
        provenance: &Provenance,
    ) -> Result<Digest, MemoryError> {
        validate_namespace(namespace)?;
        validate_content(text, tags)?;
        let digest = draft_digest(namespace, text, tags);
        let tags = serde_json::to_string(tags).unwrap_or_else(|_| "[]".to_owned());
        self.tx(tenant, |me, tx| {
            tx.execute(
                "INSERT INTO memory_namespaces (tenant, name, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                &[&tenant, &namespace, &provenance.at],
            )
            .map_err(|e| me.pg(&e))?;
            tx.execute(
                "INSERT INTO memory_drafts (tenant, id, namespace, text, tags, digest, run, actor, on_behalf_of, created_at, tainted, status)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'open') ON CONFLICT DO NOTHING",
                &[
                    &tenant,
                    &id,
                    &namespace,
                    &text,
                    &tags,
                    &digest.to_string(),
                    &provenance.run,
                    &provenance.actor,
                    &provenance.on_behalf_of,
                    &provenance.at,
                    &provenance.tainted,
                ],
            )
            .map_err(|e| me.pg(&e))?;
            Ok(())
        })?;
        Ok(digest)
    }

    fn draft(&self, tenant: &str, id: &str) -> Result<Option<Draft>, MemoryError> {
        self.tx(tenant, |me, tx| me.find_draft(tx, tenant, id, false))
    }

    fn drafts(&self, tenant: &str, all: bool) -> Result<Vec<Draft>, MemoryError> {
        self.tx(tenant, |me, tx| {
            let sql = format!(
                "SELECT {DRAFT_COLUMNS} FROM memory_drafts WHERE {} AND ($2 OR status = 'open')
                 ORDER BY created_at DESC, id",
                me.tenant(1)
            );
            let rows = tx.query(&sql, &[&tenant, &all]).map_err(|e| me.pg(&e))?;
            rows.iter()
                .map(draft_of)
                .collect::<Result<_, _>>()
                .map_err(|e| me.pg(&e))
        })
    }

    fn publish(&self, tenant: &str, review: &Review<'_>) -> Result<Entry, MemoryError> {
        self.tx(tenant, |me, tx| {
            let draft = me
                .find_draft(tx, tenant, review.id, true)?
                .ok_or_else(|| MemoryError::UnknownDraft(review.id.to_owned()))?;
            let draft = check_digest(draft, review.seen)?;
            let entry = entry_id(review.id);
            if may_decide(&draft, review.reviewer, DraftStatus::Published)? {
                tx.execute(
                    "INSERT INTO memory_entries (tenant, id, namespace, text, tags, digest, run, actor, on_behalf_of, created_at, tainted, published)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
                    &[
                        &tenant,
                        &entry,
                        &draft.namespace,
                        &draft.text,
                        &serde_json::to_string(&draft.tags).unwrap_or_else(|_| "[]".to_owned()),
                        &Digest::of_bytes(draft.text.as_bytes()).to_string(),
                        &draft.provenance.run,
                        &draft.provenance.actor,
                        &draft.provenance.on_behalf_of,
                        &review.at,
                        &draft.provenance.tainted,
                        &publication(&draft, review).to_string(),
                    ],
                )
                .map_err(|e| me.pg(&e))?;
                tx.execute(
                    &format!(
                        "UPDATE memory_drafts SET status = 'published', reviewer = $3, reason = $4, decided_at = $5, entry = $6
                         WHERE {} AND id = $2",
                        me.tenant(1)
                    ),
                    &[&tenant, &review.id, &review.reviewer, &review.reason, &review.at, &entry],
                )
                .map_err(|e| me.pg(&e))?;
            }
            me.find_entry(tx, tenant, &entry)?
                .ok_or(MemoryError::UnknownEntry(entry))
        })
    }

    fn reject(&self, tenant: &str, review: &Review<'_>) -> Result<Draft, MemoryError> {
        self.tx(tenant, |me, tx| {
            let draft = me
                .find_draft(tx, tenant, review.id, true)?
                .ok_or_else(|| MemoryError::UnknownDraft(review.id.to_owned()))?;
            let draft = check_digest(draft, review.seen)?;
            if !may_decide(&draft, review.reviewer, DraftStatus::Rejected)? {
                return Ok(draft);
            }
            tx.execute(
                &format!(
                    "UPDATE memory_drafts SET status = 'rejected', reviewer = $3, reason = $4, decided_at = $5
                     WHERE {} AND id = $2",
                    me.tenant(1)
                ),
                &[&tenant, &review.id, &review.reviewer, &review.reason, &review.at],
            )
            .map_err(|e| me.pg(&e))?;
            me.find_draft(tx, tenant, review.id, false)?
                .ok_or_else(|| MemoryError::UnknownDraft(review.id.to_owned()))
        })
    }

    fn retract(&self, tenant: &str, review: &Review<'_>) -> Result<Entry, MemoryError> {
        self.tx(tenant, |me, tx| {
            tx.execute(
                &format!(
                    "UPDATE memory_entries SET retracted = $3 WHERE {} AND id = $2 AND retracted IS NULL",
                    me.tenant(1)
                ),
                &[&tenant, &review.id, &retraction(review).to_string()],
            )
            .map_err(|e| me.pg(&e))?;
            me.find_entry(tx, tenant, review.id)?
                .ok_or_else(|| MemoryError::UnknownEntry(review.id.to_owned()))
        })
    }

    fn recall(
        &self,
        tenant: &str,
        namespace: &str,
        terms: &[String],
        limit: u32,
    ) -> Result<Vec<Found>, MemoryError> {
        let query = tsquery(terms);
        self.tx(tenant, |me, tx| {
            let sql = format!(
                "SELECT {ENTRY_COLUMNS}, ts_rank_cd(search, q)::float8 AS rank
                 FROM memory_entries, to_tsquery('simple', $3) AS q
                 WHERE {} AND namespace = $2 AND retracted IS NULL AND search @@ q
                 ORDER BY rank DESC, seq DESC LIMIT $4",
                me.tenant(1)
            );
            let rows = tx
                .query(&sql, &[&tenant, &namespace, &query, &i64::from(limit)])
                .map_err(|e| me.pg(&e))?;
            rows.iter()
                .map(|r| {
                    Ok(Found {
                        entry: entry_of(r)?,
                        // Lower is better, as the local backend's BM25 says it.
                        rank: -r.try_get::<_, f64>(12)?,
                    })
                })
                .collect::<Result<_, postgres::Error>>()
                .map_err(|e| me.pg(&e))
        })
    }

    fn entry(&self, tenant: &str, id: &str) -> Result<Option<Entry>, MemoryError> {
        self.tx(tenant, |me, tx| me.find_entry(tx, tenant, id))
    }

    fn entries(
        &self,
        tenant: &str,
        namespace: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Entry>, MemoryError> {
        self.tx(tenant, |me, tx| {
            let sql = format!(
                "SELECT {ENTRY_COLUMNS} FROM memory_entries
                 WHERE {} AND ($2::text IS NULL OR namespace = $2) AND retracted IS NULL
                 ORDER BY seq DESC LIMIT $3",
                me.tenant(1)
            );
            let rows = tx
                .query(&sql, &[&tenant, &namespace, &i64::from(limit)])
                .map_err(|e| me.pg(&e))?;
            rows.iter()
                .map(entry_of)
                .collect::<Result<_, _>>()
                .map_err(|e| me.pg(&e))
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_tsquery_quotes_every_term() {
        let terms = crate::bound_query("deploy OR über it's").unwrap();
        assert_eq!(tsquery(&terms), "'deploy' | 'or' | 'über' | 'it' | 's'");
        assert_eq!(tsquery(&["a'b".to_owned()]), "'a''b'");
    }
}
