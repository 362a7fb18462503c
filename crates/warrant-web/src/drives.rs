//! Runs and conversations driven by this server, each on a thread of its own for its whole
//! drive (the host is synchronous). A conversation is a chat session (`Host::chat`, the same
//! session model as `warrant chat`): its messages come from the page through a channel; between
//! turns the run is parked `awaiting_message` in its log, so it survives this process, and a
//! message to a session nobody here holds continues it (`resume`). Approvals are never asked on
//! a drive's thread: they park, and the page answers them like `warrant approve` does.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use warrant_core::RunId;
use warrant_host::chat::{ChatRequest, Inbox, Incoming};
use warrant_host::runs::RunRequest;
use warrant_host::{Host, HostError};
use warrant_kernel::{NoPrompter, Observer, RunEvent, RunState};
use warrant_store::StoredEvent;

use crate::api::Web;

/// Drives at once; another is refused (W-WEBUI-020) rather than queued behind a person's back.
pub const MAX_DRIVES: usize = 8;

#[derive(Debug, Default)]
pub struct Drives {
    inboxes: Mutex<Inboxes>,
    live: Mutex<usize>,
}

/// The conversations held here, and the messages a session's drive left unread when it parked
/// (delivered first when the session is continued). A message is handed over under this lock,
/// and a drive leaves under it too, so a message is either read, kept here, or continues the
/// session: never lost between the two.
#[derive(Debug, Default)]
struct Inboxes {
    held: HashMap<RunId, mpsc::Sender<String>>,
    unread: HashMap<RunId, VecDeque<String>>,
}

/// A drive's first word to its starter: the run it records to, none, or its error.
type Outcome = Result<Option<RunId>, HostError>;

/// Tells the starter which run its drive started, at the run's first committed event; a new
/// conversation's channel is held from then on (before the starter hears of the run).
struct Started {
    tx: Mutex<Option<mpsc::Sender<Outcome>>>,
    hold: Mutex<Option<(Arc<Web>, mpsc::Sender<String>)>>,
}

impl Observer for Started {
    fn committed(&self, stored: &StoredEvent, _event: &RunEvent) {
        if let Ok(mut slot) = self.hold.lock()
            && let Some((web, inbox)) = slot.take()
            && let Ok(mut m) = web.drives.inboxes.lock()
        {
            m.held.insert(stored.run.clone(), inbox);
        }
        if let Ok(mut slot) = self.tx.lock()
            && let Some(tx) = slot.take()
        {
            let _ = tx.send(Ok(Some(stored.run.clone())));
        }
    }
}

struct PageInbox {
    first: VecDeque<String>,
    rx: mpsc::Receiver<String>,
}

impl Inbox for PageInbox {
    fn next(&mut self, _host: &Host, _state: Option<&RunState>) -> Incoming {
        if let Some(text) = self.first.pop_front() {
            return Incoming::Message(text);
        }
        // Ended when the page ends the session (its sender is dropped).
        match self.rx.recv() {
            Ok(text) => Incoming::Message(text),
            Err(_) => Incoming::End,
        }
    }
}

fn busy() -> HostError {
    HostError::usage(
        "W-WEBUI-020",
        format!(
            "{MAX_DRIVES} runs are being driven by this server already; wait for one to park or end"
        ),
    )
}

impl Drives {
    fn take_slot(&self) -> Result<(), HostError> {
        let mut live = self.live.lock().map_err(|_| busy())?;
        if *live >= MAX_DRIVES {
            return Err(busy());
        }
        *live += 1;
        Ok(())
    }

    fn give_slot(&self) {
        if let Ok(mut live) = self.live.lock() {
            *live = live.saturating_sub(1);
        }
    }

    /// Whether a conversation of `run` is held here.
    pub fn holds(&self, run: &RunId) -> bool {
        self.inboxes
            .lock()
            .map(|m| m.held.contains_key(run))
            .unwrap_or(false)
    }

    /// Ends the conversation `run` held here (the session completes); false when none is.
    pub fn end(&self, run: &RunId) -> bool {
        self.inboxes
            .lock()
            .map(|mut m| m.held.remove(run).is_some())
            .unwrap_or(false)
    }
}

/// Starts `work` on a thread of its own and waits for the run it records to (or its error);
/// `None` when it ended having recorded nothing (a run still waiting on a person).
fn spawn_drive(
    web: &Arc<Web>,
    hold: Option<mpsc::Sender<String>>,
    work: impl FnOnce(&Host, &Started) -> Result<(), HostError> + Send + 'static,
) -> Outcome {
    web.drives.take_slot()?;
    let (tx, rx) = mpsc::channel();
    let web2 = Arc::clone(web);
    let errors = tx.clone();
    let spawned = std::thread::Builder::new()
        .name("warrant-web-drive".to_owned())
        .spawn(move || {
            let observer = Started {
                tx: Mutex::new(Some(tx)),
                hold: Mutex::new(hold.map(|inbox| (Arc::clone(&web2), inbox))),
            };
            let outcome = web2.host().and_then(|host| work(&host, &observer));
            let _ = errors.send(outcome.map(|()| None));
            web2.drives.give_slot();
        });
    if let Err(e) = spawned {
        web.drives.give_slot();
        return Err(HostError::usage(
            "W-WEBUI-021",
            format!("cannot start a thread for the run: {e}"),
        ));
    }
    rx.recv().unwrap_or_else(|_| {
        Err(HostError::usage(
            "W-WEBUI-021",
            "the run ended before it recorded anything",
        ))
    })
}

fn recorded(run: Option<RunId>) -> Result<RunId, HostError> {
    run.ok_or_else(|| HostError::usage("W-WEBUI-021", "the run ended before it recorded anything"))
}

/// Starts a run of `task` with `model` and drives it until it ends or parks.
pub fn start_run(web: &Arc<Web>, model: String, task: String) -> Result<RunId, HostError> {
    spawn_drive(web, None, move |host, observer| {
        host.run(
            RunRequest {
                model,
                task,
                deadline: None,
                // An agent profile is not chosen from the page (yet): the run has none.
                agent_profile: None,
            },
            observer,
            &mut NoPrompter,
        )
        .map(|_| ())
    })
    .and_then(recorded)
}

/// Starts a conversation whose first message is `text`, or continues `resume` with the
/// messages it left unread and `text`.
pub fn converse(
    web: &Arc<Web>,
    model: String,
    text: Option<String>,
    resume: Option<RunId>,
) -> Result<RunId, HostError> {
    let (tx, rx) = mpsc::channel::<String>();
    let held = resume.clone();
    let mut first = VecDeque::new();
    let mut hold = Some(tx.clone());
    if let (Some(run), Ok(mut m)) = (&resume, web.drives.inboxes.lock()) {
        first = m.unread.remove(run).unwrap_or_default();
        m.held.insert(run.clone(), tx.clone());
        hold = None;
    }
    first.extend(text);
    drop(tx);
    let web2 = Arc::clone(web);
    let started = spawn_drive(web, hold, move |host, observer| {
        let mut inbox = PageInbox { first, rx };
        let result = host.chat(
            ChatRequest {
                model,
                history_tokens: warrant_host::chat::DEFAULT_HISTORY_TOKENS,
                deadline: None,
                resume: held.clone(),
            },
            observer,
            &mut NoPrompter,
            &mut inbox,
            Arc::new(AtomicBool::new(false)),
        );
        // Parked on a person, ended or failed: nobody here holds the session any more, and
        // what was sent meanwhile waits for its continuation.
        let run = match &result {
            Ok(chatted) => chatted.run.clone(),
            Err(_) => held.clone(),
        };
        if let (Some(run), Ok(mut m)) = (run, web2.drives.inboxes.lock()) {
            m.held.remove(&run);
            let mut unread: VecDeque<String> = inbox.first.drain(..).collect();
            unread.extend(inbox.rx.try_iter());
            if !unread.is_empty() {
                m.unread.entry(run).or_default().extend(unread);
            }
        }
        // How it ended is in the run's log; the page reads it from there.
        result.map(|_: warrant_host::chat::Chatted| ())
    });
    if started.is_err()
        && let (Some(run), Ok(mut m)) = (&resume, web.drives.inboxes.lock())
    {
        m.held.remove(run);
    }
    started.and_then(|run| recorded(run.or(resume)))
}

/// The next message of a conversation: to its drive when held here, else the session is
/// continued from its log with it.
pub fn send(web: &Arc<Web>, run: &RunId, text: String) -> Result<(), HostError> {
    if let Ok(m) = web.drives.inboxes.lock()
        && let Some(tx) = m.held.get(run)
        && tx.send(text.clone()).is_ok()
    {
        return Ok(());
    }
    converse(web, String::new(), Some(text), Some(run.clone())).map(|_| ())
}

/// After a person answered a request of `run`: continues it here (a conversation as a
/// session, any other run with `resume`), unless it is held here already.
pub fn continue_run(web: &Arc<Web>, run: &RunId) -> Result<(), HostError> {
    if web.drives.holds(run) {
        return Ok(());
    }
    let host = web.host()?;
    let state = host.load_run(run, warrant_host::Class::Usage)?;
    if state.ended.is_some() || state.parked.is_none() && !state.awaiting {
        return Ok(());
    }
    if state.is_session() {
        if state.awaiting {
            // Waiting for the person's next message: nothing to continue until it comes.
            return Ok(());
        }
        return converse(web, String::new(), None, Some(run.clone())).map(|_| ());
    }
    let run = run.clone();
    spawn_drive(web, None, move |host, observer| {
        host.resume(&run, observer, &mut NoPrompter, false)
            .map(|_| ())
    })
    .map(|_| ())
}
