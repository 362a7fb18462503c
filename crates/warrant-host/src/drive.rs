//! Driving a run from this process: take the run's lease, renew it from a second thread while
//! the agent loop works, present its fencing token on every append, give it back at the end.
//! `run`, `resume` and `worker` all go through here.

use std::time::{Duration, Instant};

use warrant_agent::{Agent, AgentError, RunExit};
use warrant_kernel::{Prompter, Ring, RunState, ToolEnv};
use warrant_llm::ModelProvider;
use warrant_store::{EventStore, Lease, StoreError};

/// Lease length for a run driven by `run` or `resume`.
pub const LEASE_TTL: Duration = Duration::from_secs(30);

/// This process's name in leases: host and pid.
pub fn holder() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".into());
    format!("{host}:{}", std::process::id())
}

/// Whether `holder` names a process of this host that no longer exists.
fn holder_is_dead_here(holder: &str) -> bool {
    let Some((host, pid)) = holder.rsplit_once(':') else {
        return false;
    };
    let here = self::holder();
    let this_host = here.rsplit_once(':').map_or("", |(h, _)| h);
    let Ok(pid) = pid.parse::<i32>() else {
        return false;
    };
    host == this_host
        && rustix::process::Pid::from_raw(pid)
            .is_some_and(|p| rustix::process::test_kill_process(p) == Err(rustix::io::Errno::SRCH))
}

/// Takes the lease of `run` for this process. A lease held by a process of this host that has
/// died (a crashed `run` or `resume`) is broken at once instead of waiting for it to expire;
/// a live holder's lease is respected.
pub fn lease_here(
    store: &dyn EventStore,
    run: &warrant_core::RunId,
    notices: &dyn crate::Notices,
) -> Result<Lease, StoreError> {
    match store.lease_run(run, &holder(), LEASE_TTL) {
        Err(StoreError::Leased { holder: other, .. }) if holder_is_dead_here(&other) => {
            notices.notice(crate::Notice::TakingOver {
                run: run.to_string(),
                from: other.clone(),
            });
            store.break_lease(run, &other)?;
            store.lease_run(run, &holder(), LEASE_TTL)
        }
        other => other,
    }
}

pub(crate) struct Drive<'a> {
    pub store: &'a (dyn EventStore + Sync),
    pub ring: &'a Ring<'a>,
    pub env: &'a ToolEnv,
    pub model: &'a dyn ModelProvider,
    pub ttl: Duration,
    pub backpressure: &'a dyn warrant_agent::Backpressure,
}

impl Drive<'_> {
    /// Drives `state` under `lease` until the run ends, parks, or the lease is lost.
    pub fn run(
        &self,
        state: &mut RunState,
        lease: Lease,
        prompter: &mut dyn Prompter,
    ) -> Result<RunExit, AgentError> {
        self.ring.hold_fence(Some(lease.token));
        // Dropping `done` wakes the heartbeat at once, so a run's end never waits for its tick.
        let (done, ended) = std::sync::mpsc::channel::<()>();
        let store = self.store;
        let ttl = self.ttl;
        let result = std::thread::scope(|scope| {
            let heartbeat_lease = lease.clone();
            scope.spawn(move || {
                let mut current = heartbeat_lease;
                let mut next = Instant::now() + ttl / 3;
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    ended.recv_timeout(Duration::from_millis(50).min(ttl / 10))
                {
                    if Instant::now() < next {
                        continue;
                    }
                    match store.heartbeat(&current, ttl) {
                        Ok(renewed) => current = renewed,
                        // The store did not answer (restarting, cut off): try again soon. If
                        // the lease lapses meanwhile and another worker takes the run, this
                        // one's next append is fenced; nothing is written twice.
                        Err(e) if e.is_transient() => {
                            next = Instant::now() + ttl / 10;
                            continue;
                        }
                        // Superseded: the next append is refused and the loop stops.
                        Err(_) => break,
                    }
                    next = Instant::now() + ttl / 3;
                }
            });
            let mut agent = Agent {
                ring: self.ring,
                env: self.env,
                model: self.model,
                prompter,
                backpressure: self.backpressure,
            };
            let result = agent.drive(state);
            drop(done);
            result
        });
        let _ = self.store.release(&lease);
        self.ring.hold_fence(None);
        result
    }
}

/// The duration given to option `--flag`, or an error that shows an `example` of one.
pub fn duration_arg(flag: &str, value: &str, example: &str) -> crate::Result<Duration> {
    parse_duration(value).ok_or_else(|| {
        crate::HostError::usage(
            "W-CLI-003",
            format!("--{flag} {value:?} is not a duration; use e.g. {example}"),
        )
    })
}

/// The RFC 3339 time given to option `--flag`, if any, or an error that shows one.
pub fn time_arg(flag: &str, value: Option<&str>) -> crate::Result<Option<warrant_core::Timestamp>> {
    value
        .map(|t| {
            warrant_core::Timestamp::parse(t).ok_or_else(|| {
                crate::HostError::usage(
                    "W-CLI-004",
                    format!("--{flag} {t:?} is not an RFC 3339 time (e.g. 2026-11-29T00:00:00Z)"),
                )
            })
        })
        .transpose()
}

/// Parses `500ms`, `90s`, `10m`, `2h`.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().ok()?;
    match unit {
        "ms" => Some(Duration::from_millis(n)),
        "s" => Some(Duration::from_secs(n)),
        "m" => Some(Duration::from_secs(n * 60)),
        "h" => Some(Duration::from_secs(n * 3600)),
        _ => None,
    }
}
