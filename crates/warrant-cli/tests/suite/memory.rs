//! Governed memory (issue 16 parts 1 and 2), from the binary: local memory kept and recalled
//! across runs with provenance and taint; a secret in any memory write blocked, named by rule
//! and position and never stored (negative control: the scanner switched off stores it); a
//! draft for shared memory published only by another person, only as reviewed (digest-bound:
//! an edited draft is refused), only from a person's own process; policy over shared reads;
//! shared memory on PostgreSQL, per tenant (negative control: the tenant filter switched off),
//! withdrawn by a person.

use pretty_assertions::assert_eq;
use serde_json::Value;
use warrant_testkit::pg::TestDb;

use super::harness::{Sandbox, stderr, stdout};

const TOKEN: &str = "ghp_8f3KqL0vX2mB9nR4tY7wZ1cD6hJ5sP3aE2gU";

fn run(sb: &Sandbox, yaml: &str) -> std::process::Output {
    let model = sb.transcript(yaml);
    sb.run(&["run", "--model", &model, "use memory"])
}

/// What became of each call of the last run (completed, refused or denied), with its tool:
/// the event's payload.
fn results(sb: &Sandbox) -> Vec<(String, Value)> {
    let (_, events) = sb.last_run();
    let mut tools = std::collections::BTreeMap::new();
    for e in &events {
        if e["kind"] == "model_responded" {
            for c in e["payload"]["calls"].as_array().into_iter().flatten() {
                tools.insert(c["id"].as_str().unwrap().to_owned(), c["tool"].clone());
            }
        }
    }
    events
        .iter()
        .filter(|e| {
            ["effect_completed", "call_refused", "effect_denied"]
                .contains(&e["kind"].as_str().unwrap())
        })
        .map(|e| {
            let mut p = e["payload"].clone();
            p["kind"] = e["kind"].clone();
            let tool = tools[p["call_id"].as_str().unwrap()]
                .as_str()
                .unwrap()
                .to_owned();
            (tool, p)
        })
        .collect()
}

fn memory_db_holds(sb: &Sandbox, needle: &str) -> bool {
    ["memory.db", "memory.db-wal"].iter().any(|f| {
        std::fs::read(sb.ws.join(".warrant").join(f))
            .map(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
            .unwrap_or(false)
    })
}

#[test]
fn local_memory_is_kept_and_recalled_across_runs_with_provenance_and_taint() {
    let sb = Sandbox::init();
    let out = run(
        &sb,
        concat!(
            "version: 1\nturns:\n",
            "  - calls:\n",
            "      - tool: remember\n        args: { text: \"Deploys need the VPN; the script is scripts/deploy.sh.\", tags: [deploy] }\n",
            "      - tool: read_file\n        args: { path: notes.md }\n",
            "  - calls:\n",
            "      - tool: remember\n        args: { text: \"The VPN profile is called harbour-ops.\" }\n",
            "  - say: done\n",
        ),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first_run = sb.last_run().0;

    let query = "vpn ".repeat(10_000) + "deploy script";
    let out = run(
        &sb,
        &format!(
            "version: 1\nturns:\n  - calls:\n      - tool: recall\n        args: {{ query: \"{query}\" }}\n  - say: done\n"
        ),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (tool, event) = &results(&sb)[0];
    assert_eq!(tool, "recall");
    let found = event["result"]["found"].as_array().unwrap();
    assert_eq!(found.len(), 2, "{event}");
    // BM25: the entry with more of the words first; the journal holds the bounded query.
    assert!(
        found[0]["text"]
            .as_str()
            .unwrap()
            .starts_with("Deploys need the VPN")
    );
    assert_eq!(found[0]["written"]["run"], first_run.as_str());
    assert_eq!(found[0]["written"]["by"], "tester");
    assert!(
        found[0].get("tainted").is_none(),
        "written before anything untrusted was seen"
    );
    assert!(
        found[1]["tainted"].as_str().unwrap().contains("untrusted"),
        "written after the run read a file: {}",
        found[1]
    );
    let (_, events) = sb.last_run();
    let decided = events
        .iter()
        .find(|e| e["kind"] == "action_proposed")
        .map(|e| e["payload"]["actions"][0]["query"].clone());
    assert_eq!(decided, Some(Value::from("vpn deploy script")));

    let listed = sb.json(&["memory", "list", "--json"]);
    assert_eq!(listed.as_array().unwrap().len(), 2);
    let searched = sb.json(&["memory", "search", "harbour", "--json"]);
    assert_eq!(
        searched[0]["text"],
        "The VPN profile is called harbour-ops."
    );
    let id = searched[0]["id"].as_str().unwrap().to_owned();
    let shown = sb.json(&["memory", "show", &id, "--json"]);
    assert_eq!(shown["provenance"]["tainted"], true);

    // A person forgets it, through the ring: a run of its own records it.
    let out = sb.run(&["memory", "forget", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("recorded in run"));
    assert_eq!(
        sb.json(&["memory", "list", "--json"])
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let (_, events) = sb.last_run();
    assert!(events.iter().any(|e| e["kind"] == "effect_completed"));
    let out = sb.run(&["audit", "verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

fn plant_secret(sb: &Sandbox) -> std::process::Output {
    run(
        sb,
        &format!(
            concat!(
                "version: 1\nturns:\n",
                "  - calls:\n",
                "      - tool: remember\n        args: {{ text: \"first line\\nthe token is {t} for CI\" }}\n",
                "      - tool: propose_memory\n        args: {{ namespace: team, text: \"CI uses {t}\" }}\n",
                "      - tool: remember\n        args: {{ text: \"tagged\", tags: [\"{t}\"] }}\n",
                "  - say: done\n",
            ),
            t = TOKEN
        ),
    )
}

#[test]
fn a_secret_in_any_memory_write_is_blocked_named_and_never_stored() {
    let sb = Sandbox::init();
    let out = plant_secret(&sb);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let results = results(&sb);
    assert_eq!(results.len(), 3);
    for (tool, e) in &results {
        assert_eq!(e["kind"], "call_refused", "{tool}: {e}");
        assert_eq!(e["code"], "W-MEMORY-009");
        assert!(e["message"].as_str().unwrap().contains("github-pat"), "{e}");
    }
    assert!(
        results[0].1["message"]
            .as_str()
            .unwrap()
            .contains("line 2, column 14")
    );
    assert!(!stdout(&out).contains(TOKEN));
    assert!(!memory_db_holds(&sb, TOKEN));
    assert!(
        sb.json(&["memory", "list", "--json"])
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(
        sb.json(&["memory", "drafts", "list", "--json"])
            .as_array()
            .unwrap()
            .is_empty()
    );

    // Negative control: without the scanner the same writes are kept, token and all.
    let mut off = Sandbox::init();
    off.extra_env
        .push(("WARRANT_TEST_DISABLE".into(), "memory-scan".into()));
    let out = plant_secret(&off);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(memory_db_holds(&off, TOKEN));
}

const PROPOSE: &str = concat!(
    "version: 1\nturns:\n",
    "  - calls:\n",
    "      - tool: propose_memory\n        args: { namespace: team, text: \"Releases are cut on Tuesdays.\", tags: [release] }\n",
    "      - tool: propose_memory\n        args: { namespace: team, text: \"Freeze starts on Fridays.\" }\n",
    "      - tool: remember\n        args: { text: \"not allowed\", namespace: shared/team }\n",
    "  - say: done\n",
);

fn review(sb: &Sandbox, who: &str, verb: &str, id: &str, digest: &str) -> std::process::Output {
    let mut c = sb.cmd(&[
        "memory", "drafts", verb, id, "--digest", digest, "--reason", "checked",
    ]);
    c.env("WARRANT_ACTOR", who);
    c.output().unwrap()
}

#[test]
fn a_draft_is_published_only_by_another_person_as_reviewed() {
    let sb = Sandbox::init();
    let out = run(&sb, PROPOSE);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let refused = results(&sb);
    assert_eq!(
        refused[2].1["code"], "W-MEMORY-008",
        "an agent never writes shared memory"
    );
    let drafts = sb.json(&["memory", "drafts", "list", "--json"]);
    let drafts = drafts.as_array().unwrap();
    assert_eq!(drafts.len(), 2);
    let find = |text: &str| {
        let d = drafts
            .iter()
            .find(|d| d["text"].as_str().unwrap().starts_with(text))
            .unwrap();
        (
            d["id"].as_str().unwrap().to_owned(),
            d["digest"].as_str().unwrap().to_owned(),
        )
    };
    let (tuesday, tuesday_digest) = find("Releases");
    let (friday, friday_digest) = find("Freeze");

    // The proposer (the person the run acted as) may not publish their own draft.
    let out = review(&sb, "tester", "publish", &tuesday, &tuesday_digest);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("W-MEMORY-012"), "{}", stderr(&out));
    // A digest the reviewer was not shown is refused.
    let wrong = format!("sha256:{}", "0".repeat(64));
    let out = review(&sb, "bob", "publish", &tuesday, &wrong);
    assert!(stderr(&out).contains("W-MEMORY-006"), "{}", stderr(&out));
    // A process a run started cannot pass for a person.
    let mut c = sb.cmd(&[
        "memory",
        "drafts",
        "publish",
        &tuesday,
        "--digest",
        &tuesday_digest,
    ]);
    c.env("WARRANT_ACTOR", "bob")
        .env("WARRANT_COMMAND", "run-x");
    let out = c.output().unwrap();
    assert!(stderr(&out).contains("W-MEMORY-013"), "{}", stderr(&out));

    // A draft edited after review is refused with the digest the reviewer saw.
    let db = rusqlite::Connection::open(sb.ws.join(".warrant/memory.db")).unwrap();
    db.execute(
        "UPDATE drafts SET text = 'Freeze starts on Mondays.' WHERE id = ?1",
        [&friday],
    )
    .unwrap();
    drop(db);
    let out = review(&sb, "bob", "publish", &friday, &friday_digest);
    assert!(stderr(&out).contains("W-MEMORY-006"), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("edited since it was proposed"),
        "{}",
        stderr(&out)
    );

    // Another person, the digest they saw: published, with both digests and both people.
    let out = review(&sb, "bob", "publish", &tuesday, &tuesday_digest);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = review(&sb, "bob", "publish", &tuesday, &tuesday_digest);
    assert_eq!(
        out.status.code(),
        Some(0),
        "publishing again is a replay: {}",
        stderr(&out)
    );
    let shared = sb.json(&["memory", "list", "--namespace", "shared/team", "--json"]);
    let entry = &shared.as_array().unwrap()[0];
    assert_eq!(entry["published"]["proposer"], "tester");
    assert_eq!(entry["published"]["reviewer"], "bob");
    assert_eq!(
        entry["published"]["proposal_digest"],
        tuesday_digest.as_str()
    );
    assert_eq!(
        entry["published"]["reviewed_digest"],
        tuesday_digest.as_str()
    );
    let out = review(&sb, "bob", "reject", &tuesday, &tuesday_digest);
    assert!(
        stderr(&out).contains("W-MEMORY-005"),
        "decided already: {}",
        stderr(&out)
    );

    // An agent recalls it from shared memory.
    let out = run(
        &sb,
        "version: 1\nturns:\n  - calls:\n      - tool: recall\n        args: { query: tuesdays release, namespace: shared/team }\n  - say: done\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let found = &results(&sb)[0].1["result"]["found"];
    assert_eq!(found[0]["published"]["by"], "bob", "{found}");
    let out = sb.run(&["audit", "verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // Negative control for the origin check: with recognition off, the same command passes
    // for a person (so the check above is what refused it).
    let mut c = sb.cmd(&[
        "memory",
        "drafts",
        "reject",
        &friday,
        "--digest",
        &friday_digest,
        "--reason",
        "x",
    ]);
    c.env("WARRANT_ACTOR", "bob")
        .env("WARRANT_COMMAND", "run-x")
        .env("WARRANT_TEST_DISABLE", "origin");
    let out = c.output().unwrap();
    assert!(!stderr(&out).contains("W-MEMORY-013"), "{}", stderr(&out));
}

#[test]
fn policy_decides_who_reads_a_shared_namespace() {
    let sb = Sandbox::init();
    sb.write(
        ".warrant/policies/memory.cedar",
        "@id(\"hr-private\")\n@reason(\"HR notes are for HR.\")\nforbid (principal, action == Warrant::Action::\"memory.read\", resource is Warrant::MemoryNamespace)\nwhen { resource.name == \"memory/shared/hr\" } unless { principal in Warrant::Role::\"hr\" };\n",
    );
    let transcript = "version: 1\nturns:\n  - calls:\n      - tool: recall\n        args: { query: salary, namespace: shared/hr }\n  - say: done\n";
    let out = run(&sb, transcript);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let denied = &results(&sb)[0].1;
    assert_eq!(denied["kind"], "effect_denied", "{denied}");
    assert!(
        denied["message"].as_str().unwrap().contains("hr-private"),
        "{denied}"
    );
    let mut hr = sb.cmd(&["run", "--model", &sb.transcript(transcript), "recall"]);
    hr.env("WARRANT_ROLES", "hr");
    let out = hr.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (_, events) = sb.last_run();
    assert!(
        events.iter().any(|e| e["kind"] == "effect_completed"),
        "{events:?}"
    );
}

#[test]
fn bad_memory_input_ends_in_clear_refusals() {
    let sb = Sandbox::init();
    let big = "x".repeat(100 * 1024);
    let out = run(
        &sb,
        &format!(
            concat!(
                "version: 1\nturns:\n  - calls:\n",
                "      - tool: remember\n        args: {{ text: \"{big}\" }}\n",
                "      - tool: remember\n        args: {{ text: ok, namespace: \"../etc\" }}\n",
                "      - tool: recall\n        args: {{ query: \"*** -- ()\" }}\n",
                "      - tool: forget\n        args: {{ id: mem-nope }}\n",
                "      - tool: remember\n        args: {{ text: \"Zürich office\", namespace: \"büro\" }}\n",
                "  - say: done\n",
            ),
            big = big
        ),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let codes: Vec<String> = results(&sb)
        .iter()
        .map(|(t, e)| {
            format!(
                "{t}:{}",
                e["code"].as_str().unwrap_or(e["kind"].as_str().unwrap())
            )
        })
        .collect();
    assert_eq!(
        codes,
        [
            "remember:W-MEMORY-007",
            "remember:W-MEMORY-007",
            "recall:W-MEMORY-007",
            "forget:W-MEMORY-003",
            "remember:effect_completed",
        ]
    );
}

/// A sandbox whose store is `db` and whose shared memory is PostgreSQL (the store's database:
/// `backend = "postgres"` with no `url`).
fn on_postgres(db: &TestDb) -> Sandbox {
    let sb = Sandbox::init_with(Some(db.url.clone()));
    let config = sb.ws.join(".warrant/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[memory.shared]\nbackend = \"postgres\"\n");
    std::fs::write(&config, text).unwrap();
    sb
}

fn as_tenant(sb: &mut Sandbox, tenant: &str, actor: &str) {
    sb.extra_env
        .retain(|(k, _)| k != "WARRANT_TENANT" && k != "WARRANT_ACTOR");
    sb.extra_env.push(("WARRANT_TENANT".into(), tenant.into()));
    sb.extra_env.push(("WARRANT_ACTOR".into(), actor.into()));
}

#[test]
fn shared_memory_on_postgres_is_reviewed_recalled_withdrawn_and_kept_per_tenant() {
    let db = TestDb::new();
    let mut sb = on_postgres(&db);
    as_tenant(&mut sb, "harbour", "tester");
    let big = "x".repeat(10 * 1024 * 1024);
    let out = run(
        &sb,
        &format!(
            concat!(
                "version: 1\nturns:\n  - calls:\n",
                "      - tool: propose_memory\n        args: {{ namespace: team, text: \"Releases are cut on Tuesdays.\", tags: [release] }}\n",
                "      - tool: propose_memory\n        args: {{ namespace: team, text: \"Freeze starts on Fridays.\" }}\n",
                "      - tool: propose_memory\n        args: {{ namespace: team, text: \"CI uses {t}\" }}\n",
                "      - tool: propose_memory\n        args: {{ namespace: team, text: \"{big}\" }}\n",
                "  - say: done\n",
            ),
            t = TOKEN,
            big = big
        ),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let codes: Vec<String> = results(&sb)
        .iter()
        .map(|(_, e)| {
            e["code"]
                .as_str()
                .unwrap_or(e["kind"].as_str().unwrap())
                .to_owned()
        })
        .collect();
    assert_eq!(
        codes,
        [
            "effect_completed",
            "effect_completed",
            "W-MEMORY-009",
            "W-MEMORY-007"
        ],
        "the secret and the 10 MB text are refused before anything is stored"
    );
    // The drafts are rows of the tenant in PostgreSQL, not in the workspace's file.
    let mut pg = db.client();
    let rows: Vec<(String, String)> = pg
        .query("SELECT tenant, text FROM memory_drafts ORDER BY text", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        rows,
        [
            ("harbour".to_owned(), "Freeze starts on Fridays.".to_owned()),
            (
                "harbour".to_owned(),
                "Releases are cut on Tuesdays.".to_owned()
            )
        ]
    );
    let held: i64 = pg
        .query_one(
            "SELECT count(*) FROM memory_drafts WHERE text LIKE '%' || $1 || '%'",
            &[&TOKEN],
        )
        .unwrap()
        .get(0);
    assert_eq!(held, 0);
    assert!(!memory_db_holds(&sb, "Tuesdays"));

    let drafts = sb.json(&["memory", "drafts", "list", "--json"]);
    let find = |text: &str| {
        let d = drafts
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["text"].as_str().unwrap().starts_with(text))
            .unwrap();
        (
            d["id"].as_str().unwrap().to_owned(),
            d["digest"].as_str().unwrap().to_owned(),
        )
    };
    let (tuesday, tuesday_digest) = find("Releases");
    let (friday, friday_digest) = find("Freeze");

    // Edited in the database after it was shown: refused with what the reviewer saw.
    pg.execute(
        "UPDATE memory_drafts SET text = 'Freeze starts on Mondays.' WHERE id = $1",
        &[&friday],
    )
    .unwrap();
    let out = review(&sb, "bob", "publish", &friday, &friday_digest);
    assert!(stderr(&out).contains("W-MEMORY-006"), "{}", stderr(&out));
    assert!(stderr(&out).contains("edited since it was proposed"));
    // Its proposer may not publish it; another person may.
    let out = review(&sb, "tester", "publish", &tuesday, &tuesday_digest);
    assert!(stderr(&out).contains("W-MEMORY-012"), "{}", stderr(&out));
    let out = review(&sb, "bob", "publish", &tuesday, &tuesday_digest);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let review_run = stdout(&out)
        .rsplit("recorded in run ")
        .next()
        .unwrap()
        .trim()
        .trim_end_matches(')')
        .to_owned();
    let shared = sb.json(&["memory", "list", "--namespace", "shared/team", "--json"]);
    let entry = &shared.as_array().unwrap()[0];
    let entry_id = entry["id"].as_str().unwrap().to_owned();
    let p = &entry["published"];
    assert_eq!(
        (p["proposer"].as_str(), p["reviewer"].as_str()),
        (Some("tester"), Some("bob"))
    );
    assert_eq!(p["proposal_digest"], tuesday_digest.as_str());
    assert_eq!(p["reviewed_digest"], tuesday_digest.as_str());
    assert_eq!(p["reviewed_in"], review_run.as_str());
    assert!(entry["provenance"]["run"].as_str().is_some());

    // An agent recalls it from PostgreSQL with a query of 10,000 repeated words, across a
    // shared and a local namespace at once.
    let query = "tuesdays ".repeat(10_000) + "release";
    let recall = format!(
        "version: 1\nturns:\n  - calls:\n      - tool: recall\n        args: {{ query: \"{query}\", namespaces: [shared/team, notes] }}\n  - say: done\n"
    );
    let out = run(&sb, &recall);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (_, e) = &results(&sb)[0];
    let found = e["result"]["found"].as_array().unwrap();
    assert_eq!(found.len(), 1, "{e}");
    assert_eq!(found[0]["text"], "Releases are cut on Tuesdays.");
    assert_eq!(found[0]["published"]["by"], "bob");
    let (_, events) = sb.last_run();
    let proposed = events
        .iter()
        .find(|e| e["kind"] == "action_proposed")
        .unwrap();
    assert_eq!(proposed["payload"]["actions"].as_array().unwrap().len(), 2);
    assert_eq!(
        proposed["payload"]["actions"][0]["query"],
        "tuesdays release"
    );

    // Another tenant of the same database sees none of it, and cannot review or withdraw it.
    as_tenant(&mut sb, "quay", "quentin");
    let list = |sb: &Sandbox| sb.json(&["memory", "list", "--namespace", "shared/team", "--json"]);
    assert_eq!(list(&sb), Value::Array(vec![]));
    assert_eq!(
        sb.json(&["memory", "drafts", "list", "--all", "--json"]),
        Value::Array(vec![])
    );
    let out = sb.run(&["memory", "show", &entry_id]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("W-MEMORY-003"), "{}", stderr(&out));
    let out = review(&sb, "quentin", "reject", &friday, &friday_digest);
    assert!(stderr(&out).contains("W-MEMORY-004"), "{}", stderr(&out));
    let out = sb.run(&["memory", "retract", &entry_id, "--reason", "mine now"]);
    assert!(stderr(&out).contains("W-MEMORY-003"), "{}", stderr(&out));
    let out = run(&sb, &recall);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(results(&sb)[0].1["result"]["found"], Value::Array(vec![]));
    // Negative control: with the tenant filter off, Harbour's entry shows to Quay.
    sb.extra_env
        .push(("WARRANT_TEST_DISABLE".into(), "memory-tenant".into()));
    assert_eq!(list(&sb)[0]["id"], entry_id.as_str());
    sb.extra_env.retain(|(k, _)| k != "WARRANT_TEST_DISABLE");

    // A person of Harbour withdraws it, with a reason: kept, marked, no longer recalled.
    as_tenant(&mut sb, "harbour", "tester");
    let mut c = sb.cmd(&["memory", "retract", &entry_id, "--reason", "superseded"]);
    c.env("WARRANT_ACTOR", "carol");
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("recorded in run"));
    let shown = sb.json(&["memory", "show", &entry_id, "--json"]);
    assert_eq!(shown["retracted"]["by"], "carol");
    assert_eq!(shown["retracted"]["reason"], "superseded");
    assert_eq!(list(&sb), Value::Array(vec![]));
    let out = run(&sb, &recall);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(results(&sb)[0].1["result"]["found"], Value::Array(vec![]));
    // An agent cannot withdraw: it is never offered the tool, and `forget` refuses.
    let out = run(
        &sb,
        &format!(
            "version: 1\nturns:\n  - calls:\n      - tool: retract_memory\n        args: {{ entry: {entry_id}, reason: x }}\n  - say: done\n"
        ),
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("unknown tool `retract_memory`"),
        "{}",
        stderr(&out)
    );
    let out = run(
        &sb,
        &format!(
            "version: 1\nturns:\n  - calls:\n      - tool: forget\n        args: {{ id: {entry_id} }}\n  - say: done\n"
        ),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(results(&sb)[0].1["kind"], "call_refused");
    assert!(sb.json(&["memory", "show", &entry_id, "--json"])["retracted"].is_object());
    let out = sb.run(&["audit", "verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}
