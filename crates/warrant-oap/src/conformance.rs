//! Warrant's OAP conformance statement and result (conformance.md §1 and the repository's
//! `conformance/result.schema.json`). The committed copy, `docs/conformance/oap-1.0.json`, is
//! checked against [`result`] by a test, and each requirement listed as passed names the test
//! that shows it (`warrant-oap`'s `tests/suite/conformance.rs`, the kernel's narrowing test
//! and the CLI's `suite::agent_profiles`).

use serde::Serialize;

/// The result document (`oap.conformance-result.v1`).
#[derive(Clone, Debug, Serialize)]
pub struct ConformanceResult {
    pub schema: &'static str,
    pub oap: &'static str,
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

/// Requirements shown by tests, by id.
pub const PASSED: &[&str] = &[
    "L1-P1", "L1-P2", "L1-P3", "L1-P5", "L1-P6", "L1-D1", "L1-D2", "L1-D3", "L1-D4", "L1-I1",
    "L1-I2", "L1-I3", "L1-I4", "L1-I5", "L1-I6", "L1-I7", "L1-I8", "L1-I9", "L1-I10", "L1-I11",
    "L1-I12", "L1-R1", "L2-S1", "L2-S2", "L2-S3", "L2-S4", "L2-S5", "L2-A1", "L2-A2", "L2-A3",
    "L2-A4", "L2-A5", "L2-A6", "L2-A7", "L2-A8", "L2-A9", "L2-A10", "L2-A11", "L2-A12", "L2-A13",
    "L2-A14", "L3-E1", "L3-E2", "L3-B1", "L3-G1",
];

/// Requirements not met, each explained in the notes.
pub const FAILED: &[&str] = &[
    "L1-P4", "L1-R2", "L2-G1", "L2-G2", "L2-G3", "L2-G4", "L2-G5", "L3-M1", "L3-M2", "L3-K1",
    "L3-Y1", "L3-B2", "L3-G2", "L3-G3",
];

pub fn result() -> ConformanceResult {
    ConformanceResult {
        schema: "oap.conformance-result.v1",
        oap: "1.0",
        maintenance_release: "1.0.1",
        implementation: "warrant",
        implementation_version: env!("CARGO_PKG_VERSION"),
        level: 2,
        fixture_revision: "31838059e26a19fbe26554709b916d8eb8a9d2e4",
        passed: PASSED.to_vec(),
        failed: FAILED.to_vec(),
        notes: vec![
            "Level 2 (Read/Write) is claimed: every L1 and L2 requirement listed as passed is shown by a test; the L2-G (delta generation) group, L2-G1 to L2-G5, is not met because runs do not emit deltas yet: deltas are applied (warrant profiles apply), not produced.",
            "Level 3 is not claimed. Met: extends with cycle and depth-8 refusal and narrowing of the merged result (L3-E1, L3-E2), a subagent held to its parent's effective profile (L3-B1), the three encodings with double instructions refused (L3-G1).",
            "L3-M1/L3-M2: a profile's mcp_servers are never launched (recorded as dropped); only the installation's [mcp.servers.*] run, governed by the ring. L3-K1: profile skills are not loaded (a required one refuses the run). L3-Y1: no external store kind. L3-B2: max_depth is applied, max_concurrent is not (subagents run one at a time). L1-I3 covers tools, permission families, rules, filesystem roots, allow_hosts, memory mode and scopes, turns, tool calls, time and cost (cost metered where [prices] prices the model). L3-G2: digests are computed and extends revision/digest pins are checked, skill digest pinning is not. L3-G3: no plugin root.",
            "L1-P4 is superseded by errata 1.0.1 (unsupported minor versions fail closed), which Warrant follows; L1-R2 therefore cannot arise. Unknown fields are refused by the schema.",
            "Discovery roots: managed (<managed dir>/agents), user (<user config dir>/agents), universal user (~/.agentprofiles, baseline 1.0.2), project (<workspace>/.agents).",
            "Parsing, schema validation, digests, composition and delta application use the spec's Rust support crate open-agent-profile 1.0.5; Warrant adds discovery, trust, the policy intersection, the run pin, the locked revision re-check before the atomic write, and the CLI.",
        ],
        generated_at: "2026-12-06T00:00:00Z",
    }
}

/// The statement conformance.md §1 asks for.
#[derive(Clone, Debug, Serialize)]
pub struct Statement {
    pub oap: &'static str,
    pub implementation: &'static str,
    pub version: &'static str,
    pub level: u8,
    pub encodings: [&'static str; 3],
    pub discovery_roots: [&'static str; 3],
    pub unimplemented: [&'static str; 6],
}

pub fn statement() -> Statement {
    Statement {
        oap: "1.0",
        implementation: "warrant",
        version: env!("CARGO_PKG_VERSION"),
        level: 2,
        encodings: ["yaml", "json", "md"],
        discovery_roots: ["managed", "user", "project"],
        unimplemented: [
            "delta_generation",
            "spec.tools.mcp_servers",
            "spec.tools.skills",
            "spec.memory.stores (external kinds)",
            "spec.runtime.subagents.max_concurrent",
            "plugin discovery root",
        ],
    }
}
