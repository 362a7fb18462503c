//! An MCP server's elicitation (`elicitation/create`, form mode) on its way through the ring:
//! handed to the run's [`PeerAsks`], which raises a request to the run's person and waits for
//! the reply, and recorded for the call's result (outcome and request, never the answered
//! values). URL mode is never declared, and a URL-mode request is refused: it would send the
//! person to an address the server chose.

use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, ErrorCode, ErrorData};
use serde_json::{Value, json};
use warrant_core::digest_of;
use warrant_kernel::PeerAsks;
use warrant_kernel::elicit::{ElicitAsk, ElicitOutcome};

use crate::connection::{ElicitAnswer, REFUSED_REQUEST};

/// How long a person has to answer when the server's table does not say: five minutes.
pub const DEFAULT_ELICITATION_TIMEOUT_MS: u64 = 300_000;

/// The server's elicitation as the run asks it, or why it is not asked.
pub fn elicitation_ask(
    server: &str,
    timeout_ms: u64,
    params: &ElicitRequestParams,
) -> Result<ElicitAsk, String> {
    match params {
        ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } => {
            let schema = serde_json::to_value(requested_schema)
                .map_err(|e| format!("the requested schema cannot be read: {e}"))?;
            warrant_kernel::elicit::check_schema(&schema)?;
            Ok(ElicitAsk {
                server: server.to_owned(),
                message: message.clone(),
                schema,
                timeout_ms,
            })
        }
        ElicitRequestParams::UrlElicitationParams { .. } | _ => Err(
            "only form-mode elicitation is offered (URL mode would send the person to an address a server chose)"
                .into(),
        ),
    }
}

/// Asks the person through `peers` and says what happened, for the call's result: the
/// request, the outcome, and for an accepted answer the fields and the content's digest.
pub(crate) fn elicit(
    server: &str,
    timeout_ms: u64,
    params: &ElicitRequestParams,
    peers: &dyn PeerAsks,
) -> (ElicitAnswer, Value) {
    let refused = |code: &str, message: String, request: Option<String>| {
        let e = ErrorData::new(
            ErrorCode(REFUSED_REQUEST),
            format!("{message} ({code})"),
            None,
        );
        let mut record =
            json!({"request": "elicitation", "outcome": "refused", "code": code, "error": message});
        if let Some(r) = request {
            record["request_id"] = json!(r);
        }
        (Err(e), record)
    };
    let ask = match elicitation_ask(server, timeout_ms, params) {
        Ok(ask) => ask,
        Err(message) => return refused("W-MCP-016", message, None),
    };
    let elicited = peers.elicit(&ask);
    let request = elicited.request.as_ref().map(ToString::to_string);
    let record = |outcome: &str| json!({"request": "elicitation", "outcome": outcome, "request_id": request});
    match elicited.outcome {
        ElicitOutcome::Accepted(content) => {
            let mut r = record("accepted");
            r["fields"] = json!(
                content
                    .as_object()
                    .map(|m| m.keys().cloned().collect::<Vec<_>>())
                    .unwrap_or_default()
            );
            r["content_digest"] = json!(
                digest_of(&content)
                    .map(|d| d.to_string())
                    .unwrap_or_default()
            );
            (
                Ok(ElicitResult::new(ElicitationAction::Accept).with_content(content)),
                r,
            )
        }
        ElicitOutcome::Declined(_) => (
            Ok(ElicitResult::new(ElicitationAction::Decline)),
            record("declined"),
        ),
        ElicitOutcome::Cancelled(why) => {
            let mut r = record("cancelled");
            r["why"] = json!(why);
            (Ok(ElicitResult::new(ElicitationAction::Cancel)), r)
        }
        ElicitOutcome::Refused(refusal) => refused(&refusal.code, refusal.message, request),
    }
}
