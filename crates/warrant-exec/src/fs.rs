//! Filesystem executors for authorized `fs.*` actions: read, list, write/create (atomic), delete
//! and search. Every path is re-resolved before acting and then opened one component at a time
//! with `O_NOFOLLOW`, so a symlink swapped in after the decision is refused, never followed.
//! Limits: Linux only; file names that are not UTF-8 are shown lossily (list) or skipped (search).

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{
    AtFlags, CWD, Dir, FileType, Mode, OFlags, RenameFlags, Stat, fchmod, fstat, fsync, linkat,
    mkdirat, openat, renameat, renameat_with, statat, unlinkat,
};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};
use warrant_core::path::canonicalize;
use warrant_core::{
    CanonicalPath, Digest, FsDelete, FsList, FsRead, FsSearch, FsWrite, LinkResolver,
};
use warrant_kernel::Authorized;

use crate::error::ExecError;

/// Most bytes `read_file` returns; the rest is reported as truncated.
pub const MAX_READ_BYTES: usize = 256 * 1024;
/// How much of a file's start is checked for a NUL byte to call it binary.
pub const BINARY_CHECK_BYTES: usize = 8 * 1024;
/// Most matching lines a search returns.
pub const MAX_SEARCH_MATCHES: usize = 200;
/// Files larger than this are skipped by search (counted as `too_large`).
pub const MAX_SEARCH_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// Longest line text (in characters) a search match shows.
pub const MAX_MATCH_LINE_CHARS: usize = 400;

/// The real answer to "is this a link, and to what?", for [`canonicalize`].
#[derive(Debug, Clone, Copy, Default)]
pub struct OsLinks;

impl LinkResolver for OsLinks {
    fn read_link(&self, path: &Path) -> std::io::Result<Option<PathBuf>> {
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => std::fs::read_link(path).map(Some),
            Ok(_) => Ok(None),
            // A path that does not exist (or runs through a file) is not a link.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileContent {
    pub path: CanonicalPath,
    /// Lossy UTF-8 of at most [`MAX_READ_BYTES`].
    pub content: String,
    pub truncated: bool,
    pub total_bytes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
    /// Sockets, FIFOs, devices.
    Other,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirEntry {
    pub name: String,
    pub kind: EntryKind,
    pub size: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirListing {
    pub path: CanonicalPath,
    /// Sorted by name.
    pub entries: Vec<DirEntry>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteReceipt {
    pub path: CanonicalPath,
    pub bytes: u64,
    pub created: bool,
    /// Digest of what the write replaced, so the journal can say what was overwritten.
    pub previous_digest: Option<Digest>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteReceipt {
    pub path: CanonicalPath,
    /// Files, links and directories removed, the target included.
    pub removed_entries: u64,
}

/// Files a search did not look into, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkipCounts {
    /// The caller's `may_read` said no (policy would deny reading it).
    pub denied: u64,
    pub binary: u64,
    pub too_large: u64,
    /// Not a regular file, a name that is not UTF-8, or an open/read error.
    pub unreadable: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchResult {
    pub root: CanonicalPath,
    pub pattern: String,
    /// `relative/path:line: text`, in walk order (names sorted, depth first).
    pub lines: Vec<String>,
    /// True when [`MAX_SEARCH_MATCHES`] was reached and the walk stopped.
    pub truncated: bool,
    pub files_searched: u64,
    pub skipped: SkipCounts,
}

/// `fs.read`: a text file's content, up to [`MAX_READ_BYTES`]. A file with more than one name
/// is refused when another of its names in `workspace` is a denied one (`.env`, a key file), or
/// when it has a name outside `workspace` (its link count is higher than the names found
/// there): policy judges a read by the name asked for, and a hard link would give the secret
/// another.
pub fn read_file(
    action: &Authorized<FsRead>,
    workspace: &CanonicalPath,
) -> Result<FileContent, ExecError> {
    let FsRead { path } = action.get();
    recheck(path)?;
    let (parent, name) =
        split_parent(path).ok_or_else(|| ExecError::IsDirectory { path: path.clone() })?;
    let dir = walk_dirs(path, &parent, false)?;
    let file = open_regular(&dir, name, path, "read")?;
    refuse_link_to_denied(&file, path, workspace)?;
    let total_bytes = file_size(&file, path)?;
    let mut buf = Vec::new();
    (&file)
        .take(MAX_READ_BYTES as u64)
        .read_to_end(&mut buf)
        .map_err(|e| io_error("read", path, e))?;
    if buf[..buf.len().min(BINARY_CHECK_BYTES)].contains(&0) {
        return Err(ExecError::Binary {
            path: path.clone(),
            checked: BINARY_CHECK_BYTES,
        });
    }
    let truncated = total_bytes > buf.len() as u64;
    if truncated {
        trim_partial_utf8(&mut buf);
    }
    Ok(FileContent {
        path: path.clone(),
        content: String::from_utf8_lossy(&buf).into_owned(),
        truncated,
        total_bytes,
    })
}

fn refuse_link_to_denied(
    file: &std::fs::File,
    path: &CanonicalPath,
    workspace: &CanonicalPath,
) -> Result<(), ExecError> {
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata().map_err(|e| io_error("inspect", path, e))?;
    if meta.nlink() <= 1 {
        return Ok(());
    }
    // Every name of this file in the workspace.
    let census =
        crate::grants::link_census(&[workspace.as_path()]).map_err(|message| ExecError::Io {
            op: "look for other names of a hard-linked file",
            path: path.clone(),
            message,
        })?;
    let names = census
        .get(&(meta.dev(), meta.ino()))
        .map(|(_, names)| names.as_slice())
        .unwrap_or_default();
    let patterns: Vec<String> = warrant_core::config::DEFAULT_DENIED
        .iter()
        .map(|p| (*p).to_owned())
        .collect();
    // Another name that is denied, or inside a denied directory (`.warrant/…`).
    if let Some(other) = names.iter().find(|n| {
        n.as_path() != path.as_path()
            && n.strip_prefix(workspace.as_path())
                .unwrap_or(n)
                .components()
                .any(|c| {
                    let c = c.as_os_str().to_string_lossy();
                    patterns.iter().any(|p| crate::grants::name_matches(p, &c))
                })
    }) {
        return Err(ExecError::HardLinkToDenied {
            path: path.clone(),
            denied: other.display().to_string(),
        });
    }
    // A name outside the workspace: the file may be the home directory's secret.
    if usize::try_from(meta.nlink()).map_or(true, |n| n > names.len()) {
        return Err(ExecError::HardLinkOutside {
            path: path.clone(),
            links: meta.nlink(),
            found: names.len(),
        });
    }
    Ok(())
}

/// `fs.list`: the entries of a directory, sorted, with kind and size. Links are not followed.
pub fn list_dir(action: &Authorized<FsList>) -> Result<DirListing, ExecError> {
    let FsList { path } = action.get();
    recheck(path)?;
    let dir = walk_dirs(path, &components(path), false)?;
    let dir = reopen_readable(&dir, path)?;
    let mut entries = Vec::new();
    for (name, _) in read_names(&dir, path)? {
        let stat = match statat(&dir, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(s) => s,
            // Removed while we listed: it is not there any more.
            Err(Errno::NOENT) => continue,
            Err(e) => return Err(errno_error("inspect an entry of", path, e)),
        };
        let kind = entry_kind(FileType::from_raw_mode(stat.st_mode));
        entries.push(DirEntry {
            name: name.to_string_lossy().into_owned(),
            kind,
            size: u64::try_from(stat.st_size).unwrap_or(0),
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(DirListing {
        path: path.clone(),
        entries,
    })
}

/// `fs.write` / `fs.create`: write the whole content atomically (temp file in the same
/// directory, fsync, rename), creating missing parent directories. `fs.create` refuses an
/// existing file, atomically (`RENAME_NOREPLACE`), so a file that appears meanwhile survives.
pub fn write_file(action: &Authorized<FsWrite>) -> Result<WriteReceipt, ExecError> {
    let FsWrite {
        path,
        content,
        create_only,
    } = action.get();
    write_bytes(path, content.as_bytes(), *create_only)
}

/// `artifact.create` with its `fs.write`/`fs.create`: writes `bytes` at the artifact's path
/// only when they are the bytes the action was decided on (their digest), then its provenance
/// `sidecar` beside it (`NAME.intoto.jsonl`, replaced whole). Both actions must name the path.
pub fn write_artifact(
    write: &Authorized<FsWrite>,
    artifact: &Authorized<warrant_core::ArtifactCreate>,
    bytes: &[u8],
    sidecar: &[u8],
) -> Result<(WriteReceipt, WriteReceipt), ExecError> {
    let a = artifact.get();
    if write.get().path != a.path || Digest::of_bytes(bytes) != a.digest {
        return Err(ExecError::ArtifactMismatch {
            path: a.path.clone(),
        });
    }
    let receipt = write_bytes(&a.path, bytes, write.get().create_only)?;
    // The same directory, the name with the suffix: still canonical.
    let side = CanonicalPath::from_normalized(&format!("{}{SIDECAR_SUFFIX}", a.path.as_str()))
        .map_err(|_| ExecError::IsDirectory {
            path: a.path.clone(),
        })?;
    let side_receipt = write_bytes(&side, sidecar, false)?;
    Ok((receipt, side_receipt))
}

/// The suffix of an artifact's provenance file.
pub const SIDECAR_SUFFIX: &str = ".intoto.jsonl";

fn write_bytes(
    path: &CanonicalPath,
    content: &[u8],
    create_only: bool,
) -> Result<WriteReceipt, ExecError> {
    recheck(path)?;
    let (parent, name) =
        split_parent(path).ok_or_else(|| ExecError::IsDirectory { path: path.clone() })?;
    let dir = walk_dirs(path, &parent, true)?;
    let dir = reopen_readable(&dir, path)?;

    let previous = match statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => Some(stat),
        Err(Errno::NOENT) => None,
        Err(e) => return Err(errno_error("inspect", path, e)),
    };
    let mut previous_digest = None;
    if previous.is_some() {
        if create_only {
            return Err(ExecError::AlreadyExists { path: path.clone() });
        }
        let mut old = Vec::new();
        (&open_regular(&dir, name, path, "replace")?)
            .read_to_end(&mut old)
            .map_err(|e| io_error("read the old content of", path, e))?;
        previous_digest = Some(Digest::of_bytes(&old));
    }

    let tmp = temp_name(name);
    let tmp_fd = openat(
        &dir,
        tmp.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o666),
    )
    .map_err(|e| errno_error("create a temporary file next to", path, e))?;
    let written = (|| -> Result<(), ExecError> {
        if let Some(stat) = &previous {
            // Keep the replaced file's permissions rather than the umask default.
            fchmod(&tmp_fd, Mode::from_raw_mode(stat.st_mode & 0o7777))
                .map_err(|e| errno_error("set permissions for", path, e))?;
        }
        let mut file = File::from(tmp_fd);
        file.write_all(content)
            .map_err(|e| io_error("write", path, e))?;
        file.sync_all().map_err(|e| io_error("flush", path, e))?;
        if create_only {
            publish_new(&dir, &tmp, name, path)
        } else {
            renameat(&dir, tmp.as_str(), &dir, name)
                .map_err(|e| errno_error("move the new content into", path, e))
        }
    })();
    if let Err(e) = written {
        let _ = unlinkat(&dir, tmp.as_str(), AtFlags::empty());
        return Err(e);
    }
    // The rename is durable only once the directory is.
    fsync(&dir).map_err(|e| errno_error("flush the directory of", path, e))?;
    Ok(WriteReceipt {
        path: path.clone(),
        bytes: content.len() as u64,
        created: previous.is_none(),
        previous_digest,
    })
}

/// Put `tmp` in place as `name` only if `name` does not exist.
fn publish_new(
    dir: &OwnedFd,
    tmp: &str,
    name: &str,
    path: &CanonicalPath,
) -> Result<(), ExecError> {
    match renameat_with(dir, tmp, dir, name, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(Errno::EXIST) => Err(ExecError::AlreadyExists { path: path.clone() }),
        // Filesystems without RENAME_NOREPLACE: a hard link is just as exclusive.
        Err(Errno::INVAL | Errno::NOSYS) => match linkat(dir, tmp, dir, name, AtFlags::empty()) {
            Ok(()) => {
                let _ = unlinkat(dir, tmp, AtFlags::empty());
                Ok(())
            }
            Err(Errno::EXIST) => Err(ExecError::AlreadyExists { path: path.clone() }),
            Err(e) => Err(errno_error("create", path, e)),
        },
        Err(e) => Err(errno_error("create", path, e)),
    }
}

/// `fs.delete`: remove a file, a link-free directory tree (only when `recursive`), or an empty
/// directory. Links inside a tree are removed, never followed.
pub fn delete_path(action: &Authorized<FsDelete>) -> Result<DeleteReceipt, ExecError> {
    let FsDelete { path, recursive } = action.get();
    let recursive = *recursive;
    recheck(path)?;
    let (parent, name) = split_parent(path).ok_or_else(|| ExecError::Io {
        op: "delete",
        path: path.clone(),
        message: "the root directory is never deleted".to_owned(),
    })?;
    let dir = walk_dirs(path, &parent, false)?;
    let dir = reopen_readable(&dir, path)?;
    let stat = statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW).map_err(|e| match e {
        Errno::NOENT => ExecError::NotFound { path: path.clone() },
        other => errno_error("inspect", path, other),
    })?;
    let kind = FileType::from_raw_mode(stat.st_mode);
    let removed_entries = if kind == FileType::Symlink {
        // The decided path had no link in it; one here now was swapped in.
        return Err(path_changed(path));
    } else if kind == FileType::Directory {
        if recursive {
            remove_tree(&dir, name, path)?
        } else {
            unlinkat(&dir, name, AtFlags::REMOVEDIR).map_err(|e| match e {
                Errno::NOTEMPTY | Errno::EXIST => {
                    ExecError::DirectoryNotEmpty { path: path.clone() }
                }
                other => errno_error("delete", path, other),
            })?;
            1
        }
    } else {
        unlinkat(&dir, name, AtFlags::empty()).map_err(|e| errno_error("delete", path, e))?;
        1
    };
    Ok(DeleteReceipt {
        path: path.clone(),
        removed_entries,
    })
}

fn remove_tree<P: rustix::path::Arg + Copy>(
    parent: &OwnedFd,
    name: P,
    path: &CanonicalPath,
) -> Result<u64, ExecError> {
    let sub = openat(
        parent,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| errno_error("open a directory inside", path, e))?;
    let mut removed = 0u64;
    for (child, kind) in read_names(&sub, path)? {
        // Some filesystems do not report types in directory entries; ask them then.
        let is_dir = if kind == FileType::Unknown {
            statat(&sub, child.as_c_str(), AtFlags::SYMLINK_NOFOLLOW)
                .map(|s| FileType::from_raw_mode(s.st_mode) == FileType::Directory)
                .map_err(|e| errno_error("inspect an entry inside", path, e))?
        } else {
            kind == FileType::Directory
        };
        if is_dir {
            removed += remove_tree(&sub, child.as_c_str(), path)?;
        } else {
            unlinkat(&sub, child.as_c_str(), AtFlags::empty())
                .map_err(|e| errno_error("delete an entry inside", path, e))?;
            removed += 1;
        }
    }
    unlinkat(parent, name, AtFlags::REMOVEDIR)
        .map_err(|e| errno_error("delete a directory inside", path, e))?;
    Ok(removed + 1)
}

/// `fs.search`: lines containing the pattern, in the tree under the path (or in the one file).
/// Links are not followed and `.git` is skipped. `may_read` is asked for every file, so files
/// the caller's policy would not let the agent read are never opened; they are counted.
pub fn search(
    action: &Authorized<FsSearch>,
    may_read: &dyn Fn(&CanonicalPath) -> bool,
) -> Result<SearchResult, ExecError> {
    let FsSearch {
        path: root,
        pattern,
    } = action.get();
    if pattern.is_empty() {
        return Err(ExecError::EmptyPattern);
    }
    recheck(root)?;
    let mut result = SearchResult {
        root: root.clone(),
        pattern: pattern.clone(),
        lines: Vec::new(),
        truncated: false,
        files_searched: 0,
        skipped: SkipCounts::default(),
    };
    match split_parent(root) {
        None => {
            let dir = walk_dirs(root, &[], false)?;
            let dir = reopen_readable(&dir, root)?;
            search_dir(&dir, root, "", pattern, may_read, &mut result)?;
        }
        Some((parent, name)) => {
            let parent_fd = walk_dirs(root, &parent, false)?;
            let parent_fd = reopen_readable(&parent_fd, root)?;
            let stat =
                statat(&parent_fd, name, AtFlags::SYMLINK_NOFOLLOW).map_err(|e| match e {
                    Errno::NOENT => ExecError::NotFound { path: root.clone() },
                    other => errno_error("inspect", root, other),
                })?;
            let kind = FileType::from_raw_mode(stat.st_mode);
            if kind == FileType::Symlink {
                return Err(path_changed(root));
            } else if kind == FileType::Directory {
                let dir =
                    open_subdir(&parent_fd, name).map_err(|e| errno_error("open", root, e))?;
                search_dir(&dir, root, "", pattern, may_read, &mut result)?;
            } else {
                search_file(&parent_fd, name, root, name, pattern, may_read, &mut result);
            }
        }
    }
    Ok(result)
}

fn search_dir(
    dir: &OwnedFd,
    here: &CanonicalPath,
    rel: &str,
    pattern: &str,
    may_read: &dyn Fn(&CanonicalPath) -> bool,
    result: &mut SearchResult,
) -> Result<(), ExecError> {
    for (name, kind) in read_names(dir, here)? {
        if result.truncated {
            return Ok(());
        }
        let Ok(name) = name.into_string() else {
            result.skipped.unreadable += 1;
            continue;
        };
        if name == ".git" {
            continue;
        }
        let kind = if kind == FileType::Unknown {
            match statat(dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(s) => FileType::from_raw_mode(s.st_mode),
                Err(_) => {
                    result.skipped.unreadable += 1;
                    continue;
                }
            }
        } else {
            kind
        };
        let path = here.join_component(&name);
        let rel_child = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        if kind == FileType::Directory {
            // A directory that vanished or turned into a link meanwhile is simply not walked.
            if let Ok(sub) = open_subdir(dir, name.as_str()) {
                search_dir(&sub, &path, &rel_child, pattern, may_read, result)?;
            }
        } else if kind == FileType::RegularFile {
            search_file(dir, &name, &path, &rel_child, pattern, may_read, result);
        } else if kind == FileType::Symlink {
            // Not followed: its target is another path, which policy has not seen.
        } else {
            result.skipped.unreadable += 1;
        }
    }
    Ok(())
}

fn search_file(
    dir: &OwnedFd,
    name: &str,
    path: &CanonicalPath,
    rel: &str,
    pattern: &str,
    may_read: &dyn Fn(&CanonicalPath) -> bool,
    result: &mut SearchResult,
) {
    if !may_read(path) {
        result.skipped.denied += 1;
        return;
    }
    let Ok(file) = open_regular(dir, name, path, "search") else {
        result.skipped.unreadable += 1;
        return;
    };
    match file_size(&file, path) {
        Ok(size) if size > MAX_SEARCH_FILE_BYTES => {
            result.skipped.too_large += 1;
            return;
        }
        Ok(_) => {}
        Err(_) => {
            result.skipped.unreadable += 1;
            return;
        }
    }
    let mut buf = Vec::new();
    if (&file)
        .take(MAX_SEARCH_FILE_BYTES)
        .read_to_end(&mut buf)
        .is_err()
    {
        result.skipped.unreadable += 1;
        return;
    }
    if buf[..buf.len().min(BINARY_CHECK_BYTES)].contains(&0) {
        result.skipped.binary += 1;
        return;
    }
    result.files_searched += 1;
    for (i, line) in buf.split(|b| *b == b'\n').enumerate() {
        let text = String::from_utf8_lossy(line);
        let text = text.trim_end_matches('\r');
        if text.contains(pattern) {
            if result.lines.len() >= MAX_SEARCH_MATCHES {
                result.truncated = true;
                return;
            }
            let shown: String = text.chars().take(MAX_MATCH_LINE_CHARS).collect();
            result.lines.push(format!("{rel}:{}: {shown}", i + 1));
        }
    }
}

/// Re-resolve `path` with the real filesystem and refuse when it no longer names itself: a
/// link appeared on the way after the decision.
pub(crate) fn recheck(path: &CanonicalPath) -> Result<(), ExecError> {
    let now = canonicalize(path, path.as_str(), &OsLinks).map_err(|e| ExecError::Resolve {
        path: path.clone(),
        message: e.to_string(),
    })?;
    if &now == path {
        Ok(())
    } else {
        Err(ExecError::PathChanged {
            decided: path.clone(),
            now: now.to_string(),
        })
    }
}

fn path_changed(path: &CanonicalPath) -> ExecError {
    let now = match canonicalize(path, path.as_str(), &OsLinks) {
        Ok(p) => p.to_string(),
        Err(e) => format!("unresolvable: {e}"),
    };
    ExecError::PathChanged {
        decided: path.clone(),
        now,
    }
}

fn components(path: &CanonicalPath) -> Vec<&str> {
    path.as_str().split('/').filter(|c| !c.is_empty()).collect()
}

/// The parent's components and the last name; `None` for `/`.
fn split_parent(path: &CanonicalPath) -> Option<(Vec<&str>, &str)> {
    let mut parts = components(path);
    let name = parts.pop()?;
    Some((parts, name))
}

/// Open the directory made of `parts` from `/`, one component at a time, never following a
/// link (`O_PATH`: usable as a directory handle only). With `create`, missing ones are made.
fn walk_dirs(path: &CanonicalPath, parts: &[&str], create: bool) -> Result<OwnedFd, ExecError> {
    let mut fd = openat(
        CWD,
        "/",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| errno_error("open the root directory for", path, e))?;
    let mut here = CanonicalPath::from_normalized("/").map_err(|e| ExecError::Resolve {
        path: path.clone(),
        message: e.to_string(),
    })?;
    for part in parts {
        here = here.join_component(part);
        let next = match open_dir_path(&fd, part) {
            Err(Errno::NOENT) if create => {
                match mkdirat(&fd, *part, Mode::from_raw_mode(0o777)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(errno_error("create the directory", &here, e)),
                }
                open_dir_path(&fd, part)
            }
            other => other,
        };
        fd = next.map_err(|e| match e {
            Errno::NOENT => ExecError::NotFound { path: path.clone() },
            Errno::NOTDIR | Errno::LOOP => match statat(&fd, *part, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(s) if FileType::from_raw_mode(s.st_mode) == FileType::Symlink => {
                    path_changed(path)
                }
                Ok(_) | Err(_) => ExecError::NotADirectory { path: here.clone() },
            },
            other => errno_error("open", &here, other),
        })?;
    }
    Ok(fd)
}

fn open_dir_path(dir: &OwnedFd, name: &str) -> rustix::io::Result<OwnedFd> {
    openat(
        dir,
        name,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

fn open_subdir<P: rustix::path::Arg>(dir: &OwnedFd, name: P) -> rustix::io::Result<OwnedFd> {
    openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// A readable handle on the directory an `O_PATH` handle names (needed to list or fsync it).
fn reopen_readable(dir: &OwnedFd, path: &CanonicalPath) -> Result<OwnedFd, ExecError> {
    open_subdir(dir, ".").map_err(|e| errno_error("open the directory of", path, e))
}

/// Entry names (without `.` and `..`) with the type the directory reports, sorted by name.
fn read_names(dir: &OwnedFd, path: &CanonicalPath) -> Result<Vec<(CString, FileType)>, ExecError> {
    let mut names = Vec::new();
    let reader = Dir::read_from(dir).map_err(|e| errno_error("list", path, e))?;
    for entry in reader {
        let entry = entry.map_err(|e| errno_error("list", path, e))?;
        let name: &CStr = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        names.push((name.to_owned(), entry.file_type()));
    }
    names.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(names)
}

/// Open `name` in `dir` for reading, refusing a link (swapped in), a directory, or anything
/// that is not a regular file. `O_NONBLOCK` keeps a FIFO swapped in from hanging the open.
fn open_regular(
    dir: &OwnedFd,
    name: &str,
    path: &CanonicalPath,
    op: &'static str,
) -> Result<File, ExecError> {
    let fd = openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        Errno::NOENT => ExecError::NotFound { path: path.clone() },
        Errno::LOOP => path_changed(path),
        other => errno_error(op, path, other),
    })?;
    let stat = fstat(&fd).map_err(|e| errno_error(op, path, e))?;
    let kind = FileType::from_raw_mode(stat.st_mode);
    if kind == FileType::Directory {
        Err(ExecError::IsDirectory { path: path.clone() })
    } else if kind != FileType::RegularFile {
        Err(ExecError::Io {
            op,
            path: path.clone(),
            message: "it is not a regular file".to_owned(),
        })
    } else {
        Ok(File::from(fd))
    }
}

fn file_size(file: &File, path: &CanonicalPath) -> Result<u64, ExecError> {
    let stat: Stat = fstat(file).map_err(|e| errno_error("inspect", path, e))?;
    Ok(u64::try_from(stat.st_size).unwrap_or(0))
}

fn entry_kind(kind: FileType) -> EntryKind {
    if kind == FileType::RegularFile {
        EntryKind::File
    } else if kind == FileType::Directory {
        EntryKind::Dir
    } else if kind == FileType::Symlink {
        EntryKind::Symlink
    } else {
        EntryKind::Other
    }
}

/// Drop an incomplete UTF-8 sequence cut off at the end, so truncation does not add a `�`.
fn trim_partial_utf8(buf: &mut Vec<u8>) {
    if let Err(e) = std::str::from_utf8(buf)
        && e.error_len().is_none()
    {
        buf.truncate(e.valid_up_to());
    }
}

/// A temp name unique within this process and unlikely to collide across processes.
fn temp_name(name: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!(".{name}.warrant-{}-{n}.tmp", std::process::id())
}

fn errno_error(op: &'static str, path: &CanonicalPath, e: Errno) -> ExecError {
    io_error(op, path, std::io::Error::from(e))
}

fn io_error(op: &'static str, path: &CanonicalPath, e: std::io::Error) -> ExecError {
    ExecError::Io {
        op,
        path: path.clone(),
        message: e.to_string(),
    }
}

/// The current text of a file, for the person approving a write to it (the diff they see);
/// never handed to the model, so it needs no authorization of its own. `None` when the file is
/// absent, a link, not a regular file, not text, or unreadable. At most [`MAX_READ_BYTES`].
pub fn preview_text(path: &CanonicalPath) -> Option<String> {
    use std::io::Read;
    let meta = std::fs::symlink_metadata(path.as_path()).ok()?;
    if !meta.file_type().is_file() {
        return None;
    }
    let mut buf = Vec::new();
    std::fs::File::open(path.as_path())
        .ok()?
        .take(MAX_READ_BYTES as u64)
        .read_to_end(&mut buf)
        .ok()?;
    if buf.iter().take(BINARY_CHECK_BYTES).any(|b| *b == 0) {
        return None;
    }
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// The largest file `edit_file` and `apply_patch` change (the whole text is held, diffed and
/// journaled in the action).
pub const MAX_EDIT_BYTES: u64 = 4 * 1024 * 1024;

/// What an edit is computed against: the whole text of the regular file at `path` (links not
/// followed), or why there is none to edit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EditBase {
    Text(String),
    Missing,
    /// Not a regular file, larger than [`MAX_EDIT_BYTES`], not UTF-8 or binary: the reason.
    Unusable(String),
}

pub fn edit_base(path: &CanonicalPath) -> EditBase {
    let meta = match std::fs::symlink_metadata(path.as_path()) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return EditBase::Missing,
        Err(e) => return EditBase::Unusable(e.to_string()),
    };
    if !meta.file_type().is_file() {
        return EditBase::Unusable("not a regular file (a directory, a link or a device)".into());
    }
    if meta.len() > MAX_EDIT_BYTES {
        return EditBase::Unusable(format!(
            "{} bytes, more than the {MAX_EDIT_BYTES} an edit may change",
            meta.len()
        ));
    }
    match std::fs::read(path.as_path()) {
        Err(e) => EditBase::Unusable(e.to_string()),
        Ok(bytes) if bytes.iter().take(BINARY_CHECK_BYTES).any(|b| *b == 0) => {
            EditBase::Unusable("a binary file".into())
        }
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => EditBase::Text(text),
            Err(_) => EditBase::Unusable("not UTF-8 text".into()),
        },
    }
}

/// What the files of several authorized changes held before them, to put back when a later
/// change of the same call fails (`apply_patch` is all or nothing).
#[derive(Debug)]
pub struct Undo(Vec<(CanonicalPath, Option<Vec<u8>>)>);

impl Undo {
    /// Records the current content of every file the actions write, create or delete.
    pub fn before(actions: &[Authorized<warrant_core::Action>]) -> Self {
        use warrant_core::Action;
        Self(
            actions
                .iter()
                .filter_map(|a| match a.get() {
                    Action::FsWrite { path, .. }
                    | Action::FsCreate { path, .. }
                    | Action::FsDelete { path, .. } => {
                        let meta = std::fs::symlink_metadata(path.as_path()).ok();
                        let bytes = meta
                            .filter(|m| m.file_type().is_file())
                            .and_then(|_| std::fs::read(path.as_path()).ok());
                        Some((path.clone(), bytes))
                    }
                    Action::FsRead { .. }
                    | Action::FsList { .. }
                    | Action::FsSearch { .. }
                    | Action::ShellExec { .. }
                    | Action::ProviderCall { .. }
                    | Action::GitRead { .. }
                    | Action::GitCommit { .. }
                    | Action::GitBranch { .. }
                    | Action::GitCheckout { .. }
                    | Action::GitPush { .. }
                    | Action::MemoryWrite { .. }
                    | Action::MemoryRead { .. }
                    | Action::MemoryDelete { .. }
                    | Action::MemoryPropose { .. }
                    | Action::MemoryPublish { .. }
                    | Action::McpCall { .. }
                    | Action::AgentSpawn { .. }
                    | Action::CatalogList { .. }
                    | Action::CatalogRead { .. }
                    | Action::ArtifactCreate { .. }
                    | Action::WebFetch { .. } => None,
                })
                .collect(),
        )
    }

    /// Puts the first `n` files back as they were (last first); `false` when one could not be.
    pub fn restore(&self, n: usize) -> bool {
        let mut all = true;
        for (path, before) in self.0.iter().take(n).rev() {
            let r = match before {
                None => match std::fs::remove_file(path.as_path()) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                    Ok(()) | Err(_) => Ok(()),
                },
                Some(bytes) => std::fs::write(path.as_path(), bytes),
            };
            all &= r.is_ok();
        }
        all
    }
}

/// SHA-256 of the whole regular file at `path` (links not followed), `None` when there is no
/// regular file. What a shown diff was computed against; approvals bind to it.
pub fn content_digest(path: &CanonicalPath) -> Option<warrant_core::Digest> {
    let meta = std::fs::symlink_metadata(path.as_path()).ok()?;
    if !meta.file_type().is_file() {
        return None;
    }
    std::fs::read(path.as_path())
        .ok()
        .map(|bytes| warrant_core::Digest::of_bytes(&bytes))
}

/// Whether something (of any kind, links not followed) is at `path`: decides between
/// `fs.create` and `fs.write` when a write is normalized.
pub fn exists(path: &CanonicalPath) -> bool {
    std::fs::symlink_metadata(path.as_path()).is_ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn partial_utf8_at_the_cut_is_dropped() {
        let mut b = "aé".as_bytes()[..2].to_vec();
        trim_partial_utf8(&mut b);
        assert_eq!(b, b"a");
        let mut whole = "aé".as_bytes().to_vec();
        trim_partial_utf8(&mut whole);
        assert_eq!(whole, "aé".as_bytes());
    }

    #[test]
    fn parent_split() {
        let p = CanonicalPath::from_normalized("/a/b/c").unwrap();
        assert_eq!(split_parent(&p), Some((vec!["a", "b"], "c")));
        let root = CanonicalPath::from_normalized("/").unwrap();
        assert_eq!(split_parent(&root), None);
    }
}
