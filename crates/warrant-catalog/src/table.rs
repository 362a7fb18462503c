//! A table's metadata as a person or model reads it: the current schema, the default partition
//! spec (with the names of the columns it partitions by), the properties and the current
//! snapshot's summary, read from an Iceberg REST `LoadTableResult`. A response that does not
//! follow the table metadata spec (a missing field, a current schema or snapshot id that names
//! nothing) is refused, saying what is wrong.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::CatalogError;

#[derive(Deserialize)]
struct LoadTableResult {
    #[serde(rename = "metadata-location", default)]
    metadata_location: Option<String>,
    metadata: Metadata,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Metadata {
    format_version: u8,
    #[serde(default)]
    table_uuid: Option<String>,
    location: String,
    #[serde(default)]
    last_updated_ms: Option<i64>,
    #[serde(default)]
    schemas: Vec<Schema>,
    /// Format version 1: the one schema.
    #[serde(default)]
    schema: Option<Schema>,
    #[serde(default)]
    current_schema_id: Option<i64>,
    #[serde(default)]
    partition_specs: Vec<Spec>,
    #[serde(default)]
    default_spec_id: Option<i64>,
    #[serde(default)]
    properties: BTreeMap<String, String>,
    #[serde(default)]
    current_snapshot_id: Option<i64>,
    #[serde(default)]
    snapshots: Vec<Snapshot>,
}

#[derive(Deserialize)]
struct Schema {
    #[serde(rename = "schema-id", default)]
    schema_id: i64,
    fields: Vec<Field>,
}

#[derive(Deserialize)]
struct Field {
    id: i64,
    name: String,
    required: bool,
    #[serde(rename = "type")]
    ty: Value,
    #[serde(default)]
    doc: Option<String>,
}

#[derive(Deserialize)]
struct Spec {
    #[serde(rename = "spec-id")]
    spec_id: i64,
    fields: Vec<SpecField>,
}

#[derive(Deserialize)]
struct SpecField {
    #[serde(rename = "source-id")]
    source_id: i64,
    name: String,
    transform: String,
}

#[derive(Deserialize)]
struct Snapshot {
    #[serde(rename = "snapshot-id")]
    snapshot_id: i64,
    #[serde(rename = "timestamp-ms")]
    timestamp_ms: i64,
    #[serde(default)]
    summary: BTreeMap<String, String>,
}

/// What `catalog_describe` and `warrant catalog describe` show of one table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TableView {
    /// The dotted path it was asked by.
    pub table: String,
    pub format_version: u8,
    pub uuid: Option<String>,
    pub location: String,
    pub metadata_location: Option<String>,
    pub last_updated_ms: Option<i64>,
    pub schema: SchemaView,
    pub partition_spec: SpecView,
    pub properties: BTreeMap<String, String>,
    pub current_snapshot: Option<SnapshotView>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SchemaView {
    pub schema_id: i64,
    pub columns: Vec<ColumnView>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ColumnView {
    pub id: i64,
    pub name: String,
    /// A primitive type's name (`long`, `decimal(9,2)`), or a nested type as the catalog gave it.
    #[serde(rename = "type")]
    pub ty: Value,
    pub required: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub doc: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SpecView {
    pub spec_id: i64,
    pub fields: Vec<SpecFieldView>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SpecFieldView {
    pub name: String,
    /// The column it is computed from.
    pub source: String,
    pub transform: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SnapshotView {
    pub snapshot_id: i64,
    pub timestamp_ms: i64,
    pub summary: BTreeMap<String, String>,
}

/// Reads a `LoadTableResult` (`raw`) of the table `table` (its dotted path, for the view and
/// messages) of catalog `catalog`.
pub fn describe(catalog: &str, table: &str, raw: Value) -> Result<TableView, CatalogError> {
    let malformed = |message: String| CatalogError::Malformed {
        catalog: catalog.to_owned(),
        what: format!("table {table}"),
        message,
    };
    let result: LoadTableResult = serde_json::from_value(raw)
        .map_err(|e| malformed(format!("the table metadata does not follow the spec: {e}")))?;
    let m = result.metadata;
    if !(1..=3).contains(&m.format_version) {
        return Err(malformed(format!(
            "format-version {} is not one this client reads (1 to 3)",
            m.format_version
        )));
    }
    let schema = match (m.current_schema_id, m.schema) {
        (Some(id), _) => m
            .schemas
            .into_iter()
            .find(|s| s.schema_id == id)
            .ok_or_else(|| malformed(format!("current-schema-id {id} names no schema")))?,
        (None, Some(s)) => s,
        (None, None) => {
            return Err(malformed(
                "it names no current schema (neither current-schema-id nor schema)".into(),
            ));
        }
    };
    let spec = match m.default_spec_id {
        Some(id) => m
            .partition_specs
            .into_iter()
            .find(|s| s.spec_id == id)
            .ok_or_else(|| malformed(format!("default-spec-id {id} names no partition spec")))?,
        None => Spec {
            spec_id: 0,
            fields: Vec::new(),
        },
    };
    let column = |id: i64| {
        schema
            .fields
            .iter()
            .find(|f| f.id == id)
            .map(|f| f.name.clone())
            .unwrap_or_else(|| format!("(field {id}, not a top-level column)"))
    };
    let partition_spec = SpecView {
        spec_id: spec.spec_id,
        fields: spec
            .fields
            .into_iter()
            .map(|f| SpecFieldView {
                source: column(f.source_id),
                name: f.name,
                transform: f.transform,
            })
            .collect(),
    };
    // -1 is "no snapshot" in format version 1.
    let current_snapshot = match m.current_snapshot_id.filter(|id| *id != -1) {
        None => None,
        Some(id) => {
            let s = m
                .snapshots
                .into_iter()
                .find(|s| s.snapshot_id == id)
                .ok_or_else(|| malformed(format!("current-snapshot-id {id} names no snapshot")))?;
            Some(SnapshotView {
                snapshot_id: s.snapshot_id,
                timestamp_ms: s.timestamp_ms,
                summary: s.summary,
            })
        }
    };
    Ok(TableView {
        table: table.to_owned(),
        format_version: m.format_version,
        uuid: m.table_uuid,
        location: m.location,
        metadata_location: result.metadata_location,
        last_updated_ms: m.last_updated_ms,
        schema: SchemaView {
            schema_id: schema.schema_id,
            columns: schema
                .fields
                .into_iter()
                .map(|f| ColumnView {
                    id: f.id,
                    name: f.name,
                    ty: f.ty,
                    required: f.required,
                    doc: f.doc,
                })
                .collect(),
        },
        partition_spec,
        properties: m.properties,
        current_snapshot,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn result(metadata: Value) -> Value {
        json!({"metadata-location": "file:///w/t/metadata/1.json", "metadata": metadata})
    }

    fn metadata() -> Value {
        json!({
            "format-version": 2, "table-uuid": "u-1", "location": "file:///w/t",
            "last-updated-ms": 5, "current-schema-id": 1,
            "schemas": [
                {"schema-id": 0, "fields": []},
                {"schema-id": 1, "fields": [
                    {"id": 1, "name": "id", "required": true, "type": "long"},
                    {"id": 2, "name": "at", "required": false, "type": "timestamptz", "doc": "when"}
                ]}
            ],
            "default-spec-id": 0,
            "partition-specs": [{"spec-id": 0, "fields": [{"source-id": 2, "field-id": 1000, "name": "at_day", "transform": "day"}]}],
            "properties": {"owner": "sales"},
            "current-snapshot-id": 7,
            "snapshots": [{"snapshot-id": 7, "timestamp-ms": 9, "summary": {"operation": "append", "added-records": "2"}}]
        })
    }

    #[test]
    fn a_table_is_described_by_its_current_schema_default_spec_and_current_snapshot() {
        let view = describe("lake", "lake.s.t", result(metadata())).unwrap();
        assert_eq!(
            serde_json::to_value(view).unwrap(),
            json!({
                "table": "lake.s.t", "format_version": 2, "uuid": "u-1", "location": "file:///w/t",
                "metadata_location": "file:///w/t/metadata/1.json", "last_updated_ms": 5,
                "schema": {"schema_id": 1, "columns": [
                    {"id": 1, "name": "id", "type": "long", "required": true},
                    {"id": 2, "name": "at", "type": "timestamptz", "required": false, "doc": "when"}
                ]},
                "partition_spec": {"spec_id": 0, "fields": [{"name": "at_day", "source": "at", "transform": "day"}]},
                "properties": {"owner": "sales"},
                "current_snapshot": {"snapshot_id": 7, "timestamp_ms": 9, "summary": {"added-records": "2", "operation": "append"}}
            })
        );
    }

    #[test]
    fn malformed_metadata_is_refused_saying_what_is_wrong() {
        let refused = |m: Value| describe("lake", "lake.s.t", m).unwrap_err().to_string();
        assert_eq!(
            refused(json!({"metadata-location": "x"})),
            "catalog `lake` answered table lake.s.t with a malformed response: the table metadata does not follow the spec: missing field `metadata`"
        );
        let mut m = metadata();
        m["current-schema-id"] = json!(4);
        assert_eq!(
            refused(result(m)),
            "catalog `lake` answered table lake.s.t with a malformed response: current-schema-id 4 names no schema"
        );
        let mut m = metadata();
        m["current-snapshot-id"] = json!(8);
        assert!(refused(result(m)).ends_with("current-snapshot-id 8 names no snapshot"));
        let mut m = metadata();
        m["schemas"][1]["fields"][0]["name"] = json!(3);
        assert!(refused(result(m)).contains("invalid type: integer `3`, expected a string"));
    }
}
