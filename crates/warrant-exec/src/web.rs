//! The `web.fetch` executor: one HTTP(S) GET under the configured `[web] allow` list (the egress
//! allowlist's rules and matching, [`crate::egress::Allowlist`]), with the address guard applied
//! twice: after resolution (a resolver that returns only permitted addresses, and refuses the
//! name when any address it has is loopback, private, link-local, metadata or otherwise
//! internal) and on the connected socket (the peer address of the TCP connection, checked
//! before a byte is sent). Redirects are followed by hand, at most five, each new URL checked
//! like the first. The body is read up to `max_bytes`; the whole fetch has `timeout_ms`. HTML is
//! reduced to text.
//!
//! Why not the egress proxy itself: the proxy serves sandboxed commands over a Unix socket from
//! inside their network namespace; a fetch runs in Warrant's own process, so it applies the same
//! allowlist in process, with the address checks the proxy does not make. Limits: a fetch sends
//! no cookies or credentials; only `http` and `https`; the text conversion is a plain one
//! (`nanohtml2text`: no CSS, no scripts run).

use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;
use thiserror::Error;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, LazyBuffers, NextTimeout, RustlsConnector,
    ShutdownHandle, Transport,
};
use warrant_core::config::WebConfig;
use warrant_core::{Coded, WebFetch};
use warrant_kernel::Authorized;

use crate::egress::Allowlist;

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

/// Why an address is not reachable by a fetch, `None` when it is a public one.
pub fn forbidden(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            if v4.is_loopback() {
                Some("a loopback address")
            } else if v4.is_private() {
                Some("a private address")
            } else if o[0] == 169 && o[1] == 254 {
                Some("a link-local address (cloud metadata services live here)")
            } else if v4.is_unspecified() || o[0] == 0 {
                Some("an unspecified address")
            } else if o[0] == 100 && (64..128).contains(&o[1]) {
                Some("a shared (carrier-grade NAT) address")
            } else if v4.is_broadcast() || v4.is_multicast() || o[0] >= 240 {
                Some("a broadcast, multicast or reserved address")
            } else if o[0] == 192 && o[1] == 0 && o[2] == 0 {
                Some("an IETF protocol assignment address")
            } else if o[0] == 198 && (o[1] == 18 || o[1] == 19) {
                Some("a benchmarking address")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return forbidden(IpAddr::V4(v4));
            }
            let s = v6.segments();
            if v6.is_loopback() || v6.is_unspecified() {
                Some("a loopback or unspecified address")
            } else if (s[0] & 0xfe00) == 0xfc00 {
                Some("a unique local (private) address")
            } else if (s[0] & 0xffc0) == 0xfe80 {
                Some("a link-local address")
            } else if v6.is_multicast() {
                Some("a multicast address")
            } else if s[0] == 0x64 && s[1] == 0xff9b {
                // NAT64 embeds an IPv4 address in the last 32 bits.
                let v4 = std::net::Ipv4Addr::new(
                    (s[6] >> 8) as u8,
                    s[6] as u8,
                    (s[7] >> 8) as u8,
                    s[7] as u8,
                );
                forbidden(IpAddr::V4(v4))
            } else {
                None
            }
        }
    }
}

/// The guard's state for one fetch: whether it is on, and the first refusal it made (read back
/// when the request fails, to say why).
#[derive(Debug, Clone)]
struct Guard {
    on: bool,
    loopback: bool,
    refused: Arc<Mutex<Option<WebError>>>,
}

impl Guard {
    fn check(&self, host: &str, ip: IpAddr) -> Result<(), ureq::Error> {
        if !self.on || (self.loopback && ip.is_loopback()) {
            return Ok(());
        }
        match forbidden(ip) {
            None => Ok(()),
            Some(why) => {
                let e = WebError::Address {
                    host: host.to_owned(),
                    why: format!("{ip} is {why}"),
                };
                let mut slot = self.refused.lock().unwrap_or_else(PoisonError::into_inner);
                slot.get_or_insert(e.clone());
                Err(ureq::Error::Io(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    e.to_string(),
                )))
            }
        }
    }

    fn refusal(&self) -> Option<WebError> {
        self.refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Resolves as ureq would, then refuses the name if any of its addresses is internal (a name
/// that resolves to both a public and a private address is a rebinding setup).
#[derive(Debug)]
struct CheckedResolver(Guard);

impl Resolver for CheckedResolver {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let addrs = DefaultResolver::default().resolve(uri, config, timeout)?;
        let host = uri.host().unwrap_or_default();
        for a in addrs.iter() {
            self.0.check(host, a.ip())?;
        }
        Ok(addrs)
    }
}

/// Opens the TCP connection itself so the peer address can be checked on the connected socket
/// before anything is sent.
#[derive(Debug)]
struct CheckedTcp(Guard);

/// A plain TCP transport over a socket whose peer was checked. Timeouts are the fetch's own
/// (set once on the socket), not ureq's per-step ones.
#[derive(Debug)]
struct CheckedStream {
    stream: Arc<TcpStream>,
    buffers: LazyBuffers,
    /// The handle the agent holds weakly, alive as long as the transport.
    _shutdown: Arc<Shutdown>,
}

impl Transport for CheckedStream {
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
struct Shutdown(Arc<TcpStream>);

impl ShutdownHandle for Shutdown {
    fn shutdown(&self) {
        let _ = self.0.shutdown(std::net::Shutdown::Both);
    }
}

impl Connector<()> for CheckedTcp {
    type Out = CheckedStream;

    fn connect(
        &self,
        details: &ConnectionDetails,
        _chained: Option<()>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        let host = details.uri.host().unwrap_or_default();
        let timeout = Duration::from_millis(DEFAULT_TIMEOUT_MS);
        let mut last = None;
        for addr in details.addrs.iter() {
            match TcpStream::connect_timeout(addr, timeout) {
                Ok(stream) => {
                    let peer: SocketAddr = stream.peer_addr()?;
                    self.0.check(host, peer.ip())?;
                    stream.set_nodelay(true)?;
                    stream.set_read_timeout(Some(timeout))?;
                    stream.set_write_timeout(Some(timeout))?;
                    let config = details.config;
                    let stream = Arc::new(stream);
                    let handle = Arc::new(Shutdown(stream.clone()));
                    let shared: Arc<dyn ShutdownHandle> = handle.clone();
                    (details.register_shutdown)(Arc::downgrade(&shared))?;
                    return Ok(Some(CheckedStream {
                        stream,
                        _shutdown: handle,
                        buffers: LazyBuffers::new(
                            config.input_buffer_size(),
                            config.output_buffer_size(),
                        ),
                    }));
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.map_or(ureq::Error::HostNotFound, ureq::Error::Io))
    }
}

/// The executor.
/// How the address guard is set; anything but `On` only for a debug build's negative control.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressGuard {
    On,
    /// Loopback addresses pass; every other internal address is refused.
    LoopbackAllowed,
    Off,
}

pub fn fetch(
    action: &Authorized<WebFetch>,
    web: &WebConfig,
    address_guard: AddressGuard,
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
    let mut url = start_url.clone();
    let mut redirects = Vec::new();
    loop {
        let (_, host, port) = target(&url)?;
        if list.is_empty() || allow.check(&host, port).is_err() {
            return Err(WebError::NotAllowed {
                host,
                port,
                list: if list.is_empty() {
                    " (the list is empty: web fetch is off)".into()
                } else {
                    format!(" ({})", list.join(", "))
                },
            });
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(WebError::Timeout {
                url,
                ms: timeout_ms,
            });
        }
        let guard = Guard {
            on: address_guard != AddressGuard::Off,
            loopback: address_guard == AddressGuard::LoopbackAllowed,
            refused: Arc::new(Mutex::new(None)),
        };
        let config = ureq::Agent::config_builder()
            .proxy(None)
            .max_redirects(0)
            .http_status_as_error(false)
            .timeout_global(Some(left))
            .user_agent("warrant-web-fetch")
            .build();
        let connector = ().chain(CheckedTcp(guard.clone())).chain(RustlsConnector::default());
        let agent = ureq::Agent::with_parts(config, connector, CheckedResolver(guard.clone()));
        let response = agent.get(&url).call();
        let mut response = match response {
            Ok(r) => r,
            Err(e) => {
                if let Some(refused) = guard.refusal() {
                    return Err(refused);
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
        return Ok(Fetched {
            url: start_url,
            final_url: url,
            status,
            content_type,
            text,
            truncated,
            bytes,
            redirects,
        });
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
