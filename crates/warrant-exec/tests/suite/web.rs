//! `web_fetch`'s executor through the egress proxy: HTTPS to a local server whose certificate a
//! test CA signed (trusted only when `[web] ca_certificates` names it), and the connected-socket
//! check reached on its own (a network whose connection lands somewhere other than where the name
//! resolved). Each with its control: the same fetch with the guard off succeeds.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pretty_assertions::assert_eq;
use warrant_core::config::WebConfig;
use warrant_core::{Action, Coded};
use warrant_exec::egress::{EgressAttempt, EgressCheck, EgressLog, Net};
use warrant_exec::web::{AddressGuard, Fetched, WebError, fetch, fetch_through};

use super::authorized;

const PAGE: &str = "<!doctype html><html><body><p>The answer is 42.</p></body></html>";

fn action(url: &str) -> Action {
    Action::WebFetch {
        url: url.to_owned(),
        host: String::new(),
        port: 0,
        allowlisted: true,
    }
}

/// Reads one request head and answers with [`PAGE`]; counts the requests it read.
fn serve_one(mut stream: impl Read + Write, requests: &AtomicUsize) {
    let mut reader = BufReader::new(&mut stream);
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) if line == "\r\n" => break,
            Ok(_) => {}
        }
    }
    requests.fetch_add(1, Ordering::SeqCst);
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{PAGE}",
        PAGE.len()
    );
    let _ = stream.flush();
}

/// A plain-HTTP server on 127.0.0.1 (port 0); its port and its count of requests read.
fn http_server() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&requests);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let counted = Arc::clone(&counted);
            std::thread::spawn(move || serve_one(conn, &counted));
        }
    });
    (port, requests)
}

/// A test CA and an HTTPS server on 127.0.0.1 with a certificate for `localhost` it signed;
/// the server's port and the CA's PEM.
fn https_server() -> (u16, String) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "Warrant test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()),
            )
            .unwrap(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let requests = AtomicUsize::new(0);
        for conn in listener.incoming() {
            let Ok(mut tcp) = conn else { continue };
            let Ok(mut tls) = rustls::ServerConnection::new(Arc::clone(&config)) else {
                continue;
            };
            // A failed handshake (the client did not trust us) just ends the connection.
            serve_one(rustls::Stream::new(&mut tls, &mut tcp), &requests);
            tls.send_close_notify();
            let _ = tls.complete_io(&mut tcp);
        }
    });
    (port, ca.pem())
}

fn web(allow: &[String], ca: Option<&std::path::Path>) -> WebConfig {
    WebConfig {
        allow: Some(allow.to_vec()),
        max_bytes: None,
        timeout_ms: Some(10_000),
        ca_certificates: ca.map(|p| p.to_str().unwrap().to_owned()),
    }
}

fn attempt(
    target: &str,
    peer: Option<&str>,
    refused: Option<(EgressCheck, &str)>,
) -> EgressAttempt {
    EgressAttempt {
        method: "CONNECT".into(),
        target: target.into(),
        reason: refused.map(|(_, r)| r.to_owned()),
        refused_by: refused.map(|(c, _)| c),
        peer: peer.map(str::to_owned),
    }
}

#[test]
fn https_goes_through_the_proxy_and_trusts_only_the_configured_ca() {
    let (port, ca_pem) = https_server();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, ca_pem).unwrap();
    let url = format!("https://localhost:{port}/page");
    let allow = [format!("localhost:{port}")];
    let target = format!("localhost:{port}");

    // Loopback let through (the local server stands in for a public one), the CA configured:
    // the page comes back, and the proxy's record says where the tunnel went.
    let page: Fetched = fetch(
        &authorized(action(&url)),
        &web(&allow, Some(&ca)),
        AddressGuard::LoopbackAllowed,
    )
    .unwrap();
    assert_eq!(
        (page.status, page.text.trim(), page.egress),
        (
            200,
            "The answer is 42.",
            EgressLog {
                allowed: vec![attempt(&target, Some(&format!("127.0.0.1:{port}")), None)],
                refused: vec![],
                unlogged: 0,
            }
        )
    );

    // Control: without the CA the server's certificate is not trusted, so TLS through the
    // tunnel really is verified end to end.
    let err = fetch(
        &authorized(action(&url)),
        &web(&allow, None),
        AddressGuard::LoopbackAllowed,
    )
    .unwrap_err();
    assert_eq!(err.code(), "W-WEB-004", "{err}");
    assert!(err.to_string().contains("UnknownIssuer"), "{err}");

    // The guard on: loopback is refused after resolution, before any connection.
    let err = fetch(
        &authorized(action(&url)),
        &web(&allow, Some(&ca)),
        AddressGuard::On,
    )
    .unwrap_err();
    assert_eq!(err.code(), "W-WEB-003", "{err}");
    assert!(
        err.to_string()
            .starts_with("refused to connect to localhost: "),
        "{err}"
    );

    // A CA file that is not usable is a clear refusal of its own.
    let err = fetch(
        &authorized(action(&url)),
        &web(&allow, Some(&dir.path().join("missing.pem"))),
        AddressGuard::LoopbackAllowed,
    )
    .unwrap_err();
    assert_eq!(err.code(), "W-WEB-007", "{err}");
}

/// Resolves every name to a public (documentation) address, and connects wherever it was told:
/// what a name rebound between two lookups, or a middlebox, does to a connection.
#[derive(Debug)]
struct Rebinding {
    public: SocketAddr,
    lands_at: SocketAddr,
}

impl Net for Rebinding {
    fn resolve(&self, _host: &str, _port: u16) -> std::io::Result<Vec<SocketAddr>> {
        Ok(vec![self.public])
    }

    fn connect(&self, _addr: SocketAddr, timeout: Duration) -> std::io::Result<TcpStream> {
        TcpStream::connect_timeout(&self.lands_at, timeout)
    }
}

#[test]
fn the_connected_socket_check_refuses_on_its_own() {
    let (port, requests) = http_server();
    let url = format!("http://public.test:{port}/");
    let allow = [format!("public.test:{port}")];
    let net = || -> Arc<dyn Net> {
        Arc::new(Rebinding {
            public: format!("203.0.113.7:{port}").parse().unwrap(),
            lands_at: format!("127.0.0.1:{port}").parse().unwrap(),
        })
    };

    // The name resolves to a public address, so only the connected socket's peer shows the
    // loopback: that check refuses, and the server never reads a request.
    let err = fetch_through(
        &authorized(action(&url)),
        &web(&allow, None),
        AddressGuard::On,
        net(),
    )
    .unwrap_err();
    assert_eq!(
        err,
        WebError::Address {
            host: "public.test".into(),
            why: "the connected socket's peer 127.0.0.1 is a loopback address".into(),
        }
    );
    assert_eq!(requests.load(Ordering::SeqCst), 0);

    // Control: the guard off, the same fetch reaches the server.
    let page = fetch_through(
        &authorized(action(&url)),
        &web(&allow, None),
        AddressGuard::Off,
        net(),
    )
    .unwrap();
    assert_eq!(
        (page.text.trim(), page.egress.allowed),
        (
            "The answer is 42.",
            vec![attempt(
                &format!("public.test:{port}"),
                Some(&format!("127.0.0.1:{port}")),
                None
            )]
        )
    );
    assert_eq!(requests.load(Ordering::SeqCst), 1);
}

#[test]
fn the_proxy_refuses_off_the_list_and_internal_names_and_records_why() {
    let (port, requests) = http_server();
    // Listed, but the name resolves to loopback: refused after resolution.
    let listed = [format!("localhost:{port}")];
    let err = fetch(
        &authorized(action(&format!("http://localhost:{port}/"))),
        &web(&listed, None),
        AddressGuard::On,
    )
    .unwrap_err();
    assert_eq!(err.code(), "W-WEB-003", "{err}");
    // Not listed at all: the proxy's allowlist refuses it, typed as the list's refusal.
    let err = fetch(
        &authorized(action(&format!("http://127.0.0.1:{port}/"))),
        &web(&listed, None),
        AddressGuard::Off,
    )
    .unwrap_err();
    assert_eq!(
        err,
        WebError::NotAllowed {
            host: "127.0.0.1".into(),
            port,
            list: format!(" (localhost:{port})"),
        }
    );
    assert_eq!(requests.load(Ordering::SeqCst), 0);
    // Control: listed and the guard off, it is fetched.
    let page = fetch(
        &authorized(action(&format!("http://localhost:{port}/"))),
        &web(&listed, None),
        AddressGuard::Off,
    )
    .unwrap();
    assert_eq!(page.status, 200);
}
