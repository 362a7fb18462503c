//! `warrant artifacts verify FILE [--pubkeys KEYS]` and `warrant artifacts list [--run RUN]`:
//! an artifact's signed provenance checked against the file and printed as its chain of
//! custody; with `--pubkeys` no installation is needed (an auditor's machine).

use std::path::{Path, PathBuf};

use clap::Subcommand;
use warrant_host::Host;
use warrant_text::features::artifacts as words;

use crate::Failure;
use crate::memory_cmd::say;

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
            say(json, &verdict, words::verdict);
            Ok(if verdict.ok { 0 } else { 1 })
        }
        ArtifactsCommand::List { run, json } => {
            let host = Host::open(&crate::at(ws), crate::notices())?;
            let all = host.artifact_list(run.as_deref());
            say(json, all.as_slice(), words::listed);
            Ok(if all.iter().all(|v| v.ok) { 0 } else { 1 })
        }
    }
}

/// `warrant runs export RUN --out FILE`.
pub fn runs_export(ws: Option<&Path>, run: &str, out: &Path, json: bool) -> Result<u8, Failure> {
    let host = Host::open(&crate::at(ws), crate::notices())?;
    say(json, &host.runs_export(run, out)?, words::exported);
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
        Some(keys) => warrant_host::bundle::verify_bundle_with(file, keys)?,
        None => Host::open(&crate::at(ws), crate::notices())?.runs_verify(file)?,
    };
    say(json, &report, |r| words::bundle(r, file));
    Ok(if report.ok { 0 } else { 1 })
}
