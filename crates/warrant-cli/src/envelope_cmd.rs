//! `warrant kill`: parsing the scope and printing what the host did; `warrant verify`: the
//! static ceiling check of a composition, printed.

use std::path::Path;

use warrant_host::Host;
use warrant_store::KillScope;
use warrant_text::features::envelope as words;

use crate::Failure;
use crate::memory_cmd::say;

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
    let named = |flag: &str, v: String| {
        if v.trim().is_empty() {
            let why = format!("{flag} needs a name; an empty one would match nothing");
            return Err(Failure::usage("W-ENVELOPE-004", why));
        }
        Ok(v)
    };
    let scope = match (args.all, args.tenant, args.actor, args.run) {
        (true, ..) => Some(KillScope::All),
        (_, Some(t), ..) => Some(KillScope::Tenant(named("--tenant", t)?)),
        (_, _, Some(a), _) => Some(KillScope::Actor(named("--actor", a)?)),
        (_, _, _, Some(r)) => Some(KillScope::Run(warrant_host::runs::parse_run(&r)?)),
        _ => None,
    };
    let host = Host::open(&crate::at(ws), crate::notices())?;
    match (scope, args.list) {
        (None, true) => say(args.json, host.kill_switches()?.as_slice(), words::switches),
        (Some(_), true) => Err(Failure::usage(
            "W-ENVELOPE-004",
            "--list shows every switch; give it without a scope",
        ))?,
        (None, false) => Err(Failure::usage(
            "W-ENVELOPE-004",
            "say what to stop: --all, --tenant T, --actor A or --run R (or --list)",
        ))?,
        (Some(scope), false) if args.lift => {
            let reason = args.reason.unwrap_or_else(|| words::LIFTED_HERE.to_owned());
            let lifted = host.lift_kill(scope.clone(), &reason)?;
            say(args.json, &lifted, |l| words::lifted(l, &scope));
        }
        (Some(scope), false) => {
            let reason = args
                .reason
                .unwrap_or_else(|| words::STOPPED_HERE.to_owned());
            say(args.json, &host.kill(scope, &reason)?, words::set);
        }
    }
    Ok(0)
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
    let checked = host.verify_composition(menu, profile, graph)?.checked();
    say(json, &checked, |c| words::composition(&c.composition));
    Ok(if checked.holds { 0 } else { 1 })
}
