//! The four artifact tools as one `ToolSource`. Normalizing a call scans its content for
//! secrets, checks and generates the file (so its digest is decided with the actions) and shows
//! a person an outline; executing generates it again from the decided spec, signs the
//! provenance and writes both through `warrant_exec::fs::write_artifact`, which refuses bytes
//! other than the decided ones.

use std::sync::Arc;

use serde_json::{Value, json};
use warrant_audit::{AuditKey, Statement, Subject};
use warrant_core::{
    Action, ArtifactCreate, ArtifactKind, Clock, Coded as _, Digest, FsWrite, ToolSpec, digest_of,
};
use warrant_kernel::{
    Authorized, EffectResult, Presentation, ReadFilter, Refusal, StopCheck, Tool, ToolEnv,
};
use warrant_secrets::Redactor;
use warrant_tools::ToolSource;

use crate::ArtifactError;
use crate::provenance::{PREDICATE_TYPE, Predicate};
use crate::render::{self, Neutralized};
use crate::spec::{Block, Deck, Document, Workbook};

/// The model-facing names, in the order offered.
pub const TOOL_NAMES: [&str; 4] = [
    "create_document",
    "create_spreadsheet",
    "create_presentation",
    "create_report",
];

/// The artifact tools over the installation's signing key, the scanner every content passes
/// first (`None` only for a debug build's negative control) and the clock provenance reads.
#[derive(Clone)]
pub struct Artifacts {
    key: Arc<AuditKey>,
    redactor: Option<Arc<Redactor>>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Artifacts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Artifacts")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl Artifacts {
    pub fn new(key: Arc<AuditKey>, redactor: Option<Arc<Redactor>>, clock: Arc<dyn Clock>) -> Self {
        Self {
            key,
            redactor,
            clock,
        }
    }
}

fn spec(name: &str, description: &str, schema: Value) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: description.into(),
        input_schema: schema,
    }
}

impl ToolSource for Artifacts {
    fn name(&self) -> &str {
        "artifacts"
    }

    fn tools(&self) -> Vec<Box<dyn Tool>> {
        let cell = json!({"oneOf": [
            {"type": "string"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"},
            {"type": "object", "properties": {"formula": {"type": "string"}}, "required": ["formula"], "additionalProperties": false}
        ]});
        let table =
            json!({"type": "array", "items": {"type": "array", "items": cell}, "minItems": 1});
        let strings = json!({"type": "array", "items": {"type": "string"}});
        let path = json!({"type": "string", "minLength": 1});
        let block = json!({"type": "object", "oneOf": [
            {"properties": {"heading": {"type": "string"}, "level": {"type": "integer", "minimum": 1, "maximum": 6}}, "required": ["heading"], "additionalProperties": false},
            {"properties": {"paragraph": {"type": "string"}}, "required": ["paragraph"], "additionalProperties": false},
            {"properties": {"bullets": strings}, "required": ["bullets"], "additionalProperties": false},
            {"properties": {"numbered": strings}, "required": ["numbered"], "additionalProperties": false},
            {"properties": {"table": table}, "required": ["table"], "additionalProperties": false},
            {"properties": {"page_break": {"const": true}}, "required": ["page_break"], "additionalProperties": false}
        ]});
        let make = |kind: ArtifactKind, schema: Value, description: &str| -> Box<dyn Tool> {
            Box::new(ArtifactTool {
                kind,
                spec: spec(tool_name(kind), description, schema),
                source: self.clone(),
            })
        };
        vec![
            make(
                ArtifactKind::Document,
                json!({"type": "object", "properties": {
                    "path": path, "title": {"type": "string"},
                    "blocks": {"type": "array", "items": block}
                }, "required": ["path", "blocks"], "additionalProperties": false}),
                "Create a Word document (.docx) from blocks: headings, paragraphs (**bold**, *italic*, `code`), bulleted and numbered lists, tables (first row = header), page breaks. Signed provenance is written beside it.",
            ),
            make(
                ArtifactKind::Spreadsheet,
                json!({"type": "object", "properties": {
                    "path": path,
                    "sheets": {"type": "array", "minItems": 1, "items": {"type": "object", "properties": {
                        "name": {"type": "string", "minLength": 1},
                        "rows": {"type": "array", "items": {"type": "array", "items": cell}},
                        "widths": {"type": "array", "items": {"type": "number"}},
                        "freeze": {"type": "string"}
                    }, "required": ["name", "rows"], "additionalProperties": false}}
                }, "required": ["path", "sheets"], "additionalProperties": false}),
                "Create an Excel workbook (.xlsx): sheets of typed cells (string, number, bool, null, {\"formula\": \"=...\"}), the first row a bold header, optional column widths and frozen panes (\"B2\"). Signed provenance is written beside it.",
            ),
            make(
                ArtifactKind::Presentation,
                json!({"type": "object", "properties": {
                    "path": path,
                    "slides": {"type": "array", "minItems": 1, "items": {"type": "object", "properties": {
                        "title": {"type": "string"},
                        "bullets": strings,
                        "columns": {"type": "array", "items": strings, "minItems": 2, "maxItems": 2},
                        "table": table,
                        "notes": {"type": "string"}
                    }, "required": ["title"], "additionalProperties": false}}
                }, "required": ["path", "slides"], "additionalProperties": false}),
                "Create a PowerPoint presentation (.pptx): each slide a title with bullets, two columns or a table, and optional speaker notes. Signed provenance is written beside it.",
            ),
            make(
                ArtifactKind::Report,
                json!({"type": "object", "properties": {
                    "path": path, "markdown": {"type": "string"}
                }, "required": ["path", "markdown"], "additionalProperties": false}),
                "Create a report from Markdown: a .md file as given, or a self-contained .html page. Signed provenance is written beside it.",
            ),
        ]
    }
}

fn tool_name(kind: ArtifactKind) -> &'static str {
    match kind {
        ArtifactKind::Document => "create_document",
        ArtifactKind::Spreadsheet => "create_spreadsheet",
        ArtifactKind::Presentation => "create_presentation",
        ArtifactKind::Report => "create_report",
    }
}

struct ArtifactTool {
    kind: ArtifactKind,
    spec: ToolSpec,
    source: Artifacts,
}

fn failed(code: &str, message: &str) -> EffectResult {
    EffectResult::failed(code, message)
}

/// What a spec generates: the bytes, the outline a person is shown, formulas neutralized.
struct Generated {
    bytes: Vec<u8>,
    outline: String,
    neutralized: Neutralized,
}

fn outline_cells(rows: &[Vec<crate::spec::Cell>]) -> String {
    rows.iter()
        .map(|r| {
            format!(
                "| {} |\n",
                r.iter().map(|c| c.text()).collect::<Vec<_>>().join(" | ")
            )
        })
        .collect()
}

/// Generates the file of `kind` from `input` (the call's arguments; `path` names the
/// extension). Deterministic: the executor calls it again and must get the same bytes.
fn generate(
    kind: ArtifactKind,
    input: &Value,
    path: &str,
    untrusted: bool,
) -> Result<Generated, ArtifactError> {
    let ext = path
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    let want = |expected: &'static str, ok: &[&str]| {
        if ok.contains(&ext.as_str()) {
            Ok(())
        } else {
            Err(ArtifactError::Extension {
                tool: tool_name(kind),
                expected,
                path: path.to_owned(),
            })
        }
    };
    match kind {
        ArtifactKind::Document => {
            want(".docx", &["docx"])?;
            let doc = Document::parse(input)?;
            let mut outline = doc
                .title
                .as_ref()
                .map(|t| format!("= {t} =\n"))
                .unwrap_or_default();
            for b in &doc.blocks {
                outline.push_str(&match b {
                    Block::Heading { text, level } => {
                        format!("{} {text}\n", "#".repeat(usize::from(*level)))
                    }
                    Block::Paragraph(p) => format!("{p}\n"),
                    Block::Bullets(items) => items.iter().map(|i| format!("- {i}\n")).collect(),
                    Block::Numbered(items) => items
                        .iter()
                        .enumerate()
                        .map(|(n, i)| format!("{}. {i}\n", n + 1))
                        .collect(),
                    Block::Table(rows) => outline_cells(rows),
                    Block::PageBreak => "--- page break ---\n".to_owned(),
                });
            }
            Ok(Generated {
                bytes: render::docx(&doc)?,
                outline,
                neutralized: Neutralized::default(),
            })
        }
        ArtifactKind::Spreadsheet => {
            want(".xlsx", &["xlsx"])?;
            let wb = Workbook::parse(input)?;
            let (bytes, neutralized) = render::xlsx(&wb.sheets, untrusted)?;
            let outline = wb
                .sheets
                .iter()
                .map(|s| format!("[sheet {}]\n{}", s.name, outline_cells(&s.rows)))
                .collect();
            Ok(Generated {
                bytes,
                outline,
                neutralized,
            })
        }
        ArtifactKind::Presentation => {
            want(".pptx", &["pptx"])?;
            let deck = Deck::parse(input)?;
            let mut outline = String::new();
            for (i, s) in deck.slides.iter().enumerate() {
                outline.push_str(&format!("[slide {}] {}\n", i + 1, s.title));
                for b in &s.bullets {
                    outline.push_str(&format!("- {b}\n"));
                }
                if let Some((l, r)) = &s.columns {
                    outline.push_str(&format!(
                        "left: {}\nright: {}\n",
                        l.join("; "),
                        r.join("; ")
                    ));
                }
                if let Some(t) = &s.table {
                    outline.push_str(&outline_cells(t));
                }
                if let Some(n) = &s.notes {
                    outline.push_str(&format!("notes: {n}\n"));
                }
            }
            Ok(Generated {
                bytes: render::pptx(&deck)?,
                outline,
                neutralized: Neutralized::default(),
            })
        }
        ArtifactKind::Report => {
            want(".md or .html", &["md", "markdown", "html", "htm"])?;
            let markdown = input
                .get("markdown")
                .and_then(Value::as_str)
                .ok_or_else(|| ArtifactError::Invalid("markdown: expected a string".into()))?;
            if markdown.len() > 4 * 1024 * 1024 {
                return Err(ArtifactError::TooLarge(
                    "the report is over 4 MiB of Markdown".into(),
                ));
            }
            Ok(Generated {
                bytes: render::report(markdown, matches!(ext.as_str(), "html" | "htm")),
                outline: markdown.to_owned(),
                neutralized: Neutralized::default(),
            })
        }
    }
}

/// The input an artifact is generated from: the call's arguments without the path (the path
/// is the action's own), whether the run had seen untrusted content, and the run's model,
/// policy and profiles the provenance names (read from the run's log when the call is
/// normalized; an executor is not handed the run's context).
fn decided_spec(args: &Value, run: Option<&warrant_kernel::RunContext>) -> Value {
    let mut input = args.clone();
    if let Some(o) = input.as_object_mut() {
        o.remove("path");
    }
    json!({
        "input": input,
        "untrusted": run.is_some_and(|r| r.seen_untrusted),
        "model": run.map(|r| r.model.clone()),
        "policy_digest": run.map(|r| r.policy_digest.clone()),
        "profiles_digest": run.and_then(|r| r.profiles_digest.clone()),
    })
}

fn spec_str(spec: &Value, key: &str) -> Option<String> {
    spec.get(key).and_then(Value::as_str).map(str::to_owned)
}

impl Tool for ArtifactTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn worst_class(&self) -> Option<warrant_core::RiskClass> {
        Some(warrant_core::RiskClass::Change)
    }

    fn normalize(&self, args: &Value, env: &ToolEnv) -> Result<Vec<Action>, Refusal> {
        let raw = args.get("path").and_then(Value::as_str).unwrap_or_default();
        let path = warrant_tools::normalize_path(env, raw)?;
        if let Some(redactor) = &self.source.redactor {
            let (_, found) = redactor.redact_json(args);
            if !found.is_empty() {
                let rules = found.counts.keys().cloned().collect::<Vec<_>>().join(", ");
                return Err(Refusal::of(&ArtifactError::Secret { rules }));
            }
        }
        let untrusted = env.run.as_ref().is_some_and(|r| r.seen_untrusted);
        let spec = decided_spec(args, env.run.as_ref());
        let generated = generate(self.kind, &spec["input"], path.as_str(), untrusted)
            .map_err(|e| Refusal::of(&e))?;
        let content = generated.outline;
        let write = if warrant_exec::fs::exists(&path) {
            Action::FsWrite {
                path: path.clone(),
                content,
            }
        } else {
            Action::FsCreate {
                path: path.clone(),
                content,
            }
        };
        Ok(vec![
            write,
            Action::ArtifactCreate {
                path,
                kind: self.kind,
                digest: Digest::of_bytes(&generated.bytes),
                spec,
            },
        ])
    }

    fn base(&self, actions: &[Action], _env: &ToolEnv) -> Value {
        Value::Array(
            actions
                .iter()
                .map(|a| {
                    FsWrite::of_action(a).map_or(Value::Null, |w| {
                        json!(warrant_exec::fs::content_digest(&w.path))
                    })
                })
                .collect(),
        )
    }

    fn present(&self, actions: &[Action], env: &ToolEnv) -> Presentation {
        let mut title = String::new();
        let mut body = String::new();
        for a in actions {
            if let Action::ArtifactCreate {
                path, kind, digest, ..
            } = a
            {
                let shown = warrant_core::render::inline(
                    &path
                        .relative_to(&env.workspace)
                        .unwrap_or_else(|| path.as_str().to_owned()),
                )
                .into_owned();
                title = format!("create {} {shown}", kind.as_str());
                body.insert_str(
                    0,
                    &format!(
                        "{} {shown} ({digest}), with signed provenance beside it\n",
                        kind.as_str()
                    ),
                );
            }
            if let Action::FsWrite { content, .. } | Action::FsCreate { content, .. } = a {
                body.push_str(content);
            }
        }
        Presentation { title, body }
    }

    fn execute(
        &self,
        actions: &[Authorized<Action>],
        env: &ToolEnv,
        _may_read: ReadFilter<'_>,
        _stop: StopCheck<'_>,
    ) -> EffectResult {
        let write = actions.iter().find_map(Authorized::narrow::<FsWrite>);
        let artifact = actions
            .iter()
            .find_map(Authorized::narrow::<ArtifactCreate>);
        let (Some(write), Some(artifact)) = (write, artifact) else {
            return failed(
                "W-TOOL-004",
                "an artifact needs its authorized fs.write/fs.create and artifact.create",
            );
        };
        match self.make(&write, &artifact, env) {
            Ok(result) => EffectResult { ok: true, result },
            Err((code, message)) => failed(code, &message),
        }
    }
}

/// `FsWrite::of` under a name that does not clash with `Payload` imports.
trait OfAction {
    fn of_action(a: &Action) -> Option<FsWrite>;
}

impl OfAction for FsWrite {
    fn of_action(a: &Action) -> Option<FsWrite> {
        <FsWrite as warrant_core::Payload>::of(a)
    }
}

impl ArtifactTool {
    fn make(
        &self,
        write: &Authorized<FsWrite>,
        artifact: &Authorized<ArtifactCreate>,
        env: &ToolEnv,
    ) -> Result<Value, (&'static str, String)> {
        let err = |e: ArtifactError| (e.code(), e.to_string());
        let a = artifact.get();
        let untrusted = a
            .spec
            .get("untrusted")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        if artifact.seen_untrusted() && !untrusted {
            return Err(err(ArtifactError::TaintChanged));
        }
        let input = a.spec.get("input").cloned().unwrap_or(Value::Null);
        let generated = generate(a.kind, &input, a.path.as_str(), untrusted).map_err(err)?;
        let name = a.path.file_name().to_owned();
        let principal = artifact.principal();
        let predicate = Predicate {
            run: artifact.run().as_str().to_owned(),
            actor: principal.actor.clone(),
            tenant: principal.tenant.clone(),
            principal_kind: principal.kind.as_str().to_owned(),
            on_behalf_of: principal.on_behalf_of.clone(),
            model: spec_str(&a.spec, "model").unwrap_or_default(),
            tool: tool_name(a.kind).to_owned(),
            kind: a.kind.as_str().to_owned(),
            path: a
                .path
                .relative_to(&env.workspace)
                .unwrap_or_else(|| a.path.as_str().to_owned()),
            effect_seq: artifact.started_seq(),
            input_digest: digest_of(&input)
                .map(|d| d.as_str().to_owned())
                .unwrap_or_default(),
            approved_by_person: artifact.by_person(),
            approved_by: artifact
                .approver()
                .map(|a| format!("{}@{} ({})", a.actor, a.tenant, a.via)),
            untrusted_input: untrusted,
            neutralized_formulas: generated.neutralized.cells.clone(),
            policy_digest: spec_str(&a.spec, "policy_digest").unwrap_or_default(),
            profiles_digest: spec_str(&a.spec, "profiles_digest"),
            created_at: self.source.clock.now().rfc3339(),
            generator: concat!("warrant-artifacts ", env!("CARGO_PKG_VERSION")).to_owned(),
        };
        let statement = Statement::new(
            vec![Subject::sha256(&name, &generated.bytes)],
            PREDICATE_TYPE,
            predicate,
        );
        let envelope = statement
            .seal(&self.source.key)
            .map_err(|e| err(ArtifactError::Sign(e.to_string())))?;
        let line = envelope.to_line() + "\n";
        let (receipt, side) =
            warrant_exec::fs::write_artifact(write, artifact, &generated.bytes, line.as_bytes())
                .map_err(|e| (e.code(), e.to_string()))?;
        Ok(json!({
            "path": receipt.path,
            "kind": a.kind,
            "bytes": receipt.bytes,
            "created": receipt.created,
            "sha256": a.digest,
            "provenance": side.path,
            "kid": self.source.key.kid(),
            "untrusted_input": untrusted,
            "neutralized_formulas": generated.neutralized.cells,
        }))
    }
}
