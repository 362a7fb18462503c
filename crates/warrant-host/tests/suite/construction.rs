//! One way to build a ring: the kernel builds a `Ring` in one place, `Ring::new`, from
//! `RingParts` that name every control; outside the kernel, only `Host::with_ring` names those
//! parts (the governed decision point, the sealer, the installation's keys, the toolbox, the
//! budgets, the prompt guard). A second construction path in any crate's `src/` fails this
//! test.

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Lines that build a `name` by its fields (`name {` as an expression, not after
/// `struct`/`impl`/`for`).
fn literals(text: &str, name: &str) -> usize {
    let open = format!("{name} {{");
    text.lines()
        .filter(|l| {
            let t = l.trim_start();
            !t.starts_with("//")
                && (t.contains(&format!("= {open}"))
                    || t.starts_with(&open)
                    || t.contains(&format!("({open}"))
                    || t.contains(&format!("return {open}")))
        })
        .count()
}

#[derive(Debug, Default, PartialEq)]
struct Found {
    /// `Ring {` literals in the kernel's ring module (the constructor).
    kernel_constructor: usize,
    /// `RingParts {` literals in the host's `lib.rs` (`Host::with_ring`).
    host_parts: usize,
    /// Every other literal of either, by file.
    elsewhere: Vec<String>,
}

fn scan(crates: &Path) -> Found {
    let mut found = Found::default();
    for entry in std::fs::read_dir(crates).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let mut files = Vec::new();
        sources(&entry.path().join("src"), &mut files);
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            let rings = literals(&text, "Ring");
            let parts = literals(&text, "RingParts");
            // The kernel's `Ring::parts` (for tests, behind its `testing` feature) rebuilds
            // the parts of an existing ring; it makes no ring.
            let parts = if name == "warrant-kernel" && f.ends_with("src/ring/mod.rs") {
                parts.saturating_sub(1)
            } else {
                parts
            };
            if name == "warrant-kernel" && f.ends_with("src/ring/mod.rs") {
                found.kernel_constructor += rings;
            } else if rings > 0 {
                found.elsewhere.push(format!("{}: Ring {{", f.display()));
            }
            if name == "warrant-host" && f.ends_with("src/lib.rs") {
                found.host_parts += parts;
            } else if parts > 0 {
                found
                    .elsewhere
                    .push(format!("{}: RingParts {{", f.display()));
            }
        }
    }
    found
}

#[test]
fn a_ring_is_built_by_ring_new_and_outside_the_kernel_only_by_host_with_ring() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // The scan sees the one constructor and the one set of parts (so a silent scan cannot
    // pass for a clean tree).
    assert_eq!(
        scan(&crates),
        Found {
            kernel_constructor: 1,
            host_parts: 1,
            elsewhere: vec![],
        }
    );
}

#[test]
fn the_scan_recognizes_a_construction() {
    assert_eq!(
        literals("    let ring = Ring {\n        store,\n", "Ring"),
        1
    );
    assert_eq!(literals("        Ring {\n            store,\n", "Ring"), 1);
    assert_eq!(literals("    f(RingParts {\n", "RingParts"), 1);
    assert_eq!(
        literals("pub struct Ring<'a> {\nimpl Ring<'_> {\n", "Ring"),
        0
    );
    assert_eq!(literals("pub struct RingParts<'a> {\n", "RingParts"), 0);
    // A second constructor in the kernel is counted against the one allowed.
    let tmp = tempfile::tempdir().unwrap();
    let kernel = tmp.path().join("warrant-kernel/src/ring");
    std::fs::create_dir_all(&kernel).unwrap();
    std::fs::write(kernel.join("mod.rs"), "    Ring {\n").unwrap();
    std::fs::write(kernel.join("other.rs"), "    let r = Ring {\n").unwrap();
    let host = tmp.path().join("warrant-host/src");
    std::fs::create_dir_all(&host).unwrap();
    std::fs::write(host.join("lib.rs"), "    Ring::new(RingParts {\n").unwrap();
    std::fs::write(host.join("runs.rs"), "    let p = RingParts {\n").unwrap();
    let found = scan(tmp.path());
    assert_eq!((found.kernel_constructor, found.host_parts), (1, 1));
    assert_eq!(found.elsewhere.len(), 2, "{:?}", found.elsewhere);
}
