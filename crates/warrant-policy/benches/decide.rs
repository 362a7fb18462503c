//! Decision latency: `PolicyEngine::decide` (build entities, Cedar, @ask, built-in rules)
//! against Cedar's `Authorizer::is_authorized` alone on the same prebuilt request, with 10
//! and 1,000 policies. The gap is Warrant's per-request overhead.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::hint::black_box;

use cedar_policy::Authorizer;
use criterion::{Criterion, criterion_group, criterion_main};
use warrant_core::config::LayerKind;
use warrant_core::{Action, CanonicalPath, Principal, PrincipalKind};
use warrant_policy::{DecisionRequest, PolicyEngine, PolicySource, default_pack};

/// The default pack plus generated permits on distinct paths, `total` policies in all.
fn engine(total: usize) -> PolicyEngine {
    let base = PolicyEngine::load(&[pack(default_pack())]).unwrap();
    let extra = total - base.policy_ids().count();
    let generated: String = (0..extra)
        .map(|i| {
            format!(
                "@id(\"gen-{i}\")\npermit (principal, action == Warrant::Action::\"fs.read\", \
                 resource is Warrant::Path) when {{ resource.path == \"/ws/gen/{i}.txt\" }};\n"
            )
        })
        .collect();
    let engine = PolicyEngine::load(&[
        pack(default_pack()),
        PolicySource {
            layer: LayerKind::User,
            path: "generated.cedar".into(),
            text: generated,
        },
    ])
    .unwrap();
    assert_eq!(engine.policy_ids().count(), total);
    engine
}

fn pack(text: &str) -> PolicySource {
    PolicySource {
        layer: LayerKind::Project,
        path: "default.cedar".into(),
        text: text.into(),
    }
}

fn bench(c: &mut Criterion) {
    let who = Principal {
        tenant: "acme".into(),
        actor: "alice".into(),
        kind: PrincipalKind::User,
        on_behalf_of: None,
        roles: vec!["dev".into()],
        teams: vec!["payments".into()],
        attrs: BTreeMap::new(),
    };
    let ws = CanonicalPath::from_normalized("/ws").unwrap();
    let action = Action::FsRead {
        path: CanonicalPath::from_normalized("/ws/src/main.rs").unwrap(),
    };
    let req = DecisionRequest {
        principal: &who,
        action: &action,
        workspace: &ws,
        installed_skills: &[],
    };
    let authorizer = Authorizer::new();
    let mut group = c.benchmark_group("decide");
    for total in [10usize, 1_000] {
        let engine = engine(total);
        let (request, entities) = engine.cedar_request(&req).unwrap();
        let set = engine.cedar_policy_set();
        group.bench_function(format!("warrant_decide/{total}"), |b| {
            b.iter(|| black_box(engine.decide(black_box(&req))))
        });
        group.bench_function(format!("cedar_is_authorized/{total}"), |b| {
            b.iter(|| black_box(authorizer.is_authorized(&request, set, &entities)))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
