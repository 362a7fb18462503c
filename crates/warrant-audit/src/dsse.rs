//! DSSE envelopes (Dead Simple Signing Envelope v1) signed with the installation's Ed25519 key,
//! and the in-toto Statement v1 they carry. The signature covers the pre-authentication
//! encoding (PAE) of the payload type and the payload bytes, never the JSON around them, so any
//! verifier of the standard (securesystemslib, in-toto, sigstore) checks ours with only the
//! public key. Limits: one signature is made per envelope; a verifier here accepts an envelope
//! when any signature is by a key it knows and verifies.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::{Signature, Verifier as _};
use serde::{Deserialize, Serialize};
use thiserror::Error;
use warrant_core::Coded;

use crate::{AuditKey, PublicKeys};

/// The payload type of an in-toto attestation inside a DSSE envelope.
pub const INTOTO_PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";
/// The `_type` of an in-toto Statement v1.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";

/// `PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`, lengths being the
/// byte counts in ASCII decimal: what is signed and verified.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {payload_type} {} ",
        payload_type.len(),
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

/// A DSSE envelope as JSON: the payload base64 (standard alphabet, padded) with its type and
/// the signatures over its PAE.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    pub payload: String,
    #[serde(rename = "payloadType")]
    pub payload_type: String,
    pub signatures: Vec<EnvelopeSignature>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvelopeSignature {
    /// The kid of the signing key (see [`crate::kid_of`]).
    pub keyid: String,
    pub sig: String,
}

/// Which key signed an envelope that verified.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SignedBy {
    pub kid: String,
}

/// Why an envelope does not verify. Each says which part is wrong.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum DsseError {
    #[error("the envelope is not DSSE JSON: {0}")]
    Malformed(String),
    #[error("the envelope's {part} is not valid base64: {reason}")]
    Base64 { part: &'static str, reason: String },
    #[error("the envelope's payload type is `{found}`, expected `{expected}`")]
    PayloadType { found: String, expected: String },
    #[error(
        "the envelope carries no signature by a known key (signed by {kids}); add the signer's public key to the list given, if you trust it"
    )]
    UnknownKey { kids: String },
    #[error(
        "the signature of key {kid} does not verify: the envelope's payload or signature was changed after signing"
    )]
    BadSignature { kid: String },
    #[error("the envelope's payload is not an in-toto Statement v1: {0}")]
    Statement(String),
}

impl Coded for DsseError {
    fn code(&self) -> &'static str {
        match self {
            Self::Malformed(_) => "W-DSSE-001",
            Self::Base64 { .. } => "W-DSSE-002",
            Self::PayloadType { .. } => "W-DSSE-003",
            Self::UnknownKey { .. } => "W-DSSE-004",
            Self::BadSignature { .. } => "W-DSSE-005",
            Self::Statement(_) => "W-DSSE-006",
        }
    }
}

impl Envelope {
    /// Signs `payload` as `payload_type` with the installation's key.
    pub fn sign(key: &AuditKey, payload_type: &str, payload: &[u8]) -> Self {
        let sig = key.sign(&pae(payload_type, payload));
        Self {
            payload: BASE64.encode(payload),
            payload_type: payload_type.to_owned(),
            signatures: vec![EnvelopeSignature {
                keyid: key.kid(),
                sig: BASE64.encode(sig.to_bytes()),
            }],
        }
    }

    pub fn parse(text: &str) -> Result<Self, DsseError> {
        serde_json::from_str(text).map_err(|e| DsseError::Malformed(e.to_string()))
    }

    /// One line of JSON (the `.intoto.jsonl` form).
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The payload bytes, unverified.
    pub fn payload_bytes(&self) -> Result<Vec<u8>, DsseError> {
        BASE64.decode(&self.payload).map_err(|e| DsseError::Base64 {
            part: "payload",
            reason: e.to_string(),
        })
    }

    /// Verifies the envelope against `keys`: the payload type must be `expected_type`, and a
    /// signature by a key of the list must verify over the PAE. Returns the payload bytes and
    /// the signer. A signature by a key not in the list is skipped, never trusted.
    pub fn verify(
        &self,
        keys: &PublicKeys,
        expected_type: &str,
    ) -> Result<(Vec<u8>, SignedBy), DsseError> {
        if self.payload_type != expected_type {
            return Err(DsseError::PayloadType {
                found: self.payload_type.clone(),
                expected: expected_type.to_owned(),
            });
        }
        let payload = self.payload_bytes()?;
        let signed = pae(&self.payload_type, &payload);
        let mut first_bad = None;
        for s in &self.signatures {
            let Some(key) = keys.get(&s.keyid) else {
                continue;
            };
            let bytes = BASE64.decode(&s.sig).map_err(|e| DsseError::Base64 {
                part: "signature",
                reason: e.to_string(),
            })?;
            let good = Signature::from_slice(&bytes)
                .ok()
                .is_some_and(|sig| key.verify(&signed, &sig).is_ok());
            if good {
                return Ok((
                    payload,
                    SignedBy {
                        kid: s.keyid.clone(),
                    },
                ));
            }
            first_bad.get_or_insert_with(|| s.keyid.clone());
        }
        Err(match first_bad {
            Some(kid) => DsseError::BadSignature { kid },
            None => DsseError::UnknownKey {
                kids: self
                    .signatures
                    .iter()
                    .map(|s| s.keyid.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            },
        })
    }
}

/// One subject of a statement: a name and its digests (`{"sha256": hex}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subject {
    pub name: String,
    pub digest: std::collections::BTreeMap<String, String>,
}

impl Subject {
    pub fn sha256(name: &str, bytes: &[u8]) -> Self {
        use sha2::{Digest as _, Sha256};
        Self {
            name: name.to_owned(),
            digest: [("sha256".to_owned(), hex::encode(Sha256::digest(bytes)))]
                .into_iter()
                .collect(),
        }
    }
}

/// An in-toto Statement v1 with a predicate of type `P`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Statement<P> {
    #[serde(rename = "_type")]
    pub statement_type: String,
    pub subject: Vec<Subject>,
    #[serde(rename = "predicateType")]
    pub predicate_type: String,
    pub predicate: P,
}

impl<P: Serialize + serde::de::DeserializeOwned> Statement<P> {
    pub fn new(subject: Vec<Subject>, predicate_type: &str, predicate: P) -> Self {
        Self {
            statement_type: STATEMENT_TYPE.to_owned(),
            subject,
            predicate_type: predicate_type.to_owned(),
            predicate,
        }
    }

    /// The statement in a signed envelope. The payload is the statement's canonical JSON
    /// (RFC 8785), so the same statement always signs the same bytes.
    pub fn seal(&self, key: &AuditKey) -> Result<Envelope, DsseError> {
        let body =
            warrant_core::canonical_json(self).map_err(|e| DsseError::Statement(e.to_string()))?;
        Ok(Envelope::sign(key, INTOTO_PAYLOAD_TYPE, body.as_bytes()))
    }

    /// Verifies `envelope` and reads its statement, checking `_type` and `predicateType`.
    pub fn open(
        envelope: &Envelope,
        keys: &PublicKeys,
        predicate_type: &str,
    ) -> Result<(Self, SignedBy), DsseError> {
        let (payload, by) = envelope.verify(keys, INTOTO_PAYLOAD_TYPE)?;
        let statement: Self =
            serde_json::from_slice(&payload).map_err(|e| DsseError::Statement(e.to_string()))?;
        if statement.statement_type != STATEMENT_TYPE {
            return Err(DsseError::Statement(format!(
                "`_type` is `{}`, expected `{STATEMENT_TYPE}`",
                statement.statement_type
            )));
        }
        if statement.predicate_type != predicate_type {
            return Err(DsseError::Statement(format!(
                "`predicateType` is `{}`, expected `{predicate_type}`",
                statement.predicate_type
            )));
        }
        Ok((statement, by))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use pretty_assertions::assert_eq;

    use super::*;

    fn key(n: u8) -> AuditKey {
        AuditKey::from_seed([n; 32])
    }

    #[test]
    fn pae_matches_the_specification_example() {
        // The worked example of the DSSE protocol description.
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world".to_vec()
        );
        // Lengths are bytes, not characters.
        assert_eq!(pae("t", "é".as_bytes()), b"DSSEv1 1 t 2 \xc3\xa9".to_vec());
        assert_eq!(pae("", b""), b"DSSEv1 0  0 ".to_vec());
    }

    #[test]
    fn an_envelope_verifies_with_its_key_and_only_unchanged() {
        let k = key(7);
        let keys = PublicKeys::from_keys([k.verifying_key()]);
        let env = Envelope::sign(&k, INTOTO_PAYLOAD_TYPE, b"{\"a\":1}");
        let (payload, by) = env.verify(&keys, INTOTO_PAYLOAD_TYPE).unwrap();
        assert_eq!((payload, by.kid), (b"{\"a\":1}".to_vec(), k.kid()));

        let mut changed = env.clone();
        changed.payload = BASE64.encode(b"{\"a\":2}");
        assert_eq!(
            changed.verify(&keys, INTOTO_PAYLOAD_TYPE),
            Err(DsseError::BadSignature { kid: k.kid() })
        );
        // The type is signed too: relabelling the payload breaks the signature.
        let mut retyped = env.clone();
        retyped.payload_type = "text/plain".into();
        assert_eq!(
            retyped.verify(&keys, "text/plain"),
            Err(DsseError::BadSignature { kid: k.kid() })
        );
        assert!(matches!(
            env.verify(&keys, "text/plain"),
            Err(DsseError::PayloadType { .. })
        ));
        let stranger = PublicKeys::from_keys([key(8).verifying_key()]);
        assert_eq!(
            env.verify(&stranger, INTOTO_PAYLOAD_TYPE),
            Err(DsseError::UnknownKey { kids: k.kid() })
        );
    }

    #[test]
    fn a_statement_round_trips_through_its_envelope() {
        let k = key(9);
        let keys = PublicKeys::from_keys([k.verifying_key()]);
        let st = Statement::new(
            vec![Subject::sha256("out.txt", b"hi")],
            "https://example.test/p/v1",
            serde_json::json!({"x": 1}),
        );
        let env = Envelope::parse(&st.seal(&k).unwrap().to_line()).unwrap();
        let (back, _) = Statement::open(&env, &keys, "https://example.test/p/v1").unwrap();
        assert_eq!(back, st);
        assert!(matches!(
            Statement::<serde_json::Value>::open(&env, &keys, "https://other/v1"),
            Err(DsseError::Statement(_))
        ));
    }
}
