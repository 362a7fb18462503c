//! `git_log` through gix prints what the hardened `git log` printed: compared on one repository
//! with merges, equal commit times, time zones, multi-line subjects and path limits.

use std::path::Path;
use std::process::Command;

use pretty_assertions::assert_eq;
use warrant_core::{Action, GitRead};
use warrant_exec::git::{GitError, run};

use super::{authorized, tempdir};

/// Plain git in `dir` with a fixed identity and the given dates.
fn git(dir: &Path, date: &str, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap())
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_LITERAL_PATHSPECS", "1")
        .env("GIT_AUTHOR_NAME", "Ada Lovelace")
        .env("GIT_AUTHOR_EMAIL", "ada@example.com")
        .env("GIT_COMMITTER_NAME", "Ada Lovelace")
        .env("GIT_COMMITTER_EMAIL", "ada@example.com")
        .env("GIT_AUTHOR_DATE", date)
        .env("GIT_COMMITTER_DATE", date)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

fn commit(dir: &Path, date: &str, file: &str, body: &str, message: &str) {
    let path = dir.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
    git(dir, date, &["add", "-A"]);
    git(dir, date, &["commit", "-q", "-m", message]);
}

fn via_gix(repo: &warrant_core::CanonicalPath, max: u32, path: Option<&str>) -> String {
    let op = authorized(Action::GitRead {
        repo: repo.clone(),
        what: GitRead::Log {
            max,
            path: path.map(str::to_owned),
        },
    });
    let out = run(&op).unwrap();
    assert_eq!((out.op, out.truncated), ("log", false));
    out.output
}

/// The hardened invocation's arguments, run by plain git.
fn via_git(dir: &Path, max: u32, path: Option<&str>) -> String {
    let n = format!("-n{max}");
    let mut args = vec![
        "log",
        "--no-color",
        "--no-ext-diff",
        "--date=iso-strict",
        "--format=%H%x09%an <%ae>%x09%ad%x09%s",
        &n,
        "--",
    ];
    args.extend(path);
    git(dir, "2000-01-01T00:00:00Z", &args)
}

#[test]
fn the_log_through_gix_is_the_log_git_printed() {
    let (_tmp, repo) = tempdir();
    let dir = repo.as_path();
    git(dir, "2021-01-01T00:00:00Z", &["init", "-q", "-b", "main"]);
    commit(
        dir,
        "2021-01-01T10:00:00+05:30",
        "README.md",
        "hello\n",
        "start\n\nthe body is not in the subject",
    );
    commit(
        dir,
        "2021-01-02T10:00:00-08:00",
        "src/a.rs",
        "fn a() {}\n",
        "add a\nover two lines  ",
    );
    git(
        dir,
        "2021-01-02T11:00:00Z",
        &["checkout", "-q", "-b", "side"],
    );
    commit(
        dir,
        "2021-01-03T10:00:00Z",
        "src/b.rs",
        "fn b() {}\n",
        "add b on a side branch",
    );
    commit(
        dir,
        "2021-01-03T10:00:00Z",
        "docs/x.md",
        "x\n",
        "docs at the same second",
    );
    git(dir, "2021-01-03T11:00:00Z", &["checkout", "-q", "main"]);
    commit(
        dir,
        "2021-01-04T10:00:00Z",
        "README.md",
        "hello again\n",
        "touch the readme",
    );
    git(
        dir,
        "2021-01-05T10:00:00+01:00",
        &["merge", "-q", "--no-ff", "-m", "merge side", "side"],
    );
    commit(
        dir,
        "2021-01-06T10:00:00Z",
        "src/a.rs",
        "fn a() { 1 }\n",
        "change a",
    );

    let cases: [(u32, Option<&str>); 8] = [
        (500, None),
        (3, None),
        (500, Some("src")),
        (500, Some("src/b.rs")),
        (500, Some("README.md")),
        (500, Some("docs/")),
        (500, Some("./src/a.rs")),
        (500, Some("missing")),
    ];
    let ours: Vec<String> = cases.iter().map(|(m, p)| via_gix(&repo, *m, *p)).collect();
    let theirs: Vec<String> = cases.iter().map(|(m, p)| via_git(dir, *m, *p)).collect();
    assert_eq!(ours, theirs);
    // The comparison is not vacuous: the whole log has every commit, the merge included.
    assert_eq!(ours[0].lines().count(), 7);
    assert!(ours[0].contains("\tmerge side\n"), "{}", ours[0]);
    assert!(ours[0].contains("\tadd a over two lines\n"), "{}", ours[0]);
}

#[test]
fn a_log_of_a_repository_without_commits_is_a_clear_failure() {
    let (_tmp, repo) = tempdir();
    git(repo.as_path(), "2021-01-01T00:00:00Z", &["init", "-q"]);
    let op = authorized(Action::GitRead {
        repo,
        what: GitRead::Log { max: 5, path: None },
    });
    let err = run(&op).unwrap_err();
    assert!(matches!(err, GitError::Failed { .. }), "{err}");
    assert!(err.to_string().contains("HEAD has no commit"), "{err}");
}
