//! The in-memory reference backend (feature `memory`): small and obviously right.
//!
//! It is the [`Engine`] over one mutex around maps: every operation takes the mutex for
//! its whole transaction, so it is trivially atomic. Peers (clones made by
//! [`Engine::peer`]) share the state, as separate connections to one store would.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ops::Bound;
use std::sync::{Arc, Mutex};

use crate::effect::EffectRecord;
use crate::engine::{Engine, Namespace, ReceiptKey, Scan, Tx, TxStore, Written};
use crate::error::{LeaseError, Result};
use crate::execution::ExecutionRecord;
use crate::heap::{HeapRecord, StepCursor};
use crate::history::DeliveryHistory;
use crate::ids::{EffectId, ExecutionId, RequestId, StepKey, StoreId, StoreKey};
use crate::json::Json;
use crate::store::StoreOutcome;
use crate::time::{SharedClock, SystemClock};

/// The in-memory reference backend: the engine over [`MemoryStore`].
pub type MemoryBackend = Engine<MemoryStore>;

/// A step record's key in the ordered map: (execution, step key, attempt).
type StepIndex = (ExecutionId, StepKey, u32);

/// The reference backend's whole state: one map per kind of row. Only the engine reads and
/// writes it, through [`Tx`].
#[derive(Debug, Default)]
pub struct MemoryState {
    namespace: Namespace,
    executions: BTreeMap<ExecutionId, ExecutionRecord>,
    steps: BTreeMap<StepIndex, HeapRecord>,
    stores: HashMap<StoreId, BTreeMap<StoreKey, Json>>,
    receipts: HashMap<ReceiptKey, StoreOutcome>,
    starts: HashMap<RequestId, ExecutionId>,
    effects: BTreeMap<EffectId, EffectRecord>,
    /// Effects whose owner waits for their settle (only the owner may wait).
    effect_waits: BTreeSet<EffectId>,
    store_waiters: HashMap<(StoreId, StoreKey), BTreeSet<ExecutionId>>,
    /// Admission order ([`crate::keyed`] ordered keys, [`crate::browse`]): each
    /// execution's place, the executions by place, and the last place given.
    admitted: HashMap<ExecutionId, u64>,
    by_admission: BTreeMap<u64, ExecutionId>,
    last_admitted: u64,
    /// Each claimed execution's last deliveries ([`crate::history`]), at most
    /// [`crate::MAX_DELIVERY_HISTORY`] each; purged with the record.
    histories: HashMap<ExecutionId, DeliveryHistory>,
}

/// One mutex around a [`MemoryState`], shared by clones.
#[derive(Debug, Clone, Default)]
pub struct MemoryStore(Arc<Mutex<MemoryState>>);

impl TxStore for MemoryStore {
    const NAME: &'static str = "memory";
    type Tx<'t> = MemoryState;

    /// Holds the mutex for the whole of `step`. There is no rollback: the engine checks
    /// before it writes.
    /// The step runs once, at the call (it never waits on anything), so the future is ready.
    fn transact<T: Send + 'static>(
        &self,
        _operation: &'static str,
        mut step: impl for<'t> FnMut(&mut MemoryState) -> Result<Written<T>> + Send + 'static,
    ) -> impl Future<Output = Result<Written<T>>> + Send {
        // A panic while holding the lock cannot leave a half-applied operation: every
        // operation computes before it mutates. So a poisoned lock is still consistent.
        let mut state = self.0.lock().unwrap_or_else(|p| p.into_inner());
        std::future::ready(step(&mut state))
    }
}

impl Default for MemoryBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryBackend {
    /// An empty backend on the system clock with the default redelivery policy.
    pub fn new() -> Self {
        Self::with_clock(Arc::new(SystemClock))
    }

    /// An empty backend on the given clock (a [`crate::ManualClock`] in tests).
    pub fn with_clock(clock: SharedClock) -> Self {
        Engine::over(MemoryStore::default(), clock)
    }
}

impl MemoryState {
    fn store_mut(&mut self, store: &StoreId) -> Result<&mut BTreeMap<StoreKey, Json>> {
        self.stores
            .get_mut(store)
            .ok_or_else(|| LeaseError::UnknownStore(store.to_string()))
    }
}

impl Tx for MemoryState {
    fn read_execution<R>(
        &self,
        id: &ExecutionId,
        read: impl FnOnce(&ExecutionRecord) -> R,
    ) -> Result<Option<R>> {
        Ok(self.executions.get(id).map(read))
    }

    fn update_execution<R>(
        &mut self,
        id: &ExecutionId,
        change: impl FnOnce(&mut ExecutionRecord) -> R,
    ) -> Result<Option<R>> {
        Ok(self.executions.get_mut(id).map(change))
    }

    fn insert_admitted(&mut self, record: ExecutionRecord) -> Result<()> {
        self.last_admitted += 1;
        self.admitted.insert(record.id.clone(), self.last_admitted);
        self.by_admission
            .insert(self.last_admitted, record.id.clone());
        self.executions.insert(record.id.clone(), record);
        Ok(())
    }

    fn scan<R>(&self, read: impl FnOnce(Scan<'_>) -> R) -> Result<R> {
        Ok(read(Scan {
            records: Box::new(self.executions.values()),
            admitted: &self.admitted,
            namespace: &self.namespace,
        }))
    }

    fn newest_admitted(
        &self,
        before: Option<u64>,
        visit: &mut dyn FnMut(u64, &ExecutionRecord) -> bool,
    ) -> Result<()> {
        let upper = before.map_or(Bound::Unbounded, Bound::Excluded);
        for (place, id) in self.by_admission.range((Bound::Unbounded, upper)).rev() {
            if let Some(record) = self.executions.get(id)
                && !visit(*place, record)
            {
                break;
            }
        }
        Ok(())
    }

    fn purge(&mut self, ids: &[ExecutionId]) -> Result<()> {
        let gone: HashSet<&ExecutionId> = ids.iter().collect();
        self.executions.retain(|id, _| !gone.contains(id));
        self.histories.retain(|id, _| !gone.contains(id));
        self.admitted.retain(|id, _| !gone.contains(id));
        self.by_admission.retain(|_, id| !gone.contains(id));
        self.steps.retain(|(id, _, _), _| !gone.contains(id));
        self.receipts.retain(|(_, id, _), _| !gone.contains(id));
        self.starts.retain(|_, target| !gone.contains(target));
        let effects: Vec<EffectId> = self
            .effects
            .values()
            .filter(|e| gone.contains(&e.execution_id))
            .map(|e| e.id.clone())
            .collect();
        for id in &effects {
            self.effects.remove(id);
            self.effect_waits.remove(id);
        }
        for waiters in self.store_waiters.values_mut() {
            waiters.retain(|w| !gone.contains(w));
        }
        self.store_waiters.retain(|_, waiters| !waiters.is_empty());
        Ok(())
    }

    fn namespace(&self) -> Result<&Namespace> {
        Ok(&self.namespace)
    }

    fn namespace_mut(&mut self) -> Result<&mut Namespace> {
        Ok(&mut self.namespace)
    }

    fn history(&self, id: &ExecutionId) -> Result<Option<DeliveryHistory>> {
        Ok(self.histories.get(id).cloned())
    }

    fn update_history(
        &mut self,
        id: &ExecutionId,
        change: impl FnOnce(&mut DeliveryHistory),
    ) -> Result<()> {
        change(self.histories.entry(id.clone()).or_default());
        Ok(())
    }

    fn step(&self, id: &ExecutionId, key: &StepKey, attempt: u32) -> Result<Option<HeapRecord>> {
        let index = (id.clone(), key.clone(), attempt);
        Ok(self.steps.get(&index).cloned())
    }

    fn insert_step(&mut self, record: &HeapRecord) -> Result<()> {
        let index = (
            record.execution_id.clone(),
            record.step_key.clone(),
            record.step_attempt,
        );
        self.steps.insert(index, record.clone());
        Ok(())
    }

    /// One probe of the ordered map: the step's key is built once.
    fn step_or_insert(&mut self, record: HeapRecord) -> Result<HeapRecord> {
        let index = (
            record.execution_id.clone(),
            record.step_key.clone(),
            record.step_attempt,
        );
        Ok(self.steps.entry(index).or_insert(record).clone())
    }

    /// A range read of the ordered map: only the rows returned are copied.
    fn steps(
        &self,
        id: &ExecutionId,
        after: Option<&StepCursor>,
        take: usize,
    ) -> Result<Vec<HeapRecord>> {
        let from = match after {
            Some(c) => Bound::Excluded((id.clone(), c.step_key.clone(), c.step_attempt)),
            None => Bound::Unbounded,
        };
        Ok(self
            .steps
            .range((from, Bound::Unbounded))
            .map(|(_, r)| r)
            .skip_while(|r| &r.execution_id < id)
            .take_while(|r| &r.execution_id == id)
            .take(take)
            .cloned()
            .collect())
    }

    fn store_entries(&self, store: &StoreId) -> Result<Option<BTreeMap<StoreKey, Json>>> {
        Ok(self.stores.get(store).cloned())
    }

    fn create_store(&mut self, store: &StoreId, entries: BTreeMap<StoreKey, Json>) -> Result<()> {
        self.stores.insert(store.clone(), entries);
        Ok(())
    }

    fn entry(&self, store: &StoreId, key: &StoreKey) -> Result<Option<Option<Json>>> {
        Ok(self
            .stores
            .get(store)
            .map(|entries| entries.get(key).cloned()))
    }

    fn set_entry(&mut self, store: &StoreId, key: &StoreKey, value: Option<Json>) -> Result<()> {
        let entries = self.store_mut(store)?;
        match value {
            Some(v) => entries.insert(key.clone(), v),
            None => entries.remove(key),
        };
        Ok(())
    }

    fn receipt(&self, key: &ReceiptKey) -> Result<Option<StoreOutcome>> {
        Ok(self.receipts.get(key).cloned())
    }

    fn put_receipt(&mut self, key: ReceiptKey, outcome: &StoreOutcome) -> Result<()> {
        self.receipts.insert(key, outcome.clone());
        Ok(())
    }

    fn add_store_waiter(
        &mut self,
        store: &StoreId,
        key: &StoreKey,
        waiter: &ExecutionId,
    ) -> Result<()> {
        self.store_waiters
            .entry((store.clone(), key.clone()))
            .or_default()
            .insert(waiter.clone());
        Ok(())
    }

    fn take_store_waiters(
        &mut self,
        store: &StoreId,
        key: &StoreKey,
    ) -> Result<BTreeSet<ExecutionId>> {
        let watched = (store.clone(), key.clone());
        Ok(self.store_waiters.remove(&watched).unwrap_or_default())
    }

    fn start_target(&self, request: &RequestId) -> Result<Option<ExecutionId>> {
        Ok(self.starts.get(request).cloned())
    }

    fn put_start(&mut self, request: &RequestId, target: &ExecutionId) -> Result<()> {
        self.starts.insert(request.clone(), target.clone());
        Ok(())
    }

    fn effect(&self, id: &EffectId) -> Result<Option<EffectRecord>> {
        Ok(self.effects.get(id).cloned())
    }

    fn put_effect(&mut self, record: &EffectRecord) -> Result<()> {
        self.effects.insert(record.id.clone(), record.clone());
        Ok(())
    }

    fn set_effect_wait(&mut self, id: &EffectId, waiting: bool) -> Result<bool> {
        Ok(if waiting {
            !self.effect_waits.insert(id.clone())
        } else {
            self.effect_waits.remove(id)
        })
    }
}
