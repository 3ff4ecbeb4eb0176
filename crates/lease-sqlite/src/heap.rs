//! Heap step records (RFC 002 `HeapClient`): the fencing check every fenced write makes,
//! the step rows, and their reads. The client calls run on lease-core's engine
//! ([`crate::SqliteStore`]); a fenced application transaction uses these directly.

use lease_core::{
    Admission, ExecutionId, ExecutionLease, ExecutionRecord, HeapRecord, Json, LeaseError,
    StepCursor, StepKey, StepWrite, Timestamp,
};
use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::error::{OpError, OpResult};
use crate::rows::{self, token_from_sql};
use crate::scope::Scope;

struct RawStep {
    execution_id: String,
    step_key: String,
    step_attempt: i64,
    done: bool,
    response: String,
    token: i64,
}

/// The columns [`read_raw`] expects, in order (every step read selects them).
#[cfg(test)]
const STEP_COLUMNS: &str = "execution_id, step_key, step_attempt, done, response, token";

/// `$1 namespace, $2 id, $3 key, $4 attempt` -> the step record.
const READ_STEP: &str = include_str!("heap/read_step.sql");
/// Up to a number of step records after a cursor (its parameters are in the file).
const LIST_STEPS_PAGE: &str = include_str!("heap/list_steps_page.sql");

fn read_raw(row: &Row<'_>) -> rusqlite::Result<RawStep> {
    Ok(RawStep {
        execution_id: row.get(0)?,
        step_key: row.get(1)?,
        step_attempt: row.get(2)?,
        done: row.get(3)?,
        response: row.get(4)?,
        token: row.get(5)?,
    })
}

fn corrupt(what: &str, e: impl std::fmt::Display) -> OpError {
    OpError::Corrupt(format!("stored step {what} is invalid: {e}"))
}

impl RawStep {
    fn into_record(self) -> OpResult<HeapRecord> {
        Ok(HeapRecord {
            execution_id: ExecutionId::new(self.execution_id)
                .map_err(|e| corrupt("execution id", e))?,
            step_key: StepKey::new(self.step_key).map_err(|e| corrupt("key", e))?,
            step_attempt: u32::try_from(self.step_attempt).map_err(|e| corrupt("attempt", e))?,
            done: self.done,
            response: Json::from_stored(self.response),
            token: token_from_sql(self.token)?,
        })
    }
}

/// `$1 namespace, $2 execution id, $3 step key, $4 attempt, $5 done, $6 response, $7 token`:
/// inserts a step record unless one exists (1 row changed) or leaves it (0 rows).
pub(crate) const INSERT_STEP: &str = include_str!("heap/insert_step.sql");

/// `$1 namespace, $2 id` -> (token, status, lease_expires_at, unacknowledged,
/// attempt_limit): all that the fencing check reads.
const FENCE: &str = include_str!("heap/fence.sql");

/// A row of [`FENCE`].
type Fence = (i64, String, Option<i64>, i64, Option<i64>);

/// The fencing check every fenced write of a step or of the application's rows makes (RFC
/// 002: "the check and the write will be atomic"): lease-core's
/// [`lease_core::ExecutionRecord::holds_at`] on the stored token, status and what decides
/// whether an expiry used the last attempt, so the lease holds when its token is the
/// execution's and its delivery has not ended (nor, on its last attempt, expired). `Ok(false)` when the
/// lease is lost; an unknown execution, token 0 and a token never issued to the execution
/// are typed errors. Run it in the write's own `BEGIN IMMEDIATE` transaction, before the
/// write: SQLite's single write lock keeps every claim out until the transaction ends.
///
/// It reads five columns rather than decoding the whole row: `holds_at` looks at nothing
/// else, and the full decode was most of the fence's cost (a fenced one-row insert ran at 0.71x
/// the same insert unfenced).
pub(crate) fn lease_holds(
    conn: &Connection,
    scope: &Scope,
    lease: &ExecutionLease,
) -> OpResult<bool> {
    lease_holds_at(conn, &scope.namespace, lease, scope.now())
}

/// [`lease_holds`] at `now`.
pub(crate) fn lease_holds_at(
    conn: &Connection,
    namespace: &str,
    lease: &ExecutionLease,
    now: Timestamp,
) -> OpResult<bool> {
    let id = &lease.execution_id;
    let (token, status, expiry, unacknowledged, attempt_limit): Fence = conn
        .prepare_cached(FENCE)?
        .query_row(params![namespace, id.as_str()], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .optional()?
        .ok_or_else(|| LeaseError::UnknownExecution(id.clone()))?;
    let mut stored =
        ExecutionRecord::admitted(&Admission::new(id.clone()), Timestamp::from_millis(0));
    stored.token = token_from_sql(token)?;
    stored.status = status
        .parse()
        .map_err(|e: LeaseError| OpError::Corrupt(format!("stored status is invalid: {e}")))?;
    stored.lease_expires_at = expiry.map(Timestamp::from_millis);
    stored.unacknowledged_deliveries = u32::try_from(unacknowledged)
        .map_err(|e| OpError::Corrupt(format!("stored unacknowledged count: {e}")))?;
    stored.attempt_limit = attempt_limit.map(lease_core::AttemptLimit::from_stored);
    Ok(stored.holds_at(lease, now)?)
}

/// The step record a fenced write left for (execution, key, attempt).
pub(crate) enum Recorded {
    /// This write inserted it.
    Inserted(HeapRecord),
    /// One existed already (an earlier write of this holder or an earlier holder's); it is
    /// kept as it was.
    Existing(HeapRecord),
}

/// The write half of a fenced step write (`step_in_tx`), run after [`lease_holds`] in the
/// same transaction: inserts the record unless one exists for (execution, key, attempt).
pub(crate) fn record_step(
    conn: &Connection,
    scope: &Scope,
    lease: &ExecutionLease,
    write: &StepWrite,
) -> OpResult<Recorded> {
    let record = HeapRecord::from_write(&lease.execution_id, lease.token, write);
    if insert_step(conn, &scope.namespace, &record)? {
        return Ok(Recorded::Inserted(record));
    }
    let existing = read_step(
        conn,
        &scope.namespace,
        &lease.execution_id,
        &write.step_key,
        write.step_attempt,
    )?
    .ok_or_else(|| OpError::Corrupt("a conflicting step record is missing".to_owned()))?;
    Ok(Recorded::Existing(existing))
}

/// Stores a step record unless one is stored at its (execution, key, attempt): `true` when
/// it inserted.
pub(crate) fn insert_step(
    conn: &Connection,
    namespace: &str,
    record: &HeapRecord,
) -> OpResult<bool> {
    let inserted = conn.prepare_cached(INSERT_STEP)?.execute(params![
        namespace,
        record.execution_id.as_str(),
        record.step_key.as_str(),
        i64::from(record.step_attempt),
        record.done,
        record.response.as_str(),
        rows::token_to_sql(record.token)?,
    ])?;
    Ok(inserted == 1)
}

/// `read_step`.
pub(crate) fn read_step(
    conn: &Connection,
    namespace: &str,
    id: &ExecutionId,
    step_key: &StepKey,
    step_attempt: u32,
) -> OpResult<Option<HeapRecord>> {
    conn.prepare_cached(READ_STEP)?
        .query_row(
            params![
                namespace,
                id.as_str(),
                step_key.as_str(),
                i64::from(step_attempt)
            ],
            read_raw,
        )
        .optional()?
        .map(RawStep::into_record)
        .transpose()
}

/// Up to `take` records of `id` after `after`, in `list_steps`'s order.
pub(crate) fn steps_after(
    conn: &Connection,
    namespace: &str,
    id: &ExecutionId,
    after: Option<&StepCursor>,
    take: usize,
) -> OpResult<Vec<HeapRecord>> {
    let key = after.map(|c| c.step_key.as_str());
    let attempt = after.map_or(0, |c| i64::from(c.step_attempt));
    let take = i64::try_from(take).unwrap_or(i64::MAX);
    let raw: Vec<RawStep> = conn
        .prepare_cached(LIST_STEPS_PAGE)?
        .query_map(
            params![namespace, id.as_str(), key, attempt, take],
            read_raw,
        )?
        .collect::<rusqlite::Result<_>>()?;
    raw.into_iter().map(RawStep::into_record).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_step_read_selects_the_columns_read_raw_expects() {
        for sql in [super::READ_STEP, super::LIST_STEPS_PAGE] {
            assert!(sql.contains(super::STEP_COLUMNS), "{sql}");
        }
    }
}
