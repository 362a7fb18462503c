//! The read-only commands that are not audit: `runs list`, `runs show`, `approvals list`,
//! `policy explain` and `doctor`, each a view of the application layer, printed.

use std::path::Path;

use serde_json::{Value, json};
use warrant_host::records::{self, Opened};
use warrant_store::RequestStatus;

use crate::output::Printer;
use crate::{Failure, pretty};

fn open(ws: Option<&Path>) -> Result<Opened, Failure> {
    Ok(records::open(&crate::at(ws), crate::notices())?)
}

pub fn runs_list(ws: Option<&Path>, json: bool) -> Result<u8, Failure> {
    let runs = open(ws)?.records().runs()?;
    if json {
        outln!("{}", pretty(&json!({ "runs": runs })));
        return Ok(0);
    }
    if runs.is_empty() {
        outln!("no runs yet; start one with `warrant run --model scripted:PATH TASK`");
    }
    for r in runs {
        outln!(
            "{}  {:<9}  {}  {:<10}  {:>3} events  {}",
            r.run,
            r.status.as_str(),
            r.created_at.rfc3339(),
            r.actor,
            r.events,
            r.task
        );
    }
    Ok(0)
}

pub fn runs_show(ws: Option<&Path>, run: &str, json: bool) -> Result<u8, Failure> {
    let run = warrant_host::runs::parse_run(run)?;
    let view = open(ws)?.records().run(&run)?;
    if json {
        outln!("{}", pretty(&view));
        return Ok(0);
    }
    let row = &view.run;
    outln!(
        "{}  {}  {} events",
        row.run,
        row.status.as_str(),
        row.events
    );
    if let Some(p) = &view.parent {
        outln!("subagent of {} (call {})", p.run, p.call);
    }
    for child in &view.subagents {
        outln!("subagent {child}");
    }
    let printer = Printer::new(false);
    for e in &view.events {
        match warrant_kernel::RunEvent::from_stored(e) {
            Ok(ev) => {
                for (i, line) in printer.lines(&ev).iter().enumerate() {
                    if i == 0 {
                        outln!("{:>4}  {line}", e.seq);
                    } else {
                        outln!("      {line}");
                    }
                }
            }
            Err(err) => outln!("#{:<4}unreadable event: {err}", e.seq),
        }
    }
    for r in &view.fence_rejections {
        outln!(
            "fenced   at {}: a writer with lease token {} (current {}) was refused: {}",
            r.at.rfc3339(),
            r.presented,
            r.current,
            r.kinds.join(", ")
        );
    }
    Ok(0)
}

pub fn approvals_list(ws: Option<&Path>, all: bool, json: bool) -> Result<u8, Failure> {
    let rows = open(ws)?.records().requests(all)?;
    if json {
        outln!("{}", pretty(&json!({ "requests": rows })));
        return Ok(0);
    }
    if rows.is_empty() {
        outln!("no {}requests", if all { "" } else { "open " });
    }
    for r in rows {
        let s = &r.summary;
        let get = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or("?").to_owned();
        outln!(
            "{}  {:<8}  run {}  risk {:<11}  {}  (asked by {})",
            r.id,
            match r.status {
                RequestStatus::Open => "open",
                RequestStatus::Answered => "answered",
            },
            r.run,
            get("risk"),
            get("title"),
            get("requested_by"),
        );
        if let Some(asked) = s.get("asked_of").and_then(Value::as_str) {
            outln!("    asked of: {asked}");
        }
    }
    Ok(0)
}

pub fn explain(
    ws: Option<&Path>,
    action: &str,
    target: &str,
    as_actor: Option<&str>,
    json: bool,
) -> Result<u8, Failure> {
    let explained =
        warrant_host::explain::explain(&crate::at(ws), crate::notices(), action, target, as_actor)?;
    // Policy alone is explained; a `[risk.*] needs = "person"` rule still asks.
    if let Some(class) = explained.person_needed {
        eprintln!(
            "note: [risk.{0}] needs = \"person\" in the configuration: {0} actions are asked of a person although policy allows them",
            class.as_str()
        );
    }
    if json {
        outln!("{}", pretty(&explained.explanation));
    } else {
        outln!("{}", explained.explanation);
    }
    Ok(0)
}

pub fn doctor(ws: Option<&Path>, json: bool) -> Result<u8, Failure> {
    let report = warrant_host::doctor::doctor(&crate::at(ws), crate::notices())?;
    if json {
        outln!("{}", pretty(&report));
    } else {
        for c in &report.checks {
            outln!(
                "{:<4} {:<22} {}",
                if c.ok { "ok" } else { "FAIL" },
                c.check,
                c.detail
            );
        }
    }
    Ok(if report.ok { 0 } else { 1 })
}
