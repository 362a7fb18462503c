//! Which program applies a plan. `warrant` uses the small `warrant-sandbox` beside it only when
//! that binary is of the same build, and a launcher refuses a plan it may not fully understand:
//! one made by another build, or one with a field it does not know. Each refusal has its
//! negative control (the same plan, made right, runs).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use pretty_assertions::assert_eq;
use warrant_core::CanonicalPath;
use warrant_core::config::{Isolation, ProfileConfig, SandboxConfig};
use warrant_exec::fs::OsLinks;
use warrant_exec::sandbox::{BUILD_ID, SANDBOX_FAILED_EXIT};
use warrant_exec::{Launcher, LauncherChoice, SMALL_LAUNCHER, SandboxPlan};

use super::tempdir;

const SMALL: &str = env!("CARGO_BIN_EXE_warrant-sandbox");

fn script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn the_small_launcher_is_chosen_only_when_it_reports_this_build() {
    let (_d, dir) = tempdir();
    let warrant = dir.as_path().join("warrant");
    script(&warrant, "exit 0");
    let small = dir.as_path().join(SMALL_LAUNCHER);
    let builtin = Launcher::builtin(warrant.clone());
    let why = |choice: LauncherChoice| match choice {
        LauncherChoice::Builtin(why) => why,
        LauncherChoice::Small(path) => panic!("chose {}", path.display()),
    };

    // Nothing beside it: the binary's own entry point.
    let (launcher, choice) = Launcher::beside(&warrant);
    assert_eq!(launcher, builtin);
    assert!(why(choice).starts_with("no warrant-sandbox beside"));

    // The same build: chosen, and run without a prefix.
    std::fs::copy(SMALL, &small).unwrap();
    let (launcher, choice) = Launcher::beside(&warrant);
    assert_eq!(choice, LauncherChoice::Small(small.clone()));
    assert_eq!(
        launcher,
        Launcher {
            program: small.clone(),
            prefix_args: Vec::new(),
        }
    );

    // Another build: not chosen.
    script(&small, "echo 0123456789abcdef0123456789abcdef");
    let (launcher, choice) = Launcher::beside(&warrant);
    assert_eq!(launcher, builtin);
    let reason = why(choice);
    assert!(reason.contains("is of another build"), "{reason}");

    // A launcher from before build ids reads `__build-id` as a plan and refuses it (125).
    script(
        &small,
        &format!("echo 'warrant-sandbox: unreadable sandbox plan' >&2; exit {SANDBOX_FAILED_EXIT}"),
    );
    let (launcher, choice) = Launcher::beside(&warrant);
    assert_eq!(launcher, builtin);
    let reason = why(choice);
    assert!(reason.contains("older build"), "{reason}");

    // The real one says what it is.
    let out = Command::new(SMALL).arg("__build-id").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), BUILD_ID);
    assert_eq!(BUILD_ID.len(), 32);
}

/// A Landlock-only plan for `ws` (no namespaces: this is about the plan, not the view).
fn plan_json(ws: &CanonicalPath) -> serde_json::Value {
    let profile = ProfileConfig {
        sandbox: Some(SandboxConfig {
            isolation: Isolation::Landlock,
            ..SandboxConfig::default()
        }),
        ..ProfileConfig::default()
    };
    let plan = SandboxPlan::from_profile("test", &profile, ws, &OsLinks)
        .unwrap()
        .unwrap();
    assert_eq!(
        plan.build, BUILD_ID,
        "a plan carries the build that made it"
    );
    serde_json::to_value(&plan).unwrap()
}

/// `touch out/ran` under `plan` (in a directory that existed before the plan: Landlock grants
/// nothing on entries created at a split workspace root).
fn launch(ws: &CanonicalPath, plan: &serde_json::Value) -> Output {
    std::fs::create_dir_all(ws.as_path().join("out")).unwrap();
    Command::new(SMALL)
        .arg(plan.to_string())
        .args(["--", "touch", "out/ran"])
        .current_dir(ws.as_path())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap()
}

fn refused(ws: &CanonicalPath, out: &Output, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(SANDBOX_FAILED_EXIT), "{stderr}");
    assert!(stderr.starts_with("warrant-sandbox:"), "{stderr}");
    assert!(stderr.contains(what), "{stderr}");
    assert!(stderr.contains("the command was not run"), "{stderr}");
    assert!(!ws.as_path().join("out/ran").exists());
}

#[test]
fn a_plan_made_by_another_build_is_refused_before_the_command_runs() {
    let (_d, ws) = tempdir();
    let mut plan = plan_json(&ws);
    plan["build"] = "0123456789abcdef0123456789abcdef".into();
    refused(&ws, &launch(&ws, &plan), "made by another build of Warrant");
    // A plan with no build at all (as an older warrant would write it).
    plan.as_object_mut().unwrap().remove("build");
    refused(&ws, &launch(&ws, &plan), "made by another build of Warrant");
    // The control: the same plan with this build's id runs the command.
    plan["build"] = BUILD_ID.into();
    let out = launch(&ws, &plan);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(ws.as_path().join("out/ran").exists());
}

#[test]
fn a_plan_with_a_field_the_launcher_does_not_know_is_refused() {
    let (_d, ws) = tempdir();
    let mut plan = plan_json(&ws);
    // A newer build's restriction this launcher would silently skip.
    plan["forbid_everything"] = true.into();
    refused(
        &ws,
        &launch(&ws, &plan),
        "unknown field `forbid_everything`",
    );
    // Inside a nested part of the plan too.
    let mut nested = plan_json(&ws);
    nested["overlay"] = serde_json::json!({
        "lower": ws.as_path(), "upper": "/nonexistent/u", "work": "/nonexistent/w", "extra": 1
    });
    refused(&ws, &launch(&ws, &nested), "unknown field `extra`");
    // The control: without the unknown field it runs.
    plan.as_object_mut().unwrap().remove("forbid_everything");
    let out = launch(&ws, &plan);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(ws.as_path().join("out/ran").exists());
}
