//! The read side of an installation: its runs, requests and audit trail, opened without the
//! identity or policy a run needs (so a listing works while a policy file is being fixed).
//! Every operation returns a typed view with `Serialize`: the `--json` output of the binary,
//! a web API and a gateway reply are the same struct.

use std::sync::Arc;

use serde::Serialize;
use warrant_core::{Clock as _, RunId, SystemClock, Timestamp};
use warrant_store::{FenceRejection, RequestRow, RequestStatus, RunRow, SealedRecord};

use crate::install::{self, Installation, Paths};
use crate::{Class, HostError, Notices, Result, Where};

/// An installation opened to read: paths, store, keys and sinks.
#[derive(Debug)]
pub struct Opened {
    pub paths: Paths,
    pub inst: Installation,
}

impl Opened {
    pub fn records(&self) -> Records<'_> {
        Records {
            paths: &self.paths,
            inst: &self.inst,
        }
    }
}

/// The read operations over an opened installation (one opened to read, or a [`crate::Host`]).
#[derive(Clone, Copy, Debug)]
pub struct Records<'a> {
    pub paths: &'a Paths,
    pub inst: &'a Installation,
}

/// Opens the installation at `at` to read it.
pub fn open(at: &Where, notices: Arc<dyn Notices + Send>) -> Result<Opened> {
    let paths = install::paths(at, false)?;
    let layers = install::read_layers(&paths)?;
    let settings = install::settings(&layers)?;
    let inst = install::installation(&paths, &settings, notices)?;
    Ok(Opened { paths, inst })
}

/// One run in full: its row, its events as stored, and the appends refused for a stale lease.
#[derive(Debug, Serialize)]
pub struct RunView {
    pub run: RunRow,
    pub events: Vec<warrant_store::StoredEvent>,
    pub fence_rejections: Vec<FenceRejection>,
    /// For a subagent: the run and call that started it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<warrant_kernel::ParentLink>,
    /// The subagents this run started, by the spawns its log holds, and the runs that answered
    /// its MCP servers' sampling requests.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subagents: Vec<RunId>,
}

/// Attempts across tenants (`audit refusals`), oldest first.
#[derive(Debug, Serialize)]
pub struct Refusals {
    pub refusals: Vec<warrant_store::TenantRefusal>,
}

/// The chain head and every sink's health (`audit status`).
#[derive(Debug, Serialize)]
pub struct AuditStatus {
    pub head: u64,
    pub sinks: Vec<warrant_audit::SinkHealth>,
}

/// What a flush came to: every sink has every record, or which are stuck and why.
#[derive(Debug, Serialize)]
pub struct Flushed {
    pub flushed: bool,
    pub head: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stuck: Vec<Stuck>,
}

#[derive(Debug, Serialize)]
pub struct Stuck {
    pub sink: String,
    pub error: String,
}

pub(crate) fn run_missing(run: &RunId) -> HostError {
    HostError::usage("W-KERNEL-004", format!("run {run} does not exist"))
        .with_hint(crate::Hint::ListRuns)
}

impl Records<'_> {
    /// This tenant's runs.
    pub fn runs(&self) -> Result<Vec<RunRow>> {
        self.inst.scoped().runs().map_err(|e| HostError::failed(&e))
    }

    /// The row of `run` when it is this tenant's. Another tenant's run answers exactly as one
    /// that does not exist (no existence oracle), and the attempt (`operation`) is kept.
    pub fn own_run(&self, run: &RunId, operation: &str) -> Result<RunRow> {
        match self
            .inst
            .scoped()
            .run(run)
            .map_err(|e| HostError::failed(&e))?
        {
            Some(row) => Ok(row),
            None => {
                self.inst
                    .refused(operation, warrant_store::Target::Run(run.clone()));
                Err(run_missing(run))
            }
        }
    }

    /// The refused attempts this tenant made on another's records, or another made on its.
    pub fn tenant_refusals(&self) -> Result<Refusals> {
        let refusals = self
            .inst
            .scoped()
            .refusals()
            .map_err(|e| HostError::failed(&e))?;
        Ok(Refusals { refusals })
    }

    pub fn run(&self, run: &RunId) -> Result<RunView> {
        let store = self.inst.store.as_ref();
        let scoped = self.inst.scoped();
        let row = self.own_run(run, "show a run")?;
        let events = scoped.events(run).map_err(|e| HostError::failed(&e))?;
        let fence_rejections = store
            .fence_rejections(run)
            .map_err(|e| HostError::failed(&e))?;
        // The links both ways, read from the log: the child's first event names its parent,
        // the parent's spawns name each child (listed once it has started).
        let mut parent = None;
        let mut subagents = Vec::new();
        for e in &events {
            let Ok(event) = warrant_kernel::RunEvent::from_stored(e) else {
                continue;
            };
            if let warrant_kernel::RunEvent::RunStarted { settings, .. } = event {
                parent = settings.spawn.and_then(|s| s.parent);
            } else if let warrant_kernel::RunEvent::ActionProposed { actions, .. } = event {
                for a in actions {
                    if let warrant_core::Action::AgentSpawn { child, .. } = a
                        && scoped.run(&child).ok().flatten().is_some()
                    {
                        subagents.push(child);
                    }
                }
            } else if let warrant_kernel::RunEvent::EffectCompleted { result, .. } = event {
                // The runs that answered a peer's sampling requests during the call.
                for child in warrant_kernel::model_gate::sampling_runs_in(&result) {
                    if scoped.run(&child).ok().flatten().is_some() {
                        subagents.push(child);
                    }
                }
            }
        }
        Ok(RunView {
            run: row,
            events,
            fence_rejections,
            parent,
            subagents,
        })
    }

    /// The request index: the open requests, or every one with `all`.
    pub fn requests(&self, all: bool) -> Result<Vec<RequestRow>> {
        self.inst
            .scoped()
            .requests(if all { None } else { Some(RequestStatus::Open) })
            .map_err(|e| HostError::failed(&e))
    }

    pub fn audit_head(&self) -> Result<u64> {
        Ok(self
            .inst
            .store
            .audit_head()
            .map_err(|e| HostError::failed(&e))?
            .seq)
    }

    /// This tenant's last `lines` records of the chain, after delivering what is new.
    pub fn tail(&self, lines: usize) -> Result<Vec<SealedRecord>> {
        install::deliver(self.inst);
        let mut records = self
            .inst
            .scoped()
            .audit(&warrant_store::AuditQuery::default())
            .map_err(|e| HostError::failed(&e))?;
        let cut = records.len().saturating_sub(lines);
        Ok(records.split_off(cut))
    }

    /// This tenant's audit records matching `query`.
    pub fn query(&self, query: &warrant_store::AuditQuery) -> Result<Vec<SealedRecord>> {
        self.inst
            .scoped()
            .audit(query)
            .map_err(|e| HostError::failed(&e))
    }

    /// The store's whole audit trail, read in batches.
    /// A partitioned store's records committed since its last anchor are anchored first, so
    /// the trail read is whole up to now (when anchoring fails, what is anchored is read and
    /// its verification says what is wrong).
    pub fn all_records(&self) -> Result<Vec<SealedRecord>, warrant_store::StoreError> {
        let _ = self.inst.store.anchor(&self.inst.sealer, true);
        let mut records: Vec<SealedRecord> = Vec::new();
        loop {
            let after = records.last().map_or(0, |r| r.seq);
            let batch = self.inst.store.audit_records(after, 1000)?;
            if batch.is_empty() {
                return Ok(records);
            }
            records.extend(batch);
        }
    }

    pub fn audit_status(&self) -> Result<AuditStatus> {
        let head = self.audit_head()?;
        let now = SystemClock.now();
        let sinks = self
            .inst
            .sinks()
            .names()
            .iter()
            .map(|s| self.sink_health(s, head, now))
            .collect::<Result<_>>()?;
        Ok(AuditStatus { head, sinks })
    }

    pub fn sink_health(
        &self,
        sink: &str,
        head: u64,
        now: Timestamp,
    ) -> Result<warrant_audit::SinkHealth> {
        warrant_audit::SinkHealth::of(
            self.inst.store.as_ref(),
            sink,
            head,
            now,
            std::time::Duration::from_millis(self.inst.fail_after_ms),
        )
        .map_err(|e| HostError::failed(&e))
    }

    /// One delivery to every sink, trying as hard as a flush does.
    pub fn deliver_once(&self) -> Result<(u64, Vec<warrant_audit::Delivered>)> {
        let head = self.audit_head()?;
        let delivered = self
            .inst
            .sinks()
            .deliver_all(self.inst.store.as_ref(), warrant_audit::Patience::Flush);
        Ok((head, delivered))
    }

    /// Delivers until every sink has every record or `limit` has passed; half a second between
    /// tries. A flush that gives up is not an error here: the view says which sinks are stuck.
    pub fn flush(&self, limit: std::time::Duration) -> Result<Flushed> {
        let started = std::time::Instant::now();
        loop {
            let (head, results) = self.deliver_once()?;
            let stuck: Vec<Stuck> = results
                .into_iter()
                .filter_map(|d| match d.outcome {
                    Ok(acked) if acked >= head => None,
                    Ok(acked) => Some(Stuck {
                        sink: d.sink,
                        error: format!("{} record(s) still pending", head - acked),
                    }),
                    Err(error) => Some(Stuck {
                        sink: d.sink,
                        error,
                    }),
                })
                .collect();
            if stuck.is_empty() || started.elapsed() >= limit {
                return Ok(Flushed {
                    flushed: stuck.is_empty(),
                    head,
                    stuck,
                });
            }
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
    }

    /// A run's events and its signed audit records (in chain order), after checking that the
    /// records are authentic and each binds its event.
    pub(crate) fn checked_journal(
        &self,
        run: &RunId,
    ) -> Result<(Vec<warrant_store::StoredEvent>, Vec<SealedRecord>)> {
        let store = self.inst.store.as_ref();
        self.own_run(run, "read a run's journal")?;
        let events = store.events(run).map_err(|e| HostError::failed(&e))?;
        if events.is_empty() {
            return Err(run_missing(run));
        }
        let records =
            warrant_kernel::journal::run_records(store, run).map_err(|e| HostError::failed(&e))?;
        if !crate::controls::disabled("binding") {
            warrant_audit::verify_run(run, &events, &records, &self.inst.public_keys)
                .map_err(|e| HostError::coded(&e, Class::Failed))?;
        }
        Ok((events, records))
    }
}

/// Rotates the audit signing key of the installation at `at`; records signed by the old key
/// still verify (its public key is kept among the retired ones).
pub fn rotate_audit_key(at: &Where) -> Result<warrant_audit::Rotation> {
    let paths = install::paths(at, false)?;
    warrant_audit::AuditKey::rotate(&paths.keys()).map_err(|e| HostError::failed(&e))
}

/// The public keys an outside auditor needs to verify a copy of the trail.
pub fn audit_public_keys(at: &Where) -> Result<warrant_audit::PublicKeys> {
    let paths = install::paths(at, false)?;
    warrant_audit::PublicKeys::load_dir(&paths.keys()).map_err(|e| HostError::failed(&e))
}
