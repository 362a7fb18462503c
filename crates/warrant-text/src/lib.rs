//! The words of Warrant's text front ends. The application layer (`warrant-host`) returns typed
//! views; this crate turns them into the plain text a person reads, so the terminal and a chat
//! gateway say the same thing in the same words, and the binary is left with parsing and
//! printing. Every function here is pure: a view in, lines out, no terminal I/O, no clap.
//! The caller still passes each line through `warrant_core::render` before it reaches a screen.

/// The capabilities built on them: chat, memory, skills, profiles, graphs, delegation, envelopes,
/// artifacts, the catalog, secrets, the MCP and web servers.
pub mod features;
/// The operations every front end has: runs, approvals, requests, audit, doctor, set-up.
pub mod ops;
