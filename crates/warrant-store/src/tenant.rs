//! Tenants by construction. Every read a person's command makes goes through [`Scoped`], which
//! holds a [`Tenant`], which is made only from a resolved [`Principal`]: a caller cannot ask
//! for "a run" without saying whose. Each scoped statement filters on the `tenant` column that
//! every run, event, request and audit row carries (indexes lead with it); on PostgreSQL the
//! connection is also scoped (`warrant.tenant`) and row-level security hides other tenants' rows
//! from a statement that forgot its filter. A row of another tenant reads exactly as a missing
//! one (no existence oracle); the attempt is kept as a [`TenantRefusal`].
//!
//! Limits: the unscoped [`crate::EventStore`] methods stay for what the installation does for
//! every tenant (appending under a lease, the audit chain and its delivery, `doctor`); a write
//! is checked by the caller looking the run up through [`Scoped`] first, not by the database.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use warrant_core::{Principal, RequestId, RunId, Timestamp};

use crate::sql::{
    Dialect, EVENT_COLUMNS, REQUEST_COLUMNS, RUN_COLUMNS, Store, TxKind, Val, audit_query_sql,
    read_event, read_placed, read_request, read_run,
};
use crate::{
    AuditQuery, BudgetTotal, Lease, RequestRow, RequestStatus, RunRow, SealedRecord, StoreError,
    StoredEvent, Usage,
};

/// The tenant a scoped read acts for. Only [`Tenant::of`] makes one, from the principal the
/// identity layers resolved (or the one a run recorded when it started).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Tenant(String);

impl Tenant {
    pub fn of(principal: &Principal) -> Self {
        Self(principal.tenant.clone())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Tenant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a refused attempt tried to reach.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    Run(RunId),
    Request(RequestId),
}

impl Target {
    fn label(&self) -> String {
        match self {
            Self::Run(r) => format!("run:{r}"),
            Self::Request(q) => format!("request:{q}"),
        }
    }
}

/// An attempt by one tenant to reach a record of another, kept as a durable fact visible to
/// both (the owner sees who tried; the one who tried, what was refused).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantRefusal {
    /// The tenant that tried.
    pub tenant: String,
    pub actor: String,
    /// What was attempted (`runs show`, `approve`, `cancel` …).
    pub operation: String,
    /// `run:ID` or `request:ID`.
    pub target: String,
    /// The tenant the record belongs to.
    pub owner: String,
    pub at: Timestamp,
}

/// The tenant-scoped reads of a store. Reach them through [`Scoped`].
pub trait TenantStore {
    fn tenant_runs(&self, tenant: &Tenant) -> Result<Vec<RunRow>, StoreError>;
    fn tenant_run(&self, tenant: &Tenant, run: &RunId) -> Result<Option<RunRow>, StoreError>;
    fn tenant_events(&self, tenant: &Tenant, run: &RunId) -> Result<Vec<StoredEvent>, StoreError>;
    fn tenant_requests(
        &self,
        tenant: &Tenant,
        status: Option<RequestStatus>,
    ) -> Result<Vec<RequestRow>, StoreError>;
    fn tenant_request(
        &self,
        tenant: &Tenant,
        id: &RequestId,
    ) -> Result<Option<RequestRow>, StoreError>;
    fn tenant_audit(
        &self,
        tenant: &Tenant,
        query: &AuditQuery,
    ) -> Result<Vec<SealedRecord>, StoreError>;
    /// [`crate::EventStore::lease_next`] among the tenant's runs only.
    fn tenant_lease_next(
        &self,
        tenant: &Tenant,
        holder: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, StoreError>;
    /// Records that `actor` of `tenant` tried `operation` on `target` and was answered "not
    /// found", when the target is another tenant's (a target that exists nowhere is not
    /// recorded). Returns whether it recorded one; the caller's answer must not depend on it.
    fn refuse_tenant(
        &self,
        tenant: &Tenant,
        actor: &str,
        operation: &str,
        target: &Target,
    ) -> Result<bool, StoreError>;
    /// Refusals the tenant made or was the target of, oldest first.
    fn tenant_refusals(&self, tenant: &Tenant) -> Result<Vec<TenantRefusal>, StoreError>;
    /// What `actor` of the tenant has used over all its runs (`None`: every actor of the
    /// tenant), from the budget totals: one indexed lookup, however many runs the store holds.
    fn tenant_budget(&self, tenant: &Tenant, actor: Option<&str>) -> Result<Usage, StoreError>;
    /// Every budget total row of the tenant, by actor.
    fn tenant_budget_totals(&self, tenant: &Tenant) -> Result<Vec<BudgetTotal>, StoreError>;
}

/// A store seen by one tenant: every read filtered, every miss the same.
#[derive(Clone, Copy)]
pub struct Scoped<'a> {
    store: &'a dyn TenantStore,
    tenant: &'a Tenant,
}

impl std::fmt::Debug for Scoped<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scoped")
            .field("tenant", &self.tenant)
            .finish_non_exhaustive()
    }
}

impl<'a> Scoped<'a> {
    pub fn new(store: &'a dyn TenantStore, tenant: &'a Tenant) -> Self {
        Self { store, tenant }
    }

    pub fn tenant(&self) -> &Tenant {
        self.tenant
    }

    pub fn runs(&self) -> Result<Vec<RunRow>, StoreError> {
        self.store.tenant_runs(self.tenant)
    }

    pub fn run(&self, run: &RunId) -> Result<Option<RunRow>, StoreError> {
        self.store.tenant_run(self.tenant, run)
    }

    pub fn events(&self, run: &RunId) -> Result<Vec<StoredEvent>, StoreError> {
        self.store.tenant_events(self.tenant, run)
    }

    pub fn requests(&self, status: Option<RequestStatus>) -> Result<Vec<RequestRow>, StoreError> {
        self.store.tenant_requests(self.tenant, status)
    }

    pub fn request(&self, id: &RequestId) -> Result<Option<RequestRow>, StoreError> {
        self.store.tenant_request(self.tenant, id)
    }

    pub fn audit(&self, query: &AuditQuery) -> Result<Vec<SealedRecord>, StoreError> {
        self.store.tenant_audit(self.tenant, query)
    }

    pub fn lease_next(&self, holder: &str, ttl: Duration) -> Result<Option<Lease>, StoreError> {
        self.store.tenant_lease_next(self.tenant, holder, ttl)
    }

    pub fn refuse(
        &self,
        actor: &str,
        operation: &str,
        target: &Target,
    ) -> Result<bool, StoreError> {
        self.store
            .refuse_tenant(self.tenant, actor, operation, target)
    }

    pub fn refusals(&self) -> Result<Vec<TenantRefusal>, StoreError> {
        self.store.tenant_refusals(self.tenant)
    }

    /// What `actor` (`None`: the whole tenant) has used, from the budget totals.
    pub fn budget(&self, actor: Option<&str>) -> Result<Usage, StoreError> {
        self.store.tenant_budget(self.tenant, actor)
    }

    pub fn budget_totals(&self) -> Result<Vec<BudgetTotal>, StoreError> {
        self.store.tenant_budget_totals(self.tenant)
    }
}

/// The negative controls of the tenant tests, in debug builds only: `tenant-filter` drops the
/// `tenant = ?` predicate of scoped statements (what the PostgreSQL layer must then catch),
/// `tenant-rls` leaves the PostgreSQL connection unscoped.
pub(crate) fn disabled(what: &str) -> bool {
    if !cfg!(debug_assertions) {
        return false;
    }
    std::env::var("WARRANT_TEST_DISABLE")
        .map(|v| v.split(',').any(|w| w.trim() == what))
        .unwrap_or(false)
}

/// The predicate `column = ?n`, the one place a scoped statement filters by tenant.
pub(crate) fn filter(column: &str, n: usize) -> String {
    if disabled("tenant-filter") {
        format!("({column} = ?{n} OR TRUE)")
    } else {
        format!("{column} = ?{n}")
    }
}

/// What the connection is scoped to for the database's own layer.
fn layer(tenant: &Tenant) -> Option<&str> {
    if disabled("tenant-rls") {
        None
    } else {
        Some(tenant.as_str())
    }
}

fn read_refusal(r: &crate::sql::Row) -> Result<TenantRefusal, String> {
    Ok(TenantRefusal {
        tenant: r.text(0)?,
        actor: r.text(1)?,
        operation: r.text(2)?,
        target: r.text(3)?,
        owner: r.text(4)?,
        at: r.ts(5)?,
    })
}

fn read_usage(r: &crate::sql::Row, from: usize) -> Result<Usage, String> {
    // A sum over no rows is NULL.
    let n = |i: usize| r.opt_int(from + i).map(|v| v.unwrap_or(0).max(0) as u64);
    Ok(Usage {
        input_tokens: n(0)?,
        output_tokens: n(1)?,
        cost_nanos: n(2)?,
    })
}

impl<D: Dialect> TenantStore for Store<D> {
    fn tenant_budget(&self, tenant: &Tenant, actor: Option<&str>) -> Result<Usage, StoreError> {
        let mut tx = self.single_as(layer(tenant))?;
        let usage = match actor {
            Some(actor) => tx.row(
                &format!(
                    "SELECT input_tokens, output_tokens, cost_nanos FROM budget_totals WHERE {} AND actor = ?2",
                    filter("tenant", 1)
                ),
                &[Val::from(tenant.as_str()), Val::from(actor)],
                |r| read_usage(r, 0),
            )?,
            // Cast back to an integer: PostgreSQL sums BIGINTs as NUMERIC.
            None => tx.row(
                &format!(
                    "SELECT CAST(sum(input_tokens) AS BIGINT), CAST(sum(output_tokens) AS BIGINT), CAST(sum(cost_nanos) AS BIGINT) FROM budget_totals WHERE {}",
                    filter("tenant", 1)
                ),
                &[Val::from(tenant.as_str())],
                |r| read_usage(r, 0),
            )?,
        };
        Ok(usage.unwrap_or_default())
    }

    fn tenant_budget_totals(&self, tenant: &Tenant) -> Result<Vec<BudgetTotal>, StoreError> {
        self.single_as(layer(tenant))?.rows(
            &format!(
                "SELECT tenant, actor, input_tokens, output_tokens, cost_nanos, updated_at FROM budget_totals WHERE {} ORDER BY actor",
                filter("tenant", 1)
            ),
            &[Val::from(tenant.as_str())],
            |r| {
                Ok(BudgetTotal {
                    tenant: r.text(0)?,
                    actor: r.text(1)?,
                    usage: read_usage(r, 2)?,
                    updated_at: r.ts(5)?,
                })
            },
        )
    }

    fn tenant_runs(&self, tenant: &Tenant) -> Result<Vec<RunRow>, StoreError> {
        self.single_as(layer(tenant))?.rows(
            &format!(
                "SELECT {RUN_COLUMNS} FROM runs WHERE {} ORDER BY created_at, run_id",
                filter("tenant", 1)
            ),
            &[Val::from(tenant.as_str())],
            read_run,
        )
    }

    fn tenant_run(&self, tenant: &Tenant, run: &RunId) -> Result<Option<RunRow>, StoreError> {
        self.single_as(layer(tenant))?.row(
            &format!(
                "SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?1 AND {}",
                filter("tenant", 2)
            ),
            &[Val::from(run.as_str()), Val::from(tenant.as_str())],
            read_run,
        )
    }

    fn tenant_events(&self, tenant: &Tenant, run: &RunId) -> Result<Vec<StoredEvent>, StoreError> {
        self.single_as(layer(tenant))?.rows(
            &format!(
                "SELECT {EVENT_COLUMNS} FROM events WHERE run_id = ?1 AND {} ORDER BY seq",
                filter("tenant", 2)
            ),
            &[Val::from(run.as_str()), Val::from(tenant.as_str())],
            read_event,
        )
    }

    fn tenant_requests(
        &self,
        tenant: &Tenant,
        status: Option<RequestStatus>,
    ) -> Result<Vec<RequestRow>, StoreError> {
        let mut tx = self.single_as(layer(tenant))?;
        let order = "ORDER BY created_at, request_id";
        match status {
            None => tx.rows(
                &format!(
                    "SELECT {REQUEST_COLUMNS} FROM requests WHERE {} {order}",
                    filter("tenant", 1)
                ),
                &[Val::from(tenant.as_str())],
                read_request,
            ),
            Some(s) => tx.rows(
                &format!(
                    "SELECT {REQUEST_COLUMNS} FROM requests WHERE {} AND status = ?2 {order}",
                    filter("tenant", 1)
                ),
                &[
                    Val::from(tenant.as_str()),
                    Val::from(match s {
                        RequestStatus::Open => "open",
                        RequestStatus::Answered => "answered",
                    }),
                ],
                read_request,
            ),
        }
    }

    fn tenant_request(
        &self,
        tenant: &Tenant,
        id: &RequestId,
    ) -> Result<Option<RequestRow>, StoreError> {
        self.single_as(layer(tenant))?.row(
            &format!(
                "SELECT {REQUEST_COLUMNS} FROM requests WHERE request_id = ?1 AND {}",
                filter("tenant", 2)
            ),
            &[Val::from(id.as_str()), Val::from(tenant.as_str())],
            read_request,
        )
    }

    fn tenant_audit(
        &self,
        tenant: &Tenant,
        q: &AuditQuery,
    ) -> Result<Vec<SealedRecord>, StoreError> {
        let limit = if q.limit == 0 {
            i64::MAX
        } else {
            q.limit as i64
        };
        let (texts, times) = q.values();
        let n = texts.len() + times.len() + 1;
        let clause = q.clause(|n| format!("?{n}"));
        let scoped = if clause.is_empty() {
            format!("WHERE {}", filter("tenant", n))
        } else {
            format!("{clause} AND {}", filter("tenant", n))
        };
        let sql = audit_query_sql(&scoped, limit);
        let params: Vec<Val> = texts
            .into_iter()
            .map(Val::from)
            .chain(times.into_iter().map(Val::from))
            .chain(std::iter::once(Val::from(tenant.as_str())))
            .collect();
        self.single_as(layer(tenant))?
            .rows(&sql, &params, read_placed)
    }

    fn tenant_lease_next(
        &self,
        tenant: &Tenant,
        holder: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, StoreError> {
        self.lease_next_in(holder, ttl, Some(tenant.as_str()))
    }

    fn refuse_tenant(
        &self,
        tenant: &Tenant,
        actor: &str,
        operation: &str,
        target: &Target,
    ) -> Result<bool, StoreError> {
        let now = self.clock.now();
        // The owner is looked up by the installation, never through the caller's scope.
        let mut tx = self.begin(TxKind::Lease)?;
        let owner = match target {
            Target::Run(run) => tx.row(
                "SELECT tenant FROM runs WHERE run_id = ?1",
                &[Val::from(run.as_str())],
                |r| r.text(0),
            )?,
            Target::Request(id) => tx.row(
                "SELECT tenant FROM requests WHERE request_id = ?1",
                &[Val::from(id.as_str())],
                |r| r.text(0),
            )?,
        };
        let Some(owner) = owner.filter(|o| o != tenant.as_str()) else {
            return Ok(false);
        };
        tx.execute(
            "INSERT INTO tenant_refusals (tenant, actor, operation, target, owner, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            &[
                Val::from(tenant.as_str()),
                Val::from(actor),
                Val::from(operation),
                Val::from(target.label()),
                Val::from(owner),
                Val::from(now.millis()),
            ],
        )?;
        tx.commit()?;
        Ok(true)
    }

    fn tenant_refusals(&self, tenant: &Tenant) -> Result<Vec<TenantRefusal>, StoreError> {
        self.single_as(layer(tenant))?.rows(
            &format!(
                "SELECT tenant, actor, operation, target, owner, at FROM tenant_refusals WHERE ({} OR owner = ?1) ORDER BY at",
                filter("tenant", 1)
            ),
            &[Val::from(tenant.as_str())],
            read_refusal,
        )
    }
}
