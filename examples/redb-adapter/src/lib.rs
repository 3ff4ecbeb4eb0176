//! A worked example adapter: the lease contract over [redb], an embedded key-value store,
//! written only against lease-core's public API.
//!
//! The design is the in-memory reference backend with one redb write transaction where the
//! reference takes its mutex: every trait method is one transaction, the atomic step the
//! contract asks for. Records are stored as JSON (the lease-core types derive serde) and
//! changed only through lease-core's public transitions ([`ExecutionRecord::claim`],
//! [`ExecutionRecord::acknowledge`], ...), and claims choose with
//! [`lease_core::selection::select`], so the adapter decides nothing the reference does not.
//! Claims read every execution, as the reference does: an example, not a fast path.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use lease_core::{
    ExecutionId, ExecutionLease, ExecutionRecord, ExecutionStatus, LeaseError, RedeliveryPolicy,
    Result, SharedClock, WakeHub,
};
use redb::Database;

mod data;
mod execution;
mod tx;

use tx::{EXECUTIONS, Tx};

/// A handle on one redb database. Clones and [`RedbBackend::peer`]s share the database and
/// the wake-up hub.
#[derive(Clone)]
pub struct RedbBackend {
    db: Arc<Database>,
    clock: SharedClock,
    policy: RedeliveryPolicy,
    hub: WakeHub,
}

impl RedbBackend {
    /// Opens (or creates) the database file at `path`, reading time from `clock`.
    pub fn open(
        path: impl AsRef<Path>,
        clock: SharedClock,
        policy: RedeliveryPolicy,
    ) -> Result<Self> {
        let db = Database::create(path).map_err(tx::db_error)?;
        Ok(RedbBackend {
            db: Arc::new(db),
            clock,
            policy,
            hub: WakeHub::new(),
        })
    }

    /// Another handle on the same database. redb allows one open `Database` per file per
    /// process, so a second handle in this process shares it (and its wake-up hub); a second
    /// process would open the file itself, and could not while this one holds it.
    pub fn peer(&self) -> Self {
        self.clone()
    }

    /// Runs `step` in one write transaction and commits it; an error aborts the transaction,
    /// so a refused call changes nothing.
    fn write<T>(&self, step: impl FnOnce(&Tx) -> Result<T>) -> Result<T> {
        let tx = Tx::begin(&self.db)?;
        let out = step(&tx)?;
        tx.commit()?;
        Ok(out)
    }

    /// Signals every record of `records` (after its transaction committed).
    fn signal_all<'r>(&self, records: impl IntoIterator<Item = &'r ExecutionRecord>) {
        records.into_iter().for_each(|r| self.signal(r));
    }

    /// Signals when `record` becomes claimable; a keyed one not running freed a place: "now".
    fn signal(&self, record: &ExecutionRecord) {
        if let Some(at) = record.claimable_at(&self.policy) {
            self.hub.signal(at);
        }
        if record.concurrency_key.is_some() && record.status != ExecutionStatus::Running {
            self.hub.signal(self.clock.now());
        }
    }
}

/// The stored record of `id`, or `UnknownExecution`.
fn execution(tx: &Tx, id: &ExecutionId) -> Result<ExecutionRecord> {
    tx.get(EXECUTIONS, id.as_str())?
        .ok_or_else(|| LeaseError::UnknownExecution(id.clone()))
}

/// Every stored execution record, by id.
fn executions(tx: &Tx) -> Result<BTreeMap<ExecutionId, ExecutionRecord>> {
    Ok(tx
        .all::<ExecutionRecord>(EXECUTIONS)?
        .into_iter()
        .map(|(_, r)| (r.id.clone(), r))
        .collect())
}

/// The stored record if `lease` holds it at `now`, `None` if the lease is lost.
fn held(
    tx: &Tx,
    lease: &ExecutionLease,
    now: lease_core::Timestamp,
) -> Result<Option<ExecutionRecord>> {
    let record = execution(tx, &lease.execution_id)?;
    Ok(record.holds_at(lease, now)?.then_some(record))
}

/// Writes `record` back under its id.
fn store(tx: &Tx, record: &ExecutionRecord) -> Result<()> {
    tx.put(EXECUTIONS, record.id.as_str(), record)
}
