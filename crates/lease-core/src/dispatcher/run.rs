//! One delivery from claim to acknowledgement or release: the worker raced against
//! cancellation, and the renewal task beside it (RFC 002 "Leases"; design.md section 4).

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::FutureExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::dispatcher::acks;
use crate::dispatcher::delivery::Delivery;
use crate::dispatcher::error::DeliveryError;
use crate::dispatcher::runtime::Shared;
use crate::dispatcher::worker::Reply;
use crate::error::{LeaseError, Result};
use crate::execution::{Acknowledged, Acknowledgement, Claimed, WorkflowRunOutcome};
use crate::lease::{ExecutionLease, Fenced};

/// Attempts for an acknowledgement or release that fails with a retryable error.
const WRITE_ATTEMPTS: u32 = 3;
/// Pause between such attempts.
const WRITE_BACKOFF: Duration = Duration::from_millis(50);

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

pub(crate) async fn run_delivery(shared: Arc<Shared>, claimed: Claimed, slot: SlotGuard) {
    let span = tracing::info_span!(
        "delivery",
        execution_id = %claimed.lease.execution_id,
        token = claimed.lease.token.get()
    );
    deliver(shared, claimed, slot).instrument(span).await;
}

async fn deliver(shared: Arc<Shared>, claimed: Claimed, _slot: SlotGuard) {
    let Claimed { lease, record } = claimed;
    tracing::info!(expires_at = lease.expires_at.as_millis(), "claim");
    let delivery = Delivery::new(
        shared.backend.clone(),
        lease,
        record,
        shared.root.child_token(),
    );

    let stop_renewal = CancellationToken::new();
    let mut renewal = AbortOnDrop(tokio::spawn(
        renew_loop(shared.clone(), delivery.clone(), stop_renewal.clone())
            .instrument(tracing::Span::current()),
    ));

    let worker = AssertUnwindSafe(shared.worker.run(delivery.clone())).catch_unwind();
    let ended = tokio::select! {
        biased;
        () = delivery.cancelled() => Ended::Cancelled,
        result = worker => match result {
            Ok(reply) => Ended::Returned(reply),
            Err(panic) => Ended::Panicked(panic_message(&*panic)),
        },
    };

    // No renewal may run concurrently with the acknowledgement or release.
    stop_renewal.cancel();
    let _ = (&mut renewal.0).await;

    if shared.killed.load(Ordering::SeqCst) {
        return;
    }
    if let Ended::Returned(Err(DeliveryError::Lost)) = &ended {
        delivery.mark_lost();
    }
    if delivery.is_lost() {
        shared.metrics.lost();
        tracing::warn!("lost: the delivery stopped with no acknowledgement");
        return;
    }
    match ended {
        Ended::Cancelled | Ended::Returned(Err(DeliveryError::Cancelled)) => {
            if shared.release_cancelled.load(Ordering::SeqCst) {
                release(&shared, &delivery.lease()).await;
            }
        }
        Ended::Returned(Ok(Reply::Acknowledge(outcome))) => {
            acknowledge(&shared, &delivery.lease(), outcome).await;
        }
        Ended::Returned(Ok(Reply::Retry)) => {
            tracing::info!("worker replied retry");
            release(&shared, &delivery.lease()).await;
        }
        Ended::Returned(Err(e)) => {
            shared.metrics.worker_failed();
            tracing::warn!(error = %e, "worker failed");
            release(&shared, &delivery.lease()).await;
        }
        Ended::Panicked(message) => {
            shared.metrics.worker_failed();
            tracing::error!(panic = %message, "worker panicked");
            release(&shared, &delivery.lease()).await;
        }
    }
}

/// Renews the lease every `renew_every` until stopped; `Lost` cancels the worker at once.
async fn renew_loop(shared: Arc<Shared>, delivery: Delivery, stop: CancellationToken) {
    let every = shared.options.get_renew_every();
    let retry_after = (every / 4).max(Duration::from_millis(1));
    let duration = shared.options.get_lease_duration();
    let mut next = Instant::now() + every;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = delivery.cancelled() => return,
            () = tokio::time::sleep_until(next) => {}
        }
        match shared
            .backend
            .renew(delivery.claimed_lease(), duration)
            .await
        {
            Ok(Fenced::Accepted(lease)) => {
                shared.metrics.renewed();
                tracing::debug!(expires_at = lease.expires_at.as_millis(), "renew");
                delivery.set_lease(lease);
                next = Instant::now() + every;
            }
            Ok(Fenced::Lost) => {
                tracing::warn!("lost on renewal: cancelling the worker");
                delivery.mark_lost();
                return;
            }
            Err(e) => {
                shared.metrics.backend_error();
                tracing::warn!(error = %e, "renewal failed; retrying");
                next = Instant::now() + retry_after;
            }
        }
    }
}

async fn acknowledge(shared: &Arc<Shared>, lease: &ExecutionLease, outcome: WorkflowRunOutcome) {
    let ack = Acknowledgement {
        lease: lease.clone(),
        outcome,
    };
    let result = acks::acknowledge(shared, ack).await;
    match result {
        Some(Fenced::Accepted(ack)) => {
            shared.metrics.acknowledged();
            let status = match &ack {
                Acknowledged::Suspended => "suspended",
                Acknowledged::Terminal(crate::ExecutionOutcome::Completed(_)) => "completed",
                Acknowledged::Terminal(crate::ExecutionOutcome::Failed(_)) => "failed",
            };
            tracing::info!(status, "acknowledge");
        }
        Some(Fenced::Lost) => {
            shared.metrics.lost();
            tracing::warn!("lost on acknowledge");
        }
        None => {}
    }
}

async fn release(shared: &Shared, lease: &ExecutionLease) {
    match with_retries(shared, "release", || shared.backend.release(lease)).await {
        Some(Fenced::Accepted(())) => {
            shared.metrics.released();
            tracing::info!("release");
        }
        Some(Fenced::Lost) => {
            shared.metrics.lost();
            tracing::warn!("lost on release");
        }
        None => {}
    }
}

/// Runs a fenced dispatcher write, retrying errors that certainly changed nothing. `None`
/// when it failed: the lease is then left to expire and the execution is delivered again.
pub(crate) async fn with_retries<'a, T, F, Fut>(
    shared: &Shared,
    operation: &str,
    mut call: F,
) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, LeaseError>> + 'a,
{
    let mut attempt = 1;
    loop {
        if shared.killed.load(Ordering::SeqCst) {
            return None;
        }
        match call().await {
            Ok(v) => return Some(v),
            Err(e) => {
                shared.metrics.backend_error();
                if e.is_retryable() && attempt < WRITE_ATTEMPTS {
                    tracing::warn!(error = %e, operation, attempt, "retrying");
                    attempt += 1;
                    tokio::time::sleep(WRITE_BACKOFF).await;
                    continue;
                }
                tracing::error!(
                    error = %e,
                    operation,
                    "failed; the lease will expire and the execution be delivered again"
                );
                return None;
            }
        }
    }
}

fn panic_message(panic: &(dyn Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}
