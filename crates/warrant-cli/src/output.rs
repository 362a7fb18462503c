//! How events print: the application layer's narration, one line per event for people, or one
//! JSON object per line with `--json`. Standard output carries only this; diagnostics go to
//! standard error. The next steps the narration names are worded here as commands.

use warrant_host::narrate::{Narrator, Next, Words};
use warrant_kernel::{Observer, RunEvent};
use warrant_store::StoredEvent;

/// The terminal's words for what a person can do next.
struct Commands;

impl Words for Commands {
    fn next(&self, step: Next<'_>) -> String {
        let decline = |r: &warrant_core::RequestId| {
            format!("   |   warrant requests decline {r} --reason TEXT")
        };
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

/// Prints events as they are committed.
pub struct Printer {
    pub json: bool,
    narrator: Narrator,
}

impl Printer {
    pub fn new(json: bool) -> Self {
        Self {
            json,
            narrator: Narrator::new(Box::new(Commands)),
        }
    }

    pub fn print(&self, stored: &StoredEvent, event: &RunEvent) {
        if self.json {
            outln!("{}", serde_json::to_string(stored).unwrap_or_default());
            return;
        }
        // Narrated as stored: what the journal holds sealed is shown sealed here too.
        let as_stored = RunEvent::from_stored(stored);
        for line in self.narrator.lines(as_stored.as_ref().unwrap_or(event)) {
            outln!("{line}");
        }
    }

    /// The human lines of a model's answer whose text was shown as it streamed: the rest
    /// (its calls), without the text again.
    pub fn print_after_text(&self, stored: &StoredEvent, event: &RunEvent) {
        let as_stored = RunEvent::from_stored(stored);
        let lines = self.narrator.lines(as_stored.as_ref().unwrap_or(event));
        let skip = usize::from(lines.first().is_some_and(|l| l.starts_with("model    ")));
        for line in lines.into_iter().skip(skip) {
            outln!("{line}");
        }
    }

    /// The human lines of one event, for `runs show` to number.
    pub fn lines(&self, event: &RunEvent) -> Vec<String> {
        self.narrator.lines(event)
    }
}

impl Observer for Printer {
    fn committed(&self, stored: &StoredEvent, event: &RunEvent) {
        self.print(stored, event);
    }
}
