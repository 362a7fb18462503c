//! The Landlock part of the launcher: the filesystem rules of a plan (per-entry grants where a
//! write root holds protected or denied names), plus the scopes that cut the command off from
//! signalling Warrant or reaching its abstract sockets.

use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, BitFlags, LandlockStatus, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope,
};
use warrant_core::CanonicalPath;
use warrant_core::config::Enforcement;

use super::SandboxPlan;

/// The Landlock ABI whose filesystem rights are handled (best effort below it).
const LANDLOCK_ABI: ABI = ABI::V6;

/// `in_view`: the mounts already keep `.git` read-only and mask the denied entries, so the
/// rules only bound the command to its view's trees (and need not split directories, which
/// would keep it from creating entries at the workspace root).
pub(super) fn apply_landlock(
    plan: &SandboxPlan,
    abi_seen: &mut u32,
    in_view: bool,
) -> Result<(), String> {
    let read = AccessFs::from_read(LANDLOCK_ABI);
    let all = AccessFs::from_all(LANDLOCK_ABI);
    let mut grants: Vec<(PathBuf, BitFlags<AccessFs>)> = Vec::new();
    if in_view {
        // Everything in the view may be read (the mounts decide what is there, and masks are
        // unreadable); writes only where the view is writable.
        grants.push((PathBuf::from("/"), read));
        for root in &plan.write_roots {
            grants.push((root.as_path().to_path_buf(), all));
        }
        grants.push((PathBuf::from("/tmp"), all));
        grants.push((PathBuf::from("/dev"), all));
        if let Some(home) = &plan.home {
            grants.push((home.clone(), all));
        }
        // Toolchain caches, each a layer of the workspace's own over the real cache.
        for cache in &plan.cache_layers {
            grants.push((cache.lower.as_path().to_path_buf(), all));
        }
    } else {
        // Toolchain trees in the home directory are too large to search per command.
        let home = plan.home.as_ref();
        let roots: Vec<&Path> = plan
            .read_roots
            .iter()
            .chain(&plan.write_roots)
            .map(CanonicalPath::as_path)
            .filter(|r| {
                plan.write_roots.iter().any(|w| r.starts_with(w.as_path()))
                    || !(home.as_ref().is_some_and(|h| r.starts_with(h))
                        || plan.toolchains.iter().any(|t| r.starts_with(t.as_path())))
            })
            .collect();
        let denied = plan.find_denied(&roots)?;
        let mut special: std::collections::BTreeMap<PathBuf, BitFlags<AccessFs>> = plan
            .protected
            .iter()
            .map(|p| (p.as_path().to_path_buf(), read))
            .collect();
        for path in denied {
            special.insert(path, BitFlags::empty());
        }
        for root in &plan.read_roots {
            crate::grants::root_grants(root.as_path(), read, &special, &mut grants)?;
        }
        for root in &plan.write_roots {
            crate::grants::root_grants(root.as_path(), all, &special, &mut grants)?;
        }
        // Shell redirections to /dev/null are everywhere; it is harmless to write.
        grants.push((PathBuf::from("/dev/null"), all));
    }

    let mut ruleset = Ruleset::default()
        .handle_access(all)
        .map_err(|e| format!("Landlock ruleset: {e}"))?
        // No signals to, and no abstract UNIX sockets of, processes outside the sandbox (Warrant).
        .scope(Scope::from_all(LANDLOCK_ABI))
        .map_err(|e| format!("Landlock scope: {e}"))?
        .create()
        .map_err(|e| format!("Landlock ruleset: {e}"))?;
    for (path, access) in grants {
        let fd = match PathFd::new(&path) {
            Ok(fd) => fd,
            // A configured root that does not exist here (/lib64 on aarch64) grants nothing.
            Err(_) if !path.exists() => continue,
            Err(e) => return Err(format!("cannot open {} for Landlock: {e}", path.display())),
        };
        let access = if path.is_dir() {
            access
        } else {
            access & AccessFs::from_file(LANDLOCK_ABI)
        };
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| format!("Landlock rule for {}: {e}", path.display()))?;
    }
    let status = ruleset
        .restrict_self()
        .map_err(|e| format!("Landlock restrict_self: {e}"))?;
    if let LandlockStatus::Available { effective_abi, .. } = status.landlock {
        *abi_seen = effective_abi as u32;
    }
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok(()),
        RulesetStatus::PartiallyEnforced => match plan.enforcement {
            Enforcement::BestEffort => Ok(()),
            Enforcement::Required => Err(format!(
                "the kernel enforces Landlock only partially (ABI {abi_seen}, below {})",
                LANDLOCK_ABI as u32
            )),
        },
        RulesetStatus::NotEnforced => Err("the kernel does not enforce Landlock".to_owned()),
    }
}
