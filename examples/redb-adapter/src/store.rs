//! [`Tx`] over one redb write transaction: each kind of row the engine keeps in its own
//! table, read and written as JSON by key.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use lease_core::engine::{Namespace, ReceiptKey, Scan, Tx};
use lease_core::{
    DeliveryHistory, EffectId, EffectRecord, ExecutionId, ExecutionRecord, HeapRecord, Json,
    LeaseError, RequestId, Result, StepCursor, StepKey, StoreId, StoreKey, StoreOutcome,
};

use crate::tx::{
    EFFECT_WAITS, EFFECTS, EXECUTIONS, HISTORIES, PLACES, RECEIPTS, RedbTx, STARTS, STEPS,
    STORE_WAITERS, STORES, key_of, step_key,
};

impl RedbTx {
    /// The entries of an existing `store`, or `UnknownStore`.
    fn entries(&self, store: &StoreId) -> Result<BTreeMap<StoreKey, Json>> {
        self.get(STORES, store.as_str())?
            .ok_or_else(|| LeaseError::UnknownStore(store.to_string()))
    }

    /// Removes one purged execution's own rows: record, place, history, steps.
    fn purge_one(&self, id: &ExecutionId) -> Result<()> {
        self.remove(EXECUTIONS, id.as_str())?;
        self.remove(HISTORIES, id.as_str())?;
        self.unplace(id)?;
        for (key, _) in self.steps_with_keys(id, None, usize::MAX)? {
            self.remove(STEPS, &key)?;
        }
        Ok(())
    }

    /// Up to `take` step records of `id` after `after`, with their keys.
    fn steps_with_keys(
        &self,
        id: &ExecutionId,
        after: Option<&StepCursor>,
        take: usize,
    ) -> Result<Vec<(String, HeapRecord)>> {
        let start = match after {
            Some(c) => step_key(id, c.step_key.as_str(), c.step_attempt),
            None => step_key(id, "", 0),
        };
        let mut rows =
            self.rows_from(STEPS, &start, take.saturating_add(1), |r: &HeapRecord| {
                &r.execution_id == id
            })?;
        // The cursor names the last record already read: the range starts at it.
        if after.is_some() && rows.first().is_some_and(|(k, _)| k == &start) {
            rows.remove(0);
        }
        rows.truncate(take);
        Ok(rows)
    }
}

impl Tx for RedbTx {
    fn read_execution<R>(
        &self,
        id: &ExecutionId,
        read: impl FnOnce(&ExecutionRecord) -> R,
    ) -> Result<Option<R>> {
        let record: Option<ExecutionRecord> = self.get(EXECUTIONS, id.as_str())?;
        Ok(record.as_ref().map(read))
    }

    fn update_execution<R>(
        &mut self,
        id: &ExecutionId,
        change: impl FnOnce(&mut ExecutionRecord) -> R,
    ) -> Result<Option<R>> {
        let Some(mut record) = self.get::<ExecutionRecord>(EXECUTIONS, id.as_str())? else {
            return Ok(None);
        };
        let out = change(&mut record);
        self.put(EXECUTIONS, id.as_str(), &record)?;
        Ok(Some(out))
    }

    fn insert_admitted(&mut self, record: ExecutionRecord) -> Result<()> {
        self.place(&record.id)?;
        self.put(EXECUTIONS, record.id.as_str(), &record)
    }

    fn scan<R>(&self, read: impl FnOnce(Scan<'_>) -> R) -> Result<R> {
        let records: Vec<ExecutionRecord> =
            self.all(EXECUTIONS)?.into_iter().map(|(_, r)| r).collect();
        let admitted: HashMap<ExecutionId, u64> = self
            .all::<u64>(PLACES)?
            .into_iter()
            .filter_map(|(id, place)| Some((ExecutionId::new(id).ok()?, place)))
            .collect();
        Ok(read(Scan {
            records: Box::new(records.iter()),
            admitted: &admitted,
            namespace: &self.namespace,
        }))
    }

    fn newest_admitted(
        &self,
        before: Option<u64>,
        visit: &mut dyn FnMut(u64, &ExecutionRecord) -> bool,
    ) -> Result<()> {
        self.newest_first(before, |place, id| {
            Ok(match self.get::<ExecutionRecord>(EXECUTIONS, id)? {
                Some(record) => visit(place, &record),
                None => true,
            })
        })
    }

    fn purge(&mut self, ids: &[ExecutionId]) -> Result<()> {
        let gone: HashSet<&ExecutionId> = ids.iter().collect();
        for id in ids {
            self.purge_one(id)?;
        }
        self.remove_where::<StoreOutcome>(RECEIPTS, |key, _| {
            serde_json::from_str::<ReceiptKey>(key).is_ok_and(|(_, e, _)| gone.contains(&e))
        })?;
        self.remove_where::<ExecutionId>(STARTS, |_, target| gone.contains(target))?;
        for (key, effect) in self.all::<EffectRecord>(EFFECTS)? {
            if gone.contains(&effect.execution_id) {
                self.remove(EFFECTS, &key)?;
                self.remove(EFFECT_WAITS, &key)?;
            }
        }
        for (key, mut waiters) in self.all::<BTreeSet<ExecutionId>>(STORE_WAITERS)? {
            waiters.retain(|w| !gone.contains(w));
            if waiters.is_empty() {
                self.remove(STORE_WAITERS, &key)?;
            } else {
                self.put(STORE_WAITERS, &key, &waiters)?;
            }
        }
        Ok(())
    }

    fn namespace(&self) -> Result<&Namespace> {
        Ok(&self.namespace)
    }

    fn namespace_mut(&mut self) -> Result<&mut Namespace> {
        self.namespace_changed = true;
        Ok(&mut self.namespace)
    }

    fn history(&self, id: &ExecutionId) -> Result<Option<DeliveryHistory>> {
        self.get(HISTORIES, id.as_str())
    }

    fn update_history(
        &mut self,
        id: &ExecutionId,
        change: impl FnOnce(&mut DeliveryHistory),
    ) -> Result<()> {
        let mut history = self.history(id)?.unwrap_or_default();
        change(&mut history);
        self.put(HISTORIES, id.as_str(), &history)
    }

    fn step(&self, id: &ExecutionId, key: &StepKey, attempt: u32) -> Result<Option<HeapRecord>> {
        self.get(STEPS, &step_key(id, key.as_str(), attempt))
    }

    fn insert_step(&mut self, record: &HeapRecord) -> Result<()> {
        let id = &record.execution_id;
        let key = step_key(id, record.step_key.as_str(), record.step_attempt);
        self.put(STEPS, &key, record)
    }

    fn steps(
        &self,
        id: &ExecutionId,
        after: Option<&StepCursor>,
        take: usize,
    ) -> Result<Vec<HeapRecord>> {
        let rows = self.steps_with_keys(id, after, take)?;
        Ok(rows.into_iter().map(|(_, r)| r).collect())
    }

    fn store_entries(&self, store: &StoreId) -> Result<Option<BTreeMap<StoreKey, Json>>> {
        self.get(STORES, store.as_str())
    }

    fn create_store(&mut self, store: &StoreId, entries: BTreeMap<StoreKey, Json>) -> Result<()> {
        self.put(STORES, store.as_str(), &entries)
    }

    fn entry(&self, store: &StoreId, key: &StoreKey) -> Result<Option<Option<Json>>> {
        let entries: Option<BTreeMap<StoreKey, Json>> = self.get(STORES, store.as_str())?;
        Ok(entries.map(|mut e| e.remove(key)))
    }

    fn set_entry(&mut self, store: &StoreId, key: &StoreKey, value: Option<Json>) -> Result<()> {
        let mut entries = self.entries(store)?;
        match value {
            Some(v) => entries.insert(key.clone(), v),
            None => entries.remove(key),
        };
        self.put(STORES, store.as_str(), &entries)
    }

    fn receipt(&self, key: &ReceiptKey) -> Result<Option<StoreOutcome>> {
        self.get(RECEIPTS, &key_of(key)?)
    }

    fn put_receipt(&mut self, key: ReceiptKey, outcome: &StoreOutcome) -> Result<()> {
        self.put(RECEIPTS, &key_of(&key)?, outcome)
    }

    fn add_store_waiter(
        &mut self,
        store: &StoreId,
        key: &StoreKey,
        waiter: &ExecutionId,
    ) -> Result<()> {
        let watched = key_of(&(store, key))?;
        let mut waiters: BTreeSet<ExecutionId> =
            self.get(STORE_WAITERS, &watched)?.unwrap_or_default();
        waiters.insert(waiter.clone());
        self.put(STORE_WAITERS, &watched, &waiters)
    }

    fn take_store_waiters(
        &mut self,
        store: &StoreId,
        key: &StoreKey,
    ) -> Result<BTreeSet<ExecutionId>> {
        let watched = key_of(&(store, key))?;
        let waiters = self.get(STORE_WAITERS, &watched)?.unwrap_or_default();
        self.remove(STORE_WAITERS, &watched)?;
        Ok(waiters)
    }

    fn start_target(&self, request: &RequestId) -> Result<Option<ExecutionId>> {
        self.get(STARTS, request.as_str())
    }

    fn put_start(&mut self, request: &RequestId, target: &ExecutionId) -> Result<()> {
        self.put(STARTS, request.as_str(), target)
    }

    fn effect(&self, id: &EffectId) -> Result<Option<EffectRecord>> {
        self.get(EFFECTS, id.as_str())
    }

    fn put_effect(&mut self, record: &EffectRecord) -> Result<()> {
        self.put(EFFECTS, record.id.as_str(), record)
    }

    fn set_effect_wait(&mut self, id: &EffectId, waiting: bool) -> Result<bool> {
        let was = self.remove(EFFECT_WAITS, id.as_str())?;
        if waiting {
            self.put(EFFECT_WAITS, id.as_str(), &true)?;
        }
        Ok(was)
    }
}
