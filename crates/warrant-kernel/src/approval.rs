//! Approval proofs: an HMAC under the installation secret binding an answer to the run, the
//! park (the `ApprovalRequested` event), the digest of exactly what was shown, the approver
//! Warrant established, and the scope. Checked again when the effect starts.

use hmac::{Hmac, KeyInit, Mac};
use serde_json::json;
use sha2::Sha256;
use warrant_core::{Digest, RequestId, RunId, canonical_json};

use crate::events::{Approver, Scope};

type HmacSha256 = Hmac<Sha256>;

#[derive(Debug)]
pub struct ProofInput<'a> {
    pub run: &'a RunId,
    pub request: &'a RequestId,
    pub park_seq: u64,
    pub digest: &'a Digest,
    pub approver: &'a Approver,
    pub scope: Scope,
}

fn message(input: &ProofInput<'_>) -> String {
    let v = json!({
        "run": input.run,
        "request": input.request,
        "park": input.park_seq,
        "digest": input.digest,
        "approver": {"tenant": input.approver.tenant, "actor": input.approver.actor},
        "scope": input.scope.as_str(),
    });
    canonical_json(&v).unwrap_or_default()
}

pub fn prove(secret: &[u8], input: &ProofInput<'_>) -> String {
    match HmacSha256::new_from_slice(secret) {
        Ok(mut mac) => {
            mac.update(message(input).as_bytes());
            hex::encode(mac.finalize().into_bytes())
        }
        // HMAC accepts keys of any length; an empty string can never verify.
        Err(_) => String::new(),
    }
}

/// The proof of a person's resolution of an in-doubt effect: the same binding as an approval,
/// with the resolution in place of the scope.
pub fn prove_resolution(secret: &[u8], input: &ProofInput<'_>, resolution: &str) -> String {
    match HmacSha256::new_from_slice(secret) {
        Ok(mut mac) => {
            mac.update(message(input).as_bytes());
            mac.update(b"\nresolution:");
            mac.update(resolution.as_bytes());
            hex::encode(mac.finalize().into_bytes())
        }
        Err(_) => String::new(),
    }
}

/// The binding of a v2 approval record: v1 plus its expiry. The record carries the binding it
/// claims (run, request, park, expiry); the proof covers the claim, and the ring then compares
/// the claim with the run it is about to act in, so a refusal can say which part did not match.
#[derive(Debug)]
pub struct BoundInput<'a> {
    pub base: ProofInput<'a>,
    pub expires_at: warrant_core::Timestamp,
}

fn message_v2(input: &BoundInput<'_>) -> String {
    let b = &input.base;
    let v = json!({
        "v": 2,
        "run": b.run,
        "request": b.request,
        "park": b.park_seq,
        "digest": b.digest,
        "approver": {"tenant": b.approver.tenant, "actor": b.approver.actor},
        "scope": b.scope.as_str(),
        "expires_at": input.expires_at.millis(),
    });
    canonical_json(&v).unwrap_or_default()
}

/// The exact bytes a v2 approval proves: what an approver's Ed25519 key signs too.
pub fn bound_message(input: &BoundInput<'_>) -> String {
    message_v2(input)
}

/// An approver's own signing key (Ed25519), held in their user configuration directory. When
/// the identity directory registers a public key for a person, their approvals must carry a
/// signature by it besides the installation's HMAC.
pub trait ApproverKey {
    /// Hex of the 32-byte public key.
    fn public_hex(&self) -> String;
    /// Hex of the 64-byte signature over `message`.
    fn sign_hex(&self, message: &[u8]) -> String;
}

/// An Ed25519 approver key from its 32-byte seed.
pub struct Ed25519ApproverKey(ed25519_dalek::SigningKey);

impl std::fmt::Debug for Ed25519ApproverKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Ed25519ApproverKey({})", self.public_hex())
    }
}

impl Ed25519ApproverKey {
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        Self(ed25519_dalek::SigningKey::from_bytes(seed))
    }
}

impl ApproverKey for Ed25519ApproverKey {
    fn public_hex(&self) -> String {
        hex::encode(self.0.verifying_key().to_bytes())
    }
    fn sign_hex(&self, message: &[u8]) -> String {
        use ed25519_dalek::Signer as _;
        hex::encode(self.0.sign(message).to_bytes())
    }
}

/// Whether `signature` (hex) is `public` (hex)'s Ed25519 signature over the bound message.
pub fn verify_signature(public: &str, input: &BoundInput<'_>, signature: &str) -> bool {
    let (Ok(pk), Ok(sig)) = (hex::decode(public), hex::decode(signature)) else {
        return false;
    };
    let (Ok(pk), Ok(sig)) = (<[u8; 32]>::try_from(pk), <[u8; 64]>::try_from(sig)) else {
        return false;
    };
    let Ok(key) = ed25519_dalek::VerifyingKey::from_bytes(&pk) else {
        return false;
    };
    key.verify_strict(
        message_v2(input).as_bytes(),
        &ed25519_dalek::Signature::from_bytes(&sig),
    )
    .is_ok()
}

pub fn prove_bound(secret: &[u8], input: &BoundInput<'_>) -> String {
    match HmacSha256::new_from_slice(secret) {
        Ok(mut mac) => {
            mac.update(message_v2(input).as_bytes());
            hex::encode(mac.finalize().into_bytes())
        }
        Err(_) => String::new(),
    }
}

pub fn verify_bound(secret: &[u8], input: &BoundInput<'_>, proof: &str) -> bool {
    let Ok(bytes) = hex::decode(proof) else {
        return false;
    };
    match HmacSha256::new_from_slice(secret) {
        Ok(mut mac) => {
            mac.update(message_v2(input).as_bytes());
            mac.verify_slice(&bytes).is_ok()
        }
        Err(_) => false,
    }
}

#[cfg(feature = "testing")]
thread_local! {
    static UNCHECKED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the ring checks approval records at time of use. Always `true` in the shipped
/// binary; the kernel's `testing` feature lets a test switch the checks off on its own thread
/// to show that the attacks it refuses would otherwise succeed (the negative control).
pub fn checks_enabled() -> bool {
    #[cfg(feature = "testing")]
    {
        !UNCHECKED.with(std::cell::Cell::get)
    }
    #[cfg(not(feature = "testing"))]
    {
        true
    }
}

/// Test only: switch the time-of-use checks off (or on again) for the calling thread.
#[cfg(feature = "testing")]
pub fn set_checks_for_this_thread(enabled: bool) {
    UNCHECKED.with(|c| c.set(!enabled));
}

/// Constant-time check of a proof.
pub fn verify(secret: &[u8], input: &ProofInput<'_>, proof: &str) -> bool {
    let Ok(bytes) = hex::decode(proof) else {
        return false;
    };
    match HmacSha256::new_from_slice(secret) {
        Ok(mut mac) => {
            mac.update(message(input).as_bytes());
            mac.verify_slice(&bytes).is_ok()
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_proof_binds_every_field() {
        let run = RunId::parse("run-01").unwrap();
        let other_run = RunId::parse("run-02").unwrap();
        let req = RequestId::parse("req-01").unwrap();
        let digest = Digest::of_bytes(b"rm -rf build");
        let other_digest = Digest::of_bytes(b"rm -rf /");
        let alice = Approver {
            tenant: "t".into(),
            actor: "alice".into(),
            via: "cli".into(),
        };
        let mallory = Approver {
            tenant: "t".into(),
            actor: "mallory".into(),
            via: "cli".into(),
        };
        let base = ProofInput {
            run: &run,
            request: &req,
            park_seq: 7,
            digest: &digest,
            approver: &alice,
            scope: Scope::Once,
        };
        let proof = prove(b"secret", &base);
        assert!(verify(b"secret", &base, &proof));
        assert!(!verify(b"other", &base, &proof));
        assert!(!verify(
            b"secret",
            &ProofInput {
                run: &other_run,
                ..base
            },
            &proof
        ));
        assert!(!verify(
            b"secret",
            &ProofInput {
                park_seq: 8,
                ..base
            },
            &proof
        ));
        assert!(!verify(
            b"secret",
            &ProofInput {
                digest: &other_digest,
                ..base
            },
            &proof
        ));
        assert!(!verify(
            b"secret",
            &ProofInput {
                approver: &mallory,
                ..base
            },
            &proof
        ));
        assert!(!verify(
            b"secret",
            &ProofInput {
                scope: Scope::Session,
                ..base
            },
            &proof
        ));
        assert!(!verify(b"secret", &base, "zz"));
    }
}
