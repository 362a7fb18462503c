//! Words for the capabilities built on the operations.
