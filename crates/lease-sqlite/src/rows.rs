//! Execution rows: reading and writing [`ExecutionRecord`]s, and the two derived columns
//! that let `claim_due` find candidates through an index instead of scanning.

use lease_core::{
    ExecutionId, ExecutionOutcome, ExecutionRecord, ExecutionStatus, FencingToken, Json,
    LeaseError, RedeliveryPolicy, Timestamp, WorkflowName,
};
use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::error::{OpError, OpResult};
use crate::history::{HistoryWrite, StoredHistory};

/// The columns [`read_raw`] expects, in order (a macro so SQL can be built with `concat!`).
macro_rules! execution_columns {
    () => {
        "id, workflow, input, status, token, lease_expires_at, due_at, wake_after_claim, \
         unacknowledged, last_delivery_ended_at, ever_suspended, outcome, priority, \
         concurrency_key, trace_context, attempt_limit, last_error, redelivery_policy"
    };
}
pub(crate) use execution_columns;

/// How many columns [`execution_columns!`] names (a candidate query's extra columns follow).
pub(crate) const EXECUTION_COLUMNS: usize = 18;

/// An execution row as stored, before validation.
pub(crate) struct RawExecution {
    id: String,
    workflow: Option<String>,
    input: Option<String>,
    status: String,
    token: i64,
    lease_expires_at: Option<i64>,
    due_at: Option<i64>,
    wake_after_claim: Option<i64>,
    unacknowledged: i64,
    last_delivery_ended_at: Option<i64>,
    ever_suspended: bool,
    outcome: Option<String>,
    priority: i64,
    concurrency_key: Option<String>,
    trace_context: Option<String>,
    attempt_limit: Option<i64>,
    last_error: Option<String>,
    redelivery_policy: Option<String>,
}

/// Reads the columns of [`execution_columns!`] from a row (for use inside `query_map`).
pub(crate) fn read_raw(row: &Row<'_>) -> rusqlite::Result<RawExecution> {
    Ok(RawExecution {
        id: row.get(0)?,
        workflow: row.get(1)?,
        input: row.get(2)?,
        status: row.get(3)?,
        token: row.get(4)?,
        lease_expires_at: row.get(5)?,
        due_at: row.get(6)?,
        wake_after_claim: row.get(7)?,
        unacknowledged: row.get(8)?,
        last_delivery_ended_at: row.get(9)?,
        ever_suspended: row.get(10)?,
        outcome: row.get(11)?,
        priority: row.get(12)?,
        concurrency_key: row.get(13)?,
        trace_context: row.get(14)?,
        attempt_limit: row.get(15)?,
        last_error: row.get(16)?,
        redelivery_policy: row.get(17)?,
    })
}

fn corrupt(what: &str, e: impl std::fmt::Display) -> OpError {
    OpError::Corrupt(format!("stored {what} is invalid: {e}"))
}

fn ts(v: Option<i64>) -> Option<Timestamp> {
    v.map(Timestamp::from_millis)
}

fn ms(v: Option<Timestamp>) -> Option<i64> {
    v.map(Timestamp::as_millis)
}

/// A record's own redelivery policy in its stored form, `base_ms,factor,cap_ms`.
pub(crate) fn policy_to_sql(p: &RedeliveryPolicy) -> String {
    format!("{},{},{}", p.base_ms(), p.factor(), p.cap_ms())
}

/// Reads [`policy_to_sql`]'s form back, validated again (a damaged row is corrupt).
fn policy_from_sql(text: &str) -> OpResult<RedeliveryPolicy> {
    let parts: Vec<&str> = text.split(',').collect();
    let [base, factor, cap] = parts[..] else {
        return Err(corrupt(
            "redelivery policy",
            format!("{text:?} has not three parts"),
        ));
    };
    let num = |v: &str| {
        v.parse::<u64>()
            .map_err(|e| corrupt("redelivery policy", e))
    };
    let factor = u32::try_from(num(factor)?).map_err(|e| corrupt("redelivery policy", e))?;
    RedeliveryPolicy::from_parts(num(base)?, factor, num(cap)?)
        .map_err(|e| corrupt("redelivery policy", e))
}

/// Converts a token to its stored form.
pub(crate) fn token_to_sql(token: FencingToken) -> OpResult<i64> {
    i64::try_from(token.get()).map_err(|e| corrupt("token", e))
}

/// Converts a stored token.
pub(crate) fn token_from_sql(raw: i64) -> OpResult<FencingToken> {
    u64::try_from(raw)
        .map(FencingToken::new)
        .map_err(|e| corrupt("token", e))
}

impl RawExecution {
    /// Validates the row into a record; `Protocol` (via [`OpError::Corrupt`]) when any
    /// field is not something this library writes.
    pub(crate) fn into_record(self) -> OpResult<ExecutionRecord> {
        let status: ExecutionStatus = self
            .status
            .parse()
            .map_err(|e: LeaseError| corrupt("status", e))?;
        let outcome = match (status, self.outcome) {
            (ExecutionStatus::Completed, Some(v)) => {
                Some(ExecutionOutcome::Completed(Json::from_stored(v)))
            }
            (ExecutionStatus::Failed, Some(v)) => {
                Some(ExecutionOutcome::Failed(Json::from_stored(v)))
            }
            (ExecutionStatus::Cancelled, Some(v)) => Some(ExecutionOutcome::Cancelled(
                lease_core::CancelReason::from_stored(v),
            )),
            // A dead execution has no outcome: why it died is its last error.
            (ExecutionStatus::Dead, None) => None,
            (s, None) if s.is_terminal() => {
                return Err(corrupt(
                    "outcome",
                    format!("{s} execution without an outcome"),
                ));
            }
            (_, None) => None,
            (s, Some(_)) => {
                return Err(corrupt("outcome", format!("{s} execution with an outcome")));
            }
        };
        Ok(ExecutionRecord {
            id: ExecutionId::new(self.id).map_err(|e| corrupt("execution id", e))?,
            workflow: self
                .workflow
                .map(WorkflowName::new)
                .transpose()
                .map_err(|e| corrupt("workflow", e))?,
            input: self.input.map(Json::from_stored),
            status,
            token: token_from_sql(self.token)?,
            lease_expires_at: ts(self.lease_expires_at),
            due_at: ts(self.due_at),
            wake_after_claim: ts(self.wake_after_claim),
            unacknowledged_deliveries: u32::try_from(self.unacknowledged)
                .map_err(|e| corrupt("unacknowledged_deliveries", e))?,
            last_delivery_ended_at: ts(self.last_delivery_ended_at),
            ever_suspended: self.ever_suspended,
            outcome,
            priority: lease_core::Priority::from_stored(self.priority),
            concurrency_key: self
                .concurrency_key
                .map(lease_core::ConcurrencyKey::new)
                .transpose()
                .map_err(|e| corrupt("concurrency key", e))?,
            trace_context: lease_core::TraceContext::from_stored_lenient(
                self.trace_context.as_deref(),
            ),
            attempt_limit: self
                .attempt_limit
                .map(lease_core::AttemptLimit::from_stored),
            last_error: self
                .last_error
                .map(|text| serde_json::from_str(&text))
                .transpose()
                .map_err(|e| corrupt("last error", e))?,
            redelivery_policy: self
                .redelivery_policy
                .as_deref()
                .map(policy_from_sql)
                .transpose()?,
        })
    }
}

/// The derived claim columns of a stored record:
///
/// * `claim_due_at`: the due time the record is ordered by when claimed (for a running
///   record, the due time its lease's expiry would leave: `min(due_at, wake_after_claim)`);
/// * `claimable_at`: the earliest instant `t` at which `record.effective(t).claimable(t)`
///   holds, assuming no further write; `None` when never (terminal, not due, or a running
///   record without expiry).
///
/// `claimable_at <= now` is then exactly "claimable at now" (unit-tested against the state
/// machine), so `claim_due` selects candidates with an index range scan.
pub(crate) fn claim_keys(
    r: &ExecutionRecord,
    policy: &RedeliveryPolicy,
) -> (Option<Timestamp>, Option<Timestamp>) {
    if r.status.is_terminal() {
        return (None, None);
    }
    if r.status == ExecutionStatus::Running {
        let Some(expiry) = r.lease_expires_at else {
            // effective() would end it "now" and gate it from then on: never claimable.
            return (None, None);
        };
        if r.expired_into_dead(expiry) {
            // Its expiry uses the last attempt: dead from then on, never claimable.
            return (None, None);
        }
        let due = match (r.due_at, r.wake_after_claim) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // The expiry ends the delivery the claim stamped: its policy sets the delay.
        let policy = r.redelivery_policy.as_ref().unwrap_or(policy);
        let gate =
            expiry.saturating_add(policy.delay(r.unacknowledged_deliveries.saturating_add(1)));
        return (due, due.map(|d| d.max(gate)));
    }
    let due = r.due_at;
    let gate = r.redelivery_not_before(policy);
    (due, due.map(|d| gate.map_or(d, |g| d.max(g))))
}

/// `$1 namespace, $2 id` -> the stored row in [`execution_columns!`] order.
pub(crate) const LOAD: &str = include_str!("rows/load.sql");

/// `$1 namespace, $2 id` -> the stored row in [`execution_columns!`] order, then its
/// delivery history (`deliveries`, `delivery_claimed_at`).
pub(crate) const LOAD_HISTORY: &str = include_str!("rows/load_history.sql");

/// Loads the stored (not effective) record with its stored delivery history (not decoded
/// yet), or fails with `UnknownExecution`.
pub(crate) fn load_with_history(
    conn: &Connection,
    namespace: &str,
    id: &ExecutionId,
) -> OpResult<(ExecutionRecord, StoredHistory)> {
    let raw = conn
        .prepare_cached(LOAD_HISTORY)?
        .query_row(params![namespace, id.as_str()], |row| {
            Ok((
                read_raw(row)?,
                StoredHistory::new(row.get(EXECUTION_COLUMNS)?, row.get(EXECUTION_COLUMNS + 1)?),
            ))
        })
        .optional()?;
    let (raw, history) = raw.ok_or_else(|| LeaseError::UnknownExecution(id.clone()))?;
    Ok((raw.into_record()?, history))
}

/// [`SAVE`]'s parameters `$1..$15`, then `$16 workflow, $17 input, $18 priority,
/// $19 concurrency_key, $20 trace_context` (the fields only [`INSERT`] writes; a retry's
/// new input is written by [`set_input`]).
const SAVED_PARAMS: usize = 15;

/// [`INSERT`]'s parameters: every field.
const ALL_PARAMS: usize = 20;

/// A record's fields as the statements bind them, in parameter order.
struct Fields<'a> {
    namespace: &'a str,
    r: &'a ExecutionRecord,
    token: i64,
    claim_due_at: Option<i64>,
    claimable_at: Option<i64>,
    last_error: Option<String>,
}

impl<'a> Fields<'a> {
    fn of(namespace: &'a str, r: &'a ExecutionRecord, policy: &RedeliveryPolicy) -> OpResult<Self> {
        let (claim_due_at, claimable_at) = claim_keys(r, policy);
        Ok(Fields {
            namespace,
            r,
            token: token_to_sql(r.token)?,
            claim_due_at: ms(claim_due_at),
            claimable_at: ms(claimable_at),
            last_error: r
                .last_error
                .as_ref()
                .map(serde_json::to_string)
                .transpose()
                .map_err(|e| corrupt("last error", e))?,
        })
    }

    /// Binds `$1..$upto` (`upto` is [`SAVED_PARAMS`] or [`ALL_PARAMS`]), then `extra`.
    fn bind(
        &self,
        stmt: &mut rusqlite::CachedStatement<'_>,
        upto: usize,
        extra: &[&dyn rusqlite::ToSql],
    ) -> OpResult<usize> {
        let r = self.r;
        let values: [&dyn rusqlite::ToSql; ALL_PARAMS] = [
            &self.namespace,
            &r.id.as_str(),
            &r.status.as_str(),
            &self.token,
            &ms(r.lease_expires_at),
            &ms(r.due_at),
            &ms(r.wake_after_claim),
            &i64::from(r.unacknowledged_deliveries),
            &ms(r.last_delivery_ended_at),
            &r.ever_suspended,
            &outcome_text(r),
            &self.claim_due_at,
            &self.claimable_at,
            &r.attempt_limit.map(|l| i64::from(l.get())),
            &self.last_error,
            &r.workflow.as_ref().map(WorkflowName::as_str),
            &r.input.as_ref().map(Json::as_str),
            &i64::from(r.priority.get()),
            &r.concurrency_key.as_ref().map(|k| k.as_str()),
            &r.trace_context
                .as_ref()
                .map(lease_core::TraceContext::to_stored),
        ];
        let mut bound: Vec<&dyn rusqlite::ToSql> = Vec::with_capacity(upto + extra.len());
        bound.extend_from_slice(&values[..upto]);
        bound.extend_from_slice(extra);
        Ok(stmt.execute(&bound[..])?)
    }
}

/// `$1..$20` ([`Fields::bind`]): inserts a new row unless the id exists, one place after
/// the namespace's latest in the admission order (`admitted_seq`).
pub(crate) const INSERT: &str = include_str!("rows/insert.sql");

/// Inserts a new record unless the id exists: `true` when it inserted.
pub(crate) fn insert(
    conn: &Connection,
    namespace: &str,
    r: &ExecutionRecord,
    policy: &RedeliveryPolicy,
) -> OpResult<bool> {
    let inserted = Fields::of(namespace, r, policy)?.bind(
        &mut conn.prepare_cached(INSERT)?,
        ALL_PARAMS,
        &[],
    )?;
    Ok(inserted == 1)
}

fn outcome_text(r: &ExecutionRecord) -> Option<&str> {
    r.outcome.as_ref().map(|o| match o {
        ExecutionOutcome::Completed(v) | ExecutionOutcome::Failed(v) => v.as_str(),
        ExecutionOutcome::Cancelled(reason) => reason.as_str(),
    })
}

/// `$1 namespace, $2 id, $3 input`: replaces an execution's input (a retry's new input).
const SET_INPUT: &str = include_str!("rows/set_input.sql");

/// Replaces the stored input of `id` (in the caller's transaction).
pub(crate) fn set_input(
    conn: &Connection,
    namespace: &str,
    id: &ExecutionId,
    input: &Json,
) -> OpResult<()> {
    conn.prepare_cached(SET_INPUT)?
        .execute(params![namespace, id.as_str(), input.as_str()])?;
    Ok(())
}

/// `$1 namespace, $2 id, $3 status, $4 token, $5 lease_expires_at, $6 due_at,
/// $7 wake_after_claim, $8 unacknowledged, $9 last_delivery_ended_at, $10 ever_suspended,
/// $11 outcome, $12 claim_due_at, $13 claimable_at, $14 attempt_limit, $15 last_error`:
/// writes back every mutable field.
/// A successful write also lifts a quarantine (`corrupt`): the row decoded again.
pub(crate) const SAVE: &str = include_str!("rows/save.sql");

/// [`SAVE`]'s parameters, then `$18 delivery_claimed_at`: also writes the column that
/// says whether the row describes its latest delivery (the history's claims and folds).
const SAVE_HISTORY: &str = include_str!("rows/save_history.sql");

/// [`save`], also writing what `history` says of the delivery history in the same
/// `UPDATE`: a transition that starts or ends a delivery records it at no statement of its
/// own. One that leaves `delivery_claimed_at` as stored runs the plain [`SAVE`] (the
/// drain's acknowledgement), so the column costs it nothing.
pub(crate) fn save_with(
    conn: &Connection,
    namespace: &str,
    r: &ExecutionRecord,
    policy: &RedeliveryPolicy,
    history: &HistoryWrite,
) -> OpResult<()> {
    let fields = Fields::of(namespace, r, policy)?;
    let own_policy = r.redelivery_policy.as_ref().map(policy_to_sql);
    let changed = match &history.claimed_at {
        None => fields.bind(
            &mut conn.prepare_cached(SAVE)?,
            SAVED_PARAMS,
            &[&own_policy, &history.json],
        )?,
        Some(claimed_at) => fields.bind(
            &mut conn.prepare_cached(SAVE_HISTORY)?,
            SAVED_PARAMS,
            &[&own_policy, &history.json, claimed_at],
        )?,
    };
    if changed != 1 {
        return Err(OpError::Corrupt(format!(
            "execution {} vanished inside its transaction",
            r.id
        )));
    }
    Ok(())
}

/// `$1 namespace, $2 id, $3 lease_expires_at, $4 claimable_at`: a renewal's write, the
/// only columns it changes (a write naming every column rewrites every index entry of the
/// row, about half of a renewal's time on SQLite). Writes nothing on a quarantined row,
/// which [`SAVE`] must write to lift the quarantine.
const SAVE_LEASE: &str = include_str!("rows/save_lease.sql");

/// Writes a renewal of `r`: `false` when the row needs [`save_with`] instead.
pub(crate) fn save_lease(
    conn: &Connection,
    namespace: &str,
    r: &ExecutionRecord,
    policy: &RedeliveryPolicy,
) -> OpResult<bool> {
    let (_, claimable_at) = claim_keys(r, policy);
    let changed = conn.prepare_cached(SAVE_LEASE)?.execute(params![
        namespace,
        r.id.as_str(),
        ms(r.lease_expires_at),
        ms(claimable_at)
    ])?;
    Ok(changed == 1)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use lease_core::{Admission, WorkflowRunOutcome};

    use super::*;

    #[test]
    fn every_row_statement_reads_the_columns_read_raw_expects() {
        for sql in [
            LOAD,
            LOAD_HISTORY,
            crate::candidates::WAITING_FIRST,
            crate::candidates::WAITING_NEXT,
            crate::candidates::RUNNING_FIRST,
            crate::candidates::RUNNING_NEXT,
            crate::engine::lists::LIST_FAILING,
            crate::engine::lists::LIST_EXPIRED,
            crate::engine::lists::LIST_LIVE_LEASES,
            crate::engine::lists::LIST_DEAD,
        ] {
            assert!(sql.contains(execution_columns!()), "{sql}");
        }
    }

    fn policy() -> RedeliveryPolicy {
        RedeliveryPolicy::new(Duration::from_millis(100), 2, Duration::from_millis(1600))
            .expect("valid policy")
    }

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    fn check_exact(r: &ExecutionRecord, label: &str) {
        let p = policy();
        let (_, at) = claim_keys(r, &p);
        for now in (0..6_000)
            .step_by(7)
            .chain([999, 1000, 1001, 1100, 1101, 1300, 1301])
        {
            let now = t(now);
            let claimable = r.effective(now).claimable(now, &p);
            let predicted = at.is_some_and(|a| a <= now);
            assert_eq!(
                claimable, predicted,
                "{label}: now={now:?} claimable_at={at:?} record={r:?}"
            );
        }
    }

    #[test]
    fn claimable_at_is_exact_for_every_state() {
        let p = policy();
        let id = ExecutionId::new("x").expect("id");
        let fresh = ExecutionRecord::admitted(&Admission::new(id), t(500));
        check_exact(&fresh, "admitted");

        let mut running = fresh.clone();
        running.claim(t(600), 400, FencingToken::new(1));
        check_exact(&running, "running");
        running.request_wake(t(50));
        check_exact(&running, "running with an earlier wake");

        let mut released = running.clone();
        released.release(t(700));
        check_exact(&released, "released once");
        let mut twice = released.effective(t(5_000));
        twice.claim(t(5_000), 1, FencingToken::new(2));
        check_exact(&twice, "running after a release");
        twice.release(t(1_000));
        check_exact(&twice, "released twice");

        let mut suspended = running.clone();
        suspended.acknowledge(t(800), &WorkflowRunOutcome::Suspended);
        check_exact(&suspended, "suspended with a wake");
        let mut idle = fresh.clone();
        idle.claim(t(600), 400, FencingToken::new(1));
        idle.acknowledge(t(650), &WorkflowRunOutcome::Suspended);
        check_exact(&idle, "suspended without a wake");
        idle.request_wake(t(2_000));
        check_exact(&idle, "woken later");

        let mut done = fresh.clone();
        done.claim(t(600), 400, FencingToken::new(1));
        done.acknowledge(t(650), &WorkflowRunOutcome::Completed(Json::null()));
        check_exact(&done, "completed");

        let mut last_attempt = fresh.clone();
        last_attempt.attempt_limit = Some(lease_core::AttemptLimit::new(1).expect("limit"));
        last_attempt.claim(t(600), 400, FencingToken::new(1));
        check_exact(&last_attempt, "running its last attempt");
        let mut one_left = fresh.clone();
        one_left.attempt_limit = Some(lease_core::AttemptLimit::new(2).expect("limit"));
        one_left.claim(t(600), 400, FencingToken::new(1));
        check_exact(&one_left, "running with an attempt left");
        let mut dead = one_left.clone();
        dead.release(t(700));
        dead = dead.effective(t(5_000));
        dead.claim(t(5_000), 1, FencingToken::new(2));
        dead.release(t(5_000));
        assert_eq!(dead.status, ExecutionStatus::Dead);
        check_exact(&dead, "dead");

        let mut no_expiry = fresh;
        no_expiry.status = ExecutionStatus::Running;
        check_exact(&no_expiry, "running without expiry");
        let _ = p;
    }
}
