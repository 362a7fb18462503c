//! `warrant requests …`: what the agent asked of people (questions, secrets, resources) and
//! the approvals waiting, listed for me, my teams or the administrators; answering, providing
//! a secret (read from standard input, hidden on a terminal), connecting a resource, declining;
//! and export as AAIS 1.0 documents. The operations are the application layer's; this reads
//! the secret from the terminal and prints.

use std::io::{IsTerminal, Read as _, Write as _};
use std::path::Path;

use clap::Subcommand;
use warrant_host::approvals::parse_request;
use warrant_host::request_views::RequestView;
use warrant_host::requests::{Connection, Replied};
use warrant_host::{Host, HostError};
use warrant_kernel::Ask;

use crate::{Failure, pretty};

#[derive(Subcommand, Debug)]
pub enum RequestsCommand {
    /// What is asked of people: questions, secrets, resources, approvals.
    List {
        /// Only what is asked of me, of my teams, or (with the `admin` role) of the administrators.
        #[arg(long)]
        mine: bool,
        /// Include answered and expired requests.
        #[arg(long)]
        all: bool,
        #[arg(long)]
        json: bool,
    },
    /// One request in full.
    Show {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Answer a question: choose one of its options, or give free text.
    ///
    /// An MCP server's elicitation is answered with `--text` holding a JSON object of its
    /// fields (`{}` takes every default).
    Answer {
        id: String,
        /// The number of the option (1 = the first).
        #[arg(long, conflicts_with = "text")]
        option: Option<u32>,
        /// Free text; for an elicitation, a JSON object of the requested fields.
        #[arg(long)]
        text: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Provide a requested secret. The value is read from standard input (hidden on a
    /// terminal), never from an argument, and stored encrypted; the agent sees only its handle.
    Provide {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Connect a requested resource. Warrant checks it first: an endpoint must answer HTTP, an
    /// MCP server must answer `initialize`. Name it with `--url` / `--command`, or take what the
    /// agent proposed with `--use-proposed` (never implied: checking it starts the command or
    /// sends the request from this machine).
    Connect {
        id: String,
        #[arg(long, conflicts_with = "use_proposed")]
        url: Option<String>,
        /// The command that starts the MCP server, as separate arguments after `--command`.
        #[arg(long, num_args = 1.., allow_hyphen_values = true, conflicts_with = "use_proposed")]
        command: Option<Vec<String>>,
        /// Check (and connect) the url or command the agent proposed, as `requests show` prints it.
        #[arg(long)]
        use_proposed: bool,
        /// How long the check may take.
        #[arg(long, default_value = "10s")]
        timeout: String,
        #[arg(long)]
        json: bool,
    },
    /// Decline a request; the agent is told the reason.
    Decline {
        id: String,
        #[arg(long)]
        reason: String,
        #[arg(long)]
        json: bool,
    },
    /// Export approval requests and their decisions as JSON documents of an interchange format.
    Export {
        /// One request (default: every approval request).
        id: Option<String>,
        #[arg(long, value_parser = ["aais"], default_value = "aais")]
        format: String,
    },
}

fn load(ws: Option<&Path>) -> Result<Host, Failure> {
    Ok(Host::open(&crate::at(ws), crate::notices())?)
}

pub fn dispatch(ws: Option<&Path>, command: RequestsCommand) -> Result<u8, Failure> {
    match command {
        RequestsCommand::List { mine, all, json } => list(ws, mine, all, json),
        RequestsCommand::Show { id, json } => show(ws, &id, json),
        RequestsCommand::Answer {
            id,
            option,
            text,
            json,
        } => {
            let request = parse_request(&id)?;
            let replied = load(ws)?.answer_question(&request, option, text)?;
            Ok(print_replied(&replied, json))
        }
        RequestsCommand::Provide { id, json } => {
            let request = parse_request(&id)?;
            let replied = load(ws)?.provide_secret(&request, read_secret)?;
            Ok(print_replied(&replied, json))
        }
        RequestsCommand::Connect {
            id,
            url,
            command,
            use_proposed,
            timeout,
            json,
        } => {
            let request = parse_request(&id)?;
            let timeout = warrant_host::drive::duration_arg("timeout", &timeout, "500ms, 10s")?;
            let with = Connection {
                url,
                command,
                use_proposed,
                timeout,
            };
            let replied = load(ws)?.connect(&request, with)?;
            Ok(print_replied(&replied, json))
        }
        RequestsCommand::Decline { id, reason, json } => {
            let request = parse_request(&id)?;
            let replied = load(ws)?.decline(&request, reason)?;
            Ok(print_replied(&replied, json))
        }
        RequestsCommand::Export { id, format: _ } => {
            let id = id.as_deref().map(parse_request).transpose()?;
            for doc in load(ws)?.export_aais(id.as_ref())? {
                outln!("{doc}");
            }
            Ok(0)
        }
    }
}

fn print_replied(r: &Replied, json: bool) -> u8 {
    if json {
        outln!("{}", pretty(r));
    } else {
        outln!(
            "{}: {} by {}; continue the run with: warrant resume {}",
            r.reply,
            r.request,
            r.by,
            r.run
        );
    }
    0
}

fn list(ws: Option<&Path>, mine: bool, all: bool, json: bool) -> Result<u8, Failure> {
    let (me, items) =
        warrant_host::request_views::list(&crate::at(ws), crate::notices(), all, mine)?;
    if json {
        outln!("{}", pretty(&serde_json::json!({ "requests": items })));
        return Ok(0);
    }
    if items.is_empty() {
        let whose = if mine {
            format!(" for {me} (or your teams)")
        } else {
            String::new()
        };
        outln!("no {}requests{whose}", if all { "" } else { "open " });
    }
    for r in &items {
        outln!(
            "{}  {:<9} {:<8} run {}  {}  (asked by {}; of {})",
            r.id,
            r.kind,
            r.status,
            r.run,
            crate::shown_inline(r.title_text()),
            r.requested_by_text(),
            r.asked_of.join(", "),
        );
    }
    Ok(0)
}

fn show(ws: Option<&Path>, id: &str, json: bool) -> Result<u8, Failure> {
    let request = parse_request(id)?;
    let shown = load(ws)?.show_request(&request)?;
    let view = &shown.view;
    if json {
        outln!("{}", pretty(view));
        return Ok(0);
    }
    outln!("request {}  ({}, {})", request, view.kind(), view.status());
    outln!("  run        {}", shown.state.run);
    outln!("  asked by   {}", view.requested_by());
    outln!("  what       {}", crate::shown_inline(view.title()));
    let asked_of = match view {
        RequestView::Asked(a) => Some(a.asked_of.clone()),
        RequestView::Summary(v) => v.get("asked_of").and_then(|v| v.as_array()).map(|l| {
            l.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        }),
        RequestView::Approval(_) => None,
    };
    if let Some(of) = asked_of {
        outln!("  asked of   {}", of.join(", "));
    }
    if !view.expires_at().is_empty() {
        outln!("  expires    {}", view.expires_at());
    }
    if let RequestView::Asked(a) = view {
        if let Ask::Question { options, .. } = &a.ask {
            for (i, o) in options.iter().enumerate() {
                outln!("  option {}   {o}", i + 1);
            }
        }
        // An elicitation: the server's words, fenced as untrusted, and the fields it asks for.
        for detail in a.ask.details() {
            for line in detail.lines() {
                outln!("  {}", crate::shown_inline(line));
            }
        }
        if let Some(r) = &a.reply {
            outln!("  reply      {} by {}", r.reply.label(), r.by.actor);
        }
    }
    if !view.body().is_empty() {
        outln!("{}", view.body());
    }
    Ok(0)
}

/// Reads the secret: hidden from a terminal, else all of standard input (one trailing newline
/// dropped). Never from an argument or the environment.
fn read_secret(name: &str) -> Result<Vec<u8>, HostError> {
    let unreadable = |e: std::io::Error| {
        HostError::usage(
            "W-REQUEST-006",
            format!("cannot read the value of secret {name} from standard input: {e}"),
        )
    };
    let mut value = if std::io::stdin().is_terminal() {
        read_hidden(&format!("value of secret {name} (not shown): ")).map_err(unreadable)?
    } else {
        let mut buf = Vec::new();
        std::io::stdin()
            .lock()
            .read_to_end(&mut buf)
            .map_err(unreadable)?;
        if buf.ends_with(b"\n") {
            buf.pop();
            if buf.ends_with(b"\r") {
                buf.pop();
            }
        }
        buf
    };
    if value.is_empty() {
        value.clear();
        return Err(HostError::usage(
            "W-REQUEST-006",
            format!(
                "the value of secret {name} is empty; pipe it on standard input or type it at the prompt"
            ),
        ));
    }
    Ok(value)
}

/// Reads one line from the controlling terminal with echo off. Echo is switched off before
/// the prompt is written, so nothing typed after the prompt appears, and restored afterwards
/// (also when reading fails).
pub(crate) fn read_hidden(prompt: &str) -> std::io::Result<Vec<u8>> {
    use rustix::termios::{LocalModes, OptionalActions, tcgetattr, tcsetattr};
    let mut tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")?;
    let saved = tcgetattr(&tty)?;
    let mut quiet = saved.clone();
    quiet.local_modes.remove(LocalModes::ECHO);
    quiet.local_modes.insert(LocalModes::ECHONL);
    tcsetattr(&tty, OptionalActions::Flush, &quiet)?;
    let read = (|| -> std::io::Result<Vec<u8>> {
        tty.write_all(prompt.as_bytes())?;
        tty.flush()?;
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        loop {
            match std::io::Read::read(&mut tty, &mut byte)? {
                0 => break,
                _ if byte[0] == b'\n' => break,
                _ => line.push(byte[0]),
            }
        }
        if line.ends_with(b"\r") {
            line.pop();
        }
        Ok(line)
    })();
    let restored = tcsetattr(&tty, OptionalActions::Now, &saved);
    let line = read?;
    restored?;
    Ok(line)
}
