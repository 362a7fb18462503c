//! `warrant chat`: a session with the agent. On a terminal: a line editor with history, the
//! approval prompt inline, slash commands, a spinner with the current step, and Ctrl-C that stops
//! the current model call or effect and keeps the session. Without a terminal: one message per
//! line of standard input, ending at its end; `--json` prints the events as JSON lines. The
//! session itself (its waits, messages and compactions) is the application layer's
//! (`warrant_host::chat`).

use std::cell::RefCell;
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use warrant_agent::RunExit;
use warrant_core::PrincipalKind;
use warrant_host::Host;
use warrant_host::chat::{ChatRequest, Inbox, Incoming};
use warrant_kernel::{NoPrompter, Observer, Prompter, RunEvent, RunState};
use warrant_store::StoredEvent;

use crate::Failure;
use crate::output::Printer;
use crate::prompt::{LineSource, TerminalPrompter};

/// What `warrant chat` was asked for.
#[derive(Debug)]
pub struct ChatArgs {
    pub model: Option<String>,
    pub json: bool,
    pub prompt: String,
    pub deadline: Option<String>,
    pub history_tokens: u64,
    pub resume: Option<String>,
}

/// The lines of standard input, shared by the session's messages and the approval prompt when
/// both read from it.
#[derive(Clone)]
struct SharedLines(Rc<RefCell<Box<dyn BufRead>>>);

impl LineSource for SharedLines {
    fn next_line(&mut self) -> Option<String> {
        let mut s = String::new();
        match self.0.borrow_mut().read_line(&mut s) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(s),
        }
    }
}

/// The spinner's current step; `None` hides it. Lines printed while it spins clear it first.
#[derive(Clone, Default)]
struct Status(Arc<Mutex<Option<String>>>);

impl Status {
    fn set(&self, step: Option<String>) {
        if let Ok(mut s) = self.0.lock() {
            if s.is_some() && step.is_none() {
                clear_line();
            }
            *s = step;
        }
    }

    /// Runs `f` (which prints) with the spinner's line cleared.
    fn around(&self, f: impl FnOnce()) {
        match self.0.lock() {
            Ok(s) => {
                if s.is_some() {
                    clear_line();
                }
                f();
            }
            Err(_) => f(),
        }
    }
}

fn clear_line() {
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "\r\u{1b}[2K");
    let _ = err.flush();
}

/// Draws the spinner on standard error until `stop` is set; only on a terminal.
fn spin(status: Status, stop: Arc<AtomicBool>) {
    const FRAMES: [&str; 4] = ["|", "/", "-", "\\"];
    let mut i = 0usize;
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(120));
        if let Ok(s) = status.0.lock()
            && let Some(step) = s.as_ref()
        {
            let mut err = std::io::stderr().lock();
            let _ = write!(
                err,
                "\r\u{1b}[2K{} {}",
                FRAMES[i % FRAMES.len()],
                crate::shown_inline(step)
            );
            let _ = err.flush();
            i += 1;
        }
    }
}

/// Prints the session's events (the narration, or JSON lines) and keeps the spinner's step.
struct ChatPrinter {
    printer: Printer,
    status: Option<Status>,
    terminal: bool,
    /// The answer's streamed text not printed yet: a line prints once it is complete, so each
    /// line goes through the renderer whole (an escape sequence split across chunks included).
    partial: RefCell<String>,
    /// The current answer was shown as it streamed: its narration then leaves the text out.
    streaming: std::cell::Cell<bool>,
}

impl ChatPrinter {
    /// One line of the answer as it streams, through the renderer like every line.
    fn print_streamed(&self, line: &str) {
        let first = !self.streaming.replace(true);
        let print = || {
            if first {
                outln!("model    {line}");
            } else {
                outln!("         {line}");
            }
        };
        match &self.status {
            Some(status) => status.around(print),
            None => print(),
        }
    }

    /// Prints what is left of a streamed answer (its last line, cut or without a newline).
    fn flush_streamed(&self) {
        let rest = std::mem::take(&mut *self.partial.borrow_mut());
        if !rest.is_empty() {
            self.print_streamed(&rest);
        }
    }
}

impl Observer for ChatPrinter {
    fn streamed(&self, text: &str) {
        // JSON lines carry events only; the answer is in `model_responded`.
        if self.printer.json {
            return;
        }
        let mut complete = Vec::new();
        {
            let mut partial = self.partial.borrow_mut();
            partial.push_str(text);
            while let Some(at) = partial.find('\n') {
                let line: String = partial.drain(..=at).collect();
                complete.push(line.trim_end_matches(['\n', '\r']).to_owned());
            }
        }
        for line in complete {
            self.print_streamed(&line);
        }
    }

    fn committed(&self, stored: &StoredEvent, event: &RunEvent) {
        self.flush_streamed();
        // The answer's text is on the screen already when it streamed.
        let shown_already =
            matches!(event, RunEvent::ModelResponded { text: Some(_), .. }) && self.streaming.get();
        if matches!(
            event,
            RunEvent::ModelResponded { .. }
                | RunEvent::AwaitingMessage { .. }
                | RunEvent::RunEnded { .. }
        ) {
            self.streaming.set(false);
        }
        let print = || {
            // On a terminal the person's own line is already on the screen.
            let echo = !(self.terminal && matches!(event, RunEvent::MessageReceived { .. }));
            if shown_already && !self.printer.json {
                self.printer.print_after_text(stored, event);
            } else if echo || self.printer.json {
                self.printer.print(stored, event);
            } else if let RunEvent::MessageReceived { neutralized, .. } = event
                && !neutralized.is_empty()
            {
                outln!(
                    "(your message had {} control character(s), neutralized: {})",
                    neutralized.len(),
                    neutralized.join(" ")
                );
            }
        };
        match &self.status {
            Some(status) => {
                status.around(print);
                status.set(step_after(event));
            }
            None => print(),
        }
    }
}

/// What the session does after `event`, for the spinner; `None` when it waits for a person.
fn step_after(event: &RunEvent) -> Option<String> {
    match event {
        RunEvent::MessageReceived { .. }
        | RunEvent::EffectCompleted { .. }
        | RunEvent::CallRefused { .. }
        | RunEvent::EffectDenied { .. }
        | RunEvent::HistoryCompacted { .. } => Some("thinking (Ctrl-C stops)".to_owned()),
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

/// The session's messages from standard input, a line each (slash commands included).
struct StdinInbox {
    lines: SharedLines,
    json: bool,
}

impl Inbox for StdinInbox {
    fn next(&mut self, host: &Host, state: Option<&RunState>) -> Incoming {
        loop {
            let Some(line) = self.lines.next_line() else {
                return Incoming::End;
            };
            let line = line.trim_end_matches(['\n', '\r']).to_owned();
            if line.trim().is_empty() {
                continue;
            }
            match slash(&line, host, state, self.json) {
                Slash::NotOne => return Incoming::Message(line),
                Slash::Exit => return Incoming::End,
                Slash::Done => {}
            }
        }
    }
}

/// The session's messages from the person at the terminal, through a line editor.
struct TerminalInbox {
    history: Vec<String>,
    status: Status,
    interrupt: Arc<AtomicBool>,
}

impl Inbox for TerminalInbox {
    fn next(&mut self, host: &Host, state: Option<&RunState>) -> Incoming {
        self.status.set(None);
        // An editor per message: it takes SIGINT only while it reads a line and gives it back
        // when dropped, so a Ctrl-C during a turn reaches the session's own flag.
        let Ok(mut editor) = rustyline::DefaultEditor::new() else {
            return Incoming::End;
        };
        for line in &self.history {
            let _ = editor.add_history_entry(line.as_str());
        }
        loop {
            match editor.readline("you> ") {
                Ok(line) => {
                    if line.trim().is_empty() {
                        continue;
                    }
                    let _ = editor.add_history_entry(line.as_str());
                    self.history.push(line.clone());
                    match slash(&line, host, state, false) {
                        Slash::NotOne => {
                            self.interrupt.store(false, Ordering::SeqCst);
                            self.status.set(Some("thinking (Ctrl-C stops)".to_owned()));
                            return Incoming::Message(line);
                        }
                        Slash::Exit => return Incoming::End,
                        Slash::Done => {}
                    }
                }
                Err(rustyline::error::ReadlineError::Interrupted) => {
                    eprintln!("(nothing is running; /exit or Ctrl-D ends the session)");
                }
                Err(_) => return Incoming::End,
            }
        }
    }
}

enum Slash {
    /// Not a command: a message for the model.
    NotOne,
    Exit,
    Done,
}

const SLASH_HELP: &str = "/explain  why the latest call was allowed, asked or refused
/audit    what this session read, changed or was refused, and who allowed it
/approvals  requests of this session waiting for a person
/profile  the subprocess profiles and what confines their commands
/cost     tokens and cost of this session's model calls
/exit     end the session (so does the end of input)";

/// Runs a slash command; its output goes to standard output (standard error with `--json`,
/// which keeps standard output for events).
fn slash(line: &str, host: &Host, state: Option<&RunState>, json: bool) -> Slash {
    let Some(command) = line.trim().strip_prefix('/') else {
        return Slash::NotOne;
    };
    let say = |text: &str| {
        if json {
            eprintln!("{}", crate::shown(text));
        } else {
            outln!("{text}");
        }
    };
    let name = command.split_whitespace().next().unwrap_or("");
    match name {
        "exit" | "quit" => return Slash::Exit,
        "help" => say(SLASH_HELP),
        "cost" => match state {
            Some(s) => say(&format!(
                "this session: {} input and {} output tokens over {} model turn(s), ${:.4}",
                s.usage.input_tokens, s.usage.output_tokens, s.turns, s.usage.cost_usd
            )),
            None => say("nothing spent yet"),
        },
        "explain" => say(&explain(state)),
        "profile" => {
            for p in host.profiles_in_words() {
                say(&format!("{}: {}", p.name, p.confinement));
            }
        }
        "approvals" => match (state, host.records().request_items(false, None)) {
            (Some(s), Ok(items)) => {
                let mine: Vec<_> = items.iter().filter(|i| i.run == s.run).collect();
                if mine.is_empty() {
                    say("no request of this session waits for a person");
                }
                for i in mine {
                    say(&format!(
                        "{} {} {}: {}",
                        i.id,
                        i.kind,
                        i.status,
                        i.title.as_deref().unwrap_or("")
                    ));
                }
            }
            (None, _) => say("no request of this session waits for a person"),
            (_, Err(e)) => say(&format!("error[{}]: {}", e.code, e.message)),
        },
        "audit" => match state.map(|s| host.records().touched(&s.run)) {
            None => say("nothing touched yet"),
            Some(Ok(t)) => {
                if t.touched.is_empty() {
                    say("nothing touched yet");
                }
                for (kind, rows) in &t.touched {
                    for r in rows {
                        say(&format!(
                            "{kind:<6} {:<8} {:<10} {}  (by {})",
                            r.verb, r.status, r.resource, r.by
                        ));
                    }
                }
            }
            Some(Err(e)) => say(&format!("error[{}]: {}", e.code, e.message)),
        },
        other => say(&format!(
            "unknown command /{other}; the commands are:\n{SLASH_HELP}"
        )),
    }
    Slash::Done
}

/// The decisions of the session's latest decided call, with their reasons.
fn explain(state: Option<&RunState>) -> String {
    let Some(call) = state.and_then(|s| s.calls.iter().rev().find(|c| !c.decisions.is_empty()))
    else {
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

pub fn chat(ws: Option<&Path>, args: ChatArgs) -> Result<u8, Failure> {
    // A resumed session talks to the model its log names.
    let model = args
        .model
        .clone()
        .or_else(|| args.resume.as_ref().map(|_| String::new()))
        .or_else(|| std::env::var("WARRANT_MODEL").ok())
        .or_else(|| warrant_host::runs::configured_model(&crate::at(ws)))
        .ok_or_else(|| {
            Failure::usage(
                "W-SESSION-004",
                "no model for the session: pass --model PROVIDER:MODEL (e.g. openai:gpt-4.1), configure one with `warrant configure`, or set WARRANT_MODEL",
            )
        })?;
    let host = Host::open(&crate::at(ws), crate::notices())?;
    let deadline = warrant_host::runs::deadline_from(args.deadline.as_deref())?;
    let resume = args
        .resume
        .as_deref()
        .map(warrant_host::runs::parse_run)
        .transpose()?;
    let terminal = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let interrupt = Arc::new(AtomicBool::new(false));
    // Ctrl-C while a model call or an effect runs stops that, not the session (the terminal's
    // line editor takes Ctrl-C itself while it reads a line).
    if terminal {
        let _ = signal_hook::flag::register(signal_hook::consts::SIGINT, interrupt.clone());
    }
    let status = Status::default();
    let printer = ChatPrinter {
        printer: Printer::new(args.json),
        status: (terminal && !args.json).then(|| status.clone()),
        terminal,
        partial: RefCell::new(String::new()),
        streaming: std::cell::Cell::new(false),
    };
    let principal = host.identity.principal.clone();
    let may_prompt = principal.kind != PrincipalKind::Agent
        && match args.prompt.as_str() {
            "always" => true,
            "never" => false,
            _ => terminal && std::io::stderr().is_terminal(),
        };
    let request = ChatRequest {
        model,
        history_tokens: args.history_tokens,
        deadline,
        resume,
    };
    let stop_spinner = Arc::new(AtomicBool::new(false));
    let chatted = if terminal {
        if let Err(e) = rustyline::DefaultEditor::new() {
            return Err(Failure::usage(
                "W-SESSION-005",
                format!("the terminal's line editor could not start: {e}"),
            ));
        }
        if !args.json {
            let spinner = {
                let (status, stop) = (status.clone(), stop_spinner.clone());
                std::thread::spawn(move || spin(status, stop))
            };
            drop(spinner);
        }
        eprintln!(
            "warrant chat with {}: /help lists the commands, /exit ends",
            request.model
        );
        let mut inbox = TerminalInbox {
            history: Vec::new(),
            status: status.clone(),
            interrupt: interrupt.clone(),
        };
        let mut prompter: Box<dyn Prompter> = if may_prompt {
            Box::new(Spinning {
                inner: TerminalPrompter {
                    input: std::io::stdin().lock(),
                    principal,
                },
                status: status.clone(),
            })
        } else {
            Box::new(NoPrompter)
        };
        host.chat(request, &printer, prompter.as_mut(), &mut inbox, interrupt)
    } else {
        let lines = SharedLines(Rc::new(RefCell::new(Box::new(std::io::BufReader::new(
            std::io::stdin(),
        )))));
        let mut inbox = StdinInbox {
            lines: lines.clone(),
            json: args.json,
        };
        let mut prompter: Box<dyn Prompter> = if may_prompt {
            Box::new(TerminalPrompter {
                input: lines,
                principal,
            })
        } else {
            Box::new(NoPrompter)
        };
        host.chat(request, &printer, prompter.as_mut(), &mut inbox, interrupt)
    };
    stop_spinner.store(true, Ordering::SeqCst);
    status.set(None);
    let chatted = chatted?;
    let Some(run) = chatted.run else {
        return Ok(0);
    };
    if let RunExit::Parked { request } = &chatted.exit {
        eprintln!("parked: {request}");
    }
    if !args.json {
        match &chatted.exit {
            RunExit::Completed => outln!("session {run} ended"),
            RunExit::Failed { code, message } => {
                outln!("session {run} failed [{code}]: {message}")
            }
            RunExit::Stopped { reason } => {
                outln!("session {run} stopped by governance: {reason}")
            }
            RunExit::Parked { request } => {
                outln!("session {run} parked: request {request} waits for a person");
                outln!("  then continue with: warrant chat --resume {run}");
            }
            RunExit::Superseded { message } => outln!("session {run}: {message}"),
            RunExit::AwaitingMessage => {
                outln!("session {run} waits for your next message: warrant chat --resume {run}")
            }
        }
    }
    Ok(chatted.exit.code() as u8)
}

/// The approval prompt with the spinner hidden while it asks.
struct Spinning<P> {
    inner: P,
    status: Status,
}

impl<P: Prompter> Prompter for Spinning<P> {
    fn ask(
        &mut self,
        view: &warrant_kernel::PromptView<'_>,
    ) -> Option<(warrant_kernel::Answer, warrant_core::Principal)> {
        self.status.set(None);
        let answer = self.inner.ask(view);
        self.status.set(Some("working (Ctrl-C stops)".to_owned()));
        answer
    }
}
