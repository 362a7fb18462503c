//! Encoded secrets: found after decoding, and redacted as the encoded stretch. (Secrets cut by
//! the head/tail capture: warrant-cli's `suite::secrets`, which has `warrant_exec::HeadTail`.)
use base64::Engine as _;
use warrant_secrets::{Redactor, Scanner};

use super::scan::{ALNUM, noise};

fn redactor() -> Redactor {
    Redactor::new(Scanner::default_rules(), Vec::new())
}

fn pat() -> String {
    format!("ghp_{}", noise(41, 36, ALNUM))
}

#[test]
fn base64_hex_and_percent_encoded_secrets_are_found_and_the_encoding_redacted() {
    let r = redactor();
    let b64 = base64::engine::general_purpose::STANDARD.encode(format!("token: {}\n", pat()));
    let hexed = hex_encode(&format!("GITHUB_TOKEN={}", pat()));
    let pct = format!("https://x.test/?t={}", pat().replace('_', "%5F"));
    for (enc, shown) in [(&b64, "base64"), (&hexed, "hex"), (&pct, "percent")] {
        let text = format!("config blob: {enc} end");
        let found = r.scanner().scan(&text);
        assert!(
            found
                .iter()
                .any(|f| f.rule == "github-pat" && f.decode_depth >= 1),
            "{shown}: {found:?}"
        );
        let (out, report) = r.redact(&text);
        assert!(!out.contains(enc.as_str()), "{shown}: {out}");
        assert!(
            out.starts_with("config blob: ") && out.ends_with(" end"),
            "{out}"
        );
        assert!(
            report.counts.contains_key("github-pat"),
            "{shown}: {report:?}"
        );
    }
}

fn hex_encode(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn decoding_is_bounded_in_depth() {
    let r = redactor();
    let mut v = format!("token = {}", pat());
    for _ in 0..2 {
        v = base64::engine::general_purpose::STANDARD.encode(&v);
    }
    let found = r.scanner().scan(&v);
    assert!(
        found
            .iter()
            .any(|f| f.rule == "github-pat" && f.decode_depth == 2),
        "{found:?}"
    );
    let mut deep = format!("token = {}", pat());
    for _ in 0..(warrant_secrets::MAX_DECODE_DEPTH + 1) {
        deep = base64::engine::general_purpose::STANDARD.encode(&deep);
    }
    assert!(
        !r.scanner()
            .scan(&deep)
            .iter()
            .any(|f| f.rule == "github-pat")
    );
}
