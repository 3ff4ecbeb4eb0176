//! Retention: `purge_terminal` deletes old terminal executions with everything that names
//! them, in the caller's one transaction.

use lease_core::{ExecutionId, Purged, Timestamp};
use rusqlite::{Connection, params};

use crate::error::{OpError, OpResult};
use crate::scope::Scope;

/// `$1 namespace, $2 before, $3 limit` -> (rowid, id) of the first `limit` terminal
/// executions, in id order, whose terminal acknowledgement ended before `$2`. One walk of the
/// partial index `lease_executions_terminal` (terminal rows by id, with their end time), so
/// rows that are not terminal are never read; its WHERE terms repeat the index's, which is
/// what lets SQLite use it. `INDEXED BY` because without statistics the planner prefers the
/// (namespace, id) unique index, which also yields id order but reads every row of the
/// namespace (and preparing fails, rather than scanning, should the index ever not apply).
/// Quarantined rows stay for an operator (`list_corrupt`).
pub(crate) const PURGEABLE: &str = include_str!("retention/purgeable.sql");

/// What names a purged execution, `$1 namespace, $2 execution id`: its step records (the
/// steps' unique index), the store receipts it made and the start records that target it
/// (schema v4 indexes), its effects and store-waiter registrations (schema v6 indexes).
pub(crate) const FORGET: [&str; 5] = [
    include_str!("retention/steps_forget.sql"),
    include_str!("retention/store_receipts_forget.sql"),
    include_str!("retention/starts_forget.sql"),
    include_str!("retention/effect_forget.sql"),
    include_str!("retention/store_waiters_forget.sql"),
];

/// `$1 rowid`: the execution row itself, found by the walk in this transaction.
const DELETE_EXECUTION: &str = include_str!("retention/delete_execution.sql");

/// `purge_terminal`: up to `limit` completed, failed or cancelled executions whose
/// `last_delivery_ended_at` is before `before`, in id order, deleted with their step
/// records, store receipts and start records. Never a non-terminal execution: the walk
/// selects on the stored status under the transaction's write lock, and nothing else can
/// write in between. Wakes nothing (a terminal execution is never claimable). The caller
/// checked `limit` (1..=1000).
pub(crate) fn purge_terminal(
    conn: &Connection,
    scope: &Scope,
    before: Timestamp,
    limit: usize,
) -> OpResult<Purged> {
    let ns = scope.namespace.as_str();
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let found: Vec<(i64, String)> = conn
        .prepare_cached(PURGEABLE)?
        .query_map(params![ns, before.as_millis(), limit], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut ids = Vec::with_capacity(found.len());
    for (rowid, id) in found {
        forget(conn, ns, rowid, &id)?;
        ids.push(ExecutionId::new(id).map_err(|e| {
            OpError::Corrupt(format!(
                "stored execution id of a terminal row is invalid: {e}"
            ))
        })?);
    }
    Ok(Purged { ids })
}

/// Deletes one execution and every row naming it.
fn forget(conn: &Connection, ns: &str, rowid: i64, id: &str) -> OpResult<()> {
    for sql in FORGET {
        conn.prepare_cached(sql)?.execute(params![ns, id])?;
    }
    conn.prepare_cached(DELETE_EXECUTION)?.execute([rowid])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::transitions::tests::plan;

    #[test]
    fn the_purge_walks_the_terminal_index_in_id_order() {
        let plan = plan(super::PURGEABLE, 3);
        assert!(plan.contains("lease_executions_terminal"), "{plan}");
        assert!(!plan.contains("TEMP B-TREE"), "{plan}");
    }

    #[test]
    fn what_names_an_execution_is_deleted_through_an_index() {
        for sql in super::FORGET {
            let plan = plan(sql, 2);
            assert!(plan.contains("USING"), "{sql}: {plan}");
            assert!(!plan.starts_with("SCAN"), "{sql}: {plan}");
        }
    }
}
