//! The configured data catalogs (`[catalog.<name>]`) as a tool source of every run this host
//! drives, and what a person reads of them (`warrant catalog list|describe`): a person's read is
//! their own operation through the ring like `warrant memory`'s, so policy decides which
//! namespaces they see and the audit trail records it. Credentials are secret references,
//! resolved only when an authorized call runs: `env:NAME` from this process's environment,
//! `file:PATH`, or `secret:NAME` from the installation's vault.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;
use warrant_catalog::{CatalogClient, Catalogs, Credentials};
use warrant_kernel::Prompter;

use crate::install::{self, Paths};
use crate::memory::PersonOp;
use crate::{Host, HostError, Result};

/// Resolves the catalogs' secret references.
struct References {
    env: BTreeMap<String, String>,
    vault: warrant_exec::vault::Vault,
}

impl std::fmt::Debug for References {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("References").finish_non_exhaustive()
    }
}

impl Credentials for References {
    fn resolve(&self, reference: &str) -> std::result::Result<String, String> {
        use warrant_core::Coded as _;
        // `env:`, `file:` and `cred:` through the one resolver of references.
        if ["env:", "file:", warrant_llm::secret::CRED_PREFIX]
            .iter()
            .any(|p| reference.starts_with(p))
        {
            let key = warrant_llm::secret::resolve_key("catalog", Some(reference), "", &self.env)
                .map_err(|e| format!("{e} ({})", e.code()))?;
            return key
                .value
                .ok_or_else(|| format!("{} is not set or empty", key.source));
        }
        if let Some(name) = reference.strip_prefix("secret:") {
            let value = self
                .vault
                .get(name)
                .map_err(|e| format!("{} ({})", e, e.code()))?;
            return String::from_utf8(value.expose().to_vec())
                .map_err(|_| format!("secret {name} is not UTF-8 text"));
        }
        Err(
            "not a secret reference (`env:NAME`, `file:PATH`, `cred:NAME`, `secret:NAME`)"
                .to_owned(),
        )
    }
}

/// How the catalogs' secret references are resolved in this installation.
pub fn references(paths: &Paths, installation_secret: &[u8]) -> Arc<dyn Credentials> {
    Arc::new(References {
        env: warrant_llm::secret::reference_env(
            install::parent_env(),
            crate::credentials::values(paths).unwrap_or_default(),
        ),
        vault: warrant_exec::vault::Vault::open(&paths.dot, installation_secret),
    })
}

/// The configured catalogs; `None` when there are none. Each is checked now (no request is
/// made until a tool is called).
pub fn source(
    settings: &warrant_core::config::Settings,
    references: &Arc<dyn Credentials>,
) -> Result<Option<Arc<Catalogs>>> {
    if settings.catalog.is_empty() {
        return Ok(None);
    }
    let mut clients = Vec::new();
    for (name, config) in &settings.catalog {
        clients.push(
            CatalogClient::new(name, config, Arc::clone(references))
                .map_err(|e| HostError::bad_input(&e))?,
        );
    }
    Ok(Some(Arc::new(Catalogs::new(clients))))
}

/// `[memory.shared] backend = "iceberg"`: the table every published entry is appended to, in
/// a configured catalog (its url, prefix, realm and credentials); `None` for the local backend.
pub fn shared_sink(
    settings: &warrant_core::config::Settings,
    references: &Arc<dyn Credentials>,
) -> Result<Option<Arc<dyn warrant_memory::SharedSink>>> {
    let Some(shared) = &settings.shared_memory else {
        return Ok(None);
    };
    let bad = |m: String| HostError::usage("W-MEMORY-017", format!("[memory.shared] {m}"));
    match shared.backend.as_str() {
        "local" | "postgres" => return Ok(None),
        "iceberg" => {}
        other => {
            return Err(bad(format!(
                "backend = {other:?} is not one Warrant has; use \"local\", \"postgres\" or \"iceberg\""
            )));
        }
    }
    let name = shared.catalog.clone().ok_or_else(|| {
        bad("backend = \"iceberg\" needs catalog = \"NAME\" (a [catalog.NAME])".into())
    })?;
    let config = settings
        .catalog
        .get(&name)
        .cloned()
        .ok_or_else(|| bad(format!("catalog = {name:?} names no [catalog.{name}]")))?;
    let path = shared
        .table
        .as_deref()
        .ok_or_else(|| bad("backend = \"iceberg\" needs table = \"NAMESPACE.TABLE\"".into()))?;
    let mut levels = warrant_catalog::parse_path(path).map_err(|e| bad(format!("table: {e}")))?;
    if levels.len() < 2 {
        return Err(bad(format!(
            "table = {path:?} names no namespace: write NAMESPACE.TABLE"
        )));
    }
    let table = levels.pop().unwrap_or_default();
    let references = Arc::clone(references);
    let properties: warrant_iceberg::Properties = Arc::new(move || {
        let mut p = std::collections::HashMap::new();
        p.insert("uri".to_owned(), config.url.clone());
        if let Some(prefix) = &config.prefix {
            p.insert("prefix".to_owned(), prefix.clone());
        }
        if let Some(w) = &config.warehouse {
            p.insert("warehouse".to_owned(), w.clone());
        }
        if let Some(realm) = &config.realm {
            let header = config.realm_header.as_deref().unwrap_or("Polaris-Realm");
            p.insert(format!("header.{header}"), realm.clone());
        }
        if let Some(t) = &config.token {
            p.insert("token".to_owned(), references.resolve(t)?);
        }
        if let (Some(id), Some(secret)) = (&config.client_id, &config.client_secret) {
            let id = references.resolve(id)?;
            let secret = references.resolve(secret)?;
            p.insert("credential".to_owned(), format!("{id}:{secret}"));
            p.insert(
                "scope".to_owned(),
                config
                    .scope
                    .clone()
                    .unwrap_or_else(|| "PRINCIPAL_ROLE:ALL".to_owned()),
            );
            if let Some(u) = &config.token_url {
                p.insert("oauth2-server-uri".to_owned(), u.clone());
            }
        }
        Ok(p)
    });
    Ok(Some(Arc::new(warrant_iceberg::IcebergSink {
        catalog: name,
        namespace: levels,
        table,
        properties,
    })))
}

impl Host {
    /// The catalog tools, when any catalog is configured.
    pub fn catalogs(&self) -> Option<&Arc<Catalogs>> {
        self.catalogs.as_ref()
    }

    /// A person lists a catalog's namespace (`path`, dotted), or every configured catalog's top
    /// level, through the ring (`catalog.list`).
    pub fn catalog_list(
        &self,
        path: Option<&str>,
        prompter: &mut dyn Prompter,
    ) -> Result<PersonOp> {
        let args = match path {
            Some(p) => json!({ "path": p }),
            None => json!({}),
        };
        self.person_op(
            format!("list catalog {}", path.unwrap_or("(every catalog)")),
            "catalog_list",
            args,
            prompter,
        )
    }

    /// A person describes one table (`table`, dotted) through the ring (`catalog.read`).
    pub fn catalog_describe(&self, table: &str, prompter: &mut dyn Prompter) -> Result<PersonOp> {
        self.person_op(
            format!("describe catalog table {table}"),
            "catalog_describe",
            json!({ "table": table }),
            prompter,
        )
    }
}
