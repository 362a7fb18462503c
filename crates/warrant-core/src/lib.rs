//! Warrant's vocabulary. Everything here is pure: no file, network or process I/O.
//! Other rooms build on these types; a new resource kind or verb added here breaks every
//! exhaustive `match` that must handle it, by design.

pub mod action;
pub mod canonical;
pub mod clock;
pub mod config;
pub mod digest;
pub mod directory;
pub mod error;
pub mod ids;
pub mod path;
pub mod principal;
pub mod render;
pub mod risk;
pub mod tool;

pub use action::{
    Action, AgentSpawn, ArtifactCreate, ArtifactKind, CatalogList, CatalogRead, FsDelete, FsList,
    FsRead, FsSearch, FsWrite, GitAuthor, GitOp, GitRead, Judging, MAX_QUERY_TERMS, McpCall,
    MemoryDelete, MemoryPropose, MemoryRead, MemoryScope, MemoryWrite, Payload, ResourceKind,
    RiskClass, ShellExec, Verb, WebFetch, audit_view_target, catalog_resource, memory_resource,
    parse_memory_target,
};
pub use clock::{Clock, FixedClock, SystemClock, Timestamp};
pub use digest::{Digest, canonical_json, digest_of, digest_of_pair};
pub use error::{Coded, Hint};
pub use ids::{IdSource, RandomIds, RequestId, RunId, SequentialIds};
pub use path::{CanonicalPath, LinkResolver, PathError};
pub use principal::{Principal, PrincipalKind};
pub use tool::ToolSpec;
