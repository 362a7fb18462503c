//! The application layer driven through its API, without the binary.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod suite;
