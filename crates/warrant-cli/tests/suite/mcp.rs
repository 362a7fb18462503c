//! MCP servers through the ring, end to end (issue 14's done-when): a scripted run calls tools
//! of the reference server `@modelcontextprotocol/server-everything` over stdio (confined under
//! the `mcp-stdio` profile) and over streamable HTTP, under a policy where one call is allowed,
//! one asks (the run parks, exit 10, is approved and resumed) and one is forbidden.

use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::Value;
use warrant_core::config::DEFAULT_READ_ROOTS;

use super::harness::{Sandbox, parked_request, stderr};

/// The pinned reference server, installed under `~/.cache/warrant-test-peers` when missing.
/// Installed into a directory of this process's own and renamed into place, so tests (and
/// test processes) that need it at once never see half an installation.
pub fn everything() -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap();
    let peers = home.join(".cache/warrant-test-peers");
    let dir = peers.join("npm");
    let entry = "node_modules/@modelcontextprotocol/server-everything/dist/index.js";
    let index = dir.join(entry);
    if !index.exists() {
        let mine = peers.join(
            format!(
                "npm-installing-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            )
            .replace(['(', ')'], ""),
        );
        let _ = std::fs::remove_dir_all(&mine);
        std::fs::create_dir_all(&mine).unwrap();
        let status = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&mine)
            .arg("@modelcontextprotocol/server-everything@2026.8.31")
            .status()
            .unwrap();
        assert!(status.success(), "npm could not install server-everything");
        assert!(
            mine.join(entry).exists(),
            "npm installed no server-everything"
        );
        // Someone else may have finished first: theirs stays, ours goes.
        if std::fs::rename(&mine, &dir).is_err() {
            let _ = std::fs::remove_dir_all(&mine);
        }
        assert!(
            index.exists(),
            "server-everything is not at {}",
            index.display()
        );
    }
    index
}

/// The reference server over streamable HTTP on a free port of 127.0.0.1; killed on drop.
struct HttpPeer {
    child: Child,
    port: u16,
}

impl HttpPeer {
    fn start(index: &std::path::Path) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("node")
            .arg(index)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "server-everything did not listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Self { child, port }
    }
}

impl Drop for HttpPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn toml_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

const POLICY: &str = r#"
@id("mcp-echo")
@reason("Echo on the stdio server is allowed.")
permit (principal, action == Warrant::Action::"mcp.call", resource is Warrant::McpTool)
when { resource.server == "every" && resource.tool == "echo" };

@id("mcp-web-reads-ask")
@reason("Reads of the HTTP server are shown to a person first.")
@ask("change")
permit (principal, action == Warrant::Action::"mcp.call", resource is Warrant::McpTool)
when { resource.server == "web" && resource.risk == "read" };

@id("mcp-no-env")
@reason("No MCP tool may read a server's environment.")
forbid (principal, action == Warrant::Action::"mcp.call", resource is Warrant::McpTool)
when { resource.tool == "get-env" };
"#;

fn setup(sb: &mut Sandbox, http: &HttpPeer, index: &std::path::Path) {
    let npm = index
        .ancestors()
        .nth(4)
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let mut roots: Vec<String> = DEFAULT_READ_ROOTS.iter().map(|s| (*s).to_owned()).collect();
    roots.push(npm);
    let config = sb.ws.join(".warrant/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        r#"
[profiles.mcp-stdio.sandbox]
read_roots = {roots}

[mcp.servers.every]
command = ["node", {index:?}, "stdio"]
tools = ["echo"]

[mcp.servers.web]
url = "http://127.0.0.1:{port}/mcp"
headers = {{ "X-Warrant-Test" = "env:MCP_TEST_TOKEN" }}
tools = ["get-sum", "get-env"]
"#,
        roots = toml_list(&roots),
        index = index.to_str().unwrap(),
        port = http.port,
    ));
    std::fs::write(&config, text).unwrap();
    sb.write(".warrant/policies/mcp.cedar", POLICY);
    sb.extra_env
        .push(("MCP_TEST_TOKEN".into(), "header-value-for-the-test".into()));
}

#[test]
fn a_scripted_run_calls_a_reference_server_over_stdio_and_http_allowed_asked_and_forbidden() {
    let index = everything();
    let http = HttpPeer::start(&index);
    let mut sb = Sandbox::init();
    setup(&mut sb, &http, &index);
    let sum = warrant_mcp::model_name("web", "get-sum");
    let env = warrant_mcp::model_name("web", "get-env");
    let model = sb.transcript(&format!(
        "version: 1\nturns:\n  - calls:\n      - tool: mcp__every__echo\n        args: {{ message: hello }}\n      - tool: {env}\n        args: {{}}\n      - tool: {sum}\n        args: {{ a: 2, b: 3 }}\n  - say: done\n"
    ));
    let out = sb.run(&["run", "--model", &model, "use the servers"]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let request = parked_request(&out);
    // The person is shown server, tool and arguments.
    let shown = sb.json(&["requests", "show", &request, "--json"]);
    let text = shown.to_string();
    for part in ["web/get-sum", "server: web", "\\\"a\\\": 2"] {
        assert!(text.contains(part), "{part} not in {text}");
    }
    let (run, events) = sb.last_run();
    let echo = events
        .iter()
        .find(|e| e["kind"] == "effect_completed")
        .unwrap_or_else(|| panic!("{events:#?}"));
    let result = echo["payload"].to_string();
    assert!(result.contains("Echo: hello"), "{result}");
    let denied: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "effect_denied")
        .collect();
    assert_eq!(denied.len(), 1, "{events:#?}");
    assert!(
        denied[0].to_string().contains("mcp-no-env"),
        "{}",
        denied[0]
    );

    let ok = sb.run(&["approve", &request]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let done = sb.run(&["resume", &run]);
    assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
    let (_, events) = sb.last_run();
    let sums: Vec<String> = events
        .iter()
        .filter(|e| e["kind"] == "effect_completed")
        .map(|e| e["payload"].to_string())
        .collect();
    assert_eq!(sums.len(), 2, "{sums:#?}");
    assert!(sums[1].contains("The sum of 2 and 3 is 5"), "{}", sums[1]);
    // Every effect is in the signed audit trail.
    let verified = sb.run(&["audit", "verify"]);
    assert_eq!(verified.status.code(), Some(0), "{}", stderr(&verified));
}

/// A run parks on a call of a tool whose server changes the tool's definition before the call
/// is approved and resumed: the resume refuses the call (W-MCP-007, nothing sent) and records
/// the changed catalogue. The control: the same run without the change makes the call.
#[test]
fn a_resume_that_would_call_a_tool_whose_definition_changed_is_refused() {
    let script = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../warrant-mcp/tests/peers/hostile.py"
    ))
    .unwrap();
    let outcome = |change: bool| {
        let sb = Sandbox::init();
        sb.write("hostile.py", &script);
        let config = sb.ws.join(".warrant/config.toml");
        let mut text = std::fs::read_to_string(&config).unwrap();
        // Confined under the default `mcp-stdio` confinement (no such profile configured).
        text.push_str(
            "\n[mcp.servers.h]\ncommand = [\"/usr/bin/python3\", \"hostile.py\", \"tools\"]\ntools = [\"echo\"]\n",
        );
        std::fs::write(&config, text).unwrap();
        sb.write(
            ".warrant/policies/mcp.cedar",
            "@id(\"mcp-h-asks\")\n@reason(\"Calls of h are reviewed.\")\n@ask(\"change\")\npermit (principal, action == Warrant::Action::\"mcp.call\", resource is Warrant::McpTool)\nwhen { resource.server == \"h\" };\n",
        );
        let model = sb.transcript(
            "version: 1\nturns:\n  - calls:\n      - tool: mcp__h__echo\n        args: { text: hi }\n  - say: done\n",
        );
        let out = sb.run(&["run", "--model", &model, "echo"]);
        assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
        let request = parked_request(&out);
        if change {
            sb.write("hostile-variant", "");
        }
        let ok = sb.run(&["approve", &request]);
        assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
        let done = sb.run(&["resume", &sb.last_run().0]);
        assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
        let (_, events) = sb.last_run();
        let result = events
            .iter()
            .find(|e| e["kind"] == "effect_completed")
            .map(|e| e["payload"].clone())
            .unwrap_or_else(|| panic!("{events:#?}"));
        let changed = events.iter().any(|e| e["kind"] == "tools_changed");
        (result, changed)
    };
    let (control, changed) = outcome(false);
    assert_eq!(control["ok"], Value::Bool(true), "{control}");
    assert!(control.to_string().contains("echo: hi"), "{control}");
    assert!(!changed);
    let (refused, changed) = outcome(true);
    assert_eq!(refused["ok"], Value::Bool(false), "{refused}");
    assert_eq!(refused["result"]["code"], "W-MCP-007", "{refused}");
    assert!(changed, "the run records the changed catalogue");
}

/// A stdio server runs confined by default: the same server reading a file of the person's
/// home gets it unconfined (the control, a profile with `unconfined = true`) and not under the
/// default `mcp-stdio` confinement.
#[test]
fn a_stdio_server_is_confined_by_default_and_reads_the_home_only_when_unconfined() {
    let script = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../warrant-mcp/tests/peers/hostile.py"
    ))
    .unwrap();
    let sb = Sandbox::init();
    sb.add_unconfined_profile();
    sb.write("hostile.py", &script);
    let secret = sb.home.join("private-notes.txt");
    std::fs::write(&secret, "the person's own notes").unwrap();
    let config = sb.ws.join(".warrant/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(concat!(
        "\n[mcp.servers.conf]\ncommand = [\"/usr/bin/python3\", \"hostile.py\", \"tools\"]\ntools = [\"peek\"]\n",
        "\n[mcp.servers.open]\ncommand = [\"/usr/bin/python3\", \"hostile.py\", \"tools\"]\nprofile = \"open\"\ntools = [\"peek\"]\n",
    ));
    std::fs::write(&config, text).unwrap();
    sb.write(
        ".warrant/policies/mcp.cedar",
        "@id(\"mcp-peek\")\n@reason(\"test\")\npermit (principal, action == Warrant::Action::\"mcp.call\", resource is Warrant::McpTool)\nwhen { resource.tool == \"peek\" };\n",
    );
    let path = secret.to_str().unwrap();
    let model = sb.transcript(&format!(
        "version: 1\nturns:\n  - calls:\n      - tool: mcp__conf__peek\n        args: {{ path: {path:?} }}\n      - tool: mcp__open__peek\n        args: {{ path: {path:?} }}\n  - say: done\n"
    ));
    let out = sb.run(&["run", "--model", &model, "peek"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (_, events) = sb.last_run();
    let results: Vec<String> = events
        .iter()
        .filter(|e| e["kind"] == "effect_completed")
        .map(|e| e["payload"]["result"].to_string())
        .collect();
    assert_eq!(results.len(), 2, "{events:#?}");
    assert!(results[0].contains("cannot read"), "{}", results[0]);
    assert!(!results[0].contains("own notes"), "{}", results[0]);
    assert!(
        results[1].contains("the person's own notes"),
        "{}",
        results[1]
    );
}

/// The official conformance runner's client scenarios against the `warrant` binary as client:
/// for each scenario the runner starts its test server and runs `conformance-client.sh`, which
/// configures that server as `[mcp.servers.peer]` of an initialized workspace and makes a
/// scripted run through the ring (the catalogue, each `mcp.call` decided, journaled, audited).
/// A scenario that fails and is not in the baseline fails the test, and so does a baseline entry
/// that now passes (the runner calls it stale).
#[test]
fn the_conformance_runners_client_scenarios_pass_but_for_the_baseline() {
    let runner = super::mcp_serve::conformance_runner();
    let sb = Sandbox::init();
    sb.write(
        ".warrant/policies/conformance.cedar",
        "@id(\"conformance-peer\")\n@reason(\"The conformance runner's scenario server.\")\npermit (principal, action == Warrant::Action::\"mcp.call\", resource is Warrant::McpTool)\nwhen { resource.server == \"peer\" };\n",
    );
    let peers = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/peers");
    let listed = Command::new(&runner).arg("list").output().unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned()
        + &String::from_utf8_lossy(&listed.stderr);
    let scenarios: Vec<String> = listed
        .split("Client scenarios")
        .nth(1)
        .unwrap_or_else(|| panic!("no client scenarios in:\n{listed}"))
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- "))
        .map(str::to_owned)
        .collect();
    assert!(scenarios.len() >= 20, "{scenarios:?}");
    let command = format!(
        "sh {} {} {}",
        peers.join("conformance-client.sh").display(),
        assert_cmd::cargo::cargo_bin("warrant").display(),
        peers.join("conformance-client").display(),
    );
    let mut unexpected = Vec::new();
    for scenario in &scenarios {
        let mut c = Command::new(&runner);
        c.args(["client", "--command", &command, "--scenario", scenario])
            .arg("--expected-failures")
            .arg(peers.join("conformance-baseline.yml"))
            .current_dir(&sb.ws)
            .env("NO_COLOR", "1")
            .env("WARRANT_MANAGED_DIR", &sb.managed)
            .env("HOME", &sb.home)
            .env("WARRANT_ACTOR", "tester")
            .env("WARRANT_TENANT", "harbour");
        for (k, _) in std::env::vars() {
            if k.starts_with("WARRANT_")
                && !["WARRANT_MANAGED_DIR", "WARRANT_ACTOR", "WARRANT_TENANT"].contains(&k.as_str())
            {
                c.env_remove(k);
            }
        }
        let out = c.output().unwrap();
        if out.status.code() != Some(0) {
            unexpected.push(format!(
                "{scenario}:\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(
        unexpected.is_empty(),
        "client scenarios outside the baseline, or stale baseline entries:\n{}",
        unexpected.join("\n\n")
    );
}

/// Servers start when a run needs its catalogue, not for every command that opens the host: a
/// run that parks on a call starts the server, `approve` (and the other commands that only
/// record in a run, and `mcp serve`) never does, and the resume that makes the call starts it
/// again. Each start appends a line to a file outside the workspace, the control that a start
/// is seen.
#[test]
fn a_server_starts_for_the_run_and_its_resume_but_not_for_approve() {
    let script = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../warrant-mcp/tests/peers/hostile.py"
    ))
    .unwrap();
    let sb = Sandbox::init();
    sb.add_unconfined_profile();
    sb.write("hostile.py", &script);
    let starts = sb.dir.path().join("starts");
    let config = sb.ws.join(".warrant/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "\n[mcp.servers.h]\ncommand = [\"/bin/sh\", \"-c\", \"echo started >> {}; exec /usr/bin/python3 hostile.py tools\"]\nprofile = \"open\"\ntools = [\"echo\"]\n",
        starts.display()
    ));
    std::fs::write(&config, text).unwrap();
    sb.write(
        ".warrant/policies/mcp.cedar",
        "@id(\"mcp-h-asks\")\n@reason(\"Calls of h are reviewed.\")\n@ask(\"change\")\npermit (principal, action == Warrant::Action::\"mcp.call\", resource is Warrant::McpTool)\nwhen { resource.server == \"h\" };\n",
    );
    let count = || {
        std::fs::read_to_string(&starts)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };
    let model = sb.transcript(
        "version: 1\nturns:\n  - calls:\n      - tool: mcp__h__echo\n        args: { text: hi }\n  - say: done\n",
    );
    let out = sb.run(&["run", "--model", &model, "echo"]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    assert_eq!(count(), 1, "the run started the server");
    let request = parked_request(&out);
    let ok = sb.run(&["approve", &request]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let shown = sb.run(&["requests", "show", &request, "--json"]);
    assert_eq!(shown.status.code(), Some(0), "{}", stderr(&shown));
    assert_eq!(count(), 1, "approving and showing started no server");
    let done = sb.run(&["resume", &sb.last_run().0]);
    assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
    assert_eq!(count(), 2, "the resume that makes the call started it");
    let (_, events) = sb.last_run();
    let result = events
        .iter()
        .find(|e| e["kind"] == "effect_completed")
        .map(|e| e["payload"].to_string())
        .unwrap_or_else(|| panic!("{events:#?}"));
    assert!(result.contains("echo: hi"), "{result}");
}
