//! From a resolved profile to the pin a run works under: the ceiling per tool and per
//! permission family (a pure function of the profile's `spec` and the run's tools, so nothing
//! in `state` can move it, L2-S3), the prompt sections in the spec's order, the state rendered
//! within its budget, and the record of everything dropped, narrowed or substituted (L1-I9).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;
use warrant_core::MemoryScope;
use warrant_core::config::McpServerConfig;
use warrant_kernel::agent_profile::{
    Adjustment, Ceiling, Family, PathCeiling, PinnedRule, PinnedSkill, PinnedStore, ProfilePin,
};
use warrant_kernel::skills::SkillPin;

use crate::{Document, OapError, Resolved};

/// What the installation offers a profile to attach: the skills usable here (installed and
/// approved as they are, or a trusted project's), and the MCP servers the operator configured
/// (`[mcp.servers.*]`). A profile only selects among these and narrows them: it never
/// installs a skill nor starts a server of its own.
#[derive(Clone, Debug, Default)]
pub struct Installation {
    pub skills: Vec<SkillPin>,
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
}

/// Limits of `spec.runtime` the host applies to the run's settings (each only lowers one).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunLimits {
    pub max_turns: Option<u32>,
    pub max_tool_calls: Option<u32>,
    pub timeout_seconds: Option<u64>,
    /// `spec.runtime.subagents.max_depth`.
    pub max_depth: Option<u32>,
    /// `spec.runtime.subagents.max_concurrent`: how many subagents of the run may be running
    /// at once (a nested one runs while every subagent above it waits for it).
    pub max_concurrent: Option<u32>,
    /// `spec.runtime.max_cost_usd`: the run's cost budget (metered where `[prices]` prices
    /// the model).
    pub max_cost_usd: Option<f64>,
    /// `metadata.annotations."warrant.dev/ceiling"`: the worst risk class a run under the
    /// profile may reach (OAP has no field for it; annotations are its extension point).
    pub ceiling: Option<warrant_core::RiskClass>,
}

/// The annotation a profile declares its effect-class ceiling in.
pub const CEILING_ANNOTATION: &str = "warrant.dev/ceiling";

/// The ceiling `resolved` declares, if any; a value that is not a risk class is refused.
pub fn declared_ceiling(resolved: &Resolved) -> Result<Option<warrant_core::RiskClass>, OapError> {
    let Some(value) = resolved
        .effective
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(CEILING_ANNOTATION))
    else {
        return Ok(None);
    };
    match value.as_str().and_then(warrant_core::RiskClass::parse) {
        Some(class) => Ok(Some(class)),
        None => Err(OapError::Invalid {
            path: resolved.path.display().to_string(),
            kind: "AgentProfile".into(),
            findings: vec![crate::Finding {
                pointer: "/metadata/annotations/warrant.dev~1ceiling".into(),
                message: format!(
                    "{value} is not a risk class (one of {})",
                    warrant_core::RiskClass::ALL
                        .iter()
                        .map(|c| c.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }],
        }),
    }
}

fn obj(v: Option<&Value>) -> Option<&serde_json::Map<String, Value>> {
    v.and_then(Value::as_object)
}

fn at<'a>(doc: &'a Document, path: &[&str]) -> Option<&'a Value> {
    let mut cur = doc.get(*path.first()?)?;
    for key in &path[1..] {
        cur = cur.get(*key)?;
    }
    Some(cur)
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

fn glob(pattern: &str, value: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    match pattern.strip_suffix('*') {
        Some(prefix) => value.starts_with(prefix),
        None => pattern == value,
    }
}

/// The names a Warrant tool answers to in a profile's `spec.tools` (besides its own): the
/// generic OAP vocabulary (`read`, `search`, `edit`, `shell`, `git/diff`, `mcp/<server>/<tool>`).
pub fn oap_names(tool: &str) -> Vec<String> {
    let fixed: &[&str] = match tool {
        "read_file" => &["read"],
        "list_dir" => &["read", "list"],
        "search_files" => &["search", "read"],
        "write_file" => &["write", "edit"],
        "edit_file" | "apply_patch" => &["edit", "write"],
        "delete_path" => &["delete", "write", "edit"],
        "run_command" => &["shell", "bash"],
        "run_tests" => &["shell", "test"],
        "git_status" => &["git/status", "git"],
        "git_diff" => &["git/diff", "git"],
        "git_log" => &["git/log", "git"],
        "git_show" => &["git/show", "git"],
        "git_commit" => &["git/commit", "git"],
        "git_branch" => &["git/branch", "git"],
        "git_checkout" => &["git/checkout", "git"],
        "git_push" => &["git/push", "git"],
        "web_fetch" => &["fetch", "web"],
        "spawn_agent" => &["agent", "task"],
        "remember" => &["memory/write", "memory"],
        "recall" => &["memory/read", "memory"],
        "forget" => &["memory/delete", "memory"],
        "propose_memory" => &["memory/propose", "memory"],
        "catalog_list" => &["catalog/list", "catalog"],
        "catalog_describe" => &["catalog/describe", "catalog"],
        "activate_skill" => &["skill", "skills"],
        "create_document" | "create_presentation" | "create_spreadsheet" | "create_report" => {
            &["write", "artifact"]
        }
        _ => &[],
    };
    let mut names: Vec<String> = fixed.iter().map(|s| (*s).to_owned()).collect();
    // `mcp__server__tool` is `mcp/server/tool` in OAP's recommended naming.
    if let Some(rest) = tool.strip_prefix("mcp__")
        && let Some((server, name)) = rest.split_once("__")
    {
        names.push(format!("mcp/{server}/{name}"));
    }
    names
}

/// Warrant's name of the skill activation tool (`warrant-skills` sits above this crate).
const fn warrant_skills_tool() -> &'static str {
    "activate_skill"
}

fn matches_any(patterns: &[String], tool: &str, names: &[String]) -> Option<String> {
    patterns
        .iter()
        .find(|p| glob(p, tool) || names.iter().any(|n| glob(p, n)))
        .cloned()
}

fn decision(v: Option<&Value>) -> Option<Ceiling> {
    v.and_then(Value::as_str).and_then(Ceiling::parse)
}

fn adjust(field: &str, requested: &str, effective: &str, reason: &str) -> Adjustment {
    Adjustment {
        field: field.to_owned(),
        requested: requested.to_owned(),
        effective: effective.to_owned(),
        reason: reason.to_owned(),
    }
}

/// The ceiling of every tool of the run under `spec.tools` (allowlist by default, OAP §3.4).
fn tool_ceilings(
    spec: &Document,
    tools: &[String],
    attached_skills: bool,
    mcp: &BTreeMap<String, ServerFilter>,
    stores: &[PinnedStore],
    adjustments: &mut Vec<Adjustment>,
) -> (BTreeMap<String, Ceiling>, BTreeMap<String, Vec<String>>) {
    let t = obj(at(spec, &["tools"]));
    let policy = t
        .and_then(|t| t.get("policy"))
        .and_then(Value::as_str)
        .unwrap_or("allowlist");
    let allow = strings(t.and_then(|t| t.get("allow")));
    let deny = strings(t.and_then(|t| t.get("deny")));
    let bindings: Vec<(String, Option<Ceiling>)> = t
        .and_then(|t| t.get("bindings"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|b| {
            Some((
                b.get("name")?.as_str()?.to_owned(),
                decision(b.get("permission")),
            ))
        })
        .collect();
    let subagents = strings(at(spec, &["runtime", "subagents", "allow"]));
    let mut ceilings = BTreeMap::new();
    let mut aliases = BTreeMap::new();
    for tool in tools {
        // Requests to a person (a question, a secret, a resource) are not actions: nothing
        // of the profile's tool policy applies to them, and policy never sees them either.
        if matches!(
            tool.as_str(),
            "ask_question" | "request_secret" | "request_resource"
        ) {
            continue;
        }
        let names = oap_names(tool);
        let mut denied_by =
            matches_any(&deny, tool, &names).map(|p| format!("spec.tools.deny lists `{p}`"));
        let mut listed = matches_any(&allow, tool, &names);
        // What the profile declares it uses is asked for by declaring it: the skills it
        // attaches (`activate_skill`) and the tools of the MCP servers it declares (narrowed
        // by each server's own allow/deny).
        if tool == warrant_skills_tool() && attached_skills && listed.is_none() {
            listed = Some("spec.tools.skills".to_owned());
        }
        // A memory store the profile attached asks for the tools that reach it.
        if listed.is_none()
            && let Some(store) = stores.iter().find(|s| match s.scope {
                MemoryScope::Local => matches!(tool.as_str(), "remember" | "recall" | "forget"),
                MemoryScope::Shared => matches!(tool.as_str(), "recall" | "propose_memory"),
            })
        {
            listed = Some(format!("spec.memory.stores.{}", store.name));
        }
        if let Some((server, own)) = tool
            .strip_prefix("mcp__")
            .and_then(|rest| rest.split_once("__"))
            && let Some(f) = mcp.get(server)
        {
            if let Some(p) = f.deny.iter().find(|p| glob(p, own)) {
                denied_by.get_or_insert(format!(
                    "spec.tools.mcp_servers.{server}.tools.deny lists `{p}`"
                ));
            } else if !f.allow.is_empty() && !f.allow.iter().any(|p| glob(p, own)) {
                denied_by.get_or_insert(format!(
                    "not in spec.tools.mcp_servers.{server}.tools.allow"
                ));
            } else if listed.is_none() {
                listed = Some(format!("spec.tools.mcp_servers.{server}"));
            }
        }
        let mut c = match (policy, &denied_by, &listed) {
            (_, Some(_), _) => Ceiling::Deny,
            ("allowlist", None, None) => Ceiling::Deny,
            _ => Ceiling::Allow,
        };
        let mut why = match (&denied_by, policy) {
            (Some(p), _) => p.clone(),
            (None, "allowlist") if listed.is_none() => {
                "not in spec.tools.allow (policy allowlist)".to_owned()
            }
            _ => String::new(),
        };
        if c == Ceiling::Allow
            && let Some((name, Some(b))) = bindings
                .iter()
                .find(|(n, _)| glob(n, tool) || names.iter().any(|x| glob(n, x)))
            && *b < c
        {
            c = *b;
            why = format!("spec.tools.bindings `{name}` sets {}", b.as_str());
        }
        // `spec.runtime.subagents.allow` empty (or absent) means no subagents.
        if tool == "spawn_agent" && c != Ceiling::Deny && subagents.is_empty() {
            c = Ceiling::Deny;
            why = "spec.runtime.subagents.allow is empty: no subagents".to_owned();
        }
        if c != Ceiling::Allow {
            adjustments.push(adjust(
                &format!("tools.{tool}"),
                "allow",
                c.as_str(),
                &format!("the profile narrows the harness's tool: {why}"),
            ));
        }
        ceilings.insert(tool.clone(), c);
        if !names.is_empty() {
            aliases.insert(tool.clone(), names);
        }
    }
    (ceilings, aliases)
}

fn families(spec: &Document, adjustments: &mut Vec<Adjustment>) -> BTreeMap<Family, Ceiling> {
    let p = obj(at(spec, &["permissions"]));
    let get = |k: &str| decision(p.and_then(|p| p.get(k)));
    // An unset family falls back to `default`, and an unset default to `ask` (fail closed:
    // a profile that says nothing does not pre-approve what policy would ask about).
    let default = get("default").unwrap_or(Ceiling::Ask);
    let mut m = BTreeMap::new();
    m.insert(Family::Default, default);
    m.insert(Family::Shell, get("shell").unwrap_or(default));
    m.insert(Family::Edit, get("edit").unwrap_or(default));
    m.insert(Family::Network, get("network").unwrap_or(default));
    let mode = at(spec, &["memory", "mode"])
        .and_then(Value::as_str)
        .unwrap_or("read_only");
    let (read, write) = match mode {
        "off" => (Ceiling::Deny, Ceiling::Deny),
        "read_write" => (default, default),
        _ => (default, Ceiling::Deny),
    };
    if write == Ceiling::Deny {
        adjustments.push(adjust(
            "memory.mode",
            mode,
            "memory writes denied",
            "spec.memory.mode does not allow writing (read_only is the default)",
        ));
    }
    m.insert(Family::MemoryRead, read);
    m.insert(Family::MemoryWrite, write);
    m
}

fn rules(spec: &Document) -> Vec<PinnedRule> {
    at(spec, &["permissions", "rules"])
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("*").to_owned();
            Some(PinnedRule {
                tool: s("tool"),
                action: s("action"),
                target: s("target"),
                decision: decision(r.get("decision"))?,
                reason: r.get("reason").and_then(Value::as_str).map(str::to_owned),
            })
        })
        .collect()
}

fn absolute(workspace: &Path, rel: &str) -> String {
    let joined = workspace.join(rel.trim_start_matches("./"));
    // Lexical: traversal was refused by validation, and `.` must name the workspace itself.
    let mut out = std::path::PathBuf::new();
    for c in joined.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other @ (std::path::Component::Prefix(_)
            | std::path::Component::RootDir
            | std::path::Component::Normal(_)) => out.push(other.as_os_str()),
        }
    }
    out.display().to_string()
}

fn paths(spec: &Document, workspace: &Path) -> PathCeiling {
    let fs = obj(at(spec, &["permissions", "filesystem"]));
    let list = |k: &str| {
        fs.and_then(|f| f.get(k)).map(|v| {
            strings(Some(v))
                .iter()
                .map(|r| absolute(workspace, r))
                .collect::<Vec<_>>()
        })
    };
    PathCeiling {
        read_roots: list("read_roots"),
        write_roots: list("write_roots"),
        deny: list("deny_paths").unwrap_or_default(),
    }
}

/// When the profile limits reads to `read_roots`, the skills it attached stay readable: their
/// directories join the roots (the profile asked for them; policy still decides each read).
fn with_skill_dirs(
    mut paths: PathCeiling,
    attached: Option<&[PinnedSkill]>,
    installation: &Installation,
) -> PathCeiling {
    if let (Some(roots), Some(attached)) = (paths.read_roots.as_mut(), attached) {
        for a in attached {
            if let Some(p) = installation.skills.iter().find(|p| p.name == a.name)
                && !roots.contains(&p.dir)
            {
                roots.push(p.dir.clone());
            }
        }
    }
    paths
}

fn bullets(title: &str, items: &[String]) -> Option<String> {
    (!items.is_empty()).then(|| {
        format!(
            "{title}\n{}",
            items
                .iter()
                .map(|i| format!("- {}", i.trim()))
                .collect::<Vec<_>>()
                .join("\n")
        )
    })
}

fn substitute(text: &str, vars: &BTreeMap<String, Value>) -> Result<String, String> {
    // The support crate expects exactly `${{ vars.`; accept any spacing the schema allows.
    let mut normal = text.to_owned();
    while let Some(i) = normal.find("${{vars.") {
        normal.replace_range(i..i + 8, "${{ vars.");
    }
    open_agent_profile::substitute_variables(&normal, vars).map_err(|e| e.to_string())
}

/// The profile's part of the system prompt (OAP §3.2 steps 2–6): instructions, objectives,
/// persona, constraints, examples, in that order. `${{ vars.KEY }}` is substituted in the
/// instructions, objectives and constraints only.
pub fn render_role(effective: &Document) -> Result<String, String> {
    let role = obj(at(effective, &["spec", "role"]));
    let vars: BTreeMap<String, Value> = obj(at(effective, &["spec", "context", "variables"]))
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    let get = |k: &str| role.and_then(|r| r.get(k));
    let mut parts = Vec::new();
    if let Some(i) = get("instructions").and_then(Value::as_str) {
        parts.push(substitute(i.trim_end(), &vars)?);
    }
    let objectives: Vec<String> = strings(get("objectives"))
        .iter()
        .map(|o| substitute(o, &vars))
        .collect::<Result<_, _>>()?;
    parts.extend(bullets("Objectives:", &objectives));
    if let Some(p) = obj(get("persona")) {
        let mut lines = Vec::new();
        for key in ["tone", "voice", "verbosity", "formatting", "language"] {
            if let Some(v) = p.get(key).and_then(Value::as_str) {
                lines.push(format!("{key}: {v}"));
            }
        }
        lines.extend(strings(p.get("style_rules")));
        parts.extend(bullets("Persona:", &lines));
    }
    parts.extend(bullets("Expertise:", &strings(get("expertise"))));
    let constraints: Vec<String> = strings(get("constraints"))
        .iter()
        .map(|c| substitute(c, &vars))
        .collect::<Result<_, _>>()?;
    parts.extend(bullets("Constraints:", &constraints));
    let examples: Vec<String> = get("examples")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let input = e.get("input")?.as_str()?;
            let output = e.get("output")?.as_str()?;
            Some(format!("Input: {input}\n  Output: {output}"))
        })
        .collect();
    parts.extend(bullets("Examples:", &examples));
    Ok(parts.join("\n\n"))
}

fn evict_key(entry: &Value, strategy: &str) -> String {
    let keys: &[&str] = match strategy {
        "oldest" => &["learned_at", "opened_at"],
        "least_confident" => &[],
        _ => &["last_used_at", "updated_at", "learned_at"],
    };
    if keys.is_empty() {
        return format!(
            "{:020.6}",
            entry
                .get("confidence")
                .and_then(Value::as_f64)
                .unwrap_or(1.0)
        );
    }
    keys.iter()
        .find_map(|k| entry.get(*k).and_then(Value::as_str))
        .unwrap_or_default()
        .to_owned()
}

/// The state as the agent sees it, within `spec.context.budget` (max_state_bytes, and
/// max_state_tokens at four bytes a token): whole facts and preferences are dropped in the
/// eviction order, pinned ones never, and the agent is told how many were elided (L2-S4).
/// `${{ vars.* }}` is never substituted here (L2-S5).
pub fn render_state(effective: &Document) -> Option<String> {
    let state = effective.get("state")?.as_object()?.clone();
    let budget = obj(at(effective, &["spec", "context", "budget"]));
    let bytes = budget
        .and_then(|b| b.get("max_state_bytes"))
        .and_then(Value::as_u64);
    let tokens = budget
        .and_then(|b| b.get("max_state_tokens"))
        .and_then(Value::as_u64)
        .map(|t| t.saturating_mul(4));
    let cap = match (bytes, tokens) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let strategy = at(effective, &["spec", "lifecycle", "retention", "eviction"])
        .and_then(Value::as_str)
        .unwrap_or("least_recently_used")
        .to_owned();
    let mut state = Value::Object(state);
    let render = |s: &Value| serde_json::to_string_pretty(s).unwrap_or_default();
    let mut elided = 0usize;
    if let Some(cap) = cap {
        // Candidates in eviction order across facts and preferences, pinned spared.
        let mut order: Vec<(String, &'static str, String)> = Vec::new();
        for coll in ["facts", "preferences"] {
            for e in state
                .get(coll)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if e.get("pinned") == Some(&Value::Bool(true)) {
                    continue;
                }
                if let Some(id) = e.get("id").and_then(Value::as_str) {
                    order.push((evict_key(e, &strategy), coll, id.to_owned()));
                }
            }
        }
        order.sort();
        for (_, coll, id) in order {
            if render(&state).len() as u64 <= cap {
                break;
            }
            if let Some(items) = state.get_mut(coll).and_then(Value::as_array_mut) {
                items.retain(|e| e.get("id").and_then(Value::as_str) != Some(id.as_str()));
                elided += 1;
            }
        }
    }
    let mut text = render(&state);
    if elided > 0 {
        text.push_str(&format!(
            "\n({elided} state entries were elided to fit the profile's state budget.)"
        ));
    }
    Some(text)
}

/// Everything of the profile Warrant does not carry out, said once so nobody is surprised
/// (L1-I9, L1-I12).
fn unsupported(spec: &Document, model: &str, adjustments: &mut Vec<Adjustment>) {
    if let Some(m) = obj(at(spec, &["model"])) {
        let want = match (
            m.get("provider").and_then(Value::as_str),
            m.get("id").and_then(Value::as_str),
        ) {
            (Some(p), Some(i)) => format!("{p}:{i}"),
            _ => m
                .get("tier")
                .and_then(Value::as_str)
                .map_or("unspecified".into(), |t| format!("tier {t}")),
        };
        if want != model {
            adjustments.push(adjust(
                "model",
                &want,
                model,
                "rule 4 (harness default): the run's --model is used; provider, fallbacks and tier routing are not resolved from the profile",
            ));
        }
    }
    for phase in ["on_start", "on_end"] {
        for hook in at(spec, &["lifecycle", phase])
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let h = hook.get("hook").and_then(Value::as_str).unwrap_or_default();
            adjustments.push(adjust(
                &format!("lifecycle.{phase}.{h}"),
                "run hook",
                "not run",
                "Warrant registers no profile hooks",
            ));
        }
    }
}

/// The store kind of Warrant's local memory (the workspace's `.warrant/memory.db`).
pub const LOCAL_STORE_KIND: &str = "warrant-local";
/// The store kind of Warrant's shared memory (`[memory.shared]`: this workspace's database or
/// PostgreSQL), written only through drafts a person publishes.
pub const SHARED_STORE_KIND: &str = "warrant-shared";
/// The profile's own `state` block, always available.
pub const STATE_STORE_KIND: &str = "oap-state";

/// `spec.memory.stores` onto Warrant's memory (L3-Y1). The two kinds Warrant has are attached
/// to its backends, as the installation configures them: a profile never says where a store
/// lives (a `uri` is refused, as a profile never brings a connection of its own). Each is
/// read-only unless both `spec.memory.mode` and the store's `mode` are `read_write`; `off`
/// attaches nothing. Any other kind (maggraph, vector, another harness's) is not available
/// here: a `required` one refuses the run (L1-I7), another is recorded as not attached.
/// `None` when the profile names no store but its own state.
fn attach_stores(
    spec: &Document,
    name: &str,
    adjustments: &mut Vec<Adjustment>,
) -> Result<Option<Vec<PinnedStore>>, OapError> {
    let listed: Vec<&Value> = at(spec, &["memory", "stores"])
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|s| s.get("kind").and_then(Value::as_str) != Some(STATE_STORE_KIND))
        .collect();
    if listed.is_empty() {
        return Ok(None);
    }
    let mode = at(spec, &["memory", "mode"])
        .and_then(Value::as_str)
        .unwrap_or("read_only");
    let mut attached: Vec<PinnedStore> = Vec::new();
    for store in listed {
        let s = |k: &str| store.get(k).and_then(Value::as_str).unwrap_or_default();
        let (n, kind) = (s("name"), s("kind"));
        let required = store.get("required") == Some(&Value::Bool(true));
        let store_mode = store
            .get("mode")
            .and_then(Value::as_str)
            .unwrap_or("read_only");
        let scope = match kind {
            LOCAL_STORE_KIND => Some(MemoryScope::Local),
            SHARED_STORE_KIND => Some(MemoryScope::Shared),
            _ => None,
        };
        let refusal = match scope {
            None => Some(format!(
                "Warrant has no `{kind}` store: its memory stores are `{LOCAL_STORE_KIND}` (this workspace's local memory) and `{SHARED_STORE_KIND}` (the installation's shared memory)"
            )),
            Some(_) if store.get("uri").is_some() => Some(format!(
                "a profile cannot say where Warrant's memory lives (uri `{}`): the installation's [memory] does",
                s("uri")
            )),
            Some(scope) if attached.iter().any(|a| a.scope == scope) => Some(format!(
                "another store of the profile is already attached to Warrant's {} memory",
                scope.as_str()
            )),
            Some(_) if mode == "off" || store_mode == "off" => {
                Some("spec.memory.mode or the store's mode is off".to_owned())
            }
            Some(_) => None,
        };
        if let Some(why) = refusal {
            if required {
                return Err(OapError::Required {
                    name: name.to_owned(),
                    what: format!("memory store `{n}` ({kind}): {why}"),
                });
            }
            adjustments.push(adjust(
                &format!("memory.stores.{n}"),
                kind,
                "not attached",
                &why,
            ));
            continue;
        }
        let Some(scope) = scope else { continue };
        let writable = mode == "read_write" && store_mode == "read_write";
        if !writable && store_mode == "read_write" {
            adjustments.push(adjust(
                &format!("memory.stores.{n}"),
                "read_write",
                "read_only",
                &format!("spec.memory.mode is {mode}"),
            ));
        }
        attached.push(PinnedStore {
            name: n.to_owned(),
            kind: kind.to_owned(),
            scope,
            writable,
            required,
        });
    }
    Ok(Some(attached))
}

/// A profile's `tools{allow,deny}` for one admitted MCP server, over the server's own tool
/// names.
#[derive(Clone, Debug, Default)]
struct ServerFilter {
    allow: Vec<String>,
    deny: Vec<String>,
}

/// `spec.tools.skills` against the skills usable here (L3-K1, L3-G2). A skill is attached
/// only when it is usable here under the installation's own rules (installed and approved
/// as it is, or a trusted project's) and, when the profile pins a `digest`, its files have
/// that digest. Nothing is installed: `source` is only shown. A `required` skill that cannot
/// be attached refuses the run (L1-I7); another is recorded as not loaded.
fn attach_skills(
    spec: &Document,
    name: &str,
    usable: &[SkillPin],
    adjustments: &mut Vec<Adjustment>,
) -> Result<Option<Vec<PinnedSkill>>, OapError> {
    let Some(listed) = at(spec, &["tools", "skills"]).and_then(Value::as_array) else {
        return Ok(None);
    };
    if listed.is_empty() {
        return Ok(None);
    }
    let mut attached = Vec::new();
    for skill in listed {
        let n = skill
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let required = skill.get("required") == Some(&Value::Bool(true));
        let pinned = skill.get("digest").and_then(Value::as_str);
        let source = skill.get("source").and_then(Value::as_str);
        match usable.iter().find(|p| p.name == n) {
            Some(p) if pinned.is_none_or(|d| d == p.digest) => {
                attached.push(PinnedSkill {
                    name: n.to_owned(),
                    digest: p.digest.clone(),
                });
            }
            Some(p) => {
                let pinned = pinned.unwrap_or_default().to_owned();
                if required {
                    return Err(OapError::SkillDigest {
                        name: name.to_owned(),
                        skill: n.to_owned(),
                        pinned,
                        found: p.digest.clone(),
                    });
                }
                adjustments.push(adjust(
                    &format!("tools.skills.{n}"),
                    &format!("load {pinned}"),
                    "not loaded",
                    &format!(
                        "W-OAP-018: the skill's files here have digest {}, not the one the profile pins",
                        p.digest
                    ),
                ));
            }
            None => {
                let why = match source {
                    Some(src) => format!(
                        "no usable skill `{n}` here (installed and approved, or in a trusted project); Warrant never installs one from a profile: a person runs `warrant skills install {src}`"
                    ),
                    None => format!(
                        "no usable skill `{n}` here (installed and approved, or in a trusted project); Warrant never installs one from a profile"
                    ),
                };
                if required {
                    return Err(OapError::Required {
                        name: name.to_owned(),
                        what: format!("skill `{n}` ({why})"),
                    });
                }
                adjustments.push(adjust(
                    &format!("tools.skills.{n}"),
                    "load",
                    "not loaded",
                    &why,
                ));
            }
        }
    }
    // Skills of the installation the profile does not name are not offered to its runs.
    for other in usable
        .iter()
        .filter(|u| !attached.iter().any(|a| a.name == u.name))
    {
        adjustments.push(adjust(
            &format!("skills.{}", other.name),
            "offered",
            "not offered",
            "the profile's spec.tools.skills does not name it",
        ));
    }
    Ok(Some(attached))
}

/// `spec.tools.mcp_servers` against the operator's `[mcp.servers.*]` (L3-M1, L3-M2). A
/// profile is a file anyone with write access can edit, so it never starts a process or
/// opens a connection of its own: a server it declares is admitted only when the
/// installation configures a server of the same name with the same transport and the same
/// command line (stdio) or URL (http). Admitted, it is that configured server (confined
/// under its subprocess profile, every call an `mcp.call` decided by policy, descriptions
/// withheld unless the operator vouched for them), narrowed by the profile's per-server
/// `tools{allow,deny}`; the profile's `env` and `headers` are not used (the operator's
/// configuration holds the server's secrets). A server not admitted is not launched, and
/// the refusal is recorded with its code (W-OAP-020).
fn admit_mcp(
    spec: &Document,
    configured: &BTreeMap<String, McpServerConfig>,
    adjustments: &mut Vec<Adjustment>,
) -> BTreeMap<String, ServerFilter> {
    let mut admitted = BTreeMap::new();
    for server in at(spec, &["tools", "mcp_servers"])
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let n = server
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let transport = server
            .get("transport")
            .and_then(Value::as_str)
            .unwrap_or("stdio");
        let asked = match transport {
            "http" => server
                .get("url")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            _ => {
                let mut argv = vec![
                    server
                        .get("command")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                ];
                argv.extend(strings(server.get("args")));
                argv.join(" ")
            }
        };
        let refusal = match configured.get(n) {
            None => Some(format!(
                "W-OAP-020: the installation configures no [mcp.servers.{n}]; a profile never starts a server of its own (an operator admits it by configuring it)"
            )),
            Some(c) => {
                let same = match transport {
                    "http" => c.url.as_deref() == Some(asked.as_str()),
                    _ => {
                        let mut argv = vec![
                            server
                                .get("command")
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .to_owned(),
                        ];
                        argv.extend(strings(server.get("args")));
                        c.command.as_ref() == Some(&argv)
                    }
                };
                (!same).then(|| {
                    let has = match (&c.command, &c.url) {
                        (Some(argv), _) => format!("stdio `{}`", argv.join(" ")),
                        (None, Some(url)) => format!("http {url}"),
                        (None, None) => "nothing".to_owned(),
                    };
                    format!(
                        "W-OAP-020: [mcp.servers.{n}] of the installation is {has}, not the profile's {transport} `{asked}`; a profile cannot change what a configured server runs"
                    )
                })
            }
        };
        if let Some(why) = refusal {
            adjustments.push(adjust(
                &format!("tools.mcp_servers.{n}"),
                &format!("launch {transport} `{asked}`"),
                "not launched",
                &why,
            ));
            continue;
        }
        let filter = obj(server.get("tools"));
        let has_secrets = ["env", "headers"]
            .iter()
            .any(|k| obj(server.get(*k)).is_some_and(|m| !m.is_empty()));
        if has_secrets {
            adjustments.push(adjust(
                &format!("tools.mcp_servers.{n}.env"),
                "the profile's env/headers",
                "the installation's",
                "the operator's [mcp.servers.*] holds a server's environment and credentials",
            ));
        }
        admitted.insert(
            n.to_owned(),
            ServerFilter {
                allow: strings(filter.and_then(|f| f.get("allow"))),
                deny: strings(filter.and_then(|f| f.get("deny"))),
            },
        );
    }
    admitted
}

/// The pin of `resolved` for a run in `workspace` offering `tools` with `model`.
pub fn pin(
    resolved: &Resolved,
    workspace: &Path,
    tools: &[String],
    model: &str,
    installation: &Installation,
) -> Result<(ProfilePin, RunLimits), OapError> {
    let spec = obj(resolved.effective.get("spec"))
        .cloned()
        .unwrap_or_default();
    let mut adjustments = Vec::new();
    unsupported(&spec, model, &mut adjustments);
    let skills = attach_skills(
        &spec,
        &resolved.name,
        &installation.skills,
        &mut adjustments,
    )?;
    let mcp = admit_mcp(&spec, &installation.mcp_servers, &mut adjustments);
    let stores = attach_stores(&spec, &resolved.name, &mut adjustments)?;
    let attached = skills.as_ref().is_some_and(|s| !s.is_empty());
    let (tool_map, aliases) = tool_ceilings(
        &spec,
        tools,
        attached,
        &mcp,
        stores.as_deref().unwrap_or_default(),
        &mut adjustments,
    );
    let families = families(&spec, &mut adjustments);
    let prompt = render_role(&resolved.effective).map_err(|message| OapError::Invalid {
        path: resolved.path.display().to_string(),
        kind: "AgentProfile".into(),
        findings: vec![crate::Finding {
            pointer: "/spec/role".into(),
            message,
        }],
    })?;
    let hosts = at(&spec, &["permissions", "allow_hosts"]).map(|v| strings(Some(v)));
    let runtime = obj(at(&spec, &["runtime"]));
    let num = |k: &str| runtime.and_then(|r| r.get(k)).and_then(Value::as_u64);
    let limits = RunLimits {
        max_turns: num("max_turns").map(|n| n.min(u64::from(u32::MAX)) as u32),
        max_tool_calls: num("max_tool_calls").map(|n| n.min(u64::from(u32::MAX)) as u32),
        timeout_seconds: num("timeout_seconds"),
        max_depth: at(&spec, &["runtime", "subagents", "max_depth"])
            .and_then(Value::as_u64)
            .map(|n| n.min(8) as u32),
        max_concurrent: at(&spec, &["runtime", "subagents", "max_concurrent"])
            .and_then(Value::as_u64)
            .map(|n| n.min(64) as u32),
        max_cost_usd: runtime
            .and_then(|r| r.get("max_cost_usd"))
            .and_then(Value::as_f64),
        ceiling: declared_ceiling(resolved)?,
    };
    Ok((
        ProfilePin {
            name: resolved.name.clone(),
            revision: resolved.revision,
            spec_digest: resolved.spec_digest.clone(),
            profile_digest: resolved.profile_digest.clone(),
            trust: resolved.trust.clone(),
            source: resolved.path.display().to_string(),
            prompt,
            state: render_state(&resolved.effective),
            tools: tool_map,
            aliases,
            families,
            rules: rules(&spec),
            paths: with_skill_dirs(paths(&spec, workspace), skills.as_deref(), installation),
            allow_hosts: hosts,
            memory_scopes: at(&spec, &["memory", "scopes"]).map(|v| strings(Some(v))),
            memory_stores: stores,
            adjustments,
            skills,
        },
        limits,
    ))
}
