//! A run followed live: Server-Sent Events read from the run's log, each event's `id` its
//! sequence number, so a reconnecting page (`Last-Event-ID`, or `?after=N`) gets exactly the
//! events it has not seen. Reading the log rather than a channel from the drive means a run
//! driven elsewhere (the CLI, a worker) is followed the same way. A `status` event says when the
//! run's status changes; the stream ends once the run has ended and everything was sent.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream};
use serde::Deserialize;
use warrant_core::RunId;
use warrant_store::RunStatus;

use crate::api::Web;
use crate::guard;

/// Streams at once; another is refused with 503.
pub const MAX_STREAMS: usize = 16;
const POLL: Duration = Duration::from_millis(200);

#[derive(Debug, Deserialize)]
pub struct After {
    after: Option<u64>,
}

struct Follow {
    web: Arc<Web>,
    run: RunId,
    after: u64,
    status: Option<RunStatus>,
    pending: std::collections::VecDeque<Event>,
    done: bool,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

fn ended(status: RunStatus) -> bool {
    match status {
        RunStatus::Completed | RunStatus::Failed | RunStatus::Stopped => true,
        RunStatus::Queued | RunStatus::Running | RunStatus::Parked => false,
    }
}

pub async fn stream(
    State(web): State<Arc<Web>>,
    Path(run): Path<String>,
    Query(after): Query<After>,
    headers: HeaderMap,
) -> Response {
    let run = match warrant_host::runs::parse_run(&run) {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_REQUEST, axum::Json(e)).into_response(),
    };
    let Ok(permit) = Arc::clone(&web.streams).try_acquire_owned() else {
        return guard::refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "W-WEBUI-022",
            "too many live streams at once; close another page",
            true,
        );
    };
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let follow = Follow {
        web,
        run,
        after: last.or(after.after).unwrap_or(0),
        status: None,
        pending: Default::default(),
        done: false,
        _permit: permit,
    };
    Sse::new(events(follow))
        .keep_alive(KeepAlive::default())
        .into_response()
}

fn events(follow: Follow) -> impl Stream<Item = Result<Event, std::convert::Infallible>> {
    stream::unfold(follow, |mut f| async move {
        loop {
            if let Some(event) = f.pending.pop_front() {
                return Some((Ok(event), f));
            }
            if f.done {
                return None;
            }
            let web = Arc::clone(&f.web);
            let run = f.run.clone();
            let after = f.after;
            let read = tokio::task::spawn_blocking(move || {
                let opened = web.records()?;
                opened.records().run(&run)
            })
            .await;
            let view = match read {
                Ok(Ok(view)) => view,
                Ok(Err(e)) => {
                    let data = serde_json::to_string(&e).unwrap_or_default();
                    f.pending
                        .push_back(Event::default().event("error").data(data));
                    f.done = true;
                    continue;
                }
                Err(_) => return None,
            };
            for e in view.events.iter().filter(|e| e.seq > after) {
                if let Ok(event) = Event::default()
                    .id(e.seq.to_string())
                    .event("run_event")
                    .json_data(e)
                {
                    f.pending.push_back(event);
                }
                f.after = e.seq;
            }
            let status = view.run.status;
            if f.status != Some(status) {
                f.status = Some(status);
                if let Ok(event) = Event::default()
                    .event("status")
                    .json_data(serde_json::json!({"status": status, "events": view.run.events}))
                {
                    f.pending.push_back(event);
                }
            }
            if ended(status) && f.after >= view.run.events {
                f.done = true;
                continue;
            }
            if f.pending.is_empty() {
                tokio::time::sleep(POLL).await;
            }
        }
    })
}
