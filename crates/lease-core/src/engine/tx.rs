//! One open transaction of a [`super::TxStore`]: the rows it reads and writes by key, and
//! the questions a claim, a list or a count asks of every execution at once.
//!
//! The required methods are the rows (a store keyed by execution id, step, store, effect,
//! request): enough for any store, as the in-memory reference and the redb example show.
//! The provided methods answer the wider questions by [`Tx::scan`] and read and write the
//! namespace's values through [`Tx::namespace_mut`]; a store with indexes (SQLite's partial
//! indexes, its separate control tables, the history in the row's columns) overrides them
//! so a claim reads only what it needs. An override answers exactly what its default does:
//! the conformance macro runs the same cases on both.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use crate::attempts::AttemptLimit;
use crate::counts::StatusCounts;
use crate::effect::EffectRecord;
use crate::error::{LeaseError, Result};
use crate::execution::{ExecutionRecord, Purged};
use crate::heap::{HeapRecord, StepCursor};
use crate::history::DeliveryHistory;
use crate::ids::{EffectId, ExecutionId, RequestId, StepKey, StoreId, StoreKey, WorkflowName};
use crate::json::Json;
use crate::lease::{ExecutionLease, FencingToken};
use crate::redelivery::RedeliveryPolicy;
use crate::selection::Selection;
use crate::store::StoreOutcome;
use crate::time::Timestamp;

use super::scanned;
use super::values::{DeliveryEvent, Namespace, ReceiptKey, Scan};

/// One open transaction: the rows of the reference backend's state, each read and written
/// by key. Reads see the transaction's own writes.
pub trait Tx {
    /// Runs `read` on the stored record of `id`; `None` when there is none.
    fn read_execution<R>(
        &self,
        id: &ExecutionId,
        read: impl FnOnce(&ExecutionRecord) -> R,
    ) -> Result<Option<R>>;
    /// Changes the stored record of `id` in place; `None` (nothing written) when there is
    /// none. A store may leave a record `change` did not change unwritten.
    fn update_execution<R>(
        &mut self,
        id: &ExecutionId,
        change: impl FnOnce(&mut ExecutionRecord) -> R,
    ) -> Result<Option<R>>;
    /// Stores a new record and gives it the next place in admission order.
    fn insert_admitted(&mut self, record: ExecutionRecord) -> Result<()>;
    /// Runs `read` over every execution at once (a store may keep an index; the provided
    /// methods ask for all).
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

    /// The namespace's values (a store may load them at the first call).
    fn namespace(&self) -> Result<&Namespace>;
    /// The namespace's values, to change (written with the transaction).
    fn namespace_mut(&mut self) -> Result<&mut Namespace>;

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

    /// Whether `lease` holds its record at `now` ([`ExecutionRecord::holds_at`]), read
    /// only; `UnknownExecution` if there is no record. A store that can read the few fields
    /// the check needs without decoding the record overrides it: every fenced step write
    /// asks.
    fn holds(&self, lease: &ExecutionLease, now: Timestamp) -> Result<bool> {
        self.read_execution(&lease.execution_id, |r| r.holds_at(lease, now))?
            .ok_or_else(|| LeaseError::UnknownExecution(lease.execution_id.clone()))?
    }

    /// Stores `record` unless its id exists: `None` when it stored it, else the stored
    /// record (unchanged). Provided as [`Tx::read_execution`] then [`Tx::insert_admitted`];
    /// a store whose insert reports a taken id overrides it (admission is one statement).
    fn admit_new(&mut self, record: &ExecutionRecord) -> Result<Option<ExecutionRecord>> {
        if let Some(stored) = self.read_execution(&record.id, ExecutionRecord::clone)? {
            return Ok(Some(stored));
        }
        self.insert_admitted(record.clone())?;
        Ok(None)
    }

    /// Runs `part` so that a refusal undoes its writes and the rest of the transaction goes
    /// on: `Ok(None)` when it was refused and undone. A store that cannot undo part of a
    /// transaction keeps this default, which runs `part` and fails the whole transaction on
    /// any error. What counts as a refusal is the store's to say (a busy database is not
    /// one: the whole transaction must run again).
    fn undoable<R>(&mut self, part: impl FnOnce(&mut Self) -> Result<R>) -> Result<Option<R>>
    where
        Self: Sized,
    {
        part(self).map(Some)
    }

    // Provided: the namespace's values one at a time.

    /// Raises the token counter by one and returns the new token (RFC: tokens rise on
    /// every claim).
    fn next_token(&mut self) -> Result<FencingToken> {
        let namespace = self.namespace_mut()?;
        namespace.last_token += 1;
        Ok(FencingToken::new(namespace.last_token))
    }
    /// Counts one claim that took over an expired lease.
    fn add_takeover(&mut self) -> Result<()> {
        self.namespace_mut()?.takeovers += 1;
        Ok(())
    }
    /// What a claim stamps on a record of `workflow`: its attempt limit and its redelivery
    /// policy, as the operator set them.
    fn claim_settings(
        &self,
        workflow: Option<&WorkflowName>,
    ) -> Result<(Option<AttemptLimit>, Option<RedeliveryPolicy>)> {
        let namespace = self.namespace()?;
        let limit = namespace.attempt_limits.of(workflow);
        Ok((limit, namespace.redelivery.of(workflow)))
    }
    /// Records the claim of `record` at `now` as a start of its key, if a rate applies.
    fn record_start(&mut self, record: &ExecutionRecord, now: Timestamp) -> Result<()> {
        scanned::record_start(self.namespace_mut()?, record, now);
        Ok(())
    }
    /// Forgets the recorded starts that left their key's window at `now`.
    fn prune_starts(&mut self, now: Timestamp) -> Result<()> {
        if !self.namespace()?.rate_starts.is_empty() {
            scanned::prune_starts(self.namespace_mut()?, now);
        }
        Ok(())
    }

    // Provided: the delivery history one event at a time.

    /// Writes `event` into `id`'s delivery history, in this transaction. Provided over
    /// [`Tx::update_history`]; a store that keeps the latest delivery in the execution's own
    /// row writes the event there.
    fn record_delivery(&mut self, id: &ExecutionId, event: DeliveryEvent<'_>) -> Result<()> {
        self.update_history(id, |history| event.apply(history))
    }

    // Provided: the questions asked of every execution, answered by a scan.

    /// The executions a claim at `now` takes, at most `limit`, in claim order, and what
    /// the gates held back ([`crate::selection`]'s rules).
    fn select_claimable(
        &mut self,
        now: Timestamp,
        policy: &RedeliveryPolicy,
        limit: usize,
    ) -> Result<Selection> {
        self.scan(|scan| scanned::select_claimable(scan, now, policy, limit))
    }
    /// The earliest instant something becomes claimable after a claim at `now` that held
    /// back `blocked` (selection rules 4 and 6).
    fn claim_horizon(
        &mut self,
        now: Timestamp,
        policy: &RedeliveryPolicy,
        blocked: &HashSet<ExecutionId>,
    ) -> Result<Option<Timestamp>> {
        self.scan(|scan| scanned::claim_horizon(scan, now, policy, blocked))
    }
    /// The executions in each status at `now`, and the takeover counter.
    fn count_statuses(&self, now: Timestamp) -> Result<StatusCounts> {
        self.scan(|scan| StatusCounts {
            takeovers: scan.namespace.takeovers,
            ..StatusCounts::of_records(scan.records, now)
        })
    }
    /// Up to `limit` records effective at `now` with at least `min` unacknowledged
    /// deliveries, most first, then by id.
    fn failing(&self, min: u32, limit: usize, now: Timestamp) -> Result<Vec<ExecutionRecord>> {
        self.scan(|scan| scanned::failing(scan, min, limit, now))
    }
    /// Up to `limit` records whose lease is live at `now`, in live-lease order.
    fn live_leases(&self, limit: usize, now: Timestamp) -> Result<Vec<ExecutionRecord>> {
        self.scan(|scan| scanned::live_leases(scan, limit, now))
    }
    /// Up to `limit` records dead at `now`, by id, after `after`.
    fn dead_after(
        &self,
        after: Option<&ExecutionId>,
        limit: usize,
        now: Timestamp,
    ) -> Result<Vec<ExecutionRecord>> {
        self.scan(|scan| scanned::dead_after(scan, after, limit, now))
    }
    /// The first `limit` ids (by id) of the terminal executions, dead ones aside, whose
    /// last delivery ended before `before`: what `purge_terminal` removes.
    fn purgeable(&self, before: Timestamp, limit: usize) -> Result<Purged> {
        self.scan(|scan| scanned::purgeable(scan, before, limit))
    }
}
