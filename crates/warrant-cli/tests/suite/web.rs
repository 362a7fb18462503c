//! `warrant web` against the real binary: the token and cookie, CSRF, the Host and Origin
//! checks, the headers, the non-loopback bind, the limits, answers recorded "via web" under the
//! CLI's authority rules. Each defense is shown failing with its debug-only switch off
//! (`WARRANT_TEST_DISABLE=web-…`). The browser tests (real Chromium through Playwright) are in
//! `browser`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::harness::{Sandbox, stderr};

/// A `warrant web` process; killed on drop.
pub struct Web {
    child: Child,
    /// `127.0.0.1:PORT`
    pub authority: String,
    pub token: String,
}

impl Drop for Web {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Web {
    pub fn start(sb: &Sandbox, args: &[&str]) -> Web {
        let mut all = vec!["web"];
        all.extend_from_slice(args);
        let mut child = sb
            .std_cmd(&all)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut stderr_first = String::new();
        err.read_line(&mut stderr_first).unwrap();
        if stderr_first.starts_with("warning") {
            err.read_line(&mut stderr_first).unwrap();
        }
        // Keep reading what the server says later (notices when a run starts): a closed pipe
        // would make its next line on standard error fail.
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        let url = line.trim().to_owned();
        assert!(
            url.starts_with("http://"),
            "printed {url:?}, {stderr_first}"
        );
        let rest = url.strip_prefix("http://").unwrap();
        let (authority, query) = rest.split_once("/?token=").unwrap();
        Web {
            child,
            authority: authority.to_owned(),
            token: query.to_owned(),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/?token={}", self.authority, self.token)
    }

    /// Signs in as the page does and returns the cookie header value and the CSRF token.
    pub fn sign_in(&self) -> (String, String) {
        let r = self.send("GET", &format!("/?token={}", self.token), &[], None);
        assert_eq!(r.status, 303, "{}", r.body);
        let cookie = r.header("set-cookie").unwrap();
        let pair = cookie.split(';').next().unwrap().to_owned();
        let session = self.send("GET", "/api/session", &[("Cookie", &pair)], None);
        assert_eq!(session.status, 200, "{}", session.body);
        let csrf = session.json()["csrf"].as_str().unwrap().to_owned();
        (pair, csrf)
    }

    /// A raw HTTP/1.1 request with exactly the headers given (Host defaults to the printed one).
    pub fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> Reply {
        let mut s = TcpStream::connect(&self.authority).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            req.push_str(&format!("Host: {}\r\n", self.authority));
        }
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        let body = body.unwrap_or("");
        if method != "GET" {
            req.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            ));
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).unwrap();
        let _ = s.write_all(body.as_bytes());
        let mut raw = Vec::new();
        let _ = s.read_to_end(&mut raw);
        Reply::parse(&raw)
    }
}

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    fn parse(raw: &[u8]) -> Reply {
        let text = String::from_utf8_lossy(raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        Reply {
            status,
            headers,
            body: body.to_owned(),
        }
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    pub fn code(&self) -> String {
        self.json()["code"].as_str().unwrap_or("").to_owned()
    }
}

/// A run parked on the approval of a command (every command of the project is reviewed), and
/// its request id.
pub fn parked_command(sb: &Sandbox) -> (String, String) {
    sb.review_commands();
    let model = sb.transcript(concat!(
        "version: 1\nturns:\n",
        "  - calls:\n      - tool: run_command\n        args: { argv: [\"sh\", \"-c\", \"echo ran >> counter.txt\"] }\n",
        "  - say: done\n"
    ));
    let out = sb.run(&["run", "--model", &model, "count"]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let request = super::harness::parked_request(&out);
    let (run, _) = sb.last_run();
    (run, request)
}

fn open_requests(sb: &Sandbox) -> usize {
    sb.json(&["requests", "list", "--json"])["requests"]
        .as_array()
        .unwrap()
        .len()
}

fn web_with(sb: &mut Sandbox, disabled: Option<&str>, args: &[&str]) -> Web {
    sb.extra_env.retain(|(k, _)| k != "WARRANT_TEST_DISABLE");
    if let Some(d) = disabled {
        sb.extra_env.push(("WARRANT_TEST_DISABLE".into(), d.into()));
    }
    let web = Web::start(sb, args);
    sb.extra_env.retain(|(k, _)| k != "WARRANT_TEST_DISABLE");
    web
}

#[test]
fn the_token_becomes_an_http_only_strict_cookie_and_the_api_is_runs_list_json() {
    let mut sb = Sandbox::init();
    let (_run, _) = parked_command(&sb);
    let web = web_with(&mut sb, None, &[]);
    assert!(web.authority.starts_with("127.0.0.1:"), "{}", web.authority);
    assert_eq!(web.token.len(), 64);

    // The exchange: a cookie only the server reads, and the token gone from the address.
    let r = web.send("GET", &format!("/?token={}", web.token), &[], None);
    assert_eq!(r.status, 303);
    assert_eq!(r.header("location").as_deref(), Some("/"));
    let cookie = r.header("set-cookie").unwrap();
    let attrs: Vec<&str> = cookie.split("; ").skip(1).collect();
    assert_eq!(attrs, vec!["Path=/", "HttpOnly", "SameSite=Strict"]);
    assert!(!cookie.contains(&web.token), "the cookie is not the token");
    let pair = cookie.split(';').next().unwrap().to_owned();

    // A wrong token signs nobody in; without the cookie nothing is answered, page or API.
    let wrong = web.send("GET", "/?token=00", &[], None);
    assert_eq!((wrong.status, wrong.header("set-cookie")), (401, None));
    for path in ["/api/runs", "/", "/assets/app.js", "/api/requests"] {
        let r = web.send("GET", path, &[], None);
        assert_eq!(r.status, 401, "{path}: {}", r.body);
    }
    let forged = web.send(
        "GET",
        "/api/runs",
        &[("Cookie", "warrant_session=0000")],
        None,
    );
    assert_eq!((forged.status, forged.code()), (401, "W-WEBUI-015".into()));

    // With it: `GET /api/runs` is `runs list --json`, and the workspace is never served.
    let runs = web.send("GET", "/api/runs", &[("Cookie", &pair)], None);
    assert_eq!(runs.status, 200);
    assert_eq!(runs.json(), sb.json(&["runs", "list", "--json"]));
    for path in [
        "/.warrant/config.toml",
        "/.warrant/",
        "/README.md",
        "/assets/../.warrant",
    ] {
        let r = web.send("GET", path, &[("Cookie", &pair)], None);
        assert_eq!(r.status, 404, "{path}: {}", r.body);
    }

    // Negative control: with the cookie check off, the API answers anyone.
    drop(web);
    let open = web_with(&mut sb, Some("web-cookie"), &[]);
    let r = open.send("GET", "/api/runs", &[], None);
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn a_state_changing_request_without_the_csrf_header_is_refused_and_changes_nothing() {
    let mut sb = Sandbox::init();
    let (_run, request) = parked_command(&sb);
    let web = web_with(&mut sb, None, &[]);
    let (cookie, csrf) = web.sign_in();
    let path = format!("/api/requests/{request}/approve");
    let body = r#"{"scope":"once"}"#;
    for headers in [
        vec![("Cookie", cookie.as_str())],
        vec![("Cookie", cookie.as_str()), ("X-Warrant-CSRF", "0000")],
    ] {
        let r = web.send("POST", &path, &headers, Some(body));
        assert_eq!(
            (r.status, r.code()),
            (403, "W-WEBUI-013".into()),
            "{}",
            r.body
        );
    }
    assert_eq!(open_requests(&sb), 1, "still open");
    assert!(!sb.exists("counter.txt"));

    // Negative control: without the check, the same forged request approves and runs it.
    drop(web);
    let web = web_with(&mut sb, Some("web-csrf"), &[]);
    let (cookie, _) = web.sign_in();
    let r = web.send("POST", &path, &[("Cookie", &cookie)], Some(body));
    assert_eq!(r.status, 200, "{}", r.body);
    let _ = csrf;
}

#[test]
fn an_approval_from_the_page_is_recorded_via_web_and_the_run_continues() {
    let mut sb = Sandbox::init();
    let (run, request) = parked_command(&sb);
    let web = web_with(&mut sb, None, &[]);
    let (cookie, csrf) = web.sign_in();
    let r = web.send(
        "POST",
        &format!("/api/requests/{request}/approve"),
        &[("Cookie", &cookie), ("X-Warrant-CSRF", &csrf)],
        Some(r#"{"scope":"once"}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json()["answered"],
        json!({"request": request, "run": run, "answer": "approved", "scope": "once", "by": "tester"})
    );
    // The page's server continues the run; follow it to its end over the stream.
    let stream = web.send(
        "GET",
        &format!("/api/runs/{run}/stream"),
        &[("Cookie", &cookie)],
        None,
    );
    assert!(
        stream.body.contains("\"status\":\"completed\""),
        "{}",
        stream.body
    );
    assert_eq!(
        std::fs::read_to_string(sb.ws.join("counter.txt")).unwrap(),
        "ran\n"
    );
    let shown = sb.json(&["runs", "show", &run, "--json"]);
    let granted: Vec<&Value> = shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "approval_granted")
        .collect();
    assert_eq!(granted.len(), 1);
    assert_eq!(
        granted[0]["payload"]["approver"],
        json!({"tenant": "harbour", "actor": "tester", "via": "web"})
    );

    // Reconnecting from event 3 gets exactly the events after it, each with its id.
    let later = web.send(
        "GET",
        &format!("/api/runs/{run}/stream"),
        &[("Cookie", &cookie), ("Last-Event-ID", "3")],
        None,
    );
    let ids: Vec<u64> = later
        .body
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .map(|n| n.parse().unwrap())
        .collect();
    let total = shown["events"].as_array().unwrap().len() as u64;
    assert_eq!(ids, (4..=total).collect::<Vec<_>>());
    let verified = web.send("GET", "/api/audit/verify", &[("Cookie", &cookie)], None);
    assert_eq!(verified.status, 200, "{}", verified.body);
    assert_eq!(verified.json()["ok"], json!(true), "{}", verified.body);
}

#[test]
fn a_server_started_by_a_run_cannot_pass_for_a_person() {
    let mut sb = Sandbox::init();
    let (_run, request) = parked_command(&sb);
    // As if a run's command had started `warrant web`: it carries the command mark.
    sb.extra_env.push(("WARRANT_COMMAND".into(), "1".into()));
    let web = web_with(&mut sb, None, &[]);
    let (cookie, csrf) = web.sign_in();
    let path = format!("/api/requests/{request}/approve");
    let headers = [
        ("Cookie", cookie.as_str()),
        ("X-Warrant-CSRF", csrf.as_str()),
    ];
    let r = web.send("POST", &path, &headers, Some(r#"{"scope":"once"}"#));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("a command can never answer"), "{}", r.body);
    assert_eq!(open_requests(&sb), 1);
    drop(web);
    // Negative control: with the recognition off, the same server approves.
    let web = web_with(&mut sb, Some("origin"), &[]);
    let (cookie, csrf) = web.sign_in();
    let headers = [
        ("Cookie", cookie.as_str()),
        ("X-Warrant-CSRF", csrf.as_str()),
    ];
    let r = web.send("POST", &path, &headers, Some(r#"{"scope":"once"}"#));
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn a_foreign_origin_and_a_rebound_host_name_are_refused() {
    let mut sb = Sandbox::init();
    let (_run, request) = parked_command(&sb);
    let path = format!("/api/requests/{request}/approve");
    let body = r#"{"scope":"once"}"#;
    let web = web_with(&mut sb, None, &[]);
    let (cookie, csrf) = web.sign_in();
    let port = web.authority.rsplit(':').next().unwrap().to_owned();
    let evil_host = format!("evil.example:{port}");
    let evil_origin = format!("http://{evil_host}");
    let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
        (vec![("Origin", "http://evil.example")], "W-WEBUI-011"),
        (vec![("Origin", "null")], "W-WEBUI-011"),
        (vec![("Sec-Fetch-Site", "cross-site")], "W-WEBUI-011"),
        (
            vec![
                ("Host", evil_host.as_str()),
                ("Origin", evil_origin.as_str()),
            ],
            "W-WEBUI-010",
        ),
    ];
    for (extra, code) in &cases {
        let mut headers = vec![
            ("Cookie", cookie.as_str()),
            ("X-Warrant-CSRF", csrf.as_str()),
        ];
        headers.extend(extra.iter().copied());
        let r = web.send("POST", &path, &headers, Some(body));
        assert_eq!((r.status, r.code()), (403, code.to_string()), "{extra:?}");
        // No CORS: nothing invites another origin to read.
        assert_eq!(r.header("access-control-allow-origin"), None);
    }
    let pre = web.send(
        "OPTIONS",
        &path,
        &[("Origin", &format!("http://{}", web.authority))],
        None,
    );
    assert_eq!(pre.status, 405);
    assert_eq!(pre.header("access-control-allow-origin"), None);
    // The page's own origin is fine (also as localhost).
    let own = format!("http://{}", web.authority);
    let r = web.send(
        "GET",
        "/api/runs",
        &[("Cookie", &cookie), ("Origin", &own)],
        None,
    );
    assert_eq!(r.status, 200);
    let local = format!("localhost:{port}");
    let r = web.send(
        "GET",
        "/api/runs",
        &[("Cookie", &cookie), ("Host", &local)],
        None,
    );
    assert_eq!(r.status, 200);
    assert_eq!(open_requests(&sb), 1);
    drop(web);

    // Negative controls: each check off, its attack gets through.
    let web = web_with(&mut sb, Some("web-origin"), &[]);
    let (cookie, csrf) = web.sign_in();
    let headers = [
        ("Cookie", cookie.as_str()),
        ("X-Warrant-CSRF", csrf.as_str()),
        ("Origin", "http://evil.example"),
    ];
    let r = web.send("GET", "/api/requests", &headers, None);
    assert_eq!(r.status, 200, "{}", r.body);
    drop(web);
    let web = web_with(&mut sb, Some("web-host"), &[]);
    let (cookie, _) = web.sign_in();
    let port = web.authority.rsplit(':').next().unwrap().to_owned();
    let host = format!("evil.example:{port}");
    let r = web.send(
        "GET",
        "/api/runs",
        &[("Cookie", &cookie), ("Host", &host)],
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn every_response_carries_a_strict_csp_and_the_other_headers() {
    let mut sb = Sandbox::init();
    let web = web_with(&mut sb, None, &[]);
    let (cookie, _) = web.sign_in();
    for (path, status) in [
        ("/", 200),
        ("/assets/app.js", 200),
        ("/api/runs", 200),
        ("/nope", 404),
    ] {
        let r = web.send("GET", path, &[("Cookie", &cookie)], None);
        assert_eq!(r.status, status, "{path}");
        assert_eq!(
            (
                r.header("content-security-policy").as_deref(),
                r.header("x-content-type-options").as_deref(),
                r.header("referrer-policy").as_deref(),
                r.header("x-frame-options").as_deref(),
            ),
            (
                Some(
                    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
                ),
                Some("nosniff"),
                Some("no-referrer"),
                Some("DENY"),
            ),
            "{path}"
        );
    }
    // The page holds no inline script for a CSP to have to allow.
    let page = web.send("GET", "/", &[("Cookie", &cookie)], None).body;
    assert!(page.contains("<script src=\"/assets/app.js\" defer></script>"));
    assert_eq!(page.matches("<script").count(), 1);
    drop(web);
    let web = web_with(&mut sb, Some("web-csp"), &[]);
    let (cookie, _) = web.sign_in();
    let r = web.send("GET", "/", &[("Cookie", &cookie)], None);
    assert_eq!(r.header("content-security-policy"), None);
}

#[test]
fn bodies_over_the_limit_are_refused_before_a_handler_reads_them() {
    let mut sb = Sandbox::init();
    let web = web_with(&mut sb, None, &[]);
    let (cookie, csrf) = web.sign_in();
    let task = "x".repeat(100 * 1024);
    let body = json!({"model": "scripted:/nonexistent", "task": task}).to_string();
    let r = web.send(
        "POST",
        "/api/runs",
        &[("Cookie", &cookie), ("X-Warrant-CSRF", &csrf)],
        Some(&body),
    );
    assert_eq!(r.status, 413, "{}", r.body);
    assert_eq!(sb.json(&["runs", "list", "--json"])["runs"], json!([]));
    // A bad body is a clear refusal too.
    let r = web.send(
        "POST",
        "/api/runs",
        &[("Cookie", &cookie), ("X-Warrant-CSRF", &csrf)],
        Some(r#"{"task":"no model"}"#),
    );
    assert_eq!(r.status, 422, "{}", r.body);
}

#[test]
fn beyond_loopback_needs_the_flag_warns_and_wants_the_token_on_every_request() {
    let mut sb = Sandbox::init();
    let out = sb.run(&["web", "--bind", "0.0.0.0:0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("W-WEBUI-001"), "{}", stderr(&out));
    assert!(stderr(&out).contains("--public"), "{}", stderr(&out));

    let mut web = web_with(&mut sb, None, &["--bind", "0.0.0.0:0", "--public"]);
    let port = web.authority.rsplit(':').next().unwrap().to_owned();
    web.authority = format!("127.0.0.1:{port}");
    let r = web.send("GET", &format!("/?token={}", web.token), &[], None);
    assert_eq!(r.status, 303);
    // The page takes the token from the fragment into its tab's storage.
    assert_eq!(r.header("location"), Some(format!("/#token={}", web.token)));
    let cookie = r.header("set-cookie").unwrap();
    let cookie = cookie.split(';').next().unwrap();
    let r = web.send("GET", "/api/runs", &[("Cookie", cookie)], None);
    assert_eq!((r.status, r.code()), (401, "W-WEBUI-016".into()));
    let bearer = format!("Bearer {}", web.token);
    let r = web.send(
        "GET",
        "/api/runs",
        &[("Cookie", cookie), ("Authorization", &bearer)],
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // A DNS name never names it, whatever address it resolves to.
    let r = web.send(
        "GET",
        "/api/runs",
        &[
            ("Cookie", cookie),
            ("Authorization", &bearer),
            ("Host", &format!("evil.example:{port}")),
        ],
        None,
    );
    assert_eq!(r.status, 403);
    drop(web);

    // Negative control: without the token check the cookie alone is enough again.
    let mut web = web_with(
        &mut sb,
        Some("web-token"),
        &["--bind", "0.0.0.0:0", "--public"],
    );
    let port = web.authority.rsplit(':').next().unwrap().to_owned();
    web.authority = format!("127.0.0.1:{port}");
    let (cookie, _) = web.sign_in();
    let r = web.send("GET", "/api/runs", &[("Cookie", &cookie)], None);
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn the_warning_is_printed_for_a_public_bind() {
    let mut sb = Sandbox::init();
    let mut child = sb
        .std_cmd(&["web", "--bind", "0.0.0.0:0", "--public"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(line.starts_with("warning: listening on 0.0.0.0:"), "{line}");
    assert!(line.contains("not loopback"), "{line}");
    sb.extra_env.clear();
}

/// Debian's Chromium, installed with apt when missing (as `.ci/run` does).
fn chromium() -> std::path::PathBuf {
    // One install at a time: apt holds dpkg's lock, so a second test installing at once fails.
    static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = INSTALLING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let bin = std::path::PathBuf::from("/usr/bin/chromium");
    if !bin.exists() {
        eprintln!("installing chromium with apt-get");
        let status = std::process::Command::new("apt-get")
            .args(["install", "-y", "--no-install-recommends", "chromium"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .unwrap();
        assert!(
            status.success() && bin.exists(),
            "apt-get could not install chromium"
        );
    }
    bin
}

/// playwright-core, pinned, under the peers cache (as `.ci/run` installs it).
fn playwright_core() -> std::path::PathBuf {
    let dir = super::harness::peers_dir().join("playwright");
    let module = dir.join("node_modules/playwright-core");
    if !module.join("package.json").exists() {
        std::fs::create_dir_all(&dir).unwrap();
        let status = std::process::Command::new("npm")
            .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
            .arg(&dir)
            .arg("playwright-core@1.64.1")
            .status()
            .unwrap();
        assert!(status.success(), "npm could not install playwright-core");
    }
    module
}

const XSS_TRANSCRIPT: &str = r#"version: 1
turns:
  - say: "<img src=x onerror=alert('model')><script>alert('script')</script> Looking."
    calls:
      - tool: write_file
        args: { path: "<img src=x onerror=alert('file')>.txt", content: "x" }
  - calls:
      - tool: ask_question
        args: { question: "<img src=x onerror=alert('question')> Which one?", options: ["a", "<b onmouseover=alert(1)>b</b>"] }
  - calls:
      - tool: run_command
        args: { argv: ["sh", "-c", "echo ran >> counter.txt"] }
  - say: done
"#;

fn browse(sb: &mut Sandbox, disabled: Option<&str>, mode: &str) -> Value {
    chromium();
    let module = playwright_core();
    sb.review_commands();
    let model = sb.transcript(XSS_TRANSCRIPT);
    let web = web_with(sb, disabled, &[]);
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/web/browser.cjs");
    let out = std::process::Command::new("node")
        .arg(script)
        .env("PLAYWRIGHT_CORE", &module)
        .env("WEB_URL", web.url())
        .env("MODEL", &model)
        .env("MODE", mode)
        .env(
            "SCREENSHOTS",
            std::env::var("WARRANT_WEB_SCREENSHOTS").unwrap_or_default(),
        )
        .output()
        .unwrap();
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(out.status.success(), "{seen:#}");
    seen
}

#[test]
fn browser_a_person_signs_in_answers_approves_and_verifies_and_no_payload_runs() {
    let mut sb = Sandbox::init();
    let seen = browse(&mut sb, None, "full");
    let run = seen["run"].as_str().unwrap().to_owned();
    assert_eq!(
        seen,
        json!({
            "dialogs": [],
            "pageerrors": [],
            "address_after_sign_in": "/",
            "cookie_visible_to_script": "",
            "signed_in_as": "tester@harbour",
            "model_text_shown": "<img src=x onerror=alert('model')><script>alert('script')</script> Looking.",
            "injected_elements": 0,
            "question_shown": "<img src=x onerror=alert('question')> Which one?",
            "approval_body_has_argv": true,
            "asked_of": "anyone",
            "confinement_shown": true,
            "why_shown": "project:review-commands: Commands in this project are reviewed by a person.project:shell-contained: A command confined to the workspace (no network, .git read-only, secrets hidden) runs without asking.",
            "completed": true,
            "audit_has_web_approval": true,
            "verified": true,
            "without_csrf": {"status": 403, "code": "W-WEBUI-013"},
            "cross_origin": {"read": "blocked", "post": "failed"},
            "runs_after": ["web tour"],
            "run": run,
        })
    );
    // The effect happened once, and the answer is the person's, via web.
    assert_eq!(
        std::fs::read_to_string(sb.ws.join("counter.txt")).unwrap(),
        "ran\n"
    );
    assert!(sb.exists("<img src=x onerror=alert('file')>.txt"));
    let shown = sb.json(&["runs", "show", &run, "--json"]);
    let answers: Vec<(&Value, &Value)> = shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| match e["kind"].as_str() {
            Some("approval_granted") => Some((&e["kind"], &e["payload"]["approver"])),
            Some("request_replied") => Some((&e["kind"], &e["payload"]["by"])),
            _ => None,
        })
        .collect();
    let person = json!({"tenant": "harbour", "actor": "tester", "via": "web"});
    assert_eq!(
        answers,
        vec![
            (&json!("request_replied"), &person),
            (&json!("approval_granted"), &person)
        ]
    );
}

#[test]
fn browser_negative_control_the_same_output_runs_when_escaping_and_the_csp_are_off() {
    let mut sb = Sandbox::init();
    let seen = browse(&mut sb, Some("web-escape,web-csp"), "xss-only");
    let dialogs = seen["dialogs"].as_array().unwrap();
    assert!(
        dialogs.iter().any(|d| d == "model"),
        "the model's markup should have run without the defenses: {seen:#}"
    );
}

/// Three messages: the first reads, the second deletes (a person's approval in the middle),
/// the third only talks: `suite::chat`'s transcript.
const CHAT: &str = super::chat::TRANSCRIPT;

/// Waits (bounded) until `done` holds of the run's events.
fn wait_for(sb: &Sandbox, run: &str, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    for _ in 0..600 {
        let shown = sb.json(&["runs", "show", run, "--json"]);
        let events = shown["events"].as_array().unwrap().clone();
        if done(&events) {
            return events;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{run} never reached: {what}");
}

fn last_kind(events: &[Value]) -> &str {
    events.last().and_then(|e| e["kind"].as_str()).unwrap_or("")
}

#[test]
fn a_conversation_is_a_chat_session_that_survives_the_server_and_appends_only() {
    let mut sb = Sandbox::init();
    let model = sb.transcript(CHAT);
    let web = web_with(&mut sb, None, &[]);
    let (cookie, csrf) = web.sign_in();
    let post = |web: &Web, cookie: &str, csrf: &str, path: &str, body: Value| {
        let r = web.send(
            "POST",
            path,
            &[("Cookie", cookie), ("X-Warrant-CSRF", csrf)],
            Some(&body.to_string()),
        );
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        r.json()
    };
    let started = post(
        &web,
        &cookie,
        &csrf,
        "/api/conversations",
        json!({"model": model, "text": "summarize the notes"}),
    );
    let run = started["run"].as_str().unwrap().to_owned();
    wait_for(&sb, &run, "the first answer", |e| {
        last_kind(e) == "awaiting_message"
    });
    post(
        &web,
        &cookie,
        &csrf,
        &format!("/api/runs/{run}/messages"),
        json!({"text": "now clean up build/"}),
    );
    wait_for(&sb, &run, "the delete's approval", |e| {
        e.iter().any(|e| e["kind"] == "approval_requested") && last_kind(e) == "run_parked"
    });
    let requests = sb.json(&["requests", "list", "--json"]);
    let request = requests["requests"][0]["id"].as_str().unwrap().to_owned();
    post(
        &web,
        &cookie,
        &csrf,
        &format!("/api/requests/{request}/approve"),
        json!({"scope": "once"}),
    );
    wait_for(&sb, &run, "the answer after the delete", |e| {
        e.iter()
            .any(|e| e["kind"] == "effect_completed" && e["payload"]["call_id"] != "call-0-0")
            && last_kind(e) == "awaiting_message"
    });
    assert!(!sb.exists("build"));

    // History is appended to, never edited or removed through the API.
    for method in ["PUT", "DELETE", "PATCH"] {
        let r = web.send(
            method,
            &format!("/api/runs/{run}/messages"),
            &[("Cookie", &cookie), ("X-Warrant-CSRF", &csrf)],
            Some("{}"),
        );
        assert_eq!(r.status, 405, "{method}");
    }

    // The server goes; the session waits in its log; a new launch continues it.
    drop(web);
    let web = web_with(&mut sb, None, &[]);
    let (cookie, csrf) = web.sign_in();
    post(
        &web,
        &cookie,
        &csrf,
        &format!("/api/runs/{run}/messages"),
        json!({"text": "thanks"}),
    );
    wait_for(&sb, &run, "the last answer", |e| {
        e.iter().filter(|e| e["kind"] == "model_responded").count() == 5
            && last_kind(e) == "awaiting_message"
    });
    let ended = post(
        &web,
        &cookie,
        &csrf,
        &format!("/api/runs/{run}/end"),
        json!({}),
    );
    assert_eq!(ended["ended"], json!(true));
    let events = wait_for(&sb, &run, "the end", |e| last_kind(e) == "run_ended");
    let said: Vec<&str> = events
        .iter()
        .filter(|e| e["kind"] == "message_received")
        .map(|e| e["payload"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        said,
        vec!["summarize the notes", "now clean up build/", "thanks"]
    );
    assert_eq!(
        sb.json(&["runs", "list", "--json"])["runs"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn a_secret_given_in_the_page_is_never_echoed_and_the_run_sees_only_its_handle() {
    let mut sb = Sandbox::init();
    let model = sb.transcript(
        "version: 1\nturns:\n  - calls:\n      - tool: request_secret\n        args: { name: API_KEY, purpose: tests, used_by: \"run_command pytest\" }\n  - say: ok\n",
    );
    let out = sb.run(&["run", "--model", &model, "needs a key"]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let request = super::harness::parked_request(&out);
    let (run, _) = sb.last_run();
    let web = web_with(&mut sb, None, &[]);
    let (cookie, csrf) = web.sign_in();
    let value = format!("sk-web-{}-never-echoed", std::process::id());
    let headers = [
        ("Cookie", cookie.as_str()),
        ("X-Warrant-CSRF", csrf.as_str()),
    ];
    let path = format!("/api/requests/{request}/provide");
    let empty = web.send("POST", &path, &headers, Some(r#"{"value":""}"#));
    assert_eq!((empty.status, empty.code()), (400, "W-WEBUI-023".into()));
    let body = json!({ "value": value }).to_string();
    let r = web.send("POST", &path, &headers, Some(&body));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json()["replied"],
        json!({"request": request, "run": run, "reply": "secret provided", "by": "tester"})
    );
    assert!(!r.body.contains(&value));
    let events = wait_for(&sb, &run, "the end", |e| last_kind(e) == "run_ended");
    let all = serde_json::to_string(&events).unwrap();
    assert!(!all.contains(&value), "the value is in the journal");
    let replied = events
        .iter()
        .find(|e| e["kind"] == "request_replied")
        .unwrap();
    assert_eq!(
        replied["payload"]["by"],
        json!({"tenant": "harbour", "actor": "tester", "via": "web"})
    );
    let audit = web.send("GET", "/api/audit", &[("Cookie", &cookie)], None);
    assert!(!audit.body.contains(&value));
}

#[test]
fn a_run_says_when_the_policy_it_was_pinned_to_changed() {
    let mut sb = Sandbox::init();
    let (run, _) = parked_command(&sb);
    let web = web_with(&mut sb, None, &[]);
    let (cookie, _) = web.sign_in();
    let pins = |web: &Web| {
        let r = web.send(
            "GET",
            &format!("/api/runs/{run}/pins"),
            &[("Cookie", &cookie)],
            None,
        );
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()
    };
    let before = pins(&web);
    assert_eq!(before["changed"], json!([]));
    assert_eq!(before["started"], before["now"]);
    sb.write(
        ".warrant/policies/extra.cedar",
        "@id(\"extra\")\n@reason(\"Reading is fine.\")\npermit (principal, action == Warrant::Action::\"fs.read\", resource);\n",
    );
    let after = pins(&web);
    assert_eq!(after["changed"], json!(["policy"]));
    assert_eq!(after["started"], before["started"]);
    assert_ne!(
        after["now"]["policy_digest"],
        before["now"]["policy_digest"]
    );
}

/// The page's one script parses (Node's own check): a syntax error anywhere in it leaves every
/// page blank, which the browser tests only show as a timeout.
#[test]
fn the_page_script_parses() {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../warrant-web/assets/app.js");
    let out = std::process::Command::new("node")
        .arg("--check")
        .arg(&script)
        .output()
        .expect("node runs (the browser tests need it too)");
    assert!(out.status.success(), "{}", stderr(&out));
}
