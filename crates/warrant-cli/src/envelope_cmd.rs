//! `warrant kill`: parsing the scope and printing what the host did; `warrant verify`: the
//! static ceiling check of a composition, printed.

use std::path::Path;

use warrant_host::Host;
use warrant_store::{KillScope, KillSwitch};

use crate::{Failure, pretty};

pub struct KillArgs {
    pub all: bool,
    pub tenant: Option<String>,
    pub actor: Option<String>,
    pub run: Option<String>,
    pub reason: Option<String>,
    pub lift: bool,
    pub list: bool,
    pub json: bool,
}

pub fn kill(ws: Option<&Path>, args: KillArgs) -> Result<u8, Failure> {
    let scope = if args.all {
        Some(KillScope::All)
    } else if let Some(t) = args.tenant {
        Some(KillScope::Tenant(non_empty("--tenant", t)?))
    } else if let Some(a) = args.actor {
        Some(KillScope::Actor(non_empty("--actor", a)?))
    } else if let Some(r) = args.run {
        Some(KillScope::Run(warrant_host::runs::parse_run(&r)?))
    } else {
        None
    };
    let host = Host::open(&crate::at(ws), crate::notices())?;
    match (scope, args.list) {
        (None, true) => {
            let set = host.kill_switches()?;
            if args.json {
                outln!("{}", pretty(&set));
            } else if set.is_empty() {
                outln!("no kill switch is set");
            } else {
                for s in &set {
                    outln!("{}", line(s));
                }
            }
            Ok(0)
        }
        (Some(_), true) => Err(Failure::usage(
            "W-ENVELOPE-004",
            "--list shows every switch; give it without a scope",
        )),
        (None, false) => Err(Failure::usage(
            "W-ENVELOPE-004",
            "say what to stop: --all, --tenant T, --actor A or --run R (or --list)",
        )),
        (Some(scope), false) if args.lift => {
            let reason = args
                .reason
                .unwrap_or_else(|| "lifted from the command line".to_owned());
            let lifted = host.lift_kill(scope.clone(), &reason)?;
            if args.json {
                outln!("{}", pretty(&lifted));
            } else {
                match &lifted.lifted {
                    Some(s) => outln!("lifted   {}", line(s)),
                    None => outln!("no kill switch was set for {}", scope.describe()),
                }
                for s in &lifted.still_set {
                    outln!("still set {}", line(s));
                }
            }
            Ok(0)
        }
        (Some(scope), false) => {
            let reason = args
                .reason
                .unwrap_or_else(|| "stopped from the command line".to_owned());
            let set = host.kill(scope, &reason)?;
            if args.json {
                outln!("{}", pretty(&set));
            } else if set.newly_set {
                outln!(
                    "set      {}; every run it covers stops at its next effect",
                    line(&set.switch)
                );
            } else {
                outln!("already set {}", line(&set.switch));
            }
            Ok(0)
        }
    }
}

fn line(s: &KillSwitch) -> String {
    format!(
        "{} by {} at {}: {}",
        s.scope.describe(),
        s.set_by,
        s.set_at.rfc3339(),
        crate::shown_inline(&s.reason)
    )
}

fn non_empty(flag: &str, v: String) -> Result<String, Failure> {
    if v.trim().is_empty() {
        return Err(Failure::usage(
            "W-ENVELOPE-004",
            format!("{flag} needs a name; an empty one would match nothing"),
        ));
    }
    Ok(v)
}

/// `warrant verify [--menu M] [--profile P] [--graph FILE] [--json]`: exit 0 when the
/// composition holds, 1 when a tool can reach worse than the ceiling.
pub fn verify(
    ws: Option<&Path>,
    menu: Option<&str>,
    profile: Option<&str>,
    graph: Option<&Path>,
    json: bool,
) -> Result<u8, Failure> {
    let host = Host::open(&crate::at(ws), crate::notices())?;
    let c = host.verify_composition(menu, profile, graph)?;
    let code = if c.holds() { 0 } else { 1 };
    if json {
        outln!(
            "{}",
            pretty(&serde_json::json!({"holds": c.holds(), "composition": c}))
        );
        return Ok(code);
    }
    let menu = c.menu.as_deref().unwrap_or("every tool");
    let mut profile = c
        .profile
        .as_deref()
        .map_or_else(String::new, |p| format!(", agent profile {p}"));
    if let Some(g) = &c.graph {
        profile.push_str(&format!(", graph {g}"));
    }
    if c.declared.len() > 1 {
        outln!(
            "ceilings declared: {} (the tightest counts)",
            c.declared
                .iter()
                .map(|d| format!("{} `{}`", d.by, d.ceiling.as_str()))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    match c.ceiling {
        None => outln!(
            "ok       menu {menu}{profile}: no ceiling declared (`[run] ceiling`, `[menus.NAME] ceiling`, a profile's or graph's); its tools can reach `{}`",
            c.tools
                .iter()
                .map(|t| t.class)
                .max()
                .map_or("nothing", |m| m.as_str())
        ),
        Some(ceiling) if c.holds() => outln!(
            "ok       menu {menu}{profile}: {} tool(s), none can reach worse than the ceiling `{}`",
            c.tools.len(),
            ceiling.as_str()
        ),
        Some(ceiling) => {
            outln!(
                "ABOVE    menu {menu}{profile}: {} of {} tool(s) can reach worse than the ceiling `{}` [W-ENVELOPE-007]; a run of it would stop before its first step:",
                c.above.len(),
                c.tools.len(),
                ceiling.as_str()
            );
            for t in &c.above {
                outln!("  {:<24} {}", t.tool, t.class.as_str());
            }
        }
    }
    Ok(code)
}
