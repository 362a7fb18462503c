//! Changes land after they are judged. A contained command writes into a copy-on-write layer
//! over the workspace ([`crate::sandbox::OverlaySpec`], mounted by [`crate::view`]); when it
//! ends, its changeset ([`crate::changeset`]) is read from the layer and classified by effect:
//! new and modified files land at once; deleting or shortening what existed lands only when a
//! person approved the command; touching a protected or denied name never lands. What did not
//! land is discarded, so the workspace is as it was.
//!
//! The layer lives outside the workspace, in the user's state directory
//! (`$XDG_STATE_HOME/warrant/layers`, else `~/.local/state/warrant/layers`), one directory per
//! command, removed once its changes are applied or discarded.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use warrant_core::CanonicalPath;

use crate::changeset::{Changeset, EffectClass, Finding};
use crate::error::ExecError;
use crate::sandbox::OverlaySpec;

/// The copy-on-write layer of one command: created empty, removed when dropped.
#[derive(Debug)]
pub struct Layer {
    dir: PathBuf,
    pub spec: OverlaySpec,
}

impl Layer {
    /// A fresh layer over `workspace`.
    pub fn create(workspace: &CanonicalPath) -> Result<Self, ExecError> {
        let base = state_dir().ok_or_else(|| ExecError::Io {
            op: "find a place for the command's copy-on-write layer (no HOME or XDG_STATE_HOME)",
            path: workspace.clone(),
            message: "set HOME".to_owned(),
        })?;
        let io = |op: &'static str, e: std::io::Error| ExecError::Io {
            op,
            path: workspace.clone(),
            message: e.to_string(),
        };
        std::fs::create_dir_all(&base).map_err(|e| io("create the layers directory", e))?;
        let dir = base.join(format!("layer-{:016x}", rand::random::<u64>()));
        std::fs::create_dir(&dir).map_err(|e| io("create the command's copy-on-write layer", e))?;
        let upper = dir.join("upper");
        let work = dir.join("work");
        std::fs::create_dir(&upper)
            .and_then(|()| std::fs::create_dir(&work))
            .map_err(|e| io("create the command's copy-on-write layer", e))?;
        Ok(Self {
            spec: OverlaySpec {
                lower: workspace.clone(),
                upper,
                work,
            },
            dir,
        })
    }
}

impl Drop for Layer {
    fn drop(&mut self) {
        // overlayfs' work directory can hold a root-only `work/` entry; removal is best effort.
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn state_dir() -> Option<PathBuf> {
    let from = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    from("XDG_STATE_HOME")
        .map(|s| s.join("warrant/layers"))
        .or_else(|| from("HOME").map(|h| h.join(".local/state/warrant/layers")))
}

/// What became of a contained command's changes; journaled with its result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Judgement {
    /// `nothing`, `change`, `destructive` or `refused`.
    pub class: EffectClass,
    /// Whether the changes are now in the workspace.
    pub applied: bool,
    /// Why they were not, when they were not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withheld: Option<String>,
    /// The paths behind a class worse than `change`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// The file list and diffs, as a person reads them.
    pub shown: String,
    /// The changeset's digest (RFC 8785 canonical JSON, SHA-256).
    pub digest: String,
    pub entries: usize,
}

/// Read what the command changed in `layer`, classify it and apply it when it may land:
/// `change` always, `destructive` only when `by_person`, `refused` never.
pub fn judge(
    layer: &Layer,
    protected: &[String],
    denied: &[String],
    by_person: bool,
) -> Result<Judgement, ExecError> {
    let lower = layer.spec.lower.as_path();
    let upper = layer.spec.upper.as_path();
    let changes = Changeset::read(lower, upper)?;
    let effect = changes.effect(protected, denied);
    let withheld = match effect.class {
        EffectClass::Nothing | EffectClass::Change => None,
        EffectClass::Destructive if by_person => None,
        EffectClass::Destructive => Some(
            "it deletes or shortens files that existed, and no person approved this command; nothing it did reached the workspace — ask for it through a command a person approves"
                .to_owned(),
        ),
        EffectClass::Refused => Some(
            "it touches a protected or secret name (.git, .warrant, .env, key files), which no command may change; nothing it did reached the workspace"
                .to_owned(),
        ),
    };
    let applied = match withheld {
        None if !changes.is_empty() => {
            changes.apply(lower, upper)?;
            true
        }
        None | Some(_) => false,
    };
    Ok(Judgement {
        class: effect.class,
        applied,
        withheld,
        findings: effect.findings,
        shown: changes.render(),
        digest: changes.digest()?.to_string(),
        entries: changes.entries.len(),
    })
}

/// The workspace-relative protected names of a plan (`.git`, `.warrant`).
pub fn relative_names(paths: &[CanonicalPath], workspace: &Path) -> Vec<String> {
    let mut out: Vec<String> = paths
        .iter()
        .filter_map(|p| p.as_path().strip_prefix(workspace).ok())
        .map(|p| p.to_string_lossy().into_owned())
        .filter(|p| !p.is_empty())
        .collect();
    out.sort();
    out.dedup();
    out
}
