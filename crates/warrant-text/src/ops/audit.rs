//! The audit trail in words: what `audit verify` found, records as table rows, sink health,
//! a flush that gave up, deliveries, refusals across tenants and what a run touched.

use serde_json::Value;
use warrant_audit::JournalReport;
use warrant_host::doctor::{age, time_text};
use warrant_host::records::{AuditStatus, Flushed, Refusals};
use warrant_host::touched::Touched;
use warrant_host::verify::Verified;
use warrant_store::SealedRecord;

/// `audit verify`: each source's chain and checkpoint, the journal against its records, and
/// the kept budget totals against the fold of the logs.
pub fn verified(v: &Verified) -> Vec<String> {
    let mut out = Vec::new();
    for c in &v.checked {
        let (name, r) = (&c.source, &c.report);
        out.push(match &r.first_problem {
            None => format!(
                "ok       {name}: {} records, chain and signatures intact",
                r.records
            ),
            Some(p) => format!(
                "BROKEN   {name}: {} intact records, then at line {} (seq {}, record {}): {:?}: {}",
                r.records,
                p.line,
                p.seq.map_or_else(|| "?".into(), |s| s.to_string()),
                p.record_id.clone().unwrap_or_else(|| "?".into()),
                p.kind,
                p.detail
            ),
        });
        match &c.checkpoint {
            None => {}
            Some(cp) if !cp.ok => out.push(format!(
                "BROKEN   {}: [{}] {}{}",
                cp.path,
                cp.code.unwrap_or(""),
                cp.message.as_deref().unwrap_or(""),
                cp.hint.as_ref().map(super::hint).unwrap_or_default()
            )),
            Some(cp) => out.push(match &cp.checkpoint {
                Some(at) => format!(
                    "ok       {}: signed checkpoint at record {}, every record up to it present",
                    cp.path, at.seq
                ),
                None => format!(
                    "note     {}: no checkpoint, so records cut from the end of {name} would not be seen",
                    cp.path
                ),
            }),
        }
    }
    if let Some(j) = &v.journal {
        out.extend(journal(&j.report));
    }
    if let Some(b) = &v.budget {
        if b.ok {
            out.push(format!(
                "ok       budget totals: {} actors, each equal to the fold of {} runs' logs",
                b.actors, b.runs
            ));
        } else {
            out.push(format!(
                "BROKEN   budget totals: {} of {} actors differ from the fold of their runs' logs",
                b.mismatches.len(),
                b.actors
            ));
            for m in &b.mismatches {
                out.push(format!(
                    "         {} [{}]: kept {} tokens in, {} out, {} nano-USD; the logs add up to {} in, {} out, {} nano-USD",
                    m.actor,
                    m.code,
                    m.projected.input_tokens,
                    m.projected.output_tokens,
                    m.projected.cost_nanos,
                    m.folded.input_tokens,
                    m.folded.output_tokens,
                    m.folded.cost_nanos
                ));
            }
        }
    }
    out
}

/// The journal's events against their signed records.
fn journal(j: &JournalReport) -> Vec<String> {
    let unbound = if j.unbound > 0 {
        format!(
            "; {} of them recorded before records carried event digests (unbound: their kind and place are checked, not their content)",
            j.unbound
        )
    } else {
        String::new()
    };
    if j.is_ok() {
        return vec![format!(
            "ok       journal: {} runs, {} events, each matching its signed record{unbound}",
            j.runs, j.events
        )];
    }
    let mut out = vec![format!(
        "BROKEN   journal: {} of {} runs do not match their signed records",
        j.problems.len(),
        j.runs
    )];
    for p in &j.problems {
        out.push(format!(
            "         {} event {}: {} [{}]: {}{}",
            p.run,
            p.seq,
            p.what,
            p.code,
            p.message,
            p.hint.as_ref().map(super::hint).unwrap_or_default()
        ));
    }
    out
}

/// One audit record as a table row: seq, time, type, actor, decision, resource, outcome.
pub fn record(r: &SealedRecord) -> String {
    let v: Value = serde_json::from_str(&r.line).unwrap_or(Value::Null);
    let d = &v["data"];
    let s = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    format!(
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
    )
}

/// `audit status`: the chain head and a table of the sinks.
pub fn status(status: &AuditStatus) -> Vec<String> {
    let mut out = vec![
        format!("audit chain head: record {}", status.head),
        format!(
            "{:<12} {:>8} {:>10} {:<26} {:<10} LAST ERROR",
            "SINK", "PENDING", "OLDEST", "LAST SUCCESS", "DELIVERED"
        ),
    ];
    for h in &status.sinks {
        let error = match (&h.last_error, h.failing_for_ms) {
            (Some(e), Some(f)) => format!("failing for {}: {e}", age(f)),
            (Some(e), None) => format!("(recovered) {e}"),
            (None, _) => "-".to_owned(),
        };
        // The counts are as the first version printed them: unpadded.
        out.push(format!(
            "{:<12} {} {:>10} {:<26} {} {error}",
            h.sink,
            h.pending,
            h.oldest_pending_ms.map(age).unwrap_or_else(|| "-".into()),
            h.last_success
                .map(|t| time_text(&t))
                .unwrap_or_else(|| "never".into()),
            h.delivered_total,
        ));
    }
    out
}

/// A flush: every sink has every record, or each stuck sink and why (for standard error).
pub fn flushed(flushed: &Flushed) -> Vec<String> {
    if flushed.flushed {
        return vec![format!(
            "every sink has every record (up to {})",
            flushed.head
        )];
    }
    flushed
        .stuck
        .iter()
        .map(|s| format!("stuck: sink `{}`: {}", s.sink, s.error))
        .collect()
}

/// The message of a flush that gave up after `timeout`.
pub fn flush_gave_up(flushed: &Flushed, timeout: &str) -> String {
    let names: Vec<&str> = flushed.stuck.iter().map(|s| s.sink.as_str()).collect();
    format!(
        "audit flush gave up after {timeout}: {} sink(s) stuck ({})",
        names.len(),
        names.join(", ")
    )
}

/// One sink's delivery: how far it got, or why it failed.
pub fn delivered(d: &warrant_audit::Delivered, head: u64) -> String {
    match &d.outcome {
        Ok(acked) => format!("{}: delivered up to record {acked} of {head}", d.sink),
        Err(e) => format!("{}: failed: {e}", d.sink),
    }
}

/// `audit refusals`: one line an attempt across tenants.
pub fn refusals(view: &Refusals) -> Vec<String> {
    view.refusals
        .iter()
        .map(|r| {
            format!(
                "{}  {}@{} tried to {} {} of tenant {}",
                r.at.rfc3339(),
                r.actor,
                r.tenant,
                r.operation,
                r.target,
                r.owner
            )
        })
        .collect()
}

/// A key rotation, and what still verifies.
pub fn rotated(old_kid: &str, new_kid: &str) -> String {
    format!(
        "rotated the audit signing key: {old_kid} -> {new_kid}; records signed by {old_kid} still verify (its public key is kept in keys/retired/)"
    )
}

/// `audit touched`: the run, then each kind's resources, saying on whose behalf an action ran
/// only where it differs from the run's.
pub fn touched(t: &Touched) -> Vec<String> {
    let mut out = vec![match &t.on_behalf_of {
        Some(whom) => format!("run {} for {}, on behalf of {whom}", t.run, t.actor),
        None => format!("run {} for {}", t.run, t.actor),
    }];
    for (kind, rows) in &t.touched {
        out.push(kind.clone());
        for r in rows {
            let whom = match &r.on_behalf_of {
                Some(w) if r.on_behalf_of != t.on_behalf_of => format!(" (on behalf of {w})"),
                Some(_) | None => String::new(),
            };
            out.push(format!(
                "  {:<8} {:<11} {:<40} {}{whom}",
                r.status, r.verb, r.resource, r.by
            ));
        }
    }
    out
}
