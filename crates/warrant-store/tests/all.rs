//! Integration tests of warrant-store, one binary.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod suite;
