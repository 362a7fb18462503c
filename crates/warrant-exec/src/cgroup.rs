//! Process limit through the cgroup `pids` controller, which (unlike RLIMIT_NPROC) also binds
//! root. The launcher makes `<pids>/warrant/<launcher-pid>`, sets `pids.max` and moves itself in
//! before `exec`; Warrant kills whatever is left in it and removes it after the command ended
//! ([`release`]), so nothing started by the command outlives the call. A command without a
//! process limit joins one with `pids.max = max` for that cleanup alone. v1 (`/sys/fs/cgroup/pids`)
//! and v2 (the unified root with `pids` in `cgroup.controllers`) are used when writable; neither
//! is available to an unprivileged user without a delegated subtree.

use std::path::PathBuf;
use std::time::{Duration, Instant};

const V1: &str = "/sys/fs/cgroup/pids";
const V2: &str = "/sys/fs/cgroup";

/// The parent cgroup Warrant uses, and whether it is v2.
fn base() -> Option<(PathBuf, bool)> {
    if std::path::Path::new(V1).join("pids.max").exists()
        || std::path::Path::new(V1).join("cgroup.procs").exists()
    {
        return Some((PathBuf::from(V1).join("warrant"), false));
    }
    let controllers = std::fs::read_to_string(format!("{V2}/cgroup.controllers")).ok()?;
    controllers
        .split_whitespace()
        .any(|c| c == "pids")
        .then(|| (PathBuf::from(V2).join("warrant"), true))
}

/// The cgroup of the command started by launcher `pid`.
pub fn dir_for(pid: u32) -> Option<PathBuf> {
    base().map(|(b, _)| b.join(pid.to_string()))
}

/// Put this process into a fresh pids cgroup of at most `max` tasks.
pub fn enter(max: u64) -> Result<(), String> {
    join(&max.to_string())
}

/// Put this process into a fresh pids cgroup with no limit (only so it can be cleaned up).
pub fn enter_unlimited() -> Result<(), String> {
    join("max")
}

fn join(max: &str) -> Result<(), String> {
    let (base, v2) = base().ok_or_else(|| {
        "no cgroup pids controller is mounted (neither v1 /sys/fs/cgroup/pids nor v2)".to_owned()
    })?;
    let io = |what: &str, e: std::io::Error| format!("cgroup pids: cannot {what}: {e}");
    std::fs::create_dir_all(&base).map_err(|e| io(&format!("create {}", base.display()), e))?;
    if v2 {
        std::fs::write(format!("{V2}/cgroup.subtree_control"), "+pids")
            .and_then(|()| std::fs::write(base.join("cgroup.subtree_control"), "+pids"))
            .map_err(|e| io("enable the pids controller", e))?;
    }
    let pid = std::process::id();
    let dir = base.join(pid.to_string());
    match std::fs::create_dir(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io(&format!("create {}", dir.display()), e)),
    }
    std::fs::write(dir.join("pids.max"), max).map_err(|e| io("set pids.max", e))?;
    std::fs::write(dir.join("cgroup.procs"), pid.to_string())
        .map_err(|e| io("join the cgroup", e))?;
    Ok(())
}

/// After the command: kill every process still in its cgroup, then remove the cgroup. Returns
/// how many processes were left behind and killed.
pub fn release(pid: u32) -> usize {
    let Some(dir) = dir_for(pid) else {
        return 0;
    };
    if !dir.exists() {
        return 0;
    }
    let mut killed = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        let pids: Vec<i32> = procs
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        if pids.is_empty() {
            break;
        }
        for p in pids {
            if let Some(pid) = rustix::process::Pid::from_raw(p)
                && rustix::process::kill_process(pid, rustix::process::Signal::KILL).is_ok()
            {
                killed.insert(p);
            }
        }
        if Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // The kernel refuses while a killed process is still exiting; retry briefly.
    while std::fs::remove_dir(&dir).is_err() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    killed.len()
}

/// Whether a pids cgroup could be made here (doctor and best effort).
pub fn available() -> bool {
    base().is_some()
}
