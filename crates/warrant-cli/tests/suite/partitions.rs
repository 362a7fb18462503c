//! `[store] audit_partitions`: a new PostgreSQL store's chain takes the configured count, a chain
//! that has begun keeps its own and `doctor` says so, and a count out of range is refused.

use serde_json::Value;
use warrant_testkit::pg::TestDb;

use super::harness::{Sandbox, stderr};

fn set_partitions(sb: &Sandbox, n: i64) {
    let path = sb.ws.join(".warrant/config.toml");
    let config = std::fs::read_to_string(&path).unwrap();
    let kept: Vec<&str> = config.lines().take_while(|l| *l != "[store]").collect();
    std::fs::write(
        path,
        format!("{}\n[store]\naudit_partitions = {n}\n", kept.join("\n")),
    )
    .unwrap();
}

/// The `audit partitions` row of `doctor --json`, as (ok, detail).
fn partitions_row(sb: &Sandbox) -> (bool, String) {
    let out = sb.run(&["doctor", "--json"]);
    let report: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
    let row = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "audit partitions")
        .unwrap_or_else(|| panic!("no partitions row: {report}"))
        .clone();
    (
        row["ok"].as_bool().unwrap(),
        row["detail"].as_str().unwrap().to_owned(),
    )
}

fn partitions_in(db: &TestDb) -> i64 {
    db.client()
        .query_one("SELECT count(*) FROM audit_partitions WHERE part >= 0", &[])
        .unwrap()
        .get(0)
}

#[test]
fn a_new_chain_takes_the_configured_partitions_and_a_begun_one_keeps_its_own() {
    let db = TestDb::new();
    let sb = Sandbox::init_with(Some(db.url.clone()));
    // The first command creates the store with the default 8; its chain holds no record yet.
    let out = sb.run(&["runs", "list"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(partitions_in(&db), 8);
    set_partitions(&sb, 3);
    assert_eq!(
        partitions_row(&sb),
        (
            true,
            "3 (appends of runs in different partitions do not wait for each other)".to_owned()
        )
    );
    assert_eq!(partitions_in(&db), 3);

    // Runs land in the three partitions, and the trail verifies whole.
    let model = sb.transcript("version: 1\nturns:\n  - say: done\n");
    for task in ["one", "two", "three", "four"] {
        let out = sb.run(&["run", "--prompt", "never", "--model", &model, task]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let out = sb.run(&["audit", "verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // Now the chain has begun: another count is not applied, and doctor says why.
    set_partitions(&sb, 5);
    assert_eq!(
        partitions_row(&sb),
        (
            false,
            "3, but [store] audit_partitions = 5: the chain already holds records, so its partitions are fixed (a new store takes the configured count)".to_owned()
        )
    );
    assert_eq!(partitions_in(&db), 3);
    let out = sb.run(&["run", "--prompt", "never", "--model", &model, "five"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = sb.run(&["audit", "verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn a_partition_count_out_of_range_is_refused_naming_the_range() {
    let db = TestDb::new();
    let sb = Sandbox::init_with(Some(db.url.clone()));
    let out = sb.run(&["runs", "list"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for n in [0, 1025] {
        set_partitions(&sb, n);
        let out = sb.run(&["runs", "list"]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!(
                "error[W-STORE-021]: [store] audit_partitions = {n}: a chain has 1 to 1024 partitions"
            )),
            "{}",
            stderr(&out)
        );
    }
    // Nothing was changed by the refusals.
    assert_eq!(partitions_in(&db), 8);
}
