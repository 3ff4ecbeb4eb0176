//! The engine's reads of every execution of the namespace: the records with their places
//! in admission order (`admitted_seq`).

use std::collections::HashMap;

use lease_core::{ExecutionId, ExecutionRecord};
use rusqlite::{Connection, params};

use crate::error::{OpError, OpResult};
use crate::rows::{RawExecution, read_raw};

/// `$1 namespace` -> every execution, then its place.
const ALL: &str = include_str!("scan/all.sql");

/// `$1 namespace, $2 before` -> the executions admitted strictly before place `$2`, newest
/// first, then each one's place.
const NEWEST: &str = include_str!("scan/newest.sql");

/// A row of [`ALL`] or [`NEWEST`]: the record's columns and its place.
fn placed(row: &rusqlite::Row<'_>) -> rusqlite::Result<(RawExecution, i64)> {
    Ok((read_raw(row)?, row.get(crate::rows::EXECUTION_COLUMNS)?))
}

/// A stored place as the engine counts them.
fn place(raw: i64) -> OpResult<u64> {
    u64::try_from(raw).map_err(|e| OpError::Corrupt(format!("stored admission place: {e}")))
}

/// Every stored record of `namespace`, and each one's place in admission order.
pub(super) fn everything(
    conn: &Connection,
    namespace: &str,
) -> OpResult<(Vec<ExecutionRecord>, HashMap<ExecutionId, u64>)> {
    let mut statement = conn.prepare_cached(ALL)?;
    let rows = statement.query_map(params![namespace], placed)?;
    let (mut records, mut places) = (Vec::new(), HashMap::new());
    for row in rows {
        let (raw, at) = row?;
        let record = raw.into_record()?;
        places.insert(record.id.clone(), place(at)?);
        records.push(record);
    }
    Ok((records, places))
}

/// [`lease_core::engine::Tx::newest_admitted`]: one walk of the namespace's rows by place,
/// read a row at a time until `visit` stops it.
pub(super) fn newest_first(
    conn: &Connection,
    namespace: &str,
    before: Option<u64>,
    visit: &mut dyn FnMut(u64, &ExecutionRecord) -> bool,
) -> OpResult<()> {
    let before = before.map_or(i64::MAX, |b| i64::try_from(b).unwrap_or(i64::MAX));
    let mut statement = conn.prepare_cached(NEWEST)?;
    let rows = statement.query_map(params![namespace, before], placed)?;
    for row in rows {
        let (raw, at) = row?;
        if !visit(place(at)?, &raw.into_record()?) {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_read_selects_the_columns_read_raw_expects() {
        for sql in [super::ALL, super::NEWEST] {
            assert!(sql.contains(crate::rows::execution_columns!()), "{sql}");
        }
    }
}
