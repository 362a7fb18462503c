//! The cost of governance, each figure against its bare baseline in the same run:
//! `governed_exec` drives one `run_command ["/bin/true"]` call through `Ring::process_call`
//! (policy, four journaled and sealed appends, the spawn) against `Command::status()`;
//! `journal_append` appends one small event through `Ring::append` (one SQLite transaction,
//! `synchronous=FULL`, with its sealed and signed audit record) against `write_all` +
//! `sync_data` of the same bytes to a plain file. The store lives under `TMPDIR`, so the
//! filesystem it runs on decides the fsync cost: see docs/BENCHMARKS.md.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::hint::black_box;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use tempfile::TempDir;
use warrant_audit::{AuditKey, InstallationSealer, PublicKeys};
use warrant_core::config::{LayerKind, ProfileConfig};
use warrant_core::{CanonicalPath, IdSource, Principal, PrincipalKind, RandomIds, SystemClock};
use warrant_kernel::pdp::Pdp;
use warrant_kernel::{
    CallRecord, CallResult, CallStep, NewRunSpec, NoPrompter, Ring, RunEvent, RunSettings,
    RunState, Silent, ToolEnv, ToolRegistry,
};
use warrant_policy::{PolicyEngine, PolicySource, default_pack};
use warrant_store::{AuditOutbox, EventStore, SqliteStore};
use warrant_tools::BuiltinTools;

/// Calls per run before the bench starts a fresh one (untimed), so the run state a call is
/// looked up in stays small and every sample sees the same shape.
const CALLS_PER_RUN: usize = 64;

/// An installation as `warrant run` wires it, in a temporary directory.
struct Fixture {
    dir: TempDir,
    store: SqliteStore,
    sealer: InstallationSealer,
    keys: PublicKeys,
    engine: PolicyEngine,
    ids: Arc<dyn IdSource>,
    tools: BuiltinTools,
    env: ToolEnv,
    spec: NewRunSpec,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let ws = ws.canonicalize().unwrap();
        let workspace = CanonicalPath::from_normalized(ws.to_str().unwrap()).unwrap();
        let ids: Arc<dyn IdSource> = Arc::new(RandomIds);
        let store =
            SqliteStore::create(&dir.path().join("store.db"), Arc::new(SystemClock)).unwrap();
        let sealer = InstallationSealer::new(AuditKey::generate(), "bench", ids.clone());
        let keys = PublicKeys::from_keys([sealer.key().verifying_key()]);
        // The default pack alone: its `shell-read-only-programs` permits `true` in the
        // workspace, so the call is allowed without a person and without an extra policy.
        let engine = PolicyEngine::load(&[PolicySource {
            layer: LayerKind::Project,
            path: "default.cedar".into(),
            text: default_pack().into(),
        }])
        .unwrap();
        let tools = BuiltinTools::new().unwrap();
        let env = ToolEnv {
            workspace: workspace.clone(),
            profiles: BTreeMap::from([("default".to_owned(), ProfileConfig::default())]),
            parent_env: std::env::vars().collect(),
            secrets: None,
        };
        let spec = NewRunSpec {
            queued: false,
            tools_digest: None,
            profiles_digest: None,
            principal: Principal {
                tenant: "acme".into(),
                actor: "alice".into(),
                kind: PrincipalKind::User,
                on_behalf_of: None,
                roles: vec!["dev".into()],
                teams: vec![],
                attrs: BTreeMap::new(),
            },
            task: "bench".into(),
            model: "bench".into(),
            workspace,
            settings: RunSettings {
                max_denials: 1_000_000,
                max_turns: 1_000_000,
                deadline: None,
                requests: Default::default(),
                max_tool_calls: None,
            },
            tools: tools.specs().into_iter().map(|s| s.name).collect(),
        };
        Self {
            dir,
            store,
            sealer,
            keys,
            engine,
            ids,
            tools,
            env,
            spec,
        }
    }
}

/// Records one model turn asking for `/bin/true` and returns the call id.
fn propose_true(ring: &Ring<'_>, state: &mut RunState, n: u64) -> String {
    let id = format!("call-{n}");
    ring.record_model_response(
        state,
        None,
        None,
        vec![CallRecord {
            id: id.clone(),
            tool: "run_command".into(),
            args: json!({"argv": ["/bin/true"]}),
        }],
        None,
        "bench".into(),
    )
    .unwrap();
    id
}

fn governed_exec(c: &mut Criterion) {
    let fx = Fixture::new();
    let pdp = Pdp(&fx.engine);
    let ring = Ring {
        store: &fx.store,
        sealer: &fx.sealer,
        pdp: &pdp,
        ids: fx.ids.as_ref(),
        clock: &SystemClock,
        secret: &[7u8; 32],
        observer: &Silent,
        fence: Default::default(),
        keys: &fx.keys,
    };
    let mut state = ring.start(fx.spec.clone()).unwrap();

    // Check the path measured is the one meant: allowed by policy, spawned, exit 0.
    let id = propose_true(&ring, &mut state, 0);
    let step = ring
        .process_call(&mut state, &id, &fx.tools, &fx.env, &mut NoPrompter)
        .unwrap();
    assert_eq!(step, CallStep::Done);
    let kinds: Vec<String> = fx
        .store
        .events(&state.run)
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        kinds,
        [
            "run_started",
            "model_responded",
            "action_proposed",
            "policy_decided",
            "effect_started",
            "effect_completed"
        ]
    );
    match &state.call(&id).unwrap().result {
        Some(CallResult::Completed { ok: true, result }) => {
            assert_eq!(result["exit_code"], json!(0), "{result}");
        }
        other => panic!("/bin/true did not complete: {other:?}"),
    }

    let mut group = c.benchmark_group("governed_exec");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    group.bench_function("bare_command_status", |b| {
        b.iter(|| black_box(Command::new("/bin/true").status().unwrap()))
    });
    // Closer to what the executor does (stdin closed, both streams captured), still ungoverned.
    group.bench_function("bare_command_output", |b| {
        b.iter(|| {
            black_box(
                Command::new("/bin/true")
                    .stdin(Stdio::null())
                    .output()
                    .unwrap(),
            )
        })
    });
    let mut n = 1u64;
    group.bench_function("ring_process_call", |b| {
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            for _ in 0..iters {
                // Untimed: a fresh run now and then, and the model turn that proposes the call.
                if state.calls.len() >= CALLS_PER_RUN {
                    state = ring.start(fx.spec.clone()).unwrap();
                }
                let id = propose_true(&ring, &mut state, n);
                n += 1;
                let start = Instant::now();
                let step = ring
                    .process_call(&mut state, &id, &fx.tools, &fx.env, &mut NoPrompter)
                    .unwrap();
                timed += start.elapsed();
                assert_eq!(step, CallStep::Done);
            }
            timed
        })
    });
    group.finish();
}

fn journal_append(c: &mut Criterion) {
    let fx = Fixture::new();
    let pdp = Pdp(&fx.engine);
    let ring = Ring {
        store: &fx.store,
        sealer: &fx.sealer,
        pdp: &pdp,
        ids: fx.ids.as_ref(),
        clock: &SystemClock,
        secret: &[7u8; 32],
        observer: &Silent,
        fence: Default::default(),
        keys: &fx.keys,
    };
    let mut state = ring.start(fx.spec.clone()).unwrap();
    let event = || RunEvent::RunResumed { by: "alice".into() };

    // The baseline writes what one append makes durable: the event payload and its audit line.
    ring.append_for_tests(&mut state, vec![event()], None, vec![])
        .unwrap();
    let head = fx.store.audit_head().unwrap();
    let sealed = fx.store.audit_records(head.seq - 1, 1).unwrap();
    assert_eq!(sealed.len(), 1);
    let mut record = event().payload().unwrap().to_string().into_bytes();
    record.push(b'\n');
    record.extend_from_slice(sealed[0].line.as_bytes());
    record.push(b'\n');
    eprintln!(
        "journal_append: {} bytes per record (payload + audit line)",
        record.len()
    );
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(fx.dir.path().join("baseline.log"))
        .unwrap();

    let mut group = c.benchmark_group("journal_append");
    group
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Elements(1));
    group.bench_function("file_write_sync_data", |b| {
        b.iter(|| {
            file.write_all(&record).unwrap();
            file.sync_data().unwrap();
        })
    });
    group.bench_function("ring_append", |b| {
        b.iter(|| {
            ring.append_for_tests(&mut state, vec![event()], None, vec![])
                .unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, governed_exec, journal_append);
criterion_main!(benches);
