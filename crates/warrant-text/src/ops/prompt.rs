//! The approval prompt at the run's own terminal, laid out: the exact action (a diff for a
//! write; argv, cwd and profile for a command), why it was asked, its digest, who is asked,
//! and the answers a person can type. The caller reads the answers; this only words.

use std::fmt::Write as _;

use warrant_host::narrate::{inline, reasons_text};
use warrant_kernel::PromptView;

/// What a person typed at the prompt, understood.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    Once,
    Session,
    Deny,
}

/// The whole prompt up to the question. `shown` renders text for the terminal; it is applied
/// to every line before Warrant's own colour is added to a diff's lines, so the colour is only
/// ever Warrant's and nothing the model wrote can move the cursor or reorder the text.
pub fn approval(view: &PromptView<'_>, colour: bool, shown: &dyn Fn(&str) -> String) -> String {
    let mut head = String::new();
    let _ = writeln!(
        head,
        "\n--- approval needed: {} (risk {}) ---",
        view.request,
        view.risk.as_str()
    );
    let _ = writeln!(head, "{}", inline(view.title));
    let body: String = view
        .body
        .lines()
        .map(|l| format!("{}\n", body_line(l, colour, shown)))
        .collect();
    let mut tail = String::new();
    if !view.reasons.is_empty() {
        let _ = writeln!(tail, "why asked: {}", reasons_text(view.reasons));
    }
    let _ = writeln!(tail, "digest: {}", view.digest);
    let _ = writeln!(tail, "asked of: {}", view.asked);
    let _ = writeln!(tail, "  [o]nce    this exact action, once");
    if has_session(view) {
        let _ = writeln!(tail, "  [s]ession {}", view.session);
    }
    let _ = writeln!(tail, "  [d]eny    the agent is told your reason");
    format!("{}{body}{}", shown(&head), shown(&tail))
}

/// A judgement of what one command did has no session scope: it is that changeset only.
pub fn has_session(view: &PromptView<'_>) -> bool {
    !view.session.is_empty()
}

/// The question, asked again until it is answered.
pub fn question(session: bool) -> &'static str {
    if session {
        "approve [o]nce, for this [s]ession, or [d]eny? "
    } else {
        "approve [o]nce or [d]eny? "
    }
}

/// What a typed answer means (`None`: ask again with [`AGAIN`]).
pub fn choice(answer: &str, session: bool) -> Option<Choice> {
    match answer.to_lowercase().as_str() {
        "o" | "once" | "y" | "yes" => Some(Choice::Once),
        "s" | "session" if session => Some(Choice::Session),
        "d" | "deny" | "n" | "no" => Some(Choice::Deny),
        _ => None,
    }
}

/// Said when an answer meant nothing.
pub const AGAIN: &str = "please answer o, s or d";
/// Asked after a denial.
pub const REASON: &str = "reason (the agent is told): ";
/// The reason of a denial given without one.
pub const NO_REASON: &str = "denied at the terminal";

/// A line of the body, coloured when it is a diff's added, removed or hunk line and the
/// terminal shows colour.
fn body_line(line: &str, colour: bool, shown: &dyn Fn(&str) -> String) -> String {
    let text = shown(line);
    if !colour || line.starts_with("+++") || line.starts_with("---") {
        return format!("  {text}");
    }
    match line.chars().next() {
        Some('+') => format!("  \u{1b}[32m{text}\u{1b}[0m"),
        Some('-') => format!("  \u{1b}[31m{text}\u{1b}[0m"),
        Some('@') => format!("  \u{1b}[36m{text}\u{1b}[0m"),
        _ => format!("  {text}"),
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn a_diff_is_coloured_after_rendering_and_session_is_offered_only_when_it_exists() {
        let shown = |s: &str| s.replace('\u{1b}', "\\e");
        assert_eq!(
            body_line("+new\u{1b}[2J", true, &shown),
            "  \u{1b}[32m+new\\e[2J\u{1b}[0m"
        );
        assert_eq!(body_line("--- a/x", true, &shown), "  --- a/x");
        assert_eq!(body_line("-old", false, &shown), "  -old");
        assert_eq!(choice("S", true), Some(Choice::Session));
        assert_eq!(choice("s", false), None);
        assert_eq!(choice("no", false), Some(Choice::Deny));
    }
}
