//! API keys from secret references: `env:NAME` reads the variable `NAME`, `file:PATH` reads a
//! file (trailing newline dropped, as secret mounts write it), `cred:NAME` reads a credential
//! stored with `warrant credentials set NAME`. A key is never accepted as a literal in
//! configuration, and never appears in an error.
//!
//! The one resolver of references: callers hand it the reference environment, which is the
//! process environment plus, under [`CRED_PREFIX`] names no environment variable can take
//! (see [`reference_env`]), the credentials the caller could open.

use std::collections::BTreeMap;

use thiserror::Error;
use warrant_core::Coded;

/// A key as resolved: the value (None when the variable is unset or empty) and the reference
/// it came from, as messages name it (`OPENAI_API_KEY` or `file:/run/secrets/openai`).
#[derive(Clone, PartialEq, Eq)]
pub struct ResolvedKey {
    pub value: Option<String>,
    pub source: String,
}

/// How a credential reference starts, and the names credentials take in a reference
/// environment.
pub const CRED_PREFIX: &str = "cred:";

/// The environment references resolve against: `vars` (the process environment) with every
/// name holding `:` dropped (so no variable can pose as a credential), plus each credential as
/// `cred:NAME`.
pub fn reference_env(
    vars: impl IntoIterator<Item = (String, String)>,
    credentials: impl IntoIterator<Item = (String, String)>,
) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> =
        vars.into_iter().filter(|(k, _)| !k.contains(':')).collect();
    env.extend(
        credentials
            .into_iter()
            .map(|(name, value)| (format!("{CRED_PREFIX}{name}"), value)),
    );
    env
}

/// How a credential that is stored but could not be read (a locked OS keyring) is named in a
/// reference environment, with the reason as its value; [`KEYRING_UNAVAILABLE`] holds why the
/// keyring could not be asked at all.
pub const UNREADABLE_PREFIX: &str = "cred-unreadable:";
pub const KEYRING_UNAVAILABLE: &str = "cred-unreadable:";

/// [`reference_env`], plus the credentials that could not be read and why (by name; the empty
/// name: the keyring itself did not answer), so a reference to one says why instead of "not
/// stored".
pub fn reference_env_with(
    vars: impl IntoIterator<Item = (String, String)>,
    credentials: impl IntoIterator<Item = (String, String)>,
    unreadable: impl IntoIterator<Item = (String, String)>,
) -> BTreeMap<String, String> {
    let mut env = reference_env(vars, credentials);
    env.extend(
        unreadable
            .into_iter()
            .map(|(name, why)| (format!("{UNREADABLE_PREFIX}{name}"), why)),
    );
    env
}

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum KeyError {
    #[error(
        "`{setting}` must be a secret reference, `env:NAME`, `file:PATH` or `cred:NAME`, never the key itself"
    )]
    NotAReference { setting: String },
    #[error(
        "`{setting}` names the credential {name}, which is not stored here{keyring}; store it with `warrant credentials set {name}` (the value is read from standard input)"
    )]
    NoCredential {
        setting: String,
        name: String,
        /// Empty, or why the OS keyring could not be asked.
        keyring: String,
    },
    #[error(
        "`{setting}` names the credential {name}, which is stored in the OS keyring but cannot be read now: {reason}"
    )]
    UnreadableCredential {
        setting: String,
        name: String,
        reason: String,
    },
    #[error("could not read the key file {path} named by `{setting}`: {message}")]
    Unreadable {
        setting: String,
        path: String,
        message: String,
    },
}

impl std::fmt::Debug for ResolvedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedKey")
            .field("value", &self.value.as_ref().map(|_| "[redacted]"))
            .field("source", &self.source)
            .finish()
    }
}

impl Coded for KeyError {
    fn code(&self) -> &'static str {
        match self {
            Self::NotAReference { .. } => "W-MODEL-014",
            Self::Unreadable { .. } => "W-MODEL-015",
            Self::NoCredential { .. } => "W-CRED-004",
            Self::UnreadableCredential { .. } => "W-CRED-008",
        }
    }
}

/// Resolves the key of a provider: `reference` (the `api_key` setting) when given, else the
/// variable `env_name`. `setting` names the setting in errors.
pub fn resolve_key(
    setting: &str,
    reference: Option<&str>,
    env_name: &str,
    env: &BTreeMap<String, String>,
) -> Result<ResolvedKey, KeyError> {
    let from_env = |name: &str| ResolvedKey {
        value: env.get(name).filter(|v| !v.trim().is_empty()).cloned(),
        source: name.to_owned(),
    };
    let Some(reference) = reference.map(str::trim).filter(|r| !r.is_empty()) else {
        return Ok(from_env(env_name));
    };
    if let Some(name) = reference.strip_prefix("env:") {
        return Ok(from_env(name));
    }
    if let Some(name) = reference.strip_prefix(CRED_PREFIX) {
        return match env.get(reference).filter(|v| !v.is_empty()) {
            Some(value) => Ok(ResolvedKey {
                value: Some(value.clone()),
                source: reference.to_owned(),
            }),
            None => match env.get(&format!("{UNREADABLE_PREFIX}{name}")) {
                Some(reason) => Err(KeyError::UnreadableCredential {
                    setting: setting.to_owned(),
                    name: name.to_owned(),
                    reason: reason.clone(),
                }),
                None => Err(KeyError::NoCredential {
                    setting: setting.to_owned(),
                    name: name.to_owned(),
                    keyring: env
                        .get(KEYRING_UNAVAILABLE)
                        .map(|why| format!(" (nor in the OS keyring: {why})"))
                        .unwrap_or_default(),
                }),
            },
        };
    }
    if let Some(path) = reference.strip_prefix("file:") {
        let text = std::fs::read_to_string(path).map_err(|e| KeyError::Unreadable {
            setting: setting.to_owned(),
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        let key = text.trim().to_owned();
        return Ok(ResolvedKey {
            value: Some(key).filter(|k| !k.is_empty()),
            source: format!("file:{path}"),
        });
    }
    Err(KeyError::NotAReference {
        setting: setting.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn credentials_resolve_and_no_variable_can_pose_as_one() {
        let env = reference_env(
            [
                ("OPENAI_API_KEY".to_owned(), "from-env".to_owned()),
                ("cred:forged".to_owned(), "from-a-variable".to_owned()),
            ],
            [("stored".to_owned(), "from-the-vault".to_owned())],
        );
        let got = resolve_key("s", Some("cred:stored"), "", &env).unwrap();
        assert_eq!(got.value.as_deref(), Some("from-the-vault"));
        assert_eq!(got.source, "cred:stored");
        assert_eq!(
            resolve_key("s", Some("cred:forged"), "", &env).unwrap_err(),
            KeyError::NoCredential {
                setting: "s".to_owned(),
                name: "forged".to_owned(),
                keyring: String::new(),
            }
        );
        assert_eq!(
            resolve_key("s", Some("env:OPENAI_API_KEY"), "", &env)
                .unwrap()
                .value
                .as_deref(),
            Some("from-env")
        );
        assert_eq!(
            resolve_key("s", Some("cred:forged"), "", &env)
                .unwrap_err()
                .code(),
            "W-CRED-004"
        );
    }
}
