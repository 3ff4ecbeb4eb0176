//! Acknowledgements that queue up while one is in flight go out together as one
//! `acknowledge_batch`, so a busy dispatcher spends one round trip and one commit on many.
//!
//! The first delivery to acknowledge while nothing is in flight sends its own
//! acknowledgement at once (no added wait at low load). Deliveries acknowledging meanwhile
//! queue; when the leader's call returns, one flusher task sends everything queued as one
//! batch, then whatever queued during that batch, until the queue is empty. Each item keeps
//! its own fencing check (the backend applies `acknowledge`'s rule per item), so batching
//! changes round trips and commits, not outcomes. An item whose delivery's local deadline
//! passed while it waited is not sent (RFC 002: a holder whose lease may have expired stops
//! writing): its lease is left to expire and the execution is
//! delivered again, where replay absorbs the work.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::oneshot;
use tracing::Instrument;

use crate::ack_queue::{AckResult, Queued, ReplyTo};
use crate::call::guarded;
use crate::call::with_retries;
use crate::shared::Shared;
use lease_core::error::LeaseError;
use lease_core::execution::{
    AckAndClaim, Acknowledged, Acknowledgement, ClaimRequest, Claimed, WorkflowRunOutcome,
};
use lease_core::lease::Fenced;
use lease_core::limits::MAX_ACK_BATCH;
use lease_core::time::Timestamp;
use tokio::time::Instant;

impl ReplyTo {
    fn answer(self, shared: &Shared, result: AckResult) {
        match self {
            ReplyTo::Waiting(tx) => {
                let _ = tx.send(result);
            }
            ReplyTo::Detached(span) => {
                span.in_scope(|| record(shared, &result));
                shared.detached.finished();
                shared.idle.changed();
            }
        }
    }
}

/// Counts and logs an acknowledgement's result (`None`: it failed and was logged then).
pub(crate) fn record(shared: &Shared, result: &AckResult) {
    match result {
        Some(Fenced::Accepted(ack)) => {
            shared.metrics.acknowledged();
            let status = match ack {
                Acknowledged::Suspended => "suspended",
                Acknowledged::Terminal(outcome) => outcome.status().as_str(),
            };
            tracing::info!(status, "acknowledge");
        }
        Some(Fenced::Lost) => {
            shared.metrics.lost();
            tracing::warn!(operation = "acknowledge", "lost on acknowledge");
        }
        None => {}
    }
}

/// Acknowledges one delivery, directly when nothing is in flight, else in the next batch.
/// A direct acknowledgement also claims the next due execution in the same atomic step
/// (`acknowledge_and_claim`: one round trip per delivery at low concurrency) while the
/// dispatcher is claiming: that claim comes
/// back for this delivery's task to run in the same slot.
pub(crate) async fn acknowledge(
    shared: &Arc<Shared>,
    ack: Acknowledgement,
    deadline: Option<Instant>,
) -> (AckResult, Option<(Claimed, Instant)>) {
    let (reply, rx) = oneshot::channel();
    let lead = shared
        .acks
        .queue_or_lead(ack, deadline, || ReplyTo::Waiting(reply));
    match lead {
        None => (rx.await.unwrap_or(None), None),
        Some(ack) => {
            // Leader: whatever happens to this future, the guard hands the queue on.
            let _handoff = Handoff(shared.clone());
            if shared.claiming() {
                send_one_and_claim(shared, &ack).await
            } else {
                (send_one(shared, &ack).await, None)
            }
        }
    }
}

/// Acknowledges one delivery in the background: its slot goes on to a held
/// lease at once. Sent at once by a task of its own when nothing is in flight, else in the
/// next batch, with the same fencing and deadline rules as [`acknowledge`]; the result is
/// counted where it arrives, and the dispatcher's drain waits for it.
pub(crate) fn acknowledge_detached(
    shared: &Arc<Shared>,
    ack: Acknowledgement,
    deadline: Option<Instant>,
) {
    shared.detached.started();
    let lead =
        shared.acks.queue_or_lead(
            ack,
            deadline,
            || ReplyTo::Detached(tracing::Span::current()),
        );
    if let Some(ack) = lead {
        let shared = shared.clone();
        let span = tracing::Span::current();
        tokio::spawn(
            async move {
                let _handoff = Handoff(shared.clone());
                let result = send_one(&shared, &ack).await;
                ReplyTo::Detached(tracing::Span::current()).answer(&shared, result);
            }
            .instrument(span),
        );
    }
}

/// `acknowledge_and_claim` with a claim of one (this delivery's slot), with retries of
/// errors that certainly changed nothing. The claim feeds the claim loop's horizon; an
/// empty one tells the claim loop that the freed slot needs no claim of its own.
async fn send_one_and_claim(
    shared: &Shared,
    ack: &Acknowledgement,
) -> (AckResult, Option<(Claimed, Instant)>) {
    let request = ClaimRequest {
        now: Timestamp::MAX,
        limit: 1,
        duration: shared.options.get_lease_duration(),
    };
    let sent = Instant::now();
    let seq = shared.idle.claim_sending();
    let result = with_retries(shared, "acknowledge_and_claim", || {
        guarded(
            shared,
            "acknowledge_and_claim",
            shared.backend.acknowledge_and_claim(ack, request),
        )
    })
    .await;
    let Some(AckAndClaim { acknowledged, next }) = result else {
        return (None, None);
    };
    let got = next.claimed.len();
    shared.metrics.claim_call(got);
    shared.claimed_by_ack(next.now, next.next_claimable_at, got, (sent, seq));
    let claimed = next.claimed.into_iter().next().map(|c| (c, sent));
    (Some(acknowledged), claimed)
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
                Err(_) => {
                    self.0.acks.lock().in_flight = false;
                    for (_, reply) in batch {
                        reply.answer(&self.0, None);
                    }
                }
            }
        }
    }
}

/// Most outcome bytes in one batch (at least one item is always sent): keeps a batch of
/// large outcomes within what one statement or script call should carry.
const MAX_BATCH_BYTES: usize = lease_core::limits::MAX_PAYLOAD_BYTES;

/// Takes queued items, oldest first, up to [`MAX_ACK_BATCH`] items and [`MAX_BATCH_BYTES`]
/// of outcomes, or clears the in-flight state when none are queued. Items past their
/// local deadline are answered `None` here, unsent.
fn take_batch(shared: &Shared) -> Option<Vec<(Acknowledgement, ReplyTo)>> {
    let mut state = shared.acks.lock();
    let now = Instant::now();
    let (late, live): (Vec<Queued>, Vec<Queued>) = std::mem::take(&mut state.queued)
        .into_iter()
        .partition(|q| q.deadline.is_some_and(|d| d <= now));
    state.queued = live;
    for q in late {
        shared.metrics.lost();
        tracing::warn!(
            execution_id = %q.ack.lease.execution_id,
            token = q.ack.lease.token.get(),
            "the local lease deadline passed while the acknowledgement waited: not sent, the \
             lease is left to expire"
        );
        q.reply.answer(shared, None);
    }
    if state.queued.is_empty() {
        state.in_flight = false;
        return None;
    }
    let mut bytes = 0;
    let mut n = 0;
    for q in state.queued.iter().take(MAX_ACK_BATCH) {
        bytes += outcome_bytes(&q.ack.outcome);
        if n > 0 && bytes > MAX_BATCH_BYTES {
            break;
        }
        n += 1;
    }
    Some(state.queued.drain(..n).map(|q| (q.ack, q.reply)).collect())
}

fn outcome_bytes(outcome: &WorkflowRunOutcome) -> usize {
    match outcome {
        WorkflowRunOutcome::Suspended => 0,
        WorkflowRunOutcome::Completed(j) | WorkflowRunOutcome::Failed(j) => j.as_str().len(),
    }
}

async fn flush_until_empty(shared: Arc<Shared>, mut batch: Vec<(Acknowledgement, ReplyTo)>) {
    loop {
        let (acks, replies): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
        let results = send_batch(&shared, &acks).await;
        for (reply, result) in replies.into_iter().zip(results) {
            reply.answer(&shared, result);
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

/// [`send_one`] in a span naming the item's execution and token: a flusher runs outside
/// every delivery's span, and each log line about a delivery names it.
async fn send_one_named(shared: &Shared, ack: &Acknowledgement) -> AckResult {
    let span = tracing::error_span!(
        "acknowledge",
        execution_id = %ack.lease.execution_id,
        token = ack.lease.token.get(),
    );
    send_one(shared, ack).instrument(span).await
}

/// The leases of a batch for a log line: `execution@token`, comma separated.
fn leases_text(acks: &[Acknowledgement]) -> String {
    let leases: Vec<String> = acks
        .iter()
        .map(|a| format!("{}@{}", a.lease.execution_id, a.lease.token.get()))
        .collect();
    leases.join(", ")
}

/// One `acknowledge_batch` call (a single item goes through `acknowledge`). An error that
/// certainly applied nothing falls back to one acknowledgement per item, each with retries;
/// `OutcomeUnknown` leaves every lease to expire (a retry could misreport an applied
/// acknowledgement as lost).
async fn send_batch(shared: &Shared, acks: &[Acknowledgement]) -> Vec<AckResult> {
    if let [ack] = acks {
        return vec![send_one_named(shared, ack).await];
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
                leases = %leases_text(acks),
                "acknowledge_batch returned a result count unlike the batch's; the leases will expire"
            );
            vec![None; acks.len()]
        }
        Err(e @ LeaseError::OutcomeUnknown { .. }) => {
            shared.metrics.backend_error();
            tracing::error!(
                error = %e,
                items = acks.len(),
                leases = %leases_text(acks),
                "acknowledge_batch outcome unknown; unapplied leases will expire"
            );
            vec![None; acks.len()]
        }
        Err(e) => {
            shared.metrics.backend_error();
            tracing::warn!(
                error = %e,
                items = acks.len(),
                leases = %leases_text(acks),
                "acknowledge_batch failed; acknowledging one by one"
            );
            let mut results = Vec::with_capacity(acks.len());
            for ack in acks {
                results.push(send_one_named(shared, ack).await);
            }
            results
        }
    }
}
