//! One function per command. Each loads what it needs through `context`, calls the library
//! rooms, prints, and returns the exit code of the contract.

use std::fs;
use std::io::IsTerminal;
use std::path::Path;

use serde_json::{Value, json};
use warrant_agent::RunExit;
use warrant_audit::{
    AuditKey, Checkpoint, CheckpointError, CheckpointRule, PublicKeys, checkpoint_path,
    verify_copy, verify_file, verify_sealed,
};
use warrant_core::config::ResolvedIdentity;
use warrant_core::path::canonicalize;
use warrant_core::{Action, Clock, Coded as _, Principal, PrincipalKind, RunId, SystemClock, Verb};
use warrant_exec::OsLinks;
use warrant_kernel::{Answer, NoPrompter, Prompter, Resolution, RunState, Scope};
use warrant_llm::ModelSpec;
use warrant_policy::DecisionRequest;
use warrant_store::RequestStatus;

use crate::fault::Faulty;
use crate::output::{Printer, event_json};
use crate::prompt::TerminalPrompter;
use crate::{
    ApprovalsCommand, AuditCommand, Cli, Command, EXIT_USAGE, Failure, KeysCommand, PolicyCommand,
    RunsCommand,
};
use warrant_host::Host;
use warrant_host::drive;
use warrant_host::install::{self, Installation, Paths};
use warrant_host::runs::{Cancelled, Resumed, RunRequest, WorkerEvent};

pub fn dispatch(cli: Cli) -> Result<u8, Failure> {
    let ws = cli.workspace.as_deref();
    match cli.command {
        Command::Init { yes } => init(ws, yes),
        Command::Whoami { json } => whoami(ws, json),
        Command::Run {
            model,
            json,
            prompt,
            deadline,
            task,
        } => run(ws, &model, json, &prompt, deadline.as_deref(), task),
        Command::Submit {
            model,
            deadline,
            json,
            task,
        } => submit(ws, &model, deadline.as_deref(), json, task),
        Command::Worker {
            once,
            lease_ms,
            poll_ms,
            id,
            json,
        } => worker(ws, once, lease_ms, poll_ms, id, json),
        Command::Resume { run, json, prompt } => resume(ws, &run, json, &prompt),
        Command::Runs { command } => match command {
            RunsCommand::List { json } => runs_list(ws, json),
            RunsCommand::Show { run, json } => runs_show(ws, &run, json),
            RunsCommand::Cancel { run, reason } => runs_cancel(ws, &run, &reason),
            RunsCommand::Resolve {
                run,
                step,
                resolution,
            } => runs_resolve(ws, &run, &step, &resolution),
        },
        Command::Policy { command } => match command {
            PolicyCommand::Explain {
                action,
                target,
                as_actor,
                json,
            } => explain(ws, &action, &target, as_actor.as_deref(), json),
        },
        Command::Approvals { command } => match command {
            ApprovalsCommand::List { all, json } => approvals_list(ws, all, json),
            ApprovalsCommand::Keygen { force } => keygen(ws, force),
        },
        Command::Approve { id, scope, json } => {
            let scope = if scope == "session" {
                Scope::Session
            } else {
                Scope::Once
            };
            answer(ws, &id, Answer::Approve(scope), json)
        }
        Command::Deny { id, reason, json } => {
            if reason.trim().is_empty() {
                return Err(Failure::usage(
                    "W-APPROVAL-004",
                    "--reason must say why; the agent is told",
                ));
            }
            answer(ws, &id, Answer::Deny { reason }, json)
        }
        Command::Audit { command } => {
            match command {
                AuditCommand::Verify {
                    file,
                    pubkeys,
                    json,
                } => audit_verify(ws, file.as_deref(), pubkeys.as_deref(), json),
                AuditCommand::Tail { lines, json } => audit_tail(ws, lines, json),
                AuditCommand::Status { json } => audit_status(ws, json),
                AuditCommand::Deliver { follow, interval } => audit_deliver(ws, follow, &interval),
                AuditCommand::Flush { timeout, json } => audit_flush(ws, &timeout, json),
                AuditCommand::Query {
                    run,
                    actor,
                    on_behalf_of,
                    kind,
                    verb,
                    decision,
                    since,
                    until,
                    limit,
                    json,
                } => {
                    let time = |t: Option<String>, flag: &str| -> Result<Option<warrant_core::Timestamp>, Failure> {
                    t.map(|t| {
                        warrant_core::Timestamp::parse(&t).ok_or_else(|| {
                            Failure::usage("W-CLI-004", format!("--{flag} {t:?} is not an RFC 3339 time (e.g. 2026-11-29T00:00:00Z)"))
                        })
                    })
                    .transpose()
                };
                    let query = warrant_store::AuditQuery {
                        run,
                        actor,
                        on_behalf_of,
                        kind,
                        verb,
                        decision,
                        since: time(since, "since")?,
                        until: time(until, "until")?,
                        limit,
                    };
                    audit_query(ws, &query, json)
                }
                AuditCommand::Touched { run, json } => audit_touched(ws, &run, json),
                AuditCommand::Keys { command } => match command {
                    KeysCommand::Rotate => audit_keys_rotate(ws),
                    KeysCommand::Export => audit_keys_export(ws),
                },
            }
        }
        Command::Doctor { json } => doctor(ws, json),
        Command::Requests { command } => crate::requests::dispatch(ws, command),
        Command::Secrets { command } => crate::secrets_cmd::dispatch(ws, command),
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
    // whoami works outside a workspace too: managed, user and environment still apply.
    let paths = install::paths(&crate::at(ws), ws.is_none() && !has_workspace())?;
    let layers = install::read_layers(&paths)?;
    let id = install::identity(&layers)?;
    if json {
        outln!("{}", pretty(&identity_json(&id)));
    } else {
        let p = &id.principal;
        outln!("{} ({}) in tenant {}", p.actor, p.kind.as_str(), p.tenant);
        for (field, origin) in &id.sources {
            let mut flags = Vec::new();
            if origin.required {
                flags.push("required");
            }
            if origin.locked {
                flags.push("locked");
            }
            let value = match field {
                warrant_core::config::IdentityField::Tenant => p.tenant.clone(),
                warrant_core::config::IdentityField::Actor => p.actor.clone(),
                warrant_core::config::IdentityField::Kind => p.kind.as_str().to_owned(),
                warrant_core::config::IdentityField::OnBehalfOf => {
                    p.on_behalf_of.clone().unwrap_or_else(|| "-".into())
                }
                warrant_core::config::IdentityField::Roles => list(&p.roles),
                warrant_core::config::IdentityField::Teams => list(&p.teams),
            };
            outln!(
                "  {:<13} {:<20} from {}{}",
                field.as_str(),
                value,
                origin.source,
                if flags.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", flags.join(", "))
                }
            );
        }
    }
    Ok(0)
}

fn has_workspace() -> bool {
    std::env::current_dir()
        .map(|d| d.ancestors().any(|a| a.join(install::DOT).is_dir()))
        .unwrap_or(false)
}

fn list(v: &[String]) -> String {
    if v.is_empty() {
        "-".into()
    } else {
        v.join(",")
    }
}

fn identity_json(id: &ResolvedIdentity) -> Value {
    json!({
        "principal": id.principal,
        "sources": id.sources.iter().map(|(f, o)| (f.as_str().to_owned(), json!({
            "from": o.source,
            "display": o.source.to_string(),
            "required": o.required,
            "locked": o.locked,
        }))).collect::<serde_json::Map<String, Value>>(),
    })
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

/// Opens the installation for a command that needs all of it.
fn load(ws: Option<&Path>) -> Result<Host, Failure> {
    Ok(Host::open(&crate::at(ws), crate::notices())?)
}

fn prompter_for(mode: &str, principal: &Principal) -> Box<dyn Prompter> {
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

fn finish(exit: RunExit, run: &RunId, json: bool) -> u8 {
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
        }
    }
    if let RunExit::Parked { request } = &exit {
        eprintln!("parked: {request}");
    }
    exit.code() as u8
}

fn deadline_from(deadline: Option<&str>) -> Result<Option<warrant_core::Timestamp>, Failure> {
    let Some(d) = deadline else {
        return Ok(None);
    };
    let dur = drive::parse_duration(d).ok_or_else(|| {
        Failure::usage(
            "W-CLI-003",
            format!("--deadline {d:?} is not a duration; use e.g. 500ms, 90s, 10m or 2h"),
        )
    })?;
    Ok(warrant_host::deadline_after(dur))
}

fn run(
    ws: Option<&Path>,
    model: &str,
    json: bool,
    prompt: &str,
    deadline: Option<&str>,
    task: String,
) -> Result<u8, Failure> {
    let host = load(ws)?;
    let request = RunRequest {
        model: model.to_owned(),
        task,
        deadline: deadline_from(deadline)?,
    };
    let printer = Printer::new(json);
    let observer = Faulty::from_env(&printer);
    let mut prompter = prompter_for(prompt, &host.identity.principal);
    let driven = host.run(request, &observer, prompter.as_mut())?;
    Ok(finish(driven.exit, &driven.run, json))
}

fn submit(
    ws: Option<&Path>,
    model: &str,
    deadline: Option<&str>,
    json: bool,
    task: String,
) -> Result<u8, Failure> {
    let host = load(ws)?;
    let run = host.submit(RunRequest {
        model: model.to_owned(),
        task,
        deadline: deadline_from(deadline)?,
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

fn open_store(ws: Option<&Path>) -> Result<(Paths, Installation), Failure> {
    let paths = install::paths(&crate::at(ws), false)?;
    let layers = install::read_layers(&paths)?;
    let settings = install::settings(&layers)?;
    let inst = install::installation(&paths, &settings, crate::notices())?;
    Ok((paths, inst))
}

fn runs_list(ws: Option<&Path>, json: bool) -> Result<u8, Failure> {
    let (_, inst) = open_store(ws)?;
    let runs = inst.store.runs().map_err(|e| Failure::coded(&e, 1))?;
    if json {
        outln!("{}", pretty(&json!({"runs": runs})));
        return Ok(0);
    }
    if runs.is_empty() {
        outln!("no runs yet; start one with `warrant run --model scripted:PATH TASK`");
    }
    for r in runs {
        outln!(
            "{}  {:<9}  {}  {:<10}  {:>3} events  {}",
            r.run,
            r.status.as_str(),
            r.created_at.rfc3339(),
            r.actor,
            r.events,
            r.task
        );
    }
    Ok(0)
}

fn runs_show(ws: Option<&Path>, run: &str, json: bool) -> Result<u8, Failure> {
    let run = parse_run(run)?;
    let (_, inst) = open_store(ws)?;
    let row = inst
        .store
        .run(&run)
        .map_err(|e| Failure::coded(&e, 1))?
        .ok_or_else(|| {
            Failure::usage(
                "W-KERNEL-004",
                format!("run {run} does not exist; `warrant runs list` shows the runs there are"),
            )
        })?;
    let events = inst.store.events(&run).map_err(|e| Failure::coded(&e, 1))?;
    let rejected = inst
        .store
        .fence_rejections(&run)
        .map_err(|e| Failure::coded(&e, 1))?;
    if json {
        outln!(
            "{}",
            pretty(
                &json!({"run": row, "events": events.iter().map(event_json).collect::<Vec<_>>(), "fence_rejections": rejected})
            )
        );
        return Ok(0);
    }
    outln!(
        "{}  {}  {} events",
        row.run,
        row.status.as_str(),
        row.events
    );
    let printer = Printer::new(false);
    for e in &events {
        match warrant_kernel::RunEvent::from_stored(e) {
            Ok(ev) => {
                for (i, line) in printer.lines(&ev).iter().enumerate() {
                    if i == 0 {
                        outln!("{:>4}  {line}", e.seq);
                    } else {
                        outln!("      {line}");
                    }
                }
            }
            Err(err) => outln!("#{:<4}unreadable event: {err}", e.seq),
        }
    }
    for r in &rejected {
        outln!(
            "fenced   at {}: a writer with lease token {} (current {}) was refused: {}",
            r.at.rfc3339(),
            r.presented,
            r.current,
            r.kinds.join(", ")
        );
    }
    Ok(0)
}

fn explain(
    ws: Option<&Path>,
    action: &str,
    target: &str,
    as_actor: Option<&str>,
    json: bool,
) -> Result<u8, Failure> {
    let paths = install::paths(&crate::at(ws), false)?;
    let layers = install::read_layers(&paths)?;
    let mut principal = install::identity(&layers)?.principal;
    if let Some(actor) = as_actor {
        principal = Principal {
            actor: actor.to_owned(),
            kind: PrincipalKind::User,
            on_behalf_of: None,
            roles: Vec::new(),
            teams: Vec::new(),
            ..principal
        };
    }
    let policy = install::policy(&paths)?;
    for warning in policy.warnings() {
        eprintln!("warning: {warning}");
    }
    let workspace = paths.workspace_canonical()?;
    let verb = Verb::parse(action).ok_or_else(|| {
        Failure::usage(
            "W-POLICY-011",
            format!(
                "unknown action `{action}`; known actions: {}",
                Verb::ALL
                    .iter()
                    .map(|v| v.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    })?;
    let path =
        || canonicalize(&workspace, target, &OsLinks).map_err(|e| Failure::coded(&e, EXIT_USAGE));
    let action = match verb {
        Verb::FsRead => Action::FsRead { path: path()? },
        Verb::FsList => Action::FsList { path: path()? },
        Verb::FsSearch => Action::FsSearch {
            path: path()?,
            pattern: String::new(),
        },
        Verb::FsWrite => Action::FsWrite {
            path: path()?,
            content: String::new(),
        },
        Verb::FsCreate => Action::FsCreate {
            path: path()?,
            content: String::new(),
        },
        Verb::FsDelete => Action::FsDelete {
            path: path()?,
            recursive: true,
        },
        Verb::ShellExec => {
            let argv: Vec<String> = target.split_whitespace().map(str::to_owned).collect();
            // As a run would: the program argv[0] names on the PATH a command inherits.
            let parent = install::parent_env();
            let program = argv.first().and_then(|a| {
                warrant_exec::program::resolve(
                    a,
                    workspace.as_path(),
                    warrant_exec::program::path_of(&parent),
                )
            });
            let contained = warrant_core::config::merge_settings(&layers)
                .profiles
                .get("default")
                .is_some_and(warrant_core::config::ProfileConfig::is_contained);
            Action::ShellExec {
                argv,
                cwd: workspace.clone(),
                profile: "default".into(),
                timeout_ms: 30_000,
                program,
                contained,
            }
        }
        // The target is a model as `--model` names it, e.g. `openai:gpt-4.1`.
        Verb::ProviderCall => {
            ModelSpec::parse(target).map_err(|e| Failure::coded(&e, EXIT_USAGE))?;
            let (provider, model) = target.split_once(':').unwrap_or((target, ""));
            Action::ProviderCall {
                provider: provider.to_owned(),
                model: model.to_owned(),
            }
        }
        Verb::GitCommit
        | Verb::GitPush
        | Verb::MemoryRead
        | Verb::MemoryPropose
        | Verb::MemoryPublish
        | Verb::CatalogList
        | Verb::CatalogRead
        | Verb::McpCall
        | Verb::MessageSend => {
            return Err(Failure::usage(
                "W-POLICY-012",
                format!(
                    "`{action}` is a known action, but no tool performs it yet, so it cannot be explained on a target; fs.*, shell.exec and provider.call can"
                ),
            ));
        }
    };
    let explanation = policy.explain(&DecisionRequest {
        principal: &principal,
        action: &action,
        workspace: &workspace,
    });
    // Policy alone is explained above; a `[risk.*] needs = "person"` rule still asks.
    let rules = install::approval_rules(&paths, &layers)?;
    let class = explanation.decision.risk;
    if matches!(explanation.decision.verdict, warrant_policy::Verdict::Allow)
        && rules.risk.rule(class).needs == warrant_core::risk::Needs::Person
    {
        eprintln!(
            "note: [risk.{0}] needs = \"person\" in the configuration: {0} actions are asked of a person although policy allows them",
            class.as_str()
        );
    }
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&explanation).unwrap_or_default()
        );
    } else {
        outln!("{explanation}");
    }
    Ok(0)
}

fn approvals_list(ws: Option<&Path>, all: bool, json: bool) -> Result<u8, Failure> {
    let (_, inst) = open_store(ws)?;
    let rows = inst
        .store
        .requests(if all { None } else { Some(RequestStatus::Open) })
        .map_err(|e| Failure::coded(&e, 1))?;
    if json {
        outln!("{}", pretty(&json!({"requests": rows})));
        return Ok(0);
    }
    if rows.is_empty() {
        outln!("no {}requests", if all { "" } else { "open " });
    }
    for r in rows {
        let s = &r.summary;
        let get = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or("?").to_owned();
        outln!(
            "{}  {:<8}  run {}  risk {:<11}  {}  (asked by {})",
            r.id,
            match r.status {
                RequestStatus::Open => "open",
                RequestStatus::Answered => "answered",
            },
            r.run,
            get("risk"),
            get("title"),
            get("requested_by"),
        );
        if let Some(asked) = s.get("asked_of").and_then(Value::as_str) {
            outln!("    asked of: {asked}");
        }
    }
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

fn audit_verify(
    ws: Option<&Path>,
    file: Option<&Path>,
    pubkeys: Option<&Path>,
    json: bool,
) -> Result<u8, Failure> {
    let keys_from = |p: &Path| PublicKeys::load(p).map_err(|e| Failure::coded(&e, EXIT_USAGE));
    // An auditor outside the team needs only the file and the public keys.
    if let (Some(file), Some(pk)) = (file, pubkeys) {
        let keys = keys_from(pk)?;
        let copy = verify_single(file, &keys, file.display().to_string())?;
        return Ok(print_reports(&[copy], None, json));
    }
    let (paths, inst) = open_store(ws)?;
    install::deliver(&inst);
    let keys = match pubkeys {
        Some(p) => keys_from(p)?,
        None => inst.public_keys.clone(),
    };
    let shown = |p: &Path| {
        p.strip_prefix(&paths.workspace)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| p.display().to_string())
    };
    let mut reports = Vec::new();
    let mut journal = None;
    match file {
        Some(f) => reports.push(verify_single(f, &keys, shown(&checkpoint_path(f)))?),
        None => {
            let records = all_records(&inst).map_err(|e| Failure::coded(&e, 1))?;
            reports.push(Checked::chain(
                "store".to_owned(),
                verify_sealed(&records, &keys),
            ));
            if !warrant_host::controls::disabled("binding") {
                journal = Some(journal_report(&inst, &records, &keys)?);
            }
            // The sink's rotated files and its current one, as one chain, against the
            // checkpoint the sink writes after every delivery.
            let files = inst
                .sink
                .files()
                .map_err(|e| Failure::coded(&e, EXIT_USAGE))?;
            let name = shown(inst.sink.path());
            reports.push(if inst.sink.has_checkpoint() {
                let at = inst.sink.checkpoint_path();
                let copy = verify_copy(&files, true, &at, &keys, CheckpointRule::Required)
                    .map_err(|e| Failure::coded(&e, EXIT_USAGE))?;
                Checked::copy(name, shown(&at), copy)
            } else {
                Checked::chain(
                    name,
                    warrant_audit::verify_files(&files, &keys)
                        .map_err(|e| Failure::coded(&e, EXIT_USAGE))?,
                )
            });
        }
    }
    Ok(print_reports(&reports, journal.as_ref(), json))
}

/// One file given with `--file`: its chain, and the checkpoint beside it when there is one
/// (a rotated file or a receiver's copy has none).
fn verify_single(
    file: &Path,
    keys: &PublicKeys,
    checkpoint_shown: String,
) -> Result<Checked, Failure> {
    let name = file.display().to_string();
    if warrant_host::controls::disabled("checkpoint") {
        let report = verify_file(file, keys).map_err(|e| Failure::coded(&e, EXIT_USAGE))?;
        return Ok(Checked::chain(name, report));
    }
    let copy = verify_copy(
        &[file.to_path_buf()],
        false,
        &checkpoint_path(file),
        keys,
        CheckpointRule::IfPresent,
    )
    .map_err(|e| Failure::coded(&e, EXIT_USAGE))?;
    Ok(Checked::copy(name, checkpoint_shown, copy))
}

/// What `audit verify` checked of one source.
struct Checked {
    name: String,
    report: warrant_audit::VerifyReport,
    /// The checkpoint's name and what it proved; `None` when not checked.
    checkpoint: Option<(String, Result<Option<Checkpoint>, CheckpointError>)>,
}

impl Checked {
    fn chain(name: String, report: warrant_audit::VerifyReport) -> Self {
        Self {
            name,
            report,
            checkpoint: None,
        }
    }

    fn copy(name: String, checkpoint: String, copy: warrant_audit::CopyReport) -> Self {
        Self {
            name,
            report: copy.chain,
            checkpoint: Some((checkpoint, copy.checkpoint)),
        }
    }

    fn is_ok(&self) -> bool {
        self.report.is_ok() && self.checkpoint.as_ref().is_none_or(|(_, c)| c.is_ok())
    }
}

/// The `checkpoint` of a source in `audit verify --json`.
#[derive(serde::Serialize)]
struct CheckpointView<'a> {
    path: &'a str,
    ok: bool,
    checkpoint: Option<&'a Checkpoint>,
    code: Option<&'static str>,
    message: Option<String>,
}

impl<'a> CheckpointView<'a> {
    fn of(path: &'a str, outcome: &'a Result<Option<Checkpoint>, CheckpointError>) -> Self {
        match outcome {
            Ok(checkpoint) => Self {
                path,
                ok: true,
                checkpoint: checkpoint.as_ref(),
                code: None,
                message: None,
            },
            Err(e) => Self {
                path,
                ok: false,
                checkpoint: None,
                code: Some(e.code()),
                message: Some(e.to_string()),
            },
        }
    }
}

/// Every run's events against the records the chain holds for it: the runs the store lists
/// and every run a record names (so a run whose rows were deleted is still checked).
fn journal_report(
    inst: &Installation,
    records: &[warrant_store::SealedRecord],
    keys: &PublicKeys,
) -> Result<warrant_audit::JournalReport, Failure> {
    let mut by_run = warrant_audit::records_by_run(records);
    let mut runs: std::collections::BTreeSet<String> = inst
        .store
        .runs()
        .map_err(|e| Failure::coded(&e, 1))?
        .into_iter()
        .map(|r| r.run.to_string())
        .collect();
    runs.extend(by_run.keys().cloned());
    let mut report = warrant_audit::JournalReport::default();
    for name in runs {
        // A subject that is not a run id is a malformed record, which the chain report names.
        let Some(run) = RunId::parse(&name) else {
            continue;
        };
        let events = inst.store.events(&run).map_err(|e| Failure::coded(&e, 1))?;
        let records = by_run.remove(&name).unwrap_or_default();
        report.add(
            &run,
            warrant_audit::verify_run(&run, &events, &records, keys),
        );
    }
    Ok(report)
}

fn print_reports(
    reports: &[Checked],
    journal: Option<&warrant_audit::JournalReport>,
    json: bool,
) -> u8 {
    let ok = reports.iter().all(Checked::is_ok) && journal.is_none_or(|j| j.is_ok());
    if json {
        let v: Vec<Value> = reports
            .iter()
            .map(|c| {
                let mut entry = json!({"source": c.name, "ok": c.is_ok(), "report": c.report});
                if let Some((path, outcome)) = &c.checkpoint {
                    entry["checkpoint"] = json!(CheckpointView::of(path, outcome));
                }
                entry
            })
            .collect();
        let mut doc = json!({"ok": ok, "checked": v});
        if let Some(j) = journal {
            doc["journal"] = json!({"ok": j.is_ok(), "report": j});
        }
        outln!("{}", pretty(&doc));
    } else {
        for c in reports {
            let (name, r) = (&c.name, &c.report);
            match &r.first_problem {
                None => outln!(
                    "ok       {name}: {} records, chain and signatures intact",
                    r.records
                ),
                Some(p) => outln!(
                    "BROKEN   {name}: {} intact records, then at line {} (seq {}, record {}): {:?}: {}",
                    r.records,
                    p.line,
                    p.seq.map_or_else(|| "?".into(), |s| s.to_string()),
                    p.record_id.clone().unwrap_or_else(|| "?".into()),
                    p.kind,
                    p.detail
                ),
            }
            match &c.checkpoint {
                None => {}
                Some((path, Ok(Some(cp)))) => outln!(
                    "ok       {path}: signed checkpoint at record {}, every record up to it present",
                    cp.seq
                ),
                Some((path, Ok(None))) => outln!(
                    "note     {path}: no checkpoint, so records cut from the end of {name} would not be seen"
                ),
                Some((path, Err(e))) => outln!("BROKEN   {path}: [{}] {e}", e.code()),
            }
        }
        if let Some(j) = journal {
            print_journal(j);
        }
    }
    if ok { 0 } else { 1 }
}

fn print_journal(j: &warrant_audit::JournalReport) {
    let unbound = if j.unbound > 0 {
        format!(
            "; {} of them recorded before records carried event digests (unbound: their kind and place are checked, not their content)",
            j.unbound
        )
    } else {
        String::new()
    };
    if j.is_ok() {
        outln!(
            "ok       journal: {} runs, {} events, each matching its signed record{unbound}",
            j.runs,
            j.events
        );
        return;
    }
    outln!(
        "BROKEN   journal: {} of {} runs do not match their signed records",
        j.problems.len(),
        j.runs
    );
    for p in &j.problems {
        outln!(
            "         {} event {}: {} [{}]: {}",
            p.run,
            p.seq,
            p.what,
            p.code,
            p.message
        );
    }
}

fn audit_tail(ws: Option<&Path>, lines: usize, json: bool) -> Result<u8, Failure> {
    let (_, inst) = open_store(ws)?;
    install::deliver(&inst);
    let head = inst.store.audit_head().map_err(|e| Failure::coded(&e, 1))?;
    let after = head.seq.saturating_sub(lines as u64);
    let records = inst
        .store
        .audit_records(after, lines)
        .map_err(|e| Failure::coded(&e, 1))?;
    for r in &records {
        if json {
            outln!("{}", r.line);
        } else {
            print_record_line(r);
        }
    }
    Ok(0)
}

fn age(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{}s", s / 60, s % 60),
        _ => format!("{}h{}m", s / 3600, (s % 3600) / 60),
    }
}

/// One sink's health as `audit status` and `doctor` see it.
fn sink_health(
    inst: &Installation,
    sink: &str,
    head: u64,
    now: warrant_core::Timestamp,
) -> Result<Value, Failure> {
    let state = inst
        .store
        .sink_state(sink)
        .map_err(|e| Failure::coded(&e, 1))?;
    let pending = head.saturating_sub(state.acknowledged);
    let oldest = if pending > 0 {
        inst.store
            .audit_records(state.acknowledged, 1)
            .ok()
            .and_then(|r| r.into_iter().next())
            .and_then(|r| serde_json::from_str::<Value>(&r.line).ok())
            .and_then(|v| v["time"].as_str().and_then(warrant_core::Timestamp::parse))
            .map(|t| now.millis() - t.millis())
    } else {
        None
    };
    let failing_for = state.failing_since.map(|t| now.millis() - t.millis());
    // Records per minute between the first and the last successful delivery.
    let rate = match (state.first_success, state.last_success) {
        (Some(first), Some(last)) if last.millis() > first.millis() => {
            Some(state.delivered_total as f64 * 60_000.0 / (last.millis() - first.millis()) as f64)
        }
        _ => None,
    };
    Ok(json!({
        "sink": sink,
        "kind": if sink == install::JSONL_SINK { "jsonl" } else { "http" },
        "acknowledged": state.acknowledged,
        "pending": pending,
        "oldest_pending_ms": oldest,
        "delivered_total": state.delivered_total,
        "rate_per_minute": rate.map(|r| (r * 10.0).round() / 10.0),
        "last_success": state.last_success,
        "last_error": state.last_error,
        "last_error_at": state.last_error_at,
        "failing_for_ms": failing_for,
        "stale": failing_for.is_some_and(|f| f > inst.fail_after_ms as i64),
    }))
}

fn sink_names(inst: &Installation) -> Vec<String> {
    std::iter::once(install::JSONL_SINK.to_owned())
        .chain(inst.sinks.keys().cloned())
        .collect()
}

fn audit_status(ws: Option<&Path>, json: bool) -> Result<u8, Failure> {
    let (_, inst) = open_store(ws)?;
    let head = inst
        .store
        .audit_head()
        .map_err(|e| Failure::coded(&e, 1))?
        .seq;
    let now = SystemClock.now();
    let rows: Vec<Value> = sink_names(&inst)
        .iter()
        .map(|s| sink_health(&inst, s, head, now))
        .collect::<Result<_, _>>()?;
    if json {
        outln!("{}", pretty(&json!({"head": head, "sinks": rows})));
        return Ok(0);
    }
    outln!("audit chain head: record {head}");
    outln!(
        "{:<12} {:>8} {:>10} {:<26} {:<10} {}",
        "SINK",
        "PENDING",
        "OLDEST",
        "LAST SUCCESS",
        "DELIVERED",
        "LAST ERROR"
    );
    for r in rows {
        outln!(
            "{:<12} {:>8} {:>10} {:<26} {:<10} {}",
            r["sink"].as_str().unwrap_or(""),
            r["pending"],
            r["oldest_pending_ms"]
                .as_i64()
                .map(age)
                .unwrap_or_else(|| "-".into()),
            r["last_success"].as_str().unwrap_or("never"),
            r["delivered_total"],
            match (r["last_error"].as_str(), r["failing_for_ms"].as_i64()) {
                (Some(e), Some(f)) => format!("failing for {}: {e}", age(f)),
                (Some(e), None) => format!("(recovered) {e}"),
                (None, _) => "-".to_owned(),
            }
        );
    }
    Ok(0)
}

fn audit_flush(ws: Option<&Path>, timeout: &str, json: bool) -> Result<u8, Failure> {
    let limit = drive::parse_duration(timeout).ok_or_else(|| {
        Failure::usage(
            "W-CLI-003",
            format!("--timeout {timeout:?} is not a duration; use e.g. 30s"),
        )
    })?;
    let (_, inst) = open_store(ws)?;
    let started = std::time::Instant::now();
    loop {
        let head = inst
            .store
            .audit_head()
            .map_err(|e| Failure::coded(&e, 1))?
            .seq;
        let results = install::deliver_all(&inst, install::Patience::Flush);
        let stuck: Vec<(String, String)> = results
            .into_iter()
            .filter_map(|d| match d.outcome {
                Ok(acked) if acked >= head => None,
                Ok(acked) => Some((d.sink, format!("{} record(s) still pending", head - acked))),
                Err(e) => Some((d.sink, e)),
            })
            .collect();
        if stuck.is_empty() {
            if json {
                outln!("{}", json!({"flushed": true, "head": head}));
            } else {
                outln!("every sink has every record (up to {head})");
            }
            return Ok(0);
        }
        if started.elapsed() >= limit {
            if json {
                outln!(
                    "{}",
                    json!({"flushed": false, "head": head, "stuck": stuck.iter().map(|(s, e)| json!({"sink": s, "error": e})).collect::<Vec<_>>()})
                );
            }
            for (sink, e) in &stuck {
                eprintln!("stuck: sink `{sink}`: {e}");
            }
            return Err(Failure {
                code: "W-CLI-005".to_owned(),
                message: format!(
                    "audit flush gave up after {timeout}: {} sink(s) stuck ({})",
                    stuck.len(),
                    stuck
                        .iter()
                        .map(|(s, _)| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                exit: 1,
            });
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

fn audit_query(
    ws: Option<&Path>,
    query: &warrant_store::AuditQuery,
    json: bool,
) -> Result<u8, Failure> {
    let (_, inst) = open_store(ws)?;
    let records = inst
        .store
        .query_audit(query)
        .map_err(|e| Failure::coded(&e, 1))?;
    for r in &records {
        if json {
            outln!("{}", r.line);
        } else {
            print_record_line(r);
        }
    }
    if !json {
        eprintln!("{} record(s)", records.len());
    }
    Ok(0)
}

fn print_record_line(r: &warrant_store::SealedRecord) {
    let v: Value = serde_json::from_str(&r.line).unwrap_or(Value::Null);
    let d = &v["data"];
    let s = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    outln!(
        "{:>5}  {}  {:<28} {:<8} {:<6} {:<40} {}",
        r.seq,
        v.get("time").and_then(Value::as_str).unwrap_or(""),
        v.get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim_start_matches("dev.warrant."),
        s("actor"),
        s("decision"),
        s("resource"),
        s("outcome"),
    );
}

fn audit_touched(ws: Option<&Path>, run: &str, json: bool) -> Result<u8, Failure> {
    let run = parse_run(run)?;
    let (_, inst) = open_store(ws)?;
    let events = inst.store.events(&run).map_err(|e| Failure::coded(&e, 1))?;
    if events.is_empty() {
        return Err(Failure::usage(
            "W-KERNEL-004",
            format!("run {run} does not exist; `warrant runs list` shows the runs there are"),
        ));
    }
    // What the run touched is read from its journal, so the journal must be what was signed
    // (a view: the refusal is the command's error, nothing is appended).
    if !warrant_host::controls::disabled("binding") {
        warrant_kernel::journal::check(inst.store.as_ref(), &inst.public_keys, &run, &events)
            .map_err(|e| Failure::coded(&e, 1))?
            .map_err(|e| Failure::coded(&e, 1))?;
    }
    let state = RunState::fold(&events).map_err(|e| Failure::coded(&e, 1))?;
    let mut by_kind: std::collections::BTreeMap<String, Vec<Value>> =
        std::collections::BTreeMap::new();
    for call in &state.calls {
        let Some(actions) = &call.actions else {
            continue;
        };
        let (what, who) = match &call.result {
            Some(warrant_kernel::CallResult::Completed { ok, .. }) => {
                let allowed_by = match call
                    .request
                    .as_ref()
                    .and_then(|r| state.requests.get(r))
                    .and_then(|r| r.answer.clone())
                {
                    Some(warrant_kernel::RequestAnswer::Granted {
                        approver, scope, ..
                    }) => format!(
                        "{} (approved {}, via {})",
                        approver.actor,
                        scope.as_str(),
                        approver.via
                    ),
                    _ => format!(
                        "policy {}",
                        call.decisions
                            .iter()
                            .flat_map(|d| d.reasons.iter().map(|r| r.policy.clone()))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                };
                (if *ok { None } else { Some("failed") }, allowed_by)
            }
            Some(warrant_kernel::CallResult::Denied { denied, .. }) => (
                Some("refused"),
                match denied {
                    warrant_kernel::DeniedBy::Policy { reasons } => format!(
                        "denied by policy {}",
                        reasons
                            .iter()
                            .map(|r| r.policy.clone())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    warrant_kernel::DeniedBy::Person { approver, reason } => {
                        format!("denied by {}: {reason}", approver.actor)
                    }
                },
            ),
            Some(warrant_kernel::CallResult::InDoubt) | None
                if call.in_doubt.is_some() || call.started.is_some() =>
            {
                (Some("in doubt"), String::new())
            }
            Some(warrant_kernel::CallResult::Refused { .. })
            | Some(warrant_kernel::CallResult::InDoubt)
            | None => continue,
        };
        for a in actions {
            let verb = a.verb();
            let status = what.unwrap_or(if verb.default_risk() == warrant_core::RiskClass::Read {
                "read"
            } else {
                "changed"
            });
            by_kind
                .entry(verb.kind().as_str().to_owned())
                .or_default()
                .push(json!({
                    "resource": a.target(),
                    "verb": verb.as_str(),
                    "status": status,
                    "by": who,
                    "call": call.record.id,
                }));
        }
    }
    if json {
        outln!(
            "{}",
            pretty(&json!({"run": run, "actor": state.principal.actor, "touched": by_kind}))
        );
        return Ok(0);
    }
    outln!("run {run} for {}", state.principal.actor);
    for (kind, rows) in &by_kind {
        outln!("{kind}");
        for r in rows {
            outln!(
                "  {:<8} {:<11} {:<40} {}",
                r["status"].as_str().unwrap_or(""),
                r["verb"].as_str().unwrap_or(""),
                r["resource"].as_str().unwrap_or(""),
                r["by"].as_str().unwrap_or("")
            );
        }
    }
    Ok(0)
}

fn audit_keys_rotate(ws: Option<&Path>) -> Result<u8, Failure> {
    let paths = install::paths(&crate::at(ws), false)?;
    let rotation = AuditKey::rotate(&paths.keys()).map_err(|e| Failure::coded(&e, 1))?;
    outln!(
        "rotated the audit signing key: {} -> {}; records signed by {} still verify (its public key is kept in keys/retired/)",
        rotation.old_kid,
        rotation.new_kid,
        rotation.old_kid
    );
    Ok(0)
}

fn audit_keys_export(ws: Option<&Path>) -> Result<u8, Failure> {
    let paths = install::paths(&crate::at(ws), false)?;
    let keys = PublicKeys::load_dir(&paths.keys()).map_err(|e| Failure::coded(&e, 1))?;
    out_text(&keys.to_file_text());
    Ok(0)
}

fn out_text(text: &str) {
    use std::io::Write as _;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

/// Doctor rows for the OS sandbox, probed by trying in a child through this binary's launcher.
/// A mechanism the machine lacks fails the check only when a configured profile asks for a
/// sandbox; each sandboxed profile gets a row saying what it will get here.
fn sandbox_checks(
    profiles: &std::collections::BTreeMap<String, warrant_core::config::ProfileConfig>,
    checks: &mut Vec<(String, bool, String)>,
) {
    let wanted = profiles.values().any(|p| p.sandbox.is_some());
    let launcher = match warrant_exec::Launcher::current_exe() {
        Ok(l) => l,
        Err(e) => {
            checks.push(("sandbox".to_owned(), !wanted, e.to_string()));
            return;
        }
    };
    let scratch = std::env::temp_dir().join(format!("warrant-doctor-{}", std::process::id()));
    let rows = warrant_exec::sandbox::probe(&launcher, &scratch);
    let _ = fs::remove_dir_all(&scratch);
    for row in &rows {
        let detail = if row.available {
            row.detail.clone()
        } else {
            format!("not available: {}", row.detail)
        };
        checks.push((
            format!("sandbox {}", row.mechanism),
            row.available || !wanted,
            detail,
        ));
    }
    for (name, profile) in profiles {
        let (ok, detail) = match &profile.sandbox {
            Some(sandbox) if !profile.unconfined => {
                let (ok, verdict) = warrant_exec::sandbox::profile_verdict(sandbox, &rows);
                let words = warrant_tools::confinement_words(profile, profile.is_contained());
                (ok, format!("{verdict}: {words}"))
            }
            Some(_) | None => (
                true,
                "unconfined: no sandbox, so every command of it waits for a person".to_owned(),
            ),
        };
        checks.push((format!("profile {name}"), ok, detail));
    }
}

/// The default profile's row first: what every command without a profile runs under.
fn default_profile_first(checks: &mut Vec<(String, bool, String)>) {
    if let Some(i) = checks
        .iter()
        .position(|(name, _, _)| name == "profile default")
    {
        let (_, ok, detail) = checks.remove(i);
        checks.insert(0, ("default profile".to_owned(), ok, detail));
    }
}

fn doctor(ws: Option<&Path>, json: bool) -> Result<u8, Failure> {
    let mut checks: Vec<(String, bool, String)> = Vec::new();
    let mut check = |name: &str, result: Result<String, String>| {
        let (ok, detail) = match result {
            Ok(d) => (true, d),
            Err(e) => (false, e),
        };
        checks.push((name.to_owned(), ok, detail));
    };
    let paths = install::paths(&crate::at(ws), false)?;
    let layers = install::read_layers(&paths);
    check(
        "configuration",
        layers
            .as_ref()
            .map(|l| format!("{} layer file(s)", l.len()))
            .map_err(|f| format!("[{}] {}", f.code, f.message)),
    );
    let settings = layers.as_ref().ok().map(|l| install::settings(l));
    let profiles = settings
        .as_ref()
        .and_then(|s| s.as_ref().ok())
        .map(|s| s.profiles.clone())
        .unwrap_or_default();
    check(
        "identity",
        layers
            .as_ref()
            .map_err(|f| f.message.clone())
            .and_then(|l| {
                install::identity(l)
                    .map(|id| {
                        format!(
                            "{} ({}) in {}",
                            id.principal.actor,
                            id.principal.kind.as_str(),
                            id.principal.tenant
                        )
                    })
                    .map_err(|f| format!("[{}] {}", f.code, f.message))
            }),
    );
    check(
        "policy",
        install::policy(&paths)
            .map(|p| {
                let mut line = format!("{} policies, set {}", p.policy_ids().count(), p.digest());
                for w in p.warnings() {
                    line.push_str(&format!("; warning: {w}"));
                }
                line
            })
            .map_err(|f| format!("[{}] {}", f.code, f.message)),
    );
    check(
        "approvals",
        layers
            .as_ref()
            .map_err(|f| f.message.clone())
            .and_then(|l| {
                install::approval_rules(&paths, l)
                    .map(|r| approvals_summary(&r))
                    .map_err(|f| format!("[{}] {}", f.code, f.message))
            }),
    );
    let inst = match settings {
        Some(Ok(settings)) => install::installation(&paths, &settings, crate::notices())
            .map_err(|f| format!("[{}] {}", f.code, f.message)),
        Some(Err(f)) => Err(format!("[{}] {}", f.code, f.message)),
        None => Err("no configuration".to_owned()),
    };
    match &inst {
        Err(e) => check("store and keys", Err(e.clone())),
        Ok(inst) => {
            check(
                "store and keys",
                Ok(format!(
                    "{}, key {}",
                    inst.store_location,
                    inst.sealer.key().kid()
                )),
            );
            let head = inst.store.audit_head().map(|h| h.seq).unwrap_or(0);
            let records = all_records(inst).unwrap_or_default();
            let keys =
                PublicKeys::load_dir(&paths.keys()).unwrap_or_else(|_| inst.public_keys.clone());
            let report = verify_sealed(&records, &keys);
            check(
                "audit chain",
                match &report.first_problem {
                    None => Ok(format!("{} records intact", report.records)),
                    Some(p) => Err(format!(
                        "broken at seq {:?}: {:?}: {}",
                        p.seq, p.kind, p.detail
                    )),
                },
            );
            let now = SystemClock.now();
            for sink in sink_names(inst) {
                let h = sink_health(inst, &sink, head, now);
                check(
                    &format!("audit sink {sink}"),
                    match h {
                        Err(f) => Err(f.message),
                        Ok(h) if h["stale"] == true => Err(format!(
                            "failing for {} (longer than {}): {}",
                            age(h["failing_for_ms"].as_i64().unwrap_or(0)),
                            age(inst.fail_after_ms as i64),
                            h["last_error"].as_str().unwrap_or("")
                        )),
                        Ok(h) => Ok(format!(
                            "{} pending, last success {}",
                            h["pending"],
                            h["last_success"].as_str().unwrap_or("never")
                        )),
                    },
                );
            }
        }
    }
    sandbox_checks(&profiles, &mut checks);
    default_profile_first(&mut checks);
    let ok = checks.iter().all(|(_, ok, _)| *ok);
    if json {
        outln!(
            "{}",
            pretty(
                &json!({"ok": ok, "checks": checks.iter().map(|(n, ok, d)| json!({"check": n, "ok": ok, "detail": d})).collect::<Vec<_>>()})
            )
        );
    } else {
        for (name, ok, detail) in &checks {
            outln!(
                "{:<4} {:<22} {detail}",
                if *ok { "ok" } else { "FAIL" },
                name
            );
        }
    }
    Ok(if ok { 0 } else { 1 })
}

/// One line for `doctor`: the directory, who is asked here, and non-default risk rules.
fn approvals_summary(r: &warrant_kernel::ApprovalRules) -> String {
    let who = match &r.directory {
        None => "no identity directory: any person who is not an agent may approve".to_owned(),
        Some(d) => {
            let asked = warrant_kernel::ApprovalRules {
                risk: r.risk.clone(),
                directory: Some(d.clone()),
                team: r.team.clone(),
                ..Default::default()
            }
            .asked_of(
                &Principal {
                    tenant: String::new(),
                    actor: String::new(),
                    kind: PrincipalKind::User,
                    on_behalf_of: None,
                    roles: Vec::new(),
                    teams: Vec::new(),
                    attrs: Default::default(),
                },
                warrant_core::RiskClass::Change,
            );
            format!(
                "directory with {} people and {} admins; requests go to {}",
                d.people.len(),
                d.admins().len(),
                asked.describe()
            )
        }
    };
    let rules: Vec<String> = warrant_core::RiskClass::ALL
        .into_iter()
        .map(|c| {
            let rule = r.risk.rule(c);
            format!(
                "{} needs {}{}",
                c.as_str(),
                rule.needs.as_str(),
                if rule.four_eyes { " (four eyes)" } else { "" }
            )
        })
        .collect();
    format!("{who}; {}", rules.join(", "))
}

fn audit_deliver(ws: Option<&Path>, follow: bool, interval: &str) -> Result<u8, Failure> {
    let every = drive::parse_duration(interval).ok_or_else(|| {
        Failure::usage(
            "W-CLI-003",
            format!("--interval {interval:?} is not a duration; use e.g. 5s"),
        )
    })?;
    let (_, inst) = open_store(ws)?;
    loop {
        let head = inst
            .store
            .audit_head()
            .map_err(|e| Failure::coded(&e, 1))?
            .seq;
        let mut failed = false;
        for d in install::deliver_all(&inst, install::Patience::Flush) {
            match d.outcome {
                Ok(acked) => outln!("{}: delivered up to record {acked} of {head}", d.sink),
                Err(e) => {
                    failed = true;
                    outln!("{}: failed: {e}", d.sink);
                }
            }
        }
        if !follow {
            return Ok(if failed { 1 } else { 0 });
        }
        std::thread::sleep(every);
    }
}

/// The store's whole audit trail, read in batches.
fn all_records(
    inst: &Installation,
) -> Result<Vec<warrant_store::SealedRecord>, warrant_store::StoreError> {
    let mut records = Vec::new();
    loop {
        let after = records
            .last()
            .map_or(0, |r: &warrant_store::SealedRecord| r.seq);
        let batch = inst.store.audit_records(after, 1000)?;
        if batch.is_empty() {
            return Ok(records);
        }
        records.extend(batch);
    }
}
