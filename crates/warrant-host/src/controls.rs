//! Wiring of the untrusted-content controls: the tools a run offers (menu) and the redactor
//! every result passes through (known secret values from Warrant's environment, plus the
//! scanner), and the prompt guard's switches. The switches can be turned off only in debug
//! builds, through `WARRANT_TEST_DISABLE=fence,escape,guard,redact,render,origin,authenticate,follow,binding,checkpoint,seal,overlay,web-address,web-loopback,mcp-screen,spawn-narrowing,static-ceiling,delegation-first,sink-turns`,
//! for the negative controls of the security tests; a release build ignores the variable.
//! (`follow` switches off the risk recognizers' following of wrappers, shells and inline code;
//! `binding` is read by [`crate::install::load_run`]: the journal check before a fold that feeds
//! the ring; `checkpoint` by [`crate::install::installation`] and `audit verify --file`: the
//! JSONL sink's signed checkpoint, neither written nor checked; `overlay` makes this machine
//! one without overlays: contained commands are judged by their argv, see [`crate::Host::tool_env`]
//! and `doctor`; `sink-turns` lets processes deliver to the JSONL copy at once, without taking
//! turns on its lock file.)

use std::sync::Arc;

use std::path::{Path, PathBuf};

use warrant_agent::GuardSettings;
use warrant_core::config::{LayerKind, SecretRulesRef, Settings};
use warrant_secrets::{LayerRules, Redactor, Scanner, scanner_for_layers};
use warrant_tools::{Controls, ToolSource, Toolbox, ToolboxError};

use crate::HostError;

pub fn disabled(what: &str) -> bool {
    if !cfg!(debug_assertions) {
        return false;
    }
    std::env::var("WARRANT_TEST_DISABLE")
        .map(|v| v.split(',').any(|w| w.trim() == what))
        .unwrap_or(false)
}

/// Fencing and the request check, on unless a debug build's negative control turns them off.
pub fn guard_settings() -> GuardSettings {
    GuardSettings {
        fence: !disabled("fence"),
        escape: !disabled("escape"),
        check: !disabled("guard"),
    }
}

/// How far the risk recognizers read a command line: all the way, unless a debug build's
/// negative control turns following off (`WARRANT_TEST_DISABLE=follow`).
pub fn recognizers() -> warrant_core::risk::Recognizers {
    warrant_core::risk::Recognizers {
        follow: !disabled("follow"),
    }
}

/// Values Warrant knows to be secret: every variable of its own environment whose name marks
/// it as one (`*KEY*`, `*SECRET*`, `*TOKEN*`, `*PASSWORD*`: provider keys, sink tokens), and the
/// store's password (in its URL, or behind `[store] password`).
pub fn known_secrets(paths: &crate::Paths, settings: &Settings) -> Vec<String> {
    let mut out: Vec<String> = std::env::vars()
        .filter(|(k, _)| warrant_exec::secret_pattern(k).is_some())
        .map(|(_, v)| v)
        .collect();
    if let Some(url) = &settings.store_url
        && let (Some(scheme), Some(at)) = (url.find("://"), url.rfind('@'))
        && at > scheme
        && let Some((_, password)) = url[scheme + 3..at].split_once(':')
    {
        out.push(password.to_owned());
    }
    if let Ok(Some(password)) = crate::install::store_password(paths, settings) {
        out.push(password);
    }
    // The stored credentials (`warrant credentials set`): provider keys and tokens.
    out.extend(
        crate::credentials::values(paths)
            .unwrap_or_default()
            .into_values(),
    );
    out
}

/// The run's tools: every source composed into one toolbox, behind the configured menu, every
/// result through `redactor` (see [`redacting`]).
pub fn tools(
    settings: &Settings,
    sources: &[&dyn ToolSource],
    redactor: Option<Arc<Redactor>>,
) -> Result<Toolbox, HostError> {
    Toolbox::new(
        sources,
        Controls {
            menu: settings.menu.as_deref(),
            menus: &settings.menus,
            redactor,
        },
    )
    .map_err(|e| match e {
        ToolboxError::Duplicate { .. } => HostError::usage("W-TOOL-006", e.to_string()),
        ToolboxError::Menu(menu) => HostError::bad_input(&menu),
    })
}

/// The installation's redactor: the configured scanner and the known secret values. Built once
/// per [`crate::Host`] and shared by the tools' results, a person's replies and the journal's
/// sealing, so rule files are read and compiled once.
pub fn redactor(paths: &crate::Paths, settings: &Settings) -> Result<Redactor, HostError> {
    let scanner = configured_scanner(settings)?;
    Ok(Redactor::new(scanner, known_secrets(paths, settings)))
}

/// The redactor as the control over tool results and replies: `None` only for a debug build's
/// negative control (`WARRANT_TEST_DISABLE=redact`).
pub fn redacting(redactor: &Arc<Redactor>) -> Option<Arc<Redactor>> {
    (!disabled("redact")).then(|| Arc::clone(redactor))
}

/// How the journal keeps what the redactor finds out of the store: sealed under a key derived
/// from the installation secret (`crate::confidential`). In the clear only for a debug build's
/// negative control (`WARRANT_TEST_DISABLE=seal`).
pub fn journal_seal(
    redactor: &Arc<Redactor>,
    installation_secret: &[u8],
) -> Box<dyn warrant_kernel::Confidential + Send + Sync> {
    if disabled("seal") {
        return Box::new(warrant_kernel::InTheClear);
    }
    Box::new(crate::confidential::JournalSeal::new(
        Arc::clone(redactor),
        installation_secret,
    ))
}

/// Where a layer's `[secrets] rules` points: absolute as written; relative, against the
/// workspace root for the project layer (`.warrant/config.toml` sits in it) and against the
/// directory of `config.toml` for the others.
fn resolve(r: &SecretRulesRef) -> PathBuf {
    let p = Path::new(&r.rules);
    if p.is_absolute() {
        return p.to_owned();
    }
    let cfg = Path::new(&r.layer_path);
    let base = match r.kind {
        LayerKind::Project => cfg.parent().and_then(Path::parent),
        LayerKind::Managed | LayerKind::User => cfg.parent(),
    };
    base.map_or_else(|| p.to_owned(), |b| b.join(p))
}

/// The scanner for the configuration in force.
/// `secrets scan`: the files and directories of `paths` scanned with the configured rules (or
/// the `rules` file instead), the findings a `baseline` file lists accepted.
pub fn scan(
    at: &crate::Where,
    paths: &[PathBuf],
    baseline: Option<&Path>,
    rules: Option<&Path>,
) -> Result<warrant_secrets::report::Report, HostError> {
    let scanner = scanner_at(at, rules)?;
    let baseline = baseline
        .map(warrant_secrets::report::Baseline::load)
        .transpose()
        .map_err(|e| HostError::bad_input(&e))?;
    warrant_secrets::report::scan_paths(&scanner, paths, baseline.as_ref())
        .map_err(|e| HostError::bad_input(&e))
}

pub fn configured_scanner(settings: &Settings) -> Result<Scanner, HostError> {
    let layers: Vec<LayerRules> = settings
        .secrets_rules
        .iter()
        .map(|r| LayerRules {
            kind: r.kind,
            file: resolve(r),
        })
        .collect();
    scanner_for_layers(&layers).map_err(|e| HostError::bad_input(&e))
}

/// The scanner `secrets scan` uses: the gitleaks configuration in `rules` when given, else the
/// configured rules of the installation at `at` (outside a workspace the managed and user
/// layers still count).
pub fn scanner_at(at: &crate::Where, rules: Option<&Path>) -> Result<Scanner, HostError> {
    if let Some(file) = rules {
        return warrant_secrets::RuleSet::load(file)
            .and_then(|set| Scanner::new(&set))
            .map_err(|e| HostError::bad_input(&e));
    }
    let paths = crate::install::paths(at, false).or_else(|_| crate::install::paths(at, true))?;
    let layers = crate::install::read_layers(&paths)?;
    configured_scanner(&crate::install::settings(&layers)?)
}
