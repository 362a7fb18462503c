//! `warrant graph validate|plan|run|resume|record`: Agentic Graph Specification 1.0 documents.
//! Parsing and printing only; the operations are `warrant-host`'s (`graph`).

use std::path::{Path, PathBuf};

use clap::Subcommand;
use warrant_host::Host;
use warrant_host::fault::Faulty;
use warrant_host::graph::GraphRunRequest;

use warrant_text::features::graph as words;

use crate::Failure;
use crate::commands::{finish, prompter_for};
use crate::memory_cmd::say;
use crate::output::Printer;

#[derive(Subcommand, Debug)]
pub enum GraphCommand {
    /// Validate a graph (`.agraph.yaml` / `.agraph.json`) against AGS 1.0: every finding with
    /// its AG code and place, and the graph digest. Exit 1 when invalid. Needs no installation.
    Validate {
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// What a run would do, without running anything: the order, each node's declared
    /// permissions put to this installation's policy (allow / ask / deny), the gates, and
    /// every point where a person would be asked.
    Plan {
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Run a graph as one governed run: each node a step through the ring, its permissions a
    /// ceiling under policy; a gate parks the run for a person (exit 10).
    Run {
        file: PathBuf,
        /// PROVIDER:MODEL, e.g. `scripted:PATH` or `openai:gpt-4.1`.
        #[arg(long)]
        model: Option<String>,
        /// A graph parameter, NAME=VALUE (the value read as JSON when it is JSON).
        #[arg(long = "param", value_name = "NAME=VALUE")]
        params: Vec<String>,
        /// Stop the run at its next step after this long (e.g. `30m`).
        #[arg(long)]
        deadline: Option<String>,
        #[arg(long)]
        json: bool,
        #[arg(long, default_value = "auto", value_parser = ["auto", "always", "never"])]
        prompt: String,
        /// Write the AGS run record (JSON) here when the run ends or parks.
        #[arg(long, value_name = "FILE")]
        record: Option<PathBuf>,
    },
    /// Continue a parked graph run; refused when the graph file changed since it started.
    Resume {
        run: String,
        #[arg(long)]
        json: bool,
        #[arg(long, default_value = "auto", value_parser = ["auto", "always", "never"])]
        prompt: String,
        /// Write the AGS run record (JSON) here when the run ends or parks.
        #[arg(long, value_name = "FILE")]
        record: Option<PathBuf>,
    },
    /// The AGS run record of a graph run (`application/vnd.agentic-graph-run+json`), from its
    /// journal: JSON on standard output, or in FILE with `--out`.
    Record {
        run: String,
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Accepted for the CLI contract; the record is JSON either way.
        #[arg(long)]
        json: bool,
    },
}

/// Writes the run record of `run` to `path` (or prints it).
fn record(host: &Host, run: &warrant_core::RunId, path: Option<&Path>) -> Result<(), Failure> {
    let text = crate::pretty(&host.graph_record(run)?);
    match path {
        Some(p) => std::fs::write(p, format!("{text}\n")).map_err(|e| {
            Failure::usage(
                warrant_host::graph::RECORD_UNWRITABLE,
                format!("cannot write the run record to {}: {e}", p.display()),
            )
        }),
        None => {
            outln!("{text}");
            Ok(())
        }
    }
}

pub fn dispatch(ws: Option<&Path>, command: GraphCommand) -> Result<u8, Failure> {
    let (json, prompt, out, what) = match command {
        GraphCommand::Validate { file, json } => {
            let v = warrant_host::graph::validate(&file);
            say(json, &v, words::validation);
            return Ok(if v.ok { 0 } else { 1 });
        }
        GraphCommand::Plan { file, json } => {
            let p = warrant_host::graph::plan(&crate::at(ws), crate::notices(), &file)?;
            say(json, &p, words::plan);
            return Ok(0);
        }
        GraphCommand::Run {
            file,
            model,
            params,
            deadline,
            json,
            prompt,
            record,
        } => (json, prompt, record, Ok((file, model, params, deadline))),
        GraphCommand::Resume {
            run,
            json,
            prompt,
            record,
        } => (
            json,
            prompt,
            record,
            Err(warrant_host::runs::parse_run(&run)?),
        ),
        GraphCommand::Record { run, out, json: _ } => {
            let run = warrant_host::runs::parse_run(&run)?;
            record(
                &Host::open(&crate::at(ws), crate::notices())?,
                &run,
                out.as_deref(),
            )?;
            return Ok(0);
        }
    };
    let host = Host::open(&crate::at(ws), crate::notices())?;
    let printer = Printer::new(json);
    let observer = Faulty::from_env(&printer);
    let mut prompter = prompter_for(&prompt, &host.identity.principal);
    let driven = match what {
        Ok((path, model, params, deadline)) => {
            let request = GraphRunRequest {
                path,
                model: warrant_host::runs::model_spec(&host.settings, model.as_deref())?,
                params,
                deadline: warrant_host::runs::deadline_from(deadline.as_deref())?,
            };
            host.graph_run(request, &observer, prompter.as_mut())?
        }
        Err(run) => host.graph_resume(&run, &observer, prompter.as_mut())?,
    };
    if let Some(out) = &out {
        record(&host, &driven.run, Some(out))?;
    }
    Ok(finish(driven.exit, &driven.run, json))
}
