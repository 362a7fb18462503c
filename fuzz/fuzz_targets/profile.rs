//! Subprocess profiles: arbitrary profile TOML planned into a sandbox by the pure
//! `SandboxPlan::from_profile`, over an in-memory filesystem with a few symlinks (one to a system
//! directory, one relative, one loop). When a plan is made: every path is canonical and free of
//! the links, each list is sorted without duplicates, what the profile asked for is carried
//! unchanged, nothing the executor owns is set, and the plan survives the JSON trip to the
//! launcher unchanged.
#![no_main]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use libfuzzer_sys::fuzz_target;
use warrant_core::config::ProfileConfig;
use warrant_core::{CanonicalPath, Coded, LinkResolver};
use warrant_exec::sandbox::{Mechanism, SandboxPlan};
use warrant_exec::{minimize_env, secret_pattern, validate_profile};

struct Links(BTreeMap<&'static str, &'static str>);

impl LinkResolver for Links {
    fn read_link(&self, path: &Path) -> std::io::Result<Option<PathBuf>> {
        Ok(path.to_str().and_then(|p| self.0.get(p)).map(PathBuf::from))
    }
}

fn links() -> Links {
    Links(BTreeMap::from([
        ("/w/etc-link", "/etc"),
        ("/w/up", ".."),
        ("/w/sub/rel", "../../opt/tools"),
        ("/w/loop-a", "/w/loop-b"),
        ("/w/loop-b", "loop-a"),
        ("/usr/lib64", "lib"),
    ]))
}

fn check_list(what: &str, list: &[CanonicalPath], links: &Links) {
    let mut sorted = list.to_vec();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted, list, "{what} not sorted and unique");
    for p in list {
        assert_eq!(CanonicalPath::from_normalized(p.as_str()).as_ref(), Ok(p), "{what}: {p}");
        let mut prefix = String::new();
        for component in p.as_str().split('/').skip(1) {
            prefix.push('/');
            prefix.push_str(component);
            assert!(!links.0.contains_key(prefix.as_str()), "{what}: {p} goes through the link {prefix}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(profile) = toml::from_str::<ProfileConfig>(text) else {
        return;
    };
    let Ok(workspace) = CanonicalPath::from_normalized("/w") else {
        return;
    };
    check_env(&profile);
    let links = links();
    let planned = SandboxPlan::from_profile("fuzz", &profile, &workspace, &links);
    let again = SandboxPlan::from_profile("fuzz", &profile, &workspace, &links);
    assert_eq!(format!("{planned:?}"), format!("{again:?}"), "planning is not deterministic");
    let plan = match planned {
        Ok(Some(plan)) => plan,
        Ok(None) => {
            assert!(profile.sandbox.is_none());
            return;
        }
        Err(e) => {
            assert!(e.code().starts_with("W-EXEC-"), "{e:?}");
            assert!(profile.sandbox.is_some());
            return;
        }
    };
    let Some(config) = &profile.sandbox else {
        panic!("a plan for a profile without a sandbox");
    };
    check_list("read_roots", &plan.read_roots, &links);
    check_list("write_roots", &plan.write_roots, &links);
    check_list("protected", &plan.protected, &links);
    check_list("denied_paths", &plan.denied_paths, &links);
    for name in &plan.denied_names {
        assert!(!name.is_empty() && !name.contains('/'), "denied name {name:?}");
    }
    assert_eq!(plan.enforcement, config.enforcement);
    assert_eq!(plan.network, config.network);
    assert_eq!(plan.limits, config.limits);
    assert!(plan.egress_socket.is_none() && plan.overlay.is_none());
    assert!(plan.simulate_unavailable.is_none());
    let requested = plan.requested();
    assert_eq!(requested.first(), Some(&Mechanism::Session));
    for m in [Mechanism::NoNewPrivs, Mechanism::Landlock, Mechanism::Seccomp] {
        assert!(requested.contains(&m), "{m:?} not requested");
    }
    let json = match serde_json::to_string(&plan) {
        Ok(json) => json,
        Err(e) => panic!("a plan that cannot be sent to the launcher: {e}"),
    };
    match serde_json::from_str::<SandboxPlan>(&json) {
        Ok(back) => assert_eq!(back, plan, "the launcher would read another plan"),
        Err(e) => panic!("the launcher cannot read the plan {json}: {e}"),
    }
});

/// The command's environment never carries a secret-looking name, whatever the profile says;
/// a profile that validates gets exactly the values it sets.
fn check_env(profile: &ProfileConfig) {
    let parent = [
        ("PATH", "/usr/bin"),
        ("HOME", "/root"),
        ("AWS_SECRET_ACCESS_KEY", "planted"),
        ("GITHUB_TOKEN", "planted"),
        ("MY_PASSWORD", "planted"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()));
    let env = minimize_env(profile, parent);
    let mut sorted = env.clone();
    sorted.sort();
    sorted.dedup_by(|a, b| a.0 == b.0);
    assert_eq!(sorted, env, "environment not sorted by unique name");
    for (name, value) in &env {
        assert!(secret_pattern(name).is_none(), "secret-looking {name} reaches the command");
        assert!(
            value != "planted" || profile.set_env.get(name).is_some_and(|v| v == "planted"),
            "{name} carries a planted secret"
        );
    }
    if validate_profile("fuzz", profile).is_ok() {
        for (name, value) in &profile.set_env {
            assert!(env.iter().any(|(n, v)| n == name && v == value), "set_env {name} lost");
        }
    }
}
