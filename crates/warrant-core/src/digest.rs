//! The one digest: SHA-256 over RFC 8785 (JCS) canonical JSON. Approvals, audit records and
//! policy sets all use this, so two parties that see the same value compute the same digest.

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// `sha256:<64 lowercase hex>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Digest(String);

impl Digest {
    pub fn of_bytes(bytes: &[u8]) -> Self {
        Self(format!("sha256:{}", hex::encode(Sha256::digest(bytes))))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The raw 32 bytes, for signing.
    pub fn bytes(&self) -> Vec<u8> {
        self.0
            .strip_prefix("sha256:")
            .and_then(|h| hex::decode(h).ok())
            .unwrap_or_default()
    }

    pub fn parse(s: &str) -> Option<Self> {
        let hex_part = s.strip_prefix("sha256:")?;
        let ok = hex_part.len() == 64
            && hex_part
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c));
        ok.then(|| Self(s.to_owned()))
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// RFC 8785 canonical JSON of any serializable value.
pub fn canonical_json<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    let bytes = crate::canonical::to_vec(value)?;
    // serde_json writes only what a `&str` held, and ASCII.
    String::from_utf8(bytes).map_err(serde::ser::Error::custom)
}

/// SHA-256 of the canonical JSON of `value`: the canonical form is hashed as it is written,
/// never held whole (a model request's digest covers its whole conversation, every turn).
pub fn digest_of<T: Serialize + ?Sized>(value: &T) -> Result<Digest, serde_json::Error> {
    let mut hasher = Hashing(Sha256::new());
    crate::canonical::write(&mut hasher, value)?;
    Ok(Digest(format!(
        "sha256:{}",
        hex::encode(hasher.0.finalize())
    )))
}

/// SHA-256 of the canonical JSON of the pair `(first, second)`, given the canonical JSON of
/// `second` already written ([`canonical_json`]): the same digest as
/// `digest_of(&(first, second))` (a pair is an array, so its canonical form is `[`, the first,
/// `,`, the second, `]`), without writing `second` again.
pub fn digest_of_pair<T: Serialize + ?Sized>(
    first: &T,
    second_canonical: &str,
) -> Result<Digest, serde_json::Error> {
    let mut hasher = Hashing(Sha256::new());
    hasher.0.update(b"[");
    crate::canonical::write(&mut hasher, first)?;
    hasher.0.update(b",");
    hasher.0.update(second_canonical.as_bytes());
    hasher.0.update(b"]");
    Ok(Digest(format!(
        "sha256:{}",
        hex::encode(hasher.0.finalize())
    )))
}

/// A writer that feeds SHA-256.
struct Hashing(Sha256);

impl std::io::Write for Hashing {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn canonical_form_matches_rfc8785_rules() {
        // Keys sorted by UTF-16 code units, numbers in ECMAScript form, no whitespace.
        let v = json!({"b": 1e21, "a": [0.000001, -0.0, 5e-7], "\u{10000}": 1, "\u{ffff}": 2});
        assert_eq!(
            canonical_json(&v).unwrap(),
            r#"{"a":[0.000001,0,5e-7],"b":1e+21,"𐀀":1,"￿":2}"#
        );
        // Known vector: sha256 of `{}`.
        assert_eq!(
            digest_of(&json!({})).unwrap().as_str(),
            "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
    }

    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(serde_json::Value::from),
            ".{0,12}".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                proptest::collection::btree_map(".{0,6}", inner, 0..4)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Hashing the canonical form as it is written is hashing the canonical form.
        #[test]
        fn the_streamed_digest_is_the_digest_of_the_canonical_text(v in json_value()) {
            prop_assert_eq!(
                digest_of(&v).unwrap(),
                Digest::of_bytes(canonical_json(&v).unwrap().as_bytes())
            );
        }

        /// A pair's digest with its second part given as canonical text is the pair's digest.
        #[test]
        fn a_pair_with_its_second_part_written_is_the_pair(a in json_value(), b in json_value()) {
            prop_assert_eq!(
                digest_of_pair(&a, &canonical_json(&b).unwrap()).unwrap(),
                digest_of(&(&a, &b)).unwrap()
            );
        }

        #[test]
        fn key_order_never_changes_the_digest(pairs in proptest::collection::btree_map("[a-z]{1,6}", any::<i32>(), 0..8)) {
            let forward: serde_json::Map<String, serde_json::Value> =
                pairs.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
            let reverse: serde_json::Map<String, serde_json::Value> =
                pairs.iter().rev().map(|(k, v)| (k.clone(), json!(v))).collect();
            prop_assert_eq!(digest_of(&forward).unwrap(), digest_of(&reverse).unwrap());
            let d = digest_of(&forward).unwrap();
            prop_assert_eq!(Digest::parse(d.as_str()), Some(d.clone()));
            prop_assert_eq!(d.bytes().len(), 32);
        }
    }
}
