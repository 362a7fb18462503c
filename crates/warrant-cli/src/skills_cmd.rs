//! `warrant skills list|show|install|approve|remove|verify|trust`: Agent Skills (SKILL.md).
//! Parsing, the person's confirmation and printing only; the operations are `warrant-host`'s
//! (`skills`). Everything a skill wrote is printed through `outln!`, which neutralises
//! terminal control sequences.

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};

use clap::Subcommand;
use warrant_host::Host;
use warrant_host::skills::Recorded;

use crate::{Failure, pretty};

#[derive(Subcommand, Debug)]
pub enum SkillsCommand {
    /// Every skill of the project roots (.agents/skills/, .claude/skills/) and the user root
    /// (installed skills), with its state: usable, or why not (untrusted workspace, changed
    /// after install, invalid, shadowed).
    List {
        #[arg(long)]
        json: bool,
    },
    /// One skill: its frontmatter, state, digest, files (scripts marked), install record and
    /// instructions.
    Show {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Show a skill (a directory or a .zip) in full, every file with scripts marked and its
    /// digest, and install it into the user skills directory on your approval (a terminal
    /// answer, or --yes). Recorded in the audit trail.
    Install {
        source: PathBuf,
        /// You, a person, approve what is shown (refused from a process a run started).
        #[arg(long)]
        yes: bool,
        #[arg(long)]
        json: bool,
    },
    /// Review an installed skill whose files changed and approve it as it is now.
    Approve {
        name: String,
        #[arg(long)]
        yes: bool,
        #[arg(long)]
        json: bool,
    },
    /// Remove an installed skill. Recorded in the audit trail.
    Remove {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Check every installed skill against what was approved; exit 1 when one changed.
    Verify {
        #[arg(long)]
        json: bool,
    },
    /// Let runs in this workspace use its project skills (or stop, with --revoke). Kept in your
    /// user configuration directory, never in the workspace; recorded in the audit trail.
    Trust {
        #[arg(long)]
        revoke: bool,
        #[arg(long)]
        json: bool,
    },
}

fn open(ws: Option<&Path>) -> Result<Host, Failure> {
    Ok(Host::open(&crate::at(ws), crate::notices())?)
}

fn recorded<T: serde::Serialize>(r: &Recorded<T>, json: bool, text: &str) {
    if json {
        outln!("{}", pretty(r));
    } else {
        outln!("{text}");
        outln!("recorded in run {}", r.recorded_in);
    }
}

pub fn dispatch(ws: Option<&Path>, command: SkillsCommand) -> Result<u8, Failure> {
    match command {
        SkillsCommand::List { json } => {
            let cat = open(ws)?.skills()?;
            if json {
                outln!("{}", pretty(&cat));
                return Ok(0);
            }
            if cat.skills.is_empty() {
                outln!("no skills");
            }
            for e in &cat.skills {
                outln!(
                    "{:<28} {:<8} {:<14} {}",
                    e.name,
                    e.scope.label(),
                    e.status.label(),
                    e.description.as_deref().unwrap_or("")
                );
                if let Some(r) = &e.reason {
                    outln!("    {r}");
                }
            }
            outln!(
                "workspace {}: {}",
                cat.workspace.display(),
                if cat.workspace_trusted {
                    "trusted (project skills are used)"
                } else {
                    "not trusted (project skills are not loaded; `warrant skills trust`)"
                }
            );
            outln!("roots:");
            for r in &cat.roots {
                outln!("  {:<8} {}", r.scope.label(), r.dir.display());
            }
            Ok(0)
        }
        SkillsCommand::Show { name, json } => {
            let v = open(ws)?.skill(&name)?;
            if json {
                outln!("{}", pretty(&v));
                return Ok(0);
            }
            let e = &v.entry;
            outln!("{} ({}, {})", e.name, e.scope.label(), e.status.label());
            if let Some(r) = &e.reason {
                outln!("  {r}");
            }
            outln!("  directory   {}", e.dir.display());
            if let Some(d) = &e.description {
                outln!("  description {d}");
            }
            if let Some(d) = &e.digest {
                outln!("  digest      {d}");
            }
            if let Some(l) = &v.license {
                outln!("  license     {l}");
            }
            if let Some(c) = &v.compatibility {
                outln!("  compatibility {c}");
            }
            if !e.allowed_tools.is_empty() {
                outln!(
                    "  allowed-tools (requested, never granted) {}",
                    e.allowed_tools.join(" ")
                );
            }
            if let Some(i) = &v.installed {
                outln!(
                    "  approved    {} by {} via {} ({})",
                    i.installed_at,
                    i.approved_by,
                    i.via,
                    i.digest
                );
            }
            outln!("  files:");
            for f in &v.files {
                let mark = if f.script { "script" } else { "" };
                outln!("    {:<6} {:<40} {:>8} {}", mark, f.path, f.size, f.digest);
            }
            if let Some(body) = &v.instructions {
                outln!("--- instructions ---");
                outln!("{body}");
            }
            Ok(0)
        }
        SkillsCommand::Install { source, yes, json } => install(ws, &source, yes, json),
        SkillsCommand::Approve { name, yes, json } => {
            let host = open(ws)?;
            let dir = host
                .paths
                .user
                .as_ref()
                .map(|u| u.join("skills").join(&name))
                .unwrap_or_default();
            drop(host);
            install(ws, &dir, yes, json)
        }
        SkillsCommand::Remove { name, json } => {
            let r = open(ws)?.remove_skill(&name)?;
            recorded(&r, json, &format!("removed skill {name}"));
            Ok(0)
        }
        SkillsCommand::Verify { json } => {
            let v = open(ws)?.verify_skills()?;
            if json {
                outln!("{}", pretty(&v));
            } else {
                if v.skills.is_empty() {
                    outln!("no installed skills");
                }
                for s in &v.skills {
                    outln!(
                        "{:<28} {:<14} {}",
                        s.name,
                        s.state,
                        s.now.as_deref().or(s.approved.as_deref()).unwrap_or("")
                    );
                    if !s.changed.is_empty() {
                        outln!(
                            "    [{}] changed after approval: {}",
                            s.code.as_deref().unwrap_or("W-SKILL-010"),
                            s.changed.join(", ")
                        );
                    }
                }
            }
            Ok(if v.ok { 0 } else { 1 })
        }
        SkillsCommand::Trust { revoke, json } => {
            let r = open(ws)?.trust_workspace_skills(!revoke)?;
            let text = if revoke {
                format!(
                    "{}: project skills no longer used",
                    r.what.workspace.display()
                )
            } else {
                format!("{}: project skills trusted", r.what.workspace.display())
            };
            recorded(&r, json, &text);
            Ok(0)
        }
    }
}

fn install(ws: Option<&Path>, source: &Path, yes: bool, json: bool) -> Result<u8, Failure> {
    let host = open(ws)?;
    let (staged, review) = host.review_skill(source)?;
    // With --json, one document: the review when nothing is installed, else the install.
    if json && !yes {
        outln!("{}", pretty(&review));
    } else if !json {
        outln!("skill       {}", review.name);
        outln!("source      {}", review.source.display());
        outln!("description {}", review.description);
        if let Some(l) = &review.license {
            outln!("license     {l}");
        }
        if let Some(c) = &review.compatibility {
            outln!("compatibility {c}");
        }
        for (k, v) in &review.metadata {
            outln!("metadata    {k}: {v}");
        }
        if !review.allowed_tools.is_empty() {
            outln!(
                "allowed-tools {} (a request: Warrant grants nothing from it, policy decides every call)",
                review.allowed_tools.join(" ")
            );
        }
        outln!("digest      {}", review.digest);
        if let Some(old) = &review.replaces {
            outln!("replaces    the installed copy {old}");
        }
        let scripts = review.files.iter().filter(|f| f.script).count();
        outln!(
            "{} file(s), {scripts} script(s) (code the agent may run: read them)",
            review.files.len()
        );
        for f in &review.files {
            let mark = if f.script { "SCRIPT " } else { "" };
            outln!(
                "==== {mark}{} ({} bytes, {}) ====",
                f.path,
                f.size,
                f.digest
            );
            match &f.text {
                Some(t) => outln!("{t}"),
                None => outln!("(not text)"),
            }
        }
    }
    let via = if yes {
        "--yes"
    } else if std::io::stdin().is_terminal() {
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "Install skill `{}` ({})? [y/N] ",
            review.name, review.digest
        );
        let _ = err.flush();
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
        if !matches!(line.trim(), "y" | "Y" | "yes") {
            return Err(Failure {
                code: "W-SKILL-013".to_owned(),
                message: "not approved; nothing was installed".to_owned(),
                exit: 1,
            });
        }
        "terminal"
    } else {
        return Err(Failure::usage(
            "W-SKILL-013",
            "installing a skill needs a person's approval: answer on a terminal, or add --yes after reading what is shown; nothing was installed",
        ));
    };
    let r = host.install_skill(&staged, &review.digest, via)?;
    if json {
        outln!("{}", pretty(&r));
    } else {
        recorded(
            &r,
            false,
            &format!(
                "installed skill {} into {} ({})",
                r.what.name,
                r.what.dir.display(),
                r.what.record.digest
            ),
        );
    }
    Ok(0)
}
