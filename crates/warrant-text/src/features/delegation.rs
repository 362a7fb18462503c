//! Delegation tokens: what a grant allows, a verification, a revocation.

use warrant_core::Digest;
use warrant_host::delegation::Revoked;
use warrant_kernel::delegation::{Grant, Verified};

/// A grant: who hands what to whom, until when, and its digest.
pub fn grant(grant: &Grant, digest: &Digest) -> String {
    let joined = |set: &std::collections::BTreeSet<String>| {
        set.iter().cloned().collect::<Vec<_>>().join(", ")
    };
    let mut lines = vec![
        format!(
            "token {}  {} -> {}",
            grant.id, grant.delegator, grant.holder
        ),
        format!("  verbs:     {}", joined(&grant.verbs)),
        format!("  resources: {}", joined(&grant.resources)),
        format!("  ceiling:   {:?}", grant.ceiling),
        format!(
            "  valid:     {} .. {}",
            grant.issued_at.rfc3339(),
            grant.expires_at.rfc3339()
        ),
    ];
    if let Some(parent) = &grant.parent {
        lines.push(format!("  narrows:   {parent}"));
    }
    lines.push(format!("  digest:    {digest}"));
    lines.join("\n")
}

/// `delegate verify`: who signed it, then the grant.
pub fn verified(v: &Verified) -> String {
    format!(
        "verified: signed by {}\n{}",
        v.kid,
        grant(&v.grant, &v.digest)
    )
}

/// `delegate revoke`.
pub fn revoked(r: &Revoked) -> String {
    format!(
        "{} {} (list for offline verifiers: {})",
        if r.newly {
            "revoked"
        } else {
            "already revoked:"
        },
        r.id,
        r.list.display()
    )
}
