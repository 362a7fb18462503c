//! `warrant config check`: every configuration layer parsed on its own and merged, and what is
//! wrong or weak reported as typed findings, each with a stable code, the layer and line it
//! came from, and what to do. A host operation returning [`ConfigReport`], so other checks
//! (strict mode) can read the same findings.
//!
//! Also here: the managed layer's pin (`WARRANT_MANAGED_SHA256`): a managed `config.toml`
//! whose SHA-256 differs refuses every command that opens the installation.

use std::path::Path;

use serde::Serialize;
use warrant_core::config::{Layer, LayerKind};

use crate::install::{self, Paths};
use crate::{HostError, Notices, Result, Where};

/// The variable that pins the managed `config.toml` by its SHA-256 (hex, `sha256:` optional).
pub const MANAGED_PIN_ENV: &str = "WARRANT_MANAGED_SHA256";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The configuration does not load, or something it asks for cannot be done here.
    Error,
    /// It loads, but not as a reader would expect (`--strict` fails on these too).
    Warning,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    pub code: String,
    pub severity: Severity,
    /// `managed`, `user`, `project`, or `policy`/`keys` for findings outside a layer file.
    pub layer: String,
    pub path: Option<String>,
    pub line: Option<usize>,
    /// The dotted key it is about, when one.
    pub key: Option<String>,
    pub message: String,
    /// What to do.
    pub fix: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LayerRead {
    pub layer: String,
    pub path: String,
    pub parsed: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConfigReport {
    /// No finding at all (`--strict`), or no error (default).
    pub ok: bool,
    pub strict: bool,
    pub layers: Vec<LayerRead>,
    pub findings: Vec<Finding>,
}

/// The SHA-256 of the managed `config.toml` (`sha256:<hex>`), `None` when there is none.
fn managed_digest(paths: &Paths) -> Option<String> {
    std::fs::read(paths.managed.join(install::CONFIG_FILE))
        .ok()
        .map(|b| warrant_core::Digest::of_bytes(&b).to_string())
}

/// Refuses when `WARRANT_MANAGED_SHA256` pins the managed layer and the file differs (or is
/// gone). Called by every loader of the layers.
pub fn verify_managed_pin(paths: &Paths) -> Result<()> {
    let Ok(pin) = std::env::var(MANAGED_PIN_ENV) else {
        return Ok(());
    };
    let pin = pin.trim().to_ascii_lowercase();
    if pin.is_empty() {
        return Ok(());
    }
    let want = if pin.starts_with("sha256:") {
        pin
    } else {
        format!("sha256:{pin}")
    };
    let file = paths.managed.join(install::CONFIG_FILE);
    match managed_digest(paths) {
        Some(have) if have == want => Ok(()),
        Some(have) => Err(HostError::usage(
            "W-CONFIG-037",
            format!(
                "the managed configuration {} has digest {have}, but {MANAGED_PIN_ENV} pins {want}: it changed after it was pinned, so nothing is started; restore the pinned file or pin the new one",
                file.display()
            ),
        )),
        None => Err(HostError::usage(
            "W-CONFIG-037",
            format!(
                "{MANAGED_PIN_ENV} pins the managed configuration {}, but it cannot be read, so nothing is started",
                file.display()
            ),
        )),
    }
}

/// Where each `key = …` of a TOML text is: dotted key → 1-based line. Tables and array
/// tables by their headers; good for the flat layout configuration files use.
fn key_lines(text: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let mut table = String::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if line.starts_with('[') {
            table = line
                .trim_start_matches('[')
                .split(']')
                .next()
                .unwrap_or("")
                .trim()
                .replace(['"', ' '], "");
            out.push((table.clone(), i + 1));
            continue;
        }
        if let Some((k, _)) = line.split_once('=') {
            let k = k.trim().replace(['"', ' '], "");
            let dotted = if table.is_empty() {
                k
            } else {
                format!("{table}.{k}")
            };
            out.push((dotted, i + 1));
        }
    }
    out
}

fn line_of(text: &str, key: &str) -> Option<usize> {
    key_lines(text)
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, l)| l)
}

/// Every leaf value of a TOML document, by dotted key.
fn leaves(prefix: &str, v: &toml::Value, out: &mut Vec<(String, toml::Value)>) {
    match v {
        toml::Value::Table(t) => {
            for (k, v) in t {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaves(&key, v, out);
            }
        }
        other @ (toml::Value::String(_)
        | toml::Value::Integer(_)
        | toml::Value::Float(_)
        | toml::Value::Boolean(_)
        | toml::Value::Datetime(_)
        | toml::Value::Array(_)) => out.push((prefix.to_owned(), other.clone())),
    }
}

/// The line a `toml` error message names (`… at line 3, column 1`).
fn error_line(message: &str) -> Option<usize> {
    let at = message.find("line ")?;
    message[at + 5..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

struct Read {
    kind: LayerKind,
    path: String,
    text: String,
    layer: Option<Layer>,
}

fn read(paths: &Paths, findings: &mut Vec<Finding>) -> Vec<Read> {
    let mut dirs = vec![(LayerKind::Managed, paths.managed.clone())];
    if let Some(u) = &paths.user {
        dirs.push((LayerKind::User, u.clone()));
    }
    dirs.push((LayerKind::Project, paths.dot.clone()));
    let mut out = Vec::new();
    for (kind, dir) in dirs {
        let file = dir.join(install::CONFIG_FILE);
        let path = file.display().to_string();
        let text = match std::fs::read_to_string(&file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                findings.push(Finding {
                    code: "W-CONFIG-006".into(),
                    severity: Severity::Error,
                    layer: kind.as_str().into(),
                    path: Some(path.clone()),
                    line: None,
                    key: None,
                    message: format!("cannot read {path}: {e}"),
                    fix: "make the file readable by this user".into(),
                });
                continue;
            }
        };
        let layer = match Layer::parse(kind, &path, &text) {
            Ok(l) => Some(l),
            Err(e) => {
                let message = e.to_string();
                let unknown = message.contains("unknown field");
                let line = error_line(&message);
                findings.push(Finding {
                    code: if unknown { "W-CONFIG-030" } else { "W-CONFIG-001" }.into(),
                    severity: Severity::Error,
                    layer: kind.as_str().into(),
                    path: Some(path.clone()),
                    line,
                    key: None,
                    message: message.split_whitespace().collect::<Vec<_>>().join(" "),
                    fix: if unknown {
                        "remove the key or correct its spelling (the message lists the keys expected there)".into()
                    } else {
                        "correct the TOML at that line".into()
                    },
                });
                None
            }
        };
        out.push(Read {
            kind,
            path,
            text,
            layer,
        });
    }
    out
}

/// Checks every layer, the merge, the policy, the profiles on this machine, budgets, keys and
/// credential references. `strict`: warnings fail too.
pub fn check(
    at: &Where,
    strict: bool,
    notices: std::sync::Arc<dyn Notices + Send>,
) -> Result<ConfigReport> {
    let paths = install::paths(at, false)?;
    let mut findings = Vec::new();
    if let Err(e) = verify_managed_pin(&paths) {
        findings.push(Finding {
            code: e.code.clone(),
            severity: Severity::Error,
            layer: "managed".into(),
            path: Some(
                paths
                    .managed
                    .join(install::CONFIG_FILE)
                    .display()
                    .to_string(),
            ),
            line: None,
            key: None,
            message: e.message,
            fix: format!("restore the pinned file, or set {MANAGED_PIN_ENV} to its new digest"),
        });
    }
    let read = read(&paths, &mut findings);
    let layers: Vec<LayerRead> = read
        .iter()
        .map(|r| LayerRead {
            layer: r.kind.as_str().into(),
            path: r.path.clone(),
            parsed: r.layer.is_some(),
        })
        .collect();

    // A lower layer setting what the managed layer sets: the managed value wins.
    if let Some(managed) = read.iter().find(|r| r.kind == LayerKind::Managed)
        && let Ok(mv) = toml::from_str::<toml::Value>(&managed.text)
    {
        let mut ml = Vec::new();
        leaves("", &mv, &mut ml);
        for lower in read.iter().filter(|r| r.kind != LayerKind::Managed) {
            let Ok(lv) = toml::from_str::<toml::Value>(&lower.text) else {
                continue;
            };
            let mut ll = Vec::new();
            leaves("", &lv, &mut ll);
            for (key, value) in ll {
                if let Some((_, m)) = ml.iter().find(|(k, _)| *k == key)
                    && *m != value
                {
                    findings.push(Finding {
                        code: "W-CONFIG-031".into(),
                        severity: Severity::Warning,
                        layer: lower.kind.as_str().into(),
                        path: Some(lower.path.clone()),
                        line: line_of(&lower.text, &key),
                        key: Some(key.clone()),
                        message: format!(
                            "{key} = {value} here tries to change the managed value {m}; the managed value is what applies"
                        ),
                        fix: format!("remove {key} from this layer (ask the administrator to change the managed one)"),
                    });
                }
            }
        }
    }

    let parsed: Vec<Layer> = read.iter().filter_map(|r| r.layer.clone()).collect();
    if let Err(e) = install::identity(&parsed) {
        findings.push(Finding {
            code: e.code.clone(),
            severity: Severity::Error,
            layer: "identity".into(),
            path: None,
            line: None,
            key: None,
            message: e.message,
            fix: "`warrant whoami` shows where each identity field comes from".into(),
        });
    }
    let settings = warrant_core::config::merge_settings(&parsed);

    // A cost budget with no price for the configured model can never be counted.
    let has_cost = [
        settings.budgets.run,
        settings.budgets.actor,
        settings.budgets.tenant,
    ]
    .iter()
    .any(|b| b.cost_usd.is_some());
    if has_cost {
        let model = settings.default_model.clone();
        let unpriced = match &model {
            Some(m) if !m.starts_with("scripted:") => !settings.prices.contains_key(m),
            Some(_) => false,
            None => settings.prices.is_empty(),
        };
        if unpriced {
            let (layer, path, line) = read
                .iter()
                .rev()
                .find_map(|r| {
                    key_lines(&r.text)
                        .into_iter()
                        .find(|(k, _)| k.starts_with("budgets") && k.ends_with("cost_usd"))
                        .map(|(_, l)| (r.kind.as_str().to_owned(), r.path.clone(), l))
                })
                .unwrap_or_default();
            findings.push(Finding {
                code: "W-CONFIG-032".into(),
                severity: Severity::Error,
                layer,
                path: Some(path),
                line: Some(line),
                key: Some("budgets.*.cost_usd".into()),
                message: format!(
                    "a cost budget is set, but there is no [prices] entry for {}: its calls cannot be priced",
                    model.as_deref().unwrap_or("any model")
                ),
                fix: format!(
                    "add [prices.\"{}\"] input_per_million = … and output_per_million = …",
                    model.as_deref().unwrap_or("PROVIDER:MODEL")
                ),
            });
        }
    }

    // Policy: warnings of the loaded set, or why it does not load.
    match install::policy_fully_checked(&paths) {
        Ok(p) => {
            for w in p.warnings() {
                findings.push(Finding {
                    code: "W-CONFIG-034".into(),
                    severity: Severity::Warning,
                    layer: "policy".into(),
                    path: Some(paths.dot.join(install::POLICY_DIR).display().to_string()),
                    line: None,
                    key: None,
                    message: w,
                    fix: "add @ask(\"…\") to the permit, or narrow it so it does not cover an always-ask class".into(),
                });
            }
        }
        Err(e) => findings.push(Finding {
            code: e.code.clone(),
            severity: Severity::Error,
            layer: "policy".into(),
            path: Some(paths.dot.join(install::POLICY_DIR).display().to_string()),
            line: None,
            key: None,
            message: e.message,
            fix: "`warrant policy explain` shows how the set loads once it does".into(),
        }),
    }

    // Profiles that cannot be enforced here, as doctor's probe found them.
    if let Ok(report) = crate::doctor::doctor(at, notices) {
        for c in report
            .checks
            .iter()
            .filter(|c| !c.ok && (c.check.starts_with("profile ") || c.check == "default profile"))
        {
            let name = c
                .check
                .strip_prefix("profile ")
                .unwrap_or("default")
                .to_owned();
            let key = format!("profiles.{name}");
            let (layer, path, line) = read
                .iter()
                .rev()
                .find_map(|r| {
                    line_of(&r.text, &key)
                        .map(|l| (r.kind.as_str().to_owned(), Some(r.path.clone()), Some(l)))
                })
                .unwrap_or(("project".into(), None, None));
            findings.push(Finding {
                code: "W-CONFIG-033".into(),
                severity: Severity::Error,
                layer,
                path,
                line,
                key: Some(key),
                message: format!("profile {name} cannot be enforced on this machine: {}", c.detail),
                fix: "run `warrant doctor` for what the machine lacks; lower the profile's enforcement or run where the mechanism exists".into(),
            });
        }
    }

    // Permits no request can match (the schema's appliesTo, Cedar's validator, an
    // unconditional forbid over them), each at its file and line.
    if let Ok(sources) = install::policy_sources(&paths) {
        for u in warrant_policy::unreachable_permits(&sources) {
            findings.push(Finding {
                code: "W-CONFIG-038".into(),
                severity: if u.blocks_loading {
                    Severity::Error
                } else {
                    Severity::Warning
                },
                layer: "policy".into(),
                path: Some(u.file),
                line: Some(u.line),
                key: Some(u.id.clone()),
                message: format!("permit {} can never match a request: {}", u.id, u.reason),
                fix: "correct its scope or condition so it names what it is meant to allow, or remove it".into(),
            });
        }
    }

    keys(&paths, &mut findings);
    key_ages(
        &paths,
        settings.audit_key_max_age_days,
        warrant_core::Clock::now(&warrant_core::SystemClock),
        &mut findings,
    );

    // Credential references that do not resolve.
    if let Ok(c) = crate::credentials::check(at) {
        for r in c.references.iter().filter(|r| !r.ok) {
            findings.push(Finding {
                code: "W-CONFIG-036".into(),
                severity: Severity::Error,
                layer: "credentials".into(),
                path: None,
                line: None,
                key: Some(r.setting.clone()),
                message: format!(
                    "{} = {:?} does not resolve: {}",
                    r.setting, r.reference, r.detail
                ),
                fix: format!(
                    "store it: `warrant credentials set {}`",
                    r.reference
                        .trim_start_matches(warrant_llm::secret::CRED_PREFIX)
                ),
            });
        }
    }

    let ok = findings
        .iter()
        .all(|f| !strict && f.severity == Severity::Warning);
    Ok(ConfigReport {
        ok,
        strict,
        layers,
        findings,
    })
}

/// Weak keys: private key material others can read, an installation secret too short.
fn keys(paths: &Paths, findings: &mut Vec<Finding>) {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = paths.keys();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let private =
            name.ends_with(".key") || name == install::SECRET_FILE || name.contains("private");
        if !private {
            continue;
        }
        if let Ok(m) = std::fs::metadata(&p)
            && m.permissions().mode() & 0o077 != 0
        {
            findings.push(weak(
                &p,
                format!(
                    "{} is readable by other users (mode {:o})",
                    p.display(),
                    m.permissions().mode() & 0o777
                ),
                format!("chmod 600 {}", p.display()),
            ));
        }
    }
    if let Ok(secret) = install::installation_secret(paths)
        && secret.len() < 32
    {
        findings.push(weak(
            &dir.join(install::SECRET_FILE),
            format!(
                "the installation secret is {} bytes; at least 32 are expected",
                secret.len()
            ),
            "re-create the installation with `warrant init` in a fresh workspace".into(),
        ));
    }
}

fn weak(path: &Path, message: String, fix: String) -> Finding {
    Finding {
        code: "W-CONFIG-035".into(),
        severity: Severity::Error,
        layer: "keys".into(),
        path: Some(path.display().to_string()),
        line: None,
        key: None,
        message,
        fix,
    }
}

/// Days before an approver key's `key_expires` from which it is reported as expiring.
const EXPIRING_DAYS: i64 = 30;
const DAY_MS: i64 = 24 * 3600 * 1000;

/// An approver key's `key_expires`: an RFC 3339 time, or a date (valid through that day, UTC).
fn expiry(text: &str) -> Option<warrant_core::Timestamp> {
    let t = text.trim();
    warrant_core::Timestamp::parse(t).or_else(|| {
        (t.len() == 10)
            .then(|| warrant_core::Timestamp::parse(&format!("{t}T23:59:59.999Z")))
            .flatten()
    })
}

/// Expired, expiring and malformed keys: the approver keys of the managed identity directory
/// (`public_key`, `key_expires`) and the audit signing key (its file's age against `[audit]
/// key_max_age_days`, its seed's length).
fn key_ages(
    paths: &Paths,
    max_age_days: Option<u64>,
    now: warrant_core::Timestamp,
    findings: &mut Vec<Finding>,
) {
    let file = paths.managed.join(install::DIRECTORY_FILE);
    if let Ok(text) = std::fs::read_to_string(&file)
        && let Ok(dir) =
            warrant_core::directory::Directory::parse(&file.display().to_string(), &text)
    {
        for (actor, person) in &dir.people {
            let key = format!("people.{actor}");
            let line = line_of(&text, &key);
            let at = |code: &str, severity, message: String, fix: String| Finding {
                code: code.into(),
                severity,
                layer: "keys".into(),
                path: Some(file.display().to_string()),
                line,
                key: Some(key.clone()),
                message,
                fix,
            };
            if let Some(pk) = &person.public_key
                && (pk.len() != 64 || !pk.chars().all(|c| c.is_ascii_hexdigit()))
            {
                findings.push(at(
                    "W-CONFIG-041",
                    Severity::Error,
                    format!(
                        "the approver key of {actor} is not an Ed25519 public key (64 hex digits, 32 bytes): it has {} characters",
                        pk.len()
                    ),
                    format!("set people.{actor}.public_key to the 64-hex-digit public key"),
                ));
            }
            let Some(raw) = &person.key_expires else {
                continue;
            };
            match expiry(raw) {
                None => findings.push(at(
                    "W-CONFIG-041",
                    Severity::Error,
                    format!("people.{actor}.key_expires = {raw:?} is neither a date (2027-06-30) nor an RFC 3339 time"),
                    "write the expiry as YYYY-MM-DD or an RFC 3339 time".into(),
                )),
                Some(t) if t <= now => findings.push(at(
                    "W-CONFIG-039",
                    Severity::Error,
                    format!("the approver key of {actor} expired at {}", t.rfc3339()),
                    format!("issue {actor} a new key and set people.{actor}.public_key and key_expires"),
                )),
                Some(t) if t.millis() - now.millis() <= EXPIRING_DAYS * DAY_MS => findings.push(at(
                    "W-CONFIG-040",
                    Severity::Warning,
                    format!(
                        "the approver key of {actor} expires at {} (in {} day(s))",
                        t.rfc3339(),
                        (t.millis() - now.millis()) / DAY_MS
                    ),
                    format!("issue {actor} a new key before then"),
                )),
                Some(_) => {}
            }
        }
    }

    let audit_key = paths.keys().join(warrant_audit::PRIVATE_KEY_FILE);
    let Ok(text) = std::fs::read_to_string(&audit_key) else {
        return;
    };
    let seed = text.trim();
    if seed.len() != 64 || !seed.chars().all(|c| c.is_ascii_hexdigit()) {
        findings.push(Finding {
            code: "W-CONFIG-041".into(),
            ..weak(
                &audit_key,
                format!(
                    "the audit signing key is not an Ed25519 seed (64 hex digits, 32 bytes): it has {} characters",
                    seed.len()
                ),
                "restore .warrant/keys/audit.key from a backup".into(),
            )
        });
    }
    let Some(max_days) = max_age_days else {
        return;
    };
    let Some(born) = std::fs::metadata(&audit_key)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .and_then(|d| i64::try_from(d.as_millis()).ok())
    else {
        return;
    };
    let age_ms = now.millis().saturating_sub(born);
    let max_ms = i64::try_from(max_days)
        .unwrap_or(i64::MAX / DAY_MS)
        .saturating_mul(DAY_MS);
    let days = age_ms / DAY_MS;
    let (code, severity, message) = if age_ms > max_ms {
        (
            "W-CONFIG-039",
            Severity::Error,
            format!(
                "the audit signing key is {days} day(s) old, past [audit] key_max_age_days = {max_days}"
            ),
        )
    } else if age_ms > max_ms - max_ms / 10 {
        (
            "W-CONFIG-040",
            Severity::Warning,
            format!(
                "the audit signing key is {days} day(s) old; [audit] key_max_age_days = {max_days} is near"
            ),
        )
    } else {
        return;
    };
    findings.push(Finding {
        code: code.into(),
        severity,
        ..weak(
            &audit_key,
            message,
            "rotate it: `warrant audit keys rotate` (records signed before stay verifiable with the retired key)".into(),
        )
    });
}
