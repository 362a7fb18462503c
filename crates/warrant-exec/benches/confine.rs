//! What the default confinement costs, each figure against a baseline measured in the same run.
//! `confine`: spawn-and-wait of `/bin/true` bare (`std::process::Command`), through
//! `run_command_confined` under the default profile as a contained command (the view with the
//! copy-on-write layer, then the changeset read and judged), the same view without the layer,
//! and `bwrap` building the same view. `changeset` (interleaved rounds printed on stderr, not a
//! criterion group): a command that writes 1,000 small files, contained (overlay, read + judge +
//! apply) against the same under an unconfined profile, with the judging alone and a plain
//! fsync'd write of the same files to split the difference.
//! `census`: the view's walk for denied names and hard links over a generated project of 20,000
//! files in 2,000 directories (a build directory's shape): every directory listed and every file
//! `statx`ed (no memory, as every command did before `warrant_exec::census`) against the walk
//! that reuses remembered listings (nothing changed) and the one after one file was added.
//! The workspace of `confine` is a copy of this repository's tracked files plus a `.git`, a
//! `.env` and a key, so the launcher walks a real tree for denied names. See docs/BENCHMARKS.md.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

use std::hint::black_box;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use tempfile::TempDir;
use warrant_core::config::{ProfileConfig, SandboxConfig};
use warrant_core::{CanonicalPath, ShellExec};
use warrant_exec::fs::OsLinks;
use warrant_exec::judged::{Layer, judge, relative_names};
use warrant_exec::{
    Confinement, ExecOutcome, Launcher, Mechanism, SandboxPlan, run_command_confined,
};
use warrant_kernel::Authorized;

/// The loop of the changeset bench: 1,000 small files, written by the shell's builtin `echo`.
const WRITE_1000: &str = "for i in $(seq 1000); do echo $i > f$i; done";

fn launcher() -> Launcher {
    Launcher {
        program: env!("CARGO_BIN_EXE_warrant-sandbox").into(),
        prefix_args: Vec::new(),
    }
}

/// Warrant's own PATH and HOME, as a command inherits them.
fn parent_env() -> Vec<(String, String)> {
    let var = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_owned());
    vec![
        ("PATH".into(), var("PATH", "/usr/bin:/bin")),
        ("HOME".into(), var("HOME", "/")),
    ]
}

fn canonical_tempdir() -> (TempDir, CanonicalPath) {
    let dir = tempfile::tempdir().unwrap();
    let real = std::fs::canonicalize(dir.path()).unwrap();
    let path = CanonicalPath::from_normalized(real.to_str().unwrap()).unwrap();
    (dir, path)
}

/// One way of running a command: the profile, the confinement built from it, contained or not.
struct Mode {
    profile: ProfileConfig,
    confinement: Option<Confinement>,
    contained: bool,
}

impl Mode {
    /// The default profile (`SandboxConfig::default()`) in `ws`; `contained` adds the layer.
    fn default_profile(ws: &CanonicalPath, contained: bool) -> Self {
        let profile = ProfileConfig {
            sandbox: Some(SandboxConfig::default()),
            ..ProfileConfig::default()
        };
        let plan = SandboxPlan::from_profile("default", &profile, ws, &OsLinks)
            .unwrap()
            .unwrap();
        assert!(plan.view, "the default profile must build the view");
        Self {
            profile,
            confinement: Some(Confinement {
                plan,
                launcher: launcher(),
            }),
            contained,
        }
    }

    fn unconfined() -> Self {
        Self {
            profile: ProfileConfig {
                sandbox: None,
                unconfined: true,
                ..ProfileConfig::default()
            },
            confinement: None,
            contained: false,
        }
    }

    fn run(&self, ws: &CanonicalPath, argv: &[&str], env: &[(String, String)]) -> ExecOutcome {
        let action = ShellExec {
            argv: argv.iter().map(|a| (*a).to_owned()).collect(),
            cwd: ws.clone(),
            profile: "default".into(),
            timeout_ms: 30_000,
            program: None,
            contained: self.contained,
            judged: warrant_core::Judging::Changeset,
        };
        run_command_confined(
            &Authorized::for_tests(action),
            &self.profile,
            env,
            &|| None,
            self.confinement.as_ref(),
        )
        .unwrap()
    }
}

/// Checks, before anything is timed, that a mode does what its name says.
fn check(name: &str, out: &ExecOutcome, confined: bool, contained: bool) {
    assert_eq!(out.exit_code, Some(0), "{name}: {out:?}");
    match (&out.sandbox, confined) {
        (Some(report), true) => {
            assert!(
                report.applied.contains(&Mechanism::View),
                "{name}: {report:?}"
            );
            assert!(
                report.applied.contains(&Mechanism::NetworkNamespace),
                "{name}"
            );
            assert!(report.applied.contains(&Mechanism::Landlock), "{name}");
            assert!(report.applied.contains(&Mechanism::Seccomp), "{name}");
            assert!(report.not_applied.is_empty(), "{name}: {report:?}");
        }
        (None, false) => {}
        (report, _) => panic!("{name}: confined = {confined}, report {report:?}"),
    }
    assert_eq!(out.changes.is_some(), contained, "{name}: {out:?}");
}

/// A workspace like a project's: this repository's tracked files, a `.git` with hooks, a
/// `.warrant`, a `.env` and a private key (denied names the view masks).
fn project_workspace() -> (TempDir, CanonicalPath) {
    let (dir, ws) = canonical_tempdir();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let listed = Command::new("git")
        .arg("-C")
        .arg(&repo)
        .args(["ls-files", "-z"])
        .output()
        .unwrap();
    assert!(listed.status.success(), "git ls-files failed");
    let mut copied = 0;
    for rel in listed.stdout.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        let rel = Path::new(std::str::from_utf8(rel).unwrap());
        let (from, to) = (repo.join(rel), ws.as_path().join(rel));
        if !from.is_file() {
            continue;
        }
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&from, &to).unwrap();
        copied += 1;
    }
    let ws_path = ws.as_path();
    std::fs::create_dir_all(ws_path.join(".git/hooks")).unwrap();
    std::fs::write(ws_path.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::create_dir_all(ws_path.join(".warrant/keys")).unwrap();
    std::fs::write(ws_path.join(".env"), "TOKEN=x\n").unwrap();
    std::fs::write(ws_path.join("crates/id_ed25519"), "key\n").unwrap();
    eprintln!("confine: workspace of {copied} tracked files at {ws}");
    (dir, ws)
}

/// `bwrap` applying the view the plan describes: the same read-only roots, the workspace
/// read-write with the protected entries read-only and the denied entries masked (found with
/// the launcher's own walk, untimed), a private home and `/tmp`, its own `/proc`, a minimal
/// `/dev`, user + PID + network namespaces, a new session, no capability (as root, bwrap would
/// otherwise keep them and read through the mode-000 masks). bwrap applies no Landlock or
/// seccomp filter here.
fn bwrap_args(plan: &SandboxPlan, masks_dir: &Path, argv: &[&str]) -> Vec<String> {
    let s = |p: &Path| p.display().to_string();
    let mut a: Vec<String> = [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-net",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--tmpfs",
        "/tmp",
    ]
    .map(String::from)
    .to_vec();
    let writable: Vec<&Path> = plan.write_roots.iter().map(|p| p.as_path()).collect();
    if let Some(home) = &plan.home
        && !writable.iter().any(|w| home.starts_with(w))
    {
        a.extend(["--tmpfs".into(), s(home)]);
    }
    let mut binds: Vec<(&Path, bool)> = plan
        .read_roots
        .iter()
        .map(|p| p.as_path())
        .filter(|p| !writable.iter().any(|w| p.starts_with(w)) && !p.starts_with("/dev"))
        .filter(|p| p.exists())
        .map(|p| (p, false))
        .chain(writable.iter().map(|p| (*p, true)))
        .collect();
    binds.sort_by_key(|(p, _)| p.components().count());
    for (p, rw) in binds {
        a.extend([if rw { "--bind" } else { "--ro-bind" }.into(), s(p), s(p)]);
    }
    for p in plan
        .protected
        .iter()
        .map(|p| p.as_path())
        .filter(|p| p.exists())
    {
        a.extend(["--ro-bind".into(), s(p), s(p)]);
    }
    let mut masked = warrant_exec::grants::find_denied(&writable, &plan.denied_names, &[]).unwrap();
    for root in &plan.read_roots {
        let name = root.as_path().file_name().map(|n| n.to_string_lossy());
        for (tree, secrets) in warrant_exec::view::TOOLCHAIN_SECRETS {
            if name.as_deref() == Some(*tree) {
                masked.extend(secrets.iter().map(|x| root.as_path().join(x)));
            }
        }
    }
    let (empty_dir, empty_file) = (masks_dir.join("dir"), masks_dir.join("file"));
    for p in masked.iter().filter(|p| p.exists()) {
        let mask = if p.is_dir() { &empty_dir } else { &empty_file };
        a.extend(["--ro-bind".into(), s(mask), s(p)]);
    }
    for (link, to) in &plan.aliases {
        a.extend(["--symlink".into(), s(to.as_path()), s(link)]);
    }
    a.extend(
        [
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--remount-ro",
            "/",
            "--chdir",
        ]
        .map(String::from),
    );
    a.push(s(writable[0]));
    a.extend(argv.iter().map(|x| (*x).to_owned()));
    a
}

fn masks_dir() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    let (d, f) = (dir.path().join("dir"), dir.path().join("file"));
    std::fs::create_dir(&d).unwrap();
    std::fs::write(&f, b"").unwrap();
    for p in [&d, &f] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o000)).unwrap();
    }
    dir
}

fn bwrap_available() -> bool {
    Command::new("bwrap")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn confine(c: &mut Criterion) {
    let (_dir, ws) = project_workspace();
    let env = parent_env();
    let contained = Mode::default_profile(&ws, true);
    let direct = Mode::default_profile(&ws, false);
    let true_argv = ["/bin/true"];
    check(
        "contained",
        &contained.run(&ws, &true_argv, &env),
        true,
        true,
    );
    check("view", &direct.run(&ws, &true_argv, &env), true, false);

    let masks = masks_dir();
    let plan = &direct.confinement.as_ref().unwrap().plan;
    let bwrap = bwrap_available().then(|| bwrap_args(plan, masks.path(), &true_argv));
    if let Some(args) = &bwrap {
        eprintln!("confine: bwrap {}", args.join(" "));
        // The same view: the workspace is there, .git read-only, .env masked, no network.
        let mut probe = bwrap_args(plan, masks.path(), &["sh", "-c"]);
        probe.push(
            [
                "test -f Cargo.toml || echo 'no workspace'",
                "touch .git/x 2>/dev/null && echo '.git writable'",
                "cat .env 2>/dev/null && echo '.env readable'",
                "ls .warrant 2>/dev/null && echo '.warrant readable'",
                "ls ~/.ssh 2>/dev/null && echo 'home visible'",
                "[ $(ls /proc | grep -c '^[0-9]') -le 6 ] || echo 'other processes visible'",
                "[ $(wc -l < /proc/net/dev) -eq 3 ] || echo 'network visible'",
            ]
            .join("; "),
        );
        let out = Command::new("bwrap").args(&probe).output().unwrap();
        assert!(
            out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
            "the bwrap command does not build the view: {} {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    } else {
        eprintln!("confine: bwrap is not installed; its row is skipped");
    }

    let mut g = c.benchmark_group("confine");
    g.sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(8));
    g.bench_function("bare_status", |b| {
        b.iter(|| black_box(Command::new("/bin/true").status().unwrap()))
    });
    g.bench_function("bare_output", |b| {
        b.iter(|| {
            black_box(
                Command::new("/bin/true")
                    .stdin(Stdio::null())
                    .output()
                    .unwrap(),
            )
        })
    });
    g.bench_function("default_contained", |b| {
        b.iter(|| black_box(contained.run(&ws, &true_argv, &env)))
    });
    g.bench_function("default_no_overlay", |b| {
        b.iter(|| black_box(direct.run(&ws, &true_argv, &env)))
    });
    if let Some(args) = &bwrap {
        g.bench_function("bwrap_view", |b| {
            b.iter(|| {
                let out = Command::new("bwrap")
                    .args(args)
                    .stdin(Stdio::null())
                    .output()
                    .unwrap();
                assert!(out.status.success());
                black_box(out)
            })
        });
    }
    g.finish();
}

/// A fresh, empty project (a `.git` only) per iteration, so every run creates the same 1,000
/// files; the directory is removed outside the timed part.
fn fresh_project() -> (TempDir, CanonicalPath) {
    let (dir, ws) = canonical_tempdir();
    std::fs::create_dir(ws.as_path().join(".git")).unwrap();
    std::fs::write(ws.as_path().join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    (dir, ws)
}

/// The ways the 1,000 files are written, each timed from a fresh project.
#[derive(Clone, Copy, Debug)]
enum Write1000 {
    /// The shell loop under an unconfined profile: direct writes (the baseline).
    Unconfined,
    /// The shell loop in the default view, without the layer: direct writes, confined.
    ViewNoOverlay,
    /// The shell loop contained: into the layer, then read, judged and applied.
    Contained,
    /// `judge` alone over a layer already holding the 1,000 files.
    JudgeOnly,
    /// The files written straight into the workspace, each fsync'd, then the directory.
    WriteFsync,
}

const WRITE_MODES: [Write1000; 5] = [
    Write1000::Unconfined,
    Write1000::ViewNoOverlay,
    Write1000::Contained,
    Write1000::JudgeOnly,
    Write1000::WriteFsync,
];

/// Rounds of the interleaved changeset measurement.
const ROUNDS: usize = 7;

/// What the executor passes to `judge` for the default plan.
struct Judging {
    protected: Vec<String>,
    denied: Vec<String>,
}

/// One timed write from a fresh project (created and removed untimed); for `Contained`, also
/// how long the command itself ran.
fn time_write(mode: Write1000, env: &[(String, String)], judging: &Judging) -> (Duration, u64) {
    let argv = ["sh", "-c", WRITE_1000];
    let (_dir, ws) = fresh_project();
    let run = |m: Mode| {
        let started = Instant::now();
        let out = m.run(&ws, &argv, env);
        let took = started.elapsed();
        assert_eq!(out.exit_code, Some(0), "{mode:?}: {out:?}");
        (took, out.duration_ms)
    };
    let timed = match mode {
        Write1000::Unconfined => run(Mode::unconfined()),
        Write1000::ViewNoOverlay => run(Mode::default_profile(&ws, false)),
        Write1000::Contained => run(Mode::default_profile(&ws, true)),
        Write1000::JudgeOnly => {
            let mut layer = Layer::create(&ws, "bench").unwrap();
            write_files(&layer.spec.upper, false);
            let started = Instant::now();
            let judged =
                judge(&mut layer, &judging.protected, &judging.denied, &[], false).unwrap();
            let took = started.elapsed();
            assert!(judged.applied && judged.entries == 1000, "{judged:?}");
            (took, 0)
        }
        Write1000::WriteFsync => {
            let started = Instant::now();
            write_files(ws.as_path(), true);
            (started.elapsed(), 0)
        }
    };
    let landed = (1..=1000).all(|i| {
        std::fs::read_to_string(ws.as_path().join(format!("f{i}"))).ok() == Some(format!("{i}\n"))
    });
    assert!(landed, "{mode:?}: the 1,000 files are not in the workspace");
    timed
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// The changeset cost, measured interleaved rather than by criterion: every round times each
/// mode once (in a rotated order) from a fresh project, so a disk that slows down for a while
/// (this machine's is shared) slows every mode of that round alike; per-round ratios are paired.
/// A contained write takes seconds, too long for criterion's ten samples per benchmark.
fn changeset(_c: &mut Criterion) {
    let env = parent_env();
    let judging = {
        let (_d, ws) = fresh_project();
        let plan = Mode::default_profile(&ws, true).confinement.unwrap().plan;
        Judging {
            protected: relative_names(&plan.protected, ws.as_path()),
            denied: plan.denied_names,
        }
    };
    {
        // Each mode does what its name says before anything is timed.
        let (_d, ws) = fresh_project();
        let argv = ["sh", "-c", WRITE_1000];
        let out = Mode::default_profile(&ws, true).run(&ws, &argv, &env);
        check("contained write", &out, true, true);
        let judged = out.changes.as_ref().unwrap();
        assert!(judged.applied && judged.entries == 1000, "{judged:?}");
        let (_d, ws) = fresh_project();
        let out = Mode::unconfined().run(&ws, &argv, &env);
        check("unconfined write", &out, false, false);
        let (_d, ws) = fresh_project();
        let out = Mode::default_profile(&ws, false).run(&ws, &argv, &env);
        check("view write", &out, true, false);
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); WRITE_MODES.len()];
    let mut command_in_layer = Vec::new();
    // `cargo bench -- --test` (criterion's smoke mode) checks the modes once instead.
    let rounds = if std::env::args().any(|a| a == "--test") {
        1
    } else {
        ROUNDS
    };
    for round in 0..rounds {
        for k in 0..WRITE_MODES.len() {
            let i = (round + k) % WRITE_MODES.len();
            let (took, command_ms) = time_write(WRITE_MODES[i], &env, &judging);
            times[i].push(took.as_secs_f64() * 1e3);
            if matches!(WRITE_MODES[i], Write1000::Contained) {
                command_in_layer.push(command_ms as f64);
            }
        }
    }
    let ratio =
        |a: usize, b: usize| median(times[a].iter().zip(&times[b]).map(|(x, y)| x / y).collect());
    eprintln!("changeset_1000_files: {rounds} interleaved rounds, ms per write of 1,000 files");
    for (i, mode) in WRITE_MODES.iter().enumerate() {
        let rounds: Vec<String> = times[i].iter().map(|t| format!("{t:.0}")).collect();
        eprintln!(
            "changeset_1000_files/{mode:?}: median {:.1} ms, min {:.1} ms, rounds [{}]",
            median(times[i].clone()),
            times[i].iter().copied().fold(f64::INFINITY, f64::min),
            rounds.join(", ")
        );
    }
    eprintln!(
        "changeset_1000_files: the contained command itself ran a median {:.0} ms",
        median(command_in_layer)
    );
    eprintln!(
        "changeset_1000_files: median per-round ratios: Contained/Unconfined {:.2}, ViewNoOverlay/Unconfined {:.2}, Contained/ViewNoOverlay {:.2}, JudgeOnly/WriteFsync {:.2}",
        ratio(2, 0),
        ratio(1, 0),
        ratio(2, 1),
        ratio(3, 4)
    );
}

/// `f1` … `f1000` holding their number, as the shell loop writes them; `durable`: each file and
/// then the directory fsync'd.
fn write_files(dir: &Path, durable: bool) {
    for i in 1..=1000 {
        let mut f = std::fs::File::create(dir.join(format!("f{i}"))).unwrap();
        f.write_all(format!("{i}\n").as_bytes()).unwrap();
        if durable {
            f.sync_all().unwrap();
        }
    }
    if durable {
        std::fs::File::open(dir).unwrap().sync_all().unwrap();
    }
}

/// The walk for denied names, full against remembered (see the module's comment).
fn census(c: &mut Criterion) {
    use warrant_exec::census::{RACY, survey};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    for d in 0..2_000 {
        let sub = root.join(format!("target/debug/deps/d{:02}/m{d}", d % 40));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..10 {
            std::fs::write(sub.join(format!("f{f}.o")), b"x").unwrap();
        }
    }
    std::fs::write(root.join(".env"), b"K=1").unwrap();
    let memory = dir.path().join("census.json");
    let patterns: Vec<String> = warrant_core::config::DEFAULT_DENIED
        .iter()
        .map(|p| (*p).to_owned())
        .collect();
    // Listings are trusted once their directory's change time is RACY old.
    std::thread::sleep(RACY + Duration::from_millis(200));
    let roots = [root.as_path()];
    let (first, _) = survey(&roots, &patterns, &[], Some(&memory)).unwrap();
    assert_eq!(first.denied, vec![root.join(".env")]);
    let (_, stats) = survey(&roots, &patterns, &[], Some(&memory)).unwrap();
    assert_eq!(stats.listed, 0, "{stats:?}");
    let mut g = c.benchmark_group("census");
    g.sample_size(20);
    g.bench_function("full_walk_20000_files", |b| {
        b.iter(|| black_box(survey(&roots, &patterns, &[], None).unwrap()))
    });
    g.bench_function("remembered_nothing_changed", |b| {
        b.iter(|| black_box(survey(&roots, &patterns, &[], Some(&memory)).unwrap()))
    });
    // One directory changed since: it is listed again (and stays racy, so every iteration).
    std::fs::write(root.join("target/debug/deps/d07/m7/new.o"), b"y").unwrap();
    g.bench_function("remembered_one_directory_changed", |b| {
        b.iter(|| black_box(survey(&roots, &patterns, &[], Some(&memory)).unwrap()))
    });
    g.finish();
}

criterion_group!(benches, confine, changeset, census);
criterion_main!(benches);
