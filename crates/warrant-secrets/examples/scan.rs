//! Scans files with Warrant's default rules (gitleaks' set) and prints one JSON line per
//! finding (`file`, `rule`, `line`; never the value), then a summary line with files, bytes,
//! the time to build the scanner and the time to scan. Used by `scripts/secrets-bench.sh` and
//! `scripts/bench-secrets.py`; not part of the tests. Files are read before the clock starts,
//! so the scan time is the scanner's alone; the script also times the whole process.
//!
//! Usage: cargo run --release -p warrant-secrets --example scan -- FILE_OR_DIR...

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::time::Instant;

use warrant_secrets::Scanner;

fn main() {
    let started = Instant::now();
    let scanner = Scanner::default_rules();
    // Builds the rules now (a scanner builds them on its first scan), so that is timed here.
    if let Some(e) = scanner.unavailable() {
        eprintln!("{e}");
        std::process::exit(2);
    }
    let build_ms = started.elapsed().as_secs_f64() * 1000.0;
    let mut texts = Vec::new();
    let mut todo: Vec<std::path::PathBuf> = std::env::args().skip(1).map(Into::into).collect();
    while let Some(path) = todo.pop() {
        if path.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&path) {
                todo.extend(entries.filter_map(|e| e.ok().map(|e| e.path())));
            }
            continue;
        }
        match std::fs::read(&path) {
            Ok(bytes) => texts.push((
                path.display().to_string(),
                String::from_utf8_lossy(&bytes).into_owned(),
            )),
            Err(e) => eprintln!("skipping {}: {e}", path.display()),
        }
    }
    let scan_start = Instant::now();
    let mut bytes = 0usize;
    let mut lines = Vec::new();
    for (path, text) in &texts {
        bytes += text.len();
        for f in scanner.scan_file(path, text) {
            let line = text
                .get(..f.start)
                .map_or(0, |t| t.matches('\n').count() + 1);
            lines.push(serde_json::json!({"file": path, "rule": f.rule, "line": line}).to_string());
        }
    }
    let scan_s = scan_start.elapsed().as_secs_f64();
    for l in &lines {
        println!("{l}");
    }
    println!(
        "{}",
        serde_json::json!({"summary": {"files": texts.len(), "bytes": bytes, "findings": lines.len(),
            "scan_seconds": scan_s, "build_ms": build_ms, "compiled_rules": scanner.compiled_rules()}})
    );
}
