//! The launcher's build identity: a digest of the sources the sandbox launcher is built from
//! (this crate's and `warrant-core`'s `src/`, the workspace's `Cargo.lock`, the version, the
//! profile and the target). `warrant` uses a `warrant-sandbox` binary found beside it only when
//! that binary reports the same identity, and the launcher refuses a plan made by another build
//! (see `sandbox::BUILD_ID`).

#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            files(&path, out);
        } else if kind.is_file() {
            out.push(path);
        }
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let crates = manifest.parent().map(Path::to_path_buf).unwrap_or_default();
    let roots = [
        manifest.join("src"),
        crates.join("warrant-core").join("src"),
    ];
    let lock = crates
        .parent()
        .map(|w| w.join("Cargo.lock"))
        .unwrap_or_default();
    let mut hasher = Sha256::new();
    for var in ["CARGO_PKG_VERSION", "PROFILE", "TARGET", "OPT_LEVEL"] {
        hasher.update(var.as_bytes());
        hasher.update([0]);
        hasher.update(std::env::var(var).unwrap_or_default().as_bytes());
        hasher.update([0]);
    }
    let mut all = Vec::new();
    for root in &roots {
        println!("cargo:rerun-if-changed={}", root.display());
        files(root, &mut all);
    }
    println!("cargo:rerun-if-changed={}", lock.display());
    all.push(lock);
    all.sort();
    for path in &all {
        let relative = path.strip_prefix(&crates).unwrap_or(path);
        hasher.update(relative.to_string_lossy().as_bytes());
        hasher.update([0]);
        let body = std::fs::read(path).unwrap_or_default();
        hasher.update(u64::try_from(body.len()).unwrap_or(u64::MAX).to_le_bytes());
        hasher.update(&body);
    }
    let digest = hasher.finalize();
    let id: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    println!("cargo:rustc-env=WARRANT_SANDBOX_BUILD_ID={id}");
}
