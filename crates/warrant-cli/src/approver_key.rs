//! The approver's own Ed25519 key: `approver.key` (hex seed, 0600) in the user configuration
//! directory (`$XDG_CONFIG_HOME/warrant` or `~/.config/warrant`). When the identity directory
//! registers its public half for a person, their approvals must be signed with it, so an
//! approval proves who gave it beyond this installation's secret.

use std::fs;
use std::path::{Path, PathBuf};

use warrant_kernel::approval::{ApproverKey, Ed25519ApproverKey};

use crate::Failure;
use crate::context::{self, Paths};

pub const KEY_FILE: &str = "approver.key";

fn key_path(paths: &Paths) -> Result<PathBuf, Failure> {
    paths.user.as_ref().map(|u| u.join(KEY_FILE)).ok_or_else(|| {
        Failure::usage(
            "W-APPROVAL-024",
            "no user configuration directory (set HOME or XDG_CONFIG_HOME) to hold an approver key",
        )
    })
}

/// The key of the user running this process, if they made one.
pub fn load(paths: &Paths) -> Result<Option<Ed25519ApproverKey>, Failure> {
    let Ok(path) = key_path(paths) else {
        return Ok(None);
    };
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(Failure::usage(
                "W-APPROVAL-024",
                format!("cannot read the approver key {}: {e}", path.display()),
            ));
        }
    };
    let seed: [u8; 32] = hex::decode(text.trim())
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| {
            Failure::usage(
                "W-APPROVAL-024",
                format!(
                    "the approver key {} is not 64 hex digits; make a new one with `warrant approvals keygen --force`",
                    path.display()
                ),
            )
        })?;
    Ok(Some(Ed25519ApproverKey::from_seed(&seed)))
}

/// `warrant approvals keygen`: writes a new key and prints what to register.
pub fn keygen(ws: Option<&Path>, force: bool) -> Result<u8, Failure> {
    let paths = context::paths(ws, true)?;
    let layers = context::read_layers(&paths)?;
    let actor = context::identity(&layers)?.principal.actor;
    let path = key_path(&paths)?;
    if path.exists() && !force {
        return Err(Failure::usage(
            "W-APPROVAL-024",
            format!(
                "{} already exists; `--force` replaces it (approvals then need the new public key registered)",
                path.display()
            ),
        ));
    }
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| {
            Failure::usage(
                "W-APPROVAL-024",
                format!("cannot create {}: {e}", dir.display()),
            )
        })?;
    }
    let mut seed = [0u8; 32];
    rand::fill(&mut seed);
    let key = Ed25519ApproverKey::from_seed(&seed);
    let tmp = path.with_extension("key.new");
    let _ = fs::remove_file(&tmp);
    write_private(&tmp, &hex::encode(seed))?;
    fs::rename(&tmp, &path).map_err(|e| {
        Failure::usage(
            "W-APPROVAL-024",
            format!("cannot write {}: {e}", path.display()),
        )
    })?;
    outln!("approver key written to {}", path.display());
    outln!("ask an administrator to add to the identity directory (directory.toml):");
    outln!("[people.{actor}]");
    outln!("public_key = \"{}\"", key.public_hex());
    Ok(0)
}

fn write_private(path: &Path, text: &str) -> Result<(), Failure> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let fail = |e: std::io::Error| {
        Failure::usage(
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
