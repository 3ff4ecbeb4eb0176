//! The questions asked of many executions at once, each from the index that answers it:
//! the failing, live and dead lists, the purge's candidates, the status counts, and the
//! quarantined rows. Each first writes what the step changed ([`SqliteTx::flush`]).

use std::collections::BTreeMap;

use lease_core::{CorruptRecord, ExecutionId, ExecutionRecord, Purged, StatusCounts, Timestamp};
use rusqlite::{Connection, OptionalExtension, params};

use super::SqliteTx;
use crate::error::{OpError, OpResult};
use crate::retention::PURGEABLE;
use crate::rows::{RawExecution, read_raw};

/// `$1 namespace, $2 min, $3 limit` -> the top rows by stored delivery count.
pub(crate) const LIST_FAILING: &str = include_str!("lists/list_failing.sql");
/// `$1 namespace, $2 min, $3 now` -> running rows whose lease expired (one more delivery).
pub(crate) const LIST_EXPIRED: &str = include_str!("lists/list_expired.sql");
/// `$1 namespace, $2 now, $3 limit` -> running rows whose lease is live at `now`, by
/// (expiry, id), through `lease_executions_running` (one seek and a range walk).
pub(crate) const LIST_LIVE_LEASES: &str = include_str!("lists/list_live_leases.sql");
/// `$1 namespace, $2 after, $3 now, $4 limit` -> the dead rows by id.
pub(crate) const LIST_DEAD: &str = include_str!("lists/list_dead.sql");
/// `$1 namespace, $2 limit` -> (id, problem) of quarantined records, by id.
const LIST_CORRUPT: &str = include_str!("lists/list_corrupt.sql");
/// `?1 namespace, ?2 now` -> (effective status or `corrupt`, count), to be summed by name:
/// from indexes only (one entry per stored row of the status index, and the rows of the
/// running and quarantined ones), never a read of every row.
pub(crate) const STATUS_COUNTS: &str = include_str!("lists/status_counts.sql");
/// `?1 namespace` -> the namespace's takeover counter (no row: none yet).
const TAKEOVERS: &str = include_str!("lists/takeovers.sql");

/// A limit as SQLite binds it.
fn sql_limit(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

/// Runs a query of execution rows.
fn query(
    conn: &Connection,
    sql: &str,
    params: &[&dyn rusqlite::ToSql],
) -> OpResult<Vec<RawExecution>> {
    Ok(conn
        .prepare_cached(sql)?
        .query_map(params, read_raw)?
        .collect::<rusqlite::Result<_>>()?)
}

/// The records of `raw`, as effective at `now`.
fn effective(raw: Vec<RawExecution>, now: Timestamp) -> OpResult<Vec<ExecutionRecord>> {
    raw.into_iter()
        .map(|r| Ok(r.into_record()?.effective(now)))
        .collect()
}

impl SqliteTx<'_> {
    /// `list_failing`: effective `unacknowledged_deliveries >= max(min, 1)`, most failing
    /// first, then id. Reads the top `limit` rows by stored count through an index, plus
    /// every running row whose lease has expired (its effective count is one higher);
    /// merging the two is exact. Quarantined records are skipped (`list_corrupt` lists
    /// them); an undecodable record no claim has quarantined yet is `Protocol`.
    pub(super) fn failing_rows(
        &self,
        min: u32,
        limit: usize,
        now: Timestamp,
    ) -> OpResult<Vec<ExecutionRecord>> {
        self.flush()?;
        let (ns, min) = (self.ns(), i64::from(min.max(1)));
        let mut raw = query(self.conn, LIST_FAILING, params![ns, min, sql_limit(limit)])?;
        raw.extend(query(
            self.conn,
            LIST_EXPIRED,
            params![ns, min, now.as_millis()],
        )?);
        let mut by_id = BTreeMap::new();
        for r in effective(raw, now)? {
            if i64::from(r.unacknowledged_deliveries) >= min {
                by_id.insert(r.id.clone(), r);
            }
        }
        let mut out: Vec<ExecutionRecord> = by_id.into_values().collect();
        out.sort_by(lease_core::execution::failing_order);
        out.truncate(limit);
        Ok(out)
    }

    /// `list_live_leases`: the first `limit` live leases by (expiry, id), as stored (a
    /// live lease's stored record is its effective one); quarantined records skipped.
    pub(super) fn live_rows(&self, limit: usize, now: Timestamp) -> OpResult<Vec<ExecutionRecord>> {
        self.flush()?;
        let args = params![self.ns(), now.as_millis(), sql_limit(limit)];
        effective(query(self.conn, LIST_LIVE_LEASES, args)?, now)
    }

    /// `list_dead`: the effective dead records after `after`, by id, at most `limit`.
    pub(super) fn dead_rows(
        &self,
        after: Option<&ExecutionId>,
        limit: usize,
        now: Timestamp,
    ) -> OpResult<Vec<ExecutionRecord>> {
        self.flush()?;
        let after = after.map_or("", ExecutionId::as_str);
        let args = params![self.ns(), after, now.as_millis(), sql_limit(limit)];
        effective(query(self.conn, LIST_DEAD, args)?, now)
    }

    /// The terminal executions `purge_terminal` removes: the first `limit` by id whose last
    /// delivery ended before `before`, walked on the terminal index.
    pub(super) fn purgeable_ids(&self, before: Timestamp, limit: usize) -> OpResult<Purged> {
        self.flush()?;
        let found: Vec<String> = self
            .conn
            .prepare_cached(PURGEABLE)?
            .query_map(
                params![self.ns(), before.as_millis(), sql_limit(limit)],
                |row| row.get(1),
            )?
            .collect::<rusqlite::Result<_>>()?;
        let ids = found
            .into_iter()
            .map(|id| {
                ExecutionId::new(id).map_err(|e| {
                    OpError::Corrupt(format!(
                        "stored execution id of a terminal row is invalid: {e}"
                    ))
                })
            })
            .collect::<OpResult<_>>()?;
        Ok(Purged { ids })
    }

    /// The executions by effective status at `now`, and the takeover counter.
    pub(super) fn status_counts(&self, now: Timestamp) -> OpResult<StatusCounts> {
        self.flush()?;
        let rows: Vec<(String, i64)> = self
            .conn
            .prepare_cached(STATUS_COUNTS)?
            .query_map(params![self.ns(), now.as_millis()], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })?
            .collect::<rusqlite::Result<_>>()?;
        let mut counts = StatusCounts::default();
        for (status, n) in rows {
            let n = u64::try_from(n)
                .map_err(|_| OpError::Corrupt(format!("a negative count {n} of {status}")))?;
            counts.add_named(&status, n);
        }
        let takeovers: Option<i64> = self
            .conn
            .prepare_cached(TAKEOVERS)?
            .query_row([self.ns()], |row| row.get(0))
            .optional()?;
        let n = takeovers.unwrap_or(0);
        counts.takeovers = u64::try_from(n)
            .map_err(|_| OpError::Corrupt(format!("a negative takeover count {n}")))?;
        Ok(counts)
    }
}

/// `list_corrupt`: quarantined records by id, at most `limit`.
pub(crate) fn corrupt(conn: &Connection, ns: &str, limit: usize) -> OpResult<Vec<CorruptRecord>> {
    Ok(conn
        .prepare_cached(LIST_CORRUPT)?
        .query_map(params![ns, sql_limit(limit)], |row| {
            Ok(CorruptRecord {
                id: row.get::<_, Option<String>>(0)?.unwrap_or_default(),
                problem: row.get(1)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?)
}

#[cfg(test)]
mod tests {
    use crate::migrate::plan;

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

    #[test]
    fn the_horizon_is_one_seek_of_its_index() {
        let plan = plan(super::super::claim::HORIZON, 1);
        assert!(plan.contains("lease_executions_horizon"), "{plan}");
        assert!(!plan.contains("TEMP B-TREE"), "{plan}");
        assert!(!plan.starts_with("SCAN"), "{plan}");
    }
}
