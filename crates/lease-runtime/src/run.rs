//! One delivery from claim to acknowledgement or release: the worker raced against
//! cancellation, and the renewal task beside it (RFC 002 "Leases").

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::FutureExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::acks;
use crate::call::{guarded, panic_message, with_retries};
use crate::delivery::Delivery;
use crate::error::DeliveryError;
use crate::shared::Shared;
use crate::worker::Reply;
use lease_core::attempts::{ErrorNote, Release};
use lease_core::error::{LeaseError, Result};
use lease_core::execution::{Acknowledgement, Claimed, WorkflowRunOutcome};
use lease_core::lease::{ExecutionLease, Fenced};

/// Holds one of the dispatcher's `concurrency` slots; freeing it wakes the claim loop.
pub(crate) struct SlotGuard(Arc<Shared>);

impl SlotGuard {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        shared.metrics.delivery_started();
        SlotGuard(shared)
    }
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        self.0.metrics.delivery_ended();
        self.0.wake.notify_one();
        self.0.idle.changed();
    }
}

/// Aborts a spawned task when dropped (so an aborted delivery takes its renewal with it).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How the worker's part of a delivery ended.
enum Ended {
    /// The delivery was cancelled before the worker replied.
    Cancelled,
    /// The worker returned.
    Returned(Result<Reply, DeliveryError>),
    /// The worker panicked.
    Panicked(String),
}

/// Runs one delivery claimed by a call sent at `claim_sent` (the start of its local
/// deadline).
pub(crate) async fn run_delivery(
    shared: Arc<Shared>,
    claimed: Claimed,
    slot: SlotGuard,
    claim_sent: Instant,
) {
    let _slot = slot;
    let mut next = Some((claimed, claim_sent));
    // An acknowledgement that claimed the next execution hands it to this same task and
    // slot; so does a lease held by prefetch when this delivery ends.
    while let Some((claimed, sent)) = next.take() {
        let span = delivery_span(&claimed);
        next = deliver(shared.clone(), claimed, sent)
            .instrument(span)
            .await;
        if next.is_none() {
            next = take_held(&shared).await;
        }
    }
}

/// The span of one delivery: every event of it carries the execution, the token and the
/// workflow. With feature `otel` it continues the trace stored at admission (its parent,
/// and a link; docs/decisions/0041-traces-metrics-and-logs.md).
///
/// At level `error`, so that a subscriber showing only warnings and errors still enables it:
/// an `info` span would be filtered out there, and a worker failure's `warn` line would not
/// say which execution failed.
pub(crate) fn delivery_span(claimed: &Claimed) -> tracing::Span {
    let record = &claimed.record;
    let span = tracing::error_span!(
        "delivery",
        execution_id = %claimed.lease.execution_id,
        token = claimed.lease.token.get(),
        workflow = record.workflow.as_ref().map(|w| w.as_str()),
    );
    #[cfg(feature = "otel")]
    if let Some(context) = &record.trace_context {
        lease_core::trace::otel::continue_trace(&span, context);
    }
    span
}

/// Releases a held lease that never started (its hold ended, or shutdown began), in its
/// delivery's span.
pub(crate) async fn release_unstarted(shared: &Shared, held: &Claimed) {
    shared.metrics.prefetch_released();
    let span = delivery_span(held);
    async {
        tracing::info!("held lease not started: releasing it unrun");
        release(shared, &held.lease, &Release::NotStarted).await;
        shared.idle.changed();
    }
    .instrument(span)
    .await;
}

/// The next held lease for this slot, while the dispatcher claims; held leases whose hold
/// ended are released unrun on the way.
async fn take_held(shared: &Arc<Shared>) -> Next {
    if !shared.claiming() {
        return None;
    }
    let taken = shared.prefetch.take(Instant::now());
    for expired in taken.expired {
        release_unstarted(shared, &expired.claimed).await;
    }
    let next = taken.next.map(|h| (h.claimed, h.sent));
    if next.is_some() {
        // The claim loop refills once enough held leases were taken.
        shared.wake.notify_one();
    }
    next
}

/// One delivery; returns the execution its acknowledgement claimed next, if any.
async fn deliver(shared: Arc<Shared>, claimed: Claimed, claim_sent: Instant) -> Next {
    let Claimed { lease, record } = claimed;
    shared.idle.delivery_started();
    tracing::info!(expires_at = lease.expires_at.as_millis(), "claim");
    let delivery = Delivery::new(
        shared.backend.clone(),
        lease,
        record,
        shared.root.child_token(),
    )
    .exporting(shared.metrics.export().clone());
    delivery.set_deadline(local_deadline(&shared, claim_sent));

    let stop_renewal = CancellationToken::new();
    // The first renewal is due a renewal interval after the claim was sent, whether the
    // lease started at once or was held by prefetch first.
    let first_renewal = claim_sent + shared.options.get_renew_every();
    let mut renewal = AbortOnDrop(tokio::spawn(
        renew_loop(
            shared.clone(),
            delivery.clone(),
            stop_renewal.clone(),
            first_renewal,
        )
        .instrument(tracing::Span::current()),
    ));

    let running = shared.prefetch.worker_started();
    let worker = AssertUnwindSafe(shared.worker.run(delivery.clone())).catch_unwind();
    let ended = tokio::select! {
        biased;
        () = delivery.cancelled() => Ended::Cancelled,
        result = worker => match result {
            Ok(reply) => Ended::Returned(reply),
            Err(panic) => Ended::Panicked(panic_message(&*panic)),
        },
    };

    // A cancelled worker's run was cut short: its time would pull the average down and
    // make prefetch expect slots to free sooner than they do, so only finished runs count.
    if matches!(ended, Ended::Cancelled) {
        drop(running);
    } else {
        running.ended();
    }
    let bound = shared.prefetch_bound.load(Ordering::SeqCst);
    let in_flight = shared.metrics.in_flight();
    if shared.prefetch.room(&shared.options, in_flight, bound).take > 0 {
        // Prefetch may start (or refill): let the claim loop look.
        shared.wake.notify_one();
    }
    // No renewal may run concurrently with the acknowledgement or release.
    stop_renewal.cancel();
    let _ = (&mut renewal.0).await;

    if shared.killed.load(Ordering::SeqCst) {
        return None;
    }
    if let Ended::Returned(Err(DeliveryError::Lost)) = &ended {
        delivery.mark_lost();
    }
    if delivery.is_lost() {
        shared.metrics.lost();
        tracing::warn!("lost: the delivery stopped with no acknowledgement");
        return None;
    }
    settle(&shared, &delivery, ended).await
}

/// Ends a delivery whose worker `ended` (and was not lost): acknowledges what it replied,
/// or releases it for redelivery.
async fn settle(shared: &Arc<Shared>, delivery: &Delivery, ended: Ended) -> Next {
    match ended {
        Ended::Cancelled | Ended::Returned(Err(DeliveryError::Cancelled)) => {
            if shared.release_cancelled.load(Ordering::SeqCst) {
                let note = ErrorNote::new("cancelled", "the dispatcher stopped the worker");
                release(shared, &delivery.lease(), &Release::Failed(note)).await;
            }
        }
        Ended::Returned(Ok(Reply::Acknowledge(outcome))) => {
            return acknowledge(shared, &delivery.lease(), outcome, delivery.deadline()).await;
        }
        Ended::Returned(Ok(Reply::Retry)) => {
            tracing::info!("worker replied retry");
            release(shared, &delivery.lease(), &Release::Retry).await;
        }
        Ended::Returned(Err(e)) => match e.acknowledgement() {
            Some(outcome) => {
                log_acknowledged_error(shared, &e);
                return acknowledge(shared, &delivery.lease(), outcome, delivery.deadline()).await;
            }
            None => {
                shared.metrics.worker_failed();
                tracing::warn!(error = %e, "worker failed");
                release(shared, &delivery.lease(), &failed("error", &e)).await;
            }
        },
        Ended::Panicked(message) => {
            shared.metrics.worker_failed();
            tracing::error!(panic = %message, "worker panicked");
            release(shared, &delivery.lease(), &failed("panic", &message)).await;
        }
    }
    None
}

/// Logs (and counts) an error the delivery is acknowledged for: a sleep, the workflow's own
/// failure, or an execution no redelivery can cure (a worker failure, at `warn`).
fn log_acknowledged_error(shared: &Shared, e: &DeliveryError) {
    if e.is_refusal() {
        shared.metrics.worker_failed();
        tracing::warn!(error = %e, "cannot run or store this execution: failing it");
    } else if matches!(e, DeliveryError::Sleeping { .. }) {
        tracing::debug!(reason = %e, "durable sleep: suspending");
    } else {
        tracing::info!(error = %e, "the workflow failed");
    }
}

/// The execution an acknowledgement claimed next, with the send time of that claim.
type Next = Option<(Claimed, Instant)>;

/// The local deadline of a lease claimed or renewed by a call sent at `sent`: the lease
/// duration less the margin, on the monotonic clock. The backend started the
/// lease no earlier than `sent`, so the lease cannot expire before this instant unless the
/// local clock runs slower than the backend's by more than the margin.
fn local_deadline(shared: &Shared, sent: Instant) -> Instant {
    let opts = &shared.options;
    sent + opts.get_lease_duration() - opts.get_deadline_margin()
}

/// Renews the lease every `renew_every` until stopped. `Lost`, a permanent error (bad
/// input, schema) or reaching the local deadline without a successful renewal marks the
/// delivery lost and cancels the worker at once (RFC 002: "A holder whose lease is lost will
/// stop"; a worker that cannot renew stops before its lease can expire, so no other holder
/// can be running beside it).
async fn renew_loop(
    shared: Arc<Shared>,
    delivery: Delivery,
    stop: CancellationToken,
    first: Instant,
) {
    let every = shared.options.get_renew_every();
    let retry_after = (every / 4).max(Duration::from_millis(1));
    let duration = shared.options.get_lease_duration();
    let mut next = first;
    loop {
        let deadline = delivery
            .deadline()
            .unwrap_or_else(|| Instant::now() + duration);
        tokio::select! {
            () = stop.cancelled() => return,
            () = delivery.cancelled() => return,
            () = tokio::time::sleep_until(deadline) => return deadline_passed(&delivery),
            () = tokio::time::sleep_until(next) => {}
        }
        let sent = Instant::now();
        let span = tracing::info_span!("renew");
        let renewal = guarded(
            &shared,
            "renew",
            shared.backend.renew(delivery.claimed_lease(), duration),
        )
        .instrument(span.clone());
        let result = tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep_until(deadline) => return deadline_passed(&delivery),
            result = renewal => result,
        };
        match span.in_scope(|| renewed(&shared, &delivery, result, sent)) {
            Some(ok) => next = Instant::now() + if ok { every } else { retry_after },
            None => return,
        }
    }
}

/// Books a renewal's `result` (in its span): `Some(true)` renewed, `Some(false)` failed and
/// worth retrying, `None` the delivery is lost (and marked so).
fn renewed(
    shared: &Shared,
    delivery: &Delivery,
    result: Result<Fenced<ExecutionLease>>,
    sent: Instant,
) -> Option<bool> {
    match result {
        Ok(Fenced::Accepted(lease)) => {
            shared.metrics.renewed();
            tracing::debug!(expires_at = lease.expires_at.as_millis(), "renew");
            delivery.set_lease(lease);
            delivery.set_deadline(local_deadline(shared, sent));
            Some(true)
        }
        Ok(Fenced::Lost) => {
            tracing::warn!(
                operation = "renew",
                "lost on renewal: cancelling the worker"
            );
            delivery.mark_lost();
            None
        }
        Err(e) if renewal_error_is_permanent(&e) => {
            shared.metrics.backend_error();
            tracing::error!(error = %e, "renewal refused: cancelling the worker as lost");
            delivery.mark_lost();
            None
        }
        Err(e) => {
            shared.metrics.backend_error();
            tracing::warn!(error = %e, "renewal failed; retrying");
            Some(false)
        }
    }
}

/// The local deadline passed with no successful renewal: the lease may have expired and
/// been claimed elsewhere, so the worker stops and makes no further fenced write.
fn deadline_passed(delivery: &Delivery) {
    if !delivery.is_lost() {
        tracing::warn!(
            "no successful renewal before the local lease deadline: cancelling the worker"
        );
        delivery.mark_lost();
    }
}

/// A renewal error that retrying cannot fix: the lease or its input is wrong (foreign
/// token, unknown execution, invalid input) or the store is not ours (schema).
fn renewal_error_is_permanent(e: &LeaseError) -> bool {
    e.is_bad_input() || matches!(e, LeaseError::Schema { .. })
}

async fn acknowledge(
    shared: &Arc<Shared>,
    lease: &ExecutionLease,
    outcome: WorkflowRunOutcome,
    deadline: Option<Instant>,
) -> Next {
    let ack = Acknowledgement {
        lease: lease.clone(),
        outcome,
    };
    let span = tracing::info_span!("acknowledge", status = outcome_status(&ack.outcome));
    if shared.claiming() && shared.prefetch.has_held() {
        // A held lease waits for this slot: it starts now, the acknowledgement goes out in
        // the background (batched with others, each item fenced by its own token).
        span.in_scope(|| acks::acknowledge_detached(shared, ack, deadline));
        return None;
    }
    async {
        let (result, next) = acks::acknowledge(shared, ack, deadline).await;
        acks::record(shared, &result);
        next
    }
    .instrument(span)
    .await
}

/// The status an acknowledgement asks for (`suspended`, `completed`, `failed`).
fn outcome_status(outcome: &WorkflowRunOutcome) -> &'static str {
    match outcome {
        WorkflowRunOutcome::Suspended => "suspended",
        WorkflowRunOutcome::Completed(_) => "completed",
        WorkflowRunOutcome::Failed(_) => "failed",
    }
}

/// A release for a worker's failure of `kind`: its message becomes the last error.
fn failed(kind: &str, error: &dyn std::fmt::Display) -> Release {
    Release::Failed(ErrorNote::new(kind, error.to_string()))
}

/// Releases `lease` (fenced) saying how its delivery went, with retries of errors that
/// certainly changed nothing.
pub(crate) async fn release(shared: &Shared, lease: &ExecutionLease, how: &Release) {
    match with_retries(shared, "release", || {
        guarded(shared, "release", shared.backend.release_with(lease, how))
    })
    .await
    {
        Some(Fenced::Accepted(())) => {
            shared.metrics.released();
            tracing::info!("release");
        }
        Some(Fenced::Lost) => {
            shared.metrics.lost();
            tracing::warn!(operation = "release", "lost on release");
        }
        None => {}
    }
}
