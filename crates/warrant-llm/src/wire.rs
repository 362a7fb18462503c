//! What the HTTP providers share: one request read back as (status, Retry-After, body), the
//! retry loop for 429 and 5xx, and the mapping of failures to `ModelError` with the key
//! scrubbed from anything a server echoed. Each provider keeps only its wire format.

use std::io::BufReader;
use std::time::Duration;

use crate::error::ModelError;
use crate::openai::{MAX_ATTEMPTS, REDACTED, wait_before_retry};
use crate::openai_stream::{Step, StreamFault};
use crate::stream::{Flow, OnProgress, SseError, SseReader, StreamProgress};
use crate::types::Usage;

/// One attempt: a success the caller reads on, or a failure status for the retry loop.
pub(crate) enum Attempt<T> {
    Success(T),
    Failure(Reply),
}

/// A 2xx answer to a streaming request: a server that ignored `"stream": true` answers with
/// plain JSON, which the provider then reads the non-streaming way.
pub(crate) enum Opened {
    Events(ureq::Body),
    Json(String),
}

/// A provider's reader of one streamed answer.
pub(crate) trait Accumulate {
    fn feed(&mut self, event: &str, data: &str) -> Result<Step, StreamFault>;
    fn progress(&self) -> StreamProgress;
    /// The answer's text that arrived since the last call (shown to a person as it streams).
    fn take_text(&mut self) -> String;
}

/// What errors need to know about the endpoint a provider talks to.
#[derive(Clone, Copy)]
pub(crate) struct Endpoint<'a> {
    pub base_url: &'a str,
    pub model: &'a str,
    pub api_key: Option<&'a str>,
    pub api_key_env: &'a str,
    pub timeout: Duration,
    /// The provider's reading of an error body (each API documents its own envelope).
    pub error_message: fn(&str) -> String,
}

/// A response as the retry loop sees it.
pub(crate) struct Reply {
    pub status: u16,
    pub retry_after: Option<String>,
    pub body: String,
}

impl Endpoint<'_> {
    /// Removes the key from text a server sent back: some servers echo what they were given.
    pub fn scrub(&self, text: &str) -> String {
        match self.api_key {
            Some(key) if !key.is_empty() => text.replace(key, REDACTED),
            Some(_) | None => text.to_owned(),
        }
    }

    /// Sends `body` with `request` and reads the whole answer.
    pub fn send(
        &self,
        request: ureq::RequestBuilder<ureq::typestate::WithBody>,
        body: &str,
    ) -> Result<Reply, ModelError> {
        let mut response = request.send(body).map_err(|e| self.transport_error(&e))?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = response
            .body_mut()
            .read_to_string()
            .map_err(|e| self.transport_error(&e))?;
        Ok(Reply {
            status,
            retry_after,
            body,
        })
    }

    /// Calls `send` until a 2xx (its body is returned), a status not worth retrying, or
    /// `MAX_ATTEMPTS`; 429 and 5xx wait as `Retry-After` says, else with backoff.
    pub fn with_retries(
        &self,
        sleep: &dyn Fn(Duration),
        send: impl Fn() -> Result<Reply, ModelError>,
    ) -> Result<String, ModelError> {
        self.retrying(sleep, || {
            send().map(|reply| {
                if (200..300).contains(&reply.status) {
                    Attempt::Success(reply.body)
                } else {
                    Attempt::Failure(reply)
                }
            })
        })
    }

    /// The retry loop for any kind of success (a whole body, or a stream to read on).
    pub fn retrying<T>(
        &self,
        sleep: &dyn Fn(Duration),
        send: impl Fn() -> Result<Attempt<T>, ModelError>,
    ) -> Result<T, ModelError> {
        let mut attempt = 1;
        loop {
            let reply = match send()? {
                Attempt::Success(value) => return Ok(value),
                Attempt::Failure(reply) => reply,
            };
            let retryable = reply.status == 429 || (500..600).contains(&reply.status);
            if !retryable || attempt >= MAX_ATTEMPTS {
                return Err(self.status_error(reply.status, attempt, &reply.body));
            }
            sleep(wait_before_retry(attempt, reply.retry_after.as_deref()));
            attempt += 1;
        }
    }

    /// Sends a streaming request; a failure status is read whole for the retry loop (retries
    /// happen only before any event was read, so nothing is ever seen twice).
    pub fn open_stream(
        &self,
        request: ureq::RequestBuilder<ureq::typestate::WithBody>,
        body: &str,
    ) -> Result<Attempt<Opened>, ModelError> {
        let response = request.send(body).map_err(|e| self.transport_error(&e))?;
        let status = response.status().as_u16();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let retry_after = header("retry-after");
        let json =
            header("content-type").is_some_and(|t| t.trim_start().starts_with("application/json"));
        let mut body = response.into_body();
        if (200..300).contains(&status) && !json {
            return Ok(Attempt::Success(Opened::Events(body)));
        }
        let text = body
            .read_to_string()
            .map_err(|e| self.transport_error(&e))?;
        if (200..300).contains(&status) {
            return Ok(Attempt::Success(Opened::Json(text)));
        }
        Ok(Attempt::Failure(Reply {
            status,
            retry_after,
            body: text,
        }))
    }

    /// Reads events into `acc` until it says the answer is complete or the body ends, telling
    /// `on_progress` after each event that added something; it may stop the answer there.
    pub fn read_stream(
        &self,
        body: ureq::Body,
        acc: &mut dyn Accumulate,
        on_progress: OnProgress<'_>,
    ) -> Result<(), ModelError> {
        let mut events = SseReader::new(BufReader::new(body.into_reader()));
        loop {
            let event = match events.next_event() {
                Ok(Some(event)) => event,
                Ok(None) => return Ok(()),
                Err(SseError::LineTooLong) => {
                    return Err(self.malformed(&format!(
                        "an event stream line longer than {} bytes",
                        crate::stream::MAX_LINE
                    )));
                }
                Err(SseError::Io(message)) => return Err(self.read_error(message)),
            };
            match acc.feed(&event.event, &event.data) {
                Ok(Step::Done) => return Ok(()),
                Ok(Step::Quiet) => {}
                Ok(Step::Grew) => {
                    let progress = acc.progress();
                    let text = acc.take_text();
                    match on_progress(&progress, &text) {
                        Flow::Continue => {}
                        Flow::Stop { reason } => {
                            return Err(ModelError::Stopped {
                                reason,
                                usage: Usage {
                                    input_tokens: progress.input_tokens,
                                    output_tokens: progress.output_tokens,
                                },
                                estimated: progress.estimated,
                            });
                        }
                    }
                }
                Err(StreamFault::ServerError(message)) => {
                    return Err(ModelError::StreamFailed {
                        base_url: self.base_url.to_owned(),
                        message: self.scrub(&message),
                    });
                }
                Err(StreamFault::Malformed(message)) => return Err(self.malformed(&message)),
            }
        }
    }

    fn read_error(&self, message: String) -> ModelError {
        // ureq reports its own timeouts through io errors of this kind.
        let timed_out = message.contains("timeout") || message.contains("timed out");
        if timed_out {
            return ModelError::Timeout {
                base_url: self.base_url.to_owned(),
                after: self.timeout,
            };
        }
        ModelError::StreamFailed {
            base_url: self.base_url.to_owned(),
            message: self.scrub(&format!("reading the stream failed: {message}")),
        }
    }

    pub fn transport_error(&self, e: &ureq::Error) -> ModelError {
        let base_url = self.base_url.to_owned();
        if let ureq::Error::Timeout(_) = e {
            return ModelError::Timeout {
                base_url,
                after: self.timeout,
            };
        }
        ModelError::Connection {
            base_url,
            message: self.scrub(&e.to_string()),
        }
    }

    pub fn status_error(&self, status: u16, attempts: u32, body: &str) -> ModelError {
        let base_url = self.base_url.to_owned();
        let message = self.scrub(&(self.error_message)(body));
        match status {
            401 | 403 => ModelError::Authentication {
                base_url,
                status,
                key_env: self.api_key_env.to_owned(),
                message: if self.api_key.is_none() {
                    format!("{message} (no key was sent: the variable is unset)")
                } else {
                    message
                },
            },
            404 => ModelError::ModelNotFound {
                base_url,
                model: self.model.to_owned(),
                message,
            },
            429 => ModelError::RateLimited {
                base_url,
                attempts,
                message,
            },
            // Anthropic's 529 (`overloaded_error`) is a server failure too.
            500..=599 => ModelError::Server {
                base_url,
                status,
                attempts,
                message,
            },
            _ => ModelError::Rejected {
                base_url,
                status,
                message,
            },
        }
    }

    pub fn malformed(&self, message: &str) -> ModelError {
        ModelError::MalformedResponse {
            base_url: self.base_url.to_owned(),
            message: self.scrub(message),
        }
    }
}
