mod changeset;
mod fs;
mod sandbox;
mod spawn;
mod view;

use warrant_core::CanonicalPath;
use warrant_kernel::Authorized;

/// A temp dir whose path is canonical (the test runner's TMPDIR may itself be a link).
pub fn tempdir() -> (tempfile::TempDir, CanonicalPath) {
    let dir = tempfile::tempdir().unwrap();
    let real = std::fs::canonicalize(dir.path()).unwrap();
    let path = CanonicalPath::from_normalized(real.to_str().unwrap()).unwrap();
    (dir, path)
}

pub fn authorized<T>(action: T) -> Authorized<T> {
    Authorized::for_tests(action)
}
