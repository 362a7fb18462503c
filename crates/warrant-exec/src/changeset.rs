//! What a command run over an overlay changed, read from the overlay's upper directory and
//! compared with the workspace (`lower`); how it is classified, shown to a person, and applied to
//! the real workspace entry by entry, each re-checked against what was recorded.
//! Limits: ownership, timestamps, hard links (each name is its own file) and the workspace root's
//! own mode are not carried; entries that are not files, links or directories are refused when
//! read; names and link targets must be UTF-8.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs::{File, Metadata};
use std::io::{Read, Write};
use std::ops::ControlFlow;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use rustix::fs::{
    AtFlags, CWD, FileType, Mode, OFlags, RenameFlags, fchmod, fstat, fsync, linkat, mkdirat,
    openat, readlinkat, renameat, renameat_with, statat, symlinkat, unlinkat,
};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use similar::TextDiff;
use warrant_core::{Digest, digest_of, render};

use crate::error::ExecError;
use crate::grants::name_matches;

/// Files up to this size get a diff when both sides are text.
pub const MAX_DIFF_FILE_BYTES: u64 = 64 * 1024;
/// The diff of one file is cut at this many bytes.
pub const MAX_DIFF_BYTES: usize = 8 * 1024;
/// [`Changeset::render`] shows diffs up to this many bytes in all, then only the list.
pub const MAX_RENDER_DIFF_BYTES: usize = 64 * 1024;
/// Names inside which nothing a command changed is ever applied (the sandbox's default
/// `protected`).
pub const PROTECTED_NAMES: &[&str] = &[".git", ".warrant"];
/// File name patterns (`*` wildcards) a command's changes may never touch: the sandbox's
/// default `denied` list.
pub const DENIED_PATTERNS: &[&str] = warrant_core::config::DEFAULT_DENIED;

const OPAQUE_XATTRS: &[&str] = &["user.overlay.opaque", "trusted.overlay.opaque"];
const WHITEOUT_XATTRS: &[&str] = &["user.overlay.whiteout", "trusted.overlay.whiteout"];
/// Overlay features Warrant does not mount with; their traces mean an upper it cannot read.
const UNSUPPORTED_XATTRS: &[(&str, &str)] = &[
    ("user.overlay.redirect", "a redirected (renamed) directory"),
    (
        "trusted.overlay.redirect",
        "a redirected (renamed) directory",
    ),
    ("user.overlay.metacopy", "a metadata-only copy"),
    ("trusted.overlay.metacopy", "a metadata-only copy"),
];

/// One thing at a path, as recorded (modes are the permission bits, `st_mode & 0o7777`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Node {
    File {
        size: u64,
        digest: Digest,
        mode: u32,
    },
    Symlink {
        target: String,
    },
    Dir {
        mode: u32,
    },
    /// A FIFO, socket or device found in the workspace (only ever deleted).
    Special {
        mode: u32,
    },
}

impl Node {
    fn describe(&self) -> String {
        match self {
            Self::File { size, digest, .. } => format!("a file of {size} bytes ({digest})"),
            Self::Symlink { target } => format!("a link to {target}"),
            Self::Dir { .. } => "a directory".to_owned(),
            Self::Special { .. } => "a special file".to_owned(),
        }
    }

    fn mode(&self) -> Option<u32> {
        match self {
            Self::File { mode, .. } | Self::Dir { mode } | Self::Special { mode } => Some(*mode),
            Self::Symlink { .. } => None,
        }
    }

    /// Same content and kind, whatever the mode.
    fn same_content(&self, other: &Node) -> bool {
        match (self, other) {
            (
                Self::File {
                    size: a, digest: x, ..
                },
                Self::File {
                    size: b, digest: y, ..
                },
            ) => a == b && x == y,
            (Self::Symlink { target: a }, Self::Symlink { target: b }) => a == b,
            (Self::Dir { .. }, Self::Dir { .. }) | (Self::Special { .. }, Self::Special { .. }) => {
                true
            }
            (
                Self::File { .. } | Self::Symlink { .. } | Self::Dir { .. } | Self::Special { .. },
                _,
            ) => false,
        }
    }

    fn with_mode(&self, new: u32) -> Node {
        match self {
            Self::File { size, digest, .. } => Self::File {
                size: *size,
                digest: digest.clone(),
                mode: new,
            },
            Self::Dir { .. } => Self::Dir { mode: new },
            Self::Special { .. } => Self::Special { mode: new },
            Self::Symlink { target } => Self::Symlink {
                target: target.clone(),
            },
        }
    }
}

/// One change, paths relative to the workspace with `/` between components.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum Change {
    /// A file or link that was not there.
    Created {
        path: String,
        node: Node,
        /// Unified diff from nothing, for a small text file.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        diff: Option<String>,
    },
    /// A file (or link) whose content (or target) changed; `new` may also carry a new mode.
    Modified {
        path: String,
        old: Node,
        new: Node,
        /// The new content is shorter than the old.
        truncated: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        diff: Option<String>,
    },
    /// A file, link or special file of the workspace that is gone.
    Deleted {
        path: String,
        old: Node,
    },
    DirCreated {
        path: String,
        mode: u32,
    },
    /// A workspace directory that is gone (everything under it is listed as deleted too).
    DirDeleted {
        path: String,
    },
    /// Same content, other permission bits.
    ModeChanged {
        path: String,
        old: Node,
        new_mode: u32,
    },
    /// A file deleted at `from` whose exact content appeared at `to`.
    Renamed {
        from: String,
        to: String,
        /// The file at `from` as it was.
        old: Node,
        /// The mode it has at `to`.
        new_mode: u32,
        /// What `to` held before, when the rename overwrote it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replaced: Option<Node>,
    },
}

impl Change {
    /// The path it is sorted and shown by (`to` for a rename).
    pub fn path(&self) -> &str {
        match self {
            Self::Created { path, .. }
            | Self::Modified { path, .. }
            | Self::Deleted { path, .. }
            | Self::DirCreated { path, .. }
            | Self::DirDeleted { path }
            | Self::ModeChanged { path, .. } => path,
            Self::Renamed { to, .. } => to,
        }
    }

    /// Every workspace path the change touches.
    fn paths(&self) -> Vec<&str> {
        match self {
            Self::Renamed { from, to, .. } => vec![from, to],
            Self::Created { .. }
            | Self::Modified { .. }
            | Self::Deleted { .. }
            | Self::DirCreated { .. }
            | Self::DirDeleted { .. }
            | Self::ModeChanged { .. } => vec![self.path()],
        }
    }

    /// Where two changes share a path (a file replaced by a directory), the one that makes
    /// room comes first.
    fn rank(&self) -> u8 {
        match self {
            Self::Deleted { .. } => 0,
            Self::DirDeleted { .. } => 1,
            Self::DirCreated { .. } => 2,
            Self::Created { .. }
            | Self::Modified { .. }
            | Self::ModeChanged { .. }
            | Self::Renamed { .. } => 3,
        }
    }
}

/// Everything one command changed, sorted by path.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Changeset {
    pub entries: Vec<Change>,
    /// Text files whose diff was not kept: the diffs kept are at most
    /// [`MAX_RENDER_DIFF_BYTES`] in all, so a command that wrote thousands of files does not
    /// make a changeset of megabytes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub diffs_left_out: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// How bad a changeset is, worst last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectClass {
    Nothing,
    /// New files and directories, files that grew or were rewritten without getting shorter,
    /// mode changes, renames to new names.
    Change,
    /// Something that existed is gone or shorter: a deletion, a truncation, an overwriting rename.
    Destructive,
    /// It touches a protected or denied name: never applied.
    Refused,
}

impl EffectClass {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Nothing => "nothing",
            Self::Change => "change",
            Self::Destructive => "destructive",
            Self::Refused => "refused",
        }
    }
}

/// Why one path raised the class above `change`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum Finding {
    /// A component of the path is a protected name (`.git`).
    Protected {
        path: String,
        name: String,
    },
    /// A component of the path matches a denied pattern (`*.pem`).
    Denied {
        path: String,
        pattern: String,
    },
    Deleted {
        path: String,
    },
    Truncated {
        path: String,
        old_size: u64,
        new_size: u64,
    },
    /// A rename put another file's content over this one.
    Overwritten {
        path: String,
        by: String,
    },
}

impl Finding {
    /// The workspace-relative path the finding is about.
    pub fn path(&self) -> &str {
        match self {
            Self::Protected { path, .. }
            | Self::Denied { path, .. }
            | Self::Deleted { path }
            | Self::Truncated { path, .. }
            | Self::Overwritten { path, .. } => path,
        }
    }

    pub fn class(&self) -> EffectClass {
        match self {
            Self::Protected { .. } | Self::Denied { .. } => EffectClass::Refused,
            Self::Deleted { .. } | Self::Truncated { .. } | Self::Overwritten { .. } => {
                EffectClass::Destructive
            }
        }
    }
}

/// The class of a changeset and every finding behind it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Effect {
    pub class: EffectClass,
    pub findings: Vec<Finding>,
}

/// One step of an apply: what it did to which path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    MakeDir,
    WriteFile,
    WriteLink,
    Chmod,
    Remove,
    RemoveDir,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Done,
    /// The workspace already held the result (an earlier, interrupted apply).
    AlreadyDone,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    pub kind: StepKind,
    pub path: String,
    pub outcome: Outcome,
}

/// What an apply did, in the order it did it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    pub steps: Vec<Step>,
    /// The caller stopped it before the last step.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stopped: bool,
}

impl Changeset {
    /// The changes a command made through an overlay whose upper directory is `upper`, over the
    /// workspace `lower`.
    pub fn read(lower: &Path, upper: &Path) -> Result<Changeset, ExecError> {
        let mut reader = Reader::default();
        let lower_root = lstat(lower)?.filter(Metadata::is_dir).map(|_| lower);
        reader.dir("", upper, lower_root, false)?;
        let mut entries = pair_renames(reader.entries);
        entries.sort_by(|a, b| (a.path(), a.rank()).cmp(&(b.path(), b.rank())));
        Ok(Changeset {
            entries,
            diffs_left_out: reader.diffs_left_out,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// SHA-256 over the canonical JSON of the changeset: what an approval binds to.
    pub fn digest(&self) -> Result<Digest, ExecError> {
        digest_of(self).map_err(|e| ExecError::ChangesetIo {
            op: "encode",
            path: "the changeset".to_owned(),
            message: e.to_string(),
        })
    }

    /// The class of what the changeset does. `protected` and `denied` entries without a `/`
    /// are name patterns (`*` wildcards) matched against every component of a path; entries
    /// with a `/` are workspace-relative paths covering everything under them.
    pub fn effect(&self, protected: &[String], denied: &[String]) -> Effect {
        let mut findings = Vec::new();
        for change in &self.entries {
            for path in change.paths() {
                if let Some(name) = matching(path, protected) {
                    findings.push(Finding::Protected {
                        path: path.to_owned(),
                        name,
                    });
                }
                if let Some(pattern) = matching(path, denied) {
                    findings.push(Finding::Denied {
                        path: path.to_owned(),
                        pattern,
                    });
                }
            }
            match change {
                Change::Deleted { path, .. } | Change::DirDeleted { path } => {
                    findings.push(Finding::Deleted { path: path.clone() });
                }
                Change::Modified {
                    path,
                    old,
                    new,
                    truncated,
                    ..
                } => {
                    // From the sizes too: a record's flag alone does not make it harmless.
                    if *truncated || size_of(new) < size_of(old) {
                        findings.push(Finding::Truncated {
                            path: path.clone(),
                            old_size: size_of(old),
                            new_size: size_of(new),
                        });
                    }
                }
                Change::Renamed {
                    from, to, replaced, ..
                } => {
                    if replaced.is_some() {
                        findings.push(Finding::Overwritten {
                            path: to.clone(),
                            by: from.clone(),
                        });
                    }
                }
                Change::Created { .. } | Change::DirCreated { .. } | Change::ModeChanged { .. } => {
                }
            }
        }
        let floor = if self.entries.is_empty() {
            EffectClass::Nothing
        } else {
            EffectClass::Change
        };
        let class = findings.iter().map(Finding::class).fold(floor, Ord::max);
        Effect { class, findings }
    }

    /// What a person is shown: one line per change, then the diffs of small text files.
    pub fn render(&self) -> String {
        if self.entries.is_empty() {
            return "no changes\n".to_owned();
        }
        let mut out = String::new();
        // Each diff's own header names its file.
        let mut diffs: Vec<&str> = Vec::new();
        let _ = writeln!(out, "{}", summary(&self.entries));
        for change in &self.entries {
            let line = match change {
                Change::Created { path, node, diff } => {
                    if let Some(d) = diff {
                        diffs.push(d);
                    }
                    format!("+ {}  {}", shown(path), shown_node(node))
                }
                Change::Modified {
                    path,
                    old,
                    new,
                    truncated,
                    diff,
                } => {
                    if let Some(d) = diff {
                        diffs.push(d);
                    }
                    let mut line = format!("~ {}  {}", shown(path), shown_step(old, new));
                    if *truncated {
                        line.push_str("  (truncated)");
                    }
                    line
                }
                Change::Deleted { path, old } => format!("- {}  {}", shown(path), shown_node(old)),
                Change::DirCreated { path, mode } => {
                    format!("+ {}/  directory, mode {mode:o}", shown(path))
                }
                Change::DirDeleted { path } => format!("- {}/  directory", shown(path)),
                Change::ModeChanged {
                    path,
                    old,
                    new_mode,
                } => format!(
                    "~ {}  mode {:o} -> {new_mode:o}",
                    shown(path),
                    old.mode().unwrap_or(0)
                ),
                Change::Renamed {
                    from,
                    to,
                    old,
                    new_mode,
                    replaced,
                } => {
                    let mut line =
                        format!("> {} -> {}  {}", shown(from), shown(to), shown_node(old));
                    if let Some(m) = old.mode().filter(|m| m != new_mode) {
                        let _ = write!(line, "  mode {m:o} -> {new_mode:o}");
                    }
                    if let Some(r) = replaced {
                        let _ = write!(line, "  (replaced {})", shown_node(r));
                    }
                    line
                }
            };
            let _ = writeln!(out, "{line}");
        }
        let mut budget = MAX_RENDER_DIFF_BYTES;
        let mut left_out = self.diffs_left_out;
        for diff in diffs {
            if diff.len() > budget {
                left_out += 1;
                continue;
            }
            budget -= diff.len();
            out.push('\n');
            out.push_str(&render::lines(diff));
            if !diff.ends_with('\n') {
                out.push('\n');
            }
        }
        if left_out > 0 {
            let _ = writeln!(
                out,
                "\n(diffs of {left_out} more files not shown: over {MAX_RENDER_DIFF_BYTES} bytes in all)"
            );
        }
        out
    }

    /// Apply the changeset to the workspace `lower`, taking new content from `upper` (which
    /// must be kept until an apply has finished). Every step is first checked against what was
    /// recorded; if any entry changed in the workspace meanwhile, nothing is done. Each step is
    /// checked again just before it acts. A step whose result is already there is skipped, so
    /// an interrupted apply is finished by applying again. Applying is the caller's decision:
    /// it is meant for a changeset whose [`Changeset::effect`] was not `refused` and that was
    /// approved where its class needs a person, bound by [`Changeset::digest`].
    pub fn apply(&self, lower: &Path, upper: &Path) -> Result<Applied, ExecError> {
        self.apply_with(lower, upper, &mut |_| ControlFlow::Continue(()))
    }

    /// [`Changeset::apply`], telling `after_step` about each step once it is durable; `Break`
    /// stops there (`Applied::stopped`), leaving the rest for a later apply.
    pub fn apply_with(
        &self,
        lower: &Path,
        upper: &Path,
        after_step: &mut dyn FnMut(&Step) -> ControlFlow<()>,
    ) -> Result<Applied, ExecError> {
        let plan = Plan::of(self)?;
        let lower = Tree::open(lower, "the workspace")?;
        let upper = Tree::open(upper, "the command's layer")?;
        for op in &plan.ops {
            if plan.precheck_skipped(op) {
                continue;
            }
            plan.state(&lower, op)?;
        }
        let mut applied = Applied::default();
        for op in &plan.ops {
            let outcome = match plan.state(&lower, op)? {
                State::After => Outcome::AlreadyDone,
                State::Before => {
                    op.run(&lower, &upper, &|| match plan.state(&lower, op)? {
                        State::Before => Ok(()),
                        State::After => Err(stale(
                            op.path(),
                            "what was there before",
                            "the result, written by someone else meanwhile",
                        )),
                    })?;
                    Outcome::Done
                }
            };
            let step = Step {
                kind: op.kind(),
                path: op.path().to_owned(),
                outcome,
            };
            let flow = after_step(&step);
            applied.steps.push(step);
            if flow.is_break() {
                applied.stopped = true;
                break;
            }
        }
        Ok(applied)
    }
}

fn size_of(node: &Node) -> u64 {
    match node {
        Node::File { size, .. } => *size,
        Node::Symlink { target } => target.len() as u64,
        Node::Dir { .. } | Node::Special { .. } => 0,
    }
}

/// The first entry of `list` that covers `path`, if any.
fn matching(path: &str, list: &[String]) -> Option<String> {
    list.iter()
        .find(|entry| {
            let entry = entry.trim_start_matches("./").trim_end_matches('/');
            if entry.contains('/') {
                path == entry || path.starts_with(&format!("{entry}/"))
            } else {
                path.split('/').any(|c| name_matches(entry, c))
            }
        })
        .cloned()
}

fn shown(path: &str) -> std::borrow::Cow<'_, str> {
    render::inline(path)
}

fn shown_node(node: &Node) -> String {
    match node {
        Node::File { size, digest, .. } => format!("{}  {}", bytes(*size), short(digest)),
        Node::Symlink { target } => format!("link to {}", render::inline(target)),
        Node::Dir { .. } => "directory".to_owned(),
        Node::Special { .. } => "special file".to_owned(),
    }
}

fn shown_step(old: &Node, new: &Node) -> String {
    let mut s = match (old, new) {
        (
            Node::File {
                size: a, digest: x, ..
            },
            Node::File {
                size: b, digest: y, ..
            },
        ) => format!("{a} -> {}  {} -> {}", bytes(*b), short(x), short(y)),
        (Node::File { .. } | Node::Symlink { .. } | Node::Dir { .. } | Node::Special { .. }, _) => {
            format!("{} -> {}", shown_node(old), shown_node(new))
        }
    };
    if let (Some(a), Some(b)) = (old.mode(), new.mode())
        && a != b
    {
        let _ = write!(s, "  mode {a:o} -> {b:o}");
    }
    s
}

fn bytes(n: u64) -> String {
    if n == 1 {
        "1 byte".to_owned()
    } else {
        format!("{n} bytes")
    }
}

/// `sha256:` and the first 12 hex digits: enough for a person to compare two listings.
fn short(digest: &Digest) -> String {
    digest.as_str().chars().take(19).collect()
}

fn summary(entries: &[Change]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for change in entries {
        let word = match change {
            Change::Created { .. } | Change::DirCreated { .. } => "created",
            Change::Modified { .. } | Change::ModeChanged { .. } => "modified",
            Change::Deleted { .. } | Change::DirDeleted { .. } => "deleted",
            Change::Renamed { .. } => "renamed",
        };
        *counts.entry(word).or_default() += 1;
    }
    let parts: Vec<String> = ["created", "modified", "deleted", "renamed"]
        .iter()
        .filter_map(|w| counts.get(w).map(|n| format!("{n} {w}")))
        .collect();
    format!(
        "{} change{}: {}",
        entries.len(),
        if entries.len() == 1 { "" } else { "s" },
        parts.join(", ")
    )
}

// ---------------------------------------------------------------------------------------------
// Reading an upper directory.

struct Reader {
    entries: Vec<Change>,
    /// Bytes of diffs that may still be kept.
    diff_budget: usize,
    diffs_left_out: u64,
}

impl Default for Reader {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
            diff_budget: MAX_RENDER_DIFF_BYTES,
            diffs_left_out: 0,
        }
    }
}

fn join(rel: &str, name: &str) -> String {
    if rel.is_empty() {
        name.to_owned()
    } else {
        format!("{rel}/{name}")
    }
}

fn read_err(op: &'static str, path: &Path, e: impl std::fmt::Display) -> ExecError {
    ExecError::ChangesetIo {
        op,
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

fn lstat(path: &Path) -> Result<Option<Metadata>, ExecError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) => Ok(Some(m)),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(read_err("inspect", path, e)),
    }
}

/// Names in `dir`, sorted; a name that is not UTF-8 is refused.
fn names(dir: &Path, rel: &str) -> Result<Vec<String>, ExecError> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| read_err("list", dir, e))? {
        let entry = entry.map_err(|e| read_err("list", dir, e))?;
        let name =
            entry
                .file_name()
                .into_string()
                .map_err(|raw| ExecError::ChangesetUnsupported {
                    path: join(rel, &raw.to_string_lossy()),
                    what: "a name that is not UTF-8".to_owned(),
                })?;
        out.push(name);
    }
    out.sort();
    Ok(out)
}

fn xattr(path: &Path, name: &str) -> Result<Option<Vec<u8>>, ExecError> {
    let mut buf = [0u8; 256];
    match rustix::fs::lgetxattr(path, name, &mut buf) {
        Ok(n) => Ok(Some(buf[..n].to_vec())),
        Err(Errno::NODATA | Errno::NOTSUP | Errno::PERM) => Ok(None),
        // Longer than any overlay value: present, and not "y".
        Err(Errno::RANGE) => Ok(Some(Vec::new())),
        Err(e) => Err(read_err(
            "read the attributes of",
            path,
            std::io::Error::from(e),
        )),
    }
}

fn any_xattr(path: &Path, names: &[&str]) -> Result<Option<Vec<u8>>, ExecError> {
    for name in names {
        if let Some(v) = xattr(path, name)? {
            return Ok(Some(v));
        }
    }
    Ok(None)
}

fn check_supported(path: &Path, rel: &str) -> Result<(), ExecError> {
    for (name, what) in UNSUPPORTED_XATTRS {
        if xattr(path, name)?.is_some() {
            return Err(ExecError::ChangesetUnsupported {
                path: rel.to_owned(),
                what: (*what).to_owned(),
            });
        }
    }
    Ok(())
}

fn is_whiteout(path: &Path, meta: &Metadata) -> Result<bool, ExecError> {
    if meta.file_type().is_char_device() {
        return Ok(meta.rdev() == 0);
    }
    // A zero-size file marked as a whiteout (overlayfs "xwhiteouts").
    if meta.is_file() && meta.len() == 0 {
        return Ok(any_xattr(path, WHITEOUT_XATTRS)?.is_some());
    }
    Ok(false)
}

fn is_opaque(path: &Path) -> Result<bool, ExecError> {
    Ok(any_xattr(path, OPAQUE_XATTRS)?.as_deref() == Some(b"y".as_slice()))
}

fn perm(meta: &Metadata) -> u32 {
    meta.mode() & 0o7777
}

/// The node at `path` (described by `meta`), and its bytes when it is a file small enough to
/// be diffed.
fn node_at(path: &Path, meta: &Metadata, rel: &str) -> Result<(Node, Option<Vec<u8>>), ExecError> {
    let kind = meta.file_type();
    if kind.is_symlink() {
        let target = std::fs::read_link(path).map_err(|e| read_err("read the link", path, e))?;
        let target =
            target
                .into_os_string()
                .into_string()
                .map_err(|_| ExecError::ChangesetUnsupported {
                    path: rel.to_owned(),
                    what: "a link whose target is not UTF-8".to_owned(),
                })?;
        Ok((Node::Symlink { target }, None))
    } else if kind.is_dir() {
        Ok((Node::Dir { mode: perm(meta) }, None))
    } else if kind.is_file() {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags((OFlags::NOFOLLOW | OFlags::NONBLOCK).bits() as i32)
            .open(path)
            .map_err(|e| read_err("open", path, e))?;
        let keep = meta.len() <= MAX_DIFF_FILE_BYTES;
        let (size, digest, bytes) =
            hash_reader(file, keep).map_err(|e| read_err("read", path, e))?;
        Ok((
            Node::File {
                size,
                digest,
                mode: perm(meta),
            },
            bytes,
        ))
    } else {
        Ok((Node::Special { mode: perm(meta) }, None))
    }
}

/// Size and digest of everything `r` yields, and the bytes themselves when `keep` (and they
/// stay within [`MAX_DIFF_FILE_BYTES`]).
fn hash_reader(mut r: impl Read, keep: bool) -> std::io::Result<(u64, Digest, Option<Vec<u8>>)> {
    let mut hasher = Sha256::new();
    let mut kept = keep.then(Vec::new);
    let mut size = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        size += n as u64;
        if let Some(k) = &mut kept {
            if size > MAX_DIFF_FILE_BYTES {
                kept = None;
            } else {
                k.extend_from_slice(&buf[..n]);
            }
        }
    }
    let digest = sha256_digest(hasher)?;
    Ok((size, digest, kept))
}

fn sha256_digest(hasher: Sha256) -> std::io::Result<Digest> {
    let text = format!("sha256:{}", hex::encode(hasher.finalize()));
    Digest::parse(&text).ok_or_else(|| std::io::Error::other("a SHA-256 digest did not parse"))
}

/// Text when it has no NUL and is UTF-8.
fn as_text(bytes: &[u8]) -> Option<&str> {
    if bytes.contains(&0) {
        return None;
    }
    std::str::from_utf8(bytes).ok()
}

fn make_diff(path: &str, old: Option<&[u8]>, new: &[u8]) -> Option<String> {
    let new = as_text(new)?;
    let old = match old {
        Some(o) => as_text(o)?,
        None => "",
    };
    if old.is_empty() && new.is_empty() {
        return None;
    }
    let mut diff = TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string();
    if diff.len() > MAX_DIFF_BYTES {
        let mut cut = MAX_DIFF_BYTES;
        while !diff.is_char_boundary(cut) {
            cut -= 1;
        }
        diff.truncate(cut);
        let _ = write!(diff, "\n(diff cut at {MAX_DIFF_BYTES} bytes)\n");
    }
    Some(diff)
}

impl Reader {
    /// `diff` if it still fits in the budget.
    fn keep(&mut self, diff: Option<String>) -> Option<String> {
        let diff = diff?;
        if diff.len() > self.diff_budget {
            self.diffs_left_out += 1;
            return None;
        }
        self.diff_budget -= diff.len();
        Some(diff)
    }

    /// Walk the upper directory `up` (workspace path `rel`) against the lower directory `lo`
    /// (`None`: nothing there). `opaque`: the command saw none of `lo`'s entries, so those not
    /// in `up` are deleted.
    fn dir(
        &mut self,
        rel: &str,
        up: &Path,
        lo: Option<&Path>,
        opaque: bool,
    ) -> Result<(), ExecError> {
        let upper_names = names(up, rel)?;
        for name in &upper_names {
            let child = join(rel, name);
            let up_path = up.join(name);
            let Some(up_meta) = lstat(&up_path)? else {
                continue;
            };
            let lo_path = lo.map(|l| l.join(name));
            let lo_meta = match &lo_path {
                Some(p) => lstat(p)?,
                None => None,
            };
            let lower = lo_path.as_deref().zip(lo_meta.as_ref());
            if is_whiteout(&up_path, &up_meta)? {
                if let Some((p, m)) = lower {
                    self.gone(&child, p, m)?;
                }
                continue;
            }
            check_supported(&up_path, &child)?;
            if up_meta.is_dir() {
                let child_opaque = opaque || is_opaque(&up_path)?;
                match lower {
                    Some((p, m)) if m.is_dir() => {
                        if perm(m) != perm(&up_meta) {
                            self.entries.push(Change::ModeChanged {
                                path: child.clone(),
                                old: Node::Dir { mode: perm(m) },
                                new_mode: perm(&up_meta),
                            });
                        }
                        self.dir(&child, &up_path, Some(p), child_opaque)?;
                    }
                    other => {
                        if let Some((p, m)) = other {
                            self.gone(&child, p, m)?;
                        }
                        self.entries.push(Change::DirCreated {
                            path: child.clone(),
                            mode: perm(&up_meta),
                        });
                        self.dir(&child, &up_path, None, true)?;
                    }
                }
                continue;
            }
            let kind = up_meta.file_type();
            if !(kind.is_file() || kind.is_symlink()) {
                return Err(ExecError::ChangesetUnsupported {
                    path: child,
                    what: "a FIFO, socket or device".to_owned(),
                });
            }
            let (new, new_bytes) = node_at(&up_path, &up_meta, &child)?;
            match lower {
                Some((p, m))
                    if m.is_file() == kind.is_file()
                        && m.file_type().is_symlink() == kind.is_symlink() =>
                {
                    let (old, old_bytes) = node_at(p, m, &child)?;
                    if old.same_content(&new) {
                        if old.mode() != new.mode() {
                            self.entries.push(Change::ModeChanged {
                                path: child,
                                new_mode: new.mode().unwrap_or(0),
                                old,
                            });
                        }
                        continue;
                    }
                    let truncated = size_of(&new) < size_of(&old) && kind.is_file();
                    let diff = new_bytes
                        .as_deref()
                        .zip(old_bytes.as_deref())
                        .and_then(|(n, o)| make_diff(&child, Some(o), n));
                    let diff = self.keep(diff);
                    self.entries.push(Change::Modified {
                        path: child,
                        old,
                        new,
                        truncated,
                        diff,
                    });
                }
                other => {
                    if let Some((p, m)) = other {
                        self.gone(&child, p, m)?;
                    }
                    let diff = new_bytes
                        .as_deref()
                        .and_then(|n| make_diff(&child, None, n));
                    let diff = self.keep(diff);
                    self.entries.push(Change::Created {
                        path: child,
                        node: new,
                        diff,
                    });
                }
            }
        }
        if opaque && let Some(lo) = lo {
            let seen: BTreeSet<&String> = upper_names.iter().collect();
            for name in names(lo, rel)? {
                if seen.contains(&name) {
                    continue;
                }
                let p = lo.join(&name);
                if let Some(m) = lstat(&p)? {
                    self.gone(&join(rel, &name), &p, &m)?;
                }
            }
        }
        Ok(())
    }

    /// The lower entry at `rel` is gone: a file as deleted, a directory with all it held.
    fn gone(&mut self, rel: &str, path: &Path, meta: &Metadata) -> Result<(), ExecError> {
        if meta.is_dir() {
            for name in names(path, rel)? {
                let p = path.join(&name);
                if let Some(m) = lstat(&p)? {
                    self.gone(&join(rel, &name), &p, &m)?;
                }
            }
            self.entries.push(Change::DirDeleted {
                path: rel.to_owned(),
            });
        } else {
            let (old, _) = node_at(path, meta, rel)?;
            self.entries.push(Change::Deleted {
                path: rel.to_owned(),
                old,
            });
        }
        Ok(())
    }
}

/// A deleted non-empty file whose exact content appeared under another name (created, or
/// written over an existing file) is one rename. Empty files are never paired: their content
/// says nothing about where they came from.
fn pair_renames(entries: Vec<Change>) -> Vec<Change> {
    let mut deleted: BTreeMap<Digest, Vec<usize>> = BTreeMap::new();
    for (i, change) in entries.iter().enumerate() {
        if let Change::Deleted {
            old: Node::File { size, digest, .. },
            ..
        } = change
            && *size > 0
        {
            deleted.entry(digest.clone()).or_default().push(i);
        }
    }
    let mut taken: BTreeSet<usize> = BTreeSet::new();
    let mut renamed: BTreeMap<usize, Change> = BTreeMap::new();
    let mut order: Vec<usize> = (0..entries.len()).collect();
    order.sort_by(|a, b| entries[*a].path().cmp(entries[*b].path()));
    for i in order {
        let (to, new, replaced) = match &entries[i] {
            Change::Created { path, node, .. } => (path, node, None),
            Change::Modified { path, old, new, .. } => (path, new, Some(old)),
            Change::Deleted { .. }
            | Change::DirCreated { .. }
            | Change::DirDeleted { .. }
            | Change::ModeChanged { .. }
            | Change::Renamed { .. } => continue,
        };
        let Node::File {
            size, digest, mode, ..
        } = new
        else {
            continue;
        };
        if *size == 0 {
            continue;
        }
        let Some(candidates) = deleted.get_mut(digest) else {
            continue;
        };
        let Some(pos) = candidates.iter().position(|d| !taken.contains(d)) else {
            continue;
        };
        let d = candidates.remove(pos);
        let Change::Deleted { path: from, old } = &entries[d] else {
            continue;
        };
        taken.insert(d);
        taken.insert(i);
        renamed.insert(
            i,
            Change::Renamed {
                from: from.clone(),
                to: to.clone(),
                old: old.clone(),
                new_mode: *mode,
                replaced: replaced.cloned(),
            },
        );
    }
    entries
        .into_iter()
        .enumerate()
        .filter_map(|(i, c)| match renamed.remove(&i) {
            Some(r) => Some(r),
            None if taken.contains(&i) => None,
            None => Some(c),
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Applying.

/// One primitive step on one path.
#[derive(Debug)]
enum Op {
    MakeDir {
        path: String,
    },
    /// Put `node` (a file or link, content from the upper) at `path`; `before` is what must be
    /// there now (`None`: nothing).
    Write {
        path: String,
        node: Node,
        before: Option<Node>,
    },
    /// Set the mode of what is at `path`; `before` is what must be there (for a directory
    /// made by this changeset, any directory).
    Chmod {
        path: String,
        before: Option<Node>,
        mode: u32,
    },
    Remove {
        path: String,
        old: Node,
    },
    RemoveDir {
        path: String,
    },
}

impl Op {
    fn path(&self) -> &str {
        match self {
            Self::MakeDir { path }
            | Self::Write { path, .. }
            | Self::Chmod { path, .. }
            | Self::Remove { path, .. }
            | Self::RemoveDir { path } => path,
        }
    }

    fn kind(&self) -> StepKind {
        match self {
            Self::MakeDir { .. } => StepKind::MakeDir,
            Self::Write {
                node: Node::Symlink { .. },
                ..
            } => StepKind::WriteLink,
            Self::Write { .. } => StepKind::WriteFile,
            Self::Chmod { .. } => StepKind::Chmod,
            Self::Remove { .. } => StepKind::Remove,
            Self::RemoveDir { .. } => StepKind::RemoveDir,
        }
    }

    fn creates(&self) -> bool {
        match self {
            Self::MakeDir { .. } | Self::Write { .. } => true,
            Self::Chmod { .. } | Self::Remove { .. } | Self::RemoveDir { .. } => false,
        }
    }

    fn deletes(&self) -> bool {
        match self {
            Self::Remove { .. } | Self::RemoveDir { .. } => true,
            Self::MakeDir { .. } | Self::Write { .. } | Self::Chmod { .. } => false,
        }
    }

    /// What is at the path once this step has run.
    fn after(&self) -> Option<Node> {
        match self {
            Self::Write { node, .. } => Some(node.clone()),
            Self::MakeDir { .. }
            | Self::Chmod { .. }
            | Self::Remove { .. }
            | Self::RemoveDir { .. } => None,
        }
    }

    /// Carry out the step; `still_before` re-checks the workspace just before a write is put in
    /// place (after the possibly long copy).
    fn run(
        &self,
        lower: &Tree,
        upper: &Tree,
        still_before: &dyn Fn() -> Result<(), ExecError>,
    ) -> Result<(), ExecError> {
        let path = self.path();
        let (dir, name) = match lower.parent(path)? {
            Parent::Dir(dir, name) => (dir, name),
            Parent::Missing | Parent::NotDir => {
                return Err(stale(path, "a directory on the way", "nothing"));
            }
            Parent::Link(link) => return Err(link_error(path, link)),
        };
        match self {
            Self::MakeDir { .. } => mkdirat(&dir, name, Mode::from_raw_mode(0o700))
                .map_err(|e| apply_err("create the directory", path, e))?,
            Self::Write { node, before, .. } => {
                write_node(&dir, name, path, node, before.as_ref(), upper, still_before)?
            }
            Self::Chmod { mode, .. } => {
                let fd = openat(
                    &dir,
                    name,
                    OFlags::RDONLY
                        | OFlags::NOFOLLOW
                        | OFlags::NONBLOCK
                        | OFlags::NOCTTY
                        | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(|e| apply_err("open", path, e))?;
                fchmod(&fd, Mode::from_raw_mode(*mode))
                    .map_err(|e| apply_err("change the mode of", path, e))?;
            }
            Self::Remove { old, .. } => remove_verified(&dir, name, path, old)?,
            Self::RemoveDir { .. } => {
                unlinkat(&dir, name, AtFlags::REMOVEDIR).map_err(|e| match e {
                    Errno::NOTEMPTY | Errno::EXIST => stale(
                        path,
                        "an empty directory",
                        "entries the changeset does not know",
                    ),
                    other => apply_err("delete the directory", path, other),
                })?
            }
        }
        sync_dir(&dir, path)
    }
}

/// The order steps run in: room made for type changes, directories (parents first), files and
/// links, the other deletions (deepest first), then directory modes (deepest first, so a
/// directory made read-only does not stop what goes inside it).
#[derive(Debug)]
struct Plan {
    ops: Vec<Op>,
}

impl Plan {
    fn of(changes: &Changeset) -> Result<Plan, ExecError> {
        let mut creating = Vec::new();
        let mut files = Vec::new();
        let mut deleting = Vec::new();
        let mut dir_modes = Vec::new();
        for change in &changes.entries {
            for path in change.paths() {
                check_path(path)?;
            }
            match change {
                Change::Created { path, node, .. } => files.push(Op::Write {
                    path: path.clone(),
                    node: node.clone(),
                    before: None,
                }),
                Change::Modified { path, old, new, .. } => files.push(Op::Write {
                    path: path.clone(),
                    node: new.clone(),
                    before: Some(old.clone()),
                }),
                Change::Deleted { path, old } => deleting.push(Op::Remove {
                    path: path.clone(),
                    old: old.clone(),
                }),
                Change::DirCreated { path, mode } => {
                    creating.push(Op::MakeDir { path: path.clone() });
                    dir_modes.push(Op::Chmod {
                        path: path.clone(),
                        before: None,
                        mode: *mode,
                    });
                }
                Change::DirDeleted { path } => deleting.push(Op::RemoveDir { path: path.clone() }),
                Change::ModeChanged {
                    path,
                    old,
                    new_mode,
                } => {
                    let op = Op::Chmod {
                        path: path.clone(),
                        before: Some(old.clone()),
                        mode: *new_mode,
                    };
                    match old {
                        Node::Dir { .. } => dir_modes.push(op),
                        Node::File { .. } | Node::Symlink { .. } | Node::Special { .. } => {
                            files.push(op)
                        }
                    }
                }
                Change::Renamed {
                    from,
                    to,
                    old,
                    new_mode,
                    replaced,
                } => {
                    files.push(Op::Write {
                        path: to.clone(),
                        node: old.with_mode(*new_mode),
                        before: replaced.clone(),
                    });
                    deleting.push(Op::Remove {
                        path: from.clone(),
                        old: old.clone(),
                    });
                }
            }
        }
        let made: Vec<String> = creating
            .iter()
            .chain(files.iter())
            .filter(|op| op.creates())
            .map(|op| op.path().to_owned())
            .collect();
        let in_the_way = |p: &str| {
            made.iter()
                .any(|m| p == m || p.starts_with(&format!("{m}/")))
        };
        let (mut first, mut last): (Vec<Op>, Vec<Op>) =
            deleting.into_iter().partition(|op| in_the_way(op.path()));
        first.sort_by(|a, b| b.path().cmp(a.path()));
        last.sort_by(|a, b| b.path().cmp(a.path()));
        creating.sort_by(|a, b| a.path().cmp(b.path()));
        files.sort_by(|a, b| a.path().cmp(b.path()));
        dir_modes.sort_by(|a, b| b.path().cmp(a.path()));
        let mut ops = first;
        ops.extend(creating);
        ops.extend(files);
        ops.extend(last);
        ops.extend(dir_modes);
        Ok(Plan { ops })
    }

    /// Whether a deletion in this plan has `path` (or a directory above it) to clear first, so
    /// what is there now says nothing about this step until that deletion ran.
    fn cleared_first(&self, path: &str) -> bool {
        self.ops
            .iter()
            .filter(|op| op.deletes())
            .any(|op| op.path() == path || path.starts_with(&format!("{}/", op.path())))
    }

    fn precheck_skipped(&self, op: &Op) -> bool {
        match op {
            Op::MakeDir { .. } | Op::Write { .. } => self.cleared_first(op.path()),
            // The mode of a directory this plan makes: there is nothing to check before.
            Op::Chmod { before: None, .. } => true,
            Op::Chmod {
                before: Some(_), ..
            }
            | Op::Remove { .. }
            | Op::RemoveDir { .. } => false,
        }
    }

    /// Whether a step of this plan that puts something at `path` has already done so.
    fn made_here(&self, lower: &Tree, path: &str) -> Result<bool, ExecError> {
        for op in self
            .ops
            .iter()
            .filter(|op| op.creates() && op.path() == path)
        {
            let now = lower.node(path)?;
            let done = match (op, &now) {
                (Op::MakeDir { .. }, Found::Node(Node::Dir { .. })) => true,
                (Op::Write { .. }, Found::Node(n)) => {
                    op.after().as_ref().is_some_and(|a| a.same_content(n))
                }
                (
                    Op::MakeDir { .. }
                    | Op::Write { .. }
                    | Op::Chmod { .. }
                    | Op::Remove { .. }
                    | Op::RemoveDir { .. },
                    _,
                ) => false,
            };
            if done {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether `op` is still to do or already done; anything else is a refusal.
    fn state(&self, lower: &Tree, op: &Op) -> Result<State, ExecError> {
        let path = op.path();
        let now = match lower.node(path)? {
            Found::Link(link) => {
                // Below a link this plan itself put there (a directory replaced by a link), a
                // deletion is done; anything else refuses to go through it.
                if op.deletes() && self.made_here(lower, &link)? {
                    return Ok(State::After);
                }
                return Err(link_error(path, link));
            }
            Found::Absent => None,
            Found::Node(n) => Some(n),
        };
        let found = now
            .as_ref()
            .map_or_else(|| "nothing".to_owned(), Node::describe);
        match op {
            Op::MakeDir { .. } => match &now {
                None => Ok(State::Before),
                Some(Node::Dir { .. }) => Ok(State::After),
                Some(_) => Err(stale(path, "nothing", &found)),
            },
            Op::Write { node, before, .. } => match (&now, before) {
                (Some(n), _) if n.same_content(node) && n.mode() == node.mode() => Ok(State::After),
                (None, None) => Ok(State::Before),
                (Some(n), Some(b)) if n.same_content(b) => Ok(State::Before),
                (Some(n), _) if n.same_content(node) => Ok(State::Before),
                (_, b) => Err(stale(
                    path,
                    &b.as_ref()
                        .map_or_else(|| "nothing".to_owned(), Node::describe),
                    &found,
                )),
            },
            Op::Chmod { before, mode, .. } => match (&now, before) {
                (Some(n), Some(b)) if n.same_content(b) && n.mode() == Some(*mode) => {
                    Ok(State::After)
                }
                (Some(n), Some(b)) if n.same_content(b) && n.mode() == b.mode() => {
                    Ok(State::Before)
                }
                (Some(Node::Dir { mode: m }), None) => Ok(if *m == *mode {
                    State::After
                } else {
                    State::Before
                }),
                (_, b) => Err(stale(
                    path,
                    &b.as_ref()
                        .map_or_else(|| "a directory".to_owned(), Node::describe),
                    &found,
                )),
            },
            Op::Remove { old, .. } => match &now {
                // Moved aside by an interrupted removal: finishing it is still to do.
                None if lower.node(&aside_path(path))?.is_present() => Ok(State::Before),
                None => Ok(State::After),
                Some(n) if n.same_content(old) => Ok(State::Before),
                Some(_) if self.made_here(lower, path)? => Ok(State::After),
                Some(_) => Err(stale(path, &old.describe(), &found)),
            },
            Op::RemoveDir { .. } => match &now {
                None => Ok(State::After),
                Some(Node::Dir { .. }) if !self.made_here(lower, path)? => Ok(State::Before),
                Some(_) if self.made_here(lower, path)? => Ok(State::After),
                Some(_) => Err(stale(path, "a directory", &found)),
            },
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum State {
    Before,
    After,
}

fn stale(path: &str, expected: &str, found: &str) -> ExecError {
    ExecError::ChangesetStale {
        path: path.to_owned(),
        expected: expected.to_owned(),
        found: found.to_owned(),
    }
}

fn link_error(path: &str, link: String) -> ExecError {
    ExecError::ChangesetLink {
        path: path.to_owned(),
        link,
    }
}

fn apply_err(op: &'static str, path: &str, e: Errno) -> ExecError {
    ExecError::ChangesetIo {
        op,
        path: path.to_owned(),
        message: std::io::Error::from(e).to_string(),
    }
}

/// A path an entry may name: relative, components neither empty nor `.` nor `..`.
fn check_path(path: &str) -> Result<(), ExecError> {
    let ok = !path.is_empty()
        && !path.contains('\0')
        && path
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..");
    if ok {
        Ok(())
    } else {
        Err(ExecError::ChangesetBadPath {
            path: path.to_owned(),
        })
    }
}

enum Parent<'a> {
    /// The parent directory, opened without following links, and the last name.
    Dir(OwnedFd, &'a str),
    Missing,
    NotDir,
    /// A link on the way: its workspace path.
    Link(String),
}

enum Found {
    Absent,
    Node(Node),
    Link(String),
}

impl Found {
    fn is_present(&self) -> bool {
        match self {
            Self::Node(_) => true,
            Self::Absent | Self::Link(_) => false,
        }
    }
}

/// A directory tree walked one component at a time, never following a link.
struct Tree {
    root: OwnedFd,
    what: &'static str,
}

impl Tree {
    fn open(path: &Path, what: &'static str) -> Result<Tree, ExecError> {
        let root = openat(
            CWD,
            path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| ExecError::ChangesetIo {
            op: "open",
            path: format!("{what} at {}", path.display()),
            message: std::io::Error::from(e).to_string(),
        })?;
        Ok(Tree { root, what })
    }

    fn parent<'a>(&self, path: &'a str) -> Result<Parent<'a>, ExecError> {
        let (dirs, name) = match path.rsplit_once('/') {
            Some((d, n)) => (d, n),
            None => ("", path),
        };
        let mut fd = openat(
            &self.root,
            ".",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| apply_err("open", self.what, e))?;
        let mut here = String::new();
        for part in dirs.split('/').filter(|p| !p.is_empty()) {
            here = join(&here, part);
            let next = openat(
                &fd,
                part,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            );
            fd = match next {
                Ok(next) => next,
                Err(Errno::NOENT) => return Ok(Parent::Missing),
                Err(Errno::NOTDIR | Errno::LOOP) => {
                    return match statat(&fd, part, AtFlags::SYMLINK_NOFOLLOW) {
                        Ok(s) if FileType::from_raw_mode(s.st_mode) == FileType::Symlink => {
                            Ok(Parent::Link(here))
                        }
                        Ok(_) => Ok(Parent::NotDir),
                        Err(Errno::NOENT) => Ok(Parent::Missing),
                        Err(e) => Err(apply_err("inspect", &here, e)),
                    };
                }
                Err(e) => return Err(apply_err("open", &here, e)),
            };
        }
        Ok(Parent::Dir(fd, name))
    }

    /// What is at `path` now (links not followed, files hashed).
    fn node(&self, path: &str) -> Result<Found, ExecError> {
        let (dir, name) = match self.parent(path)? {
            Parent::Dir(d, n) => (d, n),
            Parent::Missing | Parent::NotDir => return Ok(Found::Absent),
            Parent::Link(l) => return Ok(Found::Link(l)),
        };
        Ok(match node_in(&dir, name, path)? {
            Some(node) => Found::Node(node),
            None => Found::Absent,
        })
    }

    fn open_regular(&self, path: &str) -> Result<File, ExecError> {
        match self.parent(path)? {
            Parent::Dir(dir, name) => open_file(&dir, name, path),
            Parent::Missing | Parent::NotDir | Parent::Link(_) => {
                Err(ExecError::ChangesetUpperChanged {
                    path: path.to_owned(),
                })
            }
        }
    }
}

/// What is at `name` in `dir` (links not followed, files hashed); `path` names it in errors.
fn node_in(dir: &OwnedFd, name: &str, path: &str) -> Result<Option<Node>, ExecError> {
    let stat = match statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(s) => s,
        Err(Errno::NOENT) => return Ok(None),
        Err(e) => return Err(apply_err("inspect", path, e)),
    };
    let kind = FileType::from_raw_mode(stat.st_mode);
    let mode = stat.st_mode & 0o7777;
    let node = if kind == FileType::RegularFile {
        let file = open_file(dir, name, path)?;
        let (size, digest, _) = hash_reader(file, false).map_err(|e| ExecError::ChangesetIo {
            op: "read",
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        Node::File { size, digest, mode }
    } else if kind == FileType::Directory {
        Node::Dir { mode }
    } else if kind == FileType::Symlink {
        let target =
            readlinkat(dir, name, Vec::new()).map_err(|e| apply_err("read the link", path, e))?;
        Node::Symlink {
            target: target.to_string_lossy().into_owned(),
        }
    } else {
        Node::Special { mode }
    };
    Ok(Some(node))
}

fn open_file(dir: &OwnedFd, name: &str, path: &str) -> Result<File, ExecError> {
    let fd = openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| apply_err("open", path, e))?;
    let stat = fstat(&fd).map_err(|e| apply_err("inspect", path, e))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(ExecError::ChangesetIo {
            op: "read",
            path: path.to_owned(),
            message: "it is not a regular file".to_owned(),
        });
    }
    Ok(File::from(fd))
}

/// The temporary name beside `name` a write goes through: fixed for a name, so a write that
/// was interrupted leaves nothing behind once it is done again, and short enough for any name.
fn temp_name(name: &str) -> String {
    let hash = hex::encode(Sha256::digest(name.as_bytes()));
    format!(".warrant-apply-{}.tmp", &hash[..16])
}

/// Put `node` at `name` in `dir` atomically: a temporary entry beside it, then a rename over
/// (or, when nothing was there, a rename that refuses to replace what appeared meanwhile).
fn write_node(
    dir: &OwnedFd,
    name: &str,
    path: &str,
    node: &Node,
    before: Option<&Node>,
    upper: &Tree,
    still_before: &dyn Fn() -> Result<(), ExecError>,
) -> Result<(), ExecError> {
    let tmp = temp_name(name);
    // Left by an interrupted apply of this same step.
    match unlinkat(dir, tmp.as_str(), AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => {}
        Err(e) => return Err(apply_err("remove an old temporary file next to", path, e)),
    }
    let made = match node {
        Node::File { size, digest, mode } => {
            copy_verified(dir, &tmp, path, *size, digest, *mode, upper)
        }
        Node::Symlink { target } => symlinkat(target.as_str(), dir, tmp.as_str())
            .map_err(|e| apply_err("create the link", path, e)),
        Node::Dir { .. } | Node::Special { .. } => Err(ExecError::ChangesetUnsupported {
            path: path.to_owned(),
            what: "a directory or special file to write".to_owned(),
        }),
    };
    let placed = made.and_then(|()| still_before()).and_then(|()| {
        if before.is_some() {
            renameat(dir, tmp.as_str(), dir, name)
                .map_err(|e| apply_err("move the new content into", path, e))
        } else {
            publish_new(dir, &tmp, name, path)
        }
    });
    if placed.is_err() {
        let _ = unlinkat(dir, tmp.as_str(), AtFlags::empty());
    }
    placed
}

/// The name a file is moved to while its removal is checked.
fn aside_name(name: &str) -> String {
    let hash = hex::encode(Sha256::digest(name.as_bytes()));
    format!(".warrant-remove-{}.tmp", &hash[..16])
}

fn aside_path(path: &str) -> String {
    match path.rsplit_once('/') {
        Some((dir, name)) => format!("{dir}/{}", aside_name(name)),
        None => aside_name(path),
    }
}

/// Remove `name` only if it is `old`: move it aside (atomic), check what was moved, then unlink
/// it, or put it back and refuse. So a file rewritten by someone else just before the removal
/// is never lost. A removal interrupted after the move is finished here.
fn remove_verified(dir: &OwnedFd, name: &str, path: &str, old: &Node) -> Result<(), ExecError> {
    let aside = aside_name(name);
    match renameat_with(dir, name, dir, aside.as_str(), RenameFlags::NOREPLACE) {
        Ok(()) | Err(Errno::NOENT) => {}
        Err(Errno::EXIST) => {
            return Err(ExecError::ChangesetIo {
                op: "move aside",
                path: path.to_owned(),
                message: format!("{aside} is in the way; remove it if it is not needed"),
            });
        }
        Err(e) => return Err(apply_err("move aside", path, e)),
    }
    let moved = node_in(dir, &aside, path)?;
    match moved {
        Some(n) if n.same_content(old) => unlinkat(dir, aside.as_str(), AtFlags::empty())
            .map_err(|e| apply_err("delete", path, e)),
        Some(n) => {
            let _ = renameat_with(dir, aside.as_str(), dir, name, RenameFlags::NOREPLACE);
            Err(stale(path, &old.describe(), &n.describe()))
        }
        None => Ok(()),
    }
}

/// Put `tmp` in place as `name` only if `name` does not exist.
fn publish_new(dir: &OwnedFd, tmp: &str, name: &str, path: &str) -> Result<(), ExecError> {
    let appeared = || stale(path, "nothing", "an entry that appeared meanwhile");
    match renameat_with(dir, tmp, dir, name, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(Errno::EXIST) => Err(appeared()),
        // Filesystems without RENAME_NOREPLACE: a hard link is just as exclusive.
        Err(Errno::INVAL | Errno::NOSYS) => match linkat(dir, tmp, dir, name, AtFlags::empty()) {
            Ok(()) => {
                let _ = unlinkat(dir, tmp, AtFlags::empty());
                Ok(())
            }
            Err(Errno::EXIST) => Err(appeared()),
            Err(e) => Err(apply_err("create", path, e)),
        },
        Err(e) => Err(apply_err("create", path, e)),
    }
}

/// Copy the upper's file at `path` into `tmp`, refusing when it is not what was recorded.
fn copy_verified(
    dir: &OwnedFd,
    tmp: &str,
    path: &str,
    size: u64,
    digest: &Digest,
    mode: u32,
    upper: &Tree,
) -> Result<(), ExecError> {
    let mut src = upper.open_regular(path)?;
    let fd = openat(
        dir,
        tmp,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(|e| apply_err("create a temporary file next to", path, e))?;
    let mut out = File::from(fd);
    let mut hasher = Sha256::new();
    let mut copied = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match src.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(ExecError::ChangesetIo {
                    op: "read the command's copy of",
                    path: path.to_owned(),
                    message: e.to_string(),
                });
            }
        };
        hasher.update(&buf[..n]);
        copied += n as u64;
        out.write_all(&buf[..n])
            .map_err(|e| ExecError::ChangesetIo {
                op: "write",
                path: path.to_owned(),
                message: e.to_string(),
            })?;
    }
    let got = sha256_digest(hasher).map_err(|e| ExecError::ChangesetIo {
        op: "hash",
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    if copied != size || &got != digest {
        return Err(ExecError::ChangesetUpperChanged {
            path: path.to_owned(),
        });
    }
    fchmod(&out, Mode::from_raw_mode(mode)).map_err(|e| apply_err("set the mode of", path, e))?;
    out.sync_all().map_err(|e| ExecError::ChangesetIo {
        op: "flush",
        path: path.to_owned(),
        message: e.to_string(),
    })
}

/// The step is durable only once its directory is.
fn sync_dir(dir: &OwnedFd, path: &str) -> Result<(), ExecError> {
    let readable = openat(
        dir,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| apply_err("open the directory of", path, e))?;
    fsync(&readable).map_err(|e| apply_err("flush the directory of", path, e))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;
    use warrant_core::Coded;

    fn file(content: &str, mode: u32) -> Node {
        Node::File {
            size: content.len() as u64,
            digest: Digest::of_bytes(content.as_bytes()),
            mode,
        }
    }

    fn guards() -> (Vec<String>, Vec<String>) {
        let own = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        (own(PROTECTED_NAMES), own(DENIED_PATTERNS))
    }

    /// One sample of every kind of change at `path`, with the class it alone gives. The match
    /// is exhaustive: a new kind of change needs its row here.
    fn samples(path: &str) -> Vec<(Change, EffectClass)> {
        let p = path.to_owned();
        let all = vec![
            Change::Created {
                path: p.clone(),
                node: file("a", 0o644),
                diff: None,
            },
            Change::Modified {
                path: p.clone(),
                old: file("a", 0o644),
                new: file("ab", 0o644),
                truncated: false,
                diff: None,
            },
            Change::Modified {
                path: p.clone(),
                old: file("ab", 0o644),
                new: file("a", 0o644),
                truncated: true,
                diff: None,
            },
            Change::Deleted {
                path: p.clone(),
                old: file("a", 0o644),
            },
            Change::DirCreated {
                path: p.clone(),
                mode: 0o755,
            },
            Change::DirDeleted { path: p.clone() },
            Change::ModeChanged {
                path: p.clone(),
                old: file("a", 0o644),
                new_mode: 0o755,
            },
            Change::Renamed {
                from: "elsewhere".into(),
                to: p.clone(),
                old: file("a", 0o644),
                new_mode: 0o644,
                replaced: None,
            },
            Change::Renamed {
                from: "elsewhere".into(),
                to: p,
                old: file("a", 0o644),
                new_mode: 0o644,
                replaced: Some(file("b", 0o644)),
            },
        ];
        all.into_iter()
            .map(|c| {
                let class = match &c {
                    Change::Created { .. }
                    | Change::DirCreated { .. }
                    | Change::ModeChanged { .. } => EffectClass::Change,
                    Change::Modified { truncated, .. } => {
                        if *truncated {
                            EffectClass::Destructive
                        } else {
                            EffectClass::Change
                        }
                    }
                    Change::Renamed { replaced, .. } => {
                        if replaced.is_some() {
                            EffectClass::Destructive
                        } else {
                            EffectClass::Change
                        }
                    }
                    Change::Deleted { .. } | Change::DirDeleted { .. } => EffectClass::Destructive,
                };
                (c, class)
            })
            .collect()
    }

    #[test]
    fn every_kind_of_change_has_its_class_and_guarded_names_refuse_all() {
        let (protected, denied) = guards();
        let mut table = Vec::new();
        for path in [
            "src/lib.rs",
            ".git/hooks/pre-commit",
            "a/.warrant/store.db",
            ".env",
            "cfg/.env.prod",
            "tls/server.pem",
            "k/host.key",
            "id_ed25519.pub",
            "home/id_ecdsa",
            "ok/.envrc",
        ] {
            for (change, alone) in samples(path) {
                let guarded = path != "src/lib.rs" && path != "ok/.envrc";
                let want = if guarded { EffectClass::Refused } else { alone };
                let got = Changeset {
                    entries: vec![change.clone()],
                    diffs_left_out: 0,
                }
                .effect(&protected, &denied)
                .class;
                table.push((path, change.rank(), got == want));
            }
        }
        assert!(table.iter().all(|(_, _, ok)| *ok), "{table:?}");
        assert_eq!(
            Changeset::default().effect(&protected, &denied),
            Effect {
                class: EffectClass::Nothing,
                findings: vec![]
            }
        );
    }

    #[test]
    fn a_record_claiming_no_truncation_is_still_destructive() {
        let cs = Changeset {
            entries: vec![Change::Modified {
                path: "notes.md".into(),
                old: file("a long text", 0o644),
                new: file("a", 0o644),
                truncated: false,
                diff: None,
            }],
            diffs_left_out: 0,
        };
        assert_eq!(cs.effect(&[], &[]).class, EffectClass::Destructive);
    }

    #[test]
    fn a_rename_from_a_guarded_name_is_refused() {
        let (protected, denied) = guards();
        let cs = Changeset {
            entries: vec![Change::Renamed {
                from: ".git/config".into(),
                to: "config.txt".into(),
                old: file("x", 0o644),
                new_mode: 0o644,
                replaced: None,
            }],
            diffs_left_out: 0,
        };
        assert_eq!(
            cs.effect(&protected, &denied).findings,
            vec![Finding::Protected {
                path: ".git/config".into(),
                name: ".git".into()
            }]
        );
    }

    #[test]
    fn render_escapes_what_the_command_chose_and_caps_diffs() {
        let big_old: String = (0..3000).map(|i| format!("line {i}\n")).collect();
        let big_new: String = (0..3000).map(|i| format!("LINE {i}\n")).collect();
        let cs = Changeset {
            entries: vec![
                Change::Created {
                    path: "evil\u{1b}[2J\rname.txt".into(),
                    node: file("hi\u{1b}]0;owned\u{7}\n", 0o644),
                    diff: make_diff("evil.txt", None, "hi\u{1b}]0;owned\u{7}\n".as_bytes()),
                },
                Change::Modified {
                    path: "big.txt".into(),
                    old: file(&big_old, 0o644),
                    new: file(&big_new, 0o644),
                    truncated: false,
                    diff: make_diff("big.txt", Some(big_old.as_bytes()), big_new.as_bytes()),
                },
                Change::Created {
                    path: "blob.bin".into(),
                    node: file("\0\u{1}\u{2}", 0o644),
                    diff: make_diff("blob.bin", None, b"\0\x01\x02"),
                },
                Change::Created {
                    path: "l".into(),
                    node: Node::Symlink {
                        target: "\u{202e}txt.exe".into(),
                    },
                    diff: None,
                },
            ],
            diffs_left_out: 0,
        };
        let shown = cs.render();
        assert!(!shown.contains('\u{1b}') && !shown.contains('\r') && !shown.contains('\u{202e}'));
        assert!(shown.contains(&format!("(diff cut at {MAX_DIFF_BYTES} bytes)")));
        let big = shown.find("+++ b/big.txt").unwrap();
        assert!(shown.len() - big < MAX_DIFF_BYTES + 200, "{}", shown.len());
        let head: Vec<&str> = shown.lines().take(5).collect();
        insta::assert_snapshot!(head.join("\n"));
    }

    #[test]
    fn render_leaves_out_diffs_over_the_total_budget() {
        let body: String = (0..1000).map(|i| format!("x{i}\n")).collect();
        let entries: Vec<Change> = (0..20)
            .map(|i| {
                let path = format!("f{i:02}.txt");
                Change::Created {
                    diff: make_diff(&path, None, body.as_bytes()),
                    path,
                    node: file(&body, 0o644),
                }
            })
            .collect();
        let shown = Changeset {
            entries,
            diffs_left_out: 0,
        }
        .render();
        let diffs = shown.matches("\n+++ b/").count();
        let left: usize = shown
            .split("(diffs of ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!((diffs + left, diffs > 0, left > 0), (20, true, true));
        let diff_bytes = shown.len() - shown.find("\n--- a/").unwrap();
        assert!(diff_bytes <= MAX_RENDER_DIFF_BYTES + 200, "{diff_bytes}");
    }

    #[test]
    fn bad_paths_are_refused() {
        for bad in [
            "",
            "/etc/passwd",
            "a/../b",
            "./a",
            "a//b",
            "a/",
            "..",
            "a\0b",
        ] {
            assert_eq!(
                check_path(bad),
                Err(ExecError::ChangesetBadPath { path: bad.into() }),
                "{bad:?}"
            );
        }
        for good in ["a", "a/b.c", ".hidden/x", "...", "a..b"] {
            assert_eq!(check_path(good), Ok(()), "{good}");
        }
    }

    #[test]
    fn an_interrupted_write_leaves_nothing_behind_once_applied_again() {
        let dir = tempfile::tempdir().unwrap();
        let (lower, upper) = (dir.path().join("l"), dir.path().join("u"));
        std::fs::create_dir_all(lower.join("d")).unwrap();
        std::fs::create_dir_all(upper.join("d")).unwrap();
        std::fs::write(upper.join("d/n.txt"), "new").unwrap();
        // What a crash between creating the temporary file and renaming it leaves.
        std::fs::write(lower.join("d").join(temp_name("n.txt")), "ne").unwrap();
        let cs = Changeset {
            entries: vec![Change::Created {
                path: "d/n.txt".into(),
                node: file("new", 0o640),
                diff: None,
            }],
            diffs_left_out: 0,
        };
        cs.apply(&lower, &upper).unwrap();
        let names: Vec<String> = std::fs::read_dir(lower.join("d"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["n.txt"]);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(lower.join("d/n.txt"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(
            (
                std::fs::read_to_string(lower.join("d/n.txt")).unwrap(),
                mode & 0o7777
            ),
            ("new".to_owned(), 0o640)
        );
    }

    #[test]
    fn a_removal_interrupted_after_the_move_aside_is_finished_or_undone() {
        let dir = tempfile::tempdir().unwrap();
        let (lower, upper) = (dir.path().join("l"), dir.path().join("u"));
        std::fs::create_dir_all(lower.join("d")).unwrap();
        std::fs::create_dir_all(&upper).unwrap();
        let cs = Changeset {
            entries: vec![Change::Deleted {
                path: "d/old.txt".into(),
                old: file("old", 0o644),
            }],
            diffs_left_out: 0,
        };
        let listing = || {
            let mut names: Vec<String> = std::fs::read_dir(lower.join("d"))
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            names.sort();
            names
        };
        // The crash left the recorded file moved aside: applying again removes it.
        std::fs::write(lower.join("d").join(aside_name("old.txt")), "old").unwrap();
        let applied = cs.apply(&lower, &upper).unwrap();
        assert_eq!(
            (applied.steps[0].outcome, listing()),
            (Outcome::Done, Vec::<String>::new())
        );
        // What was moved aside is not what was recorded (rewritten just before the move): it
        // is put back and the removal refused.
        std::fs::write(lower.join("d").join(aside_name("old.txt")), "rewritten").unwrap();
        assert_eq!(cs.apply(&lower, &upper).unwrap_err().code(), "W-EXEC-024");
        assert_eq!(listing(), ["old.txt"]);
        assert_eq!(
            std::fs::read_to_string(lower.join("d/old.txt")).unwrap(),
            "rewritten"
        );
    }

    #[test]
    fn a_command_writing_many_files_gives_a_changeset_of_bounded_diffs() {
        let dir = tempfile::tempdir().unwrap();
        let (lower, upper) = (dir.path().join("l"), dir.path().join("u"));
        std::fs::create_dir_all(&lower).unwrap();
        std::fs::create_dir_all(upper.join("gen")).unwrap();
        let body: String = (0..100).map(|i| format!("generated line {i}\n")).collect();
        for i in 0..300 {
            std::fs::write(upper.join(format!("gen/f{i:03}.txt")), &body).unwrap();
        }
        let cs = Changeset::read(&lower, &upper).unwrap();
        let kept = cs
            .entries
            .iter()
            .filter(|c| matches!(c, Change::Created { diff: Some(_), .. }))
            .count() as u64;
        assert_eq!((cs.entries.len(), kept + cs.diffs_left_out), (301, 300));
        assert!(kept > 0 && cs.diffs_left_out > 0);
        let json = serde_json::to_string(&cs).unwrap();
        assert!(
            json.len() < MAX_RENDER_DIFF_BYTES + 301 * 200,
            "{}",
            json.len()
        );
        let shown = cs.render();
        assert!(
            shown.contains(&format!(
                "(diffs of {} more files not shown",
                cs.diffs_left_out
            )),
            "{}",
            &shown[shown.len() - 300..]
        );
    }
}
