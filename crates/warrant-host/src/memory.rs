//! Memory for front ends: the agent's memory tools (a source of every run's toolbox), what a
//! person reads of memory, and what a person does to it: forget a local entry, publish or
//! reject a draft for shared memory. A person's operation goes through the ring like an
//! agent's call: it is a run of its own whose principal is the person and whose one turn is
//! their command (model `person:cli`), so policy decides it, the journal and the audit trail
//! record it, and a refusal is a typed, audited event. A process a Warrant run started never
//! performs one (it cannot pass for a person).

use std::sync::Arc;

use serde_json::{Value, json};
use warrant_core::{MemoryScope, RunId};
use warrant_kernel::{CallRecord, CallResult, CallStep, Prompter};
use warrant_memory::{
    Draft, Entry, Found, Memory, MemoryError, PgShared, PublishTool, RetractTool, SharedStore,
    bound_query,
};
use warrant_tools::{Controls, ToolSource, Toolbox};

use crate::install::Paths;
use crate::{Host, HostError, Result, controls, origin};

/// The memory database, beside the store in `.warrant/`.
pub const MEMORY_DB: &str = "memory.db";

/// The model name a person's own operation is journaled under.
pub const PERSON_MODEL: &str = "person:cli";

fn memory_error(e: &MemoryError) -> HostError {
    match e {
        MemoryError::Open { .. } | MemoryError::Sql(_) | MemoryError::Shared(_) => {
            HostError::failed(e)
        }
        MemoryError::UnknownEntry(_)
        | MemoryError::UnknownDraft(_)
        | MemoryError::DraftDecided { .. }
        | MemoryError::DraftChanged { .. }
        | MemoryError::Invalid(_) => HostError::bad_input(e),
    }
}

/// What a person's operation came to (its `--json` form: the run, then the tool's result).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PersonOp {
    /// The run that records it.
    pub run: RunId,
    /// The tool's result.
    pub result: Value,
}

/// The tools only a person's operation is given.
struct PersonTools(
    Arc<dyn SharedStore>,
    Option<Arc<dyn warrant_memory::SharedSink>>,
);

impl ToolSource for PersonTools {
    fn name(&self) -> &str {
        "person"
    }

    fn tools(&self) -> Vec<Box<dyn warrant_kernel::Tool>> {
        vec![
            Box::new(PublishTool::new(Arc::clone(&self.0)).with_sink(self.1.clone())),
            Box::new(RetractTool::new(Arc::clone(&self.0))),
        ]
    }
}

/// Where shared memory lives (`[memory.shared] backend`): PostgreSQL for `"postgres"` (at
/// `url`, else the installation's PostgreSQL store; `password` a reference, else the store's),
/// this workspace's memory database otherwise. Nothing connects until shared memory is used.
pub(crate) fn shared_store(
    paths: &Paths,
    settings: &warrant_core::config::Settings,
    local: &Arc<warrant_memory::MemoryStore>,
) -> Result<Arc<dyn SharedStore>> {
    let Some(shared) = settings
        .shared_memory
        .as_ref()
        .filter(|s| s.backend == "postgres")
    else {
        return Ok(Arc::clone(local) as Arc<dyn SharedStore>);
    };
    let bad = |m: String| HostError::usage("W-MEMORY-017", format!("[memory.shared] {m}"));
    let store = paths
        .store_override
        .clone()
        .or_else(|| settings.store_url.clone())
        .filter(|l| warrant_store::is_postgres_url(l));
    let (url, reference) = match (&shared.url, store) {
        (Some(url), _) if warrant_store::is_postgres_url(url) => (url.clone(), &shared.password),
        (Some(url), _) => {
            return Err(bad(format!(
                "url = {:?} is not a postgres:// or postgresql:// URL",
                warrant_store::redact_location(url)
            )));
        }
        (None, Some(store)) => (
            store,
            if shared.password.is_some() {
                &shared.password
            } else {
                &settings.store_password
            },
        ),
        (None, None) => {
            return Err(bad(
                "backend = \"postgres\" needs url = \"postgres://…\", or a PostgreSQL [store] to share"
                    .to_owned(),
            ));
        }
    };
    let password = match reference {
        None => None,
        Some(reference) => {
            let env = crate::credentials::reference_env(paths)?;
            let key = warrant_llm::secret::resolve_key(
                "[memory.shared] password",
                Some(reference),
                "",
                &env,
            )
            .map_err(|e| HostError::bad_input(&e))?;
            Some(key.value.ok_or_else(|| {
                bad(format!(
                    "password refers to {}, which is unset or empty",
                    key.source
                ))
            })?)
        }
    };
    let pg = PgShared::new(
        &url,
        password.as_deref(),
        !controls::disabled("memory-tenant"),
    )
    .map_err(|e| bad(e.to_string()))?;
    Ok(Arc::new(pg))
}

impl Host {
    /// The agent's memory tools (`remember`, `recall`, `forget`, `propose_memory`): every
    /// write screened by the installation's scanner (off only for a debug build's negative
    /// control, `WARRANT_TEST_DISABLE=memory-scan`).
    pub fn memory_tools(&self) -> Memory {
        let screen = (!controls::disabled("memory-scan")).then(|| Arc::clone(&self.redactor));
        Memory::new(Arc::clone(&self.memory), screen).with_shared(Arc::clone(&self.shared))
    }

    /// The tenant this process's person reads and reviews shared memory as.
    fn tenant(&self) -> &str {
        &self.identity.principal.tenant
    }

    /// Where shared memory lives: `local` or `postgres`.
    pub fn shared_memory_backend(&self) -> &'static str {
        self.shared.backend()
    }

    /// The newest entries, optionally of one namespace (`local/NAME`, `shared/NAME`).
    pub fn memory_list(&self, namespace: Option<&str>, limit: u32) -> Result<Vec<Entry>> {
        let separate = self.shared.backend() != "local";
        let (scope, name) = match namespace {
            Some(ns) => {
                let (scope, name) = parse_namespace(ns)?;
                (Some(scope), Some(name))
            }
            None => (None, None),
        };
        if separate && scope == Some(MemoryScope::Shared) {
            return self
                .shared
                .entries(self.tenant(), name.as_deref(), limit)
                .map_err(|e| memory_error(&e));
        }
        let mut entries = self
            .memory
            .list(scope, name.as_deref(), limit)
            .map_err(|e| memory_error(&e))?;
        if separate && scope.is_none() {
            entries.extend(
                self.shared
                    .entries(self.tenant(), None, limit)
                    .map_err(|e| memory_error(&e))?,
            );
            entries.sort_by(|a, b| b.provenance.at.cmp(&a.provenance.at));
            entries.truncate(limit as usize);
        }
        Ok(entries)
    }

    /// Entries matching `query` in a namespace (default `local/notes`), best first.
    pub fn memory_search(
        &self,
        query: &str,
        namespace: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Found>> {
        let (scope, name) = parse_namespace(namespace.unwrap_or("local/notes"))?;
        let terms = bound_query(query).map_err(|e| memory_error(&e))?;
        match scope {
            MemoryScope::Shared => self.shared.recall(self.tenant(), &name, &terms, limit),
            MemoryScope::Local => self.memory.recall(scope, &name, &terms, limit),
        }
        .map_err(|e| memory_error(&e))
    }

    /// One entry.
    pub fn memory_show(&self, id: &str) -> Result<Entry> {
        let local = self.memory.get(id).map_err(|e| memory_error(&e))?;
        match local {
            Some(e) => Some(e),
            None => self
                .shared
                .entry(self.tenant(), id)
                .map_err(|e| memory_error(&e))?,
        }
        .ok_or_else(|| memory_error(&MemoryError::UnknownEntry(id.to_owned())))
    }

    /// Drafts for shared memory, newest first; only open ones unless `all`.
    pub fn memory_drafts(&self, all: bool) -> Result<Vec<Draft>> {
        self.shared
            .drafts(self.tenant(), all)
            .map_err(|e| memory_error(&e))
    }

    /// One draft, with the digest a review binds to.
    pub fn memory_draft(&self, id: &str) -> Result<Draft> {
        self.shared
            .draft(self.tenant(), id)
            .map_err(|e| memory_error(&e))?
            .ok_or_else(|| memory_error(&MemoryError::UnknownDraft(id.to_owned())))
    }

    /// A person forgets a local entry, through the ring.
    pub fn memory_forget(&self, id: &str, prompter: &mut dyn Prompter) -> Result<PersonOp> {
        self.person_op(
            format!("forget memory entry {id}"),
            "forget",
            json!({ "id": id }),
            prompter,
        )
    }

    /// A person publishes (or rejects) the draft `id` as they reviewed it (`digest`, from
    /// [`Host::memory_draft`]), through the ring: policy decides `memory.publish` for them, and
    /// the draft must say exactly what they saw. Never its proposer, never an agent.
    pub fn memory_review(
        &self,
        id: &str,
        digest: &str,
        publish: bool,
        reason: &str,
        prompter: &mut dyn Prompter,
    ) -> Result<PersonOp> {
        let verb = if publish { "publish" } else { "reject" };
        self.person_op(
            format!("{verb} memory draft {id}"),
            PublishTool::NAME,
            json!({ "draft": id, "digest": digest, "publish": publish, "reason": reason }),
            prompter,
        )
    }

    /// A person withdraws a published entry of shared memory, with their reason, through the
    /// ring (`memory.delete` on its shared namespace): kept, marked, no longer recalled.
    pub fn memory_retract(
        &self,
        id: &str,
        reason: &str,
        prompter: &mut dyn Prompter,
    ) -> Result<PersonOp> {
        self.person_op(
            format!("withdraw shared memory entry {id}"),
            RetractTool::NAME,
            json!({ "entry": id, "reason": reason }),
            prompter,
        )
    }

    /// One call of a person's, through the ring, in a run of its own that ends with it.
    pub(crate) fn person_op(
        &self,
        task: String,
        tool: &str,
        args: Value,
        prompter: &mut dyn Prompter,
    ) -> Result<PersonOp> {
        if let warrant_kernel::Via::Command(evidence) = origin::via() {
            return Err(HostError::usage(
                "W-MEMORY-013",
                format!(
                    "this process was started by a Warrant run ({evidence}); only a person performs this operation from here"
                ),
            ));
        }
        let memory = self.memory_tools();
        let person = PersonTools(Arc::clone(&self.shared), self.shared_sink.clone());
        let mut sources: Vec<&dyn ToolSource> = vec![&memory, &person];
        if let Some(c) = &self.catalogs {
            sources.push(c.as_ref());
        }
        let tools = Toolbox::new(
            &sources,
            Controls {
                menu: None,
                menus: &self.settings.menus,
                redactor: controls::redacting(&self.redactor),
            },
        )
        .map_err(|e| HostError::usage("W-TOOL-006", e.to_string()))?;
        let env = self.tool_env()?;
        let outcome = self.with_ring(&tools, &warrant_kernel::Silent, |ring| {
            let mut state = ring
                .start(self.new_run_spec(&tools, &env, PERSON_MODEL, task, None, false))
                .map_err(|e| HostError::failed(&e))?;
            let call = CallRecord {
                id: "person-1".to_owned(),
                tool: tool.to_owned(),
                args,
            };
            ring.record_model_response(
                &mut state,
                None,
                None,
                vec![call],
                None,
                PERSON_MODEL.to_owned(),
            )
            .map_err(|e| HostError::failed(&e))?;
            let step = ring
                .process_call(&mut state, "person-1", &env, prompter)
                .map_err(|e| HostError::failed(&e))?;
            let result = state.call("person-1").and_then(|c| c.result.clone());
            let outcome = match (&step, &result) {
                (CallStep::Done, Some(CallResult::Completed { ok: true, .. })) => {
                    warrant_kernel::Outcome::Completed
                }
                _ => warrant_kernel::Outcome::Failed {
                    code: "W-MEMORY-015".to_owned(),
                    message: "the operation was refused or failed".to_owned(),
                },
            };
            if let CallStep::Parked(request) = &step {
                // A person's own operation does not wait for another: the run ends, and its
                // request with it.
                ring.end(
                    &mut state,
                    warrant_kernel::Outcome::Stopped {
                        reason: format!("policy asks a person before this operation (request {request}); a person's own operation does not wait"),
                    },
                )
                .map_err(|e| HostError::failed(&e))?;
            } else {
                ring.end(&mut state, outcome)
                    .map_err(|e| HostError::failed(&e))?;
            }
            Ok::<_, HostError>((state.run.clone(), step, result))
        });
        self.deliver();
        let (run, step, result) = outcome?;
        match (step, result) {
            (CallStep::Done, Some(CallResult::Completed { ok: true, result })) => {
                Ok(PersonOp { run, result })
            }
            (CallStep::Done, Some(CallResult::Completed { ok: false, result })) => {
                let code = result
                    .get("code")
                    .and_then(Value::as_str)
                    .unwrap_or("W-MEMORY-002")
                    .to_owned();
                let message = result
                    .get("error")
                    .and_then(Value::as_str)
                    .map_or_else(|| result.to_string(), str::to_owned);
                Err(HostError::usage(
                    &code,
                    format!("{message} (recorded in run {run})"),
                ))
            }
            (CallStep::Done, Some(CallResult::Refused { code, message })) => Err(HostError::usage(
                &code,
                format!("{message} (recorded in run {run})"),
            )),
            (CallStep::Done, Some(CallResult::Denied { message, .. })) => Err(HostError::usage(
                "W-POLICY-014",
                format!("{message} (recorded in run {run})"),
            )),
            (CallStep::Parked(request), _) => Err(HostError::usage(
                "W-MEMORY-014",
                format!(
                    "policy sends this operation to a person (request {request}); a person's own operation does not wait, so run {run} stopped"
                ),
            )),
            (CallStep::Done, Some(CallResult::InDoubt) | None) => Err(HostError::usage(
                "W-MEMORY-002",
                format!("the operation has no result (run {run})"),
            )),
        }
    }
}

/// `local/NAME`, `shared/NAME` or `memory/…/NAME`; a bare `NAME` is local.
fn parse_namespace(ns: &str) -> Result<(MemoryScope, String)> {
    let (scope, name) = warrant_core::parse_memory_target(ns)
        .unwrap_or_else(|| (MemoryScope::Local, ns.to_owned()));
    warrant_memory::validate_namespace(&name).map_err(|e| memory_error(&e))?;
    Ok((scope, name))
}
