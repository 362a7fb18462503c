//! Governed memory. Local memory is what one agent knows in one workspace: entries kept in an
//! SQLite database beside the store (`.warrant/memory.db`), searched with FTS5 and ranked by
//! BM25, each with its provenance (run, actor, on-behalf-of, time) and a taint mark when the run
//! that wrote it had seen untrusted content. Shared memory is what other agents and people will
//! treat as true, so an agent never writes it: it proposes a draft (`propose_memory`), and a
//! person publishes or rejects that exact draft (digest-bound) through the ring
//! (`memory.publish`). Every write passes the secret scanner first; a finding blocks it and
//! names the rule and the position, never the value.
//!
//! The tools ([`Memory`], a `ToolSource`) normalize into `memory.*` actions on
//! `memory/<scope>/<namespace>`, so policy decides every one, and execute only what the ring
//! authorized. Queries are bounded before they reach SQLite ([`bound_query`]).
//!
//! Shared memory lives in a [`SharedStore`]: this workspace's database by default, or
//! PostgreSQL ([`PgShared`]: namespaces as rows of each tenant, `tsvector` search).

mod error;
mod pg;
mod query;
mod shared;
mod sink;
mod store;
mod tools;

pub use error::MemoryError;
pub use pg::PgShared;
pub use query::{MAX_TERM_CHARS, bound_query};
pub use shared::{Review, SharedStore};
pub use sink::{Published, SharedSink};
pub use store::{
    Draft, DraftStatus, Entry, Found, MAX_TAGS, MAX_TEXT_BYTES, MemoryStore, NewEntry, Provenance,
    draft_digest, validate_namespace,
};
pub use tools::{Memory, PublishTool, RetractTool, secret_in};
