//! A person's credentials (`warrant credentials set|list|delete|check`): provider keys, sink
//! and MCP header tokens, referenced from configuration as `cred:NAME` and never written there
//! in clear. They live in `.warrant/credentials.json`, encrypted with ChaCha20-Poly1305 under a
//! key derived from the installation secret (the vault's mechanism, a file and key of its own,
//! so no `secret:NAME` handle a model can name reaches one).
//!
//! The OS keyring is not used yet: this build has no Secret Service client (see STATUS), so
//! every view says where a credential is stored, and `list` says why it is not the keyring.

use std::collections::BTreeMap;

use serde::Serialize;
use warrant_core::Coded as _;
use warrant_exec::vault::Vault;

use crate::install::{self, Paths};
use crate::{HostError, Result, Where};

/// Where credentials are stored, as the views name it.
pub const STORED_IN: &str = "encrypted vault";

/// Why the OS keyring is not where they are.
pub const KEYRING_NOTE: &str = "the OS keyring is not used by this build (no Secret Service client): credentials are kept in the workspace's encrypted vault, readable only with its installation secret";

/// One stored credential, never its value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CredentialRow {
    pub name: String,
    /// `encrypted vault`.
    pub stored_in: String,
    /// The file that holds it.
    pub path: String,
    /// When it was stored (RFC 3339), when known.
    pub set_at: Option<String>,
    /// The configuration settings that refer to it (`cred:NAME`).
    pub used_by: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CredentialList {
    pub credentials: Vec<CredentialRow>,
    pub note: String,
}

/// What `set` and `delete` did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CredentialChange {
    pub name: String,
    /// `stored`, `replaced` or `deleted`.
    pub outcome: String,
    pub stored_in: String,
    pub path: String,
    /// What to write in configuration to use it.
    pub reference: String,
}

/// One reference of the configuration checked by `check`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReferenceCheck {
    /// The setting (`providers.openai.api_key`).
    pub setting: String,
    pub reference: String,
    pub ok: bool,
    pub detail: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CredentialCheck {
    pub ok: bool,
    /// Every stored credential opened (decrypts under this installation's secret).
    pub stored: Vec<ReferenceCheck>,
    /// Every `cred:` reference of the merged configuration resolved.
    pub references: Vec<ReferenceCheck>,
}

fn vault(paths: &Paths) -> Result<Vault> {
    Ok(Vault::credentials(
        &paths.dot,
        &install::installation_secret(paths)?,
    ))
}

/// A credential's name: what a `cred:NAME` reference can spell and a person can type.
fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        Ok(())
    } else {
        Err(HostError::usage(
            "W-CRED-001",
            format!(
                "{name:?} is not a credential name: use letters, digits, `_`, `-` and `.` (at most 128)"
            ),
        ))
    }
}

fn vault_error(e: &warrant_exec::vault::VaultError, name: &str) -> HostError {
    match e {
        warrant_exec::vault::VaultError::Unknown { .. } => HostError::usage(
            "W-CRED-002",
            format!("no credential named {name} is stored; `warrant credentials list` shows them"),
        ),
        other @ (warrant_exec::vault::VaultError::Unreadable { .. }
        | warrant_exec::vault::VaultError::Unwritable { .. }
        | warrant_exec::vault::VaultError::Undecryptable { .. }) => {
            HostError::coded(other, crate::Class::Failed)
        }
    }
}

fn time_of(ms: Option<i64>) -> Option<String> {
    ms.and_then(warrant_core::Timestamp::from_millis)
        .map(|t| t.rfc3339())
}

/// Stores `value` under `name` (replacing an older one). An empty value is refused: nothing is
/// written.
pub fn set(at: &Where, name: &str, value: &str) -> Result<CredentialChange> {
    check_name(name)?;
    let value = value.trim_end_matches(['\r', '\n']);
    if value.trim().is_empty() {
        return Err(HostError::usage(
            "W-CRED-003",
            format!("the value for credential {name} is empty: nothing was stored"),
        ));
    }
    let paths = install::paths(at, false)?;
    let vault = vault(&paths)?;
    let existed = vault
        .entries()
        .map_err(|e| vault_error(&e, name))?
        .iter()
        .any(|(n, _)| n == name);
    vault
        .put(name, value.as_bytes())
        .map_err(|e| vault_error(&e, name))?;
    Ok(CredentialChange {
        name: name.to_owned(),
        outcome: if existed { "replaced" } else { "stored" }.to_owned(),
        stored_in: STORED_IN.to_owned(),
        path: vault.path().display().to_string(),
        reference: format!("cred:{name}"),
    })
}

pub fn delete(at: &Where, name: &str) -> Result<CredentialChange> {
    check_name(name)?;
    let paths = install::paths(at, false)?;
    let vault = vault(&paths)?;
    if !vault.delete(name).map_err(|e| vault_error(&e, name))? {
        return Err(vault_error(
            &warrant_exec::vault::VaultError::Unknown {
                name: name.to_owned(),
            },
            name,
        ));
    }
    Ok(CredentialChange {
        name: name.to_owned(),
        outcome: "deleted".to_owned(),
        stored_in: STORED_IN.to_owned(),
        path: vault.path().display().to_string(),
        reference: format!("cred:{name}"),
    })
}

/// Every `cred:` reference of the merged configuration, by the setting that holds it.
fn references(paths: &Paths) -> Result<Vec<(String, String)>> {
    let layers = install::read_layers(paths)?;
    let s = install::settings(&layers)?;
    let mut out = Vec::new();
    let mut add = |setting: String, r: Option<&String>| {
        if let Some(r) = r.filter(|r| r.starts_with(warrant_llm::secret::CRED_PREFIX)) {
            out.push((setting, r.clone()));
        }
    };
    add("providers.openai.api_key".into(), s.openai.api_key.as_ref());
    add(
        "providers.anthropic.api_key".into(),
        s.anthropic.api_key.as_ref(),
    );
    add("store.password".into(), s.store_password.as_ref());
    for (name, sink) in &s.audit_sinks {
        let warrant_core::config::SinkConfig::Http { headers, .. } = sink;
        for (h, v) in headers {
            add(format!("audit.sinks.{name}.headers.{h}"), Some(v));
        }
    }
    for (name, server) in &s.mcp.servers {
        for (h, v) in &server.headers {
            add(format!("mcp.servers.{name}.headers.{h}"), Some(v));
        }
    }
    for (name, token) in &s.mcp.serve.tokens {
        add(format!("mcp.serve.tokens.{name}.token"), Some(&token.token));
    }
    for (profile, vars) in &s.secret_env {
        for (var, v) in vars {
            add(format!("secret_env.{profile}.{var}"), Some(v));
        }
    }
    Ok(out)
}

pub fn list(at: &Where) -> Result<CredentialList> {
    let paths = install::paths(at, false)?;
    let vault = vault(&paths)?;
    let refs = references(&paths).unwrap_or_default();
    let credentials = vault
        .entries()
        .map_err(|e| vault_error(&e, ""))?
        .into_iter()
        .map(|(name, set_at)| {
            let reference = format!("cred:{name}");
            CredentialRow {
                used_by: refs
                    .iter()
                    .filter(|(_, r)| *r == reference)
                    .map(|(s, _)| s.clone())
                    .collect(),
                name,
                stored_in: STORED_IN.to_owned(),
                path: vault.path().display().to_string(),
                set_at: time_of(set_at),
            }
        })
        .collect();
    Ok(CredentialList {
        credentials,
        note: KEYRING_NOTE.to_owned(),
    })
}

/// Opens every stored credential and resolves every `cred:` reference of the configuration.
pub fn check(at: &Where) -> Result<CredentialCheck> {
    let paths = install::paths(at, false)?;
    let vault = vault(&paths)?;
    let names = vault.entries().map_err(|e| vault_error(&e, ""))?;
    let stored: Vec<ReferenceCheck> = names
        .iter()
        .map(|(name, _)| {
            let (ok, detail) = match vault.get(name) {
                Ok(v) if v.expose().is_empty() => (false, "stored empty".to_owned()),
                Ok(_) => (true, "decrypts under this installation's secret".to_owned()),
                Err(e) => (false, format!("[{}] {e}", e.code())),
            };
            ReferenceCheck {
                setting: String::new(),
                reference: format!("cred:{name}"),
                ok,
                detail,
            }
        })
        .collect();
    let env = reference_env(&paths)?;
    let references: Vec<ReferenceCheck> = references(&paths)?
        .into_iter()
        .map(|(setting, reference)| {
            let (ok, detail) =
                match warrant_llm::secret::resolve_key(&setting, Some(&reference), "", &env) {
                    Ok(_) => (true, "resolves".to_owned()),
                    Err(e) => (false, format!("[{}] {e}", e.code())),
                };
            ReferenceCheck {
                setting,
                reference,
                ok,
                detail,
            }
        })
        .collect();
    Ok(CredentialCheck {
        ok: stored.iter().chain(&references).all(|c| c.ok),
        stored,
        references,
    })
}

/// The stored credentials' values, by name: what `cred:` references resolve to. Empty when the
/// workspace has none, or its installation secret is not there yet.
pub fn values(paths: &Paths) -> Result<BTreeMap<String, String>> {
    let Ok(secret) = install::installation_secret(paths) else {
        return Ok(BTreeMap::new());
    };
    let vault = Vault::credentials(&paths.dot, &secret);
    let mut out = BTreeMap::new();
    for (name, _) in vault.entries().map_err(|e| vault_error(&e, ""))? {
        let v = vault.get(&name).map_err(|e| vault_error(&e, &name))?;
        if let Ok(text) = String::from_utf8(v.expose().to_vec()) {
            out.insert(name, text);
        }
    }
    Ok(out)
}

/// The environment secret references resolve against: this process's environment and the
/// workspace's credentials (`warrant_llm::secret::reference_env`).
pub fn reference_env(paths: &Paths) -> Result<BTreeMap<String, String>> {
    Ok(warrant_llm::secret::reference_env(
        std::env::vars(),
        values(paths)?,
    ))
}
