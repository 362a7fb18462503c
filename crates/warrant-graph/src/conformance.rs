//! Warrant's AGS conformance result (the spec repository's `conformance/result.schema.json`,
//! `ags.conformance-result.v1`). The committed copy, `docs/conformance/agentic-graph-1.0.json`,
//! is checked against [`result`] by a test; each item listed as passed names what shows it:
//! `warrant-graph`'s `tests/suite/conformance.rs` (fixtures) and the CLI's `suite::graph`.

use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct ConformanceResult {
    pub schema: &'static str,
    pub ags_version: &'static str,
    pub maintenance_release: &'static str,
    pub implementation: &'static str,
    pub implementation_version: &'static str,
    pub level: u8,
    pub fixture_revision: &'static str,
    pub passed: Vec<&'static str>,
    pub failed: Vec<&'static str>,
    pub notes: Vec<&'static str>,
    pub generated_at: &'static str,
}

pub const PASSED: &[&str] = &[
    "all-invalid-diagnostics",
    "rfc8785-digests",
    "level-0-plan",
    "level-1-execution",
    "level-2-decisions-and-joins",
    "level-2-conditional-and-on-failure-edges",
    "level-2-retry-and-fallback",
    "human-gates",
    "resume-digest-check",
];

pub const FAILED: &[&str] = &[
    "all-valid-fixtures",
    "level-2-parallelism",
    "level-2-human-checkpoints",
    "level-2-escalation",
    "level-3-loop-map-subgraph",
    "run-record-schema",
];

pub fn result() -> ConformanceResult {
    ConformanceResult {
        schema: "ags.conformance-result.v1",
        ags_version: "1.0",
        maintenance_release: "1.0.1",
        implementation: "warrant",
        implementation_version: env!("CARGO_PKG_VERSION"),
        level: 2,
        fixture_revision: "86aa78bab2a894e885b45e3e3c4511054b29b41a",
        passed: PASSED.to_vec(),
        failed: FAILED.to_vec(),
        notes: vec![
            "Level 2 is claimed with the gaps listed as failed: every graph using a feature Warrant does not execute is refused before anything runs (W-GRAPH-003, listing each feature), never run with the feature ignored.",
            "Executed: task, decision (agent and expression evaluators, default_branch with RT022) and gate nodes (approve, review as approve, notify; on_reject fail, skip_dependents, route); sequence, conditional and on_failure edges; join all, any and n_of; node `when`; inputs from/template/value/default/implicit; required outputs (RT033); success criteria of kind expression and regex; failure.retry (max_attempts, retry_on), fallback alternate_node and skip, on_exhausted fail, skip and succeed_degraded (RT042); policy.on_node_failure halt and isolate; policy.on_expression_error fail and false (RT062); params with defaults, required (AG301) and enum (AG302); requires_conformance above 2 refused (AG303).",
            "Governance: every node runs as a step of one Warrant run, through the ring; a node's requirements.permissions (and workspace access) are a ceiling intersected with policy in the ring, so a node can never do more than policy allows nor more than it declares. A gate is a request to a person (the run parks, exit 10); a gate that cannot be put to a person fails its node (RT015). Resume refuses a graph whose digest changed (RT053, W-GRAPH-005).",
            "Not executed (refused): loop, map and subgraph nodes (level 3); human[] checkpoints; failure.escalation; gate mode input; fallback degrade_outputs, relax_criteria and human_takeover; criterion kinds other than expression and regex; policy.on_node_failure continue. Scheduling is sequential (max_parallel_nodes is treated as 1). No run record document is emitted: the run's journal and audit trail hold every step.",
            "Validation and digests use the spec's Rust support crate agentic-graph-spec 1.0.4 (duplicate keys AG005, the JSON Schema, layers 2 and 3, advisories); every stored invalid fixture yields its expected code. The spec's examples/ directory was not available to vendor, so all-valid-fixtures is not claimed; Warrant's own valid graphs validate with no errors.",
        ],
        generated_at: "2026-12-06T00:00:00Z",
    }
}
