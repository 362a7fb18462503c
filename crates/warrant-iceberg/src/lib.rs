//! Shared memory published into an Apache Iceberg table through a REST catalog: each published
//! entry is one Parquet data file appended as one snapshot (a fast append), with its provenance
//! as columns (entry id, namespace, author and on-behalf-of, run, publisher, publish run,
//! published_at, reason, content and draft digests, text). The snapshot carries the entry id
//! in its summary (`warrant.entry-id`), so appending the same entry again (a replayed publish)
//! finds that snapshot and adds nothing. The table (and its namespace) is created on the first
//! publish when missing.
//!
//! The iceberg crate is async; each append runs on a current-thread runtime of its own, so the
//! synchronous executor that calls it never sees async. This crate is the only one that builds
//! iceberg, arrow and parquet.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StringArray, TimestampMicrosecondArray};
use iceberg::spec::{DataFileFormat, NestedField, PrimitiveType, Schema, Type};
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::writer::base_writer::data_file_writer::DataFileWriterBuilder;
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::file_writer::location_generator::{
    DefaultFileNameGenerator, DefaultLocationGenerator,
};
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::{IcebergWriter, IcebergWriterBuilder};
use iceberg::{Catalog, CatalogBuilder, NamespaceIdent, TableCreation, TableIdent};
use iceberg_catalog_rest::RestCatalogBuilder;
use parquet::file::properties::WriterProperties;
use serde_json::{Value, json};
use warrant_memory::{Published, SharedSink};

/// The snapshot summary property that names the entry a snapshot appended.
pub const ENTRY_PROPERTY: &str = "warrant.entry-id";

/// Resolves the catalog's connection properties (`uri`, `prefix`, `token` or `credential`,
/// `header.*`, …) when an append runs, so credentials are read only then.
pub type Properties = Arc<dyn Fn() -> Result<HashMap<String, String>, String> + Send + Sync>;

/// The table published entries go to, in one REST catalog.
pub struct IcebergSink {
    /// The catalog's name as configured, for messages.
    pub catalog: String,
    pub namespace: Vec<String>,
    pub table: String,
    pub properties: Properties,
}

impl std::fmt::Debug for IcebergSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IcebergSink")
            .field("catalog", &self.catalog)
            .field("namespace", &self.namespace)
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

/// The columns, in order; the first four and the digests are required.
fn schema() -> iceberg::Result<Schema> {
    let s = |id, name: &str, required| {
        let t = Type::Primitive(PrimitiveType::String);
        Arc::new(if required {
            NestedField::required(id, name, t)
        } else {
            NestedField::optional(id, name, t)
        })
    };
    Schema::builder()
        .with_fields(vec![
            s(1, "entry_id", true),
            s(2, "namespace", true),
            s(3, "text", true),
            s(4, "tags", true),
            s(5, "author", true),
            s(6, "on_behalf_of", false),
            s(7, "run", false),
            s(8, "publisher", true),
            s(9, "publish_run", false),
            Arc::new(NestedField::required(
                10,
                "published_at",
                Type::Primitive(PrimitiveType::Timestamptz),
            )),
            s(11, "reason", true),
            s(12, "content_digest", true),
            s(13, "draft", true),
            s(14, "draft_digest", true),
        ])
        .build()
}

fn failed(what: &str, e: impl std::fmt::Display) -> (String, String) {
    ("W-MEMORY-016".to_owned(), format!("{what}: {e}"))
}

impl IcebergSink {
    fn ident(&self) -> Result<TableIdent, (String, String)> {
        let ns = NamespaceIdent::from_vec(self.namespace.clone())
            .map_err(|e| failed("the namespace", e))?;
        Ok(TableIdent::new(ns, self.table.clone()))
    }

    fn shown(&self) -> String {
        format!(
            "{}.{}.{}",
            self.catalog,
            self.namespace.join("."),
            self.table
        )
    }

    async fn append_async(&self, entry: &Published) -> Result<Value, (String, String)> {
        let props = (self.properties)().map_err(|e| failed("the catalog's credentials", e))?;
        let catalog = RestCatalogBuilder::default()
            .with_storage_factory(Arc::new(iceberg::io::LocalFsStorageFactory))
            .load(self.catalog.clone(), props)
            .await
            .map_err(|e| failed("the catalog", e))?;
        let ident = self.ident()?;
        let reach = |e: iceberg::Error| failed(&format!("table {}", self.shown()), e);
        // Loaded, not probed with HEAD (not every catalog serves it): a missing table, and its
        // namespace when missing too, is created.
        let table = match catalog.load_table(&ident).await {
            Ok(t) => t,
            Err(e) if e.kind() == iceberg::ErrorKind::TableNotFound => {
                match catalog
                    .create_namespace(ident.namespace(), HashMap::new())
                    .await
                {
                    Ok(_) => {}
                    Err(e) if e.kind() == iceberg::ErrorKind::NamespaceAlreadyExists => {}
                    Err(e) => return Err(reach(e)),
                }
                let creation = TableCreation::builder()
                    .name(self.table.clone())
                    .schema(schema().map_err(reach)?)
                    .properties([(
                        "comment".to_owned(),
                        "Shared memory published through Warrant: one row per reviewed entry, with its provenance.".to_owned(),
                    )])
                    .build();
                catalog
                    .create_table(ident.namespace(), creation)
                    .await
                    .map_err(reach)?
            }
            Err(e) => return Err(reach(e)),
        };
        // Appended before (a replayed publish): that snapshot, nothing new.
        if let Some(s) = table.metadata().snapshots().find(|s| {
            s.summary().additional_properties.get(ENTRY_PROPERTY) == Some(&entry.entry_id)
        }) {
            return Ok(self.landed(s.snapshot_id(), true));
        }
        let batch = batch(&table, entry).map_err(reach)?;
        let metadata = table.metadata();
        let parquet = ParquetWriterBuilder::new(
            WriterProperties::builder().build(),
            metadata.current_schema().clone(),
        );
        let rolling = RollingFileWriterBuilder::new_with_default_file_size(
            parquet,
            table.file_io().clone(),
            DefaultLocationGenerator::new(metadata).map_err(reach)?,
            DefaultFileNameGenerator::new(
                "memory".to_owned(),
                Some(entry.entry_id.clone()),
                DataFileFormat::Parquet,
            ),
        );
        let mut writer = DataFileWriterBuilder::new(rolling)
            .build(None)
            .await
            .map_err(reach)?;
        writer.write(batch).await.map_err(reach)?;
        let files = writer.close().await.map_err(reach)?;
        let tx = Transaction::new(&table);
        let tx = tx
            .fast_append()
            .add_data_files(files)
            .set_snapshot_properties(HashMap::from([(
                ENTRY_PROPERTY.to_owned(),
                entry.entry_id.clone(),
            )]))
            .apply(tx)
            .map_err(reach)?;
        let committed = tx.commit(&catalog).await.map_err(reach)?;
        let snapshot = committed
            .metadata()
            .snapshots()
            .find(|s| {
                s.summary().additional_properties.get(ENTRY_PROPERTY) == Some(&entry.entry_id)
            })
            .map(|s| s.snapshot_id())
            .ok_or_else(|| {
                failed(
                    &format!("table {}", self.shown()),
                    "the commit succeeded but its snapshot is not in the table's metadata",
                )
            })?;
        Ok(self.landed(snapshot, false))
    }

    fn landed(&self, snapshot: i64, again: bool) -> Value {
        json!({
            "backend": "iceberg",
            "table": self.shown(),
            "snapshot_id": snapshot,
            "appended_before": again,
            "note": format!("iceberg {} snapshot {snapshot}", self.shown()),
        })
    }
}

/// One row: the entry and its provenance, in the table's current schema.
fn batch(table: &iceberg::table::Table, e: &Published) -> iceberg::Result<RecordBatch> {
    let arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(
        table.metadata().current_schema(),
    )?);
    let text = |v: &str| Arc::new(StringArray::from(vec![v])) as ArrayRef;
    let maybe = |v: &Option<String>| Arc::new(StringArray::from(vec![v.clone()])) as ArrayRef;
    let at = chrono_micros(&e.published_at).ok_or_else(|| {
        iceberg::Error::new(
            iceberg::ErrorKind::DataInvalid,
            format!("published_at {:?} is not an RFC 3339 time", e.published_at),
        )
    })?;
    let tags = serde_json::to_string(&e.tags).unwrap_or_else(|_| "[]".to_owned());
    let columns = vec![
        text(&e.entry_id),
        text(&e.namespace),
        text(&e.text),
        text(&tags),
        text(&e.author),
        maybe(&e.on_behalf_of),
        maybe(&e.run),
        text(&e.publisher),
        maybe(&e.publish_run),
        Arc::new(TimestampMicrosecondArray::from(vec![at]).with_timezone("+00:00")) as ArrayRef,
        text(&e.reason),
        text(&e.content_digest),
        text(&e.draft),
        text(&e.draft_digest),
    ];
    RecordBatch::try_new(arrow, columns).map_err(|err| {
        iceberg::Error::new(
            iceberg::ErrorKind::DataInvalid,
            format!("the row does not fit the table's schema: {err}"),
        )
    })
}

/// Microseconds since the epoch of an RFC 3339 time (`2026-12-05T21:00:00.123Z`).
fn chrono_micros(at: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(at)
        .ok()
        .map(|t| t.timestamp_micros())
}

impl SharedSink for IcebergSink {
    fn append(&self, entry: &Published) -> Result<Value, (String, String)> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| failed("the runtime for the append", e))?;
        runtime.block_on(self.append_async(entry))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_schema_builds_and_times_parse() {
        assert_eq!(schema().unwrap().as_struct().fields().len(), 14);
        assert_eq!(chrono_micros("1970-01-01T00:00:01.5Z"), Some(1_500_000));
        assert_eq!(chrono_micros("yesterday"), None);
    }
}
