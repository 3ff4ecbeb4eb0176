//! The suite must be able to fail: a "lab" backend that behaves like the reference backend,
//! except for one deliberate flaw chosen by a const parameter, and for each flaw the cases
//! that must catch it.
//!
//! `LabHarness<SOUND>` runs the whole suite (so the lab is a faithful copy); every other
//! `LabHarness<FLAW>` runs only the cases that must fail on it, and asserts they do.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use lease_conformance::{Ctx, Harness, cases, run_case};
use lease_core::execution::check_ack_batch;
use lease_core::limits::check_limit;
use lease_core::time::lease_millis;
use lease_core::{
    Acknowledged, Acknowledgement, Admission, Begun, ClaimBatch, ClaimRequest, Claimed, Clock,
    EffectClient, EffectId, EffectRecord, EffectState, EffectWait, ExecutionClient, ExecutionId,
    ExecutionLease, ExecutionRecord, ExecutionStatus, Fenced, FencingToken, HeapClient, HeapRecord,
    Json, LeaseError, ManualClock, RedeliveryPolicy, RequestId, Result, Settlement, StartClient,
    StartRequest, Started, StepKey, StepWrite, StoreClient, StoreId, StoreKey, StoreOp,
    StoreOutcome, StoreReceipt, StoreSnapshot, StoreUpdate, Timestamp, WorkflowRunOutcome,
};

/// No flaw.
const SOUND: u8 = 0;
/// write_step checks the token, lets go of the lock, then inserts (check-then-write).
const STEP_CHECK_THEN_WRITE: u8 = 1;
/// acknowledge checks the token, lets go of the lock, then writes the outcome.
const ACK_CHECK_THEN_WRITE: u8 = 2;
/// claim_due selects claimable executions, lets go of the lock, then claims them.
const CLAIM_CHECK_THEN_WRITE: u8 = 3;
/// write_step accepts any token of a known execution.
const STEP_UNFENCED: u8 = 4;
/// Fenced writes consult the clock: an expired lease is lost even without a reclaim.
const EXPIRY_IS_LOST: u8 = 5;
/// write_step replaces an existing record.
const STEP_OVERWRITES: u8 = 6;
/// No redelivery delay.
const NO_REDELIVERY_GATE: u8 = 7;
/// acknowledge does not reset unacknowledged_deliveries.
const ACK_KEEPS_UNACKED: u8 = 8;
/// claim_due trusts the caller's now.
const CLAIM_TRUSTS_CALLER_NOW: u8 = 9;
/// request_wake during a delivery moves due_at instead of waiting for the acknowledgement.
const WAKE_IGNORES_LEASE: u8 = 10;
/// Tokens count per execution instead of per namespace.
const TOKEN_PER_EXECUTION: u8 = 11;
/// Store updates do not record receipts.
const NO_RECEIPTS: u8 = 12;
/// start does not record request ids.
const START_NOT_IDEMPOTENT: u8 = 13;
/// Token 0 is treated as a stale token (Lost), not invalid input.
const TOKEN_ZERO_LOST: u8 = 14;
/// get returns the stored record, not the effective one.
const GET_STORED: u8 = 15;
/// list_failing reads stored records, not effective ones.
const LIST_STORED: u8 = 16;
/// release does not count an unacknowledged delivery.
const RELEASE_NOT_COUNTED: u8 = 17;
/// claim_due orders by id only.
const ORDER_BY_ID: u8 = 18;
/// A token above the execution's own is treated as stale (Lost), not foreign.
const FOREIGN_IS_LOST: u8 = 19;
/// renew extends from the old expiry instead of the clock's now.
const RENEW_FROM_OLD_EXPIRY: u8 = 20;
/// acknowledge suspended keeps the old due time (min with the wake) instead of replacing it.
const ACK_KEEPS_DUE: u8 = 21;
/// claim_due ignores its limit.
const CLAIM_IGNORES_LIMIT: u8 = 22;
/// Compare-and-set compares parsed values loosely: an absent entry matches JSON null.
const CAS_NULL_IS_ABSENT: u8 = 23;
/// get_or_create replaces the store's entries with the new initial ones.
const STORE_RECREATED: u8 = 24;

/// renew checks the token, lets go of the lock, then extends the expiry.
const RENEW_CHECK_THEN_WRITE: u8 = 25;
/// release checks the token, lets go of the lock, then ends the delivery.
const RELEASE_CHECK_THEN_WRITE: u8 = 26;
/// Store update looks the receipt up, lets go of the lock, then applies and records.
const RECEIPT_CHECK_THEN_WRITE: u8 = 27;
/// start looks the request id up, lets go of the lock, then admits and records.
const START_CHECK_THEN_WRITE: u8 = 28;
/// get_or_create looks the store up, lets go of the lock, then creates it.
const CREATE_CHECK_THEN_WRITE: u8 = 29;
/// claim_due ends every expired lease it sees, claimed or not (a sweeper).
const CLAIM_SWEEPS_EXPIRED: u8 = 30;
/// release of an expired lease counts the expiry and the release (two deliveries).
const RELEASE_COUNTS_EXPIRY_TOO: u8 = 31;

/// claim_due_with_records returns each record as read before the claim.
const CLAIM_RECORD_BEFORE_CLAIM: u8 = 32;
/// acknowledge_batch applies every item without checking its token.
const ACK_BATCH_UNFENCED: u8 = 33;
/// acknowledge_batch applies items one by one, so a bad item leaves earlier ones applied.
const ACK_BATCH_PARTIAL: u8 = 34;

/// admit ignores `not_before`: a scheduled admission is due at once.
const ADMIT_IGNORES_SCHEDULE: u8 = 35;
/// settle_effect replaces the recorded result (last result wins).
const SETTLE_OVERWRITES: u8 = 36;
/// begin_effect looks the effect up, lets go of the lock, then creates it.
const BEGIN_CHECK_THEN_WRITE: u8 = 37;
/// A store waiter stays registered after the change that woke it.
const STORE_WAITER_PERSISTS: u8 = 38;
/// settle_effect records the result without waking the waiting owner.
const SETTLE_WAKES_NOBODY: u8 = 39;
/// admit stores no trace context.
const ADMIT_DROPS_TRACE: u8 = 40;
/// A second admit of an existing id replaces its trace context with the new one.
const READMIT_REPLACES_TRACE: u8 = 41;
/// list_live_leases lists stored running records, expired leases included.
const LIVE_INCLUDES_EXPIRED: u8 = 42;
/// list_live_leases orders by id, not by expiry.
const LIVE_BY_ID: u8 = 43;

/// The window a check-then-write flaw leaves between its check and its write.
const WINDOW: Duration = Duration::from_micros(300);

#[derive(Debug, Default)]
struct State {
    last_token: u64,
    executions: BTreeMap<ExecutionId, ExecutionRecord>,
    steps: BTreeMap<(ExecutionId, StepKey, u32), HeapRecord>,
    stores: HashMap<StoreId, BTreeMap<StoreKey, Json>>,
    receipts: HashMap<(StoreId, ExecutionId, StepKey), StoreOutcome>,
    starts: HashMap<RequestId, ExecutionId>,
    effects: BTreeMap<EffectId, EffectRecord>,
    effect_waits: BTreeSet<EffectId>,
    store_waiters: HashMap<(StoreId, StoreKey), BTreeSet<ExecutionId>>,
}

impl State {
    /// The record of `lease`'s execution, for a fenced call.
    fn leased(&mut self, lease: &ExecutionLease) -> Result<&mut ExecutionRecord> {
        self.executions
            .get_mut(&lease.execution_id)
            .ok_or_else(|| LeaseError::UnknownExecution(lease.execution_id.clone()))
    }

    fn wake(&mut self, id: &ExecutionId, now: Timestamp) {
        if let Some(record) = self.executions.get_mut(id) {
            record.request_wake(now);
        }
    }

    fn owned_effect(&self, id: &EffectId, caller: &ExecutionId) -> Result<&EffectRecord> {
        let record = self
            .effects
            .get(id)
            .ok_or_else(|| LeaseError::UnknownEffect(id.clone()))?;
        record.check_owner(caller)?;
        Ok(record)
    }
}

/// The lab backend with flaw `F`.
#[derive(Debug, Clone)]
struct Lab<const F: u8> {
    state: Arc<Mutex<State>>,
    clock: ManualClock,
    policy: RedeliveryPolicy,
}

impl<const F: u8> Lab<F> {
    /// The claim itself (RFC 002 `claimDue`), with this lab's flaw.
    async fn claim_leases(&self, request: ClaimRequest) -> Result<Vec<ExecutionLease>> {
        let lease_ms = request.validate()?;
        let now = if F == CLAIM_TRUSTS_CALLER_NOW {
            request.now
        } else {
            request.now.min(self.now_ms())
        };
        let select = |s: &State| {
            let mut due: Vec<(Timestamp, ExecutionId)> = s
                .executions
                .values()
                .map(|r| r.effective(now))
                .filter(|r| self.claimable(r, now))
                .filter_map(|r| r.due_at.map(|d| (d, r.id)))
                .collect();
            if F == ORDER_BY_ID {
                due.sort_by(|a, b| a.1.cmp(&b.1));
            } else {
                due.sort();
            }
            if F != CLAIM_IGNORES_LIMIT {
                due.truncate(request.limit);
            }
            due
        };
        let due = if F == CLAIM_CHECK_THEN_WRITE {
            let due = select(&self.lock());
            tokio::time::sleep(WINDOW).await;
            due
        } else {
            Vec::new()
        };
        let mut s = self.lock();
        let due = if F == CLAIM_CHECK_THEN_WRITE {
            due
        } else {
            select(&s)
        };
        if F == CLAIM_SWEEPS_EXPIRED {
            for r in s.executions.values_mut() {
                *r = r.effective(now);
            }
        }
        let mut leases = Vec::with_capacity(due.len());
        for (_, id) in due {
            s.last_token += 1;
            let global = s.last_token;
            let Some(record) = s.executions.get_mut(&id) else {
                continue;
            };
            let token = if F == TOKEN_PER_EXECUTION {
                FencingToken::new(record.token.get() + 1)
            } else {
                FencingToken::new(global)
            };
            *record = record.effective(now);
            leases.push(record.claim(now, lease_ms, token));
        }
        Ok(leases)
    }

    /// The claim with the records, read after it (or before it, with that flaw).
    async fn claim_records(&self, request: ClaimRequest) -> Result<Vec<Claimed>> {
        let before: Vec<ExecutionRecord> = if F == CLAIM_RECORD_BEFORE_CLAIM {
            self.lock().executions.values().cloned().collect()
        } else {
            Vec::new()
        };
        let mut claimed = Vec::new();
        for lease in self.claim_leases(request).await? {
            let record = match before.iter().find(|r| r.id == lease.execution_id) {
                Some(r) => r.clone(),
                None => self
                    .get(&lease.execution_id)
                    .await?
                    .ok_or_else(|| LeaseError::UnknownExecution(lease.execution_id.clone()))?,
            };
            claimed.push(Claimed { lease, record });
        }
        Ok(claimed)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn now_ms(&self) -> Timestamp {
        self.clock.now()
    }

    /// `ExecutionRecord::holds`, with this lab's flaw.
    fn holds(&self, record: &ExecutionRecord, lease: &ExecutionLease) -> Result<bool> {
        if F == TOKEN_ZERO_LOST && lease.token == FencingToken::NONE {
            return Ok(false);
        }
        if F == FOREIGN_IS_LOST && lease.token > record.token {
            return Ok(false);
        }
        let held = record.holds(lease)?;
        if F == EXPIRY_IS_LOST && !record.lease_live(self.now_ms()) {
            return Ok(false);
        }
        Ok(held)
    }

    /// Checks `lease` under the lock: the stored record is held.
    fn check(&self, lease: &ExecutionLease) -> Result<bool> {
        let s = self.lock();
        let record = s
            .executions
            .get(&lease.execution_id)
            .ok_or_else(|| LeaseError::UnknownExecution(lease.execution_id.clone()))?;
        self.holds(record, lease)
    }

    /// With check-then-write flaw `flaw`: checks `lease` under the lock, then waits
    /// [`WINDOW`] unlocked before the write; `false` when the check found it lost.
    async fn check_then_wait(&self, flaw: u8, lease: &ExecutionLease) -> Result<bool> {
        if F == flaw {
            if !self.check(lease)? {
                return Ok(false);
            }
            tokio::time::sleep(WINDOW).await;
        }
        Ok(true)
    }

    fn claimable(&self, r: &ExecutionRecord, now: Timestamp) -> bool {
        if F == NO_REDELIVERY_GATE {
            !r.status.is_terminal()
                && r.status != ExecutionStatus::Running
                && r.due_at.is_some_and(|d| d <= now)
        } else {
            r.claimable(now, &self.policy)
        }
    }
}

#[async_trait]
impl<const F: u8> ExecutionClient for Lab<F> {
    async fn claim_due_with_horizon(&self, request: ClaimRequest) -> Result<ClaimBatch> {
        Ok(ClaimBatch {
            claimed: self.claim_records(request).await?,
            now: None,
            next_claimable_at: None,
        })
    }

    async fn admit(&self, admission: &Admission) -> Result<ExecutionRecord> {
        admission.validate()?;
        Admission::refuse_controls("lab", std::slice::from_ref(admission))?;
        let now = self.now_ms();
        let mut s = self.lock();
        let mut admission = admission.clone();
        if F == ADMIT_IGNORES_SCHEDULE {
            admission.not_before = None;
        }
        if F == ADMIT_DROPS_TRACE {
            admission.trace_context = None;
        }
        let record = s
            .executions
            .entry(admission.id.clone())
            .or_insert_with(|| ExecutionRecord::admitted(&admission, now));
        if F == READMIT_REPLACES_TRACE {
            record.trace_context = admission.trace_context.clone();
        }
        Ok(record.effective(now))
    }

    async fn get(&self, id: &ExecutionId) -> Result<Option<ExecutionRecord>> {
        let now = self.now_ms();
        let s = self.lock();
        Ok(s.executions.get(id).map(|r| {
            if F == GET_STORED {
                r.clone()
            } else {
                r.effective(now)
            }
        }))
    }

    async fn list_failing(&self, min: u32, limit: usize) -> Result<Vec<ExecutionRecord>> {
        check_limit("list limit", limit)?;
        let now = self.now_ms();
        let s = self.lock();
        let mut out: Vec<ExecutionRecord> = s
            .executions
            .values()
            .map(|r| {
                if F == LIST_STORED {
                    r.clone()
                } else {
                    r.effective(now)
                }
            })
            .filter(|r| r.unacknowledged_deliveries >= min.max(1))
            .collect();
        out.sort_by(|a, b| {
            b.unacknowledged_deliveries
                .cmp(&a.unacknowledged_deliveries)
                .then_with(|| a.id.cmp(&b.id))
        });
        out.truncate(limit);
        Ok(out)
    }

    async fn list_live_leases(&self, limit: usize) -> Result<Vec<ExecutionRecord>> {
        check_limit("list limit", limit)?;
        let now = self.now_ms();
        let s = self.lock();
        let mut out: Vec<ExecutionRecord> = s
            .executions
            .values()
            .filter(|r| {
                if F == LIVE_INCLUDES_EXPIRED {
                    r.status == ExecutionStatus::Running
                } else {
                    r.lease_live(now)
                }
            })
            .cloned()
            .collect();
        if F != LIVE_BY_ID {
            out.sort_by(|a, b| a.live_lease_order().cmp(&b.live_lease_order()));
        }
        out.truncate(limit);
        Ok(out)
    }

    async fn request_wake(&self, id: &ExecutionId, at: Timestamp) -> Result<()> {
        let mut s = self.lock();
        let record = s
            .executions
            .get_mut(id)
            .ok_or_else(|| LeaseError::UnknownExecution(id.clone()))?;
        if F == WAKE_IGNORES_LEASE && record.status == ExecutionStatus::Running {
            record.due_at = Some(record.due_at.map_or(at, |d| d.min(at)));
        } else {
            record.request_wake(at);
        }
        Ok(())
    }

    async fn renew(
        &self,
        lease: &ExecutionLease,
        duration: Duration,
    ) -> Result<Fenced<ExecutionLease>> {
        let lease_ms = lease_millis("renewal duration", duration)?;
        if !self.check_then_wait(RENEW_CHECK_THEN_WRITE, lease).await? {
            return Ok(Fenced::Lost);
        }
        let now = self.now_ms();
        let mut s = self.lock();
        let record = s.leased(lease)?;
        if F != RENEW_CHECK_THEN_WRITE && !self.holds(record, lease)? {
            return Ok(Fenced::Lost);
        }
        let from = if F == RENEW_FROM_OLD_EXPIRY {
            record.lease_expires_at.unwrap_or(now)
        } else {
            now
        };
        Ok(Fenced::Accepted(record.renew(from, lease_ms)))
    }

    async fn release(&self, lease: &ExecutionLease) -> Result<Fenced<()>> {
        if !self
            .check_then_wait(RELEASE_CHECK_THEN_WRITE, lease)
            .await?
        {
            return Ok(Fenced::Lost);
        }
        let now = self.now_ms();
        let mut s = self.lock();
        let record = s.leased(lease)?;
        if F != RELEASE_CHECK_THEN_WRITE && !self.holds(record, lease)? {
            return Ok(Fenced::Lost);
        }
        let expired = !record.lease_live(now);
        record.release(now);
        if F == RELEASE_COUNTS_EXPIRY_TOO && expired {
            record.unacknowledged_deliveries += 1;
        }
        if F == RELEASE_NOT_COUNTED {
            record.unacknowledged_deliveries -= 1;
        }
        Ok(Fenced::Accepted(()))
    }

    async fn acknowledge_batch(
        &self,
        acks: &[Acknowledgement],
    ) -> Result<Vec<Fenced<Acknowledged>>> {
        check_ack_batch(acks)?;
        if F != ACK_BATCH_PARTIAL {
            let s = self.lock();
            for ack in acks {
                let record = s
                    .executions
                    .get(&ack.lease.execution_id)
                    .ok_or_else(|| LeaseError::UnknownExecution(ack.lease.execution_id.clone()))?;
                self.holds(record, &ack.lease)?;
            }
        }
        let mut results = Vec::with_capacity(acks.len());
        for ack in acks {
            if F == ACK_BATCH_UNFENCED {
                let now = self.now_ms();
                let mut s = self.lock();
                if let Some(record) = s.executions.get_mut(&ack.lease.execution_id) {
                    record.status = ExecutionStatus::Running;
                    record.token = ack.lease.token;
                    results.push(Fenced::Accepted(record.acknowledge(now, &ack.outcome)));
                    continue;
                }
            }
            results.push(self.acknowledge(&ack.lease, &ack.outcome).await?);
        }
        Ok(results)
    }

    async fn acknowledge(
        &self,
        lease: &ExecutionLease,
        outcome: &WorkflowRunOutcome,
    ) -> Result<Fenced<Acknowledged>> {
        if !self.check_then_wait(ACK_CHECK_THEN_WRITE, lease).await? {
            return Ok(Fenced::Lost);
        }
        let now = self.now_ms();
        let mut s = self.lock();
        let record = s.leased(lease)?;
        if F != ACK_CHECK_THEN_WRITE && !self.holds(record, lease)? {
            return Ok(Fenced::Lost);
        }
        let (unacked, due) = (record.unacknowledged_deliveries, record.due_at);
        let ack = record.acknowledge(now, outcome);
        if F == ACK_KEEPS_UNACKED {
            record.unacknowledged_deliveries = unacked;
        }
        if F == ACK_KEEPS_DUE && ack == Acknowledged::Suspended {
            record.due_at = match (due, record.due_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        Ok(Fenced::Accepted(ack))
    }

    fn effects(&self) -> Option<&dyn EffectClient> {
        Some(self)
    }

    /// Effects and the live-lease list; the rest keeps the refusing defaults.
    fn capabilities(&self) -> lease_core::Capabilities {
        let mut caps = lease_core::Capabilities::none("lab");
        caps.effects = true;
        caps.live_leases = true;
        caps
    }

    async fn now(&self) -> Result<Timestamp> {
        Ok(self.now_ms())
    }
}

#[async_trait]
impl<const F: u8> HeapClient for Lab<F> {
    async fn write_step(
        &self,
        lease: &ExecutionLease,
        write: &StepWrite,
    ) -> Result<Fenced<HeapRecord>> {
        let held = self.check(lease)?;
        if !held && F != STEP_UNFENCED {
            return Ok(Fenced::Lost);
        }
        if F == STEP_CHECK_THEN_WRITE {
            tokio::time::sleep(WINDOW).await;
        }
        let mut s = self.lock();
        if F != STEP_CHECK_THEN_WRITE && F != STEP_UNFENCED {
            let record = s
                .executions
                .get(&lease.execution_id)
                .ok_or_else(|| LeaseError::UnknownExecution(lease.execution_id.clone()))?;
            if !self.holds(record, lease)? {
                return Ok(Fenced::Lost);
            }
        }
        let key = (
            lease.execution_id.clone(),
            write.step_key.clone(),
            write.step_attempt,
        );
        let fresh = HeapRecord::from_write(&lease.execution_id, lease.token, write);
        if F == STEP_OVERWRITES {
            s.steps.insert(key, fresh.clone());
            return Ok(Fenced::Accepted(fresh));
        }
        Ok(Fenced::Accepted(
            s.steps.entry(key).or_insert(fresh).clone(),
        ))
    }

    async fn read_step(
        &self,
        id: &ExecutionId,
        step_key: &StepKey,
        step_attempt: u32,
    ) -> Result<Option<HeapRecord>> {
        let key = (id.clone(), step_key.clone(), step_attempt);
        Ok(self.lock().steps.get(&key).cloned())
    }

    async fn list_steps(&self, id: &ExecutionId) -> Result<Vec<HeapRecord>> {
        Ok(self
            .lock()
            .steps
            .values()
            .filter(|r| &r.execution_id == id)
            .cloned()
            .collect())
    }
}

#[async_trait]
impl<const F: u8> StoreClient for Lab<F> {
    async fn get_or_create(
        &self,
        store: &StoreId,
        initial: &[(StoreKey, Json)],
    ) -> Result<StoreSnapshot> {
        if F == CREATE_CHECK_THEN_WRITE {
            let created = !self.lock().stores.contains_key(store);
            tokio::time::sleep(WINDOW).await;
            let mut s = self.lock();
            if created {
                s.stores
                    .insert(store.clone(), initial.iter().cloned().collect());
            }
            let entries = s.stores.get(store).cloned().unwrap_or_default();
            return Ok(StoreSnapshot {
                store: store.clone(),
                entries,
                created,
            });
        }
        let mut s = self.lock();
        let created = !s.stores.contains_key(store);
        if F == STORE_RECREATED {
            s.stores
                .insert(store.clone(), initial.iter().cloned().collect());
        }
        let entries = s
            .stores
            .entry(store.clone())
            .or_insert_with(|| initial.iter().cloned().collect())
            .clone();
        Ok(StoreSnapshot {
            store: store.clone(),
            entries,
            created,
        })
    }

    async fn read_entry(&self, store: &StoreId, key: &StoreKey) -> Result<Option<Json>> {
        let s = self.lock();
        let entries = s
            .stores
            .get(store)
            .ok_or_else(|| LeaseError::UnknownStore(store.to_string()))?;
        Ok(entries.get(key).cloned())
    }

    async fn update(&self, receipt: &StoreReceipt, op: &StoreOp) -> Result<StoreUpdate> {
        if F == RECEIPT_CHECK_THEN_WRITE {
            let rkey = (
                receipt.store.clone(),
                receipt.execution_id.clone(),
                receipt.step_key.clone(),
            );
            if let Some(outcome) = self.lock().receipts.get(&rkey) {
                return Ok(StoreUpdate {
                    outcome: outcome.clone(),
                    replayed: true,
                });
            }
            tokio::time::sleep(WINDOW).await;
        }
        let mut s = self.lock();
        if !s.stores.contains_key(&receipt.store) {
            return Err(LeaseError::UnknownStore(receipt.store.to_string()));
        }
        let rkey = (
            receipt.store.clone(),
            receipt.execution_id.clone(),
            receipt.step_key.clone(),
        );
        if F != NO_RECEIPTS
            && F != RECEIPT_CHECK_THEN_WRITE
            && let Some(outcome) = s.receipts.get(&rkey)
        {
            return Ok(StoreUpdate {
                outcome: outcome.clone(),
                replayed: true,
            });
        }
        let entries = s
            .stores
            .get_mut(&receipt.store)
            .ok_or_else(|| LeaseError::UnknownStore(receipt.store.to_string()))?;
        let current = entries.get(op.key()).cloned();
        let (next, outcome) = match op {
            StoreOp::CompareAndSet { expected, new, .. }
                if F == CAS_NULL_IS_ABSENT
                    && current.is_none()
                    && expected.as_ref().map(Json::as_str) == Some("null") =>
            {
                (
                    Some(new.clone()),
                    StoreOutcome {
                        applied: true,
                        previous: None,
                    },
                )
            }
            _ => op.apply(current.as_ref()),
        };
        match next {
            Some(v) => entries.insert(op.key().clone(), v),
            None => entries.remove(op.key()),
        };
        s.receipts.insert(rkey, outcome.clone());
        if outcome.applied {
            let watched = (receipt.store.clone(), op.key().clone());
            let waiters = if F == STORE_WAITER_PERSISTS {
                s.store_waiters.get(&watched).cloned().unwrap_or_default()
            } else {
                s.store_waiters.remove(&watched).unwrap_or_default()
            };
            let now = self.now_ms();
            for waiter in waiters {
                s.wake(&waiter, now);
            }
        }
        Ok(StoreUpdate {
            outcome,
            replayed: false,
        })
    }

    async fn watch_entry(
        &self,
        store: &StoreId,
        key: &StoreKey,
        waiter: &ExecutionId,
    ) -> Result<Option<Json>> {
        let mut s = self.lock();
        if !s.executions.contains_key(waiter) {
            return Err(LeaseError::UnknownExecution(waiter.clone()));
        }
        let current = s
            .stores
            .get(store)
            .ok_or_else(|| LeaseError::UnknownStore(store.to_string()))?
            .get(key)
            .cloned();
        s.store_waiters
            .entry((store.clone(), key.clone()))
            .or_default()
            .insert(waiter.clone());
        Ok(current)
    }
}

#[async_trait]
impl<const F: u8> EffectClient for Lab<F> {
    async fn begin_effect(&self, id: &EffectId, execution: &ExecutionId) -> Result<Begun> {
        let now = self.now_ms();
        if F == BEGIN_CHECK_THEN_WRITE {
            if let Some(record) = self.lock().effects.get(id) {
                record.check_owner(execution)?;
                return Ok(Begun {
                    record: record.clone(),
                    created: false,
                });
            }
            tokio::time::sleep(WINDOW).await;
        }
        let mut s = self.lock();
        if !s.executions.contains_key(execution) {
            return Err(LeaseError::UnknownExecution(execution.clone()));
        }
        if F != BEGIN_CHECK_THEN_WRITE
            && let Some(record) = s.effects.get(id)
        {
            record.check_owner(execution)?;
            return Ok(Begun {
                record: record.clone(),
                created: false,
            });
        }
        let record = EffectRecord::pending(id.clone(), execution.clone(), now);
        s.effects.insert(id.clone(), record.clone());
        Ok(Begun {
            record,
            created: true,
        })
    }

    async fn settle_effect(
        &self,
        id: &EffectId,
        execution: &ExecutionId,
        result: &Json,
    ) -> Result<Settlement> {
        let now = self.now_ms();
        let mut s = self.lock();
        let current = s.owned_effect(id, execution)?;
        let settlement = if F == SETTLE_OVERWRITES {
            let pending = EffectRecord {
                state: EffectState::Pending,
                ..current.clone()
            };
            pending.settle(result, now)
        } else {
            current.settle(result, now)
        };
        if let Settlement::Recorded(record) = &settlement {
            s.effects.insert(id.clone(), record.clone());
            if s.effect_waits.remove(id) && F != SETTLE_WAKES_NOBODY {
                s.wake(execution, now);
            }
        }
        Ok(settlement)
    }

    async fn read_effect(&self, id: &EffectId) -> Result<Option<EffectRecord>> {
        Ok(self.lock().effects.get(id).cloned())
    }

    async fn wait_effect(&self, id: &EffectId, execution: &ExecutionId) -> Result<EffectWait> {
        let mut s = self.lock();
        let record = s.owned_effect(id, execution)?;
        if record.result().is_some() {
            return Ok(EffectWait::Settled(record.clone()));
        }
        s.effect_waits.insert(id.clone());
        Ok(EffectWait::Registered)
    }
}

#[async_trait]
impl<const F: u8> StartClient for Lab<F> {
    async fn start(&self, request: &StartRequest) -> Result<Started> {
        if F == START_CHECK_THEN_WRITE {
            if let Some(target) = self.lock().starts.get(&request.request_id) {
                return Ok(Started {
                    target: target.clone(),
                    created: false,
                });
            }
            tokio::time::sleep(WINDOW).await;
        }
        let now = self.now_ms();
        let mut s = self.lock();
        if F != START_NOT_IDEMPOTENT
            && F != START_CHECK_THEN_WRITE
            && let Some(target) = s.starts.get(&request.request_id)
        {
            return Ok(Started {
                target: target.clone(),
                created: false,
            });
        }
        if s.executions.contains_key(&request.target) {
            return Err(LeaseError::invalid("start target", "exists"));
        }
        let admission = Admission::new(request.target.clone())
            .workflow(request.workflow.clone())
            .input(request.input.clone());
        s.executions.insert(
            request.target.clone(),
            ExecutionRecord::admitted(&admission, now),
        );
        s.starts
            .insert(request.request_id.clone(), request.target.clone());
        Ok(Started {
            target: request.target.clone(),
            created: true,
        })
    }
}

/// Harness for the lab with flaw `F`.
struct LabHarness<const F: u8>(Lab<F>);

#[async_trait]
impl<const F: u8> Harness for LabHarness<F> {
    type Backend = Lab<F>;

    async fn setup(clock: ManualClock, policy: RedeliveryPolicy) -> Result<Self> {
        Ok(LabHarness(Lab {
            state: Arc::default(),
            clock,
            policy,
        }))
    }

    fn backend(&self) -> Lab<F> {
        self.0.clone()
    }

    async fn peer(&self) -> Result<Lab<F>> {
        Ok(self.0.clone())
    }

    async fn teardown(self) -> Result<()> {
        Ok(())
    }
}

/// The flawless lab passes the whole suite, so each flaw below is the only difference.
mod sound {
    use super::{LabHarness, SOUND};
    lease_conformance::conformance_tests!(LabHarness<SOUND>);
}

/// True when the case fails (panics) on harness `H`.
fn fails<H, C, Fut>(case: C) -> bool
where
    H: Harness,
    C: FnOnce(Arc<Ctx<H>>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    std::panic::catch_unwind(AssertUnwindSafe(|| run_case::<H, C, Fut>(case))).is_err()
}

/// One test per flaw: every listed case must fail on the lab with that flaw.
macro_rules! caught_by {
    ($test:ident, $flaw:ident, differential seed $seed:literal) => {
        #[test]
        fn $test() {
            assert!(
                fails(|ctx| cases::differential::differential_seed::<LabHarness<$flaw>>(ctx, $seed)),
                concat!("differential seed ", $seed, " passed on a backend with flaw ", stringify!($flaw))
            );
        }
    };
    ($test:ident, $flaw:ident, [$($table:ident::$case:ident),+ $(,)?]) => {
        #[test]
        fn $test() {
            $(
                assert!(
                    fails(cases::$table::$case::<LabHarness<$flaw>>),
                    concat!(
                        stringify!($table::$case),
                        " passed on a backend with flaw ",
                        stringify!($flaw)
                    )
                );
            )+
        }
    };
}

caught_by!(
    step_check_then_write,
    STEP_CHECK_THEN_WRITE,
    [fencing::stale_writes_race_reclaim_atomically,]
);
caught_by!(
    ack_check_then_write,
    ACK_CHECK_THEN_WRITE,
    [fencing::stale_writes_race_reclaim_atomically,]
);
caught_by!(
    claim_check_then_write,
    CLAIM_CHECK_THEN_WRITE,
    [
        leases::two_peers_claim_concurrently_exactly_one_lease,
        leases::peers_claim_batch_each_leased_once,
    ]
);
caught_by!(
    step_unfenced,
    STEP_UNFENCED,
    [
        fencing::stale_step_write_after_reclaim_is_lost,
        fencing::paused_holder_every_fenced_write_lost,
        semantics::fenced_writes_after_release_lost,
        semantics::fenced_writes_after_ack_lost,
        fencing::stale_writes_race_reclaim_atomically,
    ]
);
caught_by!(
    expiry_is_lost,
    EXPIRY_IS_LOST,
    [
        semantics::renew_after_expiry_without_reclaim_succeeds,
        semantics::write_step_after_expiry_without_reclaim_accepted,
    ]
);
caught_by!(
    step_overwrites,
    STEP_OVERWRITES,
    [
        fencing::current_holder_rewrite_keeps_recorded_value,
        leases::crashed_worker_redelivered_after_expiry,
    ]
);
caught_by!(
    no_redelivery_gate,
    NO_REDELIVERY_GATE,
    [
        leases::expired_lease_claimable_with_higher_token,
        leases::released_lease_claimable_after_delay_with_higher_token,
        redelivery::release_increments_unacked_and_delays,
        redelivery::repeated_release_delays_never_shrink,
        redelivery::expiry_after_release_counts_both,
    ]
);
caught_by!(
    ack_keeps_unacked,
    ACK_KEEPS_UNACKED,
    [redelivery::ack_after_releases_resets_unacked,]
);
caught_by!(
    claim_trusts_caller_now,
    CLAIM_TRUSTS_CALLER_NOW,
    [semantics::claim_with_future_now_uses_backend_clock,]
);
caught_by!(
    wake_ignores_lease,
    WAKE_IGNORES_LEASE,
    [
        semantics::wake_during_lease_deferred_to_ack,
        leases::ack_suspended_with_wake_due_at_wake,
    ]
);
caught_by!(
    token_per_execution,
    TOKEN_PER_EXECUTION,
    [
        semantics::tokens_unique_and_increasing,
        bad_input::foreign_token_rejected,
    ]
);
caught_by!(
    no_receipts,
    NO_RECEIPTS,
    [
        store::store_repeated_receipt_replays_outcome,
        fencing::stale_store_update_applies_once,
    ]
);
caught_by!(
    start_not_idempotent,
    START_NOT_IDEMPOTENT,
    [
        store::start_idempotent_by_request_id,
        fencing::stale_start_returns_same_target,
    ]
);
caught_by!(
    token_zero_lost,
    TOKEN_ZERO_LOST,
    [bad_input::token_zero_rejected]
);
caught_by!(
    get_stored,
    GET_STORED,
    [
        semantics::get_effective_view_after_expiry_admitted,
        semantics::get_effective_view_after_expiry_suspended,
        leases::expiry_before_any_ack_returns_to_admitted,
        leases::expiry_after_suspended_delivery_returns_to_suspended,
    ]
);
caught_by!(
    list_stored,
    LIST_STORED,
    [semantics::list_failing_most_failing_first]
);
caught_by!(
    release_not_counted,
    RELEASE_NOT_COUNTED,
    [
        redelivery::release_increments_unacked_and_delays,
        redelivery::repeated_release_delays_never_shrink,
    ]
);
caught_by!(
    order_by_id,
    ORDER_BY_ID,
    [semantics::claim_respects_limit_and_order]
);
caught_by!(
    foreign_is_lost,
    FOREIGN_IS_LOST,
    [bad_input::foreign_token_rejected]
);
caught_by!(
    renew_from_old_expiry,
    RENEW_FROM_OLD_EXPIRY,
    [
        semantics::renew_extends_from_backend_now,
        leases::renewal_keeps_lease_past_original_expiry,
    ]
);
caught_by!(
    ack_keeps_due,
    ACK_KEEPS_DUE,
    [leases::ack_suspended_without_wake_not_due,]
);
caught_by!(
    claim_ignores_limit,
    CLAIM_IGNORES_LIMIT,
    [semantics::claim_respects_limit_and_order,]
);
caught_by!(
    cas_null_is_absent,
    CAS_NULL_IS_ABSENT,
    [store::store_compare_and_set_mismatch]
);
caught_by!(
    store_recreated,
    STORE_RECREATED,
    [store::get_or_create_idempotent_by_identity]
);
caught_by!(
    renew_check_then_write,
    RENEW_CHECK_THEN_WRITE,
    [fencing::stale_renew_and_release_race_reclaim_atomically,]
);
caught_by!(
    release_check_then_write,
    RELEASE_CHECK_THEN_WRITE,
    [fencing::stale_renew_and_release_race_reclaim_atomically,]
);
caught_by!(
    receipt_check_then_write,
    RECEIPT_CHECK_THEN_WRITE,
    [store::store_concurrent_same_receipt_applies_once,]
);
caught_by!(
    start_check_then_write,
    START_CHECK_THEN_WRITE,
    [store::start_concurrent_same_request_one_target,]
);
caught_by!(
    create_check_then_write,
    CREATE_CHECK_THEN_WRITE,
    [store::get_or_create_concurrent_one_initial_state,]
);
caught_by!(
    claim_sweeps_expired,
    CLAIM_SWEEPS_EXPIRED,
    [semantics::claim_does_not_end_unclaimed_expired_leases,]
);
caught_by!(
    release_counts_expiry_too,
    RELEASE_COUNTS_EXPIRY_TOO,
    [semantics::end_after_expiry_without_reclaim_counts_once,]
);
caught_by!(
    claim_record_before_claim,
    CLAIM_RECORD_BEFORE_CLAIM,
    [leases::claim_with_records_returns_what_get_reads]
);
caught_by!(
    ack_batch_unfenced,
    ACK_BATCH_UNFENCED,
    [fencing::ack_batch_fences_each_item]
);
caught_by!(
    ack_batch_partial,
    ACK_BATCH_PARTIAL,
    [bad_input::ack_batch_bad_input_changes_nothing]
);
caught_by!(
    admit_ignores_schedule,
    ADMIT_IGNORES_SCHEDULE,
    [pickup::scheduled_admission_claimable_from_its_time]
);

// The differential case (moved from lease-redis so every harness runs it) catches flaws
// on its own: each of these fails it.
caught_by!(
    differential_catches_order_by_id,
    ORDER_BY_ID,
    differential seed 1
);
caught_by!(
    differential_catches_ack_keeps_due,
    ACK_KEEPS_DUE,
    differential seed 1
);
caught_by!(
    differential_catches_admit_ignores_schedule,
    ADMIT_IGNORES_SCHEDULE,
    differential seed 1
);

// Effects and store waiters.
caught_by!(
    settle_overwrites,
    SETTLE_OVERWRITES,
    [
        effects::effect_settle_keeps_first_result_reports_conflicts,
        effects::stale_and_current_holders_race_begin_and_settle,
    ]
);
caught_by!(
    begin_check_then_write,
    BEGIN_CHECK_THEN_WRITE,
    [effects::stale_and_current_holders_race_begin_and_settle]
);
caught_by!(
    store_waiter_persists,
    STORE_WAITER_PERSISTS,
    [effects::store_waiter_is_woken_once_by_a_change]
);
caught_by!(
    settle_wakes_nobody,
    SETTLE_WAKES_NOBODY,
    [effects::effect_wait_is_woken_by_the_settle]
);

// The admitting request's trace context.
caught_by!(
    admit_drops_trace,
    ADMIT_DROPS_TRACE,
    [
        traces::trace_context_round_trips_through_claim_and_get,
        traces::trace_context_is_stored_by_admit_batch,
    ]
);
caught_by!(
    readmit_replaces_trace,
    READMIT_REPLACES_TRACE,
    [
        traces::trace_context_of_a_readmission_is_the_first,
        traces::trace_context_is_stored_by_admit_batch,
    ]
);

// The live leases.
caught_by!(
    live_includes_expired,
    LIVE_INCLUDES_EXPIRED,
    [live::live_leases_are_exactly_the_unexpired_running_ones,]
);
caught_by!(
    live_includes_expired_differential,
    LIVE_INCLUDES_EXPIRED,
    differential seed 2
);
caught_by!(
    live_by_id,
    LIVE_BY_ID,
    [live::live_leases_soonest_expiry_first_then_id_within_the_limit,]
);
