//! An MCP server's sampling request (`sampling/createMessage`) on its way through the ring:
//! checked (text only, no tools, a bounded `maxTokens`), handed to the run's [`PeerAsks`] (a
//! run of its own answers it), and recorded for the call's result. rmcp marks the sampling
//! types deprecated (SEP-2577 moves sampling elsewhere in a later protocol), but servers of
//! the 2025-11-25 protocol send exactly these requests, hence the module-wide allowance.
#![allow(deprecated)]

use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ErrorCode, ErrorData, Role, SamplingMessage,
    SamplingMessageContentBlock,
};
use serde_json::{Value, json};
use warrant_core::digest_of;
use warrant_kernel::{PeerAsks, SampledMessage, SamplingAsk};

use crate::connection::{REFUSED_REQUEST, SamplingAnswer};

/// The largest completion a server may ask for: more is refused, not clamped (the server
/// would be answered with less than it asked without knowing).
pub const MAX_SAMPLING_TOKENS: u32 = 16_384;

/// A server's sampling request as the run that answers it records it: text messages only.
pub fn sampling_ask(
    server: &str,
    params: &CreateMessageRequestParams,
) -> Result<SamplingAsk, String> {
    if params.tools.as_ref().is_some_and(|t| !t.is_empty()) {
        return Err("sampling with tools is not offered: the model answers with text only".into());
    }
    if params.max_tokens == 0 || params.max_tokens > MAX_SAMPLING_TOKENS {
        return Err(format!(
            "maxTokens must be between 1 and {MAX_SAMPLING_TOKENS}, not {}",
            params.max_tokens
        ));
    }
    let mut messages = Vec::new();
    for m in &params.messages {
        let role = match m.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        let mut text = Vec::new();
        for block in m.content.clone().into_vec() {
            match block {
                SamplingMessageContentBlock::Text(t) => text.push(t.text),
                SamplingMessageContentBlock::Image(_) => {
                    return Err("image content is not sampled: text only".into());
                }
                SamplingMessageContentBlock::Audio(_) => {
                    return Err("audio content is not sampled: text only".into());
                }
                SamplingMessageContentBlock::ToolUse(_)
                | SamplingMessageContentBlock::ToolResult(_)
                | _ => {
                    return Err("only text content is sampled (tool use, tool results and other kinds are refused)".into());
                }
            }
        }
        messages.push(SampledMessage {
            role: role.to_owned(),
            text: text.join("\n"),
        });
    }
    if messages.is_empty() {
        return Err("a sampling request needs at least one message".into());
    }
    Ok(SamplingAsk {
        server: server.to_owned(),
        system: params.system_prompt.clone(),
        messages,
        max_tokens: params.max_tokens,
    })
}

/// Answers one sampling request through `peers` and says what happened, for the call's result:
/// the child run, and either the answer's digest and size (its text stays in the child run's
/// own log) or the refusal's code and words.
pub(crate) fn sample(
    server: &str,
    params: &CreateMessageRequestParams,
    peers: &dyn PeerAsks,
) -> (SamplingAnswer, Value) {
    let refused = |code: &str, message: String, run: Option<String>| {
        let e = ErrorData::new(
            ErrorCode(REFUSED_REQUEST),
            format!("{message} ({code})"),
            None,
        );
        let mut record =
            json!({"request": "sampling", "outcome": "refused", "code": code, "error": message});
        if let Some(run) = run {
            record["child_run"] = json!(run);
        }
        (Err(e), record)
    };
    let ask = match sampling_ask(server, params) {
        Ok(ask) => ask,
        Err(message) => return refused("W-MCP-014", message, None),
    };
    let sampled = peers.sample(&ask);
    let run = sampled.run.as_ref().map(ToString::to_string);
    match sampled.answer {
        Ok(text) => {
            let record = json!({
                "request": "sampling",
                "outcome": "answered",
                "child_run": run,
                "model": sampled.model,
                "answer_digest": digest_of(&text).map(|d| d.to_string()).unwrap_or_default(),
                "answer_bytes": text.len(),
            });
            let mut result = CreateMessageResult::new(
                SamplingMessage::new(Role::Assistant, SamplingMessageContentBlock::text(text)),
                sampled.model,
            );
            result.stop_reason = Some(CreateMessageResult::STOP_REASON_END_TURN.to_owned());
            (Ok(result), record)
        }
        Err(r) => refused(&r.code, r.message, run),
    }
}
