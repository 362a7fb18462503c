//! Encoded and split secrets: found after decoding (and redacted as the encoded stretch), and
//! masked where a head/tail capture cut one in two.
use base64::Engine as _;
use pretty_assertions::assert_eq;
use warrant_exec::HeadTail;
use warrant_secrets::{CUT_SECRET_RULE, Redactor, Scanner};

use super::scan::{ALNUM, noise};

fn redactor() -> Redactor {
    Redactor::new(Scanner::default_rules().unwrap(), Vec::new())
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

/// The output a command printed, captured as `run_command` captures it.
fn captured(out: &str, head: usize, tail: usize) -> String {
    let mut ht = HeadTail::new(head, tail);
    ht.push(out.as_bytes());
    ht.finish().text
}

#[test]
fn a_secret_cut_by_the_head_tail_capture_is_still_masked() {
    let r = redactor();
    let secret = pat();
    let filler = "x".repeat(5000);
    // Cut at the end of the head: the head keeps `ghp_` and some of the value.
    let out = format!("value: {secret}{filler}\nlast line\n");
    let text = captured(&out, 30, 20);
    assert!(
        text.contains(&secret[..17]),
        "precondition: the head holds a prefix: {text}"
    );
    assert!(
        r.scanner().scan(&text).is_empty(),
        "precondition: no rule sees half a secret"
    );
    let (red, report) = r.redact(&text);
    assert!(!red.contains(&secret[..8]), "{red}");
    assert!(report.counts.contains_key(CUT_SECRET_RULE), "{report:?}");
    // Cut at the start of the tail: the tail keeps the end of the value.
    let out = format!("first line\n{filler}{secret}\n");
    let text = captured(&out, 16, 25);
    let suffix = &secret[secret.len() - 20..];
    assert!(text.contains(suffix), "precondition: {text}");
    let (red, _) = r.redact(&text);
    assert!(!red.contains(&suffix[..12]), "{red}");
    // A private key whose END line was cut away.
    let body: String = (0..30)
        .map(|i| format!("{}\n", noise(50 + i, 64, ALNUM)))
        .collect();
    let key = format!("-----BEGIN RSA PRIVATE KEY-----\n{body}-----END RSA PRIVATE KEY-----\n");
    let text = captured(&format!("{key}{filler}"), 600, 10);
    assert!(text.contains("BEGIN RSA PRIVATE KEY"), "precondition");
    let (red, _) = r.redact(&text);
    assert!(!red.contains(&body[..64]), "{red}");
    assert!(red.contains("BEGIN RSA PRIVATE KEY"), "{red}");
}

#[test]
fn negative_control_without_a_cut_nothing_is_masked_for_being_at_a_boundary() {
    let r = redactor();
    let text = captured("ordinary output\nwith several words\n", 4096, 4096);
    assert_eq!(r.redact(&text).0, text);
    // a cut through short words masks nothing
    let text = captured(
        &format!("{}\n{}", "ab cd ".repeat(100), "ef gh ".repeat(100)),
        31,
        31,
    );
    let (red, report) = r.redact(&text);
    assert_eq!(red, text);
    assert!(report.is_empty());
}
