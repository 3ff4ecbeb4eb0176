//! The engine's records and histories in SQLite's row: the latest delivery may live in the
//! row's own columns (see `crate::history`), so a write that changes the row's fields first
//! folds that delivery into the JSON, and the history stays what it was.

use lease_core::{DeliveryHistory, ExecutionId, ExecutionRecord, LeaseError};
use rusqlite::Connection;

use crate::error::OpResult;
use crate::history::{HistoryWrite, StoredHistory};
use crate::rows;
use crate::scope::Scope;

/// [`lease_core::engine::Tx::update_execution`]: loads the record, applies `change`, and
/// writes it back only if it changed, with its history moved out of the columns.
pub(super) fn update<R>(
    conn: &Connection,
    scope: &Scope,
    id: &ExecutionId,
    change: impl FnOnce(&mut ExecutionRecord) -> R,
) -> OpResult<Option<R>> {
    let ns = scope.namespace.as_str();
    let (stored, history) = match rows::load_with_history(conn, ns, id) {
        Ok(found) => found,
        Err(crate::error::OpError::Lease(LeaseError::UnknownExecution(_))) => return Ok(None),
        Err(other) => return Err(other),
    };
    let mut record = stored.clone();
    let answer = change(&mut record);
    if record != stored {
        let write = unfolded(&history, &stored)?;
        rows::save_with(conn, ns, &record, &scope.policy, &write)?;
        // The row's own write leaves the input as admitted; only a retry replaces it.
        if record.input != stored.input
            && let Some(input) = &record.input
        {
            rows::set_input(conn, ns, id, input)?;
        }
    }
    Ok(Some(answer))
}

/// [`lease_core::engine::Tx::history`]: the stored (not effective) history.
pub(super) fn read(
    conn: &Connection,
    namespace: &str,
    id: &ExecutionId,
) -> OpResult<Option<DeliveryHistory>> {
    match rows::load_with_history(conn, namespace, id) {
        Ok((stored, history)) => Ok(Some(history.read(&stored)?)),
        Err(crate::error::OpError::Lease(LeaseError::UnknownExecution(_))) => Ok(None),
        Err(other) => Err(other),
    }
}

/// [`lease_core::engine::Tx::update_history`]: the whole history rewritten as JSON.
pub(super) fn change(
    conn: &Connection,
    scope: &Scope,
    id: &ExecutionId,
    change: impl FnOnce(&mut DeliveryHistory),
) -> OpResult<()> {
    let ns = scope.namespace.as_str();
    let (stored, history) = rows::load_with_history(conn, ns, id)?;
    let mut whole = history.read(&stored)?;
    change(&mut whole);
    let write = HistoryWrite {
        json: Some(crate::history::to_sql(&whole)?),
        claimed_at: Some(None),
    };
    rows::save_with(conn, ns, &stored, &scope.policy, &write)
}

/// What a write of the row's fields stores of `history` so that it still reads the same:
/// nothing when the JSON already holds every delivery, else the whole history as JSON and
/// the columns no longer describing one.
fn unfolded(history: &StoredHistory, stored: &ExecutionRecord) -> OpResult<HistoryWrite> {
    if !history.describes_latest() {
        return Ok(HistoryWrite::default());
    }
    Ok(HistoryWrite {
        json: Some(crate::history::to_sql(&history.read(stored)?)?),
        claimed_at: Some(None),
    })
}
