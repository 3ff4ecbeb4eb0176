//! The dispatcher: the claim loop, graceful shutdown and hard stop (RFC 002
//! "Delivery concurrency").

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::ack_queue::AckQueue;
use crate::call::guarded;
use crate::delivery::SharedBackend;
use crate::growth::{ClaimSize, Growth};
use crate::horizon::ClaimSeen;
use crate::idle::{IdleProbe, IdleWatch, until_idle};
use crate::metrics::{DispatcherMetrics, MetricsSnapshot};
use crate::options::{DEFAULT_BACKSTOP, DispatcherOptions};
use crate::prefetch::{Held, Prefetch};
use crate::run::{SlotGuard, release_unstarted, run_delivery};
use crate::shared::{Detached, Shared, work_waiting};
use crate::worker::Worker;
use lease_core::error::{LeaseError, Result};
use lease_core::execution::{ClaimBatch, ClaimRequest};
use lease_core::time::Timestamp;
use lease_core::wakeup::WakeReceiver;

/// What a graceful shutdown did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Deliveries that ended by themselves within the grace period.
    pub finished: usize,
    /// Deliveries still running at the deadline: their workers were cancelled and their
    /// leases released (unacknowledged).
    pub cancelled: usize,
    /// The dispatcher's counters after the last delivery ended.
    pub metrics: MetricsSnapshot,
}

/// Runs up to `concurrency` deliveries at once on a backend, claiming new executions
/// without waiting for earlier deliveries (RFC 002 "Delivery concurrency"), renewing each
/// live lease, and acknowledging or releasing each delivery by its worker's reply.
///
/// Stop it with [`Dispatcher::shutdown`] (stop claiming, let deliveries finish up to a
/// deadline, then release the rest). Dropping it (or [`Dispatcher::abort`]) cancels every
/// worker at once with no further fenced write, as if its process died: its leases expire.
pub struct Dispatcher {
    shared: Arc<Shared>,
    main: Option<JoinHandle<ShutdownReport>>,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("options", &self.shared.options)
            .field("metrics", &self.shared.metrics.snapshot())
            .finish_non_exhaustive()
    }
}

impl Dispatcher {
    /// Validates `options` and starts claiming on the current tokio runtime.
    ///
    /// Errors: [`LeaseError::InvalidInput`] for bad options or when called outside a tokio
    /// runtime.
    pub fn start(
        backend: SharedBackend,
        worker: impl Worker,
        options: DispatcherOptions,
    ) -> Result<Dispatcher> {
        options.validate()?;
        let handle = tokio::runtime::Handle::try_current().map_err(|_| {
            LeaseError::invalid(
                "runtime",
                "Dispatcher::start must run inside a tokio runtime",
            )
        })?;
        let export = crate::export::Exporter::register(&*backend);
        let shared = Arc::new(Shared {
            backend,
            worker: Arc::new(worker),
            options,
            metrics: Arc::new(DispatcherMetrics::exporting(export)),
            wake: Notify::new(),
            stop_claiming: CancellationToken::new(),
            root: CancellationToken::new(),
            release_cancelled: AtomicBool::new(false),
            killed: AtomicBool::new(false),
            grace: Mutex::new(Duration::ZERO),
            acks: AckQueue::default(),
            horizon: Mutex::default(),
            slot_claimed: AtomicBool::new(false),
            wake_forced: AtomicBool::new(false),
            prefetch: Prefetch::default(),
            prefetch_bound: AtomicUsize::new(options.get_prefetch()),
            detached: Detached::default(),
            idle: IdleWatch::default(),
        });
        if let Some((keep, every)) = options.get_retention() {
            handle.spawn(
                crate::retention::run(shared.clone(), keep, every)
                    .instrument(tracing::info_span!("retention")),
            );
        }
        let main = handle.spawn(claim_loop(shared.clone()).instrument(tracing::info_span!(
            "dispatcher",
            concurrency = options.get_concurrency()
        )));
        Ok(Dispatcher {
            shared,
            main: Some(main),
        })
    }

    /// The live counters (claims, renewals, lost, acknowledgements, releases, in flight).
    pub fn metrics(&self) -> Arc<DispatcherMetrics> {
        self.shared.metrics.clone()
    }

    /// A copy of the counters now.
    pub fn snapshot(&self) -> MetricsSnapshot {
        self.shared.metrics.snapshot()
    }

    /// The options it runs with.
    pub fn options(&self) -> &DispatcherOptions {
        &self.shared.options
    }

    /// Makes the claim loop look for due executions now instead of at its next poll.
    pub fn wake(&self) {
        self.shared.wake_forced.store(true, Ordering::SeqCst);
        self.shared.wake.notify_one();
    }

    /// Completes once this dispatcher is idle: no delivery runs or is held, no
    /// acknowledgement waits in the background, and a claim sent after all of them ended
    /// found nothing claimable at the backend clock. For a program (or a test) that admits
    /// work and waits for it to be done, instead of sleeping: `backend.admit(..).await?;
    /// dispatcher.idle().await;`.
    ///
    /// Work scheduled for later (a `not_before`, a durable sleep, a redelivery delay) does
    /// not count as busy, nor does an execution another dispatcher holds. Each time the
    /// dispatcher falls quiet it makes one claim at once (as [`Dispatcher::wake`] does);
    /// otherwise it waits for the claims the loop makes anyway. It does not sleep or poll
    /// beyond them, and it completes once the dispatcher stops claiming.
    pub async fn idle(&self) {
        until_idle(&self.shared.idle, self).await;
    }

    /// Graceful shutdown: stops claiming, lets running deliveries finish for up to `grace`,
    /// then cancels the rest and releases their leases (unacknowledged). Returns when every
    /// delivery has ended.
    ///
    /// Dropping the returned future before it completes (under a timeout, say) aborts the
    /// dispatcher exactly as dropping it would: every worker is cancelled at once and
    /// nothing more is written, so the remaining leases expire.
    pub async fn shutdown(mut self, grace: Duration) -> ShutdownReport {
        *self.shared.grace.lock().unwrap_or_else(|p| p.into_inner()) = grace;
        self.shared.stop_claiming.cancel();
        self.shared.wake.notify_one();
        let snapshot = self.shared.metrics.snapshot();
        // The handle stays in `self` while awaited: if this future is dropped, `Drop` for
        // the dispatcher still sees it and aborts the drain.
        let report = match self.main.as_mut() {
            Some(main) => main.await.ok(),
            None => None,
        };
        self.main = None;
        report.unwrap_or(ShutdownReport {
            metrics: snapshot,
            ..ShutdownReport::default()
        })
    }

    /// Cancelled once the dispatcher stops claiming (a shutdown began).
    #[cfg(test)]
    pub(crate) fn stopping(&self) -> CancellationToken {
        self.shared.stop_claiming.clone()
    }

    /// Acknowledgements waiting behind the one in flight.
    #[cfg(test)]
    pub(crate) fn queued_acks(&self) -> usize {
        self.shared.acks.queued()
    }

    /// Hard stop, as if the process died: every worker is cancelled at once and makes no
    /// further fenced write; nothing is released or acknowledged, so the leases expire.
    /// Same as dropping the dispatcher.
    pub fn abort(self) {
        drop(self);
    }
}

impl Drop for Dispatcher {
    fn drop(&mut self) {
        if let Some(main) = self.main.take() {
            // Order matters: flag first, so a delivery that sees its cancellation never
            // mistakes it for a shutdown deadline and releases.
            self.shared.killed.store(true, Ordering::SeqCst);
            self.shared.stop_claiming.cancel();
            self.shared.root.cancel();
            // Aborting the claim loop drops its JoinSet, which aborts every delivery task.
            main.abort();
        }
    }
}

async fn claim_loop(shared: Arc<Shared>) -> ShutdownReport {
    let mut deliveries = JoinSet::new();
    let opts = shared.options;
    let wakeups = shared.backend.wakeups();
    let backstop = opts.get_backstop(wakeups.is_some());
    let mut failures = 0u32;
    let mut polled = Instant::now();
    let mut growth = Growth::new(&opts);
    loop {
        // Checked before joining: a delivery that ends once shutdown began is the drain's
        // to count as finished.
        if shared.stop_claiming.is_cancelled() {
            break;
        }
        while deliveries.try_join_next().is_some() {}
        start_held(&shared, &mut deliveries);
        let free = opts
            .get_concurrency()
            .saturating_sub(shared.metrics.in_flight());
        let room = shared
            .prefetch
            .room(&opts, shared.metrics.in_flight(), growth.prefetch());
        if free == 0 && room.take == 0 {
            // Wake-ups received meanwhile wait in the receiver; a freed slot (or a held
            // lease taken) claims; a hold ending releases.
            let hold_end = shared.prefetch.next_hold_end();
            tokio::select! {
                () = shared.wake.notified() => continue,
                () = shared.stop_claiming.cancelled() => break,
                () = sleep_until_some(hold_end) => continue,
            }
        }
        if room.take == 0 && skip_claim_for_freed_slot(&shared) {
            // The acknowledgement that freed the slot claimed already and found nothing.
            if !wait_for_claim(&shared, wakeups.as_ref(), polled + backstop).await {
                break;
            }
            continue;
        }
        let want = (free + room.take).min(growth.batch());
        let got = match claim_once(&shared, &mut deliveries, want).await {
            Some(got) => {
                failures = 0;
                growth.claimed(ClaimSize {
                    want,
                    got,
                    prefetch_bound: room.bound_limited && free + room.take <= growth.batch(),
                    released: shared.metrics.prefetch_released_count(),
                });
                shared
                    .prefetch_bound
                    .store(growth.prefetch(), Ordering::SeqCst);
                got
            }
            None => {
                failures = failures.saturating_add(1);
                0
            }
        };
        if got == want && got > 0 {
            // Everything asked for was due: more may be. Claim again without waiting.
            continue;
        }
        polled = Instant::now();
        let keep_going = if failures > 0 {
            // A failing backend is retried with backoff, never at the pace of wake-ups.
            pause(&shared, error_backoff(failures).min(backstop)).await
        } else {
            wait_for_claim(&shared, wakeups.as_ref(), polled + backstop).await
        };
        if !keep_going {
            break;
        }
    }
    drain(&shared, deliveries).await
}

/// Claims up to `want` leases and takes them (started or held): how many it got, or `None`
/// when the claim failed (counted and logged).
async fn claim_once(
    shared: &Arc<Shared>,
    deliveries: &mut JoinSet<()>,
    want: usize,
) -> Option<usize> {
    let sent = Instant::now();
    let seq = shared.idle.claim_sending();
    match claim(shared, want).await {
        Ok(batch) => {
            let got = batch.claimed.len();
            take_claims(shared, deliveries, batch, (want, seq), sent);
            Some(got)
        }
        Err(e) => {
            shared.metrics.backend_error();
            tracing::warn!(error = %e, "claim_due failed");
            None
        }
    }
}

/// Books one claim's batch of `want` (the idle watch's claim number `seq`, sent at `sent`):
/// the horizon, the metrics and the prefetch flag, then starts each delivery in a free slot
/// and holds the rest (prefetch).
fn take_claims(
    shared: &Arc<Shared>,
    deliveries: &mut JoinSet<()>,
    batch: ClaimBatch,
    (want, seq): (usize, u64),
    sent: Instant,
) {
    let opts = shared.options;
    let got = batch.claimed.len();
    let (now, next) = (batch.now, batch.next_claimable_at);
    shared.lock_horizon().claimed(ClaimSeen {
        now: batch.now,
        next: batch.next_claimable_at,
        sent,
        arrived: Instant::now(),
        short: got < want,
    });
    shared.metrics.claim_call(got);
    shared
        .prefetch
        .set_waiting(work_waiting(batch.now, batch.next_claimable_at, got, want));
    for claimed in batch.claimed {
        if shared.metrics.in_flight() < opts.get_concurrency() {
            let slot = SlotGuard::new(shared.clone());
            deliveries.spawn(run_delivery(shared.clone(), claimed, slot, sent));
        } else {
            shared.metrics.prefetched();
            shared.prefetch.hold(claimed, sent, &opts);
        }
    }
    // After the deliveries count as in flight: an idle waiter sees them busy.
    shared.idle.claimed(seq, now, next, got);
}

/// Starts held leases in free slots, and releases those whose hold ended.
fn start_held(shared: &Arc<Shared>, deliveries: &mut JoinSet<()>) {
    let concurrency = shared.options.get_concurrency();
    loop {
        let now = Instant::now();
        if shared.metrics.in_flight() >= concurrency {
            release_all_unstarted(shared, deliveries, shared.prefetch.take_expired(now));
            return;
        }
        let taken = shared.prefetch.take(now);
        release_all_unstarted(shared, deliveries, taken.expired);
        let Some(held) = taken.next else { return };
        let slot = SlotGuard::new(shared.clone());
        deliveries.spawn(run_delivery(shared.clone(), held.claimed, slot, held.sent));
    }
}

/// Releases held leases that were never started (their hold ended, or shutdown began).
/// Each release counts as detached work until it is answered: the lease is no longer held
/// locally but still live in the backend, and `Dispatcher::idle` must not see quiet then.
fn release_all_unstarted(shared: &Arc<Shared>, deliveries: &mut JoinSet<()>, held: Vec<Held>) {
    for h in held {
        let shared = shared.clone();
        shared.detached.started();
        deliveries.spawn(async move {
            release_unstarted(&shared, &h.claimed).await;
            shared.detached.finished();
            shared.idle.changed();
        });
    }
}

/// Sleeps until `at`, or forever when there is none.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// True when the slot just freed needs no claim: its acknowledgement claimed (and found
/// nothing), no wake-up or `Dispatcher::wake` came since, and the horizon is not due.
fn skip_claim_for_freed_slot(shared: &Shared) -> bool {
    let claimed = shared.slot_claimed.swap(false, Ordering::SeqCst);
    let forced = shared.wake_forced.swap(false, Ordering::SeqCst);
    claimed
        && !forced
        && shared
            .lock_horizon()
            .deadline(Instant::now() + DEFAULT_BACKSTOP)
            > Instant::now()
}

/// Sleeps until the next claim is due: the earliest claimable instant known (from the last
/// claim or a wake-up), the backstop poll, a freed slot or [`Dispatcher::wake`]. `false` when
/// the dispatcher stops claiming.
async fn wait_for_claim(
    shared: &Shared,
    wakeups: Option<&WakeReceiver>,
    backstop: Instant,
) -> bool {
    loop {
        let deadline = shared.lock_horizon().deadline(backstop);
        if deadline <= Instant::now() {
            return true;
        }
        tokio::select! {
            biased;
            () = shared.stop_claiming.cancelled() => return false,
            () = shared.wake.notified() => return true,
            at = next_wakeup(wakeups) => {
                shared.metrics.wakeup();
                shared.lock_horizon().signalled(at, Instant::now());
            }
            () = tokio::time::sleep_until(deadline) => return true,
        }
    }
}

async fn next_wakeup(wakeups: Option<&WakeReceiver>) -> Timestamp {
    match wakeups {
        Some(w) => w.recv().await,
        None => std::future::pending().await,
    }
}

/// Sleeps `d` unless the dispatcher stops claiming first (`false`).
async fn pause(shared: &Shared, d: Duration) -> bool {
    tokio::select! {
        () = tokio::time::sleep(d) => true,
        () = shared.stop_claiming.cancelled() => false,
    }
}

/// Wait after `failures` failed claims in a row: 10 ms doubling, at most 5 s.
fn error_backoff(failures: u32) -> Duration {
    Duration::from_millis(10u64 << failures.saturating_sub(1).min(9)).min(Duration::from_secs(5))
}

/// One claim round trip: `now` is [`Timestamp::MAX`], so the backend claims at its own
/// clock (it uses `min(now, backend clock)`) without a `now()` call first; the records and
/// the next claimable instant come back with the leases.
async fn claim(shared: &Shared, limit: usize) -> Result<ClaimBatch> {
    let request = ClaimRequest {
        now: Timestamp::MAX,
        limit,
        duration: shared.options.get_lease_duration(),
    };
    // A trace of its own: one claim serves many executions, each delivery continues its
    // own admission's trace (docs/decisions/0041-traces-metrics-and-logs.md).
    let span = tracing::info_span!(parent: None, "claim", limit, claimed = tracing::field::Empty);
    let batch = guarded(
        shared,
        "claim_due",
        shared.backend.claim_due_with_horizon(request),
    )
    .instrument(span.clone())
    .await;
    if let Ok(batch) = &batch {
        span.record("claimed", batch.claimed.len());
    }
    batch
}

async fn drain(shared: &Arc<Shared>, mut deliveries: JoinSet<()>) -> ShutdownReport {
    let grace = *shared.grace.lock().unwrap_or_else(|p| p.into_inner());
    let deadline = Instant::now() + grace;
    // Held leases never started: released before the drain counts what runs.
    let unstarted = shared.prefetch.take_all();
    if !unstarted.is_empty() {
        let mut releases = JoinSet::new();
        release_all_unstarted(shared, &mut releases, unstarted);
        while releases.join_next().await.is_some() {}
    }
    let running = deliveries.len();
    tracing::info!(running, ?grace, "shutdown: stopped claiming");
    let mut cancelled = 0;
    loop {
        tokio::select! {
            next = deliveries.join_next() => {
                if next.is_none() {
                    break;
                }
            }
            () = tokio::time::sleep_until(deadline) => {
                cancelled = deliveries.len();
                tracing::info!(cancelled, "shutdown: deadline passed, releasing");
                shared.release_cancelled.store(true, Ordering::SeqCst);
                shared.root.cancel();
                while deliveries.join_next().await.is_some() {}
                break;
            }
        }
    }
    // Acknowledgements still in flight in the background are part of their deliveries.
    shared.detached.settled().await;
    ShutdownReport {
        finished: running - cancelled,
        cancelled,
        metrics: shared.metrics.snapshot(),
    }
}

impl IdleProbe for Dispatcher {
    fn claiming(&self) -> bool {
        self.shared.claiming()
    }

    fn quiet(&self) -> bool {
        let shared = &self.shared;
        shared.metrics.in_flight() == 0 && !shared.prefetch.has_held() && shared.detached.is_empty()
    }

    fn force_claim(&self) {
        self.wake();
    }
}
