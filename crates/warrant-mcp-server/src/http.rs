//! Streamable HTTP: a guard in front of the SDK's service. Every request is checked, in this
//! order, before anything reads its body: `Host` (a name other than loopback or a configured
//! one is 403: DNS rebinding), `Origin` (present and not allowed is 403), the declared body
//! size (over the limit is 413; the SDK also cuts a streamed body at the same limit), and the
//! bearer token (missing or unknown is 401). Each refusal is recorded before it is answered (a
//! burst summarized: one record a second per kind, with the count of those in between), and
//! the caller a token stands for rides with the request to the handler.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use crate::handler::WarrantServer;
use crate::worker::{Caller, TokenDigest, Worker};

/// The names a loopback server answers to.
const LOOPBACK_HOSTS: &[&str] = &["localhost", "127.0.0.1", "::1", "[::1]"];

/// What the guard checks against.
#[derive(Clone, Debug)]
pub struct Guard {
    pub tokens: Vec<TokenDigest>,
    pub allowed_hosts: Vec<String>,
    pub allowed_origins: Vec<String>,
    pub max_body_bytes: u64,
    /// Host and Origin checks on (off only for a debug build's negative control,
    /// `WARRANT_TEST_DISABLE=rebinding`).
    pub rebinding_check: bool,
}

/// Why a request was turned away.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    ForeignHost(String),
    ForeignOrigin(String),
    TooLarge(u64),
    NoToken,
    UnknownToken,
}

impl Refusal {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::ForeignHost(_) | Self::ForeignOrigin(_) => StatusCode::FORBIDDEN,
            Self::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::NoToken | Self::UnknownToken => StatusCode::UNAUTHORIZED,
        }
    }

    /// The reason as recorded and answered (the token itself never appears).
    pub fn reason(&self) -> String {
        match self {
            Self::ForeignHost(h) => {
                format!(
                    "W-MCPSERVE-010 Host `{}` is not this server's (DNS rebinding)",
                    clip(h)
                )
            }
            Self::ForeignOrigin(o) => {
                format!("W-MCPSERVE-011 Origin `{}` is not allowed", clip(o))
            }
            Self::TooLarge(n) => {
                format!("W-MCPSERVE-012 request body of {n} bytes is over the limit")
            }
            Self::NoToken => "W-MCPSERVE-013 no bearer token".to_owned(),
            Self::UnknownToken => "W-MCPSERVE-014 unknown bearer token".to_owned(),
        }
    }

    fn kind(&self) -> u8 {
        match self {
            Self::ForeignHost(_) => 0,
            Self::ForeignOrigin(_) => 1,
            Self::TooLarge(_) => 2,
            Self::NoToken => 3,
            Self::UnknownToken => 4,
        }
    }
}

fn clip(s: &str) -> String {
    let s: String = s.chars().take(120).collect();
    warrant_core::render::inline(&s).into_owned()
}

impl Guard {
    /// Checks a request's head; the caller its token stands for, or why it is refused.
    pub fn check(&self, headers: &HeaderMap) -> Result<Caller, Refusal> {
        if self.rebinding_check {
            let host = headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or("");
            if !self.host_allowed(host) {
                return Err(Refusal::ForeignHost(host.to_owned()));
            }
            if let Some(origin) = headers.get(header::ORIGIN) {
                let origin = origin.to_str().unwrap_or("");
                if !self.origin_allowed(origin) {
                    return Err(Refusal::ForeignOrigin(origin.to_owned()));
                }
            }
        }
        if let Some(n) = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            && n > self.max_body_bytes
        {
            return Err(Refusal::TooLarge(n));
        }
        let Some(presented) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim)
            .filter(|t| !t.is_empty())
        else {
            return Err(Refusal::NoToken);
        };
        // Compared by digest: the comparison's time says nothing about the token's bytes.
        let digest = warrant_core::Digest::of_bytes(presented.as_bytes());
        self.tokens
            .iter()
            .find(|t| t.digest == digest)
            .map(|t| Caller::Token(t.name.clone()))
            .ok_or(Refusal::UnknownToken)
    }

    fn host_allowed(&self, host: &str) -> bool {
        let name = strip_port(host);
        LOOPBACK_HOSTS.iter().any(|h| h.eq_ignore_ascii_case(name))
            || self
                .allowed_hosts
                .iter()
                .any(|h| h.eq_ignore_ascii_case(host) || h.eq_ignore_ascii_case(name))
    }

    fn origin_allowed(&self, origin: &str) -> bool {
        self.allowed_origins.iter().any(|allowed| {
            if let Some(prefix) = allowed.strip_suffix(":*") {
                origin
                    .strip_prefix(prefix)
                    .is_some_and(|rest| rest.is_empty() || port_only(rest))
            } else {
                allowed.eq_ignore_ascii_case(origin)
            }
        })
    }
}

/// `:8080` and nothing else.
fn port_only(rest: &str) -> bool {
    rest.strip_prefix(':')
        .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// `example.com:8080` → `example.com`; `[::1]:8080` → `[::1]`.
fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |i| &host[..=i]);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port_only(&format!(":{port}")) => name,
        _ => host,
    }
}

/// Refusals recorded at most once a second per kind; the ones in between are counted into
/// the next record, so a flood costs a record a second, not one per request.
#[derive(Debug, Default)]
struct Throttle {
    last: HashMap<u8, (Instant, u64)>,
}

impl Throttle {
    /// `Some(suppressed since the last record)` when this refusal should be recorded.
    fn admit(&mut self, kind: u8) -> Option<u64> {
        let now = Instant::now();
        match self.last.get_mut(&kind) {
            Some((at, suppressed)) if now.duration_since(*at) < Duration::from_secs(1) => {
                *suppressed += 1;
                None
            }
            Some(entry) => {
                let n = entry.1;
                *entry = (now, 0);
                Some(n)
            }
            None => {
                self.last.insert(kind, (now, 0));
                Some(0)
            }
        }
    }
}

type Body = BoxBody<Bytes, Infallible>;

fn refusal_response(refusal: &Refusal) -> Response<Body> {
    let body = serde_json::json!({ "error": refusal.reason() }).to_string();
    let mut builder = Response::builder()
        .status(refusal.status())
        .header(header::CONTENT_TYPE, "application/json");
    if refusal.status() == StatusCode::UNAUTHORIZED {
        builder = builder.header(header::WWW_AUTHENTICATE, "Bearer");
    }
    builder
        .body(Full::new(Bytes::from(body)).boxed())
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()))
}

/// Serves `handler` on `listener` until the process ends.
pub async fn serve(
    listener: tokio::net::TcpListener,
    handler: WarrantServer,
    guard: Guard,
    worker: Worker,
) -> std::io::Result<()> {
    let mut config = StreamableHttpServerConfig::default()
        .with_max_request_body_bytes(usize::try_from(guard.max_body_bytes).unwrap_or(usize::MAX));
    config = if guard.rebinding_check {
        let mut hosts: Vec<String> = LOOPBACK_HOSTS.iter().map(|h| (*h).to_owned()).collect();
        hosts.extend(guard.allowed_hosts.iter().cloned());
        config
            .with_allowed_hosts(hosts)
            .with_allowed_origins(guard.allowed_origins.clone())
            .enforce_origin_validation()
    } else {
        config.disable_allowed_hosts().disable_allowed_origins()
    };
    let service = Arc::new(StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    ));
    let guard = Arc::new(guard);
    let throttle = Arc::new(Mutex::new(Throttle::default()));
    loop {
        let (stream, _) = listener.accept().await?;
        let service = Arc::clone(&service);
        let guard = Arc::clone(&guard);
        let throttle = Arc::clone(&throttle);
        let worker = worker.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |mut req: Request<Incoming>| {
                let service = Arc::clone(&service);
                let guard = Arc::clone(&guard);
                let throttle = Arc::clone(&throttle);
                let worker = worker.clone();
                async move {
                    match guard.check(req.headers()) {
                        Ok(caller) => {
                            req.extensions_mut().insert(caller);
                            Ok::<_, Infallible>(service.handle(req).await)
                        }
                        Err(refusal) => {
                            let admitted = throttle
                                .lock()
                                .ok()
                                .and_then(|mut t| t.admit(refusal.kind()));
                            if let Some(suppressed) = admitted {
                                worker
                                    .refused(
                                        "http",
                                        refusal.status().as_u16(),
                                        refusal.reason(),
                                        suppressed,
                                    )
                                    .await;
                            }
                            Ok(refusal_response(&refusal))
                        }
                    }
                }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, svc)
                .await;
        });
    }
}

/// Whether `addr` is a loopback address (the default bind; anything else needs a flag).
pub fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;

    fn guard() -> Guard {
        Guard {
            tokens: vec![TokenDigest {
                name: "ci".into(),
                digest: warrant_core::Digest::of_bytes(b"s3cret-token-value"),
            }],
            allowed_hosts: vec!["warrant.internal".into()],
            allowed_origins: vec!["http://localhost:*".into(), "https://app.example".into()],
            max_body_bytes: 100,
            rebinding_check: true,
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn the_guard_checks_host_origin_size_and_token_in_that_order() {
        let g = guard();
        let ok = [
            ("host", "127.0.0.1:8080"),
            ("authorization", "Bearer s3cret-token-value"),
        ];
        type Row<'a> = (Vec<(&'static str, &'a str)>, Result<Caller, Refusal>);
        let rows: Vec<Row<'_>> = vec![
            (ok.to_vec(), Ok(Caller::Token("ci".into()))),
            (
                vec![
                    ("host", "localhost"),
                    ("authorization", "Bearer s3cret-token-value"),
                ],
                Ok(Caller::Token("ci".into())),
            ),
            (
                vec![
                    ("host", "[::1]:9"),
                    ("authorization", "Bearer s3cret-token-value"),
                ],
                Ok(Caller::Token("ci".into())),
            ),
            (
                vec![
                    ("host", "warrant.internal:443"),
                    ("authorization", "Bearer s3cret-token-value"),
                ],
                Ok(Caller::Token("ci".into())),
            ),
            (
                vec![
                    ("host", "evil.example:8080"),
                    ("authorization", "Bearer s3cret-token-value"),
                ],
                Err(Refusal::ForeignHost("evil.example:8080".into())),
            ),
            (
                vec![
                    ("host", "localhost.evil.example"),
                    ("authorization", "Bearer x"),
                ],
                Err(Refusal::ForeignHost("localhost.evil.example".into())),
            ),
            (
                vec![
                    ("host", "127.0.0.1:8080"),
                    ("origin", "http://evil.example"),
                    ("authorization", "Bearer s3cret-token-value"),
                ],
                Err(Refusal::ForeignOrigin("http://evil.example".into())),
            ),
            (
                vec![
                    ("host", "127.0.0.1:8080"),
                    ("origin", "http://localhost:3000"),
                    ("authorization", "Bearer s3cret-token-value"),
                ],
                Ok(Caller::Token("ci".into())),
            ),
            (
                vec![
                    ("host", "127.0.0.1:8080"),
                    ("origin", "http://localhost:3000.evil.example"),
                    ("authorization", "Bearer s3cret-token-value"),
                ],
                Err(Refusal::ForeignOrigin(
                    "http://localhost:3000.evil.example".into(),
                )),
            ),
            (
                vec![
                    ("host", "127.0.0.1"),
                    ("content-length", "101"),
                    ("authorization", "Bearer s3cret-token-value"),
                ],
                Err(Refusal::TooLarge(101)),
            ),
            (vec![("host", "127.0.0.1")], Err(Refusal::NoToken)),
            (
                vec![("host", "127.0.0.1"), ("authorization", "Bearer wrong")],
                Err(Refusal::UnknownToken),
            ),
            (
                vec![("host", "127.0.0.1"), ("authorization", "Basic czNjcmV0")],
                Err(Refusal::NoToken),
            ),
        ];
        let got: Vec<_> = rows.iter().map(|(h, _)| g.check(&headers(h))).collect();
        let want: Vec<_> = rows.into_iter().map(|(_, w)| w).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn with_the_check_switched_off_a_foreign_host_and_origin_pass_but_the_token_is_still_needed() {
        let g = Guard {
            rebinding_check: false,
            ..guard()
        };
        let foreign = [("host", "evil.example"), ("origin", "http://evil.example")];
        assert_eq!(g.check(&headers(&foreign)), Err(Refusal::NoToken));
        let mut with_token = foreign.to_vec();
        with_token.push(("authorization", "Bearer s3cret-token-value"));
        assert_eq!(
            g.check(&headers(&with_token)),
            Ok(Caller::Token("ci".into()))
        );
    }

    #[test]
    fn a_flood_of_refusals_is_recorded_once_a_second_with_the_count() {
        let mut t = Throttle::default();
        assert_eq!(t.admit(3), Some(0));
        assert_eq!(t.admit(3), None);
        assert_eq!(t.admit(3), None);
        assert_eq!(t.admit(4), Some(0));
        t.last.get_mut(&3).unwrap().0 -= Duration::from_secs(2);
        assert_eq!(t.admit(3), Some(2));
    }
}
