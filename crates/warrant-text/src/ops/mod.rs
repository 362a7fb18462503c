//! Words for the operations every front end has: the notices and hints of the application
//! layer, and (one submodule each) runs, requests, audit, set-up and the approval prompt.
//! The commands a line names are the terminal's (`warrant …`); a chat gateway that words a
//! next step differently supplies its own `narrate::Words`.

/// The audit trail: verified, tailed, queried, delivered, touched.
pub mod audit;
/// The approval prompt at the run's own terminal, laid out.
pub mod prompt;
/// Requests to a person: listed, shown, replied.
pub mod requests;
/// Runs and approvals: started, resumed, worked, listed, shown; who am I; doctor.
pub mod runs;
/// The first hour: get-started, configure, credentials, config check, providers,
/// capabilities.
pub mod setup;

use warrant_core::Hint;
use warrant_host::Notice;

/// The words for what a person can do, joined to the message of the error they follow.
pub fn hint(hint: &Hint) -> String {
    match hint {
        Hint::Init => "; run `warrant init --yes` in the workspace first".to_owned(),
        Hint::AuditStatus => "; `warrant audit status` shows what is delivered".to_owned(),
        Hint::ListRuns => "; `warrant runs list` shows the runs there are".to_owned(),
        Hint::ListApprovals => "; `warrant approvals list` shows open requests".to_owned(),
        Hint::ListRequests => "; `warrant requests list` shows open requests".to_owned(),
        Hint::ShowRun { run } => format!("; `warrant runs show {run}` lists its steps"),
        Hint::ShowRequest { request } => {
            format!("; `warrant requests show {request}` says how to answer it")
        }
        Hint::Resume { run } => format!(" (`warrant resume {run}`)"),
        Hint::ApproveOrDeny => {
            "; approvals are answered with `warrant approve` / `warrant deny`".to_owned()
        }
        Hint::AnswerQuestion => {
            "; answer it with `warrant requests answer REQ --option N | --text TEXT`".to_owned()
        }
        Hint::ProvideSecret => "; provide it with `warrant requests provide REQ` (the value is read from standard input)".to_owned(),
        Hint::ConnectResource => "; connect it with `warrant requests connect REQ --url URL | --command PROGRAM ARGS... | --use-proposed`".to_owned(),
        Hint::ResolveInDoubt { run, step } => format!(
            "; answer with `warrant runs resolve {run} --step {step} --as completed|retry|failed`"
        ),
        Hint::CheckInit => "; was `warrant init` run?".to_owned(),
        Hint::InitAnew => " and run `warrant init` to start a new one".to_owned(),
        Hint::NewApproverKey => {
            "; make a new one with `warrant approvals keygen --force`".to_owned()
        }
        Hint::EnrollApproverKey => ", then `warrant approvals keygen` enrolls your key again".to_owned(),
        Hint::VerifyTrail => " (`warrant audit verify` checks the whole trail)".to_owned(),
        Hint::VerifyAsTampering => {
            "; run `warrant audit verify` and treat it as tampering".to_owned()
        }
        Hint::VerifySinkCopy => ". Run `warrant audit verify` on it".to_owned(),
        Hint::VerifyStore => ". Check the store with `warrant audit verify`".to_owned(),
        Hint::VerifyBothCopies => ". Run `warrant audit verify` on both files".to_owned(),
        Hint::Verify => ". Run `warrant audit verify`".to_owned(),
        Hint::RestoreCopy => {
            ": to restore the copy, move it and its checkpoint aside and run `warrant audit flush`"
                .to_owned()
        }
        Hint::VerifyCopy => {
            " and check the copy against the store with `warrant audit verify`".to_owned()
        }
        Hint::WriteCheckpoint => {
            ". Run `warrant audit flush` to write one, and find out who removed it".to_owned()
        }
        Hint::SandboxSupport => "; `warrant doctor` shows what this machine provides".to_owned(),
    }
}

/// A notice of the application layer as one line, or nothing when it has nothing to say
/// (a profile delta that left no file).
pub fn notice(notice: Notice) -> Option<String> {
    Some(match notice {
        Notice::PolicyWarning { text } => format!("warning: {text}"),
        Notice::DeliveryFailed { sink, error } => format!(
            "warning: audit delivery to sink `{sink}` failed: {error}; the records stay in the outbox (`warrant audit status`, `warrant audit flush`)"
        ),
        Notice::OutboxWaiting {
            pending,
            sink,
            max,
            why,
        } => format!(
            "waiting: {pending} audit records are not yet delivered to sink `{sink}` (bound {max}); new effects wait until it catches up. {why}"
        ),
        Notice::OutboxDropped {
            from,
            to,
            sink,
            max,
        } => format!(
            "dropped: audit records {from}..={to} will never reach sink `{sink}` (bound {max}, on_full = drop); the gap is recorded"
        ),
        Notice::TakingOver { run, from } => {
            format!("taking over {run} from {from}, which is no longer running")
        }
        Notice::McpUnavailable { code, error } => {
            format!("warning: {error} ({code}); its tools are not offered")
        }
        Notice::SkillsUnavailable { code, error } => {
            format!("warning: {error} ({code}); no skills are offered")
        }
        Notice::ProfileDelta {
            run,
            profile,
            path,
            applied,
            queued,
            error,
        } => match (error, path, applied) {
            (Some(e), _, _) => {
                format!("warning: the state delta of {run} for profile `{profile}`: {e}")
            }
            (None, Some(p), Some(rev)) => format!(
                "profile `{profile}` learned from {run}: state applied (revision {rev}); delta {}{}",
                p.display(),
                proposals(&queued)
            ),
            (None, Some(p), None) => format!(
                "profile `{profile}`: {run} left a state delta for a person (`warrant profiles apply {} --approve`){}",
                p.display(),
                proposals(&queued)
            ),
            (None, None, _) => return None,
        },
        Notice::LegacyProposals { dir, files } => format!(
            "warning: {files} proposal file(s) in {} are from before proposals became requests: they are not requests, nothing applies them and they were not migrated; review them, then remove the directory",
            dir.display()
        ),
        Notice::BaselineGaps { gaps } => {
            let listed: Vec<String> = gaps
                .iter()
                .map(|g| format!("[{}] {}", g.control, g.problem))
                .collect();
            format!(
                "notice: {} baseline control(s) missing (strict mode would refuse to start): {}",
                gaps.len(),
                listed.join("; ")
            )
        }
    })
}

/// The proposals a profile's state delta raised as requests for a person, as the tail of its
/// notice.
fn proposals(queued: &[String]) -> String {
    if queued.is_empty() {
        String::new()
    } else {
        format!(
            "; {} proposal(s) raised as requests for a person ({}): `warrant requests answer REQ --text approve` | `warrant requests decline REQ --reason TEXT`",
            queued.len(),
            queued.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    /// The audit trail's errors name no command (any front end words what to do); the
    /// terminal's words joined to them read exactly as the messages did when they named it.
    #[test]
    fn audit_errors_name_no_command_and_the_terminal_words_them_as_before() {
        use warrant_core::Coded as _;
        let path = std::path::PathBuf::from("/c/audit.jsonl");
        let cases: Vec<(String, Option<Hint>, &str)> = vec![
            {
                let e = warrant_audit::BindingError::Edited {
                    run: "run-1".into(),
                    seq: 4,
                    detail: "d".into(),
                };
                (
                    e.to_string(),
                    e.hint(),
                    "event 4 of run run-1 was edited after it was signed: d. Warrant does not act on this run; restore the store from a backup or start a new run (`warrant audit verify` checks the whole trail)",
                )
            },
            {
                let e = warrant_audit::CheckpointError::Missing {
                    path: path.clone(),
                    records: 3,
                };
                (
                    e.to_string(),
                    e.hint(),
                    "the copy holds 3 records but has no checkpoint at /c/audit.jsonl; records removed from its end could not be seen. Run `warrant audit flush` to write one, and find out who removed it",
                )
            },
            {
                let e = warrant_audit::AuditError::SinkCorrupt {
                    path,
                    reason: "r".into(),
                };
                (
                    e.to_string(),
                    e.hint(),
                    "the last record of the sink file /c/audit.jsonl cannot be read (r); nothing was appended. Run `warrant audit verify` on it",
                )
            },
        ];
        for (message, h, before) in cases {
            assert!(!message.contains("warrant "), "{message}");
            let words = h.as_ref().map(hint).unwrap_or_default();
            assert_eq!(format!("{message}{words}"), before);
        }
    }

    #[test]
    fn a_profile_delta_names_its_queued_proposals_or_says_nothing_without_a_file() {
        let delta = |path: Option<&str>, applied, queued: &[&str]| Notice::ProfileDelta {
            run: "run-1".into(),
            profile: "reviewer".into(),
            path: path.map(Into::into),
            applied,
            queued: queued.iter().map(|q| (*q).to_owned()).collect(),
            error: None,
        };
        assert_eq!(
            notice(delta(Some("/d/x.json"), Some(3), &[])),
            Some("profile `reviewer` learned from run-1: state applied (revision 3); delta /d/x.json".to_owned())
        );
        assert_eq!(
            notice(delta(Some("/d/x.json"), None, &["p1", "p2"])),
            Some("profile `reviewer`: run-1 left a state delta for a person (`warrant profiles apply /d/x.json --approve`); 2 proposal(s) raised as requests for a person (p1, p2): `warrant requests answer REQ --text approve` | `warrant requests decline REQ --reason TEXT`".to_owned())
        );
        assert_eq!(notice(delta(None, None, &["p1"])), None);
    }
}
