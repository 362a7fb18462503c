//! The approval prompt at the run's own terminal: shows the exact action (a diff for a write;
//! argv, cwd and profile for a command) and takes once / session / deny. The answer is given
//! as the principal Warrant established for this process.

use std::fmt::Write as _;
use std::io::{BufRead, IsTerminal, Write};

use warrant_core::Principal;
use warrant_kernel::{Answer, PromptView, Prompter, Scope};

use warrant_host::narrate::reasons_text;

/// Where a prompt's answers are read from, a line at a time: standard input, or (in a chat
/// read from standard input) the same lines the session's messages come from.
pub trait LineSource {
    fn next_line(&mut self) -> Option<String>;
}

impl<B: BufRead> LineSource for B {
    fn next_line(&mut self) -> Option<String> {
        let mut s = String::new();
        match self.read_line(&mut s) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(s),
        }
    }
}

pub struct TerminalPrompter<R: LineSource> {
    pub input: R,
    pub principal: Principal,
}

impl<R: LineSource> TerminalPrompter<R> {
    fn line(&mut self) -> Option<String> {
        self.input.next_line().map(|s| s.trim().to_owned())
    }
}

/// A line of an approval's body, coloured when it is a diff's added or removed line and the
/// terminal shows colour. The text is rendered first, so the colour is only ever Warrant's.
fn body_line(line: &str, colour: bool) -> String {
    let shown = crate::shown(line);
    if !colour || line.starts_with("+++") || line.starts_with("---") {
        return format!("  {shown}");
    }
    match line.chars().next() {
        Some('+') => format!("  \u{1b}[32m{shown}\u{1b}[0m"),
        Some('-') => format!("  \u{1b}[31m{shown}\u{1b}[0m"),
        Some('@') => format!("  \u{1b}[36m{shown}\u{1b}[0m"),
        _ => format!("  {shown}"),
    }
}

impl<R: LineSource> Prompter for TerminalPrompter<R> {
    fn ask(&mut self, view: &PromptView<'_>) -> Option<(Answer, Principal)> {
        // Laid out here, then shown through one renderer: nothing the model wrote can move the
        // cursor, erase a line or reorder text on the person's terminal.
        let mut text = String::new();
        let _ = writeln!(
            text,
            "\n--- approval needed: {} (risk {}) ---",
            view.request,
            view.risk.as_str()
        );
        let _ = writeln!(text, "{}", crate::shown_inline(view.title));
        // The body (a diff, or argv, cwd, profile and its confinement) line by line, each
        // rendered before Warrant's own colour is added.
        let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
        let body: String = view
            .body
            .lines()
            .map(|l| format!("{}\n", body_line(l, colour)))
            .collect();
        let mut tail = String::new();
        if !view.reasons.is_empty() {
            let _ = writeln!(tail, "why asked: {}", reasons_text(view.reasons));
        }
        let _ = writeln!(tail, "digest: {}", view.digest);
        let _ = writeln!(tail, "asked of: {}", view.asked);
        // A judgement of what one command did has no session scope: it is that changeset only.
        let session = !view.session.is_empty();
        let _ = writeln!(tail, "  [o]nce    this exact action, once");
        if session {
            let _ = writeln!(tail, "  [s]ession {}", view.session);
        }
        let _ = writeln!(tail, "  [d]eny    the agent is told your reason");
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "{}{body}{}", crate::shown(&text), crate::shown(&tail));
        loop {
            if session {
                let _ = write!(err, "approve [o]nce, for this [s]ession, or [d]eny? ");
            } else {
                let _ = write!(err, "approve [o]nce or [d]eny? ");
            }
            let _ = err.flush();
            let answer = self.line()?;
            match answer.to_lowercase().as_str() {
                "o" | "once" | "y" | "yes" => {
                    return Some((Answer::Approve(Scope::Once), self.principal.clone()));
                }
                "s" | "session" if session => {
                    return Some((Answer::Approve(Scope::Session), self.principal.clone()));
                }
                "d" | "deny" | "n" | "no" => {
                    let _ = write!(err, "reason (the agent is told): ");
                    let _ = err.flush();
                    let reason = self
                        .line()
                        .filter(|r| !r.is_empty())
                        .unwrap_or_else(|| "denied at the terminal".into());
                    return Some((Answer::Deny { reason }, self.principal.clone()));
                }
                _ => {
                    let _ = writeln!(err, "please answer o, s or d");
                }
            }
        }
    }
}
