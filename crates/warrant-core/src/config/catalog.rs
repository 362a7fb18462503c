//! `[catalog.<name>]`: the Iceberg REST catalogs (Apache Polaris among them) that
//! `catalog_list` and `catalog_describe` read. Credentials are secret references only
//! (`env:NAME`, `file:PATH`, `secret:NAME` from the vault), never values.

use serde::{Deserialize, Serialize};

/// One catalog. A higher layer's catalog of a name replaces a lower layer's whole.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogConfig {
    /// The REST base, before `/v1/...`: e.g. `https://polaris.example/api/catalog`. Plain
    /// `http://` only to this machine.
    pub url: String,
    /// Sent as `?warehouse=` when the catalog's configuration is read (Polaris: the catalog).
    #[serde(default)]
    pub warehouse: Option<String>,
    /// The path prefix when the catalog's configuration names none (its `overrides.prefix`
    /// wins).
    #[serde(default)]
    pub prefix: Option<String>,
    /// The realm, sent as the `realm_header` header (default `Polaris-Realm`).
    #[serde(default)]
    pub realm: Option<String>,
    #[serde(default)]
    pub realm_header: Option<String>,
    /// The OAuth2 token endpoint (default `<url>/v1/oauth/tokens`).
    #[serde(default)]
    pub token_url: Option<String>,
    /// OAuth2 client credentials, each a secret reference.
    #[serde(default)]
    pub client_id: Option<String>,
    #[serde(default)]
    pub client_secret: Option<String>,
    /// The scope asked for (default `PRINCIPAL_ROLE:ALL`).
    #[serde(default)]
    pub scope: Option<String>,
    /// A bearer token instead of client credentials, a secret reference.
    #[serde(default)]
    pub token: Option<String>,
    /// How long one request may take (default 30 s).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// `[memory]`: where shared memory goes besides this workspace's store.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryConfig {
    #[serde(default)]
    pub shared: Option<SharedMemoryConfig>,
}

/// `[memory.shared]`: `backend = "iceberg"` appends every published entry to `table` (dotted:
/// `namespace.levels.table`) of the configured catalog `catalog`; `"postgres"` keeps drafts
/// and published entries in PostgreSQL (`url`, by default the `[store]` PostgreSQL location,
/// with `password` a reference, by default `[store] password`); `"local"` (the default)
/// keeps them in this workspace only.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedMemoryConfig {
    pub backend: String,
    #[serde(default)]
    pub catalog: Option<String>,
    #[serde(default)]
    pub table: Option<String>,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub password: Option<String>,
}
