//! `[audit]` and `[store]`: where the audit records go (the JSONL sink, its rotation and fsync,
//! further sinks, what happens when delivery lags) and where the run store lives.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditConfig {
    /// Path of the JSONL sink, relative to `.warrant/` (default `audit/audit.jsonl`).
    pub jsonl_path: Option<String>,
    /// Start a new JSONL file when the current one would pass this size.
    pub jsonl_max_bytes: Option<u64>,
    /// Start a new JSONL file when a record is this much younger than the file's first.
    pub jsonl_max_age_ms: Option<u64>,
    /// `batch` (fsync after every batch, the default) or `never` (leave it to the OS).
    pub jsonl_fsync: Option<JsonlFsync>,
    /// `warrant doctor` fails when a sink has been failing for longer than this many ms
    /// (default one hour).
    pub fail_after_ms: Option<u64>,
    /// Undelivered records (for any sink) at which the `on_full` policy applies. Default 10,000.
    pub max_pending: Option<u64>,
    /// `wait` (default: new effects wait until delivery catches up, and the run says why) or
    /// `drop` (an HTTP sink that lags skips the pending records; an audited gap marker says so,
    /// and verification of that sink's copy reports the gap).
    pub on_full: Option<OnFull>,
    /// `warrant config check` reports the audit signing key as expired once it is older than
    /// this many days (from the key file's creation or last rotation), and as expiring in the
    /// last tenth of that time. Unset: keys have no age limit.
    pub key_max_age_days: Option<u64>,
    /// Further sinks by name.
    #[serde(default)]
    pub sinks: BTreeMap<String, SinkConfig>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnFull {
    Wait,
    Drop,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JsonlFsync {
    Batch,
    Never,
}

/// One configured audit sink.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum SinkConfig {
    /// Batched POSTs of CloudEvents to an HTTP receiver.
    Http {
        url: String,
        /// Header values may be secret references: `env:NAME` reads the variable `NAME` when
        /// delivering; the value is never written anywhere.
        #[serde(default)]
        headers: BTreeMap<String, String>,
        #[serde(default)]
        batch: Option<usize>,
        #[serde(default)]
        timeout_ms: Option<u64>,
    },
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// `postgres://…` for a shared store; default: `.warrant/store.db` (SQLite).
    pub url: Option<String>,
    /// The store's password as a reference (`env:NAME` or `file:PATH`), so that it is in no
    /// URL, configuration file or message. TLS is set in the URL, with libpq's parameters
    /// (`sslmode`, `sslrootcert`, `sslcert`, `sslkey`).
    pub password: Option<String>,
    /// How many partitions a new PostgreSQL store's audit chain gets (1 to 1024; default 8):
    /// appends of runs in different partitions do not wait for each other. Applied while the
    /// chain holds no record; fixed once it does (a run's records stay in one partition).
    pub audit_partitions: Option<u64>,
}
