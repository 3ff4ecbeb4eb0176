//! The engine's step records, stores, effects and start requests
//! ([`crate::HeapClient`], [`crate::StoreClient`], [`crate::EffectClient`],
//! [`crate::StartClient`]), each call one transaction.

use async_trait::async_trait;

use crate::client::{EffectClient, HeapClient, StartClient, StoreClient};
use crate::effect::{Begun, EffectRecord, EffectWait, Settlement};
use crate::error::{LeaseError, Result};
use crate::execution::{Admission, ExecutionRecord};
use crate::heap::{HeapRecord, StepCursor, StepPage, StepWrite};
use crate::ids::{EffectId, ExecutionId, StepKey, StoreId, StoreKey};
use crate::json::Json;
use crate::lease::{ExecutionLease, Fenced};
use crate::store::{StartRequest, Started, StoreOp, StoreReceipt, StoreSnapshot, StoreUpdate};

use super::{Engine, Tx, TxStore};

/// `UnknownExecution` unless `id` is stored.
fn known(tx: &impl Tx, id: &ExecutionId) -> Result<()> {
    tx.read_execution(id, |_| ())?
        .ok_or_else(|| LeaseError::UnknownExecution(id.clone()))
}

/// The effect `id`, checked to belong to `caller`.
fn owned_effect(tx: &impl Tx, id: &EffectId, caller: &ExecutionId) -> Result<EffectRecord> {
    let record = tx
        .effect(id)?
        .ok_or_else(|| LeaseError::UnknownEffect(id.clone()))?;
    record.check_owner(caller)?;
    Ok(record)
}

#[async_trait]
impl<S: TxStore> HeapClient for Engine<S> {
    /// The first write of a step key wins; a later one gets the stored record back.
    #[tracing::instrument(level = "debug", name = "write_step", skip_all)]
    async fn write_step(
        &self,
        lease: &ExecutionLease,
        write: &StepWrite,
    ) -> Result<Fenced<HeapRecord>> {
        let now = self.clock.now();
        let (lease, write) = (lease.clone(), write.clone());
        self.write("write_step", move |tx, _| {
            if !tx.holds(&lease, now)? {
                return Ok(Fenced::Lost);
            }
            let record = HeapRecord::from_write(&lease.execution_id, lease.token, &write);
            Ok(Fenced::Accepted(tx.step_or_insert(record)?))
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "read_step", skip_all)]
    async fn read_step(
        &self,
        id: &ExecutionId,
        step_key: &StepKey,
        step_attempt: u32,
    ) -> Result<Option<HeapRecord>> {
        let (id, step_key) = (id.clone(), step_key.clone());
        self.read("read_step", move |tx| tx.step(&id, &step_key, step_attempt))
            .await
    }

    #[tracing::instrument(level = "debug", name = "list_steps", skip_all)]
    async fn list_steps(&self, id: &ExecutionId) -> Result<Vec<HeapRecord>> {
        let id = id.clone();
        self.read("list_steps", move |tx| tx.steps(&id, None, usize::MAX))
            .await
    }

    /// Only the page (and one more record) is read.
    #[tracing::instrument(level = "debug", name = "list_steps_page", skip_all)]
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
        let (id, after) = (id.clone(), after.cloned());
        let rows = self
            .read("list_steps_page", move |tx| {
                tx.steps(&id, after.as_ref(), take)
            })
            .await?;
        Ok(StepPage::from_rows(rows, limit))
    }
}

#[async_trait]
impl<S: TxStore> StoreClient for Engine<S> {
    #[tracing::instrument(level = "debug", name = "get_or_create", skip_all)]
    async fn get_or_create(
        &self,
        store: &StoreId,
        initial: &[(StoreKey, Json)],
    ) -> Result<StoreSnapshot> {
        let (store, initial) = (store.clone(), initial.to_vec());
        self.write("get_or_create", move |tx, _| {
            let (entries, created) = match tx.store_entries(&store)? {
                Some(entries) => (entries, false),
                None => {
                    let entries: std::collections::BTreeMap<StoreKey, Json> =
                        initial.iter().cloned().collect();
                    tx.create_store(&store, entries.clone())?;
                    (entries, true)
                }
            };
            Ok(StoreSnapshot {
                store: store.clone(),
                entries,
                created,
            })
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "read_entry", skip_all)]
    async fn read_entry(&self, store: &StoreId, key: &StoreKey) -> Result<Option<Json>> {
        let (store, key) = (store.clone(), key.clone());
        self.read("read_entry", move |tx| {
            tx.entry(&store, &key)?
                .ok_or_else(|| LeaseError::UnknownStore(store.to_string()))
        })
        .await
    }

    /// A receipt seen before replays its outcome; an applied change wakes the entry's
    /// waiters.
    #[tracing::instrument(level = "debug", name = "update", skip_all)]
    async fn update(&self, receipt: &StoreReceipt, op: &StoreOp) -> Result<StoreUpdate> {
        let (this, receipt, op) = (self.clone(), receipt.clone(), op.clone());
        self.write("update", move |tx, wakes| {
            let current = tx
                .entry(&receipt.store, op.key())?
                .ok_or_else(|| LeaseError::UnknownStore(receipt.store.to_string()))?;
            let rkey = (
                receipt.store.clone(),
                receipt.execution_id.clone(),
                receipt.step_key.clone(),
            );
            if let Some(outcome) = tx.receipt(&rkey)? {
                return Ok(StoreUpdate {
                    outcome,
                    replayed: true,
                });
            }
            let (next, outcome) = op.apply(current.as_ref());
            tx.set_entry(&receipt.store, op.key(), next)?;
            tx.put_receipt(rkey, &outcome)?;
            if outcome.applied {
                let now = this.clock.now();
                for waiter in tx.take_store_waiters(&receipt.store, op.key())? {
                    this.wake_in(tx, wakes, &waiter, now)?;
                }
            }
            Ok(StoreUpdate {
                outcome,
                replayed: false,
            })
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "watch_entry", skip_all)]
    async fn watch_entry(
        &self,
        store: &StoreId,
        key: &StoreKey,
        waiter: &ExecutionId,
    ) -> Result<Option<Json>> {
        let (store, key, waiter) = (store.clone(), key.clone(), waiter.clone());
        self.write("watch_entry", move |tx, _| {
            known(tx, &waiter)?;
            let current = tx
                .entry(&store, &key)?
                .ok_or_else(|| LeaseError::UnknownStore(store.to_string()))?;
            tx.add_store_waiter(&store, &key, &waiter)?;
            Ok(current)
        })
        .await
    }
}

#[async_trait]
impl<S: TxStore> EffectClient for Engine<S> {
    #[tracing::instrument(level = "debug", name = "begin_effect", skip_all)]
    async fn begin_effect(&self, id: &EffectId, execution: &ExecutionId) -> Result<Begun> {
        let now = self.clock.now();
        let (id, execution) = (id.clone(), execution.clone());
        self.write("begin_effect", move |tx, _| {
            known(tx, &execution)?;
            if let Some(record) = tx.effect(&id)? {
                record.check_owner(&execution)?;
                return Ok(Begun {
                    record,
                    created: false,
                });
            }
            let record = EffectRecord::pending(id.clone(), execution.clone(), now);
            tx.put_effect(&record)?;
            Ok(Begun {
                record,
                created: true,
            })
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "settle_effect", skip_all)]
    async fn settle_effect(
        &self,
        id: &EffectId,
        execution: &ExecutionId,
        result: &Json,
    ) -> Result<Settlement> {
        let now = self.clock.now();
        let this = self.clone();
        let (id, execution, result) = (id.clone(), execution.clone(), result.clone());
        self.write("settle_effect", move |tx, wakes| {
            let settlement = owned_effect(tx, &id, &execution)?.settle(&result, now);
            if let Settlement::Recorded(record) = &settlement {
                tx.put_effect(record)?;
                if tx.set_effect_wait(&id, false)? {
                    this.wake_in(tx, wakes, &execution, now)?;
                }
            }
            Ok(settlement)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "read_effect", skip_all)]
    async fn read_effect(&self, id: &EffectId) -> Result<Option<EffectRecord>> {
        let id = id.clone();
        self.read("read_effect", move |tx| tx.effect(&id)).await
    }

    /// Only the owner may wait; a settled effect answers at once.
    #[tracing::instrument(level = "debug", name = "wait_effect", skip_all)]
    async fn wait_effect(&self, id: &EffectId, execution: &ExecutionId) -> Result<EffectWait> {
        let (id, execution) = (id.clone(), execution.clone());
        self.write("wait_effect", move |tx, _| {
            let record = owned_effect(tx, &id, &execution)?;
            if record.result().is_some() {
                return Ok(EffectWait::Settled(record));
            }
            tx.set_effect_wait(&id, true)?;
            Ok(EffectWait::Registered)
        })
        .await
    }
}

#[async_trait]
impl<S: TxStore> StartClient for Engine<S> {
    /// A request id seen before answers with its target; a new one admits the target,
    /// which must not exist yet.
    #[tracing::instrument(level = "debug", name = "start", skip_all)]
    async fn start(&self, request: &StartRequest) -> Result<Started> {
        let now = self.clock.now();
        let (this, request) = (self.clone(), request.clone());
        self.write("start", move |tx, wakes| {
            if let Some(target) = tx.start_target(&request.request_id)? {
                return Ok(Started {
                    target,
                    created: false,
                });
            }
            if tx.read_execution(&request.target, |_| ())?.is_some() {
                return Err(LeaseError::invalid(
                    "start target",
                    format!("execution {} already exists", request.target),
                ));
            }
            let admission = Admission::new(request.target.clone())
                .workflow(request.workflow.clone())
                .input(request.input.clone());
            let record = ExecutionRecord::admitted(&admission, now);
            this.note(wakes, &record);
            tx.insert_admitted(record)?;
            tx.put_start(&request.request_id, &request.target)?;
            Ok(Started {
                target: request.target.clone(),
                created: true,
            })
        })
        .await
    }
}
