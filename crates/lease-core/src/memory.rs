//! The in-memory reference backend (feature `memory`): small and obviously right.
//!
//! One mutex guards all state, so every operation is trivially atomic. Peers (clones made
//! by [`MemoryBackend::peer`]) share the state, as separate connections to one store would.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;

use crate::attempts::{AttemptLimit, AttemptLimits, AttemptScope, Release};
use crate::browse::{ExecutionFilter, ExecutionPage, ListCursor};
use crate::capabilities::Capabilities;
use crate::client::{EffectClient, ExecutionClient, HeapClient, StartClient, StoreClient};
use crate::control::{CancelReason, ConcurrencyLimit, ConcurrencyLimits, LimitScope, PauseScope};
use crate::counts::StatusCounts;
use crate::effect::{Begun, EffectRecord, EffectWait, Settlement};
use crate::error::{LeaseError, Result};
use crate::execution::{
    AckAndClaim, Acknowledged, Acknowledgement, Admission, CancelOutcome, ClaimBatch, ClaimRequest,
    Claimed, ExecutionRecord, ExecutionStatus, Purged, WorkflowRunOutcome, check_ack_batch,
    check_admit_batch,
};
use crate::heap::{HeapRecord, StepCursor, StepPage, StepWrite};
use crate::history::DeliveryHistory;
use crate::ids::{
    ConcurrencyKey, EffectId, ExecutionId, RequestId, StepKey, StoreId, StoreKey, WorkflowName,
};
use crate::json::Json;
use crate::key_rules::KeyRules;
use crate::keyed::{KeyOrdering, RateLimit, RateLimits};
use crate::lease::{ExecutionLease, Fenced, FencingToken};
use crate::limits::check_limit;
use crate::redelivery::{RedeliveryPolicies, RedeliveryPolicy};
use crate::selection::{Gates, horizon, select};
use crate::store::{
    StartRequest, Started, StoreOp, StoreOutcome, StoreReceipt, StoreSnapshot, StoreUpdate,
};
use crate::time::{SharedClock, SystemClock, Timestamp, lease_millis};
use crate::wakeup::{WakeHub, WakeReceiver};

mod attempts;
mod browse;
mod controls;
mod history;
mod keyed;

/// A step record's key in the ordered map: (execution, step key, attempt).
type StepIndex = (ExecutionId, StepKey, u32);

#[derive(Debug, Default)]
struct State {
    last_token: u64,
    executions: BTreeMap<ExecutionId, ExecutionRecord>,
    steps: BTreeMap<StepIndex, HeapRecord>,
    stores: HashMap<StoreId, BTreeMap<StoreKey, Json>>,
    receipts: HashMap<(StoreId, ExecutionId, StepKey), StoreOutcome>,
    starts: HashMap<RequestId, ExecutionId>,
    effects: BTreeMap<EffectId, EffectRecord>,
    /// Effects whose owner waits for their settle (only the owner may wait).
    effect_waits: BTreeSet<EffectId>,
    store_waiters: HashMap<(StoreId, StoreKey), BTreeSet<ExecutionId>>,
    /// Paused scopes: no claim takes an execution one of them covers.
    paused: BTreeSet<PauseScope>,
    /// Concurrency limits: the most live leases one concurrency key may hold at once.
    limits: ConcurrencyLimits,
    /// Attempt limits ([`crate::attempts`]).
    attempt_limits: AttemptLimits,
    /// Admission order ([`crate::keyed`] ordered keys, [`crate::browse`]): each
    /// execution's place, the executions by place, and the last place given.
    admitted: HashMap<ExecutionId, u64>,
    by_admission: BTreeMap<u64, ExecutionId>,
    last_admitted: u64,
    /// Start rates per key and the claim instants of each rate-limited key, pruned to its
    /// window at every claim ([`crate::keyed`]).
    rates: RateLimits,
    rate_starts: HashMap<ConcurrencyKey, Vec<Timestamp>>,
    /// Ordered keys ([`crate::keyed`]).
    ordering: KeyOrdering,
    /// Workflows' own redelivery policies ([`crate::RedeliveryPolicies`]).
    redelivery: RedeliveryPolicies,
    /// Each claimed execution's last deliveries ([`crate::history`]), at most
    /// [`crate::MAX_DELIVERY_HISTORY`] each; purged with the record.
    histories: HashMap<ExecutionId, DeliveryHistory>,
}

impl State {
    fn gates(&self) -> Gates<'_> {
        Gates {
            paused: &self.paused,
            limits: &self.limits,
        }
    }

    fn key_rules(&self) -> KeyRules<'_> {
        KeyRules {
            ordering: &self.ordering,
            rates: &self.rates,
            starts: &self.rate_starts,
            admitted: &self.admitted,
        }
    }

    /// Inserts a new record, giving it the next place in admission order.
    fn insert_admitted(&mut self, record: ExecutionRecord) {
        self.last_admitted += 1;
        self.admitted.insert(record.id.clone(), self.last_admitted);
        self.by_admission
            .insert(self.last_admitted, record.id.clone());
        self.executions.insert(record.id.clone(), record);
    }

    fn execution(&mut self, id: &ExecutionId) -> Result<&mut ExecutionRecord> {
        self.executions
            .get_mut(id)
            .ok_or_else(|| LeaseError::UnknownExecution(id.clone()))
    }

    /// The stored record if `lease` holds it at `now`, `None` if lost.
    fn held(
        &mut self,
        lease: &ExecutionLease,
        now: Timestamp,
    ) -> Result<Option<&mut ExecutionRecord>> {
        let record = self.execution(&lease.execution_id)?;
        Ok(if record.holds_at(lease, now)? {
            Some(record)
        } else {
            None
        })
    }
}

/// The in-memory reference backend. Peers share one [`WakeHub`], signalled after every
/// operation that makes something claimable, so a waiting dispatcher of any peer learns of
/// the work at once rather than at its next poll.
#[derive(Debug, Clone)]
pub struct MemoryBackend {
    state: Arc<Mutex<State>>,
    clock: SharedClock,
    policy: RedeliveryPolicy,
    hub: WakeHub,
    wakeups_enabled: bool,
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
        MemoryBackend {
            state: Arc::default(),
            clock,
            policy: RedeliveryPolicy::default(),
            hub: WakeHub::new(),
            wakeups_enabled: true,
        }
    }

    /// This handle without the wake-up capability ([`ExecutionClient::wakeups`] is `None`),
    /// as an adapter that only polls: for tests of the dispatcher's polling path.
    pub fn without_wakeups(mut self) -> Self {
        self.wakeups_enabled = false;
        self
    }

    /// Signals the hub with the instant `record` becomes claimable, if it ever does; a
    /// record with a concurrency key that is not running freed a place of its key, so the
    /// hub hears "now" (a waiting execution of that key may be claimable now).
    fn signal(&self, record: &ExecutionRecord) {
        if let Some(at) = record.claimable_at(&self.policy) {
            self.hub.signal(at);
        }
        if record.concurrency_key.is_some() && record.status != ExecutionStatus::Running {
            self.hub.signal(self.clock.now());
        }
    }

    /// A wake of `id` at `now` inside the caller's critical section (a settle's or a store
    /// update's waiter); a purged waiter is skipped.
    fn wake_locked(&self, s: &mut State, id: &ExecutionId, now: Timestamp) {
        if let Some(record) = s.executions.get_mut(id) {
            record.request_wake(now);
            let record = record.clone();
            self.signal(&record);
        }
    }

    /// Claims up to `limit` claimable executions at `now` (one critical section with the
    /// caller's other changes) and reports the horizon after the claim.
    fn claim_locked(
        &self,
        s: &mut State,
        now: Timestamp,
        lease_ms: i64,
        limit: usize,
    ) -> Result<ClaimBatch> {
        let selection = select(
            s.executions.values(),
            now,
            &self.policy,
            s.gates(),
            s.key_rules(),
            limit,
        );
        let mut claimed = Vec::with_capacity(selection.take.len());
        for id in &selection.take {
            s.last_token += 1;
            let token = FencingToken::new(s.last_token);
            let workflow = s.execution(id)?.workflow.clone();
            let attempt_limit = s.attempt_limits.of(workflow.as_ref());
            let redelivery_policy = s.redelivery.of(workflow.as_ref());
            s.close_expired(id, now);
            let record = s.execution(id)?;
            *record = record.effective(now);
            record.attempt_limit = attempt_limit;
            record.redelivery_policy = redelivery_policy;
            let lease = record.claim(now, lease_ms, token);
            let record = record.clone();
            s.history_claim(id, token, now);
            s.record_start(&record, now);
            claimed.push(Claimed { lease, record });
        }
        s.prune_starts(now);
        let next_claimable_at = horizon(
            s.executions.values(),
            now,
            &self.policy,
            s.gates(),
            s.key_rules(),
            &selection.blocked,
        );
        Ok(ClaimBatch {
            claimed,
            now: Some(now),
            next_claimable_at,
        })
    }

    /// Other processes learn when new leases would expire.
    fn signal_claims(&self, batch: &ClaimBatch) {
        if let Some(at) = batch
            .claimed
            .iter()
            .filter_map(|c| c.record.claimable_at(&self.policy))
            .min()
        {
            self.hub.signal(at);
        }
    }

    fn admit_locked(
        &self,
        s: &mut State,
        admission: &Admission,
        now: Timestamp,
    ) -> ExecutionRecord {
        if let Some(record) = s.executions.get(&admission.id) {
            return record.effective(now);
        }
        let record = ExecutionRecord::admitted(admission, now);
        s.insert_admitted(record.clone());
        self.signal(&record);
        record
    }

    /// Replaces the redelivery policy.
    pub fn with_policy(mut self, policy: RedeliveryPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Starts the token counter at `last`: the next claim issues `last + 1` (RFC: tokens
    /// only have to rise). The reference for a backend whose fresh store issues its first
    /// token above 1 (lease-redis on a Redis Cluster, whose tokens carry the node's config
    /// epoch so that a failover never issues a token twice).
    pub fn with_last_token(self, last: u64) -> Self {
        self.lock().last_token = last;
        self
    }

    /// Another handle on the same state (the createPeer model).
    pub fn peer(&self) -> Self {
        self.clone()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave a half-applied operation: every
        // operation computes before it mutates. So a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl ExecutionClient for MemoryBackend {
    #[tracing::instrument(level = "debug", name = "admit", skip_all)]
    async fn admit(&self, admission: &Admission) -> Result<ExecutionRecord> {
        admission.validate()?;
        let now = self.clock.now();
        let mut s = self.lock();
        Ok(self.admit_locked(&mut s, admission, now))
    }

    #[tracing::instrument(level = "debug", name = "admit_batch", skip_all)]
    async fn admit_batch(&self, admissions: &[Admission]) -> Result<Vec<ExecutionRecord>> {
        check_admit_batch(admissions)?;
        let now = self.clock.now();
        let mut s = self.lock();
        Ok(admissions
            .iter()
            .map(|a| self.admit_locked(&mut s, a, now))
            .collect())
    }

    #[tracing::instrument(level = "debug", name = "get", skip_all)]
    async fn get(&self, id: &ExecutionId) -> Result<Option<ExecutionRecord>> {
        let now = self.clock.now();
        Ok(self.lock().executions.get(id).map(|r| r.effective(now)))
    }

    #[tracing::instrument(level = "debug", name = "list_failing", skip_all)]
    async fn list_failing(&self, min: u32, limit: usize) -> Result<Vec<ExecutionRecord>> {
        check_limit("list limit", limit)?;
        let now = self.clock.now();
        let s = self.lock();
        let mut out: Vec<ExecutionRecord> = s
            .executions
            .values()
            .map(|r| r.effective(now))
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

    /// One pass under the lock over every record (the reference, not a fast path).
    #[tracing::instrument(level = "debug", name = "list_live_leases", skip_all)]
    async fn list_live_leases(&self, limit: usize) -> Result<Vec<ExecutionRecord>> {
        check_limit("list limit", limit)?;
        let now = self.clock.now();
        let s = self.lock();
        let mut out: Vec<ExecutionRecord> = s
            .executions
            .values()
            .filter(|r| r.lease_live(now))
            .cloned()
            .collect();
        out.sort_by(|a, b| a.live_lease_order().cmp(&b.live_lease_order()));
        out.truncate(limit);
        Ok(out)
    }

    async fn cancel(&self, id: &ExecutionId, reason: &CancelReason) -> Result<CancelOutcome> {
        self.cancel_execution(id, reason)
    }

    async fn pause(&self, scope: &PauseScope) -> Result<bool> {
        Ok(self.lock().paused.insert(scope.clone()))
    }

    async fn resume(&self, scope: &PauseScope) -> Result<bool> {
        let was = self.lock().paused.remove(scope);
        self.hub.signal(self.clock.now());
        Ok(was)
    }

    async fn list_paused(&self) -> Result<Vec<PauseScope>> {
        Ok(self.lock().paused.iter().cloned().collect())
    }

    async fn set_concurrency_limit(
        &self,
        scope: &LimitScope,
        limit: Option<ConcurrencyLimit>,
    ) -> Result<()> {
        self.set_limit(scope, limit);
        Ok(())
    }

    async fn concurrency_limits(&self) -> Result<ConcurrencyLimits> {
        Ok(self.lock().limits.clone())
    }

    async fn set_attempt_limit(
        &self,
        scope: &AttemptScope,
        limit: Option<AttemptLimit>,
    ) -> Result<()> {
        self.set_attempts(scope, limit);
        Ok(())
    }

    async fn attempt_limits(&self) -> Result<AttemptLimits> {
        Ok(self.lock().attempt_limits.clone())
    }

    async fn list_dead(
        &self,
        after: Option<&ExecutionId>,
        limit: usize,
    ) -> Result<Vec<ExecutionRecord>> {
        self.dead_page(after, limit)
    }

    async fn retry_dead(
        &self,
        ids: &[ExecutionId],
        input: Option<&Json>,
    ) -> Result<Vec<ExecutionRecord>> {
        self.retry(ids, input)
    }

    async fn set_rate_limit(&self, scope: &LimitScope, limit: Option<RateLimit>) -> Result<()> {
        self.set_rate(scope, limit);
        Ok(())
    }

    async fn rate_limits(&self) -> Result<RateLimits> {
        Ok(self.lock().rates.clone())
    }

    async fn set_key_ordering(&self, scope: &LimitScope, ordered: bool) -> Result<()> {
        self.set_ordering(scope, ordered);
        Ok(())
    }

    async fn key_ordering(&self) -> Result<KeyOrdering> {
        Ok(self.lock().ordering.clone())
    }

    async fn list_executions(
        &self,
        filter: &ExecutionFilter,
        after: Option<&ListCursor>,
        limit: usize,
    ) -> Result<ExecutionPage> {
        self.browse(filter, after, limit)
    }

    async fn set_redelivery_policy(
        &self,
        workflow: &WorkflowName,
        policy: Option<RedeliveryPolicy>,
    ) -> Result<()> {
        self.set_workflow_policy(workflow, policy);
        Ok(())
    }

    async fn redelivery_policies(&self) -> Result<RedeliveryPolicies> {
        Ok(self.workflow_policies())
    }

    async fn deliveries(&self, id: &ExecutionId) -> Result<DeliveryHistory> {
        self.history_of(id)
    }

    #[tracing::instrument(level = "debug", name = "request_wake", skip_all)]
    async fn request_wake(&self, id: &ExecutionId, at: Timestamp) -> Result<()> {
        let mut s = self.lock();
        let record = s.execution(id)?;
        record.request_wake(at);
        // A live delivery only arms timers (its claimable instant is its expiry); an expired
        // one may be claimable at once.
        let record = record.clone();
        self.signal(&record);
        Ok(())
    }

    #[tracing::instrument(level = "debug", name = "claim_due_with_horizon", skip_all)]
    async fn claim_due_with_horizon(&self, request: ClaimRequest) -> Result<ClaimBatch> {
        let lease_ms = request.validate()?;
        let now = request.now.min(self.clock.now());
        let mut s = self.lock();
        let batch = self.claim_locked(&mut s, now, lease_ms, request.limit)?;
        drop(s);
        self.signal_claims(&batch);
        Ok(batch)
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
        let mut s = self.lock();
        let acknowledged = match s.held(&ack.lease, now)? {
            Some(record) => {
                let acked = record.acknowledge(now, &ack.outcome);
                let record = record.clone();
                s.history_acknowledged(&record.id, &acked, now);
                self.signal(&record);
                Fenced::Accepted(acked)
            }
            None => Fenced::Lost,
        };
        let batch = self.claim_locked(&mut s, claim_now, lease_ms, next.limit)?;
        drop(s);
        self.signal_claims(&batch);
        Ok(AckAndClaim {
            acknowledged,
            next: batch,
        })
    }

    /// One pass over the records under the store's lock (nothing can change in between).
    #[tracing::instrument(level = "debug", name = "status_counts", skip_all)]
    async fn status_counts(&self) -> Result<StatusCounts> {
        let now = self.clock.now();
        let s = self.lock();
        Ok(StatusCounts::of_records(s.executions.values(), now))
    }

    #[tracing::instrument(level = "debug", name = "purge_terminal", skip_all)]
    async fn purge_terminal(&self, before: Timestamp, limit: usize) -> Result<Purged> {
        check_limit("purge limit", limit)?;
        let mut s = self.lock();
        let ids: Vec<ExecutionId> = s
            .executions
            .values()
            // A dead execution waits for an operator (retry or cancel), not for retention.
            .filter(|r| r.status.is_terminal() && r.status != ExecutionStatus::Dead)
            .filter(|r| r.last_delivery_ended_at.is_some_and(|t| t < before))
            .map(|r| r.id.clone())
            .take(limit)
            .collect();
        let gone: std::collections::HashSet<&ExecutionId> = ids.iter().collect();
        s.executions.retain(|id, _| !gone.contains(id));
        s.histories.retain(|id, _| !gone.contains(id));
        s.admitted.retain(|id, _| !gone.contains(id));
        s.by_admission.retain(|_, id| !gone.contains(id));
        s.steps.retain(|(id, _, _), _| !gone.contains(id));
        s.receipts.retain(|(_, id, _), _| !gone.contains(id));
        s.starts.retain(|_, target| !gone.contains(target));
        let effects: Vec<EffectId> = s
            .effects
            .values()
            .filter(|e| gone.contains(&e.execution_id))
            .map(|e| e.id.clone())
            .collect();
        for id in &effects {
            s.effects.remove(id);
            s.effect_waits.remove(id);
        }
        for waiters in s.store_waiters.values_mut() {
            waiters.retain(|w| !gone.contains(w));
        }
        s.store_waiters.retain(|_, waiters| !waiters.is_empty());
        Ok(Purged { ids })
    }

    fn wakeups(&self) -> Option<WakeReceiver> {
        self.wakeups_enabled.then(|| self.hub.subscribe())
    }

    fn capabilities(&self) -> Capabilities {
        let mut caps = Capabilities::all("memory");
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
        let mut s = self.lock();
        Ok(match s.held(lease, now)? {
            Some(record) => Fenced::Accepted(record.renew(now, lease_ms)),
            None => Fenced::Lost,
        })
    }

    #[tracing::instrument(level = "debug", name = "release", skip_all)]
    async fn release(&self, lease: &ExecutionLease) -> Result<Fenced<()>> {
        self.release_held(lease, &Release::Retry)
    }

    #[tracing::instrument(level = "debug", name = "release_with", skip_all)]
    async fn release_with(&self, lease: &ExecutionLease, release: &Release) -> Result<Fenced<()>> {
        self.release_held(lease, release)
    }

    #[tracing::instrument(level = "debug", name = "acknowledge", skip_all)]
    async fn acknowledge(
        &self,
        lease: &ExecutionLease,
        outcome: &WorkflowRunOutcome,
    ) -> Result<Fenced<Acknowledged>> {
        let now = self.clock.now();
        let mut s = self.lock();
        Ok(match s.held(lease, now)? {
            Some(record) => {
                let ack = record.acknowledge(now, outcome);
                let record = record.clone();
                s.history_acknowledged(&record.id, &ack, now);
                self.signal(&record);
                Fenced::Accepted(ack)
            }
            None => Fenced::Lost,
        })
    }

    #[tracing::instrument(level = "debug", name = "acknowledge_batch", skip_all)]
    async fn acknowledge_batch(
        &self,
        acks: &[Acknowledgement],
    ) -> Result<Vec<Fenced<Acknowledged>>> {
        check_ack_batch(acks)?;
        let now = self.clock.now();
        let mut s = self.lock();
        // Check every item before the first write: an error changes nothing.
        for ack in acks {
            s.held(&ack.lease, now)?;
        }
        let mut results = Vec::with_capacity(acks.len());
        for ack in acks {
            results.push(match s.held(&ack.lease, now)? {
                Some(record) => {
                    let acked = record.acknowledge(now, &ack.outcome);
                    let record = record.clone();
                    s.history_acknowledged(&record.id, &acked, now);
                    self.signal(&record);
                    Fenced::Accepted(acked)
                }
                None => Fenced::Lost,
            });
        }
        Ok(results)
    }

    #[tracing::instrument(level = "debug", name = "now", skip_all)]
    async fn now(&self) -> Result<Timestamp> {
        Ok(self.clock.now())
    }
}

#[async_trait]
impl HeapClient for MemoryBackend {
    #[tracing::instrument(level = "debug", name = "write_step", skip_all)]
    async fn write_step(
        &self,
        lease: &ExecutionLease,
        write: &StepWrite,
    ) -> Result<Fenced<HeapRecord>> {
        let now = self.clock.now();
        let mut s = self.lock();
        if s.held(lease, now)?.is_none() {
            return Ok(Fenced::Lost);
        }
        let key = (
            lease.execution_id.clone(),
            write.step_key.clone(),
            write.step_attempt,
        );
        let record = s
            .steps
            .entry(key)
            .or_insert_with(|| HeapRecord::from_write(&lease.execution_id, lease.token, write));
        Ok(Fenced::Accepted(record.clone()))
    }

    #[tracing::instrument(level = "debug", name = "read_step", skip_all)]
    async fn read_step(
        &self,
        id: &ExecutionId,
        step_key: &StepKey,
        step_attempt: u32,
    ) -> Result<Option<HeapRecord>> {
        let key = (id.clone(), step_key.clone(), step_attempt);
        Ok(self.lock().steps.get(&key).cloned())
    }

    #[tracing::instrument(level = "debug", name = "list_steps", skip_all)]
    async fn list_steps(&self, id: &ExecutionId) -> Result<Vec<HeapRecord>> {
        Ok(self
            .lock()
            .steps
            .values()
            .filter(|r| &r.execution_id == id)
            .cloned()
            .collect())
    }

    /// A range read of the ordered map: only the page (and one more record) is copied.
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
        let state = self.lock();
        let from: Box<dyn Iterator<Item = (&StepIndex, &HeapRecord)>> = match after {
            Some(c) => Box::new(state.steps.range((
                Bound::Excluded((id.clone(), c.step_key.clone(), c.step_attempt)),
                Bound::Unbounded,
            ))),
            None => Box::new(state.steps.iter().skip_while(|((e, _, _), _)| e < id)),
        };
        let rows = from
            .map(|(_, r)| r)
            .take_while(|r| &r.execution_id == id)
            .take(take)
            .cloned()
            .collect();
        Ok(StepPage::from_rows(rows, limit))
    }
}

#[async_trait]
impl StoreClient for MemoryBackend {
    #[tracing::instrument(level = "debug", name = "get_or_create", skip_all)]
    async fn get_or_create(
        &self,
        store: &StoreId,
        initial: &[(StoreKey, Json)],
    ) -> Result<StoreSnapshot> {
        let mut s = self.lock();
        let created = !s.stores.contains_key(store);
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

    #[tracing::instrument(level = "debug", name = "read_entry", skip_all)]
    async fn read_entry(&self, store: &StoreId, key: &StoreKey) -> Result<Option<Json>> {
        let s = self.lock();
        let entries = s
            .stores
            .get(store)
            .ok_or_else(|| LeaseError::UnknownStore(store.to_string()))?;
        Ok(entries.get(key).cloned())
    }

    #[tracing::instrument(level = "debug", name = "update", skip_all)]
    async fn update(&self, receipt: &StoreReceipt, op: &StoreOp) -> Result<StoreUpdate> {
        let mut s = self.lock();
        if !s.stores.contains_key(&receipt.store) {
            return Err(LeaseError::UnknownStore(receipt.store.to_string()));
        }
        let rkey = (
            receipt.store.clone(),
            receipt.execution_id.clone(),
            receipt.step_key.clone(),
        );
        if let Some(outcome) = s.receipts.get(&rkey) {
            return Ok(StoreUpdate {
                outcome: outcome.clone(),
                replayed: true,
            });
        }
        let entries = s
            .stores
            .get_mut(&receipt.store)
            .ok_or_else(|| LeaseError::UnknownStore(receipt.store.to_string()))?;
        let (next, outcome) = op.apply(entries.get(op.key()));
        match next {
            Some(v) => entries.insert(op.key().clone(), v),
            None => entries.remove(op.key()),
        };
        s.receipts.insert(rkey, outcome.clone());
        if outcome.applied {
            let watched = (receipt.store.clone(), op.key().clone());
            let now = self.clock.now();
            for waiter in s.store_waiters.remove(&watched).unwrap_or_default() {
                self.wake_locked(&mut s, &waiter, now);
            }
        }
        Ok(StoreUpdate {
            outcome,
            replayed: false,
        })
    }

    #[tracing::instrument(level = "debug", name = "watch_entry", skip_all)]
    async fn watch_entry(
        &self,
        store: &StoreId,
        key: &StoreKey,
        waiter: &ExecutionId,
    ) -> Result<Option<Json>> {
        let mut s = self.lock();
        s.execution(waiter)?;
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

impl State {
    /// The effect `id`, checked to belong to `caller`.
    fn owned_effect(&self, id: &EffectId, caller: &ExecutionId) -> Result<&EffectRecord> {
        let record = self
            .effects
            .get(id)
            .ok_or_else(|| LeaseError::UnknownEffect(id.clone()))?;
        record.check_owner(caller)?;
        Ok(record)
    }
}

#[async_trait]
impl EffectClient for MemoryBackend {
    #[tracing::instrument(level = "debug", name = "begin_effect", skip_all)]
    async fn begin_effect(&self, id: &EffectId, execution: &ExecutionId) -> Result<Begun> {
        let now = self.clock.now();
        let mut s = self.lock();
        s.execution(execution)?;
        if let Some(record) = s.effects.get(id) {
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

    #[tracing::instrument(level = "debug", name = "settle_effect", skip_all)]
    async fn settle_effect(
        &self,
        id: &EffectId,
        execution: &ExecutionId,
        result: &Json,
    ) -> Result<Settlement> {
        let now = self.clock.now();
        let mut s = self.lock();
        let settlement = s.owned_effect(id, execution)?.settle(result, now);
        if let Settlement::Recorded(record) = &settlement {
            s.effects.insert(id.clone(), record.clone());
            if s.effect_waits.remove(id) {
                self.wake_locked(&mut s, execution, now);
            }
        }
        Ok(settlement)
    }

    #[tracing::instrument(level = "debug", name = "read_effect", skip_all)]
    async fn read_effect(&self, id: &EffectId) -> Result<Option<EffectRecord>> {
        Ok(self.lock().effects.get(id).cloned())
    }

    #[tracing::instrument(level = "debug", name = "wait_effect", skip_all)]
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
impl StartClient for MemoryBackend {
    #[tracing::instrument(level = "debug", name = "start", skip_all)]
    async fn start(&self, request: &StartRequest) -> Result<Started> {
        let now = self.clock.now();
        let mut s = self.lock();
        if let Some(target) = s.starts.get(&request.request_id) {
            return Ok(Started {
                target: target.clone(),
                created: false,
            });
        }
        if s.executions.contains_key(&request.target) {
            return Err(LeaseError::invalid(
                "start target",
                format!("execution {} already exists", request.target),
            ));
        }
        let admission = Admission::new(request.target.clone())
            .workflow(request.workflow.clone())
            .input(request.input.clone());
        let record = ExecutionRecord::admitted(&admission, now);
        self.signal(&record);
        s.insert_admitted(record);
        s.starts
            .insert(request.request_id.clone(), request.target.clone());
        Ok(Started {
            target: request.target.clone(),
            created: true,
        })
    }
}
