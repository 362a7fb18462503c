//! Applying a proposal a person approved (OAP §6). A session's delta may propose changes to a
//! profile's `metadata` or `spec`; the spec never lets them apply on their own, even under
//! `writeback: auto`. Warrant routes each to a person as a request; when one approves, this
//! applies the proposal's JSON-pointer operations to the profile the proposal was made for:
//! the file must still be at the revision (and digest) the delta targeted, the result must
//! validate, the revision is bumped, the history records who approved, and the file is
//! written atomically (temporary file, fsync, rename) after the revision is checked once
//! more under the lock. Anything that fails leaves the file as it was.

use std::path::{Path, PathBuf};

use open_agent_profile as oap;
use serde::Serialize;
use serde_json::{Map, Value, json};
use warrant_kernel::ProfileChange;

use crate::delta::{Proposal, write_checked};
use crate::{Catalog, Document, OapError, check, load_profile};

/// What approving a proposal wrote.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ProposalApplied {
    pub profile: String,
    pub path: PathBuf,
    pub from_revision: u64,
    pub to_revision: u64,
    pub profile_digest: String,
}

/// The proposal as operations on the profile.
pub fn changes(p: &Proposal) -> Vec<ProfileChange> {
    vec![ProfileChange {
        op: p.op.clone(),
        path: p.path.clone(),
        value: p.value.clone(),
    }]
}

/// The change in words: each operation's path with the value before (`-`) and after (`+`),
/// as `profile` holds it now.
pub fn diff_lines(profile: &Document, changes: &[ProfileChange]) -> Vec<String> {
    let doc = Value::Object(profile.clone());
    let mut out = Vec::new();
    for c in changes {
        let before = doc.pointer(&c.path);
        out.push(format!("{} {}", c.op, c.path));
        if let Some(b) = before {
            out.push(format!("- {}", compact(b)));
        }
        match (c.op.as_str(), &c.value) {
            ("remove", _) | (_, None) => {}
            (_, Some(v)) => out.push(format!("+ {}", compact(v))),
        }
    }
    out
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn revision_of(doc: &Document) -> u64 {
    doc.get("metadata")
        .and_then(|m| m.get("revision"))
        .and_then(Value::as_u64)
        .unwrap_or(1)
}

/// Who approved, and when (the clock when `None`).
#[derive(Clone, Debug)]
pub struct ApprovedBy<'a> {
    pub actor: &'a str,
    /// The session whose delta proposed it.
    pub session: &'a str,
    pub now: Option<chrono::DateTime<chrono::Utc>>,
}

/// What a proposal was made for: the profile's revision, its digest then, and its spec
/// digest then (metadata and spec without revision, time and trust).
#[derive(Clone, Debug)]
pub struct Target<'a> {
    pub name: &'a str,
    pub revision: u64,
    pub digest: &'a str,
    pub spec_digest: &'a str,
}

/// Applies `changes`, proposed for `target`, to the profile file (found by name in
/// `catalog`), as approved by `by`.
pub fn apply_approved(
    catalog: &Catalog,
    target: &Target<'_>,
    changes: &[ProfileChange],
    by: &ApprovedBy<'_>,
) -> Result<ProposalApplied, OapError> {
    let path = catalog.find(target.name)?.path.clone();
    apply_at(&path, target, changes, by)
}

/// [`apply_approved`] on the file at `path`. The proposal is fresh when the profile is the
/// one it was made for (same revision and digest), or when only its learned state changed
/// since (a later revision with the same spec digest: sessions' state deltas, applied by the
/// applicator, move the revision and leave the metadata and spec the person reviews alone).
/// Anything else is stale (W-OAP-011) and nothing is written.
pub fn apply_at(
    path: &Path,
    target: &Target<'_>,
    changes: &[ProfileChange],
    by: &ApprovedBy<'_>,
) -> Result<ProposalApplied, OapError> {
    let name = target.name;
    let (profile, _) = load_profile(path)?;
    let current = revision_of(&profile);
    let actual = oap::profile_digest(&profile).unwrap_or_default();
    let spec_now = check(&profile, path).spec_digest.unwrap_or_default();
    let stale = |why: String| OapError::StaleProposal {
        name: name.to_owned(),
        target: target.revision,
        current,
        why,
    };
    if current == target.revision {
        if !target.digest.is_empty() && actual != target.digest {
            return Err(stale(format!(
                "its digest is {actual}, not {}",
                target.digest
            )));
        }
    } else if current < target.revision {
        return Err(stale("it is older than the proposal's".to_owned()));
    } else if spec_now != target.spec_digest {
        return Err(stale(format!(
            "its metadata or spec changed since (spec digest {spec_now}, not {})",
            target.spec_digest
        )));
    }
    let failed = |message: String| OapError::Apply {
        name: name.to_owned(),
        message,
    };
    let mut doc = Value::Object(profile);
    let mut sections: Vec<&str> = Vec::new();
    for (i, c) in changes.iter().enumerate() {
        let section =
            apply_change(&mut doc, c).map_err(|m| failed(format!("operation {i}: {m}")))?;
        if !sections.contains(&section) {
            sections.push(section);
        }
    }
    let stamp = by
        .now
        .unwrap_or_else(chrono::Utc::now)
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let to = current + 1;
    let Value::Object(mut result) = doc else {
        return Err(failed("the profile is not an object".into()));
    };
    if let Some(m) = result.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert("revision".into(), json!(to));
        m.insert("updated_at".into(), json!(stamp));
    }
    let mut entry = Map::new();
    entry.insert("revision".into(), json!(to));
    entry.insert("at".into(), json!(stamp));
    entry.insert("by".into(), json!(by.actor));
    entry.insert(
        "change".into(),
        json!(format!(
            "proposal approved: {}",
            changes
                .iter()
                .map(|c| format!("{} {}", c.op, c.path))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    );
    if !by.session.is_empty() {
        entry.insert("session_id".into(), json!(by.session));
    }
    entry.insert("harness".into(), json!("warrant"));
    entry.insert("approved_by".into(), json!(by.actor));
    entry.insert("sections".into(), json!(sections));
    let history = result
        .entry("history")
        .or_insert_with(|| Value::Array(Vec::new()));
    match history.as_array_mut() {
        Some(h) => h.push(Value::Object(entry)),
        None => return Err(failed("`history` is not a list".into())),
    }
    let report = check(&result, path);
    if !report.ok {
        return Err(failed(format!(
            "the result would not be valid:{}",
            report
                .errors
                .iter()
                .map(|f| format!(" {f};"))
                .collect::<String>()
        )));
    }
    let text =
        oap::serialize(&result, oap::OapFormat::from_path(path)).map_err(|e| OapError::Write {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
    write_checked(path, current, text.as_bytes())?;
    Ok(ProposalApplied {
        profile: name.to_owned(),
        path: path.to_path_buf(),
        from_revision: current,
        to_revision: to,
        profile_digest: report.profile_digest.unwrap_or_default(),
    })
}

/// Applies one operation; returns the section it changed. Only `/metadata` and `/spec`, and
/// never what identifies the profile or what the applicator owns (name, id, revision,
/// updated_at, trust).
fn apply_change(doc: &mut Value, c: &ProfileChange) -> Result<&'static str, String> {
    let section = if c.path == "/spec" || c.path.starts_with("/spec/") {
        "spec"
    } else if c.path.starts_with("/metadata/") {
        "metadata"
    } else {
        return Err(format!(
            "`{}` is not under /metadata or /spec, where proposals apply",
            c.path
        ));
    };
    for owned in ["name", "id", "revision", "updated_at", "trust"] {
        let p = format!("/metadata/{owned}");
        if c.path == p || c.path.starts_with(&format!("{p}/")) {
            return Err(format!("`{}` is not a proposal's to change", c.path));
        }
    }
    let tokens: Vec<String> = c.path[1..]
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect();
    let Some((last, parents)) = tokens.split_last() else {
        return Err("an empty path".into());
    };
    let mut at = doc;
    for t in parents {
        at = match at {
            Value::Object(m) => m.get_mut(t),
            Value::Array(a) => t.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => None,
        }
        .ok_or_else(|| format!("`{}` does not resolve", c.path))?;
    }
    let value = || {
        c.value
            .clone()
            .ok_or_else(|| format!("`{} {}` needs a value", c.op, c.path))
    };
    match (c.op.as_str(), at) {
        ("add", Value::Object(m)) => {
            m.insert(last.clone(), value()?);
        }
        ("replace", Value::Object(m)) => match m.get_mut(last) {
            Some(slot) => *slot = value()?,
            None => return Err(format!("`{}` does not resolve", c.path)),
        },
        ("remove", Value::Object(m)) => {
            if m.remove(last).is_none() {
                return Err(format!("`{}` does not resolve", c.path));
            }
        }
        ("add", Value::Array(a)) => {
            let v = value()?;
            if last == "-" {
                a.push(v);
            } else {
                match last.parse::<usize>() {
                    Ok(i) if i <= a.len() => a.insert(i, v),
                    _ => return Err(format!("`{}` does not resolve", c.path)),
                }
            }
        }
        ("replace", Value::Array(a)) => {
            let v = value()?;
            match last.parse::<usize>().ok().and_then(|i| a.get_mut(i)) {
                Some(slot) => *slot = v,
                None => return Err(format!("`{}` does not resolve", c.path)),
            }
        }
        ("remove", Value::Array(a)) => match last.parse::<usize>() {
            Ok(i) if i < a.len() => {
                a.remove(i);
            }
            _ => return Err(format!("`{}` does not resolve", c.path)),
        },
        ("add" | "replace" | "remove", _) => {
            return Err(format!("`{}` does not resolve", c.path));
        }
        (other, _) => {
            return Err(format!(
                "`{other}` is not an operation a proposal may make (add, replace, remove)"
            ));
        }
    }
    Ok(section)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use pretty_assertions::assert_eq;

    use super::*;

    fn change(op: &str, path: &str, value: Option<Value>) -> ProfileChange {
        ProfileChange {
            op: op.into(),
            path: path.into(),
            value,
        }
    }

    #[test]
    fn operations_apply_under_metadata_and_spec_only() {
        let mut doc = json!({
            "metadata": {"name": "a", "revision": 2, "tags": ["x"]},
            "spec": {"tools": {"allow": ["read"]}},
            "state": {}
        });
        let table: Vec<(ProfileChange, Result<&str, &str>)> = vec![
            (
                change(
                    "replace",
                    "/spec/tools/allow",
                    Some(json!(["read", "shell"])),
                ),
                Ok("spec"),
            ),
            (
                change("add", "/metadata/tags/-", Some(json!("y"))),
                Ok("metadata"),
            ),
            (change("remove", "/metadata/tags/0", None), Ok("metadata")),
            (
                change("add", "/state/facts", Some(json!([]))),
                Err("not under"),
            ),
            (
                change("replace", "/metadata/revision", Some(json!(9))),
                Err("not a proposal's"),
            ),
            (
                change("replace", "/metadata/name", Some(json!("b"))),
                Err("not a proposal's"),
            ),
            (
                change("replace", "/spec/nope", Some(json!(1))),
                Err("does not resolve"),
            ),
            (
                change("remove", "/spec/nope", None),
                Err("does not resolve"),
            ),
            (change("add", "/spec/x", None), Err("needs a value")),
            (change("move", "/spec/tools", None), Err("not an operation")),
        ];
        for (c, want) in table {
            let got = apply_change(&mut doc, &c);
            match (got, want) {
                (Ok(s), Ok(w)) => assert_eq!(s, w, "{c:?}"),
                (Err(e), Err(w)) => assert!(e.contains(w), "{c:?}: {e}"),
                (got, want) => panic!("{c:?}: {got:?} where {want:?}"),
            }
        }
        assert_eq!(doc["spec"]["tools"]["allow"], json!(["read", "shell"]));
        assert_eq!(doc["metadata"]["tags"], json!(["y"]));
        assert_eq!(doc["metadata"]["revision"], 2);
    }

    #[test]
    fn the_diff_shows_before_and_after() {
        let Value::Object(doc) = json!({"spec": {"tools": {"allow": ["read"]}}}) else {
            unreachable!()
        };
        let lines = diff_lines(
            &doc,
            &[change(
                "replace",
                "/spec/tools/allow",
                Some(json!(["read", "shell"])),
            )],
        );
        assert_eq!(
            lines,
            vec![
                "replace /spec/tools/allow".to_owned(),
                "- [\"read\"]".to_owned(),
                "+ [\"read\",\"shell\"]".to_owned()
            ]
        );
    }
}
