//! The cost of governing an MCP call, against the same call made directly, in one run: the
//! reference server (`@modelcontextprotocol/server-everything`, stdio) answers `echo` each
//! time. `rmcp_direct` calls it with the `rmcp` client on a tokio runtime (the baseline);
//! `connection` through Warrant's synchronous connection (its own runtime thread, a channel);
//! `ring_process_call` drives one `mcp__every__echo` call through `Ring::process_call`
//! (normalize, Cedar, two journaled transactions of sealed and signed records, the call, the
//! result bounded). Each has its own server process. The store lives under `TMPDIR`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use serde_json::json;
use warrant_audit::{AuditKey, InstallationSealer, PublicKeys};
use warrant_core::config::{LayerKind, McpServerConfig, ProfileConfig};
use warrant_core::{CanonicalPath, IdSource, Principal, PrincipalKind, RandomIds, SystemClock};
use warrant_kernel::pdp::Pdp;
use warrant_kernel::{
    CallRecord, CallResult, CallStep, GuardSettings, ModelRules, NewRunSpec, NoPrompter, Ring,
    RingParts, RunSettings, RunState, Silent, ToolEnv, ToolRegistry,
};
use warrant_mcp::{McpSource, StartContext};
use warrant_policy::{PolicyEngine, PolicySource, default_pack};
use warrant_store::SqliteStore;
use warrant_tools::{Builtin, Controls, Toolbox};

const CALLS_PER_RUN: usize = 64;

fn everything() -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap();
    let index = home.join(
        ".cache/warrant-test-peers/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    );
    assert!(
        index.exists(),
        "install the reference server first (see .ci/run, \"test peers\")"
    );
    index
}

const POLICY: &str = r#"@id("bench-echo")
permit (principal, action == Warrant::Action::"mcp.call", resource is Warrant::McpTool)
when { resource.server == "every" && resource.tool == "echo" };"#;

fn propose(ring: &Ring<'_>, state: &mut RunState, n: u64) -> String {
    let id = format!("call-{n}");
    ring.record_model_response(
        state,
        None,
        None,
        vec![CallRecord {
            id: id.clone(),
            tool: "mcp__every__echo".into(),
            args: json!({"message": "hi"}),
        }],
        None,
        "bench".into(),
    )
    .unwrap();
    id
}

fn mcp_call(c: &mut Criterion) {
    let index = everything();
    let argv = vec![
        "node".to_owned(),
        index.to_str().unwrap().to_owned(),
        "stdio".to_owned(),
    ];
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    let workspace = CanonicalPath::from_normalized(ws.to_str().unwrap()).unwrap();

    // The baseline: rmcp's client on its own runtime, the server a tokio child.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let direct = rt.block_on(async {
        let mut child = tokio::process::Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let io = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
        let client = ().serve(io).await.unwrap();
        (client, child)
    });
    let echo = || {
        CallToolRequestParams::new("echo").with_arguments(
            json!({"message": "hi"})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        )
    };
    let first = rt.block_on(direct.0.call_tool(echo())).unwrap();
    assert_eq!(
        serde_json::to_value(&first).unwrap()["content"][0]["text"],
        json!("Echo: hi")
    );

    // Warrant's source, as the host builds it (the server unconfined here: the bench measures
    // the client and the ring, not the sandbox's start).
    let open = ProfileConfig {
        unconfined: true,
        ..ProfileConfig::default()
    };
    let ctx = StartContext {
        workspace: workspace.clone(),
        profiles: BTreeMap::from([("open".to_owned(), open.clone())]),
        parent_env: std::env::vars().collect(),
        credentials: Default::default(),
        launcher: None,
        screen_descriptions: true,
    };
    let servers = BTreeMap::from([(
        "every".to_owned(),
        McpServerConfig {
            command: Some(argv),
            profile: Some("open".to_owned()),
            tools: Some(vec!["echo".to_owned()]),
            ..McpServerConfig::default()
        },
    )]);
    let source = McpSource::new(&servers, ctx.clone()).unwrap();
    let tools = Toolbox::new(
        &[&Builtin, &source],
        Controls {
            menu: None,
            menus: &Default::default(),
            redactor: None,
        },
    )
    .unwrap();
    assert!(
        tools.get("mcp__every__echo").is_some(),
        "{:?}",
        source.failures()
    );

    // A second connection of its own for the middle figure.
    let conn_source = McpSource::new(&servers, ctx).unwrap();
    let conn_tools = warrant_tools::ToolSource::tools(&conn_source);
    let conn_tool = &conn_tools[0];
    let env = ToolEnv {
        workspace: workspace.clone(),
        profiles: BTreeMap::from([("open".to_owned(), open)]),
        parent_env: vec![],
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
    let conn_actions: Vec<_> = conn_tool
        .normalize(&json!({"message": "hi"}), &env)
        .unwrap()
        .into_iter()
        .map(warrant_kernel::Authorized::for_tests)
        .collect();

    let ids: Arc<dyn IdSource> = Arc::new(RandomIds);
    let store = SqliteStore::create(&dir.path().join("store.db"), Arc::new(SystemClock)).unwrap();
    let sealer = InstallationSealer::new(AuditKey::generate(), "bench", ids.clone());
    let keys = PublicKeys::from_keys([sealer.key().verifying_key()]);
    let engine = PolicyEngine::load(&[
        PolicySource {
            layer: LayerKind::Project,
            path: "default.cedar".into(),
            text: default_pack().into(),
        },
        PolicySource {
            layer: LayerKind::Project,
            path: "bench.cedar".into(),
            text: POLICY.into(),
        },
    ])
    .unwrap();
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
    let pdp = Pdp(&engine);
    let budgets = ModelRules::default();
    let ring = Ring::new(RingParts {
        store: &store,
        sealer: &sealer,
        pdp: &pdp,
        ids: ids.as_ref(),
        clock: &SystemClock,
        secret: &[7u8; 32],
        observer: &Silent,
        keys: &keys,
        confidential: &warrant_kernel::InTheClear,
        tools: &tools,
        budgets: &budgets,
        guard: GuardSettings::default(),
        spawner: None,
    });
    let mut n = 0u64;
    let mut state = ring.start(spec.clone()).unwrap();
    // The path measured is the one meant: allowed by policy, completed with the echo.
    let id = propose(&ring, &mut state, n);
    n += 1;
    let step = ring
        .process_call(&mut state, &id, &env, &mut NoPrompter)
        .unwrap();
    assert_eq!(step, CallStep::Done);
    match &state.call(&id).unwrap().result {
        Some(CallResult::Completed { ok: true, result }) => {
            assert_eq!(result["content"][0]["text"], json!("Echo: hi"), "{result}");
        }
        other => panic!("echo did not complete: {other:?}"),
    }

    let mut group = c.benchmark_group("mcp_call");
    group
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    group.bench_function("rmcp_direct", |b| {
        b.iter(|| black_box(rt.block_on(direct.0.call_tool(echo())).unwrap()))
    });
    group.bench_function("connection", |b| {
        b.iter(|| {
            let r = conn_tool.execute(&conn_actions, &env, &|_| true, &|| None);
            assert!(r.ok);
            black_box(r)
        })
    });
    group.bench_function("ring_process_call", |b| {
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            for _ in 0..iters {
                if state.calls.len() >= CALLS_PER_RUN {
                    state = ring.start(spec.clone()).unwrap();
                }
                let id = propose(&ring, &mut state, n);
                n += 1;
                let start = Instant::now();
                let step = ring
                    .process_call(&mut state, &id, &env, &mut NoPrompter)
                    .unwrap();
                timed += start.elapsed();
                assert_eq!(step, CallStep::Done);
            }
            timed
        })
    });
    group.finish();
    drop(direct);
}

criterion_group!(benches, mcp_call);
criterion_main!(benches);
