//! Audit is delivery: an HTTP sink configured, broken, seen broken in `audit status` and
//! `doctor`, repaired, flushed; the receiver's copy verifies with nothing but the public keys.
//! Then the questions the trail answers: `audit query` and `audit touched`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::harness::{Sandbox, stderr, stdout};

struct Receiver {
    url: String,
    healthy: Arc<AtomicBool>,
    /// Records received, deduplicated by id, in arrival order.
    records: Arc<Mutex<Vec<Value>>>,
    auth: Arc<Mutex<Vec<String>>>,
}

fn receiver() -> Receiver {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let url = format!("http://{}/ingest", server.server_addr().to_ip().unwrap());
    let healthy = Arc::new(AtomicBool::new(false));
    let records = Arc::new(Mutex::new(Vec::<Value>::new()));
    let auth = Arc::new(Mutex::new(Vec::new()));
    let (h, r, a) = (healthy.clone(), records.clone(), auth.clone());
    thread::spawn(move || {
        for mut req in server.incoming_requests() {
            let mut body = String::new();
            req.as_reader().read_to_string(&mut body).unwrap();
            for header in req.headers() {
                if header.field.equiv("Authorization") {
                    a.lock().unwrap().push(header.value.to_string());
                }
            }
            if !h.load(Ordering::SeqCst) {
                let _ = req.respond(
                    tiny_http::Response::from_string("down for maintenance").with_status_code(503),
                );
                continue;
            }
            let batch: Vec<Value> = serde_json::from_str(&body).unwrap();
            let mut seen = r.lock().unwrap();
            for record in batch {
                if !seen.iter().any(|s: &Value| s["id"] == record["id"]) {
                    seen.push(record);
                }
            }
            let _ = req.respond(tiny_http::Response::from_string("").with_status_code(202));
        }
    });
    Receiver {
        url,
        healthy,
        records,
        auth,
    }
}

fn status(sb: &Sandbox) -> Value {
    let v = sb.json(&["audit", "status", "--json"]);
    v["sinks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sink"] == "central")
        .unwrap()
        .clone()
}

#[test]
fn an_http_sink_breaks_shows_in_status_and_doctor_is_repaired_flushed_and_verified() {
    let rx = receiver();
    let mut sb = Sandbox::init();
    sb.extra_env
        .push(("AUDIT_TOKEN".into(), "Bearer tok-3f9a-never-stored".into()));
    let config = sb.ws.join(".warrant/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "\n[audit]\nfail_after_ms = 0\n[audit.sinks.central]\ntype = \"http\"\nurl = \"{}\"\nheaders = {{ Authorization = \"env:AUDIT_TOKEN\" }}\nbatch = 7\n",
        rx.url
    ));
    std::fs::write(&config, text).unwrap();

    // The receiver is down: the run still completes, says so, and nothing leaves the outbox.
    let model = sb.transcript("version: 1\nturns:\n  - calls:\n      - tool: list_dir\n        args: { path: . }\n      - tool: read_file\n        args: { path: .env }\n  - say: done\n");
    let out = sb.run(&["run", "--model", &model, "look"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("audit delivery to sink `central` failed"),
        "{}",
        stderr(&out)
    );
    let broken = status(&sb);
    assert!(broken["pending"].as_u64().unwrap() > 0, "{broken}");
    assert!(
        broken["last_error"].as_str().unwrap().contains("503"),
        "{broken}"
    );
    assert!(broken["failing_for_ms"].is_i64(), "{broken}");
    let human = sb.run(&["audit", "status"]);
    assert!(stdout(&human).contains("failing for"), "{}", stdout(&human));
    let doctor = sb.run(&["doctor"]);
    assert_eq!(doctor.status.code(), Some(1), "{}", stdout(&doctor));
    assert!(
        stdout(&doctor).contains("FAIL audit sink central"),
        "{}",
        stdout(&doctor)
    );
    let stuck = sb.run(&["audit", "flush", "--timeout", "1s"]);
    assert_eq!(stuck.status.code(), Some(1));
    assert!(
        stderr(&stuck).contains("W-CLI-005") && stderr(&stuck).contains("central"),
        "{}",
        stderr(&stuck)
    );

    // Repaired: flush delivers everything, once each, in order.
    rx.healthy.store(true, Ordering::SeqCst);
    let flushed = sb.run(&["audit", "flush", "--timeout", "30s"]);
    assert_eq!(flushed.status.code(), Some(0), "{}", stderr(&flushed));
    let fixed = status(&sb);
    assert_eq!(
        (fixed["pending"].clone(), fixed["failing_for_ms"].clone()),
        (json!(0), Value::Null)
    );
    assert_eq!(sb.run(&["doctor"]).status.code(), Some(0));

    let records = rx.records.lock().unwrap().clone();
    let seqs: Vec<u64> = records.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    let head = sb.json(&["audit", "status", "--json"])["head"]
        .as_u64()
        .unwrap();
    assert_eq!(seqs.len() as u64, head);

    // The receiver's copy verifies with the exported public keys alone.
    let copy = sb.dir.path().join("receiver.jsonl");
    std::fs::write(
        &copy,
        records
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
            + "\n",
    )
    .unwrap();
    let keys = sb.run(&["audit", "keys", "export"]);
    let keyfile = sb.dir.path().join("keys.txt");
    std::fs::write(&keyfile, &keys.stdout).unwrap();
    let verify = sb.run(&[
        "audit",
        "verify",
        "--file",
        copy.to_str().unwrap(),
        "--pubkeys",
        keyfile.to_str().unwrap(),
    ]);
    assert_eq!(verify.status.code(), Some(0), "{}", stdout(&verify));

    // The token went to the receiver and nowhere else.
    assert!(
        rx.auth
            .lock()
            .unwrap()
            .iter()
            .all(|a| a == "Bearer tok-3f9a-never-stored")
    );
    for file in [
        ".warrant/audit/audit.jsonl",
        ".warrant/store.db",
        ".warrant/config.toml",
    ] {
        let bytes = std::fs::read(sb.ws.join(file)).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains("tok-3f9a"),
            "{file}"
        );
    }
}

#[test]
fn query_and_touched_answer_who_touched_what_and_who_allowed_it() {
    let sb = Sandbox::init();
    let model = sb.quickstart_model();
    let out = sb.run_stdin(
        &["run", "--prompt", "always", "--model", &model, "q"],
        "o\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (run, _) = sb.last_run();

    let lines = |args: &[&str]| -> Vec<Value> {
        let out = sb.run(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        stdout(&out)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let denied = lines(&[
        "audit",
        "query",
        "--json",
        "--run",
        &run,
        "--decision",
        "deny",
    ]);
    assert!(!denied.is_empty());
    assert!(
        denied
            .iter()
            .all(|r| r["data"]["decision"] == "deny" && r["data"]["run"] == run.as_str())
    );
    assert!(
        denied
            .iter()
            .any(|r| r["data"]["resource"].as_str().unwrap().ends_with("/.env"))
    );
    let deletes = lines(&[
        "audit",
        "query",
        "--json",
        "--verb",
        "fs.delete",
        "--actor",
        "tester",
    ]);
    assert!(
        deletes
            .iter()
            .all(|r| r["data"]["action"]["verb"] == "fs.delete")
    );
    assert!(
        deletes
            .iter()
            .any(|r| r["data"]["approval"]["approver"] == "tester")
    );
    let shell = lines(&["audit", "query", "--json", "--kind", "shell"]);
    assert!(
        !shell.is_empty()
            && shell
                .iter()
                .all(|r| r["data"]["action"]["verb"] == "shell.exec")
    );
    assert_eq!(
        lines(&["audit", "query", "--json", "--actor", "nobody"]),
        Vec::<Value>::new()
    );
    assert_eq!(
        lines(&[
            "audit",
            "query",
            "--json",
            "--until",
            "2000-01-01T00:00:00Z"
        ]),
        Vec::<Value>::new()
    );
    let bad = sb.run(&["audit", "query", "--since", "yesterday"]);
    assert_eq!(bad.status.code(), Some(2));

    let touched = sb.json(&["audit", "touched", &run, "--json"]);
    let fs: Vec<(String, String, String)> = touched["touched"]["fs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let res = r["resource"].as_str().unwrap();
            let rel = res
                .rsplit_once("/ws/")
                .map_or(res, |(_, rel)| rel)
                .to_owned();
            (
                r["verb"].as_str().unwrap().to_owned(),
                rel,
                r["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        fs,
        vec![
            ("fs.list".into(), sb.ws.display().to_string(), "read".into()),
            (
                "fs.read".into(),
                "notes/meeting-2026-11-20.md".into(),
                "read".into()
            ),
            (
                "fs.read".into(),
                "notes/meeting-2026-11-27.md".into(),
                "read".into()
            ),
            ("fs.create".into(), "SUMMARY.md".into(), "changed".into()),
            ("fs.read".into(), ".env".into(), "refused".into()),
            ("fs.delete".into(), "build".into(), "changed".into()),
        ]
    );
    let delete = touched["touched"]["fs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["verb"] == "fs.delete")
        .unwrap();
    assert_eq!(delete["by"], "tester (approved once, via terminal)");
    let env = touched["touched"]["fs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["status"] == "refused")
        .unwrap();
    assert_eq!(env["by"], "denied by policy project:no-secret-files");
    assert_eq!(touched["touched"]["shell"][0]["status"], "changed");
}

#[test]
fn rotating_the_signing_key_keeps_history_verifiable() {
    let sb = Sandbox::init();
    let model = sb.transcript("version: 1\nturns:\n  - calls:\n      - tool: list_dir\n        args: { path: . }\n  - say: done\n");
    assert_eq!(
        sb.run(&["run", "--model", &model, "before"]).status.code(),
        Some(0)
    );
    let old_pub = std::fs::read_to_string(sb.ws.join(".warrant/keys/audit.pub")).unwrap();
    let rotated = sb.run(&["audit", "keys", "rotate"]);
    assert_eq!(rotated.status.code(), Some(0), "{}", stderr(&rotated));
    assert!(
        stdout(&rotated).contains("still verify"),
        "{}",
        stdout(&rotated)
    );
    assert_ne!(
        std::fs::read_to_string(sb.ws.join(".warrant/keys/audit.pub")).unwrap(),
        old_pub
    );
    assert_eq!(
        sb.run(&["run", "--model", &model, "after"]).status.code(),
        Some(0)
    );

    // The installation verifies the whole chain, across the rotation.
    let verify = sb.run(&["audit", "verify"]);
    assert_eq!(verify.status.code(), Some(0), "{}", stdout(&verify));
    // An auditor with the exported keys verifies the sink's copy; with only the old key, the
    // first record signed by the new one is named.
    let keys = sb.run(&["audit", "keys", "export"]);
    assert_eq!(
        stdout(&keys)
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .count(),
        2,
        "{}",
        stdout(&keys)
    );
    let all = sb.dir.path().join("all.txt");
    std::fs::write(&all, &keys.stdout).unwrap();
    let old = sb.dir.path().join("old.txt");
    std::fs::write(&old, &old_pub).unwrap();
    let sink = sb.ws.join(".warrant/audit/audit.jsonl");
    let with = |k: &std::path::Path| {
        sb.run(&[
            "audit",
            "verify",
            "--json",
            "--file",
            sink.to_str().unwrap(),
            "--pubkeys",
            k.to_str().unwrap(),
        ])
    };
    assert_eq!(with(&all).status.code(), Some(0));
    let partial = with(&old);
    assert_eq!(partial.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&partial.stdout).unwrap();
    assert_eq!(
        report["checked"][0]["report"]["first_problem"]["kind"],
        "unknown_key"
    );
}

/// The process dies after committing events (and their audit records) but before delivering
/// them: nothing is lost, the next delivery sends them.
#[test]
fn records_committed_before_a_crash_are_delivered_after_it() {
    let sb = Sandbox::init();
    let model = sb.transcript("version: 1\nturns:\n  - calls:\n      - tool: list_dir\n        args: { path: . }\n  - say: done\n");
    let out = sb
        .cmd(&["run", "--model", &model, "t"])
        .env("WARRANT_FAULT", "after:4")
        .output()
        .unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&out.status),
        Some(9)
    );
    let sink = sb.ws.join(".warrant/audit/audit.jsonl");
    let delivered = std::fs::read_to_string(&sink)
        .unwrap_or_default()
        .lines()
        .count();
    assert_eq!(delivered, 0, "the killed process delivered nothing");
    let status = sb.json(&["audit", "status", "--json"]);
    let jsonl = status["sinks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sink"] == "jsonl")
        .unwrap()
        .clone();
    // Event 4 (`policy_decided`) is committed in one batch with `action_proposed` and
    // `effect_started` (group commit): killed after it, the whole batch, 5 records, is there.
    assert_eq!(
        (status["head"].clone(), jsonl["pending"].clone()),
        (json!(5), json!(5))
    );
    let flushed = sb.run(&["audit", "flush"]);
    assert_eq!(flushed.status.code(), Some(0), "{}", stderr(&flushed));
    assert_eq!(std::fs::read_to_string(&sink).unwrap().lines().count(), 5);
    assert_eq!(sb.run(&["audit", "verify"]).status.code(), Some(0));
}

/// The bounded outbox: with a sink down and the bound reached, new effects wait (and the run
/// says why) instead of piling up records nobody receives; the run's deadline still stops it.
/// Control: the same run with the receiver up completes.
#[test]
fn a_full_outbox_holds_new_effects_until_delivery_catches_up() {
    let setup = |healthy: bool| {
        let rx = receiver();
        rx.healthy.store(healthy, Ordering::SeqCst);
        let sb = Sandbox::init();
        let config = sb.ws.join(".warrant/config.toml");
        let mut text = std::fs::read_to_string(&config).unwrap();
        text.push_str(&format!(
            "\n[audit]\nmax_pending = 3\n[audit.sinks.central]\ntype = \"http\"\nurl = \"{}\"\n",
            rx.url
        ));
        std::fs::write(&config, text).unwrap();
        (rx, sb)
    };
    let transcript = "version: 1\nturns:\n  - calls:\n      - tool: list_dir\n        args: { path: . }\n  - calls:\n      - tool: read_file\n        args: { path: README.md }\n  - say: done\n";

    let (_rx, sb) = setup(false);
    let model = sb.transcript(transcript);
    let started = std::time::Instant::now();
    let out = sb.run(&["run", "--deadline", "3s", "--model", &model, "t"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
    assert!(
        stderr(&out).contains("not yet delivered to sink `central` (bound 3); new effects wait"),
        "{}",
        stderr(&out)
    );
    let (_, events) = sb.last_run();
    // The first call ran while the outbox was under its bound; the second waited and never ran.
    assert_eq!(
        events
            .iter()
            .filter(|e| e["kind"] == "effect_started")
            .count(),
        1,
        "no effect ran past the bound"
    );
    assert!(
        !events
            .iter()
            .any(|e| e["kind"] == "action_proposed" && e["payload"]["tool"] == "read_file")
    );
    assert!(
        events.last().unwrap()["payload"]["outcome"]["reason"]
            .as_str()
            .unwrap()
            .contains("deadline")
    );

    let (rx, sb) = setup(true);
    let model = sb.transcript(transcript);
    let out = sb.run(&["run", "--deadline", "60s", "--model", &model, "t"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("waiting:"), "{}", stderr(&out));
    let (_, events) = sb.last_run();
    assert_eq!(rx.records.lock().unwrap().len(), events.len());
}

#[test]
fn the_jsonl_sink_rotates_by_size_and_verifies_across_its_files() {
    let sb = Sandbox::init();
    let config = sb.ws.join(".warrant/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[audit]\njsonl_max_bytes = 4096\njsonl_fsync = \"never\"\n");
    std::fs::write(&config, text).unwrap();
    let model = sb.quickstart_model();
    let out = sb.run_stdin(
        &["run", "--prompt", "always", "--model", &model, "q"],
        "d\nno\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let files: Vec<String> = std::fs::read_dir(sb.ws.join(".warrant/audit"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(files.len() > 3, "{files:?}");
    assert!(
        files.iter().any(|f| f.starts_with("audit-000000000001-")),
        "{files:?}"
    );
    let verify = sb.run(&["audit", "verify"]);
    assert_eq!(verify.status.code(), Some(0), "{}", stdout(&verify));
    // Delivering again writes nothing twice.
    let again = sb.run(&["audit", "deliver"]);
    assert_eq!(again.status.code(), Some(0), "{}", stdout(&again));
    assert_eq!(sb.run(&["audit", "verify"]).status.code(), Some(0));
    // A rotated file that goes missing is named as a gap.
    let middle = files
        .iter()
        .filter(|f| f.starts_with("audit-"))
        .min()
        .unwrap()
        .clone();
    std::fs::remove_file(sb.ws.join(".warrant/audit").join(&middle)).unwrap();
    let broken = sb.run(&["audit", "verify"]);
    assert_eq!(broken.status.code(), Some(1), "{}", stdout(&broken));
    assert!(stdout(&broken).contains("Gap"), "{}", stdout(&broken));
}

/// `on_full = "drop"`: a sink that is down and over the bound skips what it lacks instead of
/// holding the run; the run records the gap, the receiver gets the marker once it is back, and
/// verifying the receiver's copy reports the gap.
#[test]
fn dropping_is_never_silent() {
    let rx = receiver();
    let sb = Sandbox::init();
    let config = sb.ws.join(".warrant/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!("\n[audit]\nmax_pending = 3\non_full = \"drop\"\n[audit.sinks.central]\ntype = \"http\"\nurl = \"{}\"\n", rx.url));
    std::fs::write(&config, text).unwrap();
    let model = sb.transcript("version: 1\nturns:\n  - calls:\n      - tool: list_dir\n        args: { path: . }\n  - calls:\n      - tool: read_file\n        args: { path: README.md }\n  - say: done\n");
    let out = sb.run(&["run", "--model", &model, "t"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("will never reach sink `central`"),
        "{}",
        stderr(&out)
    );
    let (_, events) = sb.last_run();
    let gap = events.iter().find(|e| e["kind"] == "audit_gap").unwrap();
    assert_eq!(gap["payload"]["sink"], "central");

    rx.healthy.store(true, Ordering::SeqCst);
    assert_eq!(sb.run(&["audit", "flush"]).status.code(), Some(0));
    let records = rx.records.lock().unwrap().clone();
    assert!(
        records.iter().any(|r| r["type"] == "dev.warrant.audit.gap"),
        "the receiver got the marker"
    );
    let copy = sb.dir.path().join("receiver.jsonl");
    std::fs::write(
        &copy,
        records
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
            + "\n",
    )
    .unwrap();
    let keys = sb.dir.path().join("keys.txt");
    std::fs::write(&keys, sb.run(&["audit", "keys", "export"]).stdout).unwrap();
    let verify = sb.run(&[
        "audit",
        "verify",
        "--json",
        "--file",
        copy.to_str().unwrap(),
        "--pubkeys",
        keys.to_str().unwrap(),
    ]);
    assert_eq!(verify.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&verify.stdout).unwrap();
    assert_eq!(
        report["checked"][0]["report"]["first_problem"]["kind"], "gap",
        "{report}"
    );
    // The installation's own copies are whole.
    assert_eq!(sb.run(&["audit", "verify"]).status.code(), Some(0));
}

/// Every record a real run produces (approvals, denials, parks, a key rotation) validates
/// against the JSON Schema of record version 1 that ships in the repository.
#[test]
fn every_record_of_a_real_run_matches_the_published_schema() {
    let sb = Sandbox::init();
    let model = sb.quickstart_model();
    let out = sb.run_stdin(
        &["run", "--prompt", "always", "--model", &model, "q"],
        "d\nno\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(sb.run(&["audit", "keys", "rotate"]).status.code(), Some(0));
    let out = sb.run(&["run", "--prompt", "never", "--model", &model, "again"]);
    assert_eq!(out.status.code(), Some(10));
    let schema: Value = serde_json::from_str(warrant_audit_schema()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let trail = std::fs::read_to_string(sb.ws.join(".warrant/audit/audit.jsonl")).unwrap();
    let mut kinds = std::collections::BTreeSet::new();
    for line in trail.lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&record)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{}: {errors:?}", record["type"]);
        kinds.insert(record["type"].as_str().unwrap().to_owned());
    }
    assert!(kinds.len() >= 11, "{kinds:?}");
}

fn warrant_audit_schema() -> &'static str {
    include_str!("../../../warrant-audit/schema/audit-record-v2.json")
}

/// The JSONL sink's copy carries a signed checkpoint: records cut from its end fail
/// `audit verify` with W-AUDIT-032, naming the checkpoint's record and the copy's last one,
/// and delivery does not quietly refill the copy. The same copy verified before the cut
/// passes (the negative control), and with the checkpoint switched off
/// (`WARRANT_TEST_DISABLE=checkpoint`) the cut goes unseen: the lines alone are a valid chain.
#[test]
fn a_sink_copy_cut_at_its_end_fails_verify_against_its_signed_checkpoint() {
    let sb = Sandbox::init();
    let model = sb.transcript("version: 1\nturns:\n  - calls:\n      - tool: list_dir\n        args: { path: . }\n      - tool: read_file\n        args: { path: .env }\n  - say: done\n");
    let out = sb.run(&["run", "--model", &model, "look"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let flushed = sb.run(&["audit", "flush"]);
    assert_eq!(flushed.status.code(), Some(0), "{}", stderr(&flushed));
    let head = sb.json(&["audit", "status", "--json"])["head"]
        .as_u64()
        .unwrap();
    let sink = sb.ws.join(".warrant/audit/audit.jsonl");
    let checkpoint = sb.ws.join(".warrant/audit/audit.jsonl.checkpoint");

    // Before the cut: the copy verifies, and its checkpoint vouches for every record.
    let before = sb.json(&["audit", "verify", "--json"]);
    assert_eq!(before["ok"], true, "{before}");
    let vouched = &before["checked"][1]["checkpoint"];
    assert_eq!(
        (
            vouched["ok"].clone(),
            vouched["checkpoint"]["seq"].clone(),
            vouched["path"].clone()
        ),
        (
            Value::from(true),
            Value::from(head),
            Value::from(".warrant/audit/audit.jsonl.checkpoint")
        )
    );

    // The last two records cut from the copy.
    let text = std::fs::read_to_string(&sink).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len() as u64, head);
    lines.truncate(lines.len() - 2);
    let cut = lines.iter().map(|l| format!("{l}\n")).collect::<String>();
    std::fs::write(&sink, &cut).unwrap();

    let after = sb.run(&["audit", "verify"]);
    assert_eq!(after.status.code(), Some(1), "{}", stdout(&after));
    let shown = stdout(&after).replace(&sb.ws.display().to_string(), "WS");
    insta::assert_snapshot!(shown);
    assert!(
        stdout(&after).contains(&format!(
            "[W-AUDIT-032] the sink copy's intact records end at record {}, but its signed checkpoint",
            head - 2
        )) && stdout(&after).contains(&format!("records up to {head} were delivered")),
        "{}",
        stdout(&after)
    );
    // Delivery refused to refill the cut copy, and said why.
    assert!(
        stderr(&after).contains("audit delivery to sink `jsonl` failed: [W-AUDIT-032]"),
        "{}",
        stderr(&after)
    );
    assert_eq!(std::fs::read_to_string(&sink).unwrap(), cut);
    let json = sb.run(&["audit", "verify", "--json"]);
    let report: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(
        (
            report["checked"][1]["ok"].clone(),
            report["checked"][1]["report"]["first_problem"].clone(),
            report["checked"][1]["checkpoint"]["code"].clone()
        ),
        (Value::from(false), Value::Null, Value::from("W-AUDIT-032"))
    );

    // An outside auditor with the copy, its checkpoint and the public keys finds it too.
    let keys = sb.run(&["audit", "keys", "export"]);
    let keyfile = sb.dir.path().join("keys.txt");
    std::fs::write(&keyfile, &keys.stdout).unwrap();
    let auditor = |disable: Option<&str>| {
        let mut cmd = sb.cmd(&[
            "audit",
            "verify",
            "--file",
            sink.to_str().unwrap(),
            "--pubkeys",
            keyfile.to_str().unwrap(),
        ]);
        if let Some(what) = disable {
            cmd.env("WARRANT_TEST_DISABLE", what);
        }
        cmd.output().unwrap()
    };
    let found = auditor(None);
    assert_eq!(found.status.code(), Some(1), "{}", stdout(&found));
    assert!(
        stdout(&found).contains("[W-AUDIT-032]"),
        "{}",
        stdout(&found)
    );
    // Negative control: without the checkpoint, the cut copy is a valid chain.
    let unseen = auditor(Some("checkpoint"));
    assert_eq!(unseen.status.code(), Some(0), "{}", stdout(&unseen));

    // A checkpoint edited to match the cut copy no longer verifies, and says so.
    let mut forged: Value =
        serde_json::from_str(&std::fs::read_to_string(&checkpoint).unwrap()).unwrap();
    forged["seq"] = (head - 2).into();
    forged["count"] = (head - 2).into();
    forged["hash"] = serde_json::from_str::<Value>(lines.last().unwrap()).unwrap()["hash"].clone();
    std::fs::write(&checkpoint, forged.to_string()).unwrap();
    let edited = auditor(None);
    assert_eq!(edited.status.code(), Some(1), "{}", stdout(&edited));
    assert!(
        stdout(&edited).contains("[W-AUDIT-033]")
            && stdout(&edited).contains("the signature does not verify"),
        "{}",
        stdout(&edited)
    );
}
