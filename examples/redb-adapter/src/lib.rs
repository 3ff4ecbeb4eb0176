//! A worked example adapter: the lease contract over [redb], an embedded key-value store,
//! written only against lease-core's public API.
//!
//! The adapter is a store, not a backend: [`RedbStore`] implements lease-core's
//! [`TxStore`] (one redb write transaction per call) and [`lease_core::engine::Tx`] (each
//! kind of row in its own table, as JSON), and [`lease_core::engine::Engine`] turns it into
//! every client trait by applying lease-core's public transitions, exactly as the in-memory
//! reference does over its mutex. So the adapter decides nothing the reference does not.
//! Claims read every execution, as the reference does: an example, not a fast path.

use std::path::Path;
use std::sync::Arc;

use lease_core::engine::{Engine, TxStore, Written};
use lease_core::{RedeliveryPolicy, Result, SharedClock};
use redb::Database;

mod store;
mod tx;

use tx::{RedbTx, db_error};

/// The lease contract over redb: the engine over [`RedbStore`]. Clones and
/// [`Engine::peer`]s share the database and the wake-up hub.
pub type RedbBackend = Engine<RedbStore>;

/// A handle on one redb database; clones share it.
#[derive(Clone)]
pub struct RedbStore {
    db: Arc<Database>,
}

impl RedbStore {
    /// Opens (or creates) the database file at `path`. redb allows one open `Database` per
    /// file per process, so a second handle in this process is a clone of this one; a
    /// second process would open the file itself, and could not while this one holds it.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let db = Database::create(path).map_err(db_error)?;
        Ok(RedbStore { db: Arc::new(db) })
    }
}

impl TxStore for RedbStore {
    const NAME: &'static str = "redb";
    type Tx<'t> = RedbTx;

    /// One redb write transaction: committed on `Ok`; dropped uncommitted (aborted) on `Err`.
    /// redb commits on the caller's thread, so the step runs at the call and the future is
    /// ready.
    fn transact<T: Send + 'static>(
        &self,
        _operation: &'static str,
        mut step: impl for<'t> FnMut(&mut RedbTx) -> Result<Written<T>> + Send + 'static,
    ) -> impl Future<Output = Result<Written<T>>> + Send {
        let mut run = || {
            let mut tx = RedbTx::begin(&self.db)?;
            let out = step(&mut tx)?;
            tx.commit()?;
            Ok(out)
        };
        std::future::ready(run())
    }
}

/// The backend over the database file at `path`, reading time from `clock`.
pub fn open(
    path: impl AsRef<Path>,
    clock: SharedClock,
    policy: RedeliveryPolicy,
) -> Result<RedbBackend> {
    Ok(Engine::over(RedbStore::open(path)?, clock).with_policy(policy))
}
