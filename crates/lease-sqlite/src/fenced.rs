//! Fenced application transactions: the application's own SQL, run on the backend's
//! connection inside the same `BEGIN IMMEDIATE` transaction as the fencing check (RFC 002:
//! "the check and the write will be atomic").
//!
//! A fenced transaction is one more group-commit member ([`crate::group`]): alone it is its
//! own transaction, queued with others it is a savepoint of theirs. In order, inside the
//! transaction: the lease check ([`heap::lease_holds`], exactly write_step's), then, only if
//! the lease holds, the application's closure, then whatever the caller adds (the step
//! record of `step_in_tx`). A lost lease runs no closure and writes nothing; a failing or
//! panicking closure rolls back its own savepoint (its transaction when alone) and nothing
//! else. Because SQLite has one write lock and the transaction takes it at `BEGIN`, no claim
//! can commit between the check and the COMMIT, in this process or another.
//!
//! The closure runs at most once. The group is retried on lock contention; contention
//! after the closure ran (which the held write lock makes all but impossible) answers
//! `Unavailable` with nothing of it applied, rather than running the closure again.
//!
//! While the closure runs, an authorizer refuses the statements that would break the
//! transaction or the library's records ([`crate::authorizer`]).

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use lease_core::{ExecutionLease, LeaseError, Timestamp};
use rusqlite::Transaction;
use tokio::sync::oneshot;

use crate::admit_tx;
use crate::error::{BACKEND, OpError, is_busy};
use crate::group::{Member, Ran};
use crate::heap;
use crate::scope::Scope;
use crate::wakeup::Wakes;

/// What the body of a fenced transaction decided.
pub(crate) enum Body<R> {
    /// Commit the transaction (its savepoint) with `R` as the answer.
    Apply(R),
    /// Roll the body's writes back and still answer `R` (`step_in_tx` found the step
    /// already recorded: its effect must not be applied twice).
    Discard(R),
}

/// Why a body failed (its writes are rolled back).
pub(crate) enum BodyError<E> {
    /// The application's closure failed.
    App(E),
    /// The library's part failed (step record, encoding).
    Op(OpError),
}

/// The body of a fenced transaction: the closure and what the library adds after it.
pub(crate) type BodyFn<R, E> =
    Box<dyn FnOnce(&Transaction<'_>, &Scope) -> Result<Body<R>, BodyError<E>> + Send>;

/// A panic payload of the application's closure, re-raised in the caller.
pub(crate) type Panic = Box<dyn Any + Send + 'static>;

/// The answer a fenced transaction's caller receives.
pub(crate) enum Answer<R, E> {
    /// The lease held; `R` (committed unless the body discarded its writes).
    Accepted(R),
    /// The lease was lost; the closure did not run and nothing was written.
    Lost,
    /// The closure failed; nothing of it was applied.
    App(E),
    /// The backend failed or refused the input; nothing of it was applied (except
    /// `OutcomeUnknown`, a failed COMMIT).
    Lease(LeaseError),
    /// The closure panicked; nothing of it was applied. Re-raised in the caller.
    Panicked(Panic),
}

/// What a run kept for the reply.
enum Kept<R, E> {
    Applied(R),
    Discarded(R),
    Lost,
    App(E),
    Op(OpError),
    /// A retry found the closure already consumed.
    Spent,
}

/// A fenced transaction waiting for its group's commit.
pub(crate) struct FencedOp<R, E> {
    operation: &'static str,
    scope: Arc<Scope>,
    /// `None` only for the test-support unfenced transaction.
    lease: Option<ExecutionLease>,
    body: Option<BodyFn<R, E>>,
    kept: Option<Kept<R, E>>,
    /// Kept across retries: a panic always reaches the caller.
    panic: Option<Panic>,
    /// The hub of this handle's database and namespace, and the earliest instant the
    /// body's admissions made claimable ([`crate::SqliteBackend::admit_in_tx`]): signalled
    /// after the commit, as a plain admit is.
    wakes: Arc<Wakes>,
    woke: Option<Timestamp>,
    reply: oneshot::Sender<Answer<R, E>>,
}

impl<R, E> FencedOp<R, E> {
    /// A fenced transaction running `body` under `lease` (no check when `None`), answering
    /// on `reply`; the body's admissions are signalled on `wakes`.
    pub(crate) fn new(
        operation: &'static str,
        (scope, wakes): (Arc<Scope>, Arc<Wakes>),
        lease: Option<ExecutionLease>,
        body: BodyFn<R, E>,
        reply: oneshot::Sender<Answer<R, E>>,
    ) -> Self {
        FencedOp {
            operation,
            scope,
            lease,
            body: Some(body),
            kept: None,
            panic: None,
            wakes,
            woke: None,
            reply,
        }
    }

    fn keep(&mut self, kept: Kept<R, E>, ran: Ran) -> Ran {
        self.kept = Some(kept);
        ran
    }

    /// The check; `Err` is how the run ended without the body.
    fn check(&mut self, tx: &Transaction<'_>) -> Result<(), Ran> {
        let Some(lease) = &self.lease else {
            return Ok(());
        };
        match heap::lease_holds(tx, &self.scope, lease) {
            Ok(true) => Ok(()),
            Ok(false) => Err(self.keep(Kept::Lost, Ran::Done)),
            Err(OpError::Sqlite(e)) if is_busy(&e) => Err(Ran::Busy(e)),
            Err(e) => Err(self.keep(Kept::Op(e), Ran::Failed)),
        }
    }

    /// Runs the body once, the application's SQL guarded, a panic caught.
    fn run_body(&mut self, tx: &Transaction<'_>) -> Ran {
        let Some(body) = self.body.take() else {
            return self.keep(Kept::Spent, Ran::Failed);
        };
        let scope = &self.scope;
        let (ran, woke) = admit_tx::collecting(&self.wakes, || {
            catch_unwind(AssertUnwindSafe(|| body(tx, scope)))
        });
        self.woke = woke;
        match ran {
            Err(payload) => {
                self.panic = Some(payload);
                Ran::Failed
            }
            Ok(_) if tx.is_autocommit() => self.keep(
                Kept::Op(OpError::Corrupt(
                    "the fenced closure ended the transaction itself".to_owned(),
                )),
                Ran::Failed,
            ),
            Ok(Ok(Body::Apply(r))) => self.keep(Kept::Applied(r), Ran::Done),
            Ok(Ok(Body::Discard(r))) => self.keep(Kept::Discarded(r), Ran::Failed),
            Ok(Err(BodyError::App(e))) => self.keep(Kept::App(e), Ran::Failed),
            Ok(Err(BodyError::Op(e))) => self.keep(Kept::Op(e), Ran::Failed),
        }
    }

    fn answer(kept: Option<Kept<R, E>>, operation: &'static str) -> Answer<R, E> {
        match kept {
            Some(Kept::Applied(r) | Kept::Discarded(r)) => Answer::Accepted(r),
            Some(Kept::Lost) => Answer::Lost,
            Some(Kept::App(e)) => Answer::App(e),
            Some(Kept::Op(e)) => Answer::Lease(e.into_lease(operation)),
            Some(Kept::Spent) => Answer::Lease(LeaseError::Unavailable {
                backend: BACKEND,
                operation,
                source: "its transaction was rolled back by lock contention after the \
                         closure ran; nothing of it was applied, and the closure runs at \
                         most once: retry the call"
                    .into(),
            }),
            None => Answer::Lease(LeaseError::Protocol {
                backend: BACKEND,
                operation,
                reason: "operation never ran".to_owned(),
            }),
        }
    }
}

impl<R, E> Member for FencedOp<R, E>
where
    R: Send + 'static,
    E: Send + 'static,
{
    fn run(&mut self, tx: &Transaction<'_>) -> Ran {
        match self.check(tx) {
            Ok(()) => self.run_body(tx),
            Err(ran) => ran,
        }
    }

    fn wake(&self) -> Option<(&Arc<Wakes>, Timestamp)> {
        match (&self.kept, self.woke) {
            (Some(Kept::Applied(_)), Some(at)) => Some((&self.wakes, at)),
            _ => None,
        }
    }

    fn reset(&mut self) {
        self.kept = None;
        self.woke = None;
    }

    fn complete(self: Box<Self>) {
        let answer = match self.panic {
            Some(payload) => Answer::Panicked(payload),
            None => Self::answer(self.kept, self.operation),
        };
        let _ = self.reply.send(answer);
    }

    fn succeeded(&self) -> bool {
        matches!(self.kept, Some(Kept::Applied(_) | Kept::Lost))
    }

    fn abort(self: Box<Self>, after_success: bool, error: &dyn Fn(&'static str) -> LeaseError) {
        let operation = self.operation;
        let answer = match (self.panic, self.kept) {
            (Some(payload), _) => Answer::Panicked(payload),
            (None, Some(Kept::Applied(_) | Kept::Lost)) => Answer::Lease(error(operation)),
            (None, kept) if !after_success => Self::answer(kept, operation),
            (None, _) => Answer::Lease(LeaseError::Unavailable {
                backend: BACKEND,
                operation,
                source: "its commit group failed and rolled back, and its own result may \
                         have rested on an earlier member's rolled-back change; nothing of \
                         it was applied"
                    .into(),
            }),
        };
        let _ = self.reply.send(answer);
    }
}
