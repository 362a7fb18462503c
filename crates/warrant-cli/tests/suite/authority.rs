//! Roles and teams in policy, from the binary: the person an agent acts for is a Cedar
//! principal with the roles and teams of the managed identity directory, a team's roles count
//! only on that team's projects, and a person who loses their standing while a run waits stops
//! it at its next step, with the run's open requests cancelled.

use pretty_assertions::assert_eq;
use serde_json::Value;

use super::harness::{Sandbox, parked_request, stderr, stdout};

const DIRECTORY: &str = r#"
[teams.payments]
members = ["alice"]
roles = ["deployer"]
[teams.web]
members = ["carol"]
roles = ["deployer"]
[people.dave]
roles = ["deployer"]
[people.bot]
roles = ["publisher"]
"#;

/// Writing `release.txt` needs the role `deployer`, reading `ledger.txt` the team `payments`,
/// writing `publish.txt` the role `publisher`: each of the agent and its person must hold it.
const POLICY: &str = r#"
@id("release-needs-deployer")
forbid (principal, action == Warrant::Action::"fs.write", resource is Warrant::Path)
when { resource.name == "release.txt" }
unless { principal is Warrant::Agent || principal in Warrant::Role::"deployer" };

@id("ledger-is-payments")
forbid (principal, action == Warrant::Action::"fs.read", resource is Warrant::Path)
when { resource.name == "ledger.txt" }
unless { principal is Warrant::Agent || principal in Warrant::Team::"payments" };

@id("publish-needs-publisher")
forbid (principal, action == Warrant::Action::"fs.write", resource is Warrant::Path)
when { resource.name == "publish.txt" }
unless { principal in Warrant::Role::"publisher" };
"#;

/// A workspace of `project` (its `[approvals] team`), with the directory and the policy.
fn project(project: &str, directory: Option<&str>) -> Sandbox {
    let sb = Sandbox::init();
    if let Some(d) = directory {
        std::fs::write(sb.managed.join("directory.toml"), d).unwrap();
    }
    std::fs::write(sb.ws.join(".warrant/policies/roles.cedar"), POLICY).unwrap();
    let cfg = sb.ws.join(".warrant/config.toml");
    let mut text = std::fs::read_to_string(&cfg).unwrap_or_default();
    text.push_str(&format!("\n[approvals]\nteam = \"{project}\"\n"));
    std::fs::write(cfg, text).unwrap();
    sb
}

/// The verdict for the agent `bot` acting for `person` on `verb` of `file`.
fn verdict(sb: &Sandbox, person: &str, verb: &str, file: &str) -> String {
    let out = sb
        .std_cmd(&[
            "policy", "explain", "--action", verb, "--target", file, "--json",
        ])
        .env("WARRANT_ACTOR", "bot")
        .env("WARRANT_KIND", "agent")
        .env("WARRANT_ON_BEHALF_OF", person)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    v["decision"]["verdict"]["kind"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn person_team_project_and_action_decide_the_verdict() {
    // (person, project, verb, file) → verdict; every row is one Cedar decision of the binary.
    let rows: &[(&str, &str, &str, &str, &str)] = &[
        // A team's role counts on the team's own project…
        ("alice", "payments", "fs.write", "release.txt", "allow"),
        // …and nowhere else.
        ("alice", "web", "fs.write", "release.txt", "deny"),
        ("carol", "payments", "fs.write", "release.txt", "deny"),
        ("carol", "web", "fs.write", "release.txt", "allow"),
        // A person's own role counts on every project.
        ("dave", "payments", "fs.write", "release.txt", "allow"),
        ("dave", "web", "fs.write", "release.txt", "allow"),
        // Someone the directory does not know has no role.
        ("erin", "payments", "fs.write", "release.txt", "deny"),
        // `principal in Warrant::Team::"payments"`: membership, on any project.
        ("alice", "payments", "fs.read", "ledger.txt", "allow"),
        ("alice", "web", "fs.read", "ledger.txt", "allow"),
        ("carol", "payments", "fs.read", "ledger.txt", "deny"),
        ("dave", "payments", "fs.read", "ledger.txt", "deny"),
        // Both must hold it: the agent (publisher by the directory) and its person.
        ("alice", "payments", "fs.write", "publish.txt", "deny"),
        // Untouched by the roles policies.
        ("erin", "payments", "fs.write", "notes.txt", "allow"),
    ];
    let payments = project("payments", Some(DIRECTORY));
    let web = project("web", Some(DIRECTORY));
    let mut got = Vec::new();
    for (person, proj, verb, file, _) in rows {
        let sb = if *proj == "payments" { &payments } else { &web };
        got.push((
            *person,
            *proj,
            *verb,
            *file,
            verdict(sb, person, verb, file),
        ));
    }
    let want: Vec<_> = rows
        .iter()
        .map(|(p, j, v, f, d)| (*p, *j, *v, *f, (*d).to_owned()))
        .collect();
    assert_eq!(got, want);

    // The person holding `publisher` too: now both do.
    let both = DIRECTORY.replace(
        "[people.dave]",
        "[people.alice]\nroles = [\"publisher\"]\n[people.dave]",
    );
    let sb = project("payments", Some(&both));
    assert_eq!(verdict(&sb, "alice", "fs.write", "publish.txt"), "allow");
    // The agent without the role (not in the directory): denied, whatever its person holds.
    let no_bot = both.replace("[people.bot]\nroles = [\"publisher\"]\n", "");
    let sb = project("payments", Some(&no_bot));
    assert_eq!(verdict(&sb, "alice", "fs.write", "publish.txt"), "deny");

    // Negative control: without the directory the person is a name only, and the roles
    // policies deny what they allowed above.
    let bare = project("payments", None);
    assert_eq!(verdict(&bare, "alice", "fs.write", "release.txt"), "deny");
    assert_eq!(verdict(&bare, "alice", "fs.read", "ledger.txt"), "deny");
}

/// The person the run acts for loses the role while the run is parked: resuming stops it at
/// its next step (exit 3), typed and audited, and its open request is cancelled. The control:
/// the same run with the directory unchanged goes on to ask again.
#[test]
fn losing_a_role_while_the_run_waits_stops_it_and_cancels_its_requests() {
    for lose in [true, false] {
        let sb = project("payments", Some(DIRECTORY));
        let model = sb.transcript(
            "version: 1\nturns:\n  - calls:\n      - tool: delete_path\n        args: { path: build, recursive: true }\n  - say: done\n",
        );
        let agent = |args: &[&str]| {
            sb.std_cmd(args)
                .env("WARRANT_ACTOR", "bot")
                .env("WARRANT_KIND", "agent")
                .env("WARRANT_ON_BEHALF_OF", "alice")
                .output()
                .unwrap()
        };
        let parked = agent(&["run", "--prompt", "never", "--model", &model, "clean"]);
        assert_eq!(parked.status.code(), Some(10), "{}", stderr(&parked));
        let request = parked_request(&parked);
        let runs = sb.json(&["runs", "list", "--json"]);
        let run = runs["runs"][0]["run"].as_str().unwrap().to_owned();
        let shown = sb.json(&["runs", "show", &run, "--json"]);
        let started = &shown["events"][0]["payload"]["settings"]["standing"];
        assert_eq!(
            started,
            &serde_json::json!({"person": "alice", "roles": ["deployer"], "teams": ["payments"]})
        );
        if lose {
            std::fs::write(
                sb.managed.join("directory.toml"),
                DIRECTORY.replace("roles = [\"deployer\"]\n[teams.web]", "[teams.web]"),
            )
            .unwrap();
        }
        let resumed = agent(&["resume", &run]);
        let events = sb.json(&["runs", "show", &run, "--json"])["events"]
            .as_array()
            .unwrap()
            .clone();
        let halted = events.iter().find(|e| e["kind"] == "halted");
        if lose {
            assert_eq!(resumed.status.code(), Some(3), "{}", stderr(&resumed));
            let halted = halted.unwrap();
            assert_eq!(
                halted["payload"],
                serde_json::json!({
                    "code": "W-AUTHORITY-001",
                    "halt": {"control": "authority_lost", "person": "alice",
                             "lost": "alice lost the role(s) deployer"},
                    "cancelled": [request],
                })
            );
            let open = sb.json(&["approvals", "list", "--json"]);
            assert_eq!(open["requests"], serde_json::json!([]), "{open}");
            let audit = sb.run(&["audit", "query", "--run", &run, "--json"]);
            assert!(stdout(&audit).contains("W-AUTHORITY-001"));
            assert!(sb.exists("build"));
        } else {
            assert_eq!(resumed.status.code(), Some(10), "{}", stderr(&resumed));
            assert!(halted.is_none());
        }
    }
}

/// Leaving the directory altogether stops the run the same way.
#[test]
fn leaving_the_directory_stops_the_run() {
    let sb = project("payments", Some(DIRECTORY));
    let model = sb.transcript(
        "version: 1\nturns:\n  - calls:\n      - tool: delete_path\n        args: { path: build, recursive: true }\n  - say: done\n",
    );
    let parked = sb
        .std_cmd(&["run", "--prompt", "never", "--model", &model, "clean"])
        .env("WARRANT_ACTOR", "dave")
        .output()
        .unwrap();
    assert_eq!(parked.status.code(), Some(10), "{}", stderr(&parked));
    let runs = sb.json(&["runs", "list", "--json"]);
    let run = runs["runs"][0]["run"].as_str().unwrap().to_owned();
    std::fs::write(
        sb.managed.join("directory.toml"),
        DIRECTORY.replace("[people.dave]\nroles = [\"deployer\"]\n", ""),
    )
    .unwrap();
    let resumed = sb
        .std_cmd(&["resume", &run])
        .env("WARRANT_ACTOR", "dave")
        .output()
        .unwrap();
    assert_eq!(resumed.status.code(), Some(3), "{}", stderr(&resumed));
    assert!(
        stdout(&resumed).contains("dave is no longer in the identity directory"),
        "{}",
        stdout(&resumed)
    );
}
