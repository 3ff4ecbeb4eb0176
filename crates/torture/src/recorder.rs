//! The recording decorator: a [`LeaseBackend`] that forwards every call to the real backend
//! and appends one [`Op`] per claim, renewal, step write or read, acknowledgement and
//! release to the process's [`OpLog`]. It also injects the slow-renew fault: while the
//! delay is set, each renewal waits that long before it is sent, so it reaches the backend
//! after the lease expired.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::history::{self, Op, OpKind, OpResult, Rate, error_result};
use async_trait::async_trait;
use lease_core::{
    AckAndClaim, Acknowledged, Acknowledgement, Admission, AttemptLimit, AttemptScope,
    CancelOutcome, CancelReason, ClaimBatch, ClaimRequest, Claimed, ConcurrencyLimit, EffectClient,
    ExecutionClient, ExecutionId, ExecutionLease, ExecutionOutcome, ExecutionRecord, Fenced,
    HeapClient, HeapRecord, LeaseBackend, LimitScope, PauseScope, RateLimit, Release, Result,
    StartClient, StepKey, StepWrite, StoreClient, Timestamp, WorkflowRunOutcome,
};

use crate::effects::RecordedEffects;
use crate::oplog::{OpLog, now_us};

/// The claim's lease duration in ms, as the history log keeps it.
fn duration_ms(request: &ClaimRequest) -> i64 {
    i64::try_from(request.duration.as_millis()).unwrap_or(i64::MAX)
}

/// How an acknowledgement's result is logged.
fn ack_result(result: &Result<Fenced<Acknowledged>>) -> OpResult {
    match result {
        Ok(Fenced::Accepted(_)) => OpResult::Accepted,
        Ok(Fenced::Lost) => OpResult::Lost,
        Err(e) => error_result(e),
    }
}

/// The outcome text of the history log: `suspended`, `completed:<json>`, `failed:<json>`.
pub fn outcome_text(outcome: &WorkflowRunOutcome) -> String {
    match outcome {
        WorkflowRunOutcome::Suspended => "suspended".to_owned(),
        WorkflowRunOutcome::Completed(j) => format!("completed:{}", j.as_str()),
        WorkflowRunOutcome::Failed(j) => format!("failed:{}", j.as_str()),
    }
}

/// The outcome text of a stored terminal outcome.
pub fn terminal_text(outcome: &ExecutionOutcome) -> String {
    format!("{}:{}", outcome.status(), outcome.text())
}

/// The cancel result text of the history log (rule 6): `cancelled`, `already_cancelled`,
/// `already_terminal`.
pub fn cancel_text(outcome: &CancelOutcome) -> &'static str {
    match outcome {
        CancelOutcome::Cancelled { .. } => history::CANCELLED,
        CancelOutcome::AlreadyCancelled(_) => history::ALREADY_CANCELLED,
        CancelOutcome::AlreadyTerminal(_) => history::ALREADY_TERMINAL,
    }
}

/// The key a per-key control names; `None`: the namespace default.
fn scope_key(scope: &LimitScope) -> Option<String> {
    match scope {
        LimitScope::Default => None,
        LimitScope::Key(k) => Some(k.as_str().to_owned()),
    }
}

/// A backend that logs what it does.
pub struct Recorder {
    inner: Arc<dyn LeaseBackend>,
    log: Arc<OpLog>,
    process: u32,
    slow_renew_ms: Arc<AtomicU64>,
    /// The effect client, logging to the effect log (`crate::effects`).
    effects: Option<RecordedEffects>,
}

impl Recorder {
    /// A release (`how`: through `release_with`), logged as one `Release` operation.
    async fn recorded_release(
        &self,
        lease: &ExecutionLease,
        how: Option<&Release>,
    ) -> Result<Fenced<()>> {
        let seq = self.log.next_seq();
        let op = self.op(
            &lease.execution_id,
            lease.token.get(),
            now_us(),
            OpKind::Release {
                unstarted: how == Some(&Release::NotStarted),
            },
        );
        self.log.invoke(seq, &op);
        let result = match how {
            None => self.inner.release(lease).await,
            Some(how) => self.inner.release_with(lease, how).await,
        };
        let r = match &result {
            Ok(Fenced::Accepted(())) => OpResult::Accepted,
            Ok(Fenced::Lost) => OpResult::Lost,
            Err(e) => error_result(e),
        };
        self.finish(seq, op, r);
        result
    }

    /// Wraps `inner`, logging as `process`; renewals wait `slow_renew_ms` while it is > 0.
    pub fn new(
        inner: Arc<dyn LeaseBackend>,
        log: Arc<OpLog>,
        process: u32,
        slow_renew_ms: Arc<AtomicU64>,
    ) -> Self {
        Recorder {
            inner,
            log,
            process,
            slow_renew_ms,
            effects: None,
        }
    }

    /// Gives the recorder an effect client (without one, `effects()` is `None`).
    pub fn with_effects(mut self, effects: RecordedEffects) -> Self {
        self.effects = Some(effects);
        self
    }

    fn op(&self, execution: &ExecutionId, token: u64, start_us: i64, kind: OpKind) -> Op {
        Op {
            process: self.process,
            execution: execution.as_str().to_owned(),
            token,
            start_us,
            end_us: start_us,
            kind,
            result: OpResult::Unknown,
        }
    }

    /// Logs one accepted claim per lease, all with the claim call's start and end, each
    /// saying whether its record showed a first delivery (rule 9).
    fn log_claims(&self, start_us: i64, duration_ms: i64, claimed: &[Claimed]) {
        let end_us = now_us();
        for Claimed { lease, record } in claimed {
            let seq = self.log.next_seq();
            let mut op = self.op(
                &lease.execution_id,
                lease.token.get(),
                start_us,
                OpKind::Claim {
                    expires_at: lease.expires_at.as_millis(),
                    duration_ms,
                    first_delivery: record.is_first_delivery(lease),
                },
            );
            op.end_us = end_us;
            op.result = OpResult::Accepted;
            self.log.record(seq, op);
        }
    }

    /// Logs the invocation of an acknowledgement; returns its sequence number and op.
    fn invoke_ack(&self, lease: &ExecutionLease, outcome: &WorkflowRunOutcome) -> (u64, Op) {
        let seq = self.log.next_seq();
        let op = self.op(
            &lease.execution_id,
            lease.token.get(),
            now_us(),
            OpKind::Acknowledge {
                outcome: outcome_text(outcome),
            },
        );
        self.log.invoke(seq, &op);
        (seq, op)
    }

    /// Logs an unfenced control call (token 0) around `call`: its invocation first, then
    /// `accepted` (with what `learn` reads from the answer) or how its error reads.
    async fn control<T>(
        &self,
        execution: &str,
        kind: OpKind,
        call: impl Future<Output = Result<T>>,
        learn: fn(&T, &mut OpKind),
    ) -> Result<T> {
        let seq = self.log.next_seq();
        let start_us = now_us();
        let op = Op {
            process: self.process,
            execution: execution.to_owned(),
            token: 0,
            start_us,
            end_us: start_us,
            kind,
            result: OpResult::Unknown,
        };
        self.log.invoke(seq, &op);
        let result = call.await;
        let mut op = op;
        let r = match &result {
            Ok(answer) => {
                learn(answer, &mut op.kind);
                OpResult::Accepted
            }
            Err(e) => error_result(e),
        };
        self.finish(seq, op, r);
        result
    }

    fn finish(&self, seq: u64, mut op: Op, result: OpResult) {
        op.end_us = now_us();
        op.result = result;
        self.log.record(seq, op);
    }
}

/// Records claims, renewals, releases and acknowledgements; forwards the rest.
#[async_trait]
impl lease_core::ForwardExecution for Recorder {
    fn inner_execution(&self) -> &dyn ExecutionClient {
        &*self.inner
    }
    fn effects(&self) -> Option<&dyn EffectClient> {
        self.effects.as_ref().map(|e| e as &dyn EffectClient)
    }

    async fn claim_due_with_horizon(&self, request: ClaimRequest) -> Result<ClaimBatch> {
        let duration_ms = duration_ms(&request);
        let start_us = now_us();
        let result = self.inner.claim_due_with_horizon(request).await;
        if let Ok(batch) = &result {
            self.log_claims(start_us, duration_ms, &batch.claimed);
        }
        result
    }

    async fn acknowledge_and_claim(
        &self,
        ack: &Acknowledgement,
        next: ClaimRequest,
    ) -> Result<AckAndClaim> {
        let duration_ms = duration_ms(&next);
        let (seq, op) = self.invoke_ack(&ack.lease, &ack.outcome);
        let start_us = now_us();
        let result = self.inner.acknowledge_and_claim(ack, next).await;
        let logged = match &result {
            Ok(r) => ack_result(&Ok(r.acknowledged.clone())),
            Err(e) => error_result(e),
        };
        self.finish(seq, op, logged);
        if let Ok(r) = &result {
            self.log_claims(start_us, duration_ms, &r.next.claimed);
        }
        result
    }

    async fn renew(
        &self,
        lease: &ExecutionLease,
        duration: Duration,
    ) -> Result<Fenced<ExecutionLease>> {
        let slow = self.slow_renew_ms.load(Ordering::SeqCst);
        if slow > 0 {
            tokio::time::sleep(Duration::from_millis(slow)).await;
        }
        let seq = self.log.next_seq();
        let op = self.op(
            &lease.execution_id,
            lease.token.get(),
            now_us(),
            OpKind::Renew { expires_at: None },
        );
        let result = self.inner.renew(lease, duration).await;
        let (op, r) = match &result {
            Ok(Fenced::Accepted(l)) => (
                Op {
                    kind: OpKind::Renew {
                        expires_at: Some(l.expires_at.as_millis()),
                    },
                    ..op
                },
                OpResult::Accepted,
            ),
            Ok(Fenced::Lost) => (op, OpResult::Lost),
            Err(e) => (op, error_result(e)),
        };
        self.finish(seq, op, r);
        result
    }

    async fn release(&self, lease: &ExecutionLease) -> Result<Fenced<()>> {
        self.recorded_release(lease, None).await
    }

    // The dispatcher ends deliveries through `release_with` (saying whether a worker
    // started): forwarded unlogged, the checker would see those leases live until expiry.
    async fn release_with(&self, lease: &ExecutionLease, how: &Release) -> Result<Fenced<()>> {
        self.recorded_release(lease, Some(how)).await
    }

    async fn acknowledge(
        &self,
        lease: &ExecutionLease,
        outcome: &WorkflowRunOutcome,
    ) -> Result<Fenced<Acknowledged>> {
        let (seq, op) = self.invoke_ack(lease, outcome);
        let result = self.inner.acknowledge(lease, outcome).await;
        self.finish(seq, op, ack_result(&result));
        result
    }

    /// Logs the admission with its concurrency key and priority (history rule 7).
    async fn admit(&self, admission: &Admission) -> Result<ExecutionRecord> {
        let kind = OpKind::Admit {
            key: admission
                .concurrency_key
                .as_ref()
                .map(|k| k.as_str().to_owned()),
            priority: admission.priority.get(),
            due_at: None,
            workflow: admission.workflow.as_ref().map(|w| w.as_str().to_owned()),
        };
        let call = self.inner.admit(admission);
        let learn = |record: &ExecutionRecord, kind: &mut OpKind| {
            if let OpKind::Admit { due_at, .. } = kind {
                *due_at = record.due_at.map(Timestamp::as_millis);
            }
        };
        self.control(admission.id.as_str(), kind, call, learn).await
    }

    /// Logs each admission of the batch (the schedulers' path; history rules 9 and 10) as
    /// its own `admit` op: invoked before the call, then accepted with its record's due
    /// time, or how the batch's error reads (an error after some items is `Unknown`).
    async fn admit_batch(&self, admissions: &[Admission]) -> Result<Vec<ExecutionRecord>> {
        let invoked: Vec<(u64, Op)> = admissions
            .iter()
            .map(|a| {
                let seq = self.log.next_seq();
                let kind = OpKind::Admit {
                    key: a.concurrency_key.as_ref().map(|k| k.as_str().to_owned()),
                    priority: a.priority.get(),
                    due_at: None,
                    workflow: a.workflow.as_ref().map(|w| w.as_str().to_owned()),
                };
                let op = self.op(&a.id, 0, now_us(), kind);
                self.log.invoke(seq, &op);
                (seq, op)
            })
            .collect();
        let result = self.inner.admit_batch(admissions).await;
        for (i, (seq, mut op)) in invoked.into_iter().enumerate() {
            let r = match &result {
                Ok(records) => match (records.get(i), &mut op.kind) {
                    (Some(record), OpKind::Admit { due_at, .. }) => {
                        *due_at = record.due_at.map(Timestamp::as_millis);
                        OpResult::Accepted
                    }
                    _ => OpResult::Unknown,
                },
                Err(e) => error_result(e),
            };
            self.finish(seq, op, r);
        }
        result
    }

    /// Logs the limit set (history rule 7), with an empty execution.
    async fn set_concurrency_limit(
        &self,
        scope: &LimitScope,
        limit: Option<ConcurrencyLimit>,
    ) -> Result<()> {
        let kind = OpKind::SetLimit {
            key: scope_key(scope),
            limit: limit.map(ConcurrencyLimit::get),
        };
        let call = self.inner.set_concurrency_limit(scope, limit);
        self.control("", kind, call, |_, _| {}).await
    }

    /// Logs the attempt limit set (history rule 11), with an empty execution.
    async fn set_attempt_limit(
        &self,
        scope: &AttemptScope,
        limit: Option<AttemptLimit>,
    ) -> Result<()> {
        let kind = OpKind::SetAttemptLimit {
            workflow: match scope {
                AttemptScope::Default => None,
                AttemptScope::Workflow(w) => Some(w.as_str().to_owned()),
            },
            limit: limit.map(AttemptLimit::get),
        };
        let call = self.inner.set_attempt_limit(scope, limit);
        self.control("", kind, call, |_, _| {}).await
    }

    /// Logs the rate limit set (history rule 12), with an empty execution.
    async fn set_rate_limit(&self, scope: &LimitScope, limit: Option<RateLimit>) -> Result<()> {
        let kind = OpKind::SetRateLimit {
            key: scope_key(scope),
            rate: limit.map(|l| Rate {
                starts: l.starts(),
                period_ms: l.period_ms(),
            }),
        };
        let call = self.inner.set_rate_limit(scope, limit);
        self.control("", kind, call, |_, _| {}).await
    }

    /// Logs the key ordering set (history rule 13), with an empty execution.
    async fn set_key_ordering(&self, scope: &LimitScope, ordered: bool) -> Result<()> {
        let kind = OpKind::SetKeyOrdering {
            key: scope_key(scope),
            ordered,
        };
        let call = self.inner.set_key_ordering(scope, ordered);
        self.control("", kind, call, |_, _| {}).await
    }

    /// Logs the pause (history rule 8), with an empty execution. The torture run pauses
    /// the namespace only, so the op does not name a scope.
    async fn pause(&self, scope: &PauseScope) -> Result<bool> {
        let call = self.inner.pause(scope);
        self.control("", OpKind::Pause, call, |_, _| {}).await
    }

    /// Logs the resume (history rule 8), with an empty execution.
    async fn resume(&self, scope: &PauseScope) -> Result<bool> {
        let call = self.inner.resume(scope);
        self.control("", OpKind::Resume, call, |_, _| {}).await
    }

    /// Logs the cancel (for history rule 6) with token 0 and what it found.
    async fn cancel(&self, id: &ExecutionId, reason: &CancelReason) -> Result<CancelOutcome> {
        let seq = self.log.next_seq();
        let op = self.op(
            id,
            0,
            now_us(),
            OpKind::Cancel {
                result: String::new(),
            },
        );
        self.log.invoke(seq, &op);
        let result = self.inner.cancel(id, reason).await;
        let (op, r) = match &result {
            Ok(outcome) => (
                Op {
                    kind: OpKind::Cancel {
                        result: cancel_text(outcome).to_owned(),
                    },
                    ..op
                },
                OpResult::Accepted,
            ),
            Err(e) => (op, error_result(e)),
        };
        self.finish(seq, op, r);
        result
    }

    async fn acknowledge_batch(
        &self,
        acks: &[Acknowledgement],
    ) -> Result<Vec<Fenced<Acknowledged>>> {
        let invoked: Vec<_> = acks
            .iter()
            .map(|a| self.invoke_ack(&a.lease, &a.outcome))
            .collect();
        let result = self.inner.acknowledge_batch(acks).await;
        for (i, (seq, op)) in invoked.into_iter().enumerate() {
            let r = match &result {
                Ok(results) => match results.get(i) {
                    Some(r) => ack_result(&Ok(r.clone())),
                    None => OpResult::Unknown,
                },
                Err(e) => error_result(e),
            };
            self.finish(seq, op, r);
        }
        result
    }
}

/// Records step writes and reads; forwards the rest.
#[async_trait]
impl lease_core::ForwardHeap for Recorder {
    fn inner_heap(&self) -> &dyn HeapClient {
        &*self.inner
    }
    async fn write_step(
        &self,
        lease: &ExecutionLease,
        write: &StepWrite,
    ) -> Result<Fenced<HeapRecord>> {
        let seq = self.log.next_seq();
        let op = self.op(
            &lease.execution_id,
            lease.token.get(),
            now_us(),
            OpKind::WriteStep {
                step_key: write.step_key.as_str().to_owned(),
                step_attempt: write.step_attempt,
                written: write.response.as_str().to_owned(),
                recorded: None,
            },
        );
        let result = self.inner.write_step(lease, write).await;
        let (op, r) = match &result {
            Ok(Fenced::Accepted(record)) => {
                let mut op = op;
                if let OpKind::WriteStep { recorded, .. } = &mut op.kind {
                    *recorded = Some(record.response.as_str().to_owned());
                }
                (op, OpResult::Accepted)
            }
            Ok(Fenced::Lost) => (op, OpResult::Lost),
            Err(e) => (op, error_result(e)),
        };
        self.finish(seq, op, r);
        result
    }

    async fn read_step(
        &self,
        id: &ExecutionId,
        step_key: &StepKey,
        step_attempt: u32,
    ) -> Result<Option<HeapRecord>> {
        let start_us = now_us();
        let result = self.inner.read_step(id, step_key, step_attempt).await;
        if let Ok(Some(record)) = &result {
            let seq = self.log.next_seq();
            let op = self.op(
                id,
                record.token.get(),
                start_us,
                OpKind::ReadStep {
                    step_key: step_key.as_str().to_owned(),
                    step_attempt,
                    value: Some(record.response.as_str().to_owned()),
                },
            );
            self.finish(seq, op, OpResult::Accepted);
        }
        result
    }
}

/// Forwards stores.
impl lease_core::ForwardStore for Recorder {
    fn inner_store(&self) -> &dyn StoreClient {
        &*self.inner
    }
}

/// Forwards starts.
impl lease_core::ForwardStart for Recorder {
    fn inner_start(&self) -> &dyn StartClient {
        &*self.inner
    }
}
