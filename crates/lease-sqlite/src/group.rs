//! Group commit: mutating operations queued on one connection at the same moment share one
//! `BEGIN IMMEDIATE` transaction, each inside its own savepoint.
//!
//! Each operation stays atomic and isolated: it runs alone on the connection, sees
//! every earlier operation of the group, and a failure rolls back only its own savepoint.
//! Nobody hears of a success before the COMMIT returned, so what a caller was told always
//! reached the database. The group saves the per-commit cost (WAL frames for pages several
//! operations touch, lock hand-over) that dominates small operations such as
//! acknowledgements: at a dispatcher's concurrency there are usually several queued.
//!
//! Contention (SQLITE_BUSY/LOCKED at BEGIN, COMMIT or inside) rolls the whole group back and
//! retries it, bounded as in [`crate::tx`]; then every member fails `Unavailable`. A COMMIT
//! that fails otherwise makes every member that had succeeded `OutcomeUnknown`.
//!
//! Wake-ups (issue 10): a member that made something claimable reports the instant; the group
//! appends one wake-log row per hub (the earliest instant) inside its transaction, and
//! signals the hub right after COMMIT succeeded, before any member is answered.

use std::sync::Arc;

use lease_core::{LeaseError, Result, Timestamp};
use rusqlite::{Connection, Transaction, TransactionBehavior};
use tokio::sync::oneshot;

use crate::error::{BACKEND, OpError, OpResult, is_busy};
use crate::tx::{BUSY_RETRIES, backoff};
use crate::wake::Wakes;

/// What a mutating operation produced: its value and, when it made an execution claimable,
/// the instant from which it is ([`lease_core::ExecutionRecord::claimable_at`]).
pub(crate) struct Woken<T> {
    /// The operation's result.
    pub(crate) value: T,
    /// The earliest instant the operation made claimable, if any.
    pub(crate) wake: Option<Timestamp>,
}

impl<T> Woken<T> {
    /// A result that made nothing claimable.
    pub(crate) fn quiet(value: T) -> Self {
        Woken { value, wake: None }
    }

    /// A result that made something claimable from `wake` (if `Some`).
    pub(crate) fn at(value: T, wake: Option<Timestamp>) -> Self {
        Woken { value, wake }
    }
}

/// The earlier of two optional instants.
pub(crate) fn earliest(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Most operations sharing one transaction.
pub(crate) const MAX_GROUP: usize = 64;

/// How a member's run went.
pub(crate) enum Ran {
    /// Succeeded (result kept for after the commit).
    Done,
    /// Failed with its own error; its savepoint was rolled back.
    Failed,
    /// Met lock contention: the whole group must be retried.
    Busy(rusqlite::Error),
}

/// A type-erased mutating operation waiting for its group's commit.
pub(crate) trait Member: Send {
    /// Runs the operation inside the group's transaction, keeping its result.
    fn run(&mut self, tx: &Transaction<'_>) -> Ran;
    /// The hub to signal and the instant, when the kept result made something claimable.
    fn wake(&self) -> Option<(&Arc<Wakes>, Timestamp)>;
    /// Forgets a kept result before the group is retried.
    fn reset(&mut self);
    /// Replies with the kept result (after a successful COMMIT).
    fn complete(self: Box<Self>);
    /// Replies after the group failed: a member that failed on its own keeps its error;
    /// one that had succeeded gets `error(operation)`.
    fn abort(self: Box<Self>, error: &dyn Fn(&'static str) -> LeaseError);
}

/// A mutating operation: closure, kept result, reply channel.
pub(crate) struct Op<T, F> {
    operation: &'static str,
    f: F,
    wakes: Option<Arc<Wakes>>,
    result: Option<OpResult<Woken<T>>>,
    reply: oneshot::Sender<Result<T>>,
}

impl<T, F> Op<T, F> {
    /// Wraps `f`, which may run more than once (retries): it must only touch the database.
    /// What it reports as claimable is signalled on `wakes` after the commit.
    pub(crate) fn new(
        operation: &'static str,
        wakes: Option<Arc<Wakes>>,
        f: F,
        reply: oneshot::Sender<Result<T>>,
    ) -> Self {
        Op {
            operation,
            f,
            wakes,
            result: None,
            reply,
        }
    }
}

impl<T, F> Member for Op<T, F>
where
    T: Send + 'static,
    F: FnMut(&Transaction<'_>) -> OpResult<Woken<T>> + Send + 'static,
{
    fn wake(&self) -> Option<(&Arc<Wakes>, Timestamp)> {
        match (&self.wakes, &self.result) {
            (Some(wakes), Some(Ok(Woken { wake: Some(at), .. }))) => Some((wakes, *at)),
            _ => None,
        }
    }

    fn run(&mut self, tx: &Transaction<'_>) -> Ran {
        match (self.f)(tx) {
            Ok(v) => {
                self.result = Some(Ok(v));
                Ran::Done
            }
            Err(OpError::Sqlite(e)) if is_busy(&e) => Ran::Busy(e),
            Err(e) => {
                self.result = Some(Err(e));
                Ran::Failed
            }
        }
    }

    fn reset(&mut self) {
        self.result = None;
    }

    fn complete(self: Box<Self>) {
        let operation = self.operation;
        let reply = match self.result {
            Some(r) => r.map(|w| w.value).map_err(|e| e.into_lease(operation)),
            None => Err(LeaseError::Protocol {
                backend: BACKEND,
                operation,
                reason: "operation never ran".to_owned(),
            }),
        };
        let _ = self.reply.send(reply);
    }

    fn abort(self: Box<Self>, error: &dyn Fn(&'static str) -> LeaseError) {
        let operation = self.operation;
        let reply = match self.result {
            Some(Err(e)) => Err(e.into_lease(operation)),
            _ => Err(error(operation)),
        };
        let _ = self.reply.send(reply);
    }
}

enum Failure {
    Busy(rusqlite::Error),
    Other(rusqlite::Error),
    Commit(rusqlite::Error),
}

/// The hubs the group's successful members signal, each with its earliest instant.
type Signals = Vec<(Arc<Wakes>, Timestamp)>;

fn signals(members: &[Box<dyn Member>]) -> Signals {
    let mut out: Signals = Vec::new();
    for (wakes, at) in members.iter().filter_map(|m| m.wake()) {
        match out.iter_mut().find(|(w, _)| Arc::ptr_eq(w, wakes)) {
            Some((_, earliest)) => *earliest = (*earliest).min(at),
            None => out.push((wakes.clone(), at)),
        }
    }
    out
}

fn attempt(conn: &mut Connection, members: &mut [Box<dyn Member>]) -> Result<Signals, Failure> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| {
            if is_busy(&e) {
                Failure::Busy(e)
            } else {
                Failure::Other(e)
            }
        })?;
    let alone = members.len() == 1;
    for member in members.iter_mut() {
        member.reset();
        if !alone {
            tx.execute_batch("SAVEPOINT lease_op")
                .map_err(Failure::Other)?;
        }
        match member.run(&tx) {
            Ran::Done if !alone => tx
                .execute_batch("RELEASE lease_op")
                .map_err(Failure::Other)?,
            Ran::Done => {}
            Ran::Failed if alone => return Ok(Vec::new()), // dropping `tx` rolls back
            Ran::Failed => tx
                .execute_batch("ROLLBACK TO lease_op; RELEASE lease_op")
                .map_err(Failure::Other)?,
            Ran::Busy(e) => return Err(Failure::Busy(e)),
        }
    }
    let signals = signals(members);
    for (wakes, at) in &signals {
        wakes.record(&tx, *at).map_err(|e| {
            if is_busy(&e) {
                Failure::Busy(e)
            } else {
                Failure::Other(e)
            }
        })?;
    }
    tx.commit().map_err(|e| {
        if is_busy(&e) {
            Failure::Busy(e)
        } else {
            Failure::Commit(e)
        }
    })?;
    Ok(signals)
}

fn message(e: &rusqlite::Error) -> lease_core::BoxError {
    e.to_string().into()
}

/// Runs a group to its end and replies to every member.
pub(crate) fn run(conn: &mut Connection, mut members: Vec<Box<dyn Member>>) {
    let mut retries = 0;
    loop {
        match attempt(conn, &mut members) {
            Ok(signals) => {
                for (wakes, at) in signals {
                    wakes.signal(at);
                }
                members.into_iter().for_each(|m| m.complete());
                return;
            }
            Err(Failure::Busy(e)) if retries < BUSY_RETRIES => {
                tracing::debug!(retries, error = %e, "sqlite busy; retrying the group");
                std::thread::sleep(backoff(retries));
                retries += 1;
            }
            Err(Failure::Busy(e)) => {
                // Rolled back: nothing happened, for any member.
                for m in members {
                    m.abort(&|operation| LeaseError::Unavailable {
                        backend: BACKEND,
                        operation,
                        source: message(&e),
                    });
                }
                return;
            }
            Err(Failure::Other(e)) => {
                // Before COMMIT: the transaction was rolled back.
                for m in members {
                    m.abort(&|operation| LeaseError::Backend {
                        backend: BACKEND,
                        operation,
                        source: message(&e),
                    });
                }
                return;
            }
            Err(Failure::Commit(e)) => {
                for m in members {
                    m.abort(&|operation| LeaseError::OutcomeUnknown {
                        backend: BACKEND,
                        operation,
                        source: message(&e),
                    });
                }
                return;
            }
        }
    }
}
