//! Attempt limits and dead letters for [`PostgresBackend`] (lease-core `attempts`; docs/decisions/
//! 0016-attempt-limits-and-dead-letters.md), one statement each (`attempts/*.sql`). The
//! `ExecutionClient` methods in `execution.rs` delegate here.
//!
//! Storage (schema v15): limits are rows of `attempt_limits` (`workflow` NULL for the
//! namespace default), copied onto each row the claim takes (`attempt_limit`); a dead
//! execution has status `dead`; the last error is four columns of the row. The rules that
//! read them live in the shared statements: the release (`execution/release.sql`), the
//! claim's storing of a death by expiry (`execution/claim_take.sql`), and the status fenced
//! writes judge by (`statements/held_status.sql`).

use lease_core::attempts::check_retry_ids;
use lease_core::limits::check_limit;
use lease_core::{
    AttemptLimit, AttemptLimits, AttemptScope, ExecutionId, ExecutionRecord, ExecutionStatus, Json,
    LeaseError, Result, Timestamp, WorkflowName,
};
use sqlx::postgres::PgRow;

use crate::backend::PostgresBackend;
use crate::error::{Effect, protocol};
use crate::rows::{self, EXECUTION_COLUMNS, col, stored_name};
use crate::statements::{AttemptsSql, Renderer};

const SET_LIMIT: &str = include_str!("attempts/set_limit.sql");
const REMOVE_LIMIT: &str = include_str!("attempts/remove_limit.sql");
const LIMITS: &str = include_str!("attempts/limits.sql");
const LIST_DEAD: &str = include_str!("attempts/list_dead.sql");
const RETRY_DEAD: &str = include_str!("attempts/retry_dead.sql");

/// Where `retry_dead.sql`'s record starts (after item number, status and retried?).
const RETRY_RECORD: usize = 3;
/// Its clock column (after the record and its `claimable_at`).
const RETRY_NOW: usize = RETRY_RECORD + EXECUTION_COLUMNS + 1;

/// This module's statements, rendered for one schema.
pub(crate) fn statements(r: &Renderer) -> AttemptsSql {
    AttemptsSql {
        set_limit: r.render(SET_LIMIT),
        remove_limit: r.render(REMOVE_LIMIT),
        limits: r.render(LIMITS),
        list_dead: r.render(LIST_DEAD),
        retry_dead: r.render(RETRY_DEAD),
    }
}

/// An attempt scope as the statements take it: the workflow, NULL for the default.
fn scope_workflow(scope: &AttemptScope) -> Option<&str> {
    match scope {
        AttemptScope::Default => None,
        AttemptScope::Workflow(w) => Some(w.as_str()),
    }
}

impl PostgresBackend {
    /// This module's statements.
    fn attempts_sql(&self) -> &AttemptsSql {
        let sql = &self.inner.sql;
        sql.attempts.get(&sql.renderer, statements)
    }

    /// `set_attempt_limit`: upserts (`Some`) or deletes (`None`) the scope's row.
    pub(crate) async fn set_attempts(
        &self,
        scope: &AttemptScope,
        limit: Option<AttemptLimit>,
    ) -> Result<()> {
        const OP: &str = "set_attempt_limit";
        let sql = self.attempts_sql();
        let workflow = scope_workflow(scope);
        let _: Option<PgRow> = match limit {
            Some(limit) => {
                let value = i64::from(limit.get());
                self.run_statement(OP, Effect::IdempotentWrite, &sql.set_limit, |q| {
                    q.bind(workflow).bind(value)
                })
                .await?
            }
            None => {
                self.run_statement(OP, Effect::IdempotentWrite, &sql.remove_limit, |q| {
                    q.bind(workflow)
                })
                .await?
            }
        };
        Ok(())
    }

    /// `attempt_limits`: the default and the workflows, by name.
    pub(crate) async fn attempts(&self) -> Result<AttemptLimits> {
        const OP: &str = "attempt_limits";
        let sql = &self.attempts_sql().limits;
        let found: Vec<PgRow> = self.run_statement(OP, Effect::Read, sql, |q| q).await?;
        let mut limits = AttemptLimits::default();
        for row in &found {
            let workflow: Option<String> = col(row, 0, OP)?;
            let value = AttemptLimit::from_stored(col(row, 1, OP)?);
            match workflow {
                None => limits.default = Some(value),
                Some(w) => limits
                    .workflows
                    .push((stored_name(w, OP, WorkflowName::new)?, value)),
            }
        }
        Ok(limits)
    }

    /// `list_dead`: the effective dead records after `after`, by id.
    pub(crate) async fn dead_page(
        &self,
        after: Option<&ExecutionId>,
        limit: usize,
    ) -> Result<Vec<ExecutionRecord>> {
        const OP: &str = "list_dead";
        check_limit("list limit", limit)?;
        let sql = &self.attempts_sql().list_dead;
        let after = after.map(ExecutionId::as_str);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let clock = self.clock_param();
        let found: Vec<PgRow> = self
            .run_statement(OP, Effect::Read, sql, |q| {
                q.bind(after).bind(limit).bind(clock)
            })
            .await?;
        found
            .iter()
            .map(|row| {
                let record = rows::execution(row, OP)?;
                let now = Timestamp::from_millis(col(row, EXECUTION_COLUMNS, OP)?);
                Ok(record.effective(now))
            })
            .collect()
    }

    /// `retry_dead`: every id checked in the statement before anything is written; the
    /// records come back in the ids' order.
    pub(crate) async fn retry(
        &self,
        ids: &[ExecutionId],
        input: Option<&Json>,
    ) -> Result<Vec<ExecutionRecord>> {
        const OP: &str = "retry_dead";
        check_retry_ids(ids)?;
        let sql = &self.attempts_sql().retry_dead;
        let names: Vec<&str> = ids.iter().map(ExecutionId::as_str).collect();
        let input = input.map(Json::as_str);
        let found: Vec<PgRow> = self
            .run_statement(OP, Effect::Write, sql, |q| {
                q.bind(&names).bind(input).bind(self.clock_param())
            })
            .await?;
        if found.len() != ids.len() {
            return Err(protocol(
                OP,
                format!("{} rows for {} ids", found.len(), ids.len()),
            ));
        }
        let mut retried = Vec::with_capacity(ids.len());
        for (id, row) in ids.iter().zip(&found) {
            let status: Option<String> = col(row, 1, OP)?;
            let done: bool = col(row, 2, OP)?;
            if done {
                let record = rows::execution_from(row, RETRY_RECORD, OP)?;
                let now = Timestamp::from_millis(col(row, RETRY_NOW, OP)?);
                retried.push(record.effective(now));
                continue;
            }
            let status = status.ok_or_else(|| LeaseError::UnknownExecution(id.clone()))?;
            let status = rows::status(&status, OP)?;
            if status != ExecutionStatus::Dead {
                return Err(LeaseError::invalid(
                    "retry_dead",
                    format!("execution {id} is {status}, not dead"),
                ));
            }
        }
        if retried.len() != ids.len() {
            return Err(protocol(OP, "every execution is dead but none was retried"));
        }
        Ok(retried)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The statements that store an expiry's last error (`statements/expiry_error.sql`)
    /// write exactly the note lease-core's `effective` reads for it.
    #[test]
    fn the_stored_expiry_note_is_lease_cores() {
        let r = Renderer::new("\"t\"", "lease_wake_t");
        let note = lease_core::LastError::expiry_note();
        let claim = crate::execution::statements(&r).claim;
        for sql in [&statements(&r).retry_dead, &claim] {
            assert!(!sql.contains('{') && !sql.contains('}'), "{sql}");
            assert!(sql.contains(&format!("'{}'", note.kind())), "{sql}");
            assert!(sql.contains(&format!("'{}'", note.message())), "{sql}");
        }
    }
}
