//! The `web.fetch` executor: one HTTP(S) GET whose connections go through Warrant's egress
//! proxy ([`crate::egress`], the code that serves sandboxed commands), started for the length of
//! the fetch with the configured `[web] allow` list and [`AddressPolicy::PublicOnly`]: the proxy
//! decides each hop's target against the list, refuses a name any of whose addresses is
//! loopback, private, link-local, metadata or otherwise internal, checks the connected socket's
//! peer again before a byte is sent, and keeps the record that comes back with the page. The
//! fetch speaks HTTP (or TLS, then HTTP) inside a CONNECT tunnel, so the proxy never sees a
//! request body or a page. Redirects are followed by hand, at most five, each new URL a new
//! tunnel decided like the first. The body is read up to `max_bytes`; the whole fetch has
//! `timeout_ms`. HTML is reduced to text.
//!
//! Limits: a fetch sends no cookies or credentials; only `http` and `https`; the text
//! conversion is a plain one (`nanohtml2text`: no CSS, no scripts run).

use std::net::{IpAddr, SocketAddr};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use thiserror::Error;
use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig};
use ureq::unversioned::resolver::{ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, LazyBuffers, NextTimeout, RustlsConnector,
    ShutdownHandle, Transport,
};
use warrant_core::config::WebConfig;
use warrant_core::{Coded, WebFetch};
use warrant_kernel::Authorized;

use crate::egress::{
    AddressPolicy, Allowlist, EgressAttempt, EgressCheck, EgressLog, EgressProxy, Net,
    ProxyOptions, SystemNet,
};

pub const DEFAULT_MAX_BYTES: u64 = 2 * 1024 * 1024;
pub const DEFAULT_TIMEOUT_MS: u64 = 20_000;
const MAX_REDIRECTS: usize = 5;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum WebError {
    #[error("`{url}` is not a URL web_fetch takes: {why}")]
    BadUrl { url: String, why: String },

    #[error(
        "{host}:{port} is not on the [web] allow list{list}; a person adds hosts to `[web] allow` in the configuration"
    )]
    NotAllowed {
        host: String,
        port: u16,
        list: String,
    },

    #[error("refused to connect to {host}: {why}")]
    Address { host: String, why: String },

    #[error("fetching {url} failed: {message}")]
    Failed { url: String, message: String },

    #[error("{url} redirects more than {MAX_REDIRECTS} times")]
    TooManyRedirects { url: String },

    #[error("fetching {url} did not finish within {ms} ms")]
    Timeout { url: String, ms: u64 },

    #[error(
        "the [web] ca_certificates file `{path}` cannot be used: {why}; a person fixes it in the configuration"
    )]
    Certificates { path: String, why: String },
}

impl Coded for WebError {
    fn code(&self) -> &'static str {
        match self {
            Self::BadUrl { .. } => "W-WEB-001",
            Self::NotAllowed { .. } => "W-WEB-002",
            Self::Address { .. } => "W-WEB-003",
            Self::Failed { .. } => "W-WEB-004",
            Self::TooManyRedirects { .. } => "W-WEB-005",
            Self::Timeout { .. } => "W-WEB-006",
            Self::Certificates { .. } => "W-WEB-007",
        }
    }
}

/// What a fetch returned, for the model (as untrusted content) and the journal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Fetched {
    pub url: String,
    /// Where the content came from after redirects.
    pub final_url: String,
    pub status: u16,
    pub content_type: String,
    /// The body as text (HTML reduced to text), cut at `max_bytes` of body.
    pub text: String,
    /// The body was longer than `max_bytes`: the rest was not read.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    pub bytes: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub redirects: Vec<String>,
    /// The egress proxy's record of the fetch: every hop's target and the peer it reached.
    pub egress: EgressLog,
}

/// The scheme, host (lower-case, IPv6 without brackets) and port of `url`.
pub fn target(url: &str) -> Result<(String, String, u16), WebError> {
    let bad = |why: &str| WebError::BadUrl {
        url: url.to_owned(),
        why: why.to_owned(),
    };
    let uri: ureq::http::Uri = url.parse().map_err(|_| bad("it does not parse"))?;
    let scheme = uri.scheme_str().unwrap_or_default().to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return Err(bad("only http:// and https:// URLs are fetched")),
    };
    let authority = uri.authority().ok_or_else(|| bad("it names no host"))?;
    if authority.as_str().contains('@') {
        return Err(bad(
            "it carries a user name or password (`user@host`); web_fetch sends no credentials",
        ));
    }
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    if host.is_empty() {
        return Err(bad("it names no host"));
    }
    Ok((scheme, host, authority.port_u16().unwrap_or(default_port)))
}

/// Whether `host:port` is on the `[web] allow` list (empty or unset: nothing is).
pub fn allowlisted(web: &WebConfig, host: &str, port: u16) -> bool {
    match web.allow.as_deref() {
        None | Some([]) => false,
        Some(list) => Allowlist::parse(list).is_ok_and(|a| a.check(host, port).is_ok()),
    }
}

pub use crate::egress::forbidden;

/// A CONNECT tunnel through the fetch's egress proxy to `host:port`; for `https` ureq's TLS
/// connector chains onto it, so TLS runs end to end through the tunnel and the proxy sees only
/// the target it decided on.
#[derive(Debug)]
struct Tunnel {
    socket: PathBuf,
    /// `host:port` (`[v6]:port`) as the proxy is asked for it.
    target: String,
    /// What is left of the fetch's time, set on the socket for every read and write.
    left: Duration,
}

/// The tunnel as a ureq transport. Timeouts are the fetch's own (set once on the socket), not
/// ureq's per-step ones.
#[derive(Debug)]
struct TunnelStream {
    stream: Arc<UnixStream>,
    buffers: LazyBuffers,
    /// The handle the agent holds weakly, alive as long as the transport.
    _shutdown: Arc<Shutdown>,
}

impl Transport for TunnelStream {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, _timeout: NextTimeout) -> Result<(), ureq::Error> {
        use std::io::Write;
        let output = self
            .buffers
            .output()
            .get(..amount)
            .unwrap_or_default()
            .to_vec();
        (&*self.stream).write_all(&output)?;
        Ok(())
    }

    fn await_input(&mut self, _timeout: NextTimeout) -> Result<bool, ureq::Error> {
        use std::io::Read;
        let input = self.buffers.input_append_buf();
        let n = (&*self.stream).read(input)?;
        self.buffers.input_appended(n);
        Ok(n > 0)
    }

    fn is_open(&mut self) -> bool {
        // One request per connection: never pooled.
        false
    }
}

#[derive(Debug)]
struct Shutdown(Arc<UnixStream>);

impl ShutdownHandle for Shutdown {
    fn shutdown(&self) {
        let _ = self.0.shutdown(std::net::Shutdown::Both);
    }
}

/// The proxy did not open the tunnel; its answer's status line.
fn not_tunneled(status: &str) -> ureq::Error {
    ureq::Error::Io(std::io::Error::new(
        std::io::ErrorKind::PermissionDenied,
        format!("the egress proxy answered {status}"),
    ))
}

impl Connector<()> for Tunnel {
    type Out = TunnelStream;

    fn connect(
        &self,
        details: &ConnectionDetails,
        _chained: Option<()>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        use std::io::{Read, Write};
        let mut stream = UnixStream::connect(&self.socket)?;
        stream.set_read_timeout(Some(self.left))?;
        stream.set_write_timeout(Some(self.left))?;
        write!(
            stream,
            "CONNECT {0} HTTP/1.1\r\nHost: {0}\r\n\r\n",
            self.target
        )?;
        // The head byte by byte: nothing past it may be consumed (the origin speaks next).
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if head.len() > 16 * 1024 || stream.read(&mut byte)? == 0 {
                return Err(not_tunneled("no complete answer"));
            }
            head.push(byte[0]);
        }
        let text = String::from_utf8_lossy(&head);
        let status = text.lines().next().unwrap_or_default().trim().to_owned();
        if status.split(' ').nth(1) != Some("200") {
            return Err(not_tunneled(&status));
        }
        let config = details.config;
        let stream = Arc::new(stream);
        let handle = Arc::new(Shutdown(stream.clone()));
        let shared: Arc<dyn ShutdownHandle> = handle.clone();
        (details.register_shutdown)(Arc::downgrade(&shared))?;
        Ok(Some(TunnelStream {
            stream,
            _shutdown: handle,
            buffers: LazyBuffers::new(config.input_buffer_size(), config.output_buffer_size()),
        }))
    }
}

/// ureq resolves before it connects; through a tunnel the proxy resolves (and checks) the
/// name, so ureq is handed a placeholder it never uses.
#[derive(Debug)]
struct ProxyResolves;

impl Resolver for ProxyResolves {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        _config: &ureq::config::Config,
        _timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let mut addrs = self.empty();
        let port = uri.port_u16().unwrap_or(0);
        addrs.push(SocketAddr::new(IpAddr::from([0, 0, 0, 0]), port));
        Ok(addrs)
    }
}

/// How the address guard is set; anything but `On` only for a debug build's negative control.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressGuard {
    On,
    /// Loopback addresses pass; every other internal address is refused.
    LoopbackAllowed,
    Off,
}

impl AddressGuard {
    fn policy(self) -> AddressPolicy {
        match self {
            Self::On => AddressPolicy::PublicOnly { loopback: false },
            Self::LoopbackAllowed => AddressPolicy::PublicOnly { loopback: true },
            Self::Off => AddressPolicy::AsListed,
        }
    }
}

/// The roots a fetch trusts: Mozilla's (ureq's default), or, when `[web] ca_certificates`
/// names a PEM file, the system's store and that file's certificates.
fn root_certs(web: &WebConfig) -> Result<RootCerts, WebError> {
    let Some(path) = web.ca_certificates.as_deref() else {
        return Ok(RootCerts::WebPki);
    };
    let bad = |why: String| WebError::Certificates {
        path: path.to_owned(),
        why,
    };
    if !Path::new(path).is_absolute() {
        return Err(bad("it is not an absolute path".into()));
    }
    let pem = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
    let mut certs = Vec::new();
    for item in ureq::tls::parse_pem(&pem) {
        if let PemItem::Certificate(c) = item.map_err(|e| bad(e.to_string()))? {
            certs.push(c);
        }
    }
    if certs.is_empty() {
        return Err(bad("it holds no PEM certificate".into()));
    }
    // The system's roots too, so listing a private CA does not lose the public ones.
    for der in rustls_native_certs::load_native_certs().certs {
        certs.push(Certificate::from_der(der.as_ref()).to_owned());
    }
    Ok(RootCerts::new_with_certs(&certs))
}

/// The executor: the fetch's connections go through an egress proxy started for it
/// ([`crate::egress`], the one commands use) with the `[web] allow` list and public addresses
/// only; its record comes back with the page.
pub fn fetch(
    action: &Authorized<WebFetch>,
    web: &WebConfig,
    address_guard: AddressGuard,
) -> Result<Fetched, WebError> {
    fetch_through(action, web, address_guard, Arc::new(SystemNet))
}

/// [`fetch`] over a network of the caller's choosing (the seam for a test that makes a
/// connection land somewhere other than where the name resolved).
pub fn fetch_through(
    action: &Authorized<WebFetch>,
    web: &WebConfig,
    address_guard: AddressGuard,
    net: Arc<dyn Net>,
) -> Result<Fetched, WebError> {
    let start_url = action.get().url.clone();
    let max_bytes = web.max_bytes.unwrap_or(DEFAULT_MAX_BYTES);
    let timeout_ms = web.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
    let deadline = Instant::now() + Duration::from_millis(timeout_ms);
    let list = web.allow.clone().unwrap_or_default();
    let allow = Allowlist::parse(&list).map_err(|why| WebError::BadUrl {
        url: start_url.clone(),
        why: format!("the [web] allow list does not parse: {why}"),
    })?;
    let roots = root_certs(web)?;
    let proxy = EgressProxy::start_with(
        allow,
        ProxyOptions {
            addresses: address_guard.policy(),
            net,
        },
    )
    .map_err(|e| WebError::Failed {
        url: start_url.clone(),
        message: format!("cannot start the egress proxy: {e}"),
    })?;
    let mut url = start_url.clone();
    let mut redirects = Vec::new();
    loop {
        let (_, host, port) = target(&url)?;
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(WebError::Timeout {
                url,
                ms: timeout_ms,
            });
        }
        let config = ureq::Agent::config_builder()
            .proxy(None)
            .max_redirects(0)
            .http_status_as_error(false)
            .timeout_global(Some(left))
            .user_agent("warrant-web-fetch")
            .tls_config(TlsConfig::builder().root_certs(roots.clone()).build())
            .build();
        let tunnel = Tunnel {
            socket: proxy.socket().to_path_buf(),
            target: if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            },
            left,
        };
        let refused_before = proxy.log().refused.len();
        let connector = ().chain(tunnel).chain(RustlsConnector::default());
        let agent = ureq::Agent::with_parts(config, connector, ProxyResolves);
        let response = agent.get(&url).call();
        let mut response = match response {
            Ok(r) => r,
            Err(e) => {
                let log = proxy.log();
                if let Some(refused) = log.refused.get(refused_before) {
                    return Err(refusal(refused, &host, port, &list));
                }
                if let Some(failed) = log.allowed.last().filter(|a| a.peer.is_none()) {
                    // The proxy could not resolve or reach the target.
                    return Err(WebError::Failed {
                        url,
                        message: failed.reason.clone().unwrap_or_default(),
                    });
                }
                // ureq's error enum is open (non-exhaustive): only a timeout is told apart.
                return Err(if let ureq::Error::Timeout(_) = e {
                    WebError::Timeout {
                        url,
                        ms: timeout_ms,
                    }
                } else {
                    WebError::Failed {
                        url,
                        message: e.to_string(),
                    }
                });
            }
        };
        let status = response.status().as_u16();
        if (300..400).contains(&status) {
            let location = response
                .headers()
                .get("location")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            if let Some(location) = location {
                if redirects.len() >= MAX_REDIRECTS {
                    return Err(WebError::TooManyRedirects { url: start_url });
                }
                let next = join(&url, &location);
                redirects.push(next.clone());
                url = next;
                continue;
            }
        }
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let (body, truncated, bytes) = read_capped(response.body_mut(), max_bytes, &url)?;
        let raw = String::from_utf8_lossy(&body).into_owned();
        let html = content_type.contains("html")
            || raw
                .trim_start()
                .to_ascii_lowercase()
                .starts_with("<!doctype html")
            || raw.trim_start().to_ascii_lowercase().starts_with("<html");
        let text = if html {
            nanohtml2text::html2text(&raw)
        } else {
            raw
        };
        drop(response);
        return Ok(Fetched {
            url: start_url,
            final_url: url,
            status,
            content_type,
            text,
            truncated,
            bytes,
            redirects,
            egress: proxy.finish(),
        });
    }
}

/// The typed error for the proxy's refusal of one hop.
fn refusal(refused: &EgressAttempt, host: &str, port: u16, list: &[String]) -> WebError {
    let why = refused.reason.clone().unwrap_or_default();
    match refused.refused_by {
        Some(EgressCheck::Allowlist) => WebError::NotAllowed {
            host: host.to_owned(),
            port,
            list: if list.is_empty() {
                " (the list is empty: web fetch is off)".into()
            } else {
                format!(" ({})", list.join(", "))
            },
        },
        Some(EgressCheck::Resolved | EgressCheck::Connected) => WebError::Address {
            host: host.to_owned(),
            why,
        },
        Some(EgressCheck::Request) | None => WebError::Failed {
            url: refused.target.clone(),
            message: why,
        },
    }
}

/// Reads at most `max` bytes of the body; `(bytes, whether more was left, bytes read)`.
fn read_capped(
    body: &mut ureq::Body,
    max: u64,
    url: &str,
) -> Result<(Vec<u8>, bool, u64), WebError> {
    use std::io::Read;
    let mut out = Vec::new();
    let mut reader = body.as_reader();
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = reader.read(&mut buf).map_err(|e| WebError::Failed {
            url: url.to_owned(),
            message: e.to_string(),
        })?;
        if n == 0 {
            let len = out.len() as u64;
            return Ok((out, false, len));
        }
        let room = (max as usize).saturating_sub(out.len());
        out.extend_from_slice(buf.get(..n.min(room)).unwrap_or_default());
        if n > room {
            // Stop reading: the rest of a large page never crosses into memory.
            let len = out.len() as u64;
            return Ok((out, true, len));
        }
    }
}

/// `location` resolved against `base` (absolute, scheme-relative, absolute-path or relative).
fn join(base: &str, location: &str) -> String {
    if location.contains("://") {
        return location.to_owned();
    }
    let (scheme, rest) = base.split_once("://").unwrap_or(("http", base));
    if let Some(r) = location.strip_prefix("//") {
        return format!("{scheme}://{r}");
    }
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let authority = rest.get(..authority_end).unwrap_or(rest);
    if location.starts_with('/') {
        return format!("{scheme}://{authority}{location}");
    }
    let path = rest.get(authority_end..).unwrap_or("/");
    let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
    format!("{scheme}://{authority}{dir}/{location}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn internal_addresses_are_named_and_public_ones_pass() {
        for a in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fd00:ec2::254",
            "fe80::1",
            "::ffff:127.0.0.1",
            "64:ff9b::a9fe:a9fe",
        ] {
            assert!(forbidden(a.parse().unwrap()).is_some(), "{a}");
        }
        for a in ["93.184.215.14", "2606:4700::6810:84e5", "1.1.1.1"] {
            assert_eq!(forbidden(a.parse().unwrap()), None, "{a}");
        }
    }

    #[test]
    fn urls_are_parsed_strictly() {
        assert_eq!(
            target("https://Docs.RS/serde").unwrap(),
            ("https".into(), "docs.rs".into(), 443)
        );
        assert_eq!(
            target("http://[::1]:8080/x").unwrap(),
            ("http".into(), "::1".into(), 8080)
        );
        assert_eq!(target("ftp://x/").unwrap_err().code(), "W-WEB-001");
        assert_eq!(target("http://user@evil/").unwrap_err().code(), "W-WEB-001");
        assert_eq!(join("http://a/b/c", "/d"), "http://a/d");
        assert_eq!(join("http://a/b/c", "d"), "http://a/b/d");
        assert_eq!(join("https://a/b", "//c/e"), "https://c/e");
    }
}
