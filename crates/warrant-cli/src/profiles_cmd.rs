//! `warrant profiles list|show|validate|digest|diff|apply|proposals`: agent profiles (Open
//! Agent Profile 1.0). Parsing and printing only; the operations are `warrant-host`'s
//! (`agent_profiles`). Not subprocess profiles (`[profiles.*]` of the configuration).

use std::path::{Path, PathBuf};

use clap::Subcommand;
use warrant_host::Host;

use crate::{Failure, pretty};

#[derive(Subcommand, Debug)]
pub enum ProfilesCommand {
    /// The agent profiles of every discovery root (managed, user, ~/.agentprofiles, the
    /// workspace's .agents/), collisions reported.
    List {
        #[arg(long)]
        json: bool,
    },
    /// One agent profile (a name or a file): where it came from, its digests, and what it
    /// allows each tool here before policy (which still decides and can only narrow further).
    Show {
        profile: String,
        #[arg(long)]
        json: bool,
    },
    /// Validate a profile or state delta file against OAP 1.0: every finding with its JSON
    /// Pointer. Exit 1 when invalid. Needs no installation.
    Validate {
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// The profile and spec digests (sha256 over RFC 8785 canonical JSON).
    Digest {
        profile: String,
        #[arg(long)]
        json: bool,
    },
    /// What changed from one profile to another (names or files); changes that could widen
    /// the agent's authority are marked.
    Diff {
        from: String,
        to: String,
        #[arg(long)]
        json: bool,
    },
    /// Apply a session's state delta to its profile: revision checked, state only, written
    /// atomically; its proposals are queued for a person, never applied.
    Apply {
        delta: PathBuf,
        /// You, a person, approve the delta (required unless the profile's
        /// lifecycle.writeback is `auto`).
        #[arg(long)]
        approve: bool,
        #[arg(long)]
        json: bool,
    },
    /// Proposals to change a profile's metadata or spec, waiting for a person.
    Proposals {
        #[arg(long)]
        json: bool,
    },
}

fn open(ws: Option<&Path>) -> Result<Host, Failure> {
    Ok(Host::open(&crate::at(ws), crate::notices())?)
}

pub fn dispatch(ws: Option<&Path>, command: ProfilesCommand) -> Result<u8, Failure> {
    match command {
        ProfilesCommand::Validate { file, json } => {
            let r = warrant_host::agent_profiles::validate(&file);
            if json {
                outln!("{}", pretty(&r));
            } else {
                if r.ok {
                    outln!("{}: valid {}", r.path, r.kind);
                    if let (Some(p), Some(s)) = (&r.profile_digest, &r.spec_digest) {
                        outln!("  profile digest {p}");
                        outln!("  spec digest    {s}");
                    }
                } else {
                    outln!("{}: invalid", r.path);
                }
                for e in &r.errors {
                    outln!("  error   {e}");
                }
                for w in &r.warnings {
                    outln!("  warning {w}");
                }
            }
            Ok(if r.ok { 0 } else { 1 })
        }
        ProfilesCommand::List { json } => {
            let cat = open(ws)?.agent_profiles();
            if json {
                outln!("{}", pretty(&cat));
                return Ok(0);
            }
            if cat.profiles.is_empty() {
                outln!("no agent profiles");
            }
            for p in &cat.profiles {
                outln!(
                    "{:<24} {:<9} r{:<4} {}",
                    p.name,
                    p.root.trust(),
                    p.revision.unwrap_or(1),
                    p.path.display()
                );
            }
            for s in &cat.shadowed {
                outln!(
                    "shadowed: {} ({}) by {}",
                    s.path.display(),
                    s.root.label(),
                    s.by.display()
                );
            }
            for p in &cat.problems {
                outln!("problem: [{}] {}", p.code, p.message);
            }
            outln!("roots (most authoritative first):");
            for r in &cat.roots {
                outln!("  {:<36} {}", r.kind.label(), r.dir.display());
            }
            Ok(0)
        }
        ProfilesCommand::Show { profile, json } => {
            let v = open(ws)?.agent_profile(&profile)?;
            if json {
                outln!("{}", pretty(&v));
                return Ok(0);
            }
            outln!("{} (revision {}, trust {})", v.name, v.revision, v.trust);
            outln!("  {}", v.description);
            outln!("  file           {}", v.path.display());
            if !v.extends.is_empty() {
                outln!("  extends        {}", v.extends.join(", "));
            }
            outln!("  profile digest {}", v.profile_digest);
            outln!("  spec digest    {}", v.spec_digest);
            outln!("at most (policy decides, and can only narrow further):");
            for (family, c) in &v.families {
                outln!("  {:<14} {}", pretty_family(family), c.as_str());
            }
            for (tool, c) in &v.tools {
                outln!("  {tool:<20} {}", c.as_str());
            }
            if !v.adjustments.is_empty() {
                outln!("dropped, narrowed or substituted:");
                for a in &v.adjustments {
                    outln!(
                        "  {}: {} -> {} ({})",
                        a.field,
                        a.requested,
                        a.effective,
                        a.reason
                    );
                }
            }
            for w in &v.warnings {
                outln!("warning {w}");
            }
            Ok(0)
        }
        ProfilesCommand::Digest { profile, json } => {
            let d = open(ws)?.agent_profile_digest(&profile)?;
            if json {
                outln!("{}", pretty(&d));
            } else {
                outln!("{} revision {}", d.name, d.revision);
                outln!("  profile {}", d.profile_digest);
                outln!("  spec    {}", d.spec_digest);
            }
            Ok(0)
        }
        ProfilesCommand::Diff { from, to, json } => {
            let d = open(ws)?.agent_profile_diff(&from, &to)?;
            if json {
                outln!("{}", pretty(&d));
                return Ok(0);
            }
            if d.changes.is_empty() {
                outln!("no differences");
            }
            for c in &d.changes {
                let mark = if c.widens {
                    "WIDENS "
                } else if c.sensitive {
                    "review "
                } else {
                    "       "
                };
                let show = |v: &Option<serde_json::Value>| {
                    v.as_ref().map_or("(absent)".to_owned(), |v| v.to_string())
                };
                outln!(
                    "{mark}{}: {} -> {}",
                    c.pointer,
                    show(&c.before),
                    show(&c.after)
                );
            }
            Ok(0)
        }
        ProfilesCommand::Apply {
            delta,
            approve,
            json,
        } => {
            let v = open(ws)?.apply_agent_delta(&delta, approve)?;
            if json {
                outln!("{}", pretty(&v));
                return Ok(0);
            }
            let a = &v.applied;
            if a.operations == 0 {
                outln!("{}: no state operations; nothing written", a.profile);
            } else {
                outln!(
                    "{}: revision {} -> {} ({} operations), {}",
                    a.profile,
                    a.from_revision,
                    a.to_revision,
                    a.operations,
                    a.path.display()
                );
            }
            for w in &a.warnings {
                outln!("  warning: {w}");
            }
            for (p, id) in a.proposals.iter().zip(&v.queued) {
                outln!(
                    "  proposal {id} ({} risk{}): {} {} — {}",
                    p.risk,
                    if p.risk_raised {
                        ", raised by Warrant"
                    } else {
                        ""
                    },
                    p.op,
                    p.path,
                    p.rationale
                );
            }
            if !v.queued.is_empty() {
                outln!("  proposals are never applied: a person edits the profile if they agree");
            }
            Ok(0)
        }
        ProfilesCommand::Proposals { json } => {
            let all = open(ws)?.agent_proposals()?;
            if json {
                outln!("{}", pretty(&all));
            } else if all.is_empty() {
                outln!("no proposals waiting");
            } else {
                for p in &all {
                    outln!(
                        "{} {} risk: {} {} on {} r{} — {}",
                        p.id,
                        p.proposal.risk,
                        p.proposal.op,
                        p.proposal.path,
                        p.profile,
                        p.revision,
                        p.proposal.rationale
                    );
                }
            }
            Ok(0)
        }
    }
}

fn pretty_family(f: &warrant_kernel::agent_profile::Family) -> &'static str {
    use warrant_kernel::agent_profile::Family;
    match f {
        Family::Shell => "shell",
        Family::Edit => "edit",
        Family::Network => "network",
        Family::MemoryRead => "memory read",
        Family::MemoryWrite => "memory write",
        Family::Default => "default",
    }
}
