//! What changed between two profiles, pointer by pointer, with the changes that could widen
//! what the agent may do (tools, permissions, memory, subagents) marked, and the decisions
//! (`deny < ask < allow`) that did widen named as such.

use serde::Serialize;
use serde_json::Value;

use crate::delta::WIDENING;

/// One difference.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Change {
    pub pointer: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<Value>,
    /// In a section a change of which can widen authority (reviewed as high risk).
    pub sensitive: bool,
    /// A decision that went up (`deny`→`ask`, `ask`→`allow`, …), or an entry added to an
    /// allow list or removed from a deny list.
    pub widens: bool,
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn rank(v: &Value) -> Option<u8> {
    match v.as_str()? {
        "deny" => Some(0),
        "ask" => Some(1),
        "allow" => Some(2),
        _ => None,
    }
}

fn widens(pointer: &str, before: Option<&Value>, after: Option<&Value>) -> bool {
    if let (Some(b), Some(a)) = (before.and_then(rank), after.and_then(rank)) {
        return a > b;
    }
    let last = pointer.rsplit('/').next().unwrap_or_default();
    let list = |v: Option<&Value>| -> Vec<Value> {
        v.and_then(Value::as_array).cloned().unwrap_or_default()
    };
    match last {
        "allow" | "read_roots" | "write_roots" | "allow_hosts" | "scopes" => {
            let b = list(before);
            list(after).iter().any(|x| !b.contains(x))
        }
        "deny" | "deny_paths" => {
            let a = list(after);
            list(before).iter().any(|x| !a.contains(x))
        }
        "mode" if pointer.starts_with("/spec/memory") => {
            let r = |v: Option<&Value>| match v.and_then(Value::as_str) {
                Some("off") => 0,
                Some("read_write") => 2,
                _ => 1,
            };
            r(after) > r(before)
        }
        "policy" => after.and_then(Value::as_str) != Some("allowlist"),
        _ => before.is_none() && after.is_some() && pointer.starts_with("/spec/tools/mcp_servers"),
    }
}

fn walk(pointer: &str, before: Option<&Value>, after: Option<&Value>, out: &mut Vec<Change>) {
    match (before, after) {
        (Some(Value::Object(b)), Some(Value::Object(a))) => {
            let mut keys: Vec<&String> = b.keys().chain(a.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                walk(&format!("{pointer}/{}", escape(k)), b.get(k), a.get(k), out);
            }
        }
        (b, a) if b == a => {}
        (b, a) => {
            let sensitive = WIDENING
                .iter()
                .any(|w| pointer == *w || pointer.starts_with(&format!("{w}/")));
            out.push(Change {
                pointer: pointer.to_owned(),
                before: b.cloned(),
                after: a.cloned(),
                sensitive,
                widens: sensitive && widens(pointer, b, a),
            });
        }
    }
}

/// Every difference from `before` to `after` (objects compared key by key, arrays whole, as
/// `extends` merges them).
pub fn diff(before: &crate::Document, after: &crate::Document) -> Vec<Change> {
    let mut out = Vec::new();
    walk(
        "",
        Some(&Value::Object(before.clone())),
        Some(&Value::Object(after.clone())),
        &mut out,
    );
    out
}
