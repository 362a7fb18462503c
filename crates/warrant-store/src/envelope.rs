//! The autonomy envelope's shared state: the kill switch and the rate buckets. They live in
//! the store, not in a process, because a run is driven by whichever process holds its lease
//! (a `warrant run`, a worker on another machine): a switch set from one process must stop
//! the next effect in every other, and a principal's rate must be one budget however many
//! workers spend it. Written once for every dialect, like the rest of the store.

use serde::{Deserialize, Serialize};
use warrant_core::{RunId, Timestamp};

use crate::sql::{Dialect, Row, Store, TxKind, Val, vals};
use crate::{CancelRequest, StoreError};

/// What a kill switch stops.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "scope", content = "target", rename_all = "lowercase")]
pub enum KillScope {
    /// Every run of the store.
    All,
    /// Every run of one tenant.
    Tenant(String),
    /// Every run whose actor is, or acts on behalf of, this name.
    Actor(String),
    /// One run and the subagents under it.
    Run(RunId),
}

impl KillScope {
    pub fn name(&self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Tenant(_) => "tenant",
            Self::Actor(_) => "actor",
            Self::Run(_) => "run",
        }
    }

    /// The scope's target as stored (`""` for `all`).
    pub fn target(&self) -> &str {
        match self {
            Self::All => "",
            Self::Tenant(t) | Self::Actor(t) => t,
            Self::Run(r) => r.as_str(),
        }
    }

    /// `all`, `tenant acme`, `actor alice`, `run r-…`: how messages name it.
    pub fn describe(&self) -> String {
        match self {
            Self::All => "all".to_owned(),
            other @ (Self::Tenant(_) | Self::Actor(_) | Self::Run(_)) => {
                format!("{} {}", other.name(), other.target())
            }
        }
    }

    fn parse(scope: &str, target: String) -> Result<Self, String> {
        match scope {
            "all" => Ok(Self::All),
            "tenant" => Ok(Self::Tenant(target)),
            "actor" => Ok(Self::Actor(target)),
            "run" => RunId::parse(&target)
                .map(Self::Run)
                .ok_or_else(|| format!("malformed run id {target:?} in a kill switch")),
            other => Err(format!("unknown kill switch scope {other:?}")),
        }
    }
}

/// A kill switch that is set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KillSwitch {
    #[serde(flatten)]
    pub scope: KillScope,
    pub reason: String,
    pub set_by: String,
    pub set_at: Timestamp,
}

/// What the next effect of one run is checked against: the run and its ancestors (a
/// subagent stops with its parent), its tenant, its actor and the person it acts for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KillSubject<'a> {
    pub tenant: &'a str,
    pub actors: &'a [&'a str],
    pub runs: &'a [RunId],
}

/// What the store says of one run at an effect boundary, read at once: the kill switch that
/// stops it, and whether it or one of its ancestors was asked to stop.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StopSignals {
    /// The oldest switch that stops the subject ([`EnvelopeStore::kill_for`]).
    pub kill: Option<KillSwitch>,
    /// The cancellation request of each run of the subject, in its order (the run first).
    pub cancels: Vec<Option<CancelRequest>>,
}

impl StopSignals {
    /// Whether anything read stops the next effect: a switch, or a cancellation of the run or
    /// an ancestor.
    pub fn stop(&self) -> bool {
        self.kill.is_some() || self.cancels.iter().any(Option::is_some)
    }
}

impl KillSubject<'_> {
    /// Whether `switch` stops this subject.
    pub(crate) fn stopped_by(&self, switch: &KillSwitch) -> bool {
        match &switch.scope {
            KillScope::All => true,
            KillScope::Tenant(t) => t == self.tenant,
            KillScope::Actor(a) => self.actors.contains(&a.as_str()),
            KillScope::Run(r) => self.runs.contains(r),
        }
    }
}

/// The outcome of taking one token from a bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Taken {
    Granted,
    /// The bucket is empty; the next token comes in this many milliseconds.
    Empty {
        retry_after_ms: u64,
    },
}

/// The envelope's state in the store: kill switches and rate buckets.
pub trait EnvelopeStore {
    /// Sets the switch for `scope` (idempotent: a switch already set stays as it was set, and
    /// is returned).
    fn set_kill(&self, scope: &KillScope, by: &str, reason: &str)
    -> Result<KillSwitch, StoreError>;

    /// Lifts the switch for exactly `scope`; the switch that was lifted, `None` when none was
    /// set. A lifted switch stays in the table as history.
    fn lift_kill(
        &self,
        scope: &KillScope,
        by: &str,
        reason: &str,
    ) -> Result<Option<KillSwitch>, StoreError>;

    /// The switches that are set, oldest first.
    fn kill_switches(&self) -> Result<Vec<KillSwitch>, StoreError>;

    /// The oldest switch that stops `subject`, if any. An error means the switch could not be
    /// read: callers stop (fail closed).
    fn kill_for(&self, subject: &KillSubject<'_>) -> Result<Option<KillSwitch>, StoreError>;

    /// Takes one token from the bucket `key` holding at most `capacity` tokens and refilled at
    /// `per_minute`, atomically across every process of the store.
    fn take_token(&self, key: &str, capacity: u32, per_minute: u32) -> Result<Taken, StoreError>;
}

pub(crate) fn read_switch(r: &Row) -> Result<KillSwitch, String> {
    Ok(KillSwitch {
        scope: KillScope::parse(&r.text(0)?, r.text(1)?)?,
        reason: r.text(2)?,
        set_by: r.text(3)?,
        set_at: r.ts(4)?,
    })
}

pub(crate) const SWITCH_COLUMNS: &str = "scope, target, reason, set_by, set_at";

/// Bucket levels are kept in thousandths of a token, so refills of less than a token a call
/// are not lost to rounding.
const MILLI: i64 = 1000;

impl<D: Dialect> EnvelopeStore for Store<D> {
    fn set_kill(
        &self,
        scope: &KillScope,
        by: &str,
        reason: &str,
    ) -> Result<KillSwitch, StoreError> {
        let now = self.clock.now();
        let mut tx = self.begin(TxKind::Lease)?;
        tx.execute(
            "INSERT INTO kill_switches (scope, target, reason, set_by, set_at) VALUES (?1, ?2, ?3, ?4, ?5) \
             ON CONFLICT (scope, target) WHERE lifted_at IS NULL DO NOTHING",
            &vals![scope.name(), scope.target(), reason, by, now.millis()],
        )?;
        let set = tx
            .row(
                &format!(
                    "SELECT {SWITCH_COLUMNS} FROM kill_switches WHERE scope = ?1 AND target = ?2 AND lifted_at IS NULL"
                ),
                &vals![scope.name(), scope.target()],
                read_switch,
            )?
            .ok_or_else(|| {
                StoreError::Query(format!(
                    "the kill switch {} was not found right after it was set",
                    scope.describe()
                ))
            })?;
        tx.commit()?;
        Ok(set)
    }

    fn lift_kill(
        &self,
        scope: &KillScope,
        by: &str,
        reason: &str,
    ) -> Result<Option<KillSwitch>, StoreError> {
        let now = self.clock.now();
        let mut tx = self.begin(TxKind::Lease)?;
        let set = tx.row(
            &format!(
                "SELECT {SWITCH_COLUMNS} FROM kill_switches WHERE scope = ?1 AND target = ?2 AND lifted_at IS NULL{}",
                D::FOR_UPDATE
            ),
            &vals![scope.name(), scope.target()],
            read_switch,
        )?;
        if set.is_some() {
            tx.execute(
                "UPDATE kill_switches SET lifted_by = ?3, lifted_at = ?4, lift_reason = ?5 \
                 WHERE scope = ?1 AND target = ?2 AND lifted_at IS NULL",
                &vals![scope.name(), scope.target(), by, now.millis(), reason],
            )?;
        }
        tx.commit()?;
        Ok(set)
    }

    fn kill_switches(&self) -> Result<Vec<KillSwitch>, StoreError> {
        self.single()?.rows(
            &format!(
                "SELECT {SWITCH_COLUMNS} FROM kill_switches WHERE lifted_at IS NULL ORDER BY set_at, scope, target"
            ),
            &[],
            read_switch,
        )
    }

    fn kill_for(&self, subject: &KillSubject<'_>) -> Result<Option<KillSwitch>, StoreError> {
        // One indexed read of the few switches that are set; matching them here keeps the
        // statement the same whatever the number of actors and ancestors.
        let set = self.kill_switches()?;
        Ok(set.into_iter().find(|s| subject.stopped_by(s)))
    }

    fn take_token(&self, key: &str, capacity: u32, per_minute: u32) -> Result<Taken, StoreError> {
        let now = self.clock.now().millis();
        let full = i64::from(capacity) * MILLI;
        let mut tx = self.begin(TxKind::Lease)?;
        let level = tx.row(
            &format!(
                "SELECT level, updated_at FROM rate_buckets WHERE bucket = ?1{}",
                D::FOR_UPDATE
            ),
            &vals![key],
            |r| Ok((r.int(0)?, r.int(1)?)),
        )?;
        let level = match level {
            None => {
                // A new bucket starts full; a concurrent first taker is serialized by the
                // primary key (the loser's insert does nothing and it reads the row next time).
                tx.execute(
                    "INSERT INTO rate_buckets (bucket, level, updated_at) VALUES (?1, ?2, ?3) ON CONFLICT (bucket) DO NOTHING",
                    &vals![key, full, now],
                )?;
                full
            }
            Some((level, at)) => {
                let elapsed = (now - at).max(0);
                let refill = elapsed.saturating_mul(i64::from(per_minute)) * MILLI / 60_000;
                level.saturating_add(refill).min(full)
            }
        };
        let taken = if level >= MILLI {
            tx.execute(
                "UPDATE rate_buckets SET level = ?2, updated_at = ?3 WHERE bucket = ?1",
                &vals![key, level - MILLI, now],
            )?;
            Taken::Granted
        } else {
            tx.execute(
                "UPDATE rate_buckets SET level = ?2, updated_at = ?3 WHERE bucket = ?1",
                &vals![key, level, now],
            )?;
            let missing = MILLI - level;
            let retry_after_ms = if per_minute == 0 {
                u64::MAX
            } else {
                let per = i64::from(per_minute) * MILLI;
                ((missing * 60_000 + per - 1) / per) as u64
            };
            Taken::Empty { retry_after_ms }
        };
        tx.commit()?;
        Ok(taken)
    }
}
