//! Fault injection for the crash tests, for every front end that drives runs: `WARRANT_FAULT=after:N` kills this process (SIGKILL)
//! right after the N-th event it commits; `WARRANT_FAULT=before:KIND:N` kills it just before
//! the N-th append of an event of KIND (e.g. `before:effect_completed:1`: the effect ran, its
//! result is not journaled). It can only make the process die, never skip a control; unset, it
//! does nothing.

use std::cell::Cell;

use warrant_kernel::{Observer, RunEvent};
use warrant_store::StoredEvent;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Plan {
    After(u64),
    Before { kind: String, nth: u64 },
}

/// An observer that passes every event on to `inner`, and kills the process where
/// `WARRANT_FAULT` says.
pub struct Faulty<'a> {
    inner: &'a dyn Observer,
    plan: Option<Plan>,
    seen: Cell<u64>,
}

impl std::fmt::Debug for Faulty<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Faulty")
            .field("plan", &self.plan)
            .finish_non_exhaustive()
    }
}

impl<'a> Faulty<'a> {
    pub fn from_env(inner: &'a dyn Observer) -> Self {
        let plan = std::env::var("WARRANT_FAULT").ok().and_then(|spec| {
            let parts: Vec<&str> = spec.split(':').collect();
            match parts.as_slice() {
                ["after", n] => n.parse().ok().map(Plan::After),
                ["before", kind, n] => n.parse().ok().map(|nth| Plan::Before {
                    kind: (*kind).to_owned(),
                    nth,
                }),
                _ => None,
            }
        });
        Self {
            inner,
            plan,
            seen: Cell::new(0),
        }
    }
}

fn die() {
    let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
}

impl Observer for Faulty<'_> {
    fn committed(&self, stored: &StoredEvent, event: &RunEvent) {
        self.inner.committed(stored, event);
        if let Some(Plan::After(n)) = self.plan {
            self.seen.set(self.seen.get() + 1);
            if self.seen.get() == n {
                die();
            }
        }
    }

    fn before_append(&self, events: &[RunEvent]) {
        if let Some(Plan::Before { kind, nth }) = &self.plan {
            for e in events {
                if e.kind() == kind {
                    self.seen.set(self.seen.get() + 1);
                    if self.seen.get() == *nth {
                        die();
                    }
                }
            }
        }
    }
}
