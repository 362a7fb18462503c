//! The journal's sealing (see `warrant_kernel::confidential`): what the redactor finds in an
//! event is stored as `[SEALED:<rule>:<base64url of nonce, ciphertext and tag>]`, encrypted with
//! ChaCha20-Poly1305 under a key derived from the installation secret and bound to the run and
//! the rule, so a sealed value cannot be moved to another run or renamed. Only a holder of the
//! installation secret opens it; everyone else reads the rule's name. In the audit facts the
//! secret is replaced by `[REDACTED:<rule>]`: the trail says a secret was there, never which.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use serde_json::Value;
use warrant_core::RunId;
use warrant_exec::vault::{derive_key, open_bytes, seal_bytes};
use warrant_kernel::confidential::{Confidential, each_string};
use warrant_secrets::Redactor;

/// How a sealed value starts.
pub const SEALED_PREFIX: &str = "[SEALED:";

/// Strings shorter than this hold no secret the rules would find; they are not scanned.
const SHORTEST: usize = 8;

/// Strings up to this long that the rules found clean are remembered, so the same text met
/// again (a run's id, its actor, a path, a policy's reason, a digest: each event and its audit
/// facts repeat most of them) is not scanned again.
const REMEMBERED_LONGEST: usize = 512;
/// How many clean strings are remembered; past it the memory starts over.
const REMEMBERED_MOST: usize = 4096;

pub struct JournalSeal {
    redactor: std::sync::Arc<Redactor>,
    key: [u8; 32],
    /// Texts the redactor found nothing in. The redactor's rules and known values are fixed
    /// for its life, so a text clean once is clean every time: skipping it changes nothing.
    clean: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl std::fmt::Debug for JournalSeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JournalSeal").finish_non_exhaustive()
    }
}

fn aad(run: &RunId, rule: &str) -> Vec<u8> {
    format!("warrant journal v1\0{run}\0{rule}").into_bytes()
}

/// A rule id as it may stand in a sealed value (gitleaks' ids are `[a-z0-9-]`; a custom rule's
/// odd id is named `secret`).
fn rule_name(rule: &str) -> &str {
    if !rule.is_empty()
        && rule
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        rule
    } else {
        "secret"
    }
}

impl JournalSeal {
    pub fn new(redactor: std::sync::Arc<Redactor>, installation_secret: &[u8]) -> Self {
        Self {
            redactor,
            key: derive_key(
                installation_secret,
                b"warrant-journal-salt-v1",
                b"warrant journal seal v1",
            ),
            clean: std::sync::Mutex::new(std::collections::HashSet::new()),
        }
    }

    /// Whether `text` is too short to hold a secret, or was scanned clean before.
    fn known_clean(&self, text: &str) -> bool {
        text.len() < SHORTEST
            || (text.len() <= REMEMBERED_LONGEST
                && self
                    .clean
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .contains(text))
    }

    fn remember_clean(&self, text: &str) {
        if text.len() > REMEMBERED_LONGEST {
            return;
        }
        let mut clean = self
            .clean
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if clean.len() >= REMEMBERED_MOST {
            clean.clear();
        }
        clean.insert(text.to_owned());
    }

    fn seal_text(&self, run: &RunId, text: &mut String) {
        if self.known_clean(text) {
            return;
        }
        let (sealed, report) = self.redactor.replace_secrets(text, |secret, rule| {
            let rule = rule_name(rule);
            match seal_bytes(&self.key, &aad(run, rule), secret.as_bytes()) {
                Some(bytes) => format!("{SEALED_PREFIX}{rule}:{}]", B64.encode(bytes)),
                // The cipher refused the key: drop the value rather than keep it.
                None => format!("[REDACTED:{rule}]"),
            }
        });
        if report.is_empty() {
            self.remember_clean(text);
        } else {
            *text = sealed;
        }
    }

    fn open_text(&self, run: &RunId, text: &mut String) {
        if !text.contains(SEALED_PREFIX) {
            return;
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some(at) = rest.find(SEALED_PREFIX) {
            out.push_str(&rest[..at]);
            let after = &rest[at + SEALED_PREFIX.len()..];
            match self.open_one(run, after) {
                Some((value, used)) => {
                    out.push_str(&value);
                    rest = &after[used..];
                }
                None => {
                    out.push_str(SEALED_PREFIX);
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        *text = out;
    }

    /// `after` starts just past `[SEALED:`: the value and how many bytes of `after` it took.
    fn open_one(&self, run: &RunId, after: &str) -> Option<(String, usize)> {
        let (rule, tail) = after.split_once(':')?;
        if rule_name(rule) != rule {
            return None;
        }
        let end = tail.find(']')?;
        let bytes = B64.decode(&tail[..end]).ok()?;
        let plain = open_bytes(&self.key, &aad(run, rule), &bytes)?;
        let value = String::from_utf8(plain).ok()?;
        Some((value, rule.len() + 1 + end + 1))
    }
}

impl Confidential for JournalSeal {
    fn seal(&self, run: &RunId, value: &mut Value) {
        each_string(value, &mut |s| self.seal_text(run, s));
    }

    fn open(&self, run: &RunId, value: &mut Value) {
        each_string(value, &mut |s| self.open_text(run, s));
    }

    fn redact(&self, value: &mut Value) {
        each_string(value, &mut |s| {
            if !self.known_clean(s) {
                let (clean, report) = self.redactor.redact(s);
                if report.is_empty() {
                    self.remember_clean(s);
                } else {
                    *s = clean;
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;
    use warrant_secrets::Scanner;

    const TOKEN: &str = "ghp_8f3KqL0vX2mB9nR4tY7wZ1cD6hJ5sP3aE2gU";

    fn seal() -> JournalSeal {
        JournalSeal::new(
            std::sync::Arc::new(Redactor::new(Scanner::default_rules(), Vec::new())),
            b"installation secret",
        )
    }

    fn run(n: &str) -> RunId {
        RunId::parse(n).unwrap()
    }

    #[test]
    fn a_secret_is_stored_sealed_and_opens_for_its_run_only() {
        let s = seal();
        let a = run("run-0001");
        let original = json!({
            "action": {"content": format!("machine github.com login me password {TOKEN}\n")},
            "short": "ok",
            "plain": "nothing secret in here at all",
        });
        let mut stored = original.clone();
        s.seal(&a, &mut stored);
        let text = stored.to_string();
        assert!(!text.contains(TOKEN), "{text}");
        assert!(text.contains("[SEALED:github-pat:"), "{text}");
        assert_eq!(stored["plain"], original["plain"]);

        let mut opened = stored.clone();
        s.open(&a, &mut opened);
        assert_eq!(opened, original);

        // Another run, or another installation, opens nothing: the sealed form stays.
        let mut elsewhere = stored.clone();
        s.open(&run("run-0002"), &mut elsewhere);
        assert_eq!(elsewhere, stored);
        let other = JournalSeal::new(
            std::sync::Arc::new(Redactor::new(Scanner::default_rules(), Vec::new())),
            b"another installation",
        );
        let mut foreign = stored.clone();
        other.open(&a, &mut foreign);
        assert_eq!(foreign, stored);
    }

    #[test]
    fn text_that_only_looks_sealed_is_left_alone() {
        let s = seal();
        let a = run("run-0001");
        for text in [
            "[SEALED:github-pat:AAAA]",
            "[SEALED:",
            "[SEALED:no-colon",
            "[SEALED:bad rule:AAAA]",
            "x [SEALED:github-pat:%%%] y",
        ] {
            let mut v = json!(text);
            s.open(&a, &mut v);
            assert_eq!(v, json!(text));
        }
    }

    #[test]
    fn a_text_scanned_clean_is_remembered_and_a_secret_never_is() {
        let s = seal();
        let a = run("run-0001");
        let plain = "nothing secret in here at all";
        let secret = format!("machine github.com login me password {TOKEN}");
        for _ in 0..2 {
            let mut stored = json!({"plain": plain, "secret": secret});
            s.seal(&a, &mut stored);
            assert_eq!(stored["plain"], json!(plain));
            assert!(!stored.to_string().contains(TOKEN), "{stored}");
            let mut facts = json!({"plain": plain, "secret": secret});
            s.redact(&mut facts);
            assert!(!facts.to_string().contains(TOKEN), "{facts}");
        }
        let clean = s.clean.lock().unwrap();
        assert!(clean.contains(plain));
        assert!(!clean.iter().any(|t| t.contains(TOKEN)));
    }

    #[test]
    fn audit_facts_say_which_rule_never_the_value() {
        let s = seal();
        let mut facts =
            json!({"action": {"argv": ["curl", "-H", format!("Authorization: token {TOKEN}")]}});
        s.redact(&mut facts);
        assert_eq!(
            facts,
            json!({"action": {"argv": ["curl", "-H", "Authorization: token [REDACTED:github-pat]"]}})
        );
    }
}
