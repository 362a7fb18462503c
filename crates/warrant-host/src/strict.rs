//! Strict mode (`[security] strict = true`): the baseline an unattended agent needs before it
//! starts. Every front end that opens a run or serves one (run, submit, worker, chat, `mcp
//! serve`) calls [`Host::preflight`] first: strict, it refuses to start and lists every gap at
//! once; not strict, it tells the person once, in one notice. Strict also turns on limits that
//! do not depend on the workload ([`StrictDefaults`]).
//!
//! Strict also records itself in each run it starts (`RunSettings::strict`): such a run,
//! resumed under another tool catalogue or policy set than it logged, stops (replay divergence
//! refused, W-STRICT-002) instead of going on under the new one.
//!
//! Checked from configuration and the store, not probed: "the confined default profile" means
//! the configuration confines it (a host where the sandbox cannot be applied still refuses the
//! command when it runs, as it always does).

use serde::Serialize;
use warrant_core::RiskClass;
use warrant_core::risk::Needs;

use crate::{Host, HostError, Notice, Result};

/// One baseline control that is missing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Gap {
    /// Stable name of the control: `approval-route`, `budget`, `audit-sink`,
    /// `approver-keys`, `confined-default`, `policy-warnings`, `row-level-security`,
    /// `preflight-verification`.
    pub control: &'static str,
    pub problem: String,
}

/// What strict mode turns on when the configuration leaves it unset.
#[derive(Debug)]
pub struct StrictDefaults;

impl StrictDefaults {
    /// A run without a deadline stops after this long.
    pub const DEADLINE: std::time::Duration = std::time::Duration::from_secs(4 * 3600);
    /// A run's model calls may use at most this many tokens unless a budget says less.
    pub const RUN_TOKENS: u64 = 2_000_000;
}

impl Host {
    /// Whether strict mode is on (`[security] strict`, the managed layer's when it locks it).
    pub fn strict(&self) -> bool {
        self.settings.strict
    }

    /// Every baseline control that is missing, in a fixed order.
    pub fn strict_gaps(&self) -> Vec<Gap> {
        let mut gaps = Vec::new();
        let warnings = self.policy.warnings();
        if !warnings.is_empty() {
            gaps.push(Gap {
                control: "policy-warnings",
                problem: format!(
                    "the policy set loads with {} warning(s): {}",
                    warnings.len(),
                    warnings.join("; ")
                ),
            });
        }
        let needs_person: Vec<RiskClass> = RiskClass::ALL
            .into_iter()
            .filter(|c| self.rules.risk.rule(*c).needs == Needs::Person)
            .collect();
        let approvers = self.approvers();
        match (&self.rules.directory, approvers.is_empty()) {
            (None, _) => gaps.push(Gap {
                control: "approval-route",
                problem: format!(
                    "no identity directory (managed directory.toml): nobody is named to approve the classes that need a person ({})",
                    classes(&needs_person)
                ),
            }),
            (Some(_), true) => gaps.push(Gap {
                control: "approval-route",
                problem: format!(
                    "the identity directory names no administrators and the project no team with members (`[approvals] team`): nobody approves {}",
                    classes(&needs_person)
                ),
            }),
            (Some(d), false) => {
                let unkeyed: Vec<&str> = approvers
                    .iter()
                    .filter(|a| d.people.get(*a).is_none_or(|p| p.public_key.is_none()))
                    .map(String::as_str)
                    .collect();
                if !unkeyed.is_empty() {
                    gaps.push(Gap {
                        control: "approver-keys",
                        problem: format!(
                            "approvers without a registered Ed25519 key in the directory (their answers cannot be authenticated): {}",
                            unkeyed.join(", ")
                        ),
                    });
                }
            }
        }
        if self.rules.allow_unauthenticated {
            gaps.push(Gap {
                control: "approver-keys",
                problem: "unauthenticated answers are accepted (a test switch is on)".to_owned(),
            });
        }
        let b = &self.settings.budgets;
        let any_budget = [b.run, b.actor, b.tenant]
            .iter()
            .any(|l| l.tokens.is_some() || l.cost_usd.is_some());
        if !any_budget {
            gaps.push(Gap {
                control: "budget",
                problem:
                    "no budget is configured (`[budgets.run|actor|tenant] tokens` or `cost_usd`)"
                        .to_owned(),
            });
        }
        match self.records().audit_status() {
            Ok(status) if status.sinks.is_empty() => gaps.push(Gap {
                control: "audit-sink",
                problem: "no audit sink is configured".to_owned(),
            }),
            Ok(status) => {
                for s in status.sinks.iter().filter(|s| s.stale) {
                    gaps.push(Gap {
                        control: "audit-sink",
                        problem: format!(
                            "audit sink `{}` has been failing longer than allowed: {}",
                            s.sink,
                            s.last_error.as_deref().unwrap_or("no error recorded")
                        ),
                    });
                }
            }
            Err(e) => gaps.push(Gap {
                control: "audit-sink",
                problem: format!("the audit sinks' health cannot be read: {}", e.message),
            }),
        }
        match self.settings.profiles.get("default") {
            Some(p) if !p.unconfined && p.sandbox.is_some() => {}
            _ => gaps.push(Gap {
                control: "confined-default",
                problem: "the `default` profile is not confined (`unconfined = true`)".to_owned(),
            }),
        }
        match self.inst.store.row_security() {
            Ok(Some(rls)) => {
                if let Some(problem) = rls.problem() {
                    gaps.push(Gap {
                        control: "row-level-security",
                        problem,
                    });
                }
            }
            Ok(None) => {}
            Err(e) => gaps.push(Gap {
                control: "row-level-security",
                problem: format!("the store login's attributes cannot be read: {e}"),
            }),
        }
        if let Some(problem) = self.preflight_problem() {
            gaps.push(Gap {
                control: "preflight-verification",
                problem,
            });
        }
        gaps
    }

    /// Pre-flight verification (`warrant verify` of the run's composition): what keeps it
    /// from passing, if anything. No ceiling declared is a gap too: there is nothing to verify
    /// the tools against.
    fn preflight_problem(&self) -> Option<String> {
        match self.verify_composition(None, None, None) {
            Ok(c) if c.ceiling.is_none() => Some(
                "no effect-class ceiling is declared (`[run] ceiling` or the menu's `ceiling`), so the run's tools cannot be verified against one before it starts"
                    .to_owned(),
            ),
            Ok(c) if !c.holds() => Some(format!(
                "the run's tools can reach worse than its ceiling `{}` (`warrant verify`): {}",
                c.ceiling.map_or("", |c| c.as_str()),
                c.above
                    .iter()
                    .map(|t| format!("{} ({})", t.tool, t.class.as_str()))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            Ok(_) => None,
            Err(e) => Some(format!(
                "the run's tools cannot be verified: {}",
                e.message
            )),
        }
    }

    /// Before a front end opens or serves a run: strict, refuse with every gap listed;
    /// otherwise one notice of the gaps (none when there are none).
    pub fn preflight(&self) -> Result<()> {
        let gaps = self.strict_gaps();
        if gaps.is_empty() {
            return Ok(());
        }
        if self.strict() {
            let listed: Vec<String> = gaps
                .iter()
                .map(|g| format!("[{}] {}", g.control, g.problem))
                .collect();
            return Err(HostError::usage(
                "W-STRICT-001",
                format!(
                    "strict mode refuses to start: {} control(s) missing: {}. Nothing was started",
                    gaps.len(),
                    listed.join("; ")
                ),
            ));
        }
        self.inst.notices.notice(Notice::BaselineGaps { gaps });
        Ok(())
    }

    /// Who may answer a request on this project: its team's members and the administrators.
    fn approvers(&self) -> Vec<String> {
        let Some(d) = &self.rules.directory else {
            return Vec::new();
        };
        let mut out = d.admins();
        if let Some(team) = &self.rules.team {
            out.extend(d.team_members(team));
        }
        out.into_iter().collect()
    }
}

fn classes(c: &[RiskClass]) -> String {
    c.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(", ")
}
