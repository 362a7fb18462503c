//! Server-sent events as both streaming APIs use them, and the hook that lets the caller watch
//! a streamed answer grow and cut it off (budgets). Parsing only: the providers own their event
//! vocabularies (`openai_stream`, `anthropic_stream`) and the transport lives in `wire`.

use std::io::{BufRead, Read};

use serde::{Deserialize, Serialize};

/// One SSE line may not be longer than this: a server that never sends a newline must not
/// exhaust memory.
pub const MAX_LINE: usize = 4 * 1024 * 1024;

/// One dispatched event: the `event:` name (empty when the server sent none) and its data
/// lines joined with `\n`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    pub event: String,
    pub data: String,
}

/// Why reading the event stream failed.
#[derive(Debug, PartialEq, Eq)]
pub enum SseError {
    Io(String),
    LineTooLong,
}

/// Reads events from an SSE body (WHATWG `text/event-stream`: `field: value` lines, a blank line
/// dispatches, `:` starts a comment, CRLF or LF endings). `Ok(None)` at the end of the body; an
/// event cut off by the end of the body is dropped, as the spec says.
#[derive(Debug)]
pub struct SseReader<R> {
    reader: R,
    line: Vec<u8>,
}

impl<R: BufRead> SseReader<R> {
    pub fn new(reader: R) -> Self {
        Self {
            reader,
            line: Vec::new(),
        }
    }

    pub fn next_event(&mut self) -> Result<Option<SseEvent>, SseError> {
        let mut event = String::new();
        let mut data: Option<String> = None;
        loop {
            self.line.clear();
            let limit = u64::try_from(MAX_LINE + 1).unwrap_or(u64::MAX);
            let read = (&mut self.reader)
                .take(limit)
                .read_until(b'\n', &mut self.line)
                .map_err(|e| SseError::Io(e.to_string()))?;
            if read == 0 {
                return Ok(None);
            }
            if self.line.len() > MAX_LINE {
                return Err(SseError::LineTooLong);
            }
            let text = String::from_utf8_lossy(&self.line);
            let text = text.trim_end_matches('\n').trim_end_matches('\r');
            if text.is_empty() {
                match data.take() {
                    Some(data) => return Ok(Some(SseEvent { event, data })),
                    // A blank line with no data dispatches nothing.
                    None => {
                        event.clear();
                        continue;
                    }
                }
            }
            if text.starts_with(':') {
                continue;
            }
            let (field, value) = match text.split_once(':') {
                Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
                None => (text, ""),
            };
            match field {
                "event" => value.clone_into(&mut event),
                "data" => match &mut data {
                    Some(existing) => {
                        existing.push('\n');
                        existing.push_str(value);
                    }
                    None => data = Some(value.to_owned()),
                },
                // `id` and `retry` matter for reconnecting EventSource clients, not here.
                _ => {}
            }
        }
    }
}

/// How much a streamed answer has cost so far. Counts are the server's when it sent them
/// (Anthropic's `message_start` / `message_delta`, OpenAI's final usage chunk), else estimates
/// (4 bytes a token, rounded up) of the request body for input and of the text and arguments
/// received for output, flagged by `estimated`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamProgress {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub estimated: bool,
}

/// The caller's answer to each progress update.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// Abort the answer now; the provider returns [`crate::ModelError::Stopped`].
    Stop {
        reason: String,
    },
}

/// Called after each delta and each usage update of a streamed answer (and once with the
/// final usage of an answer that was not streamed).
pub type OnProgress<'a> = &'a mut dyn FnMut(&StreamProgress, &str) -> Flow;

/// Bytes per token when the server has not counted yet; rough, and biased to overcount.
const BYTES_PER_TOKEN: u64 = 4;

pub(crate) fn estimate_tokens(bytes: usize) -> u64 {
    u64::try_from(bytes)
        .unwrap_or(u64::MAX)
        .div_ceil(BYTES_PER_TOKEN)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;

    fn all(body: &str) -> Vec<SseEvent> {
        let mut reader = SseReader::new(body.as_bytes());
        let mut out = Vec::new();
        while let Some(e) = reader.next_event().unwrap() {
            out.push(e);
        }
        out
    }

    #[test]
    fn events_follow_the_sse_rules() {
        let body = ": keep-alive comment\r\n\
                    event: ping\r\ndata: {}\r\n\r\n\
                    data: first\ndata:second\n\n\
                    \n\
                    event: message_stop\ndata: {\"a\":1}\n\n\
                    data: cut off at the end";
        assert_eq!(
            all(body),
            vec![
                SseEvent {
                    event: "ping".into(),
                    data: "{}".into()
                },
                SseEvent {
                    event: String::new(),
                    data: "first\nsecond".into()
                },
                SseEvent {
                    event: "message_stop".into(),
                    data: "{\"a\":1}".into()
                },
            ]
        );
    }

    #[test]
    fn an_endless_line_is_refused() {
        let body = "data: ".to_owned() + &"x".repeat(MAX_LINE + 10);
        let mut reader = SseReader::new(body.as_bytes());
        assert_eq!(reader.next_event(), Err(SseError::LineTooLong));
    }

    #[test]
    fn estimates_round_up() {
        assert_eq!(
            [0, 1, 4, 5].map(estimate_tokens),
            [0, 1, 1, 2],
            "bytes → tokens"
        );
    }
}
