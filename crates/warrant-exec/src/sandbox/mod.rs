//! OS confinement of one command: a pure plan built from a profile, and the launcher that applies
//! it in a separate process just before `exec` (new session, rlimits, `no_new_privs`, Landlock,
//! seccomp), so Warrant itself is never sandboxed. The launcher fails loudly: when a mechanism the
//! plan requires cannot be applied it prints `warrant-sandbox: …` and exits 125 without running
//! the target.
//!
//! Limits (Linux only, x86_64/aarch64 for seccomp):
//! - Landlock cannot subtract: a protected name inside a write root (`.git`) is kept read-only,
//!   and a denied name (`.env`) unreadable, by splitting the directories that hold them and
//!   granting per entry (see [`crate::grants`]), so entries created in a split directory *after*
//!   the plan was applied get no rights. A protected name that does not exist yet splits its
//!   parent too, so it cannot be created.
//! - `processes` uses the cgroup `pids` controller (which binds root too; see [`crate::cgroup`]),
//!   else RLIMIT_NPROC, which the kernel does not enforce for uid 0 (refused under `required`).
//! - `network = "none"` is a network namespace holding only `lo` plus a seccomp filter on
//!   `socket`/`socketpair` (AF_UNIX only); `network = { allow = [...] }` is a namespace whose only
//!   way out is Warrant's egress proxy (see [`crate::egress`], [`crate::netns`]), with sockets
//!   limited to AF_UNIX and IP. As root the namespace is not owned by a user namespace, so root
//!   keeps its capabilities inside it; `setns` is refused by seccomp.
//!
//! Rooms: the plan is here; `launcher.rs` applies it, `landlock.rs` and `seccomp.rs` are the two
//! kernel mechanisms it installs last, `probe.rs` observes what this machine really enforces.

mod landlock;
mod launcher;
mod probe;
mod seccomp;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use warrant_core::config::{
    Enforcement, Isolation, NetworkPolicy, OutsideLinks, ProfileConfig, ResourceLimits,
};
use warrant_core::path::canonicalize;
use warrant_core::{CanonicalPath, LinkResolver};

use crate::error::ExecError;

pub use launcher::{Launcher, LauncherChoice, SMALL_LAUNCHER, sandbox_main};
pub use probe::{Overlays, ProbeRow, overlays, overlays_in, probe, profile_verdict, rows_needed};

/// Exit status of the launcher when the sandbox could not be applied (the target never ran).
pub const SANDBOX_FAILED_EXIT: i32 = 125;
/// Prefix of the launcher's refusal message on stderr.
pub const FAILURE_PREFIX: &str = "warrant-sandbox:";
/// Prefix of the one report line the launcher writes on stderr before `exec`; spawn strips it.
pub const REPORT_PREFIX: &str = "warrant-sandbox-report:";

/// The identity of this build of the launcher (a digest of its sources, version, profile and
/// target; see `build.rs`). Every plan carries the identity of the build that made it
/// ([`SandboxPlan::build`]) and the launcher refuses a plan from another build, so a
/// `warrant-sandbox` left beside a newer `warrant` never applies a plan it may only partly
/// understand. `warrant-sandbox __build-id` prints it.
pub const BUILD_ID: &str = env!("WARRANT_SANDBOX_BUILD_ID");

/// Argument that makes the launcher print [`BUILD_ID`] and exit 0.
pub const PRINT_BUILD_ID: &str = "__build-id";

/// Argument that makes the launcher, run as a probe *target* inside a sandbox, try to open an
/// AF_INET socket: exit 0 when it could, 3 when the kernel refused (EPERM/EACCES), 4 otherwise.
pub const PROBE_SOCKET: &str = "__probe-socket";

/// Argument that makes the launcher, run as a probe target under an allowlist, try a direct TCP
/// connection to the host's `127.0.0.1:<port>` and then a CONNECT through `HTTP_PROXY` to a name
/// not on the list: exit 0 when the first failed and the proxy answered 403; otherwise 10 plus 1
/// (the direct connection worked) plus 2 (no 403 from the proxy).
pub const PROBE_EGRESS: &str = "__probe-egress";

/// Variables that point HTTP clients at the forwarder.
pub const PROXY_VARS: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

/// One confinement mechanism, in the order the launcher applies them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mechanism {
    Session,
    /// `limits.processes`: a cgroup pids limit, or RLIMIT_NPROC when not root.
    ProcessLimit,
    /// The command's own view (see [`crate::view`]): user, mount and PID namespaces, only the
    /// roots bound, a private home and `/tmp`, its own `/proc`, no capability after `exec`.
    View,
    Rlimits,
    /// A network namespace of its own (only `lo`).
    NetworkNamespace,
    /// The in-namespace forwarder to Warrant's egress proxy.
    EgressProxy,
    NoNewPrivs,
    Landlock,
    Seccomp,
}

/// A fully resolved sandbox: what the launcher applies. Built by [`SandboxPlan::from_profile`].
/// A field the launcher does not know refuses the plan (`deny_unknown_fields`): it must never
/// apply less than it was asked to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxPlan {
    /// The [`BUILD_ID`] of the build that made the plan; a launcher of another build refuses it.
    #[serde(default)]
    pub build: String,
    pub enforcement: Enforcement,
    /// Read + execute.
    pub read_roots: Vec<CanonicalPath>,
    /// Read + write (minus `protected`).
    pub write_roots: Vec<CanonicalPath>,
    /// Read-only even inside a write root.
    pub protected: Vec<CanonicalPath>,
    pub network: NetworkPolicy,
    pub limits: ResourceLimits,
    /// File-name patterns (`*` wildcard) no command may read inside any scanned root.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denied_names: Vec<String>,
    /// Paths no command may read or write, wherever they are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denied_paths: Vec<CanonicalPath>,
    /// The Unix socket of Warrant's egress proxy (set by the executor for an allowlist).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress_socket: Option<PathBuf>,
    /// The copy-on-write layer over the workspace, when the command's writes are to be judged
    /// before they land (set by the executor, never by [`SandboxPlan::from_profile`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlay: Option<OverlaySpec>,
    /// The command gets its own view of the machine ([`Mechanism::View`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub view: bool,
    /// Roots as configured that are links, recreated in the view: the path as written and
    /// what it resolved to (`/etc/localtime` → `/usr/share/zoneinfo/…`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<(PathBuf, CanonicalPath)>,
    /// The home directory `~/` roots were resolved against: private (an empty tmpfs) in the
    /// view, and never searched for denied names (toolchains there are too large to walk).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home: Option<PathBuf>,
    /// Read roots that are toolchains (configured as `~/…` or `$VAR`): never searched for
    /// denied names, which would mean walking every file of a Rust or Python installation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub toolchains: Vec<CanonicalPath>,
    /// Build-output directories whose deletions are a `change` (`SandboxConfig::scratch`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scratch: Vec<String>,
    /// Caches inside read-only toolchain trees that builds write to (`~/.cargo/registry`,
    /// `~/.cargo/git`, `~/go/pkg/mod`, see [`crate::view::TOOLCHAIN_CACHES`]), where they exist:
    /// in the view each is a copy-on-write layer of its own ([`Self::cache_layers`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caches: Vec<CanonicalPath>,
    /// The layers over `caches`, set by the executor: the real cache below (never written), a
    /// directory per workspace above (see [`crate::judged::cache_layers`]), so what one
    /// command fetched the next one in the same workspace finds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cache_layers: Vec<OverlaySpec>,
    /// Where the view's walk for denied names remembers what it listed (set by the executor,
    /// in Warrant's state directory; see [`crate::census`]). `None`: every walk lists it all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub census_memory: Option<PathBuf>,
    /// The launcher's standard input is the write end of a pipe the executor reads (set by the
    /// executor with a view): once the command's first process has ended, the launcher writes
    /// its wait status there, so the executor goes on while the launcher's exit tears the view
    /// down. The launcher moves it out of the way first: the command's standard input is
    /// `/dev/null`, and it never holds the channel.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub end_on_stdin: bool,
    /// Whether workspace files that have a name outside the workspace are masked in the view
    /// (`SandboxConfig::outside_links`).
    #[serde(default, skip_serializing_if = "OutsideLinks::is_mask")]
    pub outside_links: OutsideLinks,
    /// Test knob: the launcher behaves as if this mechanism were unavailable on this kernel.
    /// [`SandboxPlan::from_profile`] never sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulate_unavailable: Option<Mechanism>,
    /// Test knob, the negative control of the end channel: the launcher leaves it on the
    /// command's standard input. [`SandboxPlan::from_profile`] never sets it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub test_end_on_command_stdin: bool,
}

/// A copy-on-write layer: inside the command's view `lower` (the workspace) is mounted as an
/// overlay whose writes go to `upper`; the real `lower` is unchanged until Warrant has judged the
/// changeset read from `upper` (created, modified, deleted entries) and applied it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverlaySpec {
    /// The directory the command sees as writable (the workspace root).
    pub lower: CanonicalPath,
    /// Where the command's writes land: created empty by the caller, outside `lower`.
    pub upper: PathBuf,
    /// overlayfs' work directory: empty, on the same filesystem as `upper`.
    pub work: PathBuf,
}

impl SandboxPlan {
    /// The plan for `profile` in `workspace`, or `None` when the profile asks for no sandbox.
    /// Relative roots are relative to the workspace; every path is canonicalized through
    /// `links` (symlinks resolved, so a rule names what Landlock will see).
    pub fn from_profile(
        profile_name: &str,
        profile: &ProfileConfig,
        workspace: &CanonicalPath,
        links: &dyn LinkResolver,
    ) -> Result<Option<Self>, ExecError> {
        let Some(config) = &profile.sandbox else {
            return Ok(None);
        };
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute());
        // `~/x` is under the command's home; with no HOME such a root is left out.
        let expand = |p: &str| -> Option<String> {
            // `$VAR`: the directory a variable names (`$CARGO_HOME`), when it is set to an
            // absolute path that exists here; else the root is left out.
            if let Some(var) = p.strip_prefix('$') {
                return std::env::var_os(var)
                    .map(PathBuf::from)
                    .filter(|d| d.is_absolute() && d.exists())
                    .map(|d| d.to_string_lossy().into_owned());
            }
            match p.strip_prefix("~/") {
                Some(rest) => home
                    .as_ref()
                    .filter(|h| h.is_absolute())
                    .map(|h| h.join(rest).to_string_lossy().into_owned()),
                None => Some(p.to_owned()),
            }
        };
        let resolve = |p: &str| {
            canonicalize(workspace, p, links).map_err(|e| ExecError::SandboxPlan {
                profile: profile_name.to_owned(),
                message: format!("cannot resolve `{p}`: {e}"),
            })
        };
        let mut aliases = Vec::new();
        let mut toolchains = Vec::new();
        let mut caches = Vec::new();
        let mut resolve_all = |list: &[String]| -> Result<Vec<CanonicalPath>, ExecError> {
            let mut out = Vec::new();
            for (written, p) in list.iter().filter_map(|w| expand(w).map(|p| (w, p))) {
                let resolved = resolve(&p)?;
                if written.starts_with("~/") || written.starts_with('$') {
                    toolchains.push(resolved.clone());
                    caches.extend(crate::view::toolchain_caches(written, &resolved));
                }
                if Path::new(&p).is_absolute() && Path::new(&p) != resolved.as_path() {
                    aliases.push((PathBuf::from(&p), resolved.clone()));
                }
                out.push(resolved);
            }
            out.sort();
            out.dedup();
            Ok(out)
        };
        let write_roots = resolve_all(&config.write_roots)?;
        let read_roots = resolve_all(&config.read_roots)?;
        let mut protected = Vec::new();
        for name in &config.protected {
            if Path::new(name).is_absolute() {
                protected.push(resolve(name)?);
            } else {
                for root in &write_roots {
                    protected.push(canonicalize(root, name, links).map_err(|e| {
                        ExecError::SandboxPlan {
                            profile: profile_name.to_owned(),
                            message: format!("cannot resolve protected `{name}` in {root}: {e}"),
                        }
                    })?);
                }
            }
        }
        protected.sort();
        protected.dedup();
        let mut denied_names = Vec::new();
        let mut denied_paths = Vec::new();
        for entry in &config.denied {
            if entry.is_empty() {
                return Err(ExecError::SandboxPlan {
                    profile: profile_name.to_owned(),
                    message: "an empty entry in `denied`".to_owned(),
                });
            }
            if entry.contains('/') {
                denied_paths.push(resolve(entry)?);
            } else {
                denied_names.push(entry.clone());
            }
        }
        denied_paths.sort();
        denied_paths.dedup();
        if let NetworkPolicy::Allow(list) = &config.network {
            crate::egress::Allowlist::parse(list).map_err(|message| ExecError::SandboxPlan {
                profile: profile_name.to_owned(),
                message: format!("network allowlist: {message}"),
            })?;
        }
        Ok(Some(Self {
            build: BUILD_ID.to_owned(),
            enforcement: config.enforcement,
            read_roots,
            write_roots,
            protected,
            network: config.network.clone(),
            limits: config.limits.clone(),
            denied_names,
            denied_paths,
            egress_socket: None,
            overlay: None,
            // An allowlist too: the proxy's socket is bound into the view for its forwarder.
            view: config.isolation == Isolation::Namespaces,
            aliases,
            home,
            toolchains,
            scratch: config.scratch.clone(),
            caches: {
                caches.sort();
                caches.dedup();
                caches
            },
            cache_layers: Vec::new(),
            census_memory: None,
            end_on_stdin: false,
            outside_links: config.outside_links,
            simulate_unavailable: None,
            test_end_on_command_stdin: false,
        }))
    }

    /// Every entry under `roots` the plan denies: a name matching `denied_names`, and the
    /// `denied_paths` themselves (see [`crate::grants::find_denied`]).
    pub fn find_denied(&self, roots: &[&Path]) -> Result<Vec<PathBuf>, String> {
        let paths: Vec<PathBuf> = self
            .denied_paths
            .iter()
            .map(|p| p.as_path().to_path_buf())
            .collect();
        crate::grants::find_denied(roots, &self.denied_names, &paths)
    }

    /// The mechanisms this plan asks for.
    pub fn requested(&self) -> Vec<Mechanism> {
        let mut out = vec![Mechanism::Session];
        if self.limits.processes.is_some() {
            out.push(Mechanism::ProcessLimit);
        }
        if self.view {
            out.push(Mechanism::View);
        }
        let rlimits = ResourceLimits {
            processes: None,
            ..self.limits.clone()
        };
        if rlimits != ResourceLimits::default() {
            out.push(Mechanism::Rlimits);
        }
        match self.network {
            NetworkPolicy::Host => {}
            NetworkPolicy::None => out.push(Mechanism::NetworkNamespace),
            NetworkPolicy::Allow(_) => {
                out.push(Mechanism::NetworkNamespace);
                out.push(Mechanism::EgressProxy);
            }
        }
        out.push(Mechanism::NoNewPrivs);
        out.push(Mechanism::Landlock);
        out.push(Mechanism::Seccomp);
        out
    }
}

/// What the launcher actually put in force, as it reported before `exec`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxReport {
    pub enforcement: Enforcement,
    pub applied: Vec<Mechanism>,
    /// Requested but not in force (only under `best_effort`), with the reason.
    pub not_applied: Vec<NotApplied>,
    /// The Landlock ABI the kernel offered (0 when none).
    pub landlock_abi: u32,
    /// Without a process limit, the command still went into a pids cgroup (limit `max`) when
    /// one was writable, so whatever it leaves behind is killed when it ends.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tracked: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotApplied {
    pub mechanism: Mechanism,
    pub reason: String,
}

pub fn mechanism_name(m: Mechanism) -> &'static str {
    match m {
        Mechanism::Session => "a new session",
        Mechanism::ProcessLimit => "the process limit",
        Mechanism::View => "the command's own view (user, mount and PID namespaces)",
        Mechanism::Rlimits => "resource limits",
        Mechanism::NetworkNamespace => "a network namespace",
        Mechanism::EgressProxy => "the egress proxy",
        Mechanism::NoNewPrivs => "no_new_privs",
        Mechanism::Landlock => "Landlock",
        Mechanism::Seccomp => "the seccomp filter",
    }
}

/// The mechanism's name in tables (`warrant doctor`).
pub fn short_name(m: Mechanism) -> &'static str {
    match m {
        Mechanism::Session => "session",
        Mechanism::ProcessLimit => "process_limit",
        Mechanism::View => "view",
        Mechanism::Rlimits => "rlimits",
        Mechanism::NetworkNamespace => "network_namespace",
        Mechanism::EgressProxy => "egress_proxy",
        Mechanism::NoNewPrivs => "no_new_privs",
        Mechanism::Landlock => "landlock",
        Mechanism::Seccomp => "seccomp",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;
    use warrant_core::config::SandboxConfig;

    struct NoLinks;
    impl LinkResolver for NoLinks {
        fn read_link(&self, path: &Path) -> std::io::Result<Option<PathBuf>> {
            // /bin is a link into /usr on merged-/usr systems; model that.
            Ok((path == Path::new("/bin")).then(|| PathBuf::from("usr/bin")))
        }
    }

    fn cp(s: &str) -> CanonicalPath {
        CanonicalPath::from_normalized(s).unwrap()
    }

    #[test]
    fn no_sandbox_means_no_plan() {
        let plan =
            SandboxPlan::from_profile("p", &ProfileConfig::default(), &cp("/w"), &NoLinks).unwrap();
        assert_eq!(plan, None);
    }

    #[test]
    fn default_sandbox_plan_is_absolute_and_round_trips() {
        let profile = ProfileConfig {
            sandbox: Some(SandboxConfig {
                read_roots: vec![".".into(), "/usr".into(), "/bin".into(), "/etc".into()],
                write_roots: vec![".".into(), "build/../out".into()],
                denied: vec![".env".into(), "*.pem".into(), "secrets/prod.txt".into()],
                ..SandboxConfig::default()
            }),
            ..ProfileConfig::default()
        };
        let plan = SandboxPlan::from_profile("p", &profile, &cp("/w"), &NoLinks)
            .unwrap()
            .unwrap();
        assert_eq!(
            plan,
            SandboxPlan {
                build: BUILD_ID.to_owned(),
                enforcement: Enforcement::Required,
                read_roots: vec![cp("/etc"), cp("/usr"), cp("/usr/bin"), cp("/w")],
                write_roots: vec![cp("/w"), cp("/w/out")],
                protected: vec![
                    cp("/w/.git"),
                    cp("/w/.warrant"),
                    cp("/w/out/.git"),
                    cp("/w/out/.warrant")
                ],
                network: NetworkPolicy::None,
                limits: ResourceLimits::default(),
                denied_names: vec![".env".into(), "*.pem".into()],
                denied_paths: vec![cp("/w/secrets/prod.txt")],
                egress_socket: None,
                overlay: None,
                view: true,
                aliases: vec![(PathBuf::from("/bin"), cp("/usr/bin"))],
                home: plan.home.clone(),
                toolchains: plan.toolchains.clone(),
                scratch: plan.scratch.clone(),
                caches: plan.caches.clone(),
                cache_layers: Vec::new(),
                census_memory: None,
                end_on_stdin: false,
                outside_links: OutsideLinks::Mask,
                simulate_unavailable: None,
                test_end_on_command_stdin: false,
            }
        );
        let json = serde_json::to_string(&plan).unwrap();
        let back: SandboxPlan = serde_json::from_str(&json).unwrap();
        assert_eq!(back, plan);
        assert_eq!(
            plan.requested(),
            vec![
                Mechanism::Session,
                Mechanism::View,
                Mechanism::NetworkNamespace,
                Mechanism::NoNewPrivs,
                Mechanism::Landlock,
                Mechanism::Seccomp
            ]
        );
    }

    #[test]
    fn allowlist_config_shape_and_bad_entries() {
        let profile: ProfileConfig = toml::from_str(
            "[sandbox]\nnetwork = { allow = [\"pypi.org:443\", \"*.example.com:80\"] }\nlimits = { processes = 32 }\n",
        )
        .unwrap();
        let plan = SandboxPlan::from_profile("p", &profile, &cp("/w"), &NoLinks)
            .unwrap()
            .unwrap();
        assert_eq!(
            plan.network,
            NetworkPolicy::Allow(vec!["pypi.org:443".into(), "*.example.com:80".into()])
        );
        assert_eq!(
            plan.requested(),
            vec![
                Mechanism::Session,
                Mechanism::ProcessLimit,
                Mechanism::View,
                Mechanism::NetworkNamespace,
                Mechanism::EgressProxy,
                Mechanism::NoNewPrivs,
                Mechanism::Landlock,
                Mechanism::Seccomp
            ]
        );
        let bad: ProfileConfig =
            toml::from_str("[sandbox]\nnetwork = { allow = [\"pypi.org\"] }\n").unwrap();
        let err = SandboxPlan::from_profile("p", &bad, &cp("/w"), &NoLinks).unwrap_err();
        insta::assert_snapshot!(err.to_string(), @r#"profile `p` has a sandbox that cannot be planned: network allowlist: `pypi.org` is not host:port (e.g. "pypi.org:443")"#);
    }

    #[test]
    fn sandbox_config_parses_from_toml_with_defaults() {
        let profile: ProfileConfig = toml::from_str(
            "[sandbox]\nenforcement = \"best_effort\"\nnetwork = \"host\"\n[sandbox.limits]\nmemory_bytes = 1000\n",
        )
        .unwrap();
        assert_eq!(
            profile.sandbox,
            Some(SandboxConfig {
                enforcement: Enforcement::BestEffort,
                network: NetworkPolicy::Host,
                limits: ResourceLimits {
                    memory_bytes: Some(1000),
                    ..ResourceLimits::default()
                },
                ..SandboxConfig::default()
            })
        );
    }
}
