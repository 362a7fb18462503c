//! End-to-end tests of the `warrant` binary, driven through the CLI contract.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod suite;
