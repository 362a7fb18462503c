//! `warrant profiles list|show|validate|digest|diff|apply|proposals`: agent profiles (Open
//! Agent Profile 1.0). Parsing and printing only; the operations are `warrant-host`'s
//! (`agent_profiles`). Not subprocess profiles (`[profiles.*]` of the configuration).

use std::path::{Path, PathBuf};

use clap::Subcommand;
use warrant_host::Host;
use warrant_text::features::profiles as words;

use crate::Failure;
use crate::memory_cmd::say;

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
    /// atomically; its proposals are raised as requests for a person, never applied.
    Apply {
        delta: PathBuf,
        /// You, a person, approve the delta (required unless the profile's
        /// lifecycle.writeback is `auto`).
        #[arg(long)]
        approve: bool,
        #[arg(long)]
        json: bool,
    },
    /// Proposals to change a profile's metadata or spec: the requests a person approves
    /// (`requests answer REQ --text approve`) or declines.
    Proposals {
        /// Include approved, declined and expired ones.
        #[arg(long)]
        all: bool,
        #[arg(long)]
        json: bool,
    },
}

pub fn dispatch(ws: Option<&Path>, command: ProfilesCommand) -> Result<u8, Failure> {
    if let ProfilesCommand::Validate { file, json } = &command {
        let r = warrant_host::agent_profiles::validate(file);
        say(*json, &r, words::validated);
        return Ok(if r.ok { 0 } else { 1 });
    }
    let host = Host::open(&crate::at(ws), crate::notices())?;
    match command {
        ProfilesCommand::Validate { .. } => {}
        ProfilesCommand::List { json } => say(json, &host.agent_profiles(), words::catalog),
        ProfilesCommand::Show { profile, json } => {
            say(json, &host.agent_profile(&profile)?, words::profile);
        }
        ProfilesCommand::Digest { profile, json } => {
            say(json, &host.agent_profile_digest(&profile)?, words::digests);
        }
        ProfilesCommand::Diff { from, to, json } => {
            say(json, &host.agent_profile_diff(&from, &to)?, words::diff);
        }
        ProfilesCommand::Apply {
            delta,
            approve,
            json,
        } => say(
            json,
            &host.apply_agent_delta(&delta, approve)?,
            words::applied,
        ),
        ProfilesCommand::Proposals { all, json } => {
            say(
                json,
                host.agent_proposals(all)?.as_slice(),
                words::proposals,
            );
        }
    }
    Ok(0)
}
