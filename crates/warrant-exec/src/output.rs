//! Bounded capture of one output stream: the first `head` bytes and the last `tail` bytes are
//! kept while streaming (the tail in a ring buffer), so memory never exceeds `head + tail`
//! however much a command prints. The middle is counted, not kept.

use serde::{Deserialize, Serialize};

/// What was kept of one stream, ready for the journal and the model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapturedStream {
    /// Lossy UTF-8; when the middle was cut, head + a marker naming the omitted bytes + tail.
    pub text: String,
    pub total_bytes: u64,
    pub omitted_bytes: u64,
}

/// A streaming head-and-tail keeper.
#[derive(Debug, Default)]
pub struct HeadTail {
    head_cap: usize,
    tail_cap: usize,
    head: Vec<u8>,
    /// Ring buffer. While it is filling, `tail_start == 0`; once `tail.len() == tail_cap`,
    /// `tail_start` is the oldest byte and the next one to overwrite.
    tail: Vec<u8>,
    tail_start: usize,
    total: u64,
}

impl HeadTail {
    pub fn new(head: usize, tail: usize) -> Self {
        Self {
            head_cap: head,
            tail_cap: tail,
            ..Self::default()
        }
    }

    pub fn push(&mut self, mut data: &[u8]) {
        self.total = self.total.saturating_add(data.len() as u64);
        let room = self.head_cap - self.head.len();
        if room > 0 {
            let n = room.min(data.len());
            reserve_within(&mut self.head, n, self.head_cap);
            self.head.extend_from_slice(&data[..n]);
            data = &data[n..];
        }
        self.push_tail(data);
    }

    fn push_tail(&mut self, mut data: &[u8]) {
        if self.tail_cap == 0 || data.is_empty() {
            return;
        }
        if data.len() >= self.tail_cap {
            // Everything older than this chunk falls out of the window at once.
            let keep = &data[data.len() - self.tail_cap..];
            let extra = self.tail_cap - self.tail.len();
            reserve_within(&mut self.tail, extra, self.tail_cap);
            self.tail.clear();
            self.tail.extend_from_slice(keep);
            self.tail_start = 0;
            return;
        }
        if self.tail.len() < self.tail_cap {
            let n = (self.tail_cap - self.tail.len()).min(data.len());
            reserve_within(&mut self.tail, n, self.tail_cap);
            self.tail.extend_from_slice(&data[..n]);
            data = &data[n..];
        }
        while !data.is_empty() {
            let n = (self.tail_cap - self.tail_start).min(data.len());
            self.tail[self.tail_start..self.tail_start + n].copy_from_slice(&data[..n]);
            self.tail_start = (self.tail_start + n) % self.tail_cap;
            data = &data[n..];
        }
    }

    /// Bytes held right now (what the memory bound is about).
    pub fn retained_bytes(&self) -> usize {
        self.head.capacity() + self.tail.capacity()
    }

    pub fn total_bytes(&self) -> u64 {
        self.total
    }

    pub fn finish(self) -> CapturedStream {
        let kept = (self.head.len() + self.tail.len()) as u64;
        let omitted = self.total.saturating_sub(kept);
        let mut tail = Vec::with_capacity(self.tail.len());
        tail.extend_from_slice(&self.tail[self.tail_start..]);
        tail.extend_from_slice(&self.tail[..self.tail_start]);
        let text = if omitted == 0 {
            // Nothing cut: decode head and tail together so a character spanning the boundary
            // between them survives.
            let mut all = self.head;
            all.extend_from_slice(&tail);
            String::from_utf8_lossy(&all).into_owned()
        } else {
            format!(
                "{}\n[… {omitted} bytes omitted …]\n{}",
                String::from_utf8_lossy(&self.head),
                String::from_utf8_lossy(&tail)
            )
        };
        CapturedStream {
            text,
            total_bytes: self.total,
            omitted_bytes: omitted,
        }
    }
}

/// Grow `v` to hold `extra` more bytes, geometrically (so streaming stays linear) but never
/// past `cap` (so the bound holds for the allocation, not just the length).
fn reserve_within(v: &mut Vec<u8>, extra: usize, cap: usize) {
    let needed = v.len() + extra;
    if needed > v.capacity() {
        let target = needed.max(v.capacity().saturating_mul(2)).min(cap);
        v.reserve_exact(target.saturating_sub(v.len()));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;
    use proptest::prelude::*;

    fn capture(head: usize, tail: usize, chunks: &[&[u8]]) -> CapturedStream {
        let mut ht = HeadTail::new(head, tail);
        for c in chunks {
            ht.push(c);
        }
        ht.finish()
    }

    #[test]
    fn exact_boundaries() {
        // Fits exactly: nothing omitted, no marker.
        assert_eq!(
            capture(3, 3, &[b"abc", b"def"]),
            CapturedStream {
                text: "abcdef".into(),
                total_bytes: 6,
                omitted_bytes: 0
            }
        );
        // One byte over: the first tail byte falls out.
        assert_eq!(
            capture(3, 3, &[b"abcdefg"]),
            CapturedStream {
                text: "abc\n[… 1 bytes omitted …]\nefg".into(),
                total_bytes: 7,
                omitted_bytes: 1
            }
        );
        // Byte at a time, wrapping the ring several times.
        let bytes: Vec<u8> = (b'a'..=b'z').collect();
        let chunks: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(
            capture(2, 4, &chunks),
            CapturedStream {
                text: "ab\n[… 20 bytes omitted …]\nwxyz".into(),
                total_bytes: 26,
                omitted_bytes: 20
            }
        );
        assert_eq!(
            capture(4, 4, &[]),
            CapturedStream {
                text: String::new(),
                total_bytes: 0,
                omitted_bytes: 0
            }
        );
    }

    #[test]
    fn utf8_is_lossy_and_a_whole_stream_decodes_across_the_seam() {
        // "é" is two bytes; the first lands in head, the second in tail.
        let s = "aé".as_bytes();
        assert_eq!(capture(2, 8, &[s]).text, "aé");
        let cut = capture(2, 2, &["aébcd".as_bytes()]);
        assert_eq!(cut.text, "a\u{fffd}\n[… 2 bytes omitted …]\ncd");
    }

    proptest! {
        #[test]
        fn keeps_head_and_tail_of_any_stream_within_bounds(
            head in 0usize..40,
            tail in 0usize..40,
            chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..50), 0..20),
        ) {
            let mut ht = HeadTail::new(head, tail);
            let mut all = Vec::new();
            for c in &chunks {
                ht.push(c);
                all.extend_from_slice(c);
                prop_assert!(ht.retained_bytes() <= head + tail);
            }
            let got = ht.finish();
            prop_assert_eq!(got.total_bytes, all.len() as u64);
            let kept_head = &all[..head.min(all.len())];
            let rest = &all[kept_head.len()..];
            let kept_tail = &rest[rest.len().saturating_sub(tail)..];
            let omitted = all.len() - kept_head.len() - kept_tail.len();
            prop_assert_eq!(got.omitted_bytes, omitted as u64);
            let want = if omitted == 0 {
                String::from_utf8_lossy(&all).into_owned()
            } else {
                format!(
                    "{}\n[… {omitted} bytes omitted …]\n{}",
                    String::from_utf8_lossy(kept_head),
                    String::from_utf8_lossy(kept_tail)
                )
            };
            prop_assert_eq!(got.text, want);
        }
    }
}
