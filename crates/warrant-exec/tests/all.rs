//! The integration test binary of warrant-exec: real processes and real temp directories.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod suite;
