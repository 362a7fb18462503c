//! The memory database: entries (local, and shared once published) with an FTS5 index kept by
//! triggers, and the drafts proposed for shared namespaces.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use rusqlite::{Connection, OptionalExtension as _, Row, params};
use serde::Serialize;
use serde_json::json;
use warrant_core::{Digest, MemoryScope, digest_of};

use crate::MemoryError;
use crate::query::fts_expression;
use crate::shared::{
    Review, SharedStore, check_digest, entry_id, may_decide, publication, retraction,
};

/// The largest entry (or draft) text, in bytes. Memory is notes, not files.
pub const MAX_TEXT_BYTES: usize = 64 * 1024;
/// The most tags an entry carries.
pub const MAX_TAGS: usize = 16;
const MAX_TAG_CHARS: usize = 64;
const MAX_NAMESPACE_CHARS: usize = 64;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS entries (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  scope TEXT NOT NULL,
  namespace TEXT NOT NULL,
  text TEXT NOT NULL,
  tags TEXT NOT NULL,
  digest TEXT NOT NULL,
  run TEXT,
  actor TEXT NOT NULL,
  on_behalf_of TEXT,
  created_at TEXT NOT NULL,
  tainted INTEGER NOT NULL,
  published TEXT
);
CREATE INDEX IF NOT EXISTS entries_ns ON entries (scope, namespace, seq);
CREATE VIRTUAL TABLE IF NOT EXISTS entries_fts USING fts5(
  text, tags, content='entries', content_rowid='seq', tokenize='unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS entries_ai AFTER INSERT ON entries BEGIN
  INSERT INTO entries_fts (rowid, text, tags) VALUES (new.seq, new.text, new.tags);
END;
CREATE TRIGGER IF NOT EXISTS entries_ad AFTER DELETE ON entries BEGIN
  INSERT INTO entries_fts (entries_fts, rowid, text, tags) VALUES ('delete', old.seq, old.text, old.tags);
END;
CREATE TABLE IF NOT EXISTS drafts (
  id TEXT PRIMARY KEY,
  namespace TEXT NOT NULL,
  text TEXT NOT NULL,
  tags TEXT NOT NULL,
  digest TEXT NOT NULL,
  run TEXT,
  actor TEXT NOT NULL,
  on_behalf_of TEXT,
  created_at TEXT NOT NULL,
  tainted INTEGER NOT NULL,
  status TEXT NOT NULL,
  reviewer TEXT,
  reason TEXT,
  decided_at TEXT,
  entry TEXT
);
";

/// Who made an entry or a draft, when, and whether the run had seen untrusted content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Provenance {
    pub run: Option<String>,
    pub actor: String,
    pub on_behalf_of: Option<String>,
    pub at: String,
    pub tainted: bool,
}

/// An entry to keep.
#[derive(Clone, Debug)]
pub struct NewEntry {
    pub id: String,
    pub scope: MemoryScope,
    pub namespace: String,
    pub text: String,
    pub tags: Vec<String>,
    pub provenance: Provenance,
}

/// A kept entry. A shared one also says how it was published.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Entry {
    pub id: String,
    pub scope: MemoryScope,
    pub namespace: String,
    pub text: String,
    pub tags: Vec<String>,
    pub digest: Digest,
    pub provenance: Provenance,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub published: Option<serde_json::Value>,
    /// Who withdrew a published entry, when and why (it is no longer recalled or listed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retracted: Option<serde_json::Value>,
}

/// An entry a search found, with its BM25 rank (lower is better, as SQLite gives it).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Found {
    #[serde(flatten)]
    pub entry: Entry,
    pub rank: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DraftStatus {
    Open,
    Published,
    Rejected,
}

impl DraftStatus {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Published => "published",
            Self::Rejected => "rejected",
        }
    }

    pub(crate) fn parse(s: &str) -> Self {
        match s {
            "published" => Self::Published,
            "rejected" => Self::Rejected,
            _ => Self::Open,
        }
    }
}

/// A proposed entry for a shared namespace.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Draft {
    pub id: String,
    pub namespace: String,
    pub text: String,
    pub tags: Vec<String>,
    /// The digest recorded when it was proposed.
    pub digest: Digest,
    /// The digest of what it says now (differs from `digest` when it was edited since).
    pub current_digest: Digest,
    pub provenance: Provenance,
    pub status: DraftStatus,
    pub reviewer: Option<String>,
    pub reason: Option<String>,
    pub decided_at: Option<String>,
    pub entry: Option<String>,
}

/// The digest a review binds to: namespace, text and tags of a draft.
pub fn draft_digest(namespace: &str, text: &str, tags: &[String]) -> Digest {
    digest_of(&json!({"namespace": namespace, "text": text, "tags": tags}))
        .unwrap_or_else(|_| Digest::of_bytes(text.as_bytes()))
}

/// A namespace name: 1 to 64 letters, digits, `.`, `_` or `-` (any script), starting with a
/// letter or digit.
pub fn validate_namespace(namespace: &str) -> Result<(), MemoryError> {
    let ok = !namespace.is_empty()
        && namespace.chars().count() <= MAX_NAMESPACE_CHARS
        && namespace.chars().next().is_some_and(char::is_alphanumeric)
        && namespace
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(MemoryError::Invalid(format!(
            "namespace {namespace:?} is not 1 to {MAX_NAMESPACE_CHARS} letters, digits, '.', '_' or '-' starting with a letter or digit"
        )))
    }
}

/// Text and tags within their bounds.
pub(crate) fn validate_content(text: &str, tags: &[String]) -> Result<(), MemoryError> {
    if text.trim().is_empty() {
        return Err(MemoryError::Invalid("the text is empty".to_owned()));
    }
    if text.len() > MAX_TEXT_BYTES {
        return Err(MemoryError::Invalid(format!(
            "the text is {} bytes; a memory entry holds at most {MAX_TEXT_BYTES} (keep a summary, or write a file)",
            text.len()
        )));
    }
    if tags.len() > MAX_TAGS {
        return Err(MemoryError::Invalid(format!(
            "{} tags; an entry carries at most {MAX_TAGS}",
            tags.len()
        )));
    }
    if let Some(t) = tags.iter().find(|t| {
        t.is_empty() || t.chars().count() > MAX_TAG_CHARS || t.chars().any(char::is_control)
    }) {
        return Err(MemoryError::Invalid(format!(
            "tag {t:?} is empty, longer than {MAX_TAG_CHARS} characters or holds control characters"
        )));
    }
    Ok(())
}

/// The memory database of one workspace, opened on first use (a run that never touches
/// memory does not pay for it).
#[derive(Debug)]
pub struct MemoryStore {
    path: PathBuf,
    conn: OnceLock<Result<Mutex<Connection>, String>>,
}

fn scope_of(s: &str) -> MemoryScope {
    if s == "shared" {
        MemoryScope::Shared
    } else {
        MemoryScope::Local
    }
}

pub(crate) fn tags_of(s: &str) -> Vec<String> {
    serde_json::from_str(s).unwrap_or_default()
}

const ENTRY_COLUMNS: &str = "e.id, e.scope, e.namespace, e.text, e.tags, e.digest, e.run, e.actor, e.on_behalf_of, e.created_at, e.tainted, e.published, e.retracted";

fn entry_of(row: &Row<'_>) -> rusqlite::Result<Entry> {
    let scope: String = row.get(1)?;
    let tags: String = row.get(4)?;
    let digest: String = row.get(5)?;
    let published: Option<String> = row.get(11)?;
    let retracted: Option<String> = row.get(12)?;
    Ok(Entry {
        id: row.get(0)?,
        scope: scope_of(&scope),
        namespace: row.get(2)?,
        text: row.get(3)?,
        tags: tags_of(&tags),
        digest: Digest::parse(&digest).unwrap_or_else(|| Digest::of_bytes(b"")),
        provenance: Provenance {
            run: row.get(6)?,
            actor: row.get(7)?,
            on_behalf_of: row.get(8)?,
            at: row.get(9)?,
            tainted: row.get::<_, i64>(10)? != 0,
        },
        published: published.and_then(|p| serde_json::from_str(&p).ok()),
        retracted: retracted.and_then(|p| serde_json::from_str(&p).ok()),
    })
}

const DRAFT_COLUMNS: &str = "id, namespace, text, tags, digest, run, actor, on_behalf_of, created_at, tainted, status, reviewer, reason, decided_at, entry";

fn draft_of(row: &Row<'_>) -> rusqlite::Result<Draft> {
    let namespace: String = row.get(1)?;
    let text: String = row.get(2)?;
    let tags: String = row.get(3)?;
    let tags = tags_of(&tags);
    let digest: String = row.get(4)?;
    let status: String = row.get(10)?;
    Ok(Draft {
        id: row.get(0)?,
        current_digest: draft_digest(&namespace, &text, &tags),
        namespace,
        text,
        tags,
        digest: Digest::parse(&digest).unwrap_or_else(|| Digest::of_bytes(b"")),
        provenance: Provenance {
            run: row.get(5)?,
            actor: row.get(6)?,
            on_behalf_of: row.get(7)?,
            at: row.get(8)?,
            tainted: row.get::<_, i64>(9)? != 0,
        },
        status: DraftStatus::parse(&status),
        reviewer: row.get(11)?,
        reason: row.get(12)?,
        decided_at: row.get(13)?,
        entry: row.get(14)?,
    })
}

impl MemoryStore {
    /// The database at `path`, created on first use.
    pub fn at(path: &Path) -> Self {
        Self {
            path: path.to_owned(),
            conn: OnceLock::new(),
        }
    }

    /// Opens (creating) the database at `path` now.
    pub fn open(path: &Path) -> Result<Self, MemoryError> {
        let store = Self::at(path);
        drop(store.conn()?);
        Ok(store)
    }

    fn connect(path: &Path) -> rusqlite::Result<Connection> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.execute_batch(SCHEMA)?;
        // Added after the first release: a published entry withdrawn by a person.
        let has_retracted: i64 = conn.query_row(
            "SELECT count(*) FROM pragma_table_info('entries') WHERE name = 'retracted'",
            [],
            |r| r.get(0),
        )?;
        if has_retracted == 0 {
            conn.execute_batch("ALTER TABLE entries ADD COLUMN retracted TEXT")?;
        }
        Ok(conn)
    }

    fn conn(&self) -> Result<MutexGuard<'_, Connection>, MemoryError> {
        match self.conn.get_or_init(|| {
            Self::connect(&self.path)
                .map(Mutex::new)
                .map_err(|e| e.to_string())
        }) {
            Ok(m) => Ok(m.lock().unwrap_or_else(PoisonError::into_inner)),
            Err(message) => Err(MemoryError::Open {
                path: self.path.display().to_string(),
                message: message.clone(),
            }),
        }
    }

    /// Keeps an entry. Keyed by its id: keeping the same id again changes nothing (an effect
    /// replayed after a crash). Returns whether it was new.
    pub fn remember(&self, e: &NewEntry) -> Result<bool, MemoryError> {
        Ok(self.remember_all(std::slice::from_ref(e))? == 1)
    }

    /// Keeps entries in one transaction (an import, a benchmark's corpus); returns how many
    /// were new.
    pub fn remember_all(&self, entries: &[NewEntry]) -> Result<usize, MemoryError> {
        for e in entries {
            validate_namespace(&e.namespace)?;
            validate_content(&e.text, &e.tags)?;
        }
        let mut conn = self.conn()?;
        let tx = conn.transaction()?;
        let mut new = 0;
        {
            let mut stmt = tx.prepare_cached(
                "INSERT OR IGNORE INTO entries (id, scope, namespace, text, tags, digest, run, actor, on_behalf_of, created_at, tainted)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )?;
            for e in entries {
                new += stmt.execute(params![
                    e.id,
                    e.scope.as_str(),
                    e.namespace,
                    e.text,
                    serde_json::to_string(&e.tags).unwrap_or_else(|_| "[]".to_owned()),
                    Digest::of_bytes(e.text.as_bytes()).to_string(),
                    e.provenance.run,
                    e.provenance.actor,
                    e.provenance.on_behalf_of,
                    e.provenance.at,
                    i64::from(e.provenance.tainted),
                ])?;
            }
        }
        tx.commit()?;
        Ok(new)
    }

    /// The entries of a namespace matching any of `terms` (bounded: [`crate::bound_query`]),
    /// best first by BM25, at most `limit`.
    pub fn recall(
        &self,
        scope: MemoryScope,
        namespace: &str,
        terms: &[String],
        limit: u32,
    ) -> Result<Vec<Found>, MemoryError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {ENTRY_COLUMNS}, bm25(entries_fts) AS rank
             FROM entries_fts JOIN entries e ON e.seq = entries_fts.rowid
             WHERE entries_fts MATCH ?1 AND e.scope = ?2 AND e.namespace = ?3 AND e.retracted IS NULL
             ORDER BY rank LIMIT ?4"
        ))?;
        let rows = stmt.query_map(
            params![fts_expression(terms), scope.as_str(), namespace, limit],
            |row| {
                Ok(Found {
                    entry: entry_of(row)?,
                    rank: row.get(13)?,
                })
            },
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// One entry by id.
    pub fn get(&self, id: &str) -> Result<Option<Entry>, MemoryError> {
        Ok(self
            .conn()?
            .query_row(
                &format!("SELECT {ENTRY_COLUMNS} FROM entries e WHERE e.id = ?1"),
                [id],
                entry_of,
            )
            .optional()?)
    }

    /// The newest entries, optionally of one scope and namespace.
    pub fn list(
        &self,
        scope: Option<MemoryScope>,
        namespace: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Entry>, MemoryError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(&format!(
            "SELECT {ENTRY_COLUMNS} FROM entries e
             WHERE (?1 IS NULL OR e.scope = ?1) AND (?2 IS NULL OR e.namespace = ?2) AND e.retracted IS NULL
             ORDER BY e.seq DESC LIMIT ?3"
        ))?;
        let rows = stmt.query_map(
            params![scope.map(MemoryScope::as_str), namespace, limit],
            entry_of,
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Forgets an entry; `false` when there was none (already forgotten).
    pub fn forget(&self, id: &str) -> Result<bool, MemoryError> {
        Ok(self
            .conn()?
            .execute("DELETE FROM entries WHERE id = ?1", [id])?
            == 1)
    }
}

fn find_draft(conn: &Connection, id: &str) -> Result<Draft, MemoryError> {
    conn.query_row(
        &format!("SELECT {DRAFT_COLUMNS} FROM drafts WHERE id = ?1"),
        [id],
        draft_of,
    )
    .optional()?
    .ok_or_else(|| MemoryError::UnknownDraft(id.to_owned()))
}

/// Shared memory in this workspace's database: one tenant (the workspace's), so `tenant` is
/// not consulted.
impl SharedStore for MemoryStore {
    fn backend(&self) -> &'static str {
        "local"
    }

    fn propose(
        &self,
        _tenant: &str,
        id: &str,
        namespace: &str,
        text: &str,
        tags: &[String],
        provenance: &Provenance,
    ) -> Result<Digest, MemoryError> {
        validate_namespace(namespace)?;
        validate_content(text, tags)?;
        let digest = draft_digest(namespace, text, tags);
        self.conn()?.execute(
            "INSERT OR IGNORE INTO drafts (id, namespace, text, tags, digest, run, actor, on_behalf_of, created_at, tainted, status)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'open')",
            params![
                id,
                namespace,
                text,
                serde_json::to_string(tags).unwrap_or_else(|_| "[]".to_owned()),
                digest.to_string(),
                provenance.run,
                provenance.actor,
                provenance.on_behalf_of,
                provenance.at,
                i64::from(provenance.tainted),
            ],
        )?;
        Ok(digest)
    }

    fn draft(&self, _tenant: &str, id: &str) -> Result<Option<Draft>, MemoryError> {
        match find_draft(&*self.conn()?, id) {
            Ok(d) => Ok(Some(d)),
            Err(MemoryError::UnknownDraft(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn drafts(&self, _tenant: &str, all: bool) -> Result<Vec<Draft>, MemoryError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(&format!(
            "SELECT {DRAFT_COLUMNS} FROM drafts WHERE (?1 OR status = 'open') ORDER BY created_at DESC, id"
        ))?;
        let rows = stmt.query_map([all], draft_of)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn publish(&self, _tenant: &str, review: &Review<'_>) -> Result<Entry, MemoryError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction()?;
        let draft = check_digest(find_draft(&tx, review.id)?, review.seen)?;
        let entry_id = entry_id(review.id);
        if may_decide(&draft, review.reviewer, DraftStatus::Published)? {
            tx.execute(
                "INSERT INTO entries (id, scope, namespace, text, tags, digest, run, actor, on_behalf_of, created_at, tainted, published)
                 VALUES (?1, 'shared', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                params![
                    entry_id,
                    draft.namespace,
                    draft.text,
                    serde_json::to_string(&draft.tags).unwrap_or_else(|_| "[]".to_owned()),
                    Digest::of_bytes(draft.text.as_bytes()).to_string(),
                    draft.provenance.run,
                    draft.provenance.actor,
                    draft.provenance.on_behalf_of,
                    review.at,
                    i64::from(draft.provenance.tainted),
                    publication(&draft, review).to_string(),
                ],
            )?;
            tx.execute(
                "UPDATE drafts SET status = 'published', reviewer = ?2, reason = ?3, decided_at = ?4, entry = ?5 WHERE id = ?1",
                params![review.id, review.reviewer, review.reason, review.at, entry_id],
            )?;
            tx.commit()?;
        } else {
            drop(tx);
        }
        drop(conn);
        self.get(&entry_id)?
            .ok_or_else(|| MemoryError::UnknownEntry(entry_id))
    }

    fn reject(&self, _tenant: &str, review: &Review<'_>) -> Result<Draft, MemoryError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction()?;
        let draft = check_digest(find_draft(&tx, review.id)?, review.seen)?;
        if !may_decide(&draft, review.reviewer, DraftStatus::Rejected)? {
            return Ok(draft);
        }
        tx.execute(
            "UPDATE drafts SET status = 'rejected', reviewer = ?2, reason = ?3, decided_at = ?4 WHERE id = ?1",
            params![review.id, review.reviewer, review.reason, review.at],
        )?;
        let draft = find_draft(&tx, review.id)?;
        tx.commit()?;
        Ok(draft)
    }

    fn retract(&self, _tenant: &str, review: &Review<'_>) -> Result<Entry, MemoryError> {
        self.conn()?.execute(
            "UPDATE entries SET retracted = ?2 WHERE id = ?1 AND scope = 'shared' AND retracted IS NULL",
            params![review.id, retraction(review).to_string()],
        )?;
        self.get(review.id)?
            .filter(|e| e.scope == MemoryScope::Shared)
            .ok_or_else(|| MemoryError::UnknownEntry(review.id.to_owned()))
    }

    fn recall(
        &self,
        _tenant: &str,
        namespace: &str,
        terms: &[String],
        limit: u32,
    ) -> Result<Vec<Found>, MemoryError> {
        MemoryStore::recall(self, MemoryScope::Shared, namespace, terms, limit)
    }

    fn entry(&self, _tenant: &str, id: &str) -> Result<Option<Entry>, MemoryError> {
        Ok(self.get(id)?.filter(|e| e.scope == MemoryScope::Shared))
    }

    fn entries(
        &self,
        _tenant: &str,
        namespace: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Entry>, MemoryError> {
        self.list(Some(MemoryScope::Shared), namespace, limit)
    }
}
