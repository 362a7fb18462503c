//! `warrant artifacts verify FILE [--pubkeys KEYS]` and `warrant artifacts list [--run RUN]`:
//! an artifact's signed provenance checked against the file and printed as its chain of
//! custody; with `--pubkeys` no installation is needed (an auditor's machine).

use std::path::{Path, PathBuf};

use clap::Subcommand;
use warrant_artifacts::{ArtifactVerdict, KeyStanding};
use warrant_host::Host;

use crate::{Failure, pretty};

#[derive(Subcommand, Debug)]
pub enum ArtifactsCommand {
    /// The artifacts in the workspace (files with provenance beside them), each verified.
    List {
        /// Only those a run made.
        #[arg(long)]
        run: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Check a file against its `FILE.intoto.jsonl`: the checksum binding, the signature, and
    /// who asked, who approved, which run. Exit 1 when anything fails, saying which part.
    Verify {
        file: PathBuf,
        /// A file of trusted public keys (`warrant audit keys export`): no installation needed.
        #[arg(long, value_name = "KEYS")]
        pubkeys: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
}

pub fn dispatch(ws: Option<&Path>, command: ArtifactsCommand) -> Result<u8, Failure> {
    match command {
        ArtifactsCommand::Verify {
            file,
            pubkeys,
            json,
        } => {
            let verdict = match pubkeys {
                Some(keys) => warrant_host::artifacts::verify_with_keys(&file, &keys)?,
                None => Host::open(&crate::at(ws), crate::notices())?.artifact_verify(&file),
            };
            if json {
                outln!("{}", pretty(&verdict));
            } else {
                print_verdict(&verdict);
            }
            Ok(if verdict.ok { 0 } else { 1 })
        }
        ArtifactsCommand::List { run, json } => {
            let host = Host::open(&crate::at(ws), crate::notices())?;
            let all = host.artifact_list(run.as_deref());
            if json {
                outln!("{}", pretty(&all));
            } else if all.is_empty() {
                outln!("no artifacts with provenance in this workspace");
            } else {
                for v in &all {
                    let (kind, run) = v
                        .predicate
                        .as_ref()
                        .map_or(("?", "?"), |p| (p.kind.as_str(), p.run.as_str()));
                    outln!(
                        "{}  {kind:<12} {run}  {}",
                        if v.ok { "ok    " } else { "FAILED" },
                        v.file
                    );
                }
            }
            Ok(if all.iter().all(|v| v.ok) { 0 } else { 1 })
        }
    }
}

fn print_verdict(v: &ArtifactVerdict) {
    if v.ok {
        outln!("ok       {} (sha256 {})", v.file, v.sha256);
    } else {
        outln!("FAILED   {}", v.file);
    }
    for p in &v.problems {
        outln!("  {:<10} [{}] {}", p.part, p.code, p.message);
    }
    if let (Some(kid), Some(standing)) = (&v.kid, v.key) {
        let how = match standing {
            KeyStanding::Current => "the installation's current key",
            KeyStanding::Retired => "a retired key of this installation (signed before a rotation)",
            KeyStanding::Listed => "a key of the list given",
        };
        outln!("  signed   by {kid}, {how}");
    }
    if let Some(c) = &v.custody {
        outln!("  asked    {}", c.asked_by);
        outln!("  made by  {} ({}, {})", c.made_by, c.tool, c.model);
        outln!("  approved {}", c.approved);
        outln!("  run      {}", c.run);
        outln!("  at       {}", c.created_at);
        if c.untrusted_input {
            outln!("  input    the run had seen untrusted content before this was made");
        }
    }
}

/// `warrant runs export RUN --out FILE`.
pub fn runs_export(ws: Option<&Path>, run: &str, out: &Path, json: bool) -> Result<u8, Failure> {
    let host = Host::open(&crate::at(ws), crate::notices())?;
    let exported = host.runs_export(run, out)?;
    if json {
        outln!("{}", pretty(&exported));
    } else {
        outln!(
            "exported {} to {}: {} members, {} bytes, sha256 {}",
            exported.run,
            exported.out,
            exported.members,
            exported.bytes,
            exported.sha256
        );
    }
    Ok(0)
}

/// `warrant runs verify FILE [--pubkeys KEYS]`.
pub fn runs_verify(
    ws: Option<&Path>,
    file: &Path,
    pubkeys: Option<&Path>,
    json: bool,
) -> Result<u8, Failure> {
    let report = match pubkeys {
        Some(keys) => {
            let keys = warrant_audit::PublicKeys::load(keys)
                .map_err(|e| Failure::coded(&e, crate::EXIT_USAGE))?;
            warrant_host::bundle::verify_bundle(file, &keys)?
        }
        None => Host::open(&crate::at(ws), crate::notices())?.runs_verify(file)?,
    };
    if json {
        outln!("{}", pretty(&report));
    } else {
        outln!(
            "{} {} (run {}, {} members, signed by {})",
            if report.ok { "ok    " } else { "FAILED" },
            file.display(),
            report.run.as_deref().unwrap_or("?"),
            report.members,
            report.signed_by.as_deref().unwrap_or("?")
        );
        for p in &report.problems {
            outln!("  problem  [{}] {}", p.code, p.message);
        }
        for p in &report.proves {
            outln!("  proves   {p}");
        }
        for c in &report.cannot {
            outln!("  cannot   {c}");
        }
    }
    Ok(if report.ok { 0 } else { 1 })
}
