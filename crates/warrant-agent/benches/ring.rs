//! The cost of governance, each figure against its bare baseline in the same run:
//! `governed_exec` drives one `run_command ["/bin/true"]` call through `Ring::process_call`
//! (policy, two journaled transactions of sealed records, the contained spawn) against
//! `Command::status()`/`output()` and against a bare spawn plus the two fsyncs durability
//! needs (one before the effect, one after: the same bytes written to a plain file). Commands
//! are confined by default, so a person approves `/bin/true` for the session once per run,
//! untimed; the timed calls run under that grant, as in a session that approved it;
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
    Answer, CallRecord, CallResult, CallStep, GuardSettings, ModelRules, NewRunSpec, NoPrompter,
    PromptView, Prompter, Ring, RingParts, RunEvent, RunSettings, RunState, Scope, Silent, ToolEnv,
    ToolRegistry,
};
use warrant_policy::{PolicyEngine, PolicySource, default_pack};
use warrant_store::{AuditOutbox, EventStore, SqliteStore};

/// The `warrant` binary's allocator, so the governed call is measured as the binary makes it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use warrant_tools::{Builtin, Controls, Toolbox};

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
    tools: Toolbox,
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
        let tools = Toolbox::new(
            &[&Builtin],
            Controls {
                menu: None,
                menus: &Default::default(),
                redactor: None,
            },
        )
        .unwrap();
        let env = ToolEnv {
            workspace: workspace.clone(),
            profiles: BTreeMap::from([("default".to_owned(), ProfileConfig::default())]),
            parent_env: std::env::vars().collect(),
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
                agent_profile: None,
                delegation: None,
                graph: None,
                skills: Vec::new(),
                max_denials: 1_000_000,
                max_turns: 1_000_000,
                deadline: None,
                requests: Default::default(),
                max_tool_calls: None,
                session: None,
                spawn: None,
                standing: None,
                rate: None,
                ceiling: None,
                strict: false,
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

/// The person at the run's terminal, approving what they are asked for the session.
struct ApprovesForSession(Principal);

impl Prompter for ApprovesForSession {
    fn ask(&mut self, _view: &PromptView<'_>) -> Option<(Answer, Principal)> {
        Some((Answer::Approve(Scope::Session), self.0.clone()))
    }
}

/// A fresh run in which `/bin/true` was asked once and approved for the session (untimed
/// set-up of the timed calls).
fn approved_run(ring: &Ring<'_>, fx: &Fixture, n: &mut u64) -> RunState {
    let mut state = ring.start(fx.spec.clone()).unwrap();
    let id = propose_true(ring, &mut state, *n);
    *n += 1;
    let mut person = ApprovesForSession(fx.spec.principal.clone());
    let step = ring
        .process_call(&mut state, &id, &fx.env, &mut person)
        .unwrap();
    assert_eq!(step, CallStep::Done);
    assert!(
        !state.session_grants.is_empty(),
        "no session grant: {:?}",
        state.call(&id)
    );
    state
}

fn governed_exec(c: &mut Criterion) {
    let fx = Fixture::new();
    let pdp = Pdp(&fx.engine);
    let budgets = ModelRules::default();
    let ring = Ring::new(RingParts {
        store: &fx.store,
        sealer: &fx.sealer,
        pdp: &pdp,
        ids: fx.ids.as_ref(),
        clock: &SystemClock,
        secret: &[7u8; 32],
        observer: &Silent,
        keys: &fx.keys,
        confidential: &warrant_kernel::InTheClear,
        tools: &fx.tools,
        budgets: &budgets,
        guard: GuardSettings::default(),
        spawner: None,
    });
    let mut n = 0u64;
    let mut state = approved_run(&ring, &fx, &mut n);

    // Check the path measured is the one meant: under the session grant, no one asked,
    // spawned, exit 0, its events in the journal.
    let from = state.next_seq;
    let id = propose_true(&ring, &mut state, n);
    n += 1;
    let step = ring
        .process_call(&mut state, &id, &fx.env, &mut NoPrompter)
        .unwrap();
    assert_eq!(step, CallStep::Done);
    let events: Vec<_> = fx
        .store
        .events(&state.run)
        .unwrap()
        .into_iter()
        .filter(|e| e.seq > from)
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "action_proposed",
            "policy_decided",
            "effect_started",
            "effect_completed"
        ]
    );
    assert!(
        events[2].payload["session_grant"].is_string(),
        "{}",
        events[2].payload
    );
    match &state.call(&id).unwrap().result {
        Some(CallResult::Completed { ok: true, result }) => {
            assert_eq!(result["exit_code"], json!(0), "{result}");
        }
        other => panic!("/bin/true did not complete: {other:?}"),
    }
    // The baseline makes the same bytes durable in the same two steps: the events up to the
    // start with their audit lines, then the completion with its line.
    let head = fx.store.audit_head().unwrap();
    let lines = fx.store.audit_records(head.seq - 4, 4).unwrap();
    assert_eq!(lines.len(), 4);
    let bytes = |range: std::ops::Range<usize>| {
        let mut out = Vec::new();
        for i in range {
            out.extend_from_slice(events[i].payload.to_string().as_bytes());
            out.push(b'\n');
            out.extend_from_slice(lines[i].line.as_bytes());
            out.push(b'\n');
        }
        out
    };
    let (before, after) = (bytes(0..3), bytes(3..4));
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(fx.dir.path().join("baseline.log"))
        .unwrap();

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
    // What durability alone costs around a spawn: a durable write before and after it.
    group.bench_function("bare_spawn_two_fsyncs", |b| {
        b.iter(|| {
            file.write_all(&before).unwrap();
            file.sync_data().unwrap();
            let out = Command::new("/bin/true")
                .stdin(Stdio::null())
                .output()
                .unwrap();
            file.write_all(&after).unwrap();
            file.sync_data().unwrap();
            black_box(out)
        })
    });
    group.bench_function("ring_process_call", |b| {
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            for _ in 0..iters {
                // Untimed: a fresh (approved) run now and then, and the model turn that
                // proposes the call.
                if state.calls.len() >= CALLS_PER_RUN {
                    state = approved_run(&ring, &fx, &mut n);
                }
                let id = propose_true(&ring, &mut state, n);
                n += 1;
                let start = Instant::now();
                let step = ring
                    .process_call(&mut state, &id, &fx.env, &mut NoPrompter)
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
    let budgets = ModelRules::default();
    let ring = Ring::new(RingParts {
        store: &fx.store,
        sealer: &fx.sealer,
        pdp: &pdp,
        ids: fx.ids.as_ref(),
        clock: &SystemClock,
        secret: &[7u8; 32],
        observer: &Silent,
        keys: &fx.keys,
        confidential: &warrant_kernel::InTheClear,
        tools: &fx.tools,
        budgets: &budgets,
        guard: GuardSettings::default(),
        spawner: None,
    });
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
