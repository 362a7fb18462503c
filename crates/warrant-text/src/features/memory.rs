//! Memory: entries, drafts and what a person's operation on them did.

use std::fmt::Write as _;

use warrant_core::RunId;
use warrant_host::narrate::inline;
use warrant_memory::{Draft, Entry, Found};

/// What a person did to memory (each recorded as a run of its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Done {
    Forgot,
    Withdrew,
    Published,
    Rejected,
}

/// One line: what was done to `id`, and the run that records it.
pub fn done(what: Done, id: &str, run: &RunId) -> String {
    let verb = match what {
        Done::Forgot => "forgot",
        Done::Withdrew => "withdrew",
        Done::Published => "published draft",
        Done::Rejected => "rejected draft",
    };
    format!("{verb} {id} (recorded in run {run})")
}

/// The first line of a text, cut at 80 characters, with `…` when anything was left out.
pub fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    let cut: String = line.chars().take(80).collect();
    if cut.len() < text.len() {
        format!("{cut}…")
    } else {
        cut
    }
}

/// An entry on one line: id, namespace, taint, the start of its text.
pub fn entry_line(e: &Entry) -> String {
    format!(
        "{}  {}/{}  {}{}",
        e.id,
        e.scope.as_str(),
        e.namespace,
        if e.provenance.tainted {
            "[tainted] "
        } else {
            ""
        },
        inline(&first_line(&e.text))
    )
}

/// `memory list`.
pub fn entries(entries: &[Entry]) -> String {
    if entries.is_empty() {
        return "no memory entries".to_owned();
    }
    entries
        .iter()
        .map(entry_line)
        .collect::<Vec<_>>()
        .join("\n")
}

/// `memory search`.
pub fn found(found: &[Found]) -> String {
    if found.is_empty() {
        return "nothing found".to_owned();
    }
    let lines: Vec<String> = found.iter().map(|f| entry_line(&f.entry)).collect();
    lines.join("\n")
}

/// `memory show`: the entry with its provenance, then its text.
pub fn entry(e: &Entry) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "entry      {}", e.id);
    let _ = writeln!(s, "namespace  {}/{}", e.scope.as_str(), e.namespace);
    let _ = writeln!(
        s,
        "written    {} by {}",
        e.provenance.at, e.provenance.actor
    );
    if let Some(p) = &e.provenance.on_behalf_of {
        let _ = writeln!(s, "for        {p}");
    }
    if let Some(r) = &e.provenance.run {
        let _ = writeln!(s, "run        {r}");
    }
    if e.provenance.tainted {
        s.push_str("tainted    the run had seen untrusted content when it wrote this\n");
    }
    if !e.tags.is_empty() {
        let _ = writeln!(s, "tags       {}", e.tags.join(", "));
    }
    if let Some(p) = &e.published {
        let _ = writeln!(s, "published  {p}");
    }
    if let Some(r) = &e.retracted {
        let _ = writeln!(s, "WITHDRAWN  {r}");
    }
    let _ = writeln!(s, "digest     {}", e.digest);
    let _ = write!(s, "\n{}", e.text);
    s
}

/// `memory drafts list`.
pub fn drafts(drafts: &[Draft]) -> String {
    if drafts.is_empty() {
        return "no drafts waiting for review".to_owned();
    }
    let lines: Vec<String> = drafts
        .iter()
        .map(|d| {
            format!(
                "{}  shared/{}  {:?}  by {}  {}",
                d.id,
                d.namespace,
                d.status,
                d.provenance.actor,
                inline(&first_line(&d.text))
            )
        })
        .collect();
    lines.join("\n")
}

/// `memory drafts show`: the draft, the digest a review binds to (and whether it changed),
/// then its text.
pub fn draft(d: &Draft) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "draft      {}", d.id);
    let _ = writeln!(s, "namespace  shared/{}", d.namespace);
    let _ = writeln!(s, "status     {:?}", d.status);
    let _ = writeln!(
        s,
        "proposed   {} by {}",
        d.provenance.at, d.provenance.actor
    );
    if let Some(p) = &d.provenance.on_behalf_of {
        let _ = writeln!(s, "for        {p}");
    }
    if let Some(r) = &d.provenance.run {
        let _ = writeln!(s, "run        {r}");
    }
    if d.provenance.tainted {
        s.push_str("tainted    the run had seen untrusted content when it proposed this\n");
    }
    if !d.tags.is_empty() {
        let _ = writeln!(s, "tags       {}", d.tags.join(", "));
    }
    if d.current_digest == d.digest {
        let _ = writeln!(s, "digest     {}", d.digest);
    } else {
        let _ = writeln!(
            s,
            "digest     {} (CHANGED since it was proposed as {}: publishing is refused)",
            d.current_digest, d.digest
        );
    }
    if let Some(r) = &d.reviewer {
        let _ = writeln!(
            s,
            "reviewed   by {r}: {}",
            d.reason.clone().unwrap_or_default()
        );
    }
    let _ = write!(s, "\n{}", d.text);
    s
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn first_line_marks_what_it_leaves_out() {
        assert_eq!(first_line("one line"), "one line");
        assert_eq!(first_line("first\nsecond"), "first…");
        let long = "x".repeat(90);
        assert_eq!(first_line(&long), format!("{}…", "x".repeat(80)));
    }
}
