//! gitleaks' configuration format: what loads, what is enforced, what is refused (and how the
//! refusal names the rule).
use pretty_assertions::assert_eq;
use warrant_core::Coded;
use warrant_secrets::{RuleSet, RulesError, Scanner};

fn scanner(toml: &str) -> Scanner {
    Scanner::new(&RuleSet::parse(toml).unwrap()).unwrap()
}

fn rules(s: &Scanner, text: &str) -> Vec<String> {
    s.scan(text).into_iter().map(|f| f.rule).collect()
}

const CUSTOM: &str = r#"
title = "an organisation's rules"

[[rules]]
id = "acme-token"
description = "ACME deploy token"
regex = '''\b(acme_[a-z0-9]{16})\b'''
keywords = ["ACME_"]
tags = ["acme"]

[[rules.allowlists]]
description = "the documented sample"
regexes = ['''^acme_0000''']

[[rules.allowlists]]
condition = "AND"
regexTarget = "line"
regexes = ['''fixture''']
stopwords = ["test"]
"#;

#[test]
fn a_user_rule_file_loads_and_its_rules_and_allowlists_are_enforced() {
    let s = scanner(CUSTOM);
    assert_eq!(
        rules(&s, "deploy acme_k3j5h6g7f8d9s0a1 now"),
        ["acme-token"]
    );
    // keywords are case-insensitive (gitleaks lower-cases them and the text)
    assert_eq!(
        rules(&s, "ACME_k3j5h6g7f8d9s0a1"),
        Vec::<String>::new(),
        "regex is case-sensitive"
    );
    assert_eq!(rules(&s, "x acme_0000aaaabbbbcccc"), Vec::<String>::new());
    // AND: both the line regex and the stopword must hold
    assert_eq!(
        rules(&s, "fixture acme_testk3j5h6g7f8d9"),
        Vec::<String>::new()
    );
    assert_eq!(rules(&s, "fixture acme_k3j5h6g7f8d9s0a1"), ["acme-token"]);
    assert_eq!(rules(&s, "acme_testk3j5h6g7f8d9"), ["acme-token"]);
    assert_eq!(s.describe("acme-token"), "ACME deploy token");
}

#[test]
fn secret_group_entropy_and_global_allowlists() {
    let s = scanner(
        r#"
[allowlist]
regexes = ['''^sk-allowed''']
stopwords = ["dummy"]
paths = ['''(^|/)fixtures/''']

[[rules]]
id = "two-groups"
regex = '''key=(\w+):(\w+)'''
secretGroup = 2
entropy = 3.0
"#,
    );
    let f = s.scan("key=user:Zq8xK2pL9mW4");
    assert_eq!(f.len(), 1);
    assert_eq!(
        &"key=user:Zq8xK2pL9mW4"[f[0].start..f[0].end],
        "Zq8xK2pL9mW4"
    );
    // entropy at or under the threshold: dropped (gitleaks drops `entropy <= min`)
    assert!(s.scan("key=user:aaaaaaaaaaaa").is_empty());
    assert!(s.scan("key=user:dummyZq8xK2pL9").is_empty());
    assert_eq!(s.scan_file("src/a.txt", "key=u:Zq8xK2pL9mW4").len(), 1);
    assert!(
        s.scan_file("fixtures/a.txt", "key=u:Zq8xK2pL9mW4")
            .is_empty()
    );
}

#[test]
fn path_rules_and_target_rules() {
    let s = scanner(
        r#"
[[allowlists]]
targetRules = ["yaml-pass"]
regexes = ['''^letmein''']

[[rules]]
id = "p12"
path = '''(?i)\.p12$'''

[[rules]]
id = "yaml-pass"
regex = '''pass: (\S+)'''
path = '''\.ya?ml$'''
"#,
    );
    let ids = |p: &str, t: &str| -> Vec<String> {
        s.scan_file(p, t).into_iter().map(|f| f.rule).collect()
    };
    assert_eq!(ids("keys/a.P12", ""), ["p12"]);
    assert_eq!(ids("c.yaml", "pass: hunter22"), ["yaml-pass"]);
    assert_eq!(ids("c.txt", "pass: hunter22"), Vec::<String>::new());
    assert_eq!(ids("c.yml", "pass: letmein1"), Vec::<String>::new());
}

#[test]
fn extend_use_default_disabled_rules_and_override() {
    let set = RuleSet::parse(
        r#"
[extend]
useDefault = true
disabledRules = ["generic-api-key"]

[[rules]]
id = "github-pat"
description = "GitHub PAT (our wording)"
keywords = ["token"]
"#,
    )
    .unwrap();
    let ids: Vec<&str> = set.rules.iter().map(|r| r.id.as_str()).collect();
    assert!(!ids.contains(&"generic-api-key"));
    assert!(ids.contains(&"aws-access-token"));
    let pat = set.rules.iter().find(|r| r.id == "github-pat").unwrap();
    // the extending rule's fields win, keywords are joined, the base's regex stays
    assert_eq!(pat.description, "GitHub PAT (our wording)");
    assert!(
        pat.keywords.contains(&"ghp_".to_owned()) && pat.keywords.contains(&"token".to_owned())
    );
    assert!(pat.regex.is_some());
    assert_eq!(set.disabled, ["generic-api-key"]);
}

#[test]
fn extend_path_is_relative_to_the_file_and_bounded() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("base.toml"), CUSTOM).unwrap();
    std::fs::write(
        dir.path().join(".gitleaks.toml"),
        "[extend]\npath = \"base.toml\"\n[[rules]]\nid = \"mine\"\nregex = '''mine_[0-9]{8}'''\n",
    )
    .unwrap();
    let set = RuleSet::load(&dir.path().join(".gitleaks.toml")).unwrap();
    let ids: Vec<&str> = set.rules.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["acme-token", "mine"]);
    // a chain deeper than gitleaks allows
    std::fs::write(dir.path().join("a.toml"), "[extend]\npath = \"b.toml\"\n").unwrap();
    std::fs::write(dir.path().join("b.toml"), "[extend]\npath = \"c.toml\"\n").unwrap();
    std::fs::write(dir.path().join("c.toml"), "[extend]\nuseDefault = true\n").unwrap();
    let e = RuleSet::load(&dir.path().join("a.toml")).unwrap_err();
    assert_eq!(e.code(), "W-SECRETS-013", "{e}");
    let e = RuleSet::load(&dir.path().join("missing.toml")).unwrap_err();
    assert_eq!(e.code(), "W-SECRETS-015", "{e}");
}

#[test]
fn what_is_not_supported_is_an_error_naming_the_rule() {
    let cases = [
        (
            "[[rules]]\nid = 'multi'\nregex = 'a'\nskipReport = true\n",
            "W-SECRETS-010",
            "multi",
        ),
        (
            "[[rules]]\nid = 'multi'\nregex = 'a'\n[[rules.required]]\nid = 'x'\n",
            "W-SECRETS-010",
            "multi",
        ),
        (
            "[[rules]]\nid = 'typo'\nregex = 'a'\nkeyword = ['a']\n",
            "W-SECRETS-010",
            "typo",
        ),
        (
            "[[rules]]\nid = 'bytes'\nregex = '''\\C'''\n",
            "W-SECRETS-011",
            "bytes",
        ),
        (
            "[[rules]]\nid = 'backref'\nregex = '''(a)\\1'''\n",
            "W-SECRETS-011",
            "backref",
        ),
        (
            "[[rules]]\nid = 'grp'\nregex = '''(a)'''\nsecretGroup = 2\n",
            "W-SECRETS-012",
            "grp",
        ),
        ("[[rules]]\nid = 'nothing'\n", "W-SECRETS-012", "nothing"),
        (
            "[[rules]]\nid = 'al'\nregex = 'a'\n[[rules.allowlists]]\nregexTarget = 'file'\nregexes = ['a']\n",
            "W-SECRETS-012",
            "al",
        ),
        (
            "[[rules]]\nid = 'al'\nregex = 'a'\n[[rules.allowlists]]\ncondition = 'XOR'\nregexes = ['a']\n",
            "W-SECRETS-012",
            "al",
        ),
        (
            "[[allowlists]]\ntargetRules = ['ghost']\nregexes = ['a']\n",
            "W-SECRETS-012",
            "ghost",
        ),
        (
            "[[rules]]\nid = 'twice'\nregex = 'a'\n[[rules]]\nid = 'twice'\nregex = 'b'\n",
            "W-SECRETS-012",
            "twice",
        ),
        (
            "[extend]\nurl = 'https://example.com/x.toml'\n",
            "W-SECRETS-013",
            "url",
        ),
        (
            "[extend]\nuseDefault = true\npath = 'x.toml'\n",
            "W-SECRETS-013",
            "path",
        ),
    ];
    for (toml, code, name) in cases {
        let e = RuleSet::parse(toml).unwrap_err();
        assert_eq!(e.code(), code, "{toml}: {e}");
        assert!(e.to_string().contains(name), "{toml}: {e}");
    }
}

#[test]
fn a_pattern_too_big_to_compile_fails_the_load_of_a_user_file() {
    let set =
        RuleSet::parse("[[rules]]\nid = 'huge'\nregex = '''(?:[a-z]{1000}){1000}'''\n").unwrap();
    let e = Scanner::new(&set).unwrap_err();
    assert!(
        matches!(&e, RulesError::Regex { id, .. } if id == "huge"),
        "{e}"
    );
}

#[test]
fn every_default_rule_translates_and_compiles() {
    let set = RuleSet::default_rules().unwrap();
    assert_eq!(set.rules.len(), 222);
    // The load skips its syntax and `secretGroup` checks for these rules: this is that check.
    for r in &set.rules {
        if let Some(p) = &r.regex {
            let re = regex::Regex::new(p).unwrap_or_else(|e| panic!("{}: {e}", r.id));
            assert!(
                r.secret_group < re.captures_len(),
                "{}: secretGroup {} but {} groups",
                r.id,
                r.secret_group,
                re.captures_len() - 1
            );
        }
        if let Some(p) = &r.path {
            regex::Regex::new(p).unwrap_or_else(|e| panic!("{} path: {e}", r.id));
        }
        for a in &r.allowlists {
            for p in a.regexes.iter().chain(&a.paths) {
                regex::Regex::new(p).unwrap_or_else(|e| panic!("{} allowlist: {e}", r.id));
            }
        }
    }
    for a in &set.allowlists {
        for p in a.regexes.iter().chain(&a.paths) {
            regex::Regex::new(p).unwrap();
        }
    }
}

/// gitleaks' default rules, each built on first use.
fn lazy_default() -> Scanner {
    Scanner::from_groups(vec![warrant_secrets::RuleGroup {
        set: RuleSet::default_rules().unwrap(),
        eager: false,
    }])
    .unwrap()
}

#[test]
fn rules_compile_lazily_and_only_when_their_keywords_occur() {
    let s = lazy_default();
    assert_eq!(s.compiled_rules(), 0, "nothing compiled at construction");
    let _ = s.scan("nothing to see here at all");
    let after_plain = s.compiled_rules();
    // only the rules without keywords (none in the default set) or whose keyword occurs
    assert!(after_plain <= 2, "{after_plain}");
    let _ = s.scan("ghp_0123456789abcdefghijABCDEFGHIJ012345");
    assert!(s.compiled_rules() > after_plain);
    assert!(s.compiled_rules() < 20, "{}", s.compiled_rules());
}

/// The prewarm (on a thread of its own at start-up) builds the rules nearly every run's text
/// selects, the generic rule among them, and no others: a text with "secret" in it then builds
/// nothing more on the scanning thread.
#[test]
fn the_prewarm_builds_the_rules_common_words_select() {
    let s = lazy_default();
    s.prewarm();
    let warmed = s.compiled_rules();
    // gitleaks 8.30.1: generic-api-key, hashicorp-tf-password, jwt (`ey`, inside `key`) and
    // kubernetes-secret-yaml.
    assert!((4..=6).contains(&warmed), "{warmed}");
    let _ = s.scan("a command confined to the workspace (secrets hidden), an api key, a token");
    assert_eq!(s.compiled_rules(), warmed);
    // The control: without the prewarm, the same text builds them on the scanning thread.
    let cold = lazy_default();
    let _ = cold.scan("a command confined to the workspace (secrets hidden), an api key, a token");
    assert!(cold.compiled_rules() >= 2, "{}", cold.compiled_rules());
}
