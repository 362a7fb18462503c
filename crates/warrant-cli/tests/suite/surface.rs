//! The surface a shell and a script see: completion scripts for bash, zsh and fish, and
//! `capabilities --json` (tools, providers, stores, and the sandbox as the doctor probes it).

use pretty_assertions::assert_eq;
use serde_json::Value;

use super::harness::{Sandbox, stderr, stdout};

#[test]
fn completion_scripts_name_every_command_and_bash_parses_its_own() {
    let sb = Sandbox::new();
    for shell in ["bash", "zsh", "fish"] {
        let out = sb.run(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}: {}", stderr(&out));
        let script = stdout(&out);
        for command in ["chat", "run", "resume", "approve", "audit", "capabilities"] {
            assert!(
                script.contains(command),
                "{shell} completions lack {command}"
            );
        }
    }
    // bash itself reads the script without an error.
    let script = sb.dir.path().join("warrant.bash");
    std::fs::write(&script, stdout(&sb.run(&["completions", "bash"]))).unwrap();
    let check = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", stderr(&check));
    let unknown = sb.run(&["completions", "tcsh"]);
    assert_eq!(unknown.status.code(), Some(2));
}

#[test]
fn capabilities_list_the_tools_providers_stores_and_probed_sandbox() {
    let sb = Sandbox::init();
    let caps = sb.json(&["capabilities", "--json"]);
    let names = |key: &str, field: &str| -> Vec<String> {
        caps[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t[field].as_str().unwrap().to_owned())
            .collect()
    };
    let tools = names("tools", "name");
    for contract in [
        "read_file",
        "write_file",
        "list_dir",
        "search_files",
        "delete_path",
        "run_command",
    ] {
        assert!(tools.contains(&contract.to_owned()), "{tools:?}");
    }
    assert_eq!(
        names("providers", "name"),
        vec!["scripted", "openai", "anthropic", "ollama"]
    );
    assert_eq!(names("stores", "name"), vec!["sqlite", "postgres"]);
    // The sandbox rows are the doctor's probes of this machine, with the same verdicts.
    let doctor = sb.json(&["doctor", "--json"]);
    let probed: Vec<(String, bool)> = caps["sandbox"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                format!("sandbox {}", r["mechanism"].as_str().unwrap()),
                r["available"].as_bool().unwrap(),
            )
        })
        .collect();
    assert!(!probed.is_empty());
    let checks: Vec<&Value> = doctor["checks"].as_array().unwrap().iter().collect();
    for (check, available) in &probed {
        let row = checks
            .iter()
            .find(|c| c["check"].as_str() == Some(check.as_str()))
            .unwrap_or_else(|| panic!("doctor has no {check}"));
        let says_available = !row["detail"].as_str().unwrap().starts_with("not available");
        assert_eq!((check, says_available), (check, *available));
    }
}
