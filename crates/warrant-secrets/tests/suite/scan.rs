use pretty_assertions::assert_eq;
use serde_json::json;
use warrant_secrets::{Redaction, Redactor, RuleSet, RulesError, Scanner, shannon_entropy};

/// A deterministic, high-entropy string over `alphabet` (xorshift; no randomness in tests).
pub(crate) fn noise(seed: u64, len: usize, alphabet: &str) -> String {
    let chars: Vec<char> = alphabet.chars().collect();
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            chars[(x % chars.len() as u64) as usize]
        })
        .collect()
}

pub(crate) const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const UPPER32: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
const HEX: &str = "0123456789abcdef";

/// One true secret per provider, as it would appear in tool output, and the rule expected.
fn samples() -> Vec<(&'static str, String)> {
    vec![
        ("aws-access-token", format!("AKIA{}", noise(1, 16, UPPER32))),
        ("github-pat", format!("ghp_{}", noise(2, 36, ALNUM))),
        ("github-oauth", format!("gho_{}", noise(3, 36, ALNUM))),
        ("gitlab-pat", format!("glpat-{}", noise(4, 20, ALNUM))),
        (
            "slack-bot-token",
            format!("xoxb-1234567890123-1234567890123-{}", noise(5, 24, ALNUM)),
        ),
        (
            "stripe-access-token",
            format!("sk_live_{}", noise(6, 24, ALNUM)),
        ),
        (
            "openai-api-key",
            format!(
                "sk-proj-{}T3BlbkFJ{}",
                noise(7, 58, ALNUM),
                noise(8, 58, ALNUM)
            ),
        ),
        (
            "anthropic-api-key",
            format!("sk-ant-api03-{}AA", noise(9, 93, ALNUM)),
        ),
        ("gcp-api-key", format!("AIza{}", noise(10, 35, ALNUM))),
        ("npm-access-token", format!("npm_{}", noise(11, 36, ALNUM))),
        ("digitalocean-pat", format!("dop_v1_{}", noise(12, 64, HEX))),
        (
            "huggingface-access-token",
            format!(
                "hf_{}",
                noise(
                    13,
                    34,
                    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                )
            ),
        ),
        (
            "databricks-api-token",
            format!("dapi{}", noise(14, 32, HEX)),
        ),
        (
            "generic-api-key",
            format!("db_password = \"{}\"", noise(15, 24, ALNUM)),
        ),
        (
            "private-key",
            format!(
                "-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----",
                noise(16, 128, ALNUM)
            ),
        ),
    ]
}

#[test]
fn the_shipped_rules_compile_and_every_sample_is_found_by_its_rule() {
    let scanner = Scanner::default_rules();
    assert!(scanner.rule_ids().count() >= 40);
    for (rule, text) in samples() {
        let line = format!("output: {text}\n");
        let found: Vec<String> = scanner.scan(&line).into_iter().map(|f| f.rule).collect();
        assert!(
            found.iter().any(|r| r == rule),
            "{rule} not found in {line:?}; found {found:?}"
        );
    }
}

#[test]
fn ordinary_text_and_placeholders_are_not_secrets() {
    let scanner = Scanner::default_rules();
    let benign = [
        "fn main() { let key = config.get(\"api_key\"); }",
        "API_KEY=${API_KEY}",
        "password = \"changeme\"",
        "token: <your-token-here>",
        "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
        "The keyboard has a secret compartment.",
        "commit 3f9a1c2b7d4e5f60718293a4b5c6d7e8f9012345",
        "uuid 123e4567-e89b-12d3-a456-426614174000",
        "password: xxxxxxxxxxxx",
        "key_id = \"ef94f73c8dbb4c50\"  # a 16-hex-digit fingerprint, not a secret",
        "// Comments with non-ASCII text (é, ü, 東京) around token = config.token()",
    ];
    for text in benign {
        assert_eq!(scanner.scan(text), vec![], "false positive in {text:?}");
    }
}

#[test]
fn redaction_replaces_the_secret_and_reports_rule_ids_and_counts_only() {
    let known = format!("kn0wn-{}", noise(20, 20, ALNUM));
    let gh = format!("ghp_{}", noise(21, 36, ALNUM));
    let redactor = Redactor::new(Scanner::default_rules(), [known.clone(), "short".into()]);
    let text = format!("A={known}\nB={gh}\nC={gh}\nshort stays");
    let (out, report) = redactor.redact(&text);
    assert_eq!(
        out,
        "A=[REDACTED:known-secret]\nB=[REDACTED:github-pat]\nC=[REDACTED:github-pat]\nshort stays"
    );
    assert_eq!(
        report,
        Redaction {
            counts: [("github-pat".to_owned(), 2), ("known-secret".to_owned(), 1)].into()
        }
    );
    let journaled = serde_json::to_string(&report).unwrap();
    assert!(!journaled.contains(&known) && !journaled.contains(&gh));
    assert!(!format!("{redactor:?}").contains(&known));
}

#[test]
fn json_redaction_walks_every_string() {
    let gh = format!("ghp_{}", noise(22, 36, ALNUM));
    let redactor = Redactor::new(Scanner::default_rules(), Vec::new());
    let (v, report) =
        redactor.redact_json(&json!({"content": format!("x {gh}"), "lines": [gh, 3], "ok": true}));
    assert_eq!(
        v,
        json!({"content": "x [REDACTED:github-pat]", "lines": ["[REDACTED:github-pat]", 3], "ok": true})
    );
    assert_eq!(report.total(), 2);
}

#[test]
fn a_rule_that_does_not_compile_is_a_coded_error() {
    let e = RuleSet::parse("[[rules]]\nid = \"bad\"\nregex = '''(unclosed'''\n").unwrap_err();
    assert!(
        matches!(&e, RulesError::Regex { id, .. } if id == "bad"),
        "{e}"
    );
    assert_eq!(warrant_core::Coded::code(&e), "W-SECRETS-002");
    let e = RuleSet::parse("[[rules]]\nid = \"x\"\nregex = 'a'\nkeywords = [").unwrap_err();
    assert_eq!(warrant_core::Coded::code(&e), "W-SECRETS-001");
}

#[test]
fn entropy_is_bits_per_character() {
    assert_eq!(shannon_entropy("aaaa"), 0.0);
    assert_eq!(shannon_entropy("abab"), 1.0);
    assert_eq!(shannon_entropy("abcd"), 2.0);
}
