//! The crate's one integration test binary; the cases live in `suite/`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod suite;
