//! The git executor: every `git.*` action but the log (read through gix, `crate::gitlog`, with
//! no program at all), run by the `git` program under a hardened invocation. The repository's own hooks and configuration-driven commands never run: hooks
//! point at `/dev/null` and are skipped (`--no-verify`), `core.fsmonitor`, pagers, editors,
//! external diff and textconv drivers, `core.sshCommand`, signing programs and the `ext::`
//! transport are switched off, and every clean/smudge/process filter and credential helper the
//! repository's own configuration names is overridden with nothing. The environment is
//! minimized, `--git-dir` and `--work-tree` are given explicitly (a configured `core.worktree`
//! cannot move the work tree), and pathspecs are literal.
//!
//! Limits: `git` is found on Warrant's own PATH; a `.git` that is a file (a linked worktree or a
//! submodule) is refused; with no paths a commit stages every change (`add -A`, `.gitignore`
//! respected), never `.warrant/`, and a file that holds credentials refuses the commit.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;
use thiserror::Error;
use warrant_core::{Action, CanonicalPath, Coded, GitOp, GitRead};
use warrant_kernel::Authorized;

/// How much of one git output is kept (a diff or a log larger than this is cut, and says so).
pub const OUTPUT_CAP: usize = 256 * 1024;

/// Reads and local changes end within this; a push within [`PUSH_TIMEOUT`].
const LOCAL_TIMEOUT: Duration = Duration::from_secs(60);
const PUSH_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum GitError {
    #[error(
        "{repo} is not a git repository Warrant can work in ({why}); git tools work on a repository whose `.git` is a directory at the workspace root"
    )]
    NoRepository { repo: String, why: String },

    #[error("`git {args}` failed in {repo} (exit {code}): {stderr}")]
    Failed {
        repo: String,
        args: String,
        code: i32,
        stderr: String,
    },

    #[error("could not run git: {message}; install git or put it on Warrant's PATH")]
    Spawn { message: String },

    #[error("`git {args}` did not finish within {secs} s and was stopped")]
    Timeout { args: String, secs: u64 },

    #[error("nothing to commit in {repo}: {detail}")]
    NothingToCommit { repo: String, detail: String },

    #[error(
        "refusing to check out `{rev}`: the work tree of {repo} has uncommitted changes that a checkout could discard ({files}); commit them (git_commit) or ask the person how to proceed"
    )]
    Uncommitted {
        repo: String,
        rev: String,
        files: String,
    },

    #[error(
        "refusing to commit in {repo}: {files} hold(s) credentials and would leave the machine with the next push; add them to .gitignore, or commit other paths"
    )]
    Credentials { repo: String, files: String },

    #[error("{what} `{value}` is not acceptable: {why}")]
    BadName {
        what: &'static str,
        value: String,
        why: String,
    },
}

impl Coded for GitError {
    fn code(&self) -> &'static str {
        match self {
            Self::NoRepository { .. } => "W-GIT-001",
            Self::Failed { .. } => "W-GIT-002",
            Self::Spawn { .. } => "W-GIT-003",
            Self::Timeout { .. } => "W-GIT-004",
            Self::NothingToCommit { .. } => "W-GIT-005",
            Self::Uncommitted { .. } => "W-GIT-006",
            Self::BadName { .. } => "W-GIT-007",
            Self::Credentials { .. } => "W-GIT-009",
        }
    }
}

/// What a git action did, for the model and the journal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GitOutcome {
    pub op: &'static str,
    /// What git printed (a read's answer, a push's report), cut at [`OUTPUT_CAP`].
    pub output: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// The commit made (git_commit), or the commit a branch or checkout points at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The files a commit changed, as `git show --name-status` lists them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
}

/// Runs one authorized git action.
pub fn run(op: &Authorized<GitOp>) -> Result<GitOutcome, GitError> {
    let op = op.get();
    // The log is read through gix: the git program does not run at all.
    if let Action::GitRead {
        what: GitRead::Log { max, path },
        ..
    } = &op.action
    {
        work_tree(&op.repo)?;
        return crate::gitlog::log(op.repo.as_path(), *max, path.as_deref());
    }
    let git = Git::open(&op.repo)?;
    match &op.action {
        Action::GitRead { what, .. } => git.read(what),
        Action::GitCommit {
            message,
            paths,
            author,
            coauthor,
            run,
            ..
        } => git.commit(message, paths, author, coauthor, run),
        Action::GitBranch { name, .. } => git.branch(name),
        Action::GitCheckout { rev, .. } => git.checkout(rev),
        Action::GitPush { remote, branch, .. } => git.push(remote, branch),
        Action::FsRead { .. }
        | Action::FsList { .. }
        | Action::FsSearch { .. }
        | Action::FsWrite { .. }
        | Action::FsCreate { .. }
        | Action::FsDelete { .. }
        | Action::ShellExec { .. }
        | Action::ProviderCall { .. }
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
        | Action::WebFetch { .. } => Err(GitError::BadName {
            what: "action",
            value: op.action.verb().as_str().to_owned(),
            why: "the git executor runs git actions only".into(),
        }),
    }
}

/// The branch `HEAD` is on, for a push without a branch (`None`: detached).
pub fn current_branch(repo: &CanonicalPath) -> Result<Option<String>, GitError> {
    let git = Git::open(repo)?;
    let out = git.run_status(&["symbolic-ref", "--quiet", "--short", "HEAD"], None)?;
    Ok((out.0 == 0).then(|| out.1.trim().to_owned()))
}

/// Where a push to `remote` goes (its push URL as git resolves it), and the commit `branch`
/// points at: what a person approving the push is shown and the approval binds to.
pub fn push_target(
    repo: &CanonicalPath,
    remote: &str,
    branch: &str,
) -> Result<(String, String), GitError> {
    let git = Git::open(repo)?;
    check_name("remote", remote)?;
    check_name("branch", branch)?;
    let remotes = git.ok(&["remote"], None)?;
    if !remotes.lines().any(|r| r == remote) {
        return Err(GitError::BadName {
            what: "remote",
            value: remote.to_owned(),
            why: format!(
                "no such remote; configured: {}",
                remotes.lines().collect::<Vec<_>>().join(", ")
            ),
        });
    }
    let url = git.ok(&["remote", "get-url", "--push", remote], None)?;
    let head = git.ok(
        &[
            "rev-parse",
            "--verify",
            "--end-of-options",
            &format!("refs/heads/{branch}"),
        ],
        None,
    )?;
    Ok((url.trim().to_owned(), head.trim().to_owned()))
}

/// The work tree's changes as `git status --short` lists them: what a commit would take, and
/// what an approval of a commit is bound to.
pub fn work_tree_state(repo: &CanonicalPath) -> Result<String, GitError> {
    Git::open(repo)?.ok(&["status", "--short", "--untracked-files=all"], None)
}

/// The commits a push of `branch` would send that `remote`'s tracking branch lacks (or the last
/// ten, when there is no tracking branch), one line each.
pub fn outgoing(repo: &CanonicalPath, remote: &str, branch: &str) -> Result<String, GitError> {
    let git = Git::open(repo)?;
    let tracking = format!("refs/remotes/{remote}/{branch}");
    let (has, _) = git.run_status(&["show-ref", "--verify", "--quiet", &tracking], None)?;
    let range = format!("{tracking}..refs/heads/{branch}");
    let local = format!("refs/heads/{branch}");
    let args: Vec<&str> = if has == 0 {
        vec!["log", "--no-color", "--format=%h %an: %s", &range, "--"]
    } else {
        vec![
            "log",
            "--no-color",
            "--format=%h %an: %s",
            "-n10",
            &local,
            "--",
        ]
    };
    git.ok(&args, None)
}

/// Whether `repo` is a repository the executor works in (a `.git` directory at its root).
pub fn is_repository(repo: &CanonicalPath) -> bool {
    Git::open(repo).is_ok()
}

/// A name the model gave (branch, remote, rev) that git would take as an option or that holds
/// characters no ref has.
pub fn check_name(what: &'static str, value: &str) -> Result<(), GitError> {
    let why = if value.is_empty() {
        Some("it is empty")
    } else if value.starts_with('-') {
        Some("it starts with `-`, so git would read it as an option")
    } else if value.chars().any(|c| c.is_control() || c.is_whitespace()) {
        Some("it holds whitespace or control characters")
    } else {
        None
    };
    match why {
        Some(why) => Err(GitError::BadName {
            what,
            value: value.to_owned(),
            why: why.into(),
        }),
        None => Ok(()),
    }
}

struct Git {
    repo: CanonicalPath,
    /// `-c` overrides for the command-bearing keys the repository's configuration sets.
    overrides: Vec<String>,
}

/// Configuration keys that name a program git would run, set to nothing when the repository's
/// own configuration (scope `local` or `worktree`) sets them. Matched on the lower-cased key:
/// `(prefix, suffix)`.
const COMMAND_KEYS: &[(&str, &str)] = &[
    ("filter.", ".clean"),
    ("filter.", ".smudge"),
    ("filter.", ".process"),
    ("diff.", ".textconv"),
    ("diff.", ".command"),
    ("merge.", ".driver"),
    ("credential.", "helper"),
    ("remote.", ".receivepack"),
    ("remote.", ".uploadpack"),
    ("gpg.", "program"),
    ("core.", "gitproxy"),
];

/// Overrides given to every invocation, whatever the configuration says.
const ALWAYS: &[&str] = &[
    "core.hooksPath=/dev/null",
    "core.fsmonitor=",
    "core.untrackedCache=false",
    "core.pager=cat",
    "core.editor=true",
    "core.askPass=",
    "core.sshCommand=ssh",
    "core.alternateRefsCommand=",
    "sequence.editor=true",
    "diff.external=",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "push.gpgSign=false",
    "protocol.ext.allow=never",
    "color.ui=false",
    "advice.detachedHead=false",
];

/// `repo` is a work tree whose `.git` is a directory (not a file or a link).
fn work_tree(repo: &CanonicalPath) -> Result<(), GitError> {
    let dot_git = repo.as_path().join(".git");
    let meta = std::fs::symlink_metadata(&dot_git).map_err(|e| GitError::NoRepository {
        repo: repo.as_str().to_owned(),
        why: format!("no .git: {e}"),
    })?;
    if !meta.is_dir() {
        return Err(GitError::NoRepository {
            repo: repo.as_str().to_owned(),
            why: ".git is not a directory (a linked worktree, a submodule or a link)".into(),
        });
    }
    Ok(())
}

impl Git {
    fn open(repo: &CanonicalPath) -> Result<Self, GitError> {
        work_tree(repo)?;
        let mut git = Self {
            repo: repo.clone(),
            overrides: Vec::new(),
        };
        git.overrides = git.neutralize()?;
        Ok(git)
    }

    /// The repository's own command-bearing keys, each overridden with an empty value (which
    /// git reads as "no filter", "no helper", "no driver").
    fn neutralize(&self) -> Result<Vec<String>, GitError> {
        let listed = self.ok(&["config", "--list", "--show-scope", "-z"], None)?;
        let mut out = Vec::new();
        // With -z each entry is `scope NUL key LF value NUL`.
        let fields: Vec<&str> = listed.split('\0').collect();
        for pair in fields.chunks(2) {
            let [scope, rest] = pair else {
                continue;
            };
            if !matches!(*scope, "local" | "worktree") {
                continue;
            }
            let key = rest.split_once('\n').map_or(*rest, |(k, _)| k);
            let lower = key.to_ascii_lowercase();
            let hit = COMMAND_KEYS
                .iter()
                .any(|(p, s)| lower.starts_with(p) && lower.ends_with(s));
            if hit && !out.iter().any(|o: &String| o == &format!("{key}=")) {
                out.push(format!("{key}="));
            }
        }
        Ok(out)
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("git");
        cmd.env_clear();
        for var in ["PATH", "HOME", "SSH_AUTH_SOCK", "TMPDIR"] {
            if let Some(v) = std::env::var_os(var) {
                cmd.env(var, v);
            }
        }
        cmd.env("LC_ALL", "C")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("GIT_LITERAL_PATHSPECS", "1")
            .env("GIT_PAGER", "cat")
            .env("GIT_CONFIG_NOSYSTEM", "1");
        let dir = self.repo.as_path();
        cmd.arg(format!("--git-dir={}", dir.join(".git").display()))
            .arg(format!("--work-tree={}", dir.display()));
        for o in ALWAYS {
            cmd.arg("-c").arg(o);
        }
        for o in &self.overrides {
            cmd.arg("-c").arg(o);
        }
        cmd.args(args).current_dir(dir);
        cmd
    }

    /// Runs git; `(exit code, stdout, stderr, truncated)`.
    fn run_full(
        &self,
        args: &[&str],
        stdin: Option<&str>,
        env: &[(&str, &str)],
        timeout: Duration,
    ) -> Result<(i32, String, String, bool), GitError> {
        let mut cmd = self.command(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| GitError::Spawn {
            message: e.to_string(),
        })?;
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            // A short message; git reads it whole before doing anything.
            let _ = pipe.write_all(text.as_bytes());
        }
        let out = child.stdout.take().map(reader);
        let err = child.stderr.take().map(reader);
        let started = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if started.elapsed() > timeout => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(GitError::Timeout {
                        args: args.join(" "),
                        secs: timeout.as_secs(),
                    });
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => {
                    return Err(GitError::Spawn {
                        message: e.to_string(),
                    });
                }
            }
        };
        let (stdout, cut) = out.map(joined).unwrap_or_default();
        let (stderr, _) = err.map(joined).unwrap_or_default();
        Ok((status.code().unwrap_or(-1), stdout, stderr, cut))
    }

    fn run_status(&self, args: &[&str], stdin: Option<&str>) -> Result<(i32, String), GitError> {
        let (code, out, _, _) = self.run_full(args, stdin, &[], LOCAL_TIMEOUT)?;
        Ok((code, out))
    }

    /// Runs git and returns its output, or the failure with what git said.
    fn ok(&self, args: &[&str], stdin: Option<&str>) -> Result<String, GitError> {
        self.ok_env(args, stdin, &[], LOCAL_TIMEOUT).map(|(o, _)| o)
    }

    fn ok_env(
        &self,
        args: &[&str],
        stdin: Option<&str>,
        env: &[(&str, &str)],
        timeout: Duration,
    ) -> Result<(String, bool), GitError> {
        let (code, out, err, cut) = self.run_full(args, stdin, env, timeout)?;
        if code == 0 {
            Ok((out, cut))
        } else {
            Err(GitError::Failed {
                repo: self.repo.as_str().to_owned(),
                args: args.join(" "),
                code,
                stderr: err.trim().chars().take(2000).collect(),
            })
        }
    }

    fn outcome(op: &'static str, (output, truncated): (String, bool)) -> GitOutcome {
        GitOutcome {
            op,
            output,
            truncated,
            commit: None,
            files: Vec::new(),
        }
    }

    fn read(&self, what: &GitRead) -> Result<GitOutcome, GitError> {
        let t = LOCAL_TIMEOUT;
        match what {
            GitRead::Status => Ok(Self::outcome(
                "status",
                self.ok_env(
                    &[
                        "status",
                        "--porcelain=v1",
                        "--branch",
                        "--untracked-files=normal",
                    ],
                    None,
                    &[],
                    t,
                )?,
            )),
            GitRead::Diff { staged, paths } => {
                let mut args = vec!["diff", "--no-ext-diff", "--no-textconv", "--no-color"];
                if *staged {
                    args.push("--staged");
                }
                args.push("--");
                args.extend(paths.iter().map(String::as_str));
                Ok(Self::outcome("diff", self.ok_env(&args, None, &[], t)?))
            }
            // `run` reads the log before opening git; this arm is the same read.
            GitRead::Log { max, path } => {
                crate::gitlog::log(self.repo.as_path(), *max, path.as_deref())
            }
            GitRead::Show { rev } => {
                check_name("revision", rev)?;
                Ok(Self::outcome(
                    "show",
                    self.ok_env(
                        &[
                            "show",
                            "--no-ext-diff",
                            "--no-textconv",
                            "--no-color",
                            "--stat",
                            "--patch",
                            "--end-of-options",
                            rev,
                            "--",
                        ],
                        None,
                        &[],
                        t,
                    )?,
                ))
            }
        }
    }

    fn holds_credentials(&self, rel: &str) -> bool {
        let joined = format!("{}/{rel}", self.repo.as_str().trim_end_matches('/'));
        CanonicalPath::from_normalized(&joined).is_ok_and(|path| {
            warrant_core::risk::classify(&Action::FsWrite {
                path,
                content: String::new(),
            })
            .0 == warrant_core::RiskClass::Secret
        })
    }

    fn commit(
        &self,
        message: &str,
        paths: &[String],
        author: &warrant_core::GitAuthor,
        coauthor: &warrant_core::GitAuthor,
        run: &str,
    ) -> Result<GitOutcome, GitError> {
        // What this commit would take: changed, deleted and new (not ignored) files under the
        // paths, never Warrant's own directory. Files that hold credentials refuse the commit
        // before the index is touched: a commit is one push away from leaving the machine.
        let mut list = vec![
            "ls-files",
            "-z",
            "--modified",
            "--deleted",
            "--others",
            "--exclude-standard",
            "--",
        ];
        list.extend(paths.iter().map(String::as_str));
        let listed = self.ok(&list, None)?;
        let mut candidates: Vec<&str> = listed
            .split('\0')
            .filter(|f| !f.is_empty() && *f != ".warrant" && !f.starts_with(".warrant/"))
            .collect();
        candidates.dedup();
        let already = self.ok(
            &["diff", "--staged", "--name-only", "-z", "--no-ext-diff"],
            None,
        )?;
        let secrets: Vec<&str> = candidates
            .iter()
            .copied()
            .chain(already.split('\0').filter(|f| !f.is_empty()))
            .filter(|f| self.holds_credentials(f))
            .collect();
        if !secrets.is_empty() {
            return Err(GitError::Credentials {
                repo: self.repo.as_str().to_owned(),
                files: secrets.join(", "),
            });
        }
        if !candidates.is_empty() {
            let mut stdin = candidates.join("\0");
            stdin.push('\0');
            self.ok(
                &[
                    "add",
                    "--all",
                    "--pathspec-from-file=-",
                    "--pathspec-file-nul",
                ],
                Some(&stdin),
            )?;
        }
        let staged = self.ok(&["diff", "--staged", "--name-only", "--no-ext-diff"], None)?;
        if staged.trim().is_empty() {
            return Err(GitError::NothingToCommit {
                repo: self.repo.as_str().to_owned(),
                detail: if paths.is_empty() {
                    "the work tree has no changes".into()
                } else {
                    format!("no changes under {}", paths.join(", "))
                },
            });
        }
        let text = format!(
            "{}\n\nCo-authored-by: {coauthor}\nWarrant-Run: {run}\n",
            message.trim_end()
        );
        let who = [
            ("GIT_AUTHOR_NAME", author.name.as_str()),
            ("GIT_AUTHOR_EMAIL", author.email.as_str()),
            ("GIT_COMMITTER_NAME", author.name.as_str()),
            ("GIT_COMMITTER_EMAIL", author.email.as_str()),
        ];
        self.ok_env(
            &[
                "commit",
                "--no-verify",
                "--no-gpg-sign",
                "--cleanup=strip",
                "--file=-",
            ],
            Some(&text),
            &who,
            LOCAL_TIMEOUT,
        )?;
        let commit = self.ok(&["rev-parse", "HEAD"], None)?.trim().to_owned();
        let files = self
            .ok(
                &[
                    "show",
                    "--no-ext-diff",
                    "--name-status",
                    "--format=",
                    "HEAD",
                ],
                None,
            )?
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| l.replace('\t', " "))
            .collect();
        Ok(GitOutcome {
            op: "commit",
            output: String::new(),
            truncated: false,
            commit: Some(commit),
            files,
        })
    }

    fn branch(&self, name: &str) -> Result<GitOutcome, GitError> {
        check_name("branch", name)?;
        let (code, _) = self.run_status(&["check-ref-format", "--branch", name], None)?;
        if code != 0 {
            return Err(GitError::BadName {
                what: "branch",
                value: name.to_owned(),
                why: "git does not accept it as a branch name".into(),
            });
        }
        // Without --force git refuses a branch that exists: nothing is ever moved.
        self.ok(&["branch", "--no-track", name, "HEAD"], None)?;
        let commit = self.ok(&["rev-parse", "HEAD"], None)?.trim().to_owned();
        Ok(GitOutcome {
            op: "branch",
            output: format!("created branch {name} at {commit}"),
            truncated: false,
            commit: Some(commit),
            files: Vec::new(),
        })
    }

    fn checkout(&self, rev: &str) -> Result<GitOutcome, GitError> {
        check_name("revision", rev)?;
        let dirty = self.ok(&["status", "--porcelain=v1", "--untracked-files=no"], None)?;
        if !dirty.trim().is_empty() {
            return Err(GitError::Uncommitted {
                repo: self.repo.as_str().to_owned(),
                rev: rev.to_owned(),
                files: dirty
                    .lines()
                    .take(10)
                    .map(str::trim)
                    .collect::<Vec<_>>()
                    .join("; "),
            });
        }
        let (is_branch, _) = self.run_status(
            &[
                "show-ref",
                "--verify",
                "--quiet",
                &format!("refs/heads/{rev}"),
            ],
            None,
        )?;
        // `switch` never takes a path and, without --force or --discard-changes, refuses to
        // overwrite anything local.
        if is_branch == 0 {
            self.ok(&["switch", "--no-guess", rev], None)?;
        } else {
            let resolved = self
                .ok(
                    &[
                        "rev-parse",
                        "--verify",
                        "--end-of-options",
                        &format!("{rev}^{{commit}}"),
                    ],
                    None,
                )?
                .trim()
                .to_owned();
            self.ok(&["switch", "--detach", &resolved], None)?;
        }
        let commit = self.ok(&["rev-parse", "HEAD"], None)?.trim().to_owned();
        Ok(GitOutcome {
            op: "checkout",
            output: format!("HEAD is now at {commit} ({rev})"),
            truncated: false,
            commit: Some(commit),
            files: Vec::new(),
        })
    }

    fn push(&self, remote: &str, branch: &str) -> Result<GitOutcome, GitError> {
        check_name("remote", remote)?;
        check_name("branch", branch)?;
        // An explicit refspec without `+`: configured push refspecs (which may force) are not
        // used, and a non-fast-forward is refused by git.
        let refspec = format!("refs/heads/{branch}:refs/heads/{branch}");
        let out = self.ok_env(
            &["push", "--porcelain", "--no-verify", remote, &refspec],
            None,
            &[],
            PUSH_TIMEOUT,
        )?;
        let commit = self
            .ok(&["rev-parse", &format!("refs/heads/{branch}")], None)?
            .trim()
            .to_owned();
        let mut outcome = Self::outcome("push", out);
        outcome.commit = Some(commit);
        Ok(outcome)
    }
}

fn reader<R: Read + Send + 'static>(mut r: R) -> std::thread::JoinHandle<(Vec<u8>, bool)> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut cut = false;
        let mut buf = [0u8; 16 * 1024];
        loop {
            match r.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let room = OUTPUT_CAP.saturating_sub(kept.len());
                    if n > room {
                        cut = true;
                    }
                    kept.extend_from_slice(buf.get(..n.min(room)).unwrap_or_default());
                }
            }
        }
        (kept, cut)
    })
}

fn joined(h: std::thread::JoinHandle<(Vec<u8>, bool)>) -> (String, bool) {
    match h.join() {
        Ok((bytes, cut)) => (String::from_utf8_lossy(&bytes).into_owned(), cut),
        Err(_) => (String::new(), false),
    }
}

/// Whether `p` names a path inside the repository that is not git's own directory, as a
/// pathspec the executor may hand git.
pub fn check_pathspec(p: &str) -> Result<(), GitError> {
    let path = Path::new(p);
    let bad = p.is_empty()
        || path.is_absolute()
        || path.components().any(|c| {
            matches!(
                c,
                std::path::Component::ParentDir
                    | std::path::Component::RootDir
                    | std::path::Component::Prefix(_)
            ) || c.as_os_str() == ".git"
        });
    if bad {
        return Err(GitError::BadName {
            what: "path",
            value: p.to_owned(),
            why: "paths are relative to the repository, without `..`, and never inside .git".into(),
        });
    }
    Ok(())
}
