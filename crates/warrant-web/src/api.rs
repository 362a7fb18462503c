//! The routes: the page and its assets, and `/api/`, where each handler is one typed operation
//! of the application layer on a blocking thread, answered with its `Serialize` view (the same
//! struct `--json` prints) or its `HostError`.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde::Serialize;
use serde_json::{Value, json};
use warrant_core::{RequestId, RunId};
use warrant_host::origin::Front;
use warrant_host::records::{self, Records};
use warrant_host::{Class, Host, HostError, Where};

use crate::guard::{Door, Session};
use crate::{NoticesFor, assets, drives, guard, live};

/// Bodies larger than this are refused (413) before a handler reads them.
pub const MAX_BODY: usize = 64 * 1024;
/// `/api/` requests handled at once (streams excepted); more are refused with 503.
pub const MAX_CONCURRENT: usize = 16;

pub struct Web {
    pub at: Where,
    pub notices: NoticesFor,
    pub door: Door,
    pub drives: drives::Drives,
    pub busy: Arc<tokio::sync::Semaphore>,
    pub streams: Arc<tokio::sync::Semaphore>,
}

impl std::fmt::Debug for Web {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Web")
            .field("at", &self.at)
            .finish_non_exhaustive()
    }
}

impl Web {
    pub fn new(at: Where, notices: NoticesFor, door: Door) -> Self {
        Web {
            at,
            notices,
            door,
            drives: drives::Drives::default(),
            busy: Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT)),
            streams: Arc::new(tokio::sync::Semaphore::new(live::MAX_STREAMS)),
        }
    }

    /// The installation, opened for this operation, its person answering through the web.
    pub fn host(&self) -> Result<Host, HostError> {
        Ok(Host::open(&self.at, (self.notices)())?.through(Front::Web))
    }

    pub fn records(&self) -> Result<records::Opened, HostError> {
        records::open(&self.at, (self.notices)())
    }
}

pub fn router(web: Arc<Web>) -> Router {
    let api = Router::new()
        .route("/api/session", get(session))
        .route("/api/runs", get(runs).post(start_run))
        .route("/api/conversations", post(start_conversation))
        .route("/api/runs/{run}", get(run))
        .route("/api/runs/{run}/stream", get(live::stream))
        .route("/api/runs/{run}/pins", get(pins))
        .route("/api/runs/{run}/touched", get(touched))
        .route("/api/runs/{run}/messages", post(message))
        .route("/api/runs/{run}/end", post(end))
        .route("/api/runs/{run}/cancel", post(cancel))
        .route("/api/runs/{run}/resolve", post(resolve))
        .route("/api/runs/{run}/resume", post(resume))
        .route("/api/requests", get(requests))
        .route("/api/requests/{id}", get(request))
        .route("/api/requests/{id}/approve", post(approve))
        .route("/api/requests/{id}/deny", post(deny))
        .route("/api/requests/{id}/answer", post(answer))
        .route("/api/requests/{id}/decline", post(decline))
        .route("/api/requests/{id}/provide", post(provide))
        .route("/api/audit", get(audit))
        .route("/api/audit/verify", get(verify))
        .route("/api/audit/status", get(audit_status))
        .route("/api/explain", get(explain));
    Router::new()
        .route("/", get(assets::index))
        .route("/assets/{name}", get(assets::asset))
        .merge(api)
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&web),
            guard::guard,
        ))
        .with_state(web)
}

async fn not_found() -> Response {
    // Nothing of the workspace is served: only the page, its assets and the API.
    guard::refusal(StatusCode::NOT_FOUND, "W-WEBUI-030", "no such page", true)
}

fn status_of(e: &HostError) -> StatusCode {
    match e.class {
        Class::Usage if e.code == "W-KERNEL-004" || e.message.ends_with("does not exist") => {
            StatusCode::NOT_FOUND
        }
        Class::Usage => StatusCode::BAD_REQUEST,
        Class::Refused => StatusCode::FORBIDDEN,
        Class::Failed => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

fn error(e: &HostError) -> Response {
    let status = if e.code == "W-WEBUI-020" {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        status_of(e)
    };
    (status, Json(e)).into_response()
}

/// Runs `op` on a blocking thread within the concurrency limit and answers with its view.
async fn blocking<T: Serialize + Send + 'static>(
    web: &Arc<Web>,
    op: impl FnOnce(&Arc<Web>) -> Result<T, HostError> + Send + 'static,
) -> Response {
    let Ok(permit) = Arc::clone(&web.busy).try_acquire_owned() else {
        return guard::refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "W-WEBUI-022",
            "too many requests at once; try again",
            true,
        );
    };
    let web = Arc::clone(web);
    let joined = tokio::task::spawn_blocking(move || {
        let out = op(&web);
        drop(permit);
        out
    })
    .await;
    match joined {
        Ok(Ok(view)) => Json(view).into_response(),
        Ok(Err(e)) => error(&e),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// Reads with the read side only (no identity or policy needed).
async fn reading<T: Serialize + Send + 'static>(
    web: &Arc<Web>,
    op: impl FnOnce(&Records<'_>) -> Result<T, HostError> + Send + 'static,
) -> Response {
    blocking(web, move |web| {
        let opened = web.records()?;
        op(&opened.records())
    })
    .await
}

fn run_id(text: &str) -> Result<RunId, HostError> {
    warrant_host::runs::parse_run(text)
}

fn request_id(text: &str) -> Result<RequestId, HostError> {
    warrant_host::approvals::parse_request(text)
}

async fn session(
    State(web): State<Arc<Web>>,
    axum::Extension(session): axum::Extension<Session>,
) -> Response {
    blocking(&web, move |web| {
        let host = web.host()?;
        Ok(json!({
            "actor": host.identity.principal.actor,
            "tenant": host.identity.principal.tenant,
            "workspace": host.paths.workspace,
            "csrf": session.csrf,
            "pins": host.pins(),
            "profiles": host.profiles_in_words(),
            "render": if guard::disabled("web-escape") { "html" } else { "text" },
        }))
    })
    .await
}

#[derive(Debug, Deserialize)]
struct RunFilter {
    status: Option<String>,
    actor: Option<String>,
    q: Option<String>,
}

/// `runs list --json`, optionally filtered by status, actor and a word of the task.
async fn runs(State(web): State<Arc<Web>>, Query(filter): Query<RunFilter>) -> Response {
    reading(&web, move |records| {
        let runs: Vec<_> = records
            .runs()?
            .into_iter()
            .filter(|r| {
                filter
                    .status
                    .as_deref()
                    .is_none_or(|s| s.is_empty() || r.status.as_str() == s)
            })
            .filter(|r| {
                filter
                    .actor
                    .as_deref()
                    .is_none_or(|a| a.is_empty() || r.actor == a)
            })
            .filter(|r| {
                filter.q.as_deref().is_none_or(|q| {
                    r.task.to_lowercase().contains(&q.to_lowercase())
                        || r.run.to_string().contains(q)
                })
            })
            .collect();
        Ok(json!({ "runs": runs }))
    })
    .await
}

async fn run(State(web): State<Arc<Web>>, Path(run): Path<String>) -> Response {
    reading(&web, move |records| records.run(&run_id(&run)?)).await
}

async fn touched(State(web): State<Arc<Web>>, Path(run): Path<String>) -> Response {
    reading(&web, move |records| records.touched(&run_id(&run)?)).await
}

/// The digests the run started under and the ones in force now.
async fn pins(State(web): State<Arc<Web>>, Path(run): Path<String>) -> Response {
    blocking(&web, move |web| {
        let run = run_id(&run)?;
        let host = web.host()?;
        let view = host.records().run(&run)?;
        let started = view
            .events
            .iter()
            .find(|e| e.kind == "run_started")
            .map(|e| warrant_host::Pins {
                policy_digest: serde_json::from_value(e.payload["policy_digest"].clone()).ok(),
                profiles_digest: serde_json::from_value(e.payload["profiles_digest"].clone()).ok(),
            });
        let now = host.pins();
        let changed = started.as_ref().map(|s| {
            let mut what = Vec::new();
            if s.policy_digest != now.policy_digest {
                what.push("policy");
            }
            if s.profiles_digest.is_some() && s.profiles_digest != now.profiles_digest {
                what.push("profiles");
            }
            what
        });
        Ok(json!({"started": started, "now": now, "changed": changed.unwrap_or_default()}))
    })
    .await
}

#[derive(Debug, Deserialize)]
struct NewRun {
    model: String,
    task: String,
}

async fn start_run(State(web): State<Arc<Web>>, Json(body): Json<NewRun>) -> Response {
    blocking(&web, move |web| {
        if body.task.trim().is_empty() {
            return Err(HostError::usage("W-WEBUI-023", "say what the run is to do"));
        }
        let run = drives::start_run(web, body.model, body.task)?;
        Ok(json!({ "run": run }))
    })
    .await
}

#[derive(Debug, Deserialize)]
struct NewConversation {
    model: String,
    text: String,
}

async fn start_conversation(
    State(web): State<Arc<Web>>,
    Json(body): Json<NewConversation>,
) -> Response {
    blocking(&web, move |web| {
        if body.text.trim().is_empty() {
            return Err(HostError::usage("W-WEBUI-023", "a message cannot be empty"));
        }
        let run = drives::converse(web, body.model, Some(body.text), None)?;
        Ok(json!({ "run": run }))
    })
    .await
}

#[derive(Debug, Deserialize)]
struct Message {
    text: String,
}

/// The next message of a conversation: appended, never an edit of what was said.
async fn message(
    State(web): State<Arc<Web>>,
    Path(run): Path<String>,
    Json(body): Json<Message>,
) -> Response {
    blocking(&web, move |web| {
        let run = run_id(&run)?;
        if body.text.trim().is_empty() {
            return Err(HostError::usage("W-WEBUI-023", "a message cannot be empty"));
        }
        drives::send(web, &run, body.text)?;
        Ok(json!({ "run": run, "sent": true }))
    })
    .await
}

async fn end(State(web): State<Arc<Web>>, Path(run): Path<String>) -> Response {
    blocking(&web, move |web| {
        let run = run_id(&run)?;
        let ended = web.drives.end(&run);
        Ok(json!({ "run": run, "ended": ended }))
    })
    .await
}

#[derive(Debug, Deserialize)]
struct Reason {
    #[serde(default)]
    reason: String,
}

async fn cancel(
    State(web): State<Arc<Web>>,
    Path(run): Path<String>,
    Json(body): Json<Reason>,
) -> Response {
    blocking(&web, move |web| {
        let run = run_id(&run)?;
        let reason = if body.reason.trim().is_empty() {
            "cancelled from the web interface".to_owned()
        } else {
            body.reason
        };
        let outcome = match web.host()?.cancel(&run, &reason)? {
            warrant_host::runs::Cancelled::Stopped => json!({"run": run, "cancelled": "stopped"}),
            warrant_host::runs::Cancelled::Recorded { holder } => {
                json!({"run": run, "cancelled": "recorded", "holder": holder})
            }
        };
        web.drives.end(&run);
        Ok(outcome)
    })
    .await
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Resolution {
    Completed,
    Retry,
    Failed,
}

#[derive(Debug, Deserialize)]
struct Resolve {
    step: String,
    resolution: Resolution,
}

async fn resolve(
    State(web): State<Arc<Web>>,
    Path(run): Path<String>,
    Json(body): Json<Resolve>,
) -> Response {
    blocking(&web, move |web| {
        let run = run_id(&run)?;
        let resolution = match body.resolution {
            Resolution::Completed => warrant_kernel::Resolution::Completed,
            Resolution::Retry => warrant_kernel::Resolution::Retry,
            Resolution::Failed => warrant_kernel::Resolution::Failed,
        };
        web.host()?.resolve(&run, &body.step, resolution)?;
        Ok(json!({"run": run, "step": body.step, "resolved": resolution.as_str()}))
    })
    .await
}

async fn resume(State(web): State<Arc<Web>>, Path(run): Path<String>) -> Response {
    blocking(&web, move |web| {
        let run = run_id(&run)?;
        drives::continue_run(web, &run)?;
        Ok(json!({"run": run}))
    })
    .await
}

#[derive(Debug, Deserialize)]
struct RequestFilter {
    #[serde(default)]
    all: bool,
    #[serde(default)]
    mine: bool,
}

/// `requests list --json`.
async fn requests(State(web): State<Arc<Web>>, Query(filter): Query<RequestFilter>) -> Response {
    blocking(&web, move |web| {
        let (_, items) =
            warrant_host::request_views::list(&web.at, (web.notices)(), filter.all, filter.mine)?;
        Ok(json!({ "requests": items }))
    })
    .await
}

/// One request in full: what it asks (the action and its diff, or the question), who is asked,
/// the run's person and the profiles' confinement in words.
async fn request(State(web): State<Arc<Web>>, Path(id): Path<String>) -> Response {
    blocking(&web, move |web| {
        let id = request_id(&id)?;
        let host = web.host()?;
        let row = host.records().request_row(&id)?;
        let now = warrant_core::Clock::now(&warrant_core::SystemClock).millis();
        let item = warrant_host::request_views::RequestItem::of(&row, now);
        let shown = host.show_request(&id)?;
        let why = why_asked(&host, &row.run, &id)?;
        Ok(json!({
            "item": item,
            "view": shown.view,
            "principal": shown.state.principal,
            "profiles": host.profiles_in_words(),
            "asked": why.asked,
            "reasons": why.reasons,
        }))
    })
    .await
}

/// Who an approval is put to and why (from its `approval_requested`), and the policies that
/// asked (from the `policy_decided` of its call).
#[derive(Debug, Default)]
struct Why {
    asked: Option<warrant_kernel::AskedOf>,
    reasons: Vec<warrant_kernel::ReasonRecord>,
}

fn why_asked(host: &Host, run: &RunId, request: &RequestId) -> Result<Why, HostError> {
    let view = host.records().run(run)?;
    let events: Vec<warrant_kernel::RunEvent> = view
        .events
        .iter()
        .filter_map(|e| warrant_kernel::RunEvent::from_stored(e).ok())
        .collect();
    let mut why = Why::default();
    let mut call = None;
    for event in &events {
        if let warrant_kernel::RunEvent::ApprovalRequested {
            request_id,
            asked,
            call_id,
            ..
        } = event
            && request_id == request
        {
            why.asked = asked.clone();
            call = Some(call_id.clone());
        }
    }
    for event in &events {
        if let warrant_kernel::RunEvent::PolicyDecided {
            call_id, reasons, ..
        } = event
            && Some(call_id) == call.as_ref()
        {
            why.reasons.extend(reasons.iter().cloned());
        }
    }
    Ok(why)
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Scope {
    Once,
    Session,
}

#[derive(Debug, Deserialize)]
struct Approve {
    scope: Scope,
}

/// What an answer came to (`key`: the host's view of it) and, when its run could not be
/// continued here, why: the reply a page gets after answering, replying or providing.
fn continued<T: Serialize>(web: &Arc<Web>, key: &str, run: &RunId, done: &T) -> Value {
    let error = drives::continue_run(web, run).err();
    json!({ key: done, "continue_error": error })
}

async fn approve(
    State(web): State<Arc<Web>>,
    Path(id): Path<String>,
    Json(body): Json<Approve>,
) -> Response {
    blocking(&web, move |web| {
        let id = request_id(&id)?;
        let answer = warrant_host::approvals::approval(matches!(body.scope, Scope::Session));
        let done = web.host()?.answer(&id, answer)?;
        Ok(continued(web, "answered", &done.run, &done))
    })
    .await
}

async fn deny(
    State(web): State<Arc<Web>>,
    Path(id): Path<String>,
    Json(body): Json<Reason>,
) -> Response {
    blocking(&web, move |web| {
        let id = request_id(&id)?;
        let answer = warrant_host::approvals::denial(body.reason)?;
        let done = web.host()?.answer(&id, answer)?;
        Ok(continued(web, "answered", &done.run, &done))
    })
    .await
}

#[derive(Debug, Deserialize)]
struct AnswerBody {
    option: Option<u32>,
    text: Option<String>,
}

async fn answer(
    State(web): State<Arc<Web>>,
    Path(id): Path<String>,
    Json(body): Json<AnswerBody>,
) -> Response {
    blocking(&web, move |web| {
        let id = request_id(&id)?;
        let text = body.text.filter(|t| !t.trim().is_empty());
        let done = web.host()?.answer_question(&id, body.option, text)?;
        Ok(continued(web, "replied", &done.run, &done))
    })
    .await
}

async fn decline(
    State(web): State<Arc<Web>>,
    Path(id): Path<String>,
    Json(body): Json<Reason>,
) -> Response {
    blocking(&web, move |web| {
        let id = request_id(&id)?;
        let done = web.host()?.decline(&id, body.reason)?;
        Ok(continued(web, "replied", &done.run, &done))
    })
    .await
}

#[derive(Deserialize)]
struct Provide {
    value: String,
}

impl std::fmt::Debug for Provide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Provide { value: [hidden] }")
    }
}

/// A secret value into the vault; the answer names the handle, never the value.
async fn provide(
    State(web): State<Arc<Web>>,
    Path(id): Path<String>,
    Json(body): Json<Provide>,
) -> Response {
    blocking(&web, move |web| {
        let id = request_id(&id)?;
        if body.value.is_empty() {
            return Err(HostError::usage("W-WEBUI-023", "the secret is empty"));
        }
        let mut value = Some(body.value.into_bytes());
        let done = web
            .host()?
            .provide_secret(&id, |_name| Ok(value.take().unwrap_or_default()));
        if let Some(mut left) = value {
            left.iter_mut().for_each(|b| *b = 0);
        }
        let done = done?;
        Ok(continued(web, "replied", &done.run, &done))
    })
    .await
}

#[derive(Debug, Deserialize)]
struct AuditFilter {
    run: Option<String>,
    actor: Option<String>,
    kind: Option<String>,
    verb: Option<String>,
    decision: Option<String>,
    limit: Option<usize>,
}

fn some(text: Option<String>) -> Option<String> {
    text.filter(|t| !t.trim().is_empty())
}

/// `audit query --json`: the records, each parsed.
async fn audit(State(web): State<Arc<Web>>, Query(f): Query<AuditFilter>) -> Response {
    reading(&web, move |records| {
        let query = warrant_store::AuditQuery {
            run: some(f.run),
            actor: some(f.actor),
            on_behalf_of: None,
            kind: some(f.kind),
            verb: some(f.verb),
            decision: some(f.decision),
            since: None,
            until: None,
            limit: f.limit.unwrap_or(200).min(2000),
        };
        let found = records.query(&query)?;
        let rows: Vec<Value> = found
            .iter()
            .map(|r| {
                json!({
                    "seq": r.seq,
                    "id": r.id,
                    "hash": r.hash,
                    "record": serde_json::from_str::<Value>(&r.line).unwrap_or(Value::Null),
                })
            })
            .collect();
        Ok(json!({ "records": rows }))
    })
    .await
}

async fn verify(State(web): State<Arc<Web>>) -> Response {
    reading(&web, |records| records.verify(None, None)).await
}

async fn audit_status(State(web): State<Arc<Web>>) -> Response {
    reading(&web, |records| records.audit_status()).await
}

#[derive(Debug, Deserialize)]
struct ExplainQuery {
    action: String,
    target: String,
}

async fn explain(State(web): State<Arc<Web>>, Query(q): Query<ExplainQuery>) -> Response {
    blocking(&web, move |web| {
        warrant_host::explain::explain(&web.at, (web.notices)(), &q.action, &q.target, None)
    })
    .await
}
