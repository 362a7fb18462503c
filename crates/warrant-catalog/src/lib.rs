//! The data catalog, read-only: an Apache Iceberg REST catalog (Apache Polaris among them)
//! reached over HTTP with OAuth2 client credentials (a configurable token URL, the token
//! refreshed once when the catalog refuses it) or a static bearer token, and the realm header
//! Polaris wants. It lists namespaces (multi-level) and tables and loads one table's schema,
//! partition spec, properties and current snapshot. No write endpoint exists in this crate.
//!
//! The tools ([`Catalogs`], a `ToolSource`: `catalog_list`, `catalog_describe`) normalize into
//! `catalog.list` / `catalog.read` on `catalog/<name>/<ns1>/<ns2>/<table>`, so policy decides
//! which namespaces a principal sees, and call the catalog only with what the ring authorized.

mod client;
mod error;
mod names;
mod table;
mod tools;

pub use client::{CatalogClient, Credentials, Listing};
pub use error::CatalogError;
pub use names::{MAX_DEPTH, MAX_SEGMENT_BYTES, parse_path, render_path};
pub use table::{TableView, describe};
pub use tools::Catalogs;
