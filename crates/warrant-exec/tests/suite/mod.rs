mod changeset;
mod fs;
mod gitlog;
mod launcher;
mod sandbox;
mod spawn;
mod view;
mod web;

use warrant_core::{Action, CanonicalPath, Payload};
use warrant_kernel::Authorized;

/// A temp dir whose path is canonical (the test runner's TMPDIR may itself be a link).
pub fn tempdir() -> (tempfile::TempDir, CanonicalPath) {
    let dir = tempfile::tempdir().unwrap();
    let real = std::fs::canonicalize(dir.path()).unwrap();
    let path = CanonicalPath::from_normalized(real.to_str().unwrap()).unwrap();
    (dir, path)
}

/// `action` as the ring would authorize it, narrowed to the payload the executor takes.
pub fn authorized<T: Payload>(action: Action) -> Authorized<T> {
    Authorized::for_tests(action)
        .narrow()
        .expect("the action is of the kind the executor takes")
}
