//! The store trait the engine runs on: one transaction at a time.

use crate::error::Result;
use crate::wakeup::WakeReceiver;

use super::tx::Tx;
use super::values::Written;

/// A store the [`super::Engine`] runs on: it runs one closure as one atomic transaction.
///
/// The invariant every implementation keeps: no other transaction's effects are visible
/// inside `transact`, and its writes become visible together or not at all. The engine
/// checks everything a call can refuse before its first write, so a store that cannot roll
/// back (one mutex around maps) stays consistent; a store that can aborts on `Err`.
///
/// The step is owned and may run more than once, each time in a fresh transaction: a store
/// may hand it to another thread (a connection's own thread that commits several callers'
/// steps together) and run it again after a busy database or a failed group rolled it back.
/// So a step keeps nothing across runs; everything it learns is in what it returns.
pub trait TxStore: Clone + Send + Sync + 'static {
    /// The name the backend's [`crate::Capabilities`] report.
    const NAME: &'static str;
    /// One open transaction (it may borrow the store's connection for `'t`).
    type Tx<'t>: Tx;
    /// Runs `step` in one transaction: committed when it returns `Ok`, discarded on `Err`.
    /// A store that tells other processes when work becomes claimable records
    /// [`Written::wakes`] in the same transaction. `operation` names the client call (for
    /// the store's errors and traces).
    fn transact<T: Send + 'static>(
        &self,
        operation: &'static str,
        step: impl for<'t> FnMut(&mut Self::Tx<'t>) -> Result<Written<T>> + Send + 'static,
    ) -> impl Future<Output = Result<Written<T>>> + Send;
    /// [`TxStore::transact`] for a call on up to `items` executions (a batch, a claim's
    /// limit). Provided as `transact`; a store that runs small transactions differently
    /// from large ones (SQLite runs a few statements on the caller's thread) overrides it.
    fn transact_many<T: Send + 'static>(
        &self,
        operation: &'static str,
        items: usize,
        step: impl for<'t> FnMut(&mut Self::Tx<'t>) -> Result<Written<T>> + Send + 'static,
    ) -> impl Future<Output = Result<Written<T>>> + Send {
        let _ = items;
        self.transact(operation, step)
    }
    /// The store's own wake-up channel, when it has one that hears what other handles and
    /// processes commit (SQLite's wake log); `None` (the default): the engine's hub, which
    /// hears the commits of this process's engines over the store.
    fn wakeups(&self) -> Option<WakeReceiver> {
        None
    }
    /// Runs `read` in one transaction that writes nothing. Provided as [`TxStore::transact`];
    /// a store whose readers need not queue behind its writers (SQLite's snapshot reads)
    /// overrides it.
    fn read<T: Send + 'static>(
        &self,
        operation: &'static str,
        mut read: impl for<'t> FnMut(&Self::Tx<'t>) -> Result<T> + Send + 'static,
    ) -> impl Future<Output = Result<T>> + Send {
        let written = self.transact(operation, move |tx| {
            Ok(Written {
                value: read(tx)?,
                wakes: Vec::new(),
            })
        });
        async move { Ok(written.await?.value) }
    }
}
