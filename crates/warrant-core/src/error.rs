//! Stable error codes. Every error a user can see carries one (`W-POLICY-003`); docs/ERRORS.md
//! explains each. Codes are never reused for a different meaning.

/// An error with a stable, documented code.
pub trait Coded {
    /// The stable code, e.g. `W-POLICY-003`.
    fn code(&self) -> &'static str;
}
