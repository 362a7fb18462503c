//! Agent profiles (Open Agent Profile 1.0): validation, the catalogue, one profile and what it
//! allows, digests, diffs, an applied delta and the proposals waiting for a person.

use std::fmt::Write as _;

use warrant_host::agent_profiles::{
    AppliedView, Digests, PendingProposal, ProfileDiff, ProfileView,
};
use warrant_kernel::agent_profile::Family;
use warrant_oap::{Catalog, Report};

use super::finish;

/// `profiles validate`: valid or not, the digests of a valid profile, every finding.
pub fn validated(r: &Report) -> String {
    let mut s = String::new();
    if r.ok {
        let _ = writeln!(s, "{}: valid {}", r.path, r.kind);
        if let (Some(p), Some(d)) = (&r.profile_digest, &r.spec_digest) {
            let _ = writeln!(s, "  profile digest {p}");
            let _ = writeln!(s, "  spec digest    {d}");
        }
    } else {
        let _ = writeln!(s, "{}: invalid", r.path);
    }
    for e in &r.errors {
        let _ = writeln!(s, "  error   {e}");
    }
    for w in &r.warnings {
        let _ = writeln!(s, "  warning {w}");
    }
    finish(s)
}

/// `profiles list`: each profile, what it shadows, problems, the roots.
pub fn catalog(cat: &Catalog) -> String {
    let mut s = String::new();
    if cat.profiles.is_empty() {
        s.push_str("no agent profiles\n");
    }
    for p in &cat.profiles {
        let _ = writeln!(
            s,
            "{:<24} {:<9} r{:<4} {}",
            p.name,
            p.root.trust(),
            p.revision.unwrap_or(1),
            p.path.display()
        );
    }
    for h in &cat.shadowed {
        let _ = writeln!(
            s,
            "shadowed: {} ({}) by {}",
            h.path.display(),
            h.root.label(),
            h.by.display()
        );
    }
    for p in &cat.problems {
        let _ = writeln!(s, "problem: [{}] {}", p.code, p.message);
    }
    s.push_str("roots (most authoritative first):\n");
    for r in &cat.roots {
        let _ = writeln!(s, "  {:<36} {}", r.kind.label(), r.dir.display());
    }
    finish(s)
}

/// A family of actions as a person names it.
pub fn family(f: &Family) -> &'static str {
    match f {
        Family::Shell => "shell",
        Family::Edit => "edit",
        Family::Network => "network",
        Family::MemoryRead => "memory read",
        Family::MemoryWrite => "memory write",
        Family::Default => "default",
    }
}

/// `profiles show`: the profile and the most it allows each family and tool here.
pub fn profile(v: &ProfileView) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{} (revision {}, trust {})", v.name, v.revision, v.trust);
    let _ = writeln!(s, "  {}", v.description);
    let _ = writeln!(s, "  file           {}", v.path.display());
    if !v.extends.is_empty() {
        let _ = writeln!(s, "  extends        {}", v.extends.join(", "));
    }
    let _ = writeln!(s, "  profile digest {}", v.profile_digest);
    let _ = writeln!(s, "  spec digest    {}", v.spec_digest);
    s.push_str("at most (policy decides, and can only narrow further):\n");
    for (f, c) in &v.families {
        let _ = writeln!(s, "  {:<14} {}", family(f), c.as_str());
    }
    for (tool, c) in &v.tools {
        let _ = writeln!(s, "  {tool:<20} {}", c.as_str());
    }
    if !v.adjustments.is_empty() {
        s.push_str("dropped, narrowed or substituted:\n");
        for a in &v.adjustments {
            let _ = writeln!(
                s,
                "  {}: {} -> {} ({})",
                a.field, a.requested, a.effective, a.reason
            );
        }
    }
    for w in &v.warnings {
        let _ = writeln!(s, "warning {w}");
    }
    finish(s)
}

/// `profiles digest`.
pub fn digests(d: &Digests) -> String {
    format!(
        "{} revision {}\n  profile {}\n  spec    {}",
        d.name, d.revision, d.profile_digest, d.spec_digest
    )
}

/// `profiles diff`: each change, marked when it could widen authority or needs review.
pub fn diff(d: &ProfileDiff) -> String {
    if d.changes.is_empty() {
        return "no differences".to_owned();
    }
    let show =
        |v: &Option<serde_json::Value>| v.as_ref().map_or("(absent)".to_owned(), |v| v.to_string());
    let lines: Vec<String> = d
        .changes
        .iter()
        .map(|c| {
            let mark = if c.widens {
                "WIDENS "
            } else if c.sensitive {
                "review "
            } else {
                "       "
            };
            format!(
                "{mark}{}: {} -> {}",
                c.pointer,
                show(&c.before),
                show(&c.after)
            )
        })
        .collect();
    lines.join("\n")
}

/// `profiles apply`: the revision written and the proposals queued (never applied).
pub fn applied(v: &AppliedView) -> String {
    let a = &v.applied;
    let mut s = String::new();
    if a.operations == 0 {
        let _ = writeln!(s, "{}: no state operations; nothing written", a.profile);
    } else {
        let _ = writeln!(
            s,
            "{}: revision {} -> {} ({} operations), {}",
            a.profile,
            a.from_revision,
            a.to_revision,
            a.operations,
            a.path.display()
        );
    }
    for w in &a.warnings {
        let _ = writeln!(s, "  warning: {w}");
    }
    for (p, id) in a.proposals.iter().zip(&v.queued) {
        let raised = if p.risk_raised {
            ", raised by Warrant"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "  proposal {id} ({} risk{raised}): {} {} — {}",
            p.risk, p.op, p.path, p.rationale
        );
    }
    if !v.queued.is_empty() {
        s.push_str("  proposals are never applied on their own: each is a request a person approves (`warrant requests answer REQ --text approve`) or declines\n");
    }
    finish(s)
}

/// `profiles proposals`: each request with its change in words.
pub fn proposals(all: &[PendingProposal]) -> String {
    if all.is_empty() {
        return "no proposals waiting".to_owned();
    }
    let mut lines: Vec<String> = Vec::new();
    for p in all {
        lines.push(format!(
            "{} ({}) {} risk: {} {} on {} r{} — {}",
            p.id,
            p.status,
            p.proposal.risk,
            p.proposal.op,
            p.proposal.path,
            p.profile,
            p.revision,
            p.proposal.rationale
        ));
        lines.extend(p.diff.iter().map(|d| format!("    {d}")));
    }
    lines.push(
        "approve one with `warrant requests answer REQ --text approve`, or decline it with `warrant requests decline REQ --reason TEXT`".to_owned(),
    );
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn a_diff_marks_what_widens_and_what_needs_review() {
        let change = |pointer: &str, widens, sensitive| warrant_oap::diff::Change {
            pointer: pointer.to_owned(),
            before: Some(serde_json::json!("ask")),
            after: None,
            widens,
            sensitive,
        };
        let d = ProfileDiff {
            from: "a".to_owned(),
            to: "b".to_owned(),
            changes: vec![
                change("/spec/tools/shell", true, true),
                change("/metadata/description", false, true),
                change("/metadata/name", false, false),
            ],
            widens: true,
        };
        assert_eq!(
            diff(&d),
            "WIDENS /spec/tools/shell: \"ask\" -> (absent)\n\
             review /metadata/description: \"ask\" -> (absent)\n       \
             /metadata/name: \"ask\" -> (absent)"
        );
        let none = ProfileDiff {
            changes: Vec::new(),
            widens: false,
            ..d
        };
        assert_eq!(diff(&none), "no differences");
    }
}
