//! `[secrets] rules` across configuration layers: lower layers add, never remove or weaken.
use std::path::Path;

use warrant_core::Coded;
use warrant_core::config::LayerKind;
use warrant_secrets::{LayerRules, scanner_for_layers};

use super::scan::{ALNUM, noise};

fn write(dir: &Path, name: &str, text: &str) -> LayerRules {
    let file = dir.join(name);
    std::fs::write(&file, text).unwrap();
    LayerRules {
        kind: LayerKind::Project,
        file,
    }
}

fn ids(s: &warrant_secrets::Scanner, t: &str) -> Vec<String> {
    s.scan(t).into_iter().map(|f| f.rule).collect()
}

#[test]
fn no_layer_means_the_default_rules_and_a_project_file_adds_to_them() {
    let dir = tempfile::tempdir().unwrap();
    let pat = format!("ghp_{}", noise(60, 36, ALNUM));
    let s = scanner_for_layers(&[]).unwrap();
    assert_eq!(ids(&s, &pat), ["github-pat"]);
    // a project file without `[extend]` does not drop the default rules (it only adds)
    let p = write(
        dir.path(),
        "p.toml",
        "[[rules]]\nid = 'acme'\nregex = '''acme_[0-9]{8}'''\n",
    );
    let s = scanner_for_layers(&[p]).unwrap();
    assert_eq!(ids(&s, &pat), ["github-pat"]);
    assert_eq!(ids(&s, "acme_12345678"), ["acme"]);
}

#[test]
fn a_project_cannot_disable_redefine_or_allowlist_away_a_managed_rule() {
    let dir = tempfile::tempdir().unwrap();
    let pat = format!("ghp_{}", noise(61, 36, ALNUM));
    let mut managed = write(dir.path(), "m.toml", "[extend]\nuseDefault = true\n");
    managed.kind = LayerKind::Managed;
    let disable = write(
        dir.path(),
        "d.toml",
        "[extend]\nuseDefault = true\ndisabledRules = ['github-pat']\n",
    );
    let e = scanner_for_layers(&[managed.clone(), disable]).unwrap_err();
    assert_eq!(e.code(), "W-SECRETS-014");
    assert!(e.to_string().contains("github-pat"), "{e}");
    let redefine = write(
        dir.path(),
        "r.toml",
        "[[rules]]\nid = 'github-pat'\nregex = 'never'\n",
    );
    let e = scanner_for_layers(&[managed.clone(), redefine]).unwrap_err();
    assert_eq!(e.code(), "W-SECRETS-014");
    // the same default rules in both layers are fine; the project's allowlist only covers
    // the project's own rules
    let allow = write(
        dir.path(),
        "a.toml",
        "[extend]\nuseDefault = true\n[allowlist]\nregexes = ['''.*''']\n[[rules]]\nid = 'acme'\nregex = '''acme_[0-9]{8}'''\n",
    );
    let s = scanner_for_layers(&[allow, managed]).unwrap();
    assert_eq!(ids(&s, &pat), ["github-pat"]);
    assert!(
        ids(&s, "acme_12345678").is_empty(),
        "the project's own rule is allowlisted by it"
    );
}

#[test]
fn a_managed_file_without_use_default_replaces_the_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = write(
        dir.path(),
        "m.toml",
        "[[rules]]\nid = 'only'\nregex = '''only_[0-9]{8}'''\n",
    );
    m.kind = LayerKind::Managed;
    let s = scanner_for_layers(&[m]).unwrap();
    assert_eq!(s.rule_ids().collect::<Vec<_>>(), ["only"]);
}
