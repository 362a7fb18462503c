//! Effect-class ceilings, the static half: each tool declares the worst risk class it can
//! reach (`warrant_kernel::Tool::worst_class`; one that declares nothing counts as the worst),
//! and a composition (the tools a run is offered under a menu, narrowed by an agent profile)
//! holds when none of them can reach worse than its ceiling (`[run] ceiling`, the menu's; the
//! tighter counts). `warrant verify` reports it; every run checks the same before each step
//! (`warrant_kernel::Ring::composition_halt`) and stops with W-ENVELOPE-007 when it does not
//! hold. The dynamic half (W-ENVELOPE-006) judges each call's decided class.

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
    /// The ceiling in force; `None` when neither `[run]` nor the menu declares one.
    pub ceiling: Option<RiskClass>,
    /// Every tool offered, with the worst class it can reach (in name order).
    pub tools: Vec<ToolReach>,
    /// The tools that can reach worse than the ceiling: the composition holds when empty.
    pub above: Vec<ToolReach>,
}

impl Composition {
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
    ) -> Result<Composition> {
        let mut settings = self.settings.clone();
        if let Some(m) = menu {
            settings.menu = Some(m.to_owned());
        }
        let tools = self.toolbox(&settings, true)?;
        if let Some(mcp) = &self.mcp {
            crate::mcp::tell_failures(mcp, self.inst.notices.as_ref());
        }
        let pin = match profile {
            Some(p) => {
                let names: Vec<String> = tools.specs().into_iter().map(|s| s.name).collect();
                let model = settings.default_model.clone().unwrap_or_default();
                Some(self.pin_agent_profile(p, &names, &model)?.0)
            }
            None => None,
        };
        let ceiling = ceiling_of(&settings);
        let reach = reachable(&tools, pin.as_ref());
        let above = match ceiling {
            Some(c) => reach.iter().filter(|t| t.class > c).cloned().collect(),
            None => Vec::new(),
        };
        Ok(Composition {
            menu: settings.menu,
            profile: profile.map(str::to_owned),
            ceiling,
            tools: reach,
            above,
        })
    }
}
