//! [`SqliteStore`]: the transactions of one backend handle, on its connection's thread.
//! A writing step is one operation of the group commit (its own savepoint, run again after
//! a busy database); a reading step is a deferred transaction of its own.

use std::sync::Arc;
use std::time::Duration;

use lease_core::engine::{TxStore, Written};
use lease_core::{Result, WakeReceiver};
use rusqlite::Transaction;

use super::SqliteTx;
use crate::conn::{ConnHandle, Weight};
use crate::error::{BACKEND, OpResult};
use crate::group::Woken;
use crate::scope::Scope;
use crate::wakeup::Wakes;

/// The engine's store over one [`crate::SqliteBackend`] handle's connection and namespace
/// ([`crate::SqliteBackend::store`]): the transactions every operation runs.
#[derive(Clone)]
pub struct SqliteStore {
    pub(crate) conn: ConnHandle,
    pub(crate) scope: Arc<Scope>,
    pub(crate) wakes: Arc<Wakes>,
    pub(crate) busy_timeout: Duration,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("location", &self.scope.location)
            .field("namespace", &self.scope.namespace)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// A mutating operation that never makes anything claimable, of `weight` (where it may
    /// run: [`Weight`]).
    pub(crate) async fn write<T: Send + 'static>(
        &self,
        operation: &'static str,
        weight: Weight,
        mut f: impl FnMut(&Transaction<'_>, &Scope) -> OpResult<T> + Send + 'static,
    ) -> Result<T> {
        let scope = self.scope.clone();
        self.conn
            .write_waking(operation, None, weight, move |tx| {
                f(tx, &scope).map(Woken::quiet)
            })
            .await
    }

    /// A mutating operation that may make something claimable: signalled on this handle's
    /// hub (and logged for other processes) once its transaction committed.
    pub(crate) async fn write_waking<T: Send + 'static>(
        &self,
        operation: &'static str,
        weight: Weight,
        mut f: impl FnMut(&Transaction<'_>, &Scope) -> OpResult<Woken<T>> + Send + 'static,
    ) -> Result<T> {
        let scope = self.scope.clone();
        let wakes = Some(self.wakes.clone());
        self.conn
            .write_waking(operation, wakes, weight, move |tx| f(tx, &scope))
            .await
    }

    /// A read-only operation, in a deferred transaction of its own.
    pub(crate) async fn read<T: Send + 'static>(
        &self,
        operation: &'static str,
        mut f: impl FnMut(&Transaction<'_>, &Scope) -> OpResult<T> + Send + 'static,
    ) -> Result<T> {
        let scope = self.scope.clone();
        let busy_timeout = self.busy_timeout;
        // Counted from now: time queued behind other jobs is part of the wait.
        let busy = (busy_timeout, crate::tx::deadline(busy_timeout));
        self.conn
            .call(operation, move |conn| {
                crate::tx::read(conn, operation, busy, |tx| f(tx, &scope))
            })
            .await
    }
}

impl TxStore for SqliteStore {
    const NAME: &'static str = BACKEND;
    type Tx<'t> = SqliteTx<'t>;

    fn transact<T: Send + 'static>(
        &self,
        operation: &'static str,
        step: impl for<'t> FnMut(&mut SqliteTx<'t>) -> Result<Written<T>> + Send + 'static,
    ) -> impl Future<Output = Result<Written<T>>> + Send {
        self.transact_many(operation, 1, step)
    }

    /// A step on more than a few executions runs where the connection runs large batches.
    fn transact_many<T: Send + 'static>(
        &self,
        operation: &'static str,
        items: usize,
        mut step: impl for<'t> FnMut(&mut SqliteTx<'t>) -> Result<Written<T>> + Send + 'static,
    ) -> impl Future<Output = Result<Written<T>>> + Send {
        let store = self.clone();
        async move {
            store
                .write_waking(operation, Weight::of(items), move |tx, scope| {
                    let mut open = SqliteTx::new(tx, scope, operation);
                    let result = step(&mut open);
                    let written = open.finish(result)?;
                    let wake = written.wakes.iter().min().copied();
                    Ok(Woken::at(written, wake))
                })
                .await
        }
    }

    fn wakeups(&self) -> Option<WakeReceiver> {
        Some(self.wakes.subscribe())
    }

    fn read<T: Send + 'static>(
        &self,
        operation: &'static str,
        mut read: impl for<'t> FnMut(&SqliteTx<'t>) -> Result<T> + Send + 'static,
    ) -> impl Future<Output = Result<T>> + Send {
        let store = self.clone();
        async move {
            store
                .read(operation, move |tx, scope| {
                    let open = SqliteTx::new(tx, scope, operation);
                    let result = read(&open);
                    open.failed(result)
                })
                .await
        }
    }
}
