//! Applying an `AgentStateDelta` (OAP §6): validate it, check the target's revision (a stale
//! delta is refused, never written blind) and digest, honour `lifecycle.writeback`, apply every
//! operation or none, enforce retention, bump the revision, append history, and write the file
//! atomically (temporary file in the same directory, fsync, rename) under a lock, checking the
//! revision once more just before the rename. Proposals are never applied: they are returned
//! for a person, the ones touching tools, permissions, memory or subagents as high risk.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use open_agent_profile as oap;
use serde::Serialize;
use serde_json::Value;

use crate::{Catalog, Document, Finding, OapError, check, load_profile, parse_file};

/// Sections a proposal may widen; any change there is high risk whatever the delta says.
pub const WIDENING: [&str; 4] = [
    "/spec/tools",
    "/spec/permissions",
    "/spec/memory",
    "/spec/runtime/subagents",
];

/// A proposal of the delta, held for a person.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Proposal {
    pub path: String,
    pub op: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    pub rationale: String,
    /// `high` for any proposal in [`WIDENING`], else what the delta declared (default medium).
    pub risk: String,
    /// The delta declared a lower risk than Warrant assigns.
    pub risk_raised: bool,
}

/// What applying a delta did.
#[derive(Clone, Debug, Serialize)]
pub struct Applied {
    pub profile: String,
    pub path: PathBuf,
    pub from_revision: u64,
    pub to_revision: u64,
    pub operations: usize,
    pub warnings: Vec<String>,
    pub proposals: Vec<Proposal>,
    pub profile_digest: String,
}

/// Who applies and whether a person approved (`writeback: propose` needs it).
#[derive(Clone, Debug)]
pub struct ApplyAs<'a> {
    pub approved: bool,
    pub actor: &'a str,
    /// Fixed time for tests; the clock otherwise.
    pub now: Option<chrono::DateTime<chrono::Utc>>,
}

/// The proposals of a delta, risk assigned by Warrant (L2-A8).
pub fn proposals(delta: &Document) -> Vec<Proposal> {
    delta
        .get("proposals")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| {
            let path = p
                .get("path")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let declared = p
                .get("risk")
                .and_then(Value::as_str)
                .unwrap_or("medium")
                .to_owned();
            let widening = WIDENING
                .iter()
                .any(|w| path == *w || path.starts_with(&format!("{w}/")));
            let risk = if widening {
                "high".to_owned()
            } else {
                declared.clone()
            };
            Proposal {
                op: p
                    .get("op")
                    .and_then(Value::as_str)
                    .unwrap_or("replace")
                    .to_owned(),
                value: p.get("value").cloned(),
                rationale: p
                    .get("rationale")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                risk_raised: risk != declared,
                risk,
                path,
            }
        })
        .collect()
}

fn revision_of(doc: &Document) -> u64 {
    doc.get("metadata")
        .and_then(|m| m.get("revision"))
        .and_then(Value::as_u64)
        .unwrap_or(1)
}

/// Loads and validates a delta (L2-A1); an invalid one is refused with every finding.
pub fn load_delta(path: &Path) -> Result<Document, OapError> {
    let doc = parse_file(path)?;
    let report = check(&doc, path);
    if !report.ok || report.kind != "AgentStateDelta" {
        let mut findings = report.errors;
        if findings.is_empty() {
            findings.push(Finding {
                pointer: "/kind".into(),
                message: format!("`{}` where an AgentStateDelta was expected", report.kind),
            });
        }
        return Err(OapError::Invalid {
            path: path.display().to_string(),
            kind: "AgentStateDelta".into(),
            findings,
        });
    }
    Ok(doc)
}

/// Applies `delta` to the profile file `profile_path` (found by the delta's target name when
/// `None`).
pub fn apply(
    catalog: &Catalog,
    delta: &Document,
    profile_path: Option<&Path>,
    who: &ApplyAs<'_>,
) -> Result<Applied, OapError> {
    let target = delta.get("target");
    let name = target
        .and_then(|t| t.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let path = match profile_path {
        Some(p) => p.to_path_buf(),
        None => catalog.find(&name)?.path.clone(),
    };
    let (profile, _) = load_profile(&path)?;
    let current = revision_of(&profile);
    let wanted = target
        .and_then(|t| t.get("revision"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    if wanted != current {
        return Err(OapError::Conflict {
            name,
            target: wanted,
            current,
        });
    }
    if let Some(pinned) = target.and_then(|t| t.get("digest")).and_then(Value::as_str) {
        let actual = oap::profile_digest(&profile).unwrap_or_default();
        if pinned != actual {
            return Err(OapError::Digest {
                pinned: pinned.to_owned(),
                actual,
            });
        }
    }
    let writeback = profile
        .get("spec")
        .and_then(|s| s.get("lifecycle"))
        .and_then(|l| l.get("writeback"))
        .and_then(Value::as_str)
        .unwrap_or("propose")
        .to_owned();
    let ops = delta
        .get("operations")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    match writeback.as_str() {
        "off" => {
            return Err(OapError::Writeback {
                name,
                writeback,
                why: "the profile keeps no learned state; the delta is discarded".into(),
            });
        }
        "auto" => {}
        _ if who.approved || ops == 0 => {}
        _ => {
            return Err(OapError::Writeback {
                name,
                writeback,
                why: "a person must approve the delta before it is applied".into(),
            });
        }
    }
    let proposals = proposals(delta);
    if ops == 0 {
        // Only proposals: nothing is written, they go to a person.
        return Ok(Applied {
            profile: name,
            path,
            from_revision: current,
            to_revision: current,
            operations: 0,
            warnings: vec![],
            proposals,
            profile_digest: oap::profile_digest(&profile).unwrap_or_default(),
        });
    }
    let applied = oap::apply_delta(
        &profile,
        delta,
        oap::ApplyOptions {
            // `auto` applies state without approval; proposals are never applied either way.
            approved: true,
            actor: Some(who.actor),
            now: who.now,
        },
    )
    .map_err(|e| match e {
        oap::ApplyError::Conflict(c) => OapError::Apply {
            name: name.clone(),
            message: c.0,
        },
        oap::ApplyError::Message(m) => OapError::Apply {
            name: name.clone(),
            message: m,
        },
    })?;
    let mut result = applied.profile;
    if !who.approved
        && let Some(h) = result
            .get_mut("history")
            .and_then(Value::as_array_mut)
            .and_then(|h| h.last_mut())
            .and_then(Value::as_object_mut)
    {
        h.remove("approved_by");
    }
    // The result must still be a valid profile, or nothing is written.
    let report = check(&result, &path);
    if !report.ok {
        return Err(OapError::Apply {
            name,
            message: format!(
                "the result would not be valid:{}",
                report
                    .errors
                    .iter()
                    .map(|f| format!(" {f};"))
                    .collect::<String>()
            ),
        });
    }
    let text =
        oap::serialize(&result, oap::OapFormat::from_path(&path)).map_err(|e| OapError::Write {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
    write_checked(&path, current, text.as_bytes())?;
    Ok(Applied {
        profile: name,
        path,
        from_revision: current,
        to_revision: revision_of(&result),
        operations: ops,
        warnings: applied.warnings,
        proposals,
        profile_digest: report.profile_digest.unwrap_or_default(),
    })
}

/// Writes `data` over `path` atomically, under an exclusive lock on a sibling lock file, after
/// checking that the file is still at `expected` revision (another writer in between makes it
/// a conflict, not a lost update).
pub fn write_checked(path: &Path, expected: u64, data: &[u8]) -> Result<(), OapError> {
    let failed = |message: String| OapError::Write {
        path: path.display().to_string(),
        message,
    };
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let lock_path = dir.join(format!(
        ".{}.lock",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("profile")
    ));
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| failed(e.to_string()))?;
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| failed(e.to_string()))?;
    let (now, _) = load_profile(path)?;
    let at = revision_of(&now);
    if at != expected {
        let name = crate::name_of(&now).unwrap_or_default();
        return Err(OapError::Conflict {
            name,
            target: expected,
            current: at,
        });
    }
    oap::write_atomically(path, data).map_err(|e| failed(e.to_string()))
    // The lock is released when `lock` is dropped.
}
