//! What a person is shown: one function every person-facing text passes through, so that text
//! from a model, a file or a command cannot steer the terminal that shows it.
//!
//! Escaped, each in JSON's spelling (`\r`, `\b`, `\u001b`, `\u202e` …, so a JSON line stays
//! valid JSON meaning the same value): C0 controls (carriage return,
//! backspace, escape sequences and the rest), DEL, C1 controls, the bidirectional embeddings,
//! overrides, isolates and marks, zero-width characters and the byte-order mark, and the Unicode
//! line and paragraph separators. Nothing is dropped: a person sees that something was there.

use std::borrow::Cow;

/// Whether `c` must not reach a terminal raw. Line feed and tab are decided by the caller.
fn hazardous(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        // Bidirectional marks, embeddings, overrides and isolates.
        | '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        // Zero-width characters, word joiner and invisible operators, byte-order mark.
        | '\u{200b}'..='\u{200d}' | '\u{2060}'..='\u{2064}' | '\u{feff}'
        // Line and paragraph separators.
        | '\u{2028}' | '\u{2029}')
}

fn escape_into(out: &mut String, c: char) {
    match c {
        '\r' => out.push_str("\\r"),
        '\u{8}' => out.push_str("\\b"),
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        c => out.push_str(&format!("\\u{:04x}", u32::from(c))),
    }
}

fn render(text: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text
        .chars()
        .any(|c| hazardous(c) || ((c == '\n' || c == '\t') && !keep(c)))
    {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if hazardous(c) || ((c == '\n' || c == '\t') && !keep(c)) {
            escape_into(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A value shown inside one line (an argument, a path, a title): line feeds and tabs are
/// escaped too, so a value cannot start a line of its own that looks like Warrant's.
pub fn inline(text: &str) -> Cow<'_, str> {
    render(text, |_| false)
}

/// A block of lines Warrant itself laid out (a diff, a listing): line feeds and tabs kept,
/// everything else that could steer a terminal escaped.
pub fn lines(text: &str) -> Cow<'_, str> {
    render(text, |_| true)
}

/// A line a person typed, made safe to keep and to show: every character that could steer a
/// terminal (tab kept) escaped as [`inline`] does, and each one named as `U+XXXX`, in order, so
/// what was neutralized is on record.
pub fn neutralize(text: &str) -> (String, Vec<String>) {
    let found: Vec<String> = text
        .chars()
        .filter(|&c| hazardous(c) || c == '\n')
        .map(|c| format!("U+{:04X}", u32::from(c)))
        .collect();
    (render(text, |c| c == '\t').into_owned(), found)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        assert!(matches!(inline("run ls -la ünïcode"), Cow::Borrowed(_)));
        assert!(matches!(lines("a\n\tb"), Cow::Borrowed(_)));
    }

    #[test]
    fn spoofing_payloads_are_visible() {
        let cases = [
            (
                "rm -rf /\rrisk read  run ls -la",
                "rm -rf /\\rrisk read  run ls -la",
            ),
            ("rm x\u{1b}[2K\u{1b}[1Als", "rm x\\u001b[2K\\u001b[1Als"),
            ("abc\u{8}\u{8}\u{8}ls", "abc\\b\\b\\bls"),
            ("file\u{202e}txt.exe", "file\\u202etxt.exe"),
            ("r\u{200b}m", "r\\u200bm"),
            ("\u{9b}2K", "\\u009b2K"),
            ("a\u{2028}b", "a\\u2028b"),
            ("bom\u{feff}", "bom\\ufeff"),
        ];
        for (raw, want) in cases {
            assert_eq!(inline(raw), want, "{raw:?}");
            assert_eq!(lines(raw), want, "{raw:?}");
        }
    }

    #[test]
    fn line_feeds_are_escaped_inline_and_kept_in_blocks() {
        assert_eq!(inline("a\nrisk read"), "a\\nrisk read");
        assert_eq!(lines("a\nb"), "a\nb");
        assert_eq!(inline("a\tb"), "a\\tb");
    }

    #[test]
    fn a_json_line_stays_the_same_json() {
        let value = serde_json::json!({"argv": ["rm\u{202e}", "a\u{200b}\u{1b}[2K\rb"]});
        let line = value.to_string();
        let shown = lines(&line);
        assert!(!shown.chars().any(hazardous), "{shown}");
        let back: serde_json::Value = serde_json::from_str(&shown).unwrap();
        assert_eq!(back, value);
    }

    #[test]
    fn nothing_hazardous_survives_any_input() {
        for cp in (0u32..0x3000).chain(0xfe00..0xffff) {
            let Some(c) = char::from_u32(cp) else {
                continue;
            };
            let s = format!("x{c}y");
            for shown in [inline(&s), lines(&s)] {
                assert!(
                    !shown.chars().any(hazardous),
                    "U+{cp:04X} survived as {shown:?}"
                );
            }
        }
    }
}
