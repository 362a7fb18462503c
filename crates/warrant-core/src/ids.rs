//! Identifiers for runs, requests and audit records, and the source that makes them.
//! Ids are time-ordered (UUIDv7-derived) so listings sort by creation without a clock lookup.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// The prefix every id of this type starts with.
            pub const PREFIX: &'static str = $prefix;

            /// Accepts an id typed by a user or read from the store; checks only its shape.
            pub fn parse(s: &str) -> Option<Self> {
                let rest = s.strip_prefix($prefix)?;
                let ok = !rest.is_empty()
                    && rest.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
                ok.then(|| Self(s.to_owned()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

id_type!(
    /// One governed run.
    RunId,
    "run-"
);
id_type!(
    /// One request to a person (an approval, later a secret or a question).
    RequestId,
    "req-"
);

/// Where new ids come from. Passed in so tests and replay are deterministic.
pub trait IdSource: Send + Sync {
    /// A fresh, unique suffix (hex, may contain `-`).
    fn next_suffix(&self) -> String;

    fn run_id(&self) -> RunId {
        RunId(format!("{}{}", RunId::PREFIX, self.next_suffix()))
    }

    fn request_id(&self) -> RequestId {
        RequestId(format!("{}{}", RequestId::PREFIX, self.next_suffix()))
    }

    /// An opaque unique id for records (audit ids, tool call ids).
    fn record_id(&self) -> String {
        self.next_suffix()
    }
}

/// Time-ordered random ids: 12 hex digits of milliseconds (from UUIDv7), then 12 hex digits
/// (48 bits) from a random UUIDv4. The random part comes from v4, not from the rest of the v7:
/// v7 generators may spend those bits on a counter, which collides across processes.
#[derive(Debug, Default, Clone, Copy)]
pub struct RandomIds;

impl IdSource for RandomIds {
    fn next_suffix(&self) -> String {
        let time = uuid::Uuid::now_v7().simple().to_string();
        let random = uuid::Uuid::new_v4().simple().to_string();
        format!("{}-{}", &time[..12], &random[..12])
    }
}

/// Deterministic ids for tests: `000000000001`, `000000000002`, …
#[derive(Debug, Default)]
pub struct SequentialIds(AtomicU64);

impl IdSource for SequentialIds {
    fn next_suffix(&self) -> String {
        let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        format!("{n:012x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_their_prefix_and_parse_back() {
        let ids = RandomIds;
        let run = ids.run_id();
        assert!(run.as_str().starts_with("run-"));
        assert_eq!(RunId::parse(run.as_str()), Some(run.clone()));
        assert_eq!(RunId::parse("req-abc"), None);
        assert_eq!(RunId::parse("run-"), None);
        assert_eq!(RunId::parse("run-zz"), None);
        let many: std::collections::BTreeSet<String> =
            (0..10_000).map(|_| ids.record_id()).collect();
        assert_eq!(
            many.len(),
            10_000,
            "ids made in the same millisecond never collide"
        );
        let seq = SequentialIds::default();
        assert_eq!(seq.request_id().as_str(), "req-000000000001");
        assert_eq!(seq.request_id().as_str(), "req-000000000002");
    }
}
