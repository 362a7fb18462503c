//! Run evidence bundles: `runs export` writes one deterministic zip holding a run's events, its
//! signed audit records, the audit sink's signed checkpoint, the artifacts it made with their
//! provenance, the policy and configuration texts, the sandbox levels its commands ran under
//! and the public keys, with a manifest of every member's SHA-256 in a DSSE envelope signed by
//! the installation. `runs verify` checks one offline with only public keys and says what that
//! proves and what it cannot.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use warrant_audit::{Envelope, PublicKeys};
use warrant_core::{Coded as _, RunId};
use warrant_store::{SealedRecord, StoredEvent};

use crate::{Host, HostError, Result};

/// The DSSE payload type of a bundle's manifest.
pub const MANIFEST_TYPE: &str = "application/vnd.warrant.evidence-manifest+json";
/// The manifest's member name; every other member is listed in it.
pub const MANIFEST: &str = "manifest.dsse.json";
const EVENTS: &str = "run/events.json";
const RECORDS: &str = "audit/records.jsonl";
const CHECKPOINT: &str = "audit/checkpoint.json";
const KEYS: &str = "keys/audit.pub";
const SANDBOX: &str = "run/sandbox.json";
const APPROVALS: &str = "run/approvals.json";
/// The most a bundle may unpack to when verified.
const MAX_BUNDLE: u64 = 512 * 1024 * 1024;

/// One member as the manifest lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub name: String,
    pub sha256: String,
    pub bytes: u64,
}

/// The signed manifest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub version: u32,
    pub run: String,
    pub installation_kid: String,
    /// The policy set and profiles the run started under (from `run_started`).
    pub policy_digest: Option<String>,
    pub profiles_digest: Option<String>,
    /// What the exporter redacted from the events again, by rule (empty: nothing).
    pub redacted: BTreeMap<String, u32>,
    pub members: Vec<Member>,
}

/// What `runs export` wrote.
#[derive(Clone, Debug, Serialize)]
pub struct Exported {
    pub run: String,
    pub out: String,
    pub members: usize,
    pub bytes: u64,
    pub sha256: String,
}

/// What `runs verify` found: `ok` when nothing failed; `proves` and `cannot` in words.
#[derive(Clone, Debug, Serialize)]
pub struct BundleReport {
    pub ok: bool,
    pub run: Option<String>,
    pub signed_by: Option<String>,
    pub members: usize,
    pub events: usize,
    pub records: usize,
    pub artifacts: Vec<warrant_artifacts::ArtifactVerdict>,
    pub proves: Vec<String>,
    pub cannot: Vec<String>,
    pub problems: Vec<BundleProblem>,
}

#[derive(Clone, Debug, Serialize)]
pub struct BundleProblem {
    pub code: String,
    pub message: String,
}

fn sha256(bytes: &[u8]) -> String {
    warrant_audit::Subject::sha256("", bytes)
        .digest
        .get("sha256")
        .cloned()
        .unwrap_or_default()
}

fn json_bytes<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    serde_json::to_vec_pretty(value)
        .map(|mut v| {
            v.push(b'\n');
            v
        })
        .map_err(|e| HostError::usage("W-BUNDLE-001", format!("cannot encode: {e}")))
}

impl Host {
    /// Writes the evidence bundle of `run` to `out`. The same store gives the same bytes.
    pub fn runs_export(&self, run: &str, out: &Path) -> Result<Exported> {
        let run_id = RunId::parse(run)
            .ok_or_else(|| HostError::usage("W-BUNDLE-002", format!("`{run}` is not a run id")))?;
        let (events, records) = self.records().checked_journal(&run_id)?;
        // Secrets are redacted again: the journal seals them, but what leaves here must not
        // hold one even if a rule was added since.
        let mut redacted: BTreeMap<String, u32> = BTreeMap::new();
        let events: Vec<StoredEvent> = events
            .into_iter()
            .map(|mut e| {
                let (payload, found) = self.redactor.redact_json(&e.payload);
                for (rule, n) in found.counts {
                    *redacted.entry(rule).or_insert(0) += n;
                }
                e.payload = payload;
                e
            })
            .collect();
        let mut members: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        members.insert(EVENTS.into(), json_bytes(&events)?);
        let mut lines = String::new();
        for r in &records {
            lines.push_str(&serde_json::to_string(r).unwrap_or_default());
            lines.push('\n');
        }
        members.insert(RECORDS.into(), lines.into_bytes());
        let checkpoint = warrant_audit::checkpoint_path(self.inst.sink.path());
        if let Ok(bytes) = std::fs::read(&checkpoint) {
            members.insert(CHECKPOINT.into(), bytes);
        }
        members.insert(
            KEYS.into(),
            self.inst.public_keys.to_file_text().into_bytes(),
        );
        members.insert(SANDBOX.into(), json_bytes(&sandbox_levels(&events))?);
        // The approvals and their proofs, as the events hold them (bound like every event).
        let approvals: Vec<&StoredEvent> = events
            .iter()
            .filter(|e| e.kind.starts_with("approval_") || e.kind.starts_with("effect_judg"))
            .collect();
        members.insert(APPROVALS.into(), json_bytes(&approvals)?);
        for dir in ["policies"] {
            let Ok(entries) = std::fs::read_dir(self.paths.dot.join(dir)) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if let Ok(bytes) = std::fs::read(entry.path()) {
                    members.insert(format!("policy/{name}"), bytes);
                }
            }
        }
        if let Ok(bytes) = std::fs::read(self.paths.dot.join("config.toml")) {
            members.insert("config/config.toml".into(), bytes);
        }
        for v in self.artifact_list(Some(run)) {
            let Some(p) = &v.predicate else { continue };
            let file = self.paths.workspace.join(&p.path);
            let side = warrant_artifacts::sidecar_path(&file);
            if let (Ok(bytes), Ok(sidecar)) = (std::fs::read(&file), std::fs::read(&side)) {
                members.insert(format!("artifacts/{}", p.path), bytes);
                members.insert(
                    format!("artifacts/{}{}", p.path, warrant_exec::fs::SIDECAR_SUFFIX),
                    sidecar,
                );
            }
        }
        let started = events.first().map(|e| &e.payload);
        let digest_of = |key: &str| {
            started
                .and_then(|p| p.get(key))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let key = self.inst.sealer.key();
        let manifest = Manifest {
            version: 1,
            run: run.to_owned(),
            installation_kid: key.kid(),
            policy_digest: digest_of("policy_digest"),
            profiles_digest: digest_of("profiles_digest"),
            redacted,
            members: members
                .iter()
                .map(|(name, bytes)| Member {
                    name: name.clone(),
                    sha256: sha256(bytes),
                    bytes: bytes.len() as u64,
                })
                .collect(),
        };
        let payload = warrant_core::canonical_json(&manifest)
            .map_err(|e| HostError::usage("W-BUNDLE-001", format!("cannot encode: {e}")))?;
        let envelope = Envelope::sign(key, MANIFEST_TYPE, payload.as_bytes());
        let mut parts: Vec<(String, Vec<u8>)> = members.into_iter().collect();
        parts.push((MANIFEST.into(), json_bytes(&envelope)?));
        let zip = warrant_artifacts::render::zip_bytes(&parts).map_err(|e| {
            HostError::usage("W-BUNDLE-001", format!("cannot write the bundle: {e}"))
        })?;
        std::fs::write(out, &zip).map_err(|e| {
            HostError::usage(
                "W-BUNDLE-003",
                format!("cannot write {}: {e}", out.display()),
            )
        })?;
        Ok(Exported {
            run: run.to_owned(),
            out: out.display().to_string(),
            members: parts.len(),
            bytes: zip.len() as u64,
            sha256: sha256(&zip),
        })
    }

    /// [`verify_bundle`] with the installation's keys (current and retired).
    pub fn runs_verify(&self, file: &Path) -> Result<BundleReport> {
        verify_bundle(file, &self.inst.public_keys)
    }
}

/// The confinement every command of the run was decided under, from its proposed actions.
fn sandbox_levels(events: &[StoredEvent]) -> Value {
    let mut out = Vec::new();
    for e in events.iter().filter(|e| e.kind == "action_proposed") {
        let call = e.payload.get("call_id").cloned().unwrap_or(Value::Null);
        for a in e
            .payload
            .get("actions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if a.get("verb").and_then(Value::as_str) == Some("shell.exec") {
                out.push(json!({
                    "call_id": call,
                    "profile": a.get("profile"),
                    "contained": a.get("contained").and_then(Value::as_bool).unwrap_or(false),
                    "judged": a.get("judged").and_then(Value::as_str).unwrap_or("changeset"),
                }));
            }
        }
    }
    Value::Array(out)
}

fn problem(report: &mut BundleReport, code: &str, message: String) {
    report.problems.push(BundleProblem {
        code: code.to_owned(),
        message,
    });
}

/// Verifies a bundle offline with `keys` only: the manifest's signature, every member against
/// it (none added, removed or changed), the run's audit records and their binding to its
/// events, the checkpoint's signature, and every artifact against its provenance.
/// Whether the policy texts in the bundle are the set the run decided under: loaded as Warrant
/// loads them, their digest is the one `run_started` recorded (and the manifest signed).
fn policy_in_force(
    members: &BTreeMap<String, Vec<u8>>,
    recorded: Option<&str>,
    report: &mut BundleReport,
) {
    let sources: Vec<warrant_policy::PolicySource> = members
        .iter()
        .filter(|(name, _)| name.starts_with("policy/") && name.ends_with(".cedar"))
        .map(|(name, text)| warrant_policy::PolicySource {
            layer: warrant_core::config::LayerKind::Project,
            path: name.clone(),
            text: String::from_utf8_lossy(text).into_owned(),
        })
        .collect();
    let Some(recorded) = recorded else {
        report
            .cannot
            .push("which policy set the run decided under: its start recorded no digest".into());
        return;
    };
    match warrant_policy::PolicyEngine::load(&sources) {
        Ok(engine) if engine.digest().as_str() == recorded => report.proves.push(format!(
            "the {} policy file(s) included are the set the run decided under (digest {recorded})",
            sources.len()
        )),
        Ok(engine) => report.cannot.push(format!(
            "that the policy texts included are the set in force then: they make {}, the run decided under {recorded} (a managed or user layer's policies are not in the bundle, or the files changed since)",
            engine.digest().as_str()
        )),
        Err(e) => report.cannot.push(format!(
            "that the policy texts included are the set in force then: they do not load ({e})"
        )),
    }
}

/// Checks a bundle offline against the public keys in the file `keys` (`--pubkeys`): no
/// installation is needed.
pub fn verify_bundle_with(file: &Path, keys: &Path) -> Result<BundleReport> {
    let keys = PublicKeys::load(keys).map_err(|e| HostError::bad_input(&e))?;
    verify_bundle(file, &keys)
}

pub fn verify_bundle(file: &Path, keys: &PublicKeys) -> Result<BundleReport> {
    let bytes = std::fs::read(file).map_err(|e| {
        HostError::usage(
            "W-BUNDLE-004",
            format!("cannot read {}: {e}", file.display()),
        )
    })?;
    let parts = warrant_artifacts::render::unzip(&bytes, MAX_BUNDLE).map_err(|e| {
        HostError::usage(
            "W-BUNDLE-004",
            format!("{} is not an evidence bundle: {e}", file.display()),
        )
    })?;
    let mut report = BundleReport {
        ok: false,
        run: None,
        signed_by: None,
        members: parts.len(),
        events: 0,
        records: 0,
        artifacts: Vec::new(),
        proves: Vec::new(),
        cannot: Vec::new(),
        problems: Vec::new(),
    };
    let mut members: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for (name, data) in parts {
        if members.insert(name.clone(), data).is_some() {
            problem(
                &mut report,
                "W-BUNDLE-005",
                format!("member {name} appears twice"),
            );
        }
    }
    let Some(envelope) = members.remove(MANIFEST) else {
        problem(&mut report, "W-BUNDLE-005", format!("no {MANIFEST}"));
        return Ok(report);
    };
    let manifest = Envelope::parse(&String::from_utf8_lossy(&envelope))
        .and_then(|env| env.verify(keys, MANIFEST_TYPE))
        .map_err(|e| (e.code(), e.to_string()))
        .and_then(|(payload, by)| {
            serde_json::from_slice::<Manifest>(&payload)
                .map(|m| (m, by))
                .map_err(|e| ("W-BUNDLE-006", format!("the manifest is malformed: {e}")))
        });
    let manifest = match manifest {
        Ok((m, by)) => {
            report.signed_by = Some(by.kid);
            m
        }
        Err((code, message)) => {
            problem(&mut report, code, format!("manifest: {message}"));
            report.cannot.push(
                "anything: the manifest's signature does not verify with the keys given".into(),
            );
            return Ok(report);
        }
    };
    report.run = Some(manifest.run.clone());
    let listed: BTreeMap<&str, &Member> = manifest
        .members
        .iter()
        .map(|m| (m.name.as_str(), m))
        .collect();
    for (name, data) in &members {
        match listed.get(name.as_str()) {
            None => problem(
                &mut report,
                "W-BUNDLE-007",
                format!("member {name} was added: the signed manifest does not list it"),
            ),
            Some(m) if m.sha256 != sha256(data) => problem(
                &mut report,
                "W-BUNDLE-008",
                format!("member {name} was changed: its SHA-256 is not the manifest's"),
            ),
            Some(_) => {}
        }
    }
    for name in listed.keys() {
        if !members.contains_key(*name) {
            problem(
                &mut report,
                "W-BUNDLE-009",
                format!("member {name} was removed: the signed manifest lists it"),
            );
        }
    }
    if !report.problems.is_empty() {
        report.cannot.push(
            "the rest: members differ from the signed manifest, so nothing in them is trusted"
                .into(),
        );
        return Ok(report);
    }
    report
        .proves
        .push("every member is the one the installation signed (manifest signature, per-member SHA-256, none added or removed)".into());

    // The run's events against its signed audit records.
    let events: Vec<StoredEvent> = members
        .get(EVENTS)
        .and_then(|b| serde_json::from_slice(b).ok())
        .unwrap_or_default();
    let records: Vec<SealedRecord> = members
        .get(RECORDS)
        .map(|b| {
            String::from_utf8_lossy(b)
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect()
        })
        .unwrap_or_default();
    report.events = events.len();
    report.records = records.len();
    let run = RunId::parse(&manifest.run);
    match (run, manifest.redacted.is_empty()) {
        (Some(run), true) => match warrant_audit::verify_run(&run, &events, &records, keys) {
            Ok(_) => report.proves.push(format!(
                "the run's {} events are the ones its {} audit records signed, each record's hash and signature intact",
                events.len(),
                records.len()
            )),
            Err(e) => problem(&mut report, e.code(), format!("journal: {e}")),
        },
        (Some(_), false) => report.cannot.push(format!(
            "that the events are the signed ones: the exporter redacted {} secret value(s) from them, so their digests no longer match the records",
            manifest.redacted.values().sum::<u32>()
        )),
        (None, _) => problem(
            &mut report,
            "W-BUNDLE-006",
            format!("the manifest names `{}`, not a run id", manifest.run),
        ),
    }
    match members.get(CHECKPOINT) {
        Some(b) => match warrant_audit::parse_checkpoint(Path::new(CHECKPOINT), b, keys) {
            Ok(cp) => report.proves.push(format!(
                "the installation's audit sink held a chain of {} records up to {} when the bundle was made (signed checkpoint)",
                cp.seq, cp.hash
            )),
            Err(e) => problem(&mut report, e.code(), format!("checkpoint: {e}")),
        },
        None => report
            .cannot
            .push("how long the whole chain was: no checkpoint was delivered yet".into()),
    }
    policy_in_force(&members, manifest.policy_digest.as_deref(), &mut report);
    for (name, data) in &members {
        let Some(artifact) = name.strip_prefix("artifacts/") else {
            continue;
        };
        if artifact.ends_with(warrant_exec::fs::SIDECAR_SUFFIX) {
            continue;
        }
        let side = format!("{name}{}", warrant_exec::fs::SIDECAR_SUFFIX);
        let sidecar = members
            .get(&side)
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default();
        let v = warrant_artifacts::verify_artifact_bytes(artifact, data, &sidecar, keys);
        if !v.ok {
            for p in &v.problems {
                problem(
                    &mut report,
                    p.code,
                    format!("artifact {artifact}: {}", p.message),
                );
            }
        }
        report.artifacts.push(v);
    }
    if !report.artifacts.is_empty() && report.artifacts.iter().all(|a| a.ok) {
        report.proves.push(format!(
            "the {} artifacts are the files their signed provenance names",
            report.artifacts.len()
        ));
    }
    report.cannot.extend([
        "that the records of other runs between this run's records are intact: only this run's records are included".to_owned(),
        "that the configuration text included is the one in force then: it is as it was at export".to_owned(),
        "that nothing happened outside Warrant: only what passed the ring is recorded".to_owned(),
    ]);
    report.ok = report.problems.is_empty();
    Ok(report)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn report() -> BundleReport {
        BundleReport {
            ok: true,
            run: None,
            signed_by: None,
            members: 0,
            events: 0,
            records: 0,
            artifacts: Vec::new(),
            proves: Vec::new(),
            cannot: Vec::new(),
            problems: Vec::new(),
        }
    }

    #[test]
    fn policy_texts_prove_the_set_in_force_only_when_they_make_its_digest() {
        let text =
            "@id(\"p\")\npermit (principal, action == Warrant::Action::\"fs.read\", resource);\n";
        let members = BTreeMap::from([("policy/p.cedar".to_owned(), text.as_bytes().to_vec())]);
        let digest = warrant_policy::PolicyEngine::load(&[warrant_policy::PolicySource {
            layer: warrant_core::config::LayerKind::Project,
            path: "elsewhere.cedar".into(),
            text: text.into(),
        }])
        .unwrap()
        .digest()
        .as_str()
        .to_owned();
        let mut r = report();
        policy_in_force(&members, Some(&digest), &mut r);
        assert_eq!(r.proves.len(), 1, "{r:?}");
        // The control: a run that decided under another set (a layer not in the bundle).
        let mut r = report();
        policy_in_force(&members, Some("sha256:00"), &mut r);
        assert!(r.proves.is_empty());
        assert!(r.cannot[0].contains("not in the bundle"), "{r:?}");
    }
}
