//! The ring's view of warrant-policy: Cedar's decision with our three outcomes, reduced to
//! what the journal records (verdict, risk, the determining policies and their reasons).

use warrant_core::{Action, CanonicalPath, Digest, Principal};
use warrant_policy::{DecisionRequest, PolicyEngine};

use crate::events::{ReasonRecord, Verdict};
use crate::ring::{DecisionPoint, PolicyVerdict};

/// Adapts a loaded [`PolicyEngine`] to the ring.
#[derive(Debug)]
pub struct Pdp<'a>(pub &'a PolicyEngine);

impl DecisionPoint for Pdp<'_> {
    fn decide(
        &self,
        principal: &Principal,
        action: &Action,
        workspace: &CanonicalPath,
    ) -> PolicyVerdict {
        let d = self.0.decide(&DecisionRequest {
            principal,
            action,
            workspace,
        });
        let verdict = match d.verdict {
            warrant_policy::Verdict::Allow => Verdict::Allow,
            warrant_policy::Verdict::Ask { .. } => Verdict::Ask,
            warrant_policy::Verdict::Deny => Verdict::Deny,
        };
        PolicyVerdict {
            verdict,
            risk: d.risk,
            reasons: d
                .reasons
                .into_iter()
                .map(|r| ReasonRecord {
                    policy: r.id,
                    reason: r.reason,
                })
                .collect(),
            errors: d.errors,
        }
    }

    fn digest(&self) -> Digest {
        self.0.digest().clone()
    }
}
