//! The autonomy envelope as an operation: setting, lifting and listing the kill switch. The
//! switch lives in the store, so it reaches every process and worker that drives a run of it;
//! the ring reads it before each effect (`warrant_kernel::ring::envelope`).

use serde::Serialize;
use warrant_core::RunId;
use warrant_store::{KillScope, KillSwitch};

use crate::{Host, HostError, Result};

/// What `warrant kill` did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KillSet {
    /// The switch as it is set: the earlier one when it was set already.
    pub switch: KillSwitch,
    /// False when the same switch was set before (its reason and setter stay).
    pub newly_set: bool,
}

/// What `warrant kill --lift` did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KillLifted {
    /// The switch that was lifted; `None` when none was set for that scope.
    pub lifted: Option<KillSwitch>,
    /// The switches still set after it.
    pub still_set: Vec<KillSwitch>,
}

impl Host {
    /// Sets the kill switch for `scope`: every run it covers stops at its next effect, in any
    /// process of the store, with exit code 3.
    pub fn kill(&self, scope: KillScope, reason: &str) -> Result<KillSet> {
        if let KillScope::Run(run) = &scope {
            self.known_run(run)?;
        }
        let who = self.identity.principal.actor.clone();
        let before = self
            .inst
            .store
            .kill_switches()
            .map_err(|e| HostError::failed(&e))?;
        let switch = self
            .inst
            .store
            .set_kill(&scope, &who, reason)
            .map_err(|e| HostError::failed(&e))?;
        let newly_set = !before.contains(&switch);
        Ok(KillSet { switch, newly_set })
    }

    /// Lifts the kill switch set for exactly `scope`. Never from a process a run started: a
    /// command must not free the run that was stopped.
    pub fn lift_kill(&self, scope: KillScope, reason: &str) -> Result<KillLifted> {
        crate::origin::refuse_from_command("lift a kill switch")?;
        let who = self.identity.principal.actor.clone();
        let lifted = self
            .inst
            .store
            .lift_kill(&scope, &who, reason)
            .map_err(|e| HostError::failed(&e))?;
        let still_set = self.kill_switches()?;
        Ok(KillLifted { lifted, still_set })
    }

    /// The kill switches that are set, oldest first.
    pub fn kill_switches(&self) -> Result<Vec<KillSwitch>> {
        self.inst
            .store
            .kill_switches()
            .map_err(|e| HostError::failed(&e))
    }

    /// A run of this person's tenant: another tenant's run answers as a missing one (and the
    /// attempt is kept), so the switch is no oracle for what other tenants run.
    fn known_run(&self, run: &RunId) -> Result<()> {
        match self.inst.scoped().run(run) {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err({
                self.inst.refused(
                    "set a kill switch on a run",
                    warrant_store::Target::Run(run.clone()),
                );
                HostError::usage(
                    "W-ENVELOPE-003",
                    format!("run {run} does not exist in this store; no kill switch was set"),
                )
                .with_hint(crate::Hint::ListRuns)
            }),
            Err(e) => Err(HostError::failed(&e)),
        }
    }
}
