//! `warrant config check`'s policy and key findings (issue 21): a permit no request can match
//! (W-CONFIG-038, at its file and line), expired and expiring keys (W-CONFIG-039/040) and weak
//! ones (W-CONFIG-041); each with the control that a live permit or a current key is not
//! reported.

use std::process::Command;

use pretty_assertions::assert_eq;
use serde_json::Value;

use super::harness::{Sandbox, stdout};

/// `(code, severity, file name, line, key)` of each finding with one of `codes`.
fn findings(report: &Value, codes: &[&str]) -> Vec<(String, String, String, Option<u64>, String)> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| codes.contains(&f["code"].as_str().unwrap()))
        .map(|f| {
            (
                f["code"].as_str().unwrap().to_owned(),
                f["severity"].as_str().unwrap().to_owned(),
                f["path"]
                    .as_str()
                    .map(|p| p.rsplit('/').next().unwrap().to_owned())
                    .unwrap_or_default(),
                f["line"].as_u64(),
                f["key"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn check(sb: &Sandbox, strict: bool) -> (Option<i32>, Value) {
    let mut args = vec!["config", "check", "--json"];
    if strict {
        args.push("--strict");
    }
    let out = sb.run(&args);
    (
        out.status.code(),
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", stdout(&out))),
    )
}

const LIVE_AND_SHADOWED: &str = r#"// Extra rules of this project.
@id("read-notes")
permit (
  principal,
  action == Warrant::Action::"fs.read",
  resource is Warrant::Path
) when { resource.in_workspace && resource.ext == "md" };

@id("no-pushes")
forbid (principal, action == Warrant::Action::"git.push", resource);

@id("push-main")
@ask("external")
permit (principal, action == Warrant::Action::"git.push", resource)
  when { resource.refname == "main" };
"#;

#[test]
fn a_permit_no_request_can_match_is_reported_at_its_line_and_a_live_one_is_not() {
    let sb = Sandbox::init();
    // The default pack alone: nothing is dead.
    let (code, report) = check(&sb, false);
    assert_eq!(findings(&report, &["W-CONFIG-038"]), vec![], "{report}");
    assert_eq!(code, Some(0), "{report}");

    // Permits under a forbid without conditions: reported (a warning: the set loads), the
    // default pack's push permit and this file's; the live permit beside them not.
    sb.write(".warrant/policies/extra.cedar", LIVE_AND_SHADOWED);
    let (code, report) = check(&sb, false);
    // Where the default pack (as `init` wrote it) names its push permit.
    let pack = std::fs::read_to_string(sb.ws.join(".warrant/policies/default.cedar")).unwrap();
    let push_line = pack
        .lines()
        .position(|l| l.contains("@id(\"git-push-asks\")"))
        .unwrap() as u64
        + 1;
    let shadowed = |file: &str, line: u64, id: &str| {
        (
            "W-CONFIG-038".to_owned(),
            "warning".to_owned(),
            file.to_owned(),
            Some(line),
            id.to_owned(),
        )
    };
    assert_eq!(
        findings(&report, &["W-CONFIG-038"]),
        vec![
            shadowed("default.cedar", push_line, "project:git-push-asks"),
            shadowed("extra.cedar", 12, "project:push-main"),
        ],
        "{report}"
    );
    let message = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["key"] == "project:push-main")
        .unwrap()["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains("forbid project:no-pushes") && message.contains("extra.cedar:9"),
        "{message}"
    );
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(check(&sb, true).0, Some(1));

    // A permit whose action never applies to the resource type it names: an error, at its line.
    let mut text = LIVE_AND_SHADOWED.to_owned();
    text.push_str(
        "\n@id(\"run-notes\")\npermit (principal, action == Warrant::Action::\"shell.exec\", resource is Warrant::Path);\n",
    );
    sb.write(".warrant/policies/extra.cedar", &text);
    let (code, report) = check(&sb, false);
    let dead = findings(&report, &["W-CONFIG-038"]);
    assert_eq!(
        dead.iter()
            .map(|(c, s, f, l, k)| (c.as_str(), s.as_str(), f.as_str(), *l, k.as_str()))
            .collect::<Vec<_>>(),
        vec![
            (
                "W-CONFIG-038",
                "warning",
                "default.cedar",
                Some(push_line),
                "project:git-push-asks"
            ),
            (
                "W-CONFIG-038",
                "warning",
                "extra.cedar",
                Some(12),
                "project:push-main"
            ),
            (
                "W-CONFIG-038",
                "error",
                "extra.cedar",
                Some(17),
                "project:run-notes"
            ),
        ],
        "{report}"
    );
    assert!(
        report
            .to_string()
            .contains("apply only to resources of type Warrant::Command"),
        "{report}"
    );
    assert_eq!(code, Some(1), "{report}");
}

const PUBLIC_KEY: &str = "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c";

fn age_file(path: &std::path::Path, days: u32) {
    let out = Command::new("touch")
        .arg("-m")
        .arg("-d")
        .arg(format!("{days} days ago"))
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn expired_expiring_and_weak_keys_are_reported_and_current_ones_are_not() {
    let sb = Sandbox::init();
    let soon = Command::new("date")
        .args(["-u", "-d", "+10 days", "+%F"])
        .output()
        .unwrap();
    let soon = String::from_utf8(soon.stdout).unwrap().trim().to_owned();
    let directory = format!(
        "admins = [\"tester\"]\n\n[people.alice]\npublic_key = \"{PUBLIC_KEY}\"\nkey_expires = \"2020-01-31\"\n\n[people.bob]\npublic_key = \"{PUBLIC_KEY}\"\nkey_expires = \"{soon}\"\n\n[people.carol]\npublic_key = \"abcd\"\n\n[people.dave]\npublic_key = \"{PUBLIC_KEY}\"\nkey_expires = \"2099-12-31T00:00:00Z\"\n"
    );
    std::fs::write(sb.managed.join("directory.toml"), directory).unwrap();
    let audit_key = sb.ws.join(".warrant/keys/audit.key");
    age_file(&audit_key, 40);

    // No age limit configured: only the directory's keys.
    let (code, report) = check(&sb, false);
    let keys = ["W-CONFIG-039", "W-CONFIG-040", "W-CONFIG-041"];
    let summary = |report: &Value| -> Vec<(String, String, Option<u64>, String)> {
        findings(report, &keys)
            .into_iter()
            .map(|(c, s, f, l, k)| (c, format!("{s} {f}"), l, k))
            .collect()
    };
    assert_eq!(
        summary(&report),
        vec![
            (
                "W-CONFIG-039".to_owned(),
                "error directory.toml".to_owned(),
                Some(3),
                "people.alice".to_owned()
            ),
            (
                "W-CONFIG-040".to_owned(),
                "warning directory.toml".to_owned(),
                Some(7),
                "people.bob".to_owned()
            ),
            (
                "W-CONFIG-041".to_owned(),
                "error directory.toml".to_owned(),
                Some(11),
                "people.carol".to_owned()
            ),
        ],
        "{report}"
    );
    assert_eq!(code, Some(1));

    // The audit key's age against [audit] key_max_age_days: past it, near it, well within it.
    std::fs::write(sb.managed.join("directory.toml"), "admins = [\"tester\"]\n").unwrap();
    let config = sb.ws.join(".warrant/config.toml");
    let base = std::fs::read_to_string(&config).unwrap();
    for (limit, want) in [
        (30, vec![("W-CONFIG-039", "error")]),
        (44, vec![("W-CONFIG-040", "warning")]),
        (365, vec![]),
    ] {
        std::fs::write(
            &config,
            format!("{base}\n[audit]\nkey_max_age_days = {limit}\n"),
        )
        .unwrap();
        let (_, report) = check(&sb, false);
        let got: Vec<(String, String, String)> = findings(&report, &keys)
            .into_iter()
            .map(|(c, s, f, _, _)| (c, s, f))
            .collect();
        let want: Vec<(String, String, String)> = want
            .into_iter()
            .map(|(c, s)| (c.to_owned(), s.to_owned(), "audit.key".to_owned()))
            .collect();
        assert_eq!(got, want, "limit {limit}: {report}");
    }

    // A seed of the wrong length is weak.
    std::fs::write(&audit_key, "abcd\n").unwrap();
    let (_, report) = check(&sb, false);
    assert_eq!(
        findings(&report, &["W-CONFIG-041"])
            .into_iter()
            .map(|(c, _, f, _, _)| (c, f))
            .collect::<Vec<_>>(),
        vec![("W-CONFIG-041".to_owned(), "audit.key".to_owned())],
        "{report}"
    );
}
