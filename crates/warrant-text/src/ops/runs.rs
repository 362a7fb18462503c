//! Runs and approvals in words: what `init`, `whoami`, a run's end, a resume that could not
//! continue, the worker's progress, a cancel, a resolve, a key, an answer, the run and request
//! listings and `doctor` say. Every function returns the lines; the caller prints them.

use warrant_agent::RunExit;
use warrant_core::{RequestId, RunId};
use warrant_host::approvals::Answered;
use warrant_host::approver_key::KeyMade;
use warrant_host::doctor::DoctorReport;
use warrant_host::identity::Identity;
use warrant_host::init::Initialized;
use warrant_host::narrate::{Narrator, Next, Words, inline};
use warrant_host::records::RunView;
use warrant_host::runs::{Cancelled, Resumed, WorkerEvent};
use warrant_kernel::Resolution;
use warrant_store::{RequestRow, RequestStatus, RunRow};

/// The terminal's words for what a person can do next: the commands that do it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Commands;

impl Words for Commands {
    fn next(&self, step: Next<'_>) -> String {
        let decline = |r: &RequestId| format!("   |   warrant requests decline {r} --reason TEXT");
        match step {
            Next::Approve { request: r } => {
                format!("warrant approve {r}   |   warrant deny {r} --reason TEXT")
            }
            Next::Answer { request: r } => format!(
                "warrant requests answer {r} --option N | --text TEXT{}",
                decline(r)
            ),
            Next::Provide { request: r } => format!(
                "warrant requests provide {r}   (the value is read from standard input){}",
                decline(r)
            ),
            Next::Connect { request: r } => format!(
                "warrant requests connect {r} --url URL | --command PROGRAM ARGS... | --use-proposed{}",
                decline(r)
            ),
            Next::WholeRun => "`warrant runs show --json`".to_owned(),
        }
    }
}

/// The narration of events with the terminal's next steps.
pub fn narrator() -> Narrator {
    Narrator::new(Box::new(Commands))
}

/// What `init` made, file by file.
pub fn initialized(made: &Initialized) -> Vec<String> {
    vec![
        format!("initialized {}", made.dot.display()),
        "  config     .warrant/config.toml".to_owned(),
        "  policies   .warrant/policies/default.cedar".to_owned(),
        "  keys       .warrant/keys/ (audit signing key, installation secret)".to_owned(),
        "  store      .warrant/store.db".to_owned(),
        "  audit      .warrant/audit/audit.jsonl".to_owned(),
        format!(
            "  approver   {} ({}), enrolled for {} in .warrant/keys/approvers",
            made.approver_key.display(),
            if made.key_made {
                "made now"
            } else {
                "yours already"
            },
            made.actor
        ),
    ]
}

/// The question `init` asks before it writes.
pub fn init_question(dot: &std::path::Path) -> String {
    format!(
        "Create {} (config, policies, keys, store)? [y/N] ",
        dot.display()
    )
}

/// Who this process is, and where each field came from (`[required, locked]` where they are).
pub fn whoami(id: &Identity) -> Vec<String> {
    let p = &id.principal;
    let mut out = vec![format!(
        "{} ({}) in tenant {}",
        p.actor,
        p.kind.as_str(),
        p.tenant
    )];
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
        out.push(format!(
            "  {:<13} {:<20} from {}{flags}",
            row.field, row.value, o.display
        ));
    }
    out
}

/// How a run driven here ended.
pub fn exit(run: &RunId, exit: &RunExit) -> Vec<String> {
    match exit {
        RunExit::Completed => vec![format!("run {run} completed")],
        RunExit::Failed { code, message } => vec![format!("run {run} failed [{code}]: {message}")],
        RunExit::Stopped { reason } => vec![format!("run {run} stopped by governance: {reason}")],
        RunExit::Parked { request } => vec![
            format!("run {run} parked: request {request} waits for a person"),
            format!("  then continue with: warrant resume {run}"),
        ],
        RunExit::Superseded { message } => vec![format!("run {run}: {message}")],
        RunExit::AwaitingMessage => vec![format!(
            "run {run} is a chat session waiting for its person's next message: warrant chat --resume {run}"
        )],
    }
}

/// A resume that parked again without driving the run: what it waits for and the command
/// that moves it (empty for a run that was driven; [`exit`] words that).
pub fn still_waiting(resumed: &Resumed) -> Vec<String> {
    match resumed {
        Resumed::Driven(_) => Vec::new(),
        Resumed::InDoubt { run, request, step } => vec![
            format!("run {run} waits for a person to resolve an effect in doubt ({request})"),
            format!("  warrant runs resolve {run} --step {step} --as completed|retry|failed"),
        ],
        Resumed::AwaitsApproval { run, request } => vec![
            format!("run {run} is still waiting for request {request}"),
            format!("  warrant approve {request}   |   warrant deny {request} --reason TEXT"),
        ],
        Resumed::AwaitsReply {
            run,
            request,
            title,
            until,
        } => vec![
            format!(
                "run {run} is still waiting for request {request} ({}), until {}",
                inline(title),
                until.rfc3339()
            ),
            format!("  warrant requests show {request}"),
        ],
    }
}

/// The worker's progress, one line per event (for standard error).
pub fn worker(event: &WorkerEvent) -> String {
    match event {
        WorkerEvent::Polling { holder, store } => {
            format!("worker {holder}: polling {store} for runs")
        }
        WorkerEvent::Leased { holder, run, token } => {
            format!("worker {holder}: leased {run} (token {token})")
        }
        WorkerEvent::CannotLoad { holder, run, error } => format!(
            "worker {holder}: cannot load {run}: error[{}]: {}",
            error.code, error.message
        ),
        WorkerEvent::Driven { holder, run, exit } => format!("worker {holder}: {run} → {exit:?}"),
        WorkerEvent::Failed { holder, run, error } => {
            format!("worker {holder}: {run} failed: {error}")
        }
        WorkerEvent::StoreUnavailable {
            holder,
            error,
            retry_in,
        } => format!(
            "worker {holder}: the store did not answer (error[{}]: {}); polling again in {} ms",
            error.code,
            error.message,
            retry_in.as_millis()
        ),
    }
}

/// A run queued for a worker.
pub fn submitted(run: &RunId) -> String {
    format!("queued {run}; a worker (`warrant worker`) will drive it")
}

/// What cancelling came to.
pub fn cancelled(run: &RunId, cancelled: &Cancelled) -> String {
    match cancelled {
        Cancelled::Stopped => format!("stopped {run}"),
        Cancelled::Recorded { holder } => format!(
            "cancellation recorded; {holder} drives {run} and stops it at its next effect boundary"
        ),
    }
}

/// A step in doubt, resolved.
pub fn resolved(run: &RunId, step: &str, resolution: Resolution) -> String {
    format!(
        "resolved step {step} of {run} as {}; continue the run with: warrant resume {run}",
        resolution.as_str()
    )
}

/// A new approver key, and the lines an administrator adds to the identity directory.
pub fn key_made(made: &KeyMade) -> Vec<String> {
    let mut out = vec![format!("approver key written to {}", made.path.display())];
    if let Some(file) = &made.enrolled_in {
        out.push(format!(
            "enrolled for {} in this installation ({}; used when there is no identity directory)",
            made.actor,
            file.display()
        ));
    }
    out.push("ask an administrator to add to the identity directory (directory.toml):".to_owned());
    out.push(format!("[people.{}]", made.actor));
    out.push(format!("public_key = \"{}\"", made.public_hex));
    out
}

/// An approval or denial, recorded.
pub fn answered(done: &Answered) -> String {
    format!(
        "{} {}{} as {}; continue the run with: warrant resume {}",
        done.answer,
        done.request,
        done.scope
            .as_ref()
            .map(|s| format!(" ({s})"))
            .unwrap_or_default(),
        done.by,
        done.run
    )
}

/// `runs list`: one line a run, or how to start one.
pub fn runs(runs: &[RunRow]) -> Vec<String> {
    if runs.is_empty() {
        return vec![
            "no runs yet; start one with `warrant run --model scripted:PATH TASK`".to_owned(),
        ];
    }
    runs.iter()
        .map(|r| {
            format!(
                "{}  {:<9}  {}  {:<10}  {:>3} events  {}",
                r.run,
                r.status.as_str(),
                r.created_at.rfc3339(),
                r.actor,
                r.events,
                r.task
            )
        })
        .collect()
}

/// `runs show`: the run, its family, every event narrated and numbered, refused writers.
pub fn run_view(view: &RunView, narrator: &Narrator) -> Vec<String> {
    let row = &view.run;
    let mut out = vec![format!(
        "{}  {}  {} events",
        row.run,
        row.status.as_str(),
        row.events
    )];
    if let Some(p) = &view.parent {
        out.push(format!("subagent of {} (call {})", p.run, p.call));
    }
    out.extend(view.subagents.iter().map(|c| format!("subagent {c}")));
    for e in &view.events {
        match warrant_kernel::RunEvent::from_stored(e) {
            Ok(ev) => {
                for (i, line) in narrator.lines(&ev).iter().enumerate() {
                    if i == 0 {
                        out.push(format!("{:>4}  {line}", e.seq));
                    } else {
                        out.push(format!("      {line}"));
                    }
                }
            }
            Err(err) => out.push(format!("#{:<4}unreadable event: {err}", e.seq)),
        }
    }
    for r in &view.fence_rejections {
        out.push(format!(
            "fenced   at {}: a writer with lease token {} (current {}) was refused: {}",
            r.at.rfc3339(),
            r.presented,
            r.current,
            r.kinds.join(", ")
        ));
    }
    out
}

/// `approvals list`: one line a request (and who is asked, where the summary says).
pub fn approvals(rows: &[RequestRow], all: bool) -> Vec<String> {
    if rows.is_empty() {
        return vec![format!("no {}requests", if all { "" } else { "open " })];
    }
    let mut out = Vec::new();
    for r in rows {
        let s = &r.summary;
        let get = |k: &str| s.get(k).and_then(|v| v.as_str()).unwrap_or("?").to_owned();
        out.push(format!(
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
        ));
        if let Some(asked) = s.get("asked_of").and_then(|v| v.as_str()) {
            out.push(format!("    asked of: {asked}"));
        }
    }
    out
}

/// The note `policy explain` adds when the configuration asks a person although policy allows.
pub fn person_needed(class: warrant_core::RiskClass) -> String {
    format!(
        "note: [risk.{0}] needs = \"person\" in the configuration: {0} actions are asked of a person although policy allows them",
        class.as_str()
    )
}

/// `doctor`: one line a check.
pub fn doctor(report: &DoctorReport) -> Vec<String> {
    report
        .checks
        .iter()
        .map(|c| format!("{:<4} {:<22} {}", ok(c.ok), c.check, c.detail))
        .collect()
}

/// `ok` or `FAIL`, as every check list of the terminal starts its lines.
pub(crate) fn ok(ok: bool) -> &'static str {
    if ok { "ok" } else { "FAIL" }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn doctor_aligns_its_checks_and_a_parked_run_names_the_next_command() {
        let report = DoctorReport {
            ok: false,
            checks: vec![
                warrant_host::doctor::Check {
                    check: "store".into(),
                    ok: true,
                    detail: "sqlite".into(),
                },
                warrant_host::doctor::Check {
                    check: "audit sink `siem`".into(),
                    ok: false,
                    detail: "refused".into(),
                },
            ],
        };
        assert_eq!(
            doctor(&report),
            vec![
                "ok   store                  sqlite".to_owned(),
                "FAIL audit sink `siem`      refused".to_owned(),
            ]
        );
        let run = RunId::parse("run-1").unwrap();
        let request = RequestId::parse("req-1").unwrap();
        assert_eq!(
            exit(&run, &RunExit::Parked { request }),
            vec![
                "run run-1 parked: request req-1 waits for a person".to_owned(),
                "  then continue with: warrant resume run-1".to_owned(),
            ]
        );
    }
}
