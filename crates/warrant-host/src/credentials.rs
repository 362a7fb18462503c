//! A person's credentials (`warrant credentials set|list|delete|check`): provider keys, sink
//! and MCP header tokens, referenced from configuration as `cred:NAME` and never written there
//! in clear. They live in the OS keyring when one answers (the session's Secret Service, items
//! scoped to this workspace: `warrant_exec::keyring`), else in `.warrant/credentials.json`,
//! encrypted with ChaCha20-Poly1305 under a key derived from the installation secret (the
//! vault's mechanism, a file and key of its own, so no `secret:NAME` handle a model can name
//! reaches one). A name lives in one place: storing it in one removes it from the other, and
//! where both hold it (the keyring was locked when the vault took it) the vault's wins.

use std::collections::BTreeMap;

use serde::Serialize;
use warrant_core::Coded as _;
use warrant_exec::keyring::{Keyring, KeyringError};
use warrant_exec::vault::Vault;

use crate::install::{self, Paths};
use crate::{HostError, Result, Where};

/// Where credentials are stored, as the views name it.
pub const STORED_IN: &str = "encrypted vault";
/// Where the keyring's are.
pub const IN_KEYRING: &str = "OS keyring";
/// `check`'s word for a credential read from the keyring.
pub const READ_FROM_KEYRING: &str = "read from the OS keyring";

/// Where `set` stores a credential.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The OS keyring when it answers and is unlocked, else the encrypted vault (the view says
    /// why).
    Auto,
    /// The OS keyring or nothing: a keyring that is absent or locked is refused.
    Keyring,
    /// The workspace's encrypted vault.
    Vault,
}

/// One stored credential, never its value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CredentialRow {
    pub name: String,
    /// `OS keyring` or `encrypted vault`.
    pub stored_in: String,
    /// The file that holds it, or the keyring's collection.
    pub path: String,
    /// When it was stored (RFC 3339), when known.
    pub set_at: Option<String>,
    /// The configuration settings that refer to it (`cred:NAME`).
    pub used_by: Vec<String>,
    /// Its value can be read now (false: in a locked keyring collection).
    pub readable: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CredentialList {
    pub credentials: Vec<CredentialRow>,
    /// What the OS keyring answered (where `set` stores by default).
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
    /// Why it is not where the person might expect (the keyring did not answer), when so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
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
    /// Every stored credential opened (decrypts under this installation's secret, or read from
    /// the keyring).
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

/// The scope of this workspace's keyring items: its `.warrant/` as the file system names it.
fn scope(paths: &Paths) -> String {
    std::fs::canonicalize(&paths.dot)
        .unwrap_or_else(|_| paths.dot.clone())
        .display()
        .to_string()
}

/// The keyring, when a debug build's test has not switched it off
/// (`WARRANT_TEST_DISABLE=keyring`).
fn keyring(paths: &Paths) -> std::result::Result<Keyring, KeyringError> {
    if crate::controls::disabled("keyring") {
        return Err(KeyringError::Absent {
            reason: "switched off for this test (WARRANT_TEST_DISABLE=keyring)".to_owned(),
        });
    }
    Keyring::connect(&scope(paths))
}

fn keyring_error(e: &KeyringError) -> HostError {
    match e {
        KeyringError::Absent { .. } | KeyringError::Locked { .. } => {
            HostError::coded(e, crate::Class::Usage)
        }
        KeyringError::Failed { .. } => HostError::coded(e, crate::Class::Failed),
    }
}

/// What the keyring answered, in one line.
fn keyring_note(k: &std::result::Result<Keyring, KeyringError>) -> String {
    match k.as_ref().map_err(Clone::clone).map(Keyring::status) {
        Ok(Ok((label, true))) => format!(
            "the OS keyring answered (Secret Service, collection `{label}`, unlocked): `credentials set` stores there"
        ),
        Ok(Ok((label, false))) => format!(
            "the OS keyring's collection `{label}` is locked: `credentials set` stores in the encrypted vault until it is unlocked"
        ),
        Ok(Err(e)) | Err(e) => format!(
            "{e}; `credentials set` stores in the workspace's encrypted vault, readable only with its installation secret"
        ),
    }
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

/// Stores `value` under `name` (replacing an older one) where `backend` says. An empty value is
/// refused, and so is the keyring when it was asked for by name and is absent or locked:
/// nothing is written.
pub fn set(at: &Where, name: &str, value: &str, backend: Backend) -> Result<CredentialChange> {
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
    let in_vault = vault
        .entries()
        .map_err(|e| vault_error(&e, name))?
        .iter()
        .any(|(n, _)| n == name);
    let ring = match backend {
        Backend::Vault => None,
        Backend::Auto | Backend::Keyring => Some(keyring(&paths)),
    };
    let mut note = None;
    if let Some(ring) = &ring {
        let stored = ring.as_ref().map_err(Clone::clone).and_then(|k| {
            let existed = k.entries()?.iter().any(|e| e.name == name);
            k.put(name, value.as_bytes())?;
            Ok((k.status().map(|(l, _)| l).unwrap_or_default(), existed))
        });
        match stored {
            Ok((collection, existed)) => {
                // One place per name: the vault's copy (older) goes.
                if in_vault {
                    vault.delete(name).map_err(|e| vault_error(&e, name))?;
                }
                return Ok(CredentialChange {
                    name: name.to_owned(),
                    outcome: if existed || in_vault {
                        "replaced"
                    } else {
                        "stored"
                    }
                    .to_owned(),
                    stored_in: IN_KEYRING.to_owned(),
                    path: format!("Secret Service collection `{collection}`"),
                    reference: format!("cred:{name}"),
                    note: None,
                });
            }
            Err(e) if backend == Backend::Keyring => return Err(keyring_error(&e)),
            Err(e) => {
                note = Some(format!(
                    "[{}] {e}; stored in the encrypted vault instead",
                    e.code()
                ))
            }
        }
    }
    vault
        .put(name, value.as_bytes())
        .map_err(|e| vault_error(&e, name))?;
    // The keyring's copy, if one answers, goes: the vault's is the newer.
    let ring = ring.unwrap_or_else(|| keyring(&paths));
    let in_ring = ring
        .as_ref()
        .ok()
        .and_then(|k| k.remove(name).ok())
        .unwrap_or(false);
    Ok(CredentialChange {
        name: name.to_owned(),
        outcome: if in_vault || in_ring {
            "replaced"
        } else {
            "stored"
        }
        .to_owned(),
        stored_in: STORED_IN.to_owned(),
        path: vault.path().display().to_string(),
        reference: format!("cred:{name}"),
        note,
    })
}

/// Deletes `name` wherever it is stored (the vault, the keyring or both).
pub fn delete(at: &Where, name: &str) -> Result<CredentialChange> {
    check_name(name)?;
    let paths = install::paths(at, false)?;
    let vault = vault(&paths)?;
    let ring = keyring(&paths);
    let from_ring = match &ring {
        Ok(k) => k.remove(name).map_err(|e| keyring_error(&e))?,
        Err(_) => false,
    };
    let from_vault = vault.delete(name).map_err(|e| vault_error(&e, name))?;
    if !from_ring && !from_vault {
        let mut e = vault_error(
            &warrant_exec::vault::VaultError::Unknown {
                name: name.to_owned(),
            },
            name,
        );
        if let Err(k) = &ring {
            e.message = format!("{} ({k})", e.message);
        }
        return Err(e);
    }
    Ok(CredentialChange {
        name: name.to_owned(),
        outcome: "deleted".to_owned(),
        stored_in: if from_ring { IN_KEYRING } else { STORED_IN }.to_owned(),
        path: if from_ring {
            "Secret Service".to_owned()
        } else {
            vault.path().display().to_string()
        },
        reference: format!("cred:{name}"),
        note: None,
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
    let used_by = |name: &str| -> Vec<String> {
        let reference = format!("cred:{name}");
        refs.iter()
            .filter(|(_, r)| *r == reference)
            .map(|(s, _)| s.clone())
            .collect()
    };
    let ring = keyring(&paths);
    let mut credentials: Vec<CredentialRow> = Vec::new();
    if let Ok(k) = &ring {
        let collection = k.status().map(|(l, _)| l).unwrap_or_default();
        for e in k.entries().map_err(|e| keyring_error(&e))? {
            credentials.push(CredentialRow {
                used_by: used_by(&e.name),
                name: e.name,
                stored_in: IN_KEYRING.to_owned(),
                path: format!("Secret Service collection `{collection}`"),
                set_at: time_of(e.set_at_ms),
                readable: !e.locked,
            });
        }
    }
    for (name, set_at) in vault.entries().map_err(|e| vault_error(&e, ""))? {
        credentials.retain(|c| c.name != name);
        credentials.push(CredentialRow {
            used_by: used_by(&name),
            name,
            stored_in: STORED_IN.to_owned(),
            path: vault.path().display().to_string(),
            set_at: time_of(set_at),
            readable: true,
        });
    }
    credentials.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(CredentialList {
        credentials,
        note: keyring_note(&ring),
    })
}

/// Opens every stored credential and resolves every `cred:` reference of the configuration.
pub fn check(at: &Where) -> Result<CredentialCheck> {
    let paths = install::paths(at, false)?;
    let vault = vault(&paths)?;
    let names = vault.entries().map_err(|e| vault_error(&e, ""))?;
    let mut stored: Vec<ReferenceCheck> = names
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
    if let Ok(k) = keyring(&paths) {
        for e in k.entries().map_err(|e| keyring_error(&e))? {
            if names.iter().any(|(n, _)| *n == e.name) {
                continue;
            }
            let (ok, detail) = match k.get(&e.name) {
                Ok(Some(v)) if !v.expose().is_empty() => (true, READ_FROM_KEYRING.to_owned()),
                Ok(_) => (false, "stored empty in the OS keyring".to_owned()),
                Err(err) => (false, format!("[{}] {err}", err.code())),
            };
            stored.push(ReferenceCheck {
                setting: String::new(),
                reference: format!("cred:{}", e.name),
                ok,
                detail,
            });
        }
    }
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

/// The stored credentials as references resolve them: the values by name (the keyring's,
/// then the vault's over them), and the names that could not be read with the reason (a locked
/// keyring item; the empty name: the keyring did not answer).
fn stored_values(paths: &Paths) -> Result<(BTreeMap<String, String>, BTreeMap<String, String>)> {
    let mut out = BTreeMap::new();
    let mut unreadable = BTreeMap::new();
    match keyring(paths) {
        Ok(k) => match k.entries() {
            Ok(entries) => {
                for e in entries {
                    match k.get(&e.name) {
                        Ok(Some(v)) => {
                            if let Ok(text) = String::from_utf8(v.expose().to_vec()) {
                                out.insert(e.name, text);
                            }
                        }
                        Ok(None) => {}
                        Err(err) => {
                            unreadable.insert(e.name, format!("[{}] {err}", err.code()));
                        }
                    }
                }
            }
            Err(err) => {
                unreadable.insert(String::new(), format!("[{}] {err}", err.code()));
            }
        },
        Err(err) => {
            unreadable.insert(String::new(), format!("[{}] {err}", err.code()));
        }
    }
    let Ok(secret) = install::installation_secret(paths) else {
        return Ok((out, unreadable));
    };
    let vault = Vault::credentials(&paths.dot, &secret);
    for (name, _) in vault.entries().map_err(|e| vault_error(&e, ""))? {
        let v = vault.get(&name).map_err(|e| vault_error(&e, &name))?;
        if let Ok(text) = String::from_utf8(v.expose().to_vec()) {
            unreadable.remove(&name);
            out.insert(name, text);
        }
    }
    Ok((out, unreadable))
}

/// The stored credentials' values, by name: what `cred:` references resolve to. Empty when the
/// workspace has none, or its installation secret is not there yet (and no keyring answers).
pub fn values(paths: &Paths) -> Result<BTreeMap<String, String>> {
    Ok(stored_values(paths)?.0)
}

/// The environment secret references resolve against: this process's environment and the
/// workspace's credentials (`warrant_llm::secret::reference_env`), with why a credential could
/// not be read, so a reference to it says so.
pub fn reference_env(paths: &Paths) -> Result<BTreeMap<String, String>> {
    let (values, unreadable) = stored_values(paths)?;
    Ok(warrant_llm::secret::reference_env_with(
        std::env::vars(),
        values,
        unreadable,
    ))
}
