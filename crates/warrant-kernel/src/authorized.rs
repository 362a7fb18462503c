//! `Authorized<T>`: proof that the ring decided to let an action through. Executors accept only
//! this type, and only the ring (this crate) can make one, so an executor cannot be reached
//! without passing policy, approval and the journal first.

#[cfg(feature = "testing")]
use warrant_core::IdSource as _;
use warrant_core::{Action, Payload, Principal, RunId};

/// A value the ring has authorized, with the place in the run log where that was recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorized<T> {
    inner: T,
    run: RunId,
    /// Sequence number of the `EffectStarted` event that recorded the go-ahead.
    started_seq: u64,
    /// A person approved it (this call, or by a session grant), rather than policy alone.
    by_person: bool,
    /// Who the run acts as (and for), fixed in its first event: what an effect that keeps a
    /// record of its author (a memory entry, an artifact) names.
    principal: Principal,
    /// The run had been shown untrusted content (a completed tool result) before this effect:
    /// what it makes may carry an injection, and is marked so.
    seen_untrusted: bool,
    /// The person whose recorded approval of this call let it through (none when policy alone
    /// did, or a session grant of an earlier call).
    approver: Option<crate::events::Approver>,
}

/// The run facts an authorization carries besides the action (see [`Authorized::principal`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Grant {
    pub(crate) run: RunId,
    pub(crate) started_seq: u64,
    pub(crate) by_person: bool,
    pub(crate) principal: Principal,
    pub(crate) seen_untrusted: bool,
    pub(crate) approver: Option<crate::events::Approver>,
}

impl<T> Authorized<T> {
    pub(crate) fn new(inner: T, grant: Grant) -> Self {
        Self {
            inner,
            run: grant.run,
            started_seq: grant.started_seq,
            by_person: grant.by_person,
            principal: grant.principal,
            seen_untrusted: grant.seen_untrusted,
            approver: grant.approver,
        }
    }

    /// Who approved this call, as the journal recorded it: `None` when policy alone let it
    /// through, or when a session grant made for an earlier call did.
    pub fn approver(&self) -> Option<&crate::events::Approver> {
        self.approver.as_ref()
    }

    /// The run's principal: the actor and whom it acts for.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// Whether the run had seen untrusted content when this was authorized.
    pub fn seen_untrusted(&self) -> bool {
        self.seen_untrusted
    }

    /// Whether a person approved this (an executor lets a destructive changeset land only then).
    pub fn by_person(&self) -> bool {
        self.by_person
    }

    pub fn get(&self) -> &T {
        &self.inner
    }

    pub fn run(&self) -> &RunId {
        &self.run
    }

    pub fn started_seq(&self) -> u64 {
        self.started_seq
    }

    /// Only for tests of executors, behind the `testing` feature that no production crate
    /// enables (CI checks the binary's feature set).
    #[cfg(feature = "testing")]
    pub fn for_tests(inner: T) -> Self {
        let run = RunId::parse("run-0")
            .unwrap_or_else(|| warrant_core::SequentialIds::default().run_id());
        let principal = Principal {
            tenant: "default".to_owned(),
            actor: "agent:test".to_owned(),
            kind: warrant_core::PrincipalKind::Agent,
            on_behalf_of: Some("user:test".to_owned()),
            roles: Vec::new(),
            teams: Vec::new(),
            attrs: Default::default(),
        };
        Self::new(
            inner,
            Grant {
                run,
                started_seq: 0,
                by_person: false,
                principal,
                seen_untrusted: false,
                approver: None,
            },
        )
    }

    /// [`Self::for_tests`], as if a person had approved it.
    #[cfg(feature = "testing")]
    pub fn for_tests_approved(inner: T) -> Self {
        let mut a = Self::for_tests(inner);
        a.by_person = true;
        a
    }
}

impl Authorized<Action> {
    /// The authorized payload this action is (`Authorized<FsWrite>` from an `fs.write` or
    /// `fs.create`, `Authorized<ShellExec>` from a `shell.exec`, …), for the executor of that
    /// kind, which then needs no match on every kind of action; `None` when the action is of
    /// another kind. Made only from the action itself, so it authorizes nothing the ring did not.
    pub fn narrow<T: Payload>(&self) -> Option<Authorized<T>> {
        T::of(&self.inner).map(|payload| Authorized {
            inner: payload,
            run: self.run.clone(),
            started_seq: self.started_seq,
            by_person: self.by_person,
            principal: self.principal.clone(),
            seen_untrusted: self.seen_untrusted,
            approver: self.approver.clone(),
        })
    }
}
