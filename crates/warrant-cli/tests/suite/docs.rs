//! Checks that docs/ERRORS.md and the sources agree: every error code (`W-FAMILY-NNN`) used in
//! crates/*/src is documented there, and every code documented there is used in crates/*/src.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every error code in `text`: `W-`, one or more ASCII capitals, `-`, exactly three digits.
/// A match must not continue a longer word or number (`XW-A-001`, `W-A-0012` are not codes),
/// and placeholders such as `W-EXEC-0NN` or `W-AUDIT-NNN` are not codes either.
fn codes_in(text: &str) -> BTreeSet<String> {
    let bytes = text.as_bytes();
    let mut found = BTreeSet::new();
    let mut from = 0;
    while let Some(offset) = text[from..].find("W-") {
        let start = from + offset;
        // "W-" is ASCII, so start + 2 is a char boundary for the next search.
        from = start + 2;
        if start > 0 && bytes[start - 1].is_ascii_alphanumeric() {
            continue;
        }
        let mut i = start + 2;
        while i < bytes.len() && bytes[i].is_ascii_uppercase() {
            i += 1;
        }
        if i == start + 2 || bytes.get(i) != Some(&b'-') {
            continue;
        }
        let digits = i + 1;
        let mut end = digits;
        while end < bytes.len() && bytes[end].is_ascii_digit() {
            end += 1;
        }
        if end - digits != 3 || bytes.get(end).is_some_and(u8::is_ascii_alphanumeric) {
            continue;
        }
        found.insert(text[start..end].to_owned());
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries =
        fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    for entry in entries {
        let path = entry
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
            .path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// Every code in the `.rs` files under crates/*/src, with the files (relative to the
/// workspace root) it occurs in.
fn source_codes() -> BTreeMap<String, BTreeSet<String>> {
    let root = root();
    let crates = root.join("crates");
    let mut files = Vec::new();
    let entries =
        fs::read_dir(&crates).unwrap_or_else(|e| panic!("cannot list {}: {e}", crates.display()));
    for entry in entries {
        let src = entry
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", crates.display()))
            .path()
            .join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    assert!(
        !files.is_empty(),
        "found no .rs files under {}/*/src",
        crates.display()
    );
    let mut codes: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let text = fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
        let shown = file
            .strip_prefix(&root)
            .unwrap_or(file.as_path())
            .display()
            .to_string();
        for code in codes_in(&text) {
            codes.entry(code).or_default().insert(shown.clone());
        }
    }
    assert!(
        !codes.is_empty(),
        "found no error codes under {}/*/src; is the parser broken?",
        crates.display()
    );
    codes
}

fn documented_codes() -> BTreeSet<String> {
    let path = root().join("docs/ERRORS.md");
    let text =
        fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    codes_in(&text)
}

#[test]
fn the_code_parser_finds_codes_and_only_codes() {
    let found = codes_in(
        "error[W-POLICY-003]: x; \"W-EXEC-019\", W-A-001. Not: W-EXEC-0NN, W-AUDIT-NNN, \
         XW-A-002, W-A-0003, W-a-004, W--005, W-A-01, W-A-006x, `W-STORE-…`, W-",
    );
    let expected: BTreeSet<String> = ["W-A-001", "W-EXEC-019", "W-POLICY-003"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(found, expected);
}

#[test]
fn every_error_code_is_documented() {
    let documented = documented_codes();
    let missing: Vec<String> = source_codes()
        .into_iter()
        .filter(|(code, _)| !documented.contains(code))
        .map(|(code, files)| {
            format!(
                "  {code}  (used in {})",
                files.into_iter().collect::<Vec<_>>().join(", ")
            )
        })
        .collect();
    assert!(
        missing.is_empty(),
        "docs/ERRORS.md does not document {} error code(s) used in crates/*/src; add a row for each to its family's table:\n{}",
        missing.len(),
        missing.join("\n")
    );
}

#[test]
fn documented_codes_exist() {
    let used = source_codes();
    let dead: Vec<String> = documented_codes()
        .into_iter()
        .filter(|code| !used.contains_key(code))
        .map(|code| format!("  {code}"))
        .collect();
    assert!(
        dead.is_empty(),
        "docs/ERRORS.md documents {} code(s) that appear nowhere in crates/*/src; remove them, or mention retired numbers without the full code:\n{}",
        dead.len(),
        dead.join("\n")
    );
}
