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
    assert_eq!(n, 18);
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
