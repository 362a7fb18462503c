//! `warrant delegate issue|show|verify|revoke`: delegation tokens, printed. `verify` with
//! `--pubkeys` needs no installation (a verifier that holds only the public key).

use std::path::{Path, PathBuf};

use clap::{Subcommand, ValueEnum};
use warrant_core::RiskClass;
use warrant_host::delegation::{self, Against, IssueRequest};
use warrant_host::drive::duration_arg;

use crate::{Failure, pretty};

/// The worst risk class a delegated action may have.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Ceiling {
    Read,
    Change,
    External,
    Destructive,
    Secret,
    Irreversible,
}

impl From<Ceiling> for RiskClass {
    fn from(c: Ceiling) -> Self {
        match c {
            Ceiling::Read => Self::Read,
            Ceiling::Change => Self::Change,
            Ceiling::External => Self::External,
            Ceiling::Destructive => Self::Destructive,
            Ceiling::Secret => Self::Secret,
            Ceiling::Irreversible => Self::Irreversible,
        }
    }
}

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
        #[arg(long, value_enum)]
        ceiling: Ceiling,
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

fn read_token(path: &Path) -> Result<String, Failure> {
    std::fs::read_to_string(path).map_err(|e| {
        Failure::usage(
            "W-DELEGATE-015",
            format!("cannot read the token {}: {e}", path.display()),
        )
    })
}

fn print_grant(grant: &warrant_kernel::delegation::Grant, digest: &warrant_core::Digest) {
    outln!(
        "token {}  {} -> {}",
        grant.id,
        grant.delegator,
        grant.holder
    );
    outln!(
        "  verbs:     {}",
        grant.verbs.iter().cloned().collect::<Vec<_>>().join(", ")
    );
    outln!(
        "  resources: {}",
        grant
            .resources
            .iter()
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    );
    outln!("  ceiling:   {:?}", grant.ceiling);
    outln!(
        "  valid:     {} .. {}",
        grant.issued_at.rfc3339(),
        grant.expires_at.rfc3339()
    );
    if let Some(parent) = &grant.parent {
        outln!("  narrows:   {parent}");
    }
    outln!("  digest:    {digest}");
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
            let issued = delegation::issue(
                &crate::at(ws),
                crate::notices(),
                IssueRequest {
                    holder,
                    verbs,
                    resources,
                    ceiling: ceiling.into(),
                    ttl,
                    from,
                },
            )?;
            if let Some(path) = &out {
                std::fs::write(path, format!("{}\n", issued.token)).map_err(|e| {
                    Failure::usage(
                        "W-DELEGATE-016",
                        format!("cannot write the token to {}: {e}", path.display()),
                    )
                })?;
            }
            if json {
                outln!("{}", pretty(&issued));
            } else if out.is_some() {
                print_grant(&issued.grant, &issued.digest);
            } else {
                outln!("{}", issued.token);
            }
            Ok(0)
        }
        DelegateCommand::Show { token, json } => {
            let shown = delegation::show(&read_token(&token)?)?;
            if json {
                outln!("{}", pretty(&shown));
            } else {
                print_grant(&shown.grant, &shown.digest);
            }
            Ok(0)
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
            if json {
                outln!("{}", pretty(&verified));
            } else {
                outln!("verified: signed by {}", verified.kid);
                print_grant(&verified.grant, &verified.digest);
            }
            Ok(0)
        }
        DelegateCommand::Revoke { id, reason, json } => {
            let revoked = delegation::revoke(&crate::at(ws), crate::notices(), &id, &reason)?;
            if json {
                outln!("{}", pretty(&revoked));
            } else {
                outln!(
                    "{} {} (list for offline verifiers: {})",
                    if revoked.newly {
                        "revoked"
                    } else {
                        "already revoked:"
                    },
                    revoked.id,
                    revoked.list.display()
                );
            }
            Ok(0)
        }
    }
}
