//! SQLite implementation (being written).
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug)]
pub struct SqliteStore;
