//! The spec's fixtures through the library: each invalid one yields its `# EXPECT:` code and
//! is refused by `Graph::load`; the committed conformance result is the one the code states.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use warrant_graph::{Graph, GraphError};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ags")
}

#[test]
fn every_invalid_fixture_yields_its_code_and_is_refused() {
    let mut n = 0;
    for dir in ["invalid", "warrant"] {
        for e in std::fs::read_dir(fixtures().join(dir)).unwrap() {
            let p = e.unwrap().path();
            let text = std::fs::read_to_string(&p).unwrap();
            let want = text
                .lines()
                .next()
                .unwrap()
                .trim_start_matches("# EXPECT: ")
                .trim();
            let v = warrant_graph::validate(&p);
            assert!(!v.ok, "{}", p.display());
            assert!(
                v.findings.iter().any(|f| f.code == want),
                "{}: {:?}",
                p.display(),
                v.findings
            );
            match Graph::load(&p) {
                Err(GraphError::Invalid { findings, .. }) => {
                    assert!(findings.iter().any(|f| f.code == want), "{}", p.display());
                }
                other => panic!("{}: {other:?}", p.display()),
            }
            n += 1;
        }
    }
    assert_eq!(n, 24);
}

#[test]
fn the_committed_result_is_the_stated_one() {
    let committed: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../docs/conformance/agentic-graph-1.0.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        committed,
        serde_json::to_value(warrant_graph::conformance::result()).unwrap()
    );
}

/// A policy that allows everything: the plan of an example is about the graph, not policy.
struct AllowAll;

impl warrant_graph::plan::Decide for AllowAll {
    fn decide(&self, _action: &str, _target: &str) -> Result<warrant_graph::plan::Decided, String> {
        Ok(warrant_graph::plan::Decided {
            verdict: "allow".into(),
            person_needed: false,
            reason: "test".into(),
        })
    }
}

/// The spec's `examples/` (AGS conformance README, "Valid documents"): every one validates
/// with no finding at all (no error, no warning), loads, and plans without running anything;
/// what Warrant would refuse to run is named, never silently dropped.
#[test]
fn every_spec_example_validates_cleanly_and_plans() {
    let dir = fixtures().join("examples");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut seen = Vec::new();
    for name in &names {
        let p = dir.join(name);
        let v = warrant_graph::validate(&p);
        assert_eq!((v.ok, v.findings.clone()), (true, vec![]), "{name}");
        let graph = Graph::load(&p).unwrap();
        let plan = warrant_graph::plan::plan(&graph, &AllowAll);
        assert_eq!(plan.order.len(), graph.nodes.len(), "{name}");
        seen.push((
            name.clone(),
            graph.id.clone(),
            graph.requires_conformance,
            plan.runnable,
            plan.unsupported.clone(),
        ));
    }
    let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
    let library = s(&[
        "AG303: requires_conformance 3 is above Warrant's level 2",
        "node `audit_codebase`: `intelligence.min_context_tokens` (Warrant does not know the context window of the run's model, so cannot honour the floor)",
        "node `define_public_api`: success criterion kind `llm_judge` (`addresses_gaps`)",
        "node `write_documentation`: success criterion kind `llm_judge` (`docs_readable`)",
        "node `remediate_gaps`: fallback strategy `human_takeover`",
    ]);
    let row = |name: &str, id: &str, level: u64, unsupported: Vec<String>| {
        let runnable = unsupported.is_empty();
        (name.to_owned(), id.to_owned(), level, runnable, unsupported)
    };
    assert_eq!(
        seen,
        vec![
            row(
                "docs-site-refresh.agraph.yaml",
                "examples/docs-site-refresh",
                3,
                s(&[
                    "AG303: requires_conformance 3 is above Warrant's level 2",
                    "node `inventory_pages`: `intelligence.min_context_tokens` (Warrant does not know the context window of the run's model, so cannot honour the floor)",
                    "node `refresh_pages`: node type `map` (level 3)",
                    "node `link_audit`: node type `subgraph` (level 3)",
                    "node `verify_and_publish`: node type `subgraph` (level 3)",
                ])
            ),
            row(
                "library-v1-release.agraph.json",
                "examples/library-v1-release",
                3,
                library.clone()
            ),
            row(
                "library-v1-release.agraph.yaml",
                "examples/library-v1-release",
                3,
                library
            ),
            row("link-audit.agraph.yaml", "examples/link-audit", 1, vec![]),
            row("minimal.agraph.yaml", "examples/minimal", 1, vec![]),
            row(
                "test-repair-loop.agraph.yaml",
                "examples/test-repair-loop",
                3,
                s(&[
                    "AG303: requires_conformance 3 is above Warrant's level 2",
                    "node `repair_loop`: node type `loop` (level 3)",
                ])
            ),
        ]
    );
}

/// "`library-v1-release.agraph.yaml` and `.agraph.json` must parse to identical data": the
/// same document, so the same digest.
#[test]
fn the_canonical_example_reads_the_same_in_yaml_and_json() {
    let dir = fixtures().join("examples");
    let yaml = Graph::load(&dir.join("library-v1-release.agraph.yaml")).unwrap();
    let json = Graph::load(&dir.join("library-v1-release.agraph.json")).unwrap();
    assert_eq!(yaml.document, json.document);
    assert_eq!(yaml.digest, json.digest);
    assert_eq!(yaml.order, json.order);
}
