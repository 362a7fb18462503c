//! The command's own view of the machine: a user namespace (where the command holds no
//! capability once it runs), a mount namespace built the way bubblewrap builds one (a fresh
//! tmpfs root holding read-only binds of the system trees and toolchains, the workspace bound
//! read-write at its own path, `.git` read-only, denied entries masked, a private `HOME` and
//! `/tmp`, a few device nodes), and a PID namespace with its own `/proc`, so no other process's
//! environment or files can be read and nothing the command starts outlives it (when its first
//! process ends, the kernel kills the rest).
//!
//! The launcher splits in two: [`enter`] runs in the launcher (unshares the namespaces and maps
//! the ids), then the launcher starts itself again as the namespace's first process, which calls
//! [`build`] (the mounts and `pivot_root`) and goes on with the other mechanisms before `exec`.
//!
//! Limits: paths named by the plan are bound at their own path (symlinked roots are recreated as
//! the same links); a denied entry is masked where it is when the command starts (a hard link
//! to it inside a scanned root too, and any file with a name outside the scanned roots), so a
//! file the command itself renames to a denied name is not masked (its writes are judged
//! afterwards). Toolchain caches get a per-workspace overlay ([`TOOLCHAIN_CACHES`]).

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::StatVfsMountFlags;
use rustix::mount::{MountFlags, MountPropagationFlags, UnmountFlags};
use rustix::thread::{CapabilitySet, UnshareFlags};

use warrant_core::CanonicalPath;

use warrant_core::config::OutsideLinks;

use crate::sandbox::SandboxPlan;

/// Where the new root is assembled (inside the new mount namespace, on a fresh tmpfs).
const BASE: &str = "/tmp";
const NEW_ROOT: &str = "/newroot";
const OLD_ROOT: &str = "/oldroot";

/// Device nodes bound into the view's `/dev`.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// Credential files inside toolchain trees people keep in their home directory, by the name of
/// the tree: masked like a denied name (a registry token in `~/.cargo/credentials.toml` is not
/// the command's to read). Toolchain trees are not searched for denied names (too large).
pub const TOOLCHAIN_SECRETS: &[(&str, &[&str])] = &[
    (".cargo", &["credentials", "credentials.toml"]),
    (".config", &["gh", "hub"]),
];

/// Caches inside toolchain trees that builds must write to, by the tree's name (or the variable
/// that names it): each gets a per-workspace copy-on-write layer in the view (the real cache
/// below it stays read-only and unchanged). Caches kept in the home itself (`~/.cache/pip`,
/// `~/.npm`, `~/.cache/go-build`) are in the private HOME already: writable, not kept.
pub const TOOLCHAIN_CACHES: &[(&str, &str, &[&str])] = &[
    (".cargo", "$CARGO_HOME", &["registry", "git"]),
    ("go", "$GOPATH", &["pkg/mod"]),
];

/// The caches of [`TOOLCHAIN_CACHES`] under a toolchain root configured as `written` (`~/.cargo`,
/// `$CARGO_HOME`) and resolved to `root`, where they exist as directories.
pub fn toolchain_caches(written: &str, root: &CanonicalPath) -> Vec<CanonicalPath> {
    let name = written.rsplit('/').next().unwrap_or(written);
    TOOLCHAIN_CACHES
        .iter()
        .filter(|(tree, var, _)| name == *tree || written == *var)
        .flat_map(|(_, _, dirs)| dirs.iter())
        .filter_map(|dir| {
            let path = root.as_path().join(dir);
            let meta = std::fs::symlink_metadata(&path).ok()?;
            if !meta.is_dir() {
                return None;
            }
            CanonicalPath::from_normalized(path.to_str()?).ok()
        })
        .collect()
}

/// Unshare the user, mount and PID namespaces and map this process's ids onto themselves. The
/// next process this one starts is the first (PID 1) of the new PID namespace.
pub fn enter() -> Result<(), String> {
    let uid = rustix::process::getuid().as_raw();
    let gid = rustix::process::getgid().as_raw();
    crate::netns::unshare(UnshareFlags::NEWUSER | UnshareFlags::NEWNS | UnshareFlags::NEWPID).map_err(|e| {
        format!(
            "unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID) failed: {e} (user namespaces may be disabled: see /proc/sys/user/max_user_namespaces and kernel.apparmor_restrict_unprivileged_userns)"
        )
    })?;
    std::fs::write("/proc/self/setgroups", "deny")
        .and_then(|()| std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1")))
        .and_then(|()| std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1")))
        .map_err(|e| format!("cannot map ids in the new user namespace: {e}"))
}

/// What the view holds, worked out from the plan before anything is mounted.
#[derive(Debug, Default)]
struct Layout {
    /// Read-only binds, by target path (= source path).
    read_only: BTreeSet<PathBuf>,
    /// Read-write binds.
    writable: BTreeSet<PathBuf>,
    /// Entries bound read-only on top of a writable bind (`.git`).
    protected: BTreeSet<PathBuf>,
    /// Entries replaced by an empty, inaccessible node.
    masked: BTreeSet<PathBuf>,
    /// Links recreated in the view: link path → target.
    links: BTreeMap<PathBuf, PathBuf>,
    /// The private home directory (an empty tmpfs at the real home's path).
    home: Option<PathBuf>,
}

/// Build the view and move into it; `home` is the command's `HOME`, `cwd` where it runs (both
/// must be inside the view). Called in the PID namespace's first process.
pub fn build(plan: &SandboxPlan, home: Option<&Path>, cwd: &Path) -> Result<(), String> {
    let layout = layout(plan, home)?;
    let io = |what: String| move |e: rustix::io::Errno| format!("{what}: {e}");
    // Nothing mounted here propagates back to the host.
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )
    .map_err(io("cannot make the mount tree private".into()))?;
    rustix::mount::mount(
        "tmpfs",
        BASE,
        "tmpfs",
        MountFlags::NOSUID | MountFlags::NODEV,
        Some(c"mode=0755"),
    )
    .map_err(io(format!("cannot mount a tmpfs on {BASE}")))?;
    let base = Path::new(BASE);
    mkdir(&base.join("newroot"), 0o755)?;
    mkdir(&base.join("oldroot"), 0o755)?;
    rustix::process::pivot_root(BASE, base.join("oldroot"))
        .map_err(io("cannot pivot into the staging root".into()))?;
    rustix::process::chdir("/").map_err(io("chdir /".into()))?;
    // The new root must be a mount point of its own for the final pivot.
    rustix::mount::mount_bind(NEW_ROOT, NEW_ROOT).map_err(io("bind the new root".into()))?;

    let old = |p: &Path| Path::new(OLD_ROOT).join(relative(p));
    let new = |p: &Path| Path::new(NEW_ROOT).join(relative(p));

    // Shallow first, so a bind inside the private home lands on top of it.
    let mut binds: Vec<(&PathBuf, bool)> = layout
        .read_only
        .iter()
        .map(|p| (p, false))
        .chain(layout.writable.iter().map(|p| (p, true)))
        .collect();
    binds.sort_by_key(|(p, _)| p.components().count());
    // A private /tmp first: a root under /tmp (a scratch workspace) is bound on top of it.
    let tmp = new(Path::new("/tmp"));
    make_mount_point(&tmp, true)?;
    rustix::mount::mount(
        "tmpfs",
        &tmp,
        "tmpfs",
        MountFlags::NOSUID | MountFlags::NODEV,
        Some(c"mode=1777"),
    )
    .map_err(io("cannot mount the private /tmp".into()))?;
    if let Some(h) = &layout.home {
        make_mount_point(&new(h), true)?;
        rustix::mount::mount(
            "tmpfs",
            new(h),
            "tmpfs",
            MountFlags::NOSUID | MountFlags::NODEV,
            Some(c"mode=0700"),
        )
        .map_err(io(format!("cannot mount the private home {}", h.display())))?;
    }
    for (path, writable) in binds {
        let source = old(path);
        let meta = match std::fs::symlink_metadata(&source) {
            Ok(m) => m,
            // A configured root that does not exist on this machine (/lib64 on aarch64).
            Err(_) => continue,
        };
        let target = new(path);
        make_mount_point(&target, meta.is_dir())?;
        match &plan.overlay {
            // The workspace through a copy-on-write layer: its writes land in `upper`, to be
            // judged before they reach the workspace.
            Some(overlay) if writable && overlay.lower.as_path() == path.as_path() => {
                mount_overlay(&target, &source, &old(&overlay.upper), &old(&overlay.work))
                    .map_err(|e| {
                        format!(
                            "cannot mount the copy-on-write layer over {}: {e}",
                            path.display()
                        )
                    })?;
                continue;
            }
            Some(_) | None => {}
        }
        rustix::mount::mount_bind(&source, &target)
            .map_err(io(format!("cannot bind {}", path.display())))?;
        if !writable {
            remount_read_only(&target)?;
        }
    }
    // An allowlist's way out: the egress proxy's socket, for the forwarder (the command may
    // reach it too; the proxy checks every request against the list).
    if let Some(socket) = &plan.egress_socket {
        let target = new(socket);
        make_mount_point(&target, false)?;
        rustix::mount::mount_bind(old(socket), &target).map_err(io(format!(
            "cannot bind the egress proxy's socket {}",
            socket.display()
        )))?;
    }
    // Toolchain caches: a layer of this workspace's own over the real (read-only) cache.
    for cache in &plan.cache_layers {
        let target = new(cache.lower.as_path());
        if !target.is_dir() {
            continue;
        }
        mount_overlay(
            &target,
            &old(cache.lower.as_path()),
            &old(&cache.upper),
            &old(&cache.work),
        )
        .map_err(|e| {
            format!(
                "cannot mount the workspace's layer over the cache {}: {e}",
                cache.lower
            )
        })?;
    }
    for path in &layout.protected {
        let target = new(path);
        if target.exists() {
            rustix::mount::mount_bind(&target, &target)
                .map_err(io(format!("cannot bind {}", path.display())))?;
            remount_read_only(&target)?;
        }
    }
    // Masks: an empty directory or file nobody may open, read-only.
    let masks = Path::new(NEW_ROOT).join(".masks");
    mkdir(&masks, 0o755)?;
    rustix::mount::mount(
        "tmpfs",
        &masks,
        "tmpfs",
        MountFlags::NOSUID | MountFlags::NODEV,
        Some(c"mode=0755"),
    )
    .map_err(io("cannot mount the masks".into()))?;
    let empty_dir = masks.join("dir");
    let empty_file = masks.join("file");
    // An empty directory that lists as empty (a tool walking the tree sees nothing, and no
    // error), and a file nobody may open.
    mkdir(&empty_dir, 0o555)?;
    std::fs::write(&empty_file, b"").map_err(|e| format!("cannot make the file mask: {e}"))?;
    set_mode(&empty_file, 0o000)?;
    remount_read_only(&masks)?;
    for path in &layout.masked {
        let target = new(path);
        let Ok(meta) = std::fs::symlink_metadata(&target) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            // A link is not followed by the mask; the entry it names is masked where it is.
            continue;
        }
        let mask = if meta.is_dir() {
            &empty_dir
        } else {
            &empty_file
        };
        rustix::mount::mount_bind(mask, &target)
            .map_err(io(format!("cannot mask {}", path.display())))?;
        remount_read_only(&target)?;
    }
    for (link, to) in &layout.links {
        let at = new(link);
        if std::fs::symlink_metadata(&at).is_ok() {
            continue;
        }
        if let Some(parent) = at.parent() {
            mkdir_all(parent)?;
        }
        std::os::unix::fs::symlink(to, &at)
            .map_err(|e| format!("cannot link {} in the view: {e}", link.display()))?;
    }
    devices(&old, &new)?;
    // A fresh /proc of this PID namespace (no other process is in it).
    let proc_dir = new(Path::new("/proc"));
    make_mount_point(&proc_dir, true)?;
    rustix::mount::mount(
        "proc",
        &proc_dir,
        "proc",
        MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
        None,
    )
    .map_err(io("cannot mount /proc for the PID namespace".into()))?;

    // Into the new root; the old one (and the staging tmpfs) is detached.
    rustix::process::chdir(NEW_ROOT).map_err(io(format!("chdir {NEW_ROOT}")))?;
    rustix::process::pivot_root(".", ".").map_err(io("cannot pivot into the view".into()))?;
    rustix::mount::unmount(".", UnmountFlags::DETACH)
        .map_err(io("cannot detach the old root".into()))?;
    rustix::process::chdir("/").map_err(io("chdir /".into()))?;
    remount_read_only(Path::new("/"))?;
    rustix::process::chdir(cwd).map_err(|e| {
        format!(
            "the working directory {} is not inside the command's view: {e}",
            cwd.display()
        )
    })?;
    Ok(())
}

/// No capability survives `exec`: the bounding and ambient sets are emptied (a process running
/// as uid 0 in the user namespace would otherwise regain every capability there on `exec`).
pub fn drop_capabilities() -> Result<(), String> {
    for cap in CapabilitySet::all().iter() {
        match rustix::thread::remove_capability_from_bounding_set(cap) {
            Ok(()) => {}
            // Capabilities this kernel does not know.
            Err(rustix::io::Errno::INVAL) => {}
            Err(e) => {
                return Err(format!(
                    "cannot drop a capability from the bounding set: {e}"
                ));
            }
        }
    }
    rustix::thread::clear_ambient_capability_set()
        .map_err(|e| format!("cannot clear the ambient capabilities: {e}"))
}

fn layout(plan: &SandboxPlan, home: Option<&Path>) -> Result<Layout, String> {
    let mut layout = Layout::default();
    let writable: BTreeSet<PathBuf> = plan
        .write_roots
        .iter()
        .map(|p| p.as_path().to_path_buf())
        .collect();
    for root in &plan.read_roots {
        let p = root.as_path().to_path_buf();
        if !writable.iter().any(|w| p.starts_with(w)) {
            layout.read_only.insert(p);
        }
    }
    layout.writable = writable;
    layout.protected = plan
        .protected
        .iter()
        .map(|p| p.as_path().to_path_buf())
        .collect();
    for (link, to) in &plan.aliases {
        layout
            .links
            .insert(link.clone(), to.as_path().to_path_buf());
    }
    // Top-level links of merged-/usr systems (/bin → usr/bin) exist in the view as they are.
    if let Ok(entries) = std::fs::read_dir("/") {
        for entry in entries.flatten() {
            let path = entry.path();
            if let Ok(to) = std::fs::read_link(&path)
                && needed_link(&path, &to, &layout)
            {
                layout.links.insert(path, to);
            }
        }
    }
    if let Some(h) = home
        && h.is_absolute()
        && h != Path::new("/")
        && !layout.writable.iter().any(|w| h.starts_with(w))
    {
        layout.home = Some(h.to_path_buf());
    }
    for root in &layout.read_only {
        let name = root.file_name().map(|n| n.to_string_lossy().into_owned());
        for (tree, secrets) in TOOLCHAIN_SECRETS {
            if name.as_deref() == Some(*tree) {
                layout.masked.extend(secrets.iter().map(|s| root.join(s)));
            }
        }
    }
    // Denied entries in the writable roots (and the read roots inside them), and every hard
    // link to one of them there.
    let scan: Vec<&Path> = plan
        .read_roots
        .iter()
        .chain(&plan.write_roots)
        .map(|p| p.as_path())
        .filter(|p| layout.writable.iter().any(|w| p.starts_with(w)))
        .collect();
    let mask_outside = plan.outside_links == OutsideLinks::Mask;
    let denied_paths: Vec<PathBuf> = plan
        .denied_paths
        .iter()
        .map(|p| p.as_path().to_path_buf())
        .collect();
    // The walk's memory is Warrant's own: never one a command could have written.
    let memory = plan
        .census_memory
        .as_deref()
        .filter(|m| !layout.writable.iter().any(|w| m.starts_with(w)));
    let (survey, _) = crate::census::survey(&scan, &plan.denied_names, &denied_paths, memory)?;
    for (inode, (links, names)) in survey.census {
        // Another name of a denied file (or of one inside a denied directory), or a name
        // outside the scanned roots (the home directory's secret under a harmless name in the
        // workspace).
        let outside = usize::try_from(links).map_or(true, |n| n > names.len());
        if survey.hidden.contains(&inode) || (mask_outside && outside) {
            layout.masked.extend(names);
        }
    }
    let denied = survey.denied;
    layout.masked.extend(denied);
    Ok(layout)
}

/// A top-level link is recreated when what it points to is in the view.
fn needed_link(link: &Path, to: &Path, layout: &Layout) -> bool {
    let target = if to.is_absolute() {
        to.to_path_buf()
    } else {
        link.parent().unwrap_or(Path::new("/")).join(to)
    };
    layout
        .read_only
        .iter()
        .chain(&layout.writable)
        .any(|p| p.starts_with(&target) || target.starts_with(p))
}

fn devices(old: &dyn Fn(&Path) -> PathBuf, new: &dyn Fn(&Path) -> PathBuf) -> Result<(), String> {
    let dev = new(Path::new("/dev"));
    make_mount_point(&dev, true)?;
    rustix::mount::mount(
        "tmpfs",
        &dev,
        "tmpfs",
        MountFlags::NOSUID,
        Some(c"mode=0755"),
    )
    .map_err(|e| format!("cannot mount /dev: {e}"))?;
    for name in DEVICES {
        let source = old(&Path::new("/dev").join(name));
        if !source.exists() {
            continue;
        }
        let target = dev.join(name);
        std::fs::write(&target, b"").map_err(|e| format!("cannot make /dev/{name}: {e}"))?;
        rustix::mount::mount_bind(&source, &target)
            .map_err(|e| format!("cannot bind /dev/{name}: {e}"))?;
    }
    for (name, to) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(to, dev.join(name))
            .map_err(|e| format!("cannot link /dev/{name}: {e}"))?;
    }
    // Terminals of its own (a new devpts instance): none of the person's is reachable.
    let pts = dev.join("pts");
    mkdir(&pts, 0o755)?;
    rustix::mount::mount(
        "devpts",
        &pts,
        "devpts",
        MountFlags::NOSUID | MountFlags::NOEXEC,
        Some(c"newinstance,ptmxmode=0666,mode=620"),
    )
    .map_err(|e| format!("cannot mount /dev/pts: {e}"))?;
    std::os::unix::fs::symlink("pts/ptmx", dev.join("ptmx"))
        .map_err(|e| format!("cannot link /dev/ptmx: {e}"))?;
    let shm = dev.join("shm");
    mkdir(&shm, 0o1777)?;
    rustix::mount::mount(
        "tmpfs",
        &shm,
        "tmpfs",
        MountFlags::NOSUID | MountFlags::NODEV,
        Some(c"mode=1777"),
    )
    .map_err(|e| format!("cannot mount /dev/shm: {e}"))?;
    Ok(())
}

/// Remount a bind read-only, keeping the flags the kernel locks for a mount that came from a
/// more privileged namespace (a remount that dropped `nosuid` or `nodev` would be refused).
fn remount_read_only(target: &Path) -> Result<(), String> {
    let vfs = rustix::fs::statvfs(target)
        .map_err(|e| format!("cannot inspect {}: {e}", target.display()))?;
    let mut flags = MountFlags::BIND | MountFlags::RDONLY;
    let kept = [
        (StatVfsMountFlags::NOSUID, MountFlags::NOSUID),
        (StatVfsMountFlags::NODEV, MountFlags::NODEV),
        (StatVfsMountFlags::NOEXEC, MountFlags::NOEXEC),
        (StatVfsMountFlags::NOATIME, MountFlags::NOATIME),
        (StatVfsMountFlags::NODIRATIME, MountFlags::NODIRATIME),
        (StatVfsMountFlags::RELATIME, MountFlags::RELATIME),
    ];
    for (have, keep) in kept {
        if vfs.f_flag.contains(have) {
            flags |= keep;
        }
    }
    rustix::mount::mount_remount(target, flags, "")
        .map_err(|e| format!("cannot make {} read-only: {e}", target.display()))
}

/// An empty directory, or an empty file, at `path` (parents created), to mount on.
fn make_mount_point(path: &Path, dir: bool) -> Result<(), String> {
    if let Some(parent) = path.parent() {
        mkdir_all(parent)?;
    }
    if std::fs::symlink_metadata(path).is_ok() {
        return Ok(());
    }
    if dir {
        mkdir(path, 0o755)
    } else {
        std::fs::write(path, b"").map_err(|e| format!("cannot make {}: {e}", path.display()))
    }
}

fn mkdir_all(path: &Path) -> Result<(), String> {
    std::fs::create_dir_all(path).map_err(|e| format!("cannot make {}: {e}", path.display()))
}

fn mkdir(path: &Path, mode: u32) -> Result<(), String> {
    match std::fs::create_dir(path) {
        Ok(()) => set_mode(path, mode),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(format!("cannot make {}: {e}", path.display())),
    }
}

fn set_mode(path: &Path, mode: u32) -> Result<(), String> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("cannot set the mode of {}: {e}", path.display()))
}

/// `path` without its root, for joining under another root.
fn relative(path: &Path) -> PathBuf {
    path.components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .collect()
}

/// overlayfs' mount options for one lower layer. `userxattr`: the layer is mounted in a user
/// namespace, so its bookkeeping lives in `user.overlay.*` attributes. A path holding a comma,
/// a colon or a backslash would need escaping overlayfs does not offer for every kernel, so it
/// is refused.
/// An overlay at `target` of `upper` (where writes land, `work` beside it) over `lower`.
fn mount_overlay(target: &Path, lower: &Path, upper: &Path, work: &Path) -> Result<(), String> {
    let options = overlay_options(lower, upper, work)?;
    rustix::mount::mount(
        "overlay",
        target,
        "overlay",
        MountFlags::NOSUID | MountFlags::NODEV,
        Some(options.as_c_str()),
    )
    .map_err(|e| e.to_string())
}

fn overlay_options(lower: &Path, upper: &Path, work: &Path) -> Result<std::ffi::CString, String> {
    let mut text = String::new();
    for (key, path) in [("lowerdir", lower), ("upperdir", upper), ("workdir", work)] {
        let s = path
            .to_str()
            .ok_or_else(|| format!("{} is not UTF-8", path.display()))?;
        if s.contains([',', ':', '\\', '\0']) {
            return Err(format!(
                "{s} holds a character overlayfs options cannot carry (',', ':' or '\\')"
            ));
        }
        text.push_str(&format!("{key}={s},"));
    }
    text.push_str("userxattr");
    std::ffi::CString::new(text).map_err(|_| "a path holds a NUL byte".to_owned())
}
