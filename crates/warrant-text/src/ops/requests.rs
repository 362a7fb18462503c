//! Requests to a person in words: `requests list`, `requests show` and what a reply recorded.

use warrant_core::RequestId;
use warrant_host::narrate::inline;
use warrant_host::request_views::{RequestItem, RequestView, Shown};
use warrant_host::requests::Replied;
use warrant_kernel::Ask;

/// A reply, recorded, and how the run goes on.
pub fn replied(r: &Replied) -> String {
    format!(
        "{}: {} by {}; continue the run with: warrant resume {}",
        r.reply, r.request, r.by, r.run
    )
}

/// `requests list`: one line a request, or what there is none of (`me` names the person when
/// only their own were asked for).
pub fn list(items: &[RequestItem], me: Option<&str>, all: bool) -> Vec<String> {
    if items.is_empty() {
        let whose = me
            .map(|me| format!(" for {me} (or your teams)"))
            .unwrap_or_default();
        return vec![format!(
            "no {}requests{whose}",
            if all { "" } else { "open " }
        )];
    }
    items
        .iter()
        .map(|r| {
            format!(
                "{}  {:<9} {:<8} run {}  {}  (asked by {}; of {})",
                r.id,
                r.kind,
                r.status,
                r.run,
                inline(r.title_text()),
                r.requested_by_text(),
                r.asked_of.join(", "),
            )
        })
        .collect()
}

/// `requests show`: the request in full, its options or fields, its reply, its body.
pub fn show(id: &RequestId, shown: &Shown) -> Vec<String> {
    let view = &shown.view;
    let mut out = vec![
        format!("request {id}  ({}, {})", view.kind(), view.status()),
        format!("  run        {}", shown.state.run),
        format!("  asked by   {}", view.requested_by()),
        format!("  what       {}", inline(view.title())),
    ];
    let asked_of: Option<Vec<String>> = match view {
        RequestView::Asked(a) => Some(a.asked_of.clone()),
        RequestView::Summary(v) => v.get("asked_of").and_then(|v| v.as_array()).map(|l| {
            l.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        }),
        RequestView::Approval(_) => None,
    };
    if let Some(of) = asked_of {
        out.push(format!("  asked of   {}", of.join(", ")));
    }
    if !view.expires_at().is_empty() {
        out.push(format!("  expires    {}", view.expires_at()));
    }
    if let RequestView::Asked(a) = view {
        if let Ask::Question { options, .. } = &a.ask {
            for (i, o) in options.iter().enumerate() {
                out.push(format!("  option {}   {o}", i + 1));
            }
        }
        // An elicitation: the server's words, fenced as untrusted, and the fields it asks for.
        for detail in a.ask.details() {
            for line in detail.lines() {
                out.push(format!("  {}", inline(line)));
            }
        }
        if let Some(r) = &a.reply {
            out.push(format!(
                "  reply      {} by {}",
                r.reply.label(),
                r.by.actor
            ));
        }
    }
    if !view.body().is_empty() {
        out.push(view.body().to_owned());
    }
    out
}
