//! `doctor`: every part of an installation checked in turn (configuration, identity, policy,
//! approvals, store and keys, the audit chain, each sink, the OS sandbox and what each profile
//! gets on this machine). A part that fails does not stop the others from being checked.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;
use warrant_core::config::ProfileConfig;
use warrant_core::{Clock as _, Principal, PrincipalKind, RiskClass, SystemClock};

use crate::install::{self, Installation};
use crate::records::Records;
use crate::{HostError, Notices, Where};

#[derive(Debug, Serialize)]
pub struct DoctorReport {
    pub ok: bool,
    pub checks: Vec<Check>,
}

#[derive(Debug, Serialize)]
pub struct Check {
    pub check: String,
    pub ok: bool,
    pub detail: String,
}

/// How a duration reads in a report: `42s`, `3m5s`, `2h10m`.
pub fn age(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{}s", s / 60, s % 60),
        _ => format!("{}h{}m", s / 3600, (s % 3600) / 60),
    }
}

/// A time as the views serialize it (the store's full precision), for a report's text.
pub fn time_text(t: &warrant_core::Timestamp) -> String {
    match serde_json::to_value(t) {
        Ok(serde_json::Value::String(s)) => s,
        _ => t.rfc3339(),
    }
}

#[derive(Default)]
struct Checks(Vec<Check>);

impl Checks {
    fn add(&mut self, name: &str, result: Result<String, String>) {
        let (ok, detail) = match result {
            Ok(d) => (true, d),
            Err(e) => (false, e),
        };
        self.0.push(Check {
            check: name.to_owned(),
            ok,
            detail,
        });
    }
}

fn said(f: &HostError) -> String {
    format!("[{}] {}", f.code, f.message)
}

/// Checks the installation at `at`. Only an installation that cannot be found at all is an
/// error; everything else is a failed check in the report.
pub fn doctor(
    at: &Where,
    notices: std::sync::Arc<dyn Notices + Send>,
) -> crate::Result<DoctorReport> {
    let mut checks = Checks::default();
    let paths = install::paths(at, false)?;
    // A pinned managed layer that changed refuses here too, as every command that opens it.
    crate::config_check::verify_managed_pin(&paths)?;
    let layers = install::read_layers(&paths);
    checks.add(
        "configuration",
        layers
            .as_ref()
            .map(|l| format!("{} layer file(s)", l.len()))
            .map_err(said),
    );
    let settings = layers.as_ref().ok().map(|l| install::settings(l));
    let profiles = settings
        .as_ref()
        .and_then(|s| s.as_ref().ok())
        .map(|s| s.profiles.clone())
        .unwrap_or_default();
    checks.add(
        "identity",
        layers
            .as_ref()
            .map_err(|f| f.message.clone())
            .and_then(|l| {
                install::identity(l)
                    .map(|id| {
                        let p = id.principal;
                        format!("{} ({}) in {}", p.actor, p.kind.as_str(), p.tenant)
                    })
                    .map_err(|f| said(&f))
            }),
    );
    checks.add(
        "policy",
        install::policy_fully_checked(&paths)
            .map(|p| {
                let mut line = format!("{} policies, set {}", p.policy_ids().count(), p.digest());
                for w in p.warnings() {
                    line.push_str(&format!("; warning: {w}"));
                }
                line
            })
            .map_err(|f| said(&f)),
    );
    checks.add(
        "approvals",
        layers
            .as_ref()
            .map_err(|f| f.message.clone())
            .and_then(|l| {
                install::approval_rules(&paths, l)
                    .map(|r| approvals_summary(&r))
                    .map_err(|f| said(&f))
            }),
    );
    let configured_partitions = settings
        .as_ref()
        .and_then(|s| s.as_ref().ok())
        .and_then(|s| s.store_audit_partitions);
    let inst = match settings {
        Some(Ok(settings)) => {
            install::installation(&paths, &settings, notices).map_err(|f| said(&f))
        }
        Some(Err(f)) => Err(said(&f)),
        None => Err("no configuration".to_owned()),
    };
    match inst {
        Err(e) => checks.add("store and keys", Err(e)),
        Ok(inst) => store_checks(
            &mut checks,
            Records {
                paths: &paths,
                inst: &inst,
            },
            configured_partitions,
        ),
    }
    sandbox_checks(&profiles, &mut checks);
    default_profile_first(&mut checks.0);
    Ok(DoctorReport {
        ok: checks.0.iter().all(|c| c.ok),
        checks: checks.0,
    })
}

fn store_checks(checks: &mut Checks, records: Records<'_>, configured_partitions: Option<u64>) {
    let inst: &Installation = records.inst;
    checks.add(
        "store and keys",
        Ok(format!(
            "{}, key {}",
            inst.store_location,
            inst.sealer.key().kid()
        )),
    );
    checks.add(
        "store connection",
        inst.store.transport().map_err(|e| e.to_string()),
    );
    match inst.store.row_security() {
        Ok(None) => {}
        Ok(Some(rls)) => checks.add(
            "row-level security",
            match rls.problem() {
                None => Ok(format!(
                    "holds the login role `{}` (not a superuser, no BYPASSRLS)",
                    rls.role
                )),
                Some(problem) => Err(problem),
            },
        ),
        Err(e) => checks.add("row-level security", Err(e.to_string())),
    }
    if let Ok(partitions) = inst.store.audit_partitions()
        && (partitions > 1 || configured_partitions.is_some())
    {
        checks.add(
            "audit partitions",
            match configured_partitions {
                Some(want) if want != partitions => Err(format!(
                    "{partitions}, but [store] audit_partitions = {want}: the chain already holds records, so its partitions are fixed (a new store takes the configured count)"
                )),
                _ => Ok(format!(
                    "{partitions} (appends of runs in different partitions do not wait for each other)"
                )),
            },
        );
    }
    if let Ok(ws) = records.paths.workspace_canonical() {
        let swept = crate::layers::sweep(inst.store.as_ref(), &ws);
        checks.add(
            "judgement layers",
            Ok(format!(
                "{} kept for a person's judgement, {} abandoned removed",
                swept.kept.len(),
                swept.removed.len()
            )),
        );
    }
    let head = inst.store.audit_head().map(|h| h.seq).unwrap_or(0);
    let all = records.all_records().unwrap_or_default();
    let keys = warrant_audit::PublicKeys::load_dir(&records.paths.keys())
        .unwrap_or_else(|_| inst.public_keys.clone());
    let report = warrant_audit::verify_sealed(&all, &keys);
    checks.add(
        "audit chain",
        match &report.first_problem {
            None => Ok(format!("{} records intact", report.records)),
            Some(p) => Err(format!(
                "broken at seq {:?}: {:?}: {}",
                p.seq, p.kind, p.detail
            )),
        },
    );
    let now = SystemClock.now();
    let fail_after = Duration::from_millis(inst.fail_after_ms);
    for sink in inst.sinks().names() {
        let health = records.sink_health(&sink, head, now);
        checks.add(
            &format!("audit sink {sink}"),
            match health {
                Err(f) => Err(f.message),
                Ok(h) if h.stale => Err(format!(
                    "failing for {} (longer than {}): {}",
                    age(h.failing_for_ms.unwrap_or(0)),
                    age(fail_after.as_millis() as i64),
                    h.last_error.as_deref().unwrap_or("")
                )),
                Ok(h) => Ok(format!(
                    "{} pending, last success {}",
                    h.pending,
                    h.last_success
                        .map(|t| time_text(&t))
                        .unwrap_or_else(|| "never".to_owned())
                )),
            },
        );
    }
}

/// Rows for the OS sandbox, probed by trying in a child through this binary's launcher. A
/// mechanism the machine lacks fails the check only when a configured profile asks for a
/// sandbox; each sandboxed profile gets a row saying what it will get here.
fn sandbox_checks(profiles: &BTreeMap<String, ProfileConfig>, checks: &mut Checks) {
    let wanted = profiles.values().any(|p| p.sandbox.is_some());
    let launcher = match warrant_exec::Launcher::current_choice() {
        Ok((l, choice)) => {
            // Which program applies the plans: the probes below run through it too.
            let detail = match choice {
                warrant_exec::LauncherChoice::Small(path) => format!(
                    "{} (build {}), beside this binary",
                    path.display(),
                    warrant_exec::sandbox::BUILD_ID
                ),
                warrant_exec::LauncherChoice::Builtin(why) => {
                    format!("this binary's own entry point (`warrant __sandbox`): {why}")
                }
            };
            checks.0.push(Check {
                check: "sandbox launcher".to_owned(),
                ok: true,
                detail,
            });
            l
        }
        Err(e) => {
            checks.0.push(Check {
                check: "sandbox".to_owned(),
                ok: !wanted,
                detail: e.to_string(),
            });
            return;
        }
    };
    let scratch = std::env::temp_dir().join(format!("warrant-doctor-{}", std::process::id()));
    let mut rows = warrant_exec::sandbox::probe(&launcher, &scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    // A debug build's test switch: this machine as one without overlays.
    if crate::controls::disabled("overlay") {
        for row in rows
            .iter_mut()
            .filter(|r| r.mechanism == "overlay observed")
        {
            row.available = false;
            row.detail = "switched off (WARRANT_TEST_DISABLE=overlay)".to_owned();
        }
    }
    for row in &rows {
        // Without overlays contained commands still run, judged by their argv: said, not failed.
        let overlay = row.mechanism == "overlay observed";
        let detail = match (row.available, overlay) {
            (true, _) => row.detail.clone(),
            (false, true) => format!(
                "not available: {}; contained commands write to the workspace directly and are judged by their argv before they run (a destructive argv asks a person first), not by what they changed",
                row.detail
            ),
            (false, false) => format!("not available: {}", row.detail),
        };
        checks.0.push(Check {
            check: format!("sandbox {}", row.mechanism),
            ok: row.available || !wanted || overlay,
            detail,
        });
    }
    for (name, profile) in profiles {
        let (ok, detail) = match &profile.sandbox {
            Some(sandbox) if !profile.unconfined => {
                let (ok, verdict) = warrant_exec::sandbox::profile_verdict(sandbox, &rows);
                let words = warrant_tools::confinement_words(profile, profile.is_contained());
                (ok, format!("{verdict}: {words}"))
            }
            Some(_) | None => (
                true,
                "unconfined: no sandbox, so every command of it waits for a person".to_owned(),
            ),
        };
        checks.0.push(Check {
            check: format!("profile {name}"),
            ok,
            detail,
        });
    }
}

/// The default profile's row first: what every command without a profile runs under.
fn default_profile_first(checks: &mut Vec<Check>) {
    if let Some(i) = checks.iter().position(|c| c.check == "profile default") {
        let mut row = checks.remove(i);
        row.check = "default profile".to_owned();
        checks.insert(0, row);
    }
}

/// One line: the directory, who is asked here, and the rule of each risk class.
fn approvals_summary(r: &warrant_kernel::ApprovalRules) -> String {
    let who = match &r.directory {
        None => "no identity directory: any person who is not an agent may approve".to_owned(),
        Some(d) => {
            let asked = warrant_kernel::ApprovalRules {
                risk: r.risk.clone(),
                directory: Some(d.clone()),
                team: r.team.clone(),
                ..Default::default()
            }
            .asked_of(
                &Principal {
                    tenant: String::new(),
                    actor: String::new(),
                    kind: PrincipalKind::User,
                    on_behalf_of: None,
                    roles: Vec::new(),
                    teams: Vec::new(),
                    attrs: Default::default(),
                },
                RiskClass::Change,
            );
            format!(
                "directory with {} people and {} admins; requests go to {}",
                d.people.len(),
                d.admins().len(),
                asked.describe()
            )
        }
    };
    let rules: Vec<String> = RiskClass::ALL
        .into_iter()
        .map(|c| {
            let rule = r.risk.rule(c);
            format!(
                "{} needs {}{}",
                c.as_str(),
                rule.needs.as_str(),
                if rule.four_eyes { " (four eyes)" } else { "" }
            )
        })
        .collect();
    format!("{who}; {}", rules.join(", "))
}
