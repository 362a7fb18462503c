//! `warrant graph validate|plan|run|resume|record`: Agentic Graph Specification 1.0 documents.
//! Parsing and printing only; the operations are `warrant-host`'s (`graph`).

use std::path::{Path, PathBuf};

use clap::Subcommand;
use warrant_host::Host;
use warrant_host::fault::Faulty;
use warrant_host::graph::GraphRunRequest;

use crate::commands::{finish, prompter_for};
use crate::output::Printer;
use crate::{Failure, pretty};

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
    let text = pretty(&host.graph_record(run)?);
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

fn open(ws: Option<&Path>) -> Result<Host, Failure> {
    Ok(Host::open(&crate::at(ws), crate::notices())?)
}

pub fn dispatch(ws: Option<&Path>, command: GraphCommand) -> Result<u8, Failure> {
    match command {
        GraphCommand::Validate { file, json } => {
            let v = warrant_host::graph::validate(&file);
            if json {
                outln!("{}", pretty(&v));
            } else {
                outln!("{}: {}", v.path, if v.ok { "valid" } else { "invalid" });
                if let Some(d) = &v.graph_digest {
                    outln!("  graph digest {d}");
                }
                for f in &v.findings {
                    let at = if f.pointer.is_empty() {
                        String::new()
                    } else {
                        format!(" (at {})", f.pointer)
                    };
                    outln!("  {:<7} {} {}{at}", f.severity, f.code, f.message);
                }
            }
            Ok(if v.ok { 0 } else { 1 })
        }
        GraphCommand::Plan { file, json } => {
            let p = warrant_host::graph::plan(&crate::at(ws), crate::notices(), &file)?;
            if json {
                outln!("{}", pretty(&p));
                return Ok(0);
            }
            outln!("{} — {} ({})", p.id, p.title, p.graph_digest);
            outln!("order: {}", p.order.join(" → "));
            for n in &p.nodes {
                outln!("{} [{}] {}", n.id, n.kind, n.title);
                if !n.after.is_empty() {
                    outln!("    after       {} (join {})", n.after.join(", "), n.join);
                }
                if let Some(w) = &n.when {
                    outln!("    when        {w}");
                }
                for perm in &n.permissions {
                    outln!(
                        "    {:<11} {} — {}",
                        perm.verdict,
                        perm.permission,
                        perm.reason
                    );
                }
                if let Some(g) = &n.gate {
                    outln!(
                        "    gate        {} ({}), on reject: {}",
                        g.mode,
                        g.roles.join(", "),
                        g.on_reject
                    );
                }
                if n.max_attempts > 1 || !n.fallback.is_empty() {
                    outln!(
                        "    failure     {} attempt(s); fallback: {}",
                        n.max_attempts,
                        n.fallback.join(", ")
                    );
                }
            }
            outln!("asks a person:");
            for a in &p.asks_person {
                outln!("  {a}");
            }
            if p.asks_person.is_empty() {
                outln!("  nothing");
            }
            if !p.runnable {
                outln!(
                    "not runnable here (Warrant executes AGS at level {}):",
                    p.level
                );
                for u in &p.unsupported {
                    outln!("  {u}");
                }
            }
            Ok(0)
        }
        GraphCommand::Run {
            file,
            model,
            params,
            deadline,
            json,
            prompt,
            record: out,
        } => {
            let host = open(ws)?;
            let request = GraphRunRequest {
                path: file,
                model: warrant_host::runs::model_spec(&host.settings, model.as_deref())?,
                params,
                deadline: warrant_host::runs::deadline_from(deadline.as_deref())?,
            };
            let printer = Printer::new(json);
            let observer = Faulty::from_env(&printer);
            let mut prompter = prompter_for(&prompt, &host.identity.principal);
            let driven = host.graph_run(request, &observer, prompter.as_mut())?;
            if let Some(out) = &out {
                record(&host, &driven.run, Some(out))?;
            }
            Ok(finish(driven.exit, &driven.run, json))
        }
        GraphCommand::Resume {
            run,
            json,
            prompt,
            record: out,
        } => {
            let run = warrant_host::runs::parse_run(&run)?;
            let host = open(ws)?;
            let printer = Printer::new(json);
            let observer = Faulty::from_env(&printer);
            let mut prompter = prompter_for(&prompt, &host.identity.principal);
            let driven = host.graph_resume(&run, &observer, prompter.as_mut())?;
            if let Some(out) = &out {
                record(&host, &driven.run, Some(out))?;
            }
            Ok(finish(driven.exit, &driven.run, json))
        }
        GraphCommand::Record { run, out, json: _ } => {
            let run = warrant_host::runs::parse_run(&run)?;
            record(&open(ws)?, &run, out.as_deref())?;
            Ok(0)
        }
    }
}
