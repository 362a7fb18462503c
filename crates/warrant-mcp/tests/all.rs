//! Integration tests of the MCP client against real peers (installed when missing) and small
//! hostile servers (`peers/hostile.py`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod suite;
