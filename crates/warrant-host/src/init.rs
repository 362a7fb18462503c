//! Creating an installation: `.warrant/` with the project configuration, the default policy
//! pack, the audit signing key, the installation secret, the store, and the person's approver
//! key enrolled. Built in a temporary directory and renamed into place, so a failure leaves no
//! half-made installation behind.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;
use warrant_audit::AuditKey;
use warrant_core::IdSource as _;

use crate::install::{self, Paths};
use crate::{HostError, Result};

pub const DEFAULT_CONFIG: &str = r#"# Project configuration of Warrant. Managed (/etc/warrant/config.toml) and user
# (~/.config/warrant/config.toml) layers take precedence over this file.

[run]
# A run stops after this many refusals (policy or person).
max_denials = 3

# Subprocess profile for run_command. The environment is minimized: only PATH, HOME, LANG and a
# few others are inherited, and no variable named like *KEY*, *SECRET*, *TOKEN*, *PASSWORD* ever.
[profiles.default]
inherit_env = "core"
timeout_ms = 30000
output_head_bytes = 16384
output_tail_bytes = 16384

# Every command runs confined, in a view of its own: the workspace writable, system trees and
# the toolchains in your home (~/.cargo, ~/.rustup, ~/.pyenv, ~/.nvm, ~/go) read-only, .git
# read-only, .warrant/, .env and key files hidden, a private HOME and /tmp, its own /proc, no
# network. Such commands run without asking; `warrant doctor` shows whether this machine
# enforces all of it. A profile with `unconfined = true` instead of this table has no sandbox,
# and then every one of its commands waits for a person.
[profiles.default.sandbox]
network = "none"
"#;

/// What `init` made.
#[derive(Clone, Debug, Serialize)]
pub struct Initialized {
    pub dot: PathBuf,
    pub actor: String,
    /// The person's approver key, and whether it was made now (else it was theirs already).
    pub approver_key: PathBuf,
    pub key_made: bool,
}

/// Refuses when the workspace already has an installation: nothing is changed.
pub fn check_absent(paths: &Paths) -> Result<()> {
    if paths.dot.exists() {
        return Err(HostError::usage(
            "W-INIT-001",
            format!(
                "{} already exists; nothing was changed",
                paths.dot.display()
            ),
        ));
    }
    Ok(())
}

/// Creates the installation at `paths`.
pub fn init(paths: &Paths) -> Result<Initialized> {
    check_absent(paths)?;
    let io = |what: &str, e: std::io::Error| {
        HostError::usage("W-INIT-004", format!("cannot {what}: {e}"))
    };
    // Build everything in a temporary directory and rename it into place, so a failure leaves
    // no half-made .warrant/ behind.
    let tmp = paths
        .workspace
        .join(format!(".warrant.init-{}", std::process::id()));
    let result = (|| -> Result<(), HostError> {
        fs::create_dir_all(tmp.join(install::POLICY_DIR)).map_err(|e| io("create .warrant/", e))?;
        fs::create_dir_all(tmp.join("audit")).map_err(|e| io("create .warrant/audit", e))?;
        fs::write(tmp.join(install::CONFIG_FILE), DEFAULT_CONFIG)
            .map_err(|e| io("write config.toml", e))?;
        fs::write(
            tmp.join(install::POLICY_DIR).join("default.cedar"),
            warrant_policy::default_pack(),
        )
        .map_err(|e| io("write the default policy pack", e))?;
        let keys = tmp.join(install::KEYS_DIR);
        fs::create_dir_all(&keys).map_err(|e| io("create keys/", e))?;
        AuditKey::generate()
            .save(&keys)
            .map_err(|e| HostError::bad_input(&e))?;
        write_private(
            &keys.join(install::SECRET_FILE),
            &hex::encode(random_bytes()),
        )?;
        let install_id = warrant_core::RandomIds.record_id();
        fs::write(
            tmp.join(install::INSTALLATION_FILE),
            format!("{install_id}\n"),
        )
        .map_err(|e| io("write the installation id", e))?;
        fs::write(tmp.join(".gitignore"), "store.db*\nkeys/\naudit/\n")
            .map_err(|e| io("write .gitignore", e))?;
        warrant_store::SqliteStore::create(
            &tmp.join(install::STORE_FILE),
            std::sync::Arc::new(warrant_core::SystemClock),
        )
        .map_err(|e| HostError::bad_input(&e))?;
        fs::rename(&tmp, &paths.dot).map_err(|e| io("move .warrant/ into place", e))?;
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_dir_all(&tmp);
    }
    result?;
    // The person's approver key, enrolled: answers from another terminal are proven by it.
    let layers = install::read_layers(paths)?;
    let actor = install::identity(&layers)?.principal.actor;
    let (approver_key, key_made) = crate::approver_key::ensure_enrolled(paths, &actor)?;
    Ok(Initialized {
        dot: paths.dot.clone(),
        actor,
        approver_key,
        key_made,
    })
}

fn random_bytes() -> [u8; 32] {
    let mut b = [0u8; 32];
    rand::fill(&mut b);
    b
}

fn write_private(path: &Path, text: &str) -> Result<(), HostError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| {
            HostError::usage(
                "W-INIT-004",
                format!("cannot create {}: {e}", path.display()),
            )
        })?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| {
            HostError::usage(
                "W-INIT-004",
                format!("cannot write {}: {e}", path.display()),
            )
        })
}
