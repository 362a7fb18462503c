//! `warrant catalog list [PATH]` and `warrant catalog describe TABLE`: a person reads the
//! configured data catalogs, each read performed through the ring by `warrant-host` (policy
//! decides which namespaces they see; recorded as a run of its own).

use std::path::Path;

use clap::Subcommand;
use warrant_host::Host;
use warrant_kernel::NoPrompter;
use warrant_text::features::catalog as words;

use crate::{Failure, pretty};

#[derive(Subcommand, Debug)]
pub enum CatalogCommand {
    /// Without PATH, every configured catalog's top-level namespaces; with a dotted PATH
    /// (`CATALOG.NS.CHILD`, `\.` for a dot inside a name), its child namespaces and tables.
    List {
        path: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// One table (`CATALOG.NS.TABLE`): columns, partitioning, properties, current snapshot.
    Describe {
        table: String,
        #[arg(long)]
        json: bool,
    },
}

pub fn dispatch(ws: Option<&Path>, command: CatalogCommand) -> Result<u8, Failure> {
    let host = Host::open(&crate::at(ws), crate::notices())?;
    let (op, json, words): (_, _, fn(&serde_json::Value) -> Vec<String>) = match command {
        CatalogCommand::List { path, json } => (
            host.catalog_list(path.as_deref(), &mut NoPrompter)?,
            json,
            words::listed,
        ),
        CatalogCommand::Describe { table, json } => (
            host.catalog_describe(&table, &mut NoPrompter)?,
            json,
            words::described,
        ),
    };
    if json {
        outln!("{}", pretty(&op));
    }
    for line in words(&op.result).into_iter().filter(|_| !json) {
        outln!("{line}");
    }
    Ok(0)
}
