//! Issue 21 controls for SQLite, each run inside the caller's one write transaction (one
//! writer at a time, so every check and write here is atomic): cancel through lease-core's
//! [`ExecutionRecord::cancel`] transition.

use lease_core::{CancelOutcome, CancelReason, ExecutionId, ExecutionRecord};
use rusqlite::Connection;

use crate::error::OpResult;
use crate::group::Woken;
use crate::rows;
use crate::scope::Scope;

/// `cancel` (issue 21 item 1): a terminal record is left as stored and says why; otherwise
/// the effective record (an expired delivery ends unacknowledged first) is cancelled and
/// written back, which clears its claim columns, so no claim or horizon sees it again. A
/// keyed execution frees a place of its key: the wake-up path hears "now".
pub(crate) fn cancel(
    conn: &Connection,
    scope: &Scope,
    id: &ExecutionId,
    reason: &CancelReason,
) -> OpResult<Woken<CancelOutcome>> {
    let now = scope.now();
    let stored: ExecutionRecord = rows::load_required(conn, &scope.namespace, id)?;
    if stored.status.is_terminal() {
        return Ok(Woken::quiet(stored.clone().cancel(now, reason)));
    }
    let mut record = stored.effective(now);
    let outcome = record.cancel(now, reason);
    rows::save(conn, &scope.namespace, &record, &scope.policy)?;
    let wake = record.concurrency_key.is_some().then_some(now);
    Ok(Woken::at(outcome, wake))
}
