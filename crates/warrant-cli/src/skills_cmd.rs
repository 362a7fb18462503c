//! `warrant skills list|show|install|approve|remove|verify|trust`: Agent Skills (SKILL.md).
//! Parsing, the person's confirmation and printing only; the operations are `warrant-host`'s
//! (`skills`). Everything a skill wrote is printed through `outln!`, which neutralises
//! terminal control sequences.

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};

use clap::Subcommand;
use warrant_host::Host;
use warrant_text::features::skills as words;

use crate::Failure;
use crate::memory_cmd::say;

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

pub fn dispatch(ws: Option<&Path>, command: SkillsCommand) -> Result<u8, Failure> {
    let host = Host::open(&crate::at(ws), crate::notices())?;
    match command {
        SkillsCommand::List { json } => say(json, &host.skills()?, words::catalog),
        SkillsCommand::Show { name, json } => say(json, &host.skill(&name)?, words::skill),
        SkillsCommand::Install { source, yes, json } => return install(&host, &source, yes, json),
        SkillsCommand::Approve { name, yes, json } => {
            return install(&host, &host.installed_skill_dir(&name), yes, json);
        }
        SkillsCommand::Remove { name, json } => {
            say(json, &host.remove_skill(&name)?, |r| {
                words::removed(r, &name)
            });
        }
        SkillsCommand::Verify { json } => {
            let v = host.verify_skills()?;
            say(json, &v, words::verified);
            return Ok(if v.ok { 0 } else { 1 });
        }
        SkillsCommand::Trust { revoke, json } => {
            let r = host.trust_workspace_skills(!revoke)?;
            say(json, &r, |r| words::trust(r, revoke));
        }
    }
    Ok(0)
}

/// Shows what would be installed and asks the person at the terminal (or takes `--yes`).
fn install(host: &Host, source: &Path, yes: bool, json: bool) -> Result<u8, Failure> {
    let (staged, review) = host.review_skill(source)?;
    // With --json, one document: the review when nothing is installed, else the install.
    if !(json && yes) {
        say(json, &review, words::review);
    }
    let via = if yes {
        "--yes"
    } else if std::io::stdin().is_terminal() {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "{}", words::install_question(&review));
        let _ = err.flush();
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
        if !matches!(line.trim(), "y" | "Y" | "yes") {
            let no = Failure::usage("W-SKILL-013", "not approved; nothing was installed");
            return Err(Failure { exit: 1, ..no });
        }
        "terminal"
    } else {
        return Err(Failure::usage(
            "W-SKILL-013",
            "installing a skill needs a person's approval: answer on a terminal, or add --yes after reading what is shown; nothing was installed",
        ));
    };
    let r = host.install_skill(&staged, &review.digest, via)?;
    say(json, &r, words::installed);
    Ok(0)
}
