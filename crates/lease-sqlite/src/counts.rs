//! `status_counts` (the operator command's `status`): executions by effective status, in
//! the caller's one read transaction, from indexes only (`counts/status_counts.sql`): one entry per stored row
//! of the status index, and the rows of the running and quarantined ones. Still a walk of
//! one index entry per stored execution, but no read of every row. The namespace's takeover
//! counter comes from its counters row (`counts/takeovers.sql`), in the same transaction.

use lease_core::StatusCounts;
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{OpError, OpResult};
use crate::scope::Scope;

/// `?1 namespace, ?2 now` -> (effective status or `corrupt`, count), to be summed by name.
const STATUS_COUNTS: &str = include_str!("counts/status_counts.sql");

/// `?1 namespace` -> the namespace's takeover counter (no row: none yet).
const TAKEOVERS: &str = include_str!("counts/takeovers.sql");

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
    counts.takeovers = takeovers(conn, &scope.namespace)?;
    Ok(counts)
}

/// The namespace's takeover counter ([`StatusCounts::takeovers`]).
fn takeovers(conn: &Connection, namespace: &str) -> OpResult<u64> {
    let n: Option<i64> = conn
        .prepare_cached(TAKEOVERS)?
        .query_row([namespace], |row| row.get(0))
        .optional()?;
    let n = n.unwrap_or(0);
    u64::try_from(n).map_err(|_| OpError::Corrupt(format!("a negative takeover count {n}")))
}

#[cfg(test)]
mod tests {
    use crate::transitions::tests::plan;

    #[test]
    fn counting_reads_indexes_and_never_scans_the_rows() {
        let plan = plan(super::STATUS_COUNTS, 2);
        for index in [
            "COVERING INDEX lease_executions_by_status (namespace=?)",
            "INDEX lease_executions_corrupt (namespace=?)",
            "INDEX lease_executions_running (namespace=?)",
        ] {
            assert!(plan.contains(index), "{index}: {plan}");
        }
        assert!(!plan.contains("SCAN lease_executions"), "{plan}");
    }
}
