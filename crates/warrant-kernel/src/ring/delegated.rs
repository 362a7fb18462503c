//! The delegation check before each effect of a run driven under a token: the token must be
//! unexpired and unrevoked (neither it nor the token it narrows), and every action within its
//! grant. The policy decision point has already decided under the holder's own permissions, so
//! an effect runs only when both allow it. A refusal is a `call_refused` event (durable, typed,
//! audited) and nothing starts.

use warrant_core::Action;

use super::Ring;
use crate::KernelError;
use crate::state::RunState;

impl Ring<'_> {
    pub(super) fn delegation_refusal(
        &self,
        state: &RunState,
        actions: &[Action],
    ) -> Result<Option<(&'static str, String)>, KernelError> {
        let Some(delegation) = state.settings.delegation.as_deref() else {
            return Ok(None);
        };
        let grant = &delegation.grant;
        let now = self.clock.now();
        if now >= grant.expires_at {
            return Ok(Some((
                "W-DELEGATE-003",
                format!(
                    "this run acts under delegation token {}, which expired at {}; nothing was run",
                    grant.id,
                    grant.expires_at.rfc3339()
                ),
            )));
        }
        // Read at every effect, so a revocation by any process stops the next one.
        let revoked = self.store.revoked_delegations()?;
        if let Some(id) = delegation.ids().find(|id| revoked.iter().any(|r| r == *id)) {
            return Ok(Some((
                "W-DELEGATE-006",
                format!(
                    "this run acts under delegation token {}, and token {id} was revoked; nothing was run",
                    grant.id
                ),
            )));
        }
        for action in actions {
            let (verb, target, risk) = (action.verb(), action.target(), action.risk());
            if !grant.permits(verb.as_str(), &target, risk) {
                return Ok(Some((
                    "W-DELEGATE-017",
                    format!(
                        "{} on {target} (risk {risk:?}) is outside delegation token {} (verbs {}, resources {}, ceiling {:?}); nothing was run",
                        verb.as_str(),
                        grant.id,
                        grant.verbs.iter().cloned().collect::<Vec<_>>().join(", "),
                        grant
                            .resources
                            .iter()
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(", "),
                        grant.ceiling
                    ),
                )));
            }
        }
        Ok(None)
    }
}
