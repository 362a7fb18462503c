//! Changesets read from real overlay upper directories: each test mounts an overlay over a
//! temp workspace in a child (`unshare -Urm`), runs shell commands in it, then reads, judges and
//! applies what they changed.
#![allow(clippy::print_stderr)]

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;

use pretty_assertions::assert_eq;
use warrant_core::{Coded, Digest};
use warrant_exec::changeset::{
    Applied, DENIED_PATTERNS, Finding, Outcome, PROTECTED_NAMES, Step, StepKind,
};
use warrant_exec::{Change, Changeset, EffectClass, ExecError, Node};

struct Overlay {
    _dir: tempfile::TempDir,
    lower: PathBuf,
    upper: PathBuf,
    work: PathBuf,
    /// A copy of the merged view as the command left it.
    seen: PathBuf,
}

fn owned(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn guards() -> (Vec<String>, Vec<String>) {
    (owned(PROTECTED_NAMES), owned(DENIED_PATTERNS))
}

fn file(size: u64, content: &[u8], mode: u32) -> Node {
    assert_eq!(size, content.len() as u64);
    Node::File {
        size,
        digest: Digest::of_bytes(content),
        mode,
    }
}

fn text(content: &str, mode: u32) -> Node {
    file(content.len() as u64, content.as_bytes(), mode)
}

/// A workspace with `files` (path, content; a path ending in `/` is a directory).
fn workspace(files: &[(&str, &str)]) -> Overlay {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let ov = Overlay {
        lower: base.join("lower"),
        upper: base.join("upper"),
        work: base.join("work"),
        seen: base.join("seen"),
        _dir: dir,
    };
    for d in [&ov.lower, &ov.upper, &ov.work, &ov.seen] {
        std::fs::create_dir(d).unwrap();
    }
    for (path, content) in files {
        let p = ov.lower.join(path.trim_end_matches('/'));
        if path.ends_with('/') {
            std::fs::create_dir_all(&p).unwrap();
        } else {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, content).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
    }
    // Directories as a umask of 022 makes them, whatever this process's umask is.
    for (path, _) in files {
        let mut p = ov.lower.join(path.trim_end_matches('/'));
        if !path.ends_with('/') {
            p.pop();
        }
        while p != ov.lower {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            p.pop();
        }
    }
    ov
}

/// Whether this machine can mount an overlay in an unprivileged user namespace.
fn can_mount() -> bool {
    let probe = Command::new("unshare").args(["-Urm", "true"]).status();
    match probe {
        Ok(s) if s.success() => true,
        Ok(s) => {
            eprintln!("skipped: `unshare -Urm true` failed ({s}); no user namespaces here");
            false
        }
        Err(e) => {
            eprintln!("skipped: cannot run unshare: {e}");
            false
        }
    }
}

/// Run `script` in the workspace through an overlay, and keep a copy of what it saw.
fn run(ov: &Overlay, script: &str) {
    let full = format!(
        "mount -t overlay overlay -o lowerdir={l},upperdir={u},workdir={w},userxattr {l} && cd {l} && umask 022 && {{ {script} ; }} && cp -a {l}/. {s}/",
        l = ov.lower.display(),
        u = ov.upper.display(),
        w = ov.work.display(),
        s = ov.seen.display(),
    );
    let out = Command::new("unshare")
        .args(["-Urm", "sh", "-c", &full])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "overlay script failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

fn mounted(files: &[(&str, &str)], script: &str) -> Option<Overlay> {
    if !can_mount() {
        return None;
    }
    let ov = workspace(files);
    run(&ov, script);
    Some(ov)
}

/// Every entry under `root`: kind, mode and content (or link target).
fn tree(root: &Path) -> BTreeMap<String, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        names.sort();
        for p in names {
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let mode = m.mode() & 0o7777;
            if m.file_type().is_symlink() {
                out.insert(
                    rel,
                    format!("link {}", std::fs::read_link(&p).unwrap().display()),
                );
            } else if m.is_dir() {
                out.insert(rel, format!("dir {mode:o}"));
                walk(root, &p, out);
            } else {
                let content = std::fs::read(&p).unwrap();
                out.insert(
                    rel,
                    format!("file {mode:o} {}", String::from_utf8_lossy(&content)),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

#[test]
fn create_modify_truncate_chmod_and_links() {
    let Some(ov) = mounted(
        &[
            ("a.txt", "one\ntwo\n"),
            ("b.txt", "a long line\n"),
            ("c.sh", "echo hi\n"),
            ("same.txt", "untouched\n"),
            ("ln-old", ""),
        ],
        "rm ln-old && ln -s a.txt ln-old && echo new > n.txt && echo three >> a.txt && printf x > b.txt \
         && chmod 755 c.sh && mkdir -p d/e && echo f > d/e/f && ln -s ../a.txt d/link && touch same.txt",
    ) else {
        return;
    };
    let cs = Changeset::read(&ov.lower, &ov.upper).unwrap();
    let expected = vec![
        Change::Modified {
            path: "a.txt".into(),
            old: text("one\ntwo\n", 0o644),
            new: text("one\ntwo\nthree\n", 0o644),
            truncated: false,
            diff: Some(
                "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,3 @@\n one\n two\n+three\n".into(),
            ),
        },
        Change::Modified {
            path: "b.txt".into(),
            old: text("a long line\n", 0o644),
            new: text("x", 0o644),
            truncated: true,
            diff: Some(
                "--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-a long line\n+x\n\\ No newline at end of file\n"
                    .into(),
            ),
        },
        Change::ModeChanged {
            path: "c.sh".into(),
            old: text("echo hi\n", 0o644),
            new_mode: 0o755,
        },
        Change::DirCreated {
            path: "d".into(),
            mode: 0o755,
        },
        Change::DirCreated {
            path: "d/e".into(),
            mode: 0o755,
        },
        Change::Created {
            path: "d/e/f".into(),
            node: text("f\n", 0o644),
            diff: Some("--- a/d/e/f\n+++ b/d/e/f\n@@ -0,0 +1 @@\n+f\n".into()),
        },
        Change::Created {
            path: "d/link".into(),
            node: Node::Symlink {
                target: "../a.txt".into(),
            },
            diff: None,
        },
        Change::Deleted {
            path: "ln-old".into(),
            old: text("", 0o644),
        },
        Change::Created {
            path: "ln-old".into(),
            node: Node::Symlink {
                target: "a.txt".into(),
            },
            diff: None,
        },
        Change::Created {
            path: "n.txt".into(),
            node: text("new\n", 0o644),
            diff: Some("--- a/n.txt\n+++ b/n.txt\n@@ -0,0 +1 @@\n+new\n".into()),
        },
    ];
    assert_eq!(cs.entries, expected);
    let (protected, denied) = guards();
    let effect = cs.effect(&protected, &denied);
    assert_eq!(effect.class, EffectClass::Destructive);
    assert_eq!(
        effect.findings,
        vec![
            Finding::Truncated {
                path: "b.txt".into(),
                old_size: 12,
                new_size: 1
            },
            Finding::Deleted {
                path: "ln-old".into()
            },
        ]
    );
    insta::assert_snapshot!(cs.render());
}

#[test]
fn deletions_of_files_trees_and_find_delete() {
    let Some(ov) = mounted(
        &[
            ("keep.txt", "k"),
            ("old.txt", "o"),
            ("tree/a/b.txt", "b"),
            ("tree/c.txt", "c"),
            ("tree/empty/", ""),
            ("docs/x.md", "x"),
            ("docs/y.md", "y"),
            ("docs/z.txt", "z"),
            ("sub/deep/n.md", "n"),
        ],
        "rm old.txt && rm -rf tree && find . -name '*.md' -delete",
    ) else {
        return;
    };
    let cs = Changeset::read(&ov.lower, &ov.upper).unwrap();
    let deleted = |path: &str, content: &str| Change::Deleted {
        path: path.into(),
        old: text(content, 0o644),
    };
    let dir_deleted = |path: &str| Change::DirDeleted { path: path.into() };
    assert_eq!(
        cs.entries,
        vec![
            deleted("docs/x.md", "x"),
            deleted("docs/y.md", "y"),
            deleted("old.txt", "o"),
            deleted("sub/deep/n.md", "n"),
            dir_deleted("tree"),
            dir_deleted("tree/a"),
            deleted("tree/a/b.txt", "b"),
            deleted("tree/c.txt", "c"),
            dir_deleted("tree/empty"),
        ]
    );
    let (protected, denied) = guards();
    let effect = cs.effect(&protected, &denied);
    assert_eq!(effect.class, EffectClass::Destructive);
    assert_eq!(effect.findings.len(), 9);
    insta::assert_snapshot!(cs.render());

    let applied = cs.apply(&ov.lower, &ov.upper).unwrap();
    assert_eq!(tree(&ov.lower), tree(&ov.seen));
    // Files before their directories, deepest first.
    let order: Vec<&str> = applied.steps.iter().map(|s| s.path.as_str()).collect();
    assert_eq!(
        order,
        [
            "tree/empty",
            "tree/c.txt",
            "tree/a/b.txt",
            "tree/a",
            "tree",
            "sub/deep/n.md",
            "old.txt",
            "docs/y.md",
            "docs/x.md"
        ]
    );
}

#[test]
fn renames_are_paired_and_an_overwriting_one_is_destructive() {
    let Some(ov) = mounted(
        &[
            ("a.txt", "alpha"),
            ("b.txt", "beta"),
            ("c.txt", "gamma"),
            ("e1", ""),
        ],
        "mv a.txt moved.txt && mv b.txt c.txt && mv e1 e2 && chmod 600 moved.txt",
    ) else {
        return;
    };
    let cs = Changeset::read(&ov.lower, &ov.upper).unwrap();
    assert_eq!(
        cs.entries,
        vec![
            Change::Renamed {
                from: "b.txt".into(),
                to: "c.txt".into(),
                old: text("beta", 0o644),
                new_mode: 0o644,
                replaced: Some(text("gamma", 0o644)),
            },
            // An empty file says nothing about where it came from: not paired.
            Change::Deleted {
                path: "e1".into(),
                old: text("", 0o644),
            },
            Change::Created {
                path: "e2".into(),
                node: text("", 0o644),
                diff: None,
            },
            Change::Renamed {
                from: "a.txt".into(),
                to: "moved.txt".into(),
                old: text("alpha", 0o644),
                new_mode: 0o600,
                replaced: None,
            },
        ]
    );
    let (protected, denied) = guards();
    assert_eq!(
        cs.effect(&protected, &denied).findings,
        vec![
            Finding::Overwritten {
                path: "c.txt".into(),
                by: "b.txt".into()
            },
            Finding::Deleted { path: "e1".into() },
        ]
    );
    insta::assert_snapshot!(cs.render());
    cs.apply(&ov.lower, &ov.upper).unwrap();
    assert_eq!(tree(&ov.lower), tree(&ov.seen));
}

#[test]
fn a_rename_to_a_new_name_is_a_change() {
    let Some(ov) = mounted(&[("a.txt", "alpha")], "mkdir out && mv a.txt out/a.txt") else {
        return;
    };
    let cs = Changeset::read(&ov.lower, &ov.upper).unwrap();
    let (protected, denied) = guards();
    let effect = cs.effect(&protected, &denied);
    assert_eq!(
        (effect.class, effect.findings, cs.entries.len()),
        (EffectClass::Change, vec![], 2)
    );
    // Nothing changed at all.
    let Some(quiet) = mounted(
        &[("a.txt", "alpha")],
        "cat a.txt > /dev/null && touch a.txt",
    ) else {
        return;
    };
    let none = Changeset::read(&quiet.lower, &quiet.upper).unwrap();
    assert_eq!(
        (none.effect(&protected, &denied).class, none.render()),
        (EffectClass::Nothing, "no changes\n".to_owned())
    );
}

#[test]
fn writes_under_protected_and_denied_names_are_refused() {
    let Some(ov) = mounted(
        &[
            (".git/config", "[core]\n"),
            ("src/main.rs", "fn main() {}\n"),
        ],
        "echo '[hook]' >> .git/config && mkdir -p keys && echo k > keys/id_rsa && echo S=1 > .env.local \
         && echo x > src/tls.pem && echo ok >> src/main.rs",
    ) else {
        return;
    };
    let cs = Changeset::read(&ov.lower, &ov.upper).unwrap();
    let (protected, denied) = guards();
    let effect = cs.effect(&protected, &denied);
    assert_eq!(effect.class, EffectClass::Refused);
    assert_eq!(
        effect.findings,
        vec![
            Finding::Denied {
                path: ".env.local".into(),
                pattern: ".env.*".into()
            },
            Finding::Protected {
                path: ".git/config".into(),
                name: ".git".into()
            },
            Finding::Denied {
                path: "keys/id_rsa".into(),
                pattern: "id_rsa*".into()
            },
            Finding::Denied {
                path: "src/tls.pem".into(),
                pattern: "*.pem".into()
            },
        ]
    );
    // Negative control: with no names guarded, the same changeset is only a change.
    assert_eq!(cs.effect(&[], &[]).class, EffectClass::Change);
    // A guard given as a path covers what is under it.
    assert_eq!(
        cs.effect(&owned(&["./src/"]), &[]).findings,
        vec![
            Finding::Protected {
                path: "src/main.rs".into(),
                name: "./src/".into()
            },
            Finding::Protected {
                path: "src/tls.pem".into(),
                name: "./src/".into()
            },
        ]
    );
}

#[test]
fn type_changes_and_opaque_directories_apply_and_reapply() {
    let Some(ov) = mounted(
        &[
            ("tree/old.txt", "old"),
            ("tree/kept.txt", "same"),
            ("tree/sub/x", "x"),
            ("f", "file"),
            ("g/inner", "i"),
            ("h", "h"),
            ("m.txt", "before"),
            ("rename-me", "moving content"),
            ("ro/", ""),
        ],
        "rm -rf tree && mkdir tree && echo same > tree/kept.txt && printf same > tree/kept.txt && echo new > tree/new.txt \
         && rm f && mkdir f && echo z > f/g && rm -rf g && echo now-a-file > g && rm h && ln -s tree h \
         && echo after > m.txt && mv rename-me tree/renamed && echo in > ro/in && chmod 555 ro",
    ) else {
        return;
    };
    let cs = Changeset::read(&ov.lower, &ov.upper).unwrap();
    let summary: Vec<(String, &str)> = cs
        .entries
        .iter()
        .map(|c| {
            let what = match c {
                Change::Created { .. } => "created",
                Change::Modified { .. } => "modified",
                Change::Deleted { .. } => "deleted",
                Change::DirCreated { .. } => "dir created",
                Change::DirDeleted { .. } => "dir deleted",
                Change::ModeChanged { .. } => "mode",
                Change::Renamed { from, .. } => {
                    return (format!("{from} -> {}", c.path()), "renamed");
                }
            };
            (c.path().to_owned(), what)
        })
        .collect();
    let want: Vec<(String, &str)> = [
        ("f", "deleted"),
        ("f", "dir created"),
        ("f/g", "created"),
        ("g", "dir deleted"),
        ("g", "created"),
        ("g/inner", "deleted"),
        ("h", "deleted"),
        ("h", "created"),
        ("m.txt", "modified"),
        ("ro", "mode"),
        ("ro/in", "created"),
        ("tree/new.txt", "created"),
        ("tree/old.txt", "deleted"),
        ("rename-me -> tree/renamed", "renamed"),
        ("tree/sub", "dir deleted"),
        ("tree/sub/x", "deleted"),
    ]
    .iter()
    .map(|(p, w)| ((*p).to_owned(), *w))
    .collect();
    assert_eq!(summary, want);

    let first = cs.apply(&ov.lower, &ov.upper).unwrap();
    assert!(first.steps.iter().all(|s| s.outcome == Outcome::Done));
    assert_eq!(tree(&ov.lower), tree(&ov.seen));
    let again = cs.apply(&ov.lower, &ov.upper).unwrap();
    assert!(
        again
            .steps
            .iter()
            .all(|s| s.outcome == Outcome::AlreadyDone),
        "{again:?}"
    );
    assert_eq!(again.steps.len(), first.steps.len());
    assert_eq!(tree(&ov.lower), tree(&ov.seen));
}

#[test]
fn an_interrupted_apply_is_finished_by_applying_again() {
    let files = [
        ("a.txt", "one"),
        ("b.txt", "two"),
        ("dir/c.txt", "three"),
        ("gone/x", "x"),
    ];
    let script = "echo more >> a.txt && rm -rf gone && mkdir -p new/deep && echo n > new/deep/n && mv b.txt new/b.txt && rm dir/c.txt";
    let Some(ov) = mounted(&files, script) else {
        return;
    };
    let cs = Changeset::read(&ov.lower, &ov.upper).unwrap();
    // The crash: only some entries made it.
    let part = Changeset {
        entries: cs
            .entries
            .iter()
            .filter(|c| ["a.txt", "gone/x", "new", "new/b.txt"].contains(&c.path()))
            .cloned()
            .collect(),
        diffs_left_out: 0,
    };
    assert_eq!(part.entries.len(), 4);
    part.apply(&ov.lower, &ov.upper).unwrap();
    assert_ne!(tree(&ov.lower), tree(&ov.seen));
    let resumed = cs.apply(&ov.lower, &ov.upper).unwrap();
    let outcomes: Vec<Outcome> = resumed.steps.iter().map(|s| s.outcome).collect();
    assert!(outcomes.contains(&Outcome::Done) && outcomes.contains(&Outcome::AlreadyDone));
    assert_eq!(tree(&ov.lower), tree(&ov.seen));
}

#[test]
fn a_workspace_file_changed_after_reading_is_refused_and_nothing_applied() {
    let Some(ov) = mounted(
        &[("a.txt", "one"), ("b.txt", "two")],
        "echo changed > a.txt && echo new > n.txt && rm b.txt",
    ) else {
        return;
    };
    let cs = Changeset::read(&ov.lower, &ov.upper).unwrap();
    let before = tree(&ov.lower);
    std::fs::write(ov.lower.join("a.txt"), "edited by someone else").unwrap();
    let err = cs.apply(&ov.lower, &ov.upper).unwrap_err();
    assert_eq!(err.code(), "W-EXEC-024");
    assert_eq!(
        err,
        ExecError::ChangesetStale {
            path: "a.txt".into(),
            expected: format!("a file of 3 bytes ({})", Digest::of_bytes(b"one")),
            found: format!(
                "a file of 22 bytes ({})",
                Digest::of_bytes(b"edited by someone else")
            ),
        }
    );
    // Nothing else was applied either: n.txt absent, b.txt still there.
    let mut want = before;
    want.insert("a.txt".into(), "file 644 edited by someone else".into());
    assert_eq!(tree(&ov.lower), want);

    // Negative control: restored, the same changeset applies.
    std::fs::write(ov.lower.join("a.txt"), "one").unwrap();
    cs.apply(&ov.lower, &ov.upper).unwrap();
    assert_eq!(tree(&ov.lower), tree(&ov.seen));
}

#[test]
fn a_file_deleted_meanwhile_or_created_meanwhile_is_refused() {
    let Some(ov) = mounted(&[("a.txt", "one")], "echo new > n.txt && echo two > a.txt") else {
        return;
    };
    let cs = Changeset::read(&ov.lower, &ov.upper).unwrap();
    std::fs::write(ov.lower.join("n.txt"), "someone else's").unwrap();
    let err = cs.apply(&ov.lower, &ov.upper).unwrap_err();
    assert_eq!(
        (err.code(), tree(&ov.lower).get("a.txt").cloned()),
        ("W-EXEC-024", Some("file 644 one".to_owned()))
    );
    std::fs::remove_file(ov.lower.join("n.txt")).unwrap();
    std::fs::remove_file(ov.lower.join("a.txt")).unwrap();
    let err = cs.apply(&ov.lower, &ov.upper).unwrap_err();
    assert_eq!(err.code(), "W-EXEC-024", "{err}");
}

#[test]
fn the_upper_changed_after_judgement_is_refused() {
    let Some(ov) = mounted(&[("a.txt", "one")], "echo judged > n.txt") else {
        return;
    };
    let cs = Changeset::read(&ov.lower, &ov.upper).unwrap();
    std::fs::write(ov.upper.join("n.txt"), "swapped after approval\n").unwrap();
    let err = cs.apply(&ov.lower, &ov.upper).unwrap_err();
    assert_eq!(
        err,
        ExecError::ChangesetUpperChanged {
            path: "n.txt".into()
        }
    );
    assert!(!ov.lower.join("n.txt").exists());
    // No temporary file is left behind.
    assert_eq!(tree(&ov.lower).len(), 1);
    // Negative control: the content that was judged applies.
    std::fs::write(ov.upper.join("n.txt"), "judged\n").unwrap();
    cs.apply(&ov.lower, &ov.upper).unwrap();
    assert_eq!(tree(&ov.lower), tree(&ov.seen));
}

#[test]
fn a_link_swapped_into_the_workspace_is_never_followed() {
    let Some(ov) = mounted(
        &[("d/a.txt", "one"), ("outside/", "")],
        "echo new > d/n.txt && rm d/a.txt",
    ) else {
        return;
    };
    let cs = Changeset::read(&ov.lower, &ov.upper).unwrap();
    let outside = ov.lower.parent().unwrap().join("elsewhere");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("a.txt"), "one").unwrap();
    std::fs::remove_dir_all(ov.lower.join("d")).unwrap();
    symlink(&outside, ov.lower.join("d")).unwrap();
    let err = cs.apply(&ov.lower, &ov.upper).unwrap_err();
    assert_eq!(err.code(), "W-EXEC-025");
    assert_eq!(
        err,
        ExecError::ChangesetLink {
            path: "d/n.txt".into(),
            link: "d".into()
        }
    );
    assert_eq!(
        tree(&outside),
        BTreeMap::from([("a.txt".to_owned(), "file 644 one".to_owned())])
    );
    // Negative control: with a real directory there again, the same changeset applies.
    std::fs::remove_file(ov.lower.join("d")).unwrap();
    std::fs::create_dir(ov.lower.join("d")).unwrap();
    std::fs::set_permissions(ov.lower.join("d"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(ov.lower.join("d/a.txt"), "one").unwrap();
    std::fs::set_permissions(
        ov.lower.join("d/a.txt"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    cs.apply(&ov.lower, &ov.upper).unwrap();
    assert_eq!(tree(&ov.lower), tree(&ov.seen));
}

#[test]
fn a_hand_built_upper_is_read_without_a_mount() {
    let ov = workspace(&[
        ("a.txt", "a"),
        ("b.txt", "b"),
        ("dir/x", "x"),
        ("dir/y", "y"),
        ("tdir/t", "t"),
        ("keep/k", "k"),
    ]);
    let u = &ov.upper;
    let whiteout = |name: &str| {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            u.join(name).as_path(),
            rustix::fs::FileType::CharacterDevice,
            rustix::fs::Mode::from_raw_mode(0),
            0,
        )
    };
    if let Err(e) = whiteout("a.txt") {
        eprintln!("skipped: cannot make a whiteout with mknod (needs CAP_MKNOD): {e}");
        return;
    }
    for (dir, xattr) in [
        ("dir", "user.overlay.opaque"),
        ("tdir", "trusted.overlay.opaque"),
    ] {
        std::fs::create_dir(u.join(dir)).unwrap();
        std::fs::set_permissions(u.join(dir), std::fs::Permissions::from_mode(0o755)).unwrap();
        rustix::fs::lsetxattr(
            u.join(dir).as_path(),
            xattr,
            b"y",
            rustix::fs::XattrFlags::empty(),
        )
        .unwrap();
    }
    std::fs::write(u.join("dir/y"), "y").unwrap();
    std::fs::set_permissions(u.join("dir/y"), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::create_dir(u.join("keep")).unwrap();
    std::fs::set_permissions(u.join("keep"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(u.join("keep/n"), "n").unwrap();
    std::fs::set_permissions(u.join("keep/n"), std::fs::Permissions::from_mode(0o644)).unwrap();
    // An xwhiteout: an empty file marked as a whiteout.
    std::fs::write(u.join("b.txt"), "").unwrap();
    rustix::fs::lsetxattr(
        u.join("b.txt").as_path(),
        "user.overlay.whiteout",
        b"",
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    symlink("keep/k", u.join("link")).unwrap();
    let cs = Changeset::read(&ov.lower, &ov.upper).unwrap();
    assert_eq!(
        cs.entries,
        vec![
            Change::Deleted {
                path: "a.txt".into(),
                old: text("a", 0o644)
            },
            Change::Deleted {
                path: "b.txt".into(),
                old: text("b", 0o644)
            },
            // Opaque: x is gone, y is the same as before.
            Change::Deleted {
                path: "dir/x".into(),
                old: text("x", 0o644)
            },
            Change::Created {
                path: "keep/n".into(),
                node: text("n", 0o644),
                diff: Some(
                    "--- a/keep/n\n+++ b/keep/n\n@@ -0,0 +1 @@\n+n\n\\ No newline at end of file\n"
                        .into()
                ),
            },
            Change::Created {
                path: "link".into(),
                node: Node::Symlink {
                    target: "keep/k".into()
                },
                diff: None,
            },
            Change::Deleted {
                path: "tdir/t".into(),
                old: text("t", 0o644)
            },
        ]
    );

    // What Warrant cannot carry over is refused, not skipped.
    rustix::fs::mknodat(
        rustix::fs::CWD,
        u.join("keep/fifo").as_path(),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    assert_eq!(
        Changeset::read(&ov.lower, &ov.upper).unwrap_err(),
        ExecError::ChangesetUnsupported {
            path: "keep/fifo".into(),
            what: "a FIFO, socket or device".into()
        }
    );
    std::fs::remove_file(u.join("keep/fifo")).unwrap();
    rustix::fs::lsetxattr(
        u.join("keep").as_path(),
        "user.overlay.redirect",
        b"/other",
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    assert_eq!(
        Changeset::read(&ov.lower, &ov.upper).unwrap_err().code(),
        "W-EXEC-023"
    );
}

#[test]
fn a_damaged_record_is_refused_and_the_digest_binds_every_field() {
    let ov = workspace(&[("a.txt", "a")]);
    let forged: Changeset = serde_json::from_value(serde_json::json!({
        "entries": [{"change": "deleted", "path": "../lower-sibling", "old": {"kind": "file", "size": 1, "digest": Digest::of_bytes(b"a"), "mode": 420}}]
    }))
    .unwrap();
    assert_eq!(
        forged.apply(&ov.lower, &ov.upper).unwrap_err(),
        ExecError::ChangesetBadPath {
            path: "../lower-sibling".into()
        }
    );
    let cs = Changeset {
        entries: vec![Change::Deleted {
            path: "a.txt".into(),
            old: text("a", 0o644),
        }],
        diffs_left_out: 0,
    };
    let json = serde_json::to_string(&cs).unwrap();
    let back: Changeset = serde_json::from_str(&json).unwrap();
    assert_eq!(back.digest().unwrap(), cs.digest().unwrap());
    let other = Changeset {
        entries: vec![Change::Deleted {
            path: "a.txt".into(),
            old: text("a", 0o600),
        }],
        diffs_left_out: 0,
    };
    assert_ne!(other.digest().unwrap(), cs.digest().unwrap());
    assert_eq!(
        cs.apply(&ov.lower, &ov.upper).unwrap(),
        Applied {
            steps: vec![Step {
                kind: StepKind::Remove,
                path: "a.txt".into(),
                outcome: Outcome::Done
            }],
            stopped: false,
        }
    );
}

mod random {
    use super::*;
    use proptest::prelude::*;

    const NAMES: &[&str] = &["a", "b", "d", "d/a", "d/b", "e", "e/f", "e/f/g", "n/m"];

    fn name() -> impl Strategy<Value = &'static str> {
        proptest::sample::select(NAMES)
    }

    fn op() -> impl Strategy<Value = String> {
        prop_oneof![
            (name(), "[a-z]{1,6}").prop_map(|(p, t)| format!("echo {t} >> {p}")),
            (name(), "[a-z]{0,3}").prop_map(|(p, t)| format!("printf '{t}' > {p}")),
            name().prop_map(|p| format!("rm -f {p}")),
            name().prop_map(|p| format!("rm -rf {p}")),
            name().prop_map(|p| format!("mkdir -p {p}")),
            (name(), name()).prop_map(|(p, q)| format!("mv {p} {q}")),
            (name(), name()).prop_map(|(p, q)| format!("cp {p} {q}")),
            (name(), prop_oneof![Just("600"), Just("755"), Just("644")])
                .prop_map(|(p, m)| format!("chmod {m} {p}")),
            (name(), name()).prop_map(|(p, t)| format!("ln -s {t} {p}")),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// Whatever the command did, applying its changeset makes the workspace what the
        /// command saw, and applying it again changes nothing.
        #[test]
        fn applying_reproduces_what_the_command_saw(
            ops in proptest::collection::vec(op(), 2..12),
            crash_after in 0usize..5,
        ) {
            if !can_mount() {
                return Ok(());
            }
            let ov = workspace(&[("a", "alpha"), ("d/a", "da"), ("d/b", "db"), ("e/f/g", "g")]);
            let script: Vec<String> = ops.iter().map(|o| format!("{{ {o} ; }} 2>/dev/null")).collect();
            run(&ov, &format!("{} ; true", script.join(" ; ")));
            let cs = Changeset::read(&ov.lower, &ov.upper).unwrap();
            let (protected, denied) = guards();
            let effect = cs.effect(&protected, &denied);
            let deletes = cs.entries.iter().any(|c| matches!(c, Change::Deleted { .. } | Change::DirDeleted { .. }));
            prop_assert_eq!(deletes, effect.class == EffectClass::Destructive && effect.findings.iter().any(|f| matches!(f, Finding::Deleted { .. })));
            // A crash after some steps, then the apply done again.
            let mut left = crash_after;
            let crashed = cs
                .apply_with(&ov.lower, &ov.upper, &mut |_| {
                    if left == 0 { ControlFlow::Break(()) } else { left -= 1; ControlFlow::Continue(()) }
                })
                .unwrap();
            let first = cs.apply(&ov.lower, &ov.upper).unwrap();
            prop_assert_eq!(tree(&ov.lower), tree(&ov.seen), "{:?}\n{}", ops, cs.render());
            let redone = first.steps.iter().filter(|s| s.outcome == Outcome::AlreadyDone).count();
            prop_assert_eq!(redone, crashed.steps.len().min(first.steps.len()));
            let again = cs.apply(&ov.lower, &ov.upper).unwrap();
            prop_assert!(again.steps.iter().all(|s| s.outcome == Outcome::AlreadyDone), "{:?}", again);
            prop_assert_eq!(again.steps.len(), first.steps.len());
            prop_assert_eq!(tree(&ov.lower), tree(&ov.seen));
            // Read back from the journal, it is the same changeset.
            let back: Changeset = serde_json::from_str(&serde_json::to_string(&cs).unwrap()).unwrap();
            prop_assert_eq!(back.digest().unwrap(), cs.digest().unwrap());
        }
    }
}
