//! `warrant audit …`: the application layer's audit views, printed.

use std::path::Path;

use serde_json::Value;
use warrant_host::doctor::{age, time_text};
use warrant_host::drive::duration_arg;
use warrant_host::records::{self, Opened};
use warrant_host::verify::{Verified, verify_alone};

use crate::{AuditCommand, Failure, KeysCommand, pretty};

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
                (Some(file), Some(pk)) => verify_alone(file, pk)?,
                (file, pk) => open(ws)?.records().verify(file, pk)?,
            };
            Ok(print_verified(&verified, json))
        }
        AuditCommand::Tail { lines, json } => {
            print_records(&open(ws)?.records().tail(lines)?, json);
            Ok(0)
        }
        AuditCommand::Refusals { json } => {
            let view = open(ws)?.records().tenant_refusals()?;
            if json {
                outln!("{}", pretty(&view));
            } else {
                for r in &view.refusals {
                    outln!(
                        "{}  {}@{} tried to {} {} of tenant {}",
                        r.at.rfc3339(),
                        r.actor,
                        r.tenant,
                        r.operation,
                        r.target,
                        r.owner
                    );
                }
                eprintln!("{} refusal(s)", view.refusals.len());
            }
            Ok(0)
        }
        AuditCommand::Status { json } => status(ws, json),
        AuditCommand::Deliver { follow, interval } => {
            let every = duration_arg("interval", &interval, "5s")?;
            deliver(ws, follow, every)
        }
        AuditCommand::Flush { timeout, json } => {
            let limit = duration_arg("timeout", &timeout, "30s")?;
            flush(ws, &timeout, limit, json)
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
            let time = |t: Option<String>, flag: &str| {
                t.map(|t| {
                    warrant_core::Timestamp::parse(&t).ok_or_else(|| {
                        Failure::usage(
                            "W-CLI-004",
                            format!(
                                "--{flag} {t:?} is not an RFC 3339 time (e.g. 2026-11-29T00:00:00Z)"
                            ),
                        )
                    })
                })
                .transpose()
            };
            let query = warrant_store::AuditQuery {
                run,
                actor,
                on_behalf_of,
                kind,
                verb,
                decision,
                since: time(since, "since")?,
                until: time(until, "until")?,
                limit,
            };
            let records = open(ws)?.records().query(&query)?;
            print_records(&records, json);
            if !json {
                eprintln!("{} record(s)", records.len());
            }
            Ok(0)
        }
        AuditCommand::Touched { run, json } => touched(ws, &run, json),
        AuditCommand::Keys { command } => match command {
            KeysCommand::Rotate => {
                let r = warrant_host::records::rotate_audit_key(&crate::at(ws))?;
                outln!(
                    "rotated the audit signing key: {} -> {}; records signed by {} still verify (its public key is kept in keys/retired/)",
                    r.old_kid,
                    r.new_kid,
                    r.old_kid
                );
                Ok(0)
            }
            KeysCommand::Export => {
                use std::io::Write as _;
                let keys = warrant_host::records::audit_public_keys(&crate::at(ws))?;
                let _ = std::io::stdout()
                    .lock()
                    .write_all(keys.to_file_text().as_bytes());
                Ok(0)
            }
        },
    }
}

fn print_verified(v: &Verified, json: bool) -> u8 {
    if json {
        outln!("{}", pretty(v));
        return if v.ok { 0 } else { 1 };
    }
    for c in &v.checked {
        let (name, r) = (&c.source, &c.report);
        match &r.first_problem {
            None => outln!(
                "ok       {name}: {} records, chain and signatures intact",
                r.records
            ),
            Some(p) => outln!(
                "BROKEN   {name}: {} intact records, then at line {} (seq {}, record {}): {:?}: {}",
                r.records,
                p.line,
                p.seq.map_or_else(|| "?".into(), |s| s.to_string()),
                p.record_id.clone().unwrap_or_else(|| "?".into()),
                p.kind,
                p.detail
            ),
        }
        match &c.checkpoint {
            None => {}
            Some(cp) if !cp.ok => outln!(
                "BROKEN   {}: [{}] {}",
                cp.path,
                cp.code.unwrap_or(""),
                cp.message.as_deref().unwrap_or("")
            ),
            Some(cp) => match &cp.checkpoint {
                Some(at) => outln!(
                    "ok       {}: signed checkpoint at record {}, every record up to it present",
                    cp.path,
                    at.seq
                ),
                None => outln!(
                    "note     {}: no checkpoint, so records cut from the end of {name} would not be seen",
                    cp.path
                ),
            },
        }
    }
    if let Some(j) = &v.journal {
        print_journal(&j.report);
    }
    if let Some(b) = &v.budget {
        if b.ok {
            outln!(
                "ok       budget totals: {} actors, each equal to the fold of {} runs' logs",
                b.actors,
                b.runs
            );
        } else {
            outln!(
                "BROKEN   budget totals: {} of {} actors differ from the fold of their runs' logs",
                b.mismatches.len(),
                b.actors
            );
            for m in &b.mismatches {
                outln!(
                    "         {} [{}]: kept {} tokens in, {} out, {} nano-USD; the logs add up to {} in, {} out, {} nano-USD",
                    m.actor,
                    m.code,
                    m.projected.input_tokens,
                    m.projected.output_tokens,
                    m.projected.cost_nanos,
                    m.folded.input_tokens,
                    m.folded.output_tokens,
                    m.folded.cost_nanos
                );
            }
        }
    }
    if v.ok { 0 } else { 1 }
}

fn print_journal(j: &warrant_audit::JournalReport) {
    let unbound = if j.unbound > 0 {
        format!(
            "; {} of them recorded before records carried event digests (unbound: their kind and place are checked, not their content)",
            j.unbound
        )
    } else {
        String::new()
    };
    if j.is_ok() {
        outln!(
            "ok       journal: {} runs, {} events, each matching its signed record{unbound}",
            j.runs,
            j.events
        );
        return;
    }
    outln!(
        "BROKEN   journal: {} of {} runs do not match their signed records",
        j.problems.len(),
        j.runs
    );
    for p in &j.problems {
        outln!(
            "         {} event {}: {} [{}]: {}",
            p.run,
            p.seq,
            p.what,
            p.code,
            p.message
        );
    }
}

fn print_records(records: &[warrant_store::SealedRecord], json: bool) {
    for r in records {
        if json {
            outln!("{}", r.line);
            continue;
        }
        let v: Value = serde_json::from_str(&r.line).unwrap_or(Value::Null);
        let d = &v["data"];
        let s = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        outln!(
            "{:>5}  {}  {:<28} {:<8} {:<6} {:<40} {}",
            r.seq,
            v.get("time").and_then(Value::as_str).unwrap_or(""),
            v.get("type")
                .and_then(Value::as_str)
                .unwrap_or("")
                .trim_start_matches("dev.warrant."),
            s("actor"),
            s("decision"),
            s("resource"),
            s("outcome"),
        );
    }
}

fn status(ws: Option<&Path>, json: bool) -> Result<u8, Failure> {
    let status = open(ws)?.records().audit_status()?;
    if json {
        outln!("{}", pretty(&status));
        return Ok(0);
    }
    outln!("audit chain head: record {}", status.head);
    outln!(
        "{:<12} {:>8} {:>10} {:<26} {:<10} LAST ERROR",
        "SINK",
        "PENDING",
        "OLDEST",
        "LAST SUCCESS",
        "DELIVERED"
    );
    for h in &status.sinks {
        let error = match (&h.last_error, h.failing_for_ms) {
            (Some(e), Some(f)) => format!("failing for {}: {e}", age(f)),
            (Some(e), None) => format!("(recovered) {e}"),
            (None, _) => "-".to_owned(),
        };
        // The counts are as the first version printed them: unpadded.
        outln!(
            "{:<12} {} {:>10} {:<26} {} {error}",
            h.sink,
            h.pending,
            h.oldest_pending_ms.map(age).unwrap_or_else(|| "-".into()),
            h.last_success
                .map(|t| time_text(&t))
                .unwrap_or_else(|| "never".into()),
            h.delivered_total,
        );
    }
    Ok(0)
}

fn flush(
    ws: Option<&Path>,
    timeout: &str,
    limit: std::time::Duration,
    json: bool,
) -> Result<u8, Failure> {
    let flushed = open(ws)?.records().flush(limit)?;
    if json {
        outln!("{}", serde_json::to_string(&flushed).unwrap_or_default());
    }
    if flushed.flushed {
        if !json {
            outln!("every sink has every record (up to {})", flushed.head);
        }
        return Ok(0);
    }
    for s in &flushed.stuck {
        eprintln!("stuck: sink `{}`: {}", s.sink, s.error);
    }
    let names: Vec<&str> = flushed.stuck.iter().map(|s| s.sink.as_str()).collect();
    Err(Failure {
        code: "W-CLI-005".to_owned(),
        message: format!(
            "audit flush gave up after {timeout}: {} sink(s) stuck ({})",
            names.len(),
            names.join(", ")
        ),
        exit: 1,
    })
}

fn deliver(ws: Option<&Path>, follow: bool, every: std::time::Duration) -> Result<u8, Failure> {
    let opened = open(ws)?;
    loop {
        let (head, delivered) = opened.records().deliver_once()?;
        let mut failed = false;
        for d in delivered {
            match d.outcome {
                Ok(acked) => outln!("{}: delivered up to record {acked} of {head}", d.sink),
                Err(e) => {
                    failed = true;
                    outln!("{}: failed: {e}", d.sink);
                }
            }
        }
        if !follow {
            return Ok(if failed { 1 } else { 0 });
        }
        std::thread::sleep(every);
    }
}

fn touched(ws: Option<&Path>, run: &str, json: bool) -> Result<u8, Failure> {
    let run = warrant_host::runs::parse_run(run)?;
    let t = open(ws)?.records().touched(&run)?;
    if json {
        outln!("{}", pretty(&t));
        return Ok(0);
    }
    match &t.on_behalf_of {
        Some(whom) => outln!("run {} for {}, on behalf of {whom}", t.run, t.actor),
        None => outln!("run {} for {}", t.run, t.actor),
    }
    for (kind, rows) in &t.touched {
        outln!("{kind}");
        for r in rows {
            // Said per action only where it differs from the run's.
            let whom = match &r.on_behalf_of {
                Some(w) if r.on_behalf_of != t.on_behalf_of => format!(" (on behalf of {w})"),
                Some(_) | None => String::new(),
            };
            outln!(
                "  {:<8} {:<11} {:<40} {}{whom}",
                r.status,
                r.verb,
                r.resource,
                r.by
            );
        }
    }
    Ok(0)
}
