//! Agentic graphs (AGS 1.0): a validation and a plan.

use std::fmt::Write as _;

use warrant_graph::Validation;
use warrant_graph::plan::Plan;

use super::finish;

/// `graph validate`: valid or not, the digest, every finding with its place.
pub fn validation(v: &Validation) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}: {}", v.path, if v.ok { "valid" } else { "invalid" });
    if let Some(d) = &v.graph_digest {
        let _ = writeln!(s, "  graph digest {d}");
    }
    for f in &v.findings {
        let at = if f.pointer.is_empty() {
            String::new()
        } else {
            format!(" (at {})", f.pointer)
        };
        let _ = writeln!(s, "  {:<7} {} {}{at}", f.severity, f.code, f.message);
    }
    finish(s)
}

/// `graph plan`: the order, each node's permissions under policy, the gates, where a person
/// is asked, and what this installation cannot run.
pub fn plan(p: &Plan) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{} — {} ({})", p.id, p.title, p.graph_digest);
    let _ = writeln!(s, "order: {}", p.order.join(" → "));
    for n in &p.nodes {
        let _ = writeln!(s, "{} [{}] {}", n.id, n.kind, n.title);
        if !n.after.is_empty() {
            let _ = writeln!(
                s,
                "    after       {} (join {})",
                n.after.join(", "),
                n.join
            );
        }
        if let Some(w) = &n.when {
            let _ = writeln!(s, "    when        {w}");
        }
        for perm in &n.permissions {
            let _ = writeln!(
                s,
                "    {:<11} {} — {}",
                perm.verdict, perm.permission, perm.reason
            );
        }
        if let Some(g) = &n.gate {
            let _ = writeln!(
                s,
                "    gate        {} ({}), on reject: {}",
                g.mode,
                g.roles.join(", "),
                g.on_reject
            );
        }
        if n.max_attempts > 1 || !n.fallback.is_empty() {
            let _ = writeln!(
                s,
                "    failure     {} attempt(s); fallback: {}",
                n.max_attempts,
                n.fallback.join(", ")
            );
        }
    }
    s.push_str("asks a person:\n");
    for a in &p.asks_person {
        let _ = writeln!(s, "  {a}");
    }
    if p.asks_person.is_empty() {
        s.push_str("  nothing\n");
    }
    if !p.runnable {
        let _ = writeln!(
            s,
            "not runnable here (Warrant executes AGS at level {}):",
            p.level
        );
        for u in &p.unsupported {
            let _ = writeln!(s, "  {u}");
        }
    }
    finish(s)
}
