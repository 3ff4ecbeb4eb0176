//! Workflows' own redelivery policies and each execution's delivery history for
//! [`PostgresBackend`] (lease-core `redelivery` and `history`, RFC 002 "Redelivery delay"),
//! one statement each (`redelivery/*.sql`). The `ExecutionClient` methods in `execution.rs`
//! delegate here.
//!
//! Storage (schema v17): policies are rows of `redelivery_policies`, copied by the claim
//! onto the row it takes (`redelivery_base_ms`, `_factor`, `_cap_ms`), which every delay
//! after that delivery reads (`claimable_after`). The history is the row's `deliveries`
//! jsonb plus the latest delivery, which the row's own columns describe while they can
//! (schema v19: its token, `delivery_claimed_at`, and the status and end instant of a
//! terminal acknowledgement). The statements that start and end deliveries fold a delivery
//! into the jsonb, in the UPDATE they already run, only once the columns stop describing it
//! (`execution/claim_take.sql`, `acknowledge*.sql`, `release.sql`, `control/cancel.sql`,
//! `attempts/retry_dead.sql`), so the drain's claim and terminal acknowledgement write none.

use lease_core::{
    DeliveryEnd, DeliveryEntry, DeliveryHistory, ErrorNote, ExecutionId, LeaseError,
    RedeliveryPolicies, RedeliveryPolicy, Result, Timestamp, WorkflowName,
};
use sqlx::postgres::PgRow;

use crate::backend::PostgresBackend;
use crate::error::{Effect, protocol};
use crate::rows::{self, EXECUTION_COLUMNS, col, stored_name};
use crate::statements::{RedeliverySql, Renderer};

const SET_POLICY: &str = include_str!("redelivery/set_policy.sql");
const REMOVE_POLICY: &str = include_str!("redelivery/remove_policy.sql");
const POLICIES: &str = include_str!("redelivery/policies.sql");
const DELIVERIES: &str = include_str!("redelivery/deliveries.sql");

/// `deliveries.sql`'s columns after the record: now, the earlier count, then the arrays.
const HISTORY_NOW: usize = EXECUTION_COLUMNS;
const HISTORY_EARLIER: usize = EXECUTION_COLUMNS + 1;
const HISTORY_ENTRIES: usize = EXECUTION_COLUMNS + 2;

/// This module's statements, rendered for one schema.
pub(crate) fn statements(r: &Renderer) -> RedeliverySql {
    RedeliverySql {
        set_policy: r.render(SET_POLICY),
        remove_policy: r.render(REMOVE_POLICY),
        policies: r.render(POLICIES),
        deliveries: r.render(DELIVERIES),
    }
}

impl PostgresBackend {
    /// This module's statements.
    fn redelivery_sql(&self) -> &RedeliverySql {
        let sql = &self.inner.sql;
        sql.redelivery.get(&sql.renderer, statements)
    }

    /// `set_redelivery_policy`: upserts (`Some`) or deletes (`None`) the workflow's row.
    pub(crate) async fn set_workflow_redelivery(
        &self,
        workflow: &WorkflowName,
        policy: Option<RedeliveryPolicy>,
    ) -> Result<()> {
        const OP: &str = "set_redelivery_policy";
        let sql = self.redelivery_sql();
        let name = workflow.as_str();
        let clock = self.clock_param();
        let _: Option<PgRow> = match policy {
            Some(p) => {
                let base = stored_ms(p.base_ms(), "redelivery base")?;
                let cap = stored_ms(p.cap_ms(), "redelivery cap")?;
                let factor = i64::from(p.factor());
                self.run_statement(OP, Effect::IdempotentWrite, &sql.set_policy, |q| {
                    q.bind(name).bind(base).bind(factor).bind(cap).bind(clock)
                })
                .await?
            }
            None => {
                self.run_statement(OP, Effect::IdempotentWrite, &sql.remove_policy, |q| {
                    q.bind(name).bind(clock)
                })
                .await?
            }
        };
        Ok(())
    }

    /// `redelivery_policies`: the workflows' rows, by name.
    pub(crate) async fn workflow_redeliveries(&self) -> Result<RedeliveryPolicies> {
        const OP: &str = "redelivery_policies";
        let sql = &self.redelivery_sql().policies;
        let found: Vec<PgRow> = self.run_statement(OP, Effect::Read, sql, |q| q).await?;
        let mut policies = RedeliveryPolicies::default();
        for row in &found {
            let workflow = stored_name(col(row, 0, OP)?, OP, WorkflowName::new)?;
            let policy = stored_policy(col(row, 1, OP)?, col(row, 2, OP)?, col(row, 3, OP)?)
                .map_err(|e| protocol(OP, format!("stored redelivery policy: {e}")))?;
            policies.workflows.push((workflow, policy));
        }
        Ok(policies)
    }

    /// `deliveries`: the stored history, as a reader at the backend's clock sees it.
    pub(crate) async fn delivery_history(&self, id: &ExecutionId) -> Result<DeliveryHistory> {
        const OP: &str = "deliveries";
        let sql = &self.redelivery_sql().deliveries;
        let clock = self.clock_param();
        let row: Option<PgRow> = self
            .run_statement(OP, Effect::Read, sql, |q| q.bind(id.as_str()).bind(clock))
            .await?;
        let row = row.ok_or_else(|| LeaseError::UnknownExecution(id.clone()))?;
        let record = rows::execution(&row, OP)?;
        let now = Timestamp::from_millis(col(&row, HISTORY_NOW, OP)?);
        let earlier: i64 = col(&row, HISTORY_EARLIER, OP)?;
        let history = DeliveryHistory {
            deliveries: entries(&row, OP)?,
            earlier: u64::try_from(earlier)
                .map_err(|_| protocol(OP, format!("bad earlier count {earlier}")))?,
        };
        Ok(history.effective(&record, now))
    }
}

/// A policy part in milliseconds as the table stores it (bigint).
fn stored_ms(ms: u64, what: &'static str) -> Result<i64> {
    i64::try_from(ms).map_err(|_| LeaseError::invalid(what, "too long to store"))
}

/// A policy read back from `redelivery_policies`, validated again.
fn stored_policy(base: i64, factor: i64, cap: i64) -> Result<RedeliveryPolicy> {
    let (Ok(base), Ok(factor), Ok(cap)) = (
        u64::try_from(base),
        u32::try_from(factor),
        u64::try_from(cap),
    ) else {
        return Err(LeaseError::invalid("redelivery policy", "out of range"));
    };
    RedeliveryPolicy::from_parts(base, factor, cap)
}

/// The history's entries from `deliveries.sql`'s six arrays (all NULL: no entry).
fn entries(row: &PgRow, op: &'static str) -> Result<Vec<DeliveryEntry>> {
    let at = |i: usize| HISTORY_ENTRIES + i;
    let tokens: Option<Vec<Option<i64>>> = col(row, at(0), op)?;
    let claimed: Option<Vec<Option<i64>>> = col(row, at(1), op)?;
    let ended: Option<Vec<Option<i64>>> = col(row, at(2), op)?;
    let ends: Option<Vec<Option<String>>> = col(row, at(3), op)?;
    let kinds: Option<Vec<Option<String>>> = col(row, at(4), op)?;
    let messages: Option<Vec<Option<String>>> = col(row, at(5), op)?;
    let tokens = tokens.unwrap_or_default();
    let n = tokens.len();
    let (claimed, ended, ends, kinds, messages) = (
        claimed.unwrap_or_default(),
        ended.unwrap_or_default(),
        ends.unwrap_or_default(),
        kinds.unwrap_or_default(),
        messages.unwrap_or_default(),
    );
    if [
        claimed.len(),
        ended.len(),
        ends.len(),
        kinds.len(),
        messages.len(),
    ] != [n; 5]
    {
        return Err(protocol(op, "a delivery history with uneven fields"));
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let token = rows::token(
            tokens[i].ok_or_else(|| protocol(op, "a delivery without its token"))?,
            op,
        )?;
        let claimed_at = claimed[i].ok_or_else(|| protocol(op, "a delivery without its claim"))?;
        let end = ends[i]
            .as_deref()
            .map(|w| {
                DeliveryEnd::parse(w).ok_or_else(|| protocol(op, format!("unknown end {w:?}")))
            })
            .transpose()?;
        let error = kinds[i]
            .clone()
            .map(|k| ErrorNote::new(k, messages[i].clone().unwrap_or_default()));
        out.push(DeliveryEntry {
            token,
            claimed_at: Timestamp::from_millis(claimed_at),
            ended_at: ended[i].map(Timestamp::from_millis),
            end,
            error,
        });
    }
    Ok(out)
}
