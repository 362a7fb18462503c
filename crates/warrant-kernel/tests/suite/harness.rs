//! A real world for the ring: SQLite store and audit sealer in a tempdir, the default policy
//! pack through the real decision point, the built-in tools, a canonical tempdir workspace.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;
use tempfile::TempDir;
use warrant_audit::{AuditKey, InstallationSealer, PublicKeys};
use warrant_core::config::{LayerKind, ProfileConfig};
use warrant_core::{
    CanonicalPath, FixedClock, Principal, PrincipalKind, RequestId, SequentialIds, Timestamp,
};
use warrant_kernel::pdp::Pdp;
use warrant_kernel::{
    Answer, CallRecord, CallStep, NewRunSpec, PromptView, Prompter, Ring, RingParts, RunSettings,
    RunState, Silent, ToolEnv,
};
use warrant_policy::{PolicyEngine, PolicySource, default_pack};
use warrant_store::{EventStore, SqliteStore};
use warrant_tools::{Builtin, Controls, Toolbox};

pub const SECRET: &[u8] = b"installation secret of the test world";

pub struct World {
    pub dir: TempDir,
    /// Canonical root of the tempdir; the workspace is `root/ws`.
    pub root: String,
    pub store: SqliteStore,
    pub sealer: InstallationSealer,
    /// The sealer's public key: what the ring checks the journal against.
    pub keys: PublicKeys,
    pub engine: PolicyEngine,
    pub ids: SequentialIds,
    pub tools: Toolbox,
    pub env: ToolEnv,
    /// No budgets configured (every model-call test sets its own).
    pub budgets: warrant_kernel::ModelRules,
}

pub fn principal(actor: &str, kind: PrincipalKind) -> Principal {
    Principal {
        tenant: "acme".into(),
        actor: actor.into(),
        kind,
        on_behalf_of: None,
        roles: vec![],
        teams: vec![],
        attrs: BTreeMap::new(),
    }
}

pub fn alice() -> Principal {
    principal("alice", PrincipalKind::User)
}

pub fn bob() -> Principal {
    principal("bob", PrincipalKind::User)
}

impl World {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path())
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        let ws = format!("{root}/ws");
        std::fs::create_dir_all(format!("{ws}/build/obj")).unwrap();
        std::fs::write(format!("{ws}/notes.txt"), "hello\n").unwrap();
        std::fs::write(format!("{ws}/.env"), "SECRET=1\n").unwrap();
        std::fs::write(format!("{ws}/build/obj/a.o"), "obj").unwrap();
        std::fs::write(format!("{root}/outside.txt"), "not yours\n").unwrap();
        let clock = Arc::new(FixedClock(
            Timestamp::from_millis(1_767_225_600_000).unwrap(),
        ));
        let store = SqliteStore::create(&dir.path().join("store.db"), clock).unwrap();
        // The sealer's ids are its own, so run and request ids do not depend on audit records.
        let sealer = InstallationSealer::new(
            AuditKey::generate(),
            "inst-test",
            Arc::new(SequentialIds::default()),
        );
        let keys = PublicKeys::from_keys([sealer.key().verifying_key()]);
        let engine = PolicyEngine::load(&[PolicySource {
            layer: LayerKind::Project,
            path: "/ws/.warrant/policies/default.cedar".into(),
            text: default_pack().into(),
        }])
        .unwrap();
        let env = ToolEnv {
            workspace: CanonicalPath::from_normalized(&ws).unwrap(),
            profiles: BTreeMap::from([("default".to_owned(), ProfileConfig::default())]),
            parent_env: vec![("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into())],
            secrets: None,
            no_overlays: false,
            run: None,
            tests: Default::default(),
            web: Default::default(),
            web_addresses_unguarded: false,
            web_loopback_allowed: false,
            menus: Default::default(),
            spawn_unnarrowed: false,
            ceiling_unchecked: false,
            delegation_late: false,
        };
        Self {
            dir,
            root,
            store,
            sealer,
            keys,
            engine,
            ids: SequentialIds::default(),
            budgets: warrant_kernel::ModelRules::default(),
            tools: Toolbox::new(
                &[&Builtin],
                Controls {
                    menu: None,
                    menus: &Default::default(),
                    redactor: None,
                },
            )
            .unwrap(),
            env,
        }
    }

    pub fn ws(&self) -> String {
        self.env.workspace.as_str().to_owned()
    }

    pub fn ring<'a>(&'a self, pdp: &'a Pdp<'a>, secret: &'a [u8]) -> Ring<'a> {
        Ring::new(RingParts {
            store: &self.store,
            sealer: &self.sealer,
            pdp,
            ids: &self.ids,
            clock: &warrant_core::SystemClock,
            secret,
            observer: &Silent,
            keys: &self.keys,
            confidential: &warrant_kernel::InTheClear,
            tools: &self.tools,
            budgets: &self.budgets,
            guard: warrant_kernel::GuardSettings::default(),
            spawner: None,
        })
    }

    pub fn start(&self, ring: &Ring<'_>, settings: RunSettings) -> RunState {
        ring.start(NewRunSpec {
            queued: false,
            tools_digest: None,
            profiles_digest: None,
            principal: alice(),
            task: "tidy the workspace".into(),
            model: "scripted:test".into(),
            workspace: self.env.workspace.clone(),
            settings,
            tools: vec![],
        })
        .unwrap()
    }

    /// The model asks for one call; returns its id.
    pub fn propose(
        &self,
        ring: &Ring<'_>,
        state: &mut RunState,
        tool: &str,
        args: Value,
    ) -> String {
        let id = format!("call-{}", state.calls.len() + 1);
        ring.record_model_response(
            state,
            None,
            None,
            vec![CallRecord {
                id: id.clone(),
                tool: tool.into(),
                args,
            }],
            None,
            "scripted:test".into(),
        )
        .unwrap();
        id
    }

    pub fn process(
        &self,
        ring: &Ring<'_>,
        state: &mut RunState,
        call: &str,
        prompter: &mut dyn Prompter,
    ) -> CallStep {
        ring.process_call(state, call, &self.env, prompter).unwrap()
    }

    /// Kinds of the stored events with `seq >= from`.
    pub fn kinds_from(&self, state: &RunState, from: u64) -> Vec<String> {
        self.store
            .events(&state.run)
            .unwrap()
            .into_iter()
            .filter(|e| e.seq >= from)
            .map(|e| e.kind)
            .collect()
    }

    pub fn exists(&self, rel: &str) -> bool {
        std::path::Path::new(&format!("{}/{rel}", self.ws())).exists()
    }
}

pub fn settings() -> RunSettings {
    RunSettings {
        agent_profile: None,
        delegation: None,
        graph: None,
        skills: Vec::new(),
        max_denials: 3,
        max_turns: 20,
        deadline: None,
        requests: Default::default(),
        max_tool_calls: None,
        session: None,
        spawn: None,
        standing: None,
        rate: None,
        ceiling: None,
        strict: false,
    }
}

/// A person at the terminal who gives one fixed answer (or none: nobody is there).
pub struct Script {
    pub answer: Option<Answer>,
    pub who: Principal,
    pub asked: Vec<String>,
}

impl Script {
    pub fn new(answer: Option<Answer>) -> Self {
        Self {
            answer,
            who: bob(),
            asked: vec![],
        }
    }
}

impl Prompter for Script {
    fn ask(&mut self, view: &PromptView<'_>) -> Option<(Answer, Principal)> {
        self.asked.push(view.title.to_owned());
        self.answer.clone().map(|a| (a, self.who.clone()))
    }
}

pub fn req(n: u64) -> RequestId {
    RequestId::parse(&format!("req-{n:012x}")).unwrap()
}
