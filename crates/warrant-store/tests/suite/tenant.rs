//! Two tenants in one store, on SQLite and on PostgreSQL: each sees only its own runs, events,
//! requests and audit records, a record of the other reads exactly as a missing one, and the
//! attempt is kept. On PostgreSQL, row-level security is shown to stop on its own a statement
//! that forgot its tenant filter, with the layer switched off as the control.

use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::json;
use warrant_core::{Clock, RequestId, RunId};
use warrant_store::{
    Append, AuditQuery, EventStore, NewRun, PostgresStore, RequestStatus, RequestUpdate, RunStatus,
    Scoped, Target, Tenant,
};
use warrant_testkit::pg::TestDb;

use super::conformance::{Backend, PgBackend, SqliteBackend, ToySealer, clock, draft, tenant};

/// Creates `run` for `tenant` with one open request `req`, and a queued run `queued`.
fn seed(store: &dyn EventStore, tenant_name: &str, run: &str, req: &str, queued: &str) {
    let run = RunId::parse(run).unwrap();
    store
        .create_run(
            &NewRun {
                run: run.clone(),
                tenant: tenant(tenant_name),
                actor: format!("{tenant_name}-person"),
                task: "t".into(),
                status: RunStatus::Running,
            },
            vec![draft("run_started")],
            &ToySealer,
        )
        .unwrap();
    store
        .append(
            Append {
                run,
                expected_seq: 2,
                events: vec![draft("approval_requested")],
                status: Some(RunStatus::Parked),
                requests: vec![RequestUpdate::Open {
                    id: RequestId::parse(req).unwrap(),
                    summary: json!({"what": tenant_name}),
                }],
                fence: None,
            },
            &ToySealer,
        )
        .unwrap();
    store
        .create_run(
            &NewRun {
                run: RunId::parse(queued).unwrap(),
                tenant: tenant(tenant_name),
                actor: format!("{tenant_name}-person"),
                task: "later".into(),
                status: RunStatus::Queued,
            },
            vec![draft("run_started")],
            &ToySealer,
        )
        .unwrap();
}

/// What one tenant can see of the store: ids only, so two views compare whole.
#[derive(Debug, PartialEq)]
struct Seen {
    runs: Vec<String>,
    requests: Vec<String>,
    audit_runs: Vec<String>,
    other_run: Option<String>,
    other_events: usize,
    other_request: Option<String>,
}

fn seen(scoped: &Scoped<'_>, other_run: &str, other_req: &str) -> Seen {
    let audit_runs = scoped
        .audit(&AuditQuery::default())
        .unwrap()
        .iter()
        .map(|r| {
            let line: serde_json::Value = serde_json::from_str(&r.line).unwrap();
            line["run"].as_str().unwrap().to_owned()
        })
        .collect();
    Seen {
        runs: scoped
            .runs()
            .unwrap()
            .into_iter()
            .map(|r| r.run.to_string())
            .collect(),
        requests: scoped
            .requests(Some(RequestStatus::Open))
            .unwrap()
            .into_iter()
            .map(|r| r.id.to_string())
            .collect(),
        audit_runs,
        other_run: scoped
            .run(&RunId::parse(other_run).unwrap())
            .unwrap()
            .map(|r| r.run.to_string()),
        other_events: scoped
            .events(&RunId::parse(other_run).unwrap())
            .unwrap()
            .len(),
        other_request: scoped
            .request(&RequestId::parse(other_req).unwrap())
            .unwrap()
            .map(|r| r.id.to_string()),
    }
}

fn two_tenants(backend: &dyn Backend) {
    let store = backend.open(clock());
    seed(&*store, "acme", "run-a1", "req-a1", "run-a2");
    seed(&*store, "globex", "run-b1", "req-b1", "run-b2");
    let acme = tenant("acme");
    let globex = tenant("globex");
    let as_acme = Scoped::new(&*store, &acme);
    let as_globex = Scoped::new(&*store, &globex);

    assert_eq!(
        seen(&as_acme, "run-b1", "req-b1"),
        Seen {
            runs: vec!["run-a1".into(), "run-a2".into()],
            requests: vec!["req-a1".into()],
            audit_runs: vec!["run-a1".into(), "run-a1".into(), "run-a2".into()],
            other_run: None,
            other_events: 0,
            other_request: None,
        }
    );
    assert_eq!(
        seen(&as_globex, "run-a1", "req-a1"),
        Seen {
            runs: vec!["run-b1".into(), "run-b2".into()],
            requests: vec!["req-b1".into()],
            audit_runs: vec!["run-b1".into(), "run-b1".into(), "run-b2".into()],
            other_run: None,
            other_events: 0,
            other_request: None,
        }
    );
    // The tenant's own records are there by the same calls (the misses above are not a
    // broken query).
    assert_eq!(
        as_acme
            .run(&RunId::parse("run-a1").unwrap())
            .unwrap()
            .map(|r| r.actor),
        Some("acme-person".to_owned())
    );

    // A worker of one tenant never takes the other's queued run.
    let lease = as_globex
        .lease_next("globex-worker", Duration::from_secs(30))
        .unwrap()
        .unwrap();
    assert_eq!(lease.run.as_str(), "run-b2");
    assert_eq!(
        as_globex
            .lease_next("globex-worker", Duration::from_secs(30))
            .unwrap(),
        None
    );

    // Attempts on the other tenant's records are kept, both sides see them; a miss of a
    // record that exists nowhere is not (and the caller cannot tell which happened).
    assert!(
        as_acme
            .refuse(
                "acme-person",
                "approve",
                &Target::Request(RequestId::parse("req-b1").unwrap())
            )
            .unwrap()
    );
    assert!(
        !as_acme
            .refuse(
                "acme-person",
                "runs show",
                &Target::Run(RunId::parse("run-ff").unwrap())
            )
            .unwrap()
    );
    assert!(
        !as_acme
            .refuse(
                "acme-person",
                "runs show",
                &Target::Run(RunId::parse("run-a1").unwrap())
            )
            .unwrap()
    );
    let refusals = as_globex.refusals().unwrap();
    assert_eq!(
        refusals
            .iter()
            .map(|r| (
                r.tenant.as_str(),
                r.actor.as_str(),
                r.operation.as_str(),
                r.target.as_str(),
                r.owner.as_str()
            ))
            .collect::<Vec<_>>(),
        vec![("acme", "acme-person", "approve", "request:req-b1", "globex")]
    );
    assert_eq!(as_acme.refusals().unwrap(), refusals);
    assert_eq!(
        Scoped::new(&*store, &tenant("initech")).refusals().unwrap(),
        vec![]
    );
}

#[test]
fn two_tenants_share_a_sqlite_store_without_seeing_each_other() {
    two_tenants(&SqliteBackend::new());
}

#[test]
fn two_tenants_share_a_postgres_store_without_seeing_each_other() {
    two_tenants(&PgBackend::new());
}

/// A login role that is neither a superuser nor `BYPASSRLS` (as a deployment's should be),
/// dropped after the database that holds its tables.
struct AppRole {
    admin: String,
    name: String,
}

impl AppRole {
    fn create(db: &TestDb) -> Self {
        let name = format!("warrant_app_{}", db.url.rsplit('/').next().unwrap());
        let admin = db.url.clone();
        let mut client = db.client();
        client
            .batch_execute(&format!(
                "CREATE ROLE {name} LOGIN PASSWORD 'app' NOSUPERUSER NOBYPASSRLS;
                 GRANT ALL ON SCHEMA public TO {name};"
            ))
            .unwrap();
        Self { admin, name }
    }

    /// The test database's URL, logging in as this role.
    fn url(&self) -> String {
        self.admin
            .replacen("://postgres@", &format!("://{}@", self.name), 1)
    }
}

impl Drop for AppRole {
    fn drop(&mut self) {
        // The database (and the tables the role owns) is dropped first, by its own guard;
        // the role can go once nothing of it is left.
        let admin = self
            .admin
            .rsplit_once('/')
            .map_or(self.admin.clone(), |(b, _)| format!("{b}/postgres"));
        if let Ok(mut c) = postgres::Client::connect(&admin, postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP ROLE IF EXISTS {}", self.name));
        }
    }
}

/// The store owned by a plain role: row-level security (forced on the owner) stops a statement
/// that names no tenant once the session is scoped; unscoped (`*`, the installation's own
/// statements) the same statement sees both tenants, which is the control: the filter-less
/// statement leaks exactly when the layer is off.
#[test]
fn postgres_row_level_security_alone_stops_a_query_that_forgets_the_tenant() {
    let db = TestDb::new();
    let role = AppRole::create(&db);
    let url = role.url();
    let clock: Arc<dyn Clock> = clock();
    let store = PostgresStore::connect_with_password(&url, Some("app"), clock).unwrap();
    seed(&store, "acme", "run-a1", "req-a1", "run-a2");
    seed(&store, "globex", "run-b1", "req-b1", "run-b2");

    let mut config: postgres::Config = url.parse().unwrap();
    config.password("app");
    let mut raw = config.connect(postgres::NoTls).unwrap();
    let forgetful = |raw: &mut postgres::Client, scope: &str| -> Vec<(String, i64, i64, i64)> {
        raw.execute("SELECT set_config('warrant.tenant', $1, false)", &[&scope])
            .unwrap();
        let runs: Vec<String> = raw
            .query("SELECT run_id FROM runs ORDER BY run_id", &[])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        let count = |raw: &mut postgres::Client, table: &str| -> i64 {
            raw.query_one(&format!("SELECT count(*) FROM {table}"), &[])
                .unwrap()
                .get(0)
        };
        let (e, q, a) = (
            count(raw, "events"),
            count(raw, "requests"),
            count(raw, "audit"),
        );
        runs.into_iter().map(|r| (r, e, q, a)).collect()
    };
    assert_eq!(
        forgetful(&mut raw, "acme"),
        vec![
            ("run-a1".to_owned(), 3, 1, 3),
            ("run-a2".to_owned(), 3, 1, 3)
        ]
    );
    // The control: the layer off (the session not scoped to a tenant), the same statement
    // sees both tenants' rows.
    assert_eq!(
        forgetful(&mut raw, "*")
            .into_iter()
            .map(|(r, ..)| r)
            .collect::<Vec<_>>(),
        vec!["run-a1", "run-a2", "run-b1", "run-b2"]
    );
    // A session that never said whose it is sees nothing at all (fail closed).
    let mut fresh = config.connect(postgres::NoTls).unwrap();
    let n: i64 = fresh
        .query_one("SELECT count(*) FROM runs", &[])
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
    // The role owns the tables it migrated, and is held anyway (FORCE).
    let owner: String = raw
        .query_one(
            "SELECT tableowner::text FROM pg_tables WHERE tablename = 'runs'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(owner, role.name);
    drop((raw, fresh, store));
    drop(db);
}

/// The tenant a principal resolves to is the only way to a scope.
#[test]
fn a_tenant_is_made_from_a_principal() {
    assert_eq!(tenant("acme").as_str(), "acme");
    let _: fn(&warrant_core::Principal) -> Tenant = Tenant::of;
}

/// Whether row-level security holds the store's login (`doctor`, strict mode): the test
/// cluster's `postgres` superuser is not held (the finding); a plain login role is; a SQLite
/// file has no such layer.
#[test]
fn the_store_says_whether_row_level_security_holds_its_login() {
    let sqlite = SqliteBackend::new().open(clock());
    assert_eq!(sqlite.row_security().unwrap(), None);

    let db = TestDb::new();
    // The plain role creates (and owns) the schema; the superuser can open it as well.
    let role = AppRole::create(&db);
    let plain = PostgresStore::connect_with_password(&role.url(), Some("app"), clock()).unwrap();
    let admin = warrant_store::open(&db.url, clock()).unwrap();
    let su = admin.row_security().unwrap().unwrap();
    assert_eq!(
        (su.role.as_str(), su.superuser, su.holds()),
        ("postgres", true, false)
    );
    assert!(su.problem().unwrap().contains("is a superuser"), "{su:?}");

    let rls = plain.row_security().unwrap().unwrap();
    assert_eq!(rls.role, role.name);
    assert!(rls.holds() && rls.problem().is_none(), "{rls:?}");
    // A role with BYPASSRLS is not held either.
    db.client()
        .batch_execute(&format!("ALTER ROLE {} BYPASSRLS", role.name))
        .unwrap();
    let bypass = plain.row_security().unwrap().unwrap();
    assert!(!bypass.holds() && bypass.problem().unwrap().contains("BYPASSRLS"));
}
