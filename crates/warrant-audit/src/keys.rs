//! The installation's Ed25519 audit key on disk (`audit.key` hex seed, mode 0600, and
//! `audit.pub` hex public key) and the public key lists `verify` trusts. Keys are identified by
//! `kid` = the first 16 hex digits of SHA-256 of the 32-byte public key. No rotation here.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use sha2::{Digest as _, Sha256};

use crate::AuditError;

pub const PRIVATE_KEY_FILE: &str = "audit.key";
pub const PUBLIC_KEY_FILE: &str = "audit.pub";

/// The key id of a public key.
pub fn kid_of(public: &VerifyingKey) -> String {
    let digest = Sha256::digest(public.as_bytes());
    let mut kid = hex::encode(digest.as_slice());
    kid.truncate(16);
    kid
}

/// The installation's signing key. `Debug` shows only the kid, never the seed.
#[derive(Clone)]
pub struct AuditKey {
    signing: SigningKey,
}

impl fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuditKey")
            .field("kid", &self.kid())
            .finish_non_exhaustive()
    }
}

impl AuditKey {
    /// A fresh key from the operating system's randomness (through rand's thread RNG).
    pub fn generate() -> Self {
        Self {
            signing: SigningKey::generate(&mut rand::rng()),
        }
    }

    /// A key from a known seed: for tests and for restoring a backup.
    pub fn from_seed(seed: [u8; 32]) -> Self {
        Self {
            signing: SigningKey::from_bytes(&seed),
        }
    }

    pub fn kid(&self) -> String {
        kid_of(&self.signing.verifying_key())
    }

    pub fn verifying_key(&self) -> VerifyingKey {
        self.signing.verifying_key()
    }

    pub fn public_key_hex(&self) -> String {
        hex::encode(self.signing.verifying_key().as_bytes())
    }

    /// The signature over `message` (the 32 raw bytes of a record hash).
    pub fn sign(&self, message: &[u8]) -> Signature {
        self.signing.sign(message)
    }

    /// Writes `audit.key` (created 0600, never overwritten) and `audit.pub` in `dir`, creating
    /// `dir` if needed. Refuses when a key is already there: replacing it would orphan every
    /// record signed with it.
    pub fn save(&self, dir: &Path) -> Result<(), AuditError> {
        fs::create_dir_all(dir).map_err(|e| AuditError::io("create the key directory", dir, e))?;
        let private = dir.join(PRIVATE_KEY_FILE);
        let public = dir.join(PUBLIC_KEY_FILE);
        let seed = format!("{}\n", hex::encode(self.signing.to_bytes()));
        write_new(&private, seed.as_bytes(), 0o600).map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                AuditError::KeyExists {
                    path: private.clone(),
                }
            } else {
                AuditError::io("write the audit key", &private, e)
            }
        })?;
        let pub_line = format!("{}\n", self.public_key_hex());
        // The public half may be replaced freely: it is derived from the private one.
        fs::write(&public, pub_line).map_err(|e| AuditError::io("write", &public, e))?;
        sync_dir(dir).map_err(|e| AuditError::io("sync the key directory", dir, e))?;
        Ok(())
    }

    /// Loads `audit.key` from `dir`. Refuses a private key that group or others can read; when
    /// `audit.pub` exists it must match, so a swapped public key is noticed here, not at verify.
    pub fn load(dir: &Path) -> Result<Self, AuditError> {
        let private = dir.join(PRIVATE_KEY_FILE);
        let meta = match fs::metadata(&private) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(AuditError::KeyMissing { path: private });
            }
            Err(e) => return Err(AuditError::io("read", &private, e)),
        };
        check_private_mode(&private, &meta)?;
        let text = fs::read_to_string(&private).map_err(|e| AuditError::io("read", &private, e))?;
        let seed = parse_hex32(text.trim()).map_err(|reason| AuditError::KeyMalformed {
            path: private.clone(),
            reason,
        })?;
        let key = Self::from_seed(seed);
        let public = dir.join(PUBLIC_KEY_FILE);
        match fs::read_to_string(&public) {
            Ok(text) => {
                if text.trim() != key.public_key_hex() {
                    return Err(AuditError::KeyMismatch { private, public });
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(AuditError::io("read", &public, e)),
        }
        Ok(key)
    }
}

#[cfg(unix)]
fn check_private_mode(path: &Path, meta: &fs::Metadata) -> Result<(), AuditError> {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(AuditError::KeyPermissions {
            path: path.to_path_buf(),
            mode,
        });
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_private_mode(_path: &Path, _meta: &fs::Metadata) -> Result<(), AuditError> {
    // No portable permission bits to check; ACLs are the operator's job there.
    Ok(())
}

fn write_new(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        // Set at creation, so the seed is never readable by others, not even briefly.
        options.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        fs::File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

fn parse_hex32(text: &str) -> Result<[u8; 32], String> {
    let bytes = hex::decode(text).map_err(|e| format!("not hex ({e})"))?;
    <[u8; 32]>::try_from(bytes.as_slice())
        .map_err(|_| format!("expected 32 bytes (64 hex digits), found {}", bytes.len()))
}

/// The public keys a verifier trusts, by kid.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PublicKeys {
    keys: BTreeMap<String, VerifyingKey>,
}

impl PublicKeys {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn from_keys(keys: impl IntoIterator<Item = VerifyingKey>) -> Self {
        let mut set = Self::new();
        for key in keys {
            set.insert(key);
        }
        set
    }

    pub fn insert(&mut self, key: VerifyingKey) {
        self.keys.insert(kid_of(&key), key);
    }

    /// Reads a file of one hex public key per line; `#` starts a comment, blank lines are
    /// ignored (the format of `audit.pub`, and of a list kept by an auditor).
    pub fn load(path: &Path) -> Result<Self, AuditError> {
        let text = match fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(AuditError::KeyMissing {
                    path: path.to_path_buf(),
                });
            }
            Err(e) => return Err(AuditError::io("read", path, e)),
        };
        Self::parse(&text).map_err(|(line, reason)| AuditError::PublicKeysMalformed {
            path: PathBuf::from(path),
            line,
            reason,
        })
    }

    /// Parses the text of a public key list; the error names the 1-based line.
    pub fn parse(text: &str) -> Result<Self, (u64, String)> {
        let mut set = Self::new();
        for (n, raw) in (1u64..).zip(text.lines()) {
            let line = raw.split('#').next().unwrap_or_default().trim();
            if line.is_empty() {
                continue;
            }
            let bytes = parse_hex32(line).map_err(|reason| (n, reason))?;
            let key = VerifyingKey::from_bytes(&bytes)
                .map_err(|e| (n, format!("not an Ed25519 public key ({e})")))?;
            set.insert(key);
        }
        Ok(set)
    }

    pub fn get(&self, kid: &str) -> Option<&VerifyingKey> {
        self.keys.get(kid)
    }

    pub fn kids(&self) -> impl Iterator<Item = &str> {
        self.keys.keys().map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}
