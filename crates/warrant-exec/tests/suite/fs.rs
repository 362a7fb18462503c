use std::os::unix::fs::{PermissionsExt, symlink};

use pretty_assertions::assert_eq;
use warrant_core::path::canonicalize;
use warrant_core::{
    Action, CanonicalPath, Coded, Digest, FsDelete, FsList, FsRead, FsSearch, FsWrite, ShellExec,
};
use warrant_exec::fs::{MAX_READ_BYTES, MAX_SEARCH_MATCHES};
use warrant_exec::{
    DeleteReceipt, DirEntry, DirListing, EntryKind, ExecError, FileContent, OsLinks, SearchResult,
    SkipCounts, WriteReceipt, delete_path, list_dir, read_file, search, write_file,
};
use warrant_kernel::Authorized;

use super::{authorized, tempdir};

fn write(path: &CanonicalPath, content: &str) -> Result<WriteReceipt, ExecError> {
    write_file(&authorized(Action::FsWrite {
        path: path.clone(),
        content: content.into(),
    }))
}

fn create(path: &CanonicalPath, content: &str) -> Result<WriteReceipt, ExecError> {
    write_file(&authorized(Action::FsCreate {
        path: path.clone(),
        content: content.into(),
    }))
}

fn read(path: &CanonicalPath) -> Result<FileContent, ExecError> {
    let root = CanonicalPath::from_normalized("/").unwrap();
    read_file(&authorized(Action::FsRead { path: path.clone() }), &root)
}

fn delete(path: &CanonicalPath, recursive: bool) -> Result<DeleteReceipt, ExecError> {
    delete_path(&authorized(Action::FsDelete {
        path: path.clone(),
        recursive,
    }))
}

fn find(
    path: &CanonicalPath,
    pattern: &str,
    may_read: &dyn Fn(&CanonicalPath) -> bool,
) -> SearchResult {
    search(
        &authorized(Action::FsSearch {
            path: path.clone(),
            pattern: pattern.into(),
        }),
        may_read,
    )
    .unwrap()
}

#[test]
fn write_create_read_round_trip() {
    let (_d, root) = tempdir();
    let file = root
        .join_component("new")
        .join_component("dir")
        .join_component("a.txt");
    assert_eq!(
        create(&file, "one\n").unwrap(),
        WriteReceipt {
            path: file.clone(),
            bytes: 4,
            created: true,
            previous_digest: None
        }
    );
    assert_eq!(
        create(&file, "again").unwrap_err(),
        ExecError::AlreadyExists { path: file.clone() }
    );
    std::fs::set_permissions(file.as_path(), std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(
        write(&file, "two\n").unwrap(),
        WriteReceipt {
            path: file.clone(),
            bytes: 4,
            created: false,
            previous_digest: Some(Digest::of_bytes(b"one\n"))
        }
    );
    let mode = std::fs::metadata(file.as_path())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(
        mode & 0o777,
        0o600,
        "replacing keeps the file's permissions"
    );
    assert_eq!(
        read(&file).unwrap(),
        FileContent {
            path: file.clone(),
            content: "two\n".into(),
            truncated: false,
            total_bytes: 4
        }
    );
    // No temp files left behind.
    let names: Vec<String> = std::fs::read_dir(file.as_path().parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, vec!["a.txt"]);
    // Writing onto a directory is refused.
    let dir = root.join_component("new");
    assert_eq!(
        write(&dir, "x").unwrap_err(),
        ExecError::IsDirectory { path: dir }
    );
}

#[test]
fn read_refuses_directories_binaries_and_truncates_big_files() {
    let (_d, root) = tempdir();
    assert_eq!(
        read(&root).unwrap_err(),
        ExecError::IsDirectory { path: root.clone() }
    );
    let missing = root.join_component("missing");
    assert_eq!(
        read(&missing).unwrap_err(),
        ExecError::NotFound { path: missing }
    );
    let bin = root.join_component("bin");
    std::fs::write(bin.as_path(), b"ELF\0\x01\x02").unwrap();
    assert_eq!(read(&bin).unwrap_err().code(), "W-EXEC-015");

    let big = root.join_component("big");
    // A two-byte character straddles the cut, which must not leave a replacement char.
    let mut content = "a".repeat(MAX_READ_BYTES - 1);
    content.push('é');
    content.push_str(&"b".repeat(100));
    std::fs::write(big.as_path(), &content).unwrap();
    let got = read(&big).unwrap();
    assert_eq!(
        got,
        FileContent {
            path: big,
            content: "a".repeat(MAX_READ_BYTES - 1),
            truncated: true,
            total_bytes: content.len() as u64,
        }
    );
}

#[test]
fn list_is_sorted_with_kinds_and_sizes() {
    let (_d, root) = tempdir();
    std::fs::write(root.as_path().join("b.txt"), "12345").unwrap();
    std::fs::create_dir(root.as_path().join("a-dir")).unwrap();
    symlink("/etc/passwd", root.as_path().join("c-link")).unwrap();
    let got = list_dir(&authorized(Action::FsList { path: root.clone() })).unwrap();
    let dir_size = std::fs::symlink_metadata(root.as_path().join("a-dir"))
        .unwrap()
        .len();
    let link_size = "/etc/passwd".len() as u64;
    assert_eq!(
        got,
        DirListing {
            path: root.clone(),
            entries: vec![
                DirEntry {
                    name: "a-dir".into(),
                    kind: EntryKind::Dir,
                    size: dir_size
                },
                DirEntry {
                    name: "b.txt".into(),
                    kind: EntryKind::File,
                    size: 5
                },
                DirEntry {
                    name: "c-link".into(),
                    kind: EntryKind::Symlink,
                    size: link_size
                },
            ]
        }
    );
    let file = root.join_component("b.txt");
    assert_eq!(
        list_dir(&authorized(Action::FsList { path: file.clone() })).unwrap_err(),
        ExecError::NotADirectory { path: file }
    );
}

#[test]
fn delete_needs_recursive_for_a_full_directory_and_never_follows_links() {
    let (_d, root) = tempdir();
    let (_outside_dir, outside) = tempdir();
    std::fs::write(outside.as_path().join("keep.txt"), "precious").unwrap();

    let tree = root.join_component("tree");
    std::fs::create_dir_all(tree.as_path().join("sub/deeper")).unwrap();
    std::fs::write(tree.as_path().join("sub/deeper/f"), "x").unwrap();
    std::fs::write(tree.as_path().join("g"), "y").unwrap();
    symlink(outside.as_path(), tree.as_path().join("link-out")).unwrap();

    assert_eq!(
        delete(&tree, false).unwrap_err(),
        ExecError::DirectoryNotEmpty { path: tree.clone() }
    );
    // tree, sub, deeper, f, g, link-out
    assert_eq!(
        delete(&tree, true).unwrap(),
        DeleteReceipt {
            path: tree.clone(),
            removed_entries: 6
        }
    );
    assert!(!tree.as_path().exists());
    assert_eq!(
        std::fs::read_to_string(outside.as_path().join("keep.txt")).unwrap(),
        "precious"
    );

    let file = root.join_component("f");
    std::fs::write(file.as_path(), "z").unwrap();
    assert_eq!(delete(&file, false).unwrap().removed_entries, 1);
    assert_eq!(
        delete(&file, false).unwrap_err(),
        ExecError::NotFound { path: file }
    );
    let empty = root.join_component("empty");
    std::fs::create_dir(empty.as_path()).unwrap();
    assert_eq!(delete(&empty, false).unwrap().removed_entries, 1);
}

#[test]
fn search_walks_without_links_git_or_denied_files() {
    let (_d, root) = tempdir();
    let (_o, outside) = tempdir();
    std::fs::write(outside.as_path().join("secret.txt"), "needle outside\n").unwrap();
    let p = root.as_path();
    std::fs::create_dir_all(p.join("src/deep")).unwrap();
    std::fs::create_dir_all(p.join(".git")).unwrap();
    std::fs::write(p.join(".git/config"), "needle in git\n").unwrap();
    std::fs::write(
        p.join("src/a.rs"),
        "fn main() {}\n// needle one\r\nneedle two\n",
    )
    .unwrap();
    std::fs::write(p.join("src/deep/b.txt"), "no\nstill no\na needle\n").unwrap();
    std::fs::write(p.join("denied.env"), "needle denied\n").unwrap();
    std::fs::write(p.join("blob.bin"), b"needle\0binary").unwrap();
    symlink(outside.as_path(), p.join("escape")).unwrap();

    let deny_env = |c: &CanonicalPath| !c.as_str().ends_with(".env");
    assert_eq!(
        find(&root, "needle", &deny_env),
        SearchResult {
            root: root.clone(),
            pattern: "needle".into(),
            lines: vec![
                "src/a.rs:2: // needle one".into(),
                "src/a.rs:3: needle two".into(),
                "src/deep/b.txt:3: a needle".into(),
            ],
            truncated: false,
            files_searched: 2,
            skipped: SkipCounts {
                denied: 1,
                binary: 1,
                too_large: 0,
                unreadable: 0
            },
        }
    );

    // A single file as the root: the path shown is its name.
    let one = root.join_component("src").join_component("a.rs");
    assert_eq!(
        find(&one, "two", &|_| true).lines,
        vec!["a.rs:3: needle two".to_owned()]
    );

    // The cap stops the walk and says so.
    std::fs::write(p.join("many.txt"), "hit\n".repeat(MAX_SEARCH_MATCHES + 10)).unwrap();
    let capped = find(&root, "hit", &|_| true);
    assert_eq!(capped.lines.len(), MAX_SEARCH_MATCHES);
    assert!(capped.truncated);

    let err = search(
        &authorized(Action::FsSearch {
            path: root.clone(),
            pattern: String::new(),
        }),
        &|_| true,
    )
    .unwrap_err();
    assert_eq!(err, ExecError::EmptyPattern);
}

/// The decision saw `root/work/notes.txt` with `work` a real directory; then `work` was
/// swapped for a link to another directory holding a file of the same name.
#[test]
fn symlink_swapped_in_after_the_decision_is_refused() {
    let (_d, root) = tempdir();
    let (_o, outside) = tempdir();
    let work = root.join_component("work");
    std::fs::create_dir(work.as_path()).unwrap();
    let notes = work.join_component("notes.txt");
    std::fs::write(notes.as_path(), "inside").unwrap();
    std::fs::write(outside.as_path().join("notes.txt"), "outside secret").unwrap();

    // Negative control: before the swap the same action succeeds.
    assert_eq!(read(&notes).unwrap().content, "inside");

    std::fs::rename(work.as_path(), root.as_path().join("work-old")).unwrap();
    symlink(outside.as_path(), work.as_path()).unwrap();
    let changed = ExecError::PathChanged {
        decided: notes.clone(),
        now: outside.join_component("notes.txt").to_string(),
    };
    assert_eq!(read(&notes).unwrap_err(), changed);
    assert_eq!(read(&notes).unwrap_err().code(), "W-EXEC-010");
    assert_eq!(write(&notes, "overwritten").unwrap_err(), changed);
    assert_eq!(delete(&notes, false).unwrap_err(), changed);
    assert_eq!(
        std::fs::read_to_string(outside.as_path().join("notes.txt")).unwrap(),
        "outside secret"
    );

    // A link as the last component is refused too.
    let last = root.join_component("last");
    symlink(outside.as_path().join("notes.txt"), last.as_path()).unwrap();
    assert_eq!(read(&last).unwrap_err().code(), "W-EXEC-010");
}

#[test]
fn each_action_narrows_to_its_own_payload_only_and_os_links_resolve() {
    let (_d, root) = tempdir();
    // An executor takes the payload of its one kind, so no other action can reach it: an
    // authorized action narrows to its own payload and to no other.
    let path = root.join_component("n");
    let every = [
        Action::FsRead { path: path.clone() },
        Action::FsList { path: path.clone() },
        Action::FsSearch {
            path: path.clone(),
            pattern: "p".into(),
        },
        Action::FsWrite {
            path: path.clone(),
            content: "x".into(),
        },
        Action::FsCreate {
            path: path.clone(),
            content: "x".into(),
        },
        Action::FsDelete {
            path: path.clone(),
            recursive: true,
        },
        Action::ShellExec {
            argv: vec!["true".into()],
            cwd: root.clone(),
            profile: "default".into(),
            timeout_ms: 5,
            program: Some(path.clone()),
            contained: true,
            judged: warrant_core::Judging::Argv,
        },
        Action::ProviderCall {
            provider: "scripted".into(),
            model: "m".into(),
        },
        Action::GitPush {
            repo: root.clone(),
            remote: "origin".into(),
            branch: "main".into(),
        },
        Action::WebFetch {
            url: "https://docs.rs/".into(),
            host: "docs.rs".into(),
            port: 443,
            allowlisted: true,
        },
        Action::McpCall {
            server: "s".into(),
            tool: "t".into(),
            arguments: serde_json::json!({}),
            risk: warrant_core::RiskClass::Read,
            definition: "sha256:0".into(),
        },
        Action::ArtifactCreate {
            path: path.clone(),
            kind: warrant_core::ArtifactKind::Report,
            digest: warrant_core::Digest::of_bytes(b"x"),
            spec: serde_json::json!({"markdown": "x"}),
        },
    ];
    for action in every {
        let a = Authorized::for_tests(action.clone());
        let narrowed = [
            a.narrow::<FsRead>().map(|p| format!("{:?}", p.get())),
            a.narrow::<FsList>().map(|p| format!("{:?}", p.get())),
            a.narrow::<FsSearch>().map(|p| format!("{:?}", p.get())),
            a.narrow::<FsWrite>().map(|p| format!("{:?}", p.get())),
            a.narrow::<FsDelete>().map(|p| format!("{:?}", p.get())),
            a.narrow::<ShellExec>().map(|p| format!("{:?}", p.get())),
            a.narrow::<warrant_core::GitOp>()
                .map(|p| format!("{:?}", p.get().action)),
            a.narrow::<warrant_core::WebFetch>()
                .map(|p| format!("{:?}", p.get())),
            a.narrow::<warrant_core::ArtifactCreate>()
                .map(|p| format!("{:?}", p.get().kind)),
        ];
        let got: Vec<&String> = narrowed.iter().flatten().collect();
        let expected: Vec<String> = match &action {
            Action::FsRead { .. } => vec![format!("FsRead {{ path: {path:?} }}")],
            Action::FsList { .. } => vec![format!("FsList {{ path: {path:?} }}")],
            Action::FsSearch { .. } => {
                vec![format!("FsSearch {{ path: {path:?}, pattern: \"p\" }}")]
            }
            Action::FsWrite { .. } => vec![format!(
                "FsWrite {{ path: {path:?}, content: \"x\", create_only: false }}"
            )],
            Action::FsCreate { .. } => vec![format!(
                "FsWrite {{ path: {path:?}, content: \"x\", create_only: true }}"
            )],
            Action::FsDelete { .. } => {
                vec![format!("FsDelete {{ path: {path:?}, recursive: true }}")]
            }
            Action::ShellExec { .. } => vec![format!(
                "ShellExec {{ argv: [\"true\"], cwd: {root:?}, profile: \"default\", timeout_ms: 5, program: Some({path:?}), contained: true, judged: Argv }}"
            )],
            Action::ProviderCall { .. }
            | Action::McpCall { .. }
            | Action::AgentSpawn { .. }
            | Action::CatalogList { .. }
            | Action::CatalogRead { .. }
            | Action::MemoryWrite { .. }
            | Action::MemoryRead { .. }
            | Action::MemoryDelete { .. }
            | Action::MemoryPropose { .. }
            | Action::MemoryPublish { .. } => vec![],
            Action::GitRead { .. }
            | Action::GitCommit { .. }
            | Action::GitBranch { .. }
            | Action::GitCheckout { .. }
            | Action::GitPush { .. } => vec![format!("{action:?}")],
            Action::ArtifactCreate { .. } => vec!["Report".to_owned()],
            Action::WebFetch { .. } => {
                vec![r#"WebFetch { url: "https://docs.rs/" }"#.to_owned()]
            }
        };
        assert_eq!(got, expected.iter().collect::<Vec<_>>(), "{action:?}");
    }

    std::fs::create_dir(root.as_path().join("real")).unwrap();
    symlink("real", root.as_path().join("alias")).unwrap();
    let got = canonicalize(&root, "alias/../alias/x", &OsLinks).unwrap();
    assert_eq!(got, root.join_component("real").join_component("x"));
    std::fs::write(root.as_path().join("file"), "").unwrap();
    // Through a file: not a link, kept as written.
    let got = canonicalize(&root, "file/x", &OsLinks).unwrap();
    assert_eq!(got, root.join_component("file").join_component("x"));
}

/// `read_file` of `rel` in the workspace `ws`.
fn read_at(ws: &CanonicalPath, rel: &str) -> Result<FileContent, ExecError> {
    let path = CanonicalPath::from_normalized(ws.as_path().join(rel).to_str().unwrap()).unwrap();
    read_file(&authorized(Action::FsRead { path }), ws)
}

/// A hard link gives a secret a second name that policy does not know: `notes.txt` linked to
/// `.env` is refused, and an ordinary hard-linked file is read (the negative control).
#[test]
fn a_hard_link_to_a_denied_file_is_not_read() {
    let (_d, ws) = tempdir();
    std::fs::write(ws.as_path().join(".env"), "API_KEY=linked-secret").unwrap();
    std::fs::create_dir(ws.as_path().join("notes")).unwrap();
    std::fs::hard_link(
        ws.as_path().join(".env"),
        ws.as_path().join("notes/todo.txt"),
    )
    .unwrap();
    std::fs::write(ws.as_path().join("plain.txt"), "plain").unwrap();
    std::fs::hard_link(
        ws.as_path().join("plain.txt"),
        ws.as_path().join("copy.txt"),
    )
    .unwrap();
    let err = read_at(&ws, "notes/todo.txt").unwrap_err();
    assert_eq!(err.code(), "W-EXEC-028", "{err}");
    assert!(!err.to_string().contains("linked-secret"));
    assert_eq!(read_at(&ws, "copy.txt").unwrap().content, "plain");
}

/// A file inside `.warrant/` linked under a harmless name: refused like a link to a denied
/// name (the name found inside the denied directory is not itself a denied name). Control: the
/// same link in an ordinary directory is read.
#[test]
fn a_hard_link_into_a_denied_directory_is_not_read() {
    let (_d, ws) = tempdir();
    std::fs::create_dir_all(ws.as_path().join(".warrant/keys")).unwrap();
    std::fs::create_dir_all(ws.as_path().join("plain")).unwrap();
    for dir in [".warrant/keys", "plain"] {
        std::fs::write(ws.as_path().join(dir).join("secret"), "linked-secret").unwrap();
    }
    std::fs::hard_link(
        ws.as_path().join(".warrant/keys/secret"),
        ws.as_path().join("notes.txt"),
    )
    .unwrap();
    std::fs::hard_link(
        ws.as_path().join("plain/secret"),
        ws.as_path().join("copy.txt"),
    )
    .unwrap();
    let err = read_at(&ws, "notes.txt").unwrap_err();
    assert_eq!(err.code(), "W-EXEC-028", "{err}");
    assert_eq!(read_at(&ws, "copy.txt").unwrap().content, "linked-secret");
}

/// A file of the person's home hard-linked into the workspace has a name outside it: refused
/// (the home's secret under a harmless name). A file whose names are all in the workspace is
/// read, and so is the same content copied rather than linked (the controls).
#[test]
fn a_hard_link_from_outside_the_workspace_is_not_read() {
    let (_d, ws) = tempdir();
    let (_h, home) = tempdir();
    std::fs::create_dir(home.as_path().join(".aws")).unwrap();
    std::fs::write(
        home.as_path().join(".aws/credentials"),
        "aws_secret=home-secret",
    )
    .unwrap();
    std::fs::hard_link(
        home.as_path().join(".aws/credentials"),
        ws.as_path().join("notes.txt"),
    )
    .unwrap();
    std::fs::copy(
        home.as_path().join(".aws/credentials"),
        ws.as_path().join("copied.txt"),
    )
    .unwrap();
    std::fs::create_dir_all(ws.as_path().join("target/debug/deps")).unwrap();
    std::fs::write(ws.as_path().join("target/debug/deps/app-1"), "built").unwrap();
    std::fs::hard_link(
        ws.as_path().join("target/debug/deps/app-1"),
        ws.as_path().join("target/debug/app"),
    )
    .unwrap();
    let err = read_at(&ws, "notes.txt").unwrap_err();
    assert_eq!(err.code(), "W-EXEC-029", "{err}");
    assert!(!err.to_string().contains("home-secret"));
    assert_eq!(
        read_at(&ws, "copied.txt").unwrap().content,
        "aws_secret=home-secret"
    );
    assert_eq!(read_at(&ws, "target/debug/app").unwrap().content, "built");
}
