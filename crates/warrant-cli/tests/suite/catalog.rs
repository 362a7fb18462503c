//! The data catalog (issue 16 parts 4 and 5), from the binary, against a real Iceberg REST
//! catalog: `lakana-server` (PyPI) on a fresh PostgreSQL database and a temp warehouse, seeded
//! through PyIceberg, both installed into a cached virtual environment when missing. Listing and
//! describing go through the ring for a person (`warrant catalog`) and for an agent (the
//! tools); policy hides a namespace per principal (negative control: without the rule it is
//! read). Bad input: an unreachable catalog, a token refused then fetched again once (and a
//! clear error when the new one is refused too), a token endpoint that refuses the client,
//! names with separators and unicode, a malformed table metadata response.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use warrant_testkit::pg::TestDb;

use super::harness::{Sandbox, python_venv, stderr, stdout};

const PEERS: [&str; 2] = ["lakana-server==0.20.0", "pyiceberg[pyarrow]==0.12.0"];
const KEY_ID: &str = "abcd1234abcd1234";
const SECRET: &str = "s3cr3ts3cr3ts3cr3ts3cr3ts3cr3ts3cr3t";

fn pat() -> String {
    format!("lakana_pat_{KEY_ID}_{SECRET}")
}

/// The virtual environment with lakana-server and PyIceberg, made the first time; never skipped.
fn venv() -> PathBuf {
    static READY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    READY
        .get_or_init(|| {
            python_venv(
                "iceberg-py",
                "import lakana_server, pyiceberg.catalog.rest, pyarrow",
                &PEERS,
            )
        })
        .clone()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running lakana-server with its own database and warehouse, seeded; stopped on drop.
struct Lakana {
    child: Child,
    url: String,
    _db: TestDb,
    _warehouse: tempfile::TempDir,
}

impl Drop for Lakana {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Lakana {
    fn start() -> Self {
        let venv = venv();
        let db = TestDb::new();
        let pg = db.url.replacen("postgres://", "postgresql+pg8000://", 1);
        let port = free_port();
        let env = |c: &mut Command| {
            c.env("LAKANA_DATABASE__URL", &pg)
                .env("LAKANA_HOST", "127.0.0.1")
                .env("LAKANA_PORT", port.to_string())
                .env("LAKANA_BOOTSTRAP_PAT_KEY_ID", KEY_ID)
                .env("LAKANA_BOOTSTRAP_PAT_SECRET", SECRET)
                .env("LAKANA_LOG__LEVEL", "WARNING");
        };
        let mut migrate = Command::new(venv.join("bin/lakana-server"));
        migrate.arg("migrate");
        env(&mut migrate);
        let out = migrate.output().unwrap();
        assert!(
            out.status.success(),
            "lakana-server migrate: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut serve = Command::new(venv.join("bin/lakana-server"));
        env(&mut serve);
        let child = serve
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let url = format!("http://127.0.0.1:{port}");
        let warehouse = tempfile::tempdir().unwrap();
        let mut lakana = Lakana {
            child,
            url,
            _db: db,
            _warehouse: warehouse,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "lakana-server did not answer within 60 s"
            );
            if let Ok(Some(status)) = lakana.child.try_wait() {
                panic!("lakana-server exited: {status}");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let seeded = Command::new(venv.join("bin/python"))
            .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/peers/iceberg_seed.py"))
            .args([lakana.url.as_str(), &pat(), "dev"])
            .arg(lakana._warehouse.path())
            .output()
            .unwrap();
        assert!(
            seeded.status.success(),
            "seeding: {}",
            String::from_utf8_lossy(&seeded.stderr)
        );
        lakana
    }
}

/// A sandbox whose config names `lake` at `url` with `auth` (TOML lines).
fn sandbox(url: &str, auth: &str) -> Sandbox {
    let sb = Sandbox::init();
    let config = sb.ws.join(".warrant/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "\n[catalog.lake]\nurl = \"{url}\"\nprefix = \"dev\"\n{auth}\n"
    ));
    std::fs::write(&config, text).unwrap();
    sb
}

fn with_token(lakana: &Lakana) -> Sandbox {
    let mut sb = sandbox(&lakana.url, "token = \"env:LAKE_TOKEN\"");
    sb.extra_env.push(("LAKE_TOKEN".into(), pat()));
    sb
}

/// What the last run recorded: the actions proposed, then the kinds of the events after them.
fn recorded(sb: &Sandbox) -> (Vec<Value>, Vec<String>) {
    let (_, events) = sb.last_run();
    let actions = events
        .iter()
        .filter(|e| e["kind"] == "action_proposed")
        .flat_map(|e| {
            e["payload"]["actions"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    let kinds = events
        .iter()
        .map(|e| e["kind"].as_str().unwrap_or_default().to_owned())
        .skip_while(|k| k != "action_proposed")
        .collect();
    (actions, kinds)
}

#[test]
fn a_person_lists_and_describes_a_real_iceberg_rest_catalog_through_the_ring() {
    let lakana = Lakana::start();
    let sb = with_token(&lakana);

    let top = sb.json(&["catalog", "list", "--json"]);
    assert_eq!(
        top["result"],
        json!({"listed": [{"path": "lake", "namespaces": ["lake.bronze", "lake.gold", "lake.silver"]}]})
    );
    let bronze = sb.json(&["catalog", "list", "lake.bronze", "--json"]);
    assert_eq!(
        bronze["result"],
        json!({"listed": [{
            "path": "lake.bronze",
            "namespaces": ["lake.bronze.sales", "lake.bronze.ventes été"],
            "tables": []
        }]})
    );
    let unicode = sb.json(&["catalog", "list", "lake.bronze.ventes été", "--json"]);
    assert_eq!(
        unicode["result"]["listed"][0]["tables"],
        json!(["lake.bronze.ventes été.注文"])
    );

    let described = sb.json(&["catalog", "describe", "lake.bronze.sales.orders", "--json"]);
    let mut table = described["result"]["tables"][0].clone();
    let snapshot = table["current_snapshot"].take();
    for volatile in ["uuid", "location", "metadata_location", "last_updated_ms"] {
        assert!(!table[volatile].is_null(), "{volatile}: {table}");
        table[volatile] = json!("…");
    }
    assert_eq!(
        table,
        json!({
            "table": "lake.bronze.sales.orders", "format_version": 2, "uuid": "…",
            "location": "…", "metadata_location": "…", "last_updated_ms": "…",
            "schema": {"schema_id": 0, "columns": [
                {"id": 1, "name": "id", "type": "long", "required": true},
                {"id": 2, "name": "city", "type": "string", "required": false, "doc": "where it was ordered"}
            ]},
            "partition_spec": {"spec_id": 0, "fields": [{"name": "city", "source": "city", "transform": "identity"}]},
            "properties": table["properties"].clone(),
            "current_snapshot": null
        })
    );
    assert_eq!(table["properties"]["owner"], "sales-team", "{table}");
    assert_eq!(snapshot["summary"]["operation"], "append", "{snapshot}");
    assert_eq!(snapshot["summary"]["total-records"], "2", "{snapshot}");

    // Each read was a run of its own, through the ring: the action it recorded.
    let (actions, kinds) = recorded(&sb);
    assert_eq!(
        actions,
        vec![
            json!({"verb": "catalog.read", "catalog": "lake", "namespace": ["bronze", "sales"], "table": "orders"})
        ]
    );
    assert_eq!(
        kinds,
        [
            "action_proposed",
            "policy_decided",
            "effect_started",
            "effect_completed",
            "run_ended"
        ]
    );
    let human = sb.run(&["catalog", "describe", "lake.bronze.sales.orders"]);
    assert_eq!(human.status.code(), Some(0), "{}", stderr(&human));
    let text = stdout(&human);
    assert!(
        text.contains("partitioned  city = identity(city)"),
        "{text}"
    );
    assert!(text.contains("    2  city  string"), "{text}");
}

#[test]
fn an_agent_reads_the_catalog_and_policy_hides_a_namespace_per_principal() {
    let lakana = Lakana::start();
    let sb = with_token(&lakana);
    let transcript = sb.transcript(concat!(
        "version: 1\nturns:\n  - calls:\n",
        "      - tool: catalog_list\n        args: { path: lake.bronze.sales }\n",
        "      - tool: catalog_describe\n        args: { table: lake.bronze.sales.orders }\n",
        "  - say: done\n",
    ));
    let out = sb.run(&["run", "--model", &transcript, "look at the orders"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (_, events) = sb.last_run();
    let completed: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "effect_completed")
        .collect();
    assert_eq!(completed.len(), 2, "{events:?}");
    assert_eq!(
        completed[0]["payload"]["result"]["listed"][0]["tables"],
        json!(["lake.bronze.sales.orders"]),
        "{completed:?}"
    );
    assert_eq!(
        completed[1]["payload"]["result"]["tables"][0]["schema"]["columns"][1]["name"], "city",
        "{completed:?}"
    );

    // Hidden from everyone but the sales role: the agent's call is denied and recorded, and so
    // is the person's.
    sb.write(
        ".warrant/policies/catalog.cedar",
        "@id(\"sales-only\")\n@reason(\"Sales data is for sales.\")\nforbid (principal, action, resource is Warrant::CatalogObject)\nwhen { resource.name like \"catalog/lake/bronze/sales/*\" || resource.name == \"catalog/lake/bronze/sales\" }\nunless { principal in Warrant::Role::\"sales\" };\n",
    );
    let out = sb.run(&["run", "--model", &transcript, "look at the orders"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (_, events) = sb.last_run();
    let denied: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "effect_denied")
        .collect();
    assert_eq!(denied.len(), 2, "{events:?}");
    assert!(
        denied[1]["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("sales-only"),
        "{denied:?}"
    );
    let person = sb.run(&["catalog", "describe", "lake.bronze.sales.orders"]);
    assert_eq!(person.status.code(), Some(2), "{}", stderr(&person));
    assert!(
        stderr(&person).contains("W-POLICY-014"),
        "{}",
        stderr(&person)
    );
    // The rest of the catalog stays readable.
    let top = sb.json(&["catalog", "list", "lake.bronze", "--json"]);
    assert_eq!(top["result"]["listed"][0]["path"], "lake.bronze");
    // The same principal with the role reads it.
    let mut sales = sb.cmd(&["catalog", "describe", "lake.bronze.sales.orders", "--json"]);
    sales.env("WARRANT_ROLES", "sales");
    let out = sales.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// Each request a token endpoint received: its body and headers.
type Seen = Arc<Mutex<Vec<(String, Vec<(String, String)>)>>>;

/// A token endpoint on this machine: answers each grant with the next of `tokens` (the last
/// one again when they run out), or with `refuse` when set; records every request.
struct TokenServer {
    url: String,
    seen: Seen,
}

impl TokenServer {
    fn start(tokens: Vec<String>, refuse: bool) -> Self {
        let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
        let url = format!(
            "http://{}/oauth/token",
            server.server_addr().to_ip().unwrap()
        );
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        std::thread::spawn(move || {
            for (i, mut request) in server.incoming_requests().enumerate() {
                let mut body = String::new();
                std::io::Read::read_to_string(request.as_reader(), &mut body).unwrap();
                let headers = request
                    .headers()
                    .iter()
                    .map(|h| (h.field.to_string().to_lowercase(), h.value.to_string()))
                    .collect();
                log.lock().unwrap().push((body, headers));
                let (status, answer) = if refuse {
                    (
                        401,
                        json!({"error": "invalid_client", "error_description": "unknown client"}),
                    )
                } else {
                    let token = tokens.get(i).or(tokens.last()).unwrap();
                    (
                        200,
                        json!({"access_token": token, "token_type": "bearer", "expires_in": 3600}),
                    )
                };
                let response = tiny_http::Response::from_string(answer.to_string())
                    .with_status_code(status)
                    .with_header(
                        "Content-Type: application/json"
                            .parse::<tiny_http::Header>()
                            .unwrap(),
                    );
                let _ = request.respond(response);
            }
        });
        TokenServer { url, seen }
    }

    fn grants(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
}

fn oauth_sandbox(lakana: &Lakana, tokens: &TokenServer) -> Sandbox {
    let mut sb = sandbox(
        &lakana.url,
        &format!(
            "token_url = \"{}\"\nrealm = \"harbour\"\nclient_id = \"env:LAKE_ID\"\nclient_secret = \"env:LAKE_SECRET\"",
            tokens.url
        ),
    );
    sb.extra_env
        .push(("LAKE_ID".into(), "warrant-agent".into()));
    sb.extra_env
        .push(("LAKE_SECRET".into(), "client-secret-value-xyz".into()));
    sb
}

#[test]
fn an_expired_token_is_fetched_again_once_and_then_a_clear_error_is_given() {
    let lakana = Lakana::start();
    // The first token is one the catalog refuses (expired); the second is good.
    let tokens = TokenServer::start(vec!["lakana_pat_expired0expired0_x".into(), pat()], false);
    let sb = oauth_sandbox(&lakana, &tokens);
    let listed = sb.json(&["catalog", "list", "lake.bronze", "--json"]);
    assert_eq!(listed["result"]["listed"][0]["path"], "lake.bronze");
    assert_eq!(tokens.grants(), 2);
    let (body, headers) = tokens.seen.lock().unwrap()[0].clone();
    assert_eq!(
        body,
        "grant_type=client_credentials&client_id=warrant-agent&client_secret=client-secret-value-xyz&scope=PRINCIPAL_ROLE%3AALL"
    );
    assert!(
        headers.contains(&("polaris-realm".into(), "harbour".into())),
        "{headers:?}"
    );

    // Every token refused: fetched again once, then a clear error (not a loop).
    let bad = TokenServer::start(vec!["lakana_pat_expired0expired0_x".into()], false);
    let sb = oauth_sandbox(&lakana, &bad);
    let out = sb.run(&["catalog", "list", "lake.bronze"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(bad.grants(), 2);
    let err = stderr(&out);
    assert!(err.contains("W-CATALOG-004"), "{err}");
    assert!(
        err.contains(
            "catalog `lake` refused the credentials (401) even with a token fetched again just now"
        ),
        "{err}"
    );

    // The token endpoint refuses the client: named, with the endpoint's reason, never the secret.
    let refusing = TokenServer::start(Vec::new(), true);
    let sb = oauth_sandbox(&lakana, &refusing);
    let out = sb.run(&["catalog", "describe", "lake.bronze.sales.orders"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("W-CATALOG-003"), "{err}");
    assert!(
        err.contains("refused the client credentials: invalid_client: unknown client (HTTP 401)"),
        "{err}"
    );
    assert!(!err.contains("client-secret-value-xyz"), "{err}");
    let (_, events) = sb.last_run();
    assert!(
        !serde_json::to_string(&events)
            .unwrap()
            .contains("client-secret-value-xyz")
    );
}

/// A server that answers every request with `body` (200): a catalog whose table metadata is
/// malformed, which no real catalog would serve on purpose.
fn fixed_server(body: Value) -> String {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let url = format!("http://{}", server.server_addr().to_ip().unwrap());
    std::thread::spawn(move || {
        for request in server.incoming_requests() {
            let answer = if request.url().starts_with("/v1/config") {
                json!({"defaults": {}, "overrides": {}})
            } else {
                body.clone()
            };
            let _ = request.respond(tiny_http::Response::from_string(answer.to_string()));
        }
    });
    url
}

#[test]
fn bad_catalog_input_ends_in_clear_refusals() {
    // Unreachable: nothing listens on the port.
    let port = free_port();
    let sb = sandbox(&format!("http://127.0.0.1:{port}"), "");
    let out = sb.run(&["catalog", "list", "lake"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("W-CATALOG-002"), "{err}");
    assert!(
        err.contains(&format!(
            "catalog `lake` at http://127.0.0.1:{port} cannot be reached"
        )),
        "{err}"
    );

    // Names: the protocol's level separator inside a name, an empty level, an unknown catalog;
    // refused before anything is sent.
    for (path, code, says) in [
        (
            "lake.bronze.a\u{1f}b",
            "W-CATALOG-009",
            "level 3 holds the control character U+001F",
        ),
        ("lake..sales", "W-CATALOG-009", "level 2 is empty"),
        (
            "sea.bronze",
            "W-CATALOG-010",
            "no catalog `sea` is configured; configured: lake",
        ),
    ] {
        let out = sb.run(&["catalog", "list", path]);
        assert_eq!(out.status.code(), Some(2), "{path}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(code) && err.contains(says), "{path}: {err}");
    }
    let out = sb.run(&["catalog", "describe", "lake.orders"]);
    assert!(
        stderr(&out).contains("names no table: write catalog.namespace.table"),
        "{}",
        stderr(&out)
    );

    // Malformed table metadata: its current schema names nothing.
    let url = fixed_server(json!({"metadata-location": "x", "metadata": {
        "format-version": 2, "location": "file:///t", "current-schema-id": 3,
        "schemas": [{"schema-id": 0, "fields": []}]
    }}));
    let sb = sandbox(&url, "");
    let out = sb.run(&["catalog", "describe", "lake.s.t"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("W-CATALOG-007"), "{err}");
    assert!(err.contains("catalog `lake` answered table lake.s.t with a malformed response: current-schema-id 3 names no schema"), "{err}");

    // A credential written into the configuration is refused at open.
    let sb = sandbox("http://127.0.0.1:1", "token = \"lakana_pat_plain\"");
    let out = sb.run(&["catalog", "list"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("token must be a secret reference"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn published_shared_memory_lands_in_an_iceberg_table_that_pyiceberg_reads_with_provenance() {
    let lakana = Lakana::start();
    let sb = with_token(&lakana);
    let config = sb.ws.join(".warrant/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[memory.shared]\nbackend = \"iceberg\"\ncatalog = \"lake\"\ntable = \"bronze.memory.shared\"\n");
    std::fs::write(&config, text).unwrap();

    let transcript = sb.transcript(concat!(
        "version: 1\nturns:\n  - calls:\n",
        "      - tool: propose_memory\n        args: { namespace: team, text: \"Releases are cut on Tuesdays.\", tags: [release] }\n",
        "      - tool: propose_memory\n        args: { namespace: team, text: \"Le gel commence le vendredi.\" }\n",
        "  - say: done\n",
    ));
    let out = sb.run(&["run", "--model", &transcript, "propose"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let proposing_run = sb.last_run().0;
    let drafts = sb.json(&["memory", "drafts", "list", "--json"]);
    let mut published = Vec::new();
    for d in drafts.as_array().unwrap() {
        let (id, digest) = (d["id"].as_str().unwrap(), d["digest"].as_str().unwrap());
        let mut c = sb.cmd(&[
            "memory", "drafts", "publish", id, "--digest", digest, "--reason", "checked", "--json",
        ]);
        c.env("WARRANT_ACTOR", "rita");
        let out = c.output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
        let reviewed = shown["result"]["reviewed"][0].clone();
        assert_eq!(
            reviewed["shared"]["table"], "lake.bronze.memory.shared",
            "{reviewed}"
        );
        assert_eq!(reviewed["shared"]["appended_before"], false, "{reviewed}");
        published.push((
            id.to_owned(),
            digest.to_owned(),
            reviewed["published"].as_str().unwrap().to_owned(),
            reviewed["shared"]["snapshot_id"].as_i64().unwrap(),
            shown["run"].as_str().unwrap().to_owned(),
        ));
    }
    assert_eq!(published.len(), 2);

    // The snapshot id is in the publish's audit record.
    let flushed = sb.run(&["audit", "flush"]);
    assert_eq!(flushed.status.code(), Some(0), "{}", stderr(&flushed));
    let audit = std::fs::read_to_string(sb.ws.join(".warrant/audit/audit.jsonl")).unwrap();
    for (_, _, _, snapshot, _) in &published {
        let note = format!("iceberg lake.bronze.memory.shared snapshot {snapshot}");
        assert!(
            audit
                .lines()
                .any(|l| l.contains("effect_completed") && l.contains(&note)),
            "no audit record names {note}: {}",
            audit
                .lines()
                .filter(|l| l.contains("effect"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }

    // PyIceberg reads what Warrant wrote: one snapshot per entry, every row with its provenance.
    let read = Command::new(venv().join("bin/python"))
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/peers/iceberg_read.py"))
        .args([lakana.url.as_str(), &pat(), "dev", "bronze.memory.shared"])
        .output()
        .unwrap();
    assert!(
        read.status.success(),
        "{}",
        String::from_utf8_lossy(&read.stderr)
    );
    let table: Value = serde_json::from_slice(&read.stdout).unwrap();
    let snapshots: Vec<(i64, String)> = table["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["id"].as_i64().unwrap(),
                s["entry"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let mut expected_snapshots: Vec<(i64, String)> = published
        .iter()
        .map(|(_, _, entry, snapshot, _)| (*snapshot, entry.clone()))
        .collect();
    expected_snapshots.sort_by_key(|(s, _)| *s);
    let mut got = snapshots;
    got.sort_by_key(|(s, _)| *s);
    assert_eq!(got, expected_snapshots);
    let rows = table["rows"].as_array().unwrap();
    let mut expected: Vec<Value> = published
        .iter()
        .map(|(draft, digest, entry, _, run)| {
            let d = drafts
                .as_array()
                .unwrap()
                .iter()
                .find(|d| d["id"] == draft.as_str())
                .unwrap();
            let text = d["text"].as_str().unwrap();
            json!({
                "entry_id": entry, "namespace": "team", "text": text,
                "tags": serde_json::to_string(&d["tags"]).unwrap(),
                "author": "tester", "on_behalf_of": null, "run": proposing_run,
                "publisher": "rita", "publish_run": run, "reason": "checked",
                "content_digest": warrant_core::Digest::of_bytes(text.as_bytes()).to_string(),
                "draft": draft, "draft_digest": digest,
            })
        })
        .collect();
    expected.sort_by(|a, b| a["entry_id"].as_str().cmp(&b["entry_id"].as_str()));
    let without_time: Vec<Value> = rows
        .iter()
        .map(|r| {
            let mut r = r.clone();
            assert!(
                r["published_at"].as_str().unwrap().ends_with("+00:00"),
                "{r}"
            );
            r.as_object_mut().unwrap().remove("published_at");
            r
        })
        .collect();
    assert_eq!(without_time, expected);

    // Publishing again (a retry, or a replay) appends nothing new.
    let (id, digest, _, snapshot, _) = &published[0];
    let mut again = sb.cmd(&[
        "memory", "drafts", "publish", id, "--digest", digest, "--json",
    ]);
    again.env("WARRANT_ACTOR", "rita");
    let out = again.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        shown["result"]["reviewed"][0]["shared"]["snapshot_id"],
        json!(snapshot)
    );
    assert_eq!(
        shown["result"]["reviewed"][0]["shared"]["appended_before"],
        true
    );
}
