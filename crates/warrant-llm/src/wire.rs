//! What the HTTP providers share: one request read back as (status, Retry-After, body), the
//! retry loop for 429 and 5xx, and the mapping of failures to `ModelError` with the key
//! scrubbed from anything a server echoed. Each provider keeps only its wire format.

use std::time::Duration;

use crate::error::ModelError;
use crate::openai::{MAX_ATTEMPTS, REDACTED, wait_before_retry};

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
        let mut attempt = 1;
        loop {
            let reply = send()?;
            if (200..300).contains(&reply.status) {
                return Ok(reply.body);
            }
            let retryable = reply.status == 429 || (500..600).contains(&reply.status);
            if !retryable || attempt >= MAX_ATTEMPTS {
                return Err(self.status_error(reply.status, attempt, &reply.body));
            }
            sleep(wait_before_retry(attempt, reply.retry_after.as_deref()));
            attempt += 1;
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
