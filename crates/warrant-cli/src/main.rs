//! The `warrant` binary.
fn main() {}
