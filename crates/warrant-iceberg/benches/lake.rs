//! Issue 16's remaining benchmarks, against a real Iceberg REST catalog (`lakana-server` from
//! PyPI on a fresh PostgreSQL database and a temporary warehouse, as the catalog tests use):
//!
//! - **publish into Iceberg**: [`IcebergSink::append`] (what a reviewed publish does: read the
//!   catalog's configuration, load the table, look for a snapshot of the same entry, write one
//!   Parquet file, commit a fast append naming the entry) against the least an append can do
//!   with the same `iceberg` crate: one catalog kept for the whole run, load the table, write the
//!   same row, commit. Two tables of the same schema, appended in turn, so both grow alike.
//! - **catalog listing**: [`CatalogClient::list`] of a namespace (its child namespaces and its
//!   tables: two GETs, parsed and filtered) against the same two GETs made with a plain `ureq`
//!   agent and parsed into `serde_json::Value`.
//!
//! Both sides interleaved in one process; p50/p99 and their ratio. The ring's own cost around
//! either (policy, journal, audit) is the governed-call figure of warrant-agent's benches.
//!
//! `cargo bench -p warrant-iceberg --bench lake` (`LAKE_PUBLISHES`, default 100; `LAKE_LISTS`,
//! default 500). The virtual environment is the catalog tests' (`~/.cache/warrant-test-peers/
//! iceberg-py`), made here when missing.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{ArrayRef, RecordBatch, StringArray, TimestampMicrosecondArray};
use iceberg::spec::DataFileFormat;
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::writer::base_writer::data_file_writer::DataFileWriterBuilder;
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::file_writer::location_generator::{
    DefaultFileNameGenerator, DefaultLocationGenerator,
};
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::{IcebergWriter, IcebergWriterBuilder};
use iceberg::{Catalog, CatalogBuilder, NamespaceIdent, TableIdent};
use iceberg_catalog_rest::RestCatalogBuilder;
use parquet::file::properties::WriterProperties;
use warrant_catalog::{CatalogClient, Credentials};
use warrant_core::config::CatalogConfig;
use warrant_iceberg::IcebergSink;
use warrant_memory::{Published, SharedSink};
use warrant_testkit::pg::TestDb;

const PEERS: [&str; 2] = ["lakana-server==0.20.0", "pyiceberg[pyarrow]==0.12.0"];
const KEY_ID: &str = "abcd1234abcd1234";
const SECRET: &str = "s3cr3ts3cr3ts3cr3ts3cr3ts3cr3ts3cr3t";
const ENVIRONMENT: &str = "dev";

fn token() -> String {
    format!("lakana_pat_{KEY_ID}_{SECRET}")
}

fn pct(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn rounds(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The catalog tests' virtual environment, made and filled when missing.
fn venv() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    let venv = base.join("warrant-test-peers/iceberg-py");
    let python = venv.join("bin/python");
    let ready = || {
        Command::new(&python)
            .args(["-c", "import lakana_server, pyiceberg.catalog.rest"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !ready() {
        eprintln!("installing {PEERS:?} into {}", venv.display());
        let made = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .unwrap();
        assert!(made.success(), "python3 -m venv failed");
        let pip = Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(PEERS)
            .status()
            .unwrap();
        assert!(pip.success() && ready(), "could not install {PEERS:?}");
    }
    venv
}

/// A running lakana-server with an environment on a temporary warehouse; stopped on drop.
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
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
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
        assert!(migrate.status().unwrap().success(), "lakana-server migrate");
        let mut serve = Command::new(venv.join("bin/lakana-server"));
        env(&mut serve);
        let child = serve
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lakana = Lakana {
            child,
            url: format!("http://127.0.0.1:{port}"),
            _db: db,
            _warehouse: tempfile::tempdir().unwrap(),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "lakana-server did not start");
            std::thread::sleep(Duration::from_millis(200));
        }
        let body = serde_json::json!({
            "name": ENVIRONMENT,
            "storage": { "scheme": "file", "root": format!("file://{}", lakana._warehouse.path().display()) },
        });
        let made = ureq::post(format!("{}/api/v1/environments", lakana.url))
            .header("Authorization", format!("Bearer {}", token()))
            .send_json(&body)
            .unwrap();
        assert!(made.status().is_success(), "creating the environment");
        lakana
    }

    fn properties(&self) -> HashMap<String, String> {
        HashMap::from([
            ("uri".to_owned(), self.url.clone()),
            ("prefix".to_owned(), ENVIRONMENT.to_owned()),
            ("token".to_owned(), token()),
        ])
    }
}

fn entry(i: usize) -> Published {
    let text = format!("Entry {i}: releases are cut on Tuesdays; the freeze starts on Fridays.");
    Published {
        entry_id: format!("mem-{i:06}"),
        namespace: "team".into(),
        text,
        tags: vec!["ops".into()],
        author: "agent".into(),
        on_behalf_of: Some("rita".into()),
        run: Some("run-bench".into()),
        publisher: "rita".into(),
        publish_run: Some("run-publish".into()),
        published_at: "2026-12-06T08:00:00Z".into(),
        reason: "checked".into(),
        content_digest: format!("sha256:{i:064x}"),
        draft: format!("draft-{i}"),
        draft_digest: format!("sha256:{:064x}", i + 1),
    }
}

/// The same row the sink writes, built against the table's schema.
fn row(table: &iceberg::table::Table, e: &Published) -> RecordBatch {
    let arrow = Arc::new(
        iceberg::arrow::schema_to_arrow_schema(table.metadata().current_schema()).unwrap(),
    );
    let text = |v: &str| Arc::new(StringArray::from(vec![v])) as ArrayRef;
    let maybe = |v: &Option<String>| Arc::new(StringArray::from(vec![v.clone()])) as ArrayRef;
    let at = 1_796_544_000_000_000_i64;
    RecordBatch::try_new(
        arrow,
        vec![
            text(&e.entry_id),
            text(&e.namespace),
            text(&e.text),
            text("[\"ops\"]"),
            text(&e.author),
            maybe(&e.on_behalf_of),
            maybe(&e.run),
            text(&e.publisher),
            maybe(&e.publish_run),
            Arc::new(TimestampMicrosecondArray::from(vec![at]).with_timezone("+00:00")) as ArrayRef,
            text(&e.reason),
            text(&e.content_digest),
            text(&e.draft),
            text(&e.draft_digest),
        ],
    )
    .unwrap()
}

/// The least an append does: load the table, write one Parquet file, commit a fast append.
async fn raw_append(catalog: &impl Catalog, ident: &TableIdent, e: &Published) {
    let table = catalog.load_table(ident).await.unwrap();
    let metadata = table.metadata();
    let parquet = ParquetWriterBuilder::new(
        WriterProperties::builder().build(),
        metadata.current_schema().clone(),
    );
    let rolling = RollingFileWriterBuilder::new_with_default_file_size(
        parquet,
        table.file_io().clone(),
        DefaultLocationGenerator::new(metadata).unwrap(),
        DefaultFileNameGenerator::new(
            "raw".to_owned(),
            Some(e.entry_id.clone()),
            DataFileFormat::Parquet,
        ),
    );
    let mut writer = DataFileWriterBuilder::new(rolling)
        .build(None)
        .await
        .unwrap();
    writer.write(row(&table, e)).await.unwrap();
    let files = writer.close().await.unwrap();
    let tx = Transaction::new(&table);
    let tx = tx.fast_append().add_data_files(files).apply(tx).unwrap();
    tx.commit(catalog).await.unwrap();
}

#[derive(Debug)]
struct Token;

impl Credentials for Token {
    fn resolve(&self, _reference: &str) -> Result<String, String> {
        Ok(token())
    }
}

fn report(what: &str, ours: Vec<f64>, base: Vec<f64>, ours_name: &str, base_name: &str) {
    let (o50, o99, b50, b99) = (
        pct(ours.clone(), 0.5),
        pct(ours, 0.99),
        pct(base.clone(), 0.5),
        pct(base, 0.99),
    );
    println!("{what}");
    println!("  {ours_name}: p50 {o50:.2} ms, p99 {o99:.2} ms");
    println!("  {base_name}: p50 {b50:.2} ms, p99 {b99:.2} ms");
    println!(
        "  ratio: p50 {:.2}x, p99 {:.2}x",
        o50 / b50.max(f64::EPSILON),
        o99 / b99.max(f64::EPSILON)
    );
}

fn main() {
    let publishes = rounds("LAKE_PUBLISHES", 100);
    let lists = rounds("LAKE_LISTS", 500);
    let lakana = Lakana::start();
    let properties = lakana.properties();
    let sink = |table: &str| IcebergSink {
        catalog: "lake".into(),
        namespace: vec!["bronze".into(), "bench".into()],
        table: table.into(),
        properties: {
            let p = properties.clone();
            Arc::new(move || Ok(p.clone()))
        },
    };
    let ours = sink("shared");
    // The baseline's table: created (with the sink's schema) by one untimed append.
    sink("raw").append(&entry(usize::MAX / 2)).unwrap();
    // The first append of ours creates its table: untimed too.
    ours.append(&entry(usize::MAX / 2 - 1)).unwrap();

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // `load` reads the runtime when called, so it is made inside it.
    let catalog = runtime
        .block_on(async {
            RestCatalogBuilder::default()
                .with_storage_factory(Arc::new(iceberg::io::LocalFsStorageFactory))
                .load("lake", properties.clone())
                .await
        })
        .unwrap();
    let raw_ident = TableIdent::new(
        NamespaceIdent::from_vec(vec!["bronze".into(), "bench".into()]).unwrap(),
        "raw".into(),
    );

    let (mut ours_ms, mut raw_ms) = (Vec::new(), Vec::new());
    for i in 0..publishes {
        let e = entry(i);
        let t = Instant::now();
        let landed = ours.append(&e).unwrap();
        ours_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(landed["appended_before"], false, "{landed}");
        let t = Instant::now();
        runtime.block_on(raw_append(&catalog, &raw_ident, &e));
        raw_ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    report(
        &format!(
            "publish into Iceberg, {publishes} appends each (tables grow from 1 to {} snapshots)",
            publishes + 1
        ),
        ours_ms,
        raw_ms,
        "IcebergSink::append",
        "iceberg fast append, catalog kept",
    );

    let config: CatalogConfig = serde_json::from_value(serde_json::json!({
        "url": lakana.url,
        "prefix": ENVIRONMENT,
        "token": "env:LAKE_TOKEN",
    }))
    .unwrap();
    let client = CatalogClient::new("lake", &config, Arc::new(Token)).unwrap();
    let namespace = vec!["bronze".to_owned()];
    let shown = client.list(&namespace).unwrap();
    assert_eq!(
        shown.namespaces,
        vec![vec!["bronze".to_owned(), "bench".to_owned()]]
    );
    let shown = client
        .list(&["bronze".to_owned(), "bench".to_owned()])
        .unwrap();
    assert_eq!(shown.tables.len(), 2, "{shown:?}");
    let agent = ureq::Agent::new_with_defaults();
    let auth = format!("Bearer {}", token());
    let raw_list = || {
        let base = format!("{}/v1/{ENVIRONMENT}", lakana.url);
        let namespaces: serde_json::Value = agent
            .get(format!("{base}/namespaces?parent=bronze"))
            .header("Authorization", &auth)
            .call()
            .unwrap()
            .body_mut()
            .read_json()
            .unwrap();
        let tables: serde_json::Value = agent
            .get(format!("{base}/namespaces/bronze/tables"))
            .header("Authorization", &auth)
            .call()
            .unwrap()
            .body_mut()
            .read_json()
            .unwrap();
        (namespaces, tables)
    };
    let (n, _) = raw_list();
    assert_eq!(
        n["namespaces"][0],
        serde_json::json!(["bronze", "bench"]),
        "{n}"
    );
    let (mut ours_ms, mut raw_ms) = (Vec::new(), Vec::new());
    for _ in 0..lists {
        let t = Instant::now();
        let listing = client.list(&namespace).unwrap();
        ours_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(listing.namespaces.len(), 1);
        let t = Instant::now();
        let (n, _) = raw_list();
        raw_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(n["namespaces"].as_array().map(Vec::len), Some(1));
    }
    report(
        &format!("catalog listing of one namespace (namespaces + tables), {lists} each"),
        ours_ms,
        raw_ms,
        "CatalogClient::list",
        "two GETs with ureq",
    );
}
