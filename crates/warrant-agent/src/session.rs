//! A chat session's history kept under its token budget: when the prompt grows past it, the
//! oldest turns are replaced by a summary computed from the log alone (the person's words, the
//! model's words, which tools it used), so the same log always compacts the same way and a
//! resumed session sends exactly what the original would have.

use warrant_core::Digest;
use warrant_kernel::RunState;
use warrant_llm::Message;
use warrant_llm::untrusted::neutralise;

/// Characters per estimated token: the usual rule of thumb, the same for every provider so
/// the decision is deterministic.
const CHARS_PER_TOKEN: u64 = 4;

/// Longest excerpt of one message kept in a summary.
const EXCERPT: usize = 400;

/// The prompt as it would be sent with the turns before `.0` replaced by the summary `.1`
/// (`None`: as it is now).
pub type PromptFor<'a> = &'a dyn Fn(Option<(u32, &str)>) -> Vec<Message>;

/// What a compaction records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactionPlan {
    pub through_turn: u32,
    pub summary: String,
    pub replaced: Digest,
    pub estimated_tokens: u64,
    pub budget: u64,
}

/// The estimated tokens of some messages: their JSON length over four.
pub fn estimate(messages: &[Message]) -> u64 {
    messages
        .iter()
        .map(|m| serde_json::to_string(m).map_or(0, |s| s.chars().count() as u64))
        .sum::<u64>()
        / CHARS_PER_TOKEN
}

fn excerpt(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= EXCERPT {
        return one_line;
    }
    let cut: String = one_line.chars().take(EXCERPT).collect();
    format!("{cut}…")
}

/// The summary of everything before turn `through`: each message of the person
/// in full (up to an excerpt's length), the model's words, and the tools it called.
pub fn summary(state: &RunState, through: u32) -> String {
    let mut lines = vec![format!(
        "[Earlier in this session, compacted by Warrant: {through} model turn(s) are summarized here.]"
    )];
    for turn in 0..through {
        for m in state.messages.iter().filter(|m| m.after_turn == turn) {
            lines.push(format!("The person wrote: {}", excerpt(&m.text)));
        }
        if let Some(Some(text)) = state.turn_texts.get(turn as usize) {
            lines.push(format!("You answered: {}", excerpt(text)));
        }
        let tools: Vec<&str> = state
            .calls
            .iter()
            .filter(|c| c.turn == turn)
            .map(|c| c.record.tool.as_str())
            .collect();
        if !tools.is_empty() {
            lines.push(format!("You called: {}", tools.join(", ")));
        }
    }
    // Never a fence tag: the summary travels as the person's message.
    neutralise(&lines.join("\n"))
}

/// Where to compact, if the history is over `budget`: the fewest oldest turns whose summary
/// brings the prompt to three quarters of the budget or under (all of them when none does).
/// `prompt_for(through)` is the prompt as it would be sent with turns before `through`
/// replaced.
pub fn plan(state: &RunState, budget: u64, prompt_for: PromptFor<'_>) -> Option<CompactionPlan> {
    let current = state.compaction.as_ref();
    let now = prompt_for(current.map(|c| (c.through_turn, c.summary.as_str())));
    let estimated_tokens = estimate(&now);
    if estimated_tokens <= budget {
        return None;
    }
    let from = current.map_or(0, |c| c.through_turn) + 1;
    if from > state.turns {
        return None;
    }
    let target = budget * 3 / 4;
    let mut chosen = None;
    for through in from..=state.turns {
        let text = summary(state, through);
        let fits = estimate(&prompt_for(Some((through, &text)))) <= target;
        chosen = Some((through, text));
        if fits {
            break;
        }
    }
    let (through_turn, summary) = chosen?;
    let kept = prompt_for(Some((through_turn, &summary)));
    // What the summary replaces: the messages sent now that the compacted prompt lacks.
    let replaced: Vec<&Message> = now.iter().filter(|m| !kept.contains(m)).collect();
    let replaced = warrant_core::digest_of(&replaced).unwrap_or_else(|_| Digest::of_bytes(b""));
    Some(CompactionPlan {
        through_turn,
        summary,
        replaced,
        estimated_tokens,
        budget,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::{Value, json};
    use warrant_core::{RunId, Timestamp};
    use warrant_kernel::{GuardSettings, RunEvent, RunState};
    use warrant_llm::Message;
    use warrant_store::StoredEvent;

    use super::*;
    use crate::untrusted::prompt;

    fn fold(events: Vec<Value>) -> RunState {
        let run = RunId::parse("run-01").unwrap();
        let stored: Vec<StoredEvent> = events
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                let e: RunEvent = serde_json::from_value(v).unwrap();
                StoredEvent {
                    run: run.clone(),
                    seq: i as u64 + 1,
                    kind: e.kind().to_owned(),
                    version: 1,
                    recorded_at: Timestamp::from_millis(1_000).unwrap(),
                    payload: e.payload().unwrap(),
                }
            })
            .collect();
        RunState::fold(&stored).unwrap()
    }

    /// A session of two messages and one answer between them, with an `extra` event after.
    fn session(extra: Option<Value>) -> RunState {
        let mut events = vec![
            json!({"type": "run_started",
                   "principal": {"tenant": "t", "actor": "alice", "kind": "user"},
                   "task": "first", "model": "scripted:x", "workspace": "/w",
                   "policy_digest": Digest::of_bytes(b"p"),
                   "settings": {"max_denials": 3, "max_turns": 9,
                                "session": {"history_tokens": 40}},
                   "tools": []}),
            json!({"type": "awaiting_message", "turn": 0}),
            json!({"type": "message_received", "by": "alice", "text": "first"}),
            json!({"type": "model_responded", "turn": 0, "model": "m",
                   "text": "a long answer ".repeat(20), "calls": []}),
            json!({"type": "awaiting_message", "turn": 1}),
            json!({"type": "message_received", "by": "alice", "text": "second"}),
        ];
        events.extend(extra);
        fold(events)
    }

    fn user(text: &str) -> Message {
        Message::User {
            content: text.to_owned(),
        }
    }

    #[test]
    fn a_follow_up_message_comes_after_the_answer_it_follows() {
        let state = session(None);
        assert!(state.message_pending() && !state.awaiting);
        let messages = prompt(&state, GuardSettings::default())
            .conversation
            .messages;
        assert_eq!(
            messages,
            vec![
                user("first"),
                Message::Assistant {
                    text: Some("a long answer ".repeat(20)),
                    calls: vec![],
                },
                user("second"),
            ]
        );
    }

    #[test]
    fn a_history_over_its_budget_is_compacted_the_same_way_every_time() {
        let state = session(None);
        let guard = GuardSettings::default();
        let prompt_for = |c: Option<(u32, &str)>| {
            crate::untrusted::prompt_with(&state, guard, c)
                .conversation
                .messages
        };
        let plan = super::plan(&state, 40, &prompt_for).unwrap();
        assert_eq!(plan, super::plan(&state, 40, &prompt_for).unwrap());
        assert_eq!(plan.through_turn, 1);
        assert!(plan.estimated_tokens > 40);
        // Under the budget nothing is compacted.
        assert_eq!(super::plan(&state, 10_000, &prompt_for), None);

        // Once recorded, every later prompt starts from the summary.
        let compacted = session(Some(json!({"type": "history_compacted",
            "through_turn": plan.through_turn, "summary": plan.summary,
            "replaced": plan.replaced, "estimated_tokens": plan.estimated_tokens,
            "budget": 40})));
        let messages = prompt(&compacted, guard).conversation.messages;
        let summary = format!(
            "[Earlier in this session, compacted by Warrant: 1 model turn(s) are summarized here.]\nThe person wrote: first\nYou answered: {}",
            "a long answer ".repeat(20).trim()
        );
        assert_eq!(messages, vec![user(&format!("{summary}\n\nsecond"))]);
    }
}
