//! `warrant memory list|search|show|forget|retract` and `warrant memory drafts
//! list|show|publish|reject`: reading the workspace's memory, and a person's operations on it
//! (each performed through the ring by `warrant-host`, recorded as a run of its own).

use std::path::Path;

use clap::Subcommand;
use warrant_host::Host;
use warrant_kernel::NoPrompter;
use warrant_memory::{Draft, Entry};

use crate::{Failure, pretty, shown_inline};

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

fn load(ws: Option<&Path>) -> Result<Host, Failure> {
    Ok(Host::open(&crate::at(ws), crate::notices())?)
}

pub fn dispatch(ws: Option<&Path>, command: MemoryCommand) -> Result<u8, Failure> {
    let host = load(ws)?;
    match command {
        MemoryCommand::List {
            namespace,
            limit,
            json,
        } => {
            let entries = host.memory_list(namespace.as_deref(), limit)?;
            if json {
                outln!("{}", pretty(&entries));
            } else if entries.is_empty() {
                outln!("no memory entries");
            } else {
                entries.iter().for_each(entry_line);
            }
        }
        MemoryCommand::Search {
            query,
            namespace,
            limit,
            json,
        } => {
            let found = host.memory_search(&query, namespace.as_deref(), limit)?;
            if json {
                outln!("{}", pretty(&found));
            } else if found.is_empty() {
                outln!("nothing found");
            } else {
                found.iter().for_each(|f| entry_line(&f.entry));
            }
        }
        MemoryCommand::Show { id, json } => {
            let entry = host.memory_show(&id)?;
            if json {
                outln!("{}", pretty(&entry));
            } else {
                entry_detail(&entry);
            }
        }
        MemoryCommand::Forget { id, json } => {
            let op = host.memory_forget(&id, &mut NoPrompter)?;
            if json {
                outln!(
                    "{}",
                    pretty(&serde_json::json!({"run": op.run, "result": op.result}))
                );
            } else {
                outln!("forgot {id} (recorded in run {})", op.run);
            }
        }
        MemoryCommand::Retract { id, reason, json } => {
            let op = host.memory_retract(&id, &reason, &mut NoPrompter)?;
            if json {
                outln!(
                    "{}",
                    pretty(&serde_json::json!({"run": op.run, "result": op.result}))
                );
            } else {
                outln!("withdrew {id} (recorded in run {})", op.run);
            }
        }
        MemoryCommand::Drafts { command } => drafts(&host, command)?,
    }
    Ok(0)
}

fn drafts(host: &Host, command: DraftsCommand) -> Result<(), Failure> {
    match command {
        DraftsCommand::List { all, json } => {
            let drafts = host.memory_drafts(all)?;
            if json {
                outln!("{}", pretty(&drafts));
            } else if drafts.is_empty() {
                outln!("no drafts waiting for review");
            } else {
                for d in &drafts {
                    outln!(
                        "{}  shared/{}  {:?}  by {}  {}",
                        d.id,
                        d.namespace,
                        d.status,
                        d.provenance.actor,
                        shown_inline(&first_line(&d.text))
                    );
                }
            }
        }
        DraftsCommand::Show { id, json } => {
            let d = host.memory_draft(&id)?;
            if json {
                outln!("{}", pretty(&d));
            } else {
                draft_detail(&d);
            }
        }
        DraftsCommand::Publish {
            id,
            digest,
            reason,
            json,
        } => {
            let op = host.memory_review(&id, &digest, true, &reason, &mut NoPrompter)?;
            if json {
                outln!(
                    "{}",
                    pretty(&serde_json::json!({"run": op.run, "result": op.result}))
                );
            } else {
                outln!("published draft {id} (recorded in run {})", op.run);
            }
        }
        DraftsCommand::Reject {
            id,
            digest,
            reason,
            json,
        } => {
            let op = host.memory_review(&id, &digest, false, &reason, &mut NoPrompter)?;
            if json {
                outln!(
                    "{}",
                    pretty(&serde_json::json!({"run": op.run, "result": op.result}))
                );
            } else {
                outln!("rejected draft {id} (recorded in run {})", op.run);
            }
        }
    }
    Ok(())
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    let cut: String = line.chars().take(80).collect();
    if cut.len() < text.len() {
        format!("{cut}…")
    } else {
        cut
    }
}

fn entry_line(e: &Entry) {
    outln!(
        "{}  {}/{}  {}{}",
        e.id,
        e.scope.as_str(),
        e.namespace,
        if e.provenance.tainted {
            "[tainted] "
        } else {
            ""
        },
        shown_inline(&first_line(&e.text))
    );
}

fn entry_detail(e: &Entry) {
    outln!("entry      {}", e.id);
    outln!("namespace  {}/{}", e.scope.as_str(), e.namespace);
    outln!("written    {} by {}", e.provenance.at, e.provenance.actor);
    if let Some(p) = &e.provenance.on_behalf_of {
        outln!("for        {p}");
    }
    if let Some(r) = &e.provenance.run {
        outln!("run        {r}");
    }
    if e.provenance.tainted {
        outln!("tainted    the run had seen untrusted content when it wrote this");
    }
    if !e.tags.is_empty() {
        outln!("tags       {}", e.tags.join(", "));
    }
    if let Some(p) = &e.published {
        outln!("published  {p}");
    }
    if let Some(r) = &e.retracted {
        outln!("WITHDRAWN  {r}");
    }
    outln!("digest     {}", e.digest);
    outln!("");
    outln!("{}", e.text);
}

fn draft_detail(d: &Draft) {
    outln!("draft      {}", d.id);
    outln!("namespace  shared/{}", d.namespace);
    outln!("status     {:?}", d.status);
    outln!("proposed   {} by {}", d.provenance.at, d.provenance.actor);
    if let Some(p) = &d.provenance.on_behalf_of {
        outln!("for        {p}");
    }
    if let Some(r) = &d.provenance.run {
        outln!("run        {r}");
    }
    if d.provenance.tainted {
        outln!("tainted    the run had seen untrusted content when it proposed this");
    }
    if !d.tags.is_empty() {
        outln!("tags       {}", d.tags.join(", "));
    }
    if d.current_digest == d.digest {
        outln!("digest     {}", d.digest);
    } else {
        outln!(
            "digest     {} (CHANGED since it was proposed as {}: publishing is refused)",
            d.current_digest,
            d.digest
        );
    }
    if let Some(r) = &d.reviewer {
        outln!(
            "reviewed   by {r}: {}",
            d.reason.clone().unwrap_or_default()
        );
    }
    outln!("");
    outln!("{}", d.text);
}
