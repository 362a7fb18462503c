//! Artifacts an auditor can trace: `create_document` (DOCX), `create_spreadsheet` (XLSX),
//! `create_presentation` (PPTX) and `create_report` (Markdown or HTML), each normalized to the
//! file's `fs.write`/`fs.create` plus an `artifact.create` that binds the digest of the bytes,
//! and written with `NAME.intoto.jsonl` beside it: an in-toto Statement v1 in a DSSE envelope
//! signed with the installation's key, naming the run, the principal, the model, the input's
//! digest, the policy and profiles in force and whether untrusted content had been seen.
//! Limits: generation is in memory (sizes are capped); the sidecar's write is part of the
//! artifact's effect, not an action of its own.

mod error;
mod provenance;
pub mod render;
pub mod spec;
mod tools;

pub use error::ArtifactError;
pub use provenance::{
    ArtifactVerdict, Custody, KeyStanding, PREDICATE_TYPE, Predicate, VerifyProblem, read_sidecar,
    sidecar_path, verify_artifact, verify_artifact_bytes,
};
pub use tools::{Artifacts, TOOL_NAMES};
