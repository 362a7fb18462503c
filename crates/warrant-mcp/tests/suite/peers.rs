//! Real MCP peers for the tests, installed under `~/.cache/warrant-test-peers` when missing
//! (never skipped: a peer that cannot be installed fails the test).

use std::path::PathBuf;
use std::process::Command;

/// The pinned version of the reference server.
pub const EVERYTHING_VERSION: &str = "2026.8.31";

fn cache() -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap();
    home.join(".cache/warrant-test-peers")
}

/// `@modelcontextprotocol/server-everything`'s entry point (`node INDEX stdio|streamableHttp`).
pub fn everything() -> PathBuf {
    let dir = cache().join("npm");
    let index = dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !index.exists() {
        std::fs::create_dir_all(&dir).unwrap();
        let status = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&dir)
            .arg(format!(
                "@modelcontextprotocol/server-everything@{EVERYTHING_VERSION}"
            ))
            .status()
            .expect("npm runs");
        assert!(status.success(), "npm could not install server-everything");
    }
    assert!(index.exists(), "{index:?}");
    index
}

/// Python packages (`mcp`, `mcp-server-git`), installed with pip when the module is missing.
pub fn python_module(module: &str, package: &str) {
    let found = Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .status()
        .unwrap()
        .success();
    if !found {
        let status = Command::new("python3")
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                package,
            ])
            .status()
            .unwrap();
        assert!(status.success(), "pip could not install {package}");
    }
}

pub fn hostile() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/tests/peers/hostile.py").to_owned()
}
