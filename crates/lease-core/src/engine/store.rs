//! The store trait the engine runs on: one transaction at a time, and the rows a
//! transaction reads and writes.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::attempts::AttemptLimits;
use crate::control::{ConcurrencyLimits, PauseScope};
use crate::effect::EffectRecord;
use crate::error::Result;
use crate::execution::ExecutionRecord;
use crate::heap::{HeapRecord, StepCursor};
use crate::history::DeliveryHistory;
use crate::ids::{ConcurrencyKey, EffectId, ExecutionId, RequestId, StepKey, StoreId, StoreKey};
use crate::json::Json;
use crate::keyed::{KeyOrdering, RateLimits};
use crate::redelivery::RedeliveryPolicies;
use crate::store::StoreOutcome;
use crate::time::Timestamp;

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
    /// One open transaction.
    type Tx: Tx;
    /// Runs `step` in one transaction: committed when it returns `Ok`, discarded on `Err`.
    /// A store that tells other processes when work becomes claimable records
    /// [`Written::wakes`] in the same transaction.
    fn transact<T: Send + 'static>(
        &self,
        step: impl FnMut(&mut Self::Tx) -> Result<Written<T>> + Send + 'static,
    ) -> impl Future<Output = Result<Written<T>>> + Send;
}

/// What one engine transaction produced: the call's answer, and the instants at which what
/// it wrote becomes claimable (the engine signals its wake-up hub with them after the
/// commit).
#[derive(Debug)]
pub struct Written<T> {
    /// The call's answer.
    pub value: T,
    /// When something the transaction wrote becomes claimable (may repeat, any order).
    pub wakes: Vec<Timestamp>,
}

/// The namespace-wide values: the fencing-token counter, the takeover counter, the
/// operator's controls, and the claim instants the start rates count. Small, read by every
/// claim.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Namespace {
    /// The last fencing token issued; the next claim issues the one above (RFC: tokens rise).
    pub last_token: u64,
    /// Claims that took over an expired lease ([`crate::StatusCounts::takeovers`]), raised
    /// in the transaction of each such claim. Absent from a row stored before it existed
    /// (read as 0).
    #[serde(default)]
    pub takeovers: u64,
    /// Paused scopes: no claim takes an execution one of them covers.
    pub paused: BTreeSet<PauseScope>,
    /// The most live leases one concurrency key may hold at once.
    pub limits: ConcurrencyLimits,
    /// Attempt limits ([`crate::attempts`]).
    pub attempt_limits: AttemptLimits,
    /// Start rates per key ([`crate::keyed`]).
    pub rates: RateLimits,
    /// The claim instants of each rate-limited key, pruned to its window at every claim.
    pub rate_starts: HashMap<ConcurrencyKey, Vec<Timestamp>>,
    /// Ordered keys ([`crate::keyed`]).
    pub ordering: KeyOrdering,
    /// Workflows' own redelivery policies ([`crate::RedeliveryPolicies`]).
    pub redelivery: RedeliveryPolicies,
}

/// What a claim reads of every execution at once: the records (in any order; selection
/// sorts) and each one's place in admission order.
pub struct Scan<'a> {
    /// Every stored execution record.
    pub records: Box<dyn Iterator<Item = &'a ExecutionRecord> + 'a>,
    /// Each execution's place in admission order (smaller: admitted earlier).
    pub admitted: &'a HashMap<ExecutionId, u64>,
    /// The namespace's values.
    pub namespace: &'a Namespace,
}

/// A store receipt's key: the store, the execution and the step that updated it.
pub type ReceiptKey = (StoreId, ExecutionId, StepKey);

/// One open transaction: the rows of the reference backend's state, each read and written
/// by key. Reads see the transaction's own writes.
pub trait Tx {
    /// Runs `read` on the stored record of `id`; `None` when there is none.
    fn read_execution<R>(
        &self,
        id: &ExecutionId,
        read: impl FnOnce(&ExecutionRecord) -> R,
    ) -> Result<Option<R>>;
    /// Changes the stored record of `id` in place; `None` (nothing written) when there is none.
    fn update_execution<R>(
        &mut self,
        id: &ExecutionId,
        change: impl FnOnce(&mut ExecutionRecord) -> R,
    ) -> Result<Option<R>>;
    /// Stores a new record and gives it the next place in admission order.
    fn insert_admitted(&mut self, record: ExecutionRecord) -> Result<()>;
    /// Runs `read` over every execution at once (a store may keep an index; the engine
    /// asks for all).
    fn scan<R>(&self, read: impl FnOnce(Scan<'_>) -> R) -> Result<R>;
    /// Visits executions newest admitted first, strictly before place `before` (all when
    /// `None`), with their places, until `visit` returns `false`.
    fn newest_admitted(
        &self,
        before: Option<u64>,
        visit: &mut dyn FnMut(u64, &ExecutionRecord) -> bool,
    ) -> Result<()>;
    /// Removes the executions `ids` and every row that names them: history, admission
    /// place, steps, receipts, starts, effects and their waits, store waits.
    fn purge(&mut self, ids: &[ExecutionId]) -> Result<()>;

    /// The namespace's values.
    fn namespace(&self) -> &Namespace;
    /// The namespace's values, to change (written with the transaction).
    fn namespace_mut(&mut self) -> &mut Namespace;

    /// The stored delivery history of `id`.
    fn history(&self, id: &ExecutionId) -> Result<Option<DeliveryHistory>>;
    /// Changes the delivery history of `id` (an empty one when none is stored).
    fn update_history(
        &mut self,
        id: &ExecutionId,
        change: impl FnOnce(&mut DeliveryHistory),
    ) -> Result<()>;

    /// The step record of (`id`, `key`, `attempt`).
    fn step(&self, id: &ExecutionId, key: &StepKey, attempt: u32) -> Result<Option<HeapRecord>>;
    /// Stores a step record (the engine writes each key once).
    fn insert_step(&mut self, record: &HeapRecord) -> Result<()>;
    /// The step already stored at `record`'s (execution, key, attempt), or `record` stored
    /// there: a step is written once, and a repeated write answers with the first. Provided
    /// as [`Tx::step`] then [`Tx::insert_step`]; a store that can look up and insert in one
    /// probe (an ordered map's entry) overrides it, since every fenced step write comes here.
    fn step_or_insert(&mut self, record: HeapRecord) -> Result<HeapRecord> {
        let stored = self.step(&record.execution_id, &record.step_key, record.step_attempt)?;
        if let Some(stored) = stored {
            return Ok(stored);
        }
        self.insert_step(&record)?;
        Ok(record)
    }
    /// Up to `take` step records of `id` in (step key, attempt) order, after `after`.
    fn steps(
        &self,
        id: &ExecutionId,
        after: Option<&StepCursor>,
        take: usize,
    ) -> Result<Vec<HeapRecord>>;

    /// Every entry of `store`, `None` when the store does not exist.
    fn store_entries(&self, store: &StoreId) -> Result<Option<BTreeMap<StoreKey, Json>>>;
    /// Creates `store` with `entries`.
    fn create_store(&mut self, store: &StoreId, entries: BTreeMap<StoreKey, Json>) -> Result<()>;
    /// One entry of `store`: `None` when the store does not exist, `Some(None)` when the key
    /// is absent.
    fn entry(&self, store: &StoreId, key: &StoreKey) -> Result<Option<Option<Json>>>;
    /// Writes (`Some`) or removes (`None`) one entry of an existing `store`.
    fn set_entry(&mut self, store: &StoreId, key: &StoreKey, value: Option<Json>) -> Result<()>;
    /// The outcome recorded under a store receipt.
    fn receipt(&self, key: &ReceiptKey) -> Result<Option<StoreOutcome>>;
    /// Records a store receipt's outcome.
    fn put_receipt(&mut self, key: ReceiptKey, outcome: &StoreOutcome) -> Result<()>;
    /// Adds `waiter` to the executions woken when (`store`, `key`) changes.
    fn add_store_waiter(
        &mut self,
        store: &StoreId,
        key: &StoreKey,
        waiter: &ExecutionId,
    ) -> Result<()>;
    /// Removes and returns the executions waiting for (`store`, `key`).
    fn take_store_waiters(
        &mut self,
        store: &StoreId,
        key: &StoreKey,
    ) -> Result<BTreeSet<ExecutionId>>;

    /// The execution a start request created.
    fn start_target(&self, request: &RequestId) -> Result<Option<ExecutionId>>;
    /// Records the execution a start request created.
    fn put_start(&mut self, request: &RequestId, target: &ExecutionId) -> Result<()>;

    /// The effect record `id`.
    fn effect(&self, id: &EffectId) -> Result<Option<EffectRecord>>;
    /// Stores an effect record under its id.
    fn put_effect(&mut self, record: &EffectRecord) -> Result<()>;
    /// Marks (`true`) or unmarks the effect's owner as waiting for its settle; returns
    /// whether it was marked before.
    fn set_effect_wait(&mut self, id: &EffectId, waiting: bool) -> Result<bool>;
}
