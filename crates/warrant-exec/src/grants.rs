//! The Landlock rules of a plan. Landlock can only grant, and a rule on a directory covers its
//! whole tree, so a root holding something the command must not touch (a denied entry such as
//! `.env`: no access; a protected name such as `.git` in a write root: read-only) is split: the
//! directory itself gets only `ReadDir`, each other entry gets the root's rights, recursing
//! towards the special entries. Limits: entries created in a split directory after the plan was
//! applied get no rights (cannot be created by the command, and are invisible to it when created
//! by someone else); name patterns are found by walking the roots when the launcher starts, so
//! the system trees in [`UNSCANNED`] are not searched (an absolute `denied` path still applies
//! there) and a root larger than [`SCAN_BUDGET`] entries is refused.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use landlock::{AccessFs, BitFlags};

/// System program trees that are never searched for denied names (too large to walk per
/// command, and holding no user secrets).
pub const UNSCANNED: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/dev", "/proc", "/sys",
];
/// Most entries walked per command while looking for denied names.
pub const SCAN_BUDGET: usize = 200_000;

/// `*` matches any run of characters (including none); everything else literally.
pub fn name_matches(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    match parts.as_slice() {
        [] => name.is_empty(),
        [only] => *only == name,
        [first, middle @ .., last] => {
            let Some(mut rest) = name.strip_prefix(first) else {
                return false;
            };
            for part in middle {
                match rest.find(part) {
                    Some(i) => rest = &rest[i + part.len()..],
                    None => return false,
                }
            }
            rest.len() >= last.len() && rest.ends_with(last)
        }
    }
}

fn scanned(root: &Path) -> bool {
    !UNSCANNED.iter().any(|u| root.starts_with(u))
}

/// The roots a walk starts from: the directories among `roots` that are searched (not in
/// [`UNSCANNED`]) and not inside another of them.
pub fn outermost(roots: &[&Path]) -> Vec<PathBuf> {
    let mut outer: Vec<PathBuf> = roots
        .iter()
        .filter(|r| scanned(r) && r.is_dir())
        .map(|r| r.to_path_buf())
        .collect();
    outer.sort();
    outer.dedup();
    outer
        .iter()
        .filter(|r| !outer.iter().any(|o| o != *r && r.starts_with(o)))
        .cloned()
        .collect()
}

/// Walks the directories under `roots` (a root inside another is walked as part of it;
/// unreadable or vanished directories are skipped), at most [`SCAN_BUDGET`] entries, handing
/// each entry and the mark of its directory to `visit`, which says whether to descend into it
/// and with which mark (the roots have `root_mark`). `what` names the walk in the error for a
/// budget spent.
fn walk<M: Copy>(
    roots: &[&Path],
    what: &str,
    root_mark: M,
    mut visit: impl FnMut(&std::fs::DirEntry, M) -> Option<M>,
) -> Result<(), String> {
    let mut budget = SCAN_BUDGET;
    let mut stack: Vec<(PathBuf, M)> = outermost(roots)
        .into_iter()
        .map(|r| (r, root_mark))
        .collect();
    while let Some((dir, mark)) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("cannot list {}: {e}", dir.display())),
        };
        for entry in entries {
            let entry = entry.map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
            budget = budget.checked_sub(1).ok_or_else(|| {
                format!(
                    "more than {SCAN_BUDGET} entries under the roots while {what}; narrow the read and write roots"
                )
            })?;
            if let Some(inner) = visit(&entry, mark) {
                stack.push((entry.path(), inner));
            }
        }
    }
    Ok(())
}

/// Every entry under `roots` whose file name matches one of `patterns` (not following links,
/// not descending into a match), plus the `paths` given literally.
pub fn find_denied(
    roots: &[&Path],
    patterns: &[String],
    paths: &[PathBuf],
) -> Result<Vec<PathBuf>, String> {
    let mut found: Vec<PathBuf> = paths.to_vec();
    walk(roots, "looking for denied names", (), |entry, ()| {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if patterns.iter().any(|p| name_matches(p, &name)) {
            found.push(entry.path());
            None
        } else {
            entry.file_type().is_ok_and(|t| t.is_dir()).then_some(())
        }
    })?;
    found.sort();
    found.dedup();
    Ok(found)
}

/// Regular files with more than one name, by (device, inode): the link count the file system
/// gives, and the names found (see [`link_census`]).
pub type LinkCensus = BTreeMap<(u64, u64), (u64, Vec<PathBuf>)>;

/// Regular files with more than one name under `roots` (not following links), by device and
/// inode: the link count the file system gives, and the names found under the roots. A file
/// whose count is higher than the names found has a name elsewhere.
pub fn link_census(roots: &[&Path]) -> Result<LinkCensus, String> {
    use std::os::unix::fs::MetadataExt;
    let mut out = LinkCensus::new();
    walk(roots, "counting hard links", (), |entry, ()| {
        let Ok(kind) = entry.file_type() else {
            return None;
        };
        if kind.is_file()
            && let Ok(meta) = entry.metadata()
            && meta.nlink() > 1
        {
            out.entry((meta.dev(), meta.ino()))
                .or_insert_with(|| (meta.nlink(), Vec::new()))
                .1
                .push(entry.path());
        }
        kind.is_dir().then_some(())
    })?;
    Ok(out)
}

/// The rules for one root with `access`, given the special entries and what each may do
/// (empty: nothing).
pub fn root_grants(
    root: &Path,
    access: BitFlags<AccessFs>,
    special: &BTreeMap<PathBuf, BitFlags<AccessFs>>,
    out: &mut Vec<(PathBuf, BitFlags<AccessFs>)>,
) -> Result<(), String> {
    let access = match special.get(root) {
        Some(limited) => *limited & access,
        None => access,
    };
    if access.is_empty() {
        return Ok(());
    }
    if !special.keys().any(|p| p != root && p.starts_with(root)) {
        out.push((root.to_path_buf(), access));
        return Ok(());
    }
    if access.contains(AccessFs::ReadDir) {
        out.push((root.to_path_buf(), BitFlags::from(AccessFs::ReadDir)));
    }
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("cannot list {}: {e}", root.display())),
    };
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot list {}: {e}", root.display()))?;
        let path = entry.path();
        let kind = entry
            .file_type()
            .map_err(|e| format!("cannot inspect {}: {e}", path.display()))?;
        if kind.is_symlink() {
            // A link is not followed: its target is granted only if a root covers it.
            continue;
        }
        if kind.is_dir() {
            root_grants(&path, access, special, out)?;
        } else if let Some(limited) = special.get(&path) {
            if !(*limited & access).is_empty() {
                out.push((path, *limited & access));
            }
        } else {
            out.push((path, access));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::name_matches;
    #[test]
    fn patterns() {
        let cases = [
            (".env", ".env", true),
            (".env", ".envrc", false),
            (".env.*", ".env.local", true),
            (".env.*", ".env", false),
            ("*.pem", "server.pem", true),
            ("*.pem", "pem", false),
            ("id_rsa*", "id_rsa.pub", true),
            ("id_rsa*", "xid_rsa", false),
            ("a*b*c", "aXbYc", true),
            ("a*b*c", "acb", false),
        ];
        for (p, n, want) in cases {
            assert_eq!(name_matches(p, n), want, "{p} vs {n}");
        }
    }
}
