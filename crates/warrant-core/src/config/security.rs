//! `[security]`: strict mode. Settable in every layer; the managed layer may lock its value
//! (`locked = true`), and then no other layer changes it.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecurityConfig {
    /// Refuse to start a run, a worker, a chat or `mcp serve` while a baseline control is
    /// missing, and turn on workload-independent limits (see `warrant_host::strict`).
    pub strict: Option<bool>,
    /// Managed layer only: its `strict` holds whatever the other layers say.
    #[serde(default)]
    pub locked: bool,
}

/// `[rate]`: token buckets on a principal's actions, shared through the store by every
/// process and worker. Every layer's limit counts; the tightest wins (a project cannot loosen
/// a managed limit).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateConfig {
    /// `[rate.principal]`: every action of one principal (tenant and actor).
    pub principal: Option<RateLimit>,
    /// `[rate.kinds.<kind>]`: the actions of one resource kind (`fs`, `shell`, `git`, `web`,
    /// `memory`, …) of one principal.
    #[serde(default)]
    pub kinds: std::collections::BTreeMap<String, RateLimit>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    /// Tokens added back per minute.
    pub per_minute: u32,
    /// Most tokens held (default: `per_minute`): how many actions may come at once.
    pub burst: Option<u32>,
}

impl RateLimit {
    pub fn capacity(self) -> u32 {
        self.burst.unwrap_or(self.per_minute).max(1)
    }

    /// The stricter of two limits, field by field.
    pub fn tightest(self, other: Self) -> Self {
        Self {
            per_minute: self.per_minute.min(other.per_minute),
            burst: Some(self.capacity().min(other.capacity())),
        }
    }
}

impl RateConfig {
    /// `self` and `other` together: each limit the tightest of both.
    pub fn tightest(mut self, other: &Self) -> Self {
        self.principal = match (self.principal, other.principal) {
            (Some(a), Some(b)) => Some(a.tightest(b)),
            (a, b) => a.or(b),
        };
        for (kind, limit) in &other.kinds {
            let merged = match self.kinds.get(kind) {
                Some(mine) => mine.tightest(*limit),
                None => *limit,
            };
            self.kinds.insert(kind.clone(), merged);
        }
        self
    }

    pub fn is_empty(&self) -> bool {
        self.principal.is_none() && self.kinds.is_empty()
    }
}
