//! `warrant audit …`: the application layer's audit views, printed as `warrant-text` words
//! them.

use std::path::Path;

use clap::Subcommand;
use warrant_host::drive::{duration_arg, time_arg};
use warrant_host::records::{self, Opened};
use warrant_store::SealedRecord;
use warrant_text::ops::audit as words;

use crate::{Failure, emit, lines};

#[derive(Subcommand, Debug)]
pub enum KeysCommand {
    /// Make a new signing key; the old public key is kept so history still verifies.
    Rotate,
    /// Print every public key (current and retired) for an outside auditor.
    Export,
}

#[derive(Subcommand, Debug)]
pub enum AuditCommand {
    /// Check the hash chain and signatures of the store's trail and of the JSONL sink.
    Verify {
        /// Verify this JSONL file only (a sink's copy).
        #[arg(long)]
        file: Option<std::path::PathBuf>,
        /// Public keys to verify with (one hex key per line); default: the installation's.
        #[arg(long)]
        pubkeys: Option<std::path::PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Each sink: records pending, oldest pending, last success, last error.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Deliver everything now; exits non-zero naming each sink that is stuck.
    Flush {
        /// Give up after this long (e.g. `30s`).
        #[arg(long, default_value = "30s")]
        timeout: String,
        #[arg(long)]
        json: bool,
    },
    /// Deliver the outbox to every sink once, or keep delivering (`--follow`): the delivery
    /// worker for installations where runs are short-lived processes.
    Deliver {
        #[arg(long)]
        follow: bool,
        /// Between deliveries with `--follow`.
        #[arg(long, default_value = "5s")]
        interval: String,
    },
    /// Find records: every filter narrows.
    Query {
        #[arg(long)]
        run: Option<String>,
        #[arg(long)]
        actor: Option<String>,
        #[arg(long)]
        on_behalf_of: Option<String>,
        /// Resource kind: fs, shell, git, …
        #[arg(long)]
        kind: Option<String>,
        /// e.g. fs.delete
        #[arg(long)]
        verb: Option<String>,
        /// allow, ask or deny
        #[arg(long, value_parser = ["allow", "ask", "deny"])]
        decision: Option<String>,
        /// RFC 3339 time, e.g. 2026-11-29T00:00:00Z
        #[arg(long)]
        since: Option<String>,
        #[arg(long)]
        until: Option<String>,
        #[arg(long, default_value_t = 1000)]
        limit: usize,
        #[arg(long)]
        json: bool,
    },
    /// Every resource a run read, changed or was refused, by kind, with who allowed each change.
    Touched {
        run: String,
        #[arg(long)]
        json: bool,
    },
    /// The signing keys.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// Attempts to reach another tenant's runs or requests: made by this tenant, or on its
    /// records (each was answered as "does not exist").
    Refusals {
        #[arg(long)]
        json: bool,
    },
    /// Print the last records of the trail.
    Tail {
        #[arg(short = 'n', long, default_value_t = 20)]
        lines: usize,
        #[arg(long)]
        json: bool,
    },
}

fn open(ws: Option<&Path>) -> Result<Opened, Failure> {
    Ok(records::open(&crate::at(ws), crate::notices())?)
}

pub fn dispatch(ws: Option<&Path>, command: AuditCommand) -> Result<u8, Failure> {
    match command {
        AuditCommand::Verify {
            file,
            pubkeys,
            json,
        } => {
            let verified = match (file.as_deref(), pubkeys.as_deref()) {
                // An auditor outside the team needs only the file and the public keys.
                (Some(file), Some(pk)) => warrant_host::verify::verify_alone(file, pk)?,
                (file, pk) => open(ws)?.records().verify(file, pk)?,
            };
            emit(json, &verified, words::verified);
            return Ok(if verified.ok { 0 } else { 1 });
        }
        AuditCommand::Tail { lines, json } => {
            print_records(&open(ws)?.records().tail(lines)?, json)
        }
        AuditCommand::Refusals { json } => {
            let view = open(ws)?.records().tenant_refusals()?;
            emit(json, &view, words::refusals);
            if !json {
                eprintln!("{} refusal(s)", view.refusals.len());
            }
        }
        AuditCommand::Status { json } => {
            emit(json, &open(ws)?.records().audit_status()?, words::status)
        }
        AuditCommand::Deliver { follow, interval } => {
            let every = duration_arg("interval", &interval, "5s")?;
            let opened = open(ws)?;
            loop {
                let (head, delivered) = opened.records().deliver_once()?;
                lines(delivered.iter().map(|d| words::delivered(d, head)));
                if !follow {
                    return Ok(u8::from(delivered.iter().any(|d| d.outcome.is_err())));
                }
                std::thread::sleep(every);
            }
        }
        AuditCommand::Flush { timeout, json } => {
            let limit = duration_arg("timeout", &timeout, "30s")?;
            let flushed = open(ws)?.records().flush(limit)?;
            if json {
                outln!("{}", serde_json::to_string(&flushed).unwrap_or_default());
            }
            if !flushed.flushed {
                for line in words::flushed(&flushed) {
                    eprintln!("{line}");
                }
                let message = words::flush_gave_up(&flushed, &timeout);
                return Err(Failure {
                    code: "W-CLI-005".to_owned(),
                    message,
                    exit: 1,
                });
            } else if !json {
                lines(words::flushed(&flushed));
            }
        }
        AuditCommand::Query {
            run,
            actor,
            on_behalf_of,
            kind,
            verb,
            decision,
            since,
            until,
            limit,
            json,
        } => {
            let query = warrant_store::AuditQuery {
                run,
                actor,
                on_behalf_of,
                kind,
                verb,
                decision,
                since: time_arg("since", since.as_deref())?,
                until: time_arg("until", until.as_deref())?,
                limit,
            };
            let records = open(ws)?.records().query(&query)?;
            print_records(&records, json);
            if !json {
                eprintln!("{} record(s)", records.len());
            }
        }
        AuditCommand::Touched { run, json } => {
            let run = warrant_host::runs::parse_run(&run)?;
            emit(json, &open(ws)?.records().touched(&run)?, words::touched);
        }
        AuditCommand::Keys {
            command: KeysCommand::Rotate,
        } => {
            let r = records::rotate_audit_key(&crate::at(ws))?;
            lines([words::rotated(&r.old_kid, &r.new_kid)]);
        }
        AuditCommand::Keys {
            command: KeysCommand::Export,
        } => {
            use std::io::Write as _;
            let keys = records::audit_public_keys(&crate::at(ws))?;
            let _ = std::io::stdout()
                .lock()
                .write_all(keys.to_file_text().as_bytes());
        }
    }
    Ok(0)
}

/// Records as the JSON lines they are with `--json`, else as table rows.
fn print_records(records: &[SealedRecord], json: bool) {
    for r in records {
        if json {
            outln!("{}", r.line);
        } else {
            outln!("{}", words::record(r));
        }
    }
}
