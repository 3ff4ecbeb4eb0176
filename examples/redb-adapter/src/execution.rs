//! [`ExecutionClient`]: each method one write transaction applying lease-core's public
//! transitions, as the in-memory reference applies them under its mutex.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use async_trait::async_trait;
use lease_core::attempts::check_retry_ids;
use lease_core::key_rules::KeyRules;
use lease_core::limits::check_limit;
use lease_core::selection::{Gates, horizon, select};
use lease_core::time::lease_millis;
use lease_core::{
    AckAndClaim, Acknowledged, Acknowledgement, Admission, AttemptLimit, AttemptLimits,
    AttemptScope, CancelOutcome, CancelReason, Capabilities, ClaimBatch, ClaimRequest, Claimed,
    ConcurrencyLimit, ConcurrencyLimits, EffectClient, ExecutionClient, ExecutionId,
    ExecutionLease, ExecutionRecord, ExecutionStatus, Fenced, FencingToken, Json, LimitScope,
    PauseScope, Purged, Release, Result, StatusCounts, Timestamp, WakeReceiver, WorkflowRunOutcome,
};

use crate::tx::{
    EFFECT_WAITS, EFFECTS, EXECUTIONS, Meta, RECEIPTS, STARTS, STEPS, STORE_WAITERS, Tx,
};
use crate::{RedbBackend, execution, executions, held, store};

impl RedbBackend {
    /// Admits one execution unless its id exists; the record, and whether it was created.
    fn admit_in(tx: &Tx, admission: &Admission, now: Timestamp) -> Result<(ExecutionRecord, bool)> {
        if let Some(existing) = tx.get::<ExecutionRecord>(EXECUTIONS, admission.id.as_str())? {
            return Ok((existing.effective(now), false));
        }
        let record = ExecutionRecord::admitted(admission, now);
        store(tx, &record)?;
        Ok((record.effective(now), true))
    }

    /// Claims up to `limit` executions in `selection`'s order, in the caller's transaction,
    /// and reads the horizon after the claim.
    fn claim_in(&self, tx: &Tx, now: Timestamp, lease_ms: i64, limit: usize) -> Result<ClaimBatch> {
        let mut meta = tx.meta()?;
        let mut records = executions(tx)?;
        let mut token = meta.last_token;
        let gates = Gates {
            paused: &meta.paused,
            limits: &meta.limits,
        };
        // No ordered keys and no start rates (capabilities this example leaves out).
        let (ordering, rates, starts, admitted) = Default::default();
        let rules = KeyRules {
            ordering: &ordering,
            rates: &rates,
            starts: &starts,
            admitted: &admitted,
        };
        let selection = select(records.values(), now, &self.policy, gates, rules, limit);
        let mut claimed = Vec::with_capacity(selection.take.len());
        for id in &selection.take {
            token += 1;
            let Some(record) = records.get_mut(id) else {
                continue;
            };
            *record = record.effective(now);
            record.attempt_limit = meta.attempt_limits.of(record.workflow.as_ref());
            let lease = record.claim(now, lease_ms, FencingToken::new(token));
            store(tx, record)?;
            claimed.push(Claimed {
                lease,
                record: record.clone(),
            });
        }
        let blocked = &selection.blocked;
        let next_claimable_at = horizon(records.values(), now, &self.policy, gates, rules, blocked);
        meta.last_token = token;
        tx.put_meta(&meta)?;
        Ok(ClaimBatch {
            claimed,
            now: Some(now),
            next_claimable_at,
        })
    }

    /// Acknowledges in the caller's transaction; the record to signal when accepted.
    fn acknowledge_in(
        tx: &Tx,
        lease: &ExecutionLease,
        outcome: &WorkflowRunOutcome,
        now: Timestamp,
    ) -> Result<(Fenced<Acknowledged>, Option<ExecutionRecord>)> {
        let Some(mut record) = held(tx, lease, now)? else {
            return Ok((Fenced::Lost, None));
        };
        let acked = record.acknowledge(now, outcome);
        store(tx, &record)?;
        Ok((Fenced::Accepted(acked), Some(record)))
    }

    /// Changes the namespace's controls and signals "now": a change may free places.
    fn change_meta(&self, change: impl FnOnce(&mut Meta)) -> Result<()> {
        self.write(|tx| {
            let mut meta = tx.meta()?;
            change(&mut meta);
            tx.put_meta(&meta)
        })?;
        self.hub.signal(self.clock.now());
        Ok(())
    }

    /// Removes the purged executions' step records, receipts, starts, effects and waits.
    fn purge_in(tx: &Tx, gone: &HashSet<ExecutionId>) -> Result<()> {
        for id in gone {
            tx.remove(EXECUTIONS, id.as_str())?;
            for (key, _) in tx.steps_from(id, "", 0, usize::MAX)? {
                tx.remove(STEPS, &key)?;
            }
        }
        tx.remove_where::<lease_core::StoreOutcome>(RECEIPTS, |key, _| {
            serde_json::from_str::<(String, ExecutionId, String)>(key)
                .is_ok_and(|(_, e, _)| gone.contains(&e))
        })?;
        tx.remove_where::<ExecutionId>(STARTS, |_, target| gone.contains(target))?;
        let effects = tx.all::<lease_core::EffectRecord>(EFFECTS)?;
        for (key, effect) in effects {
            if gone.contains(&effect.execution_id) {
                tx.remove(EFFECTS, &key)?;
                tx.remove(EFFECT_WAITS, &key)?;
            }
        }
        for (key, mut waiters) in tx.all::<BTreeSet<ExecutionId>>(STORE_WAITERS)? {
            waiters.retain(|w| !gone.contains(w));
            if waiters.is_empty() {
                tx.remove(STORE_WAITERS, &key)?;
            } else {
                tx.put(STORE_WAITERS, &key, &waiters)?;
            }
        }
        Ok(())
    }

    /// Releases a held lease as `release` says.
    fn release_in(&self, lease: &ExecutionLease, release: &Release) -> Result<Fenced<()>> {
        let now = self.clock.now();
        let released = self.write(|tx| {
            let Some(mut record) = held(tx, lease, now)? else {
                return Ok(None);
            };
            record.release_with(now, release);
            store(tx, &record)?;
            Ok(Some(record))
        })?;
        self.signal_all(&released);
        Ok(released.map_or(Fenced::Lost, |_| Fenced::Accepted(())))
    }

    /// Every effective record at the backend clock, by id.
    fn effective_records(&self) -> Result<Vec<ExecutionRecord>> {
        let now = self.clock.now();
        let records = self.write(executions)?.into_values();
        Ok(records.map(|r| r.effective(now)).collect())
    }
}

#[async_trait]
impl ExecutionClient for RedbBackend {
    async fn admit(&self, admission: &Admission) -> Result<ExecutionRecord> {
        admission.validate()?;
        let now = self.clock.now();
        let (record, created) = self.write(|tx| Self::admit_in(tx, admission, now))?;
        self.signal_all(created.then_some(&record));
        Ok(record)
    }

    async fn admit_batch(&self, admissions: &[Admission]) -> Result<Vec<ExecutionRecord>> {
        lease_core::execution::check_admit_batch(admissions)?;
        let now = self.clock.now();
        let admitted = self.write(|tx| {
            admissions
                .iter()
                .map(|a| Self::admit_in(tx, a, now))
                .collect::<Result<Vec<_>>>()
        })?;
        self.signal_all(admitted.iter().filter(|(_, new)| *new).map(|(r, _)| r));
        Ok(admitted.into_iter().map(|(r, _)| r).collect())
    }

    async fn get(&self, id: &ExecutionId) -> Result<Option<ExecutionRecord>> {
        let now = self.clock.now();
        let record = self.write(|tx| tx.get::<ExecutionRecord>(EXECUTIONS, id.as_str()))?;
        Ok(record.map(|r| r.effective(now)))
    }

    async fn list_failing(&self, min: u32, limit: usize) -> Result<Vec<ExecutionRecord>> {
        check_limit("list limit", limit)?;
        let mut out = self.effective_records()?;
        out.retain(|r| r.unacknowledged_deliveries >= min.max(1));
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
        let now = self.clock.now();
        let mut out = self.effective_records()?;
        out.retain(|r| r.lease_live(now));
        out.sort_by(|a, b| a.live_lease_order().cmp(&b.live_lease_order()));
        out.truncate(limit);
        Ok(out)
    }

    async fn status_counts(&self) -> Result<StatusCounts> {
        let now = self.clock.now();
        let records = self.write(executions)?;
        Ok(StatusCounts::of_records(records.values(), now))
    }

    async fn purge_terminal(&self, before: Timestamp, limit: usize) -> Result<Purged> {
        check_limit("purge limit", limit)?;
        let ids = self.write(|tx| {
            let ids: Vec<ExecutionId> = executions(tx)?
                .into_values()
                // A dead execution waits for an operator (retry or cancel), not retention.
                .filter(|r| r.status.is_terminal() && r.status != ExecutionStatus::Dead)
                .filter(|r| r.last_delivery_ended_at.is_some_and(|t| t < before))
                .map(|r| r.id)
                .take(limit)
                .collect();
            Self::purge_in(tx, &ids.iter().cloned().collect())?;
            Ok(ids)
        })?;
        Ok(Purged { ids })
    }

    async fn cancel(&self, id: &ExecutionId, reason: &CancelReason) -> Result<CancelOutcome> {
        let now = self.clock.now();
        let (outcome, record) = self.write(|tx| {
            let mut record = execution(tx, id)?;
            // A dead execution (no outcome) may be cancelled: an operator's other answer.
            if record.outcome.is_some() {
                return Ok((record.cancel(now, reason), None));
            }
            record = record.effective(now);
            let outcome = record.cancel(now, reason);
            store(tx, &record)?;
            Ok((outcome, Some(record)))
        })?;
        self.signal_all(&record);
        Ok(outcome)
    }

    /// Pausing signals "now" too (a wasted wake-up, never a missed one): one code path.
    async fn pause(&self, scope: &PauseScope) -> Result<bool> {
        let mut paused = false;
        self.change_meta(|meta| paused = meta.paused.insert(scope.clone()))?;
        Ok(paused)
    }

    async fn resume(&self, scope: &PauseScope) -> Result<bool> {
        let mut was = false;
        self.change_meta(|meta| was = meta.paused.remove(scope))?;
        Ok(was)
    }

    async fn list_paused(&self) -> Result<Vec<PauseScope>> {
        Ok(self.write(Tx::meta)?.paused.into_iter().collect())
    }

    async fn set_concurrency_limit(
        &self,
        scope: &LimitScope,
        limit: Option<ConcurrencyLimit>,
    ) -> Result<()> {
        self.change_meta(|meta| match scope {
            LimitScope::Default => meta.limits.default = limit,
            LimitScope::Key(key) => {
                meta.limits.keys.retain(|(k, _)| k != key);
                if let Some(limit) = limit {
                    let at = meta.limits.keys.partition_point(|(k, _)| k < key);
                    meta.limits.keys.insert(at, (key.clone(), limit));
                }
            }
        })
    }

    async fn concurrency_limits(&self) -> Result<ConcurrencyLimits> {
        Ok(self.write(Tx::meta)?.limits)
    }

    async fn set_attempt_limit(
        &self,
        scope: &AttemptScope,
        limit: Option<AttemptLimit>,
    ) -> Result<()> {
        self.change_meta(|meta| meta.attempt_limits.set(scope, limit))
    }

    async fn attempt_limits(&self) -> Result<AttemptLimits> {
        Ok(self.write(Tx::meta)?.attempt_limits)
    }

    async fn list_dead(
        &self,
        after: Option<&ExecutionId>,
        limit: usize,
    ) -> Result<Vec<ExecutionRecord>> {
        check_limit("list limit", limit)?;
        let mut out = self.effective_records()?;
        out.retain(|r| after.is_none_or(|a| &r.id > a) && r.status == ExecutionStatus::Dead);
        out.truncate(limit);
        Ok(out)
    }

    async fn retry_dead(
        &self,
        ids: &[ExecutionId],
        input: Option<&Json>,
    ) -> Result<Vec<ExecutionRecord>> {
        check_retry_ids(ids)?;
        let now = self.clock.now();
        let retried = self.write(|tx| {
            let mut retried = Vec::with_capacity(ids.len());
            for id in ids {
                let mut record = execution(tx, id)?.effective(now);
                record.retry_dead(now, input)?;
                store(tx, &record)?;
                retried.push(record);
            }
            Ok(retried)
        })?;
        self.hub.signal(now);
        Ok(retried)
    }

    async fn request_wake(&self, id: &ExecutionId, at: Timestamp) -> Result<()> {
        let record = self.write(|tx| {
            let mut record = execution(tx, id)?;
            record.request_wake(at);
            store(tx, &record)?;
            Ok(record)
        })?;
        self.signal(&record);
        Ok(())
    }

    async fn claim_due_with_horizon(&self, request: ClaimRequest) -> Result<ClaimBatch> {
        let lease_ms = request.validate()?;
        let now = request.now.min(self.clock.now());
        let batch = self.write(|tx| self.claim_in(tx, now, lease_ms, request.limit))?;
        self.signal_all(batch.claimed.iter().map(|c| &c.record));
        Ok(batch)
    }

    async fn acknowledge_and_claim(
        &self,
        ack: &Acknowledgement,
        next: ClaimRequest,
    ) -> Result<AckAndClaim> {
        let lease_ms = next.validate()?;
        let now = self.clock.now();
        let (acknowledged, record, batch) = self.write(|tx| {
            let (acknowledged, record) = Self::acknowledge_in(tx, &ack.lease, &ack.outcome, now)?;
            let batch = self.claim_in(tx, next.now.min(now), lease_ms, next.limit)?;
            Ok((acknowledged, record, batch))
        })?;
        self.signal_all(&record);
        self.signal_all(batch.claimed.iter().map(|c| &c.record));
        Ok(AckAndClaim {
            acknowledged,
            next: batch,
        })
    }

    fn wakeups(&self) -> Option<WakeReceiver> {
        Some(self.hub.subscribe())
    }

    fn effects(&self) -> Option<&dyn EffectClient> {
        Some(self)
    }

    /// What this adapter implements; the rest (start rates, ordered keys, browsing,
    /// workflows' own redelivery policies, delivery history) keeps the traits' refusing
    /// defaults, which name `"redb"` from here.
    fn capabilities(&self) -> Capabilities {
        let mut caps = Capabilities::all("redb");
        caps.rate_limits = false;
        caps.ordered_keys = false;
        caps.browse = false;
        caps.workflow_redelivery = false;
        caps.delivery_history = false;
        caps
    }

    async fn renew(
        &self,
        lease: &ExecutionLease,
        duration: Duration,
    ) -> Result<Fenced<ExecutionLease>> {
        let lease_ms = lease_millis("renewal duration", duration)?;
        let now = self.clock.now();
        self.write(|tx| {
            let Some(mut record) = held(tx, lease, now)? else {
                return Ok(Fenced::Lost);
            };
            let renewed = record.renew(now, lease_ms);
            store(tx, &record)?;
            Ok(Fenced::Accepted(renewed))
        })
    }

    async fn release(&self, lease: &ExecutionLease) -> Result<Fenced<()>> {
        self.release_in(lease, &Release::Retry)
    }

    async fn release_with(&self, lease: &ExecutionLease, release: &Release) -> Result<Fenced<()>> {
        self.release_in(lease, release)
    }

    async fn acknowledge(
        &self,
        lease: &ExecutionLease,
        outcome: &WorkflowRunOutcome,
    ) -> Result<Fenced<Acknowledged>> {
        let now = self.clock.now();
        let (acknowledged, record) =
            self.write(|tx| Self::acknowledge_in(tx, lease, outcome, now))?;
        self.signal_all(&record);
        Ok(acknowledged)
    }

    async fn acknowledge_batch(
        &self,
        acks: &[Acknowledgement],
    ) -> Result<Vec<Fenced<Acknowledged>>> {
        lease_core::execution::check_ack_batch(acks)?;
        let now = self.clock.now();
        let results = self.write(|tx| {
            acks.iter()
                .map(|ack| Self::acknowledge_in(tx, &ack.lease, &ack.outcome, now))
                .collect::<Result<Vec<_>>>()
        })?;
        let (out, woken): (Vec<_>, Vec<_>) = results.into_iter().unzip();
        self.signal_all(woken.iter().flatten());
        Ok(out)
    }

    async fn now(&self) -> Result<Timestamp> {
        Ok(self.clock.now())
    }
}
