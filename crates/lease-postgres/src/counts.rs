//! `status_counts` (the operator command's `status`): executions by effective status and
//! the schema's takeover counter in one statement (`counts/status_counts.sql`).

use std::sync::Arc;

use lease_core::{Result, StatusCounts};
use sqlx::postgres::PgRow;

use crate::backend::PostgresBackend;
use crate::error::{Effect, protocol};
use crate::rows::col;
use crate::statements::Renderer;

const STATUS_COUNTS: &str = include_str!("counts/status_counts.sql");

/// The name of the statement's row that holds the takeover counter, not a status.
const TAKEOVERS: &str = "takeovers";

/// This module's statement, rendered for one schema.
pub(crate) fn statements(r: &Renderer) -> Arc<str> {
    r.render(STATUS_COUNTS)
}

impl PostgresBackend {
    /// Counts the schema's executions by effective status at the backend clock, with the
    /// schema's takeover counter.
    pub(crate) async fn count_statuses(&self) -> Result<StatusCounts> {
        const OP: &str = "status_counts";
        let sql = self
            .inner
            .sql
            .counts
            .get(&self.inner.sql.renderer, statements);
        let clock = self.clock_param();
        let found: Vec<PgRow> = self
            .run_statement(OP, Effect::Read, sql, |q| q.bind(clock))
            .await?;
        let mut counts = StatusCounts::default();
        for row in &found {
            let status: String = col(row, 0, OP)?;
            let n: i64 = col(row, 1, OP)?;
            let n = u64::try_from(n)
                .map_err(|_| protocol(OP, format!("a negative count {n} of {status}")))?;
            if status == TAKEOVERS {
                counts.takeovers = n;
            } else {
                counts.add_named(&status, n);
            }
        }
        Ok(counts)
    }
}
