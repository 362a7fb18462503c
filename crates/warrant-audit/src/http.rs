//! The HTTP sink: POSTs the outbox's sealed lines, in seq order, as CloudEvents batches. A batch
//! counts as delivered only when the receiver answered 2xx; a retried batch carries the same
//! `Idempotency-Key`, so a receiver that dedups never counts it twice. Synchronous, one batch in
//! flight; the caller keeps the acknowledged cursor (this sink holds no state between calls).
//!
//! With a [`Checkpointer`], every batch also carries the installation's signed checkpoint for its
//! last record in the `Warrant-Checkpoint` header (base64 of the checkpoint's JSON): a receiver
//! that keeps the records in order and the latest header beside them (`<copy>.checkpoint`) holds
//! a copy that `warrant audit verify --file` proves complete up to that record, so records cut
//! from its end are found, as for the JSONL sink.

use std::fmt;
use std::io::Read as _;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use warrant_store::{AuditOutbox, SealedRecord};

use crate::record::whole_batches;
use crate::{AuditError, Checkpointer};

pub const DEFAULT_HTTP_BATCH: usize = 100;
pub const DEFAULT_HTTP_TIMEOUT: Duration = Duration::from_secs(10);
/// Attempts per batch, including the first.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 6;
pub const DEFAULT_BACKOFF_BASE: Duration = Duration::from_millis(200);
pub const DEFAULT_BACKOFF_MAX: Duration = Duration::from_secs(10);
/// The CloudEvents batched content mode (CloudEvents HTTP binding, section 3.3).
pub const CLOUDEVENTS_BATCH: &str = "application/cloudevents-batch+json";
/// Enough of a receiver's refusal to diagnose it, not enough to flood a log.
const BODY_EXCERPT: u64 = 500;
const REDACTED: &str = "[redacted]";
/// The header that carries a batch's signed checkpoint.
pub const CHECKPOINT_HEADER: &str = "Warrant-Checkpoint";

/// Where and how to POST. Header values are resolved secrets (tokens): they are sent, and never
/// shown by `Debug` or in errors.
#[derive(Clone, PartialEq, Eq)]
pub struct HttpSinkConfig {
    pub url: String,
    /// Sent with every request, after `Content-Type` and `Idempotency-Key`.
    pub headers: Vec<(String, String)>,
    /// Records per POST; at least 1.
    pub batch: usize,
    /// For one whole request (connect, send, answer).
    pub timeout: Duration,
    /// Attempts per batch, including the first; at least 1.
    pub max_attempts: u32,
    pub backoff_base: Duration,
    /// Caps both the backoff and a receiver's `Retry-After`.
    pub backoff_max: Duration,
}

impl HttpSinkConfig {
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            headers: Vec::new(),
            batch: DEFAULT_HTTP_BATCH,
            timeout: DEFAULT_HTTP_TIMEOUT,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            backoff_base: DEFAULT_BACKOFF_BASE,
            backoff_max: DEFAULT_BACKOFF_MAX,
        }
    }
}

impl fmt::Debug for HttpSinkConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<String> = self
            .headers
            .iter()
            .map(|(name, _)| format!("{name}: {REDACTED}"))
            .collect();
        f.debug_struct("HttpSinkConfig")
            .field("url", &self.url)
            .field("headers", &headers)
            .field("batch", &self.batch)
            .field("timeout", &self.timeout)
            .field("max_attempts", &self.max_attempts)
            .field("backoff_base", &self.backoff_base)
            .field("backoff_max", &self.backoff_max)
            .finish()
    }
}

/// What one delivery did. Returned only when everything the outbox had was delivered; a
/// delivery that stopped early is an [`AuditError`] carrying the acknowledged cursor instead
/// (see [`AuditError::acknowledged`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpDeliveryReport {
    /// The last seq the receiver acknowledged (the cursor passed in when nothing was sent).
    pub acknowledged: u64,
    /// Records acknowledged by this delivery.
    pub delivered: u64,
    /// Batches acknowledged by this delivery.
    pub batches: u64,
    /// Attempts beyond the first, over all batches.
    pub retries: u64,
    /// The last failure that a retry then got past, for `audit status`; `None` when every
    /// batch went through at the first attempt.
    pub last_error: Option<String>,
}

type Sleep = Arc<dyn Fn(Duration) + Send + Sync>;

pub struct HttpSink {
    name: String,
    config: HttpSinkConfig,
    agent: ureq::Agent,
    sleep: Sleep,
    checkpointer: Option<Arc<Checkpointer>>,
}

impl fmt::Debug for HttpSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpSink")
            .field("name", &self.name)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// How one attempt ended, when it did not end in a 2xx.
enum Failure {
    /// Worth another attempt (429, 5xx, connection trouble, timeout), after `wait` if the
    /// receiver named one.
    Transient {
        reason: String,
        retry_after: Option<Duration>,
    },
    /// A status no retry will change.
    Rejected { status: u16, body: String },
    /// The request cannot be made at all (malformed URL or header).
    Unsendable { reason: String },
}

impl HttpSink {
    pub fn new(name: &str, config: HttpSinkConfig) -> Self {
        let agent_config = ureq::Agent::config_builder()
            .timeout_global(Some(config.timeout))
            // Statuses are answers we classify ourselves (retry, reject).
            .http_status_as_error(false)
            .build();
        Self {
            name: name.to_owned(),
            agent: ureq::Agent::new_with_config(agent_config),
            config,
            sleep: Arc::new(std::thread::sleep),
            checkpointer: None,
        }
    }

    /// Signs a checkpoint for each batch's last record and sends it with the batch
    /// ([`CHECKPOINT_HEADER`]).
    #[must_use]
    pub fn with_checkpoint(mut self, checkpointer: Arc<Checkpointer>) -> Self {
        self.checkpointer = Some(checkpointer);
        self
    }

    /// Replace how the sink waits between attempts (tests record instead of sleeping).
    #[must_use]
    pub fn with_sleep(mut self, sleep: impl Fn(Duration) + Send + Sync + 'static) -> Self {
        self.sleep = Arc::new(sleep);
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn config(&self) -> &HttpSinkConfig {
        &self.config
    }

    /// POSTs every record past `acknowledged`, one batch at a time, each retried until the
    /// receiver takes it or `max_attempts` is spent. On an error, nothing past the error's
    /// acknowledged cursor was acknowledged (a batch may still have reached the receiver, which
    /// is why the retry carries the same idempotency key).
    pub fn deliver(
        &self,
        outbox: &dyn AuditOutbox,
        acknowledged: u64,
    ) -> Result<HttpDeliveryReport, AuditError> {
        let mut report = HttpDeliveryReport {
            acknowledged,
            ..HttpDeliveryReport::default()
        };
        loop {
            let records = whole_batches(outbox, report.acknowledged, self.config.batch.max(1))?;
            let Some(last) = records.last() else {
                return Ok(report);
            };
            let last_seq = last.seq;
            for (expected, record) in (report.acknowledged + 1..).zip(&records) {
                if record.seq != expected {
                    return Err(AuditError::OutboxGap {
                        sink: self.name.clone(),
                        after: report.acknowledged,
                        expected,
                        found: record.seq,
                    });
                }
            }
            self.deliver_batch(&records, &mut report)?;
            report.acknowledged = last_seq;
            report.delivered += records.len() as u64;
            report.batches += 1;
        }
    }

    fn deliver_batch(
        &self,
        records: &[SealedRecord],
        report: &mut HttpDeliveryReport,
    ) -> Result<(), AuditError> {
        let body = batch_body(records);
        let key = idempotency_key(records);
        let checkpoint = self.checkpoint_for(records, report)?;
        let max_attempts = self.config.max_attempts.max(1);
        let mut attempt = 1;
        loop {
            let (reason, retry_after) = match self.send_once(&body, &key, checkpoint.as_deref()) {
                Ok(()) => return Ok(()),
                Err(Failure::Transient {
                    reason,
                    retry_after,
                }) => (reason, retry_after),
                Err(Failure::Rejected { status, body }) => {
                    return Err(AuditError::SinkRejected {
                        sink: self.name.clone(),
                        status,
                        body,
                        acknowledged: report.acknowledged,
                    });
                }
                Err(Failure::Unsendable { reason }) => {
                    return Err(AuditError::SinkMisconfigured {
                        sink: self.name.clone(),
                        reason,
                        acknowledged: report.acknowledged,
                    });
                }
            };
            if attempt >= max_attempts {
                return Err(AuditError::SinkUnreachable {
                    sink: self.name.clone(),
                    attempts: attempt,
                    reason,
                    acknowledged: report.acknowledged,
                });
            }
            report.last_error = Some(reason);
            report.retries += 1;
            (self.sleep)(self.wait_before_retry(attempt, retry_after));
            attempt += 1;
        }
    }

    /// The header value vouching for `records`' last one, when this sink signs checkpoints.
    fn checkpoint_for(
        &self,
        records: &[SealedRecord],
        report: &HttpDeliveryReport,
    ) -> Result<Option<String>, AuditError> {
        let (Some(checkpointer), Some(last)) = (&self.checkpointer, records.last()) else {
            return Ok(None);
        };
        let unsendable = |reason: String| AuditError::SinkMisconfigured {
            sink: self.name.clone(),
            reason: format!("cannot sign the batch's checkpoint: {reason}"),
            acknowledged: report.acknowledged,
        };
        let checkpoint = checkpointer
            .sign(last.seq, &last.hash)
            .map_err(|e| unsendable(e.to_string()))?;
        let json = serde_json::to_string(&checkpoint).map_err(|e| unsendable(e.to_string()))?;
        Ok(Some(BASE64.encode(json)))
    }

    fn send_once(&self, body: &str, key: &str, checkpoint: Option<&str>) -> Result<(), Failure> {
        let mut request = self
            .agent
            .post(&self.config.url)
            .content_type(CLOUDEVENTS_BATCH)
            .header("Idempotency-Key", key);
        if let Some(value) = checkpoint {
            request = request.header(CHECKPOINT_HEADER, value);
        }
        for (name, value) in &self.config.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let mut response = request.send(body).map_err(|e| self.transport_failure(&e))?;
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(());
        }
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let mut excerpt = Vec::new();
        // The excerpt is diagnosis only: a body that breaks off is reported as far as it came.
        let _ = response
            .body_mut()
            .as_reader()
            .take(BODY_EXCERPT)
            .read_to_end(&mut excerpt);
        let text = self.scrub(String::from_utf8_lossy(&excerpt).trim());
        let text = if text.is_empty() {
            "empty body".to_owned()
        } else {
            text
        };
        if status == 429 || (500..600).contains(&status) {
            Err(Failure::Transient {
                reason: format!("status {status}: {text}"),
                retry_after,
            })
        } else {
            Err(Failure::Rejected { status, body: text })
        }
    }

    fn transport_failure(&self, e: &ureq::Error) -> Failure {
        let reason = self.scrub(&e.to_string());
        match e {
            ureq::Error::BadUri(_)
            | ureq::Error::Http(_)
            | ureq::Error::RequireHttpsOnly(_)
            | ureq::Error::InvalidProxyUrl
            | ureq::Error::TlsRequired
            | ureq::Error::Pem(_) => Failure::Unsendable { reason },
            ureq::Error::Timeout(_) => Failure::Transient {
                reason: format!("no answer within {:?}", self.config.timeout),
                retry_after: None,
            },
            // Connection refused, reset or dropped mid-request, DNS, TLS handshakes, odd
            // answers and whatever ureq adds later: the next attempt may fare better, and the
            // attempt limit bounds the cost of being wrong.
            ureq::Error::Io(_)
            | ureq::Error::Protocol(_)
            | ureq::Error::ConnectionFailed
            | ureq::Error::HostNotFound
            | ureq::Error::Tls(_)
            | ureq::Error::Rustls(_)
            | ureq::Error::ConnectProxyFailed(_)
            | ureq::Error::StatusCode(_)
            | ureq::Error::RedirectFailed
            | ureq::Error::TooManyRedirects
            | ureq::Error::BodyExceedsLimit(_)
            | ureq::Error::LargeResponseHeader(..)
            | ureq::Error::Decompress(..)
            | ureq::Error::Json(_)
            | ureq::Error::Other(_)
            | _ => Failure::Transient {
                reason,
                retry_after: None,
            },
        }
    }

    /// `Retry-After` (seconds) when the receiver gave one, else full jitter: a uniform wait in
    /// `[0, base · 2^(attempt-1)]`, so deliverers that failed together do not retry together.
    /// Capped at `backoff_max` either way. (An HTTP-date `Retry-After` falls back to backoff.)
    fn wait_before_retry(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let cap = self.config.backoff_max;
        if let Some(wait) = retry_after {
            return wait.min(cap);
        }
        let ceiling = self
            .config
            .backoff_base
            .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)))
            .min(cap);
        let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(rand::random_range(0..=nanos))
    }

    /// Removes header values from text a receiver or the transport sent back: some receivers
    /// echo what they were given.
    fn scrub(&self, text: &str) -> String {
        self.config
            .headers
            .iter()
            .filter(|(_, value)| !value.is_empty())
            .fold(text.to_owned(), |text, (_, value)| {
                text.replace(value.as_str(), REDACTED)
            })
    }
}

/// The records as a JSON array of their sealed lines, byte for byte: the receiver's copy must
/// hash and verify exactly as the store's.
fn batch_body(records: &[SealedRecord]) -> String {
    let size = records.iter().map(|r| r.line.len() + 1).sum::<usize>() + 2;
    let mut body = String::with_capacity(size);
    body.push('[');
    for (i, record) in records.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        body.push_str(&record.line);
    }
    body.push(']');
    body
}

/// Hex SHA-256 of the batch's record ids joined by `,`: the same batch always has the same key.
fn idempotency_key(records: &[SealedRecord]) -> String {
    let ids: Vec<&str> = records.iter().map(|r| r.id.as_str()).collect();
    hex::encode(Sha256::digest(ids.join(",").as_bytes()).as_slice())
}
