//! The one error type of the executors. Every variant has a stable code (`W-EXEC-0NN`) and a
//! message that says what happened, to what, and what the user can do. Codes are never reused.

use thiserror::Error;
use warrant_core::{CanonicalPath, Coded, Verb};

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ExecError {
    #[error(
        "the `{executor}` executor was handed a `{verb}` action; route each action to the executor for its verb (this is a wiring bug, not a user error)",
        verb = verb.as_str()
    )]
    WrongAction { executor: &'static str, verb: Verb },

    #[error(
        "profile `{profile}` names the environment variable `{name}`, which looks like a secret (matches *{pattern}*); secrets reach commands through secret handles, never through a profile — remove it from pass_env/set_env"
    )]
    ProfileSecretName {
        profile: String,
        name: String,
        pattern: &'static str,
    },

    #[error(
        "profile `{profile}` has an invalid environment variable name {name:?}; names must be non-empty and contain no '=' or NUL"
    )]
    ProfileBadEnvName { profile: String, name: String },

    #[error("profile `{profile}` has timeout_ms = 0; set a positive timeout in milliseconds")]
    ProfileZeroTimeout { profile: String },

    #[error(
        "profile `{profile}` has {field} = 0, so no output would be kept; set a positive byte count"
    )]
    ProfileZeroCap {
        profile: String,
        field: &'static str,
    },

    #[error("shell.exec action has an empty argv; give at least the program to run")]
    EmptyArgv,

    #[error("shell.exec action has timeout_ms = 0; the tools layer must give a positive timeout")]
    ZeroTimeout,

    #[error("could not start `{program}`: {message}")]
    Spawn { program: String, message: String },

    #[error("lost track of `{program}` while it ran: {message}")]
    Wait { program: String, message: String },

    #[error(
        "{decided} no longer resolves to the path that was authorized (now {now}); a symbolic link was swapped in after the decision — nothing was done, re-request the action"
    )]
    PathChanged { decided: CanonicalPath, now: String },

    #[error("could not resolve {path}: {message}")]
    Resolve {
        path: CanonicalPath,
        message: String,
    },

    #[error("{path} does not exist; list its parent directory to see what is there")]
    NotFound { path: CanonicalPath },

    #[error("{path} is a directory; use fs.list to see what it holds")]
    IsDirectory { path: CanonicalPath },

    #[error("{path} is not a directory; fs.list and a command's working directory need one")]
    NotADirectory { path: CanonicalPath },

    #[error(
        "{path} looks binary (it has a NUL byte in its first {checked} bytes); only text files can be read"
    )]
    Binary { path: CanonicalPath, checked: usize },

    #[error("{path} already exists; fs.create only makes new files — use fs.write to replace it")]
    AlreadyExists { path: CanonicalPath },

    #[error(
        "the artifact {path} was not written: its bytes are not the ones its actions were decided on (a different path or digest)"
    )]
    ArtifactMismatch { path: CanonicalPath },

    #[error(
        "{path} is a directory that is not empty; delete it with recursive = true if that is intended"
    )]
    DirectoryNotEmpty { path: CanonicalPath },

    #[error("search pattern is empty; give the text to look for")]
    EmptyPattern,

    #[error("could not {op} {path}: {message}")]
    Io {
        op: &'static str,
        path: CanonicalPath,
        message: String,
    },

    #[error("profile `{profile}` has a sandbox that cannot be planned: {message}")]
    SandboxPlan { profile: String, message: String },

    #[error(
        "the sandbox for `{program}` could not be applied, so it was not run: {message}; to accept less, set enforcement = \"best_effort\" in the profile's [sandbox], or use a profile with unconfined = true (every command then waits for a person)"
    )]
    SandboxFailed { program: String, message: String },

    #[error(
        "could not {op} {path} while reading or applying a command's changes: {message}; nothing more was applied, and applying again resumes where this stopped"
    )]
    ChangesetIo {
        op: &'static str,
        path: String,
        message: String,
    },

    #[error(
        "the command left {path} as {what}, which Warrant cannot carry into the workspace; nothing was applied — change the command so it does not leave one there"
    )]
    ChangesetUnsupported { path: String, what: String },

    #[error(
        "{path} changed in the workspace after the command's changes were read (expected {expected}, found {found}); it was not touched — look at it, then run the command again"
    )]
    ChangesetStale {
        path: String,
        expected: String,
        found: String,
    },

    #[error(
        "{link} in the workspace is a symbolic link, so a change to {path} would go through it; it was not touched — replace the link with a directory or run the command again"
    )]
    ChangesetLink { path: String, link: String },

    #[error(
        "the command's copy of {path} is no longer what was shown and judged; it was not applied — read the command's changes again"
    )]
    ChangesetUpperChanged { path: String },

    #[error(
        "a change names {path:?}, which is not a relative path inside the workspace; nothing was applied (the recorded changeset is damaged)"
    )]
    ChangesetBadPath { path: String },

    #[error(
        "{path} is a hard link to {denied}, which holds secrets no tool may read; it was not read — use a secret handle from the broker instead"
    )]
    HardLinkToDenied { path: CanonicalPath, denied: String },
    #[error(
        "{path} has {links} names but only {found} of them are in the workspace: it is also a file outside the workspace (a hard link), which may hold a secret under a harmless name; it was not read"
    )]
    HardLinkOutside {
        path: CanonicalPath,
        links: u64,
        found: usize,
    },
}

impl Coded for ExecError {
    fn code(&self) -> &'static str {
        match self {
            Self::WrongAction { .. } => "W-EXEC-001",
            Self::ProfileSecretName { .. } => "W-EXEC-002",
            Self::ProfileBadEnvName { .. } => "W-EXEC-003",
            Self::ProfileZeroTimeout { .. } => "W-EXEC-004",
            Self::ProfileZeroCap { .. } => "W-EXEC-005",
            Self::EmptyArgv => "W-EXEC-006",
            Self::ZeroTimeout => "W-EXEC-007",
            Self::Spawn { .. } => "W-EXEC-008",
            Self::Wait { .. } => "W-EXEC-009",
            Self::PathChanged { .. } => "W-EXEC-010",
            Self::Resolve { .. } => "W-EXEC-011",
            Self::NotFound { .. } => "W-EXEC-012",
            Self::IsDirectory { .. } => "W-EXEC-013",
            Self::NotADirectory { .. } => "W-EXEC-014",
            Self::Binary { .. } => "W-EXEC-015",
            Self::AlreadyExists { .. } => "W-EXEC-016",
            Self::ArtifactMismatch { .. } => "W-EXEC-030",
            Self::DirectoryNotEmpty { .. } => "W-EXEC-017",
            Self::EmptyPattern => "W-EXEC-018",
            Self::Io { .. } => "W-EXEC-019",
            Self::SandboxPlan { .. } => "W-EXEC-020",
            Self::SandboxFailed { .. } => "W-EXEC-021",
            Self::ChangesetIo { .. } => "W-EXEC-022",
            Self::ChangesetUnsupported { .. } => "W-EXEC-023",
            Self::ChangesetStale { .. } => "W-EXEC-024",
            Self::ChangesetLink { .. } => "W-EXEC-025",
            Self::ChangesetUpperChanged { .. } => "W-EXEC-026",
            Self::ChangesetBadPath { .. } => "W-EXEC-027",
            Self::HardLinkToDenied { .. } => "W-EXEC-028",
            Self::HardLinkOutside { .. } => "W-EXEC-029",
        }
    }

    fn hint(&self) -> Option<warrant_core::Hint> {
        match self {
            Self::SandboxFailed { .. } => Some(warrant_core::Hint::SandboxSupport),
            Self::WrongAction { .. }
            | Self::ProfileSecretName { .. }
            | Self::ProfileBadEnvName { .. }
            | Self::ProfileZeroTimeout { .. }
            | Self::ProfileZeroCap { .. }
            | Self::EmptyArgv
            | Self::ZeroTimeout
            | Self::Spawn { .. }
            | Self::Wait { .. }
            | Self::PathChanged { .. }
            | Self::Resolve { .. }
            | Self::NotFound { .. }
            | Self::IsDirectory { .. }
            | Self::NotADirectory { .. }
            | Self::Binary { .. }
            | Self::AlreadyExists { .. }
            | Self::ArtifactMismatch { .. }
            | Self::DirectoryNotEmpty { .. }
            | Self::EmptyPattern
            | Self::Io { .. }
            | Self::SandboxPlan { .. }
            | Self::ChangesetIo { .. }
            | Self::ChangesetUnsupported { .. }
            | Self::ChangesetStale { .. }
            | Self::ChangesetLink { .. }
            | Self::ChangesetUpperChanged { .. }
            | Self::ChangesetBadPath { .. }
            | Self::HardLinkToDenied { .. }
            | Self::HardLinkOutside { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;
    use std::collections::BTreeSet;

    #[test]
    fn codes_are_unique_and_messages_name_the_target() {
        let p = CanonicalPath::from_normalized("/w/a").unwrap();
        let all = [
            ExecError::WrongAction {
                executor: "read_file",
                verb: Verb::ShellExec,
            },
            ExecError::ProfileSecretName {
                profile: "p".into(),
                name: "GH_TOKEN".into(),
                pattern: "TOKEN",
            },
            ExecError::ProfileBadEnvName {
                profile: "p".into(),
                name: "A=B".into(),
            },
            ExecError::ProfileZeroTimeout {
                profile: "p".into(),
            },
            ExecError::ProfileZeroCap {
                profile: "p".into(),
                field: "output_head_bytes",
            },
            ExecError::EmptyArgv,
            ExecError::ZeroTimeout,
            ExecError::Spawn {
                program: "x".into(),
                message: "m".into(),
            },
            ExecError::Wait {
                program: "x".into(),
                message: "m".into(),
            },
            ExecError::PathChanged {
                decided: p.clone(),
                now: "/etc/passwd".into(),
            },
            ExecError::Resolve {
                path: p.clone(),
                message: "m".into(),
            },
            ExecError::NotFound { path: p.clone() },
            ExecError::IsDirectory { path: p.clone() },
            ExecError::NotADirectory { path: p.clone() },
            ExecError::Binary {
                path: p.clone(),
                checked: 8192,
            },
            ExecError::AlreadyExists { path: p.clone() },
            ExecError::DirectoryNotEmpty { path: p.clone() },
            ExecError::EmptyPattern,
            ExecError::Io {
                op: "read",
                path: p,
                message: "m".into(),
            },
            ExecError::SandboxPlan {
                profile: "p".into(),
                message: "cannot resolve `x`".into(),
            },
            ExecError::SandboxFailed {
                program: "sh".into(),
                message: "Landlock could not be applied".into(),
            },
            ExecError::ChangesetIo {
                op: "read",
                path: "src/lib.rs".into(),
                message: "Permission denied (os error 13)".into(),
            },
            ExecError::ChangesetUnsupported {
                path: "run/sock".into(),
                what: "a FIFO, socket or device".into(),
            },
            ExecError::ChangesetStale {
                path: "notes.md".into(),
                expected: "a file of 4 bytes".into(),
                found: "nothing".into(),
            },
            ExecError::ChangesetLink {
                path: "docs/a.md".into(),
                link: "docs".into(),
            },
            ExecError::ChangesetUpperChanged {
                path: "a.txt".into(),
            },
            ExecError::ChangesetBadPath {
                path: "../etc/passwd".into(),
            },
        ];
        let codes: BTreeSet<&str> = all.iter().map(Coded::code).collect();
        assert_eq!(codes.len(), all.len());
        let listing: Vec<String> = all.iter().map(|e| format!("{}: {e}", e.code())).collect();
        insta::assert_snapshot!(listing.join("\n"));
    }
}
