//! What a person types at a front end's questions, understood by the application layer: the
//! set-up wizard's choices, a provided secret's value and a time given to a flag. Each refusal
//! carries its code, so every front end refuses the same answer the same way.

use pretty_assertions::assert_eq;
use warrant_core::RiskClass;
use warrant_host::providers::{ProviderKind, WriteLayer, pick_model};
use warrant_host::requests::secret_value;
use warrant_host::setup::{header_pairs, risk_classes, words};

fn code<T: std::fmt::Debug>(r: warrant_host::Result<T>) -> String {
    r.expect_err("refused").code
}

#[test]
fn the_wizards_choices_are_read_by_number_name_or_list() {
    let offered = vec!["gpt-4.1".to_owned(), "o3".to_owned()];
    assert_eq!(
        [
            pick_model("2", &offered),
            pick_model("gpt-4.1", &offered),
            pick_model("3", &offered),
            pick_model("0", &offered),
            pick_model("gpt-5", &offered),
        ],
        [
            Some("o3".to_owned()),
            Some("gpt-4.1".to_owned()),
            None,
            None,
            None
        ]
    );
    assert_eq!(
        (ProviderKind::named("ollama"), ProviderKind::named("OpenAI")),
        (Some(ProviderKind::Ollama), None)
    );
    assert_eq!(
        (WriteLayer::named("user"), WriteLayer::named("global")),
        (Some(WriteLayer::User), None)
    );
    assert_eq!(words(" ops, sec  eng,"), vec!["ops", "sec", "eng"]);
    assert_eq!(
        risk_classes(&words("Destructive, secret")).unwrap(),
        vec![RiskClass::Destructive, RiskClass::Secret]
    );
    assert_eq!(code(risk_classes(&words("secret, scary"))), "W-SETUP-014");
    assert_eq!(
        header_pairs(&["Authorization = cred:siem".to_owned()]).unwrap(),
        vec![("Authorization".to_owned(), "cred:siem".to_owned())]
    );
    assert_eq!(
        code(header_pairs(&["Authorization".to_owned()])),
        "W-SETUP-015"
    );
}

#[test]
fn a_secret_loses_one_line_end_and_an_empty_one_is_refused() {
    assert_eq!(
        [
            secret_value("db", b"s3cret\r\n".to_vec()).unwrap(),
            secret_value("db", b"s3cret\n\n".to_vec()).unwrap(),
            secret_value("db", b" s3cret".to_vec()).unwrap(),
        ],
        [
            b"s3cret".to_vec(),
            b"s3cret\n".to_vec(),
            b" s3cret".to_vec()
        ]
    );
    assert_eq!(code(secret_value("db", b"\n".to_vec())), "W-REQUEST-006");
}

#[test]
fn a_time_flag_is_rfc_3339_or_refused_with_its_code() {
    use warrant_host::drive::time_arg;
    assert_eq!(
        time_arg("since", Some("2026-11-29T00:00:00Z")).unwrap(),
        warrant_core::Timestamp::parse("2026-11-29T00:00:00Z")
    );
    assert_eq!(time_arg("since", None).unwrap(), None);
    assert_eq!(code(time_arg("until", Some("yesterday"))), "W-CLI-004");
}
