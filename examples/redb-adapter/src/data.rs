//! Step records, stores, effects and starts: each method one write transaction, as the
//! in-memory reference does each under its mutex.

use std::collections::{BTreeMap, BTreeSet};

use async_trait::async_trait;
use lease_core::{
    Admission, Begun, EffectClient, EffectId, EffectRecord, EffectWait, ExecutionId,
    ExecutionLease, ExecutionRecord, Fenced, HeapClient, HeapRecord, Json, LeaseError, Result,
    Settlement, StartClient, StartRequest, Started, StepCursor, StepKey, StepPage, StepWrite,
    StoreClient, StoreId, StoreKey, StoreOp, StoreOutcome, StoreReceipt, StoreSnapshot,
    StoreUpdate, Timestamp,
};

use crate::tx::{
    EFFECT_WAITS, EFFECTS, RECEIPTS, STARTS, STEPS, STORE_WAITERS, STORES, Tx, key_of, step_key,
};
use crate::{RedbBackend, execution, held, store};

/// The entries of `id`, or `UnknownStore`.
fn entries(tx: &Tx, id: &StoreId) -> Result<BTreeMap<StoreKey, Json>> {
    tx.get(STORES, id.as_str())?
        .ok_or_else(|| LeaseError::UnknownStore(id.to_string()))
}

/// A wake of `id` at `now` in the caller's transaction (a settle's or an update's waiter);
/// the record to signal after the commit. A purged waiter is skipped.
fn wake(tx: &Tx, id: &ExecutionId, now: Timestamp) -> Result<Option<ExecutionRecord>> {
    let Some(mut record) = tx.get::<ExecutionRecord>(crate::tx::EXECUTIONS, id.as_str())? else {
        return Ok(None);
    };
    record.request_wake(now);
    store(tx, &record)?;
    Ok(Some(record))
}

/// The effect `id`, checked to belong to `caller`.
fn owned_effect(tx: &Tx, id: &EffectId, caller: &ExecutionId) -> Result<EffectRecord> {
    let record: EffectRecord = tx
        .get(EFFECTS, id.as_str())?
        .ok_or_else(|| LeaseError::UnknownEffect(id.clone()))?;
    record.check_owner(caller)?;
    Ok(record)
}

#[async_trait]
impl HeapClient for RedbBackend {
    async fn write_step(
        &self,
        lease: &ExecutionLease,
        write: &StepWrite,
    ) -> Result<Fenced<HeapRecord>> {
        let now = self.clock.now();
        self.write(|tx| {
            if held(tx, lease, now)?.is_none() {
                return Ok(Fenced::Lost);
            }
            let id = &lease.execution_id;
            let key = step_key(id, write.step_key.as_str(), write.step_attempt);
            if let Some(existing) = tx.get(STEPS, &key)? {
                return Ok(Fenced::Accepted(existing));
            }
            let record = HeapRecord::from_write(id, lease.token, write);
            tx.put(STEPS, &key, &record)?;
            Ok(Fenced::Accepted(record))
        })
    }

    async fn read_step(
        &self,
        id: &ExecutionId,
        key: &StepKey,
        step_attempt: u32,
    ) -> Result<Option<HeapRecord>> {
        self.write(|tx| tx.get(STEPS, &step_key(id, key.as_str(), step_attempt)))
    }

    async fn list_steps(&self, id: &ExecutionId) -> Result<Vec<HeapRecord>> {
        let rows = self.write(|tx| tx.steps_from(id, "", 0, usize::MAX))?;
        Ok(rows.into_iter().map(|(_, r)| r).collect())
    }

    /// A range read from the cursor: only the page (and one more record) is decoded.
    async fn list_steps_page(
        &self,
        id: &ExecutionId,
        after: Option<&StepCursor>,
        limit: u32,
    ) -> Result<StepPage> {
        StepPage::check_limit(limit)?;
        let take = usize::try_from(limit)
            .unwrap_or(usize::MAX)
            .saturating_add(1);
        let (key, attempt) = after.map_or(("", 0), |c| (c.step_key.as_str(), c.step_attempt));
        let rows = self.write(|tx| {
            // The cursor's own record is the first one in range: one more to cut it off.
            let rows = tx.steps_from(id, key, attempt, take.saturating_add(1))?;
            let rows = rows.into_iter().map(|(_, r)| r);
            Ok(rows
                .filter(|r| after.is_none_or(|c| c.precedes(r)))
                .take(take)
                .collect())
        })?;
        Ok(StepPage::from_rows(rows, limit))
    }
}

#[async_trait]
impl StoreClient for RedbBackend {
    async fn get_or_create(
        &self,
        store: &StoreId,
        initial: &[(StoreKey, Json)],
    ) -> Result<StoreSnapshot> {
        self.write(|tx| {
            let existing: Option<BTreeMap<StoreKey, Json>> = tx.get(STORES, store.as_str())?;
            let created = existing.is_none();
            let entries = existing.unwrap_or_else(|| initial.iter().cloned().collect());
            if created {
                tx.put(STORES, store.as_str(), &entries)?;
            }
            Ok(StoreSnapshot {
                store: store.clone(),
                entries,
                created,
            })
        })
    }

    async fn read_entry(&self, store: &StoreId, key: &StoreKey) -> Result<Option<Json>> {
        self.write(|tx| Ok(entries(tx, store)?.remove(key)))
    }

    async fn update(&self, receipt: &StoreReceipt, op: &StoreOp) -> Result<StoreUpdate> {
        let now = self.clock.now();
        let (outcome, replayed, woken) = self.write(|tx| {
            let mut current = entries(tx, &receipt.store)?;
            let rkey = key_of(&(&receipt.store, &receipt.execution_id, &receipt.step_key))?;
            if let Some(outcome) = tx.get::<StoreOutcome>(RECEIPTS, &rkey)? {
                return Ok((outcome, true, Vec::new()));
            }
            let (next, outcome) = op.apply(current.get(op.key()));
            match next {
                Some(v) => current.insert(op.key().clone(), v),
                None => current.remove(op.key()),
            };
            tx.put(STORES, receipt.store.as_str(), &current)?;
            tx.put(RECEIPTS, &rkey, &outcome)?;
            let mut woken = Vec::new();
            if outcome.applied {
                let watched = key_of(&(&receipt.store, op.key()))?;
                let waiters: BTreeSet<ExecutionId> =
                    tx.get(STORE_WAITERS, &watched)?.unwrap_or_default();
                tx.remove(STORE_WAITERS, &watched)?;
                for waiter in &waiters {
                    woken.extend(wake(tx, waiter, now)?);
                }
            }
            Ok((outcome, false, woken))
        })?;
        self.signal_all(&woken);
        Ok(StoreUpdate { outcome, replayed })
    }

    async fn watch_entry(
        &self,
        store: &StoreId,
        key: &StoreKey,
        waiter: &ExecutionId,
    ) -> Result<Option<Json>> {
        self.write(|tx| {
            execution(tx, waiter)?;
            let current = entries(tx, store)?.remove(key);
            let watched = key_of(&(store, key))?;
            let mut waiters: BTreeSet<ExecutionId> =
                tx.get(STORE_WAITERS, &watched)?.unwrap_or_default();
            waiters.insert(waiter.clone());
            tx.put(STORE_WAITERS, &watched, &waiters)?;
            Ok(current)
        })
    }
}

#[async_trait]
impl EffectClient for RedbBackend {
    async fn begin_effect(&self, id: &EffectId, execution_id: &ExecutionId) -> Result<Begun> {
        let now = self.clock.now();
        let (record, created) = self.write(|tx| {
            execution(tx, execution_id)?;
            if let Some(record) = tx.get::<EffectRecord>(EFFECTS, id.as_str())? {
                record.check_owner(execution_id)?;
                return Ok((record, false));
            }
            let record = EffectRecord::pending(id.clone(), execution_id.clone(), now);
            tx.put(EFFECTS, id.as_str(), &record)?;
            Ok((record, true))
        })?;
        Ok(Begun { record, created })
    }

    async fn settle_effect(
        &self,
        id: &EffectId,
        execution_id: &ExecutionId,
        result: &Json,
    ) -> Result<Settlement> {
        let now = self.clock.now();
        let (settlement, woken) = self.write(|tx| {
            let settlement = owned_effect(tx, id, execution_id)?.settle(result, now);
            let mut woken = None;
            if let Settlement::Recorded(record) = &settlement {
                tx.put(EFFECTS, id.as_str(), record)?;
                if tx.remove(EFFECT_WAITS, id.as_str())? {
                    woken = wake(tx, execution_id, now)?;
                }
            }
            Ok((settlement, woken))
        })?;
        self.signal_all(&woken);
        Ok(settlement)
    }

    async fn read_effect(&self, id: &EffectId) -> Result<Option<EffectRecord>> {
        self.write(|tx| tx.get(EFFECTS, id.as_str()))
    }

    async fn wait_effect(&self, id: &EffectId, execution_id: &ExecutionId) -> Result<EffectWait> {
        self.write(|tx| {
            let record = owned_effect(tx, id, execution_id)?;
            if record.result().is_some() {
                return Ok(EffectWait::Settled(record));
            }
            tx.put(EFFECT_WAITS, id.as_str(), &true)?;
            Ok(EffectWait::Registered)
        })
    }
}

#[async_trait]
impl StartClient for RedbBackend {
    async fn start(&self, request: &StartRequest) -> Result<Started> {
        let now = self.clock.now();
        let (target, record) = self.write(|tx| {
            if let Some(target) = tx.get::<ExecutionId>(STARTS, request.request_id.as_str())? {
                return Ok((target, None));
            }
            if execution(tx, &request.target).is_ok() {
                let reason = format!("execution {} already exists", request.target);
                return Err(LeaseError::invalid("start target", reason));
            }
            let admission = Admission::new(request.target.clone())
                .workflow(request.workflow.clone())
                .input(request.input.clone());
            let record = ExecutionRecord::admitted(&admission, now);
            store(tx, &record)?;
            tx.put(STARTS, request.request_id.as_str(), &request.target)?;
            Ok((request.target.clone(), Some(record)))
        })?;
        let started = Started {
            target,
            created: record.is_some(),
        };
        self.signal_all(&record);
        Ok(started)
    }
}
