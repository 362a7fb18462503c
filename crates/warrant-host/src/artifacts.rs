//! Artifacts of this installation: the tools a run is offered (`warrant-artifacts`, signing
//! with the installation's key), and the checks of what they made: `verify` one file against
//! its provenance (with the installation's keys, or only a list of public keys on another
//! machine), `list` the artifacts found in the workspace with their verdicts.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use warrant_artifacts::{ArtifactVerdict, Artifacts, verify_artifact};
use warrant_audit::PublicKeys;
use warrant_core::SystemClock;

use crate::{Host, HostError, Result, controls};

/// Directories `list` does not walk into: Warrant's own state, git's, and build output.
const SKIPPED: &[&str] = &[".warrant", ".git", "target", "node_modules", ".venv"];
/// How deep `list` walks below the workspace.
const MAX_DEPTH: usize = 12;

impl Host {
    /// The artifact tools, signing with the installation's key; every content screened by
    /// the installation's scanner first (off only for a debug build's negative control,
    /// `WARRANT_TEST_DISABLE=artifact-scan`).
    pub fn artifact_tools(&self) -> Artifacts {
        let screen = (!controls::disabled("artifact-scan")).then(|| Arc::clone(&self.redactor));
        Artifacts::new(
            Arc::new(self.inst.sealer.key().clone()),
            screen,
            Arc::new(SystemClock),
        )
    }

    /// Verifies one artifact with the installation's keys (current and retired).
    pub fn artifact_verify(&self, file: &Path) -> ArtifactVerdict {
        let current = self.inst.sealer.key().kid();
        verify_artifact(file, &self.inst.public_keys, Some(&current), false)
    }

    /// The artifacts in the workspace (every file with provenance beside it), verified; only
    /// those of `run` when given.
    pub fn artifact_list(&self, run: Option<&str>) -> Vec<ArtifactVerdict> {
        let mut found = Vec::new();
        walk(&self.paths.workspace, 0, &mut found);
        found.sort();
        found
            .iter()
            .map(|f| self.artifact_verify(f))
            .filter(|v| run.is_none_or(|r| v.predicate.as_ref().is_some_and(|p| p.run == r)))
            .collect()
    }
}

/// Verifies one artifact with only a file of public keys: no installation needed. The key
/// that signed is reported as listed (whether it is current is not known there).
pub fn verify_with_keys(file: &Path, pubkeys: &Path) -> Result<ArtifactVerdict> {
    let keys = PublicKeys::load(pubkeys).map_err(|e| HostError::bad_input(&e))?;
    Ok(verify_artifact(file, &keys, None, true))
}

/// Files `NAME` with `NAME.intoto.jsonl` beside them.
fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth > MAX_DEPTH {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if !SKIPPED.contains(&name.as_str()) {
                walk(&path, depth + 1, out);
            }
        } else if let Some(artifact) = name.strip_suffix(warrant_exec::fs::SIDECAR_SUFFIX) {
            out.push(dir.join(artifact));
        }
    }
}
