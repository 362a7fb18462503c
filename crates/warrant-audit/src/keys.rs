//! The installation's Ed25519 audit key on disk (`audit.key` hex seed, mode 0600, `audit.pub`
//! hex public key, `retired/<kid>.pub` for every key rotated away) and the public key lists
//! `verify` trusts. `kid` = the first 16 hex digits of SHA-256 of the 32-byte public key.
//! Rotation keeps every old public key, so history stays verifiable; one rotator at a time.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::AuditError;

pub const PRIVATE_KEY_FILE: &str = "audit.key";
pub const PUBLIC_KEY_FILE: &str = "audit.pub";
/// The directory, inside the keys directory, of public keys rotated away.
pub const RETIRED_DIR: &str = "retired";
/// The new pair is staged under these names, then renamed into place.
const STAGED_PRIVATE: &str = "audit.key.new";
const STAGED_PUBLIC: &str = "audit.pub.new";

/// What [`AuditKey::rotate`] did: records from now on carry `new_kid`; `old_kid`'s public key
/// is in `retired/<old_kid>.pub`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rotation {
    pub old_kid: String,
    pub new_kid: String,
}

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
                if text.trim() != key.public_key_hex() && !finish_rotation(dir, &key, text.trim())?
                {
                    return Err(AuditError::KeyMismatch { private, public });
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(AuditError::io("read", &public, e)),
        }
        Ok(key)
    }

    /// Replaces the current key pair in `dir` with a new one, keeping the old public key as
    /// `retired/<old kid>.pub` so records signed before still verify. Each step is durable
    /// before the next: archive the old public key, stage the new pair (fsynced), rename the
    /// private key into place (the commit point: the old private key is gone from then on),
    /// then the public key. A crash before the commit leaves the old pair in use; a crash
    /// after it is completed by the next [`AuditKey::load`].
    pub fn rotate(dir: &Path) -> Result<Rotation, AuditError> {
        let old = Self::load(dir)?;
        let new = Self::generate();
        archive_public(dir, &old)?;

        let staged_private = dir.join(STAGED_PRIVATE);
        let staged_public = dir.join(STAGED_PUBLIC);
        // Leftovers of a rotation that crashed before its commit point were never in use.
        for staged in [&staged_private, &staged_public] {
            remove_if_present(staged)
                .map_err(|e| AuditError::io("remove the stale staged key", staged, e))?;
        }
        let seed = format!("{}\n", hex::encode(new.signing.to_bytes()));
        write_new(&staged_private, seed.as_bytes(), 0o600)
            .map_err(|e| AuditError::io("write the new audit key", &staged_private, e))?;
        let pub_line = format!("{}\n", new.public_key_hex());
        write_new(&staged_public, pub_line.as_bytes(), 0o644)
            .map_err(|e| AuditError::io("write the new public key", &staged_public, e))?;
        sync_dir(dir).map_err(|e| AuditError::io("sync the key directory", dir, e))?;

        let private = dir.join(PRIVATE_KEY_FILE);
        fs::rename(&staged_private, &private)
            .and_then(|()| sync_dir(dir))
            .map_err(|e| AuditError::io("put the new audit key in place at", &private, e))?;
        let public = dir.join(PUBLIC_KEY_FILE);
        fs::rename(&staged_public, &public)
            .and_then(|()| sync_dir(dir))
            .map_err(|e| AuditError::io("put the new public key in place at", &public, e))?;
        Ok(Rotation {
            old_kid: old.kid(),
            new_kid: new.kid(),
        })
    }
}

/// Writes `retired/<kid>.pub` (temp file, fsync, rename). An archive already holding this key
/// is left alone (a rotation that crashed later); one holding another key is refused.
fn archive_public(dir: &Path, old: &AuditKey) -> Result<(), AuditError> {
    let retired = dir.join(RETIRED_DIR);
    fs::create_dir_all(&retired)
        .and_then(|()| sync_dir(dir))
        .map_err(|e| AuditError::io("create the retired key directory", &retired, e))?;
    let kid = old.kid();
    let archived = retired.join(format!("{kid}.pub"));
    match fs::read_to_string(&archived) {
        Ok(text) => {
            let holds = PublicKeys::parse(&text)
                .is_ok_and(|keys| keys == PublicKeys::from_keys([old.verifying_key()]));
            return if holds {
                Ok(())
            } else {
                Err(AuditError::RetiredKeyConflict { path: archived })
            };
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(AuditError::io("read", &archived, e)),
    }
    let temp = retired.join(format!(".{kid}.pub.tmp"));
    let text = format!("# kid {kid}\n{}\n", old.public_key_hex());
    remove_if_present(&temp)
        .and_then(|()| write_new(&temp, text.as_bytes(), 0o644))
        .and_then(|()| fs::rename(&temp, &archived))
        .and_then(|()| sync_dir(&retired))
        .map_err(|e| AuditError::io("archive the old public key as", &archived, e))
}

/// Completes a rotation that crashed between its two renames: the private key is new, the
/// staged public key matches it, and the stale public key is safely archived. `false` when
/// that is not the situation, so the caller reports the mismatch.
fn finish_rotation(dir: &Path, key: &AuditKey, stale_hex: &str) -> Result<bool, AuditError> {
    let staged = dir.join(STAGED_PUBLIC);
    let staged_matches = match fs::read_to_string(&staged) {
        Ok(text) => text.trim() == key.public_key_hex(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        Err(e) => return Err(AuditError::io("read", &staged, e)),
    };
    let Some(stale) = parse_hex32(stale_hex)
        .ok()
        .and_then(|b| VerifyingKey::from_bytes(&b).ok())
    else {
        return Ok(false);
    };
    let archived = dir
        .join(RETIRED_DIR)
        .join(format!("{}.pub", kid_of(&stale)));
    let stale_archived = match PublicKeys::load(&archived) {
        Ok(keys) => keys.get(&kid_of(&stale)).is_some(),
        Err(_) => false,
    };
    if !(staged_matches && stale_archived) {
        return Ok(false);
    }
    let public = dir.join(PUBLIC_KEY_FILE);
    fs::rename(&staged, &public)
        .and_then(|()| sync_dir(dir))
        .map_err(|e| AuditError::io("finish the interrupted key rotation at", &public, e))?;
    Ok(true)
}

fn remove_if_present(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        Ok(()) | Err(_) => Ok(()),
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

    /// The keys of an installation's keys directory: `audit.pub` and every
    /// `retired/<kid>.pub`. A key's kid is computed from its bytes, never taken from the file
    /// name, so an edited archive shows up as an unknown key at verification.
    pub fn load_dir(dir: &Path) -> Result<Self, AuditError> {
        let mut keys = Self::load(&dir.join(PUBLIC_KEY_FILE))?;
        let retired = dir.join(RETIRED_DIR);
        let entries = match fs::read_dir(&retired) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(keys),
            Err(e) => return Err(AuditError::io("list", &retired, e)),
        };
        for entry in entries {
            let path = entry
                .map_err(|e| AuditError::io("list", &retired, e))?
                .path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            // `.<kid>.pub.tmp` is an archive being written; it is complete only once renamed.
            if name.ends_with(".pub") && !name.starts_with('.') {
                keys.extend(Self::load(&path)?);
            }
        }
        Ok(keys)
    }

    /// The list in the format [`PublicKeys::load`] reads: each key after a `# kid <kid>`
    /// comment, in kid order. What `warrant audit keys export` hands an auditor.
    pub fn to_file_text(&self) -> String {
        let mut text = String::from(
            "# Warrant audit public keys (Ed25519, hex), one per line, each after its kid.\n",
        );
        for (kid, key) in &self.keys {
            text.push_str(&format!("# kid {kid}\n{}\n", hex::encode(key.as_bytes())));
        }
        text
    }

    pub fn extend(&mut self, other: Self) {
        self.keys.extend(other.keys);
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
