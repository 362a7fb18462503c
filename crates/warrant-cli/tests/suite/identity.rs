//! Identity: layered, managed wins, required and locked fields enforced before anything runs,
//! the principal fixed in the run's first event and read back from the log on resume.

use std::fs;

use pretty_assertions::assert_eq;
use serde_json::json;

use super::harness::{Sandbox, parked_request, stderr};

#[test]
fn whoami_shows_the_principal_and_where_each_field_came_from() {
    let sb = Sandbox::init();
    fs::write(
        sb.managed.join("config.toml"),
        "[identity]\nroles = [\"developer\"]\nrequired = [\"tenant\"]\n",
    )
    .unwrap();
    let v = sb.json(&["whoami", "--json"]);
    assert_eq!(
        v["principal"],
        json!({"tenant": "harbour", "actor": "tester", "kind": "user", "roles": ["developer"], "teams": []})
    );
    assert_eq!(
        v["sources"]["tenant"]["from"],
        json!({"from": "env", "var": "WARRANT_TENANT"})
    );
    assert_eq!(v["sources"]["tenant"]["required"], true);
    assert_eq!(v["sources"]["roles"]["from"]["layer"], "managed");
    assert_eq!(
        v["sources"]["actor"]["from"],
        json!({"from": "env", "var": "WARRANT_ACTOR"})
    );
    // Without WARRANT_ACTOR, the actor is the operating system account running warrant.
    let out = sb
        .cmd(&["whoami", "--json"])
        .env_remove("WARRANT_ACTOR")
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["sources"]["actor"]["from"], json!({"from": "os_user"}));
    assert!(!v["principal"]["actor"].as_str().unwrap().is_empty());
}

#[test]
fn a_missing_required_field_stops_the_run_before_anything_happens() {
    let mut sb = Sandbox::init();
    fs::write(
        sb.managed.join("config.toml"),
        "[identity]\nrequired = [\"teams\"]\n",
    )
    .unwrap();
    let model = sb.quickstart_model();
    let out = sb.run(&["run", "--model", &model, "t"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("W-CONFIG-003"), "{}", stderr(&out));
    assert!(stderr(&out).contains("`teams`"), "{}", stderr(&out));
    // Whose runs a listing shows is the identity's tenant's: without a complete identity the
    // listing is refused the same way, and shows nothing was started once it is complete.
    let listed = sb.run(&["runs", "list", "--json"]);
    assert_eq!(listed.status.code(), Some(2));
    assert!(
        stderr(&listed).contains("W-CONFIG-003"),
        "{}",
        stderr(&listed)
    );
    sb.extra_env
        .push(("WARRANT_TEAMS".into(), "harbour-ops".into()));
    assert_eq!(sb.run(&["whoami"]).status.code(), Some(0));
    assert_eq!(sb.json(&["runs", "list", "--json"])["runs"], json!([]));
}

#[test]
fn a_locked_field_cannot_be_set_from_the_environment() {
    let mut sb = Sandbox::init();
    fs::write(
        sb.managed.join("config.toml"),
        "[identity]\ntenant = \"acme\"\nlocked = [\"actor\", \"tenant\"]\n",
    )
    .unwrap();
    // Managed wins over the environment's WARRANT_TENANT... by refusing it.
    let out = sb.run(&["whoami"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("W-CONFIG-004"), "{}", stderr(&out));
    sb.extra_env.push(("WARRANT_TENANT".into(), String::new()));
    let mut cmd = sb.cmd(&["whoami", "--json"]);
    cmd.env_remove("WARRANT_TENANT")
        .env("WARRANT_ACTOR", "mallory");
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("`actor` is locked"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn resume_keeps_the_principal_of_the_log_whoever_resumes() {
    let mut sb = Sandbox::init();
    let model = sb.quickstart_model();
    let out = sb.run(&["run", "--prompt", "never", "--model", &model, "q"]);
    let request = parked_request(&out);
    let (run, _) = sb.last_run();
    sb.extra_env
        .push(("WARRANT_ACTOR".into(), "reviewer".into()));
    assert_eq!(
        sb.run(&["deny", &request, "--reason", "no"]).status.code(),
        Some(0)
    );
    assert_eq!(sb.run(&["resume", &run]).status.code(), Some(0));
    let (_, events) = sb.last_run();
    assert_eq!(events[0]["payload"]["principal"]["actor"], "tester");
    let denied = events
        .iter()
        .find(|e| e["kind"] == "approval_denied")
        .unwrap();
    assert_eq!(denied["payload"]["approver"]["actor"], "reviewer");
    let resumed = events.iter().find(|e| e["kind"] == "run_resumed").unwrap();
    assert_eq!(resumed["payload"]["by"], "reviewer");
    // The audit records of the resumed part still name the run's principal.
    let trail = fs::read_to_string(sb.ws.join(".warrant/audit/audit.jsonl")).unwrap();
    let last: serde_json::Value = serde_json::from_str(trail.lines().last().unwrap()).unwrap();
    assert_eq!(last["data"]["actor"], "tester");
}
