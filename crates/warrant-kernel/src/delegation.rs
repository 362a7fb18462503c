//! Delegation tokens: a part of one principal's authority handed to another, verifiable by
//! anyone holding only the issuer's public key. A token is a DSSE envelope (the format the
//! artifacts' provenance already uses, `warrant_audit::dsse`) over the canonical JSON of a
//! [`Grant`], signed with the installation's Ed25519 key: the verifier cannot mint one. A grant
//! names its delegator and holder, the verbs and resource patterns it allows, the worst risk
//! class it may reach (its ceiling), its expiry and its id; a re-delegation names its parent
//! and may only narrow it ([`Grant::narrows`]). What a delegated action may do is the token's
//! grant intersected with the holder's own permissions: [`Grant::permits`] is the token's half,
//! the policy decision the holder's.
//!
//! The token itself never enters a log: [`Verified::digest`] and the expiry do. Revocation is by
//! id: the store's list, or a list file for verifiers without the store ([`Revocations`]).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use thiserror::Error;
use warrant_audit::{AuditKey, PublicKeys};
use warrant_audit::{DsseError, Envelope};
use warrant_core::{Coded, Digest, RiskClass, Timestamp};

/// The DSSE payload type of a delegation token.
pub const PAYLOAD_TYPE: &str = "application/vnd.warrant.delegation.v1+json";

/// What a token grants. Serialized canonically (RFC 8785) as the envelope's payload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    /// `dlg-` and hex: what a revocation names.
    pub id: String,
    /// `actor@tenant` of the principal that handed the authority on.
    pub delegator: String,
    /// `actor@tenant` of the only principal that may present it.
    pub holder: String,
    /// Verbs allowed (`fs.read`, `shell.exec` …); `*` after a kind allows the kind's every verb
    /// (`fs.*`).
    pub verbs: BTreeSet<String>,
    /// Resource patterns: an exact resource, or a prefix ending in `*` (`/srv/app/*`).
    pub resources: BTreeSet<String>,
    /// The worst risk class an action under this token may have.
    pub ceiling: RiskClass,
    pub issued_at: Timestamp,
    pub expires_at: Timestamp,
    /// The token this one narrows, for a re-delegation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

/// A token that verified: its grant, the digest the log keeps instead of it, the signing key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verified {
    pub grant: Grant,
    pub digest: Digest,
    pub kid: String,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum DelegationError {
    #[error("the delegation token is malformed: {0}")]
    Malformed(String),
    #[error("the delegation token's signature does not hold: {0}")]
    Signature(DsseError),
    #[error("delegation token {id} expired at {at}")]
    Expired { id: String, at: String },
    #[error("delegation token {id} is not valid before {at}")]
    NotYet { id: String, at: String },
    #[error("delegation token {id} is held by {holder}, not by {presenter}")]
    WrongHolder {
        id: String,
        holder: String,
        presenter: String,
    },
    #[error("delegation token {id} was revoked")]
    Revoked { id: String },
    #[error("the re-delegation would widen token {parent}: {what}")]
    Widens { parent: String, what: String },
    #[error("a delegation must allow at least one verb and one resource")]
    Empty,
    #[error("`{0}` is not a verb pattern (`kind.verb` or `kind.*`)")]
    BadVerb(String),
    #[error("`{0}` is not a resource pattern (a resource, or a prefix ending in one `*`)")]
    BadResource(String),
    #[error("line {line} of the revocation list is not a token id: {text:?}")]
    BadRevocation { line: usize, text: String },
}

impl Coded for DelegationError {
    fn code(&self) -> &'static str {
        match self {
            Self::Malformed(_) => "W-DELEGATE-001",
            Self::Signature(_) => "W-DELEGATE-002",
            Self::Expired { .. } => "W-DELEGATE-003",
            Self::NotYet { .. } => "W-DELEGATE-004",
            Self::WrongHolder { .. } => "W-DELEGATE-005",
            Self::Revoked { .. } => "W-DELEGATE-006",
            Self::Widens { .. } => "W-DELEGATE-007",
            Self::Empty => "W-DELEGATE-008",
            Self::BadVerb(_) => "W-DELEGATE-009",
            Self::BadResource(_) => "W-DELEGATE-010",
            Self::BadRevocation { .. } => "W-DELEGATE-011",
        }
    }
}

fn valid_id(id: &str) -> bool {
    id.strip_prefix("dlg-")
        .is_some_and(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit() || c == '-'))
}

fn valid_verb(v: &str) -> bool {
    let Some((kind, verb)) = v.split_once('.') else {
        return false;
    };
    let word = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase() || c == '_');
    word(kind) && (verb == "*" || word(verb))
}

fn valid_resource(r: &str) -> bool {
    !r.is_empty()
        && !r.chars().any(char::is_control)
        && match r.find('*') {
            None => true,
            Some(i) => i == r.len() - 1,
        }
}

/// Whether pattern `wide` covers every resource pattern `narrow` matches.
fn covers(wide: &str, narrow: &str) -> bool {
    match wide.strip_suffix('*') {
        Some(prefix) => narrow.starts_with(prefix),
        None => wide == narrow,
    }
}

fn verb_covers(wide: &str, narrow: &str) -> bool {
    match wide.strip_suffix(".*") {
        Some(kind) => narrow.split_once('.').is_some_and(|(k, _)| k == kind),
        None => wide == narrow,
    }
}

impl Grant {
    /// Checks the grant's own shape: an id, at least one verb and resource, each well formed.
    pub fn check(&self) -> Result<(), DelegationError> {
        if !valid_id(&self.id) {
            return Err(DelegationError::Malformed(format!(
                "`{}` is not a token id (dlg-…)",
                self.id
            )));
        }
        if self.verbs.is_empty() || self.resources.is_empty() {
            return Err(DelegationError::Empty);
        }
        if let Some(v) = self.verbs.iter().find(|v| !valid_verb(v)) {
            return Err(DelegationError::BadVerb(v.clone()));
        }
        if let Some(r) = self.resources.iter().find(|r| !valid_resource(r)) {
            return Err(DelegationError::BadResource(r.clone()));
        }
        Ok(())
    }

    /// The token's half of a decision: `verb` on `resource` at `risk` is within the grant.
    pub fn permits(&self, verb: &str, resource: &str, risk: RiskClass) -> bool {
        risk <= self.ceiling
            && self.verbs.iter().any(|v| verb_covers(v, verb))
            && self.resources.iter().any(|r| covers(r, resource))
    }

    /// Refuses a re-delegation that is not within `parent`: it must be handed on by the
    /// parent's holder, name the parent, and allow no verb, resource, class or time the parent
    /// does not.
    pub fn narrows(&self, parent: &Grant) -> Result<(), DelegationError> {
        let widens = |what: String| DelegationError::Widens {
            parent: parent.id.clone(),
            what,
        };
        if self.delegator != parent.holder {
            return Err(widens(format!(
                "it is handed on by {}, but the token is held by {}",
                self.delegator, parent.holder
            )));
        }
        if self.parent.as_deref() != Some(parent.id.as_str()) {
            return Err(widens("it does not name the token it narrows".to_owned()));
        }
        if let Some(v) = self
            .verbs
            .iter()
            .find(|v| !parent.verbs.iter().any(|p| verb_covers(p, v)))
        {
            return Err(widens(format!("verb `{v}` is not allowed by it")));
        }
        if let Some(r) = self
            .resources
            .iter()
            .find(|r| !parent.resources.iter().any(|p| covers(p, r)))
        {
            return Err(widens(format!("resource `{r}` is not within it")));
        }
        if self.ceiling > parent.ceiling {
            return Err(widens(format!(
                "ceiling {:?} is above its {:?}",
                self.ceiling, parent.ceiling
            )));
        }
        if self.expires_at > parent.expires_at {
            return Err(widens(format!(
                "it would expire at {}, after it ({})",
                self.expires_at.rfc3339(),
                parent.expires_at.rfc3339()
            )));
        }
        Ok(())
    }

    /// Signs the grant with the installation's key: the token, as one line of JSON.
    pub fn sign(&self, key: &AuditKey) -> Result<String, DelegationError> {
        self.check()?;
        let payload = warrant_core::canonical_json(self)
            .map_err(|e| DelegationError::Malformed(e.to_string()))?;
        Ok(Envelope::sign(key, PAYLOAD_TYPE, payload.as_bytes()).to_line())
    }
}

/// Reads a token's grant without checking anything (`delegate show`).
pub fn inspect(token: &str) -> Result<(Grant, Digest), DelegationError> {
    let envelope =
        Envelope::parse(token.trim()).map_err(|e| DelegationError::Malformed(e.to_string()))?;
    let bytes = envelope
        .payload_bytes()
        .map_err(|e| DelegationError::Malformed(e.to_string()))?;
    let grant: Grant =
        serde_json::from_slice(&bytes).map_err(|e| DelegationError::Malformed(e.to_string()))?;
    Ok((grant, Digest::of_bytes(token.trim().as_bytes())))
}

/// Verifies `token` for `presenter` (`actor@tenant`) at `now` against the public `keys` and
/// the revoked ids: signature, shape, holder, validity window, revocation, in that order.
pub fn verify(
    token: &str,
    keys: &PublicKeys,
    presenter: &str,
    now: Timestamp,
    revoked: &Revocations,
) -> Result<Verified, DelegationError> {
    let token = token.trim();
    let envelope = Envelope::parse(token).map_err(|e| DelegationError::Malformed(e.to_string()))?;
    let (payload, signer) = envelope
        .verify(keys, PAYLOAD_TYPE)
        .map_err(DelegationError::Signature)?;
    let grant: Grant =
        serde_json::from_slice(&payload).map_err(|e| DelegationError::Malformed(e.to_string()))?;
    grant.check()?;
    if grant.holder != presenter {
        return Err(DelegationError::WrongHolder {
            id: grant.id,
            holder: grant.holder,
            presenter: presenter.to_owned(),
        });
    }
    if now < grant.issued_at {
        return Err(DelegationError::NotYet {
            id: grant.id,
            at: grant.issued_at.rfc3339(),
        });
    }
    if now >= grant.expires_at {
        return Err(DelegationError::Expired {
            id: grant.id,
            at: grant.expires_at.rfc3339(),
        });
    }
    for id in std::iter::once(&grant.id).chain(grant.parent.iter()) {
        if revoked.contains(id) {
            return Err(DelegationError::Revoked { id: id.clone() });
        }
    }
    Ok(Verified {
        grant,
        digest: Digest::of_bytes(token.as_bytes()),
        kid: signer.kid,
    })
}

/// Revoked token ids. The list file holds one id a line; `#` starts a comment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Revocations(BTreeSet<String>);

impl Revocations {
    pub fn new(ids: impl IntoIterator<Item = String>) -> Self {
        Self(ids.into_iter().collect())
    }

    pub fn parse(text: &str) -> Result<Self, DelegationError> {
        let mut ids = BTreeSet::new();
        for (i, line) in text.lines().enumerate() {
            let id = line.split('#').next().unwrap_or_default().trim();
            if id.is_empty() {
                continue;
            }
            if !valid_id(id) {
                return Err(DelegationError::BadRevocation {
                    line: i + 1,
                    text: line.to_owned(),
                });
            }
            ids.insert(id.to_owned());
        }
        Ok(Self(ids))
    }

    pub fn contains(&self, id: &str) -> bool {
        self.0.contains(id)
    }

    /// The list file's text.
    pub fn to_file_text(&self) -> String {
        let mut out = String::from("# revoked Warrant delegation tokens, one id a line\n");
        for id in &self.0 {
            out.push_str(id);
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millis(1_800_000_000_000 + ms).unwrap()
    }

    fn grant() -> Grant {
        Grant {
            id: "dlg-01".into(),
            delegator: "alice@acme".into(),
            holder: "agent:builder@acme".into(),
            verbs: ["fs.read".to_owned(), "fs.write".to_owned()].into(),
            resources: ["/srv/app/*".to_owned()].into(),
            ceiling: RiskClass::Change,
            issued_at: at(0),
            expires_at: at(3_600_000),
            parent: None,
        }
    }

    fn keys(key: &AuditKey) -> PublicKeys {
        PublicKeys::from_keys([key.verifying_key()])
    }

    #[test]
    fn a_token_verifies_with_only_the_public_key_and_nothing_else() {
        let key = AuditKey::from_seed([7; 32]);
        let token = grant().sign(&key).unwrap();
        let none = Revocations::default();
        let ok = verify(&token, &keys(&key), "agent:builder@acme", at(10), &none).unwrap();
        assert_eq!(ok.grant, grant());
        assert_eq!(ok.digest, Digest::of_bytes(token.as_bytes()));

        let other = AuditKey::from_seed([8; 32]);
        let refusals = [
            verify(&token, &keys(&other), "agent:builder@acme", at(10), &none).map(|_| ()),
            verify(&token, &keys(&key), "mallory@acme", at(10), &none).map(|_| ()),
            verify(
                &token,
                &keys(&key),
                "agent:builder@acme",
                at(3_600_000),
                &none,
            )
            .map(|_| ()),
            verify(&token, &keys(&key), "agent:builder@acme", at(-1), &none).map(|_| ()),
            verify(
                &token,
                &keys(&key),
                "agent:builder@acme",
                at(10),
                &Revocations::parse("# list\ndlg-01\n").unwrap(),
            )
            .map(|_| ()),
        ];
        let codes: Vec<&str> = refusals
            .iter()
            .map(|r| r.as_ref().unwrap_err().code())
            .collect();
        assert_eq!(
            codes,
            [
                "W-DELEGATE-002",
                "W-DELEGATE-005",
                "W-DELEGATE-003",
                "W-DELEGATE-004",
                "W-DELEGATE-006"
            ]
        );
    }

    #[test]
    fn a_forged_token_is_refused() {
        let key = AuditKey::from_seed([7; 32]);
        let token = grant().sign(&key).unwrap();
        // The holder widens the grant in the payload and keeps the issuer's signature (the
        // wider payload comes from signing it with a key of their own).
        let mut wider = grant();
        wider.ceiling = RiskClass::Irreversible;
        let own = AuditKey::from_seed([9; 32]);
        let mut envelope = Envelope::parse(&wider.sign(&own).unwrap()).unwrap();
        envelope.signatures = Envelope::parse(&token).unwrap().signatures;
        let forged = envelope.to_line();
        let err = verify(
            &forged,
            &keys(&key),
            "agent:builder@acme",
            at(10),
            &Revocations::default(),
        )
        .unwrap_err();
        assert_eq!(err.code(), "W-DELEGATE-002", "{err}");
        // The control: the untouched token verifies.
        assert!(
            verify(
                &token,
                &keys(&key),
                "agent:builder@acme",
                at(10),
                &Revocations::default()
            )
            .is_ok()
        );
    }

    #[test]
    fn a_re_delegation_only_narrows() {
        let parent = grant();
        let child = Grant {
            id: "dlg-02".into(),
            delegator: "agent:builder@acme".into(),
            holder: "agent:helper@acme".into(),
            verbs: ["fs.read".to_owned()].into(),
            resources: ["/srv/app/docs/*".to_owned()].into(),
            ceiling: RiskClass::Read,
            issued_at: at(5),
            expires_at: at(60_000),
            parent: Some("dlg-01".into()),
        };
        assert_eq!(child.narrows(&parent), Ok(()));
        let wider: [(&str, Grant); 5] = [
            (
                "verb",
                Grant {
                    verbs: ["fs.delete".to_owned()].into(),
                    ..child.clone()
                },
            ),
            (
                "resource",
                Grant {
                    resources: ["/srv/*".to_owned()].into(),
                    ..child.clone()
                },
            ),
            (
                "ceiling",
                Grant {
                    ceiling: RiskClass::Destructive,
                    ..child.clone()
                },
            ),
            (
                "expiry",
                Grant {
                    expires_at: at(7_200_000),
                    ..child.clone()
                },
            ),
            (
                "delegator",
                Grant {
                    delegator: "mallory@acme".into(),
                    ..child
                },
            ),
        ];
        for (what, g) in wider {
            let err = g.narrows(&parent).unwrap_err();
            assert_eq!(err.code(), "W-DELEGATE-007", "{what}: {err}");
        }
    }

    #[test]
    fn permits_is_the_grant_and_no_more() {
        let g = grant();
        assert!(g.permits("fs.read", "/srv/app/src/main.rs", RiskClass::Read));
        assert!(g.permits("fs.write", "/srv/app/x", RiskClass::Change));
        assert!(!g.permits("fs.delete", "/srv/app/x", RiskClass::Change));
        assert!(!g.permits("fs.read", "/srv/other", RiskClass::Read));
        assert!(!g.permits("fs.write", "/srv/app/x", RiskClass::Destructive));
        let kind = Grant {
            verbs: ["fs.*".to_owned()].into(),
            ..grant()
        };
        assert!(kind.permits("fs.delete", "/srv/app/x", RiskClass::Change));
        assert!(!kind.permits("shell.exec", "/srv/app/x", RiskClass::Change));
    }

    #[test]
    fn malformed_grants_and_lists_are_named() {
        let bad = |g: Grant| g.check().unwrap_err().code();
        assert_eq!(
            bad(Grant {
                verbs: BTreeSet::new(),
                ..grant()
            }),
            "W-DELEGATE-008"
        );
        assert_eq!(
            bad(Grant {
                verbs: ["FS read".to_owned()].into(),
                ..grant()
            }),
            "W-DELEGATE-009"
        );
        assert_eq!(
            bad(Grant {
                resources: ["/a/*/b".to_owned()].into(),
                ..grant()
            }),
            "W-DELEGATE-010"
        );
        assert_eq!(
            Revocations::parse("dlg-01\nnot an id\n").unwrap_err(),
            DelegationError::BadRevocation {
                line: 2,
                text: "not an id".into()
            }
        );
    }
}
