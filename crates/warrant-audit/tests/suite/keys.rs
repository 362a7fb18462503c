//! Audit keys on disk: round trip, file modes, each refusal with its code, and rotation.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use pretty_assertions::{assert_eq, assert_ne};
use warrant_audit::{
    AuditError, AuditKey, Problem, ProblemKind, PublicKeys, Rotation, VerifyReport, kid_of,
    verify_sealed,
};
use warrant_core::Coded as _;

use super::fake::{FakeStore, SEED, audit, event, sealer};

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

/// Seals records `from..=to` of the test run into `store` with `key`.
fn seal_with(store: &FakeStore, key: &AuditKey, from: u64, to: u64) {
    let sealer = sealer(key.clone());
    for n in from..=to {
        store.seal(&sealer, &event(n), &audit(n));
    }
}

fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_rotated_key_keeps_the_history_it_signed_verifiable() {
    let dir = tempfile::tempdir().unwrap();
    let keys_dir = dir.path();
    let a = AuditKey::from_seed(SEED);
    a.save(keys_dir).unwrap();
    let store = FakeStore::default();
    seal_with(&store, &a, 1, 3);

    let rotation = AuditKey::rotate(keys_dir).unwrap();
    let b = AuditKey::load(keys_dir).unwrap();
    assert_eq!(
        rotation,
        Rotation {
            old_kid: a.kid(),
            new_kid: b.kid()
        }
    );
    assert_ne!(a.kid(), b.kid());
    // The layout: the new pair in place (private still 0600), the old public key archived
    // under its kid, nothing staged left behind.
    assert_eq!(
        (
            file_names(keys_dir),
            file_names(&keys_dir.join("retired")),
            fs::metadata(keys_dir.join("audit.key"))
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            fs::read_to_string(keys_dir.join("audit.pub")).unwrap(),
        ),
        (
            vec!["audit.key".into(), "audit.pub".into(), "retired".into()],
            vec![format!("{}.pub", a.kid())],
            0o600,
            format!("{}\n", b.public_key_hex()),
        )
    );
    seal_with(&store, &b, 4, 6);
    let records = store.records();

    let all = PublicKeys::load_dir(keys_dir).unwrap();
    assert_eq!(
        all,
        PublicKeys::from_keys([a.verifying_key(), b.verifying_key()])
    );
    assert_eq!(
        verify_sealed(&records, &all),
        VerifyReport {
            records: 6,
            first_problem: None,
            head: Some(records[5].hash.clone()),
        }
    );

    // An auditor who has only the old key stops at the first record of the new one.
    let only_a = PublicKeys::from_keys([a.verifying_key()]);
    assert_eq!(
        verify_sealed(&records, &only_a),
        VerifyReport {
            records: 3,
            first_problem: Some(Problem {
                file: None,
                line: 4,
                record_id: Some(records[3].id.clone()),
                seq: Some(4),
                kind: ProblemKind::UnknownKey,
                detail: format!(
                    "signed by key {}, which is not among the 1 trusted keys",
                    b.kid()
                ),
            }),
            head: Some(records[2].hash.clone()),
        }
    );

    // The export hands over both, and reads back as the same set.
    let exported = all.to_file_text();
    let (first, second) = if a.kid() < b.kid() {
        (&a, &b)
    } else {
        (&b, &a)
    };
    assert_eq!(
        exported,
        format!(
            "# Warrant audit public keys (Ed25519, hex), one per line, each after its kid.\n# kid {}\n{}\n# kid {}\n{}\n",
            first.kid(),
            first.public_key_hex(),
            second.kid(),
            second.public_key_hex()
        )
    );
    let file = dir.path().join("keys.txt");
    fs::write(&file, &exported).unwrap();
    assert_eq!(PublicKeys::load(&file).unwrap(), all);

    // A retired key replaced by another: every record it signed is now signed by a stranger.
    let forged = AuditKey::from_seed([8; 32]);
    fs::write(
        keys_dir.join("retired").join(format!("{}.pub", a.kid())),
        format!("{}\n", forged.public_key_hex()),
    )
    .unwrap();
    let tampered = PublicKeys::load_dir(keys_dir).unwrap();
    assert_eq!(
        verify_sealed(&records, &tampered),
        VerifyReport {
            records: 0,
            first_problem: Some(Problem {
                file: None,
                line: 1,
                record_id: Some(records[0].id.clone()),
                seq: Some(1),
                kind: ProblemKind::UnknownKey,
                detail: format!(
                    "signed by key {}, which is not among the 2 trusted keys",
                    a.kid()
                ),
            }),
            head: None,
        }
    );
    // Rotating again archives B and leaves A's archive as it found it: detecting the edit
    // is the verifier's job, and it did.
    let again = AuditKey::rotate(keys_dir).unwrap();
    assert_eq!(again.old_kid, b.kid());
}

#[test]
fn rotation_refuses_an_edited_archive_and_recovers_from_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let keys_dir = dir.path();
    let a = AuditKey::from_seed([1; 32]);
    a.save(keys_dir).unwrap();
    let c = AuditKey::from_seed([5; 32]);

    // An archive under A's kid that holds another key: refused, A stays current.
    let retired = keys_dir.join("retired");
    fs::create_dir_all(&retired).unwrap();
    let archive = retired.join(format!("{}.pub", a.kid()));
    fs::write(&archive, format!("{}\n", c.public_key_hex())).unwrap();
    let (c_code, message) = code(AuditKey::rotate(keys_dir));
    assert_eq!(c_code, "W-AUDIT-024");
    assert!(message.contains(&a.kid()), "{message}");
    assert_eq!(AuditKey::load(keys_dir).unwrap().kid(), a.kid());

    // A crash after the private key was renamed into place and before the public one was:
    // the next load completes the rotation.
    fs::write(
        &archive,
        format!("# kid {}\n{}\n", a.kid(), a.public_key_hex()),
    )
    .unwrap();
    fs::write(
        keys_dir.join("audit.pub.new"),
        format!("{}\n", c.public_key_hex()),
    )
    .unwrap();
    let private = keys_dir.join("audit.key");
    fs::write(&private, format!("{}\n", "05".repeat(32))).unwrap();
    // Negative control: without the archive of the old public key, it is a plain mismatch.
    fs::rename(&archive, keys_dir.join("aside.pub")).unwrap();
    assert_eq!(code(AuditKey::load(keys_dir)).0, "W-AUDIT-005");
    fs::rename(keys_dir.join("aside.pub"), &archive).unwrap();
    assert_eq!(AuditKey::load(keys_dir).unwrap().kid(), c.kid());
    assert_eq!(
        (
            fs::read_to_string(keys_dir.join("audit.pub")).unwrap(),
            keys_dir.join("audit.pub.new").exists()
        ),
        (format!("{}\n", c.public_key_hex()), false)
    );

    // A crash before the commit point leaves staged files that were never used: the old pair
    // stays current and the next rotation replaces them.
    fs::write(keys_dir.join("audit.key.new"), "stale\n").unwrap();
    fs::write(keys_dir.join("audit.pub.new"), "stale\n").unwrap();
    assert_eq!(AuditKey::load(keys_dir).unwrap().kid(), c.kid());
    let rotation = AuditKey::rotate(keys_dir).unwrap();
    assert_eq!(rotation.old_kid, c.kid());
    assert_eq!(
        file_names(keys_dir),
        vec!["audit.key", "audit.pub", "retired"]
    );
    assert_eq!(
        PublicKeys::load_dir(keys_dir).unwrap().len(),
        3,
        "A, C and the new key"
    );
}
