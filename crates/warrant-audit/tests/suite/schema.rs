//! Produced records conform to the shipped JSON Schema of format v2 (v1 stays for old records).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use pretty_assertions::assert_eq;
use serde_json::Value;
use warrant_audit::{RECORD_SCHEMA_V1, RECORD_SCHEMA_V2};

use super::fake::chain;

#[test]
fn every_sealed_record_validates_against_the_v2_schema() {
    let schema: Value = serde_json::from_str(RECORD_SCHEMA_V2).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let lines: Vec<Value> = chain(5)
        .records()
        .iter()
        .map(|r| serde_json::from_str(&r.line).unwrap())
        .collect();
    for line in &lines {
        let errors: Vec<String> = validator.iter_errors(line).map(|e| e.to_string()).collect();
        assert_eq!(errors, Vec::<String>::new(), "{line}");
    }

    // Negative control: the schema does reject a record missing its signature or with a
    // decision outside the closed set.
    let mut unsigned = lines[1].clone();
    unsigned.as_object_mut().unwrap().remove("sig");
    let mut odd = lines[2].clone();
    odd["data"]["decision"] = Value::from("maybe");
    let mut unbound = lines[3].clone();
    unbound["data"]
        .as_object_mut()
        .unwrap()
        .remove("event_digest");
    assert_eq!(
        (
            validator.is_valid(&unsigned),
            validator.is_valid(&odd),
            validator.is_valid(&unbound)
        ),
        (false, false, false)
    );
}

#[test]
fn a_v1_record_is_a_v2_record_without_the_event_digest() {
    let v1: Value = serde_json::from_str(RECORD_SCHEMA_V1).unwrap();
    let v1 = jsonschema::validator_for(&v1).unwrap();
    let mut line: Value = serde_json::from_str(&chain(1).records()[0].line).unwrap();
    line["data"].as_object_mut().unwrap().remove("event_digest");
    line["dataschema"] = Value::from("https://warrant.dev/schemas/audit/v1.json");
    let errors: Vec<String> = v1.iter_errors(&line).map(|e| e.to_string()).collect();
    assert_eq!(errors, Vec::<String>::new());
}
