//! The approval prompt at the run's own terminal (laid out by `warrant-text`): shows the exact
//! action and takes once / session / deny. The answer is given as the principal Warrant
//! established for this process.

use std::io::{BufRead, IsTerminal, Write};

use warrant_core::Principal;
use warrant_kernel::{Answer, PromptView, Prompter, Scope};
use warrant_text::ops::prompt::{self as words, Choice};

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

impl<R: LineSource> Prompter for TerminalPrompter<R> {
    fn ask(&mut self, view: &PromptView<'_>) -> Option<(Answer, Principal)> {
        let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
        let shown = |s: &str| crate::shown(s).into_owned();
        let session = words::has_session(view);
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "{}", words::approval(view, colour, &shown));
        let answer = loop {
            let _ = write!(err, "{}", words::question(session));
            let _ = err.flush();
            let line = self.input.next_line()?;
            match words::choice(line.trim(), session) {
                Some(Choice::Once) => break Answer::Approve(Scope::Once),
                Some(Choice::Session) => break Answer::Approve(Scope::Session),
                Some(Choice::Deny) => {
                    let _ = write!(err, "{}", words::REASON);
                    let _ = err.flush();
                    let reason = self.input.next_line().map(|r| r.trim().to_owned());
                    let reason = reason.filter(|r| !r.is_empty());
                    let reason = reason.unwrap_or_else(|| words::NO_REASON.into());
                    break Answer::Deny { reason };
                }
                None => {
                    let _ = writeln!(err, "{}", words::AGAIN);
                }
            }
        };
        Some((answer, self.principal.clone()))
    }
}
