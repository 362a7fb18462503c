//! Errors of profile handling, each with a stable `W-OAP-NNN` code (docs/ERRORS.md lists
//! them). Validation findings carry the JSON Pointer the spec asks for (L1-P6).

use serde::Serialize;

/// One finding in a document, located by JSON Pointer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub pointer: String,
    pub message: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = if self.pointer.is_empty() {
            "/"
        } else {
            &self.pointer
        };
        write!(f, "{at}: {}", self.message)
    }
}

fn list(findings: &[Finding]) -> String {
    findings
        .iter()
        .map(|f| format!("\n  {f}"))
        .collect::<String>()
}

#[derive(Clone, Debug, thiserror::Error)]
pub enum OapError {
    #[error("cannot read {path}: {message}")]
    Read { path: String, message: String },
    #[error("{path} is not an OAP document: {message}")]
    Parse { path: String, message: String },
    #[error(
        "{path} uses OAP version {version}; this harness implements 1.0 only, and unsupported versions fail closed (errata 1.0.1)"
    )]
    Version { path: String, version: String },
    #[error("{path} is not a valid {kind}:{}", list(.findings))]
    Invalid {
        path: String,
        kind: String,
        findings: Vec<Finding>,
    },
    #[error("no agent profile named `{name}` in {roots}")]
    NotFound { name: String, roots: String },
    #[error(
        "two profiles named `{name}` in the {root} root: {first} and {second}; a name must be unique within a root"
    )]
    Collision {
        name: String,
        root: String,
        first: String,
        second: String,
    },
    #[error("`extends` of `{name}` forms a cycle: {chain}")]
    Cycle { name: String, chain: String },
    #[error("`extends` of `{name}` is deeper than 8 levels")]
    Depth { name: String },
    #[error("`{name}` extends `{base}`, pinned at {pin}, but the profile found is {found}")]
    Pin {
        name: String,
        base: String,
        pin: String,
        found: String,
    },
    #[error(
        "`{name}` requires {what}, which is not available; a differently capable agent must not run under the same name (L1-I7)"
    )]
    Required { name: String, what: String },
    #[error(
        "the delta targets `{name}` at revision {target}, but the profile is at revision {current}; nothing was written (a stale delta is rejected, never written blind)"
    )]
    Conflict {
        name: String,
        target: u64,
        current: u64,
    },
    #[error(
        "the proposal was made for `{name}` at revision {target}; the profile is at revision {current} and {why}; nothing was written (a stale proposal is refused, never applied blind: decline it, and a later run proposes again from the current profile)"
    )]
    StaleProposal {
        name: String,
        target: u64,
        current: u64,
        why: String,
    },
    #[error(
        "the delta's target.digest {pinned} is not the profile's digest {actual}; nothing was written"
    )]
    Digest { pinned: String, actual: String },
    #[error("`{name}` has lifecycle.writeback `{writeback}`: {why}")]
    Writeback {
        name: String,
        writeback: String,
        why: String,
    },
    #[error("the delta cannot be applied to `{name}`: {message}; nothing was written")]
    Apply { name: String, message: String },
    #[error("cannot write {path}: {message}; the profile on disk is unchanged")]
    Write { path: String, message: String },
    #[error(
        "run {run} was started under agent profile `{name}` revision {revision} ({spec_digest}); the profile is now {now}: resume refuses a changed profile (start a new run with the new one)"
    )]
    Changed {
        run: String,
        name: String,
        revision: u64,
        spec_digest: String,
        now: String,
    },
    #[error(
        "refused: this process was started by a Warrant run ({evidence}); a delta is approved by a person, not by a run's command"
    )]
    FromCommand { evidence: String },
    #[error(
        "`{name}` requires skill `{skill}` pinned at {pinned}, but its files here have digest {found}; a required skill that changed refuses the run (L3-G2)"
    )]
    SkillDigest {
        name: String,
        skill: String,
        pinned: String,
        found: String,
    },
    #[error(
        "run {run} was started under agent profile `{name}` with skill `{skill}` at {pinned}; the skill is now {now}: resume refuses a changed skill (start a new run)"
    )]
    SkillChanged {
        run: String,
        name: String,
        skill: String,
        pinned: String,
        now: String,
    },
}

impl OapError {
    pub fn code(&self) -> &'static str {
        match self {
            Self::Read { .. } => "W-OAP-001",
            Self::Parse { .. } => "W-OAP-002",
            Self::Version { .. } => "W-OAP-003",
            Self::Invalid { .. } => "W-OAP-004",
            Self::NotFound { .. } => "W-OAP-005",
            Self::Collision { .. } => "W-OAP-006",
            Self::Cycle { .. } => "W-OAP-007",
            Self::Depth { .. } => "W-OAP-008",
            Self::Pin { .. } => "W-OAP-009",
            Self::Required { .. } => "W-OAP-010",
            Self::Conflict { .. } | Self::StaleProposal { .. } => "W-OAP-011",
            Self::Digest { .. } => "W-OAP-012",
            Self::Writeback { .. } => "W-OAP-013",
            Self::Apply { .. } => "W-OAP-014",
            Self::Write { .. } => "W-OAP-015",
            Self::Changed { .. } => "W-OAP-016",
            Self::FromCommand { .. } => "W-OAP-017",
            Self::SkillDigest { .. } => "W-OAP-018",
            Self::SkillChanged { .. } => "W-OAP-019",
        }
    }

    /// What the person can do next, in words any front end can show.
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            Self::NotFound { .. } => Some(
                "put NAME.agent.yaml under <workspace>/.agents/, the user directory's agents/ or ~/.agentprofiles/ (`warrant profiles list` shows the roots)",
            ),
            Self::Invalid { .. } | Self::Parse { .. } | Self::Version { .. } => {
                Some("`warrant profiles validate FILE` lists every finding")
            }
            Self::Conflict { .. } => Some(
                "produce the delta again from the profile's current revision (`warrant profiles show NAME`)",
            ),
            Self::Writeback { .. } => Some(
                "a person applies it with `warrant profiles apply DELTA --approve`, or the profile's lifecycle.writeback allows it",
            ),
            Self::Read { .. }
            | Self::Collision { .. }
            | Self::Cycle { .. }
            | Self::Depth { .. }
            | Self::Pin { .. }
            | Self::Required { .. }
            | Self::Digest { .. }
            | Self::StaleProposal { .. }
            | Self::Apply { .. }
            | Self::Write { .. }
            | Self::Changed { .. }
            | Self::FromCommand { .. }
            | Self::SkillChanged { .. } => None,
            Self::SkillDigest { .. } => Some(
                "`warrant skills verify` and `warrant skills show NAME` show the skill's digest; a person approves the new files (`warrant skills approve NAME`) and updates the profile's pin, or restores the files",
            ),
        }
    }
}
