//! One integration test binary for warrant-audit (fast to link); the cases live in `suite/`.
mod suite;
