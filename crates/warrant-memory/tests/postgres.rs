//! Shared memory on the real local PostgreSQL (a database per test): the draft → review →
//! entry cycle, `tsvector` search ranked by `ts_rank_cd`, withdrawal, and tenants. Tenant
//! isolation is shown for both layers: the statements' filter (the negative control switches
//! it off and the other tenant's rows show), and row-level security alone, for a login that is
//! not a superuser, with the filter switched off.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pretty_assertions::assert_eq;
use warrant_core::Digest;
use warrant_memory::{DraftStatus, MemoryError, PgShared, Provenance, Review, SharedStore};
use warrant_testkit::pg::TestDb;

fn by(actor: &str) -> Provenance {
    Provenance {
        run: Some("run-1".into()),
        actor: actor.into(),
        on_behalf_of: None,
        at: "2026-12-06T00:00:00Z".into(),
        tainted: false,
    }
}

fn review<'a>(id: &'a str, seen: &'a Digest, reviewer: &'a str) -> Review<'a> {
    Review {
        id,
        seen,
        reviewer,
        reason: "checked",
        at: "2026-12-06T01:00:00Z",
        run: Some("run-2"),
    }
}

fn terms(q: &str) -> Vec<String> {
    warrant_memory::bound_query(q).unwrap()
}

/// Proposes and publishes `text` into `namespace` for `tenant`; returns the entry id.
fn published(pg: &PgShared, tenant: &str, id: &str, namespace: &str, text: &str) -> String {
    let digest = pg
        .propose(tenant, id, namespace, text, &["ops".into()], &by("agent"))
        .unwrap();
    pg.publish(tenant, &review(id, &digest, "bob")).unwrap().id
}

#[test]
fn drafts_are_published_searched_ranked_and_withdrawn() {
    let db = TestDb::new();
    let pg = PgShared::new(&db.url, None, true).unwrap();
    pg.check().unwrap();
    let d = pg
        .propose(
            "harbour",
            "draft-1",
            "team",
            "Releases are cut on Tuesdays; the release train leaves at noon.",
            &["release".into()],
            &by("agent"),
        )
        .unwrap();
    // Proposing the same id again is a replay: nothing changes.
    assert_eq!(
        pg.propose("harbour", "draft-1", "team", "other", &[], &by("agent"))
            .unwrap(),
        warrant_memory::draft_digest("team", "other", &[])
    );
    assert_eq!(pg.drafts("harbour", false).unwrap().len(), 1);
    assert_eq!(pg.draft("harbour", "draft-1").unwrap().unwrap().digest, d);

    let wrong = Digest::of_bytes(b"not what was shown");
    assert!(matches!(
        pg.publish("harbour", &review("draft-1", &wrong, "bob")),
        Err(MemoryError::DraftChanged { .. })
    ));
    let entry = pg
        .publish("harbour", &review("draft-1", &d, "bob"))
        .unwrap();
    assert_eq!(entry.id, "pub-draft-1");
    let p = entry.published.clone().unwrap();
    assert_eq!(
        (p["proposer"].as_str(), p["reviewer"].as_str()),
        (Some("agent"), Some("bob"))
    );
    assert_eq!(p["proposal_digest"], d.to_string());
    assert_eq!(p["reviewed_digest"], d.to_string());
    assert_eq!(p["reviewed_in"], "run-2");
    // A replay by the same reviewer returns the entry; a rejection now is refused.
    assert_eq!(
        pg.publish("harbour", &review("draft-1", &d, "bob"))
            .unwrap()
            .id,
        entry.id
    );
    assert!(matches!(
        pg.reject("harbour", &review("draft-1", &d, "carol")),
        Err(MemoryError::DraftDecided { .. })
    ));
    assert_eq!(
        pg.draft("harbour", "draft-1").unwrap().unwrap().status,
        DraftStatus::Published
    );

    published(
        &pg,
        "harbour",
        "draft-2",
        "team",
        "Freeze starts on Fridays.",
    );
    published(
        &pg,
        "harbour",
        "draft-3",
        "team",
        "The release checklist lives in the wiki.",
    );
    // Ranked by ts_rank_cd: more of the words, more often, first; tags are searched too.
    let found = pg
        .recall("harbour", "team", &terms("release tuesdays"), 10)
        .unwrap();
    let ids: Vec<&str> = found.iter().map(|f| f.entry.id.as_str()).collect();
    assert_eq!(ids, ["pub-draft-1", "pub-draft-3"]);
    assert!(found[0].rank <= found[1].rank, "lower is better");
    // The two published with the tag `ops` (not in their text).
    assert_eq!(
        pg.recall("harbour", "team", &terms("ops"), 10)
            .unwrap()
            .len(),
        2
    );
    // A query of 10,000 repeated words is bounded to one term before it reaches the server.
    let many = "friday ".repeat(10_000);
    let q = terms(&many);
    assert_eq!(q, ["friday"]);
    assert_eq!(
        pg.recall("harbour", "team", &terms("fridays"), 10)
            .unwrap()
            .len(),
        1
    );

    let withdrawn = pg
        .retract(
            "harbour",
            &Review {
                reason: "superseded",
                ..review("pub-draft-1", &d, "carol")
            },
        )
        .unwrap();
    assert_eq!(withdrawn.retracted.as_ref().unwrap()["by"], "carol");
    assert_eq!(
        withdrawn.retracted.as_ref().unwrap()["reason"],
        "superseded"
    );
    let ids: Vec<String> = pg
        .recall("harbour", "team", &terms("release"), 10)
        .unwrap()
        .into_iter()
        .map(|f| f.entry.id)
        .collect();
    assert_eq!(ids, ["pub-draft-3"]);
    assert_eq!(pg.entries("harbour", Some("team"), 10).unwrap().len(), 2);
    assert!(pg.entry("harbour", "pub-draft-1").unwrap().is_some());
}

#[test]
fn one_tenant_never_sees_another_tenants_shared_memory() {
    let db = TestDb::new();
    let pg = PgShared::new(&db.url, None, true).unwrap();
    let entry = published(&pg, "harbour", "d-h", "team", "Harbour deploys on Mondays.");
    pg.propose(
        "harbour",
        "d-open",
        "team",
        "Harbour draft",
        &[],
        &by("agent"),
    )
    .unwrap();
    published(&pg, "quay", "d-q", "team", "Quay deploys on Thursdays.");

    let deploys = |pg: &PgShared, tenant: &str| -> Vec<String> {
        let mut v: Vec<String> = pg
            .recall(tenant, "team", &terms("deploys"), 10)
            .unwrap()
            .into_iter()
            .map(|f| f.entry.text)
            .collect();
        v.sort();
        v
    };
    assert_eq!(deploys(&pg, "quay"), ["Quay deploys on Thursdays."]);
    assert!(pg.entry("quay", &entry).unwrap().is_none());
    assert!(pg.draft("quay", "d-open").unwrap().is_none());
    assert!(
        pg.drafts("quay", true)
            .unwrap()
            .iter()
            .all(|d| d.id == "d-q")
    );
    assert_eq!(pg.entries("quay", None, 10).unwrap().len(), 1);
    // Quay cannot publish, reject or withdraw Harbour's: they do not exist for it.
    let d = warrant_memory::draft_digest("team", "Harbour draft", &[]);
    assert!(matches!(
        pg.publish("quay", &review("d-open", &d, "quentin")),
        Err(MemoryError::UnknownDraft(_))
    ));
    assert!(matches!(
        pg.retract("quay", &review(&entry, &d, "quentin")),
        Err(MemoryError::UnknownEntry(_))
    ));
    assert!(
        pg.entry("harbour", &entry)
            .unwrap()
            .unwrap()
            .retracted
            .is_none()
    );

    // Negative control: without the statements' filter (this login is a superuser, so
    // row-level security does not hold it), Harbour's entries show to Quay.
    let open = PgShared::new(&db.url, None, false).unwrap();
    assert_eq!(
        deploys(&open, "quay"),
        ["Harbour deploys on Mondays.", "Quay deploys on Thursdays."]
    );
}

#[test]
fn row_level_security_alone_holds_a_login_that_is_not_a_superuser() {
    let db = TestDb::new();
    let pg = PgShared::new(&db.url, None, true).unwrap();
    published(&pg, "harbour", "d-h", "team", "Harbour deploys on Mondays.");
    published(&pg, "quay", "d-q", "team", "Quay deploys on Thursdays.");

    let role = format!(
        "warrant_mem_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    let mut admin = db.client();
    admin
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN NOSUPERUSER NOBYPASSRLS;
             GRANT SELECT, INSERT, UPDATE ON memory_namespaces, memory_drafts, memory_entries, memory_schema TO {role};
             GRANT USAGE ON SEQUENCE memory_entries_seq_seq TO {role};"
        ))
        .unwrap();
    // The same server and database, as that login.
    let url = {
        let rest = db.url.split_once('@').map_or(db.url.as_str(), |(_, r)| r);
        format!("postgres://{role}@{rest}")
    };
    // The statements' filter off: only row-level security stands between the tenants.
    let unfiltered = PgShared::new(&url, None, false).unwrap();
    let seen = |tenant: &str| -> Vec<String> {
        unfiltered
            .entries(tenant, None, 10)
            .unwrap()
            .into_iter()
            .map(|e| e.text)
            .collect()
    };
    // With the filter off the session is scoped to every tenant (`*`): the control.
    assert_eq!(seen("quay").len(), 2);
    // Scoped to one tenant, row-level security hides the other's rows.
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut tx = client.transaction().unwrap();
    tx.execute("SELECT set_config('warrant.tenant', 'quay', true)", &[])
        .unwrap();
    let texts: Vec<String> = tx
        .query("SELECT text FROM memory_entries", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(texts, ["Quay deploys on Thursdays."]);
    let drafts: i64 = tx
        .query_one("SELECT count(*) FROM memory_drafts", &[])
        .unwrap()
        .get(0);
    assert_eq!(drafts, 1);
    tx.rollback().unwrap();
    drop(client);
    drop(unfiltered);
    drop(admin);
    let admin_url = warrant_testkit::pg::with_dbname(&db.url, "postgres");
    drop(db);
    let mut admin = postgres::Client::connect(&admin_url, postgres::NoTls).unwrap();
    admin
        .batch_execute(&format!("DROP ROLE IF EXISTS {role}"))
        .unwrap();
}

#[test]
fn bad_input_is_refused_before_the_server() {
    let db = TestDb::new();
    let pg = PgShared::new(&db.url, None, true).unwrap();
    let big = "x".repeat(10 * 1024 * 1024);
    assert!(matches!(
        pg.propose("harbour", "big", "team", &big, &[], &by("agent")),
        Err(MemoryError::Invalid(_))
    ));
    assert!(matches!(
        pg.propose("harbour", "ns", "../etc", "text", &[], &by("agent")),
        Err(MemoryError::Invalid(_))
    ));
    // Unicode namespaces and words are kept and found.
    published(
        &pg,
        "harbour",
        "d-u",
        "büro",
        "Zürich office opens at eight",
    );
    assert_eq!(
        pg.recall("harbour", "büro", &terms("ZÜRICH"), 5)
            .unwrap()
            .len(),
        1
    );
    // A server that is not there: a clear error naming it, without a password.
    let gone = PgShared::new(
        "postgres://u:hunter2@127.0.0.1:1/x?connect_timeout=1",
        None,
        true,
    )
    .unwrap();
    let e = gone.drafts("harbour", false).unwrap_err();
    assert_eq!(warrant_core::Coded::code(&e), "W-MEMORY-018");
    assert!(!e.to_string().contains("hunter2"), "{e}");
}
