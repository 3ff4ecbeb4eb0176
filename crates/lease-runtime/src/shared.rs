//! The state one dispatcher's claim loop and deliveries share ([`Shared`]), on its own: the
//! acknowledgement, call, retention and delivery modules take `&Shared` and the claim loop
//! ([`super::runtime`]) builds it, so none of them imports another's loop.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::ack_queue::AckQueue;
use crate::delivery::SharedBackend;
use crate::horizon::{ClaimSeen, Horizon};
use crate::idle::IdleWatch;
use crate::metrics::DispatcherMetrics;
use crate::options::DispatcherOptions;
use crate::prefetch::Prefetch;
use crate::worker::Worker;
use lease_core::time::Timestamp;

/// State shared by the claim loop and every delivery of one dispatcher.
pub(crate) struct Shared {
    pub(crate) backend: SharedBackend,
    pub(crate) worker: Arc<dyn Worker>,
    pub(crate) options: DispatcherOptions,
    pub(crate) metrics: Arc<DispatcherMetrics>,
    /// Wakes the claim loop: a slot freed, or the user called `wake`.
    pub(crate) wake: Notify,
    /// Stops the claim loop (graceful shutdown or drop).
    pub(super) stop_claiming: CancellationToken,
    /// Parent of every delivery's cancellation token.
    pub(crate) root: CancellationToken,
    /// Set when the shutdown deadline passed: cancelled deliveries are released.
    pub(crate) release_cancelled: AtomicBool,
    /// Set when the dispatcher was dropped or aborted: no further fenced write at all.
    pub(crate) killed: AtomicBool,
    pub(super) grace: Mutex<Duration>,
    /// Acknowledgements waiting for the one in flight (sent as one batch).
    pub(crate) acks: AckQueue,
    /// When the next claim is due (the claim loop's timer; acknowledgements that claimed
    /// update it too).
    pub(super) horizon: Mutex<Horizon>,
    /// A slot freed by a delivery whose acknowledgement already claimed (and found
    /// nothing): the claim loop need not claim for it.
    pub(super) slot_claimed: AtomicBool,
    /// `Dispatcher::wake` was called: claim even if `slot_claimed` says otherwise.
    pub(super) wake_forced: AtomicBool,
    /// Leases claimed beyond the free slots, waiting for one (prefetch).
    pub(crate) prefetch: Prefetch,
    /// The prefetch bound the claim loop uses now (it adapts unless fixed,
    /// [`crate::growth`]); a finished delivery reads it to decide whether to wake
    /// the claim loop.
    pub(crate) prefetch_bound: AtomicUsize,
    /// Acknowledgements sent in the background (their deliveries' slots moved on to a held
    /// lease); the drain waits for them.
    pub(crate) detached: Detached,
    /// What `Dispatcher::idle` waits on.
    pub(crate) idle: IdleWatch,
}

/// A count of background acknowledgements not yet answered, and a signal when it drops.
#[derive(Default)]
pub(crate) struct Detached {
    pending: AtomicUsize,
    done: Notify,
}

impl Detached {
    pub(crate) fn started(&self) {
        self.pending.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn finished(&self) {
        self.pending.fetch_sub(1, Ordering::SeqCst);
        self.done.notify_waiters();
    }

    /// No background acknowledgement waits for its answer.
    pub(crate) fn is_empty(&self) -> bool {
        self.pending.load(Ordering::SeqCst) == 0
    }

    /// Completes once every background acknowledgement was answered.
    pub(super) async fn settled(&self) {
        loop {
            let notified = self.done.notified();
            if self.pending.load(Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    }
}

impl Shared {
    /// The dispatcher still claims new work (not shutting down or dropped).
    pub(crate) fn claiming(&self) -> bool {
        !self.stop_claiming.is_cancelled() && !self.killed.load(Ordering::SeqCst)
    }

    /// An acknowledgement sent at `sent` (the idle watch's claim number `seq`) claimed `got`
    /// executions at backend clock `now`,
    /// seeing `next` as the next claimable instant. Its freed slot needs no claim of the
    /// loop's own when it found nothing and no wake-up came after it was sent.
    pub(crate) fn claimed_by_ack(
        &self,
        now: Option<Timestamp>,
        next: Option<Timestamp>,
        got: usize,
        (sent, seq): (Instant, u64),
    ) {
        let superseded = self.lock_horizon().claimed(ClaimSeen {
            now,
            next,
            sent,
            arrived: Instant::now(),
            short: got == 0,
        });
        if got == 0 && !superseded {
            self.slot_claimed.store(true, Ordering::SeqCst);
        }
        self.prefetch.set_waiting(work_waiting(now, next, got, 1));
        self.idle.claimed(seq, now, next, got);
    }

    /// Completes when the dispatcher stops claiming (shutdown or drop).
    pub(crate) async fn stopped_claiming(&self) {
        self.stop_claiming.cancelled().await;
    }

    pub(super) fn lock_horizon(&self) -> std::sync::MutexGuard<'_, Horizon> {
        self.horizon.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Whether a claim that got `got` of `want` left work waiting (prefetch's condition): its
/// horizon says something else was claimable at its own clock; without a horizon, it got
/// everything it asked for.
pub(super) fn work_waiting(
    now: Option<Timestamp>,
    next: Option<Timestamp>,
    got: usize,
    want: usize,
) -> bool {
    match (now, next) {
        (Some(now), Some(next)) => next <= now,
        (_, None) if now.is_some() => false,
        _ => got == want && got > 0,
    }
}
