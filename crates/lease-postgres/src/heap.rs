//! [`HeapClient`] for [`PostgresBackend`]: fenced, idempotent step writes (RFC 002 "Fencing",
//! `HeapClient.writeStep`).

use async_trait::async_trait;
use lease_core::{
    ExecutionId, ExecutionLease, Fenced, HeapClient, HeapRecord, Json, Result, StepCursor, StepKey,
    StepPage, StepWrite,
};
use sqlx::postgres::PgRow;

use crate::backend::PostgresBackend;
use crate::error::Effect;
use crate::rows::{self, FenceCheck, col, token_param};
use crate::statements::{HeapSql, Renderer, fragment};

const WRITE_STEP: &str = include_str!("heap/write_step.sql");
const READ_STEP: &str = include_str!("heap/read_step.sql");
const LIST_STEPS: &str = include_str!("heap/list_steps.sql");
const LIST_STEPS_PAGE: &str = include_str!("heap/list_steps_page.sql");

/// The step write sent: `write_step.sql`, or under cfg
/// `lease_postgres_nonatomic_fencing_experiment` (build.rs) the same statement with its row
/// lock taken out, so its token check reads the statement's snapshot and a claim committing
/// in between goes unnoticed (deliberately broken, for `tests/race.rs` by hand).
#[cfg(not(lease_postgres_nonatomic_fencing_experiment))]
fn write_step_template() -> String {
    fragment(WRITE_STEP).to_owned()
}

/// See the other `write_step_template`.
#[cfg(lease_postgres_nonatomic_fencing_experiment)]
fn write_step_template() -> String {
    fragment(WRITE_STEP).replace(" FOR SHARE", "")
}

/// This module's statements, rendered for one schema.
pub(crate) fn statements(r: &Renderer) -> HeapSql {
    HeapSql {
        write_step: r.render(&write_step_template()),
        read_step: r.render(READ_STEP),
        list_steps: r.render(LIST_STEPS),
        list_steps_page: r.render(LIST_STEPS_PAGE),
    }
}

impl PostgresBackend {
    /// This module's statements (`write_step` is also `step_in_tx`'s).
    pub(crate) fn heap_sql(&self) -> &HeapSql {
        let sql = &self.inner.sql;
        sql.heap.get(&sql.renderer, statements)
    }
}

#[async_trait]
impl HeapClient for PostgresBackend {
    #[tracing::instrument(level = "debug", name = "write_step", skip_all)]
    async fn write_step(
        &self,
        lease: &ExecutionLease,
        write: &StepWrite,
    ) -> Result<Fenced<HeapRecord>> {
        let sql = &self.heap_sql().write_step;
        let id = lease.execution_id.as_str();
        let token = token_param(lease)?;
        let key = write.step_key.as_str();
        let attempt = i64::from(write.step_attempt);
        let done = write.done;
        let response = write.response.as_str();
        let row: Option<PgRow> = self
            .run_statement("write_step", Effect::Write, sql, |q| {
                q.bind(id)
                    .bind(token)
                    .bind(key)
                    .bind(attempt)
                    .bind(done)
                    .bind(response)
                    .bind(self.clock_param())
            })
            .await?;
        let decoded = row
            .map(|row| {
                let check = FenceCheck::decode(&row, "write_step")?;
                let recorded_token: Option<i64> = col(&row, 4, "write_step")?;
                let record = match recorded_token {
                    None => None,
                    Some(t) => Some(HeapRecord {
                        execution_id: lease.execution_id.clone(),
                        step_key: write.step_key.clone(),
                        step_attempt: write.step_attempt,
                        done: col(&row, 2, "write_step")?,
                        response: Json::from_stored(col(&row, 3, "write_step")?),
                        token: rows::token(t, "write_step")?,
                    }),
                };
                Ok::<_, lease_core::LeaseError>((check, record))
            })
            .transpose()?;
        self.fenced("write_step", lease, decoded)
    }

    #[tracing::instrument(level = "debug", name = "read_step", skip_all)]
    async fn read_step(
        &self,
        id: &ExecutionId,
        step_key: &StepKey,
        step_attempt: u32,
    ) -> Result<Option<HeapRecord>> {
        let sql = &self.heap_sql().read_step;
        let id = id.as_str();
        let key = step_key.as_str();
        let attempt = i64::from(step_attempt);
        let row: Option<PgRow> = self
            .run_statement("read_step", Effect::Read, sql, |q| {
                q.bind(id).bind(key).bind(attempt)
            })
            .await?;
        row.map(|row| rows::step(&row, "read_step")).transpose()
    }

    #[tracing::instrument(level = "debug", name = "list_steps", skip_all)]
    async fn list_steps(&self, id: &ExecutionId) -> Result<Vec<HeapRecord>> {
        let sql = &self.heap_sql().list_steps;
        let id = id.as_str();
        let found: Vec<PgRow> = self
            .run_statement("list_steps", Effect::Read, sql, |q| q.bind(id))
            .await?;
        found
            .iter()
            .map(|row| rows::step(row, "list_steps"))
            .collect()
    }

    /// One indexed range read of `limit + 1` rows, so a long execution's steps are never
    /// read all at once.
    #[tracing::instrument(level = "debug", name = "list_steps_page", skip_all)]
    async fn list_steps_page(
        &self,
        id: &ExecutionId,
        after: Option<&StepCursor>,
        limit: u32,
    ) -> Result<StepPage> {
        StepPage::check_limit(limit)?;
        let sql = &self.heap_sql().list_steps_page;
        let id = id.as_str();
        let key = after.map(|c| c.step_key.as_str());
        let attempt = after.map_or(0, |c| i64::from(c.step_attempt));
        let found: Vec<PgRow> = self
            .run_statement("list_steps_page", Effect::Read, sql, |q| {
                q.bind(id)
                    .bind(key)
                    .bind(attempt)
                    .bind(i64::from(limit) + 1)
            })
            .await?;
        let rows = found
            .iter()
            .map(|row| rows::step(row, "list_steps_page"))
            .collect::<Result<Vec<_>>>()?;
        Ok(StepPage::from_rows(rows, limit))
    }
}
