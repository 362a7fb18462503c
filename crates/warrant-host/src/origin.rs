//! Where an answer comes from: a person's own process, or a process that a Warrant run started
//! (a command, or anything it started). Three marks, each one a command could only hide when it
//! runs unconfined: the variable every command gets in its environment, the command's cgroup,
//! and a Warrant run among this process's ancestors. Recognition is a layer; what holds is the
//! authentication the ring asks of answers that need a person (see `ApprovalRules`).

use std::path::{Path, PathBuf};

use warrant_kernel::Via;

use crate::HostError;

/// The front end a person answers through: the command line or the local web interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Front {
    Cli,
    Web,
}

/// How this process answers: [`Via::Command`] when it carries a mark of a run's command.
/// A debug build's negative control turns the recognition off (`WARRANT_TEST_DISABLE=origin`).
pub fn via() -> Via {
    via_from(Front::Cli)
}

/// [`via`] for a person answering through `front`.
pub fn via_from(front: Front) -> Via {
    let person = match front {
        Front::Cli => Via::Cli,
        Front::Web => Via::Web,
    };
    if crate::controls::disabled("origin") {
        return person;
    }
    match started_by_a_run() {
        Some(evidence) => Via::Command(evidence),
        None => person,
    }
}

fn started_by_a_run() -> Option<String> {
    if let Some(v) = std::env::var_os(warrant_exec::COMMAND_MARK) {
        return Some(format!(
            "{}={} is in its environment",
            warrant_exec::COMMAND_MARK,
            v.to_string_lossy()
        ));
    }
    if let Some(path) = command_cgroup() {
        return Some(format!("it runs in the command cgroup {path}"));
    }
    warrant_ancestor().map(|(pid, what)| format!("its ancestor {pid} is `{what}`"))
}

/// The cgroup of this process when it is one Warrant made for a command
/// (`…/warrant/<launcher pid>`, see warrant-exec's cgroup module).
fn command_cgroup() -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines()
        .filter_map(|line| line.splitn(3, ':').nth(2))
        .find(|path| {
            let parts: Vec<&str> = path.split('/').collect();
            parts.windows(2).any(|w| {
                w[0] == "warrant" && !w[1].is_empty() && w[1].bytes().all(|b| b.is_ascii_digit())
            })
        })
        .map(str::to_owned)
}

/// The nearest ancestor running this same program as a run driver (`run`, `resume`, `worker`,
/// `serve`), which would have started this process as one of its commands.
fn warrant_ancestor() -> Option<(u32, String)> {
    let me = std::fs::canonicalize("/proc/self/exe").ok()?;
    let mut pid = parent_of(std::process::id())?;
    for _ in 0..64 {
        if pid <= 1 {
            return None;
        }
        let proc_dir = PathBuf::from(format!("/proc/{pid}"));
        if std::fs::canonicalize(proc_dir.join("exe")).ok().as_deref() == Some(me.as_path())
            && let Some(args) = cmdline(&proc_dir)
            && args
                .iter()
                .skip(1)
                .find(|a| !a.starts_with('-'))
                .is_some_and(|sub| matches!(sub.as_str(), "run" | "resume" | "worker" | "serve"))
        {
            return Some((pid, args.join(" ")));
        }
        pid = parent_of(pid)?;
    }
    None
}

fn cmdline(proc_dir: &Path) -> Option<Vec<String>> {
    let raw = std::fs::read(proc_dir.join("cmdline")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    )
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid …`; comm may hold spaces and parentheses, so split after the last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// A reply to the agent's request `request` from a command: refused, and recorded in its run
/// as `approval_rejected` with reason `from_command` (which changes nothing in the fold: the
/// request stays open), so the trail shows the attempt.
pub fn refuse_recorded(
    ring: &warrant_kernel::Ring<'_>,
    state: &mut warrant_kernel::RunState,
    request: &warrant_core::RequestId,
    who: &warrant_core::Principal,
    what: &str,
) -> Result<(), HostError> {
    let Via::Command(evidence) = via() else {
        return Ok(());
    };
    let detail = format!(
        "this process was started by a Warrant run ({evidence}); a command can never {what}: a person does it from their own terminal"
    );
    ring.record_answer_from_command(state, request, who, detail.clone())
        .map_err(|e| HostError::bad_input(&e))?;
    Err(HostError::usage("W-APPROVAL-026", detail))
}

/// For the operations whose refusal is not recorded in a run (resolving an effect in doubt,
/// making an approver key): refuse outright from a command.
pub fn refuse_from_command(what: &str) -> Result<(), HostError> {
    match via() {
        Via::Command(evidence) => Err(HostError::usage(
            "W-APPROVAL-026",
            format!(
                "this process was started by a Warrant run ({evidence}); a command can never {what}: a person does it from their own terminal"
            ),
        )),
        Via::Cli | Via::Web | Via::Terminal => Ok(()),
    }
}
