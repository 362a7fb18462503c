//! The kill switch (what is set, set, lifted) and `verify`, the static ceiling check of a
//! composition.

use warrant_host::ceilings::Composition;
use warrant_host::envelope::{KillLifted, KillSet};
use warrant_host::narrate::inline;
use warrant_store::{KillScope, KillSwitch};

/// A switch: its scope, who set it when, and why.
pub fn switch(s: &KillSwitch) -> String {
    format!(
        "{} by {} at {}: {}",
        s.scope.describe(),
        s.set_by,
        s.set_at.rfc3339(),
        inline(&s.reason)
    )
}

/// `kill --list`.
pub fn switches(set: &[KillSwitch]) -> String {
    if set.is_empty() {
        return "no kill switch is set".to_owned();
    }
    set.iter().map(switch).collect::<Vec<_>>().join("\n")
}

/// `kill SCOPE`.
pub fn set(set: &KillSet) -> String {
    if set.newly_set {
        format!(
            "set      {}; every run it covers stops at its next effect",
            switch(&set.switch)
        )
    } else {
        format!("already set {}", switch(&set.switch))
    }
}

/// `kill --lift SCOPE`: what was lifted, and what is still set.
pub fn lifted(lifted: &KillLifted, scope: &KillScope) -> String {
    let mut lines = vec![match &lifted.lifted {
        Some(s) => format!("lifted   {}", switch(s)),
        None => format!("no kill switch was set for {}", scope.describe()),
    }];
    lines.extend(
        lifted
            .still_set
            .iter()
            .map(|s| format!("still set {}", switch(s))),
    );
    lines.join("\n")
}

/// The reason recorded when none is given.
pub const STOPPED_HERE: &str = "stopped from the command line";
/// The reason recorded for a lift when none is given.
pub const LIFTED_HERE: &str = "lifted from the command line";

/// `verify`: whether the composition holds under its ceiling, and the tools above it.
pub fn composition(c: &Composition) -> String {
    let mut lines = Vec::new();
    let menu = c.menu.as_deref().unwrap_or("every tool");
    let mut profile = c
        .profile
        .as_deref()
        .map_or_else(String::new, |p| format!(", agent profile {p}"));
    if let Some(g) = &c.graph {
        profile.push_str(&format!(", graph {g}"));
    }
    if c.declared.len() > 1 {
        let declared: Vec<String> = c
            .declared
            .iter()
            .map(|d| format!("{} `{}`", d.by, d.ceiling.as_str()))
            .collect();
        lines.push(format!(
            "ceilings declared: {} (the tightest counts)",
            declared.join(", ")
        ));
    }
    match c.ceiling {
        None => lines.push(format!(
            "ok       menu {menu}{profile}: no ceiling declared (`[run] ceiling`, `[menus.NAME] ceiling`, a profile's or graph's); its tools can reach `{}`",
            c.tools
                .iter()
                .map(|t| t.class)
                .max()
                .map_or("nothing", |m| m.as_str())
        )),
        Some(ceiling) if c.holds() => lines.push(format!(
            "ok       menu {menu}{profile}: {} tool(s), none can reach worse than the ceiling `{}`",
            c.tools.len(),
            ceiling.as_str()
        )),
        Some(ceiling) => {
            lines.push(format!(
                "ABOVE    menu {menu}{profile}: {} of {} tool(s) can reach worse than the ceiling `{}` [W-ENVELOPE-007]; a run of it would stop before its first step:",
                c.above.len(),
                c.tools.len(),
                ceiling.as_str()
            ));
            for t in &c.above {
                lines.push(format!("  {:<24} {}", t.tool, t.class.as_str()));
            }
        }
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use warrant_core::RiskClass;
    use warrant_host::ceilings::Declared;
    use warrant_kernel::ToolReach;

    use super::*;

    fn reach(tool: &str, class: RiskClass) -> ToolReach {
        ToolReach {
            tool: tool.to_owned(),
            class,
        }
    }

    #[test]
    fn a_composition_above_its_ceiling_names_each_tool_and_the_tightest_declared() {
        let c = Composition {
            menu: Some("review".to_owned()),
            profile: Some("reader".to_owned()),
            graph: None,
            ceiling: Some(RiskClass::Read),
            declared: vec![
                Declared {
                    by: "[run]".to_owned(),
                    ceiling: RiskClass::Change,
                },
                Declared {
                    by: "menu review".to_owned(),
                    ceiling: RiskClass::Read,
                },
            ],
            tools: vec![
                reach("read_file", RiskClass::Read),
                reach("run_command", RiskClass::Destructive),
            ],
            above: vec![reach("run_command", RiskClass::Destructive)],
        };
        assert_eq!(
            composition(&c),
            "ceilings declared: [run] `change`, menu review `read` (the tightest counts)\n\
             ABOVE    menu review, agent profile reader: 1 of 2 tool(s) can reach worse than the ceiling `read` [W-ENVELOPE-007]; a run of it would stop before its first step:\n  \
             run_command              destructive"
        );
        let open = Composition {
            ceiling: None,
            declared: Vec::new(),
            above: Vec::new(),
            menu: None,
            profile: None,
            ..c
        };
        assert_eq!(
            composition(&open),
            "ok       menu every tool: no ceiling declared (`[run] ceiling`, `[menus.NAME] ceiling`, a profile's or graph's); its tools can reach `destructive`"
        );
    }
}
