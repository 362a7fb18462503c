//! The agent loop: a function of the persisted run log.
