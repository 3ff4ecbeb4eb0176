//! [`Tx`] for [`SqliteTx`]: each method one or two statements on the backend's own tables.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use lease_core::engine::{DeliveryEvent, Namespace, ReceiptKey, Scan, Tx};
use lease_core::selection::Selection;
use lease_core::{
    AttemptLimit, DeliveryHistory, EffectId, EffectRecord, ExecutionId, ExecutionLease,
    ExecutionRecord, FencingToken, HeapRecord, Json, LeaseError, Purged, RedeliveryPolicy,
    RequestId, Result, StatusCounts, StepCursor, StepKey, StoreId, StoreKey, StoreOutcome,
    Timestamp, WorkflowName,
};

use super::SqliteTx;
use super::row::Event;
use super::{claiming, history, scan, tables};

impl Tx for SqliteTx<'_> {
    fn read_execution<R>(
        &self,
        id: &ExecutionId,
        read: impl FnOnce(&ExecutionRecord) -> R,
    ) -> Result<Option<R>> {
        self.op(self.with_row(id, |row| read(&row.record)))
    }

    /// Changes the step's copy of the row; it is written once, at the step's end or before
    /// a statement over many rows.
    fn update_execution<R>(
        &mut self,
        id: &ExecutionId,
        change: impl FnOnce(&mut ExecutionRecord) -> R,
    ) -> Result<Option<R>> {
        self.op(self.with_row(id, |row| change(&mut row.record)))
    }

    fn insert_admitted(&mut self, record: ExecutionRecord) -> Result<()> {
        self.op(tables::insert(self.conn, self.scope, &record))
    }

    /// One insert that leaves a taken id as it is, then the read of the stored record only
    /// when the id was taken: an admission is one statement.
    fn admit_new(&mut self, record: &ExecutionRecord) -> Result<Option<ExecutionRecord>> {
        if self.kept(&record.id, |_| ()).is_none() {
            let policy = &self.scope.policy;
            if self.op(crate::rows::insert(self.conn, self.ns(), record, policy))? {
                return Ok(None);
            }
        }
        let stored = self.read_execution(&record.id, ExecutionRecord::clone)?;
        stored.map(Some).ok_or_else(|| LeaseError::Protocol {
            backend: crate::error::BACKEND,
            operation: self.operation,
            reason: format!(
                "execution {} conflicts on insert but cannot be read",
                record.id
            ),
        })
    }

    /// A savepoint around `part`: a refusal of its own (a lease or corrupt-data error) rolls
    /// it back and the step goes on; a database error fails the whole step (the group
    /// commit runs it again or rolls it back).
    fn undoable<R>(&mut self, part: impl FnOnce(&mut Self) -> Result<R>) -> Result<Option<R>> {
        self.op(self.flush().and_then(|()| self.open_savepoint()))?;
        let counters = self.counters.get();
        match part(self) {
            Ok(value) => {
                self.op(self.flush().and_then(|()| self.release_savepoint()))?;
                Ok(Some(value))
            }
            Err(refused) if !self.storage_failed() => {
                self.op(self.roll_back_savepoint())?;
                self.rows.borrow_mut().clear();
                self.counters.set(counters);
                self.claim = None;
                tracing::warn!(
                    namespace = %self.scope.namespace,
                    operation = self.operation,
                    error = %refused,
                    "a part of the step was refused and undone; the rest goes on"
                );
                Ok(None)
            }
            Err(failed) => Err(failed),
        }
    }

    fn scan<R>(&self, read: impl FnOnce(Scan<'_>) -> R) -> Result<R> {
        self.op(self.flush())?;
        let (records, admitted) = self.op(scan::everything(self.conn, self.ns()))?;
        let namespace = self.namespace_values()?;
        Ok(read(Scan {
            records: Box::new(records.iter()),
            admitted: &admitted,
            namespace,
        }))
    }

    fn newest_admitted(
        &self,
        before: Option<u64>,
        visit: &mut dyn FnMut(u64, &ExecutionRecord) -> bool,
    ) -> Result<()> {
        self.op(self.flush())?;
        self.op(scan::newest_first(self.conn, self.ns(), before, visit))
    }

    fn purge(&mut self, ids: &[ExecutionId]) -> Result<()> {
        self.op(self.flush())?;
        self.forget_rows(ids);
        self.op(tables::purge(self.conn, self.ns(), ids))
    }

    fn namespace(&self) -> Result<&Namespace> {
        self.namespace_values()
    }

    fn namespace_mut(&mut self) -> Result<&mut Namespace> {
        self.namespace_values_mut()
    }

    fn history(&self, id: &ExecutionId) -> Result<Option<DeliveryHistory>> {
        self.op(self.stored_history(id))
    }

    fn update_history(
        &mut self,
        id: &ExecutionId,
        change: impl FnOnce(&mut DeliveryHistory),
    ) -> Result<()> {
        self.op(self.flush())?;
        self.forget_rows(std::slice::from_ref(id));
        self.op(history::change(self.conn, self.scope, id, change))
    }

    /// The step's copy when it read the row, else the five columns the check needs.
    fn holds(&self, lease: &ExecutionLease, now: Timestamp) -> Result<bool> {
        if let Some(held) = self.kept(&lease.execution_id, |r| r.holds_at(lease, now)) {
            return held;
        }
        self.op(crate::heap::lease_holds_at(
            self.conn,
            self.ns(),
            lease,
            now,
        ))
    }

    fn next_token(&mut self) -> Result<FencingToken> {
        if self.namespace_loaded() {
            let namespace = self.namespace_mut()?;
            namespace.last_token += 1;
            return Ok(FencingToken::new(namespace.last_token));
        }
        self.op(self.issue_token())
    }

    fn add_takeover(&mut self) -> Result<()> {
        if self.namespace_loaded() {
            self.namespace_mut()?.takeovers += 1;
            return Ok(());
        }
        self.op(self.count_takeover())
    }

    fn claim_settings(
        &self,
        workflow: Option<&WorkflowName>,
    ) -> Result<(Option<AttemptLimit>, Option<RedeliveryPolicy>)> {
        if self.namespace_loaded() {
            let namespace = self.namespace()?;
            let limit = namespace.attempt_limits.of(workflow);
            return Ok((limit, namespace.redelivery.of(workflow)));
        }
        self.op(self.settings_of(workflow))
    }

    /// The selection's gate recorded the start of each execution it took (and pruned its
    /// key's window): nothing is left to record.
    fn record_start(&mut self, _record: &ExecutionRecord, _now: Timestamp) -> Result<()> {
        debug_assert!(
            self.claiming(),
            "a start is recorded by the claim's selection"
        );
        Ok(())
    }

    /// Pruned by the selection's gate, key by key, as it recorded starts.
    fn prune_starts(&mut self, _now: Timestamp) -> Result<()> {
        Ok(())
    }

    /// Keeps the event with the step's copy of the row, written with it at the step's end. A
    /// claim's token must be above the one stored in the row.
    fn record_delivery(&mut self, id: &ExecutionId, event: DeliveryEvent<'_>) -> Result<()> {
        let scope = self.scope;
        let kept = self.with_row(id, |row| {
            if let DeliveryEvent::Claimed { token, .. } = event {
                claiming::check_rising(scope, row.stored(), token)?;
            }
            row.record_event(Event::of(event));
            Ok(())
        });
        self.op(kept.and_then(Option::transpose))?
            .ok_or_else(|| LeaseError::UnknownExecution(id.clone()))
    }

    fn select_claimable(
        &mut self,
        now: Timestamp,
        policy: &RedeliveryPolicy,
        limit: usize,
    ) -> Result<Selection> {
        let selected = self.select(now, policy, limit);
        self.op(selected)
    }

    fn claim_horizon(
        &mut self,
        _now: Timestamp,
        _policy: &RedeliveryPolicy,
        _blocked: &HashSet<ExecutionId>,
    ) -> Result<Option<Timestamp>> {
        let horizon = self.horizon();
        self.op(horizon)
    }

    fn count_statuses(&self, now: Timestamp) -> Result<StatusCounts> {
        self.op(self.status_counts(now))
    }

    fn failing(&self, min: u32, limit: usize, now: Timestamp) -> Result<Vec<ExecutionRecord>> {
        self.op(self.failing_rows(min, limit, now))
    }

    fn live_leases(&self, limit: usize, now: Timestamp) -> Result<Vec<ExecutionRecord>> {
        self.op(self.live_rows(limit, now))
    }

    fn dead_after(
        &self,
        after: Option<&ExecutionId>,
        limit: usize,
        now: Timestamp,
    ) -> Result<Vec<ExecutionRecord>> {
        self.op(self.dead_rows(after, limit, now))
    }

    fn purgeable(&self, before: Timestamp, limit: usize) -> Result<Purged> {
        self.op(self.purgeable_ids(before, limit))
    }

    fn step(&self, id: &ExecutionId, key: &StepKey, attempt: u32) -> Result<Option<HeapRecord>> {
        self.op(crate::heap::read_step(
            self.conn,
            self.ns(),
            id,
            key,
            attempt,
        ))
    }

    fn insert_step(&mut self, record: &HeapRecord) -> Result<()> {
        self.op(crate::heap::insert_step(self.conn, self.ns(), record).map(|_| ()))
    }

    /// One insert that leaves a stored step as it is, then the read of the stored one only
    /// when there was one: the fenced step write's common case is one statement.
    fn step_or_insert(&mut self, record: HeapRecord) -> Result<HeapRecord> {
        if self.op(crate::heap::insert_step(self.conn, self.ns(), &record))? {
            return Ok(record);
        }
        let (id, key) = (&record.execution_id, &record.step_key);
        let stored = self.step(id, key, record.step_attempt)?;
        stored.ok_or_else(|| LeaseError::Protocol {
            backend: crate::error::BACKEND,
            operation: self.operation,
            reason: format!("the step {key} of {id} was neither inserted nor found"),
        })
    }

    fn steps(
        &self,
        id: &ExecutionId,
        after: Option<&StepCursor>,
        take: usize,
    ) -> Result<Vec<HeapRecord>> {
        self.op(crate::heap::steps_after(
            self.conn,
            self.ns(),
            id,
            after,
            take,
        ))
    }

    fn store_entries(&self, store: &StoreId) -> Result<Option<BTreeMap<StoreKey, Json>>> {
        self.op(tables::store_entries(self.conn, self.ns(), store))
    }

    fn create_store(&mut self, store: &StoreId, entries: BTreeMap<StoreKey, Json>) -> Result<()> {
        self.op(tables::create_store(self.conn, self.ns(), store, &entries))
    }

    fn entry(&self, store: &StoreId, key: &StoreKey) -> Result<Option<Option<Json>>> {
        self.op(tables::entry(self.conn, self.ns(), store, key))
    }

    fn set_entry(&mut self, store: &StoreId, key: &StoreKey, value: Option<Json>) -> Result<()> {
        self.op(tables::set_entry(
            self.conn,
            self.ns(),
            store,
            key,
            value.as_ref(),
        ))
    }

    fn receipt(&self, key: &ReceiptKey) -> Result<Option<StoreOutcome>> {
        self.op(tables::receipt(self.conn, self.ns(), key))
    }

    fn put_receipt(&mut self, key: ReceiptKey, outcome: &StoreOutcome) -> Result<()> {
        self.op(tables::put_receipt(self.conn, self.ns(), &key, outcome))
    }

    fn add_store_waiter(
        &mut self,
        store: &StoreId,
        key: &StoreKey,
        waiter: &ExecutionId,
    ) -> Result<()> {
        self.op(tables::add_waiter(self.conn, self.ns(), store, key, waiter))
    }

    fn take_store_waiters(
        &mut self,
        store: &StoreId,
        key: &StoreKey,
    ) -> Result<BTreeSet<ExecutionId>> {
        self.op(tables::take_waiters(self.conn, self.ns(), store, key))
    }

    fn start_target(&self, request: &RequestId) -> Result<Option<ExecutionId>> {
        self.op(tables::start_target(self.conn, self.ns(), request))
    }

    fn put_start(&mut self, request: &RequestId, target: &ExecutionId) -> Result<()> {
        self.op(tables::put_start(self.conn, self.ns(), request, target))
    }

    fn effect(&self, id: &EffectId) -> Result<Option<EffectRecord>> {
        self.op(tables::effect(self.conn, self.ns(), id).map(|e| e.map(|(record, _)| record)))
    }

    fn put_effect(&mut self, record: &EffectRecord) -> Result<()> {
        self.op(tables::put_effect(self.conn, self.ns(), record))
    }

    fn set_effect_wait(&mut self, id: &EffectId, waiting: bool) -> Result<bool> {
        self.op(tables::set_effect_wait(self.conn, self.ns(), id, waiting))
    }
}
