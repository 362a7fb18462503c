//! One integration test binary for warrant-kernel (fast to link); the cases live in suite/.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod suite;
