//! One way to build a ring: outside the kernel, a `Ring` is constructed only by
//! `Host::with_ring`, which wires the governed decision point and the installation's keys. A
//! second construction path in any front end or library fails this test.

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

/// Lines that build a `Ring` by its fields (`Ring {` not preceded by `struct`/`impl`/`for`).
fn constructions(text: &str) -> usize {
    text.lines()
        .filter(|l| {
            let t = l.trim_start();
            !t.starts_with("//")
                && (t.contains("= Ring {") || t.starts_with("Ring {") || t.contains("(Ring {"))
        })
        .count()
}

#[test]
fn only_the_host_builds_a_ring_outside_the_kernel() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = Vec::new();
    let mut host_ones = 0;
    for entry in std::fs::read_dir(&crates).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "warrant-kernel" {
            continue; // the kernel's own tests and benches build rings from parts
        }
        let mut files = Vec::new();
        sources(&entry.path().join("src"), &mut files);
        for f in files {
            let n = constructions(&std::fs::read_to_string(&f).unwrap());
            if n == 0 {
                continue;
            }
            if name == "warrant-host" && f.ends_with("src/lib.rs") {
                host_ones += n;
            } else {
                found.push(f.display().to_string());
            }
        }
    }
    // The scan sees the one constructor (so a silent scan cannot pass for a clean tree).
    assert_eq!(host_ones, 1, "Host::with_ring is the one construction");
    assert!(
        found.is_empty(),
        "a ring is built outside Host::with_ring: {found:?}"
    );
}

#[test]
fn the_scan_recognizes_a_construction() {
    assert_eq!(constructions("    let ring = Ring {\n        store,\n"), 1);
    assert_eq!(constructions("pub struct Ring<'a> {\nimpl Ring<'_> {\n"), 0);
}
