//! Adding a forbid never makes a decision more permissive: Deny stays Deny, Ask never becomes
//! Allow. Random policy sets, random extra forbid, random requests.

use proptest::prelude::*;
use warrant_core::config::LayerKind;
use warrant_core::{Action, Principal, PrincipalKind};
use warrant_policy::{PolicyEngine, Verdict};

use super::common::*;

const ACTIONS: [&str; 6] = [
    "fs.read",
    "fs.list",
    "fs.search",
    "fs.write",
    "fs.create",
    "fs.delete",
];
const NAMES: [&str; 6] = ["*", "*.txt", ".env", "lib*", "config", "*.rs"];
const PATHS: [&str; 7] = [
    "/ws/a.txt",
    "/ws/.env",
    "/ws/.git/config",
    "/etc/passwd",
    "/ws/src/lib.rs",
    "/ws/keys/id_rsa",
    "/tmp/b.txt",
];

fn rule(effect: &str, n: usize, action: usize, name: usize, ask: Option<&str>) -> String {
    let ask = ask.map(|a| format!("@ask(\"{a}\")\n")).unwrap_or_default();
    format!(
        "@id(\"{effect}-{n}\")\n{ask}{effect} (principal, action == Warrant::Action::\"{}\", resource is Warrant::Path)\nwhen {{ resource.name like \"{}\" }};\n",
        ACTIONS[action], NAMES[name]
    )
}

fn action(verb: usize, p: usize) -> Action {
    let path = path(PATHS[p]);
    match verb {
        0 => Action::FsRead { path },
        1 => Action::FsList { path },
        2 => Action::FsSearch {
            path,
            pattern: "x".into(),
        },
        3 => Action::FsWrite {
            path,
            content: "x".into(),
        },
        4 => Action::FsCreate {
            path,
            content: "x".into(),
        },
        _ => Action::FsDelete {
            path,
            recursive: false,
        },
    }
}

fn who(agent: bool) -> Principal {
    if agent {
        Principal {
            on_behalf_of: Some("alice".into()),
            ..principal(PrincipalKind::Agent, "bot")
        }
    } else {
        alice()
    }
}

fn severity(v: Verdict) -> u8 {
    match v {
        Verdict::Allow => 0,
        Verdict::Ask { .. } => 1,
        Verdict::Deny => 2,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn adding_a_forbid_never_widens(
        permits in proptest::collection::vec((0..6usize, 0..6usize, proptest::option::of(0..3usize)), 0..5),
        forbid in (0..6usize, 0..6usize),
        requests in proptest::collection::vec((0..6usize, 0..7usize, any::<bool>()), 1..8),
    ) {
        let asks = ["change", "external", "destructive"];
        let extra: String = permits
            .iter()
            .enumerate()
            .map(|(n, (a, p, ask))| rule("permit", n, *a, *p, ask.map(|i| asks[i])))
            .collect();
        let base = [pack_source(), source(LayerKind::User, "u.cedar", &extra)];
        let before = PolicyEngine::load(&base).unwrap();
        let mut widened = base.to_vec();
        widened.push(source(LayerKind::Managed, "m.cedar", &rule("forbid", 0, forbid.0, forbid.1, None)));
        let after = PolicyEngine::load(&widened).unwrap();
        for (verb, p, agent) in requests {
            let (a, w) = (action(verb, p), who(agent));
            let old = decide(&before, &w, &a).verdict;
            let new = decide(&after, &w, &a).verdict;
            prop_assert!(severity(new) >= severity(old), "{old:?} -> {new:?} for {}", a.target());
            if let (Verdict::Ask { risk: r_old }, Verdict::Ask { risk: r_new }) = (old, new) {
                prop_assert_eq!(r_old, r_new);
            }
        }
    }
}
