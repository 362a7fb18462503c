//! `catalog_list {path?}` and `catalog_describe {table}`: the catalog tools, offered to agents
//! as one `ToolSource` over the configured catalogs. Each normalizes into `catalog.list` /
//! `catalog.read` on `catalog/<name>/<ns…>[/<table>]` before anything is read; the executor
//! calls the catalog only with the action the ring authorized.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};
use warrant_core::{Action, CatalogList, CatalogRead, ToolSpec};
use warrant_kernel::{
    Authorized, EffectResult, Presentation, ReadFilter, Refusal, StopCheck, Tool, ToolEnv,
};
use warrant_tools::ToolSource;

use crate::{CatalogClient, CatalogError, describe, parse_path, render_path};

/// The configured catalogs, by name, and their tools.
#[derive(Clone, Debug)]
pub struct Catalogs {
    clients: Arc<BTreeMap<String, Arc<CatalogClient>>>,
}

impl Catalogs {
    pub fn new(clients: Vec<CatalogClient>) -> Self {
        Self {
            clients: Arc::new(
                clients
                    .into_iter()
                    .map(|c| (c.name().to_owned(), Arc::new(c)))
                    .collect(),
            ),
        }
    }

    pub fn names(&self) -> Vec<String> {
        self.clients.keys().cloned().collect()
    }

    fn client(&self, name: &str) -> Result<&Arc<CatalogClient>, CatalogError> {
        self.clients
            .get(name)
            .ok_or_else(|| CatalogError::UnknownCatalog {
                name: name.to_owned(),
                known: if self.clients.is_empty() {
                    "none (add a [catalog.<name>] table)".to_owned()
                } else {
                    self.names().join(", ")
                },
            })
    }

    /// A path's catalog (configured) and the levels after it.
    fn split(&self, path: &str) -> Result<(String, Vec<String>), CatalogError> {
        let mut parts = parse_path(path)?;
        let catalog = parts.remove(0);
        self.client(&catalog)?;
        Ok((catalog, parts))
    }
}

impl ToolSource for Catalogs {
    fn name(&self) -> &str {
        "catalog"
    }

    fn tools(&self) -> Vec<Box<dyn Tool>> {
        vec![
            Box::new(List {
                spec: ToolSpec {
                    name: "catalog_list".into(),
                    description: "List what a data catalog holds. Without a path: the configured catalogs and their top-level namespaces. With a dotted path (`catalog.namespace.child`): that namespace's child namespaces and tables. Write `\\.` for a dot inside a name.".into(),
                    input_schema: json!({"type": "object", "properties": {
                        "path": {"type": "string", "minLength": 1}
                    }, "additionalProperties": false}),
                },
                catalogs: self.clone(),
            }),
            Box::new(Describe {
                spec: ToolSpec {
                    name: "catalog_describe".into(),
                    description: "Describe one table of a data catalog by its dotted path (`catalog.namespace.table`): columns, partitioning, properties and the current snapshot.".into(),
                    input_schema: json!({"type": "object", "properties": {
                        "table": {"type": "string", "minLength": 1}
                    }, "required": ["table"], "additionalProperties": false}),
                },
                catalogs: self.clone(),
            }),
        ]
    }
}

fn dotted(catalog: &str, levels: &[String]) -> String {
    let mut all = vec![catalog.to_owned()];
    all.extend(levels.iter().cloned());
    render_path(&all)
}

fn title(actions: &[Action], verb: &str) -> Presentation {
    Presentation {
        title: actions
            .iter()
            .map(|a| format!("{verb} {}", a.target()))
            .collect::<Vec<_>>()
            .join("; "),
        body: String::new(),
    }
}

struct List {
    spec: ToolSpec,
    catalogs: Catalogs,
}

impl Tool for List {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn worst_class(&self) -> Option<warrant_core::RiskClass> {
        Some(warrant_core::RiskClass::Read)
    }

    fn normalize(&self, args: &Value, _env: &ToolEnv) -> Result<Vec<Action>, Refusal> {
        match args.get("path").and_then(Value::as_str) {
            None => {
                if self.catalogs.clients.is_empty() {
                    return Err(Refusal::of(&CatalogError::UnknownCatalog {
                        name: String::new(),
                        known: "none (add a [catalog.<name>] table)".to_owned(),
                    }));
                }
                Ok(self
                    .catalogs
                    .names()
                    .into_iter()
                    .map(|catalog| Action::CatalogList {
                        catalog,
                        namespace: Vec::new(),
                    })
                    .collect())
            }
            Some(path) => {
                let (catalog, namespace) =
                    self.catalogs.split(path).map_err(|e| Refusal::of(&e))?;
                Ok(vec![Action::CatalogList { catalog, namespace }])
            }
        }
    }

    fn present(&self, actions: &[Action], _env: &ToolEnv) -> Presentation {
        title(actions, "list")
    }

    fn execute(
        &self,
        actions: &[Authorized<Action>],
        _env: &ToolEnv,
        _may_read: ReadFilter<'_>,
        _stop: StopCheck<'_>,
    ) -> EffectResult {
        let mut listed = Vec::new();
        for a in actions {
            let Some(l) = a.narrow::<CatalogList>() else {
                return EffectResult::failure(&CatalogError::BadName(
                    "catalog_list was handed another action".into(),
                ));
            };
            let CatalogList { catalog, namespace } = l.get();
            let listing = match self
                .catalogs
                .client(catalog)
                .and_then(|c| c.list(namespace))
            {
                Ok(l) => l,
                Err(e) => return EffectResult::failure(&e),
            };
            let paths = |items: &[Vec<String>]| -> Vec<String> {
                items.iter().map(|levels| dotted(catalog, levels)).collect()
            };
            let mut v = json!({
                "path": dotted(catalog, namespace),
                "namespaces": paths(&listing.namespaces),
            });
            if !namespace.is_empty() {
                v["tables"] = json!(paths(&listing.tables));
            }
            if listing.truncated {
                v["truncated"] = json!(format!(
                    "more than {} entries: list a namespace further down",
                    crate::client::MAX_ENTRIES
                ));
            }
            listed.push(v);
        }
        EffectResult {
            ok: true,
            result: json!({ "listed": listed }),
        }
    }
}

struct Describe {
    spec: ToolSpec,
    catalogs: Catalogs,
}

impl Tool for Describe {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn worst_class(&self) -> Option<warrant_core::RiskClass> {
        Some(warrant_core::RiskClass::Read)
    }

    fn normalize(&self, args: &Value, _env: &ToolEnv) -> Result<Vec<Action>, Refusal> {
        let path = args
            .get("table")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let (catalog, mut levels) = self.catalogs.split(path).map_err(|e| Refusal::of(&e))?;
        if levels.len() < 2 {
            return Err(Refusal::of(&CatalogError::BadName(format!(
                "{path:?} names no table: write catalog.namespace.table (a table always lives in a namespace)"
            ))));
        }
        let table = levels.pop().unwrap_or_default();
        Ok(vec![Action::CatalogRead {
            catalog,
            namespace: levels,
            table,
        }])
    }

    fn present(&self, actions: &[Action], _env: &ToolEnv) -> Presentation {
        title(actions, "describe")
    }

    fn execute(
        &self,
        actions: &[Authorized<Action>],
        _env: &ToolEnv,
        _may_read: ReadFilter<'_>,
        _stop: StopCheck<'_>,
    ) -> EffectResult {
        let mut tables = Vec::new();
        for a in actions {
            let Some(r) = a.narrow::<CatalogRead>() else {
                return EffectResult::failure(&CatalogError::BadName(
                    "catalog_describe was handed another action".into(),
                ));
            };
            let CatalogRead {
                catalog,
                namespace,
                table,
            } = r.get();
            let mut levels = namespace.clone();
            levels.push(table.clone());
            let shown = dotted(catalog, &levels);
            let described = self
                .catalogs
                .client(catalog)
                .and_then(|c| c.load_table(namespace, table))
                .and_then(|raw| describe(catalog, &shown, raw));
            match described {
                Ok(view) => tables.push(json!(view)),
                Err(e) => return EffectResult::failure(&e),
            }
        }
        EffectResult {
            ok: true,
            result: json!({ "tables": tables }),
        }
    }
}
