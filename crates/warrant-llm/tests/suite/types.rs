//! The provider-neutral types: stable serialized names and `--model` parsing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::json;
use warrant_core::Coded;
use warrant_core::config::OpenAiConfig;
use warrant_llm::{
    Conversation, Message, ModelSpec, OpenAiSettings, SpecError, ToolCall, openai_settings_from,
};

#[test]
fn conversations_serialize_with_stable_names() {
    let conversation = Conversation {
        system: "be brief".into(),
        messages: vec![
            Message::User {
                content: "hi".into(),
            },
            Message::Assistant {
                text: None,
                calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "read_file".into(),
                    arguments: json!({ "path": "a" }),
                }],
            },
            Message::Tool {
                call_id: "c1".into(),
                name: "read_file".into(),
                content: "text".into(),
            },
        ],
    };
    let value = serde_json::to_value(&conversation).unwrap();
    assert_eq!(
        value,
        json!({
            "system": "be brief",
            "messages": [
                { "role": "user", "content": "hi" },
                { "role": "assistant", "text": null, "calls": [
                    { "id": "c1", "name": "read_file", "arguments": { "path": "a" } }
                ] },
                { "role": "tool", "call_id": "c1", "name": "read_file", "content": "text" }
            ]
        })
    );
    let back: Conversation = serde_json::from_value(value).unwrap();
    assert_eq!(back, conversation);
}

#[test]
fn model_specs_parse_or_say_what_to_use() {
    let cases = [
        (
            "scripted:tests/t.yaml",
            Ok(ModelSpec::Scripted {
                path: PathBuf::from("tests/t.yaml"),
            }),
        ),
        (
            "openai:gpt-4.1-mini",
            Ok(ModelSpec::OpenAi {
                model: "gpt-4.1-mini".into(),
            }),
        ),
        // Model names may contain colons (Ollama-style tags behind a compatible endpoint).
        (
            "openai:llama3:8b",
            Ok(ModelSpec::OpenAi {
                model: "llama3:8b".into(),
            }),
        ),
        (
            "anthropic:claude-sonnet-4",
            Ok(ModelSpec::Anthropic {
                model: "claude-sonnet-4".into(),
            }),
        ),
        (
            "ollama:llama3.2:3b",
            Ok(ModelSpec::Ollama {
                model: "llama3.2:3b".into(),
            }),
        ),
        (
            "gemini:pro",
            Err(SpecError::UnknownProvider {
                provider: "gemini".into(),
            }),
        ),
        (
            "gpt-4o",
            Err(SpecError::Malformed {
                spec: "gpt-4o".into(),
            }),
        ),
        (
            "openai:",
            Err(SpecError::Malformed {
                spec: "openai:".into(),
            }),
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(ModelSpec::parse(input), expected, "{input}");
        if let Ok(spec) = ModelSpec::parse(input) {
            assert_eq!(spec.to_string(), input);
        }
    }
    let messages: Vec<String> = ["gemini:pro", "gpt-4o"]
        .iter()
        .map(|s| {
            let e = ModelSpec::parse(s).unwrap_err();
            format!("{}: {e}", e.code())
        })
        .collect();
    insta::assert_snapshot!(messages.join("\n"));
}

#[test]
fn openai_settings_come_from_config_then_env_then_defaults() {
    let env: BTreeMap<String, String> = [
        ("OPENAI_BASE_URL", "http://env.example/v1/"),
        ("OPENAI_API_KEY", "sk-default"),
        ("TEAM_KEY", "sk-team"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();

    let from_env = openai_settings_from(&OpenAiConfig::default(), &env, "m").unwrap();
    assert_eq!(
        from_env,
        OpenAiSettings {
            base_url: "http://env.example/v1".into(),
            api_key: Some("sk-default".into()),
            api_key_env: "OPENAI_API_KEY".into(),
            model: "m".into(),
            timeout: Duration::from_secs(120),
            stream: true,
            api_version: None,
        }
    );

    let config = OpenAiConfig {
        base_url: Some("http://config.example/v1".into()),
        api_key_env: Some("TEAM_KEY".into()),
        timeout_ms: Some(5_000),
        api_key: None,
        stream: Some(false),
        api_version: Some("2024-10-21".into()),
    };
    assert_eq!(
        openai_settings_from(&config, &env, "m").unwrap(),
        OpenAiSettings {
            base_url: "http://config.example/v1".into(),
            api_key: Some("sk-team".into()),
            api_key_env: "TEAM_KEY".into(),
            model: "m".into(),
            timeout: Duration::from_secs(5),
            stream: false,
            api_version: Some("2024-10-21".into()),
        }
    );

    let bare = openai_settings_from(&OpenAiConfig::default(), &BTreeMap::new(), "m").unwrap();
    assert_eq!(
        (bare.base_url.as_str(), bare.api_key),
        ("https://api.openai.com/v1", None)
    );

    // The key is a secret: Debug shows that there is one, never what it is.
    let debug = format!("{from_env:?}");
    assert!(!debug.contains("sk-default"), "{debug}");
    assert!(debug.contains("[redacted]"), "{debug}");
}

#[test]
fn providers_are_objects_the_loop_can_share_across_threads() {
    fn shareable<T: Send + Sync + 'static>() {}
    shareable::<warrant_llm::OpenAiProvider>();
    shareable::<warrant_llm::ScriptedProvider>();
    let transcript = warrant_llm::Transcript::parse("t", "version: 1\nturns: []\n").unwrap();
    let boxed: Box<dyn warrant_llm::ModelProvider + Send + Sync> =
        Box::new(warrant_llm::ScriptedProvider::new(transcript, "t"));
    assert_eq!(boxed.describe(), "scripted:t (0 turns)");
}

#[test]
fn ollama_settings_follow_ollama_host_as_the_ollama_cli_reads_it() {
    let base = |host: Option<&str>| {
        let env: BTreeMap<String, String> = host
            .map(|h| [("OLLAMA_HOST".to_owned(), h.to_owned())].into())
            .unwrap_or_default();
        warrant_llm::ollama_settings_from(&Default::default(), &env, "llama3.2").base_url
    };
    assert_eq!(
        [
            base(None),
            base(Some("0.0.0.0")),
            base(Some("127.0.0.1:8080")),
            base(Some("https://ollama.internal/")),
            base(Some("http://gpu-box:11500")),
        ],
        [
            "http://localhost:11434/v1",
            "http://0.0.0.0:11434/v1",
            "http://127.0.0.1:8080/v1",
            "https://ollama.internal:11434/v1",
            "http://gpu-box:11500/v1",
        ]
        .map(str::to_owned)
    );
    let settings =
        warrant_llm::ollama_settings_from(&Default::default(), &BTreeMap::new(), "llama3.2");
    assert_eq!((settings.api_key, settings.stream), (None, true));
}
