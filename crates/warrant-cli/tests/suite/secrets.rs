//! `warrant secrets scan` (text, JSON, SARIF; exit codes; baselines; excludes), a project's
//! `.gitleaks.toml` enforced in runs, layering, and secrets cut by the head/tail capture.

use std::fs;

use pretty_assertions::assert_eq;
use serde_json::Value;
use warrant_exec::HeadTail;
use warrant_secrets::{CUT_SECRET_RULE, Redactor, Scanner};

use super::harness::{Sandbox, stderr, stdout};

// Fixed, generated-looking values (not real credentials).
const PAT: &str = "ghp_Xq7Lm2Vb9Tz4Kw1Rn8Yc3Hf6Jd0Sp5Ga2Ue7";
const AWS: &str = "AKIAZ7QW3ERT5YUI2OPL";
const ACME: &str = "acme_k3j5h6g7f8d9s0a1";

fn tree(sb: &Sandbox) {
    sb.write("scan/.gitignore", "ignored/\n");
    sb.write(
        "scan/src/main.rs",
        &format!("fn main() {{\n    let t = \"{PAT}\";\n}}\n"),
    );
    sb.write(
        "scan/deploy.env",
        &format!("REGION=eu-west-1\nAWS_ACCESS_KEY_ID={AWS}\n"),
    );
    sb.write("scan/ignored/copy.txt", &format!("{PAT}\n"));
    sb.write("scan/README.md", "nothing secret here\n");
}

fn no_secret_in(out: &str) {
    for s in [PAT, AWS, ACME] {
        assert!(!out.contains(s), "a secret was printed: {out}");
    }
}

#[test]
fn secrets_scan_text_json_and_sarif_outputs() {
    let sb = Sandbox::init();
    tree(&sb);
    let text = sb.run(&["secrets", "scan", "scan"]);
    assert_eq!(text.status.code(), Some(1), "{}", stderr(&text));
    no_secret_in(&stdout(&text));
    insta::assert_snapshot!("secrets_scan_text", stdout(&text));
    let json = sb.run(&["secrets", "scan", "scan", "--json"]);
    assert_eq!(json.status.code(), Some(1));
    no_secret_in(&stdout(&json));
    let v: Value = serde_json::from_slice(&json.stdout).unwrap();
    insta::assert_json_snapshot!("secrets_scan_json", v);
    let sarif = sb.run(&["secrets", "scan", "scan", "--sarif"]);
    assert_eq!(sarif.status.code(), Some(1));
    no_secret_in(&stdout(&sarif));
    let v: Value = serde_json::from_slice(&sarif.stdout).unwrap();
    assert_eq!(v["version"], "2.1.0");
    assert_eq!(v["runs"][0]["tool"]["driver"]["name"], "warrant-secrets");
    insta::assert_json_snapshot!("secrets_scan_sarif", v);
}

#[test]
fn secrets_scan_exit_codes_and_baseline() {
    let sb = Sandbox::init();
    tree(&sb);
    let clean = sb.run(&["secrets", "scan", "scan/README.md"]);
    assert_eq!(clean.status.code(), Some(0), "{}", stderr(&clean));
    let missing = sb.run(&["secrets", "scan", "no/such/dir"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains("W-SECRETS-017"),
        "{}",
        stderr(&missing)
    );
    let out = sb.run(&["secrets", "scan", "scan", "--json"]);
    fs::write(sb.ws.join("baseline.json"), &out.stdout).unwrap();
    let accepted = sb.run(&["secrets", "scan", "scan", "--baseline", "baseline.json"]);
    assert_eq!(accepted.status.code(), Some(0), "{}", stdout(&accepted));
    assert!(stdout(&accepted).contains("2 accepted by the baseline"));
    // a new secret is not covered by the baseline
    sb.write("scan/new.env", &format!("GH={}\n", PAT.replace('X', "Z")));
    let again = sb.run(&[
        "secrets",
        "scan",
        "scan",
        "--baseline",
        "baseline.json",
        "--json",
    ]);
    assert_eq!(again.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(v["findings"].as_array().unwrap().len(), 1);
    assert_eq!(v["findings"][0]["path"], "scan/new.env");
    let bad = sb.run(&["secrets", "scan", "scan", "--baseline", "nope.json"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("W-SECRETS-016"));
}

const PROJECT_RULES: &str = r#"
[extend]
useDefault = true

[[rules]]
id = "acme-token"
description = "ACME deploy token"
regex = '''\b(acme_[a-z0-9]{16})\b'''
keywords = ["acme_"]
"#;

#[test]
fn a_project_gitleaks_toml_is_loaded_by_scan_and_enforced_in_runs() {
    let sb = Sandbox::init();
    sb.write(".gitleaks.toml", PROJECT_RULES);
    let cfg = fs::read_to_string(sb.ws.join(".warrant/config.toml")).unwrap();
    sb.write(
        ".warrant/config.toml",
        &format!("{cfg}\n[secrets]\nrules = \".gitleaks.toml\"\n"),
    );
    sb.write("notes/deploy.txt", &format!("deploy with {ACME} today\n"));
    let out = sb.run(&["secrets", "scan", "notes", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["findings"][0]["rule"], "acme-token");
    // negative control: with explicit default rules the custom token is not found
    let plain = sb.write("plain.toml", "[extend]\nuseDefault = true\n");
    let out = sb.run(&[
        "secrets",
        "scan",
        "notes",
        "--rules",
        plain.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    // a run reading the file sees it redacted under the project's rule
    let model = sb.transcript(
        "version: 1\nturns:\n  - calls:\n      - tool: read_file\n        args: { path: notes/deploy.txt }\n  - say: done\n",
    );
    let run = sb.run(&["run", "--model", &model, "read the notes"]);
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let (_, events) = sb.last_run();
    let log = serde_json::to_string(&events).unwrap();
    assert!(!log.contains(ACME), "the custom secret reached the journal");
    assert!(log.contains("[REDACTED:acme-token]"), "{log}");
}

#[test]
fn a_project_cannot_disable_a_managed_rule_and_bad_rules_stop_the_run() {
    let sb = Sandbox::init();
    fs::write(
        sb.managed.join("rules.toml"),
        "[extend]\nuseDefault = true\n",
    )
    .unwrap();
    fs::write(
        sb.managed.join("config.toml"),
        "[secrets]\nrules = \"rules.toml\"\n",
    )
    .unwrap();
    sb.write(
        ".gitleaks.toml",
        "[extend]\nuseDefault = true\ndisabledRules = [\"github-pat\"]\n",
    );
    let cfg = fs::read_to_string(sb.ws.join(".warrant/config.toml")).unwrap();
    sb.write(
        ".warrant/config.toml",
        &format!("{cfg}\n[secrets]\nrules = \".gitleaks.toml\"\n"),
    );
    sb.write("a.txt", "nothing\n");
    let out = sb.run(&["secrets", "scan", "a.txt"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("W-SECRETS-014"), "{}", stderr(&out));
    assert!(stderr(&out).contains("github-pat"), "{}", stderr(&out));
    let model = sb.transcript("version: 1\nturns:\n  - say: hi\n");
    let run = sb.run(&["run", "--model", &model, "t"]);
    assert_eq!(run.status.code(), Some(2), "{}", stderr(&run));
    assert!(stderr(&run).contains("W-SECRETS-014"), "{}", stderr(&run));
    // an unsupported construct names the rule
    sb.write(
        ".gitleaks.toml",
        "[[rules]]\nid = \"multi\"\nregex = 'a'\nskipReport = true\n",
    );
    let out = sb.run(&["secrets", "scan", "a.txt"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("W-SECRETS-010") && stderr(&out).contains("multi"));
}

fn redactor() -> Redactor {
    Redactor::new(Scanner::default_rules(), Vec::new())
}

/// The output a command printed, captured as `run_command` captures it.
fn captured(out: &str, head: usize, tail: usize) -> String {
    let mut ht = HeadTail::new(head, tail);
    ht.push(out.as_bytes());
    ht.finish().text
}

fn body_line(i: usize) -> String {
    // 64 characters of key-like text, different on every line.
    (0..64)
        .map(|j| {
            let c = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
                [(i * 7 + j * 13 + i * j) % 64];
            c as char
        })
        .collect()
}

#[test]
fn a_secret_cut_by_the_head_tail_capture_is_still_masked() {
    let r = redactor();
    let filler = "x".repeat(5000);
    // Cut at the end of the head: the head keeps `ghp_` and some of the value.
    let text = captured(&format!("value: {PAT}{filler}\nlast line\n"), 30, 20);
    assert!(
        text.contains(&PAT[..17]),
        "precondition: the head holds a prefix: {text}"
    );
    assert!(
        r.scanner().scan(&text).is_empty(),
        "precondition: no rule sees half a secret"
    );
    let (red, report) = r.redact(&text);
    assert!(!red.contains(&PAT[..8]), "{red}");
    assert!(report.counts.contains_key(CUT_SECRET_RULE), "{report:?}");
    // Cut at the start of the tail: the tail keeps the end of the value.
    let text = captured(&format!("first line\n{filler}{PAT}\n"), 16, 25);
    let suffix = &PAT[PAT.len() - 20..];
    assert!(text.contains(suffix), "precondition: {text}");
    let (red, _) = r.redact(&text);
    assert!(!red.contains(&suffix[..12]), "{red}");
    // A private key whose END line was cut away.
    let body: String = (0..30).map(|i| format!("{}\n", body_line(i))).collect();
    let key = format!("-----BEGIN RSA PRIVATE KEY-----\n{body}-----END RSA PRIVATE KEY-----\n");
    let text = captured(&format!("{key}{filler}"), 600, 10);
    assert!(text.contains("BEGIN RSA PRIVATE KEY"), "precondition");
    let (red, _) = r.redact(&text);
    assert!(!red.contains(&body[..64]), "{red}");
    assert!(red.contains("BEGIN RSA PRIVATE KEY"), "{red}");
}

#[test]
fn negative_control_without_a_cut_nothing_is_masked_for_being_at_a_boundary() {
    let r = redactor();
    let text = captured("ordinary output\nwith several words\n", 4096, 4096);
    assert_eq!(r.redact(&text).0, text);
    // a cut through short words masks nothing
    let text = captured(
        &format!("{}\n{}", "ab cd ".repeat(100), "ef gh ".repeat(100)),
        31,
        31,
    );
    let (red, report) = r.redact(&text);
    assert_eq!(red, text);
    assert!(report.is_empty());
}
