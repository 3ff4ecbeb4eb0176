//! Issue 21's operator controls for [`PostgresBackend`]: cancel, pause/resume and the
//! concurrency limits, one statement each (`control/*.sql`). The `ExecutionClient` methods
//! in `execution.rs` delegate here; the claim's gates live in `execution/claim.sql`.
//!
//! Storage (schema v9): a cancelled execution has status `cancelled` and its reason as
//! outcome; paused scopes are rows of `paused_scopes` (`workflow` NULL for the namespace);
//! limits are rows of `concurrency_limits` (`key` NULL for the namespace default).

use std::sync::Arc;

use lease_core::{
    CancelOutcome, CancelReason, ExecutionId, ExecutionStatus, LeaseError, PauseScope, Result,
    WorkflowName,
};
use sqlx::postgres::PgRow;

use crate::backend::PostgresBackend;
use crate::error::{Effect, protocol};
use crate::rows::{self, col, stored_name};
use crate::statements::Renderer;

const CANCEL: &str = include_str!("control/cancel.sql");
const PAUSE: &str = include_str!("control/pause.sql");
const RESUME: &str = include_str!("control/resume.sql");
const LIST_PAUSED: &str = include_str!("control/list_paused.sql");

/// `control.rs`'s statements (`control/*.sql`).
#[derive(Debug)]
pub(crate) struct ControlSql {
    cancel: Arc<str>,
    pause: Arc<str>,
    resume: Arc<str>,
    list_paused: Arc<str>,
}

/// This module's statements, rendered for one schema.
pub(crate) fn statements(r: &Renderer) -> ControlSql {
    ControlSql {
        cancel: r.render(CANCEL),
        pause: r.render(PAUSE),
        resume: r.render(RESUME),
        list_paused: r.render(LIST_PAUSED),
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

    /// `cancel` (issue 21 item 1): one statement (`control/cancel.sql`).
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

    /// `pause` (issue 21 item 2): true when newly paused.
    pub(crate) async fn pause_scope(&self, scope: &PauseScope) -> Result<bool> {
        let sql = &self.control_sql().pause;
        let workflow = scope_param(scope);
        let row: Option<PgRow> = self
            .run_statement("pause", Effect::IdempotentWrite, sql, |q| q.bind(workflow))
            .await?;
        Ok(row.is_some())
    }

    /// `resume` (issue 21 item 2): true when it was paused; then it notifies "now".
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

    /// `list_paused` (issue 21 item 2): the namespace first, then workflows by name.
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
}
