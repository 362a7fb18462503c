//! `warrant get-started`: what is ready and what is not, each row with its evidence and the
//! exact next command. Every "ready" comes from a probe made now: the provider is asked for
//! its models with the configured key, confinement and audit are `doctor`'s own checks, the
//! credentials are opened. A row with no probe behind it is never shown as ready.

use serde::Serialize;

use crate::doctor::{self, Check};
use crate::install;
use crate::{Notices, Result, Where};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// A probe showed it working.
    Ready,
    /// Not set up yet.
    Missing,
    /// Set up, and the probe failed.
    Failing,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "ready",
            Self::Missing => "missing",
            Self::Failing => "failing",
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub area: String,
    pub state: State,
    /// What the probe saw.
    pub evidence: String,
    /// The exact command to run next, when something is to be done.
    pub next: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Readiness {
    pub workspace: String,
    /// Every row ready.
    pub ready: bool,
    pub rows: Vec<Row>,
}

fn row(area: &str, state: State, evidence: impl Into<String>, next: Option<&str>) -> Row {
    Row {
        area: area.to_owned(),
        state,
        evidence: evidence.into(),
        next: next.map(str::to_owned),
    }
}

fn from_check(area: &str, checks: &[Check], name: &str, next: &str) -> Row {
    match checks.iter().find(|c| c.check == name) {
        Some(c) if c.ok => row(area, State::Ready, c.detail.clone(), None),
        Some(c) => row(area, State::Failing, c.detail.clone(), Some(next)),
        None => row(
            area,
            State::Failing,
            format!("not checked: {name} could not be probed"),
            Some(next),
        ),
    }
}

pub fn get_started(at: &Where, notices: std::sync::Arc<dyn Notices + Send>) -> Result<Readiness> {
    let paths = install::paths(at, true)?;
    let workspace = paths.workspace.display().to_string();
    if !paths.dot.is_dir() {
        let rows = vec![
            row(
                "workspace",
                State::Missing,
                format!("{workspace} has no .warrant/"),
                Some("warrant configure"),
            ),
            row(
                "provider",
                State::Missing,
                "no model provider configured",
                Some("warrant configure"),
            ),
        ];
        return Ok(Readiness {
            workspace,
            ready: false,
            rows,
        });
    }
    let report = doctor::doctor(at, notices)?;
    let checks = &report.checks;
    let mut rows = vec![row(
        "workspace",
        State::Ready,
        format!("{workspace} holds .warrant/"),
        None,
    )];

    // Identity, and which of its fields the managed layer locks.
    let identity = from_check("identity", checks, "identity", "warrant whoami");
    let identity = match install::read_layers(&paths).and_then(|l| install::identity(&l)) {
        Ok(id) => {
            let locked: Vec<String> = id
                .sources
                .iter()
                .filter(|(_, o)| o.locked)
                .map(|(f, _)| f.to_string())
                .collect();
            Row {
                evidence: format!(
                    "{}; {}",
                    identity.evidence,
                    if locked.is_empty() {
                        "nothing locked by a managed layer".to_owned()
                    } else {
                        format!("locked by the managed layer: {}", locked.join(", "))
                    }
                ),
                ..identity
            }
        }
        Err(_) => identity,
    };
    rows.push(identity);

    rows.push(match crate::providers::probe_default(at) {
        Ok(None) => row(
            "provider",
            State::Missing,
            "no model configured ([providers] model, WARRANT_MODEL)",
            Some("warrant configure provider"),
        ),
        Ok(Some(p)) if p.ok => row(
            "provider",
            State::Ready,
            format!("{}: {}", p.model_spec, p.detail),
            None,
        ),
        Ok(Some(p)) => row(
            "provider",
            State::Failing,
            format!("{}: {}", p.model_spec, p.detail),
            Some("warrant configure provider"),
        ),
        Err(e) => row(
            "provider",
            State::Failing,
            format!("[{}] {}", e.code, e.message),
            Some("warrant configure provider"),
        ),
    });
    rows.push(match crate::credentials::check(at) {
        Ok(c) if c.ok => row(
            "credentials",
            State::Ready,
            {
                let in_keyring = c
                    .stored
                    .iter()
                    .filter(|s| s.detail == crate::credentials::READ_FROM_KEYRING)
                    .count();
                format!(
                    "{} stored ({in_keyring} in the {}, {} in the {}), {} reference(s) resolve",
                    c.stored.len(),
                    crate::credentials::IN_KEYRING,
                    c.stored.len() - in_keyring,
                    crate::credentials::STORED_IN,
                    c.references.len(),
                )
            },
            None,
        ),
        Ok(c) => row(
            "credentials",
            State::Failing,
            c.stored
                .iter()
                .chain(&c.references)
                .filter(|r| !r.ok)
                .map(|r| format!("{} {}: {}", r.setting, r.reference, r.detail))
                .collect::<Vec<_>>()
                .join("; "),
            Some("warrant credentials check"),
        ),
        Err(e) => row(
            "credentials",
            State::Failing,
            format!("[{}] {}", e.code, e.message),
            Some("warrant credentials check"),
        ),
    });
    rows.push(from_check(
        "policy",
        checks,
        "policy",
        "warrant config check",
    ));
    rows.push(from_check(
        "approvals",
        checks,
        "approvals",
        "warrant config check",
    ));
    rows.push(from_check(
        "confinement",
        checks,
        "default profile",
        "warrant doctor",
    ));
    let audit: Vec<&Check> = checks
        .iter()
        .filter(|c| c.check == "audit chain" || c.check.starts_with("audit sink "))
        .collect();
    rows.push(if audit.is_empty() {
        row(
            "audit",
            State::Failing,
            "not checked: the store could not be opened",
            Some("warrant doctor"),
        )
    } else if audit.iter().all(|c| c.ok) {
        row(
            "audit",
            State::Ready,
            audit
                .iter()
                .map(|c| format!("{}: {}", c.check, c.detail))
                .collect::<Vec<_>>()
                .join("; "),
            None,
        )
    } else {
        row(
            "audit",
            State::Failing,
            audit
                .iter()
                .filter(|c| !c.ok)
                .map(|c| format!("{}: {}", c.check, c.detail))
                .collect::<Vec<_>>()
                .join("; "),
            Some("warrant audit status"),
        )
    });
    rows.push(from_check(
        "store",
        checks,
        "store connection",
        "warrant doctor",
    ));
    rows.push(from_check(
        "keys",
        checks,
        "store and keys",
        "warrant doctor",
    ));
    Ok(Readiness {
        workspace,
        ready: rows.iter().all(|r| r.state == State::Ready),
        rows,
    })
}
