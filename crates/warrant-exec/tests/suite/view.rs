//! The default confinement, the command's own view (user, mount and PID namespaces with
//! Landlock and seccomp under them), tried as an attacker would: every attack is a command a
//! careless person let run, first with no sandbox (the negative control: the attack works) and
//! then under the default profile (it does not).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use warrant_core::config::{ProfileConfig, SandboxConfig};
use warrant_core::{Action, CanonicalPath, Judging};
use warrant_exec::fs::OsLinks;
use warrant_exec::{
    Confinement, ExecOutcome, Launcher, Mechanism, SandboxPlan, run_command_confined,
};

use super::{authorized, tempdir};

fn launcher() -> Launcher {
    Launcher {
        program: env!("CARGO_BIN_EXE_warrant-sandbox").into(),
        prefix_args: Vec::new(),
    }
}

/// Warrant's own PATH and HOME, as a command inherits them (toolchains in the home included).
fn parent_env(home: &Path) -> Vec<(String, String)> {
    vec![
        (
            "PATH".into(),
            std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
        ),
        ("HOME".into(), home.display().to_string()),
    ]
}

/// A run: the workspace, the home the plan treats as the person's, and the roots added to the
/// default read roots (a fake toolchain in that home).
struct Case {
    ws: CanonicalPath,
    home: PathBuf,
    extra_read: Vec<CanonicalPath>,
    /// Toolchain caches given a per-workspace layer (none unless a test names them).
    caches: Vec<CanonicalPath>,
    /// The negative control of the launcher's end channel: left on the command's stdin.
    end_exposed: bool,
}

impl Case {
    fn run(&self, confined: bool, script: &str) -> ExecOutcome {
        self.run_judged(confined, Judging::Changeset, script)
    }

    fn run_judged(&self, confined: bool, judged: Judging, script: &str) -> ExecOutcome {
        self.run_config(confined, judged, SandboxConfig::default(), script)
    }

    fn run_config(
        &self,
        confined: bool,
        judged: Judging,
        config: SandboxConfig,
        script: &str,
    ) -> ExecOutcome {
        let profile = ProfileConfig {
            sandbox: confined.then_some(config),
            unconfined: !confined,
            ..ProfileConfig::default()
        };
        let confinement = SandboxPlan::from_profile("default", &profile, &self.ws, &OsLinks)
            .unwrap()
            .map(|mut plan| {
                plan.home = Some(self.home.clone());
                plan.read_roots.extend(self.extra_read.iter().cloned());
                plan.caches = self.caches.clone();
                plan.test_end_on_command_stdin = self.end_exposed;
                Confinement {
                    plan,
                    launcher: launcher(),
                }
            });
        let action = Action::ShellExec {
            argv: vec!["sh".into(), "-c".into(), script.into()],
            cwd: self.ws.clone(),
            profile: "default".into(),
            timeout_ms: 20_000,
            program: None,
            contained: confined,
            judged,
        };
        run_command_confined(
            &authorized(action),
            &profile,
            &parent_env(&self.home),
            &|| None,
            confinement.as_ref(),
        )
        .unwrap()
    }
}

fn case() -> (Vec<tempfile::TempDir>, Case) {
    let (d1, ws) = tempdir();
    let (d2, home) = tempdir();
    let home = home.as_path().to_path_buf();
    (
        vec![d1, d2],
        Case {
            ws,
            home,
            extra_read: Vec::new(),
            caches: Vec::new(),
            end_exposed: false,
        },
    )
}

fn write(path: impl AsRef<Path>, text: &str) {
    let path = path.as_ref();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn the_view_is_reported_and_the_workspace_root_is_writable() {
    let (_d, c) = case();
    std::fs::create_dir_all(format!("{}/.git", c.ws)).unwrap();
    let out = c.run(
        true,
        "echo new > top.txt && cat top.txt && mkdir -p a/b && echo ok > a/b/c",
    );
    assert_eq!(
        (out.exit_code, out.stdout.text.as_str()),
        (Some(0), "new\n"),
        "{out:?}"
    );
    assert_eq!(
        std::fs::read_to_string(format!("{}/a/b/c", c.ws)).unwrap(),
        "ok\n"
    );
    let report = out.sandbox.unwrap();
    assert!(report.applied.contains(&Mechanism::View), "{report:?}");
    assert!(report.not_applied.is_empty(), "{report:?}");
}

#[test]
fn home_secrets_are_out_of_view_and_toolchain_credentials_masked() {
    let (_d, mut c) = case();
    write(c.home.join(".ssh/id_rsa"), "PRIVATE KEY");
    write(c.home.join(".aws/credentials"), "aws-secret");
    write(c.home.join(".netrc"), "machine x password p");
    write(
        c.home.join(".cargo/credentials.toml"),
        "token = \"crates-io-token\"",
    );
    write(c.home.join(".cargo/bin/tool"), "#!/bin/sh\necho tool-ran\n");
    std::fs::set_permissions(
        c.home.join(".cargo/bin/tool"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    c.extra_read =
        vec![CanonicalPath::from_normalized(c.home.join(".cargo").to_str().unwrap()).unwrap()];
    let script = "cat ~/.ssh/id_rsa ~/.aws/credentials ~/.netrc ~/.cargo/credentials.toml; ~/.cargo/bin/tool; echo home > ~/made; ls -A ~";
    let control = c.run(false, script);
    for secret in ["PRIVATE KEY", "aws-secret", "password p", "crates-io-token"] {
        assert!(control.stdout.text.contains(secret), "control: {control:?}");
    }
    std::fs::remove_file(c.home.join("made")).unwrap();
    let out = c.run(true, script);
    for secret in ["PRIVATE KEY", "aws-secret", "password p", "crates-io-token"] {
        assert!(!out.stdout.text.contains(secret), "{out:?}");
    }
    // The toolchain runs; the home the command wrote to was its own and is gone.
    assert!(out.stdout.text.contains("tool-ran"), "{out:?}");
    assert!(!c.home.join("made").exists());
    assert!(out.stdout.text.contains(".cargo\nmade"), "{out:?}");
}

#[test]
fn denied_files_hard_links_and_symlinks_to_them_cannot_be_read() {
    let (_d, c) = case();
    write(format!("{}/.env", c.ws), "API_KEY=dotenv-secret");
    write(format!("{}/deploy/server.pem", c.ws), "pem-secret");
    std::fs::create_dir_all(format!("{}/notes", c.ws)).unwrap();
    std::fs::hard_link(format!("{}/.env", c.ws), format!("{}/notes/todo.txt", c.ws)).unwrap();
    std::os::unix::fs::symlink("../.env", format!("{}/notes/link.txt", c.ws)).unwrap();
    let script = "cat .env; cat notes/todo.txt; cat notes/link.txt; cat deploy/server.pem; echo overwrite > notes/todo.txt";
    let control = c.run(false, script);
    assert_eq!(
        control.stdout.text.matches("dotenv-secret").count(),
        3,
        "{control:?}"
    );
    write(format!("{}/.env", c.ws), "API_KEY=dotenv-secret");
    let out = c.run(true, script);
    assert!(!out.stdout.text.contains("secret"), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(format!("{}/.env", c.ws)).unwrap(),
        "API_KEY=dotenv-secret"
    );
    assert!(out.stderr.text.contains("Permission denied"), "{out:?}");
}

#[test]
fn git_and_warrant_state_cannot_be_written_and_state_cannot_be_read() {
    let (_d, c) = case();
    write(format!("{}/.git/HEAD", c.ws), "ref: refs/heads/main\n");
    std::fs::create_dir_all(format!("{}/.git/hooks", c.ws)).unwrap();
    write(
        format!("{}/.warrant/keys/secret", c.ws),
        "installation-secret",
    );
    write(
        format!("{}/.warrant/policies/default.cedar", c.ws),
        "forbid(principal, action, resource);",
    );
    let script = "echo evil > .git/hooks/pre-commit; cat .warrant/keys/secret; echo 'permit(principal, action, resource);' > .warrant/policies/default.cedar; cat .git/HEAD";
    let control = c.run(false, script);
    assert!(
        control.stdout.text.contains("installation-secret"),
        "{control:?}"
    );
    std::fs::remove_file(format!("{}/.git/hooks/pre-commit", c.ws)).unwrap();
    write(
        format!("{}/.warrant/policies/default.cedar", c.ws),
        "forbid(principal, action, resource);",
    );
    let out = c.run(true, script);
    assert!(
        !Path::new(&format!("{}/.git/hooks/pre-commit", c.ws)).exists(),
        "{out:?}"
    );
    assert!(!out.stdout.text.contains("installation-secret"), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(format!("{}/.warrant/policies/default.cedar", c.ws)).unwrap(),
        "forbid(principal, action, resource);"
    );
    // .git stays readable.
    assert!(out.stdout.text.contains("ref: refs/heads/main"), "{out:?}");
}

#[test]
fn nothing_outside_the_workspace_can_be_written_by_any_path() {
    let (_d, c) = case();
    let (_o, outside) = tempdir();
    std::os::unix::fs::symlink(outside.as_str(), format!("{}/out", c.ws)).unwrap();
    let rel = format!(
        "../{}",
        Path::new(outside.as_str())
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
    );
    let script = format!(
        "echo 1 > {outside}/direct; echo 2 > out/via-link; echo 3 > {rel}/via-dotdot; echo 4 > /proc/self/root{outside}/via-proc-root; echo 5 > /proc/1/root{outside}/via-pid1; cat {outside}/*"
    );
    let control = c.run(false, &script);
    assert_eq!(
        control.stdout.text.lines().count(),
        4,
        "control: {control:?}"
    );
    for f in ["direct", "via-link", "via-dotdot", "via-proc-root"] {
        let _ = std::fs::remove_file(format!("{outside}/{f}"));
    }
    let out = c.run(true, &script);
    let left: Vec<_> = std::fs::read_dir(outside.as_str()).unwrap().collect();
    assert!(left.is_empty(), "{left:?} {out:?}");
}

#[test]
fn other_processes_and_warrants_environment_are_out_of_view() {
    let (_d, c) = case();
    // This test process is Warrant here: its pid, and its environment through /proc.
    let me = std::process::id();
    let script =
        format!("tr '\\0' '\\n' < /proc/{me}/environ | head -1; ls /proc | grep -c '^[0-9]'");
    let control = c.run(false, &script);
    assert!(control.stdout.text.lines().count() >= 2, "{control:?}");
    let out = c.run(true, &script);
    let lines: Vec<&str> = out.stdout.text.lines().collect();
    // Only the count is printed, and it counts the command's own few processes.
    assert_eq!(lines.len(), 1, "{out:?}");
    assert!(lines[0].parse::<u32>().unwrap() <= 4, "{out:?}");
}

#[test]
fn a_listener_on_the_hosts_loopback_is_unreachable() {
    let (_d, c) = case();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = format!(
        "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2); print(\"py-connected\")'; bash -c 'echo hi > /dev/tcp/127.0.0.1/{port} && echo bash-connected'"
    );
    let control = c.run(false, &script);
    assert!(control.stdout.text.contains("py-connected"), "{control:?}");
    assert!(
        control.stdout.text.contains("bash-connected"),
        "{control:?}"
    );
    let out = c.run(true, &script);
    assert!(!out.stdout.text.contains("connected"), "{out:?}");
}

/// A process that leaves the session and the group, double-forked, still ends with the
/// command: its PID namespace dies with its first process (no cgroup is involved).
#[test]
fn an_escaped_double_fork_dies_with_the_command() {
    let (_d, c) = case();
    let marker = format!("1000.{}", std::process::id());
    let script = format!("(setsid sh -c 'sleep {marker} &' &) ; sleep 0.3; echo started");
    let running = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
            .any(|cmd| String::from_utf8_lossy(&cmd).contains(&marker))
    };
    // The control runs without a cgroup or namespace: the escaped process survives the call.
    let control = c.run(false, &script);
    assert_eq!(control.stdout.text, "started\n");
    assert!(running(), "control: the escaped process survives");
    let _ = std::process::Command::new("pkill")
        .args(["-f", &marker])
        .status();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let out = c.run(true, &script);
    assert_eq!(out.stdout.text, "started\n", "{out:?}");
    // The namespace alone ends it: a view joins no cgroup (without a process limit).
    assert_eq!(
        out.sandbox.as_ref().map(|r| r.tracked),
        Some(false),
        "{out:?}"
    );
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(!running(), "{out:?}");
}

/// TIOCSTI pushes input into a terminal as if typed there (an approval prompt waiting in it).
#[test]
fn typing_into_a_terminal_is_refused() {
    let (_d, c) = case();
    let legacy = std::fs::read_to_string("/proc/sys/dev/tty/legacy_tiocsti").unwrap_or_default();
    let script = "python3 -c '
import fcntl, os, termios
m, s = os.openpty()
try:
    fcntl.ioctl(s, termios.TIOCSTI, b\"y\")
    print(\"typed\")
except OSError as e:
    print(\"refused\", e.errno)
'";
    if legacy.trim() == "1" {
        let control = c.run(false, script);
        assert_eq!(control.stdout.text, "typed\n", "{control:?}");
    }
    let out = c.run(true, script);
    assert_eq!(out.stdout.text, "refused 1\n", "{out:?}");
}

#[test]
fn toolchains_in_the_home_run_inside_the_view() {
    // The real home of this machine: rustup's cargo and pyenv's python3 through its shim.
    let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
        return;
    };
    let (_d, ws) = tempdir();
    let c = Case {
        ws,
        home: home.clone(),
        extra_read: Vec::new(),
        caches: Vec::new(),
        end_exposed: false,
    };
    write(format!("{}/script.py", c.ws), "print('py', 6 * 7)\n");
    let mut script = String::from("python3 script.py");
    if home.join(".cargo/bin/cargo").exists() {
        script.push_str("; cargo --version | cut -d' ' -f1");
    }
    let out = c.run(true, &script);
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert!(out.stdout.text.starts_with("py 42\n"), "{out:?}");
    if home.join(".cargo/bin/cargo").exists() {
        assert!(out.stdout.text.ends_with("cargo\n"), "{out:?}");
    }
}

/// Build output is regenerable: a contained command that replaces files under `target/` (an
/// incremental build) lands without a person; the same deletion of a source file waits, its
/// layer kept for the person's judgement.
#[test]
fn deleting_build_output_is_a_change_and_deleting_sources_waits() {
    let (_d, c) = case();
    write(format!("{}/target/debug/old.o", c.ws), "old object");
    write(format!("{}/src/lib.rs", c.ws), "pub fn f() {}\n");
    let out = c.run(
        true,
        "rm target/debug/old.o && echo new > target/debug/new.o",
    );
    let changes = out.changes.clone().unwrap();
    assert_eq!(changes.class.as_str(), "change", "{out:?}");
    assert!(changes.applied && changes.pending.is_none(), "{out:?}");
    assert!(!Path::new(&format!("{}/target/debug/old.o", c.ws)).exists());
    let out = c.run(true, "rm src/lib.rs");
    let changes = out.changes.clone().unwrap();
    assert_eq!(changes.class.as_str(), "destructive", "{out:?}");
    assert!(!changes.applied, "{out:?}");
    let layer = changes
        .pending
        .clone()
        .expect("the layer is kept for the judgement");
    assert!(Path::new(&format!("{}/src/lib.rs", c.ws)).exists());
    let action = authorized(Action::ShellExec {
        argv: vec!["rm".into(), "src/lib.rs".into()],
        cwd: c.ws.clone(),
        profile: "default".into(),
        timeout_ms: 20_000,
        program: None,
        contained: true,
        judged: warrant_core::Judging::Changeset,
    });
    let settled = warrant_exec::judged::settle(&action, &changes, &c.ws, false).unwrap();
    assert!(!settled.applied && settled.pending.is_none());
    assert!(Path::new(&format!("{}/src/lib.rs", c.ws)).exists());
    // The layer a denial discards is removed.
    assert!(!layer.exists(), "{layer:?}");
}

#[test]
fn scratch_names_match_directories_not_files() {
    use warrant_exec::judged::in_scratch;
    let scratch: Vec<String> = ["target", "node_modules/.cache"]
        .map(str::to_owned)
        .to_vec();
    assert!(in_scratch("target/debug/a.o", &scratch));
    assert!(in_scratch("crates/x/target/a", &scratch));
    assert!(in_scratch("node_modules/.cache/x", &scratch));
    assert!(!in_scratch("target", &scratch));
    assert!(!in_scratch("src/target.rs", &scratch));
    assert!(!in_scratch("lib/node_modules/x", &scratch));
}

/// Where overlays are unavailable a contained command judged by its argv runs in the same view
/// without a layer: its writes (a deletion too) land in the workspace at once, and the view's
/// protections stay (`.env` masked, `.git` read-only).
#[test]
fn judged_by_argv_a_contained_command_writes_directly_in_its_view() {
    let (_d, c) = case();
    write(format!("{}/.env", c.ws), "marker-in-dotenv\n");
    write(format!("{}/gone.txt", c.ws), "old\n");
    std::fs::create_dir_all(format!("{}/.git", c.ws)).unwrap();
    let out = c.run_judged(
        true,
        Judging::Argv,
        "echo new > top.txt; rm gone.txt; cat .env; echo x > .git/planted; true",
    );
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(
        (out.judged, out.changes.is_none()),
        (Some(Judging::Argv), true),
        "{out:?}"
    );
    assert!(Path::new(&format!("{}/top.txt", c.ws)).exists());
    assert!(!Path::new(&format!("{}/gone.txt", c.ws)).exists());
    assert!(!out.stdout.text.contains("marker-in-dotenv"), "{out:?}");
    assert!(!Path::new(&format!("{}/.git/planted", c.ws)).exists());
    assert!(
        out.sandbox.unwrap().applied.contains(&Mechanism::View),
        "still in its own view"
    );
}

/// The probe tells a machine without overlays (here: a layer path overlayfs' options cannot
/// carry, so the view is built but the overlay is not) from one without a view (a launcher
/// that does not exist), and from one with both.
#[test]
fn overlays_are_probed_under_the_view() {
    use warrant_exec::sandbox::{Overlays, overlays_in};
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        overlays_in(&launcher(), &dir.path().join("plain")),
        Overlays::Available
    );
    let colon = overlays_in(&launcher(), &dir.path().join("with:colon"));
    assert!(
        matches!(&colon, Overlays::Unavailable(why) if why.contains("overlayfs options cannot carry")),
        "{colon:?}"
    );
    let missing = Launcher {
        program: dir.path().join("no-such-launcher"),
        prefix_args: Vec::new(),
    };
    let none = overlays_in(&missing, &dir.path().join("none"));
    assert!(matches!(none, Overlays::NoView(_)), "{none:?}");
}

/// Toolchain caches under the read-only home trees (`~/.cargo/registry`) get a layer per
/// workspace: what a command fetched there the next command in the same workspace reads, the
/// real cache is unchanged, another workspace does not see it. Control: without the layer the
/// same write is refused (the tree is read-only).
#[test]
fn toolchain_caches_are_writable_per_workspace_and_the_real_one_is_unchanged() {
    let cp = |p: &Path| CanonicalPath::from_normalized(p.to_str().unwrap()).unwrap();
    let (_d, mut c) = case();
    let cargo = c.home.join(".cargo");
    let registry = cargo.join("registry");
    write(registry.join("index/present.txt"), "cached\n");
    c.extra_read = vec![cp(&cargo)];
    let fetch = format!(
        "cat {r}/index/present.txt && mkdir -p {r}/cache/x && echo fetched > {r}/cache/x/crate.tgz && echo more >> {r}/index/present.txt",
        r = registry.display()
    );
    let read = format!(
        "cat {r}/cache/x/crate.tgz {r}/index/present.txt",
        r = registry.display()
    );

    let control = c.run(true, &fetch);
    assert_ne!(
        control.exit_code,
        Some(0),
        "control: read-only without a layer: {control:?}"
    );

    c.caches = vec![cp(&registry)];
    let first = c.run(true, &fetch);
    assert_eq!(
        (first.exit_code, first.stdout.text.as_str()),
        (Some(0), "cached\n"),
        "{first:?}"
    );
    let second = c.run(true, &read);
    assert_eq!(
        (second.exit_code, second.stdout.text.as_str()),
        (Some(0), "fetched\ncached\nmore\n"),
        "{second:?}"
    );
    assert!(
        !registry.join("cache").exists(),
        "the real cache is unchanged"
    );
    assert_eq!(
        std::fs::read_to_string(registry.join("index/present.txt")).unwrap(),
        "cached\n"
    );
    assert!(
        second.changes.as_ref().is_some_and(|ch| ch.entries == 0),
        "cache writes are not workspace changes: {second:?}"
    );

    let (_d2, other_ws) = tempdir();
    let other = Case {
        ws: other_ws,
        home: c.home.clone(),
        extra_read: c.extra_read.clone(),
        caches: c.caches.clone(),
        end_exposed: false,
    };
    let elsewhere = other.run(true, &read);
    assert_ne!(elsewhere.exit_code, Some(0), "{elsewhere:?}");
    assert!(!elsewhere.stdout.text.contains("fetched"), "{elsewhere:?}");

    for ws in [&c.ws, &other.ws] {
        let dir = warrant_exec::judged::cache_dir(ws).unwrap();
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let _ = std::fs::set_permissions(
                entry.path().join("work/work"),
                std::fs::Permissions::from_mode(0o700),
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// Which toolchain trees have caches to layer: by the tree's name or the variable that named
/// it, only where the cache exists.
#[test]
fn toolchain_caches_are_found_by_tree_or_variable() {
    let (_d, root) = tempdir();
    let cp = |p: &str| CanonicalPath::from_normalized(p).unwrap();
    for dir in [
        ".cargo/registry",
        "cargo-home/git",
        "go/pkg/mod",
        ".rustup/tmp",
    ] {
        std::fs::create_dir_all(format!("{root}/{dir}")).unwrap();
    }
    let found = |written: &str, tree: &str| {
        warrant_exec::view::toolchain_caches(written, &cp(&format!("{root}/{tree}")))
    };
    assert_eq!(
        (
            found("~/.cargo", ".cargo"),
            found("$CARGO_HOME", "cargo-home"),
            found("~/go", "go"),
            found("~/.rustup", ".rustup"),
            found("$RUSTUP_HOME", "cargo-home"),
        ),
        (
            vec![cp(&format!("{root}/.cargo/registry"))],
            vec![cp(&format!("{root}/cargo-home/git"))],
            vec![cp(&format!("{root}/go/pkg/mod"))],
            vec![],
            vec![],
        )
    );
}

/// A file inside `.warrant/` (a denied directory) hard-linked under a harmless name elsewhere in
/// the workspace: that name is masked too, not only names that are themselves denied. Control:
/// unconfined, the secret is read through it.
#[test]
fn a_hard_link_to_a_file_inside_a_denied_directory_is_masked() {
    let (_d, c) = case();
    write(
        format!("{}/.warrant/keys/secret", c.ws),
        "installation-secret",
    );
    std::fs::create_dir_all(format!("{}/notes", c.ws)).unwrap();
    std::fs::hard_link(
        format!("{}/.warrant/keys/secret", c.ws),
        format!("{}/notes/todo.txt", c.ws),
    )
    .unwrap();
    let script = "cat notes/todo.txt";
    let control = c.run(false, script);
    assert_eq!(control.stdout.text, "installation-secret", "{control:?}");
    let out = c.run(true, script);
    assert!(!out.stdout.text.contains("secret"), "{out:?}");
    assert!(out.stderr.text.contains("Permission denied"), "{out:?}");
}

/// The walk for denied names remembers what it listed (in Warrant's state directory, outside
/// the view) and lists again only the directories that changed: a `.env` made after a command,
/// in a directory that command's walk listed and remembered, is masked for the next one.
#[test]
fn a_denied_name_made_after_the_last_command_is_masked() {
    let (_d, c) = case();
    write(format!("{}/src/deep/lib.rs", c.ws), "code");
    // Older than the window in which a listing is not trusted, so the first walk's listings
    // are remembered as trusted.
    std::thread::sleep(warrant_exec::census::RACY + std::time::Duration::from_millis(100));
    let first = c.run(true, "cat src/deep/lib.rs");
    assert_eq!(first.stdout.text, "code", "{first:?}");
    let memory = warrant_exec::judged::census_memory(&c.ws).unwrap();
    let remembered = std::fs::read_to_string(&memory).unwrap();
    assert!(remembered.contains("src/deep"), "{remembered}");
    write(format!("{}/src/deep/.env", c.ws), "SECRET=late");
    let out = c.run(true, "cat src/deep/.env; cat src/deep/lib.rs");
    assert!(!out.stdout.text.contains("late"), "{out:?}");
    assert_eq!(out.stdout.text, "code", "{out:?}");
    let _ = std::fs::remove_file(memory);
}

/// A file of the person's home hard-linked into the workspace (same file system) is the home's
/// secret under a harmless name: masked in the view. Hard links whose every name is in the
/// workspace (cargo's `target/`) stay readable. Controls: unconfined, and under
/// `outside_links = "allow"`, the secret is read.
#[test]
fn a_hard_link_from_outside_the_workspace_is_masked() {
    let (_d, c) = case();
    write(c.home.join(".ssh/config"), "IdentityFile home-secret\n");
    std::fs::create_dir_all(format!("{}/notes", c.ws)).unwrap();
    std::fs::hard_link(
        c.home.join(".ssh/config"),
        format!("{}/notes/readme.txt", c.ws),
    )
    .unwrap();
    write(format!("{}/target/debug/deps/app-1234", c.ws), "built\n");
    std::fs::hard_link(
        format!("{}/target/debug/deps/app-1234", c.ws),
        format!("{}/target/debug/app", c.ws),
    )
    .unwrap();
    let script = "cat notes/readme.txt; cat target/debug/app";
    let control = c.run(false, script);
    assert_eq!(
        control.stdout.text, "IdentityFile home-secret\nbuilt\n",
        "{control:?}"
    );
    let allowed = c.run_config(
        true,
        Judging::Changeset,
        SandboxConfig {
            outside_links: warrant_core::config::OutsideLinks::Allow,
            ..SandboxConfig::default()
        },
        script,
    );
    assert_eq!(
        allowed.stdout.text, "IdentityFile home-secret\nbuilt\n",
        "{allowed:?}"
    );
    let out = c.run(true, script);
    assert_eq!(out.stdout.text, "built\n", "{out:?}");
    assert!(out.stderr.text.contains("Permission denied"), "{out:?}");
}

/// The launcher tells the command's end (the wait status of its first process) on a channel of
/// its own, before its exit unmounts the view; the executor takes the status from there. The
/// command cannot write to that channel: its standard input is /dev/null. Left on the command's
/// standard input (the negative control), a command that failed reports a success.
#[test]
fn a_command_cannot_forge_its_end() {
    let (_d, mut c) = case();
    let script = "echo 0 >&0; exit 3";
    c.end_exposed = true;
    let control = c.run(true, script);
    assert_eq!(control.exit_code, Some(0), "control: {control:?}");
    c.end_exposed = false;
    let out = c.run(true, script);
    assert_eq!(out.exit_code, Some(3), "{out:?}");
    let out = c.run(true, "readlink /proc/self/fd/0; cat");
    assert_eq!(
        (out.exit_code, out.stdout.text.as_str()),
        (Some(0), "/dev/null\n"),
        "{out:?}"
    );
}

/// The status told early is the command's own, and what the command changed is judged and lands
/// as before. (A signal cannot end the command's first process from inside: it is the init of
/// its PID namespace.)
#[test]
fn the_end_told_early_is_the_commands_own() {
    let (_d, c) = case();
    let out = c.run(true, "exit 7");
    assert_eq!((out.exit_code, out.signal), (Some(7), None), "{out:?}");
    let out = c.run(true, "echo landed > told.txt");
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert!(out.changes.as_ref().is_some_and(|j| j.applied), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(format!("{}/told.txt", c.ws)).unwrap(),
        "landed\n"
    );
    warrant_exec::spawn::settle();
}

/// `settle` waits for what the calls that are done left behind, not for a command another
/// thread is still running (a front end that opens a host per request drops one while another
/// request's command runs).
#[test]
fn settle_does_not_wait_for_a_command_still_running() {
    let (_d, c) = case();
    let finished = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let out = c.run(true, "sleep 3");
            assert_eq!(out.exit_code, Some(0), "{out:?}");
            finished.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        std::thread::sleep(std::time::Duration::from_millis(500));
        warrant_exec::spawn::settle();
        assert!(
            !finished.load(std::sync::atomic::Ordering::SeqCst),
            "settle waited for the running command"
        );
    });
    warrant_exec::spawn::settle();
}
