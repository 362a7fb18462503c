//! Cedar schema for Warrant's resource kinds, strict policy loading (fail closed), decide and explain.
