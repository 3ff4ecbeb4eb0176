//! [`ExecutionClient`] for [`SqliteBackend`]: each operation one transaction on the
//! backend's connection, running the transition in [`crate::transitions`].

use std::time::Duration;

use async_trait::async_trait;
use lease_core::attempts::check_retry_ids;
use lease_core::execution::{check_ack_batch, check_admit_batch};
use lease_core::limits::check_limit;
use lease_core::time::lease_millis;
use lease_core::{
    AckAndClaim, Acknowledged, Acknowledgement, Admission, AttemptLimit, AttemptLimits,
    AttemptScope, CancelOutcome, CancelReason, ClaimBatch, ClaimRequest, ConcurrencyLimit,
    ConcurrencyLimits, CorruptRecord, DeliveryHistory, EffectClient, ExecutionClient,
    ExecutionFilter, ExecutionId, ExecutionLease, ExecutionPage, ExecutionRecord, Fenced, Json,
    KeyOrdering, LimitScope, ListCursor, PauseScope, Purged, RateLimit, RateLimits,
    RedeliveryPolicies, RedeliveryPolicy, Release, Result, Timestamp, WakeReceiver, WorkflowName,
    WorkflowRunOutcome,
};

use crate::backend::SqliteBackend;
use crate::conn::Weight;
use crate::{attempts, browse, control, counts, keyed, redelivery, retention, transitions};

#[async_trait]
impl ExecutionClient for SqliteBackend {
    #[tracing::instrument(level = "debug", name = "admit", skip_all)]
    async fn admit(&self, admission: &Admission) -> Result<ExecutionRecord> {
        admission.validate()?;
        let admission = admission.clone();
        self.write_waking("admit", Weight::Light, move |tx, s| {
            transitions::admit(tx, s, &admission)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "admit_batch", skip_all)]
    async fn admit_batch(&self, admissions: &[Admission]) -> Result<Vec<ExecutionRecord>> {
        check_admit_batch(admissions)?;
        if admissions.is_empty() {
            return Ok(Vec::new());
        }
        let admissions = admissions.to_vec();
        self.write_waking("admit_batch", Weight::of(admissions.len()), move |tx, s| {
            transitions::admit_batch(tx, s, &admissions)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "get", skip_all)]
    async fn get(&self, id: &ExecutionId) -> Result<Option<ExecutionRecord>> {
        let id = id.clone();
        self.read("get", move |tx, s| transitions::get(tx, s, &id))
            .await
    }

    #[tracing::instrument(level = "debug", name = "list_failing", skip_all)]
    async fn list_failing(&self, min: u32, limit: usize) -> Result<Vec<ExecutionRecord>> {
        check_limit("list limit", limit)?;
        self.read("list_failing", move |tx, s| {
            transitions::list_failing(tx, s, min, limit)
        })
        .await
    }

    /// One range read of `lease_executions_running` in a read transaction.
    #[tracing::instrument(level = "debug", name = "list_live_leases", skip_all)]
    async fn list_live_leases(&self, limit: usize) -> Result<Vec<ExecutionRecord>> {
        check_limit("list limit", limit)?;
        self.read("list_live_leases", move |tx, s| {
            transitions::list_live_leases(tx, s, limit)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "list_corrupt", skip_all)]
    async fn list_corrupt(&self, limit: usize) -> Result<Vec<CorruptRecord>> {
        check_limit("list limit", limit)?;
        self.read("list_corrupt", move |tx, s| {
            transitions::list_corrupt(tx, s, limit)
        })
        .await
    }

    /// One `GROUP BY` over the namespace's rows in one read transaction
    /// (`counts/status_counts.sql`).
    #[tracing::instrument(level = "debug", name = "status_counts", skip_all)]
    async fn status_counts(&self) -> Result<lease_core::StatusCounts> {
        self.read("status_counts", |tx, s| counts::status_counts(tx, s))
            .await
    }

    /// Retention in one transaction: see `retention::purge_terminal`. A limit outside
    /// 1..=1000 is `InvalidInput` and deletes nothing.
    #[tracing::instrument(level = "debug", name = "purge_terminal", skip_all)]
    async fn purge_terminal(&self, before: Timestamp, limit: usize) -> Result<Purged> {
        check_limit("purge limit", limit)?;
        self.write("purge_terminal", Weight::of(limit), move |tx, s| {
            retention::purge_terminal(tx, s, before, limit)
        })
        .await
    }

    /// Cancel in one write transaction: see `control::cancel`.
    #[tracing::instrument(level = "debug", name = "cancel", skip_all)]
    async fn cancel(&self, id: &ExecutionId, reason: &CancelReason) -> Result<CancelOutcome> {
        let (id, reason) = (id.clone(), reason.clone());
        self.write_waking("cancel", Weight::Light, move |tx, s| {
            control::cancel(tx, s, &id, &reason)
        })
        .await
    }

    /// Pause: one row in `lease_paused`, in one write transaction.
    #[tracing::instrument(level = "debug", name = "pause", skip_all)]
    async fn pause(&self, scope: &PauseScope) -> Result<bool> {
        let scope = scope.clone();
        self.write("pause", Weight::Light, move |tx, s| {
            control::pause(tx, s, &scope)
        })
        .await
    }

    /// Resume: deletes the scope's row; signals "now" when there was one.
    #[tracing::instrument(level = "debug", name = "resume", skip_all)]
    async fn resume(&self, scope: &PauseScope) -> Result<bool> {
        let scope = scope.clone();
        self.write_waking("resume", Weight::Light, move |tx, s| {
            control::resume(tx, s, &scope)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "list_paused", skip_all)]
    async fn list_paused(&self) -> Result<Vec<PauseScope>> {
        self.read("list_paused", |tx, s| {
            control::list_paused(tx, &s.namespace)
        })
        .await
    }

    /// One row of `lease_limits` set or removed in one write transaction; signals "now"
    /// when a row changed.
    #[tracing::instrument(level = "debug", name = "set_concurrency_limit", skip_all)]
    async fn set_concurrency_limit(
        &self,
        scope: &LimitScope,
        limit: Option<ConcurrencyLimit>,
    ) -> Result<()> {
        let scope = scope.clone();
        self.write_waking("set_concurrency_limit", Weight::Light, move |tx, s| {
            control::set_concurrency_limit(tx, s, &scope, limit)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "concurrency_limits", skip_all)]
    async fn concurrency_limits(&self) -> Result<ConcurrencyLimits> {
        self.read("concurrency_limits", |tx, s| {
            control::concurrency_limits(tx, &s.namespace)
        })
        .await
    }

    /// One row of `lease_rate_limits` set or removed in one write transaction; signals
    /// "now" when a row changed.
    #[tracing::instrument(level = "debug", name = "set_rate_limit", skip_all)]
    async fn set_rate_limit(&self, scope: &LimitScope, limit: Option<RateLimit>) -> Result<()> {
        let scope = scope.clone();
        self.write_waking("set_rate_limit", Weight::Light, move |tx, s| {
            keyed::set_rate_limit(tx, s, &scope, limit)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "rate_limits", skip_all)]
    async fn rate_limits(&self) -> Result<RateLimits> {
        self.read("rate_limits", |tx, s| keyed::rate_limits(tx, &s.namespace))
            .await
    }

    /// One row of `lease_ordered_keys` inserted or deleted in one write transaction;
    /// signals "now" when a row changed.
    #[tracing::instrument(level = "debug", name = "set_key_ordering", skip_all)]
    async fn set_key_ordering(&self, scope: &LimitScope, ordered: bool) -> Result<()> {
        let scope = scope.clone();
        self.write_waking("set_key_ordering", Weight::Light, move |tx, s| {
            keyed::set_key_ordering(tx, s, &scope, ordered)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "key_ordering", skip_all)]
    async fn key_ordering(&self) -> Result<KeyOrdering> {
        self.read("key_ordering", |tx, s| {
            keyed::key_ordering(tx, &s.namespace)
        })
        .await
    }

    /// One read transaction walking an index in admission order from the cursor, newest
    /// first; a bad limit or a cursor this backend did not write is `InvalidInput` before
    /// it starts.
    #[tracing::instrument(level = "debug", name = "list_executions", skip_all)]
    async fn list_executions(
        &self,
        filter: &ExecutionFilter,
        after: Option<&ListCursor>,
        limit: usize,
    ) -> Result<ExecutionPage> {
        check_limit("list limit", limit)?;
        let below = browse::check_cursor(after)?;
        let filter = filter.clone();
        self.read("list_executions", move |tx, s| {
            browse::list_executions(tx, s, &filter, below, limit)
        })
        .await
    }

    /// One row of `lease_attempt_limits` set or removed in one write transaction; a claim
    /// applies it from its next lease.
    #[tracing::instrument(level = "debug", name = "set_attempt_limit", skip_all)]
    async fn set_attempt_limit(
        &self,
        scope: &AttemptScope,
        limit: Option<AttemptLimit>,
    ) -> Result<()> {
        let scope = scope.clone();
        self.write("set_attempt_limit", Weight::Light, move |tx, s| {
            attempts::set_limit(tx, s, &scope, limit)
        })
        .await
    }

    /// One row of `lease_redelivery_policies` set or removed in one write transaction; a
    /// claim keeps it on each record from its next lease. A shorter delay wakes.
    #[tracing::instrument(level = "debug", name = "set_redelivery_policy", skip_all)]
    async fn set_redelivery_policy(
        &self,
        workflow: &WorkflowName,
        policy: Option<RedeliveryPolicy>,
    ) -> Result<()> {
        let workflow = workflow.clone();
        self.write_waking("set_redelivery_policy", Weight::Light, move |tx, s| {
            redelivery::set_policy(tx, s, &workflow, policy)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "redelivery_policies", skip_all)]
    async fn redelivery_policies(&self) -> Result<RedeliveryPolicies> {
        self.read("redelivery_policies", |tx, s| {
            redelivery::policies(tx, &s.namespace)
        })
        .await
    }

    /// The history kept in the execution's row, as a reader at the backend clock sees it.
    #[tracing::instrument(level = "debug", name = "deliveries", skip_all)]
    async fn deliveries(&self, id: &ExecutionId) -> Result<DeliveryHistory> {
        let id = id.clone();
        self.read("deliveries", move |tx, s| {
            crate::rows::read_history(tx, &s.namespace, &id, s.now())
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "attempt_limits", skip_all)]
    async fn attempt_limits(&self) -> Result<AttemptLimits> {
        self.read("attempt_limits", |tx, s| attempts::limits(tx, &s.namespace))
            .await
    }

    #[tracing::instrument(level = "debug", name = "list_dead", skip_all)]
    async fn list_dead(
        &self,
        after: Option<&ExecutionId>,
        limit: usize,
    ) -> Result<Vec<ExecutionRecord>> {
        check_limit("list limit", limit)?;
        let after = after.cloned();
        self.read("list_dead", move |tx, s| {
            attempts::list_dead(tx, s, after.as_ref(), limit)
        })
        .await
    }

    /// Every id checked, then all re-admitted, in one write transaction; signals "now".
    #[tracing::instrument(level = "debug", name = "retry_dead", skip_all)]
    async fn retry_dead(
        &self,
        ids: &[ExecutionId],
        input: Option<&Json>,
    ) -> Result<Vec<ExecutionRecord>> {
        check_retry_ids(ids)?;
        let (ids, input) = (ids.to_vec(), input.cloned());
        self.write_waking("retry_dead", Weight::of(ids.len()), move |tx, s| {
            attempts::retry_dead(tx, s, &ids, input.as_ref())
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "request_wake", skip_all)]
    async fn request_wake(&self, id: &ExecutionId, at: Timestamp) -> Result<()> {
        let id = id.clone();
        self.write_waking("request_wake", Weight::Light, move |tx, s| {
            transitions::request_wake(tx, s, &id, at)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "claim_due_with_horizon", skip_all)]
    async fn claim_due_with_horizon(&self, request: ClaimRequest) -> Result<ClaimBatch> {
        let lease_ms = request.validate()?;
        self.write_waking("claim_due", Weight::of(request.limit), move |tx, s| {
            transitions::claim_due(tx, s, request.now, request.limit, lease_ms)
        })
        .await
    }

    fn wakeups(&self) -> Option<WakeReceiver> {
        Some(self.subscribe_wakeups())
    }

    fn capabilities(&self) -> lease_core::Capabilities {
        lease_core::Capabilities::all(crate::error::BACKEND)
    }

    fn namespace_name(&self) -> Option<String> {
        Some(self.namespace().to_owned())
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
        let lease = lease.clone();
        self.write("renew", Weight::Light, move |tx, s| {
            transitions::renew(tx, s, &lease, lease_ms)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "release", skip_all)]
    async fn release(&self, lease: &ExecutionLease) -> Result<Fenced<()>> {
        self.release_with(lease, &Release::Retry).await
    }

    #[tracing::instrument(level = "debug", name = "release_with", skip_all)]
    async fn release_with(&self, lease: &ExecutionLease, how: &Release) -> Result<Fenced<()>> {
        let (lease, how) = (lease.clone(), how.clone());
        self.write_waking("release", Weight::Light, move |tx, s| {
            transitions::release(tx, s, &lease, &how)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "acknowledge", skip_all)]
    async fn acknowledge(
        &self,
        lease: &ExecutionLease,
        outcome: &WorkflowRunOutcome,
    ) -> Result<Fenced<Acknowledged>> {
        let lease = lease.clone();
        let outcome = outcome.clone();
        self.write_waking("acknowledge", Weight::Light, move |tx, s| {
            transitions::acknowledge(tx, s, &lease, &outcome)
        })
        .await
    }

    /// One operation in one transaction, grouped like every write: the acknowledgement
    /// exactly as [`ExecutionClient::acknowledge`], then the claim exactly as
    /// [`ExecutionClient::claim_due_with_horizon`] after it. The claim request is validated
    /// first; bad input in either part is a typed error with nothing applied. Both parts'
    /// wake-ups are signalled after the COMMIT.
    #[tracing::instrument(level = "debug", name = "acknowledge_and_claim", skip_all)]
    async fn acknowledge_and_claim(
        &self,
        ack: &Acknowledgement,
        next: ClaimRequest,
    ) -> Result<AckAndClaim> {
        let lease_ms = next.validate()?;
        let ack = ack.clone();
        self.write_waking(
            "acknowledge_and_claim",
            Weight::of(next.limit),
            move |tx, s| {
                transitions::acknowledge_and_claim(tx, s, &ack, next.now, next.limit, lease_ms)
            },
        )
        .await
    }

    #[tracing::instrument(level = "debug", name = "acknowledge_batch", skip_all)]
    async fn acknowledge_batch(
        &self,
        acks: &[Acknowledgement],
    ) -> Result<Vec<Fenced<Acknowledged>>> {
        check_ack_batch(acks)?;
        if acks.is_empty() {
            return Ok(Vec::new());
        }
        let acks = acks.to_vec();
        self.write_waking("acknowledge_batch", Weight::of(acks.len()), move |tx, s| {
            transitions::acknowledge_batch(tx, s, &acks)
        })
        .await
    }

    #[tracing::instrument(level = "debug", name = "now", skip_all)]
    async fn now(&self) -> Result<Timestamp> {
        Ok(self.scope().now())
    }
}
