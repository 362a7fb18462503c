//! Stable error codes. Every error a user can see carries one (`W-POLICY-003`); docs/ERRORS.md
//! explains each. Codes are never reused for a different meaning. What a person can do about an
//! error is a typed [`Hint`], named by the operation: each front end words it itself (the CLI as
//! a command line, a web page as a link, a gateway as a reply), so no library message names a
//! front end's commands.

use serde::{Deserialize, Serialize};

use crate::{RequestId, RunId};

/// An error with a stable, documented code.
pub trait Coded {
    /// The stable code, e.g. `W-POLICY-003`.
    fn code(&self) -> &'static str;

    /// What a person can do next, when the error suggests something.
    fn hint(&self) -> Option<Hint> {
        None
    }
}

/// What a person can do about a failure, named by the operation rather than by a command line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "do", rename_all = "snake_case")]
pub enum Hint {
    /// Create the installation in this workspace.
    Init,
    /// See what is delivered and what is not.
    AuditStatus,
    /// See the runs there are.
    ListRuns,
    /// See the open approval requests.
    ListApprovals,
    /// See the open requests of every kind.
    ListRequests,
    /// See a run's steps.
    ShowRun { run: RunId },
    /// See one request and how it is answered.
    ShowRequest { request: RequestId },
    /// Continue the run.
    Resume { run: RunId },
    /// Approvals are answered by approving or denying.
    ApproveOrDeny,
    /// Answer the question (by option or free text).
    AnswerQuestion,
    /// Provide the secret (the value is read from the person, never from an argument).
    ProvideSecret,
    /// Connect the resource (a URL, a command, or the agent's proposal).
    ConnectResource,
    /// Resolve an effect in doubt: it completed, should be retried, or failed.
    ResolveInDoubt { run: RunId, step: String },
    /// The installation may never have been created here (its files are missing).
    CheckInit,
    /// Start a new store where an unusable one was moved aside.
    InitAnew,
    /// Make a new approver key, replacing the one there.
    NewApproverKey,
    /// Enroll this person's approver key again once the file is fixed.
    EnrollApproverKey,
    /// Verify the whole audit trail (the chain, every copy, every run's journal).
    VerifyTrail,
    /// Verify the audit trail, and treat what it finds as tampering.
    VerifyAsTampering,
    /// Verify the sink copy named in the message.
    VerifySinkCopy,
    /// Verify the store's audit chain.
    VerifyStore,
    /// Verify both sink files named in the message.
    VerifyBothCopies,
    /// Verify the audit trail.
    Verify,
    /// Restore a cut sink copy: move it and its checkpoint aside, then deliver again from the
    /// store.
    RestoreCopy,
    /// Check a sink copy against the store.
    VerifyCopy,
    /// Deliver again to write the missing checkpoint, and find out who removed it.
    WriteCheckpoint,
    /// See what confinement this machine provides.
    SandboxSupport,
}
