//! Confirming a resource a person connects to a run before it is believed: an HTTP endpoint
//! must answer, an MCP server command must start under the default profile's confinement (with
//! the minimal environment the agent's commands get) and answer `initialize` naming itself.
//! These checks send a request or start a process from this machine, so they live with the
//! executors and never run on the agent's say-so alone (the caller decides what is checked).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use warrant_core::CanonicalPath;
use warrant_core::config::ProfileConfig;

use crate::Launcher;
use crate::child::{ChildSpec, STOP_GRACE, Supervised};

/// Checks an endpoint answers HTTP (any status: a credentialed endpoint may say 401). No
/// redirect is followed. Says what answered, or why nothing did.
pub fn check_endpoint(url: &str, timeout: Duration) -> Result<String, String> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!("{url:?} is not an http:// or https:// URL"));
    }
    let config = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .max_redirects(0)
        .build();
    let agent = ureq::Agent::new_with_config(config);
    let started = Instant::now();
    // What is said of it (and journaled) never carries the URL's credentials.
    let shown = without_userinfo(url);
    match agent.get(url).call() {
        Ok(resp) => Ok(format!(
            "GET {shown} answered HTTP {} in {} ms",
            resp.status().as_u16(),
            started.elapsed().as_millis()
        )),
        Err(e) => Err(format!(
            "GET {shown} failed: {}",
            e.to_string().replace(url, &shown)
        )),
    }
}

/// `http://user:secret@host/p` → `http://host/p`.
fn without_userinfo(url: &str) -> String {
    let Some(scheme) = url.find("://") else {
        return url.to_owned();
    };
    let rest = &url[scheme + 3..];
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{}{}", &url[..scheme + 3], &rest[at + 1..]),
        None => url.to_owned(),
    }
}

/// Starts the MCP server command as a supervised child under the default profile (its sandbox
/// and minimal environment, as the agent's commands get), sends `initialize` over stdio and
/// waits for a JSON-RPC result naming the server. The child is stopped with its group either way.
pub fn check_mcp_server(
    argv: &[String],
    profiles: &BTreeMap<String, ProfileConfig>,
    parent_env: Vec<(String, String)>,
    workspace: &CanonicalPath,
    timeout: Duration,
) -> Result<String, String> {
    let Some(program) = argv.first() else {
        return Err("the MCP server command is empty".into());
    };
    let profile = profiles.get("default").cloned().unwrap_or_default();
    let launcher = match &profile.sandbox {
        Some(_) if !profile.unconfined => Some(Launcher::current_exe().map_err(|e| e.to_string())?),
        Some(_) | None => None,
    };
    let spec = ChildSpec {
        argv,
        cwd: workspace,
        profile_name: "default",
        profile: &profile,
        parent_env,
    };
    let mut child = Supervised::start(&spec, launcher.as_ref())
        .map_err(|e| format!("cannot start {program}: {e}"))?;
    let Some((mut stdin, stdout)) = child.take_io() else {
        return Err(format!("{program} has no standard input and output"));
    };
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "warrant", "version": env!("CARGO_PKG_VERSION")}}});
    let sent = writeln!(stdin, "{init}").and_then(|()| stdin.flush());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(timeout);
    child.stop(STOP_GRACE);
    if let Err(e) = sent {
        return Err(format!("cannot write initialize to {program}: {e}"));
    }
    let line = line.map_err(|_| {
        format!(
            "{program} did not answer initialize within {} ms",
            timeout.as_millis()
        )
    })?;
    initialize_result(argv, program, line.trim())
}

/// What an `initialize` answer says of the server, or why it is not one.
fn initialize_result(argv: &[String], program: &str, line: &str) -> Result<String, String> {
    let v: Value = serde_json::from_str(line)
        .map_err(|e| format!("{program} answered something that is not JSON-RPC: {e}"))?;
    let result = v
        .get("result")
        .filter(|_| v.get("id") == Some(&json!(1)))
        .ok_or_else(|| format!("{program} did not return a result for initialize: {v}"))?;
    let server = result
        .pointer("/serverInfo/name")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{program}'s initialize result names no serverInfo"))?;
    let version = result
        .pointer("/serverInfo/version")
        .and_then(Value::as_str)
        .unwrap_or("?");
    let protocol = result
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or("?");
    Ok(format!(
        "`{}` answered initialize: server {server} {version}, protocol {protocol}",
        argv.join(" ")
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn argv() -> Vec<String> {
        vec!["srv".into()]
    }

    #[test]
    fn an_initialize_result_names_the_server() {
        let line = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","serverInfo":{"name":"demo","version":"1.2"}}}"#;
        assert_eq!(
            initialize_result(&argv(), "srv", line).unwrap(),
            "`srv` answered initialize: server demo 1.2, protocol 2025-06-18"
        );
    }

    #[test]
    fn an_answer_that_is_not_a_result_for_initialize_is_refused() {
        for line in [
            "not json",
            r#"{"jsonrpc":"2.0","id":2,"result":{"serverInfo":{"name":"x"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
        ] {
            assert!(initialize_result(&argv(), "srv", line).is_err(), "{line}");
        }
    }

    #[test]
    fn a_urls_credentials_are_never_said() {
        assert_eq!(
            without_userinfo("http://ops:hunter2-long@127.0.0.1:9/api?q=a@b"),
            "http://127.0.0.1:9/api?q=a@b"
        );
        assert_eq!(without_userinfo("https://host/x"), "https://host/x");
        let e = check_endpoint(
            "http://ops:hunter2-long@127.0.0.1:9/",
            Duration::from_millis(200),
        )
        .unwrap_err();
        assert!(!e.contains("hunter2"), "{e}");
    }

    #[test]
    fn only_http_urls_are_checked() {
        let e = check_endpoint("file:///etc/passwd", Duration::from_millis(10)).unwrap_err();
        assert!(e.contains("not an http"), "{e}");
    }
}
