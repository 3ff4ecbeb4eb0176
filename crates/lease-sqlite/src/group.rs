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
//! that fails otherwise makes every member that had succeeded `OutcomeUnknown`. A member
//! that failed on its own keeps its error only when no member before it succeeded; after
//! one did, its error may rest on a change the rollback undid, so it gets `Unavailable`.
//!
//! Wake-ups: a member that made something claimable reports the instant; the group appends
//! one wake-log row per hub (the earliest instant) inside its transaction, and signals the
//! hub right after COMMIT succeeded, before any member is answered.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lease_core::{LeaseError, Result, Timestamp};
use rusqlite::{Connection, Transaction, TransactionBehavior};
use tokio::sync::oneshot;

use crate::error::{BACKEND, OpError, OpResult, is_busy};
use crate::tx::{BusyBudget, budget_spent};
use crate::wakeup::Wakes;

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
    /// The kept result is a success (its changes are in the group's transaction).
    fn succeeded(&self) -> bool;
    /// Replies after the group failed (no answer the rollback makes false). One that had
    /// succeeded gets `error(operation)`. One that failed on its own keeps its error only
    /// if no member before it succeeded (then it saw only committed state); otherwise its
    /// error may rest on changes that were rolled back, and it gets `Unavailable`: nothing
    /// of it was applied, a retry decides afresh.
    fn abort(self: Box<Self>, after_success: bool, error: &dyn Fn(&'static str) -> LeaseError);
}

/// A submitted mutating operation and the instant its caller's busy-wait budget ends: its
/// submission plus `busy_timeout`, so time queued behind other jobs counts (otherwise a
/// renew queued behind a group that waited out the lock would wait a second `busy_timeout`
/// of its own).
pub(crate) struct Pending {
    /// The operation.
    pub(crate) member: Box<dyn Member>,
    /// Its submission plus the connection's `busy_timeout`.
    pub(crate) deadline: Instant,
}

impl Pending {
    /// `member`, submitted now on a connection whose `busy_timeout` is `busy_timeout`.
    pub(crate) fn now(member: Box<dyn Member>, busy_timeout: Duration) -> Self {
        Pending {
            member,
            deadline: crate::tx::deadline(busy_timeout),
        }
    }
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

    fn succeeded(&self) -> bool {
        matches!(self.result, Some(Ok(_)))
    }

    fn abort(self: Box<Self>, after_success: bool, error: &dyn Fn(&'static str) -> LeaseError) {
        let operation = self.operation;
        let reply = match self.result {
            Some(Err(e)) if !after_success => Err(e.into_lease(operation)),
            Some(Err(e)) => Err(LeaseError::Unavailable {
                backend: BACKEND,
                operation,
                source: format!(
                    "its commit group failed and rolled back, and its own failure may have \
                     rested on an earlier member's rolled-back change ({}); nothing of it \
                     was applied",
                    e.into_lease(operation)
                )
                .into(),
            }),
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

/// Replies to every member of a failed group, each told whether a member before it had
/// succeeded (see [`Member::abort`]).
fn abort_all(members: Vec<Box<dyn Member>>, error: &dyn Fn(&'static str) -> LeaseError) {
    let mut after_success = false;
    for m in members {
        let succeeded = m.succeeded();
        m.abort(after_success, error);
        after_success |= succeeded;
    }
}

fn message(e: &rusqlite::Error) -> lease_core::BoxError {
    e.to_string().into()
}

/// Runs a group to its end and replies to every member; returns the retries it made.
/// Members whose deadline has passed get `Unavailable` without an attempt; the others share
/// one budget ending at the earliest of their deadlines ([`BusyBudget`]), so none waits
/// past its own.
pub(crate) fn run(conn: &mut Connection, busy_timeout: Duration, pending: Vec<Pending>) -> u32 {
    let now = Instant::now();
    let (live, late): (Vec<Pending>, Vec<Pending>) =
        pending.into_iter().partition(|p| p.deadline > now);
    for p in late {
        p.member.abort(false, &budget_spent);
    }
    let Some(deadline) = live.iter().map(|p| p.deadline).min() else {
        return 0;
    };
    let members: Vec<Box<dyn Member>> = live.into_iter().map(|p| p.member).collect();
    let Some(mut budget) = BusyBudget::until(conn, busy_timeout, deadline) else {
        abort_all(members, &budget_spent);
        return 0;
    };
    let retries = run_within(conn, &mut budget, members);
    budget.finish(conn);
    retries
}

fn run_within(
    conn: &mut Connection,
    budget: &mut BusyBudget,
    mut members: Vec<Box<dyn Member>>,
) -> u32 {
    let mut retries = 0;
    loop {
        match attempt(conn, &mut members) {
            Err(Failure::Busy(e)) if budget.before_retry(conn, retries) => {
                tracing::debug!(retries, error = %e, "sqlite busy; retrying the group");
                retries += 1;
            }
            outcome => {
                settle(members, outcome);
                return retries;
            }
        }
    }
}

/// One attempt of `member` as a group of one, for a caller that must not wait for another
/// connection's lock (its busy handler is off). Contention hands the member back, reset,
/// with nothing of it applied (its transaction rolled back), for the connection thread to
/// run as usual; any other end is settled here and replied to.
pub(crate) fn try_once(conn: &mut Connection, pending: Pending) -> Option<Pending> {
    let Pending { member, deadline } = pending;
    let mut members = vec![member];
    match attempt(conn, &mut members) {
        Err(Failure::Busy(e)) => {
            tracing::debug!(error = %e, "sqlite busy; handing the operation to its thread");
            let mut member = members.pop()?;
            member.reset();
            Some(Pending { member, deadline })
        }
        outcome => {
            settle(members, outcome);
            None
        }
    }
}

/// Replies to every member after the group's last attempt.
fn settle(members: Vec<Box<dyn Member>>, outcome: Result<Signals, Failure>) {
    match outcome {
        Ok(signals) => {
            for (wakes, at) in signals {
                wakes.signal(at);
            }
            members.into_iter().for_each(|m| m.complete());
        }
        // Rolled back: nothing happened, for any member.
        Err(Failure::Busy(e)) => abort_all(members, &|operation| LeaseError::Unavailable {
            backend: BACKEND,
            operation,
            source: message(&e),
        }),
        // Before COMMIT: the transaction was rolled back.
        Err(Failure::Other(e)) => abort_all(members, &|operation| LeaseError::Backend {
            backend: BACKEND,
            operation,
            source: message(&e),
        }),
        Err(Failure::Commit(e)) => abort_all(members, &|operation| LeaseError::OutcomeUnknown {
            backend: BACKEND,
            operation,
            source: message(&e),
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use lease_core::{
        Admission, ExecutionId, Fenced, Json, ManualClock, RedeliveryPolicy, StepKey, StepWrite,
    };

    use super::*;
    use crate::config::Location;
    use crate::engine::{admit_rows, claim_one};
    use crate::heap;
    use crate::scope::Scope;
    use lease_core::engine::Tx;

    /// A child table whose foreign-key violation fails only the COMMIT.
    const DEFERRED_TABLES: &str = include_str!("group/test_deferred_tables.sql");
    /// A child row without its parent.
    const INSERT_CHILD: &str = include_str!("group/test_insert_child.sql");

    fn scope(clock: &ManualClock) -> Arc<Scope> {
        Arc::new(Scope {
            location: "test".to_owned(),
            namespace: "default".to_owned(),
            clock: Arc::new(clock.clone()),
            policy: RedeliveryPolicy::default(),
        })
    }

    /// A member built from a closure, and the receiver of its reply.
    fn member<T: Send + 'static>(
        f: impl FnMut(&Transaction<'_>) -> OpResult<Woken<T>> + Send + 'static,
    ) -> (Box<dyn Member>, oneshot::Receiver<Result<T>>) {
        let (tx, rx) = oneshot::channel();
        (Box::new(Op::new("test", None, f, tx)), rx)
    }

    fn id(s: &str) -> ExecutionId {
        ExecutionId::new(s).expect("id")
    }

    /// A member whose answer rests on an earlier member's uncommitted change (an admission
    /// answered with the record another member admitted) must not keep that answer when
    /// the COMMIT failed, since the rollback made it false.
    #[test]
    fn a_failed_commit_leaves_no_answer_that_the_rollback_made_false() {
        let location = Location::Memory(format!("group-{}", uuid::Uuid::new_v4()));
        let mut conn = crate::migrate::open(&location, Duration::from_secs(1)).expect("open");
        conn.execute_batch(DEFERRED_TABLES)
            .expect("a table whose violation fails only the COMMIT");
        let clock = ManualClock::starting_now();
        let s = scope(&clock);
        // Committed before the group: order-42 claimed with a lease that has expired.
        let held = {
            let tx = conn.transaction().expect("tx");
            admit_rows(&tx, &s, "admit", &[Admission::new(id("order-42"))]).expect("admit");
            let claimed = claim_one(&tx, &s, 100).expect("claim");
            tx.commit().expect("commit");
            claimed.value.expect("claimed")
        };
        clock.advance(Duration::from_secs(60));

        let (s1, s2, s3, s4) = (s.clone(), s.clone(), s.clone(), s.clone());
        let (admit, admit_rx) =
            member(move |tx| admit_rows(tx, &s1, "admit", &[Admission::new(id("t"))]));
        // A second admission of "t" answers with the record the first one left uncommitted.
        let (again, again_rx) =
            member(move |tx| admit_rows(tx, &s2, "admit", &[Admission::new(id("t"))]));
        let (reclaim, reclaim_rx) = member(move |tx| claim_one(tx, &s3, 30_000));
        let write = StepWrite {
            step_key: StepKey::new("charge").expect("key"),
            step_attempt: 1,
            done: true,
            response: Json::null(),
        };
        let (stale, stale_rx) = member(move |tx| {
            if !heap::lease_holds(tx, &s4, &held)? {
                return Ok(Woken::quiet(Fenced::Lost));
            }
            heap::record_step(tx, &s4, &held, &write)?;
            Ok(Woken::quiet(Fenced::Accepted(())))
        });
        let (breaker, breaker_rx) = member(|tx| {
            tx.execute(INSERT_CHILD, [])?;
            Ok(Woken::quiet(()))
        });
        let pending = [admit, again, reclaim, stale, breaker]
            .into_iter()
            .map(|m| Pending::now(m, Duration::from_secs(1)))
            .collect();
        run(&mut conn, Duration::from_secs(1), pending);

        let answers = [
            (
                "admit",
                admit_rx.blocking_recv().expect("reply").map(|_| ()),
            ),
            (
                "admit again",
                again_rx.blocking_recv().expect("reply").map(|_| ()),
            ),
            (
                "reclaim",
                reclaim_rx.blocking_recv().expect("reply").map(|_| ()),
            ),
            (
                "stale write",
                stale_rx.blocking_recv().expect("reply").map(|r| {
                    assert!(
                        !matches!(r, Fenced::Lost),
                        "told Lost against a rolled-back claim"
                    );
                }),
            ),
            ("breaker", breaker_rx.blocking_recv().expect("reply")),
        ];
        for (what, answer) in answers {
            let err = answer.expect_err(what);
            assert!(
                matches!(
                    err,
                    LeaseError::OutcomeUnknown { .. } | LeaseError::Unavailable { .. }
                ),
                "{what}: {err:?} does not hold after the rollback"
            );
        }
        let tx = conn.transaction().expect("tx");
        assert!(
            crate::engine::SqliteTx::new(&tx, &s, "get")
                .read_execution(&id("t"), |_| ())
                .expect("get")
                .is_none(),
            "rolled back"
        );
    }
}
