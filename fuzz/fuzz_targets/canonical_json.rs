//! Canonical JSON (RFC 8785) and the digest over it. For any JSON value: the canonical form is
//! idempotent, parses back to the same value (numbers compared as the IEEE doubles JCS defines
//! them to be), does not depend on key order, and the digest is SHA-256 of exactly that text.
//! A value that deserializes as an `Action` survives the canonical trip unchanged, so an
//! approval's digest stays bound to the action it was given for.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use warrant_core::{Action, Digest, canonical_json, digest_of};

/// Equality as JCS sees it: numbers are doubles (so `1`, `1.0` and `1e0` are one number),
/// object key order does not matter.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::String(x), Value::String(y)) => x == y,
        (
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Array(_) | Value::Object(_),
            _,
        ) => false,
    }
}

/// The same value with every object's keys in reverse order.
fn reversed(v: &Value) -> Value {
    match v {
        Value::Array(items) => Value::Array(items.iter().map(reversed).collect()),
        Value::Object(map) => Value::Object(map.iter().rev().map(|(k, v)| (k.clone(), reversed(v))).collect()),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => v.clone(),
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let canonical = match canonical_json(&value) {
        Ok(c) => c,
        // JCS has no form for a number that is not a finite double; serde_json never parses
        // one, so any refusal here is a bug.
        Err(e) => panic!("no canonical form for {value}: {e}"),
    };
    let back: Value = match serde_json::from_str(&canonical) {
        Ok(v) => v,
        Err(e) => panic!("canonical form {canonical:?} does not parse: {e}"),
    };
    assert!(same(&back, &value), "{value} -> {canonical} -> {back}");
    assert_eq!(canonical_json(&back).ok().as_deref(), Some(canonical.as_str()), "not idempotent");
    assert_eq!(canonical_json(&reversed(&value)).ok().as_deref(), Some(canonical.as_str()), "key order leaks");
    let digest = Digest::of_bytes(canonical.as_bytes());
    assert_eq!(digest_of(&value).ok(), Some(digest.clone()));
    assert_eq!(digest_of(&back).ok(), Some(digest.clone()));
    assert_eq!(Digest::parse(digest.as_str()), Some(digest.clone()));
    assert_eq!(digest.bytes().len(), 32);

    if let Ok(action) = serde_json::from_value::<Action>(value) {
        let c = canonical_json(&action).unwrap_or_default();
        match serde_json::from_str::<Action>(&c) {
            Ok(again) => assert_eq!(again, action, "an action changed on the canonical trip"),
            Err(e) => panic!("the canonical form {c} of an action does not parse back: {e}"),
        }
        assert_eq!(action.digest(), Digest::of_bytes(c.as_bytes()));
    }
});
