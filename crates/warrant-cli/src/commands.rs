//! The dispatch of every command, and the commands that start, drive, stop, answer and show
//! runs: each calls one operation of the application layer (`warrant-host`), prints its view
//! as `warrant-text` words it, and returns the exit code of the contract.

use std::io::IsTerminal;
use std::path::Path;

use clap::Subcommand;
use warrant_agent::RunExit;
use warrant_core::{Principal, PrincipalKind, RunId};
use warrant_host::Host;
use warrant_host::fault::Faulty;
use warrant_host::runs::{Resumed, parse_run};
use warrant_kernel::{Answer, NoPrompter, Prompter, Resolution};
use warrant_text::ops::runs as words;

use crate::output::Printer;
use crate::prompt::TerminalPrompter;
use crate::{Cli, Command, EXIT_USAGE, Failure, emit, lines, pretty};

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// PROVIDER:MODEL, e.g. `scripted:PATH`, `openai:gpt-4.1` or `anthropic:claude-sonnet-4-5`
    /// (default: $WARRANT_MODEL, else `[providers] model` of the configuration).
    #[arg(long)]
    model: Option<String>,
    /// Print events as JSON lines.
    #[arg(long)]
    json: bool,
    /// When to ask for approvals at this terminal: `auto` (when stdin is a terminal),
    /// `always` (read answers from stdin), `never` (park and exit 10).
    #[arg(long, default_value = "auto", value_parser = ["auto", "always", "never"])]
    prompt: String,
    /// Stop the run at its next effect boundary after this long (e.g. `90s`, `10m`, `2h`);
    /// a running command is killed.
    #[arg(long, value_name = "DURATION")]
    deadline: Option<String>,
    /// Work under this agent profile (Open Agent Profile: a name from `warrant profiles
    /// list`, or a `.agent.yaml|.json|.md` file); it can only narrow what policy allows.
    /// Not a subprocess profile (`[profiles.*]`, the sandbox of a command).
    #[arg(long = "profile", value_name = "AGENT_PROFILE")]
    agent_profile: Option<String>,
    /// Act under this delegation token (a file, `warrant delegate issue`): every effect must
    /// also be within it, and it must be unexpired and unrevoked at each.
    #[arg(long, value_name = "TOKEN")]
    delegation: Option<std::path::PathBuf>,
    /// What the agent should do.
    task: String,
}

#[derive(clap::Args, Debug)]
pub struct SubmitArgs {
    /// PROVIDER:MODEL (default: $WARRANT_MODEL, else `[providers] model`).
    #[arg(long)]
    model: Option<String>,
    #[arg(long, value_name = "DURATION")]
    deadline: Option<String>,
    /// The agent profile to work under, as for `run --profile`.
    #[arg(long = "profile", value_name = "AGENT_PROFILE")]
    agent_profile: Option<String>,
    /// The run acts under this delegation token (a file): the worker that drives it is held
    /// to the token before each effect, as `run --delegation` is.
    #[arg(long, value_name = "TOKEN")]
    delegation: Option<std::path::PathBuf>,
    #[arg(long)]
    json: bool,
    task: String,
}

#[derive(clap::Args, Debug)]
pub struct WorkerArgs {
    /// Exit when no run is waiting, instead of polling.
    #[arg(long)]
    once: bool,
    /// Lease length; the worker renews it at a third of this.
    #[arg(long, default_value_t = 30_000)]
    lease_ms: u64,
    /// How long to wait between polls when the queue is empty.
    #[arg(long, default_value_t = 1_000)]
    poll_ms: u64,
    /// The worker's name in leases (default: host:pid).
    #[arg(long)]
    id: Option<String>,
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
pub struct ResumeArgs {
    run: String,
    #[arg(long)]
    json: bool,
    #[arg(long, default_value = "auto", value_parser = ["auto", "always", "never"])]
    prompt: String,
}

#[derive(Subcommand, Debug)]
pub enum RunsCommand {
    List {
        #[arg(long)]
        json: bool,
    },
    Show {
        run: String,
        #[arg(long)]
        json: bool,
    },
    /// Stop a run at its next effect boundary (its running command is killed).
    Cancel {
        run: String,
        #[arg(long, default_value = "cancelled from the command line")]
        reason: String,
    },
    /// Decide what happened to an effect in doubt (it started before an interruption).
    Resolve {
        run: String,
        /// The step: the call id, or the sequence number of its `effect_in_doubt` event.
        #[arg(long)]
        step: String,
        /// `completed` (it happened), `retry` (run it again) or `failed`.
        #[arg(long = "as", value_parser = ["completed", "retry", "failed"])]
        resolution: String,
    },
    /// Write a run's evidence bundle: events, signed audit records and checkpoint, artifacts
    /// with provenance, policy and configuration, sandbox levels, public keys, and a signed
    /// manifest of every member (a deterministic zip).
    Export {
        run: String,
        #[arg(long, value_name = "FILE")]
        out: std::path::PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Check an evidence bundle offline and say what it proves and what it cannot. Exit 1
    /// when anything fails (a member added, removed or changed, a bad signature).
    Verify {
        file: std::path::PathBuf,
        /// Trusted public keys (`warrant audit keys export`): no installation needed.
        #[arg(long, value_name = "KEYS")]
        pubkeys: Option<std::path::PathBuf>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum PolicyCommand {
    /// Explain the decision for one action.
    Explain {
        /// The action, e.g. `fs.read` or `shell.exec`.
        #[arg(long)]
        action: String,
        /// A path (relative to the workspace or absolute), or a command line for `shell.exec`.
        #[arg(long)]
        target: String,
        /// Decide as another actor.
        #[arg(long = "as", value_name = "ACTOR")]
        as_actor: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum ApprovalsCommand {
    List {
        /// Include answered requests.
        #[arg(long)]
        all: bool,
        #[arg(long)]
        json: bool,
    },
    /// Make your Ed25519 approver key (in your user configuration directory) and print the
    /// line an administrator adds to the identity directory.
    Keygen {
        /// Replace an existing key.
        #[arg(long)]
        force: bool,
    },
}

pub fn dispatch(cli: Cli) -> Result<u8, Failure> {
    let ws = cli.workspace.as_deref();
    match cli.command {
        Command::Init { yes } => init(ws, yes),
        Command::GetStarted { json } => crate::setup_cmd::get_started(ws, json),
        Command::Configure { command } => crate::setup_cmd::configure(ws, command),
        Command::Credentials { command } => crate::setup_cmd::credentials(ws, command),
        Command::Config { command } => crate::setup_cmd::config(ws, command),
        Command::Providers { command } => crate::setup_cmd::providers(ws, command),
        Command::Whoami { json } => {
            let id = warrant_host::identity::whoami(&crate::at(ws))?;
            emit(json, &id, words::whoami);
            Ok(0)
        }
        Command::Run(a) => run(ws, a),
        Command::Submit(a) => submit(ws, a),
        Command::Worker(a) => worker(ws, a),
        Command::Resume(a) => resume(ws, a),
        Command::Runs { command } => runs(ws, command),
        Command::Policy {
            command:
                PolicyCommand::Explain {
                    action,
                    target,
                    as_actor,
                    json,
                },
        } => {
            let at = crate::at(ws);
            let explained = warrant_host::explain::explain(
                &at,
                crate::notices(),
                &action,
                &target,
                as_actor.as_deref(),
            )?;
            // Policy alone is explained; a `[risk.*] needs = "person"` rule still asks.
            if let Some(class) = explained.person_needed {
                eprintln!("{}", words::person_needed(class));
            }
            let e = &explained.explanation;
            emit(json, e, |e| vec![e.to_string()]);
            Ok(0)
        }
        Command::Approvals { command } => match command {
            ApprovalsCommand::List { all, json } => {
                let rows = open(ws)?.records().requests(all)?;
                let view = serde_json::json!({ "requests": rows });
                emit(json, &view, |_| words::approvals(&rows, all));
                Ok(0)
            }
            ApprovalsCommand::Keygen { force } => {
                let made = warrant_host::approver_key::keygen(&crate::at(ws), force)?;
                lines(words::key_made(&made));
                Ok(0)
            }
        },
        Command::Approve { id, scope, json } => {
            let session = scope == "session";
            answer(ws, &id, warrant_host::approvals::approval(session), json)
        }
        Command::Deny { id, reason, json } => {
            answer(ws, &id, warrant_host::approvals::denial(reason)?, json)
        }
        Command::Audit { command } => crate::audit_cmd::dispatch(ws, command),
        Command::Doctor { json } => {
            let report = warrant_host::doctor::doctor(&crate::at(ws), crate::notices())?;
            emit(json, &report, words::doctor);
            Ok(if report.ok { 0 } else { 1 })
        }
        Command::Verify {
            menu,
            profile,
            graph,
            json,
        } => crate::envelope_cmd::verify(
            ws,
            menu.as_deref(),
            profile.as_deref(),
            graph.as_deref(),
            json,
        ),
        Command::Kill {
            all,
            tenant,
            actor,
            run,
            reason,
            lift,
            list,
            json,
        } => crate::envelope_cmd::kill(
            ws,
            crate::envelope_cmd::KillArgs {
                all,
                tenant,
                actor,
                run,
                reason,
                lift,
                list,
                json,
            },
        ),
        Command::Requests { command } => crate::requests::dispatch(ws, command),
        Command::Secrets { command } => crate::secrets_cmd::dispatch(ws, command),
        Command::Memory { command } => crate::memory_cmd::dispatch(ws, command),
        Command::Catalog { command } => crate::catalog_cmd::dispatch(ws, command),
        Command::Artifacts { command } => crate::artifacts_cmd::dispatch(ws, command),
        Command::Profiles { command } => crate::profiles_cmd::dispatch(ws, command),
        Command::Graph { command } => crate::graph_cmd::dispatch(ws, command),
        Command::Skills { command } => crate::skills_cmd::dispatch(ws, command),
        Command::Delegate { command } => crate::delegate_cmd::dispatch(ws, command),
        Command::Mcp { command } => crate::mcp_cmd::dispatch(ws, command),
        Command::Web { bind, public, open } => crate::web_cmd::web(ws, bind, public, open),
        Command::Chat {
            model,
            json,
            prompt,
            deadline,
            history_tokens,
            resume,
        } => crate::chat::chat(
            ws,
            crate::chat::ChatArgs {
                model,
                json,
                prompt,
                deadline,
                history_tokens,
                resume,
            },
        ),
        Command::Completions { shell } => crate::surface::completions(shell),
        Command::Capabilities { json } => {
            let caps = warrant_host::capabilities::capabilities();
            emit(json, &caps, warrant_text::ops::setup::capabilities);
            Ok(0)
        }
    }
}

fn runs(ws: Option<&Path>, command: RunsCommand) -> Result<u8, Failure> {
    match command {
        RunsCommand::List { json } => {
            let runs = open(ws)?.records().runs()?;
            let view = serde_json::json!({ "runs": runs });
            emit(json, &view, |_| words::runs(&runs));
        }
        RunsCommand::Show { run, json } => {
            let view = open(ws)?.records().run(&parse_run(&run)?)?;
            emit(json, &view, |v| words::run_view(v, &words::narrator()));
        }
        RunsCommand::Cancel { run, reason } => {
            let run = parse_run(&run)?;
            let cancelled = load(ws)?.cancel(&run, &reason)?;
            lines([words::cancelled(&run, &cancelled)]);
        }
        RunsCommand::Resolve {
            run,
            step,
            resolution,
        } => {
            let run = parse_run(&run)?;
            let resolution = match resolution.as_str() {
                "completed" => Resolution::Completed,
                "retry" => Resolution::Retry,
                _ => Resolution::Failed,
            };
            load(ws)?.resolve(&run, &step, resolution)?;
            lines([words::resolved(&run, &step, resolution)]);
        }
        RunsCommand::Export { run, out, json } => {
            return crate::artifacts_cmd::runs_export(ws, &run, &out, json);
        }
        RunsCommand::Verify {
            file,
            pubkeys,
            json,
        } => return crate::artifacts_cmd::runs_verify(ws, &file, pubkeys.as_deref(), json),
    }
    Ok(0)
}

fn open(ws: Option<&Path>) -> Result<warrant_host::records::Opened, Failure> {
    Ok(warrant_host::records::open(
        &crate::at(ws),
        crate::notices(),
    )?)
}

fn init(ws: Option<&Path>, yes: bool) -> Result<u8, Failure> {
    let paths = warrant_host::install::paths(&crate::at(ws), true)?;
    warrant_host::init::check_absent(&paths)?;
    if !yes {
        if !std::io::stdin().is_terminal() {
            return Err(Failure::usage(
                "W-INIT-002",
                "not a terminal: pass --yes to create .warrant/ without asking",
            ));
        }
        eprint!("{}", words::init_question(&paths.dot));
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
        if !matches!(line.trim(), "y" | "Y" | "yes") {
            eprintln!("nothing was changed");
            return Ok(EXIT_USAGE);
        }
    }
    lines(words::initialized(&warrant_host::init::init(&paths)?));
    Ok(0)
}

/// Opens the installation for a command that needs all of it.
fn load(ws: Option<&Path>) -> Result<Host, Failure> {
    Ok(Host::open(&crate::at(ws), crate::notices())?)
}

pub(crate) fn prompter_for(mode: &str, principal: &Principal) -> Box<dyn Prompter> {
    let interactive = match mode {
        "always" => true,
        "never" => false,
        _ => std::io::stdin().is_terminal() && std::io::stderr().is_terminal(),
    };
    if interactive && principal.kind != PrincipalKind::Agent {
        Box::new(TerminalPrompter {
            input: std::io::stdin().lock(),
            principal: principal.clone(),
        })
    } else {
        Box::new(NoPrompter)
    }
}

pub(crate) fn finish(exit: RunExit, run: &RunId, json: bool) -> u8 {
    if !json {
        lines(words::exit(run, &exit));
    }
    if let RunExit::Parked { request } = &exit {
        eprintln!("parked: {request}");
    }
    exit.code() as u8
}

/// Opens the installation; with a token file, its runs act under that delegation.
fn load_under(ws: Option<&Path>, delegation: Option<&Path>) -> Result<Host, Failure> {
    let mut host = load(ws)?;
    if let Some(path) = delegation {
        host.act_under_file(path)?;
    }
    Ok(host)
}

fn run(ws: Option<&Path>, a: RunArgs) -> Result<u8, Failure> {
    let host = load_under(ws, a.delegation.as_deref())?;
    let request = host.request(
        a.model.as_deref(),
        a.task,
        a.deadline.as_deref(),
        a.agent_profile,
    )?;
    let printer = Printer::new(a.json);
    let mut prompter = prompter_for(&a.prompt, &host.identity.principal);
    let driven = host.run(request, &Faulty::from_env(&printer), prompter.as_mut())?;
    Ok(finish(driven.exit, &driven.run, a.json))
}

fn submit(ws: Option<&Path>, a: SubmitArgs) -> Result<u8, Failure> {
    let host = load_under(ws, a.delegation.as_deref())?;
    let request = host.request(
        a.model.as_deref(),
        a.task,
        a.deadline.as_deref(),
        a.agent_profile,
    )?;
    let run = host.submit(request)?;
    let view = serde_json::json!({"run": run, "status": "queued"});
    if a.json {
        outln!("{view}");
    } else {
        outln!("{}", words::submitted(&run));
    }
    Ok(0)
}

fn resume(ws: Option<&Path>, a: ResumeArgs) -> Result<u8, Failure> {
    let run = parse_run(&a.run)?;
    let host = load(ws)?;
    let printer = Printer::new(a.json);
    let mut prompter = prompter_for(&a.prompt, &host.identity.principal);
    let can_prompt = match a.prompt.as_str() {
        "never" => false,
        "auto" => std::io::stdin().is_terminal(),
        _ => true,
    };
    let resumed = host.resume(
        &run,
        &Faulty::from_env(&printer),
        prompter.as_mut(),
        can_prompt,
    )?;
    let parked = match &resumed {
        Resumed::Driven(driven) => return Ok(finish(driven.exit.clone(), &driven.run, a.json)),
        Resumed::InDoubt { request, .. }
        | Resumed::AwaitsApproval { request, .. }
        | Resumed::AwaitsReply { request, .. } => request,
    };
    if !a.json {
        lines(words::still_waiting(&resumed));
    }
    eprintln!("parked: {parked}");
    Ok(10)
}

fn worker(ws: Option<&Path>, a: WorkerArgs) -> Result<u8, Failure> {
    let host = load(ws)?;
    let printer = Printer::new(a.json);
    let report = |event: warrant_host::runs::WorkerEvent| {
        eprintln!("{}", crate::shown(&words::worker(&event)));
    };
    host.work(
        a.id,
        std::time::Duration::from_millis(a.lease_ms.max(100)),
        std::time::Duration::from_millis(a.poll_ms),
        a.once,
        &Faulty::from_env(&printer),
        &report,
    )?;
    Ok(0)
}

fn answer(ws: Option<&Path>, id: &str, answer: Answer, json: bool) -> Result<u8, Failure> {
    let request = warrant_host::approvals::parse_request(id)?;
    let done = load(ws)?.answer(&request, answer)?;
    if json {
        let view = serde_json::json!({"request": done.request, "run": done.run, "answer": done.answer, "scope": done.scope, "by": done.by});
        outln!("{}", pretty(&view));
    } else {
        outln!("{}", words::answered(&done));
    }
    Ok(0)
}
