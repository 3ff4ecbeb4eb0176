//! Acknowledgements that queue up while one is in flight go out together as one
//! `acknowledge_batch` (design.md section 4, "acknowledgement batching").
//!
//! The first delivery to acknowledge while nothing is in flight sends its own
//! acknowledgement at once (no added wait at low load). Deliveries acknowledging meanwhile
//! queue; when the leader's call returns, one flusher task sends everything queued as one
//! batch, then whatever queued during that batch, until the queue is empty. Each item keeps
//! its own fencing check (the backend applies `acknowledge`'s rule per item), so batching
//! changes round trips and commits, not outcomes.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use crate::dispatcher::call::guarded;
use crate::dispatcher::run::with_retries;
use crate::dispatcher::runtime::Shared;
use crate::error::LeaseError;
use crate::execution::{Acknowledged, Acknowledgement, WorkflowRunOutcome};
use crate::lease::Fenced;
use crate::limits::MAX_ACK_BATCH;

/// The result a delivery gets for its acknowledgement: `None` when it failed (the lease is
/// then left to expire and the execution delivered again).
pub(crate) type AckResult = Option<Fenced<Acknowledged>>;

/// The queue of one dispatcher.
#[derive(Default)]
pub(crate) struct AckQueue {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// A leader or flusher is sending; new acknowledgements queue.
    in_flight: bool,
    queued: Vec<(Acknowledgement, oneshot::Sender<AckResult>)>,
}

impl AckQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Acknowledgements waiting behind the one in flight.
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        self.lock().queued.len()
    }
}

/// Acknowledges one delivery, directly when nothing is in flight, else in the next batch.
pub(crate) async fn acknowledge(shared: &Arc<Shared>, ack: Acknowledgement) -> AckResult {
    let turn = {
        let mut state = shared.acks.lock();
        if state.in_flight {
            let (tx, rx) = oneshot::channel();
            state.queued.push((ack, tx));
            Err(rx)
        } else {
            state.in_flight = true;
            Ok(ack)
        }
    };
    match turn {
        Err(queued) => queued.await.unwrap_or(None),
        Ok(ack) => {
            // Leader: whatever happens to this future, the guard hands the queue on.
            let _handoff = Handoff(shared.clone());
            send_one(shared, &ack).await
        }
    }
}

/// Runs when the leader is done (or its task was dropped): ends the in-flight state, or
/// starts a flusher for what queued meanwhile.
struct Handoff(Arc<Shared>);

impl Drop for Handoff {
    fn drop(&mut self) {
        if let Some(batch) = take_batch(&self.0) {
            match tokio::runtime::Handle::try_current() {
                Ok(handle) => {
                    handle.spawn(flush_until_empty(self.0.clone(), batch));
                }
                // No runtime (it is shutting down): the queued deliveries get `None`.
                Err(_) => self.0.acks.lock().in_flight = false,
            }
        }
    }
}

/// Most outcome bytes in one batch (at least one item is always sent): keeps a batch of
/// large outcomes within what one statement or script call should carry.
const MAX_BATCH_BYTES: usize = crate::limits::MAX_PAYLOAD_BYTES;

/// Takes queued items, oldest first, up to [`MAX_ACK_BATCH`] items and [`MAX_BATCH_BYTES`]
/// of outcomes, or clears the in-flight state when none are queued.
fn take_batch(shared: &Shared) -> Option<Vec<(Acknowledgement, oneshot::Sender<AckResult>)>> {
    let mut state = shared.acks.lock();
    if state.queued.is_empty() {
        state.in_flight = false;
        return None;
    }
    let mut bytes = 0;
    let mut n = 0;
    for (ack, _) in state.queued.iter().take(MAX_ACK_BATCH) {
        bytes += outcome_bytes(&ack.outcome);
        if n > 0 && bytes > MAX_BATCH_BYTES {
            break;
        }
        n += 1;
    }
    Some(state.queued.drain(..n).collect())
}

fn outcome_bytes(outcome: &WorkflowRunOutcome) -> usize {
    match outcome {
        WorkflowRunOutcome::Suspended => 0,
        WorkflowRunOutcome::Completed(j) | WorkflowRunOutcome::Failed(j) => j.as_str().len(),
    }
}

async fn flush_until_empty(
    shared: Arc<Shared>,
    mut batch: Vec<(Acknowledgement, oneshot::Sender<AckResult>)>,
) {
    loop {
        let (acks, replies): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
        let results = send_batch(&shared, &acks).await;
        for (reply, result) in replies.into_iter().zip(results) {
            let _ = reply.send(result);
        }
        match take_batch(&shared) {
            Some(next) => batch = next,
            None => return,
        }
    }
}

async fn send_one(shared: &Shared, ack: &Acknowledgement) -> AckResult {
    with_retries(shared, "acknowledge", || {
        guarded(
            shared,
            "acknowledge",
            shared.backend.acknowledge(&ack.lease, &ack.outcome),
        )
    })
    .await
}

/// One `acknowledge_batch` call (a single item goes through `acknowledge`). An error that
/// certainly applied nothing falls back to one acknowledgement per item, each with retries;
/// `OutcomeUnknown` leaves every lease to expire (a retry could misreport an applied
/// acknowledgement as lost).
async fn send_batch(shared: &Shared, acks: &[Acknowledgement]) -> Vec<AckResult> {
    if let [ack] = acks {
        return vec![send_one(shared, ack).await];
    }
    if shared.killed.load(Ordering::SeqCst) {
        return vec![None; acks.len()];
    }
    match guarded(
        shared,
        "acknowledge_batch",
        shared.backend.acknowledge_batch(acks),
    )
    .await
    {
        Ok(results) if results.len() == acks.len() => results.into_iter().map(Some).collect(),
        Ok(results) => {
            shared.metrics.backend_error();
            tracing::error!(
                sent = acks.len(),
                got = results.len(),
                "acknowledge_batch returned a result count unlike the batch's; the leases will expire"
            );
            vec![None; acks.len()]
        }
        Err(e @ LeaseError::OutcomeUnknown { .. }) => {
            shared.metrics.backend_error();
            tracing::error!(
                error = %e,
                items = acks.len(),
                "acknowledge_batch outcome unknown; unapplied leases will expire"
            );
            vec![None; acks.len()]
        }
        Err(e) => {
            shared.metrics.backend_error();
            tracing::warn!(
                error = %e,
                items = acks.len(),
                "acknowledge_batch failed; acknowledging one by one"
            );
            let mut results = Vec::with_capacity(acks.len());
            for ack in acks {
                results.push(send_one(shared, ack).await);
            }
            results
        }
    }
}
