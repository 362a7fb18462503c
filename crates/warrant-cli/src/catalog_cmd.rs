//! `warrant catalog list [PATH]` and `warrant catalog describe TABLE`: a person reads the
//! configured data catalogs, each read performed through the ring by `warrant-host` (policy
//! decides which namespaces they see; recorded as a run of its own).

use std::path::Path;

use clap::Subcommand;
use serde_json::Value;
use warrant_host::Host;
use warrant_kernel::NoPrompter;

use crate::{Failure, pretty, shown_inline};

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
    match command {
        CatalogCommand::List { path, json } => {
            let op = host.catalog_list(path.as_deref(), &mut NoPrompter)?;
            if json {
                outln!(
                    "{}",
                    pretty(&serde_json::json!({"run": op.run, "result": op.result}))
                );
                return Ok(0);
            }
            for listed in op.result["listed"].as_array().into_iter().flatten() {
                outln!("{}", shown_inline(text(&listed["path"])));
                let names = |key: &str| listed[key].as_array().cloned().unwrap_or_default();
                for ns in names("namespaces") {
                    outln!("  namespace  {}", shown_inline(text(&ns)));
                }
                for t in names("tables") {
                    outln!("  table      {}", shown_inline(text(&t)));
                }
                if let Some(more) = listed["truncated"].as_str() {
                    outln!("  (truncated: {more})");
                }
            }
        }
        CatalogCommand::Describe { table, json } => {
            let op = host.catalog_describe(&table, &mut NoPrompter)?;
            if json {
                outln!(
                    "{}",
                    pretty(&serde_json::json!({"run": op.run, "result": op.result}))
                );
                return Ok(0);
            }
            for t in op.result["tables"].as_array().into_iter().flatten() {
                describe(t);
            }
        }
    }
    Ok(0)
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

fn describe(t: &Value) {
    outln!("table     {}", shown_inline(text(&t["table"])));
    outln!("location  {}", shown_inline(text(&t["location"])));
    outln!("format    v{}", t["format_version"]);
    outln!("columns");
    for c in t["schema"]["columns"].as_array().into_iter().flatten() {
        let ty = c["type"]
            .as_str()
            .map_or_else(|| c["type"].to_string(), str::to_owned);
        outln!(
            "  {:>3}  {}  {}{}",
            c["id"].as_i64().unwrap_or_default(),
            shown_inline(text(&c["name"])),
            shown_inline(&ty),
            if c["required"].as_bool() == Some(true) {
                "  required"
            } else {
                ""
            }
        );
    }
    let spec = t["partition_spec"]["fields"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if spec.is_empty() {
        outln!("partitioned  no");
    } else {
        for f in spec {
            outln!(
                "partitioned  {} = {}({})",
                shown_inline(text(&f["name"])),
                shown_inline(text(&f["transform"])),
                shown_inline(text(&f["source"]))
            );
        }
    }
    if let Some(props) = t["properties"].as_object() {
        for (k, v) in props {
            outln!("property  {} = {}", shown_inline(k), shown_inline(text(v)));
        }
    }
    match t["current_snapshot"].as_object() {
        None => outln!("snapshot  none"),
        Some(s) => {
            outln!("snapshot  {} at {} ms", s["snapshot_id"], s["timestamp_ms"]);
            if let Some(summary) = s["summary"].as_object() {
                for (k, v) in summary {
                    outln!("  {} = {}", shown_inline(k), shown_inline(text(v)));
                }
            }
        }
    }
}
