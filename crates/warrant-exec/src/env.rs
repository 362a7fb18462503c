//! Environment minimization for subprocesses, as a pure function over (name, value) pairs, and
//! the checks a profile must pass before it may run anything. Names are matched exactly (Linux
//! environment names are case-sensitive); only the secret patterns ignore case.

use std::collections::BTreeMap;

use warrant_core::config::{EnvInherit, ProfileConfig};

use crate::error::ExecError;

/// What `inherit_env = "core"` keeps from Warrant's own environment.
pub const CORE_ENV: [&str; 11] = [
    "PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "LOGNAME", "USER", "SHELL", "TMPDIR", "TERM",
    "TZ",
];

/// Where toolchains live when not in their default place under the home directory: passed with
/// the core variables, and read-only roots of the default confinement (`$CARGO_HOME` in
/// `DEFAULT_READ_ROOTS`).
pub const TOOLCHAIN_ENV: [&str; 6] = [
    "RUSTUP_HOME",
    "CARGO_HOME",
    "PYENV_ROOT",
    "NVM_DIR",
    "GOPATH",
    "GOROOT",
];

/// The variable every command Warrant starts carries, whatever its profile says: `warrant`
/// refuses to answer requests from a process that has it (one of the marks of a command; see
/// the CLI's origin module).
pub const COMMAND_MARK: &str = "WARRANT_COMMAND";

/// Substrings that mark a variable name as secret-bearing, compared case-insensitively.
pub const SECRET_PATTERNS: [&str; 4] = ["KEY", "SECRET", "TOKEN", "PASSWORD"];

/// The secret pattern `name` matches, if any.
pub fn secret_pattern(name: &str) -> Option<&'static str> {
    let upper = name.to_ascii_uppercase();
    SECRET_PATTERNS.into_iter().find(|p| upper.contains(p))
}

/// The environment a command under `profile` gets, sorted by name. `parent` is Warrant's own
/// environment; when a name appears twice the last value wins, as in a shell.
pub fn minimize_env(
    profile: &ProfileConfig,
    parent: impl IntoIterator<Item = (String, String)>,
) -> Vec<(String, String)> {
    let parent: BTreeMap<String, String> = parent.into_iter().collect();
    let mut out: BTreeMap<String, String> = BTreeMap::new();

    // Step 1: inherit nothing, or only the core variables a program needs to behave normally.
    match profile.inherit_env {
        EnvInherit::None => {}
        EnvInherit::Core => {
            for name in CORE_ENV.iter().chain(&TOOLCHAIN_ENV) {
                if let Some(v) = parent.get(*name) {
                    out.insert((*name).to_owned(), v.clone());
                }
            }
        }
    }

    // Step 2: names the profile passes through explicitly, when Warrant has them.
    for name in &profile.pass_env {
        if let Some(v) = parent.get(name) {
            out.insert(name.clone(), v.clone());
        }
    }

    // Step 3: values the profile sets, overriding anything inherited.
    for (name, value) in &profile.set_env {
        out.insert(name.clone(), value.clone());
    }

    // Step 4: drop secret-looking names, always, whatever steps 1-3 put in. Validation already
    // refuses such names in a profile; this is the floor that holds even for an unchecked one.
    out.retain(|name, _| secret_pattern(name).is_none());

    // Step 5: the mark of a command, last, so no profile can drop or change it.
    out.insert(COMMAND_MARK.to_owned(), "1".to_owned());

    out.into_iter().collect()
}

/// Refuse a profile that could leak a secret or could not bound a command.
pub fn validate_profile(name: &str, profile: &ProfileConfig) -> Result<(), ExecError> {
    let names = profile
        .pass_env
        .iter()
        .chain(profile.set_env.keys())
        .map(String::as_str);
    for var in names {
        if var.is_empty() || var.contains('=') || var.contains('\0') {
            return Err(ExecError::ProfileBadEnvName {
                profile: name.to_owned(),
                name: var.to_owned(),
            });
        }
        if let Some(pattern) = secret_pattern(var) {
            return Err(ExecError::ProfileSecretName {
                profile: name.to_owned(),
                name: var.to_owned(),
                pattern,
            });
        }
    }
    if profile.unconfined && profile.sandbox.is_some() {
        return Err(ExecError::SandboxPlan {
            profile: name.to_owned(),
            message: "it sets unconfined = true and also has a [sandbox] table; keep one"
                .to_owned(),
        });
    }
    if profile.timeout_ms == 0 {
        return Err(ExecError::ProfileZeroTimeout {
            profile: name.to_owned(),
        });
    }
    if profile.output_head_bytes == 0 {
        return Err(ExecError::ProfileZeroCap {
            profile: name.to_owned(),
            field: "output_head_bytes",
        });
    }
    if profile.output_tail_bytes == 0 {
        return Err(ExecError::ProfileZeroCap {
            profile: name.to_owned(),
            field: "output_tail_bytes",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;
    use proptest::prelude::*;
    use warrant_core::Coded;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn parent() -> Vec<(String, String)> {
        pairs(&[
            ("PATH", "/usr/bin:/bin"),
            ("HOME", "/home/a"),
            ("LANG", "C.UTF-8"),
            ("EDITOR", "vi"),
            ("CARGO_HOME", "/home/a/.cargo"),
            ("AWS_SECRET_ACCESS_KEY", "s3cr3t"),
            ("GITHUB_TOKEN", "ghp_x"),
            ("path", "lowercase is another variable on Linux"),
        ])
    }

    #[test]
    fn core_pass_set_then_drop_secrets() {
        let profile = ProfileConfig {
            pass_env: vec!["CARGO_HOME".into(), "NOT_SET_ANYWHERE".into()],
            set_env: [
                ("LANG".to_owned(), "en_US.UTF-8".to_owned()),
                ("RUST_LOG".to_owned(), "info".to_owned()),
                // Unvalidated profile: step 4 still removes it.
                ("my_api_key".to_owned(), "k".to_owned()),
            ]
            .into(),
            ..ProfileConfig::default()
        };
        assert_eq!(
            minimize_env(&profile, parent()),
            pairs(&[
                ("CARGO_HOME", "/home/a/.cargo"),
                ("HOME", "/home/a"),
                ("LANG", "en_US.UTF-8"),
                ("PATH", "/usr/bin:/bin"),
                ("RUST_LOG", "info"),
                (COMMAND_MARK, "1"),
            ])
        );
    }

    #[test]
    fn inherit_none_keeps_only_what_the_profile_names() {
        let profile = ProfileConfig {
            inherit_env: EnvInherit::None,
            pass_env: vec!["EDITOR".into(), "GITHUB_TOKEN".into()],
            ..ProfileConfig::default()
        };
        assert_eq!(
            minimize_env(&profile, parent()),
            pairs(&[("EDITOR", "vi"), (COMMAND_MARK, "1")])
        );
        let last_wins = minimize_env(
            &ProfileConfig::default(),
            pairs(&[("PATH", "/a"), ("PATH", "/b")]),
        );
        assert_eq!(last_wins, pairs(&[("PATH", "/b"), (COMMAND_MARK, "1")]));
    }

    #[test]
    fn validation_refuses_secret_names_bad_names_and_zeros() {
        let ok = ProfileConfig::default();
        assert_eq!(validate_profile("default", &ok), Ok(()));

        let secret = ProfileConfig {
            pass_env: vec!["NPM_Token".into()],
            ..ok.clone()
        };
        let err = validate_profile("build", &secret).unwrap_err();
        assert_eq!(
            err,
            ExecError::ProfileSecretName {
                profile: "build".into(),
                name: "NPM_Token".into(),
                pattern: "TOKEN",
            }
        );
        assert_eq!(err.code(), "W-EXEC-002");

        let set_secret = ProfileConfig {
            set_env: [("DB_PASSWORD".to_owned(), "x".to_owned())].into(),
            ..ok.clone()
        };
        assert_eq!(
            validate_profile("p", &set_secret).unwrap_err().code(),
            "W-EXEC-002"
        );
        let bad_name = ProfileConfig {
            set_env: [("A=B".to_owned(), "x".to_owned())].into(),
            ..ok.clone()
        };
        assert_eq!(
            validate_profile("p", &bad_name).unwrap_err().code(),
            "W-EXEC-003"
        );
        let zero_timeout = ProfileConfig {
            timeout_ms: 0,
            ..ok.clone()
        };
        assert_eq!(
            validate_profile("p", &zero_timeout),
            Err(ExecError::ProfileZeroTimeout {
                profile: "p".into()
            })
        );
        let zero_tail = ProfileConfig {
            output_tail_bytes: 0,
            ..ok
        };
        assert_eq!(
            validate_profile("p", &zero_tail),
            Err(ExecError::ProfileZeroCap {
                profile: "p".into(),
                field: "output_tail_bytes"
            })
        );
    }

    fn name() -> impl Strategy<Value = String> {
        prop_oneof![
            "[A-Za-z_]{1,12}",
            "[a-z]{0,4}(key|Key|KEY|secret|Secret|token|ToKeN|password|PASSWORD)[a-z_]{0,4}",
            Just("PATH".to_owned()),
            Just("HOME".to_owned()),
        ]
    }

    proptest! {
        #[test]
        fn no_output_name_ever_looks_secret(
            parent in proptest::collection::vec((name(), "[ -~]{0,8}"), 0..20),
            pass in proptest::collection::vec(name(), 0..6),
            set in proptest::collection::btree_map(name(), "[ -~]{0,8}", 0..6),
            none in any::<bool>(),
        ) {
            let profile = ProfileConfig {
                inherit_env: if none { EnvInherit::None } else { EnvInherit::Core },
                pass_env: pass,
                set_env: set,
                ..ProfileConfig::default()
            };
            let out = minimize_env(&profile, parent);
            for (k, _) in &out {
                prop_assert!(secret_pattern(k).is_none(), "{} leaked", k);
            }
            prop_assert!(out.windows(2).all(|w| w[0].0 < w[1].0), "sorted and unique");
        }
    }
}
