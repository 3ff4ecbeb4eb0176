//! `status_counts` (issue 15): executions by effective status in one statement
//! (`sql/status_counts.sql`).

use lease_core::{Result, StatusCounts};
use sqlx::AssertSqlSafe;

use crate::backend::PostgresBackend;
use crate::error::{Effect, protocol, settle};
use crate::rows::col;

/// The template, rendered per schema with the other statements.
pub(crate) const STATUS_COUNTS: &str = include_str!("sql/status_counts.sql");

impl PostgresBackend {
    /// Counts the schema's executions by effective status at the backend clock.
    pub(crate) async fn count_statuses(&self) -> Result<StatusCounts> {
        const OP: &str = "status_counts";
        let sql = &self.inner.sql.status_counts;
        let clock = self.clock_param();
        let found = self
            .run(OP, Effect::Read, |mut conn| async move {
                let r = sqlx::query(AssertSqlSafe(sql.clone()))
                    .bind(clock)
                    .fetch_all(&mut *conn)
                    .await;
                settle(r, &mut conn)
            })
            .await?;
        let mut counts = StatusCounts::default();
        for row in &found {
            let status: String = col(row, 0, OP)?;
            let n: i64 = col(row, 1, OP)?;
            let n = u64::try_from(n)
                .map_err(|_| protocol(OP, format!("a negative count {n} of {status}")))?;
            counts.add_named(&status, n);
        }
        Ok(counts)
    }
}
