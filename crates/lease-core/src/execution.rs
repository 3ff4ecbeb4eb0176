//! The execution record and its state machine (RFC 002 "Leases").
//!
//! The transition functions here are the executable spec: the memory and SQLite backends
//! call them directly; the Postgres and Redis backends encode the same rules in SQL and Lua,
//! and the conformance suite holds them all to the same observable behaviour.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::attempts::{AttemptLimit, ErrorNote, LastError, Release};
use crate::control::{CancelReason, Priority};
use crate::error::{LeaseError, Result};
use crate::ids::{ConcurrencyKey, ExecutionId, WorkflowName};
use crate::json::Json;
use crate::lease::{ExecutionLease, FencingToken};
use crate::redelivery::RedeliveryPolicy;
use crate::time::Timestamp;
use crate::trace::TraceContext;

/// Where an execution is in its life (RFC 002 adds `Running`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionStatus {
    /// Admitted and never acknowledged as suspended.
    Admitted,
    /// Has a live lease.
    Running,
    /// Some delivery was acknowledged as suspended; waiting for a wake.
    Suspended,
    /// Terminal: completed with a result.
    Completed,
    /// Terminal: failed with an error.
    Failed,
    /// Terminal: cancelled by [`crate::ExecutionClient::cancel`].
    Cancelled,
    /// Dead: its attempts ran out ([`crate::attempts`]). Never claimed, wakes ignored, every
    /// write of any holder `Lost`, as terminal; but an operator may re-admit it
    /// ([`crate::ExecutionClient::retry_dead`]) or cancel it, and retention keeps it.
    Dead,
}

impl ExecutionStatus {
    /// Completed, failed, cancelled or dead: not claimable (only an operator's
    /// [`crate::ExecutionClient::retry_dead`] brings a dead execution back).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            ExecutionStatus::Completed
                | ExecutionStatus::Failed
                | ExecutionStatus::Cancelled
                | ExecutionStatus::Dead
        )
    }

    /// The lowercase name used in storage (`admitted`, `running`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ExecutionStatus::Admitted => "admitted",
            ExecutionStatus::Running => "running",
            ExecutionStatus::Suspended => "suspended",
            ExecutionStatus::Completed => "completed",
            ExecutionStatus::Failed => "failed",
            ExecutionStatus::Cancelled => "cancelled",
            ExecutionStatus::Dead => "dead",
        }
    }
}

impl fmt::Display for ExecutionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ExecutionStatus {
    type Err = LeaseError;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "admitted" => ExecutionStatus::Admitted,
            "running" => ExecutionStatus::Running,
            "suspended" => ExecutionStatus::Suspended,
            "completed" => ExecutionStatus::Completed,
            "failed" => ExecutionStatus::Failed,
            "cancelled" => ExecutionStatus::Cancelled,
            "dead" => ExecutionStatus::Dead,
            other => return Err(LeaseError::invalid("execution status", other.to_owned())),
        })
    }
}

/// What a delivery reports when it acknowledges (RFC 001's workflow-run outcome).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", content = "value", rename_all = "snake_case")]
pub enum WorkflowRunOutcome {
    /// The workflow waits for a wake; the execution is due at the earliest wake requested
    /// during this delivery, or not at all.
    Suspended,
    /// The workflow finished with a result.
    Completed(Json),
    /// The workflow failed with an error.
    Failed(Json),
}

/// A terminal outcome, stored on the execution once and never changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", content = "value", rename_all = "snake_case")]
pub enum ExecutionOutcome {
    /// Completed with this result.
    Completed(Json),
    /// Failed with this error.
    Failed(Json),
    /// Cancelled for this reason (a status of its own, so an operator tells
    /// a cancel from a workflow's failure, and nothing a stale holder does can undo it).
    Cancelled(CancelReason),
}

impl ExecutionOutcome {
    /// The terminal status this outcome gives.
    pub fn status(&self) -> ExecutionStatus {
        match self {
            ExecutionOutcome::Completed(_) => ExecutionStatus::Completed,
            ExecutionOutcome::Failed(_) => ExecutionStatus::Failed,
            ExecutionOutcome::Cancelled(_) => ExecutionStatus::Cancelled,
        }
    }

    /// The outcome's text as backends store it: the JSON value, or the cancel reason.
    pub fn text(&self) -> &str {
        match self {
            ExecutionOutcome::Completed(v) | ExecutionOutcome::Failed(v) => v.as_str(),
            ExecutionOutcome::Cancelled(reason) => reason.as_str(),
        }
    }
}

/// What [`crate::ExecutionClient::cancel`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelOutcome {
    /// This call cancelled the execution. `ended_lease`: a live lease was ended by it (its
    /// holder's renew, fenced writes and acknowledgement are `Lost` from this commit on).
    Cancelled {
        /// A delivery held a live lease at the backend clock and was ended.
        ended_lease: bool,
    },
    /// It was cancelled before (cancel is idempotent): nothing changed, the first reason
    /// stands.
    AlreadyCancelled(CancelReason),
    /// It had completed or failed: nothing changed.
    AlreadyTerminal(ExecutionOutcome),
}

/// The reply to an accepted acknowledgement (RFC 002: `{status: "suspended"} | ExecutionOutcome`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acknowledged {
    /// The execution is suspended until its next wake.
    Suspended,
    /// The execution reached this terminal outcome.
    Terminal(ExecutionOutcome),
}

/// What `admit` creates: an id and, optionally, the workflow to run, its input and the
/// instant before which it is not due (scheduled admission).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// The execution id.
    pub id: ExecutionId,
    /// The workflow the execution runs, if the caller names one.
    pub workflow: Option<WorkflowName>,
    /// The workflow's input, if any.
    pub input: Option<Json>,
    /// Not due before this backend-clock instant; `None` = due now (RFC 001's admit).
    pub not_before: Option<Timestamp>,
    /// Claimed before lower priorities; default 0.
    pub priority: Priority,
    /// Counted against this key's concurrency limit while it holds a live lease;
    /// `None`: no limit applies.
    pub concurrency_key: Option<ConcurrencyKey>,
    /// The W3C trace context of the admitting request, stored with the execution so its
    /// deliveries continue that trace ([`crate::trace`]); `None`: none.
    pub trace_context: Option<TraceContext>,
}

impl Admission {
    /// An admission with only an id.
    pub fn new(id: ExecutionId) -> Self {
        Admission {
            id,
            workflow: None,
            input: None,
            not_before: None,
            priority: Priority::DEFAULT,
            concurrency_key: None,
            trace_context: None,
        }
    }

    /// Schedules the execution: not claimable before `at` (backend clock), then due at `at`.
    /// An instant already past is due at once (still ordered by `at`). Validated by
    /// [`Admission::validate`]: `0..=`[`crate::limits::MAX_SCHEDULED_MS`].
    pub fn not_before(mut self, at: Timestamp) -> Self {
        self.not_before = Some(at);
        self
    }

    /// Checks what the newtypes cannot: the scheduled instant's range.
    pub fn validate(&self) -> Result<()> {
        match self.not_before {
            Some(at) => crate::limits::check_scheduled("admission not_before", at),
            None => Ok(()),
        }
    }

    /// The due time of a new execution admitted at `now`: `not_before`, or `now`.
    pub fn due_at(&self, now: Timestamp) -> Timestamp {
        self.not_before.unwrap_or(now)
    }

    /// Names the workflow.
    pub fn workflow(mut self, workflow: WorkflowName) -> Self {
        self.workflow = Some(workflow);
        self
    }

    /// Sets the input.
    pub fn input(mut self, input: Json) -> Self {
        self.input = Some(input);
        self
    }

    /// Sets the priority: claims take higher priorities first.
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// Counts the execution's live leases against `key`'s concurrency limit.
    pub fn concurrency_key(mut self, key: ConcurrencyKey) -> Self {
        self.concurrency_key = Some(key);
        self
    }

    /// Stores `context` (the admitting request's W3C trace context) with the execution: every
    /// delivery's span continues that trace (with feature `otel`;
    /// `Admission::with_current_trace` takes it from the current `tracing` span). An
    /// existing execution keeps the context it was first admitted with, as it keeps the
    /// rest of its admission.
    pub fn trace_context(mut self, context: TraceContext) -> Self {
        self.trace_context = Some(context);
        self
    }

    /// Stores the current `tracing` span's OpenTelemetry context with the execution, so its
    /// deliveries continue that trace (feature `otel`). Outside a span, or without the
    /// `tracing-opentelemetry` layer, the admission is unchanged.
    #[cfg(feature = "otel")]
    #[cfg_attr(docsrs, doc(cfg(feature = "otel")))]
    pub fn with_current_trace(self) -> Self {
        match TraceContext::current() {
            Some(context) => self.trace_context(context),
            None => self,
        }
    }

    /// True when the admission uses a control a backend without priorities or concurrency
    /// keys must refuse as `Unsupported`: a control is never silently ignored.
    pub fn uses_controls(&self) -> bool {
        self.priority != Priority::DEFAULT || self.concurrency_key.is_some()
    }

    /// For a backend without priorities and concurrency keys: `Unsupported` when any of
    /// `admissions` uses one, so nothing is admitted that would be claimed out of order.
    pub fn refuse_controls(backend: &'static str, admissions: &[Admission]) -> Result<()> {
        if admissions.iter().any(Admission::uses_controls) {
            return Err(LeaseError::Unsupported {
                backend,
                operation: "admit with a priority or a concurrency key",
            });
        }
        Ok(())
    }
}

/// An execution as stored, and (through [`ExecutionRecord::effective`]) as `get` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutionRecord {
    /// The execution id.
    pub id: ExecutionId,
    /// The workflow it runs, if named at admission.
    pub workflow: Option<WorkflowName>,
    /// The workflow input, if given at admission.
    pub input: Option<Json>,
    /// Current status.
    pub status: ExecutionStatus,
    /// The last token issued to this execution ([`FencingToken::NONE`] before any claim).
    pub token: FencingToken,
    /// Expiry of the current delivery's lease, while one is in progress.
    pub lease_expires_at: Option<Timestamp>,
    /// Earliest pending wake not yet covered by an acknowledged delivery; `None` = not due.
    pub due_at: Option<Timestamp>,
    /// Earliest wake requested since the current claim.
    pub wake_after_claim: Option<Timestamp>,
    /// Consecutive deliveries that ended without an acknowledgement (RFC 002).
    pub unacknowledged_deliveries: u32,
    /// When the last delivery ended (for the redelivery delay).
    pub last_delivery_ended_at: Option<Timestamp>,
    /// Some delivery was acknowledged as suspended.
    pub ever_suspended: bool,
    /// The terminal outcome, once acknowledged or cancelled.
    pub outcome: Option<ExecutionOutcome>,
    /// The admission's priority.
    #[serde(default)]
    pub priority: Priority,
    /// The admission's concurrency key.
    #[serde(default)]
    pub concurrency_key: Option<ConcurrencyKey>,
    /// The admitting request's W3C trace context, if the admission carried one.
    #[serde(default)]
    pub trace_context: Option<TraceContext>,
    /// The attempt limit in force when the current (or last) delivery was claimed: the
    /// delivery that brings `unacknowledged_deliveries` to it ends the execution as
    /// [`ExecutionStatus::Dead`]. `None`: unlimited.
    #[serde(default)]
    pub attempt_limit: Option<AttemptLimit>,
    /// The last attempt that ended without an acknowledgement, and why.
    #[serde(default)]
    pub last_error: Option<LastError>,
    /// The workflow's own redelivery policy in force when the current (or last) delivery
    /// was claimed ([`crate::RedeliveryPolicies`]): the delay after that delivery follows
    /// it. `None`: the handle's policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redelivery_policy: Option<RedeliveryPolicy>,
}

/// The order of [`crate::ExecutionClient::list_failing`] (RFC 002: operators find the
/// executions that keep failing): most unacknowledged deliveries first, then by id. Every
/// backend that sorts a failing list in Rust sorts by this.
pub fn failing_order(a: &ExecutionRecord, b: &ExecutionRecord) -> std::cmp::Ordering {
    b.unacknowledged_deliveries
        .cmp(&a.unacknowledged_deliveries)
        .then_with(|| a.id.cmp(&b.id))
}

impl ExecutionRecord {
    /// A freshly admitted execution, due at `now` (or at its `not_before`).
    pub fn admitted(admission: &Admission, now: Timestamp) -> Self {
        ExecutionRecord {
            id: admission.id.clone(),
            workflow: admission.workflow.clone(),
            input: admission.input.clone(),
            status: ExecutionStatus::Admitted,
            token: FencingToken::NONE,
            lease_expires_at: None,
            due_at: Some(admission.due_at(now)),
            wake_after_claim: None,
            unacknowledged_deliveries: 0,
            last_delivery_ended_at: None,
            ever_suspended: false,
            outcome: None,
            priority: admission.priority,
            concurrency_key: admission.concurrency_key.clone(),
            trace_context: admission.trace_context.clone(),
            attempt_limit: None,
            last_error: None,
            redelivery_policy: None,
        }
    }

    /// The order of [`crate::ExecutionClient::list_live_leases`]: sort
    /// by this key for soonest lease expiry first, then id.
    pub fn live_lease_order(&self) -> (Option<Timestamp>, &ExecutionId) {
        (self.lease_expires_at, &self.id)
    }

    /// A delivery is in progress with an unexpired lease at `now`.
    pub fn lease_live(&self, now: Timestamp) -> bool {
        self.status == ExecutionStatus::Running && self.lease_expires_at.is_some_and(|e| e > now)
    }

    /// The record as it is at `now`: a running delivery whose lease has expired reads as
    /// ended without acknowledgement at its expiry, as `get` reads it. No
    /// background sweeper is needed.
    pub fn effective(&self, now: Timestamp) -> ExecutionRecord {
        let mut r = self.clone();
        if r.status == ExecutionStatus::Running && !r.lease_live(now) {
            let ended = r.lease_expires_at.unwrap_or(now);
            r.end_unacknowledged(ended, Some(LastError::expiry_note()));
        }
        r
    }

    /// True when at `now` the running delivery's lease has expired and that expiry used the
    /// last attempt: `get` reads the record as dead, so no holder may write any more.
    pub fn expired_into_dead(&self, now: Timestamp) -> bool {
        self.status == ExecutionStatus::Running
            && !self.lease_live(now)
            && self.last_attempt_running()
    }

    /// The running delivery is the last its attempt limit allows.
    fn last_attempt_running(&self) -> bool {
        self.attempt_limit
            .is_some_and(|l| l.exhausted_by(self.unacknowledged_deliveries.saturating_add(1)))
    }

    /// True when an effective record may be claimed at `now`: not terminal, no live lease,
    /// due, and past the redelivery delay.
    pub fn claimable(&self, now: Timestamp, policy: &RedeliveryPolicy) -> bool {
        !self.status.is_terminal()
            && self.status != ExecutionStatus::Running
            && self.due_at.is_some_and(|d| d <= now)
            && self.redelivery_gate_open(now, policy)
    }

    /// The earliest backend-clock instant from which this stored record is claimable if
    /// nothing else happens: for a running delivery, once its lease expires and the
    /// redelivery delay after that has passed; otherwise its due time, or the end of its
    /// redelivery delay if later. `None` when terminal or not due. For an effective record,
    /// [`ExecutionRecord::claimable`]`(now)` holds exactly when this is `<= now` (the
    /// dispatcher sleeps until the earliest such instant).
    pub fn claimable_at(&self, policy: &RedeliveryPolicy) -> Option<Timestamp> {
        let ended;
        let r = match (self.status, self.lease_expires_at) {
            (ExecutionStatus::Running, Some(expiry)) => {
                ended = self.effective(expiry);
                &ended
            }
            (ExecutionStatus::Running, None) => return None,
            _ => self,
        };
        if r.status.is_terminal() {
            return None;
        }
        let due = r.due_at?;
        Some(
            r.redelivery_not_before(policy)
                .map_or(due, |gate| gate.max(due)),
        )
    }

    /// The time from which the redelivery delay allows a claim, or `None` when there is no
    /// gate (no unacknowledged delivery). The delay follows the record's own
    /// [`ExecutionRecord::redelivery_policy`] when the last claim kept one, else `policy`
    /// (the handle's).
    pub fn redelivery_not_before(&self, policy: &RedeliveryPolicy) -> Option<Timestamp> {
        if self.unacknowledged_deliveries == 0 {
            return None;
        }
        let ended = self.last_delivery_ended_at?;
        let policy = self.redelivery_policy.as_ref().unwrap_or(policy);
        Some(ended.saturating_add(policy.delay(self.unacknowledged_deliveries)))
    }

    fn redelivery_gate_open(&self, now: Timestamp, policy: &RedeliveryPolicy) -> bool {
        self.redelivery_not_before(policy).is_none_or(|t| now >= t)
    }

    /// Starts a delivery on an effective, claimable record.
    pub fn claim(&mut self, now: Timestamp, lease_ms: i64, token: FencingToken) -> ExecutionLease {
        let expires_at = Timestamp::from_millis(now.as_millis().saturating_add(lease_ms));
        self.token = token;
        self.status = ExecutionStatus::Running;
        self.lease_expires_at = Some(expires_at);
        self.wake_after_claim = None;
        ExecutionLease {
            execution_id: self.id.clone(),
            token,
            expires_at,
        }
    }

    /// Checks a lease against the stored (not effective) record: `Ok(true)` when its token is
    /// current and its delivery has not ended by acknowledgement or release, `Ok(false)` when
    /// it is lost, and an error for a token never issued to this execution.
    ///
    /// Expiry alone does not make a lease lost here: fencing never consults a clock.
    pub fn holds(&self, lease: &ExecutionLease) -> Result<bool> {
        if lease.token == FencingToken::NONE {
            return Err(LeaseError::invalid("lease token", "0 is never issued"));
        }
        if lease.token > self.token {
            return Err(LeaseError::ForeignToken {
                execution: self.id.clone(),
                token: lease.token,
            });
        }
        Ok(lease.token == self.token && self.status == ExecutionStatus::Running)
    }

    /// [`ExecutionRecord::holds`] at `now`: also `Ok(false)` once the lease's expiry used
    /// the last attempt ([`ExecutionRecord::expired_into_dead`]), so fenced writes agree
    /// with `get`, which reads the execution as dead from that instant. Any other expired
    /// lease still holds until a claim takes the execution over (fencing needs no clock).
    pub fn holds_at(&self, lease: &ExecutionLease, now: Timestamp) -> Result<bool> {
        Ok(self.holds(lease)? && !self.expired_into_dead(now))
    }

    /// Extends a held lease to `now + lease_ms`.
    pub fn renew(&mut self, now: Timestamp, lease_ms: i64) -> ExecutionLease {
        let expires_at = Timestamp::from_millis(now.as_millis().saturating_add(lease_ms));
        self.lease_expires_at = Some(expires_at);
        ExecutionLease {
            execution_id: self.id.clone(),
            token: self.token,
            expires_at,
        }
    }

    /// Ends a held delivery without acknowledgement at `now` (RFC 002 `release`): an
    /// attempt, as [`Release::Retry`].
    pub fn release(&mut self, now: Timestamp) {
        self.release_with(now, &Release::Retry);
    }

    /// Ends a held delivery without acknowledgement at `now`, as `release` says: an
    /// attempt counts (and may use the last one: the execution is then dead), a lease no
    /// worker started counts nothing and is due again at once.
    pub fn release_with(&mut self, now: Timestamp, release: &Release) {
        match release.note() {
            Some(note) => self.end_unacknowledged(now, Some(note)),
            None => self.end_unstarted(),
        }
    }

    /// The delivery never ran: back to waiting with the counter and the time the last
    /// attempt ended as they were, so no redelivery delay starts (the old one had passed
    /// when this delivery was claimed).
    fn end_unstarted(&mut self) {
        self.due_at = min_opt(self.due_at, self.wake_after_claim);
        self.wake_after_claim = None;
        self.lease_expires_at = None;
        self.status = self.waiting_status();
    }

    fn waiting_status(&self) -> ExecutionStatus {
        if self.ever_suspended {
            ExecutionStatus::Suspended
        } else {
            ExecutionStatus::Admitted
        }
    }

    fn end_unacknowledged(&mut self, at: Timestamp, note: Option<ErrorNote>) {
        self.unacknowledged_deliveries = self.unacknowledged_deliveries.saturating_add(1);
        self.last_delivery_ended_at = Some(at);
        self.due_at = min_opt(self.due_at, self.wake_after_claim);
        self.wake_after_claim = None;
        self.lease_expires_at = None;
        if let Some(note) = note {
            self.last_error = Some(LastError::new(note, self.unacknowledged_deliveries, at));
        }
        let exhausted = self
            .attempt_limit
            .is_some_and(|l| l.exhausted_by(self.unacknowledged_deliveries));
        if exhausted {
            self.status = ExecutionStatus::Dead;
            self.due_at = None;
        } else {
            self.status = self.waiting_status();
        }
    }

    /// Re-admits a dead execution at `now` ([`crate::ExecutionClient::retry_dead`]): due
    /// now, attempts counted from 0, no redelivery delay, `input` replacing the old one when
    /// given. The last error stays (the operator's record of why it died) until a later
    /// attempt replaces it. Anything but a dead record is `InvalidInput`, unchanged.
    pub fn retry_dead(&mut self, now: Timestamp, input: Option<&Json>) -> Result<()> {
        if self.status != ExecutionStatus::Dead {
            return Err(LeaseError::invalid(
                "retry_dead",
                format!("execution {} is {}, not dead", self.id, self.status),
            ));
        }
        self.status = self.waiting_status();
        self.due_at = Some(now);
        self.unacknowledged_deliveries = 0;
        self.lease_expires_at = None;
        self.wake_after_claim = None;
        if let Some(input) = input {
            self.input = Some(input.clone());
        }
        Ok(())
    }

    /// Ends a held delivery with an acknowledgement (RFC 002 `acknowledge`).
    pub fn acknowledge(&mut self, now: Timestamp, outcome: &WorkflowRunOutcome) -> Acknowledged {
        self.unacknowledged_deliveries = 0;
        self.last_delivery_ended_at = Some(now);
        self.lease_expires_at = None;
        let wake = self.wake_after_claim.take();
        match outcome {
            WorkflowRunOutcome::Suspended => {
                self.status = ExecutionStatus::Suspended;
                self.ever_suspended = true;
                self.due_at = wake;
                Acknowledged::Suspended
            }
            WorkflowRunOutcome::Completed(v) => {
                self.status = ExecutionStatus::Completed;
                self.due_at = None;
                let o = ExecutionOutcome::Completed(v.clone());
                self.outcome = Some(o.clone());
                Acknowledged::Terminal(o)
            }
            WorkflowRunOutcome::Failed(v) => {
                self.status = ExecutionStatus::Failed;
                self.due_at = None;
                let o = ExecutionOutcome::Failed(v.clone());
                self.outcome = Some(o.clone());
                Acknowledged::Terminal(o)
            }
        }
    }

    /// Cancels a stored record at `now`: a record that is not terminal
    /// becomes [`ExecutionStatus::Cancelled`] with `reason`, not due, its delivery (if any)
    /// ended, so every later fenced write of a holder is `Lost` ([`ExecutionRecord::holds`]
    /// needs `Running`). A terminal record is left unchanged and says why.
    pub fn cancel(&mut self, now: Timestamp, reason: &CancelReason) -> CancelOutcome {
        match &self.outcome {
            Some(ExecutionOutcome::Cancelled(first)) => {
                return CancelOutcome::AlreadyCancelled(first.clone());
            }
            Some(outcome) => return CancelOutcome::AlreadyTerminal(outcome.clone()),
            None => {}
        }
        let ended_lease = self.lease_live(now);
        self.status = ExecutionStatus::Cancelled;
        self.outcome = Some(ExecutionOutcome::Cancelled(reason.clone()));
        self.lease_expires_at = None;
        self.due_at = None;
        self.wake_after_claim = None;
        // When it became terminal: what retention's cutoff compares (as an acknowledgement).
        self.last_delivery_ended_at = Some(now);
        CancelOutcome::Cancelled { ended_lease }
    }

    /// True when this record, read at or after the claim of `lease`, shows that no earlier
    /// delivery of the execution existed: it holds `lease`'s token, no delivery ended
    /// unacknowledged and none was acknowledged as suspended. Only holders write step
    /// records and older tokens are refused once `lease` was issued, so then no step record
    /// exists except those written under `lease` itself (the step driver skips its reads).
    pub fn is_first_delivery(&self, lease: &ExecutionLease) -> bool {
        self.id == lease.execution_id
            && self.token == lease.token
            && self.status == ExecutionStatus::Running
            && self.unacknowledged_deliveries == 0
            && !self.ever_suspended
    }

    /// Records a wake request (unfenced): no-op when terminal; folded into
    /// `wake_after_claim` while a delivery is in progress; otherwise into `due_at`.
    pub fn request_wake(&mut self, at: Timestamp) {
        if self.status.is_terminal() {
            return;
        }
        if self.status == ExecutionStatus::Running {
            self.wake_after_claim = min_opt(self.wake_after_claim, Some(at));
        } else {
            self.due_at = min_opt(self.due_at, Some(at));
        }
    }
}

fn min_opt(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// A claim request (RFC 002 `claimDue`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimRequest {
    /// The caller's view of now. Backends use `min(now, backend clock)`, so a caller whose
    /// clock runs fast can never take a live lease early.
    pub now: Timestamp,
    /// At most this many leases (1..=[`crate::limits::MAX_CLAIM_LIMIT`]).
    pub limit: usize,
    /// Lease duration ([`crate::limits::MIN_LEASE`]..=[`crate::limits::MAX_LEASE`]).
    pub duration: Duration,
}

/// One claimed delivery and the execution's record as the claim left it (RFC 002
/// `claimDue`; the record saves the runtime a `get` per claim).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    /// The lease of the new delivery.
    pub lease: ExecutionLease,
    /// The execution as it stands after the claim: status `Running`, the lease's token and
    /// expiry.
    pub record: ExecutionRecord,
}

impl Claimed {
    /// The leases of `claims`, in order: `claim_due` for a backend whose claim produces
    /// records anyway.
    pub fn leases(claims: Vec<Claimed>) -> Vec<ExecutionLease> {
        claims.into_iter().map(|c| c.lease).collect()
    }
}

/// A stored execution record a backend cannot decode: claims skip it (the rest of
/// the namespace is claimed as usual) and report it once in the log; operators list these
/// with [`crate::ExecutionClient::list_corrupt`] to repair or delete them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptRecord {
    /// The stored id (as text: it may itself be what is corrupt).
    pub id: String,
    /// What could not be decoded.
    pub problem: String,
}

/// What one claim call returns to a dispatcher: the claims, the backend clock the
/// claim ran at, and the earliest instant at which something it left unclaimed becomes
/// claimable, so the dispatcher can sleep until exactly then.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClaimBatch {
    /// The claims, as [`crate::ExecutionClient::claim_due_with_horizon`] returns them.
    pub claimed: Vec<Claimed>,
    /// The backend clock at which the claim was evaluated, when the backend reports it.
    pub now: Option<Timestamp>,
    /// The earliest [`ExecutionRecord::claimable_at`] over the executions the claim left
    /// (including the leases it just issued and those other processes hold), as seen by the
    /// claim's atomic step. `None`: nothing pending, or the backend does not say.
    pub next_claimable_at: Option<Timestamp>,
}

/// What [`crate::ExecutionClient::acknowledge_and_claim`] returns: the acknowledgement's
/// result, exactly as `acknowledge` would give it, and the claim made in the same atomic step
/// right after it (one round trip per delivery at low concurrency).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckAndClaim {
    /// The acknowledgement: accepted with its outcome, or `Lost` (nothing acknowledged).
    pub acknowledged: crate::lease::Fenced<Acknowledged>,
    /// The claim, evaluated after the acknowledgement.
    pub next: ClaimBatch,
}

/// What one retention call removed ([`crate::ExecutionClient::purge_terminal`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Purged {
    /// The executions removed, in id order. Fewer than the limit means none older is left
    /// that was free to take (a backend may skip a row another transaction holds).
    pub ids: Vec<ExecutionId>,
}

/// Validates a batch for `admit_batch` before anything is written: at most
/// [`crate::limits::MAX_ADMIT_BATCH`] items and [`crate::limits::MAX_BATCH_PAYLOAD_BYTES`]
/// of inputs, no id twice, every scheduled instant in range.
pub fn check_admit_batch(admissions: &[Admission]) -> Result<()> {
    if admissions.len() > crate::limits::MAX_ADMIT_BATCH {
        return Err(LeaseError::invalid(
            "admissions",
            format!(
                "{} items, over the limit of {}",
                admissions.len(),
                crate::limits::MAX_ADMIT_BATCH
            ),
        ));
    }
    let inputs = admissions.iter().filter_map(|a| a.input.as_ref());
    crate::limits::check_batch_bytes("admissions", inputs.map(|j| j.as_str().len()))?;
    let mut seen = std::collections::HashSet::with_capacity(admissions.len());
    for admission in admissions {
        admission.validate()?;
        if !seen.insert(&admission.id) {
            return Err(LeaseError::invalid(
                "admissions",
                format!("execution {} appears twice", admission.id),
            ));
        }
    }
    Ok(())
}

/// One acknowledgement of a batch (RFC 002 `acknowledge`: a lease and its outcome).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acknowledgement {
    /// The lease of the delivery being acknowledged.
    pub lease: ExecutionLease,
    /// Its outcome.
    pub outcome: WorkflowRunOutcome,
}

/// Validates a batch for `acknowledge_batch` before anything is written: at most
/// [`crate::limits::MAX_ACK_BATCH`] items and [`crate::limits::MAX_BATCH_PAYLOAD_BYTES`] of
/// outcomes, each execution at most once (so every item's result is independent of the
/// order within the batch).
pub fn check_ack_batch(acks: &[Acknowledgement]) -> Result<()> {
    if acks.len() > crate::limits::MAX_ACK_BATCH {
        return Err(LeaseError::invalid(
            "acknowledgements",
            format!(
                "{} items, over the limit of {}",
                acks.len(),
                crate::limits::MAX_ACK_BATCH
            ),
        ));
    }
    let outcomes = acks.iter().filter_map(|a| match &a.outcome {
        WorkflowRunOutcome::Completed(j) | WorkflowRunOutcome::Failed(j) => Some(j),
        WorkflowRunOutcome::Suspended => None,
    });
    crate::limits::check_batch_bytes("acknowledgements", outcomes.map(|j| j.as_str().len()))?;
    let mut seen = std::collections::HashSet::with_capacity(acks.len());
    for ack in acks {
        if !seen.insert(&ack.lease.execution_id) {
            return Err(LeaseError::invalid(
                "acknowledgements",
                format!("execution {} appears twice", ack.lease.execution_id),
            ));
        }
    }
    Ok(())
}

impl ClaimRequest {
    /// Validates the limit and duration; returns the lease length in milliseconds.
    pub fn validate(&self) -> Result<i64> {
        crate::limits::check_limit("claim limit", self.limit)?;
        crate::time::lease_millis("lease duration", self.duration)
    }
}
