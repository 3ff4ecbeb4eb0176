//! The operator controls for [`PostgresBackend`]: cancel, pause/resume and the concurrency
//! limits, one statement each (`control/*.sql`). The `ExecutionClient` methods in
//! `execution.rs` delegate here; the claim's gates live in `execution/claim.sql` and the
//! keyed claim (`execution/claim_keyed.sql`, `gate.rs`).
//!
//! Storage (schema v9): a cancelled execution has status `cancelled` and its reason as
//! outcome; paused scopes are rows of `paused_scopes` (`workflow` NULL for the namespace);
//! limits are rows of `concurrency_limits` (`key` NULL for the namespace default).

use lease_core::{
    CancelOutcome, CancelReason, ConcurrencyKey, ConcurrencyLimit, ConcurrencyLimits, ExecutionId,
    ExecutionStatus, LeaseError, LimitScope, PauseScope, Result, WorkflowName,
};
use sqlx::postgres::PgRow;

use crate::backend::PostgresBackend;
use crate::error::{Effect, protocol};
use crate::rows::{self, col, stored_name};
use crate::statements::{ControlSql, Renderer};

const CANCEL: &str = include_str!("control/cancel.sql");
const PAUSE: &str = include_str!("control/pause.sql");
const RESUME: &str = include_str!("control/resume.sql");
const LIST_PAUSED: &str = include_str!("control/list_paused.sql");
const SET_LIMIT: &str = include_str!("control/set_limit.sql");
const REMOVE_LIMIT: &str = include_str!("control/remove_limit.sql");
const LIMITS: &str = include_str!("control/limits.sql");

/// This module's statements, rendered for one schema.
pub(crate) fn statements(r: &Renderer) -> ControlSql {
    ControlSql {
        cancel: r.render(CANCEL),
        pause: r.render(PAUSE),
        resume: r.render(RESUME),
        list_paused: r.render(LIST_PAUSED),
        set_limit: r.render(SET_LIMIT),
        remove_limit: r.render(REMOVE_LIMIT),
        limits: r.render(LIMITS),
    }
}

/// A limit scope as the statements take it: the key, NULL for the namespace default.
fn limit_key(scope: &LimitScope) -> Option<&str> {
    match scope {
        LimitScope::Default => None,
        LimitScope::Key(k) => Some(k.as_str()),
    }
}

/// A pause scope as the statements take it: the workflow, NULL for the namespace.
fn scope_param(scope: &PauseScope) -> Option<&str> {
    match scope {
        PauseScope::Namespace => None,
        PauseScope::Workflow(w) => Some(w.as_str()),
    }
}

impl PostgresBackend {
    /// This module's statements.
    fn control_sql(&self) -> &ControlSql {
        let sql = &self.inner.sql;
        sql.control.get(&sql.renderer, statements)
    }

    /// `cancel`: one statement (`control/cancel.sql`).
    pub(crate) async fn cancel_execution(
        &self,
        id: &ExecutionId,
        reason: &CancelReason,
    ) -> Result<CancelOutcome> {
        const OP: &str = "cancel";
        let sql = &self.control_sql().cancel;
        let key = id.as_str();
        let text = reason.as_str();
        let row: Option<PgRow> = self
            .run_statement(OP, Effect::Write, sql, |q| {
                q.bind(key).bind(text).bind(self.clock_param())
            })
            .await?;
        let row = row.ok_or_else(|| LeaseError::UnknownExecution(id.clone()))?;
        let status_text: String = col(&row, 0, OP)?;
        let ended: Option<bool> = col(&row, 2, OP)?;
        if let Some(ended_lease) = ended {
            return Ok(CancelOutcome::Cancelled { ended_lease });
        }
        let outcome: Option<String> = col(&row, 1, OP)?;
        let outcome = outcome.ok_or_else(|| protocol(OP, "terminal row without an outcome"))?;
        match rows::status(&status_text, OP)? {
            ExecutionStatus::Cancelled => Ok(CancelOutcome::AlreadyCancelled(
                CancelReason::from_stored(outcome),
            )),
            ExecutionStatus::Completed => Ok(CancelOutcome::AlreadyTerminal(
                lease_core::ExecutionOutcome::Completed(lease_core::Json::from_stored(outcome)),
            )),
            ExecutionStatus::Failed => Ok(CancelOutcome::AlreadyTerminal(
                lease_core::ExecutionOutcome::Failed(lease_core::Json::from_stored(outcome)),
            )),
            other => Err(protocol(OP, format!("{other:?} row was not cancelled"))),
        }
    }

    /// `pause`: true when newly paused.
    pub(crate) async fn pause_scope(&self, scope: &PauseScope) -> Result<bool> {
        let sql = &self.control_sql().pause;
        let workflow = scope_param(scope);
        let row: Option<PgRow> = self
            .run_statement("pause", Effect::IdempotentWrite, sql, |q| q.bind(workflow))
            .await?;
        Ok(row.is_some())
    }

    /// `resume`: true when it was paused; then it notifies "now".
    pub(crate) async fn resume_scope(&self, scope: &PauseScope) -> Result<bool> {
        const OP: &str = "resume";
        let sql = &self.control_sql().resume;
        let workflow = scope_param(scope);
        let row: PgRow = self
            .run_statement(OP, Effect::Write, sql, |q| {
                q.bind(workflow).bind(self.clock_param())
            })
            .await?;
        col(&row, 0, OP)
    }

    /// `list_paused`: the namespace first, then workflows by name.
    pub(crate) async fn paused_scopes(&self) -> Result<Vec<PauseScope>> {
        const OP: &str = "list_paused";
        let sql = &self.control_sql().list_paused;
        let found: Vec<PgRow> = self.run_statement(OP, Effect::Read, sql, |q| q).await?;
        found
            .iter()
            .map(|row| {
                let workflow: Option<String> = col(row, 0, OP)?;
                Ok(match workflow {
                    None => PauseScope::Namespace,
                    Some(w) => PauseScope::Workflow(stored_name(w, OP, WorkflowName::new)?),
                })
            })
            .collect()
    }

    /// `set_concurrency_limit`: upserts (`Some`) or deletes (`None`) the scope's row of
    /// `concurrency_limits`; a change notifies "now".
    pub(crate) async fn set_limit(
        &self,
        scope: &LimitScope,
        limit: Option<ConcurrencyLimit>,
    ) -> Result<()> {
        const OP: &str = "set_concurrency_limit";
        let sql = self.control_sql();
        let key = limit_key(scope);
        let _: PgRow = match limit {
            Some(limit) => {
                let value = i64::from(limit.get());
                self.run_statement(OP, Effect::IdempotentWrite, &sql.set_limit, |q| {
                    q.bind(key).bind(value).bind(self.clock_param())
                })
                .await?
            }
            None => {
                self.run_statement(OP, Effect::IdempotentWrite, &sql.remove_limit, |q| {
                    q.bind(key).bind(self.clock_param())
                })
                .await?
            }
        };
        Ok(())
    }

    /// `concurrency_limits`: the default and the keys, by key.
    pub(crate) async fn limits(&self) -> Result<ConcurrencyLimits> {
        const OP: &str = "concurrency_limits";
        let sql = &self.control_sql().limits;
        let found: Vec<PgRow> = self.run_statement(OP, Effect::Read, sql, |q| q).await?;
        let mut limits = ConcurrencyLimits::default();
        for row in &found {
            let key: Option<String> = col(row, 0, OP)?;
            let value = ConcurrencyLimit::from_stored(col(row, 1, OP)?);
            match key {
                None => limits.default = Some(value),
                Some(k) => limits
                    .keys
                    .push((stored_name(k, OP, ConcurrencyKey::new)?, value)),
            }
        }
        Ok(limits)
    }
}
