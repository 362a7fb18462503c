//! What the canonical writer costs against `serde_jcs` (the crate it replaced, kept as the
//! tests' oracle), in the same run, on the two shapes every step digests: a tool catalogue
//! (deep JSON Schemas, long descriptions) and a journal event (a small object of a few levels).
//! See docs/BENCHMARKS.md.
#![allow(clippy::unwrap_used)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};

fn catalogue() -> Value {
    let tools: Vec<Value> = (0..22)
        .map(|i| {
            json!({
                "name": format!("tool_{i}"),
                "description": "Reads or writes inside the workspace; paths are relative to its root and may not leave it. ".repeat(3),
                "input_schema": {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["path", "content"],
                    "properties": {
                        "path": {"type": "string", "description": "Workspace-relative path."},
                        "content": {"type": "string", "description": "Text to write."},
                        "argv": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                        "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 600_000},
                        "options": {"type": "object", "properties": {
                            "recursive": {"type": "boolean"},
                            "mode": {"type": "string", "enum": ["text", "bytes", "lines"]}
                        }}
                    }
                }
            })
        })
        .collect();
    Value::from(tools)
}

fn event() -> Value {
    json!({
        "run": "run-0000000000aa", "seq": 12, "kind": "effect_completed", "version": 1,
        "recorded_at": "2026-12-06T21:40:00.123Z",
        "payload": {"call": "c-1", "action": {"verb": "fs.write", "path": "src/lib.rs"},
                    "result": {"ok": true, "bytes": 1234, "digest": "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"}}
    })
}

fn canonical(c: &mut Criterion) {
    for (name, value) in [("catalogue", catalogue()), ("event", event())] {
        assert_eq!(
            warrant_core::digest::canonical_json(&value).unwrap(),
            serde_jcs::to_string(&value).unwrap()
        );
        c.bench_function(&format!("canonical_{name}_warrant"), |b| {
            b.iter(|| warrant_core::digest::digest_of(black_box(&value)).unwrap());
        });
        c.bench_function(&format!("canonical_{name}_serde_jcs"), |b| {
            b.iter(|| {
                let text = serde_jcs::to_vec(black_box(&value)).unwrap();
                warrant_core::digest::Digest::of_bytes(&text)
            });
        });
    }
}

criterion_group!(benches, canonical);
criterion_main!(benches);
