//! Delivering the store's outbox to every configured sink, and each sink's health. The store
//! keeps every record and each sink's cursor; delivery copies what a sink lacks and records how
//! it went, so a sink that fails catches up later and its health can be read at any time.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;
use warrant_core::config::SinkConfig;
use warrant_core::{Coded as _, Timestamp};
use warrant_store::{EventStore, Sealer, StoreError};

use crate::{HttpSink, HttpSinkConfig, JsonlSink};

/// The name the JSONL file sink has in the store and in every health report.
pub const JSONL_SINK: &str = "jsonl";

/// How hard a delivery tries: after every operation a little, a flush until it is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Patience {
    Quick,
    Flush,
}

/// What one sink's delivery came to: the acknowledged cursor, or why it stopped.
#[derive(Debug)]
pub struct Delivered {
    pub sink: String,
    pub outcome: Result<u64, String>,
}

/// The sinks of an installation: the JSONL file, always, and the configured others by name.
#[derive(Clone, Copy)]
pub struct Sinks<'a> {
    pub jsonl: &'a JsonlSink,
    pub others: &'a BTreeMap<String, SinkConfig>,
    /// Who signs the anchors of a partitioned store (issue 22): before each delivery the
    /// records committed since the last anchor are positioned and anchored, so the sinks get
    /// them. `None`: deliver what is positioned already.
    pub anchor: Option<&'a dyn Sealer>,
}

impl std::fmt::Debug for Sinks<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sinks")
            .field("jsonl", self.jsonl)
            .field("others", self.others)
            .field("anchor", &self.anchor.is_some())
            .finish()
    }
}

impl Sinks<'_> {
    /// Every sink's name, the JSONL file first.
    pub fn names(&self) -> Vec<String> {
        std::iter::once(JSONL_SINK.to_owned())
            .chain(self.others.keys().cloned())
            .collect()
    }

    /// Delivers the outbox to every sink and records each sink's state in the store. Nothing
    /// leaves the outbox: a sink that fails catches up on a later delivery.
    pub fn deliver_all(&self, store: &dyn EventStore, patience: Patience) -> Vec<Delivered> {
        let mut out = Vec::new();
        if let Some(sealer) = self.anchor {
            // Quick: when another process is anchoring now, its anchor will cover these
            // records or the next delivery's will; a flush waits for its turn.
            if let Err(e) = store.anchor(sealer, patience == Patience::Flush) {
                let error = format!("[{}] cannot anchor the audit partitions: {e}", e.code());
                out.extend(self.names().into_iter().map(|sink| Delivered {
                    sink,
                    outcome: Err(error.clone()),
                }));
                return out;
            }
        }
        let outcome = self
            .jsonl
            .deliver(store)
            .map(|r| (r.to_seq, r.delivered))
            .map_err(|e| format!("[{}] {e}", e.code()));
        out.push(record(store, JSONL_SINK, outcome));
        for (name, config) in self.others {
            let outcome = match config {
                SinkConfig::Http {
                    url,
                    headers,
                    batch,
                    timeout_ms,
                } => resolve_headers(headers).and_then(|headers| {
                    let mut cfg = HttpSinkConfig::new(url.clone());
                    cfg.headers = headers;
                    if let Some(b) = batch {
                        cfg.batch = *b;
                    }
                    if let Some(t) = timeout_ms {
                        cfg.timeout = Duration::from_millis(*t);
                    }
                    if patience == Patience::Quick {
                        // After an operation, don't hold the person up: the next one retries.
                        cfg.max_attempts = 2;
                    }
                    let acknowledged = store.sink_state(name).map(|s| s.acknowledged).unwrap_or(0);
                    let sink = HttpSink::new(name, cfg);
                    let sink = match self.jsonl.checkpointer() {
                        Some(c) => sink.with_checkpoint(c.clone()),
                        None => sink,
                    };
                    sink.deliver(store, acknowledged)
                        .map(|r| (r.acknowledged, r.delivered))
                        .map_err(|e| {
                            let acked = e.acknowledged().unwrap_or(acknowledged);
                            let _ = store.record_delivery_failure(name, acked, &e.to_string());
                            format!("[{}] {e}", e.code())
                        })
                }),
            };
            out.push(record(store, name, outcome));
        }
        out
    }

    /// The sink furthest behind, and how many records it lacks.
    pub fn worst_pending(&self, store: &dyn EventStore) -> (String, u64) {
        let head = store.audit_head().map(|h| h.seq).unwrap_or(0);
        self.names()
            .into_iter()
            .map(|sink| {
                let acked = store.sink_state(&sink).map(|s| s.acknowledged).unwrap_or(0);
                (sink, head.saturating_sub(acked))
            })
            .max_by_key(|(_, pending)| *pending)
            .unwrap_or_else(|| (JSONL_SINK.to_owned(), 0))
    }
}

/// `env:NAME` header values are secret references, read now and never written anywhere.
fn resolve_headers(headers: &BTreeMap<String, String>) -> Result<Vec<(String, String)>, String> {
    headers
        .iter()
        .map(|(k, v)| match v.strip_prefix("env:") {
            Some(var) => std::env::var(var)
                .map(|value| (k.clone(), value))
                .map_err(|_| {
                    format!("header {k} refers to the environment variable {var}, which is not set")
                }),
            None => Ok((k.clone(), v.clone())),
        })
        .collect()
}

fn record(store: &dyn EventStore, sink: &str, outcome: Result<(u64, u64), String>) -> Delivered {
    match outcome {
        Ok((acknowledged, delivered)) => {
            let _ = store.record_delivery(sink, acknowledged, delivered);
            Delivered {
                sink: sink.to_owned(),
                outcome: Ok(acknowledged),
            }
        }
        Err(message) => {
            if sink == JSONL_SINK {
                let acked = store.sink_state(sink).map(|s| s.acknowledged).unwrap_or(0);
                let _ = store.record_delivery_failure(sink, acked, &message);
            }
            Delivered {
                sink: sink.to_owned(),
                outcome: Err(message),
            }
        }
    }
}

/// One sink's health: how far it got, what it lacks, how deliveries went. The shape of
/// `audit status --json` rows; `doctor` judges it with [`SinkHealth::stale`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SinkHealth {
    pub sink: String,
    /// `jsonl` or `http`.
    pub kind: &'static str,
    pub acknowledged: u64,
    pub pending: u64,
    /// How old the oldest record the sink lacks is.
    pub oldest_pending_ms: Option<i64>,
    pub delivered_total: u64,
    /// Records per minute between the first and the last successful delivery.
    pub rate_per_minute: Option<f64>,
    pub last_success: Option<Timestamp>,
    pub last_error: Option<String>,
    pub last_error_at: Option<Timestamp>,
    /// How long the current run of failures has lasted.
    pub failing_for_ms: Option<i64>,
    /// Failing for longer than the installation tolerates.
    pub stale: bool,
}

impl SinkHealth {
    /// The health of `sink` at `now`, against the chain's `head`; failing for longer than
    /// `fail_after` makes it stale.
    pub fn of(
        store: &dyn EventStore,
        sink: &str,
        head: u64,
        now: Timestamp,
        fail_after: Duration,
    ) -> Result<Self, StoreError> {
        let state = store.sink_state(sink)?;
        let pending = head.saturating_sub(state.acknowledged);
        let oldest_pending_ms = if pending > 0 {
            store
                .audit_records(state.acknowledged, 1)
                .ok()
                .and_then(|r| r.into_iter().next())
                .and_then(|r| serde_json::from_str::<serde_json::Value>(&r.line).ok())
                .and_then(|v| v["time"].as_str().and_then(Timestamp::parse))
                .map(|t| now.millis() - t.millis())
        } else {
            None
        };
        let failing_for_ms = state.failing_since.map(|t| now.millis() - t.millis());
        let rate = match (state.first_success, state.last_success) {
            (Some(first), Some(last)) if last.millis() > first.millis() => Some(
                state.delivered_total as f64 * 60_000.0 / (last.millis() - first.millis()) as f64,
            ),
            _ => None,
        };
        Ok(Self {
            sink: sink.to_owned(),
            kind: if sink == JSONL_SINK { "jsonl" } else { "http" },
            acknowledged: state.acknowledged,
            pending,
            oldest_pending_ms,
            delivered_total: state.delivered_total,
            rate_per_minute: rate.map(|r| (r * 10.0).round() / 10.0),
            last_success: state.last_success,
            last_error: state.last_error,
            last_error_at: state.last_error_at,
            failing_for_ms,
            stale: failing_for_ms.is_some_and(|f| f > fail_after.as_millis() as i64),
        })
    }
}
