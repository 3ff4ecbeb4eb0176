//! [`ExecutionClient`] for [`RedisBackend`]: one Lua script per operation.

use std::time::Duration;

use async_trait::async_trait;
use lease_core::limits::check_limit;
use lease_core::time::lease_millis;
use lease_core::{
    AckAndClaim, Acknowledged, Acknowledgement, Admission, AttemptLimit, AttemptLimits,
    AttemptScope, CancelOutcome, CancelReason, ClaimBatch, ClaimRequest, ConcurrencyLimit,
    ConcurrencyLimits, CorruptRecord, DeliveryHistory, EffectClient, ExecutionClient,
    ExecutionFilter, ExecutionId, ExecutionLease, ExecutionPage, ExecutionRecord, Fenced, Json,
    KeyOrdering, LeaseError, LimitScope, ListCursor, PauseScope, Purged, RateLimit, RateLimits,
    RedeliveryPolicies, RedeliveryPolicy, Release, Result, Timestamp, WakeReceiver, WorkflowName,
    WorkflowRunOutcome,
};
use redis::Value;

use crate::ack::{acknowledged, outcome_args};
use crate::admit::{AdmissionArgs, refuse_split_keys};
use crate::backend::RedisBackend;
use crate::error::Access;
use crate::refusal::is_lost;
use crate::reply::Reply;
use crate::scripts::operation_script;
use crate::wire::{exact_time, token_arg};

// The operation scripts this module runs, each compiled once per process.
operation_script!(ADMIT = script(include_str!("execution/admit.lua")));
operation_script!(GET = script(include_str!("execution/get.lua")));
operation_script!(REQUEST_WAKE = wake_script(include_str!("execution/request_wake.lua")));
operation_script!(RENEW = record_script(include_str!("execution/renew.lua")));
operation_script!(RELEASE = record_script(include_str!("execution/release.lua")));
operation_script!(ACKNOWLEDGE = ack_script(include_str!("execution/acknowledge.lua")));

impl RedisBackend {
    /// Decodes `{now, HGETALL}` into the effective record.
    fn effective_reply(
        &self,
        reply: Reply,
        id: &ExecutionId,
        v: Value,
    ) -> Result<Option<ExecutionRecord>> {
        let mut items = reply.array(v)?.into_iter();
        let now: i64 = reply.number(reply.next(&mut items, "now")?, "now")?;
        let record = reply.record(id.clone(), reply.next(&mut items, "record")?)?;
        Ok(record.map(|r| r.effective(Timestamp::from_millis(now))))
    }
}

#[async_trait]
impl ExecutionClient for RedisBackend {
    #[tracing::instrument(level = "debug", name = "admit", skip_all)]
    async fn admit(&self, admission: &Admission) -> Result<ExecutionRecord> {
        const OP: &str = "admit";
        admission.validate()?;
        refuse_split_keys(self.keys().split(), std::slice::from_ref(admission))?;
        let args = AdmissionArgs::new(admission);
        let [id, workflow, input, not_before] = args.head();
        let [priority, key] = args.controls();
        let seq = self.reserve_sequences(1).await?;
        let v = self
            .eval(
                OP,
                Access::Write,
                self.keys().of(&admission.id),
                &ADMIT,
                &[
                    id,
                    workflow,
                    input,
                    not_before,
                    self.publish_word(),
                    priority,
                    key,
                    args.trace(),
                    seq.as_bytes(),
                ],
            )
            .await?;
        let reply = Reply::new(OP);
        let mut items = reply.array(v)?.into_iter();
        let now: i64 = reply.number(reply.next(&mut items, "now")?, "now")?;
        let now = Timestamp::from_millis(now);
        match items.next() {
            // Created now: the record is exactly what the admission describes.
            None => Ok(ExecutionRecord::admitted(admission, now)),
            Some(fields) => reply
                .record(admission.id.clone(), fields)?
                .map(|r| r.effective(now))
                .ok_or_else(|| reply.unexpected("an empty record")),
        }
    }

    #[tracing::instrument(level = "debug", name = "admit_batch", skip_all)]
    async fn admit_batch(&self, admissions: &[Admission]) -> Result<Vec<ExecutionRecord>> {
        lease_core::execution::check_admit_batch(admissions)?;
        refuse_split_keys(self.keys().split(), admissions)?;
        self.admit_many(admissions).await
    }

    #[tracing::instrument(level = "debug", name = "get", skip_all)]
    async fn get(&self, id: &ExecutionId) -> Result<Option<ExecutionRecord>> {
        const OP: &str = "get";
        let v = self
            .eval(
                OP,
                Access::Read,
                self.keys().of(id),
                &GET,
                &[id.as_str().as_bytes()],
            )
            .await?;
        self.effective_reply(Reply::new(OP), id, v)
    }

    #[tracing::instrument(level = "debug", name = "list_failing", skip_all)]
    async fn list_failing(&self, min: u32, limit: usize) -> Result<Vec<ExecutionRecord>> {
        check_limit("list limit", limit)?;
        let min = min.max(1);
        let mut out = Vec::new();
        for prefix in self.keys().partitions() {
            out.extend(self.list_failing_in(prefix, min, limit).await?);
        }
        out.sort_by(lease_core::execution::failing_order);
        out.truncate(limit);
        Ok(out)
    }

    /// One range read of each partition's `running` index (`live.rs`), never a key scan.
    #[tracing::instrument(level = "debug", name = "list_live_leases", skip_all)]
    async fn list_live_leases(&self, limit: usize) -> Result<Vec<ExecutionRecord>> {
        check_limit("list limit", limit)?;
        self.list_live(limit).await
    }

    #[tracing::instrument(level = "debug", name = "list_corrupt", skip_all)]
    async fn list_corrupt(&self, limit: usize) -> Result<Vec<CorruptRecord>> {
        check_limit("list limit", limit)?;
        let mut out = Vec::new();
        for prefix in self.keys().partitions() {
            out.extend(self.list_corrupt_in(prefix, limit).await?);
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out.truncate(limit);
        Ok(out)
    }

    /// Each partition's status counters, one script each (`counts.rs`); counters
    /// that are not complete are recounted first.
    #[tracing::instrument(level = "debug", name = "status_counts", skip_all)]
    async fn status_counts(&self) -> Result<lease_core::StatusCounts> {
        self.count_statuses().await
    }

    #[tracing::instrument(level = "debug", name = "purge_terminal", skip_all)]
    async fn purge_terminal(&self, before: Timestamp, limit: usize) -> Result<Purged> {
        check_limit("purge limit", limit)?;
        let mut ids = self.purge_partitions(before, limit).await?;
        ids.sort();
        Ok(Purged { ids })
    }

    fn effects(&self) -> Option<&dyn EffectClient> {
        Some(self)
    }

    #[tracing::instrument(level = "debug", name = "request_wake", skip_all)]
    async fn request_wake(&self, id: &ExecutionId, at: Timestamp) -> Result<()> {
        const OP: &str = "request_wake";
        let at = exact_time("wake time", at)?;
        let v = self
            .eval(
                OP,
                Access::Write,
                self.keys().of(id),
                &REQUEST_WAKE,
                &[
                    id.as_str().as_bytes(),
                    at.to_string().as_bytes(),
                    self.publish_word(),
                ],
            )
            .await?;
        let reply = Reply::new(OP);
        let (status, _) = reply.status(v)?;
        match status.as_str() {
            "ok" => Ok(()),
            "unknown" => Err(LeaseError::UnknownExecution(id.clone())),
            other => Err(reply.unexpected(other)),
        }
    }

    #[tracing::instrument(level = "debug", name = "claim_due_with_horizon", skip_all)]
    async fn claim_due_with_horizon(&self, request: ClaimRequest) -> Result<ClaimBatch> {
        self.claim(request)
            .await?
            .into_batch("claim_due_with_horizon")
    }

    fn wakeups(&self) -> Option<WakeReceiver> {
        self.wake_receiver()
    }

    /// Everything, except on a namespace split into partitions: a key's live leases, starts
    /// and order are counted inside one partition's claim script, so a split namespace
    /// refuses concurrency keys and the per-key settings built on them.
    fn capabilities(&self) -> lease_core::Capabilities {
        let mut caps = lease_core::Capabilities::all(crate::error::BACKEND);
        if self.keys().split() {
            caps.concurrency_limits = false;
            caps.rate_limits = false;
            caps.ordered_keys = false;
        }
        caps
    }

    fn namespace_name(&self) -> Option<String> {
        Some(self.keys().namespace().to_owned())
    }

    #[tracing::instrument(level = "debug", name = "renew", skip_all)]
    async fn renew(
        &self,
        lease: &ExecutionLease,
        duration: Duration,
    ) -> Result<Fenced<ExecutionLease>> {
        const OP: &str = "renew";
        let lease_ms = lease_millis("renewal duration", duration)?;
        let v = self
            .eval(
                OP,
                Access::Write,
                self.keys().of(&lease.execution_id),
                &RENEW,
                &[
                    lease.execution_id.as_str().as_bytes(),
                    token_arg(lease.token)?.as_bytes(),
                    lease_ms.to_string().as_bytes(),
                ],
            )
            .await?;
        let reply = Reply::new(OP);
        let (status, mut rest) = reply.status(v)?;
        if is_lost(reply, &status, lease)? {
            return Ok(Fenced::Lost);
        }
        if status != "ok" {
            return Err(reply.unexpected(&status));
        }
        let expires: i64 = reply.number(reply.next(&mut rest, "expiry")?, "expiry")?;
        Ok(Fenced::Accepted(ExecutionLease {
            execution_id: lease.execution_id.clone(),
            token: lease.token,
            expires_at: Timestamp::from_millis(expires),
        }))
    }

    #[tracing::instrument(level = "debug", name = "release", skip_all)]
    async fn release(&self, lease: &ExecutionLease) -> Result<Fenced<()>> {
        self.release_with(lease, &Release::Retry).await
    }

    #[tracing::instrument(level = "debug", name = "release_with", skip_all)]
    async fn release_with(&self, lease: &ExecutionLease, release: &Release) -> Result<Fenced<()>> {
        const OP: &str = "release";
        let note = release.note();
        let (mode, kind, message) = match &note {
            Some(note) => ("attempt", note.kind(), note.message()),
            None => ("unstarted", "", ""),
        };
        let v = self
            .eval(
                OP,
                Access::Write,
                self.keys().of(&lease.execution_id),
                &RELEASE,
                &[
                    lease.execution_id.as_str().as_bytes(),
                    token_arg(lease.token)?.as_bytes(),
                    self.publish_word(),
                    mode.as_bytes(),
                    kind.as_bytes(),
                    message.as_bytes(),
                    if matches!(release, Release::Failed(_)) {
                        b"1"
                    } else {
                        b"0"
                    },
                ],
            )
            .await?;
        let reply = Reply::new(OP);
        let (status, _) = reply.status(v)?;
        match (is_lost(reply, &status, lease)?, status.as_str()) {
            (true, _) => Ok(Fenced::Lost),
            (false, "ok") => Ok(Fenced::Accepted(())),
            (false, other) => Err(reply.unexpected(other)),
        }
    }

    #[tracing::instrument(level = "debug", name = "acknowledge", skip_all)]
    async fn acknowledge(
        &self,
        lease: &ExecutionLease,
        outcome: &WorkflowRunOutcome,
    ) -> Result<Fenced<Acknowledged>> {
        const OP: &str = "acknowledge";
        let (kind, value) = outcome_args(outcome);
        let v = self
            .eval(
                OP,
                Access::Write,
                self.keys().of(&lease.execution_id),
                &ACKNOWLEDGE,
                &[
                    lease.execution_id.as_str().as_bytes(),
                    token_arg(lease.token)?.as_bytes(),
                    kind.as_bytes(),
                    value.as_bytes(),
                    self.publish_word(),
                ],
            )
            .await?;
        let reply = Reply::new(OP);
        let (status, _) = reply.status(v)?;
        match (is_lost(reply, &status, lease)?, status.as_str()) {
            (true, _) => Ok(Fenced::Lost),
            (false, "ok") => Ok(Fenced::Accepted(acknowledged(outcome))),
            (false, other) => Err(reply.unexpected(other)),
        }
    }

    #[tracing::instrument(level = "debug", name = "acknowledge_batch", skip_all)]
    async fn acknowledge_batch(
        &self,
        acks: &[Acknowledgement],
    ) -> Result<Vec<Fenced<Acknowledged>>> {
        self.ack_batch(acks).await
    }

    #[tracing::instrument(level = "debug", name = "acknowledge_and_claim", skip_all)]
    async fn acknowledge_and_claim(
        &self,
        ack: &Acknowledgement,
        next: ClaimRequest,
    ) -> Result<AckAndClaim> {
        self.ack_and_claim(ack, next).await
    }

    #[tracing::instrument(level = "debug", name = "cancel", skip_all)]
    async fn cancel(&self, id: &ExecutionId, reason: &CancelReason) -> Result<CancelOutcome> {
        self.cancel_execution(id, reason).await
    }

    #[tracing::instrument(level = "debug", name = "pause", skip_all)]
    async fn pause(&self, scope: &PauseScope) -> Result<bool> {
        self.set_paused(scope, true).await
    }

    #[tracing::instrument(level = "debug", name = "resume", skip_all)]
    async fn resume(&self, scope: &PauseScope) -> Result<bool> {
        self.set_paused(scope, false).await
    }

    #[tracing::instrument(level = "debug", name = "list_paused", skip_all)]
    async fn list_paused(&self) -> Result<Vec<PauseScope>> {
        self.paused_scopes().await
    }

    #[tracing::instrument(level = "debug", name = "set_concurrency_limit", skip_all)]
    async fn set_concurrency_limit(
        &self,
        scope: &LimitScope,
        limit: Option<ConcurrencyLimit>,
    ) -> Result<()> {
        self.set_limit(scope, limit).await
    }

    #[tracing::instrument(level = "debug", name = "concurrency_limits", skip_all)]
    async fn concurrency_limits(&self) -> Result<ConcurrencyLimits> {
        self.read_limits().await
    }

    #[tracing::instrument(level = "debug", name = "set_rate_limit", skip_all)]
    async fn set_rate_limit(&self, scope: &LimitScope, limit: Option<RateLimit>) -> Result<()> {
        self.set_rate(scope, limit).await
    }

    #[tracing::instrument(level = "debug", name = "rate_limits", skip_all)]
    async fn rate_limits(&self) -> Result<RateLimits> {
        self.read_rates().await
    }

    #[tracing::instrument(level = "debug", name = "set_key_ordering", skip_all)]
    async fn set_key_ordering(&self, scope: &LimitScope, ordered: bool) -> Result<()> {
        self.set_ordering(scope, ordered).await
    }

    #[tracing::instrument(level = "debug", name = "key_ordering", skip_all)]
    async fn key_ordering(&self) -> Result<KeyOrdering> {
        self.read_ordering().await
    }

    #[tracing::instrument(level = "debug", name = "list_executions", skip_all)]
    async fn list_executions(
        &self,
        filter: &ExecutionFilter,
        after: Option<&ListCursor>,
        limit: usize,
    ) -> Result<ExecutionPage> {
        self.browse(filter, after, limit).await
    }

    #[tracing::instrument(level = "debug", name = "set_attempt_limit", skip_all)]
    async fn set_attempt_limit(
        &self,
        scope: &AttemptScope,
        limit: Option<AttemptLimit>,
    ) -> Result<()> {
        self.set_attempts(scope, limit).await
    }

    #[tracing::instrument(level = "debug", name = "attempt_limits", skip_all)]
    async fn attempt_limits(&self) -> Result<AttemptLimits> {
        self.read_attempts().await
    }

    #[tracing::instrument(level = "debug", name = "set_redelivery_policy", skip_all)]
    async fn set_redelivery_policy(
        &self,
        workflow: &WorkflowName,
        policy: Option<RedeliveryPolicy>,
    ) -> Result<()> {
        self.set_redelivery(workflow, policy).await
    }

    #[tracing::instrument(level = "debug", name = "redelivery_policies", skip_all)]
    async fn redelivery_policies(&self) -> Result<RedeliveryPolicies> {
        self.read_redelivery().await
    }

    #[tracing::instrument(level = "debug", name = "deliveries", skip_all)]
    async fn deliveries(&self, id: &ExecutionId) -> Result<DeliveryHistory> {
        self.read_deliveries(id).await
    }

    #[tracing::instrument(level = "debug", name = "list_dead", skip_all)]
    async fn list_dead(
        &self,
        after: Option<&ExecutionId>,
        limit: usize,
    ) -> Result<Vec<ExecutionRecord>> {
        self.dead_page(after, limit).await
    }

    #[tracing::instrument(level = "debug", name = "retry_dead", skip_all)]
    async fn retry_dead(
        &self,
        ids: &[ExecutionId],
        input: Option<&Json>,
    ) -> Result<Vec<ExecutionRecord>> {
        self.retry(ids, input).await
    }

    #[tracing::instrument(level = "debug", name = "now", skip_all)]
    async fn now(&self) -> Result<Timestamp> {
        self.clock_now().await
    }
}
