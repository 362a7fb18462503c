//! How events print: the application layer's narration, worded by `warrant-text`, one line per
//! event for people, or one JSON object per line with `--json`. Standard output carries only
//! this; diagnostics go to standard error.

use warrant_host::narrate::Narrator;
use warrant_kernel::{Observer, RunEvent};
use warrant_store::StoredEvent;

/// Prints events as they are committed.
pub struct Printer {
    pub json: bool,
    narrator: Narrator,
}

impl Printer {
    pub fn new(json: bool) -> Self {
        let narrator = warrant_text::ops::runs::narrator();
        Self { json, narrator }
    }

    pub fn print(&self, stored: &StoredEvent, event: &RunEvent) {
        if self.json {
            outln!("{}", serde_json::to_string(stored).unwrap_or_default());
            return;
        }
        // Narrated as stored: what the journal holds sealed is shown sealed here too.
        let as_stored = RunEvent::from_stored(stored);
        crate::lines(self.narrator.lines(as_stored.as_ref().unwrap_or(event)));
    }

    /// The human lines of a model's answer whose text was shown as it streamed: the rest
    /// (its calls), without the text again.
    pub fn print_after_text(&self, stored: &StoredEvent, event: &RunEvent) {
        let as_stored = RunEvent::from_stored(stored);
        let lines = self.narrator.lines(as_stored.as_ref().unwrap_or(event));
        let skip = usize::from(lines.first().is_some_and(|l| l.starts_with("model    ")));
        crate::lines(lines.into_iter().skip(skip));
    }
}

impl Observer for Printer {
    fn committed(&self, stored: &StoredEvent, event: &RunEvent) {
        self.print(stored, event);
    }
}
