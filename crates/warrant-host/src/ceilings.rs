//! Effect-class ceilings, the static half: each tool declares the worst risk class it can
//! reach (`warrant_kernel::Tool::worst_class`; one that declares nothing counts as the worst),
//! and a composition (the tools a run is offered under a menu, narrowed by an agent profile)
//! holds when none of them can reach worse than its ceiling: the tightest of every one
//! declared (`[run] ceiling`, the menu's, the agent profile's
//! `metadata.annotations."warrant.dev/ceiling"`, the graph's `x-warrant-ceiling`).
//! `warrant verify` reports it; every run checks the same before each step
//! (`warrant_kernel::Ring::composition_halt`) and stops with W-ENVELOPE-007 when it does not
//! hold. The dynamic half (W-ENVELOPE-006) judges each call's decided class against the same
//! ceiling, narrowed further from the moment the run activates a skill that declares a tighter
//! one (`metadata: { warrant-ceiling: CLASS }`, see `RunState::ceiling_now`).

use serde::Serialize;
use warrant_core::RiskClass;
use warrant_core::config::Settings;
use warrant_kernel::{ToolReach, ToolRegistry, reachable};

use crate::{Host, Result};

/// What `warrant verify` found of one composition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Composition {
    /// The menu in force (`--menu`, else `[run] menu`); `None`: every tool.
    pub menu: Option<String>,
    /// The agent profile it was narrowed by (`--profile`).
    pub profile: Option<String>,
    /// The graph whose run it would be (`--graph`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph: Option<String>,
    /// The ceiling in force, the tightest declared; `None` when nothing declares one.
    pub ceiling: Option<RiskClass>,
    /// Every ceiling declared and where (`[run]`, `menu NAME`, `agent profile NAME`,
    /// `graph ID`).
    pub declared: Vec<Declared>,
    /// Every tool offered, with the worst class it can reach (in name order).
    pub tools: Vec<ToolReach>,
    /// The tools that can reach worse than the ceiling: the composition holds when empty.
    pub above: Vec<ToolReach>,
}

/// One declared ceiling and who declared it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Declared {
    pub by: String,
    pub ceiling: RiskClass,
}

/// The tighter of two optional ceilings.
pub fn tightest(a: Option<RiskClass>, b: Option<RiskClass>) -> Option<RiskClass> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// `warrant verify`'s answer: whether the composition holds, and the composition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Checked {
    pub holds: bool,
    pub composition: Composition,
}

impl Composition {
    /// This composition with its verdict, as `verify --json` prints it.
    pub fn checked(self) -> Checked {
        Checked {
            holds: self.holds(),
            composition: self,
        }
    }

    pub fn holds(&self) -> bool {
        self.above.is_empty()
    }
}

/// The worst class a run under `settings` may reach: the tighter of `[run] ceiling` and the
/// ceiling of the menu in force.
pub fn ceiling_of(settings: &Settings) -> Option<RiskClass> {
    let menu = settings
        .menu
        .as_ref()
        .and_then(|m| settings.menus.get(m))
        .and_then(|m| m.ceiling);
    match (settings.ceiling, menu) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl Host {
    /// The static check of the composition a run would have under `menu` (default: `[run]
    /// menu`) and the agent profile `profile`. Starts the configured MCP servers to learn
    /// their tools, as a run does.
    pub fn verify_composition(
        &self,
        menu: Option<&str>,
        profile: Option<&str>,
        graph: Option<&std::path::Path>,
    ) -> Result<Composition> {
        let mut settings = self.settings.clone();
        if let Some(m) = menu {
            settings.menu = Some(m.to_owned());
        }
        let graph = graph
            .map(|g| warrant_graph::Graph::load(g).map_err(|e| crate::graph::graph_error(&e)))
            .transpose()?;
        let tools = self.toolbox(&settings, true)?;
        if let Some(mcp) = &self.mcp {
            crate::mcp::tell_failures(mcp, self.inst.notices.as_ref());
        }
        let pinned = match profile {
            Some(p) => {
                let names: Vec<String> = tools.specs().into_iter().map(|s| s.name).collect();
                let model = settings.default_model.clone().unwrap_or_default();
                Some(self.pin_agent_profile(p, &names, &model)?)
            }
            None => None,
        };
        let mut declared = Vec::new();
        if let Some(c) = settings.ceiling {
            declared.push(Declared {
                by: "[run]".into(),
                ceiling: c,
            });
        }
        if let Some((m, c)) = settings
            .menu
            .as_ref()
            .and_then(|m| Some((m, settings.menus.get(m)?.ceiling?)))
        {
            declared.push(Declared {
                by: format!("menu {m}"),
                ceiling: c,
            });
        }
        if let (Some(p), Some((_, limits))) = (profile, &pinned)
            && let Some(c) = limits.ceiling
        {
            declared.push(Declared {
                by: format!("agent profile {p}"),
                ceiling: c,
            });
        }
        if let Some(g) = &graph
            && let Some(c) = g.ceiling
        {
            declared.push(Declared {
                by: format!("graph {}", g.id),
                ceiling: c,
            });
        }
        let ceiling = declared.iter().map(|d| d.ceiling).min();
        let pin = pinned.map(|(pin, _)| pin);
        let reach = reachable(&tools, pin.as_ref());
        let above = match ceiling {
            Some(c) => reach.iter().filter(|t| t.class > c).cloned().collect(),
            None => Vec::new(),
        };
        Ok(Composition {
            menu: settings.menu,
            profile: profile.map(str::to_owned),
            graph: graph.map(|g| g.id),
            ceiling,
            declared,
            tools: reach,
            above,
        })
    }
}
