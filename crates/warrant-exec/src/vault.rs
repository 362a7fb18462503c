//! The secret vault: values a person provided through a request, encrypted at rest with
//! ChaCha20-Poly1305 under a key derived (HKDF-SHA256) from the installation secret. Each entry
//! is bound to its name as associated data, so swapping entries in the file fails to decrypt.
//! The model only ever sees `secret:NAME`; the value leaves the vault only for an executor.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use chacha20poly1305::aead::{Aead, Payload};
use chacha20poly1305::{ChaCha20Poly1305, KeyInit, Nonce};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use thiserror::Error;
use warrant_core::Coded;

/// The vault file inside `.warrant/`.
pub const VAULT_FILE: &str = "secrets.json";

/// The credentials file inside `.warrant/`: a person's own keys (provider keys, sink and MCP
/// headers), kept apart from [`VAULT_FILE`] and under another key, so no `secret:NAME` handle
/// a model can name ever reaches one.
pub const CREDENTIALS_FILE: &str = "credentials.json";

#[derive(Debug, Error)]
pub enum VaultError {
    #[error("the secret vault {path} cannot be read: {message}")]
    Unreadable { path: String, message: String },
    #[error("the secret vault {path} cannot be written: {message}")]
    Unwritable { path: String, message: String },
    #[error(
        "secret {name} does not decrypt under this installation's secret (the vault was altered, or the installation secret changed)"
    )]
    Undecryptable { name: String },
    #[error("no secret named {name} was provided; the agent can ask for it with request_secret")]
    Unknown { name: String },
}

impl Coded for VaultError {
    fn code(&self) -> &'static str {
        match self {
            Self::Unreadable { .. } => "W-SECRET-001",
            Self::Unwritable { .. } => "W-SECRET-002",
            Self::Undecryptable { .. } => "W-SECRET-003",
            Self::Unknown { .. } => "W-SECRET-004",
        }
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct VaultDoc {
    version: u32,
    secrets: BTreeMap<String, Sealed>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Sealed {
    nonce: String,
    ciphertext: String,
    /// When it was stored (milliseconds since the epoch); absent in files written before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    set_at_ms: Option<i64>,
}

/// A secret's value, kept out of `Debug` output.
pub struct SecretValue(Vec<u8>);

impl SecretValue {
    pub(crate) fn new(bytes: Vec<u8>) -> Self {
        Self(bytes)
    }

    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretValue(<redacted>)")
    }
}

impl Drop for SecretValue {
    fn drop(&mut self) {
        // Best effort: overwrite before the allocator gets the memory back.
        for b in self.0.iter_mut() {
            *b = 0;
        }
    }
}

pub struct Vault {
    path: PathBuf,
    key: [u8; 32],
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vault")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

type HmacSha256 = Hmac<Sha256>;

fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut out = [0u8; 32];
    if let Ok(mut mac) = <HmacSha256 as hmac::KeyInit>::new_from_slice(key) {
        for p in parts {
            mac.update(p);
        }
        out.copy_from_slice(&mac.finalize().into_bytes());
    }
    out
}

/// HKDF-SHA256 (RFC 5869) for one 32-byte output block: a key for one purpose (`salt`,
/// `info`), derived from the installation secret, so the vault's key and the journal's never
/// coincide.
pub fn derive_key(installation_secret: &[u8], salt: &[u8], info: &[u8]) -> [u8; 32] {
    let prk = hmac(salt, &[installation_secret]);
    hmac(&prk, &[info, &[1u8]])
}

/// `msg` encrypted with ChaCha20-Poly1305 under `key`, bound to `aad`, as nonce (12 bytes,
/// random) followed by the ciphertext and its tag. `None` only if the cipher refuses the key.
pub fn seal_bytes(key: &[u8; 32], aad: &[u8], msg: &[u8]) -> Option<Vec<u8>> {
    let cipher = ChaCha20Poly1305::new_from_slice(key).ok()?;
    let mut nonce = [0u8; 12];
    rand::fill(&mut nonce);
    let ciphertext = cipher
        .encrypt(&Nonce::from(nonce), Payload { msg, aad })
        .ok()?;
    let mut out = nonce.to_vec();
    out.extend(ciphertext);
    Some(out)
}

/// What [`seal_bytes`] sealed, when `key` and `aad` are the ones it was sealed under and
/// nothing of it changed; `None` otherwise.
pub fn open_bytes(key: &[u8; 32], aad: &[u8], sealed: &[u8]) -> Option<Vec<u8>> {
    let (nonce, ciphertext) = sealed.split_at_checked(12)?;
    let nonce: [u8; 12] = nonce.try_into().ok()?;
    ChaCha20Poly1305::new_from_slice(key)
        .ok()?
        .decrypt(
            &Nonce::from(nonce),
            Payload {
                msg: ciphertext,
                aad,
            },
        )
        .ok()
}

impl Vault {
    /// The vault of a workspace's `.warrant/` directory.
    pub fn open(warrant_dir: &Path, installation_secret: &[u8]) -> Self {
        Self {
            path: warrant_dir.join(VAULT_FILE),
            key: derive_key(
                installation_secret,
                b"warrant-vault-salt-v1",
                b"warrant secrets v1",
            ),
        }
    }

    /// The credentials of a workspace's `.warrant/` directory ([`CREDENTIALS_FILE`]), under a
    /// key of their own.
    pub fn credentials(warrant_dir: &Path, installation_secret: &[u8]) -> Self {
        Self {
            path: warrant_dir.join(CREDENTIALS_FILE),
            key: derive_key(
                installation_secret,
                b"warrant-credentials-salt-v1",
                b"warrant credentials v1",
            ),
        }
    }

    /// The file it reads and writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read(&self) -> Result<VaultDoc, VaultError> {
        let unreadable = |message: String| VaultError::Unreadable {
            path: self.path.display().to_string(),
            message,
        };
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| unreadable(e.to_string())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(VaultDoc {
                version: 1,
                secrets: BTreeMap::new(),
            }),
            Err(e) => Err(unreadable(e.to_string())),
        }
    }

    fn cipher(&self) -> Result<ChaCha20Poly1305, VaultError> {
        ChaCha20Poly1305::new_from_slice(&self.key).map_err(|e| VaultError::Unwritable {
            path: self.path.display().to_string(),
            message: format!("key: {e}"),
        })
    }

    /// Stores (or replaces) `name`, written atomically with mode 0600.
    pub fn put(&self, name: &str, value: &[u8]) -> Result<(), VaultError> {
        let unwritable = |message: String| VaultError::Unwritable {
            path: self.path.display().to_string(),
            message,
        };
        let mut doc = self.read()?;
        let mut nonce = [0u8; 12];
        rand::fill(&mut nonce);
        let ciphertext = self
            .cipher()?
            .encrypt(
                &Nonce::from(nonce),
                Payload {
                    msg: value,
                    aad: name.as_bytes(),
                },
            )
            .map_err(|e| unwritable(format!("encryption failed: {e}")))?;
        doc.version = 1;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        doc.secrets.insert(
            name.to_owned(),
            Sealed {
                nonce: hex::encode(nonce),
                ciphertext: hex::encode(ciphertext),
                set_at_ms: Some(now),
            },
        );
        self.write(&doc)
    }

    /// Removes `name`; false when there was none.
    pub fn delete(&self, name: &str) -> Result<bool, VaultError> {
        let mut doc = self.read()?;
        if doc.secrets.remove(name).is_none() {
            return Ok(false);
        }
        self.write(&doc).map(|()| true)
    }

    /// Each stored name with when it was stored (milliseconds since the epoch, when known).
    pub fn entries(&self) -> Result<Vec<(String, Option<i64>)>, VaultError> {
        Ok(self
            .read()?
            .secrets
            .into_iter()
            .map(|(name, sealed)| (name, sealed.set_at_ms))
            .collect())
    }

    /// The whole document, written to a temporary file with mode 0600, synced, and renamed
    /// over the old one (then the directory synced), so a crash leaves the old file or the new.
    fn write(&self, doc: &VaultDoc) -> Result<(), VaultError> {
        let unwritable = |message: String| VaultError::Unwritable {
            path: self.path.display().to_string(),
            message,
        };
        let text = serde_json::to_vec_pretty(doc).map_err(|e| unwritable(e.to_string()))?;
        let tmp = self.path.with_extension("json.tmp");
        {
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)
                .map_err(|e| unwritable(e.to_string()))?;
            f.write_all(&text)
                .and_then(|()| f.sync_all())
                .map_err(|e| unwritable(e.to_string()))?;
        }
        std::fs::rename(&tmp, &self.path).map_err(|e| unwritable(e.to_string()))?;
        if let Some(dir) = self.path.parent() {
            let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
        }
        Ok(())
    }

    /// The value of `name`, decrypted.
    pub fn get(&self, name: &str) -> Result<SecretValue, VaultError> {
        let doc = self.read()?;
        let sealed = doc.secrets.get(name).ok_or_else(|| VaultError::Unknown {
            name: name.to_owned(),
        })?;
        let bad = || VaultError::Undecryptable {
            name: name.to_owned(),
        };
        let nonce: [u8; 12] = hex::decode(&sealed.nonce)
            .ok()
            .and_then(|n| n.try_into().ok())
            .ok_or_else(bad)?;
        let ciphertext = hex::decode(&sealed.ciphertext).map_err(|_| bad())?;
        self.cipher()?
            .decrypt(
                &Nonce::from(nonce),
                Payload {
                    msg: &ciphertext,
                    aad: name.as_bytes(),
                },
            )
            .map(SecretValue)
            .map_err(|_| bad())
    }

    /// The names of the stored secrets.
    pub fn names(&self) -> Result<Vec<String>, VaultError> {
        Ok(self.read()?.secrets.into_keys().collect())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn values_round_trip_and_are_not_stored_in_clear() {
        let dir = tempfile::tempdir().unwrap();
        let vault = Vault::open(dir.path(), b"installation-secret");
        vault.put("GITHUB_TOKEN", b"ghp_example_value_123").unwrap();
        assert_eq!(
            vault.get("GITHUB_TOKEN").unwrap().expose(),
            b"ghp_example_value_123"
        );
        let file = std::fs::read(dir.path().join(VAULT_FILE)).unwrap();
        assert!(
            !file
                .windows(b"ghp_example_value_123".len())
                .any(|w| w == b"ghp_example_value_123")
        );
        assert_eq!(vault.names().unwrap(), vec!["GITHUB_TOKEN".to_owned()]);
        assert_eq!(vault.get("OTHER").unwrap_err().code(), "W-SECRET-004");
    }

    #[test]
    fn another_key_or_a_swapped_entry_does_not_decrypt() {
        let dir = tempfile::tempdir().unwrap();
        let vault = Vault::open(dir.path(), b"installation-secret");
        vault.put("A", b"value-a").unwrap();
        vault.put("B", b"value-b").unwrap();
        let other = Vault::open(dir.path(), b"another-secret");
        assert_eq!(other.get("A").unwrap_err().code(), "W-SECRET-003");
        // Move B's ciphertext under A's name: the name is authenticated, so it fails.
        let path = dir.path().join(VAULT_FILE);
        let mut doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        doc["secrets"]["A"] = doc["secrets"]["B"].clone();
        std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
        assert_eq!(vault.get("A").unwrap_err().code(), "W-SECRET-003");
        assert_eq!(vault.get("B").unwrap().expose(), b"value-b");
    }

    #[test]
    fn credentials_are_a_file_and_key_of_their_own() {
        let dir = tempfile::tempdir().unwrap();
        let creds = Vault::credentials(dir.path(), b"installation-secret");
        creds.put("openai-api-key", b"sk-value").unwrap();
        assert_eq!(creds.get("openai-api-key").unwrap().expose(), b"sk-value");
        // The request vault cannot name it, and its file does not open under the vault's key.
        let vault = Vault::open(dir.path(), b"installation-secret");
        assert_eq!(
            vault.get("openai-api-key").unwrap_err().code(),
            "W-SECRET-004"
        );
        std::fs::copy(
            dir.path().join(CREDENTIALS_FILE),
            dir.path().join(VAULT_FILE),
        )
        .unwrap();
        assert_eq!(
            vault.get("openai-api-key").unwrap_err().code(),
            "W-SECRET-003"
        );
        let entries = creds.entries().unwrap();
        assert_eq!(entries.len(), 1);
        assert!(entries[0].1.is_some_and(|ms| ms > 0));
        assert!(creds.delete("openai-api-key").unwrap());
        assert!(!creds.delete("openai-api-key").unwrap());
        assert!(creds.entries().unwrap().is_empty());
    }
}
