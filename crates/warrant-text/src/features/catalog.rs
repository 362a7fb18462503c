//! The data catalog: a listing and a table's description, from the tool's result (the JSON the
//! agent's `catalog_list` / `catalog_describe` return), every name from the catalog shown
//! inline so a name cannot begin a line that looks like Warrant's own.

use serde_json::Value;
use warrant_host::narrate::inline;

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// `catalog list`: each listed path with its namespaces and tables.
pub fn listed(result: &Value) -> Vec<String> {
    let mut lines = Vec::new();
    for listed in result["listed"].as_array().into_iter().flatten() {
        lines.push(inline(text(&listed["path"])).into_owned());
        let names = |key: &str| listed[key].as_array().cloned().unwrap_or_default();
        for ns in names("namespaces") {
            lines.push(format!("  namespace  {}", inline(text(&ns))));
        }
        for t in names("tables") {
            lines.push(format!("  table      {}", inline(text(&t))));
        }
        if let Some(more) = listed["truncated"].as_str() {
            lines.push(format!("  (truncated: {more})"));
        }
    }
    lines
}

/// `catalog describe`: each table's columns, partitioning, properties, current snapshot.
pub fn described(result: &Value) -> Vec<String> {
    let mut lines = Vec::new();
    for t in result["tables"].as_array().into_iter().flatten() {
        table(t, &mut lines);
    }
    lines
}

fn table(t: &Value, lines: &mut Vec<String>) {
    lines.push(format!("table     {}", inline(text(&t["table"]))));
    lines.push(format!("location  {}", inline(text(&t["location"]))));
    lines.push(format!("format    v{}", t["format_version"]));
    lines.push("columns".to_owned());
    for c in t["schema"]["columns"].as_array().into_iter().flatten() {
        let ty = c["type"]
            .as_str()
            .map_or_else(|| c["type"].to_string(), str::to_owned);
        lines.push(format!(
            "  {:>3}  {}  {}{}",
            c["id"].as_i64().unwrap_or_default(),
            inline(text(&c["name"])),
            inline(&ty),
            if c["required"].as_bool() == Some(true) {
                "  required"
            } else {
                ""
            }
        ));
    }
    let spec = t["partition_spec"]["fields"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if spec.is_empty() {
        lines.push("partitioned  no".to_owned());
    }
    for f in spec {
        lines.push(format!(
            "partitioned  {} = {}({})",
            inline(text(&f["name"])),
            inline(text(&f["transform"])),
            inline(text(&f["source"]))
        ));
    }
    if let Some(props) = t["properties"].as_object() {
        for (k, v) in props {
            lines.push(format!("property  {} = {}", inline(k), inline(text(v))));
        }
    }
    match t["current_snapshot"].as_object() {
        None => lines.push("snapshot  none".to_owned()),
        Some(s) => {
            lines.push(format!(
                "snapshot  {} at {} ms",
                s["snapshot_id"], s["timestamp_ms"]
            ));
            if let Some(summary) = s["summary"].as_object() {
                for (k, v) in summary {
                    lines.push(format!("  {} = {}", inline(k), inline(text(v))));
                }
            }
        }
    }
}
