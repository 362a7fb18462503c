//! `warrant requests …`: what the agent asked of people (questions, secrets, resources) and
//! the approvals waiting, listed for me, my teams or the administrators; answering, providing
//! a secret (read from standard input, hidden on a terminal), connecting a resource, declining;
//! and export as AAIS 1.0 documents. The operations are the application layer's; this reads
//! the secret from the terminal and prints.

use std::io::{IsTerminal, Read as _, Write as _};
use std::path::Path;

use clap::Subcommand;
use warrant_host::approvals::parse_request;
use warrant_host::request_views;
use warrant_host::requests::Connection;
use warrant_host::{Host, HostError};
use warrant_text::ops::requests as words;

use crate::{Failure, emit};

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
    /// fields (`{}` takes every default). A proposal to change an agent profile is approved
    /// with `--text approve`: Warrant applies it as you, if the profile is still the one it
    /// was made for.
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
    let (replied, json) = match command {
        RequestsCommand::List { mine, all, json } => {
            let at = crate::at(ws);
            let (me, items) = request_views::list(&at, crate::notices(), all, mine)?;
            let view = serde_json::json!({ "requests": items });
            let me = mine.then_some(me.as_str());
            emit(json, &view, |_| words::list(&items, me, all));
            return Ok(0);
        }
        RequestsCommand::Show { id, json } => {
            let request = parse_request(&id)?;
            let shown = load(ws)?.show_request(&request)?;
            emit(json, &shown.view, |_| words::show(&request, &shown));
            return Ok(0);
        }
        RequestsCommand::Answer {
            id,
            option,
            text,
            json,
        } => (
            load(ws)?.answer_question(&parse_request(&id)?, option, text)?,
            json,
        ),
        RequestsCommand::Provide { id, json } => (
            load(ws)?.provide_secret(&parse_request(&id)?, read_secret)?,
            json,
        ),
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
            (load(ws)?.connect(&request, with)?, json)
        }
        RequestsCommand::Decline { id, reason, json } => {
            (load(ws)?.decline(&parse_request(&id)?, reason)?, json)
        }
        RequestsCommand::Export { id, format: _ } => {
            let id = id.as_deref().map(parse_request).transpose()?;
            let docs = load(ws)?.export_aais(id.as_ref())?;
            crate::lines(docs.iter().map(serde_json::Value::to_string));
            return Ok(0);
        }
    };
    emit(json, &replied, |r| vec![words::replied(r)]);
    Ok(0)
}

/// Reads the secret: hidden from a terminal, else all of standard input. Never from an
/// argument or the environment.
fn read_secret(name: &str) -> Result<Vec<u8>, HostError> {
    let read = read_value(&format!("value of secret {name} (not shown): ")).map_err(|e| {
        let message = format!("cannot read the value of secret {name} from standard input: {e}");
        HostError::usage("W-REQUEST-006", message)
    })?;
    warrant_host::requests::secret_value(name, read)
}

/// A value typed at the terminal after `prompt`, not shown; else all of standard input.
pub(crate) fn read_value(prompt: &str) -> std::io::Result<Vec<u8>> {
    if std::io::stdin().is_terminal() {
        return read_hidden(prompt);
    }
    let mut buf = Vec::new();
    std::io::stdin().lock().read_to_end(&mut buf).map(|_| buf)
}

/// Reads one line from the controlling terminal with echo off. Echo is switched off before
/// the prompt is written, so nothing typed after the prompt appears, and restored afterwards
/// (also when reading fails).
fn read_hidden(prompt: &str) -> std::io::Result<Vec<u8>> {
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
