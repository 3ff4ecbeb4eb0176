//! Transactions with a bounded retry on SQLITE_BUSY / SQLITE_LOCKED.
//!
//! Every mutating operation is ONE `BEGIN IMMEDIATE` transaction: the write lock is taken
//! up front, so the token check and the write it guards can never be interleaved with
//! another connection's claim. Reads run in one deferred (read) transaction, so a read made
//! of several statements sees one snapshot.

use std::time::{Duration, Instant};

use lease_core::{LeaseError, Result};
use rusqlite::{Connection, Transaction, TransactionBehavior};

use crate::error::{BACKEND, OpError, OpResult, is_busy, sqlite_error};

/// Attempts after the first when a lock is busy. This retry covers what SQLite's busy
/// handler does not (SQLITE_LOCKED, a busy COMMIT, WAL recovery); all attempts together
/// wait at most one `busy_timeout` ([`BusyBudget`]).
pub(crate) const BUSY_RETRIES: u32 = 4;

/// One operation's busy-wait budget: every attempt, retries included, waits only for what
/// is left of one `busy_timeout` counted from the caller's submission (time queued behind
/// other jobs counts), so a caller waits at most `busy_timeout` (plus a statement's slack)
/// in total, as documented.
pub(crate) struct BusyBudget {
    full: Duration,
    deadline: Instant,
    shortened: bool,
}

impl BusyBudget {
    /// Starts the budget that ends at `deadline` (a submission plus `full`, the connection's
    /// configured `busy_timeout`): the first attempt's busy handler waits only for what is
    /// left of it. `None` when nothing is left: the caller fails without an attempt.
    pub(crate) fn until(conn: &Connection, full: Duration, deadline: Instant) -> Option<Self> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        let mut budget = BusyBudget {
            full,
            deadline,
            shortened: false,
        };
        if left < full {
            budget.shortened = true;
            if let Err(e) = conn.busy_timeout(left) {
                tracing::warn!(error = %e, "cannot shorten the connection's busy_timeout");
            }
        }
        Some(budget)
    }

    /// Before retry number `retry`: pauses (the backoff, at most what is left) and lets the
    /// next attempt's busy handler wait only for the rest. `false` when the budget is spent.
    pub(crate) fn before_retry(&mut self, conn: &Connection, retry: u32) -> bool {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if retry >= BUSY_RETRIES || left.is_zero() {
            return false;
        }
        std::thread::sleep(backoff(retry).min(left));
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        self.shortened = true;
        conn.busy_timeout(left).is_ok()
    }

    /// Gives the connection its configured `busy_timeout` back.
    pub(crate) fn finish(self, conn: &Connection) {
        if self.shortened
            && let Err(e) = conn.busy_timeout(self.full)
        {
            tracing::warn!(error = %e, "cannot restore the connection's busy_timeout");
        }
    }
}

enum Failure {
    /// Lock contention: nothing happened; retry the whole transaction.
    Busy(rusqlite::Error),
    /// The operation failed before commit; rolled back.
    Failed(OpError),
    /// COMMIT itself failed with something other than contention.
    Commit(rusqlite::Error),
}

fn classify(e: OpError) -> Failure {
    match e {
        OpError::Sqlite(e) if is_busy(&e) => Failure::Busy(e),
        other => Failure::Failed(other),
    }
}

fn attempt<T>(
    conn: &mut Connection,
    behavior: TransactionBehavior,
    f: &mut impl FnMut(&Transaction<'_>) -> OpResult<T>,
) -> std::result::Result<T, Failure> {
    let tx = conn
        .transaction_with_behavior(behavior)
        .map_err(|e| classify(e.into()))?;
    // On error `tx` is dropped here, which rolls back: nothing changed.
    let value = f(&tx).map_err(classify)?;
    match tx.commit() {
        Ok(()) => Ok(value),
        // A failed COMMIT leaves the transaction open; dropping it rolled it back.
        Err(e) if is_busy(&e) => Err(Failure::Busy(e)),
        Err(e) => Err(Failure::Commit(e)),
    }
}

/// The answer of an operation whose whole busy-wait budget went by before it reached the
/// connection (queued behind other jobs): it was not attempted.
pub(crate) fn budget_spent(operation: &'static str) -> LeaseError {
    LeaseError::Unavailable {
        backend: BACKEND,
        operation,
        source: "its busy_timeout went by while it waited behind other operations on the \
                 connection; it was not attempted"
            .into(),
    }
}

/// The instant a budget of `busy_timeout` counted from now ends (a submission's deadline).
pub(crate) fn deadline(busy_timeout: Duration) -> Instant {
    Instant::now() + busy_timeout
}

fn run<T>(
    conn: &mut Connection,
    operation: &'static str,
    behavior: TransactionBehavior,
    busy: (Duration, Instant),
    f: impl FnMut(&Transaction<'_>) -> OpResult<T>,
) -> Result<T> {
    let (busy_timeout, deadline) = busy;
    let Some(mut budget) = BusyBudget::until(conn, busy_timeout, deadline) else {
        return Err(budget_spent(operation));
    };
    let result = run_within(conn, operation, behavior, &mut budget, f);
    budget.finish(conn);
    result
}

fn run_within<T>(
    conn: &mut Connection,
    operation: &'static str,
    behavior: TransactionBehavior,
    budget: &mut BusyBudget,
    mut f: impl FnMut(&Transaction<'_>) -> OpResult<T>,
) -> Result<T> {
    let mut retries = 0;
    loop {
        match attempt(conn, behavior, &mut f) {
            Ok(value) => return Ok(value),
            Err(Failure::Busy(e)) => {
                if !budget.before_retry(conn, retries) {
                    return Err(sqlite_error(operation, e));
                }
                tracing::debug!(operation, retries, error = %e, "sqlite busy; retrying");
                retries += 1;
            }
            Err(Failure::Failed(e)) => return Err(e.into_lease(operation)),
            Err(Failure::Commit(e)) if matches!(behavior, TransactionBehavior::Deferred) => {
                return Err(sqlite_error(operation, e));
            }
            Err(Failure::Commit(e)) => {
                return Err(LeaseError::OutcomeUnknown {
                    backend: BACKEND,
                    operation,
                    source: Box::new(e),
                });
            }
        }
    }
}

/// 1, 2, 4, 8 ms plus up to 1 ms of jitter so retrying connections spread out.
pub(crate) fn backoff(retry: u32) -> Duration {
    let jitter = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() % 1_000_000)
        .unwrap_or(0);
    Duration::from_millis(1 << retry.min(6)) + Duration::from_nanos(u64::from(jitter))
}

/// Runs a mutating operation as one `BEGIN IMMEDIATE` transaction, retried (whole) on
/// contention within one `busy_timeout` from now in total. Still busy -> `Unavailable`; a
/// COMMIT failure -> `OutcomeUnknown`.
pub(crate) fn write<T>(
    conn: &mut Connection,
    operation: &'static str,
    busy_timeout: Duration,
    f: impl FnMut(&Transaction<'_>) -> OpResult<T>,
) -> Result<T> {
    let busy = (busy_timeout, deadline(busy_timeout));
    run(conn, operation, TransactionBehavior::Immediate, busy, f)
}

/// Runs a read-only operation in one deferred transaction (one snapshot), retried on
/// contention until `deadline` (its submission plus `busy_timeout`); past it already ->
/// `Unavailable` without an attempt.
pub(crate) fn read<T>(
    conn: &mut Connection,
    operation: &'static str,
    busy: (Duration, Instant),
    f: impl FnMut(&Transaction<'_>) -> OpResult<T>,
) -> Result<T> {
    run(conn, operation, TransactionBehavior::Deferred, busy, f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy_timeout_ms(conn: &Connection) -> i64 {
        conn.query_row("PRAGMA busy_timeout", [], |r| r.get(0))
            .expect("busy_timeout")
    }

    /// An operation submitted earlier (queued meanwhile) waits only for what is left of its
    /// `busy_timeout`, and none when nothing is.
    #[test]
    fn a_budget_counted_from_an_earlier_submission_waits_only_for_what_is_left() {
        let full = Duration::from_secs(1);
        let conn = Connection::open_in_memory().expect("open");
        conn.busy_timeout(full).expect("busy_timeout");
        let budget = BusyBudget::until(&conn, full, Instant::now() + full / 2).expect("left");
        let ms = busy_timeout_ms(&conn);
        assert!(
            ms > 0 && ms <= 500,
            "waits {ms} ms of a budget with 500 ms left"
        );
        budget.finish(&conn);
        assert_eq!(busy_timeout_ms(&conn), 1000, "restored");
        assert!(BusyBudget::until(&conn, full, Instant::now()).is_none());
        assert_eq!(busy_timeout_ms(&conn), 1000, "untouched");
    }
}
