//! The backend traits (RFC 002 "Runtime API").
//!
//! A backend implements all four client traits; [`LeaseBackend`] names the bundle. Every
//! method is one atomic step in the backend. The traits hold what a backend must decide;
//! conveniences derived from them live in [`crate::ExecutionClientExt`], which no backend
//! implements, and wrappers implement the forwarding twins of [`crate::forward`]. Fenced methods return [`Fenced`]; `Lost` is a
//! result the caller must handle, never an error.

use std::time::Duration;

use async_trait::async_trait;

use crate::attempts::{AttemptLimit, AttemptLimits, AttemptScope, Release};
use crate::browse::{ExecutionFilter, ExecutionPage, ListCursor};
use crate::capabilities::Capabilities;
use crate::control::{CancelReason, ConcurrencyLimit, ConcurrencyLimits, LimitScope, PauseScope};
use crate::counts::StatusCounts;
use crate::effect::{Begun, EffectRecord, EffectWait, Settlement};
use crate::error::Result;
use crate::execution::{
    AckAndClaim, Acknowledged, Acknowledgement, Admission, CancelOutcome, ClaimBatch, ClaimRequest,
    CorruptRecord, ExecutionRecord, Purged, WorkflowRunOutcome, check_ack_batch, check_admit_batch,
};
use crate::heap::{HeapRecord, StepCursor, StepPage, StepWrite};
use crate::history::DeliveryHistory;
use crate::ids::{EffectId, ExecutionId, StepKey, StoreId, StoreKey, WorkflowName};
use crate::json::Json;
use crate::keyed::{KeyOrdering, RateLimit, RateLimits};
use crate::lease::{ExecutionLease, Fenced};
use crate::redelivery::{RedeliveryPolicies, RedeliveryPolicy};
use crate::store::{StartRequest, Started, StoreOp, StoreReceipt, StoreSnapshot, StoreUpdate};
use crate::time::Timestamp;
use crate::wakeup::WakeReceiver;

/// Executions and their leases (RFC 001 + RFC 002 `ExecutionClient`).
#[async_trait]
pub trait ExecutionClient: Send + Sync {
    /// Creates an execution, admitted and due now, or at [`Admission::not_before`] when it
    /// is scheduled (not claimable before then). Idempotent by identity: a second admit of
    /// the same id returns the existing record unchanged. A scheduled instant outside
    /// [`Admission::validate`]'s range is `InvalidInput` and admits nothing. A backend
    /// without priorities and concurrency keys refuses an admission using either as
    /// `Unsupported` ([`Admission::refuse_controls`]), never ignoring it: a
    /// control the caller asked for must not silently go missing.
    async fn admit(&self, admission: &Admission) -> Result<ExecutionRecord>;

    /// Admits several executions in one call, each exactly as [`ExecutionClient::admit`]
    /// would (idempotent by identity: an existing id returns its record unchanged); records
    /// come back in the items' order. An empty batch admits nothing.
    ///
    /// More than [`crate::limits::MAX_ADMIT_BATCH`] items, one id twice or a scheduled
    /// instant out of range: `InvalidInput`, nothing admitted. On any error except
    /// [`crate::LeaseError::OutcomeUnknown`] nothing was admitted.
    ///
    /// The default validates the whole batch, then admits item by item, reporting an error
    /// after the first item as `OutcomeUnknown`. Backends override it to admit the batch in
    /// one atomic step (transaction, statement or script).
    async fn admit_batch(&self, admissions: &[Admission]) -> Result<Vec<ExecutionRecord>> {
        check_admit_batch(admissions)?;
        let mut records = Vec::with_capacity(admissions.len());
        for (i, admission) in admissions.iter().enumerate() {
            match self.admit(admission).await {
                Ok(r) => records.push(r),
                Err(e) if i == 0 => return Err(e),
                Err(e) => {
                    return Err(crate::LeaseError::OutcomeUnknown {
                        backend: "admit_batch",
                        operation: "admit_batch",
                        source: format!(
                            "item {i} of {} failed after earlier items were admitted: {e}",
                            admissions.len()
                        )
                        .into(),
                    });
                }
            }
        }
        Ok(records)
    }

    /// The effective record: a running lease whose expiry has passed reads as ended without
    /// acknowledgement (status back to suspended/admitted, `unacknowledged_deliveries + 1`).
    async fn get(&self, id: &ExecutionId) -> Result<Option<ExecutionRecord>>;

    /// Executions whose effective `unacknowledged_deliveries` is at least `min`, most failing
    /// first, then by id; at most `limit` (RFC 002: operators find executions that keep
    /// failing).
    async fn list_failing(&self, min: u32, limit: usize) -> Result<Vec<ExecutionRecord>>;

    /// The executions holding a live lease now: stored status running with a lease that has
    /// not expired at the backend clock, soonest expiry first, then by id, at most `limit`
    /// (1..=1000), each as `get` would return it, read in one atomic step (the
    /// console's live leases). Ordered by expiry rather than paged by a cursor: an
    /// operator sees first the leases about to end, and a lease renewed meanwhile would move
    /// behind any cursor anyway. Records the backend cannot decode are left out (they are
    /// [`ExecutionClient::list_corrupt`]'s). No backend stores who holds a lease: the token
    /// names the delivery, not the process.
    ///
    /// A limit outside 1..=1000 is `InvalidInput`. There is no correct default (the traits
    /// cannot enumerate executions): the default checks the limit, then answers
    /// [`crate::LeaseError::Unsupported`].
    async fn list_live_leases(&self, limit: usize) -> Result<Vec<ExecutionRecord>> {
        crate::limits::check_limit("list limit", limit)?;
        Err(self.capabilities().unsupported("list_live_leases"))
    }

    /// Stored execution records this backend found it cannot decode, at most `limit`
    /// (1..=1000), by id. Claims skip such records instead of failing. The
    /// default lists none: a backend whose storage cannot hold an undecodable record.
    async fn list_corrupt(&self, limit: usize) -> Result<Vec<CorruptRecord>> {
        crate::limits::check_limit("list limit", limit)?;
        Ok(Vec::new())
    }

    /// How many executions are in each status, by effective status at the backend clock
    /// (the operator command's `status`), in one atomic step where the backend can
    /// without blocking others (Redis counts page by page, so a large namespace never holds
    /// the server for one long script). Records the
    /// backend cannot decode are counted in [`StatusCounts::corrupt`] only. Reads every
    /// execution of the namespace: an operator's call, never on a hot path. Also reads the
    /// namespace's [`StatusCounts::takeovers`], which each claim that takes over an expired
    /// lease raises in its own atomic step, by one per lease taken over.
    ///
    /// There is no correct default (the traits cannot enumerate executions), so the default
    /// is [`crate::LeaseError::Unsupported`].
    async fn status_counts(&self) -> Result<StatusCounts> {
        Err(self.capabilities().unsupported("status_counts"))
    }

    /// Retention: removes up to `limit` (1..=1000) executions whose terminal
    /// acknowledgement (completed or failed) happened before `before` on the backend clock,
    /// with their step records, the store receipts they made and the start records that
    /// name them, in one atomic step, returned in id order (which eligible executions a call
    /// takes first is the backend's choice: smallest ids, or earliest ended). Never touches
    /// an execution that is not terminal. Call it again while it returns `limit` ids.
    ///
    /// Afterwards the id is unknown: `get` is `None`, a lease of it is `UnknownExecution`
    /// (no record is ever re-created by a write), and `admit` creates a new execution whose
    /// tokens are above every old one (the counter is the namespace's), so a stale holder of
    /// the purged one gets `ForeignToken` or `Lost`. A store receipt or start request id of a
    /// purged execution is forgotten: the cutoff must be older than any holder can live.
    ///
    /// The default is [`crate::LeaseError::Unsupported`].
    async fn purge_terminal(&self, before: Timestamp, limit: usize) -> Result<Purged> {
        let _ = (before, limit);
        Err(self.capabilities().unsupported("purge_terminal"))
    }

    /// Cancels an execution for good, in one atomic step that also ends
    /// its live lease, if any: from that commit on, the holder's renew, fenced step writes,
    /// store updates recorded through a fenced step, release and acknowledgement are `Lost`,
    /// so the dispatcher running it cancels its worker at its next renewal. The record
    /// becomes [`crate::ExecutionStatus::Cancelled`] with [`crate::ExecutionOutcome::Cancelled`]
    /// (`reason`), not due; wakes are ignored; retention treats it as terminal from now.
    ///
    /// A terminal execution is left unchanged: [`CancelOutcome::AlreadyCancelled`] (cancel is
    /// idempotent) or [`CancelOutcome::AlreadyTerminal`]. An unknown id is
    /// `UnknownExecution`. The default is [`crate::LeaseError::Unsupported`].
    async fn cancel(&self, id: &ExecutionId, reason: &CancelReason) -> Result<CancelOutcome> {
        let _ = (id, reason);
        Err(self.capabilities().unsupported("cancel"))
    }

    /// Pauses a scope: from this commit on no claim by any process takes
    /// an execution the scope covers ([`PauseScope::covers`]); live leases go on and may
    /// renew and acknowledge. Paused executions do not count in a claim's horizon. `true`
    /// when this call paused it, `false` when it was paused already (idempotent). The
    /// default is [`crate::LeaseError::Unsupported`].
    async fn pause(&self, scope: &PauseScope) -> Result<bool> {
        let _ = scope;
        Err(self.capabilities().unsupported("pause"))
    }

    /// Resumes a paused scope and signals idle dispatchers through the
    /// wake-up path ("claimable now"). `true` when it was paused. An execution another
    /// paused scope covers stays held back. The default is
    /// [`crate::LeaseError::Unsupported`].
    async fn resume(&self, scope: &PauseScope) -> Result<bool> {
        let _ = scope;
        Err(self.capabilities().unsupported("resume"))
    }

    /// The paused scopes: the namespace first, then workflows by name. The default is
    /// [`crate::LeaseError::Unsupported`].
    async fn list_paused(&self) -> Result<Vec<PauseScope>> {
        Err(self.capabilities().unsupported("list_paused"))
    }

    /// Sets (`Some`) or removes (`None`: unlimited) the concurrency limit of one key or the
    /// namespace default. A claim never gives a key more live leases than
    /// its limit, counted in the claim's own atomic step over every process; an ended or
    /// expired lease frees its place. Lowering a limit ends no lease: the key's leases run
    /// out and no new claim happens until it is under the limit. Raising or removing one
    /// signals the wake-up path. The default is [`crate::LeaseError::Unsupported`].
    async fn set_concurrency_limit(
        &self,
        scope: &LimitScope,
        limit: Option<ConcurrencyLimit>,
    ) -> Result<()> {
        let _ = (scope, limit);
        Err(self.capabilities().unsupported("set_concurrency_limit"))
    }

    /// The namespace's concurrency limits. The default is
    /// [`crate::LeaseError::Unsupported`].
    async fn concurrency_limits(&self) -> Result<ConcurrencyLimits> {
        Err(self.capabilities().unsupported("concurrency_limits"))
    }

    /// Sets (`Some`) or removes (`None`: unlimited) the attempt limit of one workflow name
    /// or the namespace default ([`crate::attempts`]). A claim reads the limit that applies
    /// to the execution's workflow and keeps it on the record for that delivery
    /// ([`ExecutionRecord::attempt_limit`]): a change applies from each execution's next
    /// claim. A limit out of range cannot be built ([`AttemptLimit::new`]). The default is
    /// [`crate::LeaseError::Unsupported`].
    async fn set_attempt_limit(
        &self,
        scope: &AttemptScope,
        limit: Option<AttemptLimit>,
    ) -> Result<()> {
        let _ = (scope, limit);
        Err(self.capabilities().unsupported("set_attempt_limit"))
    }

    /// The namespace's attempt limits. The default is [`crate::LeaseError::Unsupported`].
    async fn attempt_limits(&self) -> Result<AttemptLimits> {
        Err(self.capabilities().unsupported("attempt_limits"))
    }

    /// The dead executions ([`crate::ExecutionStatus::Dead`], as `get` reads them: a lease
    /// whose expiry used the last attempt included), by id, strictly after `after`, at most
    /// `limit` (1..=1000). A bad limit is `InvalidInput`; the default checks it, then
    /// answers [`crate::LeaseError::Unsupported`].
    async fn list_dead(
        &self,
        after: Option<&ExecutionId>,
        limit: usize,
    ) -> Result<Vec<ExecutionRecord>> {
        let _ = after;
        crate::limits::check_limit("list limit", limit)?;
        Err(self.capabilities().unsupported("list_dead"))
    }

    /// Re-admits dead executions in one atomic step ([`ExecutionRecord::retry_dead`]): each
    /// due now with its attempts counted from 0, its input replaced by `input` when given;
    /// records come back in the ids' order and idle dispatchers are signalled. An unknown id
    /// is `UnknownExecution`; an execution that is not dead, no ids, more than
    /// [`crate::limits::MAX_ADMIT_BATCH`] or an id twice is `InvalidInput`: then nothing
    /// changed. The default is [`crate::LeaseError::Unsupported`].
    async fn retry_dead(
        &self,
        ids: &[ExecutionId],
        input: Option<&Json>,
    ) -> Result<Vec<ExecutionRecord>> {
        let _ = (ids, input);
        Err(self.capabilities().unsupported("retry_dead"))
    }

    /// Sets (`Some`) or removes (`None`: unlimited) the start rate of one key or the
    /// namespace default ([`crate::keyed`]): a claim never starts more than
    /// [`RateLimit::starts`] executions of a key in any window of [`RateLimit::period`],
    /// counted in the claim's own atomic step over every process. A key held back by its
    /// rate holds back no other key, and a claim reports the instant it may start again as
    /// its horizon. Raising or removing a limit signals the wake-up path. The default is
    /// [`crate::LeaseError::Unsupported`].
    async fn set_rate_limit(&self, scope: &LimitScope, limit: Option<RateLimit>) -> Result<()> {
        let _ = (scope, limit);
        Err(self.capabilities().unsupported("set_rate_limit"))
    }

    /// The namespace's rate limits. The default is [`crate::LeaseError::Unsupported`].
    async fn rate_limits(&self) -> Result<RateLimits> {
        Err(self.capabilities().unsupported("rate_limits"))
    }

    /// Marks (`true`) or unmarks one key, or every key ([`LimitScope::Default`]), as ordered
    /// ([`crate::keyed`]): its executions run one at a time in admission order, a
    /// redelivered one keeping its place. Unmarking signals the wake-up path. The default is
    /// [`crate::LeaseError::Unsupported`].
    async fn set_key_ordering(&self, scope: &LimitScope, ordered: bool) -> Result<()> {
        let _ = (scope, ordered);
        Err(self.capabilities().unsupported("set_key_ordering"))
    }

    /// Which keys are ordered. The default is [`crate::LeaseError::Unsupported`].
    async fn key_ordering(&self) -> Result<KeyOrdering> {
        Err(self.capabilities().unsupported("key_ordering"))
    }

    /// The executions `filter` matches, newest admitted first, at most `limit` (1..=1000),
    /// starting after `after` ([`crate::browse`]); each record as `get` returns it. The cost
    /// of a page does not grow with the number stored. A bad limit or a cursor this store
    /// did not write is `InvalidInput`; the default checks the limit, then answers
    /// [`crate::LeaseError::Unsupported`].
    async fn list_executions(
        &self,
        filter: &ExecutionFilter,
        after: Option<&ListCursor>,
        limit: usize,
    ) -> Result<ExecutionPage> {
        let _ = (filter, after);
        crate::limits::check_limit("list limit", limit)?;
        Err(self.capabilities().unsupported("list_executions"))
    }

    /// Sets (`Some`) or removes (`None`) one workflow's own redelivery policy
    /// ([`crate::RedeliveryPolicies`]), stored in the namespace beside the handle's policy,
    /// which every other execution keeps using. A claim keeps the policy of the execution's
    /// workflow on the record ([`ExecutionRecord::redelivery_policy`]) and the delay after
    /// that delivery follows it, so a change applies from each execution's next claim; the
    /// RFC's rules hold for each policy ([`RedeliveryPolicy::new`]). Removing a policy or
    /// setting a shorter one signals the wake-up path. The default is
    /// [`crate::LeaseError::Unsupported`].
    async fn set_redelivery_policy(
        &self,
        workflow: &WorkflowName,
        policy: Option<RedeliveryPolicy>,
    ) -> Result<()> {
        let _ = (workflow, policy);
        Err(self.capabilities().unsupported("set_redelivery_policy"))
    }

    /// The workflows' own redelivery policies. The default is
    /// [`crate::LeaseError::Unsupported`].
    async fn redelivery_policies(&self) -> Result<RedeliveryPolicies> {
        Err(self.capabilities().unsupported("redelivery_policies"))
    }

    /// The execution's last deliveries, oldest first ([`crate::history`]): each lease's
    /// token, when it was claimed, how and when it ended (an expired lease nobody acted on
    /// yet reads as expired at its expiry, as `get` reads the record), at most
    /// [`crate::MAX_DELIVERY_HISTORY`] of them with the count of earlier ones. Written in
    /// the same atomic steps that start and end deliveries. An unknown id is
    /// `UnknownExecution`. The default is [`crate::LeaseError::Unsupported`].
    async fn deliveries(&self, id: &ExecutionId) -> Result<DeliveryHistory> {
        let _ = id;
        Err(self.capabilities().unsupported("deliveries"))
    }

    /// Requests a wake at `at` (unfenced). Terminal executions ignore it; during a delivery
    /// it is remembered for the acknowledgement; otherwise it makes the execution due.
    async fn request_wake(&self, id: &ExecutionId, at: Timestamp) -> Result<()>;

    /// Claims up to `limit` due executions with no live lease, each with a token above every
    /// earlier token, ordered by due time then id (RFC 002 `claimDue`), in one atomic step.
    /// With each lease comes the execution's record as the claim left it (status running,
    /// the lease's token and expiry), in the same order: what `get` returns at that instant
    /// whenever the lease is live at the backend clock (always so for a claim at `now >=
    /// backend clock`, such as [`Timestamp::MAX`]), so a delivery needs no `get` before it
    /// starts. Beside them, what the dispatcher needs to sleep until the next claimable
    /// instant without another round trip: the backend clock the claim ran at, and the
    /// earliest [`ExecutionRecord::claimable_at`] of what it left unclaimed (a due wake, the
    /// end of a redelivery delay, another holder's lease expiry), read in the same step. A
    /// backend that cannot tell returns `None` for both (the dispatcher then polls); the
    /// conformance suite checks the instant is never later than the truth.
    ///
    /// The leases alone, or the leases with records, are
    /// [`crate::ExecutionClientExt::claim_due`] and
    /// [`crate::ExecutionClientExt::claim_due_with_records`].
    async fn claim_due_with_horizon(&self, request: ClaimRequest) -> Result<ClaimBatch>;

    /// Optional capability: a receiver of wake-ups, signalled whenever any
    /// process sharing the store makes something claimable (admit, a wake that makes an
    /// execution due, release, a claim's future expiry, a suspended acknowledgement with a
    /// wake), with the instant from which it is claimable. A signal arrives after the write
    /// committed, never before; after a reconnect the backend signals "now".
    ///
    /// `None` (the default) means the backend cannot tell, and the dispatcher polls. Each
    /// call returns a new receiver; a backend handle and its clones share one listener.
    fn wakeups(&self) -> Option<WakeReceiver> {
        None
    }

    /// The backend's effect client (RFC 004, reduced), an optional capability: the
    /// default `None` means effects are not supported, and `Delivery::effect` (lease-runtime)
    /// reports `Unsupported`. A backend that has one returns `Some(self)`.
    fn effects(&self) -> Option<&dyn EffectClient> {
        None
    }

    /// What this backend can do, and its name ([`crate::capabilities`]): the one place a
    /// backend says which optional operations it has. The default methods of the operations
    /// it lacks refuse them as [`crate::LeaseError::Unsupported`] naming
    /// [`Capabilities::backend`]; the conformance suite checks the declaration both ways.
    ///
    /// The default declares none, under the name `"adapter"`: an adapter that overrides an
    /// optional method declares it here too, with its own name.
    fn capabilities(&self) -> Capabilities {
        Capabilities::none("adapter")
    }

    /// The kind of backend (`"memory"`, `"sqlite"`, `"postgres"`, `"redis"`), the `backend`
    /// label of the dispatcher's metrics (feature `metrics`). The default reads it from
    /// [`ExecutionClient::capabilities`], which is where a backend declares it.
    fn backend_name(&self) -> &'static str {
        self.capabilities().backend
    }

    /// The namespace (SQLite, Redis) or schema (PostgreSQL) this client works in, the
    /// `namespace` label of the dispatcher's metrics; `None` (the default) for a backend
    /// without one. Read once, when a dispatcher starts.
    fn namespace_name(&self) -> Option<String> {
        None
    }

    /// Extends a current lease to `now + duration`; `Lost` for a stale token or an ended
    /// delivery (RFC 002 `renew`).
    async fn renew(
        &self,
        lease: &ExecutionLease,
        duration: Duration,
    ) -> Result<Fenced<ExecutionLease>>;

    /// Ends a current lease without acknowledging: `unacknowledged_deliveries + 1`, claimable
    /// again after the redelivery delay (RFC 002 `release`).
    async fn release(&self, lease: &ExecutionLease) -> Result<Fenced<()>>;

    /// [`ExecutionClient::release`], saying how the delivery went ([`Release`]): an attempt
    /// counts `unacknowledged_deliveries + 1`, keeps its note as
    /// [`ExecutionRecord::last_error`] and, when it used the last attempt, ends the
    /// execution as [`crate::ExecutionStatus::Dead`] in the same atomic step; a lease no
    /// worker started ([`Release::NotStarted`]) changes neither the counter nor the delay and
    /// is due again at once. `Lost` changes nothing.
    ///
    /// The default (an adapter without attempt limits) releases as `release` does, counting
    /// every release, `NotStarted` included: the release still ends the lease, which is what
    /// fencing needs.
    async fn release_with(&self, lease: &ExecutionLease, release: &Release) -> Result<Fenced<()>> {
        let _ = release;
        self.release(lease).await
    }

    /// Ends a current lease with an outcome, resetting `unacknowledged_deliveries` (RFC 002
    /// `acknowledge`, fenced).
    async fn acknowledge(
        &self,
        lease: &ExecutionLease,
        outcome: &WorkflowRunOutcome,
    ) -> Result<Fenced<Acknowledged>>;

    /// Acknowledges one delivery and claims the next due executions in the same atomic step
    /// (at low concurrency a delivery then costs one round trip and one commit, not
    /// two). The acknowledgement is checked and applied exactly as
    /// [`ExecutionClient::acknowledge`] would (fenced: a stale lease is `Lost` and changes
    /// nothing); the claim is then evaluated exactly as
    /// [`ExecutionClient::claim_due_with_horizon`] would, after the acknowledgement, whether
    /// or not it was lost. Bad input in either part (a foreign token, a claim limit of 0) is a
    /// typed error and changes nothing; any error except `OutcomeUnknown` applied nothing.
    ///
    /// The default validates the claim request, acknowledges, then claims; a failed claim
    /// after an applied acknowledgement is logged and reported as an empty claim (the
    /// dispatcher claims again through its loop). Backends override it to do both in one
    /// transaction, statement or script.
    async fn acknowledge_and_claim(
        &self,
        ack: &Acknowledgement,
        next: ClaimRequest,
    ) -> Result<AckAndClaim> {
        next.validate()?;
        let acknowledged = self.acknowledge(&ack.lease, &ack.outcome).await?;
        let next = match self.claim_due_with_horizon(next).await {
            Ok(batch) => batch,
            Err(e) => {
                tracing::warn!(error = %e, "claim after an acknowledgement failed");
                ClaimBatch::default()
            }
        };
        Ok(AckAndClaim { acknowledged, next })
    }

    /// Acknowledges several deliveries in one call; the dispatcher sends the
    /// acknowledgements that queue up while one is in flight this way, so a
    /// burst of finished deliveries costs one round trip instead of one each.
    /// Each item is checked and applied exactly as [`ExecutionClient::acknowledge`] would:
    /// atomically with its own fencing check, independently of the others (one `Lost`
    /// refuses nothing else). Results come back in the items' order.
    ///
    /// An empty batch changes nothing and returns no results. More than
    /// [`crate::limits::MAX_ACK_BATCH`] items or one execution twice: `InvalidInput`, nothing
    /// changes. On any error except
    /// [`crate::LeaseError::OutcomeUnknown`] no item was applied; after `OutcomeUnknown`
    /// any of them may have been.
    ///
    /// The default validates, reads each execution to reject an unknown execution or a
    /// foreign token before any write, then acknowledges item by item; an error after the
    /// first item is reported as `OutcomeUnknown` (earlier items were applied). Backends
    /// override it to apply the whole batch in one atomic step (one transaction, statement
    /// or script).
    async fn acknowledge_batch(
        &self,
        acks: &[Acknowledgement],
    ) -> Result<Vec<Fenced<Acknowledged>>> {
        check_ack_batch(acks)?;
        for ack in acks {
            let id = &ack.lease.execution_id;
            let record = self
                .get(id)
                .await?
                .ok_or_else(|| crate::LeaseError::UnknownExecution(id.clone()))?;
            // Tokens only rise, so a token above the latest one read is foreign now.
            record.holds(&ack.lease)?;
        }
        let mut results = Vec::with_capacity(acks.len());
        for (i, ack) in acks.iter().enumerate() {
            match self.acknowledge(&ack.lease, &ack.outcome).await {
                Ok(r) => results.push(r),
                Err(e) if i == 0 => return Err(e),
                Err(e) => {
                    return Err(crate::LeaseError::OutcomeUnknown {
                        backend: "acknowledge_batch",
                        operation: "acknowledge_batch",
                        source: format!(
                            "item {i} of {} failed after earlier items were applied: {e}",
                            acks.len()
                        )
                        .into(),
                    });
                }
            }
        }
        Ok(results)
    }

    /// The backend's authoritative clock: every lease expiry and due time is judged against
    /// it, never against a worker's local clock.
    async fn now(&self) -> Result<Timestamp>;
}

/// Step records (RFC 002 `HeapClient`).
#[async_trait]
pub trait HeapClient: Send + Sync {
    /// Fenced step write: accepted only while the lease's token is current and its delivery
    /// has not ended. An existing record for (execution, key, attempt) is returned unchanged
    /// (idempotent for the current holder); otherwise the record is inserted. `Lost` changes
    /// nothing.
    async fn write_step(
        &self,
        lease: &ExecutionLease,
        write: &StepWrite,
    ) -> Result<Fenced<HeapRecord>>;

    /// Reads one step record.
    async fn read_step(
        &self,
        id: &ExecutionId,
        step_key: &StepKey,
        step_attempt: u32,
    ) -> Result<Option<HeapRecord>>;

    /// Every step record of an execution, by step key then attempt.
    async fn list_steps(&self, id: &ExecutionId) -> Result<Vec<HeapRecord>>;

    /// At most `limit` (1 to [`crate::MAX_STEP_PAGE`]) step records of an execution, in
    /// [`HeapClient::list_steps`]'s order, strictly after `after` (from the start when
    /// `None`); the page says whether more remain (an inspection reads a bounded
    /// page, however many steps an execution has). A bad limit is [`crate::LeaseError::InvalidInput`].
    ///
    /// The default reads every record through `list_steps` and cuts the page out of them:
    /// correct but unbounded; every backend in this workspace reads only the page.
    async fn list_steps_page(
        &self,
        id: &ExecutionId,
        after: Option<&StepCursor>,
        limit: u32,
    ) -> Result<StepPage> {
        StepPage::check_limit(limit)?;
        let rows = self
            .list_steps(id)
            .await?
            .into_iter()
            .filter(|r| after.is_none_or(|c| c.precedes(r)))
            .take(
                usize::try_from(limit)
                    .unwrap_or(usize::MAX)
                    .saturating_add(1),
            )
            .collect();
        Ok(StepPage::from_rows(rows, limit))
    }
}

/// Stores (RFC 005, reduced): idempotent by identity and by receipt, unfenced. A store
/// client is also an execution client: waiters are executions, and its refusals name the
/// backend that [`ExecutionClient::capabilities`] declares.
#[async_trait]
pub trait StoreClient: ExecutionClient {
    /// Creates the store with `initial` entries unless it exists; returns what it holds.
    async fn get_or_create(
        &self,
        store: &StoreId,
        initial: &[(StoreKey, Json)],
    ) -> Result<StoreSnapshot>;

    /// Reads one entry; `UnknownStore` when the store does not exist.
    async fn read_entry(&self, store: &StoreId, key: &StoreKey) -> Result<Option<Json>>;

    /// Applies `op` once per receipt: the first commit applies it and records its result
    /// atomically; later calls return the recorded result with `replayed: true`.
    async fn update(&self, receipt: &StoreReceipt, op: &StoreOp) -> Result<StoreUpdate>;

    /// Store waiter registration (RFC 002 write table: unfenced). Registers `waiter` to be
    /// woken by the next update that changes entry `key` of `store` (an applied op: a wake as
    /// `request_wake` at the backend's now, in the update's own atomic step; the
    /// registration is then gone). Returns the entry's current value, read in the same
    /// atomic step, so a caller that sees the value it waits for need not suspend. A stale
    /// registration causes at most one extra delivery. `UnknownStore`, `UnknownExecution`
    /// for bad names; nothing registered.
    ///
    /// The default is [`crate::LeaseError::Unsupported`] naming the backend its
    /// [`ExecutionClient::capabilities`] declares; a backend that overrides it declares
    /// [`Capabilities::effects`].
    async fn watch_entry(
        &self,
        store: &StoreId,
        key: &StoreKey,
        waiter: &ExecutionId,
    ) -> Result<Option<Json>> {
        let _ = (store, key, waiter);
        Err(self.capabilities().unsupported("watch_entry"))
    }
}

/// Effects (RFC 004, reduced): every call idempotent by the effect id, none
/// fenced (RFC 002 write table). See [`crate::effect`]. Every call names the calling
/// execution; an effect another execution began is `EffectOfAnotherExecution`, and an
/// unknown execution `UnknownExecution`: nothing changed.
#[async_trait]
pub trait EffectClient: Send + Sync {
    /// `EffectClient.begin`: creates the effect, pending, owned by `execution`, unless it
    /// exists; a repeat by any holder returns its current state and creates nothing.
    async fn begin_effect(&self, id: &EffectId, execution: &ExecutionId) -> Result<Begun>;

    /// `EffectClient.settle`: the first result is kept and wakes the effect's waiters in the
    /// same atomic step; an equal later result returns it; a different one is a
    /// [`Settlement::Conflict`] and is not applied. `UnknownEffect` before `begin`.
    async fn settle_effect(
        &self,
        id: &EffectId,
        execution: &ExecutionId,
        result: &Json,
    ) -> Result<Settlement>;

    /// Reads an effect.
    async fn read_effect(&self, id: &EffectId) -> Result<Option<EffectRecord>>;

    /// `EffectClient.wait` (unfenced): a settled effect is returned and nothing registered;
    /// a pending one registers `execution` to be woken by its settle. `UnknownEffect`
    /// before `begin`.
    async fn wait_effect(&self, id: &EffectId, execution: &ExecutionId) -> Result<EffectWait>;
}

/// Starting workflows (RFC 003 `WorkflowStartClient.start`, reduced): idempotent by receipt.
#[async_trait]
pub trait StartClient: Send + Sync {
    /// Admits `request.target` and records `request_id -> target`, unless the request id is
    /// known, in which case the first target is returned and nothing starts.
    async fn start(&self, request: &StartRequest) -> Result<Started>;
}

/// Everything a backend provides.
pub trait LeaseBackend: ExecutionClient + HeapClient + StoreClient + StartClient + 'static {}

impl<T> LeaseBackend for T where
    T: ExecutionClient + HeapClient + StoreClient + StartClient + 'static
{
}

/// A backend shared by a dispatcher, its deliveries and any other task of the process.
pub type SharedBackend = std::sync::Arc<dyn LeaseBackend>;
