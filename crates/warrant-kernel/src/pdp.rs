//! The ring's view of warrant-policy: Cedar's decision with our three outcomes, reduced to
//! what the journal records (verdict, risk, the determining policies and their reasons).

use warrant_core::{Action, CanonicalPath, Digest, Principal};
use warrant_policy::{DecisionRequest, PolicyEngine};

use crate::events::{ReasonRecord, Verdict};
use crate::ring::{DecisionPoint, PolicyVerdict};

/// Adapts a loaded [`PolicyEngine`] to the ring.
#[derive(Debug)]
pub struct Pdp<'a>(pub &'a PolicyEngine);

/// [`Pdp`] that also knows the installed Agent Skills the host verified against their
/// approval when it built the ring: a read beneath one of their directories is
/// `resource.in_installed_skill` (the default pack permits it; nothing else changes).
#[derive(Debug)]
pub struct SkillAwarePdp<'a> {
    pub engine: &'a PolicyEngine,
    pub installed_skills: Vec<CanonicalPath>,
}

fn verdict_of(engine: &PolicyEngine, req: &DecisionRequest<'_>) -> PolicyVerdict {
    let d = engine.decide(req);
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

impl DecisionPoint for SkillAwarePdp<'_> {
    fn decide(
        &self,
        principal: &Principal,
        action: &Action,
        workspace: &CanonicalPath,
    ) -> PolicyVerdict {
        verdict_of(
            self.engine,
            &DecisionRequest {
                principal,
                action,
                workspace,
                installed_skills: &self.installed_skills,
            },
        )
    }

    fn digest(&self) -> Digest {
        self.engine.digest().clone()
    }
}

impl DecisionPoint for Pdp<'_> {
    fn decide(
        &self,
        principal: &Principal,
        action: &Action,
        workspace: &CanonicalPath,
    ) -> PolicyVerdict {
        verdict_of(
            self.0,
            &DecisionRequest {
                principal,
                action,
                workspace,
                installed_skills: &[],
            },
        )
    }

    fn digest(&self) -> Digest {
        self.0.digest().clone()
    }
}
