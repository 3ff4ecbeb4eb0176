//! `list_executions` for SQLite (lease_core::browse): executions newest admitted first, a
//! page at a time, inside one read transaction.
//!
//! Every page walks an index in `admitted_seq` order from the cursor, so its cost does not
//! grow with what is stored: `lease_executions_admitted` for no filter,
//! `lease_executions_by_status` for a status alone, and for a workflow or a key
//! `lease_executions_by_workflow` / `lease_executions_by_key`, which lead with the name and
//! the status, and for a workflow and a key together `lease_executions_by_key_workflow`
//! (key, workflow, status: schema v14). Without a status those are walked once per status
//! (seven short ranges) and merged. Every filtered field is in the walked index, so a page
//! reads the entries it lists (plus one per range, for the next cursor) and nothing it
//! skips. The walks read only (admitted_seq, rowid) from the index; the page's rows are then
//! loaded by rowid, in the same transaction.
//!
//! The cursor is `s<admitted_seq>` of the page's last record: the next page starts below it.

use lease_core::{
    ExecutionFilter, ExecutionPage, ExecutionRecord, ExecutionStatus, LeaseError, ListCursor,
    Timestamp,
};
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::OpResult;
use crate::rows::read_raw;
use crate::scope::Scope;

/// `$1 namespace, $2 below, $3 limit` -> (admitted_seq, rowid), newest first.
pub(crate) const ALL: &str = include_str!("browse/all.sql");
/// [`ALL`] and `$4 status`.
pub(crate) const BY_STATUS: &str = include_str!("browse/by_status.sql");
/// [`BY_STATUS`] and `$5 workflow`.
pub(crate) const BY_WORKFLOW: &str = include_str!("browse/by_workflow.sql");
/// [`BY_STATUS`] and `$5 key`.
pub(crate) const BY_KEY: &str = include_str!("browse/by_key.sql");
/// [`BY_KEY`] and `$6 workflow`, through the index of both.
pub(crate) const BY_KEY_WORKFLOW: &str = include_str!("browse/by_key_workflow.sql");
/// `$1 rowid` -> the row in `execution_columns!` order.
const LOAD_ROW: &str = include_str!("browse/load_row.sql");

/// Every stored status, for the walks that merge one range per status.
const STATUSES: [ExecutionStatus; 7] = [
    ExecutionStatus::Admitted,
    ExecutionStatus::Running,
    ExecutionStatus::Suspended,
    ExecutionStatus::Completed,
    ExecutionStatus::Failed,
    ExecutionStatus::Cancelled,
    ExecutionStatus::Dead,
];

/// The cursor's text for a position.
fn cursor_at(seq: i64) -> OpResult<ListCursor> {
    Ok(ListCursor::new(format!("s{seq}"))?)
}

/// The position a cursor names: `InvalidInput` for text this backend did not write.
fn cursor_seq(cursor: &ListCursor) -> Result<i64, LeaseError> {
    cursor
        .as_str()
        .strip_prefix('s')
        .filter(|digits| digits.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|digits| digits.parse::<i64>().ok())
        .filter(|seq| *seq >= 1)
        .ok_or_else(|| cursor.unreadable())
}

/// Checks a cursor before any transaction: the position it names.
pub(crate) fn check_cursor(after: Option<&ListCursor>) -> Result<i64, LeaseError> {
    after.map_or(Ok(i64::MAX), cursor_seq)
}

/// `list_executions`: at most `limit` records matching `filter` below position `below`,
/// newest first, each as `get` reads it at the backend clock's now. Rows this library
/// cannot decode are left out (`list_corrupt` and `get` report them).
pub(crate) fn list_executions(
    conn: &Connection,
    scope: &Scope,
    filter: &ExecutionFilter,
    below: i64,
    limit: usize,
) -> OpResult<ExecutionPage> {
    let mut found = positions(conn, &scope.namespace, filter, below, limit + 1)?;
    let more = found.len() > limit;
    found.truncate(limit);
    let now = scope.now();
    let mut records = Vec::with_capacity(found.len());
    for &(_, rowid) in &found {
        if let Some(record) = load_row(conn, rowid, now)? {
            records.push(record);
        }
    }
    let next = match found.last() {
        Some(&(seq, _)) if more => Some(cursor_at(seq)?),
        _ => None,
    };
    Ok(ExecutionPage { records, next })
}

/// The first `take` (admitted_seq, rowid) matching `filter` below `below`, newest first.
fn positions(
    conn: &Connection,
    ns: &str,
    filter: &ExecutionFilter,
    below: i64,
    take: usize,
) -> OpResult<Vec<(i64, i64)>> {
    let take_sql = i64::try_from(take).unwrap_or(i64::MAX);
    let statuses: Vec<&str> = match filter.status {
        Some(status) => vec![status.as_str()],
        None => STATUSES.iter().map(|s| s.as_str()).collect(),
    };
    let workflow = filter.workflow.as_ref().map(|w| w.as_str());
    let key = filter.key.as_ref().map(|k| k.as_str());
    let mut found: Vec<(i64, i64)> = Vec::new();
    if workflow.is_none() && key.is_none() {
        let mut stmt;
        let rows = match filter.status {
            None => {
                stmt = conn.prepare_cached(ALL)?;
                stmt.query_map(params![ns, below, take_sql], pair)?
            }
            Some(status) => {
                stmt = conn.prepare_cached(BY_STATUS)?;
                stmt.query_map(params![ns, below, take_sql, status.as_str()], pair)?
            }
        };
        return Ok(rows.collect::<rusqlite::Result<_>>()?);
    }
    for status in statuses {
        let head = params![ns, below, take_sql, status];
        let rows: Vec<(i64, i64)> = match (workflow, key) {
            (Some(w), None) => collect(conn, BY_WORKFLOW, &[head, params![w]].concat())?,
            (None, Some(k)) => collect(conn, BY_KEY, &[head, params![k]].concat())?,
            (Some(w), Some(k)) => collect(conn, BY_KEY_WORKFLOW, &[head, params![k, w]].concat())?,
            (None, None) => Vec::new(),
        };
        found.extend(rows);
    }
    found.sort_unstable_by_key(|&(seq, _)| std::cmp::Reverse(seq));
    found.truncate(take);
    Ok(found)
}

fn pair(row: &rusqlite::Row<'_>) -> rusqlite::Result<(i64, i64)> {
    Ok((row.get(0)?, row.get(1)?))
}

/// Runs one walk.
fn collect(
    conn: &Connection,
    sql: &str,
    params: &[&dyn rusqlite::ToSql],
) -> OpResult<Vec<(i64, i64)>> {
    Ok(conn
        .prepare_cached(sql)?
        .query_map(params, pair)?
        .collect::<rusqlite::Result<_>>()?)
}

/// The effective record of one listed row; `None` when it cannot be decoded (logged).
fn load_row(conn: &Connection, rowid: i64, now: Timestamp) -> OpResult<Option<ExecutionRecord>> {
    let Some(raw) = conn
        .prepare_cached(LOAD_ROW)?
        .query_row([rowid], read_raw)
        .optional()?
    else {
        return Ok(None);
    };
    match raw.into_record() {
        Ok(record) => Ok(Some(record.effective(now))),
        Err(problem) => {
            tracing::warn!(
                rowid,
                ?problem,
                "leaving an undecodable execution out of a list"
            );
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::migrate::plan;

    #[test]
    fn every_page_walks_an_index_without_sorting() {
        for (sql, params, index) in [
            (
                super::ALL,
                3,
                "lease_executions_admitted (namespace=? AND admitted_seq<?)",
            ),
            (
                super::BY_STATUS,
                4,
                "lease_executions_by_status (namespace=? AND status=? AND admitted_seq<?)",
            ),
            (
                super::BY_WORKFLOW,
                5,
                "lease_executions_by_workflow (namespace=? AND workflow=? AND status=? AND admitted_seq<?)",
            ),
            (
                super::BY_KEY,
                5,
                "lease_executions_by_key (namespace=? AND concurrency_key=? AND status=? AND admitted_seq<?)",
            ),
            (
                super::BY_KEY_WORKFLOW,
                6,
                "lease_executions_by_key_workflow (namespace=? AND concurrency_key=? AND workflow=? AND status=? AND admitted_seq<?)",
            ),
        ] {
            let plan = plan(sql, params);
            assert!(plan.contains(index), "{plan}");
            assert!(!plan.contains("TEMP B-TREE"), "{plan}");
        }
    }

    #[test]
    fn cursors_name_positions_this_backend_wrote() {
        let ok = super::cursor_at(42).expect("cursor");
        assert_eq!(super::cursor_seq(&ok).expect("seq"), 42);
        for bad in ["42", "s", "s-1", "s0", "sx1", "s99999999999999999999999"] {
            let cursor = lease_core::ListCursor::new(bad).expect("printable");
            assert!(super::cursor_seq(&cursor).is_err(), "{bad}");
        }
    }
}
