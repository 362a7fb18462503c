//! `audit verify`: the store's chain, every run's journal against its signed records, and the
//! sink's files against the checkpoint beside them; or one file alone, for an auditor who has
//! only the file and the public keys.

use std::collections::BTreeSet;
use std::path::Path;

use serde::Serialize;
use warrant_audit::{
    Checkpoint, CheckpointError, CheckpointRule, JournalReport, PublicKeys, VerifyReport,
    checkpoint_path, verify_copy, verify_file, verify_sealed,
};
use warrant_core::{Coded as _, RunId};

use crate::records::Records;
use crate::{HostError, Result};

/// Everything `audit verify` checked, and whether all of it holds.
#[derive(Debug, Serialize)]
pub struct Verified {
    pub ok: bool,
    pub checked: Vec<Source>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub journal: Option<JournalCheck>,
    /// The tenant's budget totals (the store's projection) against the fold of its runs' logs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetCheck>,
}

/// The budget totals the gate reads, checked against what the logs add up to.
#[derive(Debug, Serialize)]
pub struct BudgetCheck {
    pub ok: bool,
    /// Runs folded.
    pub runs: usize,
    /// Actors with a total (in the projection or the fold).
    pub actors: usize,
    /// The totals as the store keeps them, by actor.
    pub totals: std::collections::BTreeMap<String, warrant_store::Usage>,
    /// Each actor whose projected total differs from its fold (`W-ENVELOPE-008`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mismatches: Vec<BudgetMismatch>,
}

#[derive(Debug, Serialize)]
pub struct BudgetMismatch {
    pub code: &'static str,
    pub actor: String,
    pub projected: warrant_store::Usage,
    pub folded: warrant_store::Usage,
}

/// One source checked: the store, a sink's files, a file given.
#[derive(Debug, Serialize)]
pub struct Source {
    pub source: String,
    pub ok: bool,
    pub report: VerifyReport,
    /// The checkpoint beside the source and what it proved; absent when not checked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<CheckpointCheck>,
}

#[derive(Debug, Serialize)]
pub struct CheckpointCheck {
    pub path: String,
    pub ok: bool,
    /// The signed checkpoint; `None` with `ok` when there is none to check.
    pub checkpoint: Option<Checkpoint>,
    pub code: Option<&'static str>,
    pub message: Option<String>,
    /// What a person can do, worded by each front end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<crate::Hint>,
}

#[derive(Debug, Serialize)]
pub struct JournalCheck {
    pub ok: bool,
    pub report: JournalReport,
}

impl Source {
    fn chain(source: String, report: VerifyReport) -> Self {
        Self {
            source,
            ok: report.is_ok(),
            report,
            checkpoint: None,
        }
    }

    fn copy(source: String, path: String, copy: warrant_audit::CopyReport) -> Self {
        let checkpoint = CheckpointCheck::of(path, copy.checkpoint);
        Self {
            source,
            ok: copy.chain.is_ok() && checkpoint.ok,
            report: copy.chain,
            checkpoint: Some(checkpoint),
        }
    }
}

impl CheckpointCheck {
    fn of(path: String, outcome: std::result::Result<Option<Checkpoint>, CheckpointError>) -> Self {
        match outcome {
            Ok(checkpoint) => Self {
                path,
                ok: true,
                checkpoint,
                code: None,
                message: None,
                hint: None,
            },
            Err(e) => Self {
                path,
                ok: false,
                checkpoint: None,
                code: Some(e.code()),
                message: Some(e.to_string()),
                hint: e.hint(),
            },
        }
    }
}

impl Verified {
    fn of(checked: Vec<Source>, journal: Option<JournalReport>) -> Self {
        let journal = journal.map(|report| JournalCheck {
            ok: report.is_ok(),
            report,
        });
        Self {
            ok: checked.iter().all(|c| c.ok) && journal.as_ref().is_none_or(|j| j.ok),
            checked,
            journal,
            budget: None,
        }
    }

    fn with_budget(mut self, budget: BudgetCheck) -> Self {
        self.ok &= budget.ok;
        self.budget = Some(budget);
        self
    }
}

/// One file with the public keys it was signed with: its chain, and the checkpoint beside it
/// when there is one (a rotated file or a receiver's copy has none). No installation needed.
pub fn verify_alone(file: &Path, pubkeys: &Path) -> Result<Verified> {
    let keys = PublicKeys::load(pubkeys).map_err(|e| HostError::bad_input(&e))?;
    let source = one_file(file, &keys, file.display().to_string())?;
    Ok(Verified::of(vec![source], None))
}

fn one_file(file: &Path, keys: &PublicKeys, checkpoint_shown: String) -> Result<Source> {
    let name = file.display().to_string();
    if crate::controls::disabled("checkpoint") {
        let report = verify_file(file, keys).map_err(|e| HostError::bad_input(&e))?;
        return Ok(Source::chain(name, report));
    }
    let copy = verify_copy(
        &[file.to_path_buf()],
        false,
        &checkpoint_path(file),
        keys,
        CheckpointRule::IfPresent,
    )
    .map_err(|e| HostError::bad_input(&e))?;
    Ok(Source::copy(name, checkpoint_shown, copy))
}

impl Records<'_> {
    /// Verifies the installation's trail (after delivering what is new), or only `file` when
    /// given, with the installation's keys or `pubkeys`.
    pub fn verify(&self, file: Option<&Path>, pubkeys: Option<&Path>) -> Result<Verified> {
        crate::install::deliver(self.inst);
        let keys = match pubkeys {
            Some(p) => PublicKeys::load(p).map_err(|e| HostError::bad_input(&e))?,
            None => self.inst.public_keys.clone(),
        };
        let shown = |p: &Path| {
            p.strip_prefix(&self.paths.workspace)
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| p.display().to_string())
        };
        if let Some(f) = file {
            let source = one_file(f, &keys, shown(&checkpoint_path(f)))?;
            return Ok(Verified::of(vec![source], None));
        }
        let records = self.all_records().map_err(|e| HostError::failed(&e))?;
        let mut checked = vec![Source::chain(
            "store".to_owned(),
            verify_sealed(&records, &keys),
        )];
        let journal = if crate::controls::disabled("binding") {
            None
        } else {
            Some(self.journal_report(&records, &keys)?)
        };
        // The sink's rotated files and its current one, as one chain, against the checkpoint
        // the sink writes after every delivery.
        let sink = &self.inst.sink;
        let files = sink.files().map_err(|e| HostError::bad_input(&e))?;
        let name = shown(sink.path());
        checked.push(if sink.has_checkpoint() {
            let at = sink.checkpoint_path();
            let copy = verify_copy(&files, true, &at, &keys, CheckpointRule::Required)
                .map_err(|e| HostError::bad_input(&e))?;
            Source::copy(name, shown(&at), copy)
        } else {
            Source::chain(
                name,
                warrant_audit::verify_files(&files, &keys).map_err(|e| HostError::bad_input(&e))?,
            )
        });
        Ok(Verified::of(checked, journal).with_budget(self.budget_check()?))
    }

    /// The tenant's budget totals as the store keeps them, against the fold of every one of
    /// its runs' logs: they agree unless an append's usage was lost or the table was edited.
    pub fn budget_check(&self) -> Result<BudgetCheck> {
        let scoped = self.inst.scoped();
        let runs = self.runs()?;
        let logs = runs
            .iter()
            .map(|r| scoped.events(&r.run))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| HostError::failed(&e))?;
        let tenant = scoped.tenant().as_str().to_owned();
        let folded: std::collections::BTreeMap<String, warrant_store::Usage> =
            warrant_kernel::fold_budget_totals(logs)
                .into_iter()
                .filter(|((t, _), _)| *t == tenant)
                .map(|((_, actor), usage)| (actor, usage))
                .collect();
        let projected: std::collections::BTreeMap<String, warrant_store::Usage> = scoped
            .budget_totals()
            .map_err(|e| HostError::failed(&e))?
            .into_iter()
            .filter(|t| !t.usage.is_zero())
            .map(|t| (t.actor, t.usage))
            .collect();
        let actors: BTreeSet<&String> = folded.keys().chain(projected.keys()).collect();
        let mismatches: Vec<BudgetMismatch> = actors
            .iter()
            .filter_map(|actor| {
                let p = projected.get(*actor).copied().unwrap_or_default();
                let f = folded.get(*actor).copied().unwrap_or_default();
                (p != f).then(|| BudgetMismatch {
                    code: "W-ENVELOPE-008",
                    actor: (*actor).clone(),
                    projected: p,
                    folded: f,
                })
            })
            .collect();
        let actors = actors.len();
        Ok(BudgetCheck {
            ok: mismatches.is_empty(),
            runs: runs.len(),
            actors,
            totals: projected,
            mismatches,
        })
    }

    /// Every run's events against the records the chain holds for it: the runs the store lists
    /// and every run a record names (so a run whose rows were deleted is still checked).
    fn journal_report(
        &self,
        records: &[warrant_store::SealedRecord],
        keys: &PublicKeys,
    ) -> Result<JournalReport> {
        let mut by_run = warrant_audit::records_by_run(records);
        let mut runs: BTreeSet<String> = self
            .runs()?
            .into_iter()
            .map(|r| r.run.to_string())
            .collect();
        runs.extend(by_run.keys().cloned());
        let mut report = JournalReport::default();
        for name in runs {
            // A subject that is not a run id is a malformed record, which the chain report names.
            let Some(run) = RunId::parse(&name) else {
                continue;
            };
            let events = self
                .inst
                .store
                .events(&run)
                .map_err(|e| HostError::failed(&e))?;
            let records = by_run.remove(&name).unwrap_or_default();
            report.add(
                &run,
                warrant_audit::verify_run(&run, &events, &records, keys),
            );
        }
        Ok(report)
    }
}
