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
    "all-valid-fixtures",
    "rfc8785-digests",
    "level-0-plan",
    "level-1-execution",
    "level-1-command-criteria",
    "level-2-decisions-and-joins",
    "level-2-conditional-and-on-failure-edges",
    "level-2-retry-and-fallback",
    "level-2-human-checkpoints",
    "level-2-escalation",
    "level-2-json-schema-criteria",
    "human-gates",
    "resume-digest-check",
    "run-record-schema",
];

pub const FAILED: &[&str] = &["level-2-parallelism", "level-3-loop-map-subgraph"];

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
            "level-1-execution: task and gate nodes, sequence edges, join all, inputs and outputs (from, value, default, implicit), the criterion kinds command, file_exists, artifact_present and human, failure.retry and on_exhausted, human checkpoints at before_start and after_outputs, sequential scheduling; the spec's level-1 examples/minimal.agraph.yaml (its advisory markdown lint put to the ring and denied by the node's own permission ceiling, recorded, the node succeeding; the maintainer's gate answered) and examples/link-audit.agraph.yaml run end to end from the binary (CLI tests). Intelligence routing: Warrant's routing profile sends every tier to the run's one model (AGS 11.4 rule 4 lets a harness route up), so RT011 never arises; a node declaring intelligence.min_context_tokens is refused (W-GRAPH-003), since Warrant does not know that model's context window.",
            "Command criteria (level-1-command-criteria): each is a call the graph makes through Warrant's ring exactly as the agent's run_command: a shell.exec decided by policy under the node's permission ceiling, run under the default subprocess profile (confined: no network, .env and keys hidden, .git and .warrant read-only), journaled and audited, its outcome and evidence (exit status, the end of its output) on the node's journaled step and in the run record. It passes on expect_exit_code (default 0) and expect_stdout_matches; timeout_seconds bounds it (a timeout is a `timeout` failure); a command denied by policy, the ceiling or a person fails its criterion (permission_denied), never passes; policy's ask asks a person (the run parks) as for any command, which is the operator opt-in AGS 22 recommends; advisory ones are run and recorded and never fail a node. `run` is never given to a shell: it is split as a shell splits a simple command, and anything only a shell could do (operators, $, substitutions, globs, ~) is refused before the run starts (write `sh -c '...'` to have a shell, decided by policy as sh). A CLI test shows a script the node's agent wrote, run by a criterion, confined (cannot read .env, cannot write .warrant/), with the control: the same criterion under a default profile configured unconfined, approved, reads and writes both.",
            "json_schema criteria (level-2-json-schema-criteria): the named output is validated against the criterion's inline schema; schema_ref is refused (W-GRAPH-003).",
            "Executed: task, decision (agent and expression evaluators, default_branch with RT022) and gate nodes (approve, review as approve, input with gate.collect, notify; on_reject fail, skip_dependents, route); sequence, conditional and on_failure edges; join all, any and n_of; node `when`; inputs from/template/value/default/implicit; required outputs (RT033); success criteria of kind expression, regex (target or output), artifact_present, json_schema (inline schema), command (through the ring, confined), file_exists (a workspace path or glob, confined to the workspace, links not followed) and human (a person confirms once every other criterion passed; advisory ones are not asked); failure.retry (max_attempts, retry_on), fallback alternate_node and skip, failure.escalation to a person, on_exhausted fail, skip, succeed_degraded (RT042) and escalate; policy.on_node_failure halt and isolate; policy.on_expression_error fail and false (RT062); params with defaults, required (AG301) and enum (AG302); requires_conformance above 2 refused (AG303).",
            "Human in the loop: gates, human[] checkpoints at every stage (before_start, before_side_effects, after_outputs, on_criteria_failure, on_failure, on_escalation; modes approve, review with edits, input after outputs, notify; `when` guards) and escalations are requests to a person through Warrant's requests: the run parks durably (exit 10) and continues when they answer. before_side_effects is enforced in the ring: every mutating call of the node (not only the first, which is stricter than the spec) becomes an approval request. A checkpoint, gate or escalation that cannot be put to a person fails its node (RT015). Not honoured: on_timeout other than failing the attempt on expiry, required: false (such checkpoints are asked like required ones), checkpoint mode input before outputs exist (refused).",
            "Governance: every node runs as a step of one Warrant run, through the ring; a node's requirements.permissions (and workspace access) are a ceiling intersected with policy in the ring, so a node can never do more than policy allows nor more than it declares. Resume refuses a graph whose digest changed (RT053, W-GRAPH-005).",
            "Run records: `warrant graph record RUN` (and `--record FILE` on graph run and graph resume) emits the AGS run record built from the run's journal; CLI tests validate records of completed, failed and parked runs against the spec's schema/agentic-graph-run-1.0.schema.json. Each attempt's command criteria are listed under its success block with their evidence (the other kinds are not journaled per criterion and are left out, as are per-node inputs, token usage and routing); graph-level success criteria are not evaluated.",
            "Not executed (refused): loop, map and subgraph nodes (level 3); escalation to node, supervisor or external; fallback degrade_outputs, relax_criteria and human_takeover; criterion kinds llm_judge and external, json_schema with schema_ref, intelligence.min_context_tokens; policy.on_node_failure continue. Parallelism (level 2: real parallel scheduling) is not met: a graph run is one run whose nodes are turns of one agent in one journal under one lease, and the ring holds one node's permission ceiling at a time, so concurrent nodes in that run would be decided under each other's ceilings; the sound design (one child run per parallel node) is not built (docs/ARCHITECTURE.md). Nodes run one at a time in the spec's normative order (max_parallel_nodes is read as 1, which the spec permits at level 1 only).",
            "Fixtures: the 20 conformance/invalid fixtures (14 from the spec repository at the fixture revision, 6 from the spec author's Loro harness, which vendors them) each yield their expected code; the spec's six examples/ documents (from the same Loro copy) validate with no finding and plan; library-v1-release.agraph.yaml and .agraph.json load to the same document and digest. Validation and digests use the spec's Rust support crate agentic-graph-spec 1.0.4.",
        ],
        generated_at: "2026-12-06T00:00:00Z",
    }
}
