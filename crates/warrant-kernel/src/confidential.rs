//! What the journal must not hold in the clear. Every event's payload and audit facts pass
//! [`Confidential::seal`] before they are stored: a secret found in them (a token the model
//! wrote into a file's content or a command line, a credential in a diff) is stored sealed,
//! encrypted under a key only this installation holds and bound to its run. The ring opens
//! them again when it folds a run to act on it, so a parked write still writes what it was
//! approved to write; every other reader of the store (listings, `runs show`, the audit trail,
//! a copy of the database) sees only the sealed form. The kernel decides where sealing happens;
//! what counts as a secret and the cipher are the host's (warrant-secrets, the vault's AEAD).

use serde_json::Value;
use warrant_core::RunId;

pub trait Confidential {
    /// Replaces, in place, every secret inside the strings of `value` by its sealed form.
    fn seal(&self, run: &RunId, value: &mut Value);

    /// Replaces, in place, every sealed form inside the strings of `value` that was sealed for
    /// `run` under this installation's key by what it seals; anything else stays as it is.
    fn open(&self, run: &RunId, value: &mut Value);

    /// Replaces, in place, every secret inside the strings of `value` by the name of what found
    /// it: for the audit facts, which are delivered outside and never opened.
    fn redact(&self, value: &mut Value);
}

/// Seals nothing: for stores that hold no secrets by construction (the kernel's own tests).
#[derive(Clone, Copy, Debug, Default)]
pub struct InTheClear;

impl Confidential for InTheClear {
    fn seal(&self, _run: &RunId, _value: &mut Value) {}
    fn open(&self, _run: &RunId, _value: &mut Value) {}
    fn redact(&self, _value: &mut Value) {}
}

/// Applies `f` to every string inside `value` (keys are left alone).
pub fn each_string(value: &mut Value, f: &mut impl FnMut(&mut String)) {
    match value {
        Value::String(s) => f(s),
        Value::Array(items) => items.iter_mut().for_each(|v| each_string(v, f)),
        Value::Object(map) => map.values_mut().for_each(|v| each_string(v, f)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}
