//! The provenance of an artifact: our predicate inside an in-toto Statement v1, in a DSSE
//! envelope, one line of `NAME.intoto.jsonl`; and its verification, which says which part
//! failed (the artifact's bytes, the envelope, the key) rather than only that something did.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use warrant_audit::{DsseError, Envelope, PublicKeys, Statement};
use warrant_core::Coded as _;

use crate::ArtifactError;

/// The predicate type URI of Warrant's artifact provenance.
pub const PREDICATE_TYPE: &str = "https://warrant.dev/provenance/artifact/v1";

/// Who made an artifact, how, under what rules. Digests are `sha256:<hex>`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Predicate {
    pub run: String,
    /// The actor of the run (`agent:…`, `user:…`), its tenant and kind.
    pub actor: String,
    pub tenant: String,
    pub principal_kind: String,
    /// The person the run acts for, when it acts for one: who asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_behalf_of: Option<String>,
    /// The model the run talks to (`PROVIDER:MODEL`).
    pub model: String,
    /// The call that made it: the tool, the sequence number of the journal event that started
    /// the effect, the digest of its input (the spec, path aside), and the file's place in the
    /// workspace.
    pub tool: String,
    pub kind: String,
    pub path: String,
    pub effect_seq: u64,
    pub input_digest: String,
    /// A person approved this effect (this call, or by a session grant), rather than policy
    /// alone.
    pub approved_by_person: bool,
    /// Who approved this call (`actor@tenant`, and where the answer came from), as the run's
    /// journal recorded it; absent when policy alone let it through, or a session grant given
    /// for an earlier call did (the journal at `effect_seq` names that one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    /// The run had seen untrusted content (a tool result from outside) before this call, so
    /// the content may carry an injection; formulas that reach out were written as text.
    pub untrusted_input: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub neutralized_formulas: Vec<String>,
    pub policy_digest: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profiles_digest: Option<String>,
    pub created_at: String,
    pub generator: String,
}

/// `NAME.intoto.jsonl` beside `NAME`.
pub fn sidecar_path(artifact: &Path) -> PathBuf {
    let mut name = artifact.file_name().unwrap_or_default().to_os_string();
    name.push(warrant_exec::fs::SIDECAR_SUFFIX);
    artifact.with_file_name(name)
}

/// The envelopes of a sidecar, one per non-empty line.
pub fn read_sidecar(artifact: &Path) -> Result<Vec<Result<Envelope, DsseError>>, ArtifactError> {
    let path = sidecar_path(artifact);
    let text = std::fs::read_to_string(&path).map_err(|e| ArtifactError::NoProvenance {
        path: artifact.display().to_string(),
        reason: format!("{}: {e}", path.display()),
    })?;
    Ok(text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(Envelope::parse)
        .collect())
}

/// How the key that signed is known to the verifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyStanding {
    /// The installation's current key.
    Current,
    /// A key the installation rotated away: the signature was made before the rotation.
    Retired,
    /// A key of the list the verifier was given (`--pubkeys`); whether it is current is not
    /// known there.
    Listed,
}

/// Who asked, who approved, which run: read from the verified statement.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Custody {
    pub asked_by: String,
    pub made_by: String,
    pub approved: String,
    pub run: String,
    pub model: String,
    pub tool: String,
    pub created_at: String,
    pub untrusted_input: bool,
}

/// One failed check, by part: `artifact` (the bytes changed), `envelope` (the provenance was
/// changed or is malformed), `key` (signed by a key not trusted), `provenance` (missing).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VerifyProblem {
    pub part: &'static str,
    pub code: &'static str,
    pub message: String,
}

/// What `artifacts verify` found for one file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ArtifactVerdict {
    pub file: String,
    pub provenance: String,
    pub ok: bool,
    pub sha256: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kid: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<KeyStanding>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custody: Option<Custody>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicate: Option<Predicate>,
    pub problems: Vec<VerifyProblem>,
}

/// Verifies `artifact` against its sidecar with `keys`. `current` is the installation's key id
/// (a verified signature by another key of the list is by a retired key); with `listed` (a key
/// list given by `--pubkeys`) the standing is not known and reported as listed.
pub fn verify_artifact(
    artifact: &Path,
    keys: &PublicKeys,
    current: Option<&str>,
    listed: bool,
) -> ArtifactVerdict {
    let side = sidecar_path(artifact);
    let mut v = ArtifactVerdict {
        file: artifact.display().to_string(),
        provenance: side.display().to_string(),
        ok: false,
        sha256: String::new(),
        kid: None,
        key: None,
        custody: None,
        predicate: None,
        problems: Vec::new(),
    };
    let bytes = match std::fs::read(artifact) {
        Ok(b) => b,
        Err(e) => {
            v.problems.push(VerifyProblem {
                part: "artifact",
                code: "W-ARTIFACT-010",
                message: format!("cannot read {}: {e}", artifact.display()),
            });
            return v;
        }
    };
    let envelopes = match read_sidecar(artifact) {
        Ok(e) => e,
        Err(e) => {
            v.sha256 = sha256_hex(&bytes);
            v.problems.push(VerifyProblem {
                part: "provenance",
                code: e.code(),
                message: e.to_string(),
            });
            return v;
        }
    };
    check(v, &bytes, envelopes, keys, current, listed)
}

fn sha256_hex(bytes: &[u8]) -> String {
    warrant_audit::Subject::sha256("", bytes)
        .digest
        .get("sha256")
        .cloned()
        .unwrap_or_default()
}

/// [`verify_artifact`] over bytes and a sidecar's text already read (an evidence bundle's
/// members): `name` is what the verdict calls the file.
pub fn verify_artifact_bytes(
    name: &str,
    bytes: &[u8],
    sidecar: &str,
    keys: &PublicKeys,
) -> ArtifactVerdict {
    let v = ArtifactVerdict {
        file: name.to_owned(),
        provenance: format!("{name}{}", warrant_exec::fs::SIDECAR_SUFFIX),
        ok: false,
        sha256: String::new(),
        kid: None,
        key: None,
        custody: None,
        predicate: None,
        problems: Vec::new(),
    };
    let envelopes = sidecar
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(Envelope::parse)
        .collect();
    check(v, bytes, envelopes, keys, None, true)
}

fn check(
    mut v: ArtifactVerdict,
    bytes: &[u8],
    envelopes: Vec<Result<Envelope, DsseError>>,
    keys: &PublicKeys,
    current: Option<&str>,
    listed: bool,
) -> ArtifactVerdict {
    let side = v.provenance.clone();
    v.sha256 = sha256_hex(bytes);
    let Some(last) = envelopes.into_iter().next_back() else {
        v.problems.push(VerifyProblem {
            part: "provenance",
            code: "W-ARTIFACT-009",
            message: format!("{side} holds no envelope"),
        });
        return v;
    };
    let opened = last.and_then(|env| Statement::<Predicate>::open(&env, keys, PREDICATE_TYPE));
    let (statement, by) = match opened {
        Ok(x) => x,
        Err(e) => {
            let part = match e {
                DsseError::UnknownKey { .. } => "key",
                DsseError::Malformed(_)
                | DsseError::Base64 { .. }
                | DsseError::PayloadType { .. }
                | DsseError::BadSignature { .. }
                | DsseError::Statement(_) => "envelope",
            };
            v.problems.push(VerifyProblem {
                part,
                code: e.code(),
                message: e.to_string(),
            });
            return v;
        }
    };
    v.key = Some(if listed {
        KeyStanding::Listed
    } else if current == Some(by.kid.as_str()) {
        KeyStanding::Current
    } else {
        KeyStanding::Retired
    });
    v.kid = Some(by.kid);
    let bound = statement
        .subject
        .iter()
        .any(|s| s.digest.get("sha256") == Some(&v.sha256));
    if !bound {
        v.problems.push(VerifyProblem {
            part: "artifact",
            code: "W-ARTIFACT-011",
            message: format!(
                "{} is not the file the provenance was signed for: its SHA-256 is {}, the statement names {}",
                v.file,
                v.sha256,
                statement
                    .subject
                    .iter()
                    .filter_map(|s| s.digest.get("sha256"))
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    }
    let p = &statement.predicate;
    v.custody = Some(Custody {
        asked_by: p.on_behalf_of.clone().unwrap_or_else(|| p.actor.clone()),
        made_by: p.actor.clone(),
        approved: if let Some(who) = p.approved_by.as_deref().filter(|_| p.approved_by_person) {
            format!("by {who}")
        } else if p.approved_by_person {
            format!(
                "by a person, through a session grant (see the run's journal at event {})",
                p.effect_seq
            )
        } else {
            "by policy".to_owned()
        },
        run: p.run.clone(),
        model: p.model.clone(),
        tool: p.tool.clone(),
        created_at: p.created_at.clone(),
        untrusted_input: p.untrusted_input,
    });
    v.predicate = Some(statement.predicate);
    v.ok = v.problems.is_empty();
    v
}
