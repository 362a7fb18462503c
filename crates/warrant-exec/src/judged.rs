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
use warrant_core::{CanonicalPath, ShellExec, Verb};
use warrant_kernel::Authorized;

use crate::changeset::{Changeset, EffectClass, Finding};
use crate::error::ExecError;
use crate::sandbox::OverlaySpec;

/// The copy-on-write layer of one command: created empty, removed when dropped.
#[derive(Debug)]
pub struct Layer {
    dir: PathBuf,
    pub spec: OverlaySpec,
    /// Kept on disk when dropped: its changes wait for a person (see [`settle`]).
    kept: bool,
}

impl Layer {
    /// A fresh layer over `workspace` for a command of `run` (recorded in the layer's `owner`
    /// file, so a sweep can tell whether anything still needs it; see [`owned_by`]).
    pub fn create(workspace: &CanonicalPath, run: &str) -> Result<Self, ExecError> {
        let base = layers_dir().ok_or_else(|| ExecError::Io {
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
        let owner = serde_json::json!({"workspace": workspace.as_str(), "run": run}).to_string();
        std::fs::create_dir(&upper)
            .and_then(|()| std::fs::create_dir(&work))
            .and_then(|()| std::fs::write(dir.join(OWNER), owner))
            .map_err(|e| io("create the command's copy-on-write layer", e))?;
        Ok(Self {
            spec: OverlaySpec {
                lower: workspace.clone(),
                upper,
                work,
            },
            dir,
            kept: false,
        })
    }

    /// The layer a pending judgement recorded, to settle it.
    fn open(dir: &Path, workspace: &CanonicalPath) -> Self {
        Self {
            spec: OverlaySpec {
                lower: workspace.clone(),
                upper: dir.join("upper"),
                work: dir.join("work"),
            },
            dir: dir.to_path_buf(),
            kept: false,
        }
    }
}

impl Drop for Layer {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        remove_layer(&self.dir);
    }
}

/// The file in a layer naming the workspace and run it was made for.
const OWNER: &str = "owner";

fn remove_layer(dir: &Path) {
    // overlayfs leaves `work/work` with mode 000; open it up so it can be removed.
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(
        dir.join("work/work"),
        std::fs::Permissions::from_mode(0o700),
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// A layer on disk and the run it was made for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KeptLayer {
    pub dir: PathBuf,
    pub run: String,
}

/// The layers on disk made for commands in `workspace` (by their `owner` file; layers of other
/// workspaces, and any without one, are not listed).
pub fn owned_by(workspace: &CanonicalPath) -> Vec<KeptLayer> {
    let Some(base) = layers_dir() else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(&base) else {
        return Vec::new();
    };
    let mut out: Vec<KeptLayer> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("layer-"))
        .filter_map(|e| {
            let text = std::fs::read_to_string(e.path().join(OWNER)).ok()?;
            let owner: serde_json::Value = serde_json::from_str(&text).ok()?;
            (owner["workspace"].as_str() == Some(workspace.as_str())).then(|| KeptLayer {
                dir: e.path(),
                run: owner["run"].as_str().unwrap_or_default().to_owned(),
            })
        })
        .collect();
    out.sort_by(|a, b| a.dir.cmp(&b.dir));
    out
}

/// Remove a kept layer nothing needs any more. Only a `layer-*` directory directly in the
/// layers directory is removed (a path read from a journal names nothing else); `false` when
/// `dir` is not one.
pub fn discard(dir: &Path) -> bool {
    let is_layer = layers_dir().is_some_and(|base| dir.parent() == Some(base.as_path()))
        && dir
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("layer-"));
    if is_layer {
        remove_layer(dir);
    }
    is_layer
}

/// The per-workspace layers over toolchain caches (`~/.cargo/registry` …): for each cache, an
/// upper and a work directory under `<state>/warrant/caches/<workspace>/<cache>/`, created when
/// missing and kept, so what one command wrote there the next command in the same workspace
/// finds, another workspace does not, and the real cache is never written.
pub fn cache_layers(
    workspace: &CanonicalPath,
    caches: &[CanonicalPath],
) -> Result<Vec<OverlaySpec>, ExecError> {
    if caches.is_empty() {
        return Ok(Vec::new());
    }
    let base = cache_dir(workspace).ok_or_else(|| ExecError::Io {
        op: "find a place for the workspace's toolchain caches (no HOME or XDG_STATE_HOME)",
        path: workspace.clone(),
        message: "set HOME".to_owned(),
    })?;
    let mut out = Vec::new();
    for cache in caches {
        let name = cache
            .as_path()
            .file_name()
            .map_or_else(|| "cache".to_owned(), |n| n.to_string_lossy().into_owned());
        let dir = base.join(format!("{}-{name}", short_digest(cache.as_str())));
        let (upper, work) = (dir.join("upper"), dir.join("work"));
        std::fs::create_dir_all(&upper)
            .and_then(|()| std::fs::create_dir_all(&work))
            .map_err(|e| ExecError::Io {
                op: "create the workspace's layer over a toolchain cache",
                path: cache.clone(),
                message: e.to_string(),
            })?;
        out.push(OverlaySpec {
            lower: cache.clone(),
            upper,
            work,
        });
    }
    Ok(out)
}

/// Where the toolchain-cache layers of `workspace` live:
/// `<state>/warrant/caches/<16 hex digits of the workspace path's SHA-256>`.
pub fn cache_dir(workspace: &CanonicalPath) -> Option<PathBuf> {
    let layers = layers_dir()?;
    let warrant = layers.parent()?;
    Some(
        warrant
            .join("caches")
            .join(short_digest(workspace.as_str())),
    )
}

/// Where the view's walk of `workspace` for denied names is remembered
/// (`<state>/warrant/census/<16 hex digits of the workspace path's SHA-256>.json`, see
/// [`crate::census`]).
pub fn census_memory(workspace: &CanonicalPath) -> Option<PathBuf> {
    let warrant = state_dir()?;
    Some(
        warrant
            .join("census")
            .join(format!("{}.json", short_digest(workspace.as_str()))),
    )
}

fn short_digest(text: &str) -> String {
    use sha2::Digest as _;
    let full = hex::encode(sha2::Sha256::digest(text.as_bytes()));
    full[..16].to_owned()
}

/// Where layers live: `$XDG_STATE_HOME/warrant/layers`, else `~/.local/state/warrant/layers`.
pub fn layers_dir() -> Option<PathBuf> {
    state_dir().map(|s| s.join("layers"))
}

/// Warrant's state directory for this user: `$XDG_STATE_HOME/warrant`, else
/// `~/.local/state/warrant` (outside every workspace; a command's view hides the home).
pub fn state_dir() -> Option<PathBuf> {
    let from = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    from("XDG_STATE_HOME")
        .map(|s| s.join("warrant"))
        .or_else(|| from("HOME").map(|h| h.join(".local/state/warrant")))
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
    /// The changes wait for a person (a deletion or truncation the command's approval did not
    /// cover); the layer holding them, kept until they are settled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<PathBuf>,
}

/// Read what the command changed in `layer`, classify it and apply it when it may land:
/// `change` always, `destructive` when `by_person`, else it waits for a person (the layer is
/// kept and the judgement is `pending`), `refused` never.
pub fn judge(
    layer: &mut Layer,
    protected: &[String],
    denied: &[String],
    scratch: &[String],
    by_person: bool,
) -> Result<Judgement, ExecError> {
    let lower = layer.spec.lower.as_path();
    let upper = layer.spec.upper.as_path();
    let changes = Changeset::read(lower, upper)?;
    let mut effect = changes.effect(protected, denied);
    // Losing regenerable build output is not destructive (an incremental build replaces it).
    effect
        .findings
        .retain(|f| f.class() != EffectClass::Destructive || !in_scratch(f.path(), scratch));
    effect.class = match effect.findings.iter().map(Finding::class).max() {
        Some(worst) => worst,
        None if effect.class == EffectClass::Nothing => EffectClass::Nothing,
        None => EffectClass::Change,
    };
    let withheld = match effect.class {
        EffectClass::Nothing | EffectClass::Change => None,
        EffectClass::Destructive if by_person => None,
        EffectClass::Destructive => Some(
            "it deletes or shortens files that existed, which waits for a person; nothing it did has reached the workspace yet"
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
    let pending = (effect.class == EffectClass::Destructive && !by_person).then(|| {
        layer.kept = true;
        layer.dir.clone()
    });
    Ok(Judgement {
        class: effect.class,
        applied,
        withheld,
        findings: effect.findings,
        shown: changes.render(),
        digest: changes.digest()?.to_string(),
        entries: changes.entries.len(),
        pending,
    })
}

/// Settle a pending judgement once a person answered: re-read the kept layer, check it still
/// holds exactly the changeset that was shown (its digest), apply it when `approved`, and
/// discard the layer either way. Returns the judgement as it now stands.
pub fn settle(
    action: &Authorized<ShellExec>,
    judgement: &Judgement,
    workspace: &CanonicalPath,
    approved: bool,
) -> Result<Judgement, ExecError> {
    // Only a command decided as contained left a layer to settle.
    if !action.get().contained {
        return Err(ExecError::WrongAction {
            executor: "settle",
            verb: Verb::ShellExec,
        });
    }
    let mut out = judgement.clone();
    let Some(dir) = &judgement.pending else {
        return Ok(out);
    };
    out.pending = None;
    let layer = Layer::open(dir, workspace);
    let lower = layer.spec.lower.as_path();
    let upper = layer.spec.upper.as_path();
    if !approved {
        out.withheld =
            Some("a person denied them; nothing the command did reached the workspace".to_owned());
        return Ok(out);
    }
    let changes = Changeset::read(lower, upper)?;
    let now = changes.digest()?.to_string();
    if now != judgement.digest {
        out.withheld = Some(format!(
            "the command's changes are no longer what the person was shown ({} then, {now} now); nothing was applied",
            judgement.digest
        ));
        return Ok(out);
    }
    changes.apply(lower, upper)?;
    out.applied = true;
    out.withheld = None;
    Ok(out)
}

/// Whether a workspace-relative path lies under a scratch directory: a bare name matches any
/// directory component (`target` in `crates/x/target/debug/a.o`), an entry with a `/` is a
/// workspace path prefix.
pub fn in_scratch(path: &str, scratch: &[String]) -> bool {
    let dirs: Vec<&str> = path.split('/').collect();
    let parents = &dirs[..dirs.len().saturating_sub(1)];
    scratch.iter().any(|s| {
        if s.contains('/') {
            let prefix = s.trim_end_matches('/');
            path.starts_with(&format!("{prefix}/"))
        } else {
            parents.iter().any(|d| d == s)
        }
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
