//! The approver's own Ed25519 key: `approver.key` (hex seed, 0600) in the user configuration
//! directory (`$XDG_CONFIG_HOME/warrant` or `~/.config/warrant`). When the identity directory
//! registers its public half for a person, their approvals must be signed with it, so an
//! approval proves who gave it beyond this installation's secret.

use std::fs;
use std::path::{Path, PathBuf};

use warrant_kernel::approval::{ApproverKey, Ed25519ApproverKey};

use crate::HostError;
use crate::install::{self, Paths};

pub const KEY_FILE: &str = "approver.key";
/// The approver keys enrolled in this installation, in its keys directory: one `<actor> <hex
/// public key>` per line. Read only when there is no identity directory.
pub const ENROLLED_FILE: &str = "approvers";

fn key_path(paths: &Paths) -> Result<PathBuf, HostError> {
    paths.user.as_ref().map(|u| u.join(KEY_FILE)).ok_or_else(|| {
        HostError::usage(
            "W-APPROVAL-024",
            "no user configuration directory (set HOME or XDG_CONFIG_HOME) to hold an approver key",
        )
    })
}

/// The key of the user running this process, if they made one.
pub fn load(paths: &Paths) -> Result<Option<Ed25519ApproverKey>, HostError> {
    let Ok(path) = key_path(paths) else {
        return Ok(None);
    };
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(HostError::usage(
                "W-APPROVAL-024",
                format!("cannot read the approver key {}: {e}", path.display()),
            ));
        }
    };
    let seed: [u8; 32] = hex::decode(text.trim())
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| {
            HostError::usage(
                "W-APPROVAL-024",
                format!("the approver key {} is not 64 hex digits", path.display()),
            )
            .with_hint(crate::Hint::NewApproverKey)
        })?;
    Ok(Some(Ed25519ApproverKey::from_seed(&seed)))
}

/// The approver keys enrolled in this installation (actor → hex public key); empty when none
/// were (or before `warrant init`).
pub fn enrolled(paths: &Paths) -> Result<std::collections::BTreeMap<String, String>, HostError> {
    let path = paths.keys().join(ENROLLED_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Default::default()),
        Err(e) => {
            return Err(HostError::usage(
                "W-APPROVAL-024",
                format!(
                    "cannot read the enrolled approver keys {}: {e}",
                    path.display()
                ),
            ));
        }
    };
    let mut out = std::collections::BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some(actor), Some(key), None)
                if key.len() == 64 && key.bytes().all(|b| b.is_ascii_hexdigit()) =>
            {
                out.insert(actor.to_owned(), key.to_ascii_lowercase());
            }
            _ => {
                return Err(HostError::usage(
                    "W-APPROVAL-024",
                    format!(
                        "{} line {}: expected `<actor> <64 hex digits>`; fix or remove it",
                        path.display(),
                        n + 1
                    ),
                )
                .with_hint(crate::Hint::EnrollApproverKey));
            }
        }
    }
    Ok(out)
}

/// Records `public_hex` as `actor`'s approver key in this installation (replacing any).
fn enroll(paths: &Paths, actor: &str, public_hex: &str) -> Result<(), HostError> {
    if actor.is_empty() || actor.chars().any(char::is_whitespace) {
        return Err(HostError::usage(
            "W-APPROVAL-024",
            format!("cannot enroll a key for `{actor}`: an actor name holds no spaces"),
        ));
    }
    let mut all = enrolled(paths)?;
    all.insert(actor.to_owned(), public_hex.to_owned());
    let mut text = String::from(
        "# Approver keys enrolled in this installation: <actor> <Ed25519 public key, hex>.\n# Used only when there is no identity directory; `warrant approvals keygen` adds yours.\n",
    );
    for (a, k) in &all {
        text.push_str(&format!("{a} {k}\n"));
    }
    let path = paths.keys().join(ENROLLED_FILE);
    let tmp = path.with_extension("new");
    let _ = fs::remove_file(&tmp);
    write_private(&tmp, &text)?;
    fs::rename(&tmp, &path).map_err(|e| {
        HostError::usage(
            "W-APPROVAL-024",
            format!("cannot write {}: {e}", path.display()),
        )
    })
}

/// For `warrant init`: the person's approver key (made when they have none) enrolled in the new
/// installation, so answers from another terminal can be proven with no further setup. Returns
/// where the key is and whether it was made now.
pub fn ensure_enrolled(paths: &Paths, actor: &str) -> Result<(PathBuf, bool), HostError> {
    let path = key_path(paths)?;
    let (key, made) = match load(paths)? {
        Some(k) => (k, false),
        None => (make_key(&path)?, true),
    };
    enroll(paths, actor, &key.public_hex())?;
    Ok((path, made))
}

fn make_key(path: &Path) -> Result<Ed25519ApproverKey, HostError> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| {
            HostError::usage(
                "W-APPROVAL-024",
                format!("cannot create {}: {e}", dir.display()),
            )
        })?;
    }
    let mut seed = [0u8; 32];
    rand::fill(&mut seed);
    let tmp = path.with_extension("key.new");
    let _ = fs::remove_file(&tmp);
    write_private(&tmp, &hex::encode(seed))?;
    fs::rename(&tmp, path).map_err(|e| {
        HostError::usage(
            "W-APPROVAL-024",
            format!("cannot write {}: {e}", path.display()),
        )
    })?;
    Ok(Ed25519ApproverKey::from_seed(&seed))
}

/// A new approver key, written to the person's configuration directory, and whether it was
/// enrolled in this installation too.
#[derive(Clone, Debug, serde::Serialize)]
pub struct KeyMade {
    pub path: PathBuf,
    pub actor: String,
    pub public_hex: String,
    /// Where it was enrolled, when the workspace has an installation.
    pub enrolled_in: Option<PathBuf>,
}

/// Writes a new approver key (never from a process a run started).
pub fn keygen(at: &crate::Where, force: bool) -> Result<KeyMade, HostError> {
    crate::origin::refuse_from_command("make or enroll an approver key")?;
    let paths = install::paths(at, true)?;
    let layers = install::read_layers(&paths)?;
    let actor = install::identity(&layers)?.principal.actor;
    let path = key_path(&paths)?;
    if path.exists() && !force {
        return Err(HostError::usage(
            "W-APPROVAL-024",
            format!(
                "{} already exists; `--force` replaces it (approvals then need the new public key registered)",
                path.display()
            ),
        ));
    }
    let key = make_key(&path)?;
    let enrolled_in = if paths.keys().is_dir() {
        enroll(&paths, &actor, &key.public_hex())?;
        Some(paths.keys().join(ENROLLED_FILE))
    } else {
        None
    };
    Ok(KeyMade {
        path,
        actor,
        public_hex: key.public_hex(),
        enrolled_in,
    })
}

fn write_private(path: &Path, text: &str) -> Result<(), HostError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let fail = |e: std::io::Error| {
        HostError::usage(
            "W-APPROVAL-024",
            format!("cannot write {}: {e}", path.display()),
        )
    };
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(fail)?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(fail)
}
