//! `warrant secrets scan PATH… [--json | --sarif] [--baseline FILE] [--rules FILE]`, and the
//! scanner every run uses: gitleaks' default rules plus each configuration layer's
//! `[secrets] rules` file (merged by `warrant_secrets::scanner_for_layers`: lower layers only
//! add). Exit 0 when clean, 1 when something is found, 2 on an error.

use std::path::{Path, PathBuf};

use clap::Subcommand;

use crate::Failure;

/// Exit code of `secrets scan` when it found something.
pub const EXIT_FOUND: u8 = 1;

#[derive(Subcommand, Debug)]
pub enum SecretsCommand {
    /// Scan files and directories (skipping what `.gitignore` excludes, and `.git/`).
    /// Exit 0: nothing found; 1: findings; 2: error. Secrets are never printed, only a
    /// redacted form and a fingerprint.
    Scan {
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
        /// One JSON document on standard output.
        #[arg(long, conflicts_with = "sarif")]
        json: bool,
        /// SARIF 2.1.0 on standard output (for code-scanning dashboards).
        #[arg(long)]
        sarif: bool,
        /// Accept the findings listed in FILE (a previous `--json` report, a JSON array of
        /// fingerprints, or one fingerprint per line).
        #[arg(long, value_name = "FILE")]
        baseline: Option<PathBuf>,
        /// Scan with this gitleaks configuration instead of the configured rules.
        #[arg(long, value_name = "FILE")]
        rules: Option<PathBuf>,
    },
}

pub fn dispatch(ws: Option<&Path>, command: SecretsCommand) -> Result<u8, Failure> {
    let SecretsCommand::Scan {
        paths,
        json,
        sarif,
        baseline,
        rules,
    } = command;
    let at = crate::at(ws);
    let report = warrant_host::controls::scan(&at, &paths, baseline.as_deref(), rules.as_deref())?;
    if sarif {
        outln!(
            "{}",
            crate::pretty(&report.sarif(env!("CARGO_PKG_VERSION")))
        );
    } else if json {
        outln!("{}", crate::pretty(&report.json()));
    } else {
        use std::io::Write as _;
        let _ = write!(std::io::stdout().lock(), "{}", report.text());
    }
    Ok(if report.findings.is_empty() {
        0
    } else {
        EXIT_FOUND
    })
}
