//! What this machine really enforces, observed by running probes through the launcher
//! (`warrant doctor`), and what a profile's sandbox gets from those observations. Also the two
//! probe *targets* the launcher runs inside a sandbox (a socket, and egress through the proxy).

use std::io::Write;
use std::path::Path;
use std::process::Command;

use serde::Serialize;
use warrant_core::CanonicalPath;
use warrant_core::config::{Enforcement, Isolation, NetworkPolicy, ResourceLimits};

use super::{
    Launcher, Mechanism, OverlaySpec, PROBE_EGRESS, PROBE_SOCKET, REPORT_PREFIX, SandboxPlan,
    SandboxReport, short_name,
};

/// The probe target behind [`PROBE_SOCKET`].
pub(super) fn probe_socket() -> i32 {
    match std::net::TcpListener::bind("127.0.0.1:0") {
        Ok(_) => 0,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => 3,
        Err(_) => 4,
    }
}

/// The probe target behind [`PROBE_EGRESS`].
pub(super) fn probe_egress(args: &[String]) -> i32 {
    use std::io::Read;
    let direct = args
        .first()
        .and_then(|p| p.parse::<u16>().ok())
        .is_some_and(|port| std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
    let refused = std::env::var("HTTP_PROXY")
        .ok()
        .and_then(|url| url.strip_prefix("http://").map(str::to_owned))
        .and_then(|addr| std::net::TcpStream::connect(addr).ok())
        .and_then(|mut s| {
            s.write_all(b"CONNECT probe.invalid:443 HTTP/1.1\r\nHost: probe.invalid:443\r\n\r\n")
                .ok()?;
            let mut buf = [0u8; 12];
            s.read_exact(&mut buf).ok()?;
            Some(buf.starts_with(b"HTTP/1.1 403"))
        })
        .unwrap_or(false);
    match (direct, refused) {
        (false, true) => 0,
        (true, true) => 11,
        (false, false) => 12,
        (true, false) => 13,
    }
}

/// One row of `warrant doctor`: a mechanism, whether this machine really enforces it (observed
/// by trying, in a child, through the launcher), and what was seen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProbeRow {
    pub mechanism: &'static str,
    pub available: bool,
    pub detail: String,
}

/// What a profile's sandbox needs from the probe table: the rows whose absence it cannot do
/// without (`warrant doctor` says what each profile gets from this).
pub fn rows_needed(config: &warrant_core::config::SandboxConfig) -> Vec<&'static str> {
    let mut out = vec![
        "sandbox",
        "sandbox launcher",
        "session",
        "no_new_privs",
        "landlock",
        "seccomp",
        "landlock observed",
    ];
    if config.isolation == Isolation::Namespaces {
        // Not "overlay observed": without overlays contained commands fall back to being
        // judged by their argv (see [`profile_verdict`]), they are not refused.
        out.extend(["view", "view observed"]);
    }
    if !config.denied.is_empty() {
        out.push("denied observed");
    }
    if config.limits.processes.is_some() {
        out.extend(["process_limit", "process limit observed"]);
    }
    match config.network {
        NetworkPolicy::Host => {}
        NetworkPolicy::None => {
            out.extend(["network_namespace", "network observed", "netns observed"]);
        }
        NetworkPolicy::Allow(_) => out.extend([
            "network_namespace",
            "netns observed",
            "egress_proxy",
            "egress proxy observed",
        ]),
    }
    out
}

/// What a sandboxed profile gets on a machine whose probes gave `rows`: whether it is fine
/// (fully enforced, or `best_effort` running with less) and the sentence doctor shows. Only the
/// rows the profile needs count (a host-network profile does not need the namespace).
pub fn profile_verdict(
    config: &warrant_core::config::SandboxConfig,
    rows: &[ProbeRow],
) -> (bool, String) {
    let needed = rows_needed(config);
    let lacking: Vec<&str> = rows
        .iter()
        .filter(|r| !r.available && needed.contains(&r.mechanism))
        .map(|r| r.mechanism)
        .collect();
    // Only a contained profile's commands are layered (and judged by their changeset).
    let contained = warrant_core::config::ProfileConfig {
        sandbox: Some(config.clone()),
        ..warrant_core::config::ProfileConfig::default()
    }
    .is_contained();
    let no_overlay = contained
        && rows
            .iter()
            .any(|r| r.mechanism == "overlay observed" && !r.available);
    match (config.enforcement, lacking.is_empty()) {
        (_, true) if no_overlay => (
            true,
            "enforced here, but WITHOUT OVERLAYS: its commands write to the workspace directly and are judged by their argv before they run (a destructive argv asks a person first), not by what they changed".to_owned(),
        ),
        (_, true) => (true, "fully enforced here".to_owned()),
        (Enforcement::BestEffort, false) => (
            true,
            format!(
                "runs with less (best_effort), lacking: {}",
                lacking.join(", ")
            ),
        ),
        (Enforcement::Required, false) => (
            false,
            format!(
                "commands will be REFUSED (required), lacking: {}",
                lacking.join(", ")
            ),
        ),
    }
}

/// Probe what this machine enforces: run the launcher under `best_effort` plans over a scratch
/// directory in `scratch` (which must exist and be writable): `sh` trying a read and a write
/// outside the roots and a read of a denied `.env`; `sh` starting more processes than its limit;
/// the launcher itself trying an AF_INET socket; and, under an empty allowlist, the launcher
/// trying a direct connection to a host listener and a CONNECT through the egress proxy.
pub fn probe(launcher: &Launcher, scratch: &Path) -> Vec<ProbeRow> {
    let mut rows = Vec::new();
    let mut row = |mechanism: &'static str, available: bool, detail: String| {
        rows.push(ProbeRow {
            mechanism,
            available,
            detail,
        });
    };
    let ws = scratch.join("ws");
    let outside = scratch.join("outside");
    let prepared = std::fs::create_dir_all(&ws)
        .and_then(|()| std::fs::create_dir_all(&outside))
        .and_then(|()| std::fs::write(outside.join("secret"), "probe-secret"))
        .and_then(|()| std::fs::write(ws.join(".env"), "probe-denied"));
    let plan = prepared
        .map_err(|e| format!("cannot prepare {}: {e}", scratch.display()))
        .and_then(|()| probe_plan(launcher, &ws));
    let plan = match plan {
        Ok(plan) => plan,
        Err(e) => {
            row("sandbox", false, e);
            return rows;
        }
    };
    // Under a view, the namespace's first process is this very script.
    let script = format!(
        "cat {o}/secret; echo x > {o}/planted; cat .env; tr '\\0' ' ' < /proc/1/cmdline; echo; ls /proc | grep -c '^[0-9]'",
        o = outside.display()
    );
    let sh = |s: String| vec!["sh".to_owned(), "-c".to_owned(), s];
    let fs_run = run_probe(launcher, &plan, &ws, &sh(script));
    let forky = SandboxPlan {
        limits: ResourceLimits {
            processes: Some(8),
            ..ResourceLimits::default()
        },
        ..plan.clone()
    };
    let fork_run = run_probe(
        launcher,
        &forky,
        &ws,
        &sh("(for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do sleep 0.2 & done; wait) 2>&1; echo end".to_owned()),
    );
    let mut self_argv = vec![launcher.program.display().to_string()];
    self_argv.extend(launcher.prefix_args.iter().cloned());
    let net_run = run_probe(
        launcher,
        &plan,
        &ws,
        &[self_argv.clone(), vec![PROBE_SOCKET.to_owned()]].concat(),
    );
    let egress_run = probe_egress_run(launcher, &plan, &ws, &self_argv);
    let overlay_run = probe_overlay(launcher, &plan, &ws, scratch);

    match &fs_run {
        Err(e) => row("sandbox launcher", false, e.clone()),
        Ok((report, _, _)) => {
            let mut mechanisms = plan.requested();
            mechanisms.insert(1, Mechanism::ProcessLimit);
            mechanisms.sort();
            for mechanism in mechanisms {
                let report = match mechanism {
                    Mechanism::ProcessLimit => fork_run.as_ref().map(|r| &r.0),
                    Mechanism::Session
                    | Mechanism::View
                    | Mechanism::Rlimits
                    | Mechanism::NetworkNamespace
                    | Mechanism::EgressProxy
                    | Mechanism::NoNewPrivs
                    | Mechanism::Landlock
                    | Mechanism::Seccomp => Ok(report),
                };
                let name = short_name(mechanism);
                match report {
                    Err(e) => row(name, false, e.clone()),
                    Ok(report) => {
                        match report.not_applied.iter().find(|n| n.mechanism == mechanism) {
                            Some(n) => row(name, false, n.reason.clone()),
                            None if mechanism == Mechanism::Landlock => {
                                row(name, true, format!("applied (ABI {})", report.landlock_abi))
                            }
                            None => row(name, true, "applied".to_owned()),
                        }
                    }
                }
            }
        }
    }
    match &egress_run {
        Ok((report, _, _)) => match report
            .not_applied
            .iter()
            .find(|n| n.mechanism == Mechanism::EgressProxy)
        {
            Some(n) => row("egress_proxy", false, n.reason.clone()),
            None => row("egress_proxy", true, "applied".to_owned()),
        },
        Err(e) => row("egress_proxy", false, e.clone()),
    }
    if let Ok((report, stdout, _)) = &fs_run {
        let read_blocked = !stdout.contains("probe-secret");
        let write_blocked = !outside.join("planted").exists();
        let blocked = |b: bool| if b { "blocked" } else { "NOT blocked" };
        row(
            "landlock observed",
            read_blocked && write_blocked,
            format!(
                "ABI {}; read outside the roots {}, write outside the roots {}",
                report.landlock_abi,
                blocked(read_blocked),
                blocked(write_blocked),
            ),
        );
        let own_pid_1 = stdout.contains("/proc/1/cmdline");
        let view_on = report.applied.contains(&Mechanism::View);
        row(
            "view observed",
            view_on && read_blocked && write_blocked && own_pid_1,
            if view_on {
                format!(
                    "outside the roots {}; /proc shows {}",
                    if read_blocked && write_blocked {
                        "out of view"
                    } else {
                        "REACHABLE"
                    },
                    if own_pid_1 {
                        "only the command's own processes"
                    } else {
                        "other processes"
                    }
                )
            } else {
                "no view (the namespaces could not be made)".to_owned()
            },
        );
        match &overlay_run {
            Ok(true) => row(
                "overlay observed",
                true,
                "a write landed in the copy-on-write layer, not in the workspace".to_owned(),
            ),
            Ok(false) => row(
                "overlay observed",
                false,
                "a write did not land in the copy-on-write layer; changes could not be judged before they land".to_owned(),
            ),
            Err(e) => row("overlay observed", false, e.clone()),
        }
        let denied_blocked = !stdout.contains("probe-denied");
        row(
            "denied observed",
            denied_blocked,
            format!(
                "read of .env inside a read root {}",
                blocked(denied_blocked)
            ),
        );
    }
    match &fork_run {
        Ok((_, stdout, _)) => {
            let bounded = stdout.contains("fork") && stdout.contains("end");
            row(
                "process limit observed",
                bounded,
                if bounded {
                    "the 9th process could not be started (limit 8)".to_owned()
                } else {
                    "16 processes started under a limit of 8".to_owned()
                },
            );
        }
        Err(e) => row("process limit observed", false, e.clone()),
    }
    match net_run {
        Ok((_, _, code)) => row(
            "network observed",
            code == Some(3),
            match code {
                Some(3) => "AF_INET socket refused (EPERM)".to_owned(),
                Some(0) => "an AF_INET socket could be opened".to_owned(),
                other => format!("probe ended with {other:?}"),
            },
        ),
        Err(e) => row("network observed", false, e),
    }
    match egress_run {
        Ok((_, log, code)) => {
            let isolated = matches!(code, Some(0 | 12));
            row(
                "netns observed",
                isolated,
                if isolated {
                    "a listener on the host's 127.0.0.1 is unreachable".to_owned()
                } else {
                    format!(
                        "a listener on the host's 127.0.0.1 is reachable (probe ended with {code:?})"
                    )
                },
            );
            let recorded = log.refused.iter().any(|a| a.target == "probe.invalid:443");
            let proxied = matches!(code, Some(0 | 11)) && recorded;
            row(
                "egress proxy observed",
                proxied,
                if proxied {
                    "CONNECT to a host off the allowlist refused (403) and recorded".to_owned()
                } else {
                    format!("the proxy did not refuse and record (probe ended with {code:?})")
                },
            );
        }
        Err(e) => {
            row("netns observed", false, e.clone());
            row("egress proxy observed", false, e);
        }
    }
    rows
}

/// A write under a view whose workspace is a copy-on-write layer: `Ok(true)` when it landed in
/// the layer and not in the workspace.
fn probe_overlay(
    launcher: &Launcher,
    plan: &SandboxPlan,
    ws: &Path,
    scratch: &Path,
) -> Result<bool, String> {
    let layer = scratch.join("layer");
    let (upper, work) = (layer.join("upper"), layer.join("work"));
    std::fs::create_dir_all(&upper)
        .and_then(|()| std::fs::create_dir_all(&work))
        .map_err(|e| format!("cannot prepare {}: {e}", layer.display()))?;
    let lower = plan
        .write_roots
        .first()
        .cloned()
        .ok_or_else(|| "the probe plan has no write root".to_owned())?;
    let plan = SandboxPlan {
        overlay: Some(OverlaySpec {
            lower,
            upper: upper.clone(),
            work,
        }),
        ..plan.clone()
    };
    let argv = ["sh", "-c", "echo layered > probe-layer.txt"].map(str::to_owned);
    let (_, _, code) = run_probe(launcher, &plan, ws, &argv)?;
    Ok(code == Some(0)
        && upper.join("probe-layer.txt").exists()
        && !ws.join("probe-layer.txt").exists())
}

/// Whether this machine can hold a contained command's writes in a copy-on-write layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Overlays {
    /// A write under the view landed in the layer, not in the workspace.
    Available,
    /// The view could be built but not the overlay in it (why): contained commands are judged
    /// by their argv and write to the workspace directly.
    Unavailable(String),
    /// The view itself could not be built (why): contained commands are refused, as the
    /// default confinement requires; nothing to fall back to.
    NoView(String),
}

/// Try once per process (the answer is cached): a view over a scratch workspace under
/// `scratch` (created and removed here) whose writes go to a layer beside it, as a contained
/// command's would. A positive answer is also remembered in `scratch` for this boot of the
/// machine and this launcher binary ([`known_available`]), so the next process skips the
/// launch (a whole view, 10–30 ms). Only "available" is remembered, and wrongly remembered it
/// fails closed: a contained command's plan then asks for an overlay the launcher cannot
/// mount, and the command is refused, never run unjudged. `warrant doctor` always probes.
pub fn overlays(launcher: &Launcher, scratch: &Path) -> Overlays {
    static ONCE: std::sync::OnceLock<Overlays> = std::sync::OnceLock::new();
    ONCE.get_or_init(|| {
        let known = known_available(launcher, scratch);
        if known.as_ref().is_some_and(|k| k.is_file()) {
            return Overlays::Available;
        }
        let dir = scratch.join(format!("overlay-probe-{:016x}", rand::random::<u64>()));
        let answer = overlays_in(launcher, &dir);
        // overlayfs leaves `work/work` with mode 000.
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(
            dir.join("layer/work/work"),
            std::fs::Permissions::from_mode(0o700),
        );
        let _ = std::fs::remove_dir_all(&dir);
        if let (Overlays::Available, Some(known)) = (&answer, known) {
            let _ = std::fs::write(known, b"");
        }
        answer
    })
    .clone()
}

/// Where [`overlays`] remembers a positive answer: a file in `scratch` named for this boot
/// (`/proc/sys/kernel/random/boot_id`) and the launcher binary (its size and modification
/// time), so a reboot or another build probes again. `None` where either cannot be read.
pub fn known_available(launcher: &Launcher, scratch: &Path) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let boot = boot.trim();
    if boot.is_empty() || !boot.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        return None;
    }
    let meta = std::fs::metadata(&launcher.program).ok()?;
    Some(scratch.join(format!(
        "overlays-available-{boot}-{}-{}.{}",
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec()
    )))
}

/// [`overlays`] in `dir`, uncached.
pub fn overlays_in(launcher: &Launcher, dir: &Path) -> Overlays {
    let ws = dir.join("ws");
    if let Err(e) = std::fs::create_dir_all(&ws) {
        return Overlays::NoView(format!("cannot prepare {}: {e}", ws.display()));
    }
    let plan = match probe_plan(launcher, &ws) {
        Ok(plan) => plan,
        Err(e) => return Overlays::NoView(e),
    };
    // The usual answer in one launch; only a failure needs telling apart.
    let layered = probe_overlay(launcher, &plan, &ws, dir);
    if layered == Ok(true) {
        return Overlays::Available;
    }
    // The view alone: without it there is nothing to fall back to.
    let argv = ["sh", "-c", "true"].map(str::to_owned);
    match run_probe(launcher, &plan, &ws, &argv) {
        Ok((report, _, _)) if report.applied.contains(&Mechanism::View) => {}
        Ok((report, _, _)) => {
            return Overlays::NoView(
                report
                    .not_applied
                    .iter()
                    .find(|n| n.mechanism == Mechanism::View)
                    .map_or_else(
                        || "the view was not applied".to_owned(),
                        |n| n.reason.clone(),
                    ),
            );
        }
        Err(e) => return Overlays::NoView(e),
    }
    Overlays::Unavailable(match layered {
        Ok(_) => "a write under the view did not land in the copy-on-write layer".to_owned(),
        Err(e) => e,
    })
}

fn probe_egress_run(
    launcher: &Launcher,
    plan: &SandboxPlan,
    ws: &Path,
    self_argv: &[String],
) -> Result<(SandboxReport, crate::egress::EgressLog, Option<i32>), String> {
    let host = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| format!("cannot open a host listener: {e}"))?;
    let port = host
        .local_addr()
        .map_err(|e| format!("host listener: {e}"))?
        .port();
    let proxy = crate::egress::EgressProxy::start(crate::egress::Allowlist(Vec::new()))
        .map_err(|e| format!("cannot start the egress proxy: {e}"))?;
    let plan = SandboxPlan {
        network: NetworkPolicy::Allow(Vec::new()),
        egress_socket: Some(proxy.socket().to_path_buf()),
        ..plan.clone()
    };
    let argv = [
        self_argv.to_vec(),
        vec![PROBE_EGRESS.to_owned(), port.to_string()],
    ]
    .concat();
    let run = run_probe(launcher, &plan, ws, &argv);
    let log = proxy.finish();
    run.map(|(report, _, code)| (report, log, code))
}

fn probe_plan(launcher: &Launcher, ws: &Path) -> Result<SandboxPlan, String> {
    let cp = |p: &Path| {
        let real = std::fs::canonicalize(p).map_err(|e| format!("{}: {e}", p.display()))?;
        let text = real
            .to_str()
            .ok_or_else(|| format!("{} is not UTF-8", real.display()))?;
        CanonicalPath::from_normalized(text).map_err(|e| e.to_string())
    };
    let ws = cp(ws)?;
    let mut read_roots: Vec<CanonicalPath> = warrant_core::config::DEFAULT_READ_ROOTS
        .iter()
        .filter(|r| **r != "." && Path::new(r).exists())
        .map(|r| cp(Path::new(r)))
        .collect::<Result<_, _>>()?;
    if let Some(dir) = launcher.program.parent() {
        read_roots.push(cp(dir)?);
    }
    read_roots.push(ws.clone());
    Ok(SandboxPlan {
        build: super::BUILD_ID.to_owned(),
        enforcement: Enforcement::BestEffort,
        read_roots,
        write_roots: vec![ws],
        protected: Vec::new(),
        network: NetworkPolicy::None,
        limits: ResourceLimits::default(),
        denied_names: warrant_core::config::DEFAULT_DENIED
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
        denied_paths: Vec::new(),
        egress_socket: None,
        overlay: None,
        view: true,
        aliases: Vec::new(),
        home: None,
        toolchains: Vec::new(),
        scratch: Vec::new(),
        caches: Vec::new(),
        cache_layers: Vec::new(),
        census_memory: None,
        end_on_stdin: false,
        outside_links: warrant_core::config::OutsideLinks::Mask,
        simulate_unavailable: None,
        test_end_on_command_stdin: false,
    })
}

/// Run one probe; the report, stdout, and exit code. Whatever it left in its cgroup is killed.
fn run_probe(
    launcher: &Launcher,
    plan: &SandboxPlan,
    cwd: &Path,
    argv: &[String],
) -> Result<(SandboxReport, String, Option<i32>), String> {
    let child = Command::new(&launcher.program)
        .args(launcher.args(plan, argv).map_err(|e| e.to_string())?)
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| {
            format!(
                "cannot start the launcher {}: {e}",
                launcher.program.display()
            )
        })?;
    let pid = child.id();
    let out = child.wait_with_output();
    crate::cgroup::release(pid);
    let out = out.map_err(|e| format!("probe: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report = stderr
        .lines()
        .next()
        .and_then(|l| l.strip_prefix(REPORT_PREFIX))
        .and_then(|json| serde_json::from_str::<SandboxReport>(json.trim()).ok())
        .ok_or_else(|| format!("the launcher did not report: {}", stderr.trim()))?;
    Ok((
        report,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code(),
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;
    use warrant_core::config::SandboxConfig;

    /// The remembered answer is named for this boot and this launcher binary: another build
    /// (a different size or modification time) does not find the last one's.
    #[test]
    fn a_remembered_answer_belongs_to_one_boot_and_one_launcher() {
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("warrant");
        std::fs::write(&program, b"one build").unwrap();
        let launcher = Launcher {
            program: program.clone(),
            prefix_args: vec![],
        };
        let first = known_available(&launcher, dir.path()).unwrap();
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
        let name = first.file_name().unwrap().to_str().unwrap().to_owned();
        assert!(
            name.starts_with(&format!("overlays-available-{}-9-", boot.trim())),
            "{name}"
        );
        assert_eq!(known_available(&launcher, dir.path()), Some(first.clone()));
        std::fs::write(&program, b"another build").unwrap();
        assert_ne!(known_available(&launcher, dir.path()), Some(first));
        let gone = Launcher {
            program: dir.path().join("missing"),
            prefix_args: vec![],
        };
        assert_eq!(known_available(&gone, dir.path()), None);
    }

    /// Scenario table: which missing probe rows turn which profile shapes into a refusal.
    #[test]
    fn profile_verdicts_count_only_what_the_profile_needs() {
        let all = [
            "session",
            "process_limit",
            "network_namespace",
            "no_new_privs",
            "landlock",
            "seccomp",
            "egress_proxy",
            "landlock observed",
            "denied observed",
            "process limit observed",
            "network observed",
            "netns observed",
            "egress proxy observed",
        ];
        let rows = |missing: &[&str]| -> Vec<ProbeRow> {
            all.iter()
                .map(|m| ProbeRow {
                    mechanism: m,
                    available: !missing.contains(m),
                    detail: String::new(),
                })
                .collect()
        };
        let shape = |network: NetworkPolicy, processes: Option<u64>, enforcement| SandboxConfig {
            enforcement,
            network,
            limits: ResourceLimits {
                processes,
                ..ResourceLimits::default()
            },
            ..SandboxConfig::default()
        };
        let req = Enforcement::Required;
        let none = shape(NetworkPolicy::None, None, req);
        let host = shape(NetworkPolicy::Host, None, req);
        let allow = shape(NetworkPolicy::Allow(vec!["a.b:1".into()]), None, req);
        let forky = shape(NetworkPolicy::Host, Some(8), req);
        let best = shape(NetworkPolicy::None, None, Enforcement::BestEffort);
        let no_ns = rows(&["network_namespace", "netns observed"]);
        let no_cgroup = rows(&["process_limit", "process limit observed"]);
        let no_proxy = rows(&["egress_proxy", "egress proxy observed"]);
        let got: Vec<(bool, String)> = vec![
            profile_verdict(&none, &rows(&[])),
            profile_verdict(&none, &no_ns),
            profile_verdict(&host, &no_ns),
            profile_verdict(&allow, &no_ns),
            profile_verdict(&allow, &no_proxy),
            profile_verdict(&none, &no_proxy),
            profile_verdict(&forky, &no_cgroup),
            profile_verdict(&none, &no_cgroup),
            profile_verdict(&best, &no_ns),
            profile_verdict(&host, &rows(&["landlock observed"])),
        ];
        let refused = |what: &str| {
            (
                false,
                format!("commands will be REFUSED (required), lacking: {what}"),
            )
        };
        let fully = || (true, "fully enforced here".to_owned());
        assert_eq!(
            got,
            vec![
                fully(),
                refused("network_namespace, netns observed"),
                fully(),
                refused("network_namespace, netns observed"),
                refused("egress_proxy, egress proxy observed"),
                fully(),
                refused("process_limit, process limit observed"),
                fully(),
                (
                    true,
                    "runs with less (best_effort), lacking: network_namespace, netns observed"
                        .to_owned()
                ),
                refused("landlock observed"),
            ]
        );
        // Without overlays a viewed profile still runs, judged by argv, and says so; a profile
        // outside the view (an allowlist) is not concerned.
        let mut no_overlay = rows(&[]);
        no_overlay.push(ProbeRow {
            mechanism: "overlay observed",
            available: false,
            detail: String::new(),
        });
        let (ok, said) = profile_verdict(&none, &no_overlay);
        assert!(
            ok && said.starts_with("enforced here, but WITHOUT OVERLAYS"),
            "{said}"
        );
        assert_eq!(profile_verdict(&allow, &no_overlay), fully());
    }
}
