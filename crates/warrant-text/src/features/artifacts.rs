//! Artifacts and evidence bundles: a verdict as a chain of custody, the workspace's list, an
//! export, a bundle's verification.

use std::fmt::Write as _;
use std::path::Path;

use warrant_artifacts::{ArtifactVerdict, KeyStanding};
use warrant_host::bundle::{BundleReport, Exported};

use super::finish;

/// `artifacts verify`: ok or failed, every problem by part, the key, the custody.
pub fn verdict(v: &ArtifactVerdict) -> String {
    let mut s = String::new();
    if v.ok {
        let _ = writeln!(s, "ok       {} (sha256 {})", v.file, v.sha256);
    } else {
        let _ = writeln!(s, "FAILED   {}", v.file);
    }
    for p in &v.problems {
        let _ = writeln!(s, "  {:<10} [{}] {}", p.part, p.code, p.message);
    }
    if let (Some(kid), Some(standing)) = (&v.kid, v.key) {
        let how = match standing {
            KeyStanding::Current => "the installation's current key",
            KeyStanding::Retired => "a retired key of this installation (signed before a rotation)",
            KeyStanding::Listed => "a key of the list given",
        };
        let _ = writeln!(s, "  signed   by {kid}, {how}");
    }
    if let Some(c) = &v.custody {
        let _ = writeln!(s, "  asked    {}", c.asked_by);
        let _ = writeln!(s, "  made by  {} ({}, {})", c.made_by, c.tool, c.model);
        let _ = writeln!(s, "  approved {}", c.approved);
        let _ = writeln!(s, "  run      {}", c.run);
        let _ = writeln!(s, "  at       {}", c.created_at);
        if c.untrusted_input {
            s.push_str("  input    the run had seen untrusted content before this was made\n");
        }
    }
    finish(s)
}

/// `artifacts list`: each artifact verified, its kind and run.
pub fn listed(all: &[ArtifactVerdict]) -> String {
    if all.is_empty() {
        return "no artifacts with provenance in this workspace".to_owned();
    }
    let lines: Vec<String> = all
        .iter()
        .map(|v| {
            let (kind, run) = v
                .predicate
                .as_ref()
                .map_or(("?", "?"), |p| (p.kind.as_str(), p.run.as_str()));
            let ok = if v.ok { "ok    " } else { "FAILED" };
            format!("{ok}  {kind:<12} {run}  {}", v.file)
        })
        .collect();
    lines.join("\n")
}

/// `runs export`.
pub fn exported(e: &Exported) -> String {
    format!(
        "exported {} to {}: {} members, {} bytes, sha256 {}",
        e.run, e.out, e.members, e.bytes, e.sha256
    )
}

/// `runs verify FILE`: ok or failed, then what the bundle proves and cannot.
pub fn bundle(report: &BundleReport, file: &Path) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} {} (run {}, {} members, signed by {})",
        if report.ok { "ok    " } else { "FAILED" },
        file.display(),
        report.run.as_deref().unwrap_or("?"),
        report.members,
        report.signed_by.as_deref().unwrap_or("?")
    );
    for p in &report.problems {
        let _ = writeln!(s, "  problem  [{}] {}", p.code, p.message);
    }
    for p in &report.proves {
        let _ = writeln!(s, "  proves   {p}");
    }
    for c in &report.cannot {
        let _ = writeln!(s, "  cannot   {c}");
    }
    finish(s)
}
