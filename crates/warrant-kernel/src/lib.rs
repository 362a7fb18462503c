//! The kernel: run events, fold and replay, and the effect ring every action passes.

pub mod authorized;

pub use authorized::Authorized;
