//! Warrant's egress proxy for `network = { allow = [...] }`: it listens on a Unix socket (the
//! forwarder inside the command's network namespace bridges 127.0.0.1:PORT to it), reads one
//! request head per connection, either `CONNECT host:port` or a plain-HTTP absolute URI
//! (`GET http://host:port/path`), checks the target against the allowlist, and then tunnels
//! (CONNECT) or forwards the request in origin form. Every decision is logged; the log ends up in
//! the command's result, so refusals are journaled with the effect.
//!
//! Matching rules: host names compare case-insensitively without a trailing dot; `*.example.com`
//! matches any subdomain (not `example.com` itself); an IP literal is allowed only when that
//! exact address is listed; a host that is not a DNS name (numeric forms such as `2130706433` or
//! `127.1` that resolvers read as addresses) is refused unless listed literally. A listed name is
//! trusted to resolve wherever DNS says. One request per plain-HTTP connection is checked; later
//! requests on the same connection go to the same (allowed) upstream.
//!
//! It is the one egress point of Warrant: sandboxed commands reach it through their forwarder,
//! and `web_fetch` (`crate::web`) opens a CONNECT tunnel through a proxy of its own for the
//! length of the fetch. Both therefore share the allowlist, the address checks and the record.
//! The address checks depend on the [`AddressPolicy`] the proxy starts with: a command's
//! profile lists names a person trusts to resolve wherever DNS says ([`AddressPolicy::AsListed`],
//! so `localhost:8000` works), while a fetch reaches public addresses only
//! ([`AddressPolicy::PublicOnly`]): every address the name resolves to is checked before
//! connecting (one internal address refuses the name, a rebinding setup), and the peer of the
//! connected socket is checked again before a byte of the request is sent upstream.

use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Longest request head the proxy reads before refusing.
const HEAD_MAX: usize = 16 * 1024;
/// Most decisions kept per command; later ones are only counted.
const LOG_MAX: usize = 200;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// One allowlist entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum HostRule {
    Name(String),
    Suffix(String),
    Ip(IpAddr),
}

/// The parsed `allow` list of a profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allowlist(pub(crate) Vec<(HostRule, u16)>);

impl Allowlist {
    /// Parse `host:port` entries (`[v6]:port` for IPv6, `*.domain:port` for subdomains).
    pub fn parse(entries: &[String]) -> Result<Self, String> {
        let mut out = Vec::new();
        for entry in entries {
            let (host, port) = split_host_port(entry)
                .ok_or_else(|| format!("`{entry}` is not host:port (e.g. \"pypi.org:443\")"))?;
            let rule = if let Some(rest) = host.strip_prefix("*.") {
                if !is_dns_name(rest) {
                    return Err(format!("`{entry}`: `{rest}` is not a DNS name"));
                }
                HostRule::Suffix(normalize_name(rest))
            } else if let Ok(ip) = host.parse::<IpAddr>() {
                HostRule::Ip(ip)
            } else if is_dns_name(&host) {
                HostRule::Name(normalize_name(&host))
            } else {
                return Err(format!(
                    "`{entry}`: `{host}` is neither a DNS name nor an IP address"
                ));
            };
            out.push((rule, port));
        }
        Ok(Self(out))
    }

    /// Whether `host:port` may be reached; the refusal reason otherwise.
    pub fn check(&self, host: &str, port: u16) -> Result<(), String> {
        let target = if let Ok(ip) = host.parse::<IpAddr>() {
            Target::Ip(ip)
        } else if is_dns_name(host) {
            Target::Name(normalize_name(host))
        } else {
            return Err(format!(
                "`{host}` is not a DNS name (numeric host forms are refused unless listed as an IP address)"
            ));
        };
        let hit = self.0.iter().any(|(rule, p)| {
            *p == port
                && match (rule, &target) {
                    (HostRule::Name(n), Target::Name(t)) => n == t,
                    (HostRule::Suffix(s), Target::Name(t)) => t
                        .strip_suffix(s.as_str())
                        .is_some_and(|head| head.ends_with('.') && head.len() > 1),
                    (HostRule::Ip(a), Target::Ip(b)) => a == b,
                    (HostRule::Name(_) | HostRule::Suffix(_), Target::Ip(_))
                    | (HostRule::Ip(_), Target::Name(_)) => false,
                }
        });
        if hit {
            Ok(())
        } else {
            Err("not on the profile's network allowlist".to_owned())
        }
    }
}

enum Target {
    Name(String),
    Ip(IpAddr),
}

fn normalize_name(s: &str) -> String {
    s.trim_end_matches('.').to_ascii_lowercase()
}

/// Letters, digits, hyphens in dot-separated labels, the last one not all digits (so resolvers
/// cannot read it as an address).
fn is_dns_name(s: &str) -> bool {
    let s = s.strip_suffix('.').unwrap_or(s);
    let labels: Vec<&str> = s.split('.').collect();
    !s.is_empty()
        && s.len() <= 253
        && labels.iter().all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
        && labels
            .last()
            .is_some_and(|l| !l.chars().all(|c| c.is_ascii_digit()))
        && !labels
            .last()
            .is_some_and(|l| l.to_ascii_lowercase().starts_with("0x"))
}

/// `host:port` or `[v6]:port`; the port must be a number in 1..=65535.
fn split_host_port(s: &str) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (h, p) = rest.split_once("]:")?;
        (h, p)
    } else {
        s.rsplit_once(':')?
    };
    if host.is_empty() || host.contains(':') && !s.starts_with('[') {
        return None;
    }
    let port: u16 = port.parse().ok().filter(|p| *p != 0)?;
    Some((host.to_owned(), port))
}

/// One connection attempt through the proxy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressAttempt {
    /// `CONNECT` or the HTTP method of a plain request.
    pub method: String,
    /// `host:port` as the command asked for it.
    pub target: String,
    /// Why it was refused, or why an allowed connection failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Which check refused it (absent for an allowed attempt or a failed connection).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_by: Option<EgressCheck>,
    /// The address the connection reached (the connected socket's peer), when it was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
}

/// The check of the proxy that refused an attempt, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EgressCheck {
    /// The request was neither `CONNECT host:port` nor a plain-HTTP absolute URI.
    Request,
    /// The target is not on the allowlist.
    Allowlist,
    /// The name resolved to an internal address ([`AddressPolicy::PublicOnly`]).
    Resolved,
    /// The connected socket's peer is an internal address ([`AddressPolicy::PublicOnly`]).
    Connected,
}

/// Which addresses an allowed target may reach.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressPolicy {
    /// Wherever the listed name resolves (a command's profile: a person listed the name).
    AsListed,
    /// Public addresses only, checked after resolution and on the connected socket (`web_fetch`).
    /// `loopback` lets loopback through: only a debug build's negative control sets it.
    PublicOnly { loopback: bool },
}

impl AddressPolicy {
    /// Why `ip` may not be reached under this policy.
    fn refuses(self, ip: IpAddr) -> Option<&'static str> {
        match self {
            Self::AsListed => None,
            Self::PublicOnly { loopback } => {
                if loopback && ip.is_loopback() {
                    None
                } else {
                    forbidden(ip)
                }
            }
        }
    }
}

/// Why an address is internal (not reachable by a fetch), `None` when it is a public one.
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

/// How the proxy resolves names and opens connections. [`SystemNet`] is the only one Warrant
/// uses; the trait is the seam a test uses to make a connection land somewhere other than where
/// the name resolved (what DNS rebinding between two lookups, or a middlebox, does), so that
/// the connected-socket check is reached on its own.
pub trait Net: Send + Sync + std::fmt::Debug {
    fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>>;
    fn connect(&self, addr: SocketAddr, timeout: Duration) -> std::io::Result<TcpStream>;
}

/// The system resolver and plain TCP connections.
#[derive(Debug, Default)]
pub struct SystemNet;

impl Net for SystemNet {
    fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        Ok((host, port).to_socket_addrs()?.collect())
    }

    fn connect(&self, addr: SocketAddr, timeout: Duration) -> std::io::Result<TcpStream> {
        TcpStream::connect_timeout(&addr, timeout)
    }
}

/// How a proxy is started: the address policy and the network it uses.
#[derive(Clone, Debug)]
pub struct ProxyOptions {
    pub addresses: AddressPolicy,
    pub net: Arc<dyn Net>,
}

impl Default for ProxyOptions {
    fn default() -> Self {
        Self {
            addresses: AddressPolicy::AsListed,
            net: Arc::new(SystemNet),
        }
    }
}

/// Every decision of the proxy during one command.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressLog {
    pub allowed: Vec<EgressAttempt>,
    pub refused: Vec<EgressAttempt>,
    /// Decisions past the first [`LOG_MAX`], counted only.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unlogged: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A running proxy; [`EgressProxy::finish`] stops it and returns its log.
#[derive(Debug)]
pub struct EgressProxy {
    dir: PathBuf,
    socket: PathBuf,
    log: Arc<Mutex<EgressLog>>,
    stop: Arc<AtomicBool>,
    /// Connections accepted whose decision is not logged yet.
    deciding: Arc<AtomicUsize>,
    accept: Option<JoinHandle<()>>,
}

/// How long [`EgressProxy::finish`] waits for connections still being decided.
const DECIDE_WAIT: Duration = Duration::from_secs(1);

static COUNTER: AtomicU64 = AtomicU64::new(0);

impl EgressProxy {
    /// Listen on a fresh Unix socket in a private temporary directory (a command's proxy: the
    /// listed names are trusted to resolve wherever DNS says).
    pub fn start(allow: Allowlist) -> std::io::Result<Self> {
        Self::start_with(allow, ProxyOptions::default())
    }

    /// [`EgressProxy::start`] with an address policy and a network of the caller's choosing.
    pub fn start_with(allow: Allowlist, options: ProxyOptions) -> std::io::Result<Self> {
        let dir = std::env::temp_dir().join(format!(
            "warrant-egress-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&dir)?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
        let socket = dir.join("proxy.sock");
        let listener = UnixListener::bind(&socket)?;
        let log = Arc::new(Mutex::new(EgressLog::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let allow = Arc::new(allow);
        let options = Arc::new(options);
        let deciding = Arc::new(AtomicUsize::new(0));
        let accept = {
            let (log, stop, deciding) =
                (Arc::clone(&log), Arc::clone(&stop), Arc::clone(&deciding));
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(conn) = conn else { continue };
                    let (log, allow, options) =
                        (Arc::clone(&log), Arc::clone(&allow), Arc::clone(&options));
                    deciding.fetch_add(1, Ordering::SeqCst);
                    let deciding = Arc::clone(&deciding);
                    std::thread::spawn(move || handle(conn, &allow, &options, &log, &deciding));
                }
            })
        };
        Ok(Self {
            dir,
            socket,
            log,
            stop,
            deciding,
            accept: Some(accept),
        })
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The decisions so far (the proxy keeps running). A decision is logged before the client
    /// hears its answer, so a client that read its answer finds it here.
    pub fn log(&self) -> EgressLog {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Stop accepting, remove the socket, and return the log so far.
    pub fn finish(mut self) -> EgressLog {
        self.shutdown();
        let until = std::time::Instant::now() + DECIDE_WAIT;
        while self.deciding.load(Ordering::SeqCst) > 0 && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::mem::take(&mut *self.log.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = UnixStream::connect(&self.socket);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        if self.accept.is_some() {
            self.shutdown();
        }
    }
}

fn record(log: &Mutex<EgressLog>, attempt: EgressAttempt, refused: bool) {
    let mut log = log.lock().unwrap_or_else(PoisonError::into_inner);
    if log.allowed.len() + log.refused.len() >= LOG_MAX {
        log.unlogged += 1;
    } else if refused {
        log.refused.push(attempt);
    } else {
        log.allowed.push(attempt);
    }
}

fn answer(conn: &mut UnixStream, status: &str, body: &str) {
    let _ = write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = conn.shutdown(Shutdown::Write);
}

/// One client connection: decide (counted in `deciding` until logged), then tunnel or forward.
fn handle(
    conn: UnixStream,
    allow: &Allowlist,
    options: &ProxyOptions,
    log: &Mutex<EgressLog>,
    deciding: &AtomicUsize,
) {
    let decided = decide(conn, allow, options, log);
    deciding.fetch_sub(1, Ordering::SeqCst);
    if let Some((conn, upstream)) = decided {
        tunnel(conn, upstream);
    }
}

/// Read the head, check it, log the decision and answer; the two ends to join when allowed.
fn decide(
    mut conn: UnixStream,
    allow: &Allowlist,
    options: &ProxyOptions,
    log: &Mutex<EgressLog>,
) -> Option<(UnixStream, TcpStream)> {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        if let Some(i) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if head.len() > HEAD_MAX {
            answer(&mut conn, "431 Request Header Fields Too Large", "");
            return None;
        }
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    };
    let rest = head.split_off(end);
    let text = String::from_utf8_lossy(&head).into_owned();
    let mut lines = text.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut parts = first.split(' ');
    let (method, uri, version) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let parsed = if method.eq_ignore_ascii_case("CONNECT") {
        split_host_port(uri).map(|(h, p)| (h, p, None))
    } else if let Some(rest) = uri.strip_prefix("http://") {
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let hp = if authority.ends_with(']') || !authority.contains(':') {
            Some((
                authority
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_owned(),
                80,
            ))
        } else {
            split_host_port(authority)
        };
        hp.map(|(h, p)| (h, p, Some(path.to_owned())))
    } else {
        None
    };
    let Some((host, port, path)) = parsed else {
        record(
            log,
            EgressAttempt {
                method: method.to_owned(),
                target: uri.to_owned(),
                reason: Some(
                    "not a CONNECT host:port or plain-HTTP absolute-URI request".to_owned(),
                ),
                refused_by: Some(EgressCheck::Request),
                peer: None,
            },
            true,
        );
        answer(
            &mut conn,
            "400 Bad Request",
            "warrant egress proxy: send CONNECT host:port or an http:// absolute URI\n",
        );
        return None;
    };
    let target = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    // Every decision is logged before the client hears it, so a command that saw its answer
    // and exited cannot end before its refusal is recorded.
    let refuse = |conn: &mut UnixStream, check: EgressCheck, reason: String| {
        let body = format!("warrant egress proxy: {target} refused: {reason}\n");
        record(
            log,
            EgressAttempt {
                method: method.to_owned(),
                target: target.clone(),
                reason: Some(reason),
                refused_by: Some(check),
                peer: None,
            },
            true,
        );
        answer(conn, "403 Forbidden", &body);
    };
    if let Err(reason) = allow.check(&host, port) {
        refuse(&mut conn, EgressCheck::Allowlist, reason);
        return None;
    }
    // A failed lookup or connection is an allowed attempt that failed (502), not a refusal.
    let failed = |conn: &mut UnixStream, reason: String| {
        let body = format!("warrant egress proxy: {reason}\n");
        record(
            log,
            EgressAttempt {
                method: method.to_owned(),
                target: target.clone(),
                reason: Some(reason),
                refused_by: None,
                peer: None,
            },
            false,
        );
        answer(conn, "502 Bad Gateway", &body);
    };
    let addrs = match options.net.resolve(&host, port) {
        Ok(addrs) if !addrs.is_empty() => addrs,
        Ok(_) => {
            failed(&mut conn, format!("{host} resolved to no address"));
            return None;
        }
        Err(e) => {
            failed(&mut conn, format!("cannot resolve {host}: {e}"));
            return None;
        }
    };
    // Every address is checked before any is tried: a name that resolves to a public and an
    // internal address is a rebinding setup, refused whole.
    for addr in &addrs {
        if let Some(why) = options.addresses.refuses(addr.ip()) {
            refuse(
                &mut conn,
                EgressCheck::Resolved,
                format!("{} is {why}", addr.ip()),
            );
            return None;
        }
    }
    let mut last = String::new();
    let mut connected = None;
    for addr in &addrs {
        match options.net.connect(*addr, CONNECT_TIMEOUT) {
            Ok(s) => {
                connected = Some(s);
                break;
            }
            Err(e) => last = format!("cannot connect to {addr}: {e}"),
        }
    }
    let Some(mut upstream) = connected else {
        failed(&mut conn, last);
        return None;
    };
    // The connected socket's peer is what the bytes reach: checked again before any is sent.
    let peer = match upstream.peer_addr() {
        Ok(peer) => peer,
        Err(e) => {
            failed(
                &mut conn,
                format!("the connection to {host} has no peer: {e}"),
            );
            return None;
        }
    };
    if let Some(why) = options.addresses.refuses(peer.ip()) {
        let _ = upstream.shutdown(Shutdown::Both);
        refuse(
            &mut conn,
            EgressCheck::Connected,
            format!("the connected socket's peer {} is {why}", peer.ip()),
        );
        return None;
    }
    record(
        log,
        EgressAttempt {
            method: method.to_owned(),
            target,
            reason: None,
            refused_by: None,
            peer: Some(peer.to_string()),
        },
        false,
    );
    let sent = match path {
        None => conn.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n"),
        Some(path) => {
            // Origin form upstream; the rest of the head as the client sent it.
            let after_first = &text[first.len()..];
            upstream.write_all(format!("{method} {path} {version}{after_first}").as_bytes())
        }
    };
    if sent.is_err() || upstream.write_all(&rest).is_err() {
        return None;
    }
    let _ = conn.set_read_timeout(None);
    Some((conn, upstream))
}

fn tunnel(client: UnixStream, upstream: TcpStream) {
    let (Ok(client2), Ok(upstream2)) = (client.try_clone(), upstream.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || {
        pipe(client2, &upstream2);
        let _ = upstream2.shutdown(Shutdown::Write);
    });
    pipe(upstream, &client);
    let _ = client.shutdown(Shutdown::Write);
    let _ = up.join();
}

fn pipe(mut from: impl Read, mut to: impl Write) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn allowlist_rules() {
        let list = Allowlist::parse(&[
            "pypi.org:443".into(),
            "*.example.com:80".into(),
            "10.0.0.1:8080".into(),
            "[::1]:9000".into(),
        ])
        .unwrap();
        let cases = [
            ("pypi.org", 443, true),
            ("PyPI.org.", 443, true),
            ("pypi.org", 80, false),
            ("files.pypi.org", 443, false),
            ("a.example.com", 80, true),
            ("a.b.example.com", 80, true),
            ("example.com", 80, false),
            ("badexample.com", 80, false),
            ("10.0.0.1", 8080, true),
            ("10.0.0.2", 8080, false),
            ("::1", 9000, true),
            ("127.0.0.1", 443, false),
            ("2130706433", 443, false),
            ("127.1", 443, false),
            ("0x7f.1", 443, false),
        ];
        let got: Vec<(&str, u16, bool)> = cases
            .iter()
            .map(|(h, p, _)| (*h, *p, list.check(h, *p).is_ok()))
            .collect();
        assert_eq!(got, cases.to_vec());
    }

    #[test]
    fn bad_entries_are_refused_with_the_reason() {
        let errs: Vec<String> = ["pypi.org", "pypi.org:0", "bad host:1", "*.1:80", "::1:80"]
            .iter()
            .map(|e| Allowlist::parse(&[(*e).to_owned()]).unwrap_err())
            .collect();
        assert_eq!(
            errs,
            vec![
                "`pypi.org` is not host:port (e.g. \"pypi.org:443\")",
                "`pypi.org:0` is not host:port (e.g. \"pypi.org:443\")",
                "`bad host:1`: `bad host` is neither a DNS name nor an IP address",
                "`*.1:80`: `1` is not a DNS name",
                "`::1:80` is not host:port (e.g. \"pypi.org:443\")",
            ]
        );
    }
}
