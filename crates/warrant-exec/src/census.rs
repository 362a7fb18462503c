//! What a command's view must hide, found before the command starts: the entries under the
//! workspace whose name is denied (`.env`, keys, `.warrant`), and every file with more than one
//! name (another name of a denied file, or a name outside the workspace, is masked too).
//!
//! Walking the whole tree for that at every command costs a listing of every directory and a
//! `statx` of every file (a project with a build directory holds tens of thousands). So what a
//! walk found is remembered per directory, in a file of Warrant's state directory (outside every
//! view): the next walk `statx`es each directory and lists again only those whose identity or
//! change time moved, or whose change time was too recent to trust (a change within the same
//! clock tick as the listing would leave the time as it was: such a directory is listed again
//! until its time is [`RACY`] old). The change time, not the modification time, because nobody
//! can set it back (`touch -d` sets the modification time).
//!
//! Every name a directory gains, loses or swaps moves its change time; what does not move a
//! directory's time is a file's link count, so the remembered multiply-linked files are
//! `statx`ed again, and an answer in which a file has more links than names found, after any
//! directory came from memory, is redone by a full walk (the other name may be in a remembered
//! directory, where the file had one name when it was listed). Known limit: a file with one
//! name when its directory was listed that later gains a name outside the workspace (made by a
//! process outside every view; a command cannot reach outside names) is not seen as linked
//! outside until its directory changes.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::grants::{LinkCensus, SCAN_BUDGET, name_matches};

/// How old a directory's change time must be before its listing is trusted on a later walk.
pub const RACY: Duration = Duration::from_secs(2);

/// The format of the remembered walk; another version is ignored.
const VERSION: u32 = 1;

/// What the view hides, from one walk.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Survey {
    /// The denied entries (not those inside a denied directory) and the denied paths given.
    pub denied: Vec<PathBuf>,
    /// Every regular file with more than one name, inside denied directories too.
    pub census: LinkCensus,
    /// The multiply-linked files (by device and inode) with a name that is denied or inside a
    /// denied directory: every other name of theirs is to be hidden too.
    pub hidden: BTreeSet<(u64, u64)>,
}

/// How a walk went: directories taken from memory, listed, and whether it had to start over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WalkStats {
    pub remembered: usize,
    pub listed: usize,
    pub redone: bool,
}

/// A directory as it was listed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Listing {
    /// Device, inode, change time (s, ns) when it was listed.
    stamp: (u64, u64, i64, i64),
    /// Listed within [`RACY`] of its change time: used by the walk that listed it, never kept
    /// (the next walk lists it again).
    racy: bool,
    /// Entries counted against [`SCAN_BUDGET`].
    entries: usize,
    /// Subdirectories, and whether each is denied by name.
    dirs: Vec<(Name, bool)>,
    /// Other entries denied by name.
    denied: Vec<Name>,
    /// Regular files with more than one name: name, device, inode, whether denied by name.
    linked: Vec<(Name, u64, u64, bool)>,
}

/// A file name as the file system gives it: text when it is UTF-8, else its bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
enum Name {
    Text(String),
    Bytes(Vec<u8>),
}

impl Name {
    fn of(name: std::ffi::OsString) -> Self {
        match name.into_string() {
            Ok(text) => Self::Text(text),
            Err(raw) => Self::Bytes(std::os::unix::ffi::OsStringExt::into_vec(raw)),
        }
    }

    fn os(&self) -> &std::ffi::OsStr {
        match self {
            Self::Text(t) => std::ffi::OsStr::new(t),
            Self::Bytes(b) => std::os::unix::ffi::OsStrExt::from_bytes(b),
        }
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Memory {
    version: u32,
    /// The roots and patterns the listings were made for.
    key: String,
    dirs: BTreeMap<String, Listing>,
}

fn stamp(meta: &std::fs::Metadata) -> (u64, u64, i64, i64) {
    (meta.dev(), meta.ino(), meta.ctime(), meta.ctime_nsec())
}

/// Whether a change time is too recent, against the time the walk started, to trust a listing.
fn racy(meta: &std::fs::Metadata, started: SystemTime, window: Duration) -> bool {
    let changed = SystemTime::UNIX_EPOCH
        .checked_add(Duration::new(
            u64::try_from(meta.ctime()).unwrap_or(0),
            u32::try_from(meta.ctime_nsec()).unwrap_or(0),
        ))
        .unwrap_or(SystemTime::UNIX_EPOCH);
    match started.duration_since(changed) {
        Ok(age) => age < window,
        // A change time after the walk started (or a clock set back).
        Err(_) => true,
    }
}

/// The denied entries and the link census of `roots` (as [`crate::grants::find_denied`] and
/// [`crate::grants::link_census`] find them), remembering the listings in `memory` when given
/// (see the module's comment). A memory that cannot be read or written costs a full walk,
/// never an error.
pub fn survey(
    roots: &[&Path],
    patterns: &[String],
    paths: &[PathBuf],
    memory: Option<&Path>,
) -> Result<(Survey, WalkStats), String> {
    survey_aged(roots, patterns, paths, memory, RACY)
}

/// [`survey`] with the age `racy` a change time must have before a listing is trusted (tests
/// shorten it).
fn survey_aged(
    roots: &[&Path],
    patterns: &[String],
    paths: &[PathBuf],
    memory: Option<&Path>,
    racy: Duration,
) -> Result<(Survey, WalkStats), String> {
    let key = serde_json::to_string(&(roots, patterns)).unwrap_or_default();
    let remembered = memory
        .and_then(|m| std::fs::read(m).ok())
        .and_then(|bytes| serde_json::from_slice::<Memory>(&bytes).ok())
        .filter(|m| m.version == VERSION && m.key == key)
        .map(|m| m.dirs)
        .unwrap_or_default();
    let started = SystemTime::now();
    let mut fresh = BTreeMap::new();
    let (mut survey, mut stats) = walk(
        roots,
        patterns,
        paths,
        &remembered,
        &mut fresh,
        (started, racy),
    )?;
    if stats.remembered > 0
        && survey
            .census
            .values()
            .any(|(links, names)| usize::try_from(*links).map_or(true, |n| n > names.len()))
    {
        // A name may be in a remembered directory where the file had one name: walk it all.
        fresh.clear();
        let (again, again_stats) = walk(
            roots,
            patterns,
            paths,
            &BTreeMap::new(),
            &mut fresh,
            (started, racy),
        )?;
        survey = again;
        stats = WalkStats {
            redone: true,
            ..again_stats
        };
    }
    if let Some(m) = memory
        && fresh != remembered
    {
        remember(m, key, fresh);
    }
    Ok((survey, stats))
}

/// Writes the listings next to `path` and renames them over it (a reader sees the old file or
/// the new one, never half of one); failures are ignored (the next walk lists everything).
fn remember(path: &Path, key: String, dirs: BTreeMap<String, Listing>) {
    let Some(parent) = path.parent() else { return };
    if std::fs::create_dir_all(parent).is_err() {
        return;
    }
    let memory = Memory {
        version: VERSION,
        key,
        dirs,
    };
    let Ok(bytes) = serde_json::to_vec(&memory) else {
        return;
    };
    // A name of this process and moment: two commands remembering at once do not share it.
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = parent.join(format!(".census-{}-{nanos}.tmp", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &bytes));
    if written.is_err() || std::fs::rename(&tmp, path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

fn walk(
    roots: &[&Path],
    patterns: &[String],
    paths: &[PathBuf],
    remembered: &BTreeMap<String, Listing>,
    fresh: &mut BTreeMap<String, Listing>,
    clock: (SystemTime, Duration),
) -> Result<(Survey, WalkStats), String> {
    let mut survey = Survey {
        denied: paths.to_vec(),
        ..Survey::default()
    };
    let mut stats = WalkStats::default();
    let mut budget = SCAN_BUDGET;
    let mut spend = |n: usize| {
        budget = budget.checked_sub(n).ok_or_else(|| {
            format!(
                "more than {SCAN_BUDGET} entries under the roots while looking for denied names; narrow the read and write roots"
            )
        })?;
        Ok::<(), String>(())
    };
    let mut stack: Vec<(PathBuf, bool)> = crate::grants::outermost(roots)
        .into_iter()
        .map(|r| (r, false))
        .collect();
    while let Some((dir, inside_denied)) = stack.pop() {
        // The directory's time before its listing: a change after it moves the time.
        let Ok(meta) = std::fs::symlink_metadata(&dir) else {
            continue;
        };
        if !meta.is_dir() {
            continue;
        }
        let name = dir.to_str().map(str::to_owned);
        let known = name
            .as_ref()
            .and_then(|n| remembered.get(n))
            .filter(|l| !l.racy && l.stamp == stamp(&meta));
        let listing = match known {
            Some(l) => {
                stats.remembered += 1;
                l.clone()
            }
            None => match list(&dir, patterns, &meta, clock)? {
                Some(l) => {
                    stats.listed += 1;
                    l
                }
                None => continue,
            },
        };
        spend(listing.entries)?;
        for (sub, denied) in &listing.dirs {
            let path = dir.join(sub.os());
            if *denied && !inside_denied {
                survey.denied.push(path.clone());
            }
            stack.push((path, inside_denied || *denied));
        }
        if !inside_denied {
            survey
                .denied
                .extend(listing.denied.iter().map(|n| dir.join(n.os())));
        }
        for (file, dev, ino, denied) in &listing.linked {
            let path = dir.join(file.os());
            // The link count now (a name elsewhere may have come or gone since the listing).
            let Ok(now) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if !now.is_file() || (now.dev(), now.ino()) != (*dev, *ino) || now.nlink() < 2 {
                continue;
            }
            if inside_denied || *denied {
                survey.hidden.insert((*dev, *ino));
            }
            survey
                .census
                .entry((*dev, *ino))
                .or_insert_with(|| (now.nlink(), Vec::new()))
                .1
                .push(path);
        }
        // A listing too recent to trust is never used: not kept either, so a directory that
        // changes at every command (`.warrant/`) does not rewrite the memory every time.
        if let Some(n) = name
            && !listing.racy
        {
            fresh.insert(n, listing);
        }
    }
    survey.denied.sort();
    survey.denied.dedup();
    for (_, names) in survey.census.values_mut() {
        names.sort();
    }
    Ok((survey, stats))
}

/// Lists `dir` (whose metadata before the listing is `meta`); `None` when it cannot be read or
/// vanished (skipped, as the walk without memory does).
fn list(
    dir: &Path,
    patterns: &[String],
    meta: &std::fs::Metadata,
    (started, window): (SystemTime, Duration),
) -> Result<Option<Listing>, String> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot list {}: {e}", dir.display())),
    };
    let mut listing = Listing {
        stamp: stamp(meta),
        racy: racy(meta, started, window),
        entries: 0,
        dirs: Vec::new(),
        denied: Vec::new(),
        linked: Vec::new(),
    };
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
        listing.entries += 1;
        let name = entry.file_name();
        let denied = patterns
            .iter()
            .any(|p| name_matches(p, &name.to_string_lossy()));
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            listing.dirs.push((Name::of(name), denied));
            continue;
        }
        if kind.is_file()
            && let Ok(m) = entry.metadata()
            && m.nlink() > 1
        {
            listing
                .linked
                .push((Name::of(name.clone()), m.dev(), m.ino(), denied));
        }
        if denied {
            listing.denied.push(Name::of(name));
        }
    }
    Ok(Some(listing))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::{Duration, Survey, survey, survey_aged};
    use crate::grants::{find_denied, link_census};
    use std::path::{Path, PathBuf};

    fn patterns() -> Vec<String> {
        [".env", ".env.*", "*.pem", ".warrant"]
            .map(str::to_owned)
            .to_vec()
    }

    /// The two walks without memory, put together as a survey: the oracle.
    fn oracle(root: &Path) -> Survey {
        let (denied, mut census) = (
            find_denied(&[root], &patterns(), &[]).unwrap(),
            link_census(&[root]).unwrap(),
        );
        for (_, names) in census.values_mut() {
            names.sort();
        }
        let (full, _) = survey(&[root], &patterns(), &[], None).unwrap();
        assert_eq!((&full.denied, &full.census), (&denied, &census));
        full
    }

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// A workspace `ws` and a memory file beside it, in a directory of its own.
    struct Tree {
        _dir: tempfile::TempDir,
        root: PathBuf,
        memory: PathBuf,
    }

    impl Tree {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            let (root, memory) = (dir.path().join("ws"), dir.path().join("census.json"));
            Self {
                _dir: dir,
                root,
                memory,
            }
        }

        /// A walk with memory that trusts any listing not changed while it ran.
        fn walk(&self, patterns: &[String]) -> (Survey, super::WalkStats) {
            survey_aged(
                &[&self.root],
                patterns,
                &[],
                Some(&self.memory),
                Duration::ZERO,
            )
            .unwrap()
        }
    }

    /// Changes made after a walk move their directory's change time only once the clock has
    /// ticked past the listing's (the coarse clock of file times): wait that long.
    fn tick() {
        std::thread::sleep(Duration::from_millis(25));
    }

    /// After every kind of change to the tree (a denied name made deep down, a directory made,
    /// moved in, removed, a hard link made and removed inside, a denied file linked under a
    /// harmless name), the walk with memory answers exactly what a walk of everything answers,
    /// and it lists again only what changed.
    #[test]
    fn a_remembered_walk_answers_as_a_full_walk_after_every_change() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        let outside = dir.path().join("outside");
        let memory = dir.path().join("state/census.json");
        for i in 0..6 {
            write(&root, &format!("src/m{i}/lib.rs"), "code");
        }
        write(&root, "docs/readme.md", "doc");
        write(&root, ".warrant/store.db", "journal");
        write(&outside, "moved/.env", "SECRET=1");
        let run = || {
            let (got, stats) =
                survey_aged(&[&root], &patterns(), &[], Some(&memory), Duration::ZERO).unwrap();
            assert_eq!(got, oracle(&root));
            tick();
            (got, stats)
        };
        let (first, stats) = run();
        assert_eq!((stats.remembered, stats.redone), (0, false));
        let all = stats.listed;
        assert_eq!(first.denied, vec![root.join(".warrant")]);
        let (_, stats) = run();
        assert_eq!(
            (stats.remembered, stats.listed),
            (all, 0),
            "nothing changed"
        );

        type Change<'a> = (&'a str, Box<dyn Fn() + 'a>);
        let changes: Vec<Change<'_>> = vec![
            (
                "a denied name deep down",
                Box::new(|| write(&root, "src/m3/.env", "K=1")),
            ),
            (
                "a new directory",
                Box::new(|| write(&root, "src/m6/key.pem", "pem")),
            ),
            (
                "a directory moved in",
                Box::new(|| {
                    std::fs::rename(outside.join("moved"), root.join("docs/moved")).unwrap()
                }),
            ),
            (
                "a directory removed",
                Box::new(|| std::fs::remove_dir_all(root.join("src/m1")).unwrap()),
            ),
            (
                "a hard link made inside",
                Box::new(|| {
                    std::fs::hard_link(root.join("src/m2/lib.rs"), root.join("docs/lib-copy.rs"))
                        .unwrap()
                }),
            ),
            (
                "a denied file given a harmless name",
                Box::new(|| {
                    std::fs::hard_link(root.join("src/m3/.env"), root.join("src/m4/notes.txt"))
                        .unwrap()
                }),
            ),
            (
                "a file in a denied directory given a harmless name",
                Box::new(|| {
                    std::fs::hard_link(root.join(".warrant/store.db"), root.join("src/m5/data"))
                        .unwrap()
                }),
            ),
            (
                "a hard link removed",
                Box::new(|| std::fs::remove_file(root.join("docs/lib-copy.rs")).unwrap()),
            ),
            (
                "a denied name renamed away",
                Box::new(|| {
                    std::fs::rename(root.join("src/m3/.env"), root.join("src/m3/env.txt")).unwrap()
                }),
            ),
        ];
        for (what, change) in changes {
            change();
            let (got, stats) = run();
            assert!(
                stats.listed >= 1,
                "{what}: the changed directory is listed again"
            );
            assert!(
                stats.redone || stats.remembered >= 1,
                "{what}: the unchanged ones come from memory: {stats:?}"
            );
            if what == "a denied file given a harmless name" {
                assert!(got.denied.contains(&root.join("src/m3/.env")), "{what}");
            }
        }
        let (last, _) = run();
        let notes = std::fs::symlink_metadata(root.join("src/m4/notes.txt")).unwrap();
        let data = std::fs::symlink_metadata(root.join("src/m5/data")).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert!(last.hidden.contains(&(data.dev(), data.ino())), "{last:?}");
        // `.env` was renamed away: its other name is an ordinary file now.
        assert!(
            !last.hidden.contains(&(notes.dev(), notes.ino())),
            "{last:?}"
        );
        assert!(last.denied.contains(&root.join("docs/moved/.env")));
    }

    /// A link made inside the workspace to a file that had one name when its directory was
    /// listed: the remembered directory holds no record of it, so the walk starts over and
    /// finds both names (without that, the new name alone would look linked from outside).
    #[test]
    fn a_new_second_name_of_a_remembered_file_redoes_the_walk() {
        let t = Tree::new();
        let root = &t.root;
        write(root, "a/file", "x");
        std::fs::create_dir_all(root.join("b")).unwrap();
        let go = || t.walk(&patterns());
        go();
        tick();
        std::fs::hard_link(root.join("a/file"), root.join("b/link")).unwrap();
        let (got, stats) = go();
        assert!(stats.redone, "{stats:?}");
        let names: Vec<PathBuf> = got.census.values().flat_map(|(_, n)| n.clone()).collect();
        assert_eq!(names, vec![root.join("a/file"), root.join("b/link")]);
    }

    /// The listing is trusted by the directory's change time: a memory whose time for a
    /// directory were right although a `.env` had been made there since (forged here; a change
    /// always moves the time) would hide it. The negative control of the check: the same walk
    /// with the true time finds it.
    #[test]
    fn a_directory_whose_time_moved_is_listed_again() {
        let t = Tree::new();
        let (root, memory) = (&t.root, &t.memory);
        write(root, "sub/a.txt", "x");
        let go = || t.walk(&patterns());
        go();
        tick();
        let remembered = std::fs::read_to_string(memory).unwrap();
        write(root, "sub/.env", "SECRET=1");
        let (found, _) = go();
        assert_eq!(found.denied, vec![root.join("sub/.env")]);
        // Forge: the old listing of `sub` under its new time.
        let mut forged: serde_json::Value = serde_json::from_str(&remembered).unwrap();
        let meta = std::fs::symlink_metadata(root.join("sub")).unwrap();
        let key = root.join("sub").to_str().unwrap().to_owned();
        forged["dirs"][&key]["stamp"] = serde_json::to_value(super::stamp(&meta)).unwrap();
        std::fs::write(memory, forged.to_string()).unwrap();
        let (hidden, _) = go();
        assert_eq!(
            hidden.denied,
            Vec::<PathBuf>::new(),
            "the forged memory hides it"
        );
    }

    /// A directory changed less than [`super::RACY`] before the walk is listed again on the
    /// next walk whatever its time says: a change in the same clock tick as its listing would
    /// not have moved it.
    #[test]
    fn a_recently_changed_directory_is_not_trusted() {
        let t = Tree::new();
        write(&t.root, "sub/a.txt", "x");
        let go = || survey(&[&t.root], &patterns(), &[], Some(&t.memory)).unwrap();
        go();
        let (_, stats) = go();
        assert_eq!(stats.remembered, 0, "{stats:?}");
        assert!(stats.listed >= 2, "{stats:?}");
    }

    /// Memory for other roots or patterns, or unreadable, is ignored (a full walk).
    #[test]
    fn memory_of_other_roots_or_garbage_is_ignored() {
        let t = Tree::new();
        write(&t.root, "sub/.env", "x");
        t.walk(&patterns());
        tick();
        let (other, stats) = t.walk(&["*.txt".to_owned()]);
        assert_eq!((stats.remembered, other.denied.len()), (0, 0));
        std::fs::write(&t.memory, b"{ not json").unwrap();
        let (again, stats) = t.walk(&patterns());
        assert_eq!(
            (stats.remembered, again.denied),
            (0, vec![t.root.join("sub/.env")])
        );
    }
}
