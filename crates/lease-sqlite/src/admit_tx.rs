//! Admission inside the application's own transaction: [`SqliteBackend::admit_in_tx`] and
//! [`SqliteBackend::admit_batch_in_tx`] write the same rows as `admit` and `admit_batch`, in
//! a transaction the caller commits or rolls back, so the application's rows and the
//! executions it admits exist together or not at all.
//!
//! The wake-up follows the transaction. Inside a fenced closure of this database and
//! namespace ([`SqliteBackend::fenced`], [`SqliteBackend::step_in_tx`]) the admission is
//! collected by that fenced transaction, which logs and signals it after its COMMIT, as a
//! plain admit is. On any other transaction (the application's own connection) it appends a
//! wake-log row of no hub's origin, which the data_version watchers, this process's
//! included, signal once that transaction committed; a rollback removes the row with the
//! admission, so nobody is woken.

use std::cell::RefCell;
use std::sync::Arc;

use lease_core::execution::check_admit_batch;
use lease_core::{Admission, ExecutionRecord, LeaseError, Result, Timestamp};
use rusqlite::Transaction;

use crate::authorizer;
use crate::backend::SqliteBackend;
use crate::engine::admit_rows;
use crate::error::{OpError, OpResult};
use crate::group::{Woken, earliest};
use crate::scope::Scope;
use crate::wakeup::Wakes;

/// The savepoint an admission runs in, so a failure half-way leaves the caller's
/// transaction as it was.
const SAVEPOINT: &str = "SAVEPOINT lease_admit";
const RELEASE: &str = "RELEASE lease_admit";
const ROLLBACK: &str = "ROLLBACK TO lease_admit; RELEASE lease_admit";

/// The wake-ups of the admissions made inside a fenced closure running on this thread.
struct Collector {
    hub: Arc<Wakes>,
    earliest: Option<Timestamp>,
}

thread_local! {
    static COLLECTING: RefCell<Option<Collector>> = const { RefCell::new(None) };
}

/// Runs a fenced closure collecting the wake-ups of the admissions it makes on `hub`:
/// `f`'s result and the earliest instant they made claimable (signalled by the fenced
/// transaction after its commit, [`crate::fenced`]).
pub(crate) fn collecting<T>(hub: &Arc<Wakes>, f: impl FnOnce() -> T) -> (T, Option<Timestamp>) {
    /// Ends the collection (also on panic), restoring what was there.
    struct End(Option<Collector>);
    impl Drop for End {
        fn drop(&mut self) {
            COLLECTING.set(self.0.take());
        }
    }
    let outer = COLLECTING.replace(Some(Collector {
        hub: hub.clone(),
        earliest: None,
    }));
    let end = End(outer);
    let value = f();
    let collected = COLLECTING.with_borrow(|c| c.as_ref().and_then(|c| c.earliest));
    drop(end);
    (value, collected)
}

/// Hands `at` to the fenced closure running on this thread when it runs on `hub` (true);
/// false when there is none, or it is another database's or namespace's.
fn collect(hub: &Arc<Wakes>, at: Timestamp) -> bool {
    COLLECTING.with_borrow_mut(|c| match c {
        Some(c) if Arc::ptr_eq(&c.hub, hub) => {
            c.earliest = earliest(c.earliest, Some(at));
            true
        }
        _ => false,
    })
}

impl SqliteBackend {
    /// Admits `admission` inside the caller's transaction `tx` (RFC 001 admit, idempotent
    /// by id): it exists once `tx` commits, and not at all if `tx` rolls back. The same
    /// validation, rows and answer as [`lease_core::ExecutionClient::admit`]: an existing id
    /// is returned as stored, unchanged; bad input is `InvalidInput` before any statement.
    /// Any error leaves `tx` as it was (the admission runs in a savepoint of its own), so
    /// the caller may still commit its other writes.
    ///
    /// `tx` is either the transaction a fenced closure receives ([`SqliteBackend::fenced`],
    /// [`SqliteBackend::step_in_tx`]: a step and the children it admits commit together),
    /// or one the application opened on its own connection to this handle's database file
    /// (prefer `TransactionBehavior::Immediate`: a deferred transaction taking the write
    /// lock at this admission may meet `SQLITE_BUSY`, then `Unavailable`). A transaction on
    /// another file is `InvalidInput`. The admission is in this handle's namespace.
    ///
    /// Wake-ups: from a fenced closure, idle dispatchers are signalled right after its
    /// commit, as by `admit`; from the application's own connection, the wake log carries
    /// it and every watcher (this process's too) signals within its `wake_poll` of the
    /// commit, as for an admission from another process. A rollback wakes nobody.
    pub fn admit_in_tx(
        &self,
        tx: &Transaction<'_>,
        admission: &Admission,
    ) -> Result<ExecutionRecord> {
        admission.validate()?;
        let admitted = self.admit_within("admit_in_tx", tx, |tx, s| {
            admit_rows(tx, s, "admit_in_tx", std::slice::from_ref(admission))
        })?;
        admitted
            .into_iter()
            .next()
            .ok_or_else(|| LeaseError::Protocol {
                backend: crate::error::BACKEND,
                operation: "admit_in_tx",
                reason: "an admission of one execution returned no record".to_owned(),
            })
    }

    /// [`SqliteBackend::admit_in_tx`] for a batch: every item as `admit_batch` admits it,
    /// records in order. Bad input in any item (over 1000, an id twice, an instant out of
    /// range) is `InvalidInput` and admits nothing.
    pub fn admit_batch_in_tx(
        &self,
        tx: &Transaction<'_>,
        admissions: &[Admission],
    ) -> Result<Vec<ExecutionRecord>> {
        check_admit_batch(admissions)?;
        if admissions.is_empty() {
            return Ok(Vec::new());
        }
        self.admit_within("admit_batch_in_tx", tx, |tx, s| {
            admit_rows(tx, s, "admit_batch_in_tx", admissions)
        })
    }

    /// Runs `admit` in a savepoint of `tx`, with the library's statements unguarded, and
    /// notes its wake-up (see the module docs).
    fn admit_within<T>(
        &self,
        operation: &'static str,
        tx: &Transaction<'_>,
        admit: impl FnOnce(&Transaction<'_>, &Scope) -> OpResult<Woken<T>>,
    ) -> Result<T> {
        self.check_same_file(tx)?;
        authorizer::library_sql(|| {
            tx.execute_batch(SAVEPOINT)?;
            let admitted = admit(tx, self.scope()).and_then(|w| self.note_wake(tx, w));
            match admitted {
                Ok(value) => {
                    tx.execute_batch(RELEASE)?;
                    Ok(value)
                }
                Err(e) => {
                    tx.execute_batch(ROLLBACK)?;
                    Err(e)
                }
            }
        })
        .map_err(|e: OpError| e.into_lease(operation))
    }

    /// Hands the wake-up to the fenced closure running here, or logs it for the watchers.
    fn note_wake<T>(&self, tx: &Transaction<'_>, woken: Woken<T>) -> OpResult<T> {
        if let Some(at) = woken.wake
            && !collect(self.wakes(), at)
        {
            self.wakes().record_for_watchers(tx, at)?;
        }
        Ok(woken.value)
    }

    /// Refuses a transaction on another database file than this handle's.
    fn check_same_file(&self, tx: &Transaction<'_>) -> Result<()> {
        let Some(ours) = self.wakes().file() else {
            return Ok(());
        };
        let theirs = tx.path().map(std::fs::canonicalize);
        match theirs {
            Some(Ok(path)) if path == ours => Ok(()),
            _ => Err(LeaseError::invalid(
                "transaction",
                format!(
                    "it is not on this backend's database file {}",
                    ours.display()
                ),
            )),
        }
    }
}
