//! `warrant memory list|search|show|forget|retract` and `warrant memory drafts
//! list|show|publish|reject`: reading the workspace's memory, and a person's operations on it
//! (each performed through the ring by `warrant-host`, recorded as a run of its own).

use std::path::Path;

use clap::Subcommand;
use warrant_host::Host;
use warrant_host::memory::PersonOp;
use warrant_kernel::NoPrompter;
use warrant_text::features::memory::{self as words, Done};

use crate::{Failure, pretty};

#[derive(Subcommand, Debug)]
pub enum MemoryCommand {
    /// The newest entries, of every namespace or of one (`local/NAME`, `shared/NAME`).
    List {
        #[arg(long)]
        namespace: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: u32,
        #[arg(long)]
        json: bool,
    },
    /// Entries matching the words of QUERY, best first (BM25).
    Search {
        query: String,
        /// `local/NAME` (default `local/notes`) or `shared/NAME`.
        #[arg(long)]
        namespace: Option<String>,
        #[arg(long, default_value_t = 10)]
        limit: u32,
        #[arg(long)]
        json: bool,
    },
    /// One entry with its provenance.
    Show {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Forget a local entry (through the ring; recorded as a run of its own).
    Forget {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Withdraw a published entry of shared memory, with a reason (a person only).
    ///
    /// Performed through the ring and recorded as a run of its own; the entry is kept, marked
    /// with who withdrew it and why, and no longer recalled or listed.
    Retract {
        id: String,
        #[arg(long)]
        reason: String,
        #[arg(long)]
        json: bool,
    },
    /// Drafts proposed for shared memory, and their review.
    Drafts {
        #[command(subcommand)]
        command: DraftsCommand,
    },
}

#[derive(Subcommand, Debug)]
pub enum DraftsCommand {
    /// Open drafts (every draft with `--all`).
    List {
        #[arg(long)]
        all: bool,
        #[arg(long)]
        json: bool,
    },
    /// One draft as it reads now, with the digest a review binds to.
    Show {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Publish a draft into its shared namespace. `--digest` is the digest `show` printed: a
    /// draft that changed since is refused. Never by its proposer.
    Publish {
        id: String,
        #[arg(long)]
        digest: String,
        #[arg(long, default_value = "")]
        reason: String,
        #[arg(long)]
        json: bool,
    },
    /// Reject a draft, with a reason.
    Reject {
        id: String,
        #[arg(long)]
        digest: String,
        #[arg(long)]
        reason: String,
        #[arg(long)]
        json: bool,
    },
}

/// Prints a view: as JSON with `--json`, else in its words (shared by the feature commands).
pub(crate) fn say<T: serde::Serialize + ?Sized>(
    json: bool,
    view: &T,
    words: impl Fn(&T) -> String,
) {
    if json {
        outln!("{}", pretty(&view));
    } else {
        outln!("{}", words(view));
    }
}

pub fn dispatch(ws: Option<&Path>, command: MemoryCommand) -> Result<u8, Failure> {
    let host = Host::open(&crate::at(ws), crate::notices())?;
    let np = &mut NoPrompter;
    let done =
        |what, id: &str, op: PersonOp, json| say(json, &op, |o| words::done(what, id, &o.run));
    match command {
        MemoryCommand::List {
            namespace,
            limit,
            json,
        } => {
            let entries = host.memory_list(namespace.as_deref(), limit)?;
            say(json, entries.as_slice(), words::entries);
        }
        MemoryCommand::Search {
            query,
            namespace,
            limit,
            json,
        } => {
            let found = host.memory_search(&query, namespace.as_deref(), limit)?;
            say(json, found.as_slice(), words::found);
        }
        MemoryCommand::Show { id, json } => say(json, &host.memory_show(&id)?, words::entry),
        MemoryCommand::Forget { id, json } => {
            done(Done::Forgot, &id, host.memory_forget(&id, np)?, json)
        }
        MemoryCommand::Retract { id, reason, json } => {
            let op = host.memory_retract(&id, &reason, np)?;
            done(Done::Withdrew, &id, op, json);
        }
        MemoryCommand::Drafts { command } => match command {
            DraftsCommand::List { all, json } => {
                say(json, host.memory_drafts(all)?.as_slice(), words::drafts);
            }
            DraftsCommand::Show { id, json } => say(json, &host.memory_draft(&id)?, words::draft),
            DraftsCommand::Publish {
                id,
                digest,
                reason,
                json,
            } => {
                let op = host.memory_review(&id, &digest, true, &reason, np)?;
                done(Done::Published, &id, op, json);
            }
            DraftsCommand::Reject {
                id,
                digest,
                reason,
                json,
            } => {
                let op = host.memory_review(&id, &digest, false, &reason, np)?;
                done(Done::Rejected, &id, op, json);
            }
        },
    }
    Ok(0)
}
