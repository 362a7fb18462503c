//! `policy explain`: what policy decides for one action on one target, as this person or as
//! another actor, with every policy that matched and why. The target is canonicalized and a
//! program resolved exactly as a run would, so the explanation is of the action a run makes.

use std::sync::Arc;

use serde::Serialize;
use warrant_core::path::canonicalize;
use warrant_core::risk::Needs;
use warrant_core::{Action, Principal, PrincipalKind, RiskClass, Verb};
use warrant_exec::OsLinks;
use warrant_llm::ModelSpec;
use warrant_policy::{DecisionRequest, Explanation, Verdict};

use crate::install;
use crate::{HostError, Notice, Notices, Result, Where};

#[derive(Debug, Serialize)]
pub struct Explained {
    pub explanation: Explanation,
    /// Set when policy allows but the configuration's `[risk.<class>] needs = "person"` asks a
    /// person anyway: policy alone does not tell the whole story.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub person_needed: Option<RiskClass>,
}

/// Explains `action` (a verb such as `fs.write`) on `target` (a path, a command line, or a
/// model as `--model` names it), as `as_actor` when given.
pub fn explain(
    at: &Where,
    notices: Arc<dyn Notices + Send>,
    action: &str,
    target: &str,
    as_actor: Option<&str>,
) -> Result<Explained> {
    let paths = install::paths(at, false)?;
    let layers = install::read_layers(&paths)?;
    let mut principal = install::identity(&layers)?.principal;
    if let Some(actor) = as_actor {
        principal = Principal {
            actor: actor.to_owned(),
            kind: PrincipalKind::User,
            on_behalf_of: None,
            roles: Vec::new(),
            teams: Vec::new(),
            ..principal
        };
    }
    let directory = install::approval_rules(&paths, &layers)?;
    let policy = install::policy(&paths)?.with_directory(directory.directory, directory.team);
    for warning in policy.warnings() {
        notices.notice(Notice::PolicyWarning {
            text: warning.to_string(),
        });
    }
    let workspace = paths.workspace_canonical()?;
    let verb = Verb::parse(action).ok_or_else(|| {
        let known: Vec<&str> = Verb::ALL.iter().map(|v| v.as_str()).collect();
        HostError::usage(
            "W-POLICY-011",
            format!(
                "unknown action `{action}`; known actions: {}",
                known.join(", ")
            ),
        )
    })?;
    let path = || canonicalize(&workspace, target, &OsLinks).map_err(|e| HostError::bad_input(&e));
    let action = match verb {
        Verb::FsRead => Action::FsRead { path: path()? },
        Verb::FsList => Action::FsList { path: path()? },
        Verb::FsSearch => Action::FsSearch {
            path: path()?,
            pattern: String::new(),
        },
        Verb::FsWrite => Action::FsWrite {
            path: path()?,
            content: String::new(),
        },
        Verb::FsCreate => Action::FsCreate {
            path: path()?,
            content: String::new(),
        },
        Verb::FsDelete => Action::FsDelete {
            path: path()?,
            recursive: true,
        },
        Verb::ShellExec => {
            let argv: Vec<String> = target.split_whitespace().map(str::to_owned).collect();
            // As a run would: the program argv[0] names on the PATH a command inherits.
            let parent = install::parent_env();
            let program = argv.first().and_then(|a| {
                warrant_exec::program::resolve(
                    a,
                    workspace.as_path(),
                    warrant_exec::program::path_of(&parent),
                )
            });
            let contained = warrant_core::config::merge_settings(&layers)
                .profiles
                .get("default")
                .is_some_and(warrant_core::config::ProfileConfig::is_contained);
            Action::ShellExec {
                argv,
                cwd: workspace.clone(),
                profile: "default".into(),
                timeout_ms: 30_000,
                program,
                contained,
                judged: warrant_core::Judging::Changeset,
            }
        }
        // The target is a model as `--model` names it, e.g. `openai:gpt-4.1`.
        Verb::ProviderCall => {
            ModelSpec::parse(target).map_err(|e| HostError::bad_input(&e))?;
            let (provider, model) = target.split_once(':').unwrap_or((target, ""));
            Action::ProviderCall {
                provider: provider.to_owned(),
                model: model.to_owned(),
            }
        }
        // The target is a namespace: `memory/local/notes`, `local/notes` or `shared/team`.
        Verb::MemoryRead
        | Verb::MemoryWrite
        | Verb::MemoryDelete
        | Verb::MemoryPropose
        | Verb::MemoryPublish => {
            let (scope, namespace) = warrant_core::parse_memory_target(target).ok_or_else(|| {
                HostError::usage(
                    "W-POLICY-013",
                    format!(
                        "`{target}` is not a memory namespace; write it as memory/local/NAME or memory/shared/NAME"
                    ),
                )
            })?;
            memory_action(verb, scope, namespace)
        }
        // The target is the repository; the rest of a git action is what a run would name
        // by default (the current branch, `origin`).
        Verb::GitRead => Action::GitRead {
            repo: path()?,
            what: warrant_core::GitRead::Status,
        },
        Verb::GitCommit => Action::GitCommit {
            repo: path()?,
            message: String::new(),
            paths: Vec::new(),
            author: warrant_core::GitAuthor {
                name: String::new(),
                email: String::new(),
            },
            coauthor: warrant_core::GitAuthor {
                name: String::new(),
                email: String::new(),
            },
            run: String::new(),
        },
        Verb::GitBranch => Action::GitBranch {
            repo: path()?,
            name: String::new(),
        },
        Verb::GitCheckout => Action::GitCheckout {
            repo: path()?,
            rev: String::new(),
        },
        Verb::GitPush => Action::GitPush {
            repo: path()?,
            remote: "origin".into(),
            branch: String::new(),
        },
        // The target is the URL, checked against `[web] allow` as a run would.
        Verb::WebFetch => {
            let (_, host, port) =
                warrant_exec::web::target(target).map_err(|e| HostError::bad_input(&e))?;
            let web = warrant_core::config::merge_settings(&layers).web;
            Action::WebFetch {
                url: target.to_owned(),
                allowlisted: warrant_exec::web::allowlisted(&web, &host, port),
                host,
                port,
            }
        }
        // The target is the task; the subagent is weighed as a child of a top-level run
        // offered every tool.
        Verb::AgentSpawn => Action::AgentSpawn {
            task: target.to_owned(),
            menu: None,
            tools: Vec::new(),
            profile: None,
            child: warrant_core::RunId::parse("run-0")
                .ok_or_else(|| HostError::usage("W-POLICY-011", "no run id"))?,
            depth: 1,
        },
        // The kind is read from the extension, as the artifact tools name their files.
        Verb::ArtifactCreate => {
            let path = path()?;
            Action::ArtifactCreate {
                kind: warrant_core::ArtifactKind::for_name(path.file_name()),
                path,
                digest: warrant_core::Digest::of_bytes(b""),
                spec: serde_json::Value::Null,
            }
        }
        Verb::CatalogList | Verb::CatalogRead | Verb::McpCall | Verb::MessageSend => {
            return Err(HostError::usage(
                "W-POLICY-012",
                format!(
                    "`{action}` is a known action, but no tool performs it yet, so it cannot be explained on a target; fs.*, shell.exec, provider.call and memory.* can"
                ),
            ));
        }
    };
    let explanation = policy.explain(&DecisionRequest {
        principal: &principal,
        action: &action,
        workspace: &workspace,
        installed_skills: &[],
    });
    let rules = install::approval_rules(&paths, &layers)?;
    let class = explanation.decision.risk;
    let person_needed = (matches!(explanation.decision.verdict, Verdict::Allow)
        && rules.risk.rule(class).needs == Needs::Person)
        .then_some(class);
    Ok(Explained {
        explanation,
        person_needed,
    })
}

/// A memory action of `verb` on a namespace, as explain weighs it: no text, no entry.
fn memory_action(verb: Verb, scope: warrant_core::MemoryScope, namespace: String) -> Action {
    match verb {
        Verb::MemoryWrite => Action::MemoryWrite {
            scope,
            namespace,
            text: String::new(),
            tags: Vec::new(),
        },
        Verb::MemoryDelete => Action::MemoryDelete {
            scope,
            namespace,
            id: String::new(),
            reason: None,
        },
        Verb::MemoryPropose => Action::MemoryPropose {
            namespace,
            text: String::new(),
            tags: Vec::new(),
        },
        Verb::MemoryPublish => Action::MemoryPublish {
            namespace,
            draft: String::new(),
            digest: warrant_core::Digest::of_bytes(b""),
            publish: true,
            reason: String::new(),
        },
        Verb::MemoryRead
        | Verb::FsRead
        | Verb::FsList
        | Verb::FsSearch
        | Verb::FsWrite
        | Verb::FsCreate
        | Verb::FsDelete
        | Verb::ShellExec
        | Verb::GitRead
        | Verb::GitCommit
        | Verb::GitBranch
        | Verb::GitCheckout
        | Verb::GitPush
        | Verb::WebFetch
        | Verb::CatalogList
        | Verb::CatalogRead
        | Verb::ProviderCall
        | Verb::McpCall
        | Verb::AgentSpawn
        | Verb::ArtifactCreate
        | Verb::MessageSend => Action::MemoryRead {
            scope,
            namespace,
            query: String::new(),
            limit: 0,
        },
    }
}
