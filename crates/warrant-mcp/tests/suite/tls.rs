//! HTTP servers are reached over TLS, with the certificate verified: a server whose certificate
//! no trusted authority signed is refused before anything is sent (W-MCP-002, the certificate
//! named); plain `http://` to another machine is refused at configuration (W-MCP-001), since
//! the calls and their headers would cross the network in the clear.

use std::collections::BTreeMap;
use std::io::BufRead as _;
use std::process::{Command, Stdio};

use warrant_core::Coded;
use warrant_core::config::McpServerConfig;
use warrant_mcp::McpSource;
use warrant_tools::ToolSource;

use super::client::ctx;

/// A TLS server on 127.0.0.1 with a self-signed certificate (openssl and Python's ssl module).
fn self_signed_server(dir: &std::path::Path) -> (u16, std::process::Child) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(Stdio::null())
        .status()
        .expect("openssl");
    assert!(made.success());
    let script = format!(
        "import http.server, ssl\n\
         srv = http.server.HTTPServer(('127.0.0.1', 0), http.server.BaseHTTPRequestHandler)\n\
         c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n\
         c.load_cert_chain({cert:?}, {key:?})\n\
         srv.socket = c.wrap_socket(srv.socket, server_side=True)\n\
         print(srv.server_address[1], flush=True)\n\
         srv.serve_forever()\n",
        cert = cert.display().to_string(),
        key = key.display().to_string(),
    );
    let mut child = Command::new("python3")
        .args(["-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (line.trim().parse().unwrap(), child)
}

fn one(url: String) -> BTreeMap<String, McpServerConfig> {
    BTreeMap::from([(
        "t".to_owned(),
        McpServerConfig {
            url: Some(url),
            timeout_ms: Some(5_000),
            ..McpServerConfig::default()
        },
    )])
}

#[test]
fn an_https_server_is_verified_and_an_untrusted_certificate_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (port, mut server) = self_signed_server(dir.path());
    let url = format!("https://127.0.0.1:{port}/mcp");
    let source = McpSource::new(&one(url.clone()), ctx(dir.path())).unwrap();
    assert!(source.tools().is_empty());
    let failures = source.failures();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].code(), "W-MCP-002", "{}", failures[0]);

    // Why: a client built as the connection builds it stops at the certificate. The control,
    // the same client told to accept any certificate, reaches the server (which answers 501):
    // TLS is spoken, and verification is what refused it.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (verified, unverified) = rt.block_on(async {
        let post = |client: reqwest::Client| {
            let url = url.clone();
            async move { client.post(url).body("{}").send().await }
        };
        (
            post(reqwest::Client::builder().build().unwrap()).await,
            post(
                reqwest::Client::builder()
                    .danger_accept_invalid_certs(true)
                    .build()
                    .unwrap(),
            )
            .await,
        )
    });
    let _ = server.kill();
    let mut why = String::new();
    let err = verified.expect_err("an unknown issuer is refused");
    let mut cause: Option<&dyn std::error::Error> = Some(&err);
    while let Some(e) = cause {
        why.push_str(&format!("{e}; "));
        cause = e.source();
    }
    assert!(why.to_lowercase().contains("certificate"), "{why}");
    assert_eq!(unverified.unwrap().status().as_u16(), 501);
}

#[test]
fn plain_http_to_another_machine_is_refused_and_to_this_one_allowed() {
    let dir = tempfile::tempdir().unwrap();
    for url in [
        "http://mcp.example.com/mcp",
        "http://10.0.0.7:8080/mcp",
        "http://user@example.com/",
    ] {
        let err = McpSource::new(&one(url.to_owned()), ctx(dir.path())).err();
        let err = err.unwrap_or_else(|| panic!("{url} was accepted"));
        assert_eq!(err.code(), "W-MCP-001", "{url}: {err}");
        assert!(err.to_string().contains("in the clear"), "{err}");
    }
    // This machine: configuration accepts it (nothing listens, so the server just fails).
    for url in [
        "http://127.0.0.1:9/mcp",
        "http://localhost:9/mcp",
        "http://[::1]:9/mcp",
    ] {
        assert!(
            McpSource::new(&one(url.to_owned()), ctx(dir.path())).is_ok(),
            "{url}"
        );
    }
}
