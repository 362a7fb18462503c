//! The dispatch of every command, and the commands that start, drive, stop and answer runs:
//! each calls one operation of the application layer (`warrant-host`), prints its view, and
//! returns the exit code of the contract.

use std::io::IsTerminal;
use std::path::Path;

use serde_json::json;
use warrant_agent::RunExit;
use warrant_core::{Principal, PrincipalKind, RunId};
use warrant_kernel::{Answer, NoPrompter, Prompter, Resolution};

use crate::inspect;
use crate::output::Printer;
use crate::prompt::TerminalPrompter;
use crate::{
    ApprovalsCommand, Cli, Command, EXIT_USAGE, Failure, PolicyCommand, RunsCommand, pretty,
};
use warrant_host::Host;
use warrant_host::fault::Faulty;
use warrant_host::install;
use warrant_host::runs::{Cancelled, Resumed, RunRequest, WorkerEvent};

pub fn dispatch(cli: Cli) -> Result<u8, Failure> {
    let ws = cli.workspace.as_deref();
    match cli.command {
        Command::Init { yes } => init(ws, yes),
        Command::GetStarted { json } => crate::setup_cmd::get_started(ws, json),
        Command::Configure { command } => crate::setup_cmd::configure(ws, command),
        Command::Credentials { command } => crate::setup_cmd::credentials(ws, command),
        Command::Config { command } => crate::setup_cmd::config(ws, command),
        Command::Providers { command } => crate::setup_cmd::providers(ws, command),
        Command::Whoami { json } => whoami(ws, json),
        Command::Run {
            model,
            json,
            prompt,
            deadline,
            agent_profile,
            delegation,
            task,
        } => run(
            ws,
            model.as_deref(),
            json,
            &prompt,
            deadline.as_deref(),
            Under {
                agent_profile,
                delegation: delegation.as_deref(),
            },
            task,
        ),
        Command::Submit {
            model,
            deadline,
            agent_profile,
            delegation,
            json,
            task,
        } => submit(
            ws,
            model.as_deref(),
            deadline.as_deref(),
            agent_profile,
            delegation.as_deref(),
            json,
            task,
        ),
        Command::Worker {
            once,
            lease_ms,
            poll_ms,
            id,
            json,
        } => worker(ws, once, lease_ms, poll_ms, id, json),
        Command::Resume { run, json, prompt } => resume(ws, &run, json, &prompt),
        Command::Runs { command } => match command {
            RunsCommand::List { json } => inspect::runs_list(ws, json),
            RunsCommand::Show { run, json } => inspect::runs_show(ws, &run, json),
            RunsCommand::Cancel { run, reason } => runs_cancel(ws, &run, &reason),
            RunsCommand::Resolve {
                run,
                step,
                resolution,
            } => runs_resolve(ws, &run, &step, &resolution),
            RunsCommand::Export { run, out, json } => {
                crate::artifacts_cmd::runs_export(ws, &run, &out, json)
            }
            RunsCommand::Verify {
                file,
                pubkeys,
                json,
            } => crate::artifacts_cmd::runs_verify(ws, &file, pubkeys.as_deref(), json),
        },
        Command::Policy { command } => match command {
            PolicyCommand::Explain {
                action,
                target,
                as_actor,
                json,
            } => inspect::explain(ws, &action, &target, as_actor.as_deref(), json),
        },
        Command::Approvals { command } => match command {
            ApprovalsCommand::List { all, json } => inspect::approvals_list(ws, all, json),
            ApprovalsCommand::Keygen { force } => keygen(ws, force),
        },
        Command::Approve { id, scope, json } => {
            let session = scope == "session";
            answer(ws, &id, warrant_host::approvals::approval(session), json)
        }
        Command::Deny { id, reason, json } => {
            answer(ws, &id, warrant_host::approvals::denial(reason)?, json)
        }
        Command::Audit { command } => crate::audit_cmd::dispatch(ws, command),
        Command::Doctor { json } => inspect::doctor(ws, json),
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
        Command::Capabilities { json } => crate::surface::capabilities(ws, json),
    }
}

fn init(ws: Option<&Path>, yes: bool) -> Result<u8, Failure> {
    let at = crate::at(ws);
    let paths = install::paths(&at, true)?;
    warrant_host::init::check_absent(&paths)?;
    if !yes {
        if !std::io::stdin().is_terminal() {
            return Err(Failure::usage(
                "W-INIT-002",
                "not a terminal: pass --yes to create .warrant/ without asking",
            ));
        }
        eprint!(
            "Create {} (config, policies, keys, store)? [y/N] ",
            paths.dot.display()
        );
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
        if !matches!(line.trim(), "y" | "Y" | "yes") {
            eprintln!("nothing was changed");
            return Ok(EXIT_USAGE);
        }
    }
    let made = warrant_host::init::init(&paths)?;
    outln!("initialized {}", paths.dot.display());
    outln!("  config     .warrant/config.toml");
    outln!("  policies   .warrant/policies/default.cedar");
    outln!("  keys       .warrant/keys/ (audit signing key, installation secret)");
    outln!("  store      .warrant/store.db");
    outln!("  audit      .warrant/audit/audit.jsonl");
    outln!(
        "  approver   {} ({}), enrolled for {} in .warrant/keys/approvers",
        made.approver_key.display(),
        if made.key_made {
            "made now"
        } else {
            "yours already"
        },
        made.actor
    );
    Ok(0)
}

fn whoami(ws: Option<&Path>, json: bool) -> Result<u8, Failure> {
    let id = warrant_host::identity::whoami(&crate::at(ws))?;
    if json {
        outln!("{}", pretty(&id));
        return Ok(0);
    }
    let p = &id.principal;
    outln!("{} ({}) in tenant {}", p.actor, p.kind.as_str(), p.tenant);
    for row in id.rows() {
        let o = row.origin;
        let flags: Vec<&str> = [(o.required, "required"), (o.locked, "locked")]
            .into_iter()
            .filter_map(|(on, flag)| on.then_some(flag))
            .collect();
        let flags = if flags.is_empty() {
            String::new()
        } else {
            format!(" [{}]", flags.join(", "))
        };
        outln!(
            "  {:<13} {:<20} from {}{flags}",
            row.field,
            row.value,
            o.display
        );
    }
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
        match &exit {
            RunExit::Completed => outln!("run {run} completed"),
            RunExit::Failed { code, message } => {
                outln!("run {run} failed [{code}]: {message}")
            }
            RunExit::Stopped { reason } => {
                outln!("run {run} stopped by governance: {reason}")
            }
            RunExit::Parked { request } => {
                outln!("run {run} parked: request {request} waits for a person");
                outln!("  then continue with: warrant resume {run}");
            }
            RunExit::Superseded { message } => outln!("run {run}: {message}"),
            RunExit::AwaitingMessage => outln!(
                "run {run} is a chat session waiting for its person's next message: warrant chat --resume {run}"
            ),
        }
    }
    if let RunExit::Parked { request } = &exit {
        eprintln!("parked: {request}");
    }
    exit.code() as u8
}

fn run(
    ws: Option<&Path>,
    model: Option<&str>,
    json: bool,
    prompt: &str,
    deadline: Option<&str>,
    under: Under<'_>,
    task: String,
) -> Result<u8, Failure> {
    let host = load_under(ws, under.delegation)?;
    let request = RunRequest {
        model: warrant_host::runs::model_spec(&host.settings, model)?,
        task,
        deadline: warrant_host::runs::deadline_from(deadline)?,
        agent_profile: under.agent_profile,
    };
    let printer = Printer::new(json);
    let observer = Faulty::from_env(&printer);
    let mut prompter = prompter_for(prompt, &host.identity.principal);
    let driven = host.run(request, &observer, prompter.as_mut())?;
    Ok(finish(driven.exit, &driven.run, json))
}

/// What a run works under besides the installation's own authority: an agent profile that
/// narrows it, a delegation token it is held to.
struct Under<'a> {
    agent_profile: Option<String>,
    delegation: Option<&'a Path>,
}

/// Opens the installation; with a token file, its runs act under that delegation.
fn load_under(ws: Option<&Path>, delegation: Option<&Path>) -> Result<Host, Failure> {
    let mut host = load(ws)?;
    if let Some(path) = delegation {
        let token = std::fs::read_to_string(path).map_err(|e| {
            Failure::usage(
                "W-DELEGATE-015",
                format!("cannot read the token {}: {e}", path.display()),
            )
        })?;
        host.act_under(&token)?;
    }
    Ok(host)
}

fn submit(
    ws: Option<&Path>,
    model: Option<&str>,
    deadline: Option<&str>,
    agent_profile: Option<String>,
    delegation: Option<&Path>,
    json: bool,
    task: String,
) -> Result<u8, Failure> {
    let host = load_under(ws, delegation)?;
    let run = host.submit(RunRequest {
        model: warrant_host::runs::model_spec(&host.settings, model)?,
        task,
        deadline: warrant_host::runs::deadline_from(deadline)?,
        agent_profile,
    })?;
    if json {
        outln!("{}", json!({"run": run, "status": "queued"}));
    } else {
        outln!("queued {run}; a worker (`warrant worker`) will drive it");
    }
    Ok(0)
}

fn parse_run(id: &str) -> Result<RunId, Failure> {
    Ok(warrant_host::runs::parse_run(id)?)
}

fn resume(ws: Option<&Path>, run: &str, json: bool, prompt: &str) -> Result<u8, Failure> {
    let run = parse_run(run)?;
    let host = load(ws)?;
    let printer = Printer::new(json);
    let observer = Faulty::from_env(&printer);
    let mut prompter = prompter_for(prompt, &host.identity.principal);
    let can_prompt = match prompt {
        "never" => false,
        "auto" => std::io::stdin().is_terminal(),
        _ => true,
    };
    let parked = match host.resume(&run, &observer, prompter.as_mut(), can_prompt)? {
        Resumed::Driven(driven) => return Ok(finish(driven.exit, &driven.run, json)),
        Resumed::InDoubt { run, request, step } => {
            if !json {
                outln!("run {run} waits for a person to resolve an effect in doubt ({request})");
                outln!("  warrant runs resolve {run} --step {step} --as completed|retry|failed");
            }
            request
        }
        Resumed::AwaitsApproval { run, request } => {
            if !json {
                outln!("run {run} is still waiting for request {request}");
                outln!("  warrant approve {request}   |   warrant deny {request} --reason TEXT");
            }
            request
        }
        Resumed::AwaitsReply {
            run,
            request,
            title,
            until,
        } => {
            if !json {
                outln!(
                    "run {run} is still waiting for request {request} ({}), until {}",
                    crate::shown_inline(&title),
                    until.rfc3339()
                );
                outln!("  warrant requests show {request}");
            }
            request
        }
    };
    eprintln!("parked: {parked}");
    Ok(10)
}

fn worker(
    ws: Option<&Path>,
    once: bool,
    lease_ms: u64,
    poll_ms: u64,
    id: Option<String>,
    json: bool,
) -> Result<u8, Failure> {
    let host = load(ws)?;
    let printer = Printer::new(json);
    let observer = Faulty::from_env(&printer);
    let report = |event: WorkerEvent| match event {
        WorkerEvent::Polling { holder, store } => {
            eprintln!("worker {holder}: polling {store} for runs")
        }
        WorkerEvent::Leased { holder, run, token } => {
            eprintln!("worker {holder}: leased {run} (token {token})")
        }
        WorkerEvent::CannotLoad { holder, run, error } => eprintln!(
            "worker {holder}: cannot load {run}: error[{}]: {}",
            error.code,
            crate::shown(&error.message)
        ),
        WorkerEvent::Driven { holder, run, exit } => {
            eprintln!("worker {holder}: {run} → {exit:?}")
        }
        WorkerEvent::Failed { holder, run, error } => {
            eprintln!("worker {holder}: {run} failed: {}", crate::shown(&error))
        }
        WorkerEvent::StoreUnavailable {
            holder,
            error,
            retry_in,
        } => eprintln!(
            "worker {holder}: the store did not answer (error[{}]: {}); polling again in {} ms",
            error.code,
            crate::shown(&error.message),
            retry_in.as_millis()
        ),
    };
    host.work(
        id,
        std::time::Duration::from_millis(lease_ms.max(100)),
        std::time::Duration::from_millis(poll_ms),
        once,
        &observer,
        &report,
    )?;
    Ok(0)
}

fn runs_cancel(ws: Option<&Path>, run: &str, reason: &str) -> Result<u8, Failure> {
    let run = parse_run(run)?;
    let host = load(ws)?;
    match host.cancel(&run, reason)? {
        Cancelled::Stopped => outln!("stopped {run}"),
        Cancelled::Recorded { holder } => outln!(
            "cancellation recorded; {holder} drives {run} and stops it at its next effect boundary"
        ),
    }
    Ok(0)
}

fn runs_resolve(ws: Option<&Path>, run: &str, step: &str, resolution: &str) -> Result<u8, Failure> {
    let run = parse_run(run)?;
    let resolution = match resolution {
        "completed" => Resolution::Completed,
        "retry" => Resolution::Retry,
        _ => Resolution::Failed,
    };
    let host = load(ws)?;
    host.resolve(&run, step, resolution)?;
    outln!(
        "resolved step {step} of {run} as {}; continue the run with: warrant resume {run}",
        resolution.as_str()
    );
    Ok(0)
}

fn keygen(ws: Option<&Path>, force: bool) -> Result<u8, Failure> {
    let made = warrant_host::approver_key::keygen(&crate::at(ws), force)?;
    outln!("approver key written to {}", made.path.display());
    if let Some(file) = &made.enrolled_in {
        outln!(
            "enrolled for {} in this installation ({}; used when there is no identity directory)",
            made.actor,
            file.display()
        );
    }
    outln!("ask an administrator to add to the identity directory (directory.toml):");
    outln!("[people.{}]", made.actor);
    outln!("public_key = \"{}\"", made.public_hex);
    Ok(0)
}

fn answer(ws: Option<&Path>, id: &str, answer: Answer, json: bool) -> Result<u8, Failure> {
    let request = warrant_host::approvals::parse_request(id)?;
    let host = load(ws)?;
    let done = host.answer(&request, answer)?;
    if json {
        outln!(
            "{}",
            pretty(
                &json!({"request": done.request, "run": done.run, "answer": done.answer, "scope": done.scope, "by": done.by})
            )
        );
    } else {
        outln!(
            "{} {}{} as {}; continue the run with: warrant resume {}",
            done.answer,
            done.request,
            done.scope
                .as_ref()
                .map(|s| format!(" ({s})"))
                .unwrap_or_default(),
            done.by,
            done.run
        );
    }
    Ok(0)
}
