//! Decoding rows into lease-core types. A row that breaks an invariant the schema should
//! guarantee (negative token, unknown status, invalid id) is a [`LeaseError::Protocol`],
//! never a panic.

use lease_core::{
    ExecutionId, ExecutionLease, ExecutionOutcome, ExecutionRecord, ExecutionStatus, FencingToken,
    HeapRecord, Json, LastError, LeaseError, Result, StepKey, Timestamp, WorkflowName,
};
use sqlx::Row;
use sqlx::postgres::PgRow;

use crate::error::protocol;

/// Reads column `index` of `row`, mapping decode failures to [`LeaseError::Protocol`].
pub(crate) fn col<'r, T>(row: &'r PgRow, index: usize, operation: &'static str) -> Result<T>
where
    T: sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    row.try_get(index)
        .map_err(|e| protocol(operation, format!("column {index}: {e}")))
}

/// A token as stored (bigint, never negative).
pub(crate) fn token(value: i64, operation: &'static str) -> Result<FencingToken> {
    u64::try_from(value)
        .map(FencingToken::new)
        .map_err(|_| protocol(operation, format!("negative token {value}")))
}

/// A lease's token as a bigint parameter. Tokens come from a bigint sequence, so one above
/// `i64::MAX` was never issued to any execution: [`LeaseError::ForeignToken`] for the
/// execution the lease names, before any statement (saturating it to `i64::MAX` would make
/// it equal the latest token once the sequence reaches its top). The lease names its
/// execution, so this holds even when that execution does not exist (where a statement
/// would have said `UnknownExecution`): both are bad input and nothing changed.
pub(crate) fn token_param(lease: &ExecutionLease) -> Result<i64> {
    i64::try_from(lease.token.get()).map_err(|_| LeaseError::ForeignToken {
        execution: lease.execution_id.clone(),
        token: lease.token,
    })
}

/// A status as stored.
pub(crate) fn status(value: &str, operation: &'static str) -> Result<ExecutionStatus> {
    value
        .parse()
        .map_err(|_| protocol(operation, format!("unknown status {value:?}")))
}

fn ts(value: Option<i64>) -> Option<Timestamp> {
    value.map(Timestamp::from_millis)
}

/// A stored name parsed by `parse`; one this library would not have written is
/// [`lease_core::LeaseError::Protocol`].
pub(crate) fn stored_name<T>(
    value: String,
    operation: &'static str,
    parse: fn(String) -> Result<T>,
) -> Result<T> {
    parse(value).map_err(|e| protocol(operation, format!("stored name is invalid: {e}")))
}

/// How many columns `{cols}` (`statements/execution_columns.sql`) has.
pub(crate) const EXECUTION_COLUMNS: usize = 23;

/// The stored execution record in the first [`EXECUTION_COLUMNS`] columns
/// (`statements/execution_columns.sql` order).
pub(crate) fn execution(row: &PgRow, operation: &'static str) -> Result<ExecutionRecord> {
    execution_from(row, 0, operation)
}

/// The stored execution record in the [`EXECUTION_COLUMNS`] columns from `first` on
/// (`statements/execution_columns.sql` order).
pub(crate) fn execution_from(
    row: &PgRow,
    first: usize,
    operation: &'static str,
) -> Result<ExecutionRecord> {
    let at = |i: usize| first + i;
    let id: String = col(row, at(0), operation)?;
    let workflow: Option<String> = col(row, at(1), operation)?;
    let input: Option<String> = col(row, at(2), operation)?;
    let status_text: String = col(row, at(3), operation)?;
    let status = status(&status_text, operation)?;
    let token = token(col(row, at(4), operation)?, operation)?;
    let unacked: i64 = col(row, at(8), operation)?;
    let outcome: Option<String> = col(row, at(11), operation)?;
    let priority: i32 = col(row, at(12), operation)?;
    let key: Option<String> = col(row, at(13), operation)?;
    let trace: Option<String> = col(row, at(14), operation)?;
    let outcome = match (status, outcome) {
        (ExecutionStatus::Completed, Some(v)) => {
            Some(ExecutionOutcome::Completed(Json::from_stored(v)))
        }
        (ExecutionStatus::Failed, Some(v)) => Some(ExecutionOutcome::Failed(Json::from_stored(v))),
        (ExecutionStatus::Cancelled, Some(v)) => Some(ExecutionOutcome::Cancelled(
            lease_core::CancelReason::from_stored(v),
        )),
        (s, Some(_)) if !s.is_terminal() => None,
        // Dead is the one end without an outcome: nobody chose it.
        (s, None) if s.is_terminal() && s != ExecutionStatus::Dead => {
            return Err(protocol(operation, "terminal execution without an outcome"));
        }
        _ => None,
    };
    Ok(ExecutionRecord {
        id: stored_name(id, operation, ExecutionId::new)?,
        workflow: workflow
            .map(|w| stored_name(w, operation, WorkflowName::new))
            .transpose()?,
        input: input.map(Json::from_stored),
        status,
        token,
        lease_expires_at: ts(col(row, at(5), operation)?),
        due_at: ts(col(row, at(6), operation)?),
        wake_after_claim: ts(col(row, at(7), operation)?),
        unacknowledged_deliveries: u32::try_from(unacked)
            .map_err(|_| protocol(operation, format!("bad unacknowledged count {unacked}")))?,
        last_delivery_ended_at: ts(col(row, at(9), operation)?),
        ever_suspended: col(row, at(10), operation)?,
        outcome,
        priority: lease_core::Priority::new(priority)
            .map_err(|e| protocol(operation, e.to_string()))?,
        concurrency_key: key
            .map(|k| stored_name(k, operation, lease_core::ConcurrencyKey::new))
            .transpose()?,
        trace_context: lease_core::TraceContext::from_stored_lenient(trace.as_deref()),
        attempt_limit: col::<Option<i64>>(row, at(15), operation)?
            .map(lease_core::AttemptLimit::from_stored),
        last_error: last_error(row, first, operation)?,
        redelivery_policy: redelivery_policy(row, first, operation)?,
    })
}

/// The redelivery policy the claim stamped, in columns 20 to 22 from `first` (schema v17:
/// all three set, or none for the handle's policy); validated again like any stored policy.
fn redelivery_policy(
    row: &PgRow,
    first: usize,
    operation: &'static str,
) -> Result<Option<lease_core::RedeliveryPolicy>> {
    let base: Option<i64> = col(row, first + 20, operation)?;
    let factor: Option<i64> = col(row, first + 21, operation)?;
    let cap: Option<i64> = col(row, first + 22, operation)?;
    let (Some(base), Some(factor), Some(cap)) = (base, factor, cap) else {
        return Ok(None);
    };
    let parts = (
        u64::try_from(base).ok(),
        u32::try_from(factor).ok(),
        u64::try_from(cap).ok(),
    );
    let (Some(base), Some(factor), Some(cap)) = parts else {
        return Err(protocol(
            operation,
            "a stamped redelivery policy out of range",
        ));
    };
    lease_core::RedeliveryPolicy::from_parts(base, factor, cap)
        .map(Some)
        .map_err(|e| protocol(operation, format!("stamped redelivery policy: {e}")))
}

/// The last error in columns 16 to 19 from `first` (schema v15: all four set, or none).
fn last_error(row: &PgRow, first: usize, operation: &'static str) -> Result<Option<LastError>> {
    let kind: Option<String> = col(row, first + 16, operation)?;
    let Some(kind) = kind else {
        return Ok(None);
    };
    let attempt: Option<i64> = col(row, first + 18, operation)?;
    let at: Option<i64> = col(row, first + 19, operation)?;
    Ok(Some(LastError {
        kind,
        message: col::<Option<String>>(row, first + 17, operation)?.unwrap_or_default(),
        attempt: attempt
            .and_then(|a| u32::try_from(a).ok())
            .ok_or_else(|| protocol(operation, format!("bad last error attempt {attempt:?}")))?,
        at: Timestamp::from_millis(
            at.ok_or_else(|| protocol(operation, "a last error without its time"))?,
        ),
    }))
}

/// A step record: (execution_id, step_key, step_attempt, done, response, token).
pub(crate) fn step(row: &PgRow, operation: &'static str) -> Result<HeapRecord> {
    let attempt: i64 = col(row, 2, operation)?;
    Ok(HeapRecord {
        execution_id: stored_name(col(row, 0, operation)?, operation, ExecutionId::new)?,
        step_key: stored_name(col(row, 1, operation)?, operation, StepKey::new)?,
        step_attempt: u32::try_from(attempt)
            .map_err(|_| protocol(operation, format!("bad step attempt {attempt}")))?,
        done: col(row, 3, operation)?,
        response: Json::from_stored(col(row, 4, operation)?),
        token: token(col(row, 5, operation)?, operation)?,
    })
}

/// The outcome of a fenced statement: the row's current token and status (as locked), and
/// whether the statement took effect.
pub(crate) struct FenceCheck {
    /// The execution's token after the lock was granted.
    pub(crate) current: FencingToken,
    /// Its stored status.
    pub(crate) status: ExecutionStatus,
}

impl FenceCheck {
    /// Decodes columns 0 (token) and 1 (status).
    pub(crate) fn decode(row: &PgRow, operation: &'static str) -> Result<Self> {
        Self::decode_at(row, 0, operation)
    }

    /// Decodes columns `first` (token) and `first + 1` (status); `None` when both are NULL
    /// (no such execution).
    pub(crate) fn decode_optional(
        row: &PgRow,
        first: usize,
        operation: &'static str,
    ) -> Result<Option<Self>> {
        let current: Option<i64> = col(row, first, operation)?;
        current
            .map(|_| Self::decode_at(row, first, operation))
            .transpose()
    }

    fn decode_at(row: &PgRow, first: usize, operation: &'static str) -> Result<Self> {
        let current = token(col(row, first, operation)?, operation)?;
        let status_text: String = col(row, first + 1, operation)?;
        Ok(FenceCheck {
            current,
            status: status(&status_text, operation)?,
        })
    }

    /// The error `ExecutionRecord::holds` reports for this lease, if any: token 0 is bad
    /// input, a token above the execution's latest was never issued to it. `Ok(())` when the
    /// lease is either current or `Lost`.
    pub(crate) fn refusal(&self, id: &ExecutionId, lease_token: FencingToken) -> Result<()> {
        if lease_token == FencingToken::NONE {
            return Err(LeaseError::invalid("lease token", "0 is never issued"));
        }
        if lease_token > self.current {
            return Err(LeaseError::ForeignToken {
                execution: id.clone(),
                token: lease_token,
            });
        }
        Ok(())
    }

    /// Why a lease did not take effect, exactly as `ExecutionRecord::holds` decides: token 0
    /// is bad input, a token above the execution's latest was never issued to it, anything
    /// else is `Lost` (`Ok(())`). A current token on a running row must have taken effect,
    /// so that is a protocol error.
    pub(crate) fn rejection(
        &self,
        id: &ExecutionId,
        lease_token: FencingToken,
        operation: &'static str,
    ) -> Result<()> {
        self.refusal(id, lease_token)?;
        if lease_token == self.current && self.status == ExecutionStatus::Running {
            return Err(protocol(
                operation,
                "the token is current but the fenced statement did not apply",
            ));
        }
        Ok(())
    }
}
