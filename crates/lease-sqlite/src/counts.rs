//! `status_counts` (the operator command's `status`): executions by effective status, in
//! the caller's one read transaction.

use lease_core::StatusCounts;
use rusqlite::{Connection, params};

use crate::error::{OpError, OpResult};
use crate::scope::Scope;

/// `?1 namespace, ?2 now` -> (effective status or `corrupt`, count).
const STATUS_COUNTS: &str = include_str!("counts/status_counts.sql");

/// Counts the namespace's executions by effective status at the scope's clock.
pub(crate) fn status_counts(conn: &Connection, scope: &Scope) -> OpResult<StatusCounts> {
    let now = scope.now().as_millis();
    let rows: Vec<(String, i64)> = conn
        .prepare_cached(STATUS_COUNTS)?
        .query_map(params![scope.namespace, now], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut counts = StatusCounts::default();
    for (status, n) in rows {
        let n = u64::try_from(n)
            .map_err(|_| OpError::Corrupt(format!("a negative count {n} of {status}")))?;
        counts.add_named(&status, n);
    }
    Ok(counts)
}
