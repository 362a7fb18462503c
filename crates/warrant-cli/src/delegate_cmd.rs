//! `warrant delegate issue|show|verify|revoke`: delegation tokens, printed. `verify` with
//! `--pubkeys` needs no installation (a verifier that holds only the public key).

use std::path::{Path, PathBuf};

use clap::Subcommand;
use warrant_core::RiskClass;
use warrant_host::delegation::{self, Against, IssueRequest, read_token};
use warrant_host::drive::duration_arg;
use warrant_text::features::delegation as words;

use crate::Failure;
use crate::memory_cmd::say;

#[derive(Subcommand, Debug)]
pub enum DelegateCommand {
    /// Hand part of your authority to HOLDER: a token signed with the installation's key.
    Issue {
        /// Who may present it: `actor@tenant`.
        #[arg(long)]
        holder: String,
        /// A verb it allows (`fs.read`, or `fs.*` for a kind); repeat for more.
        #[arg(long = "verb", required = true)]
        verbs: Vec<String>,
        /// A resource it allows: exact, or a prefix ending in `*`; repeat for more.
        #[arg(long = "resource", required = true)]
        resources: Vec<String>,
        /// The worst risk class allowed.
        #[arg(long, value_parser = RiskClass::ALL.map(RiskClass::as_str))]
        ceiling: String,
        /// How long it is valid (e.g. `1h`).
        #[arg(long, default_value = "1h")]
        ttl: String,
        /// Re-delegate: the token (a file) this one narrows, held by you.
        #[arg(long, value_name = "TOKEN")]
        from: Option<PathBuf>,
        /// Write the token here instead of standard output.
        #[arg(long)]
        out: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// What a token (a file) says, without verifying it.
    Show {
        token: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Verify a token (a file) for its holder: signature, holder, validity, revocation.
    Verify {
        token: PathBuf,
        /// Who presents it: `actor@tenant`.
        #[arg(long)]
        holder: String,
        /// Trusted public keys (`warrant audit keys export`): no installation needed.
        #[arg(long, value_name = "KEYS")]
        pubkeys: Option<PathBuf>,
        /// With `--pubkeys`: the revocation list file (`.warrant/delegations.revoked`).
        #[arg(long, value_name = "LIST", requires = "pubkeys")]
        revoked: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Revoke a token by id, for every process of the installation and in the list file.
    Revoke {
        id: String,
        #[arg(long, default_value = "revoked")]
        reason: String,
        #[arg(long)]
        json: bool,
    },
}

pub fn dispatch(ws: Option<&Path>, command: DelegateCommand) -> Result<u8, Failure> {
    match command {
        DelegateCommand::Issue {
            holder,
            verbs,
            resources,
            ceiling,
            ttl,
            from,
            out,
            json,
        } => {
            let ttl = duration_arg("ttl", &ttl, "1h")?;
            let from = from.as_deref().map(read_token).transpose()?;
            let ceiling = RiskClass::parse(&ceiling).unwrap_or(RiskClass::Read);
            let request = IssueRequest {
                holder,
                verbs,
                resources,
                ceiling,
                ttl,
                from,
            };
            let issued = delegation::issue(&crate::at(ws), crate::notices(), request)?;
            if let Some(path) = &out {
                delegation::write_token(path, &issued.token)?;
            }
            say(json, &issued, |i| match out {
                Some(_) => words::grant(&i.grant, &i.digest),
                None => i.token.clone(),
            });
        }
        DelegateCommand::Show { token, json } => {
            let shown = delegation::show(&read_token(&token)?)?;
            say(json, &shown, |s| words::grant(&s.grant, &s.digest));
        }
        DelegateCommand::Verify {
            token,
            holder,
            pubkeys,
            revoked,
            json,
        } => {
            let against = match pubkeys {
                Some(pubkeys) => Against::Offline { pubkeys, revoked },
                None => Against::Installation {
                    at: crate::at(ws),
                    notices: crate::notices(),
                },
            };
            let verified = delegation::verify(&read_token(&token)?, &holder, against)?;
            say(json, &verified, words::verified);
        }
        DelegateCommand::Revoke { id, reason, json } => {
            let revoked = delegation::revoke(&crate::at(ws), crate::notices(), &id, &reason)?;
            say(json, &revoked, words::revoked);
        }
    }
    Ok(0)
}
