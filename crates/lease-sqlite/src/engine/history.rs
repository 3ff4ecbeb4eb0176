//! A whole delivery history rewritten by the engine's general path
//! ([`lease_core::engine::Tx::update_history`]); the transitions' own events are written with
//! their row (see `super::cache`).

use lease_core::{DeliveryHistory, ExecutionId};
use rusqlite::Connection;

use crate::error::OpResult;
use crate::history::HistoryWrite;
use crate::rows;
use crate::scope::Scope;

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
