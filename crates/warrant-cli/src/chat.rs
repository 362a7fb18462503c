//! `warrant chat`: a session with the agent. On a terminal: a line editor with history, the
//! approval prompt inline, slash commands, a spinner with the current step, and Ctrl-C that stops
//! the current model call or effect and keeps the session. Without a terminal: one message per
//! line of standard input, ending at its end; `--json` prints the events as JSON lines. The
//! session and what a slash command means are the application layer's (`warrant_host::chat`);
//! the words are `warrant_text`'s. What stays here is the terminal.

use std::cell::RefCell;
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use warrant_agent::RunExit;
use warrant_host::Host;
use warrant_host::chat::{ChatRequest, Inbox, Incoming, Slash};
use warrant_kernel::{NoPrompter, Observer, Prompter, RunEvent, RunState};
use warrant_store::StoredEvent;
use warrant_text::features::chat::{self as words, Echo, Shown};

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
        self.0.borrow_mut().next_line()
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
        // Held while `f` prints, so the spinner does not draw in the middle of it.
        let held = self.0.lock();
        if held.as_ref().is_ok_and(|s| s.is_some()) {
            clear_line();
        }
        f();
        drop(held);
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
            let frame = FRAMES[i % FRAMES.len()];
            let _ = write!(err, "\r\u{1b}[2K{frame} {}", crate::shown_inline(step));
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
    /// What was printed of the answer streaming now (each line once complete, so it goes
    /// through the renderer whole).
    echo: RefCell<Echo>,
}

impl ChatPrinter {
    fn around(&self, print: impl FnOnce()) {
        match &self.status {
            Some(status) => status.around(print),
            None => print(),
        }
    }
}

impl Observer for ChatPrinter {
    fn streamed(&self, text: &str) {
        // JSON lines carry events only; the answer is in `model_responded`.
        if !self.printer.json {
            for line in self.echo.borrow_mut().streamed(text) {
                self.around(|| outln!("{line}"));
            }
        }
    }

    fn committed(&self, stored: &StoredEvent, event: &RunEvent) {
        let json = self.printer.json;
        let (rest, shown) = self.echo.borrow_mut().committed(event, json, self.terminal);
        for line in rest {
            self.around(|| outln!("{line}"));
        }
        self.around(|| match &shown {
            Shown::AfterText => self.printer.print_after_text(stored, event),
            Shown::Whole => self.printer.print(stored, event),
            Shown::Neutralized(line) => outln!("{line}"),
            Shown::Nothing => {}
        });
        if let Some(status) = &self.status {
            status.set(words::step_after(event));
        }
    }
}

/// Runs a slash command (`Some(true)`: it ends the session); `None` when `line` is a message.
/// Its answer goes to standard output (standard error with `--json`, which keeps standard
/// output for events).
fn slash(line: &str, host: &Host, state: Option<&RunState>, json: bool) -> Option<bool> {
    let slash = host.slash(line, state)?;
    for line in words::slash(&slash) {
        if json {
            eprintln!("{}", crate::shown(&line));
        } else {
            outln!("{line}");
        }
    }
    Some(matches!(slash, Slash::Exit))
}

/// The session's messages from standard input, a line each (slash commands included).
struct StdinInbox {
    lines: SharedLines,
    json: bool,
}

impl Inbox for StdinInbox {
    fn next(&mut self, host: &Host, state: Option<&RunState>) -> Incoming {
        while let Some(line) = self.lines.next_line() {
            let line = line.trim_end_matches(['\n', '\r']).to_owned();
            if line.trim().is_empty() {
                continue;
            }
            match slash(&line, host, state, self.json) {
                None => return Incoming::Message(line),
                Some(true) => return Incoming::End,
                Some(false) => {}
            }
        }
        Incoming::End
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
                Ok(line) if line.trim().is_empty() => {}
                Ok(line) => {
                    let _ = editor.add_history_entry(line.as_str());
                    self.history.push(line.clone());
                    match slash(&line, host, state, false) {
                        None => {
                            self.interrupt.store(false, Ordering::SeqCst);
                            self.status.set(Some(words::THINKING.to_owned()));
                            return Incoming::Message(line);
                        }
                        Some(true) => return Incoming::End,
                        Some(false) => {}
                    }
                }
                Err(rustyline::error::ReadlineError::Interrupted) => {
                    eprintln!("{}", words::NOTHING_RUNNING);
                }
                Err(_) => return Incoming::End,
            }
        }
    }
}

pub fn chat(ws: Option<&Path>, args: ChatArgs) -> Result<u8, Failure> {
    let at = crate::at(ws);
    let model = warrant_host::chat::model_for(&at, args.model, args.resume.is_some())
        .ok_or_else(|| Failure::usage("W-SESSION-004", words::NO_MODEL))?;
    let host = Host::open(&at, crate::notices())?;
    let deadline = warrant_host::runs::deadline_from(args.deadline.as_deref())?;
    let resume = args.resume.as_deref();
    let resume = resume.map(warrant_host::runs::parse_run).transpose()?;
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
        echo: RefCell::default(),
    };
    let principal = host.identity.principal.clone();
    let asks_here = terminal && std::io::stderr().is_terminal();
    let may_prompt = warrant_host::chat::may_prompt(principal.kind, &args.prompt, asks_here);
    let request = ChatRequest {
        model,
        history_tokens: args.history_tokens,
        deadline,
        resume,
    };
    let stop_spinner = Arc::new(AtomicBool::new(false));
    let chatted = if terminal {
        if let Err(e) = rustyline::DefaultEditor::new() {
            let why = format!("the terminal's line editor could not start: {e}");
            return Err(Failure::usage("W-SESSION-005", why));
        }
        if !args.json {
            let (status, stop) = (status.clone(), stop_spinner.clone());
            drop(std::thread::spawn(move || spin(status, stop)));
        }
        eprintln!("{}", words::greeting(&request.model));
        let mut inbox = TerminalInbox {
            history: Vec::new(),
            status: status.clone(),
            interrupt: interrupt.clone(),
        };
        let mut prompter: Box<dyn Prompter> = if may_prompt {
            let input = std::io::stdin().lock();
            let inner = TerminalPrompter { input, principal };
            let status = status.clone();
            Box::new(Spinning { inner, status })
        } else {
            Box::new(NoPrompter)
        };
        host.chat(request, &printer, prompter.as_mut(), &mut inbox, interrupt)
    } else {
        let stdin: Box<dyn BufRead> = Box::new(std::io::BufReader::new(std::io::stdin()));
        let lines = SharedLines(Rc::new(RefCell::new(stdin)));
        let json = args.json;
        let mut inbox = StdinInbox {
            lines: lines.clone(),
            json,
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
        outln!("{}", words::ended(&run, &chatted.exit));
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
        self.status.set(Some(words::WORKING.to_owned()));
        answer
    }
}
