//! Artifacts (issue 17): a scripted run makes a document, a spreadsheet, a presentation and a
//! report; each opens in its reference reader (python-docx, openpyxl, python-pptx) with its
//! content checked, each envelope verifies with securesystemslib given only the public key, and
//! `warrant artifacts verify` says which part changed when one does. Bad input is refused with
//! its code before anything is written.

use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::harness::{Sandbox, python_venv, stdout};

const READERS: [&str; 4] = [
    "python-docx==1.2.0",
    "python-pptx==1.0.2",
    "openpyxl==3.1.5",
    "securesystemslib[crypto]==1.6.0",
];

/// A venv with the reference readers and securesystemslib, made the first time; never skipped.
fn readers() -> PathBuf {
    static READY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    READY
        .get_or_init(|| {
            python_venv(
                "artifacts-py",
                "import docx, pptx, openpyxl, securesystemslib.dsse",
                &READERS,
            )
            .join("bin/python")
        })
        .clone()
}

/// The README's tour transcript: the test keeps the example true.
const FOUR: &str = include_str!("../../../../examples/artifacts/transcript.yaml");

fn keys_file(sb: &Sandbox) -> (PathBuf, String, String) {
    let out = sb.run(&["audit", "keys", "export"]);
    let text = stdout(&out);
    let path = sb.dir.path().join("keys.pub");
    std::fs::write(&path, &text).unwrap();
    let kid = text
        .lines()
        .find_map(|l| l.strip_prefix("# kid "))
        .unwrap()
        .trim()
        .to_owned();
    let public = text
        .lines()
        .find(|l| !l.starts_with('#') && !l.trim().is_empty())
        .unwrap()
        .trim()
        .to_owned();
    (path, public, kid)
}

fn verify(sb: &Sandbox, file: &Path, pubkeys: Option<&Path>) -> (i32, Value) {
    let file = file.display().to_string();
    let mut args = vec!["artifacts", "verify", file.as_str(), "--json"];
    let keys;
    if let Some(k) = pubkeys {
        keys = k.display().to_string();
        args.extend(["--pubkeys", keys.as_str()]);
    }
    let out = sb.run(&args);
    (
        out.status.code().unwrap(),
        serde_json::from_slice(&out.stdout).unwrap(),
    )
}

fn parts(v: &Value) -> Vec<String> {
    v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            format!(
                "{} {}",
                p["part"].as_str().unwrap(),
                p["code"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn four_artifacts_open_in_their_readers_and_verify_with_only_the_public_key() {
    let sb = Sandbox::init();
    let out = sb.run(&["run", "--model", &sb.transcript(FOUR), "make the artifacts"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        super::harness::stderr(&out)
    );
    let (run, _) = sb.last_run();

    // The reference readers, and securesystemslib with only the public key.
    let (keys, public, kid) = keys_file(&sb);
    let checked = std::process::Command::new(readers())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/artifacts_check.py"))
        .arg(sb.ws.join("out"))
        .args([&public, &kid])
        .output()
        .unwrap();
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stdout)
    );
    let read: Value = serde_json::from_slice(&checked.stdout).unwrap();
    let read = &read["read"];
    assert_eq!(
        read["docx"],
        json!({
            "paragraphs": [
                ["Title", "Quarterly brief"], ["Heading 1", "Summary"],
                [null, "Revenue grew by 12% in Q3."],
                ["List Bullet", "first point"], ["List Bullet", "second point"],
                ["List Number", "step one"], ["List Number", "step two"],
                ["Heading 2", "Appendix"], [null, "The end."]
            ],
            "bold": ["grew"],
            "italic": ["12%"],
            "tables": [[["Region", "Sales"], ["North", "120"], ["South", "80"]]],
            "page_breaks": 1
        })
    );
    assert_eq!(read["xlsx"]["sheets"], json!(["Sales"]));
    assert_eq!(
        read["xlsx"]["rows"],
        json!([
            ["Region", "Q1", "Q2", "Total"],
            ["North", 10, 20, "=SUM(B2:C2)"],
            ["South", 5.5, true, null]
        ])
    );
    assert_eq!(read["xlsx"]["header_bold"], json!([true, true, true, true]));
    assert_eq!(read["xlsx"]["freeze"], json!("B2"));
    // Excel's widths carry its padding (0.71 of a character).
    assert_eq!(read["xlsx"]["widths"][0], json!(20.7109375));
    assert_eq!(read["xlsx"]["widths"][3], json!(12.7109375));
    assert_eq!(
        read["pptx"],
        json!([
            {"title": "Overview", "texts": ["one\ntwo"], "tables": [], "notes": "Say hello."},
            {"title": "Compare", "texts": ["left a\nleft b", "right a"], "tables": [], "notes": null},
            {"title": "Numbers", "texts": [], "tables": [[["k", "v"], ["a", "1"]]], "notes": null}
        ])
    );
    assert!(
        read["html"]
            .as_str()
            .unwrap()
            .contains("<p>Some <em>text</em> &amp; &lt;b&gt;tags&lt;/b&gt;.</p>")
    );
    for (name, tool) in [
        ("brief.docx", "create_document"),
        ("sales.xlsx", "create_spreadsheet"),
        ("deck.pptx", "create_presentation"),
        ("report.html", "create_report"),
    ] {
        assert_eq!(
            read["provenance"][name],
            json!({"predicateType": "https://warrant.dev/provenance/artifact/v1", "tool": tool, "run": run})
        );
        // And `warrant artifacts verify`, with the installation and with only the key list.
        let file = sb.ws.join("out").join(name);
        let (code, v) = verify(&sb, &file, None);
        assert_eq!(
            (code, &v["key"], &v["custody"]["run"]),
            (0, &json!("current"), &json!(run))
        );
        let (code, v) = verify(&sb, &file, Some(&keys));
        assert_eq!((code, &v["key"]), (0, &json!("listed")), "{v}");
        assert_eq!(v["custody"]["asked_by"], json!("tester"));
        // The taint is the kernel's: any completed tool result before the call counts as
        // untrusted, so only the first call of the run made its file from trusted input.
        assert_eq!(
            v["predicate"]["untrusted_input"],
            json!(name != "brief.docx"),
            "{name}"
        );
        assert_eq!(v["custody"]["approved"], json!("by policy"));
    }
    let listed = sb.json(&["artifacts", "list", "--run", &run, "--json"]);
    assert_eq!(listed.as_array().unwrap().len(), 4);

    // One byte of the artifact changed: the checksum binding fails, and says so.
    let docx = sb.ws.join("out/brief.docx");
    let mut bytes = std::fs::read(&docx).unwrap();
    bytes[100] ^= 1;
    std::fs::write(&docx, &bytes).unwrap();
    let (code, v) = verify(&sb, &docx, Some(&keys));
    assert_eq!(
        (code, parts(&v)),
        (1, vec!["artifact W-ARTIFACT-011".to_owned()])
    );

    // The envelope changed (its payload re-encoded with one byte different): the signature.
    let side = sb.ws.join("out/sales.xlsx.intoto.jsonl");
    let mut env: Value =
        serde_json::from_str(std::fs::read_to_string(&side).unwrap().trim()).unwrap();
    let payload = env["payload"].as_str().unwrap().to_owned();
    let mut chars: Vec<char> = payload.chars().collect();
    chars[20] = if chars[20] == 'A' { 'B' } else { 'A' };
    env["payload"] = json!(chars.into_iter().collect::<String>());
    std::fs::write(&side, env.to_string()).unwrap();
    let (code, v) = verify(&sb, &sb.ws.join("out/sales.xlsx"), Some(&keys));
    assert_eq!(
        (code, parts(&v)),
        (1, vec!["envelope W-DSSE-005".to_owned()])
    );

    // A key the verifier does not know fails; the list given is all that is trusted.
    let stranger = sb.dir.path().join("stranger.pub");
    std::fs::write(&stranger, format!("{}\n", "11".repeat(32))).unwrap();
    let (code, v) = verify(&sb, &sb.ws.join("out/deck.pptx"), Some(&stranger));
    assert_eq!((code, parts(&v)), (1, vec!["key W-DSSE-004".to_owned()]));

    // After a rotation the old key is retired: its envelopes still verify, and say so.
    let out = sb.run(&["audit", "keys", "rotate"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        super::harness::stderr(&out)
    );
    let (code, v) = verify(&sb, &sb.ws.join("out/deck.pptx"), None);
    assert_eq!(
        (code, &v["key"], &v["kid"]),
        (0, &json!("retired"), &json!(kid))
    );
}

fn refused(sb: &Sandbox, tool: &str, args: Value) -> (String, String) {
    let yaml = format!(
        "version: 1\nturns:\n  - calls:\n      - tool: {tool}\n        args: {args}\n  - say: done\n"
    );
    let out = sb.run(&[
        "run",
        "--json",
        "--model",
        &sb.transcript(&yaml),
        "bad input",
    ]);
    let events: Vec<Value> = stdout(&out)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    events
        .iter()
        .find(|e| e["kind"] == "call_refused")
        .map(|e| {
            (
                e["payload"]["code"].as_str().unwrap_or_default().to_owned(),
                e["payload"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .unwrap_or_else(|| (String::new(), stdout(&out)))
}

#[test]
fn bad_input_is_refused_before_anything_is_written() {
    let sb = Sandbox::init();
    let rows: Vec<Value> = (0..50_000).map(|i| json!([i])).collect();
    let cases = [
        (
            "create_document",
            json!({"path": "r.docx", "blocks": [{"table": [["a", "b"], ["1"]]}]}),
            "W-ARTIFACT-002",
        ),
        (
            "create_spreadsheet",
            json!({"path": "big.xlsx", "sheets": [{"name": "Big", "rows": rows}]}),
            "W-ARTIFACT-003",
        ),
        (
            "create_report",
            json!({"path": "notes.txt.docx", "markdown": "x"}),
            "W-ARTIFACT-006",
        ),
        (
            "create_report",
            json!({"path": "leak.md", "markdown": "token ghp_8f3KqL0vX2mB9nR4tY7wZ1cD6hJ5sP3aE2gU"}),
            "W-ARTIFACT-004",
        ),
    ];
    for (tool, args, code) in cases {
        let (got, message) = refused(&sb, tool, args);
        assert_eq!(got, code, "{tool}: {message}");
    }
    for name in ["r.docx", "big.xlsx", "notes.txt.docx", "leak.md"] {
        assert!(!sb.exists(name), "{name} was written");
    }
    // Outside the workspace and onto a protected name: denied by policy, nothing written.
    for path in ["/tmp/warrant-artifact-outside.md", ".env.md", ".git/x.md"] {
        let yaml = format!(
            "version: 1\nturns:\n  - calls:\n      - tool: create_report\n        args: {{path: \"{path}\", markdown: \"x\"}}\n  - say: done\n"
        );
        let out = sb.run(&["run", "--model", &sb.transcript(&yaml), "place"]);
        let text = stdout(&out);
        assert!(text.contains("deny"), "{path}: {text}");
    }
    assert!(!Path::new("/tmp/warrant-artifact-outside.md").exists());
    assert!(!sb.exists(".env.md"));

    // The negative control: with the scanner off, the same secret lands in the report.
    let mut off = Sandbox::init();
    off.extra_env
        .push(("WARRANT_TEST_DISABLE".into(), "artifact-scan".into()));
    let (code, _) = refused(
        &off,
        "create_report",
        json!({"path": "leak.md", "markdown": "token ghp_8f3KqL0vX2mB9nR4tY7wZ1cD6hJ5sP3aE2gU"}),
    );
    assert_eq!(code, "");
    assert!(off.exists("leak.md"));
}

/// Rewrites the zip at `from` into `to` with Python's zipfile: `op` is `add`, `remove` or
/// `change`, on member `name`.
fn rezip(from: &Path, to: &Path, op: &str, name: &str) {
    let script = r#"
import sys, zipfile
src, dst, op, name = sys.argv[1:5]
with zipfile.ZipFile(src) as a, zipfile.ZipFile(dst, "w") as b:
    for i in a.infolist():
        data = a.read(i.filename)
        if i.filename == name and op == "remove":
            continue
        if i.filename == name and op == "change":
            data = data[:-1] + bytes([data[-1] ^ 1])
        b.writestr(i, data)
    if op == "add":
        b.writestr(name, b"planted\n")
"#;
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(from)
        .arg(to)
        .args([op, name])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn a_run_exports_to_a_reproducible_bundle_that_verifies_elsewhere_with_only_the_keys() {
    let sb = Sandbox::init();
    let out = sb.run(&["run", "--model", &sb.transcript(FOUR), "make the artifacts"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        super::harness::stderr(&out)
    );
    let (run, _) = sb.last_run();
    let (keys, _, _) = keys_file(&sb);
    let a = sb.dir.path().join("a.zip");
    let b = sb.dir.path().join("b.zip");
    for f in [&a, &b] {
        let f = f.display().to_string();
        let exported = sb.json(&["runs", "export", &run, "--out", &f, "--json"]);
        assert_eq!(exported["members"], json!(17), "{exported}");
    }
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());

    // A fresh directory with no installation: only the bundle and the public keys.
    let fresh = tempfile::tempdir().unwrap();
    let check = |file: &Path| {
        let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("warrant"))
            .current_dir(fresh.path())
            .env("HOME", fresh.path())
            .env_remove("WARRANT_TEST_DISABLE")
            .args(["runs", "verify"])
            .arg(file)
            .arg("--pubkeys")
            .arg(&keys)
            .arg("--json")
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code().unwrap(), report)
    };
    let (code, report) = check(&a);
    assert_eq!(code, 0, "{report}");
    assert_eq!(
        (
            &report["run"],
            &report["records"],
            report["proves"].as_array().unwrap().len()
        ),
        (&json!(run), &report["events"], 5),
        "{report}"
    );
    // The policy texts in the bundle, loaded again, are the set the run decided under.
    assert!(
        report["proves"].as_array().unwrap().iter().any(|p| p
            .as_str()
            .unwrap()
            .contains("are the set the run decided under")),
        "{report}"
    );
    assert_eq!(report["artifacts"].as_array().unwrap().len(), 4);

    // The manifest is a standard DSSE envelope: securesystemslib verifies it with the key alone.
    let (_, public, kid) = keys_file(&sb);
    let script = r#"
import json, sys, zipfile
from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey
env = Envelope.from_dict(json.loads(zipfile.ZipFile(sys.argv[1]).read("manifest.dsse.json")))
key = SSlibKey(sys.argv[3], "ed25519", "ed25519", {"public": sys.argv[2]})
assert sys.argv[3] in env.verify([key], 1)
print(env.payload_type, len(json.loads(env.payload)["members"]))
"#;
    let checked = std::process::Command::new(readers())
        .args(["-c", script])
        .arg(&a)
        .args([&public, &kid])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&checked.stdout).trim(),
        "application/vnd.warrant.evidence-manifest+json 16",
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );

    // A member added, removed or changed: refused, saying which.
    for (op, name, code) in [
        ("add", "run/extra.json", "W-BUNDLE-007"),
        ("remove", "audit/records.jsonl", "W-BUNDLE-009"),
        ("change", "run/events.json", "W-BUNDLE-008"),
        ("change", "artifacts/out/brief.docx", "W-BUNDLE-008"),
    ] {
        let bad = sb.dir.path().join(format!("bad-{op}.zip"));
        rezip(&a, &bad, op, name);
        let (exit, report) = check(&bad);
        let codes: Vec<&str> = report["problems"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["code"].as_str().unwrap())
            .collect();
        assert_eq!((exit, codes), (1, vec![code]), "{op} {name}: {report}");
    }
    // Signed by a key the verifier does not hold: nothing is trusted.
    let stranger = sb.dir.path().join("stranger.pub");
    std::fs::write(&stranger, format!("{}\n", "11".repeat(32))).unwrap();
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("warrant"))
        .current_dir(fresh.path())
        .args(["runs", "verify"])
        .arg(&a)
        .arg("--pubkeys")
        .arg(&stranger)
        .arg("--json")
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (out.status.code(), &report["problems"][0]["code"]),
        (Some(1), &json!("W-DSSE-004"))
    );
}

#[test]
fn policy_can_send_one_kind_to_a_person_and_the_provenance_says_a_person_approved() {
    let sb = Sandbox::init();
    sb.write(
        ".warrant/policies/sheets-ask.cedar",
        "@id(\"sheets-ask\")\n@ask(\"change\")\n@reason(\"Spreadsheets leave the team; a person looks first.\")\npermit (principal, action == Warrant::Action::\"artifact.create\", resource is Warrant::Artifact)\nwhen { resource.kind == \"spreadsheet\" };\n",
    );
    let model = sb.transcript(concat!(
        "version: 1\nturns:\n",
        "  - calls:\n      - tool: create_report\n        args: { path: notes.md, markdown: \"# Notes\" }\n",
        "      - tool: create_spreadsheet\n        args: { path: s.xlsx, sheets: [ { name: S, rows: [[\"a\", 1]] } ] }\n",
        "  - say: done\n"
    ));
    let out = sb.run(&[
        "run",
        "--prompt",
        "never",
        "--model",
        &model,
        "two artifacts",
    ]);
    assert_eq!(
        out.status.code(),
        Some(10),
        "{}",
        super::harness::stderr(&out)
    );
    // The report was not asked; the spreadsheet waits, shown by kind and digest.
    assert!(sb.exists("notes.md"));
    assert!(!sb.exists("s.xlsx"));
    let request = super::harness::parked_request(&out);
    let (run, _) = sb.last_run();
    let shown = sb.json(&["requests", "show", &request, "--json"]);
    assert!(
        shown.to_string().contains("create spreadsheet s.xlsx"),
        "{shown}"
    );
    let ok = sb.run(&["approve", &request]);
    assert_eq!(ok.status.code(), Some(0), "{}", super::harness::stderr(&ok));
    let done = sb.run(&["resume", &run]);
    assert_eq!(
        done.status.code(),
        Some(0),
        "{}",
        super::harness::stderr(&done)
    );

    let (_, report) = verify(&sb, &sb.ws.join("notes.md"), None);
    assert_eq!(report["custody"]["approved"], json!("by policy"));
    let (code, sheet) = verify(&sb, &sb.ws.join("s.xlsx"), None);
    assert_eq!(code, 0, "{sheet}");
    assert_eq!(sheet["predicate"]["approved_by_person"], json!(true));
    // The person who answered, as the journal recorded them, signed into the provenance.
    assert_eq!(
        sheet["predicate"]["approved_by"],
        json!("tester@harbour (cli)")
    );
    assert_eq!(
        sheet["custody"]["approved"],
        json!("by tester@harbour (cli)")
    );
    assert!(report["predicate"].get("approved_by").is_none(), "{report}");
}
