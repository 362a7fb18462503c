//! Every way a skill can be refused, each with its stable code (docs/ERRORS.md).

use std::path::PathBuf;

use serde::Serialize;
use thiserror::Error;
use warrant_core::Coded;

/// One violation of the open spec found in a SKILL.md (all of them are collected).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub code: &'static str,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}] {}", self.code, self.message)
    }
}

#[derive(Debug, Error)]
pub enum SkillError {
    #[error("{} is not a valid skill:\n{}", .path.display(), .problems.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))]
    Invalid {
        path: PathBuf,
        problems: Vec<Problem>,
    },
    #[error("cannot read the skill at {}: {detail}", .path.display())]
    Unreadable { path: PathBuf, detail: String },
    #[error("{} holds {what}; a skill is reviewed as plain files, so it is refused", .path.display())]
    Unsafe { path: PathBuf, what: String },
    #[error(
        "skill `{name}` changed after it was approved (approved {approved}, now {now}; changed: {})",
        .files.join(", ")
    )]
    Changed {
        name: String,
        approved: String,
        now: String,
        files: Vec<String>,
    },
    #[error("no skill named `{name}`{where_}")]
    NotFound { name: String, where_: String },
    #[error("installing a skill needs a person's approval: {detail}")]
    NotApproved { detail: String },
    #[error(
        "this process was started by a Warrant run ({evidence}): a run's command cannot approve a skill, trust a workspace or remove a skill"
    )]
    FromCommand { evidence: String },
    #[error("the skill at {} changed while it was being reviewed (shown {shown}, now {now}); review it again", .path.display())]
    ChangedDuringReview {
        path: PathBuf,
        shown: String,
        now: String,
    },
    #[error("cannot write {}: {detail}", .path.display())]
    Write { path: PathBuf, detail: String },
    #[error(
        "there is no user configuration directory here (set HOME or XDG_CONFIG_HOME): installed skills live in it"
    )]
    NoUserDir,
}

impl Coded for SkillError {
    fn code(&self) -> &'static str {
        match self {
            Self::Invalid { problems, .. } => problems.first().map_or("W-SKILL-003", |p| p.code),
            Self::Unreadable { .. } => "W-SKILL-001",
            Self::Unsafe { .. } => "W-SKILL-011",
            Self::Changed { .. } => "W-SKILL-010",
            Self::NotFound { .. } => "W-SKILL-012",
            Self::NotApproved { .. } => "W-SKILL-013",
            Self::FromCommand { .. } => "W-SKILL-014",
            Self::ChangedDuringReview { .. } => "W-SKILL-015",
            Self::Write { .. } | Self::NoUserDir => "W-SKILL-016",
        }
    }
}

impl SkillError {
    /// What the person can do next, where there is something.
    pub fn next_step(&self) -> Option<&'static str> {
        match self {
            Self::Changed { .. } => Some(
                "review it again and re-approve with `warrant skills approve NAME` (or reinstall it), or remove it",
            ),
            Self::NotApproved { .. } => {
                Some("run `warrant skills install SOURCE` on a terminal and answer, or add --yes")
            }
            Self::NotFound { .. } => Some("`warrant skills list` shows every skill and its state"),
            Self::Invalid { .. }
            | Self::Unreadable { .. }
            | Self::Unsafe { .. }
            | Self::FromCommand { .. }
            | Self::ChangedDuringReview { .. }
            | Self::Write { .. }
            | Self::NoUserDir => None,
        }
    }
}
