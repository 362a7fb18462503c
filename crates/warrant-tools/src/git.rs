//! The git tools: `git_status`, `git_diff`, `git_log`, `git_show` (reads), `git_commit`,
//! `git_branch`, `git_checkout` (changes) and `git_push` (external). Each normalizes into one
//! `git.*` action on the workspace's repository; the executor (`warrant_exec::git`) runs git
//! with the repository's hooks and configured commands switched off. A commit's author is the
//! run's principal, read from the run's log, with the agent as `Co-authored-by` and the run in
//! a `Warrant-Run` trailer.

use serde_json::{Value, json};
use warrant_core::{Action, CanonicalPath, GitAuthor, GitOp, GitRead, PrincipalKind, ToolSpec};
use warrant_kernel::{
    Authorized, EffectResult, Presentation, ReadFilter, Refusal, StopCheck, Tool, ToolEnv,
};

use crate::builtin::{fail, normalize_path, ok, shown, spec};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Status,
    Diff,
    Log,
    Show,
    Commit,
    Branch,
    Checkout,
    Push,
}

struct GitTool(ToolSpec, Kind);

pub(crate) fn all() -> Vec<Box<dyn Tool>> {
    let obj = |props: Value, required: &[&str]| json!({"type": "object", "properties": props, "required": required, "additionalProperties": false});
    let tool = |name: &str, description: &str, schema: Value, kind: Kind| -> Box<dyn Tool> {
        Box::new(GitTool(spec(name, description, schema), kind))
    };
    vec![
        tool(
            "git_status",
            "Show the repository's branch and changed, staged and untracked files (git status --porcelain).",
            obj(json!({}), &[]),
            Kind::Status,
        ),
        tool(
            "git_diff",
            "Show uncommitted changes as a unified diff: of the work tree, or of the index when staged is true; optionally only under paths.",
            obj(
                json!({"staged": {"type": "boolean"}, "paths": {"type": "array", "items": {"type": "string", "minLength": 1}}}),
                &[],
            ),
            Kind::Diff,
        ),
        tool(
            "git_log",
            "List recent commits (hash, author, date, subject), newest first; max defaults to 20.",
            obj(
                json!({"max": {"type": "integer", "minimum": 1, "maximum": 500}, "path": {"type": "string", "minLength": 1}}),
                &[],
            ),
            Kind::Log,
        ),
        tool(
            "git_show",
            "Show a commit (or any revision): its message, stat and patch.",
            obj(json!({"rev": {"type": "string", "minLength": 1}}), &["rev"]),
            Kind::Show,
        ),
        tool(
            "git_commit",
            "Commit changes: the given paths, or every change of the work tree when none are given. The person the run acts for is the author; hooks never run.",
            obj(
                json!({"message": {"type": "string", "minLength": 1}, "paths": {"type": "array", "items": {"type": "string", "minLength": 1}}}),
                &["message"],
            ),
            Kind::Commit,
        ),
        tool(
            "git_branch",
            "Create a branch at HEAD (an existing branch is never moved).",
            obj(
                json!({"name": {"type": "string", "minLength": 1}}),
                &["name"],
            ),
            Kind::Branch,
        ),
        tool(
            "git_checkout",
            "Switch to a branch or revision; refused while the work tree has uncommitted changes.",
            obj(json!({"rev": {"type": "string", "minLength": 1}}), &["rev"]),
            Kind::Checkout,
        ),
        tool(
            "git_push",
            "Push a branch (default: the current one) to a remote (default: origin). Never forced; a person approves every push.",
            obj(
                json!({"remote": {"type": "string", "minLength": 1}, "branch": {"type": "string", "minLength": 1}}),
                &[],
            ),
            Kind::Push,
        ),
    ]
}

fn text<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

/// A path argument as git is handed it: relative to the repository, checked on disk like
/// every tool's path (inside the workspace once symlinks are resolved).
fn pathspec(env: &ToolEnv, repo: &CanonicalPath, raw: &str) -> Result<String, Refusal> {
    warrant_exec::git::check_pathspec(raw).map_err(|e| Refusal::of(&e))?;
    let canonical = normalize_path(env, raw)?;
    if !canonical.starts_with(repo) {
        return Err(Refusal {
            code: "W-GIT-007".into(),
            message: format!("path `{raw}` resolves to {canonical}, outside the repository {repo}"),
        });
    }
    Ok(raw.trim_end_matches('/').to_owned())
}

fn paths(args: &Value, env: &ToolEnv, repo: &CanonicalPath) -> Result<Vec<String>, Refusal> {
    args.get("paths")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(|p| pathspec(env, repo, p))
                .collect()
        })
        .unwrap_or_else(|| Ok(Vec::new()))
}

/// The commit's author (the person: whom an agent acts for, else the principal) and co-author
/// (the agent: an agent principal, else the model of the run).
fn authors(env: &ToolEnv) -> Result<(GitAuthor, GitAuthor, String), Refusal> {
    let Some(run) = env.run.as_ref() else {
        return Err(Refusal {
            code: "W-GIT-008".into(),
            message: "git_commit runs only inside a run (its author is the run's principal)".into(),
        });
    };
    let p = &run.principal;
    let person = match (&p.kind, &p.on_behalf_of) {
        (PrincipalKind::Agent, Some(person)) => person.clone(),
        (PrincipalKind::Agent | PrincipalKind::User | PrincipalKind::Service, _) => p.actor.clone(),
    };
    let domain = format!("{}.invalid", p.tenant);
    let author = GitAuthor {
        name: p
            .attrs
            .get("name")
            .cloned()
            .unwrap_or_else(|| person.clone()),
        email: p
            .attrs
            .get("email")
            .cloned()
            .unwrap_or_else(|| format!("{person}@{domain}")),
    };
    let coauthor = match p.kind {
        PrincipalKind::Agent => GitAuthor {
            name: p.actor.clone(),
            email: format!("{}@agents.{domain}", p.actor),
        },
        PrincipalKind::User | PrincipalKind::Service => GitAuthor {
            // The provider only: a scripted model's spec is a file path.
            name: format!(
                "Warrant agent ({})",
                run.model.split(':').next().unwrap_or_default()
            ),
            email: "agent@warrant.invalid".into(),
        },
    };
    Ok((author, coauthor, run.run.as_str().to_owned()))
}

impl GitTool {
    fn action(&self, args: &Value, env: &ToolEnv) -> Result<Action, Refusal> {
        let repo = env.workspace.clone();
        if !warrant_exec::git::is_repository(&repo) {
            return Err(Refusal {
                code: "W-GIT-001".into(),
                message: format!(
                    "the workspace {repo} is not a git repository (no .git directory at its root)"
                ),
            });
        }
        let name = |key: &str, what: &'static str| -> Result<String, Refusal> {
            let v = text(args, key).unwrap_or_default();
            warrant_exec::git::check_name(what, v).map_err(|e| Refusal::of(&e))?;
            Ok(v.to_owned())
        };
        Ok(match self.1 {
            Kind::Status => Action::GitRead {
                repo,
                what: GitRead::Status,
            },
            Kind::Diff => Action::GitRead {
                what: GitRead::Diff {
                    staged: args.get("staged").and_then(Value::as_bool).unwrap_or(false),
                    paths: paths(args, env, &repo)?,
                },
                repo,
            },
            Kind::Log => Action::GitRead {
                what: GitRead::Log {
                    max: args
                        .get("max")
                        .and_then(Value::as_u64)
                        .map_or(20, |m| m.clamp(1, 500) as u32),
                    path: text(args, "path")
                        .map(|p| pathspec(env, &repo, p))
                        .transpose()?,
                },
                repo,
            },
            Kind::Show => Action::GitRead {
                what: GitRead::Show {
                    rev: name("rev", "revision")?,
                },
                repo,
            },
            Kind::Commit => {
                let (author, coauthor, run) = authors(env)?;
                let message = text(args, "message").unwrap_or_default().trim().to_owned();
                if message.is_empty() {
                    return Err(Refusal {
                        code: "W-TOOL-002".into(),
                        message: "the commit message is empty".into(),
                    });
                }
                Action::GitCommit {
                    paths: paths(args, env, &repo)?,
                    repo,
                    message,
                    author,
                    coauthor,
                    run,
                }
            }
            Kind::Branch => Action::GitBranch {
                repo,
                name: name("name", "branch")?,
            },
            Kind::Checkout => Action::GitCheckout {
                repo,
                rev: name("rev", "revision")?,
            },
            Kind::Push => {
                let remote = text(args, "remote").unwrap_or("origin").to_owned();
                warrant_exec::git::check_name("remote", &remote).map_err(|e| Refusal::of(&e))?;
                let branch = match text(args, "branch") {
                    Some(_) => name("branch", "branch")?,
                    None => warrant_exec::git::current_branch(&repo)
                        .map_err(|e| Refusal::of(&e))?
                        .ok_or_else(|| Refusal {
                            code: "W-GIT-007".into(),
                            message: "HEAD is detached: name the branch to push".into(),
                        })?,
                };
                // The remote and branch must exist now: the person is shown where it goes.
                warrant_exec::git::push_target(&repo, &remote, &branch)
                    .map_err(|e| Refusal::of(&e))?;
                Action::GitPush {
                    repo,
                    remote,
                    branch,
                }
            }
        })
    }
}

impl Tool for GitTool {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    fn worst_class(&self) -> Option<warrant_core::RiskClass> {
        Some(match self.1 {
            Kind::Status | Kind::Diff | Kind::Log | Kind::Show => warrant_core::RiskClass::Read,
            Kind::Commit | Kind::Branch | Kind::Checkout => warrant_core::RiskClass::Change,
            Kind::Push => warrant_core::RiskClass::External,
        })
    }

    fn normalize(&self, args: &Value, env: &ToolEnv) -> Result<Vec<Action>, Refusal> {
        Ok(vec![self.action(args, env)?])
    }

    /// A push is bound to where it goes and what it sends: the push URL and the commit the
    /// branch points at when the person is asked. Either changing refuses the approval.
    fn base(&self, actions: &[Action], _env: &ToolEnv) -> Value {
        Value::Array(
            actions
                .iter()
                .map(|a| match a {
                    Action::GitPush {
                        repo,
                        remote,
                        branch,
                    } => match warrant_exec::git::push_target(repo, remote, branch) {
                        Ok((url, head)) => json!({"url": url, "commit": head}),
                        Err(e) => json!({"error": e.to_string()}),
                    },
                    Action::GitCommit { repo, .. } => {
                        json!(warrant_exec::git::work_tree_state(repo).ok())
                    }
                    Action::FsRead { .. }
                    | Action::FsList { .. }
                    | Action::FsSearch { .. }
                    | Action::FsWrite { .. }
                    | Action::FsCreate { .. }
                    | Action::FsDelete { .. }
                    | Action::ShellExec { .. }
                    | Action::ProviderCall { .. }
                    | Action::GitRead { .. }
                    | Action::GitBranch { .. }
                    | Action::GitCheckout { .. }
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
                    | Action::WebFetch { .. } => Value::Null,
                })
                .collect(),
        )
    }

    fn present(&self, actions: &[Action], env: &ToolEnv) -> Presentation {
        let mut title = Vec::new();
        let mut body = String::new();
        for a in actions {
            match a {
                Action::GitRead { what, .. } => title.push(format!("git {}", what.describe())),
                Action::GitCommit {
                    repo,
                    message,
                    paths,
                    author,
                    coauthor,
                    run,
                } => {
                    let subject = message.lines().next().unwrap_or_default();
                    title.push(format!(
                        "commit in {}: {}",
                        shown(repo, env),
                        warrant_core::render::inline(subject)
                    ));
                    body.push_str(&format!(
                        "author:  {author}\nCo-authored-by: {coauthor}\nWarrant-Run: {run}\npaths:   {}\nhooks and configured commands: never run\n\n{}",
                        if paths.is_empty() { "every change of the work tree".to_owned() } else { paths.join(", ") },
                        warrant_exec::git::work_tree_state(repo).unwrap_or_default()
                    ));
                }
                Action::GitBranch { name, .. } => title.push(format!("create branch {name}")),
                Action::GitCheckout { rev, .. } => title.push(format!("check out {rev}")),
                Action::GitPush {
                    repo,
                    remote,
                    branch,
                } => {
                    title.push(format!("push {branch} to {remote}"));
                    match warrant_exec::git::push_target(repo, remote, branch) {
                        Ok((url, head)) => body.push_str(&format!(
                            "remote:  {remote} ({})\nbranch:  {branch} at {head}\nforce:   never (a non-fast-forward is refused)\n\n{}",
                            warrant_core::render::inline(&url),
                            warrant_exec::git::outgoing(repo, remote, branch).unwrap_or_default()
                        )),
                        Err(e) => body.push_str(&format!("{e}\n")),
                    }
                }
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
                | Action::WebFetch { .. } => {}
            }
        }
        Presentation {
            title: title.join(", "),
            body,
        }
    }

    fn execute(
        &self,
        actions: &[Authorized<Action>],
        _env: &ToolEnv,
        _may_read: ReadFilter<'_>,
        _stop: StopCheck<'_>,
    ) -> EffectResult {
        let [one] = actions else {
            return fail(
                "W-TOOL-004",
                &format!("expected one authorized action, got {}", actions.len()),
            );
        };
        let Some(op) = one.narrow::<GitOp>() else {
            return fail(
                "W-EXEC-001",
                &format!(
                    "the git executor was handed a `{}` action",
                    one.get().verb().as_str()
                ),
            );
        };
        match warrant_exec::git::run(&op) {
            Ok(outcome) => ok(&outcome),
            Err(e) => fail(warrant_core::Coded::code(&e), &e.to_string()),
        }
    }
}
