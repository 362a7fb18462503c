//! The approval prompt at the run's own terminal: shows the exact action (a diff for a write;
//! argv, cwd and profile for a command) and takes once / session / deny. The answer is given
//! as the principal Warrant established for this process.

use std::fmt::Write as _;
use std::io::{BufRead, Write};

use warrant_core::Principal;
use warrant_kernel::{Answer, PromptView, Prompter, Scope};

use warrant_host::narrate::reasons_text;

pub struct TerminalPrompter<R: BufRead> {
    pub input: R,
    pub principal: Principal,
}

impl<R: BufRead> TerminalPrompter<R> {
    fn line(&mut self) -> Option<String> {
        let mut s = String::new();
        match self.input.read_line(&mut s) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(s.trim().to_owned()),
        }
    }
}

impl<R: BufRead> Prompter for TerminalPrompter<R> {
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
        for l in view.body.lines() {
            let _ = writeln!(text, "  {l}");
        }
        if !view.reasons.is_empty() {
            let _ = writeln!(text, "why asked: {}", reasons_text(view.reasons));
        }
        let _ = writeln!(text, "digest: {}", view.digest);
        let _ = writeln!(text, "asked of: {}", view.asked);
        // A judgement of what one command did has no session scope: it is that changeset only.
        let session = !view.session.is_empty();
        let _ = writeln!(text, "  [o]nce    this exact action, once");
        if session {
            let _ = writeln!(text, "  [s]ession {}", view.session);
        }
        let _ = writeln!(text, "  [d]eny    the agent is told your reason");
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "{}", crate::shown(&text));
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
