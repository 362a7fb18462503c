//! Scripted transcripts: parsing, validation against the tools, and answering by turn.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fmt::Write as _;
use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::json;
use warrant_core::{Coded, ToolSpec};
use warrant_llm::{
    Conversation, ModelProvider, ModelResponse, ScriptedCall, ScriptedProvider, ToolCall,
    Transcript, TranscriptError, Turn,
};

use super::tools;

/// The example of the CLI contract, verbatim.
const CONTRACT_EXAMPLE: &str = r#"version: 1
turns:
  - say: "I'll look at the project first."
    calls:
      - tool: list_dir
        args: { path: "." }
      - tool: read_file
        args: { path: "README.md" }
  - calls:
      - tool: run_command
        args: { argv: ["ls", "-la"] }
  - say: "Done."
"#;

#[test]
fn the_contract_example_parses_and_validates() {
    let transcript = Transcript::parse("example.yaml", CONTRACT_EXAMPLE).unwrap();
    assert_eq!(
        transcript,
        Transcript {
            version: 1,
            turns: vec![
                Turn {
                    say: Some("I'll look at the project first.".into()),
                    calls: vec![
                        ScriptedCall {
                            tool: "list_dir".into(),
                            args: json!({ "path": "." }),
                        },
                        ScriptedCall {
                            tool: "read_file".into(),
                            args: json!({ "path": "README.md" }),
                        },
                    ],
                    usage: None,
                },
                Turn {
                    say: None,
                    calls: vec![ScriptedCall {
                        tool: "run_command".into(),
                        args: json!({ "argv": ["ls", "-la"] }),
                    }],
                    usage: None,
                },
                Turn {
                    say: Some("Done.".into()),
                    calls: vec![],
                    usage: None,
                },
            ],
            children: vec![],
        }
    );
    transcript.validate(&tools()).unwrap();
}

/// Parse, then validate; the first error either step finds.
fn check(text: &str, tools: &[ToolSpec]) -> TranscriptError {
    match Transcript::parse("t.yaml", text) {
        Ok(t) => t.validate(tools).expect_err("transcript should be refused"),
        Err(e) => e,
    }
}

#[test]
fn every_bad_transcript_is_refused_with_a_coded_message() {
    let mut broken_tools = tools();
    broken_tools.push(ToolSpec {
        name: "broken".into(),
        description: "a tool whose schema is not a schema".into(),
        input_schema: json!({ "type": 5 }),
    });
    let cases: &[(&str, &str)] = &[
        ("yaml syntax", "version: 1\nturns:\n  - say: [unclosed\n"),
        ("not a mapping", "- just\n- a list\n"),
        ("version missing", "turns: []\n"),
        ("version 2", "version: 2\nturns: []\n"),
        ("version as a string", "version: \"1\"\nturns: []\n"),
        (
            "unknown top-level key",
            "version: 1\nturns: []\nmodel: gpt\n",
        ),
        (
            "unknown turn key",
            "version: 1\nturns:\n  - say: hi\n  - sya: typo\n",
        ),
        (
            "unknown call key",
            "version: 1\nturns:\n  - calls:\n      - tool: read_file\n        arguments: { path: a }\n",
        ),
        (
            "call without a tool",
            "version: 1\nturns:\n  - calls:\n      - args: { path: a }\n",
        ),
        ("turns is not a list", "version: 1\nturns: 5\n"),
        (
            "unknown tool",
            "version: 1\nturns:\n  - say: ok\n  - calls:\n      - tool: rm\n        args: { path: / }\n",
        ),
        (
            "wrong argument type",
            "version: 1\nturns:\n  - calls:\n      - tool: list_dir\n        args: { path: . }\n      - tool: read_file\n        args: { path: 5 }\n",
        ),
        (
            "missing required argument",
            "version: 1\nturns:\n  - calls:\n      - tool: read_file\n",
        ),
        (
            "extra argument",
            "version: 1\nturns:\n  - calls:\n      - tool: run_command\n        args: { argv: [ls], shell: true }\n",
        ),
        (
            "tool with a broken schema",
            "version: 1\nturns:\n  - calls:\n      - tool: broken\n",
        ),
    ];
    let mut report = String::new();
    for (name, text) in cases {
        let err = check(text, &broken_tools);
        writeln!(report, "{name}\n  {}: {err}", err.code()).unwrap();
    }
    insta::assert_snapshot!(report);
}

#[test]
fn errors_carry_their_parts() {
    let err = check(
        "version: 1\nturns:\n  - say: ok\n  - calls:\n      - tool: rm\n",
        &tools(),
    );
    assert_eq!(
        err,
        TranscriptError::UnknownTool {
            turn: 2,
            call: 1,
            tool: "rm".into(),
            known: vec!["read_file".into(), "list_dir".into(), "run_command".into()],
        }
    );
    assert_eq!(
        err.to_string(),
        "turn 2, call 1: unknown tool `rm`; known tools: `read_file`, `list_dir`, `run_command`"
    );
    let err = check("version: 1\nturns:\n  - say: [x\n", &tools());
    let TranscriptError::Syntax { line, column, .. } = &err else {
        panic!("expected a syntax error, got {err:?}");
    };
    assert_eq!((line.is_some(), column.is_some()), (true, true), "{err}");
}

#[test]
fn an_unreadable_file_names_the_path() {
    let err = Transcript::load(Path::new("/nonexistent/warrant/transcript.yaml")).unwrap_err();
    assert_eq!(err.code(), "W-TRANSCRIPT-001");
    assert_eq!(
        err.to_string(),
        "cannot read transcript /nonexistent/warrant/transcript.yaml: No such file or directory (os error 2)"
    );
}

#[test]
fn the_scripted_provider_answers_turn_by_turn_then_ends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("script.yaml");
    std::fs::write(&path, CONTRACT_EXAMPLE).unwrap();
    let provider = ScriptedProvider::load(&path).unwrap();
    assert_eq!(
        provider.describe(),
        format!("scripted:{} (3 turns)", path.display())
    );
    let conversation = Conversation::default();
    let answers: Vec<ModelResponse> = (0..5)
        .map(|turn| provider.respond(&conversation, &tools(), turn).unwrap())
        .collect();
    let call = |id: &str, name: &str, arguments| ToolCall {
        id: id.into(),
        name: name.into(),
        arguments,
    };
    let empty = ModelResponse {
        text: None,
        calls: vec![],
        usage: None,
        model: "scripted".into(),
    };
    assert_eq!(
        answers,
        vec![
            ModelResponse {
                text: Some("I'll look at the project first.".into()),
                calls: vec![
                    call("call-0-0", "list_dir", json!({ "path": "." })),
                    call("call-0-1", "read_file", json!({ "path": "README.md" })),
                ],
                usage: None,
                model: "scripted".into(),
            },
            ModelResponse {
                text: None,
                calls: vec![call(
                    "call-1-0",
                    "run_command",
                    json!({ "argv": ["ls", "-la"] })
                )],
                usage: None,
                model: "scripted".into(),
            },
            ModelResponse {
                text: Some("Done.".into()),
                calls: vec![],
                usage: None,
                model: "scripted".into(),
            },
            empty.clone(),
            empty,
        ]
    );
    // Answering depends on the turn alone, so a replay sees the same.
    assert_eq!(provider.respond(&conversation, &[], 1).unwrap(), answers[1]);
    assert_eq!(
        provider.respond(&conversation, &[], u32::MAX).unwrap(),
        answers[4]
    );
}
