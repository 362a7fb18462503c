//! An HTTP server that redirects the client to another host: refused, so the configured
//! headers (credentials) never reach that host. The negative control sends the same request
//! with the HTTP client's default redirect policy: the header arrives at the other host.

use std::collections::BTreeMap;
use std::sync::mpsc;

use pretty_assertions::assert_eq;
use warrant_core::Coded;
use warrant_core::config::McpServerConfig;
use warrant_mcp::McpSource;
use warrant_tools::ToolSource;

use super::client::ctx;

/// A server on 127.0.0.1 that redirects every request to `to`.
fn redirector(to: String) -> (u16, std::thread::JoinHandle<()>) {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let port = server.server_addr().to_ip().unwrap().port();
    let handle = std::thread::spawn(move || {
        while let Ok(Some(req)) = server.recv_timeout(std::time::Duration::from_secs(5)) {
            let location = tiny_http::Header::from_bytes("Location", to.as_bytes()).unwrap();
            let _ = req.respond(tiny_http::Response::empty(307).with_header(location));
        }
    });
    (port, handle)
}

/// The other host (`localhost`, not `127.0.0.1`): reports the header each request carries.
fn other_host() -> (u16, mpsc::Receiver<Option<String>>) {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let port = server.server_addr().to_ip().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        while let Ok(Some(req)) = server.recv_timeout(std::time::Duration::from_secs(5)) {
            let key = req
                .headers()
                .iter()
                .find(|h| h.field.equiv("X-Api-Key"))
                .map(|h| h.value.to_string());
            let _ = tx.send(key);
            let _ = req.respond(tiny_http::Response::empty(404));
        }
    });
    (port, rx)
}

#[test]
fn a_redirect_to_another_host_is_refused_and_the_header_never_arrives() {
    let dir = tempfile::tempdir().unwrap();
    let (other, arrived) = other_host();
    let (port, _r) = redirector(format!("http://localhost:{other}/mcp"));
    let mut context = ctx(dir.path());
    context
        .parent_env
        .push(("MCP_REDIRECT_KEY".into(), "key-that-must-stay-home".into()));
    let servers = BTreeMap::from([(
        "r".to_owned(),
        McpServerConfig {
            url: Some(format!("http://127.0.0.1:{port}/mcp")),
            headers: BTreeMap::from([("X-Api-Key".to_owned(), "env:MCP_REDIRECT_KEY".to_owned())]),
            timeout_ms: Some(5_000),
            ..McpServerConfig::default()
        },
    )]);
    let source = McpSource::new(&servers, context).unwrap();
    assert!(source.tools().is_empty());
    let failures = source.failures();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(
        failures[0],
        warrant_mcp::McpError::Redirect {
            server: "r".into(),
            to: format!("http://localhost:{other}/mcp"),
        }
    );
    assert_eq!(failures[0].code(), "W-MCP-010");
    assert!(
        arrived.try_recv().is_err(),
        "nothing reached the other host"
    );

    // Control: the HTTP client's default policy follows it and hands over the key.
    let (port, _r) = redirector(format!("http://localhost:{other}/mcp"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let _ = reqwest::Client::new()
            .post(format!("http://127.0.0.1:{port}/mcp"))
            .header("X-Api-Key", "key-that-must-stay-home")
            .body("{}")
            .send()
            .await;
    });
    assert_eq!(
        arrived
            .recv_timeout(std::time::Duration::from_secs(5))
            .unwrap(),
        Some("key-that-must-stay-home".to_owned())
    );
}
