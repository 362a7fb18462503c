//! Bounded decoding, as gitleaks' `--max-decode-depth` does: base64 (standard and URL-safe),
//! hex and percent-encoded stretches are decoded in place when the result is printable text,
//! and the text is scanned again; up to [`MAX_DECODE_DEPTH`] rounds (a value encoded twice is
//! found at depth 2). A piece map sends every position of a decoded text back to the original,
//! so a secret found inside a decoded stretch is reported (and redacted) as the whole encoded
//! stretch that holds it.

use std::sync::OnceLock;

use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use regex::Regex;

/// gitleaks' default (`--max-decode-depth 5`).
pub const MAX_DECODE_DEPTH: usize = 5;

/// A stretch of the current text and where it came from in the original.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Piece {
    pub cur: (usize, usize),
    pub orig: (usize, usize),
    /// The round that decoded it (0: original text).
    pub round: usize,
}

#[derive(Clone, Debug)]
pub(crate) struct Layered {
    pub text: String,
    pub pieces: Vec<Piece>,
}

fn candidates() -> Option<&'static Regex> {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"(?:%[0-9A-Fa-f]{2})+|[A-Za-z0-9+/_-]{16,}={0,2}").ok())
        .as_ref()
}

fn engine(alpha: &alphabet::Alphabet) -> GeneralPurpose {
    GeneralPurpose::new(
        alpha,
        GeneralPurposeConfig::new()
            .with_decode_padding_mode(DecodePaddingMode::Indifferent)
            .with_decode_allow_trailing_bits(true),
    )
}

/// Printable text: what a secret decoded from an encoding looks like (binary is not scanned).
fn printable(bytes: &[u8]) -> Option<String> {
    let s = std::str::from_utf8(bytes).ok()?;
    if s.is_empty() {
        return None;
    }
    s.chars()
        .all(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t'))
        .then(|| s.to_owned())
}

fn decode_one(seg: &str) -> Option<String> {
    if seg.starts_with('%') {
        let mut out = Vec::with_capacity(seg.len() / 3);
        for chunk in seg.as_bytes().chunks(3) {
            let h = std::str::from_utf8(chunk.get(1..3)?).ok()?;
            out.push(u8::from_str_radix(h, 16).ok()?);
        }
        return printable(&out);
    }
    if seg.len() >= 32
        && seg.len().is_multiple_of(2)
        && seg.bytes().all(|b| b.is_ascii_hexdigit())
        && let Some(s) = hex::decode(seg).ok().and_then(|b| printable(&b))
    {
        return Some(s);
    }
    let body = seg.trim_end_matches('=');
    if body.len() % 4 == 1 {
        return None;
    }
    let std = body.contains(['+', '/']);
    let url = body.contains(['-', '_']);
    let bytes = match (std, url) {
        (true, true) => return None,
        (false, true) => engine(&alphabet::URL_SAFE).decode(body).ok()?,
        (true, false) | (false, false) => engine(&alphabet::STANDARD).decode(body).ok()?,
    };
    printable(&bytes)
}

impl Layered {
    pub fn original(text: &str) -> Self {
        Self {
            text: text.to_owned(),
            pieces: vec![Piece {
                cur: (0, text.len()),
                orig: (0, text.len()),
                round: 0,
            }],
        }
    }

    fn piece_at(&self, pos: usize, end: bool) -> Option<&Piece> {
        self.pieces.iter().find(|p| {
            if end {
                p.cur.0 < pos && pos <= p.cur.1
            } else {
                p.cur.0 <= pos && pos < p.cur.1
            }
        })
    }

    /// The original range that `cur` (a range of this text) came from.
    pub fn map(&self, a: usize, b: usize) -> (usize, usize) {
        let start = match self.piece_at(a, false) {
            Some(p) if p.round > 0 => p.orig.0,
            Some(p) => p.orig.0 + (a - p.cur.0),
            None => self.pieces.last().map_or(0, |p| p.orig.1),
        };
        let end = match self.piece_at(b.max(a + 1), true) {
            Some(p) if p.round > 0 => p.orig.1,
            Some(p) => p.orig.0 + (b.max(a) - p.cur.0).min(p.cur.1 - p.cur.0),
            None => start,
        };
        (start, end.max(start))
    }

    /// Whether `[a, b)` touches text decoded in `round`.
    pub fn touches(&self, a: usize, b: usize, round: usize) -> bool {
        self.pieces
            .iter()
            .any(|p| p.round == round && p.cur.0 < b.max(a + 1) && a < p.cur.1)
    }

    /// Ranges of this text decoded in `round`.
    pub fn decoded_in(&self, round: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.pieces
            .iter()
            .filter(move |p| p.round == round)
            .map(|p| p.cur)
    }

    /// One more round of decoding, looking only where the last round decoded something (the
    /// rest was looked at already); `None` when nothing decodes.
    pub fn decode(&self, round: usize) -> Option<Self> {
        let re = candidates()?;
        let mut segs: Vec<(usize, usize, String)> = Vec::new();
        let search: Vec<(usize, usize)> = if round == 1 {
            vec![(0, self.text.len())]
        } else {
            self.decoded_in(round - 1).collect()
        };
        for (s, e) in search {
            let Some(hay) = self.text.get(s..e) else {
                continue;
            };
            for m in re.find_iter(hay) {
                if let Some(d) = decode_one(m.as_str()) {
                    segs.push((s + m.start(), s + m.end(), d));
                }
            }
        }
        if segs.is_empty() {
            return None;
        }
        let mut text = String::with_capacity(self.text.len());
        let mut pieces = Vec::new();
        let mut last = 0;
        for (s, e, d) in segs {
            self.copy_plain(last, s, &mut text, &mut pieces);
            let orig = self.map(s, e);
            let at = text.len();
            text.push_str(&d);
            pieces.push(Piece {
                cur: (at, text.len()),
                orig,
                round,
            });
            last = e;
        }
        self.copy_plain(last, self.text.len(), &mut text, &mut pieces);
        Some(Self { text, pieces })
    }

    /// Copies `[s, e)` of this text unchanged, splitting at this text's pieces.
    fn copy_plain(&self, s: usize, e: usize, text: &mut String, pieces: &mut Vec<Piece>) {
        if s >= e {
            return;
        }
        for p in &self.pieces {
            let a = s.max(p.cur.0);
            let b = e.min(p.cur.1);
            if a >= b {
                continue;
            }
            let at = text.len();
            text.push_str(self.text.get(a..b).unwrap_or(""));
            let orig = if p.round > 0 {
                p.orig
            } else {
                (p.orig.0 + (a - p.cur.0), p.orig.0 + (b - p.cur.0))
            };
            pieces.push(Piece {
                cur: (at, text.len()),
                orig,
                round: p.round,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn base64_hex_and_percent_decode_and_map_back() {
        let inner = "token ghp_0123456789abcdefghijABCDEFGHIJ012345";
        let b64 = base64::engine::general_purpose::STANDARD.encode(inner);
        let text = format!("x = {b64} ;");
        let l = Layered::original(&text).decode(1).unwrap();
        assert!(l.text.contains(inner));
        let at = l.text.find("ghp_").unwrap();
        assert_eq!(l.map(at, at + 40), (4, 4 + b64.len()));
        assert!(l.touches(at, at + 40, 1));
        assert!(!l.touches(0, 2, 1));
        let hexed = hex::encode("password=hunter2hunter2");
        let l = Layered::original(&format!("v {hexed}")).decode(1).unwrap();
        assert_eq!(l.text, "v password=hunter2hunter2");
        let l = Layered::original("a%3Db%20c").decode(1).unwrap();
        assert_eq!(l.text, "a=b c");
        assert_eq!(l.map(0, 5), (0, 9));
    }

    #[test]
    fn binary_and_plain_words_are_left_alone() {
        assert!(
            Layered::original("path /usr/lib/python3/dist-packages")
                .decode(1)
                .is_none()
        );
        assert!(
            Layered::original(
                "hash 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
            )
            .decode(1)
            .is_none()
        );
    }

    #[test]
    fn twice_encoded_decodes_in_two_rounds() {
        let inner = "secret=abcdefghijklmnop";
        let once = base64::engine::general_purpose::STANDARD.encode(inner);
        let twice = base64::engine::general_purpose::STANDARD.encode(&once);
        let l1 = Layered::original(&twice).decode(1).unwrap();
        assert_eq!(l1.text, once);
        let l2 = l1.decode(2).unwrap();
        assert_eq!(l2.text, inner);
        assert_eq!(l2.map(0, inner.len()), (0, twice.len()));
    }
}
