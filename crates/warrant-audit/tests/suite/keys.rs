//! Audit keys on disk: round trip, file modes, and each refusal with its code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;
use std::os::unix::fs::PermissionsExt as _;

use pretty_assertions::assert_eq;
use warrant_audit::{AuditError, AuditKey, PublicKeys, kid_of};
use warrant_core::Coded as _;

fn code(result: Result<impl std::fmt::Debug, AuditError>) -> (&'static str, String) {
    let err = result.unwrap_err();
    (err.code(), err.to_string())
}

#[test]
fn save_then_load_round_trips_with_private_mode_and_public_file() {
    let dir = tempfile::tempdir().unwrap();
    let key = AuditKey::generate();
    key.save(dir.path()).unwrap();

    let mode = fs::metadata(dir.path().join("audit.key"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    let public = fs::read_to_string(dir.path().join("audit.pub")).unwrap();
    assert_eq!(public, format!("{}\n", key.public_key_hex()));

    let loaded = AuditKey::load(dir.path()).unwrap();
    assert_eq!(
        (loaded.kid(), loaded.public_key_hex()),
        (key.kid(), key.public_key_hex())
    );
    assert_eq!(key.kid(), kid_of(&key.verifying_key()));
    assert_eq!(key.kid().len(), 16);
    // Debug must never show the seed.
    let seed_hex = fs::read_to_string(dir.path().join("audit.key")).unwrap();
    assert!(!format!("{key:?}").contains(seed_hex.trim()));

    let keys = PublicKeys::load(&dir.path().join("audit.pub")).unwrap();
    assert_eq!(keys.kids().collect::<Vec<_>>(), vec![key.kid().as_str()]);
}

#[test]
fn every_refusal_has_its_code() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    assert_eq!(code(AuditKey::load(path)).0, "W-AUDIT-001");

    let key = AuditKey::from_seed([1; 32]);
    key.save(path).unwrap();
    assert_eq!(
        code(AuditKey::from_seed([2; 32]).save(path)).0,
        "W-AUDIT-004"
    );
    // The refused save left the original key in place.
    assert_eq!(AuditKey::load(path).unwrap().kid(), key.kid());

    let private = path.join("audit.key");
    fs::set_permissions(&private, fs::Permissions::from_mode(0o644)).unwrap();
    let (c, message) = code(AuditKey::load(path));
    assert_eq!(c, "W-AUDIT-003");
    assert!(message.contains("mode 644"), "{message}");
    // Negative control: the same file with the right mode loads.
    fs::set_permissions(&private, fs::Permissions::from_mode(0o600)).unwrap();
    assert!(AuditKey::load(path).is_ok());

    fs::write(
        path.join("audit.pub"),
        format!("{}\n", AuditKey::from_seed([3; 32]).public_key_hex()),
    )
    .unwrap();
    assert_eq!(code(AuditKey::load(path)).0, "W-AUDIT-005");
    fs::remove_file(path.join("audit.pub")).unwrap();

    fs::write(&private, "not hex\n").unwrap();
    assert_eq!(code(AuditKey::load(path)).0, "W-AUDIT-002");
    fs::write(&private, "abcd\n").unwrap();
    let (c, message) = code(AuditKey::load(path));
    assert_eq!(c, "W-AUDIT-002");
    assert!(message.contains("expected 32 bytes"), "{message}");
}

#[test]
fn public_key_lists_skip_comments_and_name_the_bad_line() {
    let a = AuditKey::from_seed([1; 32]);
    let b = AuditKey::from_seed([2; 32]);
    let text = format!(
        "# auditors' trusted keys\n\n{}  # 2024 key\n   {}\n",
        a.public_key_hex(),
        b.public_key_hex()
    );
    let keys = PublicKeys::parse(&text).unwrap();
    assert_eq!(
        keys,
        PublicKeys::from_keys([a.verifying_key(), b.verifying_key()])
    );
    assert_eq!(keys.len(), 2);

    let (line, reason) = PublicKeys::parse(&format!("{}\nzz\n", a.public_key_hex())).unwrap_err();
    assert_eq!((line, reason.starts_with("not hex")), (2, true));

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys.txt");
    fs::write(&file, "# one bad key\nabcd\n").unwrap();
    let (c, message) = code(PublicKeys::load(&file));
    assert_eq!(c, "W-AUDIT-007");
    assert!(message.contains("line 2"), "{message}");
    assert_eq!(
        code(PublicKeys::load(&dir.path().join("none.txt"))).0,
        "W-AUDIT-001"
    );
}
