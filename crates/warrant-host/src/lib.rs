//! The application layer: every front end (the `warrant` binary today; the MCP server, the web
//! page and chat gateways next) opens an installation here and calls the same typed operations.
//! The controls a run depends on are wired here and only here ([`Host::with_ring`],
//! [`Host::tools`]): the governed decision point, result redaction, the prompt guard, budgets and
//! audit delivery, so a second front end cannot assemble a ring without them. Nothing here
//! writes to a terminal: operations return typed views (`Serialize`) and tell the person what
//! goes on through [`Notices`].

pub mod aais;
pub mod agent_profiles;
pub mod approvals;
pub mod approver_key;
pub mod artifacts;
pub mod bundle;
pub mod capabilities;
pub mod catalog;
pub mod ceilings;
pub mod chat;
pub mod confidential;
pub mod config_check;
pub mod controls;
pub mod credentials;
pub mod delegation;
pub mod doctor;
pub mod drive;
pub mod envelope;
mod error;
pub mod explain;
pub mod fault;
pub mod get_started;
pub mod graph;
pub mod identity;
pub mod init;
pub mod install;
pub mod layers;
pub mod mcp;
pub mod memory;
pub mod narrate;
mod notice;
pub mod origin;
pub mod providers;
pub mod records;
pub mod request_views;
pub mod requests;
pub mod runs;
pub mod serve;
pub mod setup;
pub mod skills;
pub mod spawn;
pub mod strict;
pub mod touched;
pub mod verify;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use warrant_core::config::{ResolvedIdentity, Settings};
use warrant_core::{Clock, Digest, SystemClock, digest_of};
use warrant_kernel::{
    DecisionPoint, NewRunSpec, Observer, Ring, RingParts, RunSettings, ToolEnv, ToolRegistry as _,
};
use warrant_llm::{
    AnthropicProvider, ModelProvider, ModelSpec, OpenAiProvider, ScriptedProvider,
    anthropic_settings_from, ollama_settings_from, openai_settings_from,
};
use warrant_policy::PolicyEngine;
use warrant_tools::{Builtin, ToolSource, Toolbox};

pub use error::{Class, Hint, HostError, Result};
pub use install::{Installation, Paths};
pub use notice::{Notice, Notices, Quiet};

/// Where the installation is: the workspace (or the nearest one upward from the current
/// directory) and, when given, the store instead of the configured one.
#[derive(Clone, Debug, Default)]
pub struct Where {
    pub workspace: Option<PathBuf>,
    pub store: Option<String>,
    /// The managed configuration directory, instead of `$WARRANT_MANAGED_DIR` or `/etc/warrant`.
    pub managed_dir: Option<PathBuf>,
    /// The user configuration directory, instead of `$XDG_CONFIG_HOME/warrant` or
    /// `~/.config/warrant` (it holds the person's approver key).
    pub user_dir: Option<PathBuf>,
}

impl Where {
    pub fn workspace(&self) -> Option<&Path> {
        self.workspace.as_deref()
    }
}

/// An opened installation: its configuration layers resolved, the identity of this process,
/// the policy, the approval rules and the store with its keys and sinks.
pub struct Host {
    pub paths: Paths,
    pub identity: ResolvedIdentity,
    pub settings: Settings,
    pub policy: PolicyEngine,
    pub inst: Installation,
    /// `[requests]` expiry per kind, checked at open.
    pub request_ttls: warrant_kernel::RequestTtls,
    pub rules: warrant_kernel::ApprovalRules,
    /// How the journal keeps secrets out of the store: sealed under the installation's key.
    confidential: Box<dyn warrant_kernel::Confidential + Send + Sync>,
    /// The installation's redactor, built once (results, replies, sealing).
    redactor: Arc<warrant_secrets::Redactor>,
    /// The delegation the runs this host starts act under ([`Host::act_under`]).
    delegation: Option<Box<warrant_kernel::DelegationSettings>>,
    /// Tool sources beyond the built-in set ([`Host::with_source`]), composed after it.
    sources: Vec<Arc<dyn ToolSource + Send + Sync>>,
    /// The workspace's memory (`.warrant/memory.db`), opened on first use.
    memory: Arc<warrant_memory::MemoryStore>,
    /// The configured MCP servers (also among `sources`), started when the catalogue is first
    /// built and stopped with the host.
    mcp: Option<Arc<warrant_mcp::McpSource>>,
    /// The configured data catalogs (also among `sources`).
    catalogs: Option<Arc<warrant_catalog::Catalogs>>,
    /// Where shared memory lives (`[memory.shared] backend`): `memory`, or PostgreSQL.
    shared: Arc<dyn warrant_memory::SharedStore>,
    /// Where published shared memory is appended besides the store (`[memory.shared]`).
    shared_sink: Option<Arc<dyn warrant_memory::SharedSink>>,
    /// The front end this process's person answers through ([`Host::through`]): recorded with
    /// every answer and reply (`via`), never a widening of who may answer.
    front: origin::Front,
}

impl Drop for Host {
    /// A contained command's launcher tells its end before its exit tears the view down, and
    /// the command's copy-on-write layer goes once that is done: wait for it, so a process
    /// leaves nothing behind (`warrant_exec::spawn::settle`).
    fn drop(&mut self) {
        warrant_exec::spawn::settle();
    }
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("workspace", &self.paths.workspace)
            .field("store", &self.inst.store_location)
            .finish_non_exhaustive()
    }
}

/// Lowers the calling thread's priority (nice 10) for work done ahead that nothing waits for
/// yet (the prewarm threads of [`Host::open`]): where the start has more threads than the
/// machine has cores, the main thread and the policy thread it joins get the cores first, and
/// the prewarm takes what they leave. A thread that later waits for prewarmed work lends it
/// its core by waiting.
fn behind_the_start() {
    #[cfg(target_os = "linux")]
    let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), 10);
}

impl Host {
    /// Opens the installation at `at`: every file is read and checked before anything runs.
    pub fn open(at: &Where, notices: Arc<dyn Notices + Send>) -> Result<Host> {
        let paths = install::paths(at, false)?;
        // The policy set is read, parsed and checked on a second thread while this one reads
        // the layers (its errors still come after theirs: it is joined where it was loaded).
        let policy_paths = paths.clone();
        let policy = std::thread::Builder::new()
            .name("policy".into())
            .spawn(move || install::policy(&policy_paths));
        let layers = install::read_layers(&paths)?;
        let identity = install::identity(&layers)?;
        let settings = install::settings(&layers)?;
        warrant_kernel::ModelRules {
            budgets: settings.budgets.clone(),
            prices: settings.prices.clone(),
        }
        .validate()
        .map_err(|e| HostError::bad_input(&e))?;
        let rules = install::approval_rules(&paths, &layers)?;
        // What every ring needs and no file changes, built on this thread's core while it
        // waits for the policy set: the Cedar schema (a set whose validation is remembered
        // loads without it; the first decision needs it) and the prompt guard's patterns.
        // Nothing waits for them here.
        let _ = std::thread::Builder::new()
            .name("prewarm".into())
            .spawn(|| {
                behind_the_start();
                warrant_policy::PolicyEngine::prewarm_schema();
                warrant_llm::untrusted::prewarm();
            });
        // The store, keys and redactor are opened while the policy thread parses (on two cores
        // the parse is the longer of the two); the set is joined once this thread has nothing
        // else to do, so a bad policy is still refused before anything runs.
        let inst = install::installation_as(&paths, &settings, &identity, Arc::clone(&notices))?;
        let request_ttls = install::ttls(&settings.requests)?;
        let redactor = Arc::new(controls::redactor(&paths, &settings)?);
        let policy = match policy {
            Ok(thread) => thread
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?,
            // No thread to be had: load it here.
            Err(_) => install::policy(&paths)?,
        }
        .with_directory(rules.directory.clone(), rules.team.clone());
        for warning in policy.warnings() {
            notices.notice(Notice::PolicyWarning {
                text: warning.to_string(),
            });
        }
        // The scanner's rules and prefilter too, on the same terms (the first tool result or
        // sealed journal entry would build them), once the policy thread is done with its core.
        let scanner = redactor.scanner().clone();
        let _ = std::thread::Builder::new()
            .name("prewarm-scanner".into())
            .spawn(move || {
                behind_the_start();
                scanner.prewarm();
            });
        let confidential = controls::journal_seal(&redactor, &inst.secret);
        let memory = Arc::new(warrant_memory::MemoryStore::at(
            &paths.dot.join(memory::MEMORY_DB),
        ));
        let mcp = mcp::source(&paths, &settings)?;
        let mut sources: Vec<Arc<dyn ToolSource + Send + Sync>> = Vec::new();
        let references = catalog::references(&paths, &inst.secret);
        let catalogs = catalog::source(&settings, &references)?;
        let shared_sink = catalog::shared_sink(&settings, &references)?;
        let shared = memory::shared_store(&paths, &settings, &memory)?;
        if let Some(c) = &catalogs {
            sources.push(Arc::clone(c) as Arc<dyn ToolSource + Send + Sync>);
        }
        Ok(Host {
            paths,
            identity,
            settings,
            policy,
            inst,
            request_ttls,
            rules,
            confidential,
            redactor,
            sources,
            memory,
            mcp,
            catalogs,
            shared,
            shared_sink,
            front: origin::Front::Cli,
            delegation: None,
        })
    }

    /// The same host, its person answering through `front` (the web interface records its
    /// answers and replies as `via: web`). A process a run started is still refused whatever
    /// the front: [`origin::via`] looks at this process, not at what it claims.
    pub fn through(mut self, front: origin::Front) -> Self {
        self.front = front;
        self
    }

    /// Makes the runs this host starts act under delegation `token`: it must verify for this
    /// process's principal now (installation keys, store revocations), and from then on each
    /// effect must also be within it, checked by the ring before the effect.
    pub fn act_under(&mut self, token: &str) -> Result<()> {
        let p = &self.identity.principal;
        let me = format!("{}@{}", p.actor, p.tenant);
        let revoked = warrant_kernel::delegation::Revocations::new(
            self.inst
                .store
                .revoked_delegations()
                .map_err(|e| HostError::failed(&e))?,
        );
        let verified = warrant_kernel::delegation::verify(
            token,
            &self.inst.public_keys,
            &me,
            SystemClock.now(),
            &revoked,
        )
        .map_err(|e| HostError::bad_input(&e))?;
        self.delegation = Some(Box::new(warrant_kernel::DelegationSettings {
            digest: verified.digest,
            grant: verified.grant,
            above: Vec::new(),
        }));
        Ok(())
    }

    /// Adds a source of tools (an MCP server, memory, a catalog, …) to every run this host
    /// drives. Its tools are offered, menu-checked, governed by the ring and redacted like the
    /// built-in ones; a name that clashes with another tool fails [`Host::tools`].
    pub fn with_source(mut self, source: Arc<dyn ToolSource + Send + Sync>) -> Self {
        self.sources.push(source);
        self
    }

    /// The read operations over this installation.
    pub fn records(&self) -> records::Records<'_> {
        records::Records {
            paths: &self.paths,
            inst: &self.inst,
        }
    }

    /// The run's tools: the built-in set and every added source in one [`Toolbox`], behind the
    /// configured menu, every result through the redactor. The only way a front end gets the
    /// tools a ring runs.
    ///
    /// This is what starts the configured MCP servers (the first time): call it only for an
    /// operation that offers the catalogue to a model or runs a call; an operation that only
    /// records takes [`Host::own_tools`].
    pub fn tools(&self) -> Result<Toolbox> {
        let tools = self.toolbox(&self.settings, true);
        if let Some(mcp) = &self.mcp {
            mcp::tell_failures(mcp, self.inst.notices.as_ref());
        }
        tools
    }

    /// Warrant's own tools: everything [`Host::tools`] has but the configured MCP servers, so
    /// the operation never starts one. For operations that only record facts in a run
    /// (approve, deny, reply, cancel, resolve, load: their ring decides, records and audits,
    /// and never offers the catalogue nor runs a call) and for `mcp serve`, which exports
    /// Warrant's own tools and never re-exports a server's.
    pub fn own_tools(&self) -> Result<Toolbox> {
        self.toolbox(&self.settings, false)
    }

    /// The tools of a subagent: [`Host::tools`] narrowed to `offered` (its parent's tools or
    /// fewer), as a menu of its own.
    pub fn tools_offering(&self, offered: &[String]) -> Result<Toolbox> {
        let mut settings = self.settings.clone();
        settings.menus.insert(
            spawn::SUBAGENT_MENU.to_owned(),
            warrant_core::config::MenuConfig {
                tools: offered.to_vec(),
                ceiling: None,
            },
        );
        settings.menu = Some(spawn::SUBAGENT_MENU.to_owned());
        self.toolbox(&settings, true)
    }

    fn toolbox(&self, settings: &Settings, with_mcp: bool) -> Result<Toolbox> {
        let memory = self.memory_tools();
        let artifacts = self.artifact_tools();
        let mut sources: Vec<&dyn ToolSource> = vec![&Builtin, &memory, &artifacts];
        // `activate_skill` only for a run that has skills to activate (the client guide's rule).
        let skill_tools = skills::SkillTools(self.skill_pins());
        if !skill_tools.0.is_empty() {
            sources.push(&skill_tools);
        }
        if with_mcp && let Some(mcp) = &self.mcp {
            sources.push(mcp.as_ref() as &dyn ToolSource);
        }
        sources.extend(self.sources.iter().map(|s| s.as_ref() as &dyn ToolSource));
        controls::tools(settings, &sources, controls::redacting(&self.redactor))
    }

    /// Builds the ring for one operation, with the governed decision point (Cedar, then the
    /// `[risk.*]` rules and the identity directory), the installation's store, sealer, keys and
    /// clock, the run's `tools` (from [`Host::tools`]: menu and redaction), the configured
    /// budgets and the prompt guard's switches, and hands it to `f`. This is the one place that
    /// names a ring's parts outside the kernel (a test of this crate fails if a second one
    /// appears).
    pub fn with_ring<R>(
        &self,
        tools: &Toolbox,
        observer: &dyn Observer,
        f: impl FnOnce(&Ring<'_>) -> R,
    ) -> R {
        let budgets = self.model_rules();
        // Reads of the installed skills that still match their approval are
        // `resource.in_installed_skill` (checked now, once per ring).
        let base = warrant_kernel::pdp::SkillAwarePdp {
            engine: &self.policy,
            installed_skills: self.verified_skill_dirs(),
        };
        let pdp = warrant_kernel::Governed {
            inner: &base,
            rules: self.rules.clone(),
        };
        // Subagents are started by this host, each under a ring of its own built here.
        let spawner = spawn::HostSpawner {
            host: self,
            observer,
        };
        let ring = Ring::new(RingParts {
            store: self.inst.store.as_ref(),
            sealer: &self.inst.sealer,
            pdp: &pdp as &dyn DecisionPoint,
            ids: self.inst.ids.as_ref(),
            clock: &SystemClock,
            secret: &self.inst.secret,
            observer,
            keys: &self.inst.public_keys,
            confidential: self.confidential.as_ref(),
            tools,
            budgets: &budgets,
            guard: controls::guard_settings(),
            spawner: Some(&spawner),
        });
        f(&ring)
    }

    /// The model a run talks to, from its spec (`scripted:PATH`, `openai:MODEL`, …). A
    /// transcript is checked whole, against every tool, before anything starts.
    pub fn provider(&self, spec: &str, tools: &Toolbox) -> Result<Box<dyn ModelProvider>> {
        let spec = ModelSpec::parse(spec).map_err(|e| HostError::bad_input(&e))?;
        match spec {
            ModelSpec::Scripted { path } => {
                // A subagent's model is its transcript's child (`PATH#0.1`).
                let text = path.to_string_lossy().into_owned();
                let (file, child) = spawn::split_child(&text);
                let path = std::path::PathBuf::from(file);
                let path = if path.is_absolute() {
                    path
                } else {
                    std::env::current_dir()
                        .map(|d| d.join(&path))
                        .unwrap_or(path)
                };
                let mut p = ScriptedProvider::load(&path).map_err(|e| HostError::bad_input(&e))?;
                if let Some(child) = child {
                    let at: Vec<usize> = child.split('.').filter_map(|i| i.parse().ok()).collect();
                    let script = p.transcript().child(&at).cloned().ok_or_else(|| {
                        HostError::usage(
                            "W-SPAWN-006",
                            format!(
                                "transcript {} has no subagent transcript {child} (`children` of the transcript, in the order of the run's spawn_agent calls)",
                                path.display()
                            ),
                        )
                    })?;
                    p = ScriptedProvider::new(script, format!("{}#{child}", path.display()))
                        .with_call_prefix(format!("sub{}-", child.replace('.', "-")));
                }
                // Against every tool: a call off the run's menu is refused at run time, recorded.
                p.transcript()
                    .validate(&tools.catalogue_specs())
                    .map_err(|e| HostError::bad_input(&e))?;
                Ok(Box::new(p))
            }
            ModelSpec::OpenAi { model } => {
                let env = credentials::reference_env(&self.paths)?;
                let settings = openai_settings_from(&self.settings.openai, &env, &model)
                    .map_err(|e| HostError::bad_input(&e))?;
                Ok(Box::new(OpenAiProvider::new(settings)))
            }
            ModelSpec::Ollama { model } => {
                let env = std::env::vars().collect();
                Ok(Box::new(OpenAiProvider::new(ollama_settings_from(
                    &self.settings.ollama,
                    &env,
                    &model,
                ))))
            }
            ModelSpec::Anthropic { model } => {
                let env = credentials::reference_env(&self.paths)?;
                let settings = anthropic_settings_from(&self.settings.anthropic, &env, &model)
                    .map_err(|e| HostError::bad_input(&e))?;
                Ok(Box::new(AnthropicProvider::new(settings)))
            }
        }
    }

    /// The installation's redactor (the scanner's rules and the secrets it knows).
    pub fn redactor(&self) -> &warrant_secrets::Redactor {
        &self.redactor
    }

    /// Budgets and prices for model calls, as configured now.
    pub fn model_rules(&self) -> warrant_kernel::ModelRules {
        let mut budgets = self.settings.budgets.clone();
        // Strict mode's token budget for a run, when none is configured (see `strict`).
        if self.settings.strict && budgets.run.tokens.is_none() {
            budgets.run.tokens = Some(strict::StrictDefaults::RUN_TOKENS);
        }
        warrant_kernel::ModelRules {
            budgets,
            prices: self.settings.prices.clone(),
        }
    }

    /// What tools execute against: the workspace, the profiles, this process's environment
    /// (minimized per profile by the executor) and the vault for provided secrets.
    pub fn tool_env(&self) -> Result<ToolEnv> {
        Ok(ToolEnv {
            workspace: self.paths.workspace_canonical()?,
            profiles: self.settings.profiles.clone(),
            parent_env: install::parent_env(),
            secrets: install::secret_source(&self.paths, &self.inst.secret, &self.settings)?,
            no_overlays: controls::disabled("overlay"),
            run: None,
            tests: self.settings.tests.clone(),
            web: self.settings.web.clone(),
            web_addresses_unguarded: controls::disabled("web-address"),
            web_loopback_allowed: controls::disabled("web-loopback"),
            menus: self.settings.menus.clone(),
            spawn_unnarrowed: controls::disabled("spawn-narrowing"),
            ceiling_unchecked: controls::disabled("static-ceiling"),
            delegation_late: controls::disabled("delegation-first"),
        })
    }

    /// The digests a run started now would be pinned to: the policy set and the subprocess
    /// profiles. A front end compares them with a run's `run_started` to say what changed.
    pub fn pins(&self) -> Pins {
        Pins {
            policy_digest: Some(self.policy.digest().clone()),
            profiles_digest: digest_of(&self.settings.profiles).ok(),
        }
    }

    /// Delivers new audit records to every sink after an operation (failures become notices).
    pub fn deliver(&self) {
        install::deliver(&self.inst);
    }

    /// The standing in the identity directory of the person a run started here acts for (the
    /// agent's person, or the user themself), recorded in the run: losing it stops the run.
    pub(crate) fn person_standing(&self) -> Option<Box<warrant_core::directory::Standing>> {
        let p = &self.identity.principal;
        let person = match (p.kind, &p.on_behalf_of) {
            (warrant_core::PrincipalKind::Agent, Some(person)) => person.as_str(),
            (warrant_core::PrincipalKind::Agent, None) => return None,
            (warrant_core::PrincipalKind::User | warrant_core::PrincipalKind::Service, _) => {
                p.actor.as_str()
            }
        };
        self.policy.standing(person).map(Box::new)
    }

    /// The worst risk class a run started here may reach: the tighter of `[run] ceiling` and
    /// the ceiling of the menu in force.
    pub(crate) fn run_ceiling(&self) -> Option<warrant_core::RiskClass> {
        ceilings::ceiling_of(&self.settings)
    }

    pub(crate) fn new_run_spec(
        &self,
        tools: &Toolbox,
        env: &ToolEnv,
        model: &str,
        task: String,
        deadline: Option<warrant_core::Timestamp>,
        queued: bool,
    ) -> NewRunSpec {
        let specs = tools.specs();
        NewRunSpec {
            queued,
            principal: self.identity.principal.clone(),
            task,
            model: model.to_owned(),
            workspace: env.workspace.clone(),
            settings: RunSettings {
                agent_profile: None,
                delegation: self.delegation.clone(),
                graph: None,
                max_denials: self.settings.max_denials,
                max_turns: self.settings.max_turns,
                deadline: deadline.or_else(|| {
                    self.settings
                        .strict
                        .then(|| deadline_after(strict::StrictDefaults::DEADLINE))
                        .flatten()
                }),
                requests: Box::new(self.request_ttls),
                max_tool_calls: self.settings.max_tool_calls,
                session: None,
                spawn: Some(Box::new(warrant_kernel::SpawnSettings {
                    parent: None,
                    depth: 0,
                    max_depth: self.settings.max_depth,
                    max_children: self.settings.max_children,
                    max_concurrent: None,
                    profile: None,
                    budget: None,
                    sampling: None,
                })),
                standing: self.person_standing(),
                rate: (!self.settings.rate.is_empty())
                    .then(|| Box::new(self.settings.rate.clone())),
                ceiling: self.run_ceiling(),
                strict: self.settings.strict,
                skills: if specs.iter().any(|s| s.name == warrant_skills::tool::TOOL) {
                    self.skill_pins()
                } else {
                    Vec::new()
                },
            },
            tools: specs.iter().map(|s| s.name.clone()).collect(),
            tools_digest: digest_of(&specs).ok(),
            profiles_digest: digest_of(&self.settings.profiles).ok(),
        }
    }
}

/// The policy and profiles digests a run is pinned to (see [`Host::pins`]).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Pins {
    pub policy_digest: Option<Digest>,
    pub profiles_digest: Option<Digest>,
}

/// The digest of the tools a run offers, as its first event recorded it.
fn tools_digest(tools: &Toolbox) -> Result<Digest> {
    digest_of(&tools.specs()).map_err(|e| HostError::usage("W-KERNEL-001", e.to_string()))
}

/// A deadline `after` from now.
pub fn deadline_after(after: std::time::Duration) -> Option<warrant_core::Timestamp> {
    warrant_core::Timestamp::from_millis(SystemClock.now().millis() + after.as_millis() as i64)
}
