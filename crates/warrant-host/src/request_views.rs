//! What is asked of people, as views: the request index listed (all, open, or only what is
//! asked of me, my teams or the administrators), and one request in full, read from its run
//! after the run's journal has been checked against the signed chain.

use serde::Serialize;
use serde_json::Value;
use warrant_core::{Clock as _, Principal, RequestId, RunId, SystemClock};
use warrant_kernel::asks::is_asked_of;
use warrant_kernel::{
    Approver, Ask, AskState, Reply, RequestAnswer, RequestKind, RequestSummary, RunState,
};
use warrant_store::{RequestRow, RequestStatus};

use crate::records::Records;
use crate::{Class, Host, HostError, Result};

/// One row of `requests list`.
#[derive(Debug, Serialize)]
pub struct RequestItem {
    pub id: RequestId,
    pub run: RunId,
    /// `approval`, `question`, `secret`, `resource`, `in_doubt` (`unreadable` for a summary no
    /// version of the ring wrote).
    pub kind: String,
    /// `open`, `expired` or `answered`.
    pub status: &'static str,
    pub created_at: String,
    pub expires_at: Option<String>,
    pub title: Option<String>,
    pub requested_by: Option<String>,
    pub asked_of: Vec<String>,
}

impl RequestItem {
    pub fn of(row: &RequestRow, now: i64) -> Self {
        let summary = RequestSummary::from_value(&row.summary);
        let expires_at = summary
            .as_ref()
            .and_then(|s| s.expires_at().map(str::to_owned));
        let status = match row.status {
            RequestStatus::Answered => "answered",
            RequestStatus::Open => {
                let expired = expires_at
                    .as_deref()
                    .and_then(warrant_core::Timestamp::parse)
                    .is_some_and(|t| t.millis() <= now);
                if expired { "expired" } else { "open" }
            }
        };
        Self {
            id: row.id.clone(),
            run: row.run.clone(),
            kind: summary
                .as_ref()
                .map_or("unreadable", RequestSummary::kind)
                .to_owned(),
            status,
            created_at: row.created_at.rfc3339(),
            expires_at,
            title: summary.as_ref().map(|s| s.title().to_owned()),
            requested_by: summary.as_ref().map(|s| s.requested_by().to_owned()),
            asked_of: summary
                .as_ref()
                .map(RequestSummary::asked_of)
                .unwrap_or_default(),
        }
    }

    pub fn title_text(&self) -> &str {
        self.title.as_deref().unwrap_or("?")
    }

    pub fn requested_by_text(&self) -> &str {
        self.requested_by.as_deref().unwrap_or("?")
    }
}

/// A request's kind as the index recorded it.
pub fn kind_of_row(row: &RequestRow) -> String {
    RequestSummary::from_value(&row.summary)
        .map_or_else(|| "unreadable".to_owned(), |s| s.kind().to_owned())
}

pub(crate) fn request_missing(request: &RequestId) -> HostError {
    HostError::usage(
        "W-APPROVAL-001",
        format!("request {request} does not exist"),
    )
    .with_hint(crate::Hint::ListRequests)
}

impl Records<'_> {
    /// The request when it is this tenant's; another tenant's answers as a missing one, and
    /// the attempt is kept.
    pub fn request_row(&self, request: &RequestId) -> Result<RequestRow> {
        let row = self
            .inst
            .scoped()
            .request(request)
            .map_err(|e| HostError::failed(&e))?;
        row.ok_or_else(|| {
            self.inst.refused(
                "reach a request",
                warrant_store::Target::Request(request.clone()),
            );
            request_missing(request)
        })
    }

    /// The requests (open ones, or every one with `all`), only those asked of `me` when given.
    pub fn request_items(
        &self,
        all: bool,
        me: Option<(&Principal, &warrant_kernel::ApprovalRules)>,
    ) -> Result<Vec<RequestItem>> {
        let now = SystemClock.now().millis();
        Ok(self
            .requests(all)?
            .iter()
            .map(|r| RequestItem::of(r, now))
            .filter(|item| {
                me.is_none_or(|(me, rules)| {
                    is_asked_of(&item.asked_of, me, rules.directory.as_ref())
                })
            })
            .collect())
    }
}

/// The requests at `at` (open ones, or every one with `all`), only those asked of this
/// process's person, their teams or (with the `admin` role) the administrators with `mine`;
/// with the person's name.
pub fn list(
    at: &crate::Where,
    notices: std::sync::Arc<dyn crate::Notices + Send>,
    all: bool,
    mine: bool,
) -> Result<(String, Vec<RequestItem>)> {
    let paths = crate::install::paths(at, false)?;
    let layers = crate::install::read_layers(&paths)?;
    let me = crate::install::identity(&layers)?.principal;
    let settings = crate::install::settings(&layers)?;
    let inst = crate::install::installation(&paths, &settings, notices)?;
    let rules = crate::install::approval_rules(&paths, &layers)?;
    let records = Records {
        paths: &paths,
        inst: &inst,
    };
    let items = records.request_items(all, mine.then_some((&me, &rules)))?;
    Ok((me.actor, items))
}

/// One request in full, as `requests show` reads it.
#[derive(Debug, Serialize)]
#[serde(untagged)]
// One view per command: its size does not matter (an elicitation's ask carries its schema).
#[allow(clippy::large_enum_variant)]
pub enum RequestView {
    /// A question, secret or resource the agent raised.
    Asked(AskView),
    /// An approval of an action, or an in-doubt step to resolve.
    Approval(ApprovalView),
    /// A request the run no longer knows of: the index's summary as recorded.
    Summary(Value),
}

#[derive(Debug, Serialize)]
pub struct AskView {
    pub id: RequestId,
    pub kind: &'static str,
    pub status: &'static str,
    pub call: String,
    pub ask: Ask,
    pub title: String,
    pub asked_of: Vec<String>,
    pub expires_at: String,
    pub reply: Option<ReplyView>,
    pub expired: Option<String>,
    pub run: RunId,
    pub requested_by: String,
}

#[derive(Debug, Serialize)]
pub struct ReplyView {
    pub reply: Reply,
    pub by: Approver,
}

#[derive(Debug, Serialize)]
pub struct ApprovalView {
    pub id: RequestId,
    pub run: RunId,
    pub kind: &'static str,
    pub status: &'static str,
    pub call: String,
    pub risk: warrant_core::RiskClass,
    pub title: String,
    pub body: String,
    pub digest: warrant_core::Digest,
    pub requested_by: String,
}

impl AskView {
    pub fn of(a: &AskState, state: &RunState) -> Self {
        Self {
            id: a.id.clone(),
            kind: a.ask.kind().as_str(),
            status: a.status(),
            call: a.call_id.clone(),
            ask: a.ask.clone(),
            title: a.ask.title(),
            asked_of: a.asked_of.clone(),
            expires_at: a.expires_at.rfc3339(),
            reply: a.reply.as_ref().map(|(r, by)| ReplyView {
                reply: r.clone(),
                by: by.clone(),
            }),
            expired: a.expired.map(|t| t.rfc3339()),
            run: state.run.clone(),
            requested_by: state.principal.actor.clone(),
        }
    }
}

/// A request with the run it belongs to, folded.
#[derive(Debug)]
pub struct Shown {
    pub view: RequestView,
    pub state: RunState,
}

/// A text of the index's raw summary (empty when it has none).
fn raw<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The texts a front end words a request with (empty where the kind has none).
impl RequestView {
    pub fn kind(&self) -> &str {
        match self {
            Self::Asked(a) => a.kind,
            Self::Approval(a) => a.kind,
            Self::Summary(v) => raw(v, "kind"),
        }
    }

    pub fn status(&self) -> &str {
        match self {
            Self::Asked(a) => a.status,
            Self::Approval(a) => a.status,
            Self::Summary(v) => raw(v, "status"),
        }
    }

    pub fn title(&self) -> &str {
        match self {
            Self::Asked(a) => &a.title,
            Self::Approval(a) => &a.title,
            Self::Summary(v) => raw(v, "title"),
        }
    }

    pub fn requested_by(&self) -> &str {
        match self {
            Self::Asked(a) => &a.requested_by,
            Self::Approval(a) => &a.requested_by,
            Self::Summary(v) => raw(v, "requested_by"),
        }
    }

    pub fn expires_at(&self) -> &str {
        match self {
            Self::Asked(a) => &a.expires_at,
            Self::Approval(_) => "",
            Self::Summary(v) => raw(v, "expires_at"),
        }
    }

    pub fn body(&self) -> &str {
        match self {
            Self::Asked(_) => "",
            Self::Approval(a) => &a.body,
            Self::Summary(v) => raw(v, "body"),
        }
    }
}

impl Host {
    /// One request in full, from its run.
    pub fn show_request(&self, request: &RequestId) -> Result<Shown> {
        let row = self.records().request_row(request)?;
        let state = self.load_run(&row.run, Class::Failed)?;
        let view = match (state.asks.get(request), state.requests.get(request)) {
            (Some(a), _) => RequestView::Asked(AskView::of(a, &state)),
            (None, Some(r)) => RequestView::Approval(ApprovalView {
                id: r.id.clone(),
                run: state.run.clone(),
                kind: match r.kind {
                    RequestKind::Approval => "approval",
                    RequestKind::InDoubt => "in_doubt",
                },
                status: match (&r.answer, &r.resolution) {
                    (Some(RequestAnswer::Granted { .. }), _) => "approved",
                    (Some(RequestAnswer::Denied { .. }), _) => "denied",
                    (None, Some(_)) => "resolved",
                    (None, None) => "open",
                },
                call: r.call_id.clone(),
                risk: r.risk,
                title: r.presentation.title.clone(),
                body: r.presentation.body.clone(),
                digest: r.digest.clone(),
                requested_by: state.principal.actor.clone(),
            }),
            (None, None) => RequestView::Summary(row.summary),
        };
        Ok(Shown { view, state })
    }
}
