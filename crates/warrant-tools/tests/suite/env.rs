//! A tempdir workspace for the tools: `root/ws` (canonical), a secret next to it, a symlink
//! inside pointing at that secret, and two subprocess profiles.

use std::collections::BTreeMap;

use serde_json::Value;
use tempfile::TempDir;
use warrant_core::config::ProfileConfig;
use warrant_core::{Action, CanonicalPath};
use warrant_kernel::{Refusal, ToolEnv, ToolRegistry};
use warrant_tools::{Builtin, Controls, Toolbox};

pub struct Env {
    _dir: TempDir,
    pub root: String,
    pub env: ToolEnv,
    pub tools: Toolbox,
}

impl Env {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path())
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        let ws = format!("{root}/ws");
        std::fs::create_dir_all(format!("{ws}/sub")).unwrap();
        std::fs::write(format!("{ws}/existing.txt"), "line 1\nline 2\nline 3\n").unwrap();
        std::fs::write(format!("{root}/secret.txt"), "s3cret\n").unwrap();
        std::os::unix::fs::symlink(format!("{root}/secret.txt"), format!("{ws}/link")).unwrap();
        std::os::unix::fs::symlink("..", format!("{ws}/sub/up")).unwrap();
        // The commands' PATH is a directory of the test's own, so what argv[0] resolves to
        // does not depend on the machine.
        std::fs::create_dir_all(format!("{root}/bin")).unwrap();
        for program in ["make", "cargo"] {
            let file = format!("{root}/bin/{program}");
            std::fs::write(&file, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
        }
        std::os::unix::fs::symlink(format!("{root}/bin/make"), format!("{ws}/mk")).unwrap();
        let profiles = BTreeMap::from([
            (
                "default".to_owned(),
                ProfileConfig {
                    timeout_ms: 10_000,
                    ..ProfileConfig::default()
                },
            ),
            (
                "slow".to_owned(),
                ProfileConfig {
                    timeout_ms: 60_000,
                    ..ProfileConfig::default()
                },
            ),
        ]);
        let bin = format!("{root}/bin");
        Self {
            _dir: dir,
            root,
            env: ToolEnv {
                workspace: CanonicalPath::from_normalized(&ws).unwrap(),
                profiles,
                parent_env: vec![("PATH".into(), bin)],
                secrets: None,
                no_overlays: false,
                run: None,
                tests: Default::default(),
                web: Default::default(),
                web_addresses_unguarded: false,
                web_loopback_allowed: false,
                menus: Default::default(),
                spawn_unnarrowed: false,
                ceiling_unchecked: false,
                delegation_late: false,
            },
            tools: Toolbox::new(
                &[&Builtin],
                Controls {
                    menu: None,
                    menus: &Default::default(),
                    redactor: None,
                },
            )
            .unwrap(),
        }
    }

    pub fn path(&self, rel: &str) -> CanonicalPath {
        let full = if rel.is_empty() {
            self.root.clone()
        } else {
            format!("{}/{rel}", self.root)
        };
        CanonicalPath::from_normalized(&full).unwrap()
    }

    /// What the ring does first: the schema, then the tool's normalization.
    pub fn normalize(&self, tool: &str, args: &Value) -> Result<Vec<Action>, Refusal> {
        self.tools.validate(tool, args)?;
        self.tools.get(tool).unwrap().normalize(args, &self.env)
    }

    /// Replaces the tempdir with a placeholder, for snapshots.
    pub fn redact(&self, text: &str) -> String {
        text.replace(&self.root, "[ROOT]")
    }
}
