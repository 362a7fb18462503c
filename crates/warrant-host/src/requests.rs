//! Requests the agent raised (questions, secrets, resources): folding their run to read them,
//! and recording a person's reply, never from a process a run started.

use warrant_core::{RequestId, RunId};
use warrant_kernel::{Reply, RunState};

use crate::{Class, Host, HostError, Result, install};

impl Host {
    /// Folds `run` after checking its journal against the signed chain (a mismatch is refused,
    /// recorded and delivered, and fails as [`Class::Refused`]); other errors are of `class`.
    pub fn load_run(&self, run: &RunId, class: Class) -> Result<RunState> {
        self.with_ring(&warrant_kernel::Silent, |ring| {
            install::load_run(&self.inst, ring, run, class)
        })
    }

    /// Refuses, and records the attempt in the run, when this process was started by a run:
    /// a command can never `what` (answer a request, provide a secret).
    pub fn refuse_from_command(
        &self,
        state: &mut RunState,
        request: &RequestId,
        what: &str,
    ) -> Result<()> {
        self.with_ring(&warrant_kernel::Silent, |ring| {
            let refused = crate::origin::refuse_recorded(
                ring,
                state,
                request,
                &self.identity.principal,
                what,
            );
            if refused.is_err() {
                self.deliver();
            }
            refused
        })
    }

    /// Records `reply` to `request` as this process's person, then delivers the trail.
    pub fn reply(&self, state: &mut RunState, request: &RequestId, reply: Reply) -> Result<()> {
        self.with_ring(&warrant_kernel::Silent, |ring| {
            let result = ring.reply(state, request, &self.identity.principal, "cli", reply);
            self.deliver();
            result.map_err(|e| HostError::bad_input(&e))
        })
    }
}
