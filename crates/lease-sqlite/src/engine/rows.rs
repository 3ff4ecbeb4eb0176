//! [`Tx`] for [`SqliteTx`]: each method one or two statements on the backend's own tables.

use std::collections::{BTreeMap, BTreeSet};

use lease_core::engine::{Namespace, ReceiptKey, Scan, Tx};
use lease_core::{
    DeliveryHistory, EffectId, EffectRecord, ExecutionId, ExecutionLease, ExecutionRecord,
    HeapRecord, Json, LeaseError, RequestId, Result, StepCursor, StepKey, StoreId, StoreKey,
    StoreOutcome, Timestamp,
};

use super::SqliteTx;
use super::history;
use super::scan;
use super::tables;

impl Tx for SqliteTx<'_> {
    fn read_execution<R>(
        &self,
        id: &ExecutionId,
        read: impl FnOnce(&ExecutionRecord) -> R,
    ) -> Result<Option<R>> {
        let stored = self.op(crate::rows::load(self.conn, self.ns(), id))?;
        Ok(stored.as_ref().map(read))
    }

    /// An unchanged record is not written back.
    fn update_execution<R>(
        &mut self,
        id: &ExecutionId,
        change: impl FnOnce(&mut ExecutionRecord) -> R,
    ) -> Result<Option<R>> {
        self.op(history::update(self.conn, self.scope, id, change))
    }

    fn insert_admitted(&mut self, record: ExecutionRecord) -> Result<()> {
        self.op(tables::insert(self.conn, self.scope, &record))
    }

    fn scan<R>(&self, read: impl FnOnce(Scan<'_>) -> R) -> Result<R> {
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
        self.op(scan::newest_first(self.conn, self.ns(), before, visit))
    }

    fn purge(&mut self, ids: &[ExecutionId]) -> Result<()> {
        self.op(tables::purge(self.conn, self.ns(), ids))
    }

    fn namespace(&self) -> Result<&Namespace> {
        self.namespace_values()
    }

    fn namespace_mut(&mut self) -> Result<&mut Namespace> {
        self.namespace_values_mut()
    }

    fn history(&self, id: &ExecutionId) -> Result<Option<DeliveryHistory>> {
        self.op(history::read(self.conn, self.ns(), id))
    }

    fn update_history(
        &mut self,
        id: &ExecutionId,
        change: impl FnOnce(&mut DeliveryHistory),
    ) -> Result<()> {
        self.op(history::change(self.conn, self.scope, id, change))
    }

    fn holds(&self, lease: &ExecutionLease, now: Timestamp) -> Result<bool> {
        self.op(crate::heap::lease_holds_at(
            self.conn,
            self.ns(),
            lease,
            now,
        ))
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
