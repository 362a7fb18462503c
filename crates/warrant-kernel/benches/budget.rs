//! The budget check before a model call: the actor and tenant totals read from the store's
//! projection (`budget_totals`, two indexed lookups) against the fold of every run's log it
//! replaced, with 1,000 and 10,000 stored runs, on the same run of the same store. Each
//! stored run is a `run_started` and one `model_responded` carrying usage, a quarter of them
//! by another actor of the tenant. Before timing, the two are checked to agree.
//!
//! `cargo bench -p warrant-kernel --bench budget`; the store lives in `/dev/shm` when there is
//! one (the fold's cost is reading and folding logs, not the disk).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::json;
use warrant_audit::{AuditKey, InstallationSealer, PublicKeys};
use warrant_core::config::LayerKind;
use warrant_core::{CanonicalPath, FixedClock, Principal, PrincipalKind, SequentialIds, Timestamp};
use warrant_kernel::pdp::Pdp;
use warrant_kernel::{NewRunSpec, Ring, RingParts, RunSettings, RunState, Silent};
use warrant_policy::{PolicyEngine, PolicySource, default_pack};
use warrant_store::SqliteStore;
use warrant_tools::{Builtin, Controls, Toolbox};

fn principal(actor: &str) -> Principal {
    Principal {
        tenant: "acme".into(),
        actor: actor.into(),
        kind: PrincipalKind::User,
        on_behalf_of: None,
        roles: vec![],
        teams: vec![],
        attrs: BTreeMap::new(),
    }
}

fn settings() -> RunSettings {
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

struct World {
    _dir: tempfile::TempDir,
    ws: CanonicalPath,
    store: SqliteStore,
    sealer: InstallationSealer,
    keys: PublicKeys,
    engine: PolicyEngine,
    ids: SequentialIds,
    tools: Toolbox,
    budgets: warrant_kernel::ModelRules,
}

impl World {
    fn new() -> Self {
        let dir = if std::path::Path::new("/dev/shm").is_dir() {
            tempfile::tempdir_in("/dev/shm").unwrap()
        } else {
            tempfile::tempdir().unwrap()
        };
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let ws = root.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let clock = Arc::new(FixedClock(
            Timestamp::from_millis(1_767_225_600_000).unwrap(),
        ));
        let store = SqliteStore::create(&dir.path().join("store.db"), clock).unwrap();
        let sealer = InstallationSealer::new(
            AuditKey::generate(),
            "inst-bench",
            Arc::new(SequentialIds::default()),
        );
        let keys = PublicKeys::from_keys([sealer.key().verifying_key()]);
        let engine = PolicyEngine::load(&[PolicySource {
            layer: LayerKind::Project,
            path: "/ws/.warrant/policies/default.cedar".into(),
            text: default_pack().into(),
        }])
        .unwrap();
        let tools = Toolbox::new(
            &[&Builtin],
            Controls {
                menu: None,
                menus: &Default::default(),
                redactor: None,
            },
        )
        .unwrap();
        let mut budgets = warrant_kernel::ModelRules::default();
        budgets.budgets.actor.tokens = Some(u64::MAX / 2);
        budgets.budgets.tenant.tokens = Some(u64::MAX / 2);
        Self {
            _dir: dir,
            ws: CanonicalPath::from_normalized(ws.to_str().unwrap()).unwrap(),
            store,
            sealer,
            keys,
            engine,
            ids: SequentialIds::default(),
            tools,
            budgets,
        }
    }

    fn ring<'a>(&'a self, pdp: &'a Pdp<'a>) -> Ring<'a> {
        Ring::new(RingParts {
            store: &self.store,
            sealer: &self.sealer,
            pdp,
            ids: &self.ids,
            clock: &warrant_core::SystemClock,
            secret: b"bench secret",
            observer: &Silent,
            keys: &self.keys,
            confidential: &warrant_kernel::InTheClear,
            tools: &self.tools,
            budgets: &self.budgets,
            guard: warrant_kernel::GuardSettings::default(),
            spawner: None,
        })
    }

    fn start(&self, ring: &Ring<'_>, actor: &str) -> RunState {
        ring.start(NewRunSpec {
            queued: false,
            tools_digest: None,
            profiles_digest: None,
            principal: principal(actor),
            task: "bench".into(),
            model: "scripted:bench".into(),
            workspace: self.ws.clone(),
            settings: settings(),
            tools: vec![],
        })
        .unwrap()
    }

    /// Adds runs until the store holds `n` finished ones (each with one answer's usage).
    fn fill(&self, ring: &Ring<'_>, n: usize, have: &mut usize) {
        while *have < n {
            let actor = if have.is_multiple_of(4) {
                "bob"
            } else {
                "alice"
            };
            let mut state = self.start(ring, actor);
            ring.record_model_response(
                &mut state,
                None,
                Some("done".into()),
                vec![],
                Some(json!({"input_tokens": 1200, "output_tokens": 80, "cost_usd": 0.0031})),
                "scripted:bench".into(),
            )
            .unwrap();
            *have += 1;
        }
    }
}

fn budget_check(c: &mut Criterion) {
    let world = World::new();
    let pdp = Pdp(&world.engine);
    let ring = world.ring(&pdp);
    let mut have = 0;
    let mut group = c.benchmark_group("budget_check");
    group.sample_size(10);
    for n in [1_000usize, 10_000] {
        world.fill(&ring, n, &mut have);
        // The run about to make its call: one more of alice's, with its own answer logged.
        let mut state = world.start(&ring, "alice");
        ring.record_model_response(
            &mut state,
            None,
            None,
            vec![],
            Some(json!({"input_tokens": 10, "output_tokens": 1})),
            "scripted:bench".into(),
        )
        .unwrap();
        have += 1;
        let projected = ring.budget_totals(&state).unwrap();
        let folded = ring.budget_totals_folded(&state).unwrap();
        assert_eq!(
            (projected.0.tokens(), projected.1.tokens()),
            (folded.0.tokens(), folded.1.tokens()),
            "the projection and the fold disagree"
        );
        assert!((projected.1.cost_usd - folded.1.cost_usd).abs() < 1e-6);
        group.bench_with_input(BenchmarkId::new("projection", n), &n, |b, _| {
            b.iter(|| black_box(ring.budget_totals(black_box(&state)).unwrap()));
        });
        group.bench_with_input(BenchmarkId::new("fold", n), &n, |b, _| {
            b.iter(|| black_box(ring.budget_totals_folded(black_box(&state)).unwrap()));
        });
    }
    group.finish();
}

criterion_group!(benches, budget_check);
criterion_main!(benches);
