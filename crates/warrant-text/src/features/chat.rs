//! The chat session's words: the slash commands' answers, the spinner's step, how a session
//! ended, and the streamed answer cut into whole lines (each line then passes the renderer
//! whole, an escape sequence split across chunks included).

use warrant_agent::RunExit;
use warrant_core::RunId;
use warrant_host::chat::Slash;
use warrant_kernel::{CallState, RunEvent};

/// What `/help` says.
pub const HELP: &str = "/explain  why the latest call was allowed, asked or refused
/audit    what this session read, changed or was refused, and who allowed it
/approvals  requests of this session waiting for a person
/profile  the subprocess profiles and what confines their commands
/cost     tokens and cost of this session's model calls
/exit     end the session (so does the end of input)";

/// The spinner's step while the model works.
pub const THINKING: &str = "thinking (Ctrl-C stops)";
/// The spinner's step after a person answered a prompt.
pub const WORKING: &str = "working (Ctrl-C stops)";
/// Said when Ctrl-C comes while nothing runs.
pub const NOTHING_RUNNING: &str = "(nothing is running; /exit or Ctrl-D ends the session)";
/// The usage error when no model is given or configured.
pub const NO_MODEL: &str = "no model for the session: pass --model PROVIDER:MODEL (e.g. openai:gpt-4.1), configure one with `warrant configure`, or set WARRANT_MODEL";

/// The first line on a terminal.
pub fn greeting(model: &str) -> String {
    format!("warrant chat with {model}: /help lists the commands, /exit ends")
}

/// What the person's own line had neutralized (on a terminal, where the line is not echoed).
pub fn neutralized(found: &[String]) -> String {
    format!(
        "(your message had {} control character(s), neutralized: {})",
        found.len(),
        found.join(" ")
    )
}

/// The answer to a slash command, a line per item (none for `/exit`).
pub fn slash(slash: &Slash) -> Vec<String> {
    let error = |e: &warrant_host::HostError| vec![format!("error[{}]: {}", e.code, e.message)];
    match slash {
        Slash::Exit => Vec::new(),
        Slash::Help => vec![HELP.to_owned()],
        Slash::Cost(None) => vec!["nothing spent yet".to_owned()],
        Slash::Cost(Some(s)) => vec![format!(
            "this session: {} input and {} output tokens over {} model turn(s), ${:.4}",
            s.input_tokens, s.output_tokens, s.turns, s.cost_usd
        )],
        Slash::Explain(call) => vec![explain(call.as_deref())],
        Slash::Profiles(all) => all
            .iter()
            .map(|p| format!("{}: {}", p.name, p.confinement))
            .collect(),
        Slash::Approvals(Err(e)) => error(e),
        Slash::Approvals(Ok(items)) if items.is_empty() => {
            vec!["no request of this session waits for a person".to_owned()]
        }
        Slash::Approvals(Ok(items)) => items
            .iter()
            .map(|i| {
                let title = i.title.as_deref().unwrap_or("");
                format!("{} {} {}: {title}", i.id, i.kind, i.status)
            })
            .collect(),
        Slash::Audit(Some(Err(e))) => error(e),
        Slash::Audit(Some(Ok(t))) if !t.touched.is_empty() => t
            .touched
            .iter()
            .flat_map(|(kind, rows)| {
                rows.iter().map(move |r| {
                    format!(
                        "{kind:<6} {:<8} {:<10} {}  (by {})",
                        r.verb, r.status, r.resource, r.by
                    )
                })
            })
            .collect(),
        Slash::Audit(_) => vec!["nothing touched yet".to_owned()],
        Slash::Unknown(name) => vec![format!(
            "unknown command /{name}; the commands are:\n{HELP}"
        )],
    }
}

/// `/explain`: the call, then each decision with its risk and reasons.
pub fn explain(call: Option<&CallState>) -> String {
    let Some(call) = call else {
        return "no call has been decided in this session yet".to_owned();
    };
    let mut lines = vec![format!(
        "{} ({}) {}",
        call.record.tool, call.record.id, call.record.args
    )];
    for d in &call.decisions {
        lines.push(format!(
            "  {} (risk {}): {}",
            d.verdict.as_str(),
            d.risk.as_str(),
            warrant_host::narrate::reasons_text(&d.reasons)
        ));
    }
    lines.join("\n")
}

/// What the session does after `event`, for the spinner; `None` when it waits for a person.
pub fn step_after(event: &RunEvent) -> Option<String> {
    match event {
        RunEvent::MessageReceived { .. }
        | RunEvent::EffectCompleted { .. }
        | RunEvent::CallRefused { .. }
        | RunEvent::EffectDenied { .. }
        | RunEvent::HistoryCompacted { .. } => Some(THINKING.to_owned()),
        RunEvent::ModelResponded { calls, .. } => calls
            .first()
            .map(|c| format!("checking {} (Ctrl-C stops)", c.tool)),
        RunEvent::EffectStarted { call_id, .. } => {
            Some(format!("running {call_id} (Ctrl-C stops)"))
        }
        RunEvent::RunStarted { .. }
        | RunEvent::PolicyChanged { .. }
        | RunEvent::ToolsChanged { .. }
        | RunEvent::ActionProposed { .. }
        | RunEvent::PolicyDecided { .. }
        | RunEvent::ApprovalRequested { .. }
        | RunEvent::ApprovalGranted { .. }
        | RunEvent::ApprovalRejected { .. }
        | RunEvent::ApprovalDenied { .. }
        | RunEvent::RunParked { .. }
        | RunEvent::RunResumed { .. }
        | RunEvent::EffectJudging { .. }
        | RunEvent::EffectInDoubt { .. }
        | RunEvent::InDoubtResolved { .. }
        | RunEvent::AuditGap { .. }
        | RunEvent::LimitReached { .. }
        | RunEvent::Halted { .. }
        | RunEvent::RunEnded { .. }
        | RunEvent::RequestRaised { .. }
        | RunEvent::RequestReplied { .. }
        | RunEvent::RequestExpired { .. }
        | RunEvent::ModelCallDenied { .. }
        | RunEvent::BudgetExceeded { .. }
        | RunEvent::AwaitingMessage { .. }
        | RunEvent::MessageRefused { .. }
        | RunEvent::GraphNode(_)
        | RunEvent::CallReceived { .. }
        | RunEvent::AccessRefused { .. }
        | RunEvent::JournalRejected { .. } => None,
    }
}

/// How the session `run` ended here, and how to continue it when it can be.
pub fn ended(run: &RunId, exit: &RunExit) -> String {
    match exit {
        RunExit::Completed => format!("session {run} ended"),
        RunExit::Failed { code, message } => format!("session {run} failed [{code}]: {message}"),
        RunExit::Stopped { reason } => format!("session {run} stopped by governance: {reason}"),
        RunExit::Parked { request } => format!(
            "session {run} parked: request {request} waits for a person\n  then continue with: warrant chat --resume {run}"
        ),
        RunExit::Superseded { message } => format!("session {run}: {message}"),
        RunExit::AwaitingMessage => {
            format!("session {run} waits for your next message: warrant chat --resume {run}")
        }
    }
}

/// A streamed answer cut into whole lines: a line is given out once its line feed arrived.
#[derive(Debug, Default)]
pub struct StreamedLines {
    partial: String,
}

impl StreamedLines {
    /// Adds a chunk; returns the lines it completed, without their line ends.
    pub fn push(&mut self, text: &str) -> Vec<String> {
        self.partial.push_str(text);
        let mut complete = Vec::new();
        while let Some(at) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=at).collect();
            complete.push(line.trim_end_matches(['\n', '\r']).to_owned());
        }
        complete
    }

    /// What is left (a last line without its line feed, or a cut one); empty when nothing is.
    pub fn rest(&mut self) -> String {
        std::mem::take(&mut self.partial)
    }
}

/// How a committed event shows in a session's text output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shown {
    /// Narrated whole (or, with `--json`, its JSON line).
    Whole,
    /// The model's answer already shown as it streamed: its narration without the text.
    AfterText,
    /// The person's own line, already on the terminal: only what was neutralized in it.
    Neutralized(String),
    /// Nothing to show.
    Nothing,
}

/// What a session has printed of the answer streaming now, and what to print next.
#[derive(Debug, Default)]
pub struct Echo {
    lines: StreamedLines,
    /// The current answer was shown as it streamed.
    streaming: bool,
}

impl Echo {
    /// A chunk of the answer: the lines it completes, ready to print.
    pub fn streamed(&mut self, text: &str) -> Vec<String> {
        let complete = self.lines.push(text);
        complete.iter().map(|l| self.line(l)).collect()
    }

    /// An event was committed: the rest of the streamed answer to print first, then how the
    /// event shows. `terminal`: the person typed their message on this terminal.
    pub fn committed(
        &mut self,
        event: &RunEvent,
        json: bool,
        terminal: bool,
    ) -> (Vec<String>, Shown) {
        let rest = self.lines.rest();
        let rest = if rest.is_empty() {
            Vec::new()
        } else {
            vec![self.line(&rest)]
        };
        let shown_already =
            matches!(event, RunEvent::ModelResponded { text: Some(_), .. }) && self.streaming;
        if matches!(
            event,
            RunEvent::ModelResponded { .. }
                | RunEvent::AwaitingMessage { .. }
                | RunEvent::RunEnded { .. }
        ) {
            self.streaming = false;
        }
        let echo = !(terminal && matches!(event, RunEvent::MessageReceived { .. }));
        let shown = if shown_already && !json {
            Shown::AfterText
        } else if echo || json {
            Shown::Whole
        } else if let RunEvent::MessageReceived { neutralized, .. } = event
            && !neutralized.is_empty()
        {
            Shown::Neutralized(self::neutralized(neutralized))
        } else {
            Shown::Nothing
        };
        (rest, shown)
    }

    /// One line of the answer as it streams: the first under `model`, the rest below it.
    fn line(&mut self, line: &str) -> String {
        if std::mem::replace(&mut self.streaming, true) {
            format!("         {line}")
        } else {
            format!("model    {line}")
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn a_stream_gives_whole_lines_and_keeps_the_rest() {
        let mut s = StreamedLines::default();
        assert_eq!(s.push("one\r\ntw"), vec!["one".to_owned()]);
        assert_eq!(s.push("o\n\x1b[3"), vec!["two".to_owned()]);
        assert_eq!(s.push("1mred"), Vec::<String>::new());
        assert_eq!(s.rest(), "\x1b[31mred");
        assert_eq!(s.rest(), "");
    }

    #[test]
    fn an_answer_shown_as_it_streamed_is_not_narrated_again() {
        let mut echo = Echo::default();
        assert_eq!(
            echo.streamed("Hello\nwor"),
            vec!["model    Hello".to_owned()]
        );
        let answered = RunEvent::ModelResponded {
            turn: 1,
            text: Some("Hello\nworld".to_owned()),
            calls: Vec::new(),
            usage: None,
            model: "scripted".to_owned(),
            request: None,
        };
        assert_eq!(
            echo.committed(&answered, false, true),
            (vec!["         wor".to_owned()], Shown::AfterText)
        );
        // The next answer did not stream: narrated whole.
        assert_eq!(
            echo.committed(&answered, false, true),
            (Vec::new(), Shown::Whole)
        );
    }

    #[test]
    fn a_session_says_how_to_continue_when_it_can() {
        let run = RunId::parse("run-0195f0c3a1b2-1a2b3c4d5e6f");
        let Some(run) = run else {
            unreachable!("a valid run id");
        };
        assert_eq!(
            ended(&run, &RunExit::AwaitingMessage),
            "session run-0195f0c3a1b2-1a2b3c4d5e6f waits for your next message: warrant chat --resume run-0195f0c3a1b2-1a2b3c4d5e6f"
        );
        assert_eq!(
            slash(&Slash::Unknown("nope".to_owned())),
            vec![format!("unknown command /nope; the commands are:\n{HELP}")]
        );
        assert_eq!(
            slash(&Slash::Audit(None)),
            vec!["nothing touched yet".to_owned()]
        );
    }
}
