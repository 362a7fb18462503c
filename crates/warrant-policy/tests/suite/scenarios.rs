//! The default pack as a scenario table: every filesystem verb against every kind of target,
//! plus shell commands. Rows are checked for completeness against `Verb::ALL`, so a new verb
//! shows up here as a missing row.

use pretty_assertions::assert_eq;
use warrant_core::{Action, CanonicalPath, RiskClass, Verb};
use warrant_policy::{ALWAYS_ASK_ID, Decision, PolicyEffect, PolicyLayer, PolicyReason, Verdict};

use super::common::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Inside,
    Outside,
    DotEnv,
    GitConfig,
    KeyFile,
}

impl Target {
    const ALL: [Target; 5] = [
        Self::Inside,
        Self::Outside,
        Self::DotEnv,
        Self::GitConfig,
        Self::KeyFile,
    ];

    fn path(self) -> CanonicalPath {
        path(match self {
            Self::Inside => "/ws/src/main.rs",
            Self::Outside => "/etc/passwd",
            Self::DotEnv => "/ws/.env",
            Self::GitConfig => "/ws/.git/config",
            Self::KeyFile => "/ws/deploy/id_ed25519",
        })
    }
}

/// The action of an fs verb on `path`; `None` for verbs of other kinds.
fn fs_action(verb: Verb, path: CanonicalPath) -> Option<Action> {
    match verb {
        Verb::FsRead => Some(Action::FsRead { path }),
        Verb::FsList => Some(Action::FsList { path }),
        Verb::FsSearch => Some(Action::FsSearch {
            path,
            pattern: "TODO".into(),
        }),
        Verb::FsWrite => Some(Action::FsWrite {
            path,
            content: "x".into(),
        }),
        Verb::FsCreate => Some(Action::FsCreate {
            path,
            content: "x".into(),
        }),
        Verb::FsDelete => Some(Action::FsDelete {
            path,
            recursive: false,
        }),
        Verb::ArtifactCreate => Some(Action::ArtifactCreate {
            kind: warrant_core::ArtifactKind::for_name(path.file_name()),
            path,
            digest: warrant_core::Digest::of_bytes(b"x"),
            spec: serde_json::json!({"markdown": "x"}),
        }),
        Verb::ShellExec
        | Verb::GitCommit
        | Verb::GitPush
        | Verb::MemoryRead
        | Verb::MemoryWrite
        | Verb::MemoryDelete
        | Verb::MemoryPropose
        | Verb::MemoryPublish
        | Verb::CatalogList
        | Verb::CatalogRead
        | Verb::ProviderCall
        | Verb::McpCall
        | Verb::MessageSend
        | Verb::GitRead
        | Verb::GitBranch
        | Verb::GitCheckout
        | Verb::WebFetch
        | Verb::AgentSpawn => None,
    }
}

enum Expect {
    Allow(&'static str),
    Ask(RiskClass, &'static str),
    /// Denied by a forbid, or by default when the id is "".
    Deny(&'static str),
}

use Expect::{Allow, Ask, Deny};
use Target::{DotEnv, GitConfig, Inside, KeyFile, Outside};

const SECRETS: &str = "no-secret-files";
const TOOL_DIRS: &str = "tool-dirs-read-only";

#[rustfmt::skip]
const FS_ROWS: &[(Verb, Target, Expect)] = &[
    (Verb::FsRead,   Inside,    Allow("workspace-read")),
    (Verb::FsRead,   Outside,   Deny("")),
    (Verb::FsRead,   DotEnv,    Deny(SECRETS)),
    (Verb::FsRead,   GitConfig, Allow("workspace-read")),
    (Verb::FsRead,   KeyFile,   Deny(SECRETS)),
    (Verb::FsList,   Inside,    Allow("workspace-read")),
    (Verb::FsList,   Outside,   Deny("")),
    (Verb::FsList,   DotEnv,    Deny(SECRETS)),
    (Verb::FsList,   GitConfig, Allow("workspace-read")),
    (Verb::FsList,   KeyFile,   Deny(SECRETS)),
    (Verb::FsSearch, Inside,    Allow("workspace-read")),
    (Verb::FsSearch, Outside,   Deny("")),
    (Verb::FsSearch, DotEnv,    Deny(SECRETS)),
    (Verb::FsSearch, GitConfig, Allow("workspace-read")),
    (Verb::FsSearch, KeyFile,   Deny(SECRETS)),
    (Verb::FsWrite,  Inside,    Allow("workspace-write")),
    (Verb::FsWrite,  Outside,   Deny("")),
    (Verb::FsWrite,  DotEnv,    Deny(SECRETS)),
    (Verb::FsWrite,  GitConfig, Deny(TOOL_DIRS)),
    (Verb::FsWrite,  KeyFile,   Deny(SECRETS)),
    (Verb::FsCreate, Inside,    Allow("workspace-write")),
    (Verb::FsCreate, Outside,   Deny("")),
    (Verb::FsCreate, DotEnv,    Deny(SECRETS)),
    (Verb::FsCreate, GitConfig, Deny(TOOL_DIRS)),
    (Verb::FsCreate, KeyFile,   Deny(SECRETS)),
    (Verb::FsDelete, Inside,    Ask(RiskClass::Destructive, "workspace-delete-asks")),
    (Verb::FsDelete, Outside,   Deny("")),
    (Verb::FsDelete, DotEnv,    Deny(SECRETS)),
    (Verb::FsDelete, GitConfig, Deny(TOOL_DIRS)),
    (Verb::FsDelete, KeyFile,   Deny(SECRETS)),
    (Verb::ArtifactCreate, Inside,    Allow("artifacts-workspace")),
    (Verb::ArtifactCreate, Outside,   Deny("")),
    (Verb::ArtifactCreate, DotEnv,    Deny("artifacts-protected")),
    (Verb::ArtifactCreate, GitConfig, Deny("artifacts-protected")),
    (Verb::ArtifactCreate, KeyFile,   Deny("artifacts-protected")),
];

/// The risk recorded is the action's own class (`Action::risk`), not just the verb's default.
fn expected(action: &Action, expect: &Expect) -> Decision {
    let reasons = |id: &str| {
        if id.is_empty() {
            Vec::new()
        } else {
            vec![pack_reason(id)]
        }
    };
    match expect {
        Allow(id) => decision(Verdict::Allow, action.risk(), reasons(id)),
        Ask(risk, id) => decision(Verdict::Ask { risk: *risk }, *risk, reasons(id)),
        Deny(id) => decision(Verdict::Deny, action.risk(), reasons(id)),
    }
}

#[test]
fn default_pack_fs_table() {
    let engine = default_engine();
    let who = alice();
    // Completeness: one row for every fs verb and target, no more.
    let mut covered = 0;
    for verb in Verb::ALL {
        for target in Target::ALL {
            let Some(action) = fs_action(verb, target.path()) else {
                continue;
            };
            let rows: Vec<&Expect> = FS_ROWS
                .iter()
                .filter(|(v, t, _)| *v == verb && *t == target)
                .map(|(_, _, e)| e)
                .collect();
            assert_eq!(rows.len(), 1, "rows for {verb:?} × {target:?}");
            covered += 1;
            assert_eq!(
                decide(&engine, &who, &action),
                expected(&action, rows[0]),
                "{verb:?} on {target:?}"
            );
        }
    }
    assert_eq!(covered, FS_ROWS.len());
}

#[test]
fn other_secret_shapes_are_forbidden_for_reads() {
    let engine = default_engine();
    for p in [
        "/ws/.env.local",
        "/ws/certs/server.pem",
        "/ws/certs/server.key",
        "/ws/home/.ssh/config",
        "/ws/.ssh",
        "/ws/id_rsa.pub",
        "/ws/id_ecdsa",
    ] {
        let action = Action::FsRead { path: path(p) };
        assert_eq!(
            decide(&engine, &alice(), &action),
            decision(Verdict::Deny, action.risk(), vec![pack_reason(SECRETS)]),
            "{p}"
        );
    }
    // Near misses stay readable: the rules match names, not substrings of the path.
    for p in [
        "/ws/envoy.yaml",
        "/ws/keys.md",
        "/ws/.environment/notes",
        "/ws/.gitignore",
    ] {
        let action = Action::FsRead { path: path(p) };
        assert_eq!(
            decide(&engine, &alice(), &action).verdict,
            Verdict::Allow,
            "{p}"
        );
    }
}

#[test]
fn tool_dirs_themselves_cannot_be_deleted() {
    let engine = default_engine();
    let private = pack_reason("warrant-state-private");
    for (p, reasons) in [
        ("/ws/.git", vec![pack_reason(TOOL_DIRS)]),
        (
            "/ws/.warrant",
            vec![pack_reason(TOOL_DIRS), private.clone()],
        ),
        (
            "/ws/.warrant/runs.db",
            vec![pack_reason(TOOL_DIRS), private.clone()],
        ),
    ] {
        let action = Action::FsDelete {
            path: path(p),
            recursive: true,
        };
        let mut got = decide(&engine, &alice(), &action);
        got.reasons.sort_by(|a, b| a.id.cmp(&b.id));
        assert_eq!(
            got,
            decision(Verdict::Deny, RiskClass::Destructive, reasons),
            "{p}"
        );
    }
    // Warrant's own state is not readable either: the installation secret signs approvals.
    let action = Action::FsRead {
        path: path("/ws/.warrant/keys/installation.secret"),
    };
    assert_eq!(
        decide(&engine, &alice(), &action),
        decision(Verdict::Deny, RiskClass::Secret, vec![private])
    );
}

/// A command whose argv[0] resolved to `program`.
fn resolved(argv: &[&str], cwd: &str, program: &str) -> Action {
    Action::ShellExec {
        argv: argv.iter().map(|s| (*s).to_owned()).collect(),
        cwd: path(cwd),
        profile: "default".into(),
        timeout_ms: 10_000,
        program: Some(path(program)),
        contained: false,
        judged: warrant_core::Judging::Changeset,
    }
}

fn contained(mut action: Action) -> Action {
    if let Action::ShellExec { contained, .. } = &mut action {
        *contained = true;
    }
    action
}

/// A verdict, its risk class and the ids of the policies behind it.
type Expected = (Verdict, RiskClass, Vec<&'static str>);

/// Commands: contained ones run (a destructive one is judged after it ran, from its
/// changeset), secret ones are asked before; every command of a profile that confines less is
/// asked; nothing runs outside the workspace.
#[test]
fn shell_table() {
    let engine = default_engine();
    let (change, secret, destructive) =
        (RiskClass::Change, RiskClass::Secret, RiskClass::Destructive);
    let ask = |risk| Verdict::Ask { risk };
    let rows: Vec<(Action, Expected)> = vec![
        (
            contained(exec(&["ls", "-la"], "/ws")),
            (Verdict::Allow, change, vec!["project:shell-contained"]),
        ),
        (
            contained(exec(&["cargo", "test"], "/ws/src")),
            (Verdict::Allow, change, vec!["project:shell-contained"]),
        ),
        (
            contained(exec(&["find", ".", "-delete"], "/ws")),
            (
                Verdict::Allow,
                destructive,
                vec!["project:shell-contained", "builtin:judged-after"],
            ),
        ),
        (
            contained(resolved(&["./ls", "-la"], "/ws", "/usr/bin/rm")),
            (
                Verdict::Allow,
                destructive,
                vec!["project:shell-contained", "builtin:judged-after"],
            ),
        ),
        (
            contained(exec(&["cat", ".env"], "/ws")),
            (
                ask(secret),
                secret,
                vec!["project:shell-contained", "builtin:always-ask"],
            ),
        ),
        (
            exec(&["ls", "-la"], "/ws"),
            (ask(change), change, vec!["project:shell-wider-asks"]),
        ),
        (
            exec(&["rm", "-rf", "build"], "/ws"),
            (
                ask(destructive),
                destructive,
                vec!["project:shell-wider-asks"],
            ),
        ),
        (
            resolved(&["ls"], "/ws", "/ws/node_modules/.bin/ls"),
            (ask(change), change, vec!["project:shell-wider-asks"]),
        ),
        (
            contained(exec(&["ls"], "/tmp")),
            (Verdict::Deny, change, Vec::new()),
        ),
        (
            exec(&["cargo", "build"], "/srv/other"),
            (Verdict::Deny, change, Vec::new()),
        ),
    ];
    for (action, want) in rows {
        let got = decide(&engine, &alice(), &action);
        let ids: Vec<&str> = got.reasons.iter().map(|r| r.id.as_str()).collect();
        assert_eq!((got.verdict, got.risk, ids), want, "{}", action.target());
    }
}

#[test]
fn destructive_verbs_always_ask_even_when_a_policy_permits_them() {
    let text = r#"
        @id("delete-anything-in-ws")
        permit (principal, action == Warrant::Action::"fs.delete", resource is Warrant::Path)
        when { resource.in_workspace };
    "#;
    let engine = warrant_policy::PolicyEngine::load(&[source(
        warrant_core::config::LayerKind::User,
        "/home/a/.config/warrant/policy/mine.cedar",
        text,
    )])
    .unwrap();
    let action = Action::FsDelete {
        path: path("/ws/old.txt"),
        recursive: false,
    };
    let got = decide(&engine, &alice(), &action);
    assert_eq!(
        got,
        Decision {
            verdict: Verdict::Ask {
                risk: RiskClass::Destructive
            },
            risk: RiskClass::Destructive,
            reasons: vec![
                PolicyReason {
                    id: "user:delete-anything-in-ws".into(),
                    layer: PolicyLayer::User,
                    file: "/home/a/.config/warrant/policy/mine.cedar".into(),
                    effect: PolicyEffect::Permit,
                    reason: None,
                    ask: None,
                },
                PolicyReason {
                    id: ALWAYS_ASK_ID.into(),
                    layer: PolicyLayer::Builtin,
                    file: String::new(),
                    effect: PolicyEffect::Ask,
                    reason: Some(
                        "fs.delete is destructive: destructive, secret and irreversible actions \
                         always go to a person, whatever policy permits"
                            .into()
                    ),
                    ask: Some(RiskClass::Destructive),
                },
            ],
            errors: Vec::new(),
        }
    );
    // The silent permit is reported at load; the default pack (which asks) is not.
    assert_eq!(
        engine.warnings(),
        vec![
            "policy user:delete-anything-in-ws (/home/a/.config/warrant/policy/mine.cedar) permits \
             fs.delete without @ask, but destructive actions always need a person: they are \
             still asked (add @ask(\"destructive\") to say so)"
                .to_owned()
        ]
    );
    assert_eq!(default_engine().warnings(), Vec::<String>::new());
}

#[test]
fn the_strictest_ask_among_permits_wins() {
    let text = r#"
        @id("writes-ask-change")
        @ask("change")
        permit (principal, action == Warrant::Action::"fs.write", resource is Warrant::Path);

        @id("config-writes-ask-external")
        @ask("external")
        permit (principal, action == Warrant::Action::"fs.write", resource is Warrant::Path)
        when { resource.ext == "toml" };
    "#;
    let engine = warrant_policy::PolicyEngine::load(&[source(
        warrant_core::config::LayerKind::Project,
        "p.cedar",
        text,
    )])
    .unwrap();
    let write = |p: &str| Action::FsWrite {
        path: path(p),
        content: String::new(),
    };
    let got = decide(&engine, &alice(), &write("/ws/Cargo.toml"));
    assert_eq!(
        got.verdict,
        Verdict::Ask {
            risk: RiskClass::External
        }
    );
    assert_eq!(
        got.reasons
            .iter()
            .map(|r| r.id.as_str())
            .collect::<Vec<_>>(),
        vec![
            "project:config-writes-ask-external",
            "project:writes-ask-change"
        ]
    );
    let got = decide(&engine, &alice(), &write("/ws/a.rs"));
    assert_eq!(
        got.verdict,
        Verdict::Ask {
            risk: RiskClass::Change
        }
    );
}

/// The action of a git verb on the repository at `repo`; `None` for verbs of other kinds.
fn git_action(verb: Verb, repo: CanonicalPath) -> Option<Action> {
    let who = warrant_core::GitAuthor {
        name: "alice".into(),
        email: "alice@acme.invalid".into(),
    };
    match verb {
        Verb::GitRead => Some(Action::GitRead {
            repo,
            what: warrant_core::GitRead::Log {
                max: 20,
                path: None,
            },
        }),
        Verb::GitCommit => Some(Action::GitCommit {
            repo,
            message: "fix".into(),
            paths: vec![],
            author: who.clone(),
            coauthor: who,
            run: "run-1".into(),
        }),
        Verb::GitBranch => Some(Action::GitBranch {
            repo,
            name: "topic".into(),
        }),
        Verb::GitCheckout => Some(Action::GitCheckout {
            repo,
            rev: "topic".into(),
        }),
        Verb::GitPush => Some(Action::GitPush {
            repo,
            remote: "origin".into(),
            branch: "main".into(),
        }),
        Verb::FsRead
        | Verb::FsList
        | Verb::FsSearch
        | Verb::FsWrite
        | Verb::FsCreate
        | Verb::FsDelete
        | Verb::ShellExec
        | Verb::MemoryRead
        | Verb::MemoryWrite
        | Verb::MemoryDelete
        | Verb::MemoryPropose
        | Verb::MemoryPublish
        | Verb::CatalogList
        | Verb::CatalogRead
        | Verb::ProviderCall
        | Verb::McpCall
        | Verb::MessageSend
        | Verb::WebFetch
        | Verb::AgentSpawn
        | Verb::ArtifactCreate => None,
    }
}

#[rustfmt::skip]
const GIT_ROWS: &[(Verb, bool, Expect)] = &[
    (Verb::GitRead,     true,  Allow("git-workspace")),
    (Verb::GitRead,     false, Deny("")),
    (Verb::GitCommit,   true,  Allow("git-workspace")),
    (Verb::GitCommit,   false, Deny("")),
    (Verb::GitBranch,   true,  Allow("git-workspace")),
    (Verb::GitBranch,   false, Deny("")),
    (Verb::GitCheckout, true,  Allow("git-workspace")),
    (Verb::GitCheckout, false, Deny("")),
    (Verb::GitPush,     true,  Ask(RiskClass::External, "git-push-asks")),
    (Verb::GitPush,     false, Deny("")),
];

#[test]
fn default_pack_git_table() {
    let engine = default_engine();
    let who = alice();
    let mut covered = 0;
    for verb in Verb::ALL {
        for inside in [true, false] {
            let repo = path(if inside { "/ws" } else { "/srv/other" });
            let Some(action) = git_action(verb, repo) else {
                continue;
            };
            let rows: Vec<&Expect> = GIT_ROWS
                .iter()
                .filter(|(v, i, _)| *v == verb && *i == inside)
                .map(|(_, _, e)| e)
                .collect();
            assert_eq!(rows.len(), 1, "rows for {verb:?} × inside={inside}");
            covered += 1;
            assert_eq!(
                decide(&engine, &who, &action),
                expected(&action, rows[0]),
                "{verb:?} inside={inside}"
            );
        }
    }
    assert_eq!(covered, GIT_ROWS.len());
}

#[test]
fn default_pack_fetches_only_allowlisted_hosts() {
    let engine = default_engine();
    for (allowlisted, expect) in [(true, Allow("web-fetch-allowlisted")), (false, Deny(""))] {
        let action = Action::WebFetch {
            url: "https://docs.rs/serde".into(),
            host: "docs.rs".into(),
            port: 443,
            allowlisted,
        };
        assert_eq!(
            decide(&engine, &alice(), &action),
            expected(&action, &expect),
            "allowlisted={allowlisted}"
        );
    }
}

#[test]
fn a_subagent_under_the_same_principal_is_allowed_by_the_default_pack() {
    let engine = default_engine();
    for depth in [1, 2] {
        let action = Action::AgentSpawn {
            task: "summarise the notes".into(),
            menu: None,
            tools: vec!["read_file".into()],
            profile: Some("default".into()),
            child: warrant_core::RunId::parse("run-0001-0a0b").unwrap(),
            depth,
        };
        assert_eq!(
            decide(&engine, &alice(), &action),
            expected(&action, &Allow("agent-spawn")),
            "depth {depth}"
        );
    }
}

/// The default pack reads an installed skill's files only when the caller vouches that the
/// skill verified against its approval (`installed_skills`); never writes there, and nothing
/// beside it. Without the vouching (the control), the same read is denied.
#[test]
fn installed_skill_reads_need_a_verified_skill() {
    use warrant_policy::DecisionRequest;
    let engine = default_engine();
    let who = alice();
    let dir = path("/home/a/.config/warrant/skills/tidy");
    let read = |p: &str| Action::FsRead { path: path(p) };
    let decide = |action: &Action, skills: &[CanonicalPath]| {
        engine
            .decide(&DecisionRequest {
                principal: &who,
                action,
                workspace: &ws(),
                installed_skills: skills,
            })
            .verdict
    };
    let inside = read("/home/a/.config/warrant/skills/tidy/references/STYLE.md");
    assert_eq!(decide(&inside, std::slice::from_ref(&dir)), Verdict::Allow);
    assert_eq!(decide(&inside, &[]), Verdict::Deny);
    let ledger = read("/home/a/.config/warrant/skills/.installed.json");
    assert_eq!(decide(&ledger, std::slice::from_ref(&dir)), Verdict::Deny);
    let sibling = read("/home/a/.config/warrant/skills/tidy-evil/SKILL.md");
    assert_eq!(decide(&sibling, std::slice::from_ref(&dir)), Verdict::Deny);
    let write = Action::FsWrite {
        path: path("/home/a/.config/warrant/skills/tidy/SKILL.md"),
        content: "x".into(),
    };
    assert_eq!(decide(&write, std::slice::from_ref(&dir)), Verdict::Deny);
}
