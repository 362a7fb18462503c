//! Test support shared by the crates' integration tests (never a dependency of the binary):
//! real PostgreSQL databases for the store and CLI suites. Failing loudly is its job, so it
//! panics where a test should stop.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

pub mod pg;
