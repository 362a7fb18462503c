//! The OS keyring: a person's credentials kept by the desktop's Secret Service (GNOME Keyring,
//! KWallet, KeePassXC) over D-Bus, through the pure-Rust `secret-service` client (zbus; no
//! libdbus at build time). Each item carries the attributes `application = warrant`, the
//! workspace it belongs to and the credential's name, so one search lists a workspace's items.
//!
//! It never unlocks anything: unlocking asks the person through the desktop's prompter, which a
//! command line cannot show. A locked collection is reported as locked, and nothing is written.

use std::collections::{BTreeMap, HashMap};

use secret_service::EncryptionType;
use secret_service::blocking::{Item, SecretService};
use thiserror::Error;
use warrant_core::Coded;

use crate::vault::SecretValue;

/// The attribute every Warrant item carries, and its value.
const APPLICATION: (&str, &str) = ("application", "warrant");
/// The workspace an item belongs to (the canonical path of its `.warrant/`).
const WORKSPACE: &str = "warrant-workspace";
/// The credential's name.
const NAME: &str = "warrant-credential";

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum KeyringError {
    #[error("the OS keyring did not answer: {reason}")]
    Absent { reason: String },
    #[error(
        "the OS keyring's collection `{collection}` is locked: Warrant does not unlock it (that needs the desktop's prompt); unlock it (log in to the desktop session, or `gnome-keyring-daemon --unlock`) and try again"
    )]
    Locked { collection: String },
    #[error("the OS keyring refused {what}: {reason}")]
    Failed { what: String, reason: String },
}

impl Coded for KeyringError {
    fn code(&self) -> &'static str {
        match self {
            Self::Absent { .. } => "W-CRED-005",
            Self::Locked { .. } => "W-CRED-006",
            Self::Failed { .. } => "W-CRED-007",
        }
    }
}

/// One of a workspace's items, never its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyringEntry {
    pub name: String,
    /// When the item was created (milliseconds since the epoch), when the service says.
    pub set_at_ms: Option<i64>,
    /// The item is in a locked collection: its value cannot be read now.
    pub locked: bool,
}

/// A connection to the session's Secret Service, scoped to one workspace.
pub struct Keyring {
    ss: SecretService<'static>,
    workspace: String,
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyring")
            .field("workspace", &self.workspace)
            .finish_non_exhaustive()
    }
}

// `secret_service::Error` is non-exhaustive: the variants that matter are told apart with
// `matches!`, every other one keeps its own message.
fn absent(e: &secret_service::Error) -> KeyringError {
    KeyringError::Absent {
        reason: if matches!(e, secret_service::Error::Unavailable) {
            "no Secret Service on the session bus (none running, or no session bus: DBUS_SESSION_BUS_ADDRESS)".to_owned()
        } else {
            e.to_string()
        },
    }
}

fn failed(what: &str, e: &secret_service::Error) -> KeyringError {
    if matches!(e, secret_service::Error::Locked) {
        KeyringError::Locked {
            collection: "default".to_owned(),
        }
    } else {
        KeyringError::Failed {
            what: what.to_owned(),
            reason: e.to_string(),
        }
    }
}

impl Keyring {
    /// Connects to the session bus's Secret Service (an encrypted session: values cross the
    /// bus under a Diffie-Hellman key). `workspace` scopes every item.
    pub fn connect(workspace: &str) -> Result<Self, KeyringError> {
        let ss = SecretService::connect(EncryptionType::Dh).map_err(|e| absent(&e))?;
        Ok(Self {
            ss,
            workspace: workspace.to_owned(),
        })
    }

    fn attributes<'a>(&'a self, name: Option<&'a str>) -> HashMap<&'a str, &'a str> {
        let mut a = HashMap::from([APPLICATION, (WORKSPACE, self.workspace.as_str())]);
        if let Some(name) = name {
            a.insert(NAME, name);
        }
        a
    }

    /// The collection new items go to (the `default` alias), and its label. Locked: refused.
    fn writable(&self) -> Result<secret_service::blocking::Collection<'_>, KeyringError> {
        let c = self
            .ss
            .get_default_collection()
            .map_err(|e| KeyringError::Absent {
                reason: format!("the Secret Service has no default collection ({e})"),
            })?;
        let label = c.get_label().unwrap_or_else(|_| "default".to_owned());
        if c.is_locked().map_err(|e| failed("a lock query", &e))? {
            return Err(KeyringError::Locked { collection: label });
        }
        Ok(c)
    }

    /// The default collection's label, and whether it is unlocked (so a credential can be
    /// stored there now).
    pub fn status(&self) -> Result<(String, bool), KeyringError> {
        let c = self
            .ss
            .get_default_collection()
            .map_err(|e| KeyringError::Absent {
                reason: format!("the Secret Service has no default collection ({e})"),
            })?;
        let label = c.get_label().unwrap_or_else(|_| "default".to_owned());
        let locked = c.is_locked().map_err(|e| failed("a lock query", &e))?;
        Ok((label, !locked))
    }

    /// Stores `value` as `name` in the default collection, replacing an item of the same name.
    pub fn put(&self, name: &str, value: &[u8]) -> Result<(), KeyringError> {
        let c = self.writable()?;
        let label = format!("Warrant credential {name} ({})", self.workspace);
        c.create_item(
            &label,
            self.attributes(Some(name)),
            value,
            true,
            "text/plain",
        )
        .map_err(|e| failed(&format!("storing {name}"), &e))?;
        Ok(())
    }

    fn items(&self, name: Option<&str>) -> Result<(Vec<Item<'_>>, Vec<Item<'_>>), KeyringError> {
        let found = self
            .ss
            .search_items(self.attributes(name))
            .map_err(|e| failed("a search", &e))?;
        Ok((found.unlocked, found.locked))
    }

    fn name_of(item: &Item<'_>) -> Option<String> {
        item.get_attributes().ok()?.remove(NAME)
    }

    /// The workspace's items, by name (locked ones too: their attributes are not secret).
    pub fn entries(&self) -> Result<Vec<KeyringEntry>, KeyringError> {
        let (unlocked, locked) = self.items(None)?;
        let mut out: BTreeMap<String, KeyringEntry> = BTreeMap::new();
        for (item, is_locked) in unlocked
            .iter()
            .map(|i| (i, false))
            .chain(locked.iter().map(|i| (i, true)))
        {
            let Some(name) = Self::name_of(item) else {
                continue;
            };
            let set_at_ms = item
                .get_created()
                .ok()
                .and_then(|s| i64::try_from(s).ok())
                .map(|s| s.saturating_mul(1000));
            out.entry(name.clone()).or_insert(KeyringEntry {
                name,
                set_at_ms,
                locked: is_locked,
            });
        }
        Ok(out.into_values().collect())
    }

    /// The value of `name`: `Ok(None)` when no such item exists; a locked item is an error.
    pub fn get(&self, name: &str) -> Result<Option<SecretValue>, KeyringError> {
        let (unlocked, locked) = self.items(Some(name))?;
        if let Some(item) = unlocked.first() {
            let v = item
                .get_secret()
                .map_err(|e| failed(&format!("reading {name}"), &e))?;
            return Ok(Some(SecretValue::new(v)));
        }
        if !locked.is_empty() {
            let (collection, _) = self.status().unwrap_or(("default".to_owned(), false));
            return Err(KeyringError::Locked { collection });
        }
        Ok(None)
    }

    /// Removes every item named `name`; false when there was none. A locked item is refused.
    pub fn remove(&self, name: &str) -> Result<bool, KeyringError> {
        let (unlocked, locked) = self.items(Some(name))?;
        if !locked.is_empty() {
            let (collection, _) = self.status().unwrap_or(("default".to_owned(), false));
            return Err(KeyringError::Locked { collection });
        }
        for item in &unlocked {
            item.delete()
                .map_err(|e| failed(&format!("deleting {name}"), &e))?;
        }
        Ok(!unlocked.is_empty())
    }
}
