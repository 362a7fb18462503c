//! The scripted transcript parser (`--model scripted:PATH`): arbitrary text in, a transcript or
//! a coded error out. A transcript that parses has version 1, parses the same way twice, and
//! validating it against the contract's tools answers without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::json;
use warrant_core::{Coded, ToolSpec};
use warrant_llm::{Transcript, TranscriptError};

fn tools() -> Vec<ToolSpec> {
    let path_only = json!({
        "type": "object",
        "properties": { "path": { "type": "string" } },
        "required": ["path"],
        "additionalProperties": false
    });
    vec![
        ToolSpec {
            name: "read_file".into(),
            description: "Read a file".into(),
            input_schema: path_only.clone(),
        },
        ToolSpec {
            name: "list_dir".into(),
            description: "List a directory".into(),
            input_schema: path_only,
        },
        ToolSpec {
            name: "run_command".into(),
            description: "Run a command".into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "argv": { "type": "array", "items": { "type": "string" }, "minItems": 1 },
                    "cwd": { "type": "string" },
                    "timeout_ms": { "type": "integer", "minimum": 1 }
                },
                "required": ["argv"],
                "additionalProperties": false
            }),
        },
    ]
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Transcript::parse("fuzz.yaml", text) {
        Ok(t) => {
            assert_eq!(t.version, warrant_llm::scripted::TRANSCRIPT_VERSION);
            assert_eq!(Transcript::parse("fuzz.yaml", text).ok(), Some(t.clone()));
            match t.validate(&tools()) {
                Ok(()) => {}
                Err(e) => check_error(&e),
            }
        }
        Err(e) => check_error(&e),
    }
});

fn check_error(e: &TranscriptError) {
    assert!(e.code().starts_with("W-"), "uncoded error {e:?}");
    assert!(!e.to_string().is_empty());
}
