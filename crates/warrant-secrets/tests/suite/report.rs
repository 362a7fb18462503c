//! File scanning for people: excludes, fingerprints, baselines, and the SARIF shape.
use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use serde_json::Value;
use warrant_secrets::Scanner;
use warrant_secrets::report::{Baseline, scan_paths};

use super::scan::{ALNUM, noise};

fn tree(dir: &Path) -> (String, String) {
    let pat = format!("ghp_{}", noise(70, 36, ALNUM));
    let aws = format!("AKIA{}", noise(71, 16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"));
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::create_dir_all(dir.join("target")).unwrap();
    std::fs::write(dir.join(".gitignore"), "target/\n*.log\n").unwrap();
    std::fs::write(
        dir.join("src/main.rs"),
        format!("fn main() {{\n    let t = \"{pat}\";\n}}\n"),
    )
    .unwrap();
    std::fs::write(dir.join("deploy.env"), format!("AWS_ACCESS_KEY_ID={aws}\n")).unwrap();
    std::fs::write(dir.join("target/out.txt"), format!("{pat}\n")).unwrap();
    std::fs::write(dir.join("build.log"), format!("{pat}\n")).unwrap();
    std::fs::write(dir.join("clean.txt"), "nothing here\n").unwrap();
    (pat, aws)
}

#[test]
fn ignored_files_are_skipped_findings_never_hold_the_secret() {
    let dir = tempfile::tempdir().unwrap();
    let (pat, aws) = tree(dir.path());
    let s = Scanner::default_rules();
    let r = scan_paths(&s, &[dir.path().to_owned()], None).unwrap();
    let got: Vec<(String, String, usize, usize)> = r
        .findings
        .iter()
        .map(|f| {
            let p = f.path.rsplit('/').next().unwrap_or("").to_owned();
            (p, f.rule.clone(), f.line, f.column)
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "deploy.env".to_owned(),
                "aws-access-token".to_owned(),
                1,
                19
            ),
            ("main.rs".to_owned(), "github-pat".to_owned(), 2, 14),
        ]
    );
    assert_eq!(r.files, 4, ".gitignore, src/main.rs, deploy.env, clean.txt");
    for out in [r.text(), r.json().to_string(), r.sarif("0").to_string()] {
        assert!(!out.contains(&pat) && !out.contains(&aws), "{out}");
    }
}

#[test]
fn a_baseline_accepts_known_findings_by_fingerprint_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    let s = Scanner::default_rules();
    let roots: Vec<PathBuf> = vec![dir.path().to_owned()];
    let first = scan_paths(&s, &roots, None).unwrap();
    let base = dir.path().join("baseline.json");
    std::fs::write(&base, first.json().to_string()).unwrap();
    let b = Baseline::load(&base).unwrap();
    assert_eq!(b.fingerprints.len(), 2);
    let again = scan_paths(&s, &roots, Some(&b)).unwrap();
    assert!(again.findings.is_empty(), "{:?}", again.findings);
    assert_eq!(again.baselined, 2);
    // the secret moving within the file keeps its fingerprint; a new secret is new
    std::fs::write(
        dir.path().join("src/main.rs"),
        format!(
            "// moved\n\nfn main() {{ let t = \"ghp_{}\"; let u = \"ghp_{}\"; }}\n",
            noise(70, 36, ALNUM),
            noise(72, 36, ALNUM)
        ),
    )
    .unwrap();
    let third = scan_paths(&s, &roots, Some(&b)).unwrap();
    assert_eq!(third.findings.len(), 1);
    assert_eq!(third.baselined, 2);
    let fp = &third.findings[0].fingerprint;
    assert!(
        fp.starts_with("github-pat:") && fp.contains("src/main.rs:"),
        "{fp}"
    );
    // plain-text baselines (one fingerprint a line) work too
    std::fs::write(&base, format!("# accepted\n{fp}\n")).unwrap();
    assert!(Baseline::load(&base).unwrap().fingerprints.contains(fp));
    std::fs::write(&base, "{\"not\": 1}").unwrap();
    assert_eq!(
        warrant_core::Coded::code(&Baseline::load(&base).unwrap_err()),
        "W-SECRETS-016"
    );
}

/// The properties SARIF 2.1.0 requires (§3.13 sarifLog: version, runs; §3.14 run: tool; §3.18
/// toolComponent: name; §3.27 result: message; §3.49 reportingDescriptor: id; §3.11 message:
/// text or id), and what code-scanning dashboards read (locations, region lines >= 1,
/// ruleIndex pointing at the rule).
pub fn assert_sarif_shape(v: &Value) {
    assert_eq!(v["version"], "2.1.0");
    let runs = v["runs"].as_array().expect("runs");
    assert!(!runs.is_empty());
    for run in runs {
        let driver = &run["tool"]["driver"];
        assert!(driver["name"].is_string(), "tool.driver.name");
        let rules = driver["rules"].as_array().cloned().unwrap_or_default();
        for r in &rules {
            assert!(r["id"].is_string(), "rule id");
        }
        for res in run["results"].as_array().expect("results") {
            assert!(res["message"]["text"].is_string(), "result.message.text");
            let idx = res["ruleIndex"].as_u64().expect("ruleIndex") as usize;
            assert_eq!(rules[idx]["id"], res["ruleId"]);
            assert!(["none", "note", "warning", "error"].contains(&res["level"].as_str().unwrap()));
            for loc in res["locations"].as_array().expect("locations") {
                let pl = &loc["physicalLocation"];
                assert!(pl["artifactLocation"]["uri"].is_string());
                if let Some(region) = pl.get("region") {
                    assert!(region["startLine"].as_u64().unwrap() >= 1);
                    assert!(region["startColumn"].as_u64().unwrap() >= 1);
                }
            }
        }
    }
}

#[test]
fn the_sarif_report_has_the_required_shape() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    let s = Scanner::default_rules();
    let r = scan_paths(&s, &[dir.path().to_owned()], None).unwrap();
    let v = r.sarif("0.1.0");
    assert_sarif_shape(&v);
    assert_eq!(v["runs"][0]["results"].as_array().unwrap().len(), 2);
    // negative control: the checker rejects a log without a driver name
    let mut broken = v;
    broken["runs"][0]["tool"]["driver"]
        .as_object_mut()
        .unwrap()
        .remove("name");
    assert!(std::panic::catch_unwind(|| assert_sarif_shape(&broken)).is_err());
}

#[test]
fn a_missing_path_is_an_error() {
    let s = Scanner::default_rules();
    let e = scan_paths(&s, &[PathBuf::from("/nonexistent/warrant-secrets")], None).unwrap_err();
    assert_eq!(warrant_core::Coded::code(&e), "W-SECRETS-017");
}
