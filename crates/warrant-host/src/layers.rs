//! The copy-on-write layers contained commands leave for a person's judgement: which ones a
//! run still needs, and the sweep that removes the rest (a request denied, a run cancelled,
//! ended or failed, a layer nothing recorded). Run where a run starts, after an answer or a
//! cancellation, and by `doctor`.
//!
//! A layer names the workspace and run it was made for (`warrant_exec::judged::owned_by`). It is
//! kept while its run is running (its judgement may not be journaled yet), while the run is
//! unknown to this store (another store of the same workspace may hold it), and while a parked
//! or queued run's unsettled judgement names it and was not denied.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;
use warrant_core::{CanonicalPath, RunId};
use warrant_kernel::{RequestAnswer, RunState};
use warrant_store::{EventStore, RunStatus};

/// What a sweep did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Swept {
    /// Layers removed: nothing needed them any more.
    pub removed: Vec<PathBuf>,
    /// Layers left: a run still needs them (or might).
    pub kept: Vec<PathBuf>,
}

/// Remove the layers of `workspace` that no run of `store` needs.
pub fn sweep(store: &dyn EventStore, workspace: &CanonicalPath) -> Swept {
    let mut swept = Swept::default();
    for layer in warrant_exec::judged::owned_by(workspace) {
        if needed(store, &layer.run, &layer.dir) {
            swept.kept.push(layer.dir);
        } else if warrant_exec::judged::discard(&layer.dir) {
            swept.removed.push(layer.dir);
        }
    }
    swept
}

fn needed(store: &dyn EventStore, run: &str, dir: &std::path::Path) -> bool {
    let Some(run) = RunId::parse(run) else {
        return true;
    };
    let row = match store.run(&run) {
        Ok(Some(row)) => row,
        // Not in this store, or the store cannot say: leave it.
        Ok(None) | Err(_) => return true,
    };
    match row.status {
        RunStatus::Running => true,
        RunStatus::Completed | RunStatus::Failed | RunStatus::Stopped => false,
        RunStatus::Queued | RunStatus::Parked => match store
            .events(&run)
            .ok()
            .and_then(|events| RunState::fold(&events).ok())
        {
            // Compared as the same directory, however HOME spelled it (a symlinked home).
            Some(state) => {
                let here = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
                waiting(&state)
                    .iter()
                    .any(|p| p == dir || std::fs::canonicalize(p).is_ok_and(|p| p == here))
            }
            None => true,
        },
    }
}

/// The layers of unsettled judgements a person has not denied.
fn waiting(state: &RunState) -> BTreeSet<PathBuf> {
    state
        .calls
        .iter()
        .filter(|c| c.result.is_none())
        .filter(|c| {
            !c.request
                .as_ref()
                .and_then(|r| state.requests.get(r))
                .is_some_and(|r| matches!(r.answer, Some(RequestAnswer::Denied { .. })))
        })
        .filter_map(|c| c.judging.as_ref())
        .filter_map(|(_, result)| {
            result
                .pointer("/changes/pending")
                .and_then(Value::as_str)
                .map(PathBuf::from)
        })
        .collect()
}
