//! RFC 8785 (JCS) canonical JSON, written as serde serializes a value.
//!
//! Every digest of the house goes through here (events, audit records, approvals, model
//! requests), so its cost is paid on every step. The form is the one `serde_jcs` writes, byte for
//! byte (its output is this module's test oracle, and every digest already stored was computed by
//! it); the writing is not: an object's members are kept as ranges of one buffer per open object
//! and sorted once it closes, keys are compared as bytes unless UTF-16 order could differ, and no
//! fragment goes through a boxed writer.

use std::io::{self, Write};
use std::ops::Range;

use serde::Serialize;
use serde_json::ser::{CharEscape, Formatter};

/// Writes the canonical form of `value` to `writer`. A float that is not finite is written
/// `null`, as serde_json writes it and so as the journal stores it (`serde_jcs` did the same
/// everywhere but at the top level, where it refused one; RFC 8785 has no NaN or infinity).
pub fn write<W: Write, T: Serialize + ?Sized>(
    writer: W,
    value: &T,
) -> Result<(), serde_json::Error> {
    let mut ser = serde_json::Serializer::with_formatter(writer, Canonical::default());
    value.serialize(&mut ser)
}

/// The canonical form of `value` as bytes.
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::with_capacity(256);
    write(&mut out, value)?;
    Ok(out)
}

/// One open object: its members' bytes, and where each key and value lies in them.
#[derive(Default)]
struct Open {
    bytes: Vec<u8>,
    members: Vec<(Range<usize>, Range<usize>)>,
    key: Range<usize>,
}

/// A serde_json formatter that buffers each object until it closes, then writes its members
/// in the order of their keys' UTF-16 code units.
#[derive(Default)]
struct Canonical {
    open: Vec<Open>,
    /// Closed objects' buffers, kept for the next object to open.
    spare: Vec<Open>,
}

impl Canonical {
    fn put<W: ?Sized + Write>(&mut self, writer: &mut W, bytes: &[u8]) -> io::Result<()> {
        match self.open.last_mut() {
            Some(open) => {
                open.bytes.extend_from_slice(bytes);
                Ok(())
            }
            None => writer.write_all(bytes),
        }
    }

    /// Every JSON number is an IEEE double written the way ECMAScript writes it.
    fn number<W: ?Sized + Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        if !value.is_finite() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a number that is not finite has no canonical form",
            ));
        }
        let mut buffer = ryu_js::Buffer::new();
        let text = buffer.format_finite(value);
        self.put(writer, text.as_bytes())
    }
}

/// The order of two keys (each a JSON string with its quotes and escapes) by the UTF-16 code
/// units of what they denote. Without escapes or characters beyond the BMP, the order of the
/// UTF-8 bytes is that order.
fn key_order(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let plain = |k: &[u8]| !k.iter().any(|&c| c == b'\\' || c >= 0xF0);
    if plain(a) && plain(b) {
        // Without the quotes, or `"a"` would sort after `"a!"`.
        return unquoted(a).cmp(unquoted(b));
    }
    let decode = |k: &[u8]| serde_json::from_slice::<String>(k).unwrap_or_default();
    decode(a).encode_utf16().cmp(decode(b).encode_utf16())
}

fn unquoted(key: &[u8]) -> &[u8] {
    key.get(1..key.len().saturating_sub(1)).unwrap_or(key)
}

impl Formatter for Canonical {
    fn write_null<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.put(writer, b"null")
    }

    fn write_bool<W: ?Sized + Write>(&mut self, writer: &mut W, value: bool) -> io::Result<()> {
        self.put(writer, if value { b"true" } else { b"false" })
    }

    fn write_i8<W: ?Sized + Write>(&mut self, writer: &mut W, value: i8) -> io::Result<()> {
        self.number(writer, f64::from(value))
    }

    fn write_i16<W: ?Sized + Write>(&mut self, writer: &mut W, value: i16) -> io::Result<()> {
        self.number(writer, f64::from(value))
    }

    fn write_i32<W: ?Sized + Write>(&mut self, writer: &mut W, value: i32) -> io::Result<()> {
        self.number(writer, f64::from(value))
    }

    #[expect(clippy::cast_precision_loss, reason = "a JSON number is a double")]
    fn write_i64<W: ?Sized + Write>(&mut self, writer: &mut W, value: i64) -> io::Result<()> {
        self.number(writer, value as f64)
    }

    #[expect(clippy::cast_precision_loss, reason = "a JSON number is a double")]
    fn write_i128<W: ?Sized + Write>(&mut self, writer: &mut W, value: i128) -> io::Result<()> {
        self.number(writer, value as f64)
    }

    fn write_u8<W: ?Sized + Write>(&mut self, writer: &mut W, value: u8) -> io::Result<()> {
        self.number(writer, f64::from(value))
    }

    fn write_u16<W: ?Sized + Write>(&mut self, writer: &mut W, value: u16) -> io::Result<()> {
        self.number(writer, f64::from(value))
    }

    fn write_u32<W: ?Sized + Write>(&mut self, writer: &mut W, value: u32) -> io::Result<()> {
        self.number(writer, f64::from(value))
    }

    #[expect(clippy::cast_precision_loss, reason = "a JSON number is a double")]
    fn write_u64<W: ?Sized + Write>(&mut self, writer: &mut W, value: u64) -> io::Result<()> {
        self.number(writer, value as f64)
    }

    #[expect(clippy::cast_precision_loss, reason = "a JSON number is a double")]
    fn write_u128<W: ?Sized + Write>(&mut self, writer: &mut W, value: u128) -> io::Result<()> {
        self.number(writer, value as f64)
    }

    fn write_f32<W: ?Sized + Write>(&mut self, writer: &mut W, value: f32) -> io::Result<()> {
        self.number(writer, f64::from(value))
    }

    fn write_f64<W: ?Sized + Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        self.number(writer, value)
    }

    fn write_number_str<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        value: &str,
    ) -> io::Result<()> {
        let value: f64 = value.parse().map_err(io::Error::other)?;
        self.number(writer, value)
    }

    fn begin_string<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.put(writer, b"\"")
    }

    fn end_string<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.put(writer, b"\"")
    }

    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        self.put(writer, fragment.as_bytes())
    }

    fn write_char_escape<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        escape: CharEscape,
    ) -> io::Result<()> {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let control;
        let bytes: &[u8] = match escape {
            CharEscape::Quote => b"\\\"",
            CharEscape::ReverseSolidus => b"\\\\",
            CharEscape::Solidus => b"/",
            CharEscape::Backspace => b"\\b",
            CharEscape::FormFeed => b"\\f",
            CharEscape::LineFeed => b"\\n",
            CharEscape::CarriageReturn => b"\\r",
            CharEscape::Tab => b"\\t",
            CharEscape::AsciiControl(c) => {
                control = [
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(c >> 4)],
                    HEX[usize::from(c & 0xF)],
                ];
                &control
            }
        };
        self.put(writer, bytes)
    }

    fn write_raw_fragment<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let value: serde_json::Value = serde_json::from_str(fragment)?;
        let bytes = to_vec(&value)?;
        self.put(writer, &bytes)
    }

    fn begin_array<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.put(writer, b"[")
    }

    fn end_array<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.put(writer, b"]")
    }

    fn begin_array_value<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            self.put(writer, b",")
        }
    }

    fn end_array_value<W: ?Sized + Write>(&mut self, _writer: &mut W) -> io::Result<()> {
        Ok(())
    }

    fn begin_object<W: ?Sized + Write>(&mut self, _writer: &mut W) -> io::Result<()> {
        let open = self.spare.pop().unwrap_or_default();
        self.open.push(open);
        Ok(())
    }

    fn begin_object_key<W: ?Sized + Write>(
        &mut self,
        _writer: &mut W,
        _first: bool,
    ) -> io::Result<()> {
        let open = self.open.last_mut().ok_or_else(unbalanced)?;
        open.key.start = open.bytes.len();
        Ok(())
    }

    fn end_object_key<W: ?Sized + Write>(&mut self, _writer: &mut W) -> io::Result<()> {
        let open = self.open.last_mut().ok_or_else(unbalanced)?;
        open.key.end = open.bytes.len();
        Ok(())
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, _writer: &mut W) -> io::Result<()> {
        Ok(())
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, _writer: &mut W) -> io::Result<()> {
        let open = self.open.last_mut().ok_or_else(unbalanced)?;
        let value = open.key.end..open.bytes.len();
        open.members.push((open.key.clone(), value));
        Ok(())
    }

    fn end_object<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        let mut open = self.open.pop().ok_or_else(unbalanced)?;
        let bytes = &open.bytes;
        // Stable, so of two equal keys the later one follows; it is the one kept.
        open.members
            .sort_by(|(a, _), (b, _)| key_order(&bytes[a.clone()], &bytes[b.clone()]));
        self.put(writer, b"{")?;
        let mut first = true;
        for (i, (key, value)) in open.members.iter().enumerate() {
            if let Some((next, _)) = open.members.get(i + 1)
                && bytes[key.clone()] == bytes[next.clone()]
            {
                continue;
            }
            if !first {
                self.put(writer, b",")?;
            }
            first = false;
            self.put(writer, &bytes[key.clone()])?;
            self.put(writer, b":")?;
            self.put(writer, &bytes[value.clone()])?;
        }
        self.put(writer, b"}")?;
        open.bytes.clear();
        open.members.clear();
        self.spare.push(open);
        Ok(())
    }
}

fn unbalanced() -> io::Error {
    io::Error::other("an object's member written outside an object")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    fn ours<T: Serialize + ?Sized>(v: &T) -> String {
        String::from_utf8(to_vec(v).unwrap()).unwrap()
    }

    #[test]
    fn rfc8785_sample_and_key_order() {
        // RFC 8785 §3.2.2's sample input, and §3.2.3's sorting example.
        let v: serde_json::Value = serde_json::from_str(
            r#"{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],
                "string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
                "literals":[null,true,false]}"#,
        )
        .unwrap();
        assert_eq!(
            ours(&v),
            r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
        );
        let v: serde_json::Value = serde_json::from_str(
            r#"{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}"#,
        )
        .unwrap();
        let keys: Vec<String> = serde_json::from_str::<serde_json::Value>(&ours(&v))
            .unwrap()
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            keys,
            [
                "Carriage Return",
                "One",
                "Control",
                "Latin Small Letter O With Diaeresis",
                "Euro Sign",
                "Emoji: Grinning Face",
                "Hebrew Letter Dalet With Dagesh"
            ]
        );
    }

    #[test]
    fn a_float_that_is_not_finite_is_null_as_stored() {
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let v = vec![(1, Some(bad))];
            assert_eq!(ours(&v), "[[1,null]]");
            assert_eq!(ours(&v), serde_jcs::to_string(&v).unwrap());
            assert_eq!(ours(&v), ours(&serde_json::to_value(&v).unwrap()));
        }
        // The one difference: the oracle refused a bare float that is not finite.
        assert_eq!(ours(&f32::NAN), "null");
        assert!(serde_jcs::to_string(&f32::NAN).is_err());
    }

    #[test]
    fn duplicate_keys_keep_the_last_value_as_the_oracle_does() {
        #[derive(Serialize)]
        struct Inner {
            a: u8,
        }
        #[derive(Serialize)]
        struct Outer {
            a: u8,
            #[serde(flatten)]
            inner: Inner,
        }
        let v = Outer {
            a: 1,
            inner: Inner { a: 2 },
        };
        assert_eq!(ours(&v), serde_jcs::to_string(&v).unwrap());
    }

    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<u64>().prop_map(serde_json::Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(serde_json::Value::from),
            "\\PC{0,12}".prop_map(serde_json::Value::from),
            "[\\x00-\\x1f\"\\\\/a\u{7f}\u{e000}\u{ffff}\u{10000}\u{1f600}]{0,6}"
                .prop_map(serde_json::Value::from),
        ];
        let key = prop_oneof![
            "[a-z_]{0,6}",
            "\\PC{0,4}",
            "[\\x00-\\x21\"\\\\a\u{80}\u{e000}\u{fb33}\u{ffff}\u{10000}\u{1f600}]{0,3}",
        ];
        leaf.prop_recursive(4, 48, 6, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5).prop_map(serde_json::Value::from),
                proptest::collection::vec((key.clone(), inner), 0..6)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Byte for byte what serde_jcs writes, which computed every digest already stored.
        #[test]
        fn the_canonical_form_is_the_oracles(v in json_value()) {
            prop_assert_eq!(ours(&v), serde_jcs::to_string(&v).unwrap());
        }

        #[test]
        fn typed_values_are_written_as_the_oracle_writes_them(
            a in any::<(u8, i16, u32, i64, u64, i128, f32, bool, char, String)>(),
            m in proptest::collection::btree_map("\\PC{0,5}", any::<Option<i32>>(), 0..6),
        ) {
            prop_assert_eq!(ours(&a), serde_jcs::to_string(&a).unwrap());
            prop_assert_eq!(ours(&m), serde_jcs::to_string(&m).unwrap());
            let bytes: &[u8] = a.9.as_bytes();
            prop_assert_eq!(ours(&bytes), serde_jcs::to_string(&bytes).unwrap());
        }
    }
}
