//! Two tenants of one store (SQLite, and one PostgreSQL database): one tenant cannot list,
//! show, resume, approve, answer, cancel or query the other's runs, requests or audit records;
//! each attempt is answered exactly as a record that does not exist would be (no existence
//! oracle) and is kept where both tenants can read it (`audit refusals`). The negative control
//! switches the statements' tenant filter off (`WARRANT_TEST_DISABLE=tenant-filter`), and the
//! other tenant's run shows.

use pretty_assertions::assert_eq;
use serde_json::Value;
use warrant_testkit::pg::TestDb;

use super::harness::{Sandbox, parked_request, stderr, stdout};

/// `id` with its last hex digit changed: an id of the same shape that names nothing.
fn missing(id: &str) -> String {
    let mut s = id.to_owned();
    let last = s.pop().unwrap();
    s.push(if last == '0' { '1' } else { '0' });
    s
}

/// What a command answered, with `id` written as `ID`: two attempts compare whole.
fn answered(out: &std::process::Output, id: &str) -> (Option<i32>, String, String) {
    (
        out.status.code(),
        stdout(out).replace(id, "ID"),
        stderr(out).replace(id, "ID"),
    )
}

fn as_tenant(sb: &mut Sandbox, tenant: &str, actor: &str) {
    sb.extra_env
        .retain(|(k, _)| k != "WARRANT_TENANT" && k != "WARRANT_ACTOR");
    sb.extra_env.push(("WARRANT_TENANT".into(), tenant.into()));
    sb.extra_env.push(("WARRANT_ACTOR".into(), actor.into()));
}

fn two_tenants(mut sb: Sandbox) {
    // Harbour's run parks on a request.
    as_tenant(&mut sb, "harbour", "hana");
    let model = sb.quickstart_model();
    let out = sb.run(&["run", "--prompt", "never", "--model", &model, "tidy up"]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let request = parked_request(&out);
    let (run, _) = sb.last_run();

    // Quay, on the same store, sees none of it.
    as_tenant(&mut sb, "quay", "quentin");
    assert_eq!(
        sb.json(&["runs", "list", "--json"])["runs"],
        Value::Array(vec![])
    );
    let requests = sb.json(&["requests", "list", "--all", "--json"]);
    assert_eq!(requests["requests"], Value::Array(vec![]), "{requests}");
    let records = sb.run(&["audit", "query", "--json"]);
    assert_eq!(stdout(&records), "", "{}", stderr(&records));
    let records = sb.run(&["audit", "query", "--run", &run, "--json"]);
    assert_eq!(stdout(&records), "");

    // Every way to reach the run or the request answers as for one that does not exist.
    let attempts: Vec<(Vec<&str>, &str)> = vec![
        (vec!["runs", "show", "ID"], &run),
        (vec!["runs", "show", "ID", "--json"], &run),
        (vec!["resume", "ID"], &run),
        (vec!["runs", "cancel", "ID"], &run),
        (vec!["audit", "touched", "ID"], &run),
        (vec!["approve", "ID"], &request),
        (vec!["deny", "ID", "--reason", "mine now"], &request),
        (vec!["requests", "show", "ID"], &request),
    ];
    for (args, id) in &attempts {
        let real: Vec<String> = args.iter().map(|a| a.replace("ID", id)).collect();
        let real: Vec<&str> = real.iter().map(String::as_str).collect();
        let nothing = missing(id);
        let fake: Vec<String> = args.iter().map(|a| a.replace("ID", &nothing)).collect();
        let fake: Vec<&str> = fake.iter().map(String::as_str).collect();
        let theirs = answered(&sb.run(&real), id);
        let none = answered(&sb.run(&fake), &nothing);
        assert_eq!(theirs, none, "{args:?}");
        assert_eq!(theirs.0, Some(2), "{args:?}: {theirs:?}");
    }

    // The attempts are kept, and both tenants can read them; a miss of nothing is not.
    let refusals = sb.json(&["audit", "refusals", "--json"]);
    let seen: Vec<(String, String, String)> = refusals["refusals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                format!(
                    "{}@{}",
                    r["actor"].as_str().unwrap(),
                    r["tenant"].as_str().unwrap()
                ),
                r["target"].as_str().unwrap().to_owned(),
                r["owner"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let to_run = (
        "quentin@quay".to_owned(),
        format!("run:{run}"),
        "harbour".to_owned(),
    );
    let to_req = (
        "quentin@quay".to_owned(),
        format!("request:{request}"),
        "harbour".to_owned(),
    );
    assert_eq!(
        seen,
        vec![
            to_run.clone(),
            to_run.clone(),
            to_run.clone(),
            to_run.clone(),
            to_run,
            to_req.clone(),
            to_req.clone(),
            to_req
        ]
    );

    // Harbour's run is untouched: still parked, its request open, and harbour sees the
    // attempts made on it.
    as_tenant(&mut sb, "harbour", "hana");
    let shown = sb.json(&["runs", "show", &run, "--json"]);
    assert_eq!(shown["run"]["status"], "parked");
    let open = sb.json(&["requests", "list", "--json"]);
    assert_eq!(open["requests"].as_array().unwrap().len(), 1, "{open}");
    assert_eq!(sb.json(&["audit", "refusals", "--json"]), refusals);
    // ... and answers it (a refusal needs no approver key; an approval of this destructive
    // request would).
    let ok = sb.run(&["deny", &request, "--reason", "not today"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));

    // The negative control: without the tenant filter, quay lists harbour's run (on SQLite
    // nothing else stands in the way; on PostgreSQL this store's login is a superuser, which
    // row-level security does not hold: the store crate's tests show that layer alone).
    as_tenant(&mut sb, "quay", "quentin");
    sb.extra_env
        .push(("WARRANT_TEST_DISABLE".into(), "tenant-filter".into()));
    let leaked = sb.json(&["runs", "list", "--json"]);
    assert_eq!(leaked["runs"][0]["run"], run.as_str(), "{leaked}");
}

#[test]
fn two_tenants_of_one_sqlite_store_cannot_reach_each_other() {
    two_tenants(Sandbox::init());
}

#[test]
fn two_tenants_of_one_postgres_store_cannot_reach_each_other() {
    let db = TestDb::new();
    two_tenants(Sandbox::init_with(Some(db.url.clone())));
}
