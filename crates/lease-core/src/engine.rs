//! One engine for stores with transactions (feature `engine`): the lease rules written
//! once, over any store that can run a closure as one atomic transaction.
//!
//! A store implements [`TxStore`] (begin, commit) and [`Tx`] (its rows, read and written by
//! key); [`Engine`] implements every client trait over it by applying lease-core's public
//! transitions ([`ExecutionRecord::claim`], [`ExecutionRecord::acknowledge`], ...) and
//! [`crate::selection`]'s rules inside one transaction per call. The in-memory reference
//! ([`crate::MemoryBackend`]) is the engine over a mutex around maps; the redb example is
//! the engine over redb's write transactions. The invariant: every call is one
//! transaction, and the engine checks everything it may refuse before its first write, so
//! a refused call changes nothing even on a store that cannot roll back.

use std::time::Duration;

use async_trait::async_trait;

use crate::attempts::{AttemptLimit, AttemptLimits, AttemptScope, Release};
use crate::browse::{ExecutionFilter, ExecutionPage, ListCursor};
use crate::capabilities::Capabilities;
use crate::client::{EffectClient, ExecutionClient};
use crate::control::{CancelReason, ConcurrencyLimit, ConcurrencyLimits, LimitScope, PauseScope};
use crate::counts::StatusCounts;
use crate::error::{LeaseError, Result};
use crate::execution::{
    AckAndClaim, Acknowledged, Acknowledgement, Admission, CancelOutcome, ClaimBatch, ClaimRequest,
    Claimed, ExecutionRecord, ExecutionStatus, Purged, WorkflowRunOutcome, check_ack_batch,
    check_admit_batch,
};
use crate::history::DeliveryHistory;
use crate::ids::{ExecutionId, WorkflowName};
use crate::json::Json;
use crate::keyed::{KeyOrdering, RateLimit, RateLimits};
use crate::lease::{ExecutionLease, Fenced};
use crate::limits::check_limit;
use crate::redelivery::{RedeliveryPolicies, RedeliveryPolicy};
use crate::time::{SharedClock, Timestamp, lease_millis};
use crate::wakeup::{WakeHub, WakeReceiver};

mod attempts;
mod browse;
mod controls;
mod history;
mod keyed;
mod rows;
mod scanned;
mod store;
mod tx;
mod values;

pub use store::TxStore;
pub use tx::Tx;
pub use values::{DeliveryEvent, Namespace, ReceiptKey, Scan, Written};

/// The instants the wake-up hub hears once a transaction has committed.
type Wakes = Vec<Timestamp>;

/// The client traits over a [`TxStore`]: one transaction per call. Clones share the store
/// and one [`WakeHub`], signalled after every commit that makes something claimable, so a
/// waiting dispatcher of any clone learns of the work at once rather than at its next poll.
#[derive(Debug, Clone)]
pub struct Engine<S> {
    store: S,
    clock: SharedClock,
    policy: RedeliveryPolicy,
    hub: WakeHub,
    wakeups_enabled: bool,
}

impl<S: TxStore> Engine<S> {
    /// The engine over `store`, on `clock`, with the default redelivery policy.
    pub fn over(store: S, clock: SharedClock) -> Self {
        Engine {
            store,
            clock,
            policy: RedeliveryPolicy::default(),
            hub: WakeHub::new(),
            wakeups_enabled: true,
        }
    }

    /// Replaces the redelivery policy.
    pub fn with_policy(mut self, policy: RedeliveryPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// This handle without the wake-up capability ([`ExecutionClient::wakeups`] is `None`),
    /// as an adapter that only polls: for tests of the dispatcher's polling path.
    pub fn without_wakeups(mut self) -> Self {
        self.wakeups_enabled = false;
        self
    }

    /// Starts the token counter at `last`: the next claim issues `last + 1` (RFC: tokens
    /// only have to rise). The reference for a backend whose fresh store issues its first
    /// token above 1 (lease-redis on a Redis Cluster, whose tokens carry the node's config
    /// epoch so that a failover never issues a token twice).
    pub async fn with_last_token(self, last: u64) -> Self {
        // The counter only rises, so a store that refuses this write keeps a valid counter.
        let _ = self
            .write("with_last_token", move |tx, _| {
                tx.namespace_mut()?.last_token = last;
                Ok(())
            })
            .await;
        self
    }

    /// Another handle on the same store (the createPeer model).
    pub fn peer(&self) -> Self {
        self.clone()
    }

    /// The store this engine runs on.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Runs `step` in one transaction (each run starts with no instants noted), then
    /// signals the hub with the instants the committed run noted.
    async fn write<T: Send + 'static>(
        &self,
        operation: &'static str,
        step: impl FnMut(&mut S::Tx<'_>, &mut Wakes) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        self.write_many(operation, 1, step).await
    }

    /// [`Engine::write`] for a call on up to `items` executions ([`TxStore::transact_many`]).
    async fn write_many<T: Send + 'static>(
        &self,
        operation: &'static str,
        items: usize,
        mut step: impl FnMut(&mut S::Tx<'_>, &mut Wakes) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let written = self
            .store
            .transact_many(operation, items, move |tx| {
                let mut wakes = Wakes::new();
                let value = step(tx, &mut wakes)?;
                Ok(Written { value, wakes })
            })
            .await?;
        for at in written.wakes {
            self.hub.signal(at);
        }
        Ok(written.value)
    }

    /// Runs `read` in one transaction that writes nothing.
    async fn read<T: Send + 'static>(
        &self,
        operation: &'static str,
        read: impl for<'t> FnMut(&S::Tx<'t>) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        self.store.read(operation, read).await
    }

    /// Runs `change` on the namespace's values in one transaction; any change may free
    /// places, so the hub hears "now" (a spare signal only makes a dispatcher look again).
    async fn change_namespace(
        &self,
        operation: &'static str,
        change: impl Fn(&mut Namespace) + Send + 'static,
    ) -> Result<()> {
        let clock = self.clock.clone();
        self.write(operation, move |tx, wakes| {
            change(tx.namespace_mut()?);
            wakes.push(clock.now());
            Ok(())
        })
        .await
    }

    /// Notes the instant `record` becomes claimable, if it ever does; a record with a
    /// concurrency key that is not running freed a place of its key, so the hub hears
    /// "now" (a waiting execution of that key may be claimable now).
    fn note(&self, wakes: &mut Wakes, record: &ExecutionRecord) {
        if let Some(at) = record.claimable_at(&self.policy) {
            wakes.push(at);
        }
        if record.concurrency_key.is_some() && record.status != ExecutionStatus::Running {
            wakes.push(self.clock.now());
        }
    }

    /// A wake of `id` at `now` in the caller's transaction (a settle's or a store update's
    /// waiter). A purged waiter is skipped, and so is one whose stored record the store
    /// cannot read (a `Protocol` error): no claim can take it either, and the write that
    /// woke it must not fail for it.
    fn wake_in(
        &self,
        tx: &mut S::Tx<'_>,
        wakes: &mut Wakes,
        id: &ExecutionId,
        now: Timestamp,
    ) -> Result<()> {
        let woken = tx.update_execution(id, |record| {
            record.request_wake(now);
            self.note(wakes, record);
        });
        match woken {
            Err(LeaseError::Protocol { reason, .. }) => {
                tracing::warn!(waiter = %id, reason, "not waking a waiter whose record cannot be read");
                Ok(())
            }
            other => other.map(|_| ()),
        }
    }

    /// Claims up to `limit` claimable executions at `now` in the caller's transaction and
    /// reports the horizon after the claim.
    fn claim_in(
        &self,
        tx: &mut S::Tx<'_>,
        wakes: &mut Wakes,
        now: Timestamp,
        lease_ms: i64,
        limit: usize,
    ) -> Result<ClaimBatch> {
        let selection = tx.select_claimable(now, &self.policy, limit)?;
        let mut claimed = Vec::with_capacity(selection.take.len());
        for id in &selection.take {
            claimed.push(self.claim_one(tx, id, now, lease_ms)?);
        }
        tx.prune_starts(now)?;
        let next_claimable_at = tx.claim_horizon(now, &self.policy, &selection.blocked)?;
        // Other processes learn when the new leases would expire.
        if let Some(at) = claimed
            .iter()
            .filter_map(|c| c.record.claimable_at(&self.policy))
            .min()
        {
            wakes.push(at);
        }
        Ok(ClaimBatch {
            claimed,
            now: Some(now),
            next_claimable_at,
        })
    }

    /// Claims the selected execution `id` with the next token, stamping the workflow's
    /// attempt limit and redelivery policy on it, and opens its history entry. A claim of a
    /// lease that ran out unacknowledged (a takeover) also raises the namespace's takeover
    /// counter, in the same transaction.
    fn claim_one(
        &self,
        tx: &mut S::Tx<'_>,
        id: &ExecutionId,
        now: Timestamp,
        lease_ms: i64,
    ) -> Result<Claimed> {
        let token = tx.next_token()?;
        let workflow = tx
            .read_execution(id, |r| r.workflow.clone())?
            .ok_or_else(|| LeaseError::UnknownExecution(id.clone()))?;
        let (attempt_limit, redelivery_policy) = tx.claim_settings(workflow.as_ref())?;
        if history::close_expired(tx, id, now)? {
            tx.add_takeover()?;
        }
        let (lease, record) = tx
            .update_execution(id, |record| {
                *record = record.effective(now);
                record.attempt_limit = attempt_limit;
                record.redelivery_policy = redelivery_policy;
                (record.claim(now, lease_ms, token), record.clone())
            })?
            .ok_or_else(|| LeaseError::UnknownExecution(id.clone()))?;
        tx.record_delivery(id, DeliveryEvent::Claimed { token, at: now })?;
        tx.record_start(&record, now)?;
        Ok(Claimed { lease, record })
    }

    /// Admits one execution unless its id exists (then its effective record).
    fn admit_in(
        &self,
        tx: &mut S::Tx<'_>,
        wakes: &mut Wakes,
        admission: &Admission,
        now: Timestamp,
    ) -> Result<ExecutionRecord> {
        let record = ExecutionRecord::admitted(admission, now);
        if let Some(stored) = tx.admit_new(&record)? {
            return Ok(stored.effective(now));
        }
        self.note(wakes, &record);
        Ok(record)
    }

    /// Acknowledges `lease`'s delivery in the caller's transaction, closing its history entry.
    fn acknowledge_in(
        &self,
        tx: &mut S::Tx<'_>,
        wakes: &mut Wakes,
        lease: &ExecutionLease,
        outcome: &WorkflowRunOutcome,
        now: Timestamp,
    ) -> Result<Fenced<Acknowledged>> {
        let acked = with_held(tx, lease, now, |record| {
            let acked = record.acknowledge(now, outcome);
            self.note(wakes, record);
            acked
        })?;
        Ok(match acked {
            Some(acked) => {
                history::acknowledged(tx, &lease.execution_id, &acked, now)?;
                Fenced::Accepted(acked)
            }
            None => Fenced::Lost,
        })
    }
}

/// Applies `change` to the record `lease` holds at `now`; `None` (nothing changed) if the
/// lease is lost, `UnknownExecution` if there is no record.
fn with_held<R>(
    tx: &mut impl Tx,
    lease: &ExecutionLease,
    now: Timestamp,
    change: impl FnOnce(&mut ExecutionRecord) -> R,
) -> Result<Option<R>> {
    tx.update_execution(&lease.execution_id, |record| {
        Ok(if record.holds_at(lease, now)? {
            Some(change(record))
        } else {
            None
        })
    })?
    .ok_or_else(|| LeaseError::UnknownExecution(lease.execution_id.clone()))?
}

#[async_trait]
impl<S: TxStore> ExecutionClient for Engine<S> {
    #[tracing::instrument(level = "debug", name = "admit", skip_all)]
    async fn admit(&self, admission: &Admission) -> Result<ExecutionRecord> {
        admission.validate()?;
        let now = self.clock.now();
        let (this, admission) = (self.clone(), admission.clone());
        self.write("admit", move |tx, wakes| {
            this.admit_in(tx, wakes, &admission, now)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "admit_batch", skip_all)]
    async fn admit_batch(&self, admissions: &[Admission]) -> Result<Vec<ExecutionRecord>> {
        check_admit_batch(admissions)?;
        let now = self.clock.now();
        let (this, admissions) = (self.clone(), admissions.to_vec());
        self.write_many("admit_batch", admissions.len(), move |tx, wakes| {
            admissions
                .iter()
                .map(|a| this.admit_in(tx, wakes, a, now))
                .collect()
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "get", skip_all)]
    async fn get(&self, id: &ExecutionId) -> Result<Option<ExecutionRecord>> {
        let now = self.clock.now();
        let id = id.clone();
        self.read("get", move |tx| {
            tx.read_execution(&id, |r| r.effective(now))
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "list_failing", skip_all)]
    async fn list_failing(&self, min: u32, limit: usize) -> Result<Vec<ExecutionRecord>> {
        check_limit("list limit", limit)?;
        let now = self.clock.now();
        self.read("list_failing", move |tx| tx.failing(min, limit, now))
            .await
    }

    #[tracing::instrument(level = "debug", name = "list_live_leases", skip_all)]
    async fn list_live_leases(&self, limit: usize) -> Result<Vec<ExecutionRecord>> {
        check_limit("list limit", limit)?;
        let now = self.clock.now();
        self.read("list_live_leases", move |tx| tx.live_leases(limit, now))
            .await
    }

    async fn cancel(&self, id: &ExecutionId, reason: &CancelReason) -> Result<CancelOutcome> {
        self.cancel_execution(id, reason).await
    }

    async fn pause(&self, scope: &PauseScope) -> Result<bool> {
        let scope = scope.clone();
        self.write("pause", move |tx, _| {
            Ok(tx.namespace_mut()?.paused.insert(scope.clone()))
        })
        .await
    }

    async fn resume(&self, scope: &PauseScope) -> Result<bool> {
        let (clock, scope) = (self.clock.clone(), scope.clone());
        self.write("resume", move |tx, wakes| {
            wakes.push(clock.now());
            Ok(tx.namespace_mut()?.paused.remove(&scope))
        })
        .await
    }

    async fn list_paused(&self) -> Result<Vec<PauseScope>> {
        self.read("list_paused", |tx| {
            Ok(tx.namespace()?.paused.iter().cloned().collect())
        })
        .await
    }

    async fn set_concurrency_limit(
        &self,
        scope: &LimitScope,
        limit: Option<ConcurrencyLimit>,
    ) -> Result<()> {
        let scope = scope.clone();
        self.change_namespace("set_concurrency_limit", move |ns| {
            ns.limits.set(&scope, limit)
        })
        .await
    }

    async fn concurrency_limits(&self) -> Result<ConcurrencyLimits> {
        self.read("concurrency_limits", |tx| {
            Ok(tx.namespace()?.limits.clone())
        })
        .await
    }

    async fn set_attempt_limit(
        &self,
        scope: &AttemptScope,
        limit: Option<AttemptLimit>,
    ) -> Result<()> {
        // Only later claims read the limit, so nothing waiting changes: no wake-up.
        let scope = scope.clone();
        self.write("set_attempt_limit", move |tx, _| {
            tx.namespace_mut()?.attempt_limits.set(&scope, limit);
            Ok(())
        })
        .await
    }

    async fn attempt_limits(&self) -> Result<AttemptLimits> {
        self.read("attempt_limits", |tx| {
            Ok(tx.namespace()?.attempt_limits.clone())
        })
        .await
    }

    async fn list_dead(
        &self,
        after: Option<&ExecutionId>,
        limit: usize,
    ) -> Result<Vec<ExecutionRecord>> {
        self.dead_page(after, limit).await
    }

    async fn retry_dead(
        &self,
        ids: &[ExecutionId],
        input: Option<&Json>,
    ) -> Result<Vec<ExecutionRecord>> {
        self.retry(ids, input).await
    }

    async fn set_rate_limit(&self, scope: &LimitScope, limit: Option<RateLimit>) -> Result<()> {
        let scope = scope.clone();
        self.change_namespace("set_rate_limit", move |ns| {
            keyed::set_rate(ns, &scope, limit)
        })
        .await
    }

    async fn rate_limits(&self) -> Result<RateLimits> {
        self.read("rate_limits", |tx| Ok(tx.namespace()?.rates.clone()))
            .await
    }

    /// Unmarking may let claims proceed, so the hub hears "now" (marking signals too:
    /// harmless, and simpler).
    async fn set_key_ordering(&self, scope: &LimitScope, ordered: bool) -> Result<()> {
        let scope = scope.clone();
        self.change_namespace("set_key_ordering", move |ns| {
            ns.ordering.set(&scope, ordered)
        })
        .await
    }

    async fn key_ordering(&self) -> Result<KeyOrdering> {
        self.read("key_ordering", |tx| Ok(tx.namespace()?.ordering.clone()))
            .await
    }

    async fn list_executions(
        &self,
        filter: &ExecutionFilter,
        after: Option<&ListCursor>,
        limit: usize,
    ) -> Result<ExecutionPage> {
        self.browse(filter, after, limit).await
    }

    /// Any change may shorten a wait, so the hub hears "now".
    async fn set_redelivery_policy(
        &self,
        workflow: &WorkflowName,
        policy: Option<RedeliveryPolicy>,
    ) -> Result<()> {
        let workflow = workflow.clone();
        self.change_namespace("set_redelivery_policy", move |ns| {
            ns.redelivery.set(&workflow, policy)
        })
        .await
    }

    async fn redelivery_policies(&self) -> Result<RedeliveryPolicies> {
        self.read("redelivery_policies", |tx| {
            Ok(tx.namespace()?.redelivery.clone())
        })
        .await
    }

    async fn deliveries(&self, id: &ExecutionId) -> Result<DeliveryHistory> {
        self.history_of(id).await
    }

    #[tracing::instrument(level = "debug", name = "request_wake", skip_all)]
    async fn request_wake(&self, id: &ExecutionId, at: Timestamp) -> Result<()> {
        let (this, id) = (self.clone(), id.clone());
        self.write("request_wake", move |tx, wakes| {
            // A running record's claimable instant (its expiry) was signalled by its
            // claim; a wake it requests is kept for its acknowledgement.
            tx.update_execution(&id, |record| {
                record.request_wake(at);
                if record.status != ExecutionStatus::Running {
                    this.note(wakes, record);
                }
            })?
            .ok_or_else(|| LeaseError::UnknownExecution(id.clone()))
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "claim_due_with_horizon", skip_all)]
    async fn claim_due_with_horizon(&self, request: ClaimRequest) -> Result<ClaimBatch> {
        let lease_ms = request.validate()?;
        let now = request.now.min(self.clock.now());
        let this = self.clone();
        self.write_many("claim_due_with_horizon", request.limit, move |tx, wakes| {
            this.claim_in(tx, wakes, now, lease_ms, request.limit)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "acknowledge_and_claim", skip_all)]
    async fn acknowledge_and_claim(
        &self,
        ack: &Acknowledgement,
        next: ClaimRequest,
    ) -> Result<AckAndClaim> {
        let lease_ms = next.validate()?;
        let now = self.clock.now();
        let claim_now = next.now.min(now);
        let (this, ack, limit) = (self.clone(), ack.clone(), next.limit);
        self.write_many("acknowledge_and_claim", limit, move |tx, wakes| {
            let acknowledged = this.acknowledge_in(tx, wakes, &ack.lease, &ack.outcome, now)?;
            // A claim the store refuses after the acknowledgement applied (a token counter
            // behind a stored token) claims nothing where the store can undo it: the
            // delivery's outcome is not lost to a counter an operator has to repair.
            let next = tx
                .undoable(|tx| this.claim_in(tx, wakes, claim_now, lease_ms, limit))?
                .unwrap_or_default();
            Ok(AckAndClaim { acknowledged, next })
        })
        .await
    }

    /// One transaction, so nothing can change between the counts.
    #[tracing::instrument(level = "debug", name = "status_counts", skip_all)]
    async fn status_counts(&self) -> Result<StatusCounts> {
        let now = self.clock.now();
        self.read("status_counts", move |tx| tx.count_statuses(now))
            .await
    }

    #[tracing::instrument(level = "debug", name = "purge_terminal", skip_all)]
    async fn purge_terminal(&self, before: Timestamp, limit: usize) -> Result<Purged> {
        check_limit("purge limit", limit)?;
        self.write_many("purge_terminal", limit, move |tx, _| {
            let purged = tx.purgeable(before, limit)?;
            tx.purge(&purged.ids)?;
            Ok(purged)
        })
        .await
    }

    fn wakeups(&self) -> Option<WakeReceiver> {
        self.wakeups_enabled
            .then(|| self.store.wakeups().unwrap_or_else(|| self.hub.subscribe()))
    }

    fn capabilities(&self) -> Capabilities {
        let mut caps = Capabilities::all(S::NAME);
        // A handle built without wake-ups sends none, and its dispatcher polls.
        caps.wakeups = self.wakeups_enabled;
        caps
    }

    fn effects(&self) -> Option<&dyn EffectClient> {
        Some(self)
    }

    #[tracing::instrument(level = "debug", name = "renew", skip_all)]
    async fn renew(
        &self,
        lease: &ExecutionLease,
        duration: Duration,
    ) -> Result<Fenced<ExecutionLease>> {
        let lease_ms = lease_millis("renewal duration", duration)?;
        let now = self.clock.now();
        let lease = lease.clone();
        self.write("renew", move |tx, _| {
            Ok(
                match with_held(tx, &lease, now, |r| r.renew(now, lease_ms))? {
                    Some(renewed) => Fenced::Accepted(renewed),
                    None => Fenced::Lost,
                },
            )
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "release", skip_all)]
    async fn release(&self, lease: &ExecutionLease) -> Result<Fenced<()>> {
        self.release_held(lease, &Release::Retry).await
    }

    #[tracing::instrument(level = "debug", name = "release_with", skip_all)]
    async fn release_with(&self, lease: &ExecutionLease, release: &Release) -> Result<Fenced<()>> {
        self.release_held(lease, release).await
    }

    #[tracing::instrument(level = "debug", name = "acknowledge", skip_all)]
    async fn acknowledge(
        &self,
        lease: &ExecutionLease,
        outcome: &WorkflowRunOutcome,
    ) -> Result<Fenced<Acknowledged>> {
        let now = self.clock.now();
        let (this, lease, outcome) = (self.clone(), lease.clone(), outcome.clone());
        self.write("acknowledge", move |tx, wakes| {
            this.acknowledge_in(tx, wakes, &lease, &outcome, now)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "acknowledge_batch", skip_all)]
    async fn acknowledge_batch(
        &self,
        acks: &[Acknowledgement],
    ) -> Result<Vec<Fenced<Acknowledged>>> {
        check_ack_batch(acks)?;
        let now = self.clock.now();
        let (this, acks) = (self.clone(), acks.to_vec());
        self.write_many("acknowledge_batch", acks.len(), move |tx, wakes| {
            // Check every item before the first write: an error changes nothing.
            for ack in &acks {
                tx.holds(&ack.lease, now)?;
            }
            acks.iter()
                .map(|ack| this.acknowledge_in(tx, wakes, &ack.lease, &ack.outcome, now))
                .collect()
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "now", skip_all)]
    async fn now(&self) -> Result<Timestamp> {
        Ok(self.clock.now())
    }
}

impl<S: TxStore> Engine<S> {
    /// [`crate::ExecutionClient::deliveries`]: the stored history as a reader at now sees
    /// it beside the stored record.
    async fn history_of(&self, id: &ExecutionId) -> Result<DeliveryHistory> {
        let now = self.clock.now();
        let id = id.clone();
        self.read("deliveries", move |tx| {
            let history = tx.history(&id)?.unwrap_or_default();
            tx.read_execution(&id, |record| history.effective(record, now))?
                .ok_or_else(|| LeaseError::UnknownExecution(id.clone()))
        })
        .await
    }
}
