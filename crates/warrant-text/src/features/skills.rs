//! Agent Skills: the catalogue, one skill, the review before an install, verification, and what
//! a recorded change did. Everything a skill wrote is later shown through the renderer.

use std::fmt::Write as _;

use warrant_host::skills::{InstalledView, Recorded, SkillView, TrustView, VerifyView};
use warrant_skills::Catalog;
use warrant_skills::install::Review;

use super::finish;

/// `skills list`: each skill with its state, the workspace's trust, the roots.
pub fn catalog(cat: &Catalog) -> String {
    let mut s = String::new();
    if cat.skills.is_empty() {
        s.push_str("no skills\n");
    }
    for e in &cat.skills {
        let _ = writeln!(
            s,
            "{:<28} {:<8} {:<14} {}",
            e.name,
            e.scope.label(),
            e.status.label(),
            e.description.as_deref().unwrap_or("")
        );
        if let Some(r) = &e.reason {
            let _ = writeln!(s, "    {r}");
        }
    }
    let _ = writeln!(
        s,
        "workspace {}: {}",
        cat.workspace.display(),
        if cat.workspace_trusted {
            "trusted (project skills are used)"
        } else {
            "not trusted (project skills are not loaded; `warrant skills trust`)"
        }
    );
    s.push_str("roots:\n");
    for r in &cat.roots {
        let _ = writeln!(s, "  {:<8} {}", r.scope.label(), r.dir.display());
    }
    finish(s)
}

/// `skills show`: frontmatter, state, digest, approval, files, instructions.
pub fn skill(v: &SkillView) -> String {
    let e = &v.entry;
    let mut s = String::new();
    let _ = writeln!(s, "{} ({}, {})", e.name, e.scope.label(), e.status.label());
    if let Some(r) = &e.reason {
        let _ = writeln!(s, "  {r}");
    }
    let _ = writeln!(s, "  directory   {}", e.dir.display());
    if let Some(d) = &e.description {
        let _ = writeln!(s, "  description {d}");
    }
    if let Some(d) = &e.digest {
        let _ = writeln!(s, "  digest      {d}");
    }
    if let Some(l) = &v.license {
        let _ = writeln!(s, "  license     {l}");
    }
    if let Some(c) = &v.compatibility {
        let _ = writeln!(s, "  compatibility {c}");
    }
    if !e.allowed_tools.is_empty() {
        let _ = writeln!(
            s,
            "  allowed-tools (requested, never granted) {}",
            e.allowed_tools.join(" ")
        );
    }
    if let Some(i) = &v.installed {
        let _ = writeln!(
            s,
            "  approved    {} by {} via {} ({})",
            i.installed_at, i.approved_by, i.via, i.digest
        );
    }
    s.push_str("  files:\n");
    for f in &v.files {
        let mark = if f.script { "script" } else { "" };
        let _ = writeln!(
            s,
            "    {:<6} {:<40} {:>8} {}",
            mark, f.path, f.size, f.digest
        );
    }
    if let Some(body) = &v.instructions {
        s.push_str("--- instructions ---\n");
        let _ = writeln!(s, "{body}");
    }
    finish(s)
}

/// What `skills install` shows before it asks: the frontmatter, the digest, and every file
/// whole, scripts marked.
pub fn review(review: &Review) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "skill       {}", review.name);
    let _ = writeln!(s, "source      {}", review.source.display());
    let _ = writeln!(s, "description {}", review.description);
    if let Some(l) = &review.license {
        let _ = writeln!(s, "license     {l}");
    }
    if let Some(c) = &review.compatibility {
        let _ = writeln!(s, "compatibility {c}");
    }
    for (k, v) in &review.metadata {
        let _ = writeln!(s, "metadata    {k}: {v}");
    }
    if !review.allowed_tools.is_empty() {
        let _ = writeln!(
            s,
            "allowed-tools {} (a request: Warrant grants nothing from it, policy decides every call)",
            review.allowed_tools.join(" ")
        );
    }
    let _ = writeln!(s, "digest      {}", review.digest);
    if let Some(old) = &review.replaces {
        let _ = writeln!(s, "replaces    the installed copy {old}");
    }
    let scripts = review.files.iter().filter(|f| f.script).count();
    let _ = writeln!(
        s,
        "{} file(s), {scripts} script(s) (code the agent may run: read them)",
        review.files.len()
    );
    for f in &review.files {
        let mark = if f.script { "SCRIPT " } else { "" };
        let _ = writeln!(
            s,
            "==== {mark}{} ({} bytes, {}) ====",
            f.path, f.size, f.digest
        );
        let _ = writeln!(s, "{}", f.text.as_deref().unwrap_or("(not text)"));
    }
    finish(s)
}

/// The question a terminal asks before installing.
pub fn install_question(review: &Review) -> String {
    format!(
        "Install skill `{}` ({})? [y/N] ",
        review.name, review.digest
    )
}

/// `skills verify`: each installed skill's state, and the files changed after approval.
pub fn verified(v: &VerifyView) -> String {
    let mut s = String::new();
    if v.skills.is_empty() {
        s.push_str("no installed skills\n");
    }
    for k in &v.skills {
        let _ = writeln!(
            s,
            "{:<28} {:<14} {}",
            k.name,
            k.state,
            k.now.as_deref().or(k.approved.as_deref()).unwrap_or("")
        );
        if !k.changed.is_empty() {
            let _ = writeln!(
                s,
                "    [{}] changed after approval: {}",
                k.code.as_deref().unwrap_or("W-SKILL-010"),
                k.changed.join(", ")
            );
        }
    }
    finish(s)
}

/// What a recorded change did, and the run that records it.
pub fn recorded<T>(r: &Recorded<T>, text: &str) -> String {
    format!("{text}\nrecorded in run {}", r.recorded_in)
}

/// `skills remove`.
pub fn removed<T>(r: &Recorded<T>, name: &str) -> String {
    recorded(r, &format!("removed skill {name}"))
}

/// `skills trust [--revoke]`.
pub fn trust(r: &Recorded<TrustView>, revoked: bool) -> String {
    let what = if revoked {
        "project skills no longer used"
    } else {
        "project skills trusted"
    };
    recorded(r, &format!("{}: {what}", r.what.workspace.display()))
}

/// `skills install` once approved.
pub fn installed(r: &Recorded<InstalledView>) -> String {
    recorded(
        r,
        &format!(
            "installed skill {} into {} ({})",
            r.what.name,
            r.what.dir.display(),
            r.what.record.digest
        ),
    )
}
